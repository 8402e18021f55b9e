// Internal: what the CUDA H² files share (h2_cuda.cu: upload, download, the expansion into a dense
// matrix, checks and dispatch; h2_cuda_gemv.cu: the matvec's kernels; h2_cuda_build.cu: the
// construction from geometry; h2_cuda_dense.cu: the construction from a dense matrix;
// h2_cuda_orthog.cu and h2_cuda_compress.cu: the orthogonalisation and the compression) — the
// workspace carving and the kernel-side entry points. h2_cuda.cu checks the arguments and takes
// the workspace; the entry points trust what was checked.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <string>

#include <cuda_runtime.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/error.hpp"
#include "covflow/linalg/h2.hpp"

namespace covflow::linalg::detail::h2_cuda {

// InvalidArgument naming `op` unless exec is a CUDA Exec (an H2Device lives in device memory).
inline void require_cuda(const Exec& exec, const char* op) {
  if (!exec.is_cuda())
    throw InvalidArgument(std::string(op) + ": exec must be a CUDA Exec (H2Device lives in device memory)");
}

// What may build an H2Device (its friend): make allocates one for `shape` — the integer arrays
// and value arrays sized from the shape's ranks, offsets and pair counts, all unset.
struct DeviceAccess {
  template <class T>
  static H2Device<T> make(Exec& cuda_exec, H2DeviceShape shape);
  template <class T>
  static void set_orthogonal(H2Device<T>& a, bool orthogonal) {
    a.shape_.orthogonal = orthogonal;
  }
};

// An H2Device with `skeleton`'s tree and pair lists (copied from the host, on the Exec's stream:
// the skeleton must live until the stream has passed them) and value arrays sized from its ranks,
// offsets and dense pair count but unset — for code that computes the values on the device. The
// skeleton's value vectors are not read (they may be empty).
template <class T>
H2Device<T> allocate(Exec& cuda_exec, const H2<T>& skeleton);

// A new H2Device with `from`'s tree, pair lists and dense blocks (device-to-device copies on the
// Exec's stream) and leaf bases, transfers and couplings sized for `rank` (offsets recomputed),
// zero — for code that changes the ranks (orthogonalisation, compression) and writes the blocks
// of the nodes that hold points.
template <class T>
H2Device<T> resized(Exec& cuda_exec, const H2Device<T>& from, const std::vector<int>& rank);

// `count` elements of a device array into `host` (resized), queued on `stream`: the caller
// synchronises before reading them.
template <class X>
void to_host(std::vector<X>& host, const X* device, std::size_t count, cudaStream_t stream) {
  host.resize(count);
  if (count > 0)
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(host.data(), device, count * sizeof(X), cudaMemcpyDeviceToHost, stream));
}

// The writable address of a device array of an H2Device being filled by the library.
template <class X>
X* writable(const X* p) {
  return const_cast<X*>(p);
}

// Parts of one block of memory on 256-byte boundaries; with a null base it only counts bytes, so
// that a size query runs the same carving as the call.
class Carve {
 public:
  explicit Carve(std::byte* base) : base_(base) {}
  template <class X>
  X* take(std::int64_t elements) {
    std::byte* at = base_ == nullptr ? nullptr : base_ + bytes_;
    bytes_ += (static_cast<std::size_t>(std::max<std::int64_t>(elements, 0)) * sizeof(X) + 255) / 256 * 256;
    return reinterpret_cast<X*>(at);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  std::byte* base_;
  std::size_t bytes_ = 0;
};

// The matvec's scratch: X gathered into leaf blocks (leaf t's m × nvec at t·m·nvec, rows past the
// leaf's size zero), and x̂, ŷ of every level (node t of level l's k_l × nvec block at
// level[l] + t·k_l·nvec, as the CPU gemv lays them out).
template <class T>
struct GemvScratch {
  T* x_leaves = nullptr;
  T* xhat = nullptr;
  T* yhat = nullptr;
  std::vector<std::int64_t> level;  // L + 2 offsets into xhat and yhat
  std::size_t bytes = 0;

  GemvScratch(const H2DeviceShape& s, std::int64_t nvec, std::byte* base) {
    Carve carve(base);
    level.assign(static_cast<std::size_t>(s.depth) + 2, 0);
    for (int l = 0; l <= s.depth; ++l)
      level[static_cast<std::size_t>(l) + 1] = level[static_cast<std::size_t>(l)] + s.nodes(l) * s.rank[static_cast<std::size_t>(l)] * nvec;
    x_leaves = carve.take<T>(s.nodes(s.depth) * s.leaf_capacity * nvec);
    xhat = carve.take<T>(level.back());
    yhat = carve.take<T>(level.back());
    bytes = carve.bytes();
  }
};

// Called after each phase of gemv has been queued, with the phase's name (h2_gemv_phases records
// an event there).
using PhaseMark = std::function<void(const std::string& phase)>;

// Y = α·A·X + β·Y on context's stream, in the workspace carved as GemvScratch (nvec ≥ 1); `mark`,
// when given, after each phase.
template <class T>
void gemv(CudaContext& context, T alpha, const H2Device<T>& a, Batch<const T> x, T beta, Batch<T> y,
          std::byte* workspace, const PhaseMark* mark = nullptr);

// A batch of H² matrices on one tree and pair lists (H2DensePlan's cells): matrix c's leaf bases,
// transfers, couplings and dense blocks lie c·stride elements after matrix 0's, in arrays laid out
// as one H2Device's. All zero: one matrix.
struct ValueStrides {
  std::int64_t leaf_basis = 0, transfer = 0, coupling = 0, dense = 0;
};

// The bytes of scratch `expand` carves from its workspace for `count` matrices of `shape`.
template <class T>
std::size_t expand_workspace(const H2DeviceShape& shape, std::int64_t count);

// The dense n × n matrices of a batch (h2_expand's kernels, h2_cuda.cu): out.count matrices of
// `shape` with arrays `d` and value strides `stride`, matrix c into out's c-th (out.stride apart),
// one launch per step and level for the whole batch, on context's stream, in `workspace` (at least
// expand_workspace(shape, out.count) bytes). Arguments checked by the caller.
template <class T>
void expand(CudaContext& context, const H2DeviceShape& shape, const H2DeviceArrays<T>& d, const ValueStrides& stride,
            Batch<T> out, std::byte* workspace);

// h2_from_dense_device's construction (h2_cuda_dense.cu) on the Exec's stream; arguments checked.
template <class T>
H2Device<T> from_dense(Exec& cuda_exec, Batch<const T> a, std::span<const double> points, int dim, double tol,
                       const H2Options& options, H2CompressReport* report);

// The orthogonalised copy of `a` (h2_cuda_orthog.cu): a new H2Device with orthonormal bases and
// the ranks of the CPU's h2_orthogonalize. Allocates the result and its scratch (cudaMalloc) and
// synchronises the stream before returning, so `a` may be destroyed at once.
template <class T>
H2Device<T> orthogonalized(Exec& cuda_exec, const H2Device<T>& a);

// h2_compress on the device (h2_cuda_compress.cu): `a` is replaced by the compressed H2Device.
// Allocates, reads back a few structural arrays once and the singular values once per level, and
// synchronises the stream before returning.
template <class T>
H2CompressReport compress(Exec& cuda_exec, H2Device<T>& a, double tol);

}  // namespace covflow::linalg::detail::h2_cuda

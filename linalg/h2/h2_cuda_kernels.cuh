// Internal: the batched pieces the H² device operations share — cuBLAS strided-batched GEMM with
// empty-dimension guards (h2_cuda_gemv.cu, h2_cuda_orthog.cu, h2_cuda_compress.cu), and the
// element-wise kernels and scratch of the construction-time operations (orthogonalisation and
// compression): copying R out of a QR, masking columns, conjugate transposes, the projection of
// the couplings, squared block norms. Every kernel here is one thread per output element,
// grid-strided (memory-bound copies of small blocks: no shared memory, coalesced writes), except
// block_norms_kernel (one thread block per block, a shared-memory tree sum).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../common/cublas_gemm.cuh"
#include "../common/device_scalar.cuh"
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "h2_cuda.cuh"
#include "h2_cuda_launch.cuh"

namespace covflow::linalg::detail::h2_cuda {
namespace {

// Strided-batched C = α·op(A)·op(B) + β·C; nothing when C is empty (callers keep the inner
// dimension positive).
template <class D>
void gemm_strided(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, long long m, long long n, long long k,
                  D alpha, const D* a, long long lda, long long sa, const D* b, long long ldb, long long sb, D beta, D* c,
                  long long ldc, long long sc, long long count) {
  if (count == 0 || m == 0 || n == 0) return;
  COVFLOW_CUBLAS_TRY(gemm_batched(h, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
                                  static_cast<int>(lda), sa, b, static_cast<int>(ldb), sb, beta, c,
                                  static_cast<int>(ldc), sc, static_cast<int>(count)));
}

// The device scratch of one construction-time operation (orthogonalise, compress): separate
// cudaMalloc'd buffers, not the Exec's workspace arena — the batched QR and SVD called in between
// take that arena themselves. Every buffer lives until the pool is destroyed, and the destructor
// first waits for the stream, so no buffer is freed under queued work, on the error path too.
class ScratchPool {
 public:
  explicit ScratchPool(cudaStream_t stream) : stream_(stream) {}
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;
  ~ScratchPool() { COVFLOW_CUDA_TRY_NO_THROW(cudaStreamSynchronize(stream_)); }

  // `count` elements, unset (zeroed when `zero`); a null pointer for none.
  template <class X>
  X* take(long long count, bool zero = false) {
    if (count <= 0) return nullptr;
    buffers_.emplace_back(static_cast<std::size_t>(count) * sizeof(X));
    if (zero) buffers_.back().fill_bytes(0, stream_);
    return reinterpret_cast<X*>(buffers_.back().data());
  }

 private:
  cudaStream_t stream_;
  std::vector<cuda::DeviceBuffer<std::byte>> buffers_;
};

// R out of geqrf's output: r_b (rows × cols, packed) (i, j) = a_b(i, j) for i ≤ j and i below
// row_limit[b] (all rows when null), else 0.
template <class D>
__global__ void upper_kernel(const D* a, long long lda, long long sa, int rows, int cols, const int* row_limit, D* r,
                             long long count) {
  const long long per = static_cast<long long>(rows) * cols;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < count * per;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long b = e / per, w = e % per, i = w % rows, j = w / rows;
    const int limit = row_limit != nullptr ? row_limit[b] : rows;
    r[e] = i <= j && i < limit ? a[b * sa + i + j * lda] : zero_of<D>();
  }
}
template <class D>
void upper(const D* a, long long lda, long long sa, int rows, int cols, const int* row_limit, D* r, long long count,
           cudaStream_t stream) {
  if (count * rows * cols == 0) return;
  upper_kernel<D><<<blocks_for(count * rows * cols), kThreads, 0, stream>>>(a, lda, sa, rows, cols, row_limit, r, count);
  COVFLOW_CHECK_LAUNCH();
}

// out_b (rows × cols, packed) = in_b's first columns: (i, j) = in_b(i, j) for j below
// col_limit[b], else 0 (in_b at in + b·si, ld ldi).
template <class D>
__global__ void keep_columns_kernel(const D* in, long long ldi, long long si, int rows, int cols, const int* col_limit,
                                    D* out, long long count) {
  const long long per = static_cast<long long>(rows) * cols;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < count * per;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long b = e / per, w = e % per, i = w % rows, j = w / rows;
    out[e] = j < col_limit[b] ? in[b * si + i + j * ldi] : zero_of<D>();
  }
}
template <class D>
void keep_columns(const D* in, long long ldi, long long si, int rows, int cols, const int* col_limit, D* out,
                  long long count, cudaStream_t stream) {
  if (count * rows * cols == 0) return;
  keep_columns_kernel<D><<<blocks_for(count * rows * cols), kThreads, 0, stream>>>(in, ldi, si, rows, cols, col_limit,
                                                                                  out, count);
  COVFLOW_CHECK_LAUNCH();
}

// out_b (rows × cols, packed) = in_bᴴ (in_b cols × rows at in + b·si, ld ldi).
template <class D>
__global__ void adjoint_kernel(const D* in, long long ldi, long long si, int rows, int cols, D* out, long long count) {
  const long long per = static_cast<long long>(rows) * cols;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < count * per;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long b = e / per, w = e % per, i = w % rows, j = w / rows;
    out[e] = conj_of(in[b * si + j + i * ldi]);
  }
}
template <class D>
void adjoint(const D* in, long long ldi, long long si, int rows, int cols, D* out, long long count, cudaStream_t stream) {
  if (count * rows * cols == 0) return;
  adjoint_kernel<D><<<blocks_for(count * rows * cols), kThreads, 0, stream>>>(in, ldi, si, rows, cols, out, count);
  COVFLOW_CHECK_LAUNCH();
}

// New transfers out of the parents' orthonormal factors: child c = 2t + side gets the kc × kp
// block E_c(i, j) = Q_t(offset + i, j) (Q_t at q + t·sq, ld ldq). With child_useful (the
// orthogonalisation): offset = side ? useful[2t] : 0, and only i < useful[c], j < parent_useful[t]
// are copied (the rest 0); without (the compression): offset = side·kc, every element copied.
template <class D>
__global__ void split_transfers_kernel(const D* q, long long ldq, long long sq, int kc, int kp, const int* child_useful,
                                       const int* parent_useful, D* transfers, long long children) {
  const long long per = static_cast<long long>(kc) * kp;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < children * per;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long c = e / per, w = e % per, i = w % kc, j = w / kc, t = c / 2;
    const int side = static_cast<int>(c % 2);
    long long rows = kc, offset = side * static_cast<long long>(kc), columns = kp;
    if (child_useful != nullptr) {
      rows = child_useful[c];
      offset = side == 1 ? child_useful[c - 1] : 0;
      columns = parent_useful[t];
    }
    transfers[e] = i < rows && j < columns ? q[t * sq + offset + i + j * ldq] : zero_of<D>();
  }
}
template <class D>
void split_transfers(const D* q, long long ldq, long long sq, int kc, int kp, const int* child_useful,
                     const int* parent_useful, D* transfers, long long children, cudaStream_t stream) {
  if (children * kc * kp == 0) return;
  split_transfers_kernel<D><<<blocks_for(children * kc * kp), kThreads, 0, stream>>>(q, ldq, sq, kc, kp, child_useful,
                                                                                    parent_useful, transfers, children);
  COVFLOW_CHECK_LAUNCH();
}

// dst[p·block + e] = src[index[p]·block + e] for p < count: a node's factor per pair.
template <class D>
__global__ void gather_blocks_kernel(const int* index, const D* src, long long block, D* dst, long long count) {
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < count * block;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long p = e / block, w = e % block;
    dst[e] = src[index[p] * block + w];
  }
}

// weight·‖block_b‖_F² in double for each of `count` blocks of `elements` (contiguous), weight 2
// (the block stands for itself and its mirror) unless row/col are given and row[b] = col[b] (a
// diagonal block, stored whole). One thread block per block; a shared-memory tree sum.
template <class D>
__global__ void __launch_bounds__(kThreads) block_norms_kernel(const D* blocks, long long elements, const int* row,
                                                               const int* col, double* out) {
  __shared__ double partial[kThreads];
  const long long b = blockIdx.x;
  double sum = 0;
  for (long long e = threadIdx.x; e < elements; e += kThreads) {
    const D v = blocks[b * elements + e];
    const double re = static_cast<double>(real_part(v)), im = static_cast<double>(imag_part(v));
    sum += re * re + im * im;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[b] = (row != nullptr && row[b] == col[b] ? 1.0 : 2.0) * partial[0];
}
template <class D>
void block_norms(const D* blocks, long long elements, const int* row, const int* col, double* out, long long count,
                 cudaStream_t stream) {
  if (count == 0) return;
  if (elements == 0) {
    COVFLOW_CUDA_TRY(cudaMemsetAsync(out, 0, static_cast<std::size_t>(count) * sizeof(double), stream));
    return;
  }
  block_norms_kernel<D><<<static_cast<unsigned>(count), kThreads, 0, stream>>>(blocks, elements, row, col, out);
  COVFLOW_CHECK_LAUNCH();
}

// The couplings of `from` projected into `out` (same pairs, out's ranks): S'_ts = F_t·S_ts·F_sᴴ,
// F_t node t's kn_l × k_l factor at factors[l] + t·kn_l·k_l (k_l from's rank, kn_l out's). Per
// level: the row and column factors gathered per pair, then two strided-batched GEMMs over the
// level's pairs (F_t·S, then ·F_sᴴ). Scratch from `pool`.
template <class T>
void project_couplings(CudaContext& context, const H2Device<T>& from, const std::vector<const T*>& factors,
                       const H2Device<T>& out, ScratchPool& pool) {
  using D = device_t<T>;
  const H2DeviceShape& s = from.shape();
  const H2DeviceShape& o = out.shape();
  const cudaStream_t stream = context.stream();
  const D one = from_real<D>(sreal_t<D>(1)), zero = zero_of<D>();
  for (int l = 0; l <= s.depth; ++l) {
    const auto i = static_cast<std::size_t>(l);
    const long long ko = s.rank[i], kn = o.rank[i], count = s.coupling_count(l);
    if (count == 0 || kn == 0) continue;  // kn ≤ ko: nothing to write
    const int first = s.coupling_level_ptr[i];
    D* rows = dev(pool.take<T>(count * kn * ko));
    D* cols = dev(pool.take<T>(count * kn * ko));
    D* tmp = dev(pool.take<T>(count * kn * ko));
    const D* factor = dev(factors[i]);
    gather_blocks_kernel<D><<<blocks_for(count * kn * ko), kThreads, 0, stream>>>(from.arrays().couplings.row + first, factor,
                                                                               kn * ko, rows, count);
    COVFLOW_CHECK_LAUNCH();
    gather_blocks_kernel<D><<<blocks_for(count * kn * ko), kThreads, 0, stream>>>(from.arrays().couplings.col + first, factor,
                                                                               kn * ko, cols, count);
    COVFLOW_CHECK_LAUNCH();
    gemm_strided<D>(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, kn, ko, ko, one, rows, kn, kn * ko,
                    dev(from.arrays().coupling) + s.coupling_offset[i], ko, ko * ko, zero, tmp, kn, kn * ko, count);
    gemm_strided<D>(context.cublas(), CUBLAS_OP_N, adjoint_op<D>(), kn, kn, ko, one, tmp, kn, kn * ko, cols, kn, kn * ko,
                    zero, dev(writable(out.arrays().coupling)) + o.coupling_offset[i], kn, kn * kn, count);
  }
}

// Bytes h2_bytes counts for the H² an H2Device holds (dense + leaf bases + transfers + couplings).
template <class T>
std::size_t bytes_of(const H2DeviceShape& s) {
  const auto m = static_cast<std::size_t>(s.leaf_capacity);
  return (static_cast<std::size_t>(s.dense_count()) * m * m +
          static_cast<std::size_t>(s.nodes(s.depth)) * m * static_cast<std::size_t>(s.rank.back()) +
          static_cast<std::size_t>(s.transfer_offset.back()) + static_cast<std::size_t>(s.coupling_offset.back())) *
         sizeof(T);
}

}  // namespace
}  // namespace covflow::linalg::detail::h2_cuda

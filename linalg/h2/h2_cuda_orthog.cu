// h2_orthogonalize on the CUDA backend: the CPU's algorithm (h2_compress.cpp) with every per-node
// step of a level done for the whole level at once — H2Opus's horthog (Boukaram, Turkiyyah &
// Keyes, "Hierarchical matrix operations on GPUs: matrix-vector multiplication and compression",
// ACM TOMS 45(1), 2019, the orthogonalisation section):
//   leaves     one batched geqrf over the 2^L leaf bases (m × k_L each), R_t copied out, one batched
//              ungqr for Q_t: the new leaf bases
//   upward     per level, R_c·E_c for all children (one strided-batched GEMM), stacked per parent
//              on the children's useful rows, one batched geqrf + ungqr: the parents' R and the
//              new transfers
//   couplings  S_ts ← R_t·S_ts·R_sᴴ, two strided-batched GEMMs per level over its pairs
// Useful rows. As on the CPU, a node's QR runs on the rows that are not zero by construction — a
// leaf's own points, the children's useful ranks — so that the useful columns come out orthonormal
// and the rest exactly zero. The batched QR takes one shape per level, so those rows are moved to
// the top and the rest of the level's shape is zero rows at the bottom: Householder QR then gives
// the same R and the same leading columns of Q as on the compact matrix (the reflectors of the
// useful columns are zero on the padding rows; a column past the useful ones is zero below its
// diagonal and gets τ = 0, i.e. a unit vector in Q, which is dropped: columns past
// min(useful rows, k) are written as zero). The useful counts are computed on the device, level by
// level (nothing is read back).
// Allocation: the result (one cudaMalloc, from `resized`) and the scratch (ScratchPool: the leaf
// bases' copy, the stacked matrices, R, τ) — a construction-time operation, not for the frame
// loop. The batched QR take the Exec's workspace arena for their own scratch. One stream
// synchronisation, at the end, before the scratch is freed.
#include <cuda_runtime.h>

#include <algorithm>
#include <span>

#include "covflow/linalg/qr.hpp"
#include "h2_cuda_kernels.cuh"

namespace covflow::linalg::detail::h2_cuda {
namespace {

// useful[t] = min(points of leaf t, k): the useful rows (and columns) of a leaf basis.
__global__ void leaf_useful_kernel(const int* leaf_begin, const int* leaf_end, int k, int* useful, long long leaves) {
  for (long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; t < leaves;
       t += static_cast<long long>(gridDim.x) * blockDim.x)
    useful[t] = min(leaf_end[t] - leaf_begin[t], k);
}

// Parent t's stacked matrix (2kc × cols, packed): rows [0, r1) of R_{2t}·E_{2t}, then rows [0, r2)
// of R_{2t+1}·E_{2t+1}, then zeros (r_c = child_useful[c]); products holds child c's kc × cols
// product at c·kc·cols. Element (0, 0) of each parent also writes its useful count
// min(r1 + r2, cap).
template <class D>
__global__ void stack_children_kernel(const D* products, int kc, int cols, const int* child_useful, int cap,
                                      D* stacked, int* parent_useful, long long parents) {
  const long long rows = 2LL * kc, per = rows * cols;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < parents * per;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long t = e / per, w = e % per, i = w % rows, j = w / rows;
    const int r1 = child_useful[2 * t], r2 = child_useful[2 * t + 1];
    D v = zero_of<D>();
    if (i < r1) v = products[(2 * t) * kc * cols + i + j * kc];
    else if (i < r1 + r2) v = products[(2 * t + 1) * kc * cols + (i - r1) + j * kc];
    stacked[e] = v;
    if (w == 0) parent_useful[t] = min(r1 + r2, cap);
  }
}

}  // namespace

template <class T>
H2Device<T> orthogonalized(Exec& cuda_exec, const H2Device<T>& a) {
  using D = device_t<T>;
  CudaContext& context = cuda_exec.cuda_context();
  context.make_current();
  const cudaStream_t stream = context.stream();
  const cublasHandle_t handle = context.cublas();
  const H2DeviceShape& s = a.shape();
  const H2DeviceArrays<T>& d = a.arrays();
  const int depth = s.depth;
  const long long m = s.leaf_capacity, leaves = s.nodes(depth);
  const D one = from_real<D>(sreal_t<D>(1)), zero = zero_of<D>();
  auto k = [&](int l) { return static_cast<long long>(s.rank[static_cast<std::size_t>(l)]); };

  // The new ranks, as the CPU: k'_L = min(m, k_L), k'_{l−1} = min(2k'_l, k_{l−1}).
  std::vector<int> kn(s.rank.size());
  kn[static_cast<std::size_t>(depth)] = static_cast<int>(std::min(m, k(depth)));
  for (int l = depth; l >= 1; --l)
    kn[static_cast<std::size_t>(l) - 1] = static_cast<int>(std::min<long long>(2LL * kn[static_cast<std::size_t>(l)], k(l - 1)));
  auto knew = [&](int l) { return static_cast<long long>(kn[static_cast<std::size_t>(l)]); };

  H2Device<T> out = resized(cuda_exec, a, kn);
  const H2DeviceShape& o = out.shape();
  const H2DeviceArrays<T>& od = out.arrays();
  ScratchPool pool(stream);  // after `out`: its destructor waits for the stream first

  // Per level: node t's R factor (k'_l × k_l, packed) and its useful rank (heap order).
  std::vector<const T*> r(static_cast<std::size_t>(depth) + 1, nullptr);
  int* useful = pool.take<int>((2LL << depth) - 1, true);
  auto useful_at = [&](int l) { return useful + H2Tree::heap(l, 0); };

  if (knew(depth) > 0) {
    const long long kl = k(depth), kr = knew(depth);  // kr = min(m, kl)
    T* work = pool.take<T>(leaves * m * kl);
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(work, d.leaf_basis, static_cast<std::size_t>(leaves * m * kl) * sizeof(T),
                                     cudaMemcpyDeviceToDevice, stream));
    T* tau = pool.take<T>(leaves * kr);
    int* info = pool.take<int>(leaves);
    const std::int64_t leaf0 = H2Tree::heap(depth, 0);
    leaf_useful_kernel<<<blocks_for(leaves), kThreads, 0, stream>>>(d.node_begin + leaf0, d.node_end + leaf0,
                                                                    static_cast<int>(kl), useful_at(depth), leaves);
    COVFLOW_CHECK_LAUNCH();
    geqrf<T>(cuda_exec, Batch<T>{work, m, kl, m, m * kl, leaves}, std::span<T>(tau, static_cast<std::size_t>(leaves * kr)),
             std::span<int>(info, static_cast<std::size_t>(leaves)));
    T* rl = pool.take<T>(leaves * kr * kl);
    upper(dev(work), m, m * kl, static_cast<int>(kr), static_cast<int>(kl), useful_at(depth), dev(rl), leaves, stream);
    r[static_cast<std::size_t>(depth)] = rl;
    ungqr<T>(cuda_exec, Batch<T>{work, m, kr, m, m * kl, leaves}, std::span<const T>(tau, static_cast<std::size_t>(leaves * kr)));
    keep_columns(dev(work), m, m * kl, static_cast<int>(m), static_cast<int>(kr), useful_at(depth),
                 dev(writable(od.leaf_basis)), leaves, stream);
  }

  // Upward: the stacked [R_{2t}·E_{2t}; R_{2t+1}·E_{2t+1}] on the children's useful rows.
  for (int l = depth; l >= 1; --l) {
    const long long kc = knew(l), kp = knew(l - 1), kco = k(l), kpo = k(l - 1);
    if (kp == 0) continue;  // kp > 0 implies kc > 0 and kpo > 0
    const long long children = s.nodes(l), parents = s.nodes(l - 1), rows = 2 * kc;  // kp = min(rows, kpo)
    T* products = pool.take<T>(children * kc * kpo);
    gemm_strided<D>(handle, CUBLAS_OP_N, CUBLAS_OP_N, kc, kpo, kco, one, dev(r[static_cast<std::size_t>(l)]), kc, kc * kco,
                    dev(d.transfer) + s.transfer_offset[static_cast<std::size_t>(l)], kco, kco * kpo, zero, dev(products),
                    kc, kc * kpo, children);
    T* stacked = pool.take<T>(parents * rows * kpo);
    stack_children_kernel<D><<<blocks_for(parents * rows * kpo), kThreads, 0, stream>>>(
        dev(products), static_cast<int>(kc), static_cast<int>(kpo), useful_at(l), static_cast<int>(kpo), dev(stacked),
        useful_at(l - 1), parents);
    COVFLOW_CHECK_LAUNCH();
    T* tau = pool.take<T>(parents * kp);
    int* info = pool.take<int>(parents);
    geqrf<T>(cuda_exec, Batch<T>{stacked, rows, kpo, rows, rows * kpo, parents},
             std::span<T>(tau, static_cast<std::size_t>(parents * kp)), std::span<int>(info, static_cast<std::size_t>(parents)));
    T* rp = pool.take<T>(parents * kp * kpo);
    upper(dev(stacked), rows, rows * kpo, static_cast<int>(kp), static_cast<int>(kpo), useful_at(l - 1), dev(rp), parents,
          stream);
    r[static_cast<std::size_t>(l) - 1] = rp;
    ungqr<T>(cuda_exec, Batch<T>{stacked, rows, kp, rows, rows * kpo, parents},
             std::span<const T>(tau, static_cast<std::size_t>(parents * kp)));
    split_transfers(dev(stacked), rows, rows * kpo, static_cast<int>(kc), static_cast<int>(kp), useful_at(l),
                    useful_at(l - 1), dev(writable(od.transfer)) + o.transfer_offset[static_cast<std::size_t>(l)], children,
                    stream);
  }

  project_couplings<T>(context, a, r, out, pool);
  DeviceAccess::set_orthogonal(out, true);
  return out;  // pool's destructor synchronises the stream before its buffers go
}

#define COVFLOW_H2_CUDA_ORTHOG(T) template H2Device<T> orthogonalized<T>(Exec&, const H2Device<T>&);
COVFLOW_H2_CUDA_ORTHOG(f32)
COVFLOW_H2_CUDA_ORTHOG(f64)
COVFLOW_H2_CUDA_ORTHOG(cf32)
COVFLOW_H2_CUDA_ORTHOG(cf64)
#undef COVFLOW_H2_CUDA_ORTHOG

}  // namespace covflow::linalg::detail::h2_cuda

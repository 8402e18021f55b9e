// h2_compress on the CUDA backend: the CPU's coupling-weighted truncation (h2_compress.cpp) with
// every per-node step of a level done for the whole level at once — H2Opus's hcompress
// (Boukaram, Turkiyyah & Keyes, "Hierarchical matrix operations on GPUs: matrix-vector
// multiplication and compression", ACM TOMS 45(1), 2019, the compression section):
//   norm       ‖A_H‖_F² from the dense blocks and couplings (block_norms_kernel), summed on the host
//   downsweep  per level, Z_parent·E_tᴴ for all nodes (two strided-batched GEMMs, even and odd
//              children), each node's stack [Z_parent·E_tᴴ; S_ts1ᴴ; …; S_ut1; …] over its whole
//              block row (stack_weights_kernel), one batched geqrf: Z_t is its R
//   upsweep    per level, the weighted bases (leaves Z_tᴴ; inner nodes TE_t·Z_tᴴ, TE_t =
//              [T_c1·E_c1; T_c2·E_c2] by two strided-batched GEMMs), one batched gesvj; the σ read
//              back and the node and level ranks chosen on the host exactly as the CPU does; the
//              projections T_t = Q̃_tᴴ·(TE_t or I) and the new leaf bases by strided-batched GEMMs
//   result     a new H2Device for the new ranks: leaf bases, transfers (Q̃ split per child) and the
//              couplings projected, S ← T_t·S_ts·T_sᴴ
// Shapes. The batched QR and SVD take one shape per level: each node's stack is its rows (the
// CPU's, in the CPU's order) followed by zero rows up to the level's tallest stack, which changes
// neither R nor the left singular vectors; Z_t keeps z_t = min(rows_t, k_l) rows as on the CPU,
// and each node's SVD counts the CPU's min(rows, z_t) singular values (the others are zero: W_t's
// columns past z_t are). Columns of Q̃_t past a node's own rank are written as zero, as the CPU
// leaves them.
// Host reads: once, the node ranges, the couplings' row_ptr/col_ptr and the blocks' norms (τ and
// the stack heights come from them); once per level, the σ and the SVDs' info. Allocation: the
// result and the scratch (ScratchPool) by cudaMalloc; the batched QR and SVD take the Exec's
// workspace arena. A construction-time operation, not for the frame loop.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include "covflow/linalg/error.hpp"
#include "covflow/linalg/qr.hpp"
#include "covflow/linalg/svd.hpp"
#include "h2_cuda_kernels.cuh"

namespace covflow::linalg::detail::h2_cuda {
namespace {

// One level's weight stacks as stack_weights_kernel builds them.
template <class D>
struct WeightStack {
  int k = 0;                        // k_l
  long long height = 0;             // rows of every node's stack (the level's tallest)
  const D* from_parent = nullptr;   // node t's Z_parent·E_tᴴ (kp × k, ld kp) at t·kp·k; null: none
  int kp = 0;
  const int* parent_rows = nullptr; // z of the level above (the rows of Z_parent that are not zero)
  const int* row_ptr = nullptr;     // the level's block-row index (H2Pairs::ptr_offset applied)
  const int* col_ptr = nullptr;
  const int* col_pairs = nullptr;
  const D* couplings = nullptr;     // pair q's k × k block at (q − first)·k²
  int first = 0;
  D* out = nullptr;                 // node t's height × k stack at t·height·k, ld height
};

// Node t's stack, one thread per element (grid-stride): rows [0, fp) of Z_parent·E_tᴴ (fp =
// parent_rows[t/2]), then S_tsᴴ for each stored pair (t, s) of its block row, then S_ut for each
// stored pair (u, t) of its block column, k rows each, then zeros — the CPU's stack, row for row.
template <class D>
__global__ void stack_weights_kernel(WeightStack<D> p, long long nodes) {
  const long long k = p.k, per = p.height * k;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < nodes * per;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long t = e / per, w = e % per, i = w % p.height, j = w / p.height;
    const long long fp = p.from_parent != nullptr ? p.parent_rows[t / 2] : 0;
    D v = zero_of<D>();
    if (i < fp) {
      v = p.from_parent[t * p.kp * k + i + j * p.kp];
    } else {
      const long long b = (i - fp) / k, r = (i - fp) % k;
      const int row_count = p.row_ptr[t + 1] - p.row_ptr[t], col_count = p.col_ptr[t + 1] - p.col_ptr[t];
      if (b < row_count) {
        const D* s = p.couplings + (p.row_ptr[t] + b - p.first) * k * k;
        v = conj_of(s[j + r * k]);
      } else if (b < row_count + col_count) {
        const D* s = p.couplings + (p.col_pairs[p.col_ptr[t] + b - row_count] - p.first) * k * k;
        v = s[r + j * k];
      }
    }
    p.out[e] = v;
  }
}

template <class X>
X* copy_to_device(ScratchPool& pool, const std::vector<X>& host, cudaStream_t stream) {
  X* out = pool.take<X>(static_cast<long long>(host.size()));
  if (!host.empty())
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(out, host.data(), host.size() * sizeof(X), cudaMemcpyHostToDevice, stream));
  return out;
}

}  // namespace

template <class T>
H2CompressReport compress(Exec& cuda_exec, H2Device<T>& a, double tol) {
  using D = device_t<T>;
  using R = real_t<T>;
  CudaContext& context = cuda_exec.cuda_context();
  context.make_current();
  const cudaStream_t stream = context.stream();
  const cublasHandle_t handle = context.cublas();
  const D one = from_real<D>(sreal_t<D>(1)), zero = zero_of<D>();

  H2CompressReport report;
  report.tolerance = tol;
  report.ranks_before = a.shape().rank;
  report.bytes_before = bytes_of<T>(a.shape());
  H2Device<T> orthogonal_copy;
  if (!a.shape().orthogonal) orthogonal_copy = orthogonalized(cuda_exec, a);
  const H2Device<T>& b = orthogonal_copy.empty() ? a : orthogonal_copy;

  const H2DeviceShape& s = b.shape();
  const H2DeviceArrays<T>& d = b.arrays();
  const int depth = s.depth;
  const long long m = s.leaf_capacity, leaves = s.nodes(depth);
  auto k = [&](int l) { return static_cast<long long>(s.rank[static_cast<std::size_t>(l)]); };
  const auto heap_nodes = static_cast<std::size_t>((2LL << depth) - 1);

  // Host arrays that are copied to the device live as long as the scratch (declared before it).
  std::vector<int> node_begin, node_end, row_ptr, col_ptr, weight_rows(heap_nodes, 0);
  std::vector<std::vector<int>> kept_columns(static_cast<std::size_t>(depth) + 1);
  H2Device<T> out;
  ScratchPool pool(stream);  // destroyed first: waits for the stream before anything above is freed

  // Read back once: the tree's node ranges, the couplings' block-row index and the blocks' norms.
  const long long dense_count = s.dense_count(), coupling_count = s.coupling_level_ptr.back();
  double* norms = pool.take<double>(dense_count + coupling_count);
  block_norms(dev(d.dense), m * m, d.dense_pairs.row, d.dense_pairs.col, norms, dense_count, stream);
  for (int l = 0; l <= depth; ++l)
    block_norms(dev(d.coupling) + s.coupling_offset[static_cast<std::size_t>(l)], k(l) * k(l), nullptr, nullptr,
                norms + dense_count + s.coupling_level_ptr[static_cast<std::size_t>(l)], s.coupling_count(l), stream);
  std::vector<double> host_norms;
  to_host(host_norms, norms, static_cast<std::size_t>(dense_count + coupling_count), stream);
  to_host(node_begin, d.node_begin, heap_nodes, stream);
  to_host(node_end, d.node_end, heap_nodes, stream);
  const auto ptrs = static_cast<std::size_t>(H2Pairs::ptr_offset(depth + 1));
  to_host(row_ptr, d.couplings.row_ptr, ptrs, stream);
  to_host(col_ptr, d.couplings.col_ptr, ptrs, stream);
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));

  // ‖A_H‖_F² (the mirror blocks counted by block_norms' weights) and τ, as the CPU.
  double norm2_total = 0;
  for (double v : host_norms) norm2_total += v;
  report.norm = std::sqrt(norm2_total);
  long long truncated_nodes = 0;
  for (int l = 0; l <= depth; ++l)
    if (k(l) > 0)
      for (long long t = 0; t < s.nodes(l); ++t) {
        const auto h = static_cast<std::size_t>(H2Tree::heap(l, t));
        truncated_nodes += node_end[h] > node_begin[h] ? 1 : 0;
      }
  const double tau2 = truncated_nodes > 0 ? tol * tol * norm2_total / (2.0 * static_cast<double>(truncated_nodes)) : 0.0;
  report.node_threshold = std::sqrt(tau2);

  // The weights' shapes: node t's stack has rows_t = fp + pairs·k_l rows (fp the rows of its
  // parent's Z), its Z keeps z_t = min(rows_t, k_l); the level's stacks are as tall as its tallest.
  std::vector<long long> height(static_cast<std::size_t>(depth) + 1, 0);
  for (int l = 0; l <= depth; ++l) {
    const long long kl = k(l);
    if (kl == 0) continue;
    const std::int64_t base = H2Pairs::ptr_offset(l);
    for (long long t = 0; t < s.nodes(l); ++t) {
      const long long fp = l > 0 && k(l - 1) > 0 ? weight_rows[static_cast<std::size_t>(H2Tree::heap(l - 1, t / 2))] : 0;
      const long long pairs = (row_ptr[static_cast<std::size_t>(base + t + 1)] - row_ptr[static_cast<std::size_t>(base + t)]) +
                              (col_ptr[static_cast<std::size_t>(base + t + 1)] - col_ptr[static_cast<std::size_t>(base + t)]);
      const long long rows = fp + pairs * kl;
      weight_rows[static_cast<std::size_t>(H2Tree::heap(l, t))] = static_cast<int>(std::min(rows, kl));
      height[static_cast<std::size_t>(l)] = std::max(height[static_cast<std::size_t>(l)], rows);
    }
  }
  const int* weight_rows_device = copy_to_device(pool, weight_rows, stream);
  auto z_at = [&](int l) { return weight_rows_device + H2Tree::heap(l, 0); };

  // Downsweep: Z_t (k_l × k_l, rows past z_t zero) of every node, level by level from the root.
  std::vector<T*> weight(static_cast<std::size_t>(depth) + 1, nullptr);
  for (int l = 0; l <= depth; ++l) {
    const long long kl = k(l), nodes = s.nodes(l), rows = height[static_cast<std::size_t>(l)];
    if (kl == 0) continue;
    weight[static_cast<std::size_t>(l)] = pool.take<T>(nodes * kl * kl, true);
    if (rows == 0) continue;
    WeightStack<D> p;
    p.k = static_cast<int>(kl);
    p.height = rows;
    if (l > 0 && k(l - 1) > 0) {
      const long long kp = k(l - 1);
      T* from_parent = pool.take<T>(nodes * kp * kl);
      for (int c = 0; c < 2; ++c)
        gemm_strided<D>(handle, CUBLAS_OP_N, adjoint_op<D>(), kp, kl, kp, one, dev(weight[static_cast<std::size_t>(l) - 1]),
                        kp, kp * kp, dev(d.transfer) + s.transfer_offset[static_cast<std::size_t>(l)] + c * kl * kp, kl,
                        2 * kl * kp, zero, dev(from_parent) + c * kp * kl, kp, 2 * kp * kl, nodes / 2);
      p.from_parent = dev(from_parent);
      p.kp = static_cast<int>(kp);
      p.parent_rows = z_at(l - 1);
    }
    const std::int64_t base = H2Pairs::ptr_offset(l);
    p.row_ptr = d.couplings.row_ptr + base;
    p.col_ptr = d.couplings.col_ptr + base;
    p.col_pairs = d.couplings.col_pairs;
    p.couplings = dev(d.coupling) + s.coupling_offset[static_cast<std::size_t>(l)];
    p.first = s.coupling_level_ptr[static_cast<std::size_t>(l)];
    T* stacked = pool.take<T>(nodes * rows * kl);
    p.out = dev(stacked);
    stack_weights_kernel<D><<<blocks_for(nodes * rows * kl), kThreads, 0, stream>>>(p, nodes);
    COVFLOW_CHECK_LAUNCH();
    const long long reflectors = std::min(rows, kl);
    T* tau = pool.take<T>(nodes * reflectors);
    int* info = pool.take<int>(nodes);
    geqrf<T>(cuda_exec, Batch<T>{stacked, rows, kl, rows, rows * kl, nodes},
             std::span<T>(tau, static_cast<std::size_t>(nodes * reflectors)), std::span<int>(info, static_cast<std::size_t>(nodes)));
    upper(dev(stacked), rows, rows * kl, static_cast<int>(kl), static_cast<int>(kl), z_at(l),
          dev(weight[static_cast<std::size_t>(l)]), nodes, stream);
  }

  // Upsweep: each node's weighted basis W_t, its SVD, the node's rank (the fewest leading σ whose
  // tail Σσ² ≤ τ²), the level's rank (the most any node needs), then the projections T_t
  // (kn_l × k_l) and the kept left singular vectors Q̃_t (rows_w × kn_l).
  std::vector<int> kn(static_cast<std::size_t>(depth) + 1, 0);
  std::vector<double> dropped(static_cast<std::size_t>(depth) + 1, 0.0);
  std::vector<const T*> projection(static_cast<std::size_t>(depth) + 1, nullptr);
  std::vector<const T*> kept(static_cast<std::size_t>(depth) + 1, nullptr);
  std::vector<long long> kept_rows(static_cast<std::size_t>(depth) + 1, 0);
  T* new_leaves = nullptr;
  std::vector<R> sigma_host;
  std::vector<SvdInfo> info_host;
  for (int l = depth; l >= 0; --l) {
    const auto li = static_cast<std::size_t>(l);
    const long long kl = k(l), nodes = s.nodes(l);
    const long long rw = l == depth ? kl : 2LL * kn[li + 1];
    kept_rows[li] = rw;
    if (kl == 0 || rw == 0) continue;  // no node has a σ: rank 0 (the CPU's empty SVDs)
    const long long ks = std::min(rw, kl);
    T* w = pool.take<T>(nodes * rw * kl);
    T* te = nullptr;
    if (l == depth) {
      adjoint(dev(weight[li]), kl, kl * kl, static_cast<int>(kl), static_cast<int>(kl), dev(w), nodes, stream);
    } else {
      const long long kc = kn[li + 1], kco = k(l + 1);
      te = pool.take<T>(nodes * rw * kl);
      for (int c = 0; c < 2; ++c)
        gemm_strided<D>(handle, CUBLAS_OP_N, CUBLAS_OP_N, kc, kl, kco, one, dev(projection[li + 1]) + c * kc * kco, kc,
                        2 * kc * kco, dev(d.transfer) + s.transfer_offset[li + 1] + c * kco * kl, kco, 2 * kco * kl, zero,
                        dev(te) + c * kc, rw, rw * kl, nodes);
      gemm_strided<D>(handle, CUBLAS_OP_N, adjoint_op<D>(), rw, kl, kl, one, dev(te), rw, rw * kl, dev(weight[li]), kl,
                      kl * kl, zero, dev(w), rw, rw * kl, nodes);
    }
    R* sigma = pool.take<R>(nodes * ks);
    T* u = pool.take<T>(nodes * rw * ks);
    SvdInfo* svd_info = pool.take<SvdInfo>(nodes);
    gesvj<T>(cuda_exec, Batch<T>{w, rw, kl, rw, rw * kl, nodes}, std::span<R>(sigma, static_cast<std::size_t>(nodes * ks)),
             Batch<T>{u, rw, ks, rw, rw * ks, nodes}, Batch<T>{}, std::span<SvdInfo>(svd_info, static_cast<std::size_t>(nodes)),
             SvdOptions{true, false, 0});
    to_host(sigma_host, sigma, static_cast<std::size_t>(nodes * ks), stream);
    to_host(info_host, svd_info, static_cast<std::size_t>(nodes), stream);
    COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));

    std::vector<int> counts(static_cast<std::size_t>(nodes));
    int level_rank = 0;
    for (long long t = 0; t < nodes; ++t) {
      const SvdInfo& result = info_host[static_cast<std::size_t>(t)];
      if (result.status != 0)
        throw Error("h2_compress: the SVD of node " + std::to_string(t) + " of level " + std::to_string(l) +
                    (result.status == status::non_finite_input ? " met a NaN or an Inf" : " did not converge") +
                    " (status " + std::to_string(result.status) + ")");
      const int count = static_cast<int>(std::min<long long>(rw, weight_rows[static_cast<std::size_t>(H2Tree::heap(l, t))]));
      counts[static_cast<std::size_t>(t)] = count;
      const R* sg = sigma_host.data() + t * ks;
      double tail = 0;
      int r = count;
      while (r > 0 && tail + static_cast<double>(sg[r - 1]) * sg[r - 1] <= tau2) {
        tail += static_cast<double>(sg[r - 1]) * sg[r - 1];
        --r;
      }
      level_rank = std::max(level_rank, r);
    }
    kn[li] = level_rank;
    const long long kr = level_rank;
    for (long long t = 0; t < nodes; ++t)
      for (long long j = kr; j < counts[static_cast<std::size_t>(t)]; ++j)
        dropped[li] += static_cast<double>(sigma_host[static_cast<std::size_t>(t * ks + j)]) * sigma_host[static_cast<std::size_t>(t * ks + j)];
    if (kr == 0) continue;

    std::vector<int>& columns = kept_columns[li];
    columns.resize(static_cast<std::size_t>(nodes));
    for (long long t = 0; t < nodes; ++t)
      columns[static_cast<std::size_t>(t)] = static_cast<int>(std::min<long long>(counts[static_cast<std::size_t>(t)], kr));
    const int* columns_device = copy_to_device(pool, columns, stream);
    T* q = pool.take<T>(nodes * rw * kr);
    keep_columns(dev(u), rw, rw * ks, static_cast<int>(rw), static_cast<int>(kr), columns_device, dev(q), nodes, stream);
    kept[li] = q;
    T* tl = pool.take<T>(nodes * kr * kl);
    if (l == depth) {
      // T_t = Q̃_tᴴ, and the new leaf basis U_t·Q̃_t (m × kr; rows past the leaf's size stay zero).
      adjoint(dev(q), rw, rw * kr, static_cast<int>(kr), static_cast<int>(kl), dev(tl), nodes, stream);
      new_leaves = pool.take<T>(leaves * m * kr);
      gemm_strided<D>(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, kr, kl, one, dev(d.leaf_basis), m, m * kl, dev(q), rw, rw * kr,
                      zero, dev(new_leaves), m, m * kr, leaves);
    } else {
      // T_t = Q̃_tᴴ·TE_t.
      gemm_strided<D>(handle, adjoint_op<D>(), CUBLAS_OP_N, kr, kl, rw, one, dev(q), rw, rw * kr, dev(te), rw, rw * kl, zero,
                      dev(tl), kr, kr * kl, nodes);
    }
    projection[li] = tl;
  }

  // The result: leaf bases, transfers (Q̃ of the parent split per child), projected couplings.
  out = resized(cuda_exec, b, kn);
  const H2DeviceShape& o = out.shape();
  const H2DeviceArrays<T>& od = out.arrays();
  if (kn[static_cast<std::size_t>(depth)] > 0)
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(writable(od.leaf_basis), new_leaves,
                                     static_cast<std::size_t>(leaves * m * kn[static_cast<std::size_t>(depth)]) * sizeof(T),
                                     cudaMemcpyDeviceToDevice, stream));
  for (int l = 1; l <= depth; ++l) {
    const auto li = static_cast<std::size_t>(l);
    const long long kc = kn[li], kp = kn[li - 1];
    if (kc == 0 || kp == 0) continue;
    // Q̃ of level l − 1 has kept_rows[l − 1] = 2·kc rows: child c's rows at c·kc.
    split_transfers(dev(kept[li - 1]), kept_rows[li - 1], kept_rows[li - 1] * kp, static_cast<int>(kc), static_cast<int>(kp),
                    nullptr, nullptr, dev(writable(od.transfer)) + o.transfer_offset[li], s.nodes(l), stream);
  }
  project_couplings<T>(context, b, projection, out, pool);
  DeviceAccess::set_orthogonal(out, true);
  // The old allocation (a's, or the orthogonalised copy) is read by the work above: wait for it
  // before `a` gives it up.
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));
  a = std::move(out);

  double dropped_total = 0;
  for (double v : dropped) dropped_total += v;
  report.error_bound = norm2_total > 0 ? std::sqrt(2 * dropped_total / norm2_total) : 0.0;
  report.ranks_after = a.shape().rank;
  report.bytes_after = bytes_of<T>(a.shape());
  return report;
}

#define COVFLOW_H2_CUDA_COMPRESS(T) template H2CompressReport compress<T>(Exec&, H2Device<T>&, double);
COVFLOW_H2_CUDA_COMPRESS(f32)
COVFLOW_H2_CUDA_COMPRESS(f64)
COVFLOW_H2_CUDA_COMPRESS(cf32)
COVFLOW_H2_CUDA_COMPRESS(cf64)
#undef COVFLOW_H2_CUDA_COMPRESS

}  // namespace covflow::linalg::detail::h2_cuda

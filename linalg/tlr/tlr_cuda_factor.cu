// tlr_potrf and tlr_potrs on the CUDA backend, step for step as the CPU backend runs them.
//
// potrf is right-looking by tile columns. Step k, batched over the matrices:
//   1. D_kk = L_kk·L_kkᴴ: linalg's potrf on copies of the diagonal tiles (the ragged tile's identity
//      padding factors to itself); a matrix whose pivot fails gets not_positive_definite and its
//      global column, and from then on is frozen: every later kernel reads its status on the device
//      and leaves it as it is (the copies are written back only for matrices not frozen before);
//   2. the panel, L_ik = U_ik·(L_kk⁻¹·V_ik)ᴴ: one batched triangular solve on the V slabs (a frozen
//      matrix solves with the identity instead), and D_ii −= U_ik·(V_ikᴴ·V_ik)·U_ikᴴ as three batched
//      GEMMs (a frozen matrix subtracts a zero product);
//   3. the trailing low-rank tiles, A_ij −= L_ik·L_jkᴴ for i > j > k, as more columns of A_ij's
//      factors, [U_ij | −U_ik] and [V_ij | U_jk·(V_ikᴴ·V_jk)ᴴ], recompressed as LLL recompresses
//      (Charara, Keyes, Ltaief, "Tile Low-Rank GEMM Using Batched Operations on GPUs", Euro-Par
//      2018, §5; tlr_cuda_recompress.cuh) to the tolerance relative to the input's ‖A‖_F. A tile
//      whose update has a zero rank is left as it is, as on the CPU.
// potrs is tile forward and backward substitution on a zero-padded copy of B, for all right-hand
// sides at once: per tile row one batched GEMM forms Wⱼ = Qⱼᴴ·B_j for every tile of the row, one
// GEMM subtracts the row's factors (contiguous slabs, or gathered ones for the backward pass) times
// the stacked W, one batched triangular solve finishes the block. Only matrices whose info status
// is ok or max_rank_reached are copied back, decided on the device.
#include <cuda_runtime.h>

#include "covflow/linalg/solve.hpp"
#include "tlr_cuda_common.cuh"
#include "tlr_cuda_recompress.cuh"

namespace covflow::linalg::detail::tlr_cuda {
namespace {

// Pairs (i, j), i > j ≥ 0, numbered p = i·(i − 1)/2 + j.
__host__ __device__ inline void lower_pair(long long p, int& i, int& j) {
  int t = static_cast<int>((1.0 + sqrt(1.0 + 8.0 * double(p))) / 2);
  while (static_cast<long long>(t) * (t - 1) / 2 > p) --t;
  while (static_cast<long long>(t + 1) * t / 2 <= p) ++t;
  i = t;
  j = static_cast<int>(p - static_cast<long long>(t) * (t - 1) / 2);
}

template <class T>
struct PotrfParts {
  using D = dev_t<T>;
  Recompress<T> rc;          // a job per trailing tile of step 0 and matrix (the most of any step)
  D* w = nullptr;            // jobs × (r × r): V_ikᴴ·V_jk
  D* gram = nullptr;         // count·(nt − 1) × (r × r): V_ikᴴ·V_ik
  D* h = nullptr;            // count·(nt − 1) × (b × r): U_ik·gram
  D* dk = nullptr;           // count × (b × b): the diagonal tiles being factored
  D* identity = nullptr;     // b × b
  D* zeros = nullptr;        // b × r
  int* potrf_info = nullptr;  // count
  int* status = nullptr;     // count
  int* column = nullptr;     // count
  double* norm2 = nullptr;   // count: the input's ‖A‖_F²
  double* slab_norm2 = nullptr;  // count·slots
  PointerSet<D> panel, g1, g2, g3, pw, py;
  TruncationSums sums;
  std::size_t bytes = 0;

  PotrfParts(const Geometry& g, std::byte* base) {
    Carve carve(base);
    const long long below = g.nt > 0 ? g.nt - 1 : 0;
    const long long jobs = g.count * below * (below > 0 ? below - 1 : 0) / 2;
    rc = Recompress<T>(carve, g.b, g.r, 2 * g.r, jobs);
    w = carve.take<D>(jobs * g.r * g.r);
    gram = carve.take<D>(g.count * below * g.r * g.r);
    h = carve.take<D>(g.count * below * g.slab_elements());
    dk = carve.take<D>(g.count * g.tile_elements());
    identity = carve.take<D>(g.tile_elements());
    zeros = carve.take<D>(g.slab_elements());
    potrf_info = carve.take<int>(g.count);
    status = carve.take<int>(g.count);
    column = carve.take<int>(g.count);
    norm2 = carve.take<double>(g.count);
    slab_norm2 = carve.take<double>(g.count * g.slots);
    panel = PointerSet<D>(carve, g.count * below);
    g1 = PointerSet<D>(carve, g.count * below);
    g2 = PointerSet<D>(carve, g.count * below);
    g3 = PointerSet<D>(carve, g.count * below);
    pw = PointerSet<D>(carve, jobs);
    py = PointerSet<D>(carve, jobs);
    sums.dropped2 = carve.take<double>(g.count * g.slots);
    sums.capped = carve.take<int>(g.count * g.slots);
    sums.failed = carve.take<int>(g.count * g.slots);
    bytes = carve.bytes();
  }
};

// A block per slab: ‖U·Vᴴ‖_F² = Σ_xy Re((UᴴU)_xy·(VᴴV)_yx) over the tile's rank.
template <class D>
__global__ void __launch_bounds__(kThreads) slab_norm_kernel(Geometry g, const D* u, const D* v, const int* rank,
                                                             double* slab_norm2) {
  __shared__ double scratch[kThreads / 32];
  const long long slab = blockIdx.x, se = g.slab_elements();
  const int k = rank[slab];
  const D* us = u + slab * se;
  const D* vs = v + slab * se;
  double sum = 0;
  for (int e = threadIdx.x; e < k * k; e += blockDim.x) {
    const int x = e % k, y = e / k;
    D gu = zero_of<D>(), gv = zero_of<D>();
    for (int row = 0; row < g.b; ++row) {
      gu = fma_conj(gu, us[row + static_cast<long long>(x) * g.b], us[row + static_cast<long long>(y) * g.b]);
      gv = fma_conj(gv, vs[row + static_cast<long long>(y) * g.b], vs[row + static_cast<long long>(x) * g.b]);
    }
    sum += double(real_part(gu * gv));
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) slab_norm2[slab] = sum;
}

// A block per matrix: the input checked (the diagonal tiles' lower triangles), the diagonal's
// imaginary parts zeroed as ?potrf takes them, ‖A‖_F², the status and the sums cleared.
template <class D>
__global__ void __launch_bounds__(kThreads)
    potrf_init_kernel(Geometry g, D* diag, const D* u, const D* v, const int* rank, const double* slab_norm2,
                      double* norm2, int* status, int* column, TruncationSums sums) {
  __shared__ double scratch[kThreads / 32];
  const long long c = blockIdx.x, te = g.tile_elements();
  const bool good = block_finite(g, diag, u, v, rank, c, true);
  double sum = 0;
  for (long long e = threadIdx.x; e < g.nt * te; e += blockDim.x) {
    const int i = static_cast<int>(e / te), row = static_cast<int>(e % te % g.b), col = static_cast<int>(e % te / g.b);
    if (row >= g.rows(i) || col >= g.rows(i) || row < col) continue;
    D& d = diag[c * g.nt * te + e];
    if (row == col && good) d = from_real<D>(real_part(d));
    sum += (row == col ? 1.0 : 2.0) * double(abs2(d));
  }
  for (long long s = threadIdx.x; s < g.slots; s += blockDim.x) {
    sum += 2 * slab_norm2[c * g.slots + s];
    sums.dropped2[c * g.slots + s] = 0;
    sums.capped[c * g.slots + s] = 0;
    sums.failed[c * g.slots + s] = 0;
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) {
    norm2[c] = sum;
    status[c] = good ? tlr_status::ok : tlr_status::non_finite_input;
    column[c] = 0;
  }
}

template <class D>
__global__ void constants_kernel(int b, int r, D* identity, D* zeros) {
  COVFLOW_TLR_GRID_STRIDE(e, static_cast<long long>(b) * b) {
    identity[e] = from_real<D>(sreal_t<D>(e % b == e / b ? 1 : 0));
    if (e < static_cast<long long>(b) * r) zeros[e] = zero_of<D>();
  }
}

// to_work: dk ← D_kk for every matrix; else D_kk ← dk for the matrices not frozen.
template <class D>
__global__ void diagonal_copy_kernel(Geometry g, int k, bool to_work, const int* status, D* diag, D* dk) {
  const long long te = g.tile_elements();
  COVFLOW_TLR_GRID_STRIDE(e, g.count * te) {
    const long long c = e / te;
    D* tile = diag + (c * g.nt + k) * te + e % te;
    if (to_work) dk[e] = *tile;
    else if (status[c] == tlr_status::ok) *tile = dk[e];
  }
}

template <class D>
__global__ void pivot_kernel(Geometry g, int k, const int* potrf_info, int* status, int* column) {
  COVFLOW_TLR_GRID_STRIDE(c, g.count) {
    const int result = potrf_info[c];
    if (status[c] != tlr_status::ok || result == 0) continue;
    status[c] = tlr_status::not_positive_definite;
    column[c] = k * g.b + (result > 0 ? result : 1);
  }
}

// Step k's panel and diagonal-update pointers, a thread per (matrix, i > k).
template <class D>
__global__ void panel_kernel(Geometry g, int k, const int* status, D* diag, const D* u, D* v, const D* identity,
                             const D* zeros, D* gram, D* h, PointerSet<D> panel, PointerSet<D> g1, PointerSet<D> g2,
                             PointerSet<D> g3) {
  const int below = g.nt - 1 - k;
  COVFLOW_TLR_GRID_STRIDE(e, g.count * below) {
    const long long c = e / below;
    const int i = k + 1 + static_cast<int>(e % below);
    const bool live = status[c] == tlr_status::ok;
    const long long slab = c * g.slots + g.slot(i, k);
    D* vs = v + slab * g.slab_elements();
    const D* us = u + slab * g.slab_elements();
    D* ge = gram + e * g.r * g.r;
    D* he = h + e * g.slab_elements();
    panel.set(e, live ? diag + (c * g.nt + k) * g.tile_elements() : identity, vs, nullptr);
    g1.set(e, vs, vs, ge);
    g2.set(e, us, ge, he);
    g3.set(e, live ? he : zeros, us, diag + (c * g.nt + i) * g.tile_elements());
  }
}

// Step k's trailing jobs, a thread per (matrix, pair): the job list and the pointers of
// W = V_ikᴴ·V_jk and Y = U_jk·Wᴴ.
template <class D>
__global__ void trailing_kernel(Geometry g, int k, long long pairs, const int* status, const D* u, const D* v,
                                const int* rank, D* w, D* sv, int width, long long* job_slab, int* active,
                                PointerSet<D> pw, PointerSet<D> py) {
  COVFLOW_TLR_GRID_STRIDE(job, g.count * pairs) {
    const long long c = job / pairs;
    int bi, bj;
    lower_pair(job % pairs, bi, bj);
    const int i = k + 1 + bi, j = k + 1 + bj;
    const long long slab_ik = c * g.slots + g.slot(i, k), slab_jk = c * g.slots + g.slot(j, k);
    job_slab[job] = c * g.slots + g.slot(i, j);
    active[job] = status[c] == tlr_status::ok && rank[slab_ik] > 0 && rank[slab_jk] > 0 ? 1 : 0;
    D* wj = w + job * g.r * g.r;
    pw.set(job, v + slab_ik * g.slab_elements(), v + slab_jk * g.slab_elements(), wj);
    py.set(job, u + slab_jk * g.slab_elements(), wj, sv + job * g.b * width + static_cast<long long>(g.r) * g.b);
  }
}

// The stacks: [U_ij | −U_ik] and [V_ij | (filled by the GEMM)].
template <class D>
__global__ void potrf_stack_kernel(Geometry g, int k, long long pairs, const D* u, const D* v, int width, D* su,
                                   D* sv) {
  const long long per = static_cast<long long>(g.b) * width;
  COVFLOW_TLR_GRID_STRIDE(e, g.count * pairs * per) {
    const long long job = e / per, c = job / pairs;
    const int row = static_cast<int>(e % per % g.b), col = static_cast<int>(e % per / g.b);
    int bi, bj;
    lower_pair(job % pairs, bi, bj);
    const int i = k + 1 + bi, j = k + 1 + bj;
    const long long se = g.slab_elements();
    if (col < g.r) {
      const long long at = (c * g.slots + g.slot(i, j)) * se + row + static_cast<long long>(col) * g.b;
      su[e] = u[at];
      sv[e] = v[at];
    } else {
      su[e] = -u[(c * g.slots + g.slot(i, k)) * se + row + static_cast<long long>(col - g.r) * g.b];
    }
  }
}

__global__ void __launch_bounds__(kThreads) potrf_info_kernel(Geometry g, const int* status, const int* column,
                                                              const double* norm2, TruncationSums sums, TlrInfo* info) {
  __shared__ double scratch[kThreads / 32];
  const long long c = blockIdx.x;
  double dropped = 0, capped = 0, failed = 0;
  for (long long s = threadIdx.x; s < g.slots; s += blockDim.x) {
    dropped += sums.dropped2[c * g.slots + s];
    capped += sums.capped[c * g.slots + s];
    failed += sums.failed[c * g.slots + s];
  }
  dropped = block_sum(dropped, scratch);
  capped = block_sum(capped, scratch);
  failed = block_sum(failed, scratch);
  if (threadIdx.x != 0) return;
  TlrInfo out{};
  out.status = status[c];
  out.column = column[c];
  if (out.status == tlr_status::non_finite_input) {
    out.error = out.norm = double(NAN);
  } else {
    out.capped_tiles = static_cast<std::int32_t>(capped);
    out.error = sqrt(2 * dropped);
    out.norm = sqrt(norm2[c]);
    if (out.status == tlr_status::ok)
      out.status = failed > 0 ? tlr_status::svd_failed : capped > 0 ? tlr_status::max_rank_reached : tlr_status::ok;
  }
  info[c] = out;
}

__global__ void non_finite_flags_kernel(long long count, const int* status, int* flags) {
  COVFLOW_TLR_GRID_STRIDE(c, count) flags[c] = status[c] == tlr_status::non_finite_input ? 1 : 0;
}

}  // namespace

template <class T>
std::size_t potrf_workspace(const Exec&, const TlrShape& shape) {
  return PotrfParts<T>(geometry(shape), nullptr).bytes;
}

template <class T>
void potrf(Exec& exec, Tlr<T> a, std::span<TlrInfo> info, std::span<std::byte> workspace, const TlrOptions& options) {
  using D = dev_t<T>;
  using R = real_t<T>;
  const Geometry g = geometry(a.shape);
  if (g.count == 0 || g.n == 0) return;
  CudaContext& context = exec.cuda_context();
  context.make_current();
  const cudaStream_t stream = context.stream();
  const cublasHandle_t handle = context.cublas();
  const PotrfParts<T> w(g, workspace.data());
  D* diag = dev(a.diag);
  D* u = dev(a.u);
  D* v = dev(a.v);
  const D one = from_real<D>(R(1)), zero = from_real<D>(R(0)), minus = from_real<D>(R(-1));
  const cublasOperation_t adj = adjoint_op<D>();
  const unsigned matrices = static_cast<unsigned>(g.count);
  const int bt = g.b, r = g.r;

  if (g.slots > 0) {
    slab_norm_kernel<D><<<static_cast<unsigned>(g.count * g.slots), kThreads, 0, stream>>>(g, u, v, a.rank,
                                                                                           w.slab_norm2);
    COVFLOW_CHECK_LAUNCH();
  }
  potrf_init_kernel<D><<<matrices, kThreads, 0, stream>>>(g, diag, u, v, a.rank, w.slab_norm2, w.norm2, w.status,
                                                          w.column, w.sums);
  COVFLOW_CHECK_LAUNCH();
  constants_kernel<D><<<blocks_for(g.tile_elements()), kThreads, 0, stream>>>(bt, r, w.identity, w.zeros);
  COVFLOW_CHECK_LAUNCH();
  const TruncationRule rule{w.norm2, options.tolerance * options.tolerance, 2.0, options.scope == TlrScope::tile};

  for (int k = 0; k < g.nt; ++k) {
    // D_kk = L_kk·L_kkᴴ.
    diagonal_copy_kernel<D><<<blocks_for(g.count * g.tile_elements()), kThreads, 0, stream>>>(g, k, true, w.status,
                                                                                              diag, w.dk);
    COVFLOW_CHECK_LAUNCH();
    linalg::potrf<T>(exec, Uplo::lower, Batch<T>{reinterpret_cast<T*>(w.dk), bt, bt, bt, g.tile_elements(), g.count},
                     {w.potrf_info, static_cast<std::size_t>(g.count)});
    diagonal_copy_kernel<D><<<blocks_for(g.count * g.tile_elements()), kThreads, 0, stream>>>(g, k, false, w.status,
                                                                                              diag, w.dk);
    COVFLOW_CHECK_LAUNCH();
    pivot_kernel<D><<<blocks_for(g.count), kThreads, 0, stream>>>(g, k, w.potrf_info, w.status, w.column);
    COVFLOW_CHECK_LAUNCH();
    const long long below = g.nt - 1 - k;
    if (below == 0) break;
    // Panel: V_ik ← L_kk⁻¹·V_ik, D_ii −= U_ik·(V_ikᴴ·V_ik)·U_ikᴴ.
    PointerSet<D> panel = w.panel, g1 = w.g1, g2 = w.g2, g3 = w.g3;
    panel.count = g1.count = g2.count = g3.count = g.count * below;
    panel_kernel<D><<<blocks_for(g.count * below), kThreads, 0, stream>>>(g, k, w.status, diag, u, v, w.identity,
                                                                          w.zeros, w.gram, w.h, panel, g1, g2, g3);
    COVFLOW_CHECK_LAUNCH();
    trsm<D>(handle, CUBLAS_OP_N, bt, r, panel, bt, bt);
    gemm<D>(handle, adj, CUBLAS_OP_N, r, r, bt, one, g1, bt, bt, zero, r);
    gemm<D>(handle, CUBLAS_OP_N, CUBLAS_OP_N, bt, r, r, one, g2, bt, r, zero, bt);
    gemm<D>(handle, CUBLAS_OP_N, adj, bt, bt, r, minus, g3, bt, bt, one, bt);
    // Trailing low-rank tiles: A_ij −= L_ik·L_jkᴴ, recompressed.
    const long long pairs = below * (below - 1) / 2, jobs = g.count * pairs;
    if (jobs == 0) continue;
    PointerSet<D> pw = w.pw, py = w.py;
    pw.count = py.count = jobs;
    trailing_kernel<D><<<blocks_for(jobs), kThreads, 0, stream>>>(g, k, pairs, w.status, u, v, a.rank, w.w, w.rc.sv,
                                                                  w.rc.width, w.rc.job_slab, w.rc.active, pw, py);
    COVFLOW_CHECK_LAUNCH();
    potrf_stack_kernel<D><<<blocks_for(jobs * bt * w.rc.width), kThreads, 0, stream>>>(g, k, pairs, u, v, w.rc.width,
                                                                                       w.rc.su, w.rc.sv);
    COVFLOW_CHECK_LAUNCH();
    gemm<D>(handle, adj, CUBLAS_OP_N, r, r, bt, one, pw, bt, bt, zero, r);
    gemm<D>(handle, CUBLAS_OP_N, adj, bt, r, r, one, py, bt, r, zero, bt);
    recompress_factor<T>(exec, w.rc, jobs);
    recompress_truncate<T>(exec, w.rc, jobs, g, rule, w.sums, u, v, a.rank);
  }

  potrf_info_kernel<<<matrices, kThreads, 0, stream>>>(g, w.status, w.column, w.norm2, w.sums, info.data());
  COVFLOW_CHECK_LAUNCH();
  non_finite_flags_kernel<<<blocks_for(g.count), kThreads, 0, stream>>>(g.count, w.status, w.potrf_info);
  COVFLOW_CHECK_LAUNCH();
  fill_nan_kernel<D><<<blocks_for(g.count * (g.nt * g.tile_elements() + g.slots * (2 * g.slab_elements() + 1))),
                       kThreads, 0, stream>>>(g, w.potrf_info, diag, u, v, a.rank);
  COVFLOW_CHECK_LAUNCH();
}

// ---- potrs ---------------------------------------------------------------------------------------------

namespace {

template <class T>
struct PotrsParts {
  using D = dev_t<T>;
  D* x = nullptr;     // count × (nt·b × nrhs): B padded with zero rows
  D* w = nullptr;     // count × (nt·r × nrhs): the stacked Qᴴ·B_j of one tile row
  D* vcol = nullptr;  // count × (b × nt·r): the gathered V of one tile column
  PointerSet<D> pw, row, diagonal;
  std::size_t bytes = 0;

  PotrsParts(const Geometry& g, long long nrhs, std::byte* base) {
    Carve carve(base);
    x = carve.take<D>(g.count * g.padded() * nrhs);
    w = carve.take<D>(g.count * g.nt * g.r * nrhs);
    vcol = carve.take<D>(g.count * g.slab_elements() * g.nt);
    pw = PointerSet<D>(carve, g.count * std::max(g.nt - 1, 0));
    row = PointerSet<D>(carve, g.count);
    diagonal = PointerSet<D>(carve, g.count);
    bytes = carve.bytes();
  }
};

// in: x ← B padded; else B ← x for the matrices whose factorization is usable.
template <class D>
__global__ void potrs_copy_kernel(Geometry g, long long nrhs, bool in, const TlrInfo* info, D* b, long long ld,
                                  long long stride, D* x) {
  const long long np = g.padded();
  COVFLOW_TLR_GRID_STRIDE(e, g.count * np * nrhs) {
    const long long c = e / (np * nrhs), row = e % (np * nrhs) % np, col = e % (np * nrhs) / np;
    if (in) {
      x[e] = row < g.n ? b[c * stride + row + col * ld] : zero_of<D>();
    } else if (row < g.n) {
      const std::int32_t status = info[c].status;
      if (status == tlr_status::ok || status == tlr_status::max_rank_reached) b[c * stride + row + col * ld] = x[e];
    }
  }
}

// Tile row i's pointers. Forward: W_j = V_ijᴴ·x_j (j < i), x_i −= [U_i0 … U_i,i−1]·W (contiguous
// slabs). Backward: W_j = U_jiᴴ·x_j (j > i), x_i −= [V_(i+1)i … V_(nt−1)i]·W (gathered into vcol).
template <class D>
__global__ void potrs_pointers_kernel(Geometry g, int i, bool forward, int nrhs, const D* diag, const D* u,
                                      const D* v, D* x, D* w, D* vcol, PointerSet<D> pw, PointerSet<D> row,
                                      PointerSet<D> diagonal) {
  const int others = forward ? i : g.nt - 1 - i;
  const long long np = g.padded(), ldw = static_cast<long long>(g.nt) * g.r, se = g.slab_elements();
  COVFLOW_TLR_GRID_STRIDE(e, g.count * (others + 1)) {
    const long long c = e / (others + 1);
    const int l = static_cast<int>(e % (others + 1));
    D* xc = x + c * np * nrhs;
    D* wc = w + c * ldw * nrhs;
    if (l == others) {
      const D* factors = forward ? u + (c * g.slots + g.slot(i, 0)) * se : vcol + c * se * g.nt;
      row.set(c, factors, wc, xc + static_cast<long long>(i) * g.b);
      diagonal.set(c, diag + (c * g.nt + i) * g.tile_elements(), xc + static_cast<long long>(i) * g.b, nullptr);
    } else {
      const int j = forward ? l : i + 1 + l;
      const long long slab = c * g.slots + (forward ? g.slot(i, j) : g.slot(j, i));
      pw.set(c * others + l, (forward ? v : u) + slab * se, xc + static_cast<long long>(j) * g.b,
             wc + static_cast<long long>(l) * g.r);
    }
  }
}

template <class D>
__global__ void gather_column_kernel(Geometry g, int i, const D* v, D* vcol) {
  const int others = g.nt - 1 - i;
  const long long se = g.slab_elements();
  COVFLOW_TLR_GRID_STRIDE(e, g.count * others * se) {
    const long long c = e / (others * se), l = e % (others * se) / se;
    const int j = i + 1 + static_cast<int>(l);
    vcol[c * se * g.nt + l * se + e % se] = v[(c * g.slots + g.slot(j, i)) * se + e % se];
  }
}

}  // namespace

template <class T>
std::size_t potrs_workspace(const Exec&, const TlrShape& shape, std::int64_t nrhs) {
  return PotrsParts<T>(geometry(shape), nrhs, nullptr).bytes;
}

template <class T>
void potrs(Exec& exec, Tlr<const T> l, Batch<T> b, std::span<const TlrInfo> info, std::span<std::byte> workspace) {
  using D = dev_t<T>;
  using R = real_t<T>;
  const Geometry g = geometry(l.shape);
  if (g.count == 0 || g.n == 0 || b.cols == 0) return;
  CudaContext& context = exec.cuda_context();
  context.make_current();
  const cudaStream_t stream = context.stream();
  const cublasHandle_t handle = context.cublas();
  const PotrsParts<T> w(g, b.cols, workspace.data());
  const int nrhs = static_cast<int>(b.cols), bt = g.b, r = g.r, np = static_cast<int>(g.padded()),
            ldw = g.nt * g.r;
  const D one = from_real<D>(R(1)), zero = from_real<D>(R(0)), minus = from_real<D>(R(-1));
  const cublasOperation_t adj = adjoint_op<D>();
  const D* diag = dev(l.diag);
  const D* u = dev(l.u);
  const D* v = dev(l.v);
  const long long elements = g.count * g.padded() * nrhs;

  potrs_copy_kernel<D><<<blocks_for(elements), kThreads, 0, stream>>>(g, nrhs, true, info.data(), dev(b.data), b.ld,
                                                                      b.stride, w.x);
  COVFLOW_CHECK_LAUNCH();
  for (int pass = 0; pass < 2; ++pass) {
    const bool forward = pass == 0;
    for (int step = 0; step < g.nt; ++step) {
      const int i = forward ? step : g.nt - 1 - step;
      const int others = forward ? i : g.nt - 1 - i;
      if (!forward && others > 0) {
        gather_column_kernel<D><<<blocks_for(g.count * others * g.slab_elements()), kThreads, 0, stream>>>(g, i, v,
                                                                                                         w.vcol);
        COVFLOW_CHECK_LAUNCH();
      }
      PointerSet<D> pw = w.pw;
      pw.count = g.count * others;
      potrs_pointers_kernel<D><<<blocks_for(g.count * (others + 1)), kThreads, 0, stream>>>(
          g, i, forward, nrhs, diag, u, v, w.x, w.w, w.vcol, pw, w.row, w.diagonal);
      COVFLOW_CHECK_LAUNCH();
      if (others > 0) {
        gemm<D>(handle, adj, CUBLAS_OP_N, r, nrhs, bt, one, pw, bt, np, zero, ldw);
        gemm<D>(handle, CUBLAS_OP_N, CUBLAS_OP_N, bt, nrhs, others * r, minus, w.row, bt, ldw, one, np);
      }
      trsm<D>(handle, forward ? CUBLAS_OP_N : adj, bt, nrhs, w.diagonal, bt, np);
    }
  }
  potrs_copy_kernel<D><<<blocks_for(elements), kThreads, 0, stream>>>(g, nrhs, false, info.data(), dev(b.data), b.ld,
                                                                      b.stride, w.x);
  COVFLOW_CHECK_LAUNCH();
}

#define COVFLOW_TLR_CUDA_FACTOR(T)                                                                              \
  template std::size_t potrf_workspace<T>(const Exec&, const TlrShape&);                                        \
  template void potrf<T>(Exec&, Tlr<T>, std::span<TlrInfo>, std::span<std::byte>, const TlrOptions&);           \
  template std::size_t potrs_workspace<T>(const Exec&, const TlrShape&, std::int64_t);                          \
  template void potrs<T>(Exec&, Tlr<const T>, Batch<T>, std::span<const TlrInfo>, std::span<std::byte>);
COVFLOW_TLR_CUDA_FACTOR(f32)
COVFLOW_TLR_CUDA_FACTOR(f64)
COVFLOW_TLR_CUDA_FACTOR(cf32)
COVFLOW_TLR_CUDA_FACTOR(cf64)
#undef COVFLOW_TLR_CUDA_FACTOR

}  // namespace covflow::linalg::detail::tlr_cuda

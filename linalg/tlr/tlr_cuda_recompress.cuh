// Internal: the recompression of low-rank tiles that LLL (tlr_cuda_lll.cu) and the trailing updates
// of tlr_potrf (tlr_cuda_factor.cu) share, batched over `jobs` tiles of uniform padded shape.
//
// Charara, Keyes, Ltaief, "Tile Low-Rank GEMM Using Batched Operations on GPUs", Euro-Par 2018, §5:
// a tile U·Vᴴ that an update extends to [U | X]·[V | Y]ᴴ is recompressed by the QR of both stacked
// factors, [U | X] = Q_u·R_u and [V | Y] = Q_v·R_v, the SVD of the small core R_u·R_vᴴ = U_s·Σ·V_sᴴ
// and the truncation U = Q_u·U_s·Σ, V = Q_v·V_s to the rank the tolerance allows. The caller fills
// the stacks (b × width each, zero padded: a zero column or row adds only zero singular values),
// then:
//   factor()      batched geqrf of both stacks, the R factors copied out (r_kernel), the cores as
//                 one strided-batched GEMM, batched gesvj of the cores, each core's Σσ²;
//   truncate()    truncate_kernel (a thread per job) picks each rank as the CPU backend's
//                 rank_for does, caps it at max_rank and adds what it drops to the per-slab sums;
//                 factors_kernel writes U_s·Σ and V_s, zero padded; unmqr applies Q_u and Q_v;
//                 store_kernel writes the result into the tile's slabs with the layout's zeros.
// A job whose `active` flag is 0 is computed but neither truncated into the sums nor stored.
#pragma once

#include <cuda_runtime.h>

#include <span>

#include "covflow/linalg/qr.hpp"
#include "covflow/linalg/svd.hpp"
#include "tlr_cuda_common.cuh"

namespace covflow::linalg::detail::tlr_cuda {

template <class T>
struct Recompress {
  using D = dev_t<T>;
  using R = real_t<T>;
  int b = 0, r = 0, width = 0, q = 0;  // tile, max_rank, stack width, q = min(b, width)
  long long jobs = 0;                  // capacity
  D *su = nullptr, *sv = nullptr;      // jobs × (b × width): the stacks, then geqrf's output
  D *tau_u = nullptr, *tau_v = nullptr;  // jobs × q
  int* qr_info = nullptr;              // 2·jobs
  D *ru = nullptr, *rv = nullptr;      // jobs × (q × width): R factors
  D* core = nullptr;                   // jobs × (q × q)
  D *left = nullptr, *right = nullptr;  // jobs × (q × q): U_s and V_s
  R* sigma = nullptr;                  // jobs × q
  SvdInfo* svd = nullptr;              // jobs
  double* norm2 = nullptr;             // jobs: Σσ² of the core = ‖[U | X]·[V | Y]ᴴ‖_F²
  D *out_u = nullptr, *out_v = nullptr;  // jobs × (b × r)
  long long* job_slab = nullptr;       // jobs: matrix·slots + slot of the tile
  int* active = nullptr;               // jobs

  Recompress() = default;
  Recompress(Carve& carve, int tile, int max_rank, int stack_width, long long capacity)
      : b(tile), r(max_rank), width(stack_width), q(std::min(tile, stack_width)), jobs(capacity) {
    const long long stack = static_cast<long long>(b) * width;
    su = carve.take<D>(jobs * stack);
    sv = carve.take<D>(jobs * stack);
    tau_u = carve.take<D>(jobs * q);
    tau_v = carve.take<D>(jobs * q);
    qr_info = carve.take<int>(2 * jobs);
    ru = carve.take<D>(jobs * q * width);
    rv = carve.take<D>(jobs * q * width);
    core = carve.take<D>(jobs * q * q);
    left = carve.take<D>(jobs * q * q);
    right = carve.take<D>(jobs * q * q);
    sigma = carve.take<R>(jobs * q);
    svd = carve.take<SvdInfo>(jobs);
    norm2 = carve.take<double>(jobs);
    out_u = carve.take<D>(jobs * b * r);
    out_v = carve.take<D>(jobs * b * r);
    job_slab = carve.take<long long>(jobs);
    active = carve.take<int>(jobs);
  }
};

// What the truncations add up, per slab of the batch (matrix·slots + slot).
struct TruncationSums {
  double* dropped2 = nullptr;  // Σσ² discarded
  int* capped = nullptr;       // max_rank cut it at least once
  int* failed = nullptr;       // an SVD met a non-finite value
};

// The tolerance of a truncation: tlr.hpp, Accuracy — scope matrix τ² = tol²·‖C‖_F² / (weight·slots)
// with the matrix's ‖C‖_F² from `matrix_norm2`; scope tile τ = tol·‖tile‖_F.
struct TruncationRule {
  const double* matrix_norm2 = nullptr;
  double tol2 = 0;
  double weight = 1;  // 2 for a Hermitian matrix: a stored tile stands for two
  bool tile_scope = false;
};

// R (q × width, ld q) from geqrf's output: the upper trapezoid, zeros below.
template <class D>
__global__ void r_kernel(int b, int width, int q, long long jobs, const D* su, const D* sv, D* ru, D* rv) {
  const long long per = static_cast<long long>(q) * width;
  COVFLOW_TLR_GRID_STRIDE(e, jobs * per) {
    const long long job = e / per;
    const int row = static_cast<int>(e % per % q), col = static_cast<int>(e % per / q);
    const long long at = job * b * width + row + static_cast<long long>(col) * b;
    ru[e] = row <= col ? su[at] : zero_of<D>();
    rv[e] = row <= col ? sv[at] : zero_of<D>();
  }
}

template <class R>
__global__ void core_norm_kernel(int q, long long jobs, const R* sigma, double* norm2) {
  COVFLOW_TLR_GRID_STRIDE(job, jobs) {
    double sum = 0;
    for (int l = 0; l < q; ++l) sum += double(sigma[job * q + l]) * double(sigma[job * q + l]);
    norm2[job] = sum;
  }
}

// A thread per job: the smallest rank whose discarded tail Σσ² ≤ τ² (the CPU backend's rule, the
// values taken off the end one by one), capped at max_rank.
template <class R>
__global__ void truncate_kernel(Geometry g, int q, long long jobs, const R* sigma, const SvdInfo* svd,
                                const double* norm2, const long long* job_slab, const int* active,
                                TruncationRule rule, TruncationSums sums, int* rank) {
  COVFLOW_TLR_GRID_STRIDE(job, jobs) {
    if (active[job] == 0) continue;
    const long long slab = job_slab[job], c = slab / g.slots;
    const R* s = sigma + job * q;
    const double tau2 = rule.tile_scope ? rule.tol2 * norm2[job]
                                        : rule.tol2 * rule.matrix_norm2[c] / (rule.weight * double(g.slots));
    int k = q;
    double tail = 0;
    while (k > 0 && tail + double(s[k - 1]) * double(s[k - 1]) <= tau2) {
      tail += double(s[k - 1]) * double(s[k - 1]);
      --k;
    }
    bool capped = false;
    if (k > g.r) {
      k = g.r;
      capped = true;
      tail = 0;
      for (int l = g.r; l < q; ++l) tail += double(s[l]) * double(s[l]);
    }
    rank[slab] = k;
    sums.dropped2[slab] += tail;
    sums.capped[slab] |= capped ? 1 : 0;
    // As in compress: a Jacobi SVD out of sweeps still truncates exactly; a non-finite core fails.
    sums.failed[slab] |= svd[job].status == status::non_finite_input ? 1 : 0;
  }
}

// U_s·Σ and V_s in the top q rows of the output slabs, up to the rank; zeros elsewhere.
template <class D>
__global__ void factors_kernel(Geometry g, int q, long long jobs, const D* left, const D* right,
                               const sreal_t<D>* sigma, const long long* job_slab, const int* rank, D* out_u,
                               D* out_v) {
  const long long per = g.slab_elements();
  COVFLOW_TLR_GRID_STRIDE(e, jobs * per) {
    const long long job = e / per;
    const int row = static_cast<int>(e % per % g.b), col = static_cast<int>(e % per / g.b);
    const bool kept = row < q && col < rank[job_slab[job]];
    const long long at = job * q * q + row + static_cast<long long>(col) * q;
    out_u[e] = kept ? left[at] * sigma[job * q + col] : zero_of<D>();
    out_v[e] = kept ? right[at] : zero_of<D>();
  }
}

// The recompressed factors into the tiles' slabs, zero past the tile's rows and rank.
template <class D>
__global__ void store_kernel(Geometry g, long long jobs, const D* out_u, const D* out_v, const long long* job_slab,
                             const int* active, const int* rank, D* u, D* v) {
  const long long per = g.slab_elements();
  COVFLOW_TLR_GRID_STRIDE(e, jobs * per) {
    const long long job = e / per;
    if (active[job] == 0) continue;
    const long long slab = job_slab[job];
    const int row = static_cast<int>(e % per % g.b), col = static_cast<int>(e % per / g.b);
    int i, j;
    g.tile(slab % g.slots, i, j);
    const bool kept = col < rank[slab];
    u[slab * per + e % per] = kept && row < g.rows(i) ? out_u[e] : zero_of<D>();
    v[slab * per + e % per] = kept && row < g.rows(j) ? out_v[e] : zero_of<D>();
  }
}

// QR of the first `jobs` stacks, the cores and their SVDs (Σσ² in rc.norm2).
template <class T>
void recompress_factor(Exec& exec, const Recompress<T>& rc, long long jobs) {
  using D = dev_t<T>;
  using R = real_t<T>;
  if (jobs == 0) return;
  CudaContext& context = exec.cuda_context();
  const cudaStream_t stream = context.stream();
  const long long stack = static_cast<long long>(rc.b) * rc.width;
  const auto tau_size = static_cast<std::size_t>(jobs * rc.q);
  geqrf<T>(exec, Batch<T>{reinterpret_cast<T*>(rc.su), rc.b, rc.width, rc.b, stack, jobs},
           {reinterpret_cast<T*>(rc.tau_u), tau_size}, {rc.qr_info, static_cast<std::size_t>(jobs)});
  geqrf<T>(exec, Batch<T>{reinterpret_cast<T*>(rc.sv), rc.b, rc.width, rc.b, stack, jobs},
           {reinterpret_cast<T*>(rc.tau_v), tau_size}, {rc.qr_info + jobs, static_cast<std::size_t>(jobs)});
  r_kernel<D><<<blocks_for(jobs * rc.q * rc.width), kThreads, 0, stream>>>(rc.b, rc.width, rc.q, jobs, rc.su, rc.sv,
                                                                           rc.ru, rc.rv);
  COVFLOW_CHECK_LAUNCH();
  const long long rs = static_cast<long long>(rc.q) * rc.width, cs = static_cast<long long>(rc.q) * rc.q;
  gemm_strided<D>(context.cublas(), CUBLAS_OP_N, adjoint_op<D>(), rc.q, rc.q, rc.width, from_real<D>(R(1)), rc.ru,
                  rc.q, rs, rc.rv, rc.q, rs, from_real<D>(R(0)), rc.core, rc.q, cs, jobs);
  gesvj<T>(exec, Batch<T>{reinterpret_cast<T*>(rc.core), rc.q, rc.q, rc.q, cs, jobs},
           {rc.sigma, static_cast<std::size_t>(jobs * rc.q)},
           Batch<T>{reinterpret_cast<T*>(rc.left), rc.q, rc.q, rc.q, cs, jobs},
           Batch<T>{reinterpret_cast<T*>(rc.right), rc.q, rc.q, rc.q, cs, jobs},
           {rc.svd, static_cast<std::size_t>(jobs)}, SvdOptions{.u = true, .v = true});
  core_norm_kernel<R><<<blocks_for(jobs), kThreads, 0, stream>>>(rc.q, jobs, rc.sigma, rc.norm2);
  COVFLOW_CHECK_LAUNCH();
}

// Truncation of the first `jobs` factored stacks into the slabs u, v and the ranks of the batch.
template <class T>
void recompress_truncate(Exec& exec, const Recompress<T>& rc, long long jobs, const Geometry& g,
                         const TruncationRule& rule, const TruncationSums& sums, dev_t<T>* u, dev_t<T>* v, int* rank) {
  using D = dev_t<T>;
  if (jobs == 0) return;
  const cudaStream_t stream = exec.cuda_context().stream();
  truncate_kernel<real_t<T>><<<blocks_for(jobs), kThreads, 0, stream>>>(g, rc.q, jobs, rc.sigma, rc.svd, rc.norm2,
                                                                        rc.job_slab, rc.active, rule, sums, rank);
  COVFLOW_CHECK_LAUNCH();
  factors_kernel<D><<<blocks_for(jobs * g.slab_elements()), kThreads, 0, stream>>>(
      g, rc.q, jobs, rc.left, rc.right, rc.sigma, rc.job_slab, rank, rc.out_u, rc.out_v);
  COVFLOW_CHECK_LAUNCH();
  const long long stack = static_cast<long long>(rc.b) * rc.width, slab = g.slab_elements();
  const auto tau_size = static_cast<std::size_t>(jobs * rc.q);
  unmqr<T>(exec, Side::left, Op::none, Batch<const T>{reinterpret_cast<const T*>(rc.su), rc.b, rc.q, rc.b, stack, jobs},
           {reinterpret_cast<const T*>(rc.tau_u), tau_size},
           Batch<T>{reinterpret_cast<T*>(rc.out_u), rc.b, rc.r, rc.b, slab, jobs});
  unmqr<T>(exec, Side::left, Op::none, Batch<const T>{reinterpret_cast<const T*>(rc.sv), rc.b, rc.q, rc.b, stack, jobs},
           {reinterpret_cast<const T*>(rc.tau_v), tau_size},
           Batch<T>{reinterpret_cast<T*>(rc.out_v), rc.b, rc.r, rc.b, slab, jobs});
  store_kernel<D><<<blocks_for(jobs * slab), kThreads, 0, stream>>>(g, jobs, rc.out_u, rc.out_v, rc.job_slab,
                                                                     rc.active, rank, u, v);
  COVFLOW_CHECK_LAUNCH();
}

// Whether matrix c of a TLR batch is finite, as the CPU backend's tlr_is_finite decides: the
// diagonal tiles' own rows × cols (their lower triangle when `lower_only`; of the diagonal its real
// part only) and each factor's columns up to the tile's rank. Called by every thread of a block.
template <class D>
__device__ bool block_finite(const Geometry& g, const D* diag, const D* u, const D* v, const int* rank, long long c,
                             bool lower_only) {
  bool finite = true;
  const long long te = g.tile_elements(), se = g.slab_elements();
  for (long long e = threadIdx.x; e < g.nt * te; e += blockDim.x) {
    const int i = static_cast<int>(e / te), row = static_cast<int>(e % te % g.b), col = static_cast<int>(e % te / g.b);
    const int ri = g.rows(i);
    if (row >= ri || col >= ri || (lower_only && row < col)) continue;
    const D value = diag[(c * g.nt) * te + e];
    finite = finite && (row == col ? isfinite(double(real_part(value))) : is_finite(value));
  }
  for (long long e = threadIdx.x; e < g.slots * se; e += blockDim.x) {
    const long long s = e / se, slab = c * g.slots + s;
    const int row = static_cast<int>(e % se % g.b), col = static_cast<int>(e % se / g.b);
    if (col >= rank[slab]) continue;
    int i, j;
    g.tile(s, i, j);
    if (row < g.rows(i)) finite = finite && is_finite(u[slab * se + e % se]);
    if (row < g.rows(j)) finite = finite && is_finite(v[slab * se + e % se]);
  }
  return __syncthreads_and(finite) != 0;
}

// Every element of a flagged matrix's diagonal tiles and factors NaN, its ranks max_rank.
template <class D>
__global__ void fill_nan_kernel(Geometry g, const int* flagged, D* diag, D* u, D* v, int* rank) {
  const long long te = g.nt * g.tile_elements(), fe = g.slots * g.slab_elements();
  COVFLOW_TLR_GRID_STRIDE(e, g.count * (te + 2 * fe + g.slots)) {
    const long long per = te + 2 * fe + g.slots, c = e / per, at = e % per;
    if (flagged[c] == 0) continue;
    if (at < te) diag[c * te + at] = nan_of<D>();
    else if (at < te + fe) u[c * fe + at - te] = nan_of<D>();
    else if (at < te + 2 * fe) v[c * fe + at - te - fe] = nan_of<D>();
    else rank[c * g.slots + at - te - 2 * fe] = g.r;
  }
}

}  // namespace covflow::linalg::detail::tlr_cuda

// Internal: what gesvj's CUDA kernels share — the problem a kernel solves and where its results
// go, the round-robin order of the column pairs, the plane rotation of one pair, and the
// launchers of the variants (gesvj_cuda_warp.cu, gesvj_cuda_block.cu; gesvj_cuda_blockjacobi.cu
// drives them). Device code; included by the gesvj_cuda*.cu files only.
//
// The method is one-sided Jacobi (Hestenes): plane rotations applied to pairs of columns of the
// working matrix X (m × n, m ≥ n) — and to the same columns of V — until every pair is orthogonal;
// then σ_j = ‖x_j‖, U's columns are x_j/σ_j. The rotation of a pair follows de Rijk, "A one-sided
// Jacobi algorithm for computing the singular value decomposition on a vector computer" (SIAM J.
// Sci. Stat. Comput., 1989) and Drmač and Veselić, "New fast and accurate Jacobi SVD algorithm"
// (SIAM J. Matrix Anal. Appl., 2008), as LAPACK's ?gesvj uses them: a pair is rotated only when
// its cosine |x_pᴴx_q|/(‖x_p‖‖x_q‖) exceeds tol = √m·ε, and the angle comes from the ratio of the
// two norms and that cosine alone.
//
// Convergence is judged on the numerically nonzero columns only (svd.hpp's SvdInfo::off): a pair
// counts when both its columns' norms, as the pair's sums give them, are above threshold =
// zero_level·c, zero_level = max(m, n)·ε of the caller's A and c the largest column norm of the
// working matrix before the sweeps (σ₁/√n ≤ c ≤ σ₁: a column norm is at most σ₁, and the largest is
// at least ‖X‖_F/√n). A column at or below it is at the level of A's rounding — after ε relative
// changes of A's entries such a singular value can be anywhere in [0, threshold] — and its
// direction is noise that plane rotations need not settle (on kernel matrices whose singular values
// decay far below ε·σ₁, such columns keep rotating at cosines near 1 long after every pair of the
// other columns is orthogonal to tol). Pairs that do not count are rotated as before (a column below the
// threshold can still be accurate to its own size, as in a graded matrix, and rotations keep it so;
// against a large column the rotation changes that column by at most the small one's norm), but a
// matrix has converged after a sweep in which no counted pair's cosine exceeded tol, and off is the
// largest counted cosine of the last sweep. The columns at or below the threshold get U columns that
// complete the others to an orthonormal set (their own direction orthogonalised against the rest
// when at least half of it survives, else a unit vector's); their σ are kept — accurate to
// O(n·ε·σ₁) in the absolute sense, like every σ of a backward-stable SVD. The threshold is compared
// in the same scaled units as the sums (each kernel scales its data by a power of two: `exponent`).
// The pair order is the parallel round-robin of W. Boukaram, G. Turkiyyah, H. Ltaief, D. E. Keyes,
// "Batched QR and SVD Algorithms on GPUs with Applications in Hierarchical Matrix Compression"
// (Parallel Computing, 2018), §5 (Fig. 6): n/2 disjoint pairs per step, n − 1 steps per sweep.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "../common/device_scalar.cuh"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/svd.hpp"

namespace covflow::linalg::detail::svdj {

// The matrix a kernel solves, where it is read from and where its results go.
template <class D>
struct Problem {
  using R = sreal_t<D>;
  long long count = 0;
  int m = 0, n = 0;  // the working matrix X: m × n, m ≥ n
  // Element (i, j) of X: a[i + j·lda], or conj(a[j + i·lda]) when conj_transpose (X = Aᴴ, or the
  // Rᴴ of the QR path); with upper, only the source's upper triangle is read (geqrf's R, with its
  // reflectors below), the rest taken as zero.
  const D* a = nullptr;
  long long lda = 0, stride_a = 0;
  bool conj_transpose = false;
  bool upper = false;

  // Results. s: count × n, descending. u: U (m × n; rows m … u_rows − 1 written as zeros); v: V
  // (n × n; rows n … v_rows − 1 zeros — the QR path's [V₁; 0], to which it then applies Q). Either
  // may be null.
  R* s = nullptr;
  D* u = nullptr;
  long long ldu = 0, stride_u = 0;
  int u_rows = 0;
  // When set (count × n): row i < n of U goes to row u_row_map[b·n + i] — the QR path's column
  // presorting, undone.
  const int* u_row_map = nullptr;
  D* v = nullptr;
  long long ldv = 0, stride_v = 0;
  int v_rows = 0;
  SvdInfo* info = nullptr;
  int max_sweeps = 30;
  R tol = 0;
  R zero_level = 0;  // max(m, n)·ε of the caller's A: a column norm at or below zero_level·c is
                     // numerically zero (c: the largest column norm of X before the sweeps)

  // Pair mode, for block Jacobi's inner solves: u gets the rotated columns X·V unnormalised (U·Σ,
  // in the columns' own order, not sorted), v the rotation V; no s, no info. The largest cosine of the first sweep
  // goes to outer_off[b / pairs_per_matrix] (an atomic maximum on the bit pattern, which orders
  // non-negative floats as integers); problems whose outer_active[b / pairs_per_matrix] is 0 are
  // skipped. The zero threshold is the outer matrix's, outer_threshold[b / pairs_per_matrix], in the
  // units of the data a points to (the pair's columns have the outer matrix's columns' norms); the
  // largest cosine sent to outer_off is over the counted pairs only.
  bool pair_mode = false;
  int pairs_per_matrix = 1;
  const int* outer_active = nullptr;
  R* outer_off = nullptr;
  const R* outer_threshold = nullptr;
};

template <class D>
__device__ inline D load_element(const Problem<D>& p, long long b, int i, int j) {
  const int row = p.conj_transpose ? j : i, column = p.conj_transpose ? i : j;  // in the source
  if (p.upper && row > column) return from_real<D>(sreal_t<D>(0));
  const D x = p.a[b * p.stride_a + row + static_cast<long long>(column) * p.lda];
  return p.conj_transpose ? conj_of(x) : x;
}

// x·2^e, exact (also where 2^e alone would overflow or underflow).
template <class R>
__device__ inline R scaled(R x, int e) {
  return scalbn(x, e);
}
template <class R>
__device__ inline Cx<R> scaled(Cx<R> x, int e) {
  return {scalbn(x.x, e), scalbn(x.y, e)};
}
// The larger of |Re x| and |Im x|: what the prescaling brings near 1.
template <class D>
__device__ inline sreal_t<D> magnitude(D x) {
  return fmax(fabs(real_part(x)), fabs(imag_part(x)));
}
template <class R>
__device__ inline R divided(R x, R d) {
  return x / d;
}
template <class R>
__device__ inline Cx<R> divided(Cx<R> x, R d) {
  return {x.x / d, x.y / d};
}
template <class D>
__device__ inline D nan_value() {
  using R = sreal_t<D>;
  if constexpr (is_cx<D>) return D{R(NAN), R(NAN)};
  else return R(NAN);
}

// Atomic maximum of a non-negative value, through its bit pattern.
__device__ inline void atomic_max_nonnegative(float* address, float value) {
  atomicMax(reinterpret_cast<unsigned*>(address), __float_as_uint(value));
}
__device__ inline void atomic_max_nonnegative(double* address, double value) {
  atomicMax(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(__double_as_longlong(value)));
}

// ---- round-robin pair order ---------------------------------------------------------------------
// N (even) columns: column 0 stays; the others sit on a circle of N − 1 positions that turns by
// one position per step. At step s circle position c holds column 1 + (c + s) mod (N − 1); pair 0
// is (0, position 0) and pair k ≥ 1 is (position k, position N − 1 − k). Over the N − 1 steps of a
// sweep every pair of columns meets exactly once.
__host__ __device__ inline void round_robin_pair(int N, int step, int k, int& p, int& q) {
  if (k == 0) {
    p = 0;
    q = 1 + step % (N - 1);
  } else {
    p = 1 + (k + step) % (N - 1);
    q = 1 + (N - 1 - k + step) % (N - 1);
  }
}

// ---- the rotation of one pair -------------------------------------------------------------------
// x_p ← c·x_p + s·x_q,  x_q ← c·x_q − conj(s)·x_p  (c real; s carries the phase of x_pᴴx_q).
template <class D>
struct Rotation {
  sreal_t<D> c;
  D s;
};

template <class D>
__device__ inline void rotate_pair(D& xp, D& xq, sreal_t<D> c, D s) {
  const D p0 = xp;
  xp = fma_(xp * c, s, xq);
  xq = fma_(xq * c, -conj_of(s), p0);
}

// From app = ‖x_p‖², aqq = ‖x_q‖² and apq = x_pᴴx_q: returns the cosine |apq|/(‖x_p‖‖x_q‖) (0 when
// either column is zero) and, when it exceeds tol, the rotation that makes the pair orthogonal
// (rotate = true); otherwise rot is the identity.
//
// With ζ = (‖x_q‖² − ‖x_p‖²)/(2|apq|) the rotation's tangent is the smaller root of t² − 2ζt − 1 = 0,
// t = −sign(ζ)/(|ζ| + √(1 + ζ²)) (de Rijk; LAPACK's ?gesvj forms |ζ| the same way, from the norms'
// ratio and the cosine, so that it never squares the norms of a graded pair). Written with
// r = min/max of the two norms ≤ 1 as t = num/(den + hypot(num, den)), num = 2r·cos, den = 1 − r²,
// it has no overflow for any ratio and needs no branch for |ζ| large (t → r·cos, the Gram–Schmidt
// limit LAPACK treats apart). The column with the larger norm grows: ‖x_p'‖² = ‖x_p‖² + t|apq|.
template <class D>
__device__ inline sreal_t<D> make_rotation(sreal_t<D> app, sreal_t<D> aqq, D apq, sreal_t<D> tol, Rotation<D>& rot,
                                           bool& rotate) {
  using R = sreal_t<D>;
  rot.c = R(1);
  rot.s = from_real<D>(R(0));
  rotate = false;
  if (!(app > R(0)) || !(aqq > R(0))) return R(0);
  const R alpha = sqrt(app), beta = sqrt(aqq);
  // |apq| without squaring it: the product of two small columns' norms, squared, underflows (in
  // float already for columns 1e-10 of the largest, the noise columns of a rank-deficient matrix).
  R g;
  if constexpr (is_cx<D>) g = hypot(apq.x, apq.y);
  else g = fabs(apq);
  const R cosine = g / alpha / beta;
  if (!(cosine > tol)) return cosine;
  const bool q_larger = beta >= alpha;  // ζ ≥ 0
  const R r = q_larger ? alpha / beta : beta / alpha;
  const R num = R(2) * r * fmin(cosine, R(1));
  const R den = (R(1) - r) * (R(1) + r);
  const R magnitude_t = num / (den + hypot(num, den));
  const R t = q_larger ? -magnitude_t : magnitude_t;
  const R c = R(1) / sqrt(fma(t, t, R(1)));
  const R sn = t * c;
  if constexpr (is_cx<D>) {
    rot.s = D{apq.x / g * sn, -(apq.y / g) * sn};  // conj(apq/|apq|)·sn
  } else {
    rot.s = apq >= R(0) ? sn : -sn;
  }
  rot.c = c;
  rotate = true;
  return cosine;
}

// ---- variants -------------------------------------------------------------------------------------

// One warp per matrix (gesvj_cuda_warp.cu): m ≤ 32, n ≤ 32.
inline constexpr int kWarpMaxRows = 32;
inline constexpr int kWarpMaxCols = 32;
template <class D>
void launch_warp(const Problem<D>& problem, cudaStream_t stream);

// One thread block per matrix, X and V in shared memory (gesvj_cuda_block.cu). block_fits says
// whether an m × n problem fits in `smem_limit` bytes of shared memory.
template <class D>
std::size_t block_smem_bytes(int m, int n, bool with_v);
template <class D>
bool block_fits(int m, int n, bool with_v, std::size_t smem_limit);
template <class D>
void launch_block(const Problem<D>& problem, cudaStream_t stream);

// Block Jacobi in global memory (gesvj_cuda_blockjacobi.cu) on X = Rᴴ, R the n × n upper triangle
// of a factored matrix (geqrf's output: r, ldr, stride_r). Results as Problem's: s (count × n), u
// (X's U: n × n, zeros below to u_rows), v (X's V, accumulated: rows 0 … n − 1, zeros below to
// v_rows; the caller applies Q), info.
template <class D>
struct BlockJacobiArgs {
  using R = sreal_t<D>;
  long long count = 0;
  int n = 0;
  const D* r = nullptr;
  long long ldr = 0, stride_r = 0;
  R* s = nullptr;
  D* u = nullptr;
  long long ldu = 0, stride_u = 0;
  int u_rows = 0;
  const int* u_row_map = nullptr;  // as Problem's
  D* v = nullptr;
  long long ldv = 0, stride_v = 0;
  int v_rows = 0;
  SvdInfo* info = nullptr;
  int max_sweeps = 30;
  R tol = 0;
  R zero_level = 0;  // as Problem's; c is the largest column norm of Rᴴ (the largest row norm of R)
};
// Block Jacobi's step with each pair in shared memory (gesvj_cuda_pairs.cu): `width` (P) columns
// per pair, 32 or 16. factor: [Y_i Y_j] (n × P) from Y → its QR in W (pairs × n × P, ld n) and τ
// (pairs × P); update: with R' (pairs × P × P: R·V_R, the warp Jacobi's pair-mode U·Σ) and V_R
// (pairs × P × P), [Y_i Y_j] ← Q₁·R' and [V_i V_j] ← [V_i V_j]·V_R (vy may be null). Pairs of
// matrices whose active flag is 0 are skipped.
enum class PairPhase { factor, update };
inline constexpr std::size_t kPairSmemLimit = 227 * 1024;  // sm_90's opt-in dynamic shared memory
template <class D>
struct PairStep {
  PairPhase phase = PairPhase::factor;
  long long pairs = 0;
  int per_matrix = 0;
  int n = 0, n_p = 0, width = 0, step = 0;
  D* y = nullptr;   // count × n × n_p
  D* vy = nullptr;  // count × n_p × n_p
  D* w = nullptr;
  D* tau = nullptr;
  const D* rprime = nullptr;
  const D* vr = nullptr;
  const int* active = nullptr;
};
// Whether the step fits shared memory for n rows and this width (and n ≥ width).
template <class D>
bool pair_step_fits(int n, int width);
// Sets the kernels' shared-memory limit; outside stream capture, before the first launch.
template <class D>
void configure_pair_step(int width);
template <class D>
void launch_pair_step(const PairStep<D>& step, cudaStream_t stream);

// Bytes of workspace block_jacobi takes.
template <class T>
std::size_t block_jacobi_workspace(int n, long long count, bool with_u, bool with_v);
template <class T>
void block_jacobi(CudaContext& context, const BlockJacobiArgs<device_t<T>>& args, void* workspace);

}  // namespace covflow::linalg::detail::svdj

// Test inputs and checks for LU, Cholesky and least squares (solve.hpp), shared by the CPU suite
// (solve_test.cpp) and the GPU suite: generators for the matrices every suite must cover, each
// with the info it must produce, and checkers that report every error in units of n·ε so that the
// required tolerance reads as a plain "≤ 10". Everything here is a plain host function over host
// arrays: a GPU suite copies its results back and calls the same checks.
//
// Unit: n·ε with n the order of the matrix checked (max(m, n) for least squares) and ε the machine
// epsilon of T's real type. Products are formed in double (float T) or long double (double T).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "covflow/linalg/batch.hpp"
#include "covflow/linalg/types.hpp"

namespace covflow::test {

// The required tolerance of every check below, in units of n·ε.
inline constexpr double solve_tolerance = 10.0;

// Why each kind is in the suites (solve_cases.cpp says how each is built):
enum class SolveKind {
  random,             // Gaussian entries, m × n: the well-conditioned baseline.
  latms,              // LAPACK's ?latms U·diag(σ)·Vᴴ, m × n (lowrank_cases.hpp), with κ₂ = cond and σ
                      // by `mode`: near-singular input, where backward errors must stay as small.
  hpd,                // A = G·Gᴴ, G from ?latms (mode `mode`) with κ₂(G) = √cond: Hermitian positive
                      // definite with κ₂(A) = cond (before rounding to T). Both triangles are stored,
                      // the diagonal exactly real.
  wilkinson,          // 1 on the diagonal, −1 below it, 1 in the last column: the matrix on which
                      // partial pivoting's growth factor reaches its bound 2^(n−1) (N. J. Higham,
                      // "Accuracy and Stability of Numerical Algorithms", 2nd ed. 2002, §9.4). No
                      // row is interchanged and every step is exact in binary floating point, so L
                      // and U are known exactly: U = I but U(i, n−1) = 2^i, L(i, j) = −1 below the
                      // diagonal.
  permuted_identity,  // the rows of I in a random order: P is found exactly and L = U = I.
  singular_column,    // Gaussian m × n (m ≥ n) with column `index` exactly zero. A zero column stays
                      // exactly zero under row interchanges, eliminations and Householder
                      // reflections, so U(index, index) and R(index, index) are exactly zero whatever
                      // the rounding before them, and no earlier pivot is: getrf, gesv and gels
                      // report index + 1.
  cholesky_fails_at,  // Hermitian A = L·D·Lᴴ, L unit lower with small Gaussian entries (well
                      // conditioned), D_jj ∈ [1, 2] except D = −1 at j = index − 1: the leading minors
                      // of order < index are positive definite, the one of order `index` is not, by a
                      // margin of about 1 — potrf and posv report exactly `index`, lower and upper.
  non_finite,         // hpd (κ = 10) with the real part of diagonal element `index` NaN: every
                      // operation and either triangle reads it.
  dominant,           // Hermitian, diagonal in [1, 2], off-diagonal entries of modulus ≤ 1/(2n): by
                      // Gershgorin positive definite with κ₂ < 5, and built without LAPACK, so that
                      // batches of millions stay cheap. Different in every matrix.
};

std::string name(SolveKind kind);

// What to generate. Build one with the factories, e.g. SolveSpec::hpd(17, 5, 1e6).
struct SolveSpec {
  SolveKind kind = SolveKind::random;
  int m = 1;          // rows: n for every kind but random, latms and singular_column
  int n = 1;          // columns
  int count = 1;      // matrices in the batch
  int mode = 3;       // latms, hpd: ?latms MODE, 1–5
  double cond = 1e3;  // latms, hpd: κ₂(A)
  int index = 0;      // singular_column: the zero column (0-based); cholesky_fails_at: the failing
                      // minor (1-based, 1 ≤ index ≤ n); non_finite: the NaN's diagonal position

  static SolveSpec random(int m, int n, int count);
  static SolveSpec latms(int m, int n, int count, int mode, double cond);
  static SolveSpec hpd(int n, int count, double cond, int mode = 3);
  static SolveSpec wilkinson(int n, int count);
  static SolveSpec permuted_identity(int n, int count);
  static SolveSpec singular_column(int m, int n, int count, int column);
  static SolveSpec cholesky_fails_at(int n, int count, int minor);
  static SolveSpec non_finite(int n, int count, int position);
  static SolveSpec dominant(int n, int count);
};

// e.g. "cholesky_fails_at minor 5 17×17 ×3".
std::string describe(const SolveSpec& spec);

// A batch of `count` m×n matrices, column-major and packed (ld = m, stride = m·n), built in double
// precision and rounded to T (Hermitian kinds: both triangles exactly conjugate, diagonal real).
template <class T>
struct SolveCase {
  SolveSpec spec;
  std::uint64_t seed = 0;  // regenerates this case: make_solve_case<T>(spec, seed)
  std::vector<T> a;        // count·m·n, the input
  // The info every matrix must produce in the factorization its kind is for: index + 1 for
  // singular_column (getrf, gesv, gels), index for cholesky_fails_at (potrf, posv, lower and
  // upper), status::non_finite_input for non_finite (every operation), 0 for the others (getrf,
  // gesv and gels; hpd and dominant also potrf and posv).
  int expected_info = 0;

  int m() const { return spec.m; }
  int n() const { return spec.n; }
  int count() const { return spec.count; }
  const T* matrix(int b) const { return a.data() + std::size_t(b) * spec.m * spec.n; }
  // The packed batch, read-only.
  linalg::Batch<const T> batch() const { return linalg::Batch<const T>::packed(a.data(), spec.m, spec.n, spec.count); }
  // T's name, describe(spec) and the seed, for failure messages.
  std::string label() const;
};

// Draws the case's seed from `rng` (so one printed test seed replays every case) and builds it.
template <class T>
SolveCase<T> make_solve_case(const SolveSpec& spec, std::mt19937_64& rng);
template <class T>
SolveCase<T> make_solve_case(const SolveSpec& spec, std::uint64_t seed);

// `count` packed rows×cols matrices copied into a batch with leading dimension ld ≥ rows and
// stride ≥ ld·cols, every element outside the matrices (row padding and the gaps) set to `pad`.
// The batch spans stride·count elements.
template <class T>
std::vector<T> spread_batch(const T* packed, int rows, int cols, int count, std::int64_t ld, std::int64_t stride,
                            T pad);

// ---- references --------------------------------------------------------------------------------

// LAPACK's ?getrf in T on a copy of the n×n matrix a (leading dimension ld): what "pivots identical
// to LAPACK's" compares with. lu is packed (ld = n).
template <class T>
struct LapackLu {
  std::vector<T> lu;
  std::vector<int> ipiv;
  int info = 0;
};
template <class T>
LapackLu<T> lapack_getrf(const T* a, std::int64_t ld, int n);

// ---- checks, each in units of n·ε --------------------------------------------------------------
// A zero denominator (A = 0) gives 0 when the numerator is exactly 0 and +∞ otherwise; NaN in an
// output gives NaN, which fails any "≤" test.

// ‖P·A − L·U‖_F / ‖A‖_F of getrf's output: a the input (n×n, leading dimension ld_a), lu the
// factors (L unit lower below the diagonal, U on and above it; ld_lu), ipiv the n 1-based
// sequential interchanges. A pivot outside 1 … n gives +∞.
template <class T>
double lu_error(const T* a, std::int64_t ld_a, int n, const T* lu, std::int64_t ld_lu, const int* ipiv);

// ‖A_k − L·Lᴴ‖_F / ‖A_k‖_F (Uplo::lower) or ‖A_k − Uᴴ·U‖_F / ‖A_k‖_F (Uplo::upper), unit k·ε:
// A_k the leading k×k block (k = order) of the Hermitian matrix whose `uplo` triangle a holds (the
// real part of its diagonal), the factor read from the same triangle of `factor` (its diagonal as
// stored, imaginary part included). order = n checks a complete factorization, info − 1 the
// partial one left by a failure at minor `info`; order 0 gives 0.
template <class T>
double cholesky_error(linalg::Uplo uplo, const T* a, std::int64_t ld_a, int n, const T* factor, std::int64_t ld_factor,
                      int order);

// ‖op(A)·X − B‖_F / (‖A‖_F·‖X‖_F + ‖B‖_F): a n×n, x and b n×nrhs, each with its leading dimension.
template <class T>
double solve_residual(linalg::Op op, const T* a, std::int64_t ld_a, int n, const T* x, std::int64_t ld_x, const T* b,
                      std::int64_t ld_b, int nrhs);

// Errors of one least-squares solve min ‖A·X − B‖ through A = Q·R (gels), m ≥ n, unit m·ε; a and b
// the inputs (m×n, m×nrhs), factored gels's A (R on and above the diagonal), qhb gels's B (Qᴴ·B
// with X in its first n rows):
//   optimality     ‖Aᴴ(A·X − B)‖_F / (‖A‖_F·(‖A‖_F·‖X‖_F + ‖B‖_F)) — the normal equations, which
//                  any backward-stable least-squares solver satisfies to this scale;
//   r_gram         ‖AᴴA − RᴴR‖_F / ‖A‖_F² — R is the factor of A, whatever Q gels used;
//   residual_norm  max_j |‖A·x_j − b_j‖₂ − ‖(QᴴB)(n:m, j)‖₂| / (‖A‖_F·‖x_j‖₂ + ‖b_j‖₂) — the rows
//                  below X hold the residual's coordinates, so their norm is the residual's.
// nrhs = 0 measures r_gram only. (‖A − QR‖ and ‖QᴴQ − I‖ need geqrf's tau, which gels keeps to
// itself: lowrank_cases.hpp's qr_errors checks them on geqrf's output.)
struct LeastSquaresErrors {
  double optimality = 0, r_gram = 0, residual_norm = 0;
};
template <class T>
LeastSquaresErrors least_squares_errors(const T* a, std::int64_t ld_a, int m, int n, const T* factored,
                                        std::int64_t ld_factored, const T* b, std::int64_t ld_b, const T* qhb,
                                        std::int64_t ld_qhb, int nrhs);

// True when the triangle strictly opposite `uplo` of the n×n matrices is bit for bit the same.
template <class T>
bool other_triangle_unchanged(linalg::Uplo uplo, const T* before, std::int64_t ld_before, const T* after,
                              std::int64_t ld_after, int n);

// True when the rows×cols matrices are bit for bit the same.
template <class T>
bool bitwise_equal(const T* x, std::int64_t ld_x, const T* y, std::int64_t ld_y, int rows, int cols);

// NaN-sticky maximum.
double worst_of(double x, double y);
LeastSquaresErrors worst_of(const LeastSquaresErrors& x, const LeastSquaresErrors& y);

// ---- expectations over a whole batch -----------------------------------------------------------
// Each EXPECTs per matrix b of the case, with messages naming `context`, label() and b, and
// returns the worst error measured. The outputs may have any ld and stride. The case's matrices
// must be the inputs the operation ran on.

// getrf (or gesv's factorization): info[b] == expected_info; for a finite matrix (info ≥ 0)
// ‖PA − LU‖_F/‖A‖_F ≤ solve_tolerance, no NaN or Inf in the factors (also where info > 0), ipiv
// identical to LAPACK's ?getrf on the same matrix; for non_finite the matrix all NaN and ipiv
// 1 … n.
template <class T>
double expect_getrf_results(const SolveCase<T>& c, linalg::Batch<const T> lu, const int* ipiv, const int* info,
                            const std::string& context);

// potrf (or posv's factorization) on the `uplo` triangle: info[b] == expected_info; for info = 0
// the factor's backward error ≤ solve_tolerance, its diagonal real (imaginary part exactly 0) and
// positive; for info > 0 the leading (info − 1)-order block's backward error ≤ solve_tolerance;
// for non_finite the triangle all NaN. The other triangle is not looked at
// (other_triangle_unchanged does that).
template <class T>
double expect_potrf_results(const SolveCase<T>& c, linalg::Uplo uplo, linalg::Batch<const T> factor, const int* info,
                            const std::string& context);

// A solve op(A)·X = B of getrs, gesv, potrs or posv with the case's matrices (posv / potrs: the
// full Hermitian matrix, op none): b the right-hand sides (count·n·nrhs, packed), x the result.
// Where info is null or info[b] = 0, the residual ≤ solve_tolerance; elsewhere X bit for bit B.
template <class T>
double expect_solve_results(const SolveCase<T>& c, linalg::Op op, const T* b, int nrhs, linalg::Batch<const T> x,
                            const int* info, const std::string& context);

// gels: info[b] == expected_info; for info = 0 every error of least_squares_errors ≤
// solve_tolerance; for info > 0 B bit for bit as given and the factored A finite; for non_finite
// A all NaN and B as given. b the right-hand sides (count·m·nrhs, packed), qhb gels's B.
template <class T>
LeastSquaresErrors expect_gels_results(const SolveCase<T>& c, linalg::Batch<const T> factored, const T* b, int nrhs,
                                       linalg::Batch<const T> qhb, const int* info, const std::string& context);

}  // namespace covflow::test

// Test inputs and checks for the QR (geqrf / ungqr / unmqr) and SVD (gesvj) suites, shared by the
// CPU suites (qr_test.cpp, svd_test.cpp) and the GPU suites: generators for the matrices every suite
// must cover (LAPACK's own test matrices from ?latms, rank-deficient, graded, radar snapshots,
// plain random), references computed by double-precision LAPACK, and checkers that report every
// error in units of n·ε so that the required tolerance reads as a plain "≤ 10".
//
// Unit: n·ε with n = max(m, n) of the matrix checked and ε the machine epsilon of T's real type.
#pragma once

#include <complex>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "covflow/linalg/svd.hpp"
#include "covflow/linalg/types.hpp"

namespace covflow::test {

// The double-precision twin of T (double or complex<double>), in which the checks form Q and
// products.
template <class T>
using precise_t = std::conditional_t<linalg::is_complex_v<T>, std::complex<double>, double>;

// The required tolerance for residuals, orthogonality and singular-value errors, in units of n·ε.
inline constexpr double lowrank_tolerance = 10.0;

// Why each kind is in the suite (lowrank_cases.cpp says how each is built):
enum class LowrankKind {
  random,          // Gaussian entries: the well-conditioned baseline.
  latms,           // LAPACK's test-matrix generator ?latms (the matrices LAPACK's own tests use):
                   // U·diag(σ)·Vᴴ with σ from MODE 1–5 and κ₂(A) = COND exactly (before rounding):
                   // 1: one σ = 1, the rest 1/κ; 2: all 1 but one 1/κ; 3: geometric; 4: arithmetic;
                   // 5: random, log-uniform in [1/κ, 1].
  rank_deficient,  // X·Yᴴ with X m×r, Y n×r Gaussian: exact rank r (before rounding to T); r = 0 is
                   // the zero matrix, where relative errors divide by ‖A‖ = 0.
  graded,          // A = B·D (m ≥ n) or D·B (m < n): B well conditioned with unit columns (rows),
                   // D diagonal, geometric over `cond` (max/min), permuted at random. One-sided
                   // Jacobi must find the small singular values to relative accuracy ~ε·κ₂(B)
                   // (Demmel and Veselić, "Jacobi's method is more accurate than QR", SIAM J.
                   // Matrix Anal. Appl. 1992, §4). The grading is on the side of min(m, n) so that
                   // the matrix a Jacobi SVD orthogonalises (A, or Aᴴ for m < n) is column-graded.
  radar,           // snapshots of a uniform linear array (m elements × n snapshots): sources and
                   // strong jammers over unit noise, as the scenario generator makes them — a few
                   // large singular values over a noise floor. Real T takes the real part.
  kernel_tiles,    // the off-diagonal m × m tiles of one kernel covariance matrix K(x_i, x_j) on
                   // random 2-D points sorted by their first coordinate (as a tile low-rank
                   // matrix is ordered): exponential exp(−d/ℓ) or Matérn ν = 3/2. Their singular
                   // values decay far below ε·σ₁, so that most columns are rounding noise — what
                   // made gesvj's CUDA path run out of sweeps. Complex T: D·K·Dᴴ, D random phases.
};

std::string name(LowrankKind kind);

// One emitter of a radar scene: θ from broadside in degrees, power relative to one element's noise.
struct Emitter {
  double angle_deg = 0;
  double power_db = 0;
};

// x_t = Σ_k a(θ_k)·s_k(t) + n_t, a_i(θ) = exp(j·2π·d·i·sin θ), s_k(t) ~ CN(0, 10^(power_db/10)),
// n_t ~ CN(0, I): the model of stages/scenario.hpp (docs/scenario.md).
struct SnapshotScene {
  double spacing_wavelengths = 0.5;
  std::vector<Emitter> sources{{-20.0, 10.0}, {5.0, 0.0}};
  std::vector<Emitter> jammers{{40.0, 40.0}, {-55.0, 35.0}};
};

// kernel_tiles: the kernel matrix the tiles come from.
struct KernelTiles {
  int points = 2048;     // a multiple of the tile size m; count = (points/m)·(points/m − 1) tiles
  double length = 0.1;   // ℓ
  bool matern = false;   // Matérn ν = 3/2, (1 + √3·d/ℓ)·exp(−√3·d/ℓ), instead of exp(−d/ℓ)
};

// What to generate. Build one with the *_spec helpers below.
struct LowrankSpec {
  LowrankKind kind = LowrankKind::random;
  int m = 1;            // rows (radar: array elements)
  int n = 1;            // columns (radar: snapshots)
  int count = 1;        // matrices in the batch
  int mode = 3;         // latms: ?latms MODE, 1–5
  double cond = 1e3;    // latms: κ₂(A) (?latms COND); graded: max d / min d of D
  int rank = 0;         // rank_deficient: the rank, 0 ≤ rank ≤ min(m, n)
  SnapshotScene scene;  // radar
  KernelTiles tiles;    // kernel_tiles
};

LowrankSpec random_spec(int m, int n, int count);
LowrankSpec latms_spec(int m, int n, int count, int mode, double cond);
LowrankSpec rank_deficient_spec(int m, int n, int count, int rank);
LowrankSpec graded_spec(int m, int n, int count, double spread);
LowrankSpec radar_spec(int elements, int snapshots, int count, SnapshotScene scene = {});
// Every off-diagonal tile × tile block of the kernel matrix on `points` points.
LowrankSpec kernel_tiles_spec(int tile, int points, double length, bool matern = false);

// e.g. "latms mode 3 κ=1e+07 17×17 ×7".
std::string describe(const LowrankSpec& spec);

// A batch of `count` m×n matrices, column-major and packed (ld = m, stride = m·n). Every kind is
// built in double precision (?latms through dlatms/zlatms) and rounded to T.
template <class T>
struct LowrankCase {
  LowrankSpec spec;
  std::uint64_t seed = 0;        // regenerates this case: make_lowrank_case<T>(spec, seed)
  std::vector<T> a;              // count·m·n, the input
  std::vector<double> kappa_b;   // graded: κ₂(B) of each matrix (B as built, in double); else empty

  int m() const { return spec.m; }
  int n() const { return spec.n; }
  int k() const { return spec.m < spec.n ? spec.m : spec.n; }
  int count() const { return spec.count; }
  const T* matrix(int b) const { return a.data() + std::size_t(b) * spec.m * spec.n; }
  // describe(spec) and the seed, for failure messages.
  std::string label() const;
};

// Draws the case's seed from `rng` (so one printed test seed replays every case) and builds it.
template <class T>
LowrankCase<T> make_lowrank_case(const LowrankSpec& spec, std::mt19937_64& rng);
template <class T>
LowrankCase<T> make_lowrank_case(const LowrankSpec& spec, std::uint64_t seed);

// ---- references (double-precision LAPACK on the elements as stored; exact widening for float T) ----

// The min(m, n) singular values of the m×n matrix a (ld = m), descending, by LAPACK's one-sided
// Jacobi dgesvj/zgesvj in double (on Aᴴ for m < n) — accurate to ~ε_double·κ₂(B) relatively for a
// graded A. Throws std::runtime_error when LAPACK reports failure.
template <class T>
std::vector<double> reference_singular_values(const T* a, int m, int n);

// |R_ii|, i < min(m, n), of the QR of the m×n matrix a (ld = m) by dgeqrf/zgeqrf in double.
template <class T>
std::vector<double> reference_r_diagonal(const T* a, int m, int n);

// ---- building Q and R from geqrf's output ------------------------------------------------------

// Q (m × k, ld = m) and R (k × n, ld = k), k = min(m, n), of one matrix from geqrf's output:
// `factored` (m × n, leading dimension ld) and its k scalars tau. R is the upper triangle of the
// first k rows; Q is formed from the reflectors (as stored, widened) by LAPACK's dorgqr/zungqr in
// double, so a device's geqrf output is checked the same way as the CPU's.
template <class T>
struct QrFactors {
  int m = 0, n = 0, k = 0;
  std::vector<precise_t<T>> q;  // m·k
  std::vector<precise_t<T>> r;  // k·n
};
template <class T>
QrFactors<T> qr_factors(const T* factored, std::int64_t ld, const T* tau, int m, int n);

// ---- checks, each in units of n·ε (n = max of the dimensions of the matrix checked) --------------

// Errors of one QR A = Q·R of the m×n matrix a (ld = m, the original input):
//   residual       ‖A − QR‖_F / ‖A‖_F
//   orthogonality  ‖QᴴQ − I‖_F
//   r_diagonal     max_i | |R̂_ii| − |R_ii|(reference) | / ‖A‖_F, measured when a reference is given
//                  (else 0). Unlike the others it is not bounded by a constant: to first order it
//                  grows like κ₂(A) (the distance of column i from the span of the columns before
//                  it moves with that span), so compare it to the tolerance only for a
//                  well-conditioned A, or to the tolerance times κ₂(A).
// For A = 0 the residual is 0 when QR = 0 exactly and +∞ otherwise (r_diagonal likewise). NaN in
// an output gives NaN, which fails any "≤" test. Accumulates in double (float T) or long double.
struct QrErrors {
  double residual = 0, orthogonality = 0, r_diagonal = 0;
};
// From geqrf's output (factored: m × n with leading dimension ld; tau: k), through qr_factors.
template <class T>
QrErrors qr_errors(const T* a, int m, int n, const T* factored, std::int64_t ld, const T* tau,
                   const double* reference_r_diagonal = nullptr);
// From an explicit Q (m × k, ld = m; e.g. ungqr's output) and R (k × n, ld = k), both in T.
template <class T>
QrErrors qr_errors_explicit(const T* a, int m, int n, const T* q, const T* r,
                            const double* reference_r_diagonal = nullptr);

// ‖QᴴQ − I‖_F / (max(rows, cols)·ε) of a rows × cols matrix q with leading dimension ld.
template <class T>
double orthogonality_error(const T* q, std::int64_t ld, int rows, int cols);

// Errors of one thin SVD of the m×n matrix a (ld = m, the original input); k = min(m, n); s holds
// k values, u is m × k (ld = m) or null, v is n × k (ld = n) or null, reference_values k values
// descending (reference_singular_values):
//   residual          ‖A − UΣVᴴ‖_F / ‖A‖_F (only when both u and v are given; else 0)
//   u_orthogonality   ‖UᴴU − I‖_F (0 without u)
//   v_orthogonality   ‖VᴴV − I‖_F (0 without v)
//   values            max_i |σ̂_i − σ_i| / σ_1 (Weyl: any backward-stable SVD meets it)
//   relative_values   max_i |σ̂_i − σ_i| / σ_i, divided further by kappa_b — the relative accuracy
//                     of a graded matrix; measured only when kappa_b > 0 (else 0); an exactly
//                     zero σ_i counts when σ̂_i ≠ 0 (+∞).
// σ_1 = 0 (A = 0): values is 0 when every σ̂ is 0, +∞ otherwise; the residual likewise. NaN gives
// NaN.
struct SvdErrors {
  double residual = 0, u_orthogonality = 0, v_orthogonality = 0, values = 0, relative_values = 0;
};
template <class T>
SvdErrors svd_errors(const T* a, int m, int n, const linalg::real_t<T>* s, const T* u, const T* v,
                     const double* reference_values, double kappa_b = 0);

// Elementwise maximum, NaN-sticky.
QrErrors max_errors(const QrErrors& x, const QrErrors& y);
SvdErrors max_errors(const SvdErrors& x, const SvdErrors& y);

// For each matrix b in `which` (indices into c): EXPECTs info[b] == 0 and residual and
// orthogonality ≤ lowrank_tolerance; when r_diagonal_condition > 0, also r_diagonal ≤
// lowrank_tolerance · r_diagonal_condition (pass κ₂(A), or 1 for a well-conditioned A). factored is
// count·m·n packed, tau count·k. Messages name `context`, the case (label()) and b. Returns the
// maximum errors over `which`.
template <class T>
QrErrors expect_geqrf_results(const LowrankCase<T>& c, const T* factored, const T* tau, const int* info,
                              std::span<const int> which, const std::string& context,
                              double r_diagonal_condition = 0);

// For each matrix b in `which`: EXPECTs info[b].status == 0, s non-negative and descending, and
// every error of svd_errors ≤ lowrank_tolerance — relative_values for graded cases (with
// c.kappa_b[b]). s is count·k, u count·m·k (or null), v count·n·k (or null), all packed. Returns
// the maximum errors over `which`.
template <class T>
SvdErrors expect_gesvj_results(const LowrankCase<T>& c, const linalg::real_t<T>* s, const T* u, const T* v,
                               const linalg::SvdInfo* info, std::span<const int> which,
                               const std::string& context);

}  // namespace covflow::test

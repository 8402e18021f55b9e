// Test inputs and checks for the Hermitian eigensolver (heev), shared by the CPU suite
// (heev_test.cpp) and the GPU suite: generators for the spectra every suite must cover, a reference
// computed in double-precision LAPACK, and a checker that reports every error in units of n·ε so
// that the required tolerance reads as a plain "≤ 10".
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "covflow/linalg/types.hpp"

namespace covflow::test {

// Why each kind is in the suite (the generators in eigen_cases.cpp say how each is built):
enum class SpectrumKind {
  random,         // Gaussian Hermitian (GUE-like; GOE for real T): the well-spread baseline.
  clustered,      // eigenvalues of multiplicity n/4 plus a cluster 1e-9 wide: deflation and the
                  // orthogonality of eigenvectors inside a repeated eigenspace.
  graded,         // Λ_k = 10^(−12k/(n−1)) under a random unitary: 12 decades of scale; small
                  // eigenvalues must not be lost to shifts chosen for the large ones.
  diagonal,       // already diagonal: nothing to reduce; the Householder vectors are all zero.
  tridiagonal,    // already (complex) tridiagonal: the reduction is the identity up to the phases.
  zero,           // all zeros: ‖A‖ = 0, where relative tests and scaling divide by zero.
  radar,          // sample covariance of a uniform linear array, 2–4 strong sources over noise:
                  // the production input — a few large eigenvalues over a flat noise floor.
  near_singular,  // n/3 eigenvalues exactly 0, the rest in [1, 2]: rank deficiency, as when a
                  // covariance is estimated from fewer snapshots than channels.
  padded,         // a radar covariance in the leading k = ⌈n/6⌉ rows and columns, the rest exactly
                  // zero: what rsvd's Hermitian fixed-accuracy form hands heev (T = QᴴAQ, Q's
                  // columns past a matrix's rank zero) — the tridiagonal splits into a block and
                  // exact zeros, and every merge above the block deflates entirely.
};

std::string name(SpectrumKind kind);
const std::vector<SpectrumKind>& all_spectrum_kinds();

// The required tolerance for residual, orthogonality and eigenvalue error, in units of n·ε.
inline constexpr double eigen_tolerance = 10.0;

// A batch of `count` Hermitian (real symmetric for real T) n×n matrices of one kind, column-major,
// packed (ld = n, stride = n·n), both triangles filled and exactly consistent (a_ji = conj(a_ij),
// real diagonal), plus reference eigenvalues of each matrix *as stored*, ascending, from LAPACK's
// QR-iteration driver (dsyev/zheev, not the divide-and-conquer driver the CPU path uses) in double
// precision on the stored elements (exact conversion for float T). For float T that is a higher
// precision; for double T an independent solver. Diagonal and zero kinds have exact references
// (the sorted diagonal; zeros).
template <class T>
struct EigenCase {
  SpectrumKind kind;
  int n;
  int count;
  std::uint64_t seed;                    // regenerates this case: make_eigen_case(kind, n, count, seed)
  std::vector<T> a;                      // count·n·n, the input
  std::vector<double> reference_values;  // count·n, ascending per matrix

  const T* matrix(int b) const { return a.data() + std::size_t(b) * n * n; }
  const double* reference(int b) const { return reference_values.data() + std::size_t(b) * n; }
};

// Draws the case's seed from `rng` (so one printed test seed replays every case) and builds it.
template <class T>
EigenCase<T> make_eigen_case(SpectrumKind kind, int n, int count, std::mt19937_64& rng);
template <class T>
EigenCase<T> make_eigen_case(SpectrumKind kind, int n, int count, std::uint64_t seed);

// Overwrites the strict triangle that an operation reading `read` must never touch with `fill`
// (default: NaN), in each of `count` packed n×n matrices. A solver that reads it returns NaN,
// reports non-finite input, or (with a huge finite fill) returns wrong values — each caught.
template <class T>
void garble_unread_triangle(std::vector<T>& a, int n, int count, linalg::Uplo read);
template <class T>
void garble_unread_triangle(std::vector<T>& a, int n, int count, linalg::Uplo read, T fill);

// Errors of one eigendecomposition of the n×n matrix a_original — the full, exactly Hermitian input
// (both triangles, as EigenCase::a holds it, never the garbled copy) — each divided by n·ε (ε of
// T's real type); `vectors` is n×n with ld = n, `values` and `reference_values` hold n entries:
//   residual       ‖AV − VΛ‖_F / ‖A‖_F
//   orthogonality  ‖VᴴV − I‖_F
//   values         max_k |λ_k − λref_k| / ‖A‖₂   (‖A‖₂ = max |λref|, at least ‖A‖_F/√n)
// For A = 0 (‖A‖_F = 0) a relative error is undefined: residual and values are 0 when the result
// is exact (AV − VΛ = 0, every λ = 0) and +∞ otherwise. NaN anywhere in the outputs gives NaN,
// which fails any "≤" test. With vectors == nullptr (values-only) residual and orthogonality are
// not measured and reported as 0. Accumulates in double for float T, long double for double T.
struct EigenErrors {
  double residual = 0, orthogonality = 0, values = 0;
};
template <class T>
EigenErrors eigen_errors(const T* a_original, const T* vectors, const linalg::real_t<T>* values,
                         const double* reference_values, int n);

// Elementwise maximum, NaN-sticky (a NaN in either operand stays NaN).
EigenErrors max_errors(const EigenErrors& x, const EigenErrors& y);

// Matrices to check in a batch of `count`: all when count ≤ limit; otherwise the first, the last
// and limit − 2 distinct others drawn from rng (ascending).
std::vector<int> sample_indices(int count, int limit, std::mt19937_64& rng);

// For each matrix b in `which`: EXPECTs info[b] == 0, values ascending, and eigen_errors ≤
// eigen_tolerance; `vectors` (count·n·n, packed) may be null for values-only. Messages name
// `context`, the kind, n, b and the case seed. Returns the maximum errors over `which`.
template <class T>
EigenErrors expect_eigen_results(const EigenCase<T>& c, const T* vectors, const linalg::real_t<T>* values,
                                 const int* info, std::span<const int> which, const std::string& context);

}  // namespace covflow::test

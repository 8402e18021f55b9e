// Generators, LAPACK reference and checker for the heev suites; see eigen_cases.hpp.
#include "eigen_cases.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <limits>
#include <numbers>
#include <set>
#include <stdexcept>
#include <type_traits>

#include "test_support.hpp"

// Double-precision LAPACK for the reference eigenvalues and the random unitaries, declared as in
// linalg/common/blas.hpp: character arguments carry gfortran's hidden lengths.
extern "C" {
void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
            const int* lwork, int* info, std::size_t, std::size_t);
void zheev_(const char* jobz, const char* uplo, const int* n, std::complex<double>* a, const int* lda, double* w,
            std::complex<double>* work, const int* lwork, double* rwork, int* info, std::size_t, std::size_t);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work, const int* lwork,
             int* info);
void zgeqrf_(const int* m, const int* n, std::complex<double>* a, const int* lda, std::complex<double>* tau,
             std::complex<double>* work, const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau, double* work,
             const int* lwork, int* info);
void zungqr_(const int* m, const int* n, const int* k, std::complex<double>* a, const int* lda,
             const std::complex<double>* tau, std::complex<double>* work, const int* lwork, int* info);
}

namespace covflow::test {
namespace {

using linalg::is_complex_v;
using linalg::real_t;
using linalg::Uplo;
using cd = std::complex<double>;

// The double-precision twin of T in which matrices are built before they are rounded to T.
template <class T>
using wide_t = std::conditional_t<is_complex_v<T>, cd, double>;

// Accumulation type of the checker: comfortably more precise than T.
template <class T>
using accumulator_t = std::conditional_t<std::is_same_v<real_t<T>, float>, double, long double>;

template <class D>
D conj_of(const D& x) {
  if constexpr (is_complex_v<D>) return std::conj(x);
  else return x;
}

template <class T, class D>
T narrow(const D& x) {
  using R = real_t<T>;
  if constexpr (is_complex_v<T>) return T(static_cast<R>(std::real(x)), static_cast<R>(std::imag(x)));
  else return static_cast<T>(std::real(x));
}

void lapack_check(int info, const char* routine) {
  if (info != 0) throw std::runtime_error(std::string("eigen_cases: ") + routine + " returned info " + std::to_string(info));
}

// ---- random numbers ------------------------------------------------------------------------

// Standard normal, or standard complex normal (E|z|² = 1) for complex D.
template <class D>
D gaussian(std::mt19937_64& rng) {
  if constexpr (is_complex_v<D>) {
    std::normal_distribution<double> normal(0.0, std::sqrt(0.5));
    const double re = normal(rng);
    return D(re, normal(rng));
  } else {
    return std::normal_distribution<double>(0.0, 1.0)(rng);
  }
}

double uniform(double low, double high, std::mt19937_64& rng) {
  return std::uniform_real_distribution<double>(low, high)(rng);
}

// ---- LAPACK in double ----------------------------------------------------------------------

void geqrf(int n, double* a, double* tau) {
  int info = 0, query = -1;
  double size = 0;
  dgeqrf_(&n, &n, a, &n, tau, &size, &query, &info);
  int lwork = std::max(1, static_cast<int>(size));
  std::vector<double> work(lwork);
  dgeqrf_(&n, &n, a, &n, tau, work.data(), &lwork, &info);
  lapack_check(info, "dgeqrf");
}
void geqrf(int n, cd* a, cd* tau) {
  int info = 0, query = -1;
  cd size = 0;
  zgeqrf_(&n, &n, a, &n, tau, &size, &query, &info);
  int lwork = std::max(1, static_cast<int>(size.real()));
  std::vector<cd> work(lwork);
  zgeqrf_(&n, &n, a, &n, tau, work.data(), &lwork, &info);
  lapack_check(info, "zgeqrf");
}
void orgqr(int n, double* a, const double* tau) {
  int info = 0, query = -1;
  double size = 0;
  dorgqr_(&n, &n, &n, a, &n, tau, &size, &query, &info);
  int lwork = std::max(1, static_cast<int>(size));
  std::vector<double> work(lwork);
  dorgqr_(&n, &n, &n, a, &n, tau, work.data(), &lwork, &info);
  lapack_check(info, "dorgqr");
}
void orgqr(int n, cd* a, const cd* tau) {
  int info = 0, query = -1;
  cd size = 0;
  zungqr_(&n, &n, &n, a, &n, tau, &size, &query, &info);
  int lwork = std::max(1, static_cast<int>(size.real()));
  std::vector<cd> work(lwork);
  zungqr_(&n, &n, &n, a, &n, tau, work.data(), &lwork, &info);
  lapack_check(info, "zungqr");
}

// Eigenvalues only, ascending, of the Hermitian matrix `a` (lower triangle read, overwritten), by
// the QR-iteration driver — a different algorithm from the divide and conquer under test.
void eigenvalues(int n, double* a, double* w) {
  const char jobz = 'N', uplo = 'L';
  int info = 0, query = -1;
  double size = 0;
  dsyev_(&jobz, &uplo, &n, a, &n, w, &size, &query, &info, 1, 1);
  int lwork = std::max(1, static_cast<int>(size));
  std::vector<double> work(lwork);
  dsyev_(&jobz, &uplo, &n, a, &n, w, work.data(), &lwork, &info, 1, 1);
  lapack_check(info, "dsyev");
}
void eigenvalues(int n, cd* a, double* w) {
  const char jobz = 'N', uplo = 'L';
  int info = 0, query = -1;
  cd size = 0;
  std::vector<double> rwork(std::max(1, 3 * n - 2));
  zheev_(&jobz, &uplo, &n, a, &n, w, &size, &query, rwork.data(), &info, 1, 1);
  int lwork = std::max(1, static_cast<int>(size.real()));
  std::vector<cd> work(lwork);
  zheev_(&jobz, &uplo, &n, a, &n, w, work.data(), &lwork, rwork.data(), &info, 1, 1);
  lapack_check(info, "zheev");
}

// ---- building blocks -----------------------------------------------------------------------

// A Haar-distributed random unitary (orthogonal for real D), n×n column-major: Q of the QR of a
// Gaussian matrix, with the phases of R's diagonal moved into Q so that the distribution is
// uniform rather than biased by LAPACK's sign convention.
template <class D>
std::vector<D> random_unitary(int n, std::mt19937_64& rng) {
  std::vector<D> q(std::size_t(n) * n);
  for (auto& x : q) x = gaussian<D>(rng);
  std::vector<D> tau(n);
  geqrf(n, q.data(), tau.data());
  std::vector<D> phase(n);
  for (int j = 0; j < n; ++j) {
    const D r = q[j + std::size_t(j) * n];
    phase[j] = std::abs(r) > 0 ? r / std::abs(r) : D(1);
  }
  orgqr(n, q.data(), tau.data());
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) q[i + std::size_t(j) * n] *= phase[j];
  return q;
}

// y[0..len) += c · x[0..len), spelled out so complex products stay on the fast path.
inline void axpy(int len, double c, const double* x, double* y) {
  for (int i = 0; i < len; ++i) y[i] += c * x[i];
}
inline void axpy(int len, cd c, const cd* x, cd* y) {
  const auto* xs = reinterpret_cast<const double*>(x);
  auto* ys = reinterpret_cast<double*>(y);
  const double cr = c.real(), ci = c.imag();
  for (int i = 0; i < len; ++i) {
    const double xr = xs[2 * i], xi = xs[2 * i + 1];
    ys[2 * i] += cr * xr - ci * xi;
    ys[2 * i + 1] += cr * xi + ci * xr;
  }
}

// Lower triangle (i ≥ j) of U·diag(λ)·Uᴴ; the upper triangle is left 0.
template <class D>
std::vector<D> unitary_similarity(const std::vector<D>& u, const std::vector<double>& lambda, int n) {
  std::vector<D> a(std::size_t(n) * n, D(0));
  for (int j = 0; j < n; ++j)
    for (int k = 0; k < n; ++k) {
      const D c = lambda[k] * conj_of(u[j + std::size_t(k) * n]);
      if (c == D(0)) continue;
      axpy(n - j, c, u.data() + j + std::size_t(k) * n, a.data() + j + std::size_t(j) * n);
    }
  return a;
}

// Rounds the lower triangle of `lower` to T and mirrors it, so the stored matrix is exactly
// Hermitian with a real diagonal whatever rounding did.
template <class T, class D>
void store_hermitian(const std::vector<D>& lower, int n, T* out) {
  for (int j = 0; j < n; ++j) {
    out[j + std::size_t(j) * n] = narrow<T>(std::real(lower[j + std::size_t(j) * n]));
    for (int i = j + 1; i < n; ++i) {
      const T v = narrow<T>(lower[i + std::size_t(j) * n]);
      out[i + std::size_t(j) * n] = v;
      out[j + std::size_t(i) * n] = conj_of(v);
    }
  }
}

// ---- the spectra ---------------------------------------------------------------------------

// Several values each repeated n/4 times, and the rest 1e-9 apart around 1: exact multiplicity
// (invariant subspaces, not vectors, are determined) next to a cluster that is distinct in double
// but below float's resolution. Below n = 4 the whole spectrum is the tight cluster.
std::vector<double> clustered_spectrum(int n) {
  std::vector<double> lambda(n);
  const int multiplicity = n / 4;
  const double repeated[] = {-2.0, 0.5, 3.0};
  int k = 0;
  if (multiplicity > 0)
    for (double value : repeated)
      for (int m = 0; m < multiplicity; ++m) lambda[k++] = value;
  for (int c = 0; k < n; ++k, ++c) lambda[k] = 1.0 + c * 1e-9;
  return lambda;
}

// 10^0 … 10^−12, evenly in the exponent.
std::vector<double> graded_spectrum(int n) {
  std::vector<double> lambda(n, 1.0);
  for (int k = 1; k < n; ++k) lambda[k] = std::pow(10.0, -12.0 * k / (n - 1));
  return lambda;
}

// n/3 exact zeros (at least one from n = 2 on), the rest uniform in [1, 2].
std::vector<double> near_singular_spectrum(int n, std::mt19937_64& rng) {
  const int zeros = n >= 2 ? std::max(1, n / 3) : 0;
  std::vector<double> lambda(n, 0.0);
  for (int k = zeros; k < n; ++k) lambda[k] = uniform(1.0, 2.0, rng);
  return lambda;
}

// (G + Gᴴ)/2 with G standard (complex) Gaussian: GUE for complex, GOE for real.
template <class D>
std::vector<D> gaussian_hermitian(int n, std::mt19937_64& rng) {
  std::vector<D> g(std::size_t(n) * n);
  for (auto& x : g) x = gaussian<D>(rng);
  std::vector<D> lower(g.size(), D(0));
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i)
      lower[i + std::size_t(j) * n] = (g[i + std::size_t(j) * n] + conj_of(g[j + std::size_t(i) * n])) / 2.0;
  return lower;
}

// Hermitian tridiagonal with a standard normal diagonal and (complex) Gaussian off-diagonal.
template <class D>
std::vector<D> gaussian_tridiagonal(int n, std::mt19937_64& rng) {
  std::vector<D> lower(std::size_t(n) * n, D(0));
  for (int j = 0; j < n; ++j) {
    lower[j + std::size_t(j) * n] = gaussian<double>(rng);
    if (j + 1 < n) lower[j + 1 + std::size_t(j) * n] = gaussian<D>(rng);
  }
  return lower;
}

// Sample covariance R = X Xᴴ / K of a uniform linear array with half-wavelength spacing (steering
// a_m(θ) = exp(iπ m sin θ)): 2–4 sources at angles in [−60°, 60°] with powers 10–30 dB over unit
// noise, complex Gaussian signals and noise, K = 2n snapshots. For real D the real part Re(R) is
// returned: still symmetric positive semidefinite (Re R = (R + conj R)/2) with each source a rank-2
// term over the noise floor — the covariance of the in-phase channel alone, up to a factor 2.
template <class D>
std::vector<D> radar_covariance(int n, std::mt19937_64& rng) {
  const int sources = std::uniform_int_distribution<int>(2, 4)(rng);
  const int snapshots = 2 * n;
  std::vector<double> sine(sources), amplitude(sources);
  for (int s = 0; s < sources; ++s) {
    sine[s] = std::sin(uniform(-60.0, 60.0, rng) * std::numbers::pi / 180.0);
    amplitude[s] = std::sqrt(std::pow(10.0, uniform(10.0, 30.0, rng) / 10.0));
  }
  std::vector<cd> x(std::size_t(n) * snapshots);
  for (int k = 0; k < snapshots; ++k) {
    cd* column = x.data() + std::size_t(k) * n;
    for (int m = 0; m < n; ++m) column[m] = gaussian<cd>(rng);
    for (int s = 0; s < sources; ++s) {
      const cd signal = amplitude[s] * gaussian<cd>(rng);
      for (int m = 0; m < n; ++m) column[m] += signal * std::polar(1.0, std::numbers::pi * m * sine[s]);
    }
  }
  std::vector<cd> r(std::size_t(n) * n, cd(0));
  for (int j = 0; j < n; ++j)
    for (int k = 0; k < snapshots; ++k)
      axpy(n - j, std::conj(x[j + std::size_t(k) * n]) / double(snapshots), x.data() + j + std::size_t(k) * n,
           r.data() + j + std::size_t(j) * n);
  if constexpr (is_complex_v<D>) {
    return r;
  } else {
    std::vector<double> real_part(r.size());
    for (std::size_t e = 0; e < r.size(); ++e) real_part[e] = r[e].real();
    return real_part;
  }
}

// One matrix of `kind` into out (n×n), its reference eigenvalues into reference.
template <class T>
void make_matrix(SpectrumKind kind, int n, std::mt19937_64& rng, T* out, double* reference) {
  using D = wide_t<T>;
  std::vector<D> lower;
  switch (kind) {
    case SpectrumKind::random: lower = gaussian_hermitian<D>(n, rng); break;
    case SpectrumKind::clustered: lower = unitary_similarity(random_unitary<D>(n, rng), clustered_spectrum(n), n); break;
    case SpectrumKind::graded: lower = unitary_similarity(random_unitary<D>(n, rng), graded_spectrum(n), n); break;
    case SpectrumKind::near_singular: {
      const std::vector<double> lambda = near_singular_spectrum(n, rng);
      lower = unitary_similarity(random_unitary<D>(n, rng), lambda, n);
      break;
    }
    case SpectrumKind::tridiagonal: lower = gaussian_tridiagonal<D>(n, rng); break;
    case SpectrumKind::radar: lower = radar_covariance<D>(n, rng); break;
    case SpectrumKind::padded: {
      const int k = (n + 5) / 6;
      const std::vector<D> block = radar_covariance<D>(k, rng);
      lower.assign(std::size_t(n) * n, D(0));
      for (int j = 0; j < k; ++j)
        for (int i = 0; i < k; ++i) lower[i + std::size_t(j) * n] = block[i + std::size_t(j) * k];
      break;
    }
    case SpectrumKind::diagonal:
    case SpectrumKind::zero: lower.assign(std::size_t(n) * n, D(0)); break;
  }
  if (kind == SpectrumKind::diagonal)
    for (int j = 0; j < n; ++j) lower[j + std::size_t(j) * n] = gaussian<double>(rng);
  store_hermitian(lower, n, out);

  // Exact references where the spectrum is known exactly, LAPACK in double otherwise.
  if (kind == SpectrumKind::zero) {
    std::fill(reference, reference + n, 0.0);
  } else if (kind == SpectrumKind::diagonal) {
    for (int j = 0; j < n; ++j) reference[j] = static_cast<double>(std::real(out[j + std::size_t(j) * n]));
    std::sort(reference, reference + n);
  } else {
    std::vector<D> copy(std::size_t(n) * n);
    for (std::size_t e = 0; e < copy.size(); ++e) copy[e] = static_cast<D>(out[e]);
    eigenvalues(n, copy.data(), reference);
  }
}

template <class R>
void keep_worst(double& worst, R candidate) {
  const auto c = static_cast<double>(candidate);
  if (std::isnan(c) || c > worst) worst = std::isnan(worst) ? worst : c;
}

}  // namespace

// ---- public --------------------------------------------------------------------------------

std::string name(SpectrumKind kind) {
  switch (kind) {
    case SpectrumKind::random: return "random";
    case SpectrumKind::clustered: return "clustered";
    case SpectrumKind::graded: return "graded";
    case SpectrumKind::diagonal: return "diagonal";
    case SpectrumKind::tridiagonal: return "tridiagonal";
    case SpectrumKind::zero: return "zero";
    case SpectrumKind::radar: return "radar";
    case SpectrumKind::near_singular: return "near_singular";
    case SpectrumKind::padded: return "padded";
  }
  return "unknown";
}

const std::vector<SpectrumKind>& all_spectrum_kinds() {
  static const std::vector<SpectrumKind> kinds = {
      SpectrumKind::random,      SpectrumKind::clustered, SpectrumKind::graded, SpectrumKind::diagonal,
      SpectrumKind::tridiagonal, SpectrumKind::zero,      SpectrumKind::radar,  SpectrumKind::near_singular,
      SpectrumKind::padded};
  return kinds;
}

template <class T>
EigenCase<T> make_eigen_case(SpectrumKind kind, int n, int count, std::mt19937_64& rng) {
  return make_eigen_case<T>(kind, n, count, static_cast<std::uint64_t>(rng()));
}

template <class T>
EigenCase<T> make_eigen_case(SpectrumKind kind, int n, int count, std::uint64_t seed) {
  if (n < 1 || count < 0) throw std::invalid_argument("make_eigen_case: n must be ≥ 1 and count ≥ 0");
  EigenCase<T> c{kind, n, count, seed, std::vector<T>(std::size_t(count) * n * n),
                 std::vector<double>(std::size_t(count) * n)};
  std::mt19937_64 rng(seed);
  for (int b = 0; b < count; ++b)
    make_matrix<T>(kind, n, rng, c.a.data() + std::size_t(b) * n * n, c.reference_values.data() + std::size_t(b) * n);
  return c;
}

template <class T>
void garble_unread_triangle(std::vector<T>& a, int n, int count, Uplo read, T fill) {
  for (int b = 0; b < count; ++b) {
    T* m = a.data() + std::size_t(b) * n * n;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i)
        if (read == Uplo::lower ? i < j : i > j) m[i + std::size_t(j) * n] = fill;
  }
}

template <class T>
void garble_unread_triangle(std::vector<T>& a, int n, int count, Uplo read) {
  garble_unread_triangle(a, n, count, read, poison<T>());
}

template <class T>
EigenErrors eigen_errors(const T* a, const T* vectors, const real_t<T>* values, const double* reference, int n) {
  using A = accumulator_t<T>;
  const double unit = n * eps<T>();
  const std::size_t nn = std::size_t(n) * n;
  EigenErrors errors;

  A a_fro2 = 0;
  for (std::size_t e = 0; e < nn; ++e) a_fro2 += A(std::norm(a[e]));
  const double a_fro = static_cast<double>(std::sqrt(a_fro2));
  const bool zero_matrix = a_fro == 0;
  const double a_two = std::max({std::abs(reference[0]), std::abs(reference[n - 1]), a_fro / std::sqrt(double(n))});

  double value_error = 0;
  for (int k = 0; k < n; ++k) keep_worst(value_error, std::abs(static_cast<double>(values[k]) - reference[k]));
  if (std::isnan(value_error)) errors.values = value_error;
  else if (zero_matrix) errors.values = value_error == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  else errors.values = value_error / a_two / unit;
  if (vectors == nullptr) return errors;

  // Real and imaginary parts split once, kept in T's precision (they are exact there); every
  // product and sum below is formed in A. Both O(n³) loops are dot products of two contiguous
  // columns, so the accumulators stay in registers: the residual uses row i of A = conj(column i)
  // — A is exactly Hermitian, both triangles filled, as the generators store it.
  using R = real_t<T>;
  constexpr bool complex = is_complex_v<T>;
  std::vector<R> ar(nn), vr(nn), ai(complex ? nn : 0), vi(complex ? nn : 0);
  for (std::size_t e = 0; e < nn; ++e) {
    ar[e] = std::real(a[e]);
    vr[e] = std::real(vectors[e]);
    if constexpr (complex) {
      ai[e] = std::imag(a[e]);
      vi[e] = std::imag(vectors[e]);
    }
  }

  // ‖AV − VΛ‖_F: element (i, j) is Σ_k conj(a_ki) v_kj − λ_j v_ij.
  A residual2 = 0;
  for (int j = 0; j < n; ++j) {
    const std::size_t cj = std::size_t(j) * n;
    const A lambda = A(values[j]);
    for (int i = 0; i < n; ++i) {
      const std::size_t ci = std::size_t(i) * n;
      A sr = 0, si = 0;
      for (int k = 0; k < n; ++k) {
        sr += A(ar[ci + k]) * A(vr[cj + k]);
        if constexpr (complex) {
          sr += A(ai[ci + k]) * A(vi[cj + k]);
          si += A(ar[ci + k]) * A(vi[cj + k]) - A(ai[ci + k]) * A(vr[cj + k]);
        }
      }
      sr -= lambda * A(vr[cj + i]);
      if constexpr (complex) si -= lambda * A(vi[cj + i]);
      residual2 += sr * sr + si * si;
    }
  }
  // sqrt before narrowing: a residual of 1e-300 must not square to 0 in double.
  const double residual = static_cast<double>(std::sqrt(residual2));
  if (std::isnan(residual)) errors.residual = residual;
  else if (zero_matrix) errors.residual = residual == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  else errors.residual = residual / a_fro / unit;

  // ‖VᴴV − I‖_F from the upper triangle of the Gram matrix (the lower is its conjugate).
  A gram2 = 0;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i <= j; ++i) {
      const std::size_t ci = std::size_t(i) * n, cj = std::size_t(j) * n;
      A gr = 0, gi = 0;
      for (int k = 0; k < n; ++k) {
        gr += A(vr[ci + k]) * A(vr[cj + k]);
        if constexpr (complex) {
          gr += A(vi[ci + k]) * A(vi[cj + k]);
          gi += A(vr[ci + k]) * A(vi[cj + k]) - A(vi[ci + k]) * A(vr[cj + k]);
        }
      }
      if (i == j) gr -= 1;
      gram2 += (i == j ? 1 : 2) * (gr * gr + gi * gi);
    }
  errors.orthogonality = static_cast<double>(std::sqrt(gram2)) / unit;
  return errors;
}

EigenErrors max_errors(const EigenErrors& x, const EigenErrors& y) {
  EigenErrors out = x;
  keep_worst(out.residual, y.residual);
  keep_worst(out.orthogonality, y.orthogonality);
  keep_worst(out.values, y.values);
  return out;
}

std::vector<int> sample_indices(int count, int limit, std::mt19937_64& rng) {
  std::vector<int> out;
  if (count <= limit) {
    for (int b = 0; b < count; ++b) out.push_back(b);
    return out;
  }
  std::set<int> chosen = {0, count - 1};
  std::uniform_int_distribution<int> pick(1, count - 2);
  while (static_cast<int>(chosen.size()) < std::max(limit, 2)) chosen.insert(pick(rng));
  return {chosen.begin(), chosen.end()};
}

template <class T>
EigenErrors expect_eigen_results(const EigenCase<T>& c, const T* vectors, const real_t<T>* values, const int* info,
                                 std::span<const int> which, const std::string& context) {
  const int n = c.n;
  const std::size_t nn = std::size_t(n) * n;
  EigenErrors worst;
  for (const int b : which) {
    const std::string where = context + " [" + std::string(linalg::name(linalg::element_type_of<T>())) +
                              " kind=" + name(c.kind) + " n=" + std::to_string(n) + " b=" + std::to_string(b) +
                              " of " + std::to_string(c.count) + ", case seed " + std::to_string(c.seed) + "]";
    EXPECT_EQ(info[b], linalg::status::ok) << where << ": info";
    const real_t<T>* w = values + std::size_t(b) * n;
    for (int k = 0; k + 1 < n; ++k)
      if (!(w[k] <= w[k + 1])) {
        ADD_FAILURE() << where << ": eigenvalues not ascending at " << k << ": " << w[k] << " then " << w[k + 1];
        break;
      }
    const EigenErrors e = eigen_errors(c.matrix(b), vectors ? vectors + b * nn : nullptr, w, c.reference(b), n);
    if (vectors) {
      EXPECT_LE(e.residual, eigen_tolerance) << where << ": ‖AV − VΛ‖_F/‖A‖_F = " << e.residual << " n·ε";
      EXPECT_LE(e.orthogonality, eigen_tolerance) << where << ": ‖VᴴV − I‖_F = " << e.orthogonality << " n·ε";
    }
    EXPECT_LE(e.values, eigen_tolerance) << where << ": max |λ − λref|/‖A‖₂ = " << e.values << " n·ε";
    worst = max_errors(worst, e);
  }
  return worst;
}

#define COVFLOW_EIGEN_CASES(T)                                                                                 \
  template EigenCase<T> make_eigen_case<T>(SpectrumKind, int, int, std::mt19937_64&);                         \
  template EigenCase<T> make_eigen_case<T>(SpectrumKind, int, int, std::uint64_t);                            \
  template void garble_unread_triangle<T>(std::vector<T>&, int, int, Uplo);                                  \
  template void garble_unread_triangle<T>(std::vector<T>&, int, int, Uplo, T);                               \
  template EigenErrors eigen_errors<T>(const T*, const T*, const real_t<T>*, const double*, int);             \
  template EigenErrors expect_eigen_results<T>(const EigenCase<T>&, const T*, const real_t<T>*, const int*, \
                                               std::span<const int>, const std::string&);
COVFLOW_EIGEN_CASES(linalg::f32)
COVFLOW_EIGEN_CASES(linalg::f64)
COVFLOW_EIGEN_CASES(linalg::cf32)
COVFLOW_EIGEN_CASES(linalg::cf64)
#undef COVFLOW_EIGEN_CASES

}  // namespace covflow::test

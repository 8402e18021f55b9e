// Generators, double-precision LAPACK references and checkers for the QR and SVD suites; see
// lowrank_cases.hpp.
#include "lowrank_cases.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <numeric>
#include <stdexcept>

#include "test_support.hpp"

// Double-precision LAPACK (and ?latms from LAPACK's test-matrix library), declared as in
// linalg/common/blas.hpp: character arguments carry gfortran's hidden lengths.
extern "C" {
void dlatms_(const int* m, const int* n, const char* dist, int* iseed, const char* sym, double* d, const int* mode,
             const double* cond, const double* dmax, const int* kl, const int* ku, const char* pack, double* a,
             const int* lda, double* work, int* info, std::size_t, std::size_t, std::size_t);
void zlatms_(const int* m, const int* n, const char* dist, int* iseed, const char* sym, double* d, const int* mode,
             const double* cond, const double* dmax, const int* kl, const int* ku, const char* pack,
             std::complex<double>* a, const int* lda, std::complex<double>* work, int* info, std::size_t, std::size_t,
             std::size_t);
void dgesvj_(const char* joba, const char* jobu, const char* jobv, const int* m, const int* n, double* a,
             const int* lda, double* sva, const int* mv, double* v, const int* ldv, double* work, const int* lwork,
             int* info, std::size_t, std::size_t, std::size_t);
void zgesvj_(const char* joba, const char* jobu, const char* jobv, const int* m, const int* n,
             std::complex<double>* a, const int* lda, double* sva, const int* mv, std::complex<double>* v,
             const int* ldv, std::complex<double>* cwork, const int* lwork, double* rwork, const int* lrwork,
             int* info, std::size_t, std::size_t, std::size_t);
void dgesvd_(const char* jobu, const char* jobvt, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork, int* info,
             std::size_t, std::size_t);
void zgesvd_(const char* jobu, const char* jobvt, const int* m, const int* n, std::complex<double>* a, const int* lda,
             double* s, std::complex<double>* u, const int* ldu, std::complex<double>* vt, const int* ldvt,
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
using cd = std::complex<double>;

// Accumulation type of the checks: comfortably more precise than T.
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

template <class D, class T>
D widen(const T& x) {
  if constexpr (is_complex_v<D>) return D(static_cast<double>(std::real(x)), static_cast<double>(std::imag(x)));
  else return static_cast<double>(std::real(x));
}

void lapack_check(int info, const char* routine) {
  if (info != 0)
    throw std::runtime_error(std::string("lowrank_cases: ") + routine + " returned info " + std::to_string(info));
}

// NaN-sticky maximum.
void keep_worst(double& worst, double candidate) {
  if (std::isnan(candidate) || candidate > worst) worst = std::isnan(worst) ? worst : candidate;
}

// ---- random numbers ------------------------------------------------------------------------------

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

// ?latms's own generator seed: four integers in [0, 4095], the last odd.
std::array<int, 4> latms_seed(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> part(0, 4095);
  std::array<int, 4> seed{part(rng), part(rng), part(rng), part(rng)};
  seed[3] |= 1;
  return seed;
}

// ---- LAPACK in double ----------------------------------------------------------------------------

// An m×n matrix U·diag(σ)·Vᴴ from dlatms/zlatms: σ by `mode` with κ = cond and σ_max = 1, U and V
// random orthogonal (unitary).
template <class D>
std::vector<D> latms(int m, int n, int mode, double cond, std::mt19937_64& rng) {
  std::array<int, 4> seed = latms_seed(rng);
  const char dist = 'N', sym = 'N', pack = 'N';
  const double dmax = 1.0;
  const int kl = m - 1, ku = n - 1, lda = m;
  std::vector<double> d(std::min(m, n));
  std::vector<D> a(std::size_t(m) * n), work(3 * std::size_t(std::max(m, n)));
  int info = 0;
  if constexpr (is_complex_v<D>)
    zlatms_(&m, &n, &dist, seed.data(), &sym, d.data(), &mode, &cond, &dmax, &kl, &ku, &pack, a.data(), &lda,
            work.data(), &info, 1, 1, 1);
  else
    dlatms_(&m, &n, &dist, seed.data(), &sym, d.data(), &mode, &cond, &dmax, &kl, &ku, &pack, a.data(), &lda,
            work.data(), &info, 1, 1, 1);
  lapack_check(info, is_complex_v<D> ? "zlatms" : "dlatms");
  return a;
}

// Singular values, descending, of the m×n matrix a (m ≥ n; ld = m; overwritten) by dgesvd/zgesvd
// (bidiagonalisation: absolute accuracy, σ₁·ε).
template <class D>
std::vector<double> bidiagonal_values(int m, int n, D* a) {
  const char job = 'N';
  const int one = 1;
  std::vector<double> s(n);
  D unused{};
  int info = 0;
  const int lwork = 8 * (m + n) + 64;
  std::vector<D> work(lwork);
  if constexpr (is_complex_v<D>) {
    std::vector<double> rwork(5 * std::size_t(n));
    zgesvd_(&job, &job, &m, &n, a, &m, s.data(), &unused, &one, &unused, &one, work.data(), &lwork, rwork.data(), &info,
            1, 1);
  } else {
    dgesvd_(&job, &job, &m, &n, a, &m, s.data(), &unused, &one, &unused, &one, work.data(), &lwork, &info, 1, 1);
  }
  lapack_check(info, is_complex_v<D> ? "zgesvd" : "dgesvd");
  return s;
}

// Singular values, descending, of the m×n matrix a (m ≥ n; ld = m; overwritten) by dgesvj/zgesvj,
// with U requested so that the stopping threshold is the tighter √m·ε. On an exactly singular
// matrix ?gesvj may report no convergence (a column at the rounding level never turns orthogonal
// to the rest); the values then come from ?gesvd, whose absolute accuracy is what such a matrix's
// checks use.
template <class D>
std::vector<double> jacobi_values(int m, int n, D* a) {
  const std::vector<D> copy(a, a + std::size_t(m) * n);
  const char joba = 'G', jobu = 'U', jobv = 'N';
  const int mv = 0, ldv = 1;
  std::vector<double> sva(n);
  D unused_v{};
  int info = 0;
  double scale = 1;
  if constexpr (is_complex_v<D>) {
    const int lwork = std::max(6, m + n), lrwork = std::max(6, n);
    std::vector<D> cwork(lwork);
    std::vector<double> rwork(lrwork);
    zgesvj_(&joba, &jobu, &jobv, &m, &n, a, &m, sva.data(), &mv, &unused_v, &ldv, cwork.data(), &lwork, rwork.data(),
            &lrwork, &info, 1, 1, 1);
    scale = rwork[0];
  } else {
    const int lwork = std::max(6, m + n);
    std::vector<double> work(lwork);
    dgesvj_(&joba, &jobu, &jobv, &m, &n, a, &m, sva.data(), &mv, &unused_v, &ldv, work.data(), &lwork, &info, 1, 1,
            1);
    scale = work[0];
  }
  if (info > 0) {
    std::vector<D> again = copy;
    return bidiagonal_values(m, n, again.data());
  }
  lapack_check(info, is_complex_v<D> ? "zgesvj" : "dgesvj");
  for (double& s : sva) s *= scale;
  return sva;
}

// The singular values of the m×n matrix `a` in D (ld = m), through Aᴴ when m < n.
template <class D>
std::vector<double> singular_values(const std::vector<D>& a, int m, int n) {
  if (m >= n) {
    std::vector<D> copy = a;
    return jacobi_values(m, n, copy.data());
  }
  std::vector<D> transposed(a.size());
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) transposed[j + std::size_t(i) * n] = conj_of(a[i + std::size_t(j) * m]);
  return jacobi_values(n, m, transposed.data());
}

template <class D>
void geqrf(int m, int n, D* a, D* tau) {
  int info = 0, query = -1;
  D size = 0;
  if constexpr (is_complex_v<D>) zgeqrf_(&m, &n, a, &m, tau, &size, &query, &info);
  else dgeqrf_(&m, &n, a, &m, tau, &size, &query, &info);
  int lwork = std::max(1, static_cast<int>(std::real(size)));
  std::vector<D> work(lwork);
  if constexpr (is_complex_v<D>) zgeqrf_(&m, &n, a, &m, tau, work.data(), &lwork, &info);
  else dgeqrf_(&m, &n, a, &m, tau, work.data(), &lwork, &info);
  lapack_check(info, is_complex_v<D> ? "zgeqrf" : "dgeqrf");
}

// The first n columns of Q from the n reflectors of the m×n matrix a (ld = m).
template <class D>
void ungqr(int m, int n, D* a, const D* tau) {
  int info = 0, query = -1;
  D size = 0;
  if constexpr (is_complex_v<D>) zungqr_(&m, &n, &n, a, &m, tau, &size, &query, &info);
  else dorgqr_(&m, &n, &n, a, &m, tau, &size, &query, &info);
  int lwork = std::max(1, static_cast<int>(std::real(size)));
  std::vector<D> work(lwork);
  if constexpr (is_complex_v<D>) zungqr_(&m, &n, &n, a, &m, tau, work.data(), &lwork, &info);
  else dorgqr_(&m, &n, &n, a, &m, tau, work.data(), &lwork, &info);
  lapack_check(info, is_complex_v<D> ? "zungqr" : "dorgqr");
}

// ---- the generators (in D = double or complex<double>) --------------------------------------------

template <class D>
std::vector<D> gaussian_matrix(int m, int n, std::mt19937_64& rng) {
  std::vector<D> a(std::size_t(m) * n);
  for (auto& x : a) x = gaussian<D>(rng);
  return a;
}

// X·Yᴴ, X m×r and Y n×r Gaussian, scaled by 1/√r: rank r exactly (in exact arithmetic).
template <class D>
std::vector<D> low_rank(int m, int n, int rank, std::mt19937_64& rng) {
  std::vector<D> a(std::size_t(m) * n, D(0));
  if (rank == 0) return a;
  const std::vector<D> x = gaussian_matrix<D>(m, rank, rng), y = gaussian_matrix<D>(n, rank, rng);
  const double scale = 1.0 / std::sqrt(double(rank));
  for (int l = 0; l < rank; ++l)
    for (int j = 0; j < n; ++j) {
      const D c = scale * conj_of(y[j + std::size_t(l) * n]);
      for (int i = 0; i < m; ++i) a[i + std::size_t(j) * m] += x[i + std::size_t(l) * m] * c;
    }
  return a;
}

// B·D (m ≥ n) or D·B (m < n): B from ?latms (mode 3, κ = 10) with unit columns (rows), D geometric
// from 1 to 1/spread in a random order. Returns κ₂(B) as built (after the normalisation).
template <class D>
std::vector<D> graded(int m, int n, double spread, std::mt19937_64& rng, double& kappa_b) {
  std::vector<D> b = latms<D>(m, n, 3, 10.0, rng);
  const bool columns = m >= n;
  const int k = std::min(m, n), lines = k;  // D is k×k: columns of B when m ≥ n, rows otherwise
  for (int l = 0; l < lines; ++l) {
    double norm2 = 0;
    if (columns)
      for (int i = 0; i < m; ++i) norm2 += std::norm(b[i + std::size_t(l) * m]);
    else
      for (int j = 0; j < n; ++j) norm2 += std::norm(b[l + std::size_t(j) * m]);
    const double inverse = 1.0 / std::sqrt(norm2);
    if (columns)
      for (int i = 0; i < m; ++i) b[i + std::size_t(l) * m] *= inverse;
    else
      for (int j = 0; j < n; ++j) b[l + std::size_t(j) * m] *= inverse;
  }
  const std::vector<double> sigma_b = singular_values(b, m, n);
  kappa_b = sigma_b.back() > 0 ? sigma_b.front() / sigma_b.back() : std::numeric_limits<double>::infinity();

  std::vector<int> order(k);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (int l = 0; l < lines; ++l) {
    const double d = k > 1 ? std::pow(spread, -double(order[l]) / (k - 1)) : 1.0;
    if (columns)
      for (int i = 0; i < m; ++i) b[i + std::size_t(l) * m] *= d;
    else
      for (int j = 0; j < n; ++j) b[l + std::size_t(j) * m] *= d;
  }
  return b;
}

// Snapshots x_t = Σ_k a(θ_k)·s_k(t) + n_t of a uniform linear array, columns t = 0 … n−1; the real
// part for real D.
template <class D>
std::vector<D> radar_snapshots(int elements, int snapshots, const SnapshotScene& scene, std::mt19937_64& rng) {
  std::vector<Emitter> emitters = scene.sources;
  emitters.insert(emitters.end(), scene.jammers.begin(), scene.jammers.end());
  std::vector<cd> steering(std::size_t(elements) * emitters.size());
  std::vector<double> amplitude(emitters.size());
  for (std::size_t e = 0; e < emitters.size(); ++e) {
    const double sine = std::sin(emitters[e].angle_deg * std::numbers::pi / 180.0);
    amplitude[e] = std::sqrt(std::pow(10.0, emitters[e].power_db / 10.0));
    for (int i = 0; i < elements; ++i)
      steering[i + e * elements] = std::polar(1.0, 2.0 * std::numbers::pi * scene.spacing_wavelengths * i * sine);
  }
  std::vector<D> x(std::size_t(elements) * snapshots);
  std::vector<cd> column(elements);
  for (int t = 0; t < snapshots; ++t) {
    for (int i = 0; i < elements; ++i) column[i] = gaussian<cd>(rng);
    for (std::size_t e = 0; e < emitters.size(); ++e) {
      const cd signal = amplitude[e] * gaussian<cd>(rng);
      for (int i = 0; i < elements; ++i) column[i] += signal * steering[i + e * elements];
    }
    for (int i = 0; i < elements; ++i) {
      if constexpr (is_complex_v<D>) x[i + std::size_t(t) * elements] = column[i];
      else x[i + std::size_t(t) * elements] = column[i].real();
    }
  }
  return x;
}

// The points × points kernel matrix of spec (random points in the unit square, sorted by their
// first coordinate); complex: D·K·Dᴴ with random phases D.
template <class D>
std::vector<D> kernel_matrix(const KernelTiles& spec, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int count = spec.points;
  std::vector<std::pair<double, double>> x(count);
  for (auto& point : x) point = {unit(rng), unit(rng)};
  std::sort(x.begin(), x.end());
  std::vector<cd> phase(count, cd(1));
  if constexpr (is_complex_v<D>)
    for (cd& p : phase) p = std::polar(1.0, 2.0 * std::numbers::pi * unit(rng));
  std::vector<D> k(std::size_t(count) * count);
  for (int j = 0; j < count; ++j)
    for (int i = 0; i < count; ++i) {
      const double r = std::hypot(x[i].first - x[j].first, x[i].second - x[j].second) / spec.length;
      const double value = spec.matern ? (1 + std::sqrt(3.0) * r) * std::exp(-std::sqrt(3.0) * r) : std::exp(-r);
      if constexpr (is_complex_v<D>) k[i + std::size_t(j) * count] = phase[i] * value * std::conj(phase[j]);
      else k[i + std::size_t(j) * count] = value;
    }
  return k;
}

std::string format_number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", x);
  return text;
}

// ---- checks -------------------------------------------------------------------------------------

// A rows×cols matrix split into real and imaginary parts in the accumulation type A, column-major
// with ld = rows: every product below is formed in A, and complex products stay on the fast path.
template <class A>
struct Split {
  int rows = 0, cols = 0;
  bool complex = false;
  std::vector<A> re, im;
  std::size_t at(int i, int j) const { return std::size_t(i) + std::size_t(j) * rows; }
};

template <class A, class X>
Split<A> split(const X* x, std::int64_t ld, int rows, int cols) {
  Split<A> s{rows, cols, is_complex_v<X>, std::vector<A>(std::size_t(rows) * cols), {}};
  if (s.complex) s.im.resize(s.re.size());
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) {
      const X v = x[i + j * ld];
      s.re[s.at(i, j)] = A(std::real(v));
      if (s.complex) s.im[s.at(i, j)] = A(std::imag(v));
    }
  return s;
}

template <class A>
A frobenius2(const Split<A>& x) {
  A sum = 0;
  for (std::size_t e = 0; e < x.re.size(); ++e) sum += x.re[e] * x.re[e] + (x.complex ? x.im[e] * x.im[e] : A(0));
  return sum;
}

// ‖A − X·Y‖_F², column by column (axpy form).
template <class A>
A residual2(const Split<A>& a, const Split<A>& x, const Split<A>& y) {
  const bool complex = a.complex || x.complex || y.complex;
  std::vector<A> cr(a.rows), ci(a.rows);
  A sum = 0;
  for (int j = 0; j < a.cols; ++j) {
    for (int i = 0; i < a.rows; ++i) {
      cr[i] = a.re[a.at(i, j)];
      ci[i] = a.complex ? a.im[a.at(i, j)] : A(0);
    }
    for (int l = 0; l < x.cols; ++l) {
      const A yr = y.re[y.at(l, j)], yi = y.complex ? y.im[y.at(l, j)] : A(0);
      if (yr == 0 && yi == 0) continue;
      const A* xr = x.re.data() + x.at(0, l);
      if (x.complex) {
        const A* xi = x.im.data() + x.at(0, l);
        for (int i = 0; i < a.rows; ++i) {
          cr[i] -= xr[i] * yr - xi[i] * yi;
          ci[i] -= xr[i] * yi + xi[i] * yr;
        }
      } else {
        for (int i = 0; i < a.rows; ++i) {
          cr[i] -= xr[i] * yr;
          if (complex) ci[i] -= xr[i] * yi;
        }
      }
    }
    for (int i = 0; i < a.rows; ++i) sum += cr[i] * cr[i] + ci[i] * ci[i];
  }
  return sum;
}

// ‖XᴴX − I‖_F² from the upper triangle of the Gram matrix.
template <class A>
A gram_defect2(const Split<A>& x) {
  A sum = 0;
  for (int j = 0; j < x.cols; ++j)
    for (int i = 0; i <= j; ++i) {
      const A* ar = x.re.data() + x.at(0, i);
      const A* br = x.re.data() + x.at(0, j);
      A gr = 0, gi = 0;
      if (x.complex) {
        const A* ai = x.im.data() + x.at(0, i);
        const A* bi = x.im.data() + x.at(0, j);
        for (int r = 0; r < x.rows; ++r) {
          gr += ar[r] * br[r] + ai[r] * bi[r];
          gi += ar[r] * bi[r] - ai[r] * br[r];
        }
      } else {
        for (int r = 0; r < x.rows; ++r) gr += ar[r] * br[r];
      }
      if (i == j) gr -= 1;
      sum += (i == j ? 1 : 2) * (gr * gr + gi * gi);
    }
  return sum;
}

// error / (scale · unit), with scale = 0 (A = 0) meaning: 0 if the error is exactly 0, +∞ else.
double relative(double error, double scale, double unit) {
  if (std::isnan(error)) return error;
  if (scale == 0) return error == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return error / scale / unit;
}

template <class T, class A>
double r_diagonal_error(const Split<A>& r, const double* reference, double a_fro, double unit) {
  double worst = 0;
  for (int i = 0; i < std::min(r.rows, r.cols); ++i) {
    const A re = r.re[r.at(i, i)], im = r.complex ? r.im[r.at(i, i)] : A(0);
    const double magnitude = static_cast<double>(std::sqrt(re * re + im * im));
    keep_worst(worst, std::abs(magnitude - reference[i]));
  }
  return relative(worst, a_fro, unit);
}

template <class T, class A>
QrErrors qr_errors_split(const T* a, int m, int n, const Split<A>& q, const Split<A>& r, const double* reference) {
  const double unit = std::max(m, n) * eps<T>();
  const Split<A> original = split<A>(a, m, m, n);
  const double a_fro = static_cast<double>(std::sqrt(frobenius2(original)));
  QrErrors errors;
  errors.residual = relative(static_cast<double>(std::sqrt(residual2(original, q, r))), a_fro, unit);
  errors.orthogonality = static_cast<double>(std::sqrt(gram_defect2(q))) / unit;
  if (reference != nullptr) errors.r_diagonal = r_diagonal_error<T>(r, reference, a_fro, unit);
  return errors;
}

template <class T>
std::string where(const LowrankCase<T>& c, int b, const std::string& context) {
  return context + " [" + c.label() + " b=" + std::to_string(b) + "]";
}

}  // namespace

// ---- public --------------------------------------------------------------------------------------

std::string name(LowrankKind kind) {
  switch (kind) {
    case LowrankKind::random: return "random";
    case LowrankKind::latms: return "latms";
    case LowrankKind::rank_deficient: return "rank_deficient";
    case LowrankKind::graded: return "graded";
    case LowrankKind::radar: return "radar";
    case LowrankKind::kernel_tiles: return "kernel_tiles";
  }
  return "unknown";
}

LowrankSpec random_spec(int m, int n, int count) {
  LowrankSpec spec;
  spec.kind = LowrankKind::random;
  spec.m = m;
  spec.n = n;
  spec.count = count;
  return spec;
}

LowrankSpec latms_spec(int m, int n, int count, int mode, double cond) {
  LowrankSpec spec = random_spec(m, n, count);
  spec.kind = LowrankKind::latms;
  spec.mode = mode;
  spec.cond = cond;
  return spec;
}

LowrankSpec rank_deficient_spec(int m, int n, int count, int rank) {
  LowrankSpec spec = random_spec(m, n, count);
  spec.kind = LowrankKind::rank_deficient;
  spec.rank = rank;
  return spec;
}

LowrankSpec graded_spec(int m, int n, int count, double spread) {
  LowrankSpec spec = random_spec(m, n, count);
  spec.kind = LowrankKind::graded;
  spec.cond = spread;
  return spec;
}

LowrankSpec radar_spec(int elements, int snapshots, int count, SnapshotScene scene) {
  LowrankSpec spec = random_spec(elements, snapshots, count);
  spec.kind = LowrankKind::radar;
  spec.scene = std::move(scene);
  return spec;
}

LowrankSpec kernel_tiles_spec(int tile, int points, double length, bool matern) {
  const int blocks = tile > 0 ? points / tile : 0;
  LowrankSpec spec = random_spec(tile, tile, blocks * (blocks - 1));
  spec.kind = LowrankKind::kernel_tiles;
  spec.tiles = KernelTiles{points, length, matern};
  return spec;
}

std::string describe(const LowrankSpec& spec) {
  std::string text = name(spec.kind);
  switch (spec.kind) {
    case LowrankKind::latms: text += " mode " + std::to_string(spec.mode) + " κ=" + format_number(spec.cond); break;
    case LowrankKind::rank_deficient: text += " rank " + std::to_string(spec.rank); break;
    case LowrankKind::graded: text += " spread " + format_number(spec.cond); break;
    case LowrankKind::radar:
      text += " " + std::to_string(spec.scene.sources.size()) + " sources " +
              std::to_string(spec.scene.jammers.size()) + " jammers";
      break;
    case LowrankKind::kernel_tiles:
      text += std::string(spec.tiles.matern ? " matérn 3/2" : " exponential") + " ℓ=" + format_number(spec.tiles.length) +
              " of " + std::to_string(spec.tiles.points) + " points";
      break;
    case LowrankKind::random: break;
  }
  return text + " " + std::to_string(spec.m) + "×" + std::to_string(spec.n) + " ×" + std::to_string(spec.count);
}

template <class T>
std::string LowrankCase<T>::label() const {
  return std::string(linalg::name(linalg::element_type_of<T>())) + " " + describe(spec) + ", case seed " +
         std::to_string(seed);
}

template <class T>
LowrankCase<T> make_lowrank_case(const LowrankSpec& spec, std::mt19937_64& rng) {
  return make_lowrank_case<T>(spec, static_cast<std::uint64_t>(rng()));
}

template <class T>
LowrankCase<T> make_lowrank_case(const LowrankSpec& spec, std::uint64_t seed) {
  using D = precise_t<T>;
  const int m = spec.m, n = spec.n;
  if (m < 1 || n < 1 || spec.count < 0)
    throw std::invalid_argument("make_lowrank_case: m and n must be ≥ 1 and count ≥ 0 (" + describe(spec) + ")");
  if (spec.kind == LowrankKind::latms && (spec.mode < 1 || spec.mode > 5 || !(spec.cond >= 1)))
    throw std::invalid_argument("make_lowrank_case: latms needs mode 1–5 and cond ≥ 1 (" + describe(spec) + ")");
  if (spec.kind == LowrankKind::rank_deficient && (spec.rank < 0 || spec.rank > std::min(m, n)))
    throw std::invalid_argument("make_lowrank_case: rank must be in [0, min(m, n)] (" + describe(spec) + ")");
  if (spec.kind == LowrankKind::graded && !(spec.cond >= 1))
    throw std::invalid_argument("make_lowrank_case: graded needs a spread ≥ 1 (" + describe(spec) + ")");
  const int blocks = m > 0 ? spec.tiles.points / m : 0;
  if (spec.kind == LowrankKind::kernel_tiles &&
      (m != n || spec.tiles.points % m != 0 || spec.count > blocks * (blocks - 1) || !(spec.tiles.length > 0)))
    throw std::invalid_argument("make_lowrank_case: kernel_tiles needs square tiles that divide the points, at most "
                                "blocks·(blocks − 1) of them and ℓ > 0 (" + describe(spec) + ")");

  LowrankCase<T> c;
  c.spec = spec;
  c.seed = seed;
  c.a.resize(std::size_t(spec.count) * m * n);
  if (spec.kind == LowrankKind::graded) c.kappa_b.resize(spec.count);
  std::mt19937_64 rng(seed);
  const std::vector<D> kernel = spec.kind == LowrankKind::kernel_tiles ? kernel_matrix<D>(spec.tiles, rng) : std::vector<D>{};
  for (int b = 0; b < spec.count; ++b) {
    std::vector<D> matrix;
    switch (spec.kind) {
      case LowrankKind::kernel_tiles: {
        // Tile b of the off-diagonal ones, row by row of tiles: (I, J), J ≠ I.
        const int row = b / (blocks - 1), column = b % (blocks - 1) + (b % (blocks - 1) >= row ? 1 : 0);
        const std::size_t points = spec.tiles.points;
        matrix.resize(std::size_t(m) * m);
        for (int j = 0; j < m; ++j)
          for (int i = 0; i < m; ++i)
            matrix[i + std::size_t(j) * m] = kernel[std::size_t(row) * m + i + (std::size_t(column) * m + j) * points];
        break;
      }
      case LowrankKind::random: matrix = gaussian_matrix<D>(m, n, rng); break;
      case LowrankKind::latms: matrix = latms<D>(m, n, spec.mode, spec.cond, rng); break;
      case LowrankKind::rank_deficient: matrix = low_rank<D>(m, n, spec.rank, rng); break;
      case LowrankKind::graded: matrix = graded<D>(m, n, spec.cond, rng, c.kappa_b[b]); break;
      case LowrankKind::radar: matrix = radar_snapshots<D>(m, n, spec.scene, rng); break;
    }
    T* out = c.a.data() + std::size_t(b) * m * n;
    for (std::size_t e = 0; e < matrix.size(); ++e) out[e] = narrow<T>(matrix[e]);
  }
  return c;
}

template <class T>
std::vector<double> reference_singular_values(const T* a, int m, int n) {
  using D = precise_t<T>;
  std::vector<D> wide(std::size_t(m) * n);
  for (std::size_t e = 0; e < wide.size(); ++e) wide[e] = widen<D>(a[e]);
  return singular_values(wide, m, n);
}

template <class T>
std::vector<double> reference_r_diagonal(const T* a, int m, int n) {
  using D = precise_t<T>;
  std::vector<D> wide(std::size_t(m) * n);
  for (std::size_t e = 0; e < wide.size(); ++e) wide[e] = widen<D>(a[e]);
  const int k = std::min(m, n);
  std::vector<D> tau(k);
  geqrf(m, n, wide.data(), tau.data());
  std::vector<double> diagonal(k);
  for (int i = 0; i < k; ++i) diagonal[i] = std::abs(wide[i + std::size_t(i) * m]);
  return diagonal;
}

template <class T>
QrFactors<T> qr_factors(const T* factored, std::int64_t ld, const T* tau, int m, int n) {
  using D = precise_t<T>;
  const int k = std::min(m, n);
  QrFactors<T> f{m, n, k, std::vector<D>(std::size_t(m) * k), std::vector<D>(std::size_t(k) * n, D(0))};
  for (int j = 0; j < n; ++j)
    for (int i = 0; i <= std::min(j, k - 1); ++i) f.r[i + std::size_t(j) * k] = widen<D>(factored[i + j * ld]);
  for (int j = 0; j < k; ++j)
    for (int i = 0; i < m; ++i) f.q[i + std::size_t(j) * m] = widen<D>(factored[i + j * ld]);
  std::vector<D> wide_tau(k);
  for (int i = 0; i < k; ++i) wide_tau[i] = widen<D>(tau[i]);
  ungqr(m, k, f.q.data(), wide_tau.data());
  return f;
}

template <class T>
QrErrors qr_errors(const T* a, int m, int n, const T* factored, std::int64_t ld, const T* tau,
                   const double* reference_r_diagonal) {
  using A = accumulator_t<T>;
  const QrFactors<T> f = qr_factors(factored, ld, tau, m, n);
  return qr_errors_split<T>(a, m, n, split<A>(f.q.data(), m, m, f.k), split<A>(f.r.data(), f.k, f.k, n),
                            reference_r_diagonal);
}

template <class T>
QrErrors qr_errors_explicit(const T* a, int m, int n, const T* q, const T* r, const double* reference_r_diagonal) {
  using A = accumulator_t<T>;
  const int k = std::min(m, n);
  return qr_errors_split<T>(a, m, n, split<A>(q, m, m, k), split<A>(r, k, k, n), reference_r_diagonal);
}

template <class T>
double orthogonality_error(const T* q, std::int64_t ld, int rows, int cols) {
  using A = accumulator_t<T>;
  return static_cast<double>(std::sqrt(gram_defect2(split<A>(q, ld, rows, cols)))) / (std::max(rows, cols) * eps<T>());
}

template <class T>
SvdErrors svd_errors(const T* a, int m, int n, const real_t<T>* s, const T* u, const T* v,
                     const double* reference_values, double kappa_b) {
  using A = accumulator_t<T>;
  const int k = std::min(m, n);
  const double unit = std::max(m, n) * eps<T>();
  SvdErrors errors;

  double absolute = 0, relative_error = 0;
  for (int i = 0; i < k; ++i) {
    const double error = std::abs(static_cast<double>(s[i]) - reference_values[i]);
    keep_worst(absolute, error);
    if (kappa_b > 0) keep_worst(relative_error, relative(error, reference_values[i], 1.0));
  }
  errors.values = relative(absolute, reference_values[0], unit);
  if (kappa_b > 0) errors.relative_values = relative_error / (unit * kappa_b);

  if (u != nullptr) errors.u_orthogonality = static_cast<double>(std::sqrt(gram_defect2(split<A>(u, m, m, k)))) / unit;
  if (v != nullptr) errors.v_orthogonality = static_cast<double>(std::sqrt(gram_defect2(split<A>(v, n, n, k)))) / unit;
  if (u != nullptr && v != nullptr) {
    const Split<A> original = split<A>(a, m, m, n);
    const Split<A> left = split<A>(u, m, m, k);
    // Σ·Vᴴ, formed in A: σ_l·conj(v_jl).
    Split<A> right{k, n, is_complex_v<T>, std::vector<A>(std::size_t(k) * n), {}};
    if (right.complex) right.im.resize(right.re.size());
    for (int j = 0; j < n; ++j)
      for (int l = 0; l < k; ++l) {
        const T x = v[j + std::size_t(l) * n];
        right.re[right.at(l, j)] = A(s[l]) * A(std::real(x));
        if (right.complex) right.im[right.at(l, j)] = -A(s[l]) * A(std::imag(x));
      }
    const double a_fro = static_cast<double>(std::sqrt(frobenius2(original)));
    errors.residual = relative(static_cast<double>(std::sqrt(residual2(original, left, right))), a_fro, unit);
  }
  return errors;
}

QrErrors max_errors(const QrErrors& x, const QrErrors& y) {
  QrErrors out = x;
  keep_worst(out.residual, y.residual);
  keep_worst(out.orthogonality, y.orthogonality);
  keep_worst(out.r_diagonal, y.r_diagonal);
  return out;
}

SvdErrors max_errors(const SvdErrors& x, const SvdErrors& y) {
  SvdErrors out = x;
  keep_worst(out.residual, y.residual);
  keep_worst(out.u_orthogonality, y.u_orthogonality);
  keep_worst(out.v_orthogonality, y.v_orthogonality);
  keep_worst(out.values, y.values);
  keep_worst(out.relative_values, y.relative_values);
  return out;
}

template <class T>
QrErrors expect_geqrf_results(const LowrankCase<T>& c, const T* factored, const T* tau, const int* info,
                              std::span<const int> which, const std::string& context, double r_diagonal_condition) {
  const int m = c.m(), n = c.n(), k = c.k();
  QrErrors worst;
  for (const int b : which) {
    const std::string at = where(c, b, context);
    EXPECT_EQ(info[b], linalg::status::ok) << at << ": info";
    std::vector<double> reference;
    if (r_diagonal_condition > 0) reference = reference_r_diagonal(c.matrix(b), m, n);
    const QrErrors e = qr_errors(c.matrix(b), m, n, factored + std::size_t(b) * m * n, m, tau + std::size_t(b) * k,
                                 reference.empty() ? nullptr : reference.data());
    EXPECT_LE(e.residual, lowrank_tolerance) << at << ": ‖A − QR‖_F/‖A‖_F = " << e.residual << " n·ε";
    EXPECT_LE(e.orthogonality, lowrank_tolerance) << at << ": ‖QᴴQ − I‖_F = " << e.orthogonality << " n·ε";
    if (r_diagonal_condition > 0) {
      EXPECT_LE(e.r_diagonal, lowrank_tolerance * r_diagonal_condition)
          << at << ": max ||R_ii| − |R_ii|ref| / ‖A‖_F = " << e.r_diagonal << " n·ε (bound " << lowrank_tolerance
          << " × κ " << r_diagonal_condition << ")";
    }
    worst = max_errors(worst, e);
  }
  return worst;
}

template <class T>
SvdErrors expect_gesvj_results(const LowrankCase<T>& c, const real_t<T>* s, const T* u, const T* v,
                               const linalg::SvdInfo* info, std::span<const int> which, const std::string& context) {
  const int m = c.m(), n = c.n(), k = c.k();
  SvdErrors worst;
  for (const int b : which) {
    const std::string at = where(c, b, context);
    EXPECT_EQ(info[b].status, linalg::status::ok) << at << ": info.status (sweeps " << info[b].sweeps << ", off "
                                                  << info[b].off << ")";
    const real_t<T>* values = s + std::size_t(b) * k;
    for (int i = 0; i < k; ++i)
      if (!(values[i] >= 0) || (i + 1 < k && !(values[i] >= values[i + 1]))) {
        ADD_FAILURE() << at << ": singular values not non-negative and descending at " << i << ": " << values[i]
                      << (i + 1 < k ? " then " + std::to_string(values[i + 1]) : std::string());
        break;
      }
    const std::vector<double> reference = reference_singular_values(c.matrix(b), m, n);
    const double kappa_b = c.spec.kind == LowrankKind::graded ? c.kappa_b[b] : 0.0;
    const SvdErrors e = svd_errors(c.matrix(b), m, n, values, u ? u + std::size_t(b) * m * k : nullptr,
                                   v ? v + std::size_t(b) * n * k : nullptr, reference.data(), kappa_b);
    EXPECT_LE(e.values, lowrank_tolerance) << at << ": max |σ − σref|/σ₁ = " << e.values << " n·ε";
    if (u && v) {
      EXPECT_LE(e.residual, lowrank_tolerance) << at << ": ‖A − UΣVᴴ‖_F/‖A‖_F = " << e.residual << " n·ε";
    }
    if (u) {
      EXPECT_LE(e.u_orthogonality, lowrank_tolerance) << at << ": ‖UᴴU − I‖_F = " << e.u_orthogonality << " n·ε";
    }
    if (v) {
      EXPECT_LE(e.v_orthogonality, lowrank_tolerance) << at << ": ‖VᴴV − I‖_F = " << e.v_orthogonality << " n·ε";
    }
    if (kappa_b > 0) {
      EXPECT_LE(e.relative_values, lowrank_tolerance)
          << at << ": max |σ − σref|/σ = " << e.relative_values << " n·ε·κ(B), κ(B) = " << kappa_b;
    }
    worst = max_errors(worst, e);
  }
  return worst;
}

#define COVFLOW_LOWRANK_CASES(T)                                                                                  \
  template struct LowrankCase<T>;                                                                                 \
  template LowrankCase<T> make_lowrank_case<T>(const LowrankSpec&, std::mt19937_64&);                            \
  template LowrankCase<T> make_lowrank_case<T>(const LowrankSpec&, std::uint64_t);                               \
  template std::vector<double> reference_singular_values<T>(const T*, int, int);                                 \
  template std::vector<double> reference_r_diagonal<T>(const T*, int, int);                                      \
  template QrFactors<T> qr_factors<T>(const T*, std::int64_t, const T*, int, int);                               \
  template QrErrors qr_errors<T>(const T*, int, int, const T*, std::int64_t, const T*, const double*);           \
  template QrErrors qr_errors_explicit<T>(const T*, int, int, const T*, const T*, const double*);                \
  template double orthogonality_error<T>(const T*, std::int64_t, int, int);                                      \
  template SvdErrors svd_errors<T>(const T*, int, int, const real_t<T>*, const T*, const T*, const double*,      \
                                   double);                                                                      \
  template QrErrors expect_geqrf_results<T>(const LowrankCase<T>&, const T*, const T*, const int*,              \
                                            std::span<const int>, const std::string&, double);                   \
  template SvdErrors expect_gesvj_results<T>(const LowrankCase<T>&, const real_t<T>*, const T*, const T*,      \
                                             const linalg::SvdInfo*, std::span<const int>, const std::string&);
COVFLOW_LOWRANK_CASES(linalg::f32)
COVFLOW_LOWRANK_CASES(linalg::f64)
COVFLOW_LOWRANK_CASES(linalg::cf32)
COVFLOW_LOWRANK_CASES(linalg::cf64)
#undef COVFLOW_LOWRANK_CASES

}  // namespace covflow::test

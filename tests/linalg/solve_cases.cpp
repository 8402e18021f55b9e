// Generators, LAPACK references and checkers for the LU, Cholesky and least-squares suites; see
// solve_cases.hpp.
#include "solve_cases.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <type_traits>

#include "lowrank_cases.hpp"
#include "test_support.hpp"

// LAPACK's LU in T, declared as in linalg/common/blas.hpp.
extern "C" {
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void cgetrf_(const int* m, const int* n, std::complex<float>* a, const int* lda, int* ipiv, int* info);
void zgetrf_(const int* m, const int* n, std::complex<double>* a, const int* lda, int* ipiv, int* info);
}

namespace covflow::test {
namespace {

using linalg::Batch;
using linalg::is_complex_v;
using linalg::Op;
using linalg::real_t;
using linalg::Uplo;

// ---- element helpers -----------------------------------------------------------------------------

// The precision in which the checks form products: comfortably more precise than T.
template <class T>
using wide_real_t = std::conditional_t<std::is_same_v<real_t<T>, float>, double, long double>;
template <class T>
using wide_t = std::conditional_t<is_complex_v<T>, std::complex<wide_real_t<T>>, wide_real_t<T>>;

template <class V>
V conj_of(const V& x) {
  if constexpr (is_complex_v<V>) return std::conj(x);
  else return x;
}

template <class V>
real_t<V> abs2(const V& x) {
  if constexpr (is_complex_v<V>) return x.real() * x.real() + x.imag() * x.imag();
  else return x * x;
}

// Between element types of any precision (complex to real takes the real part).
template <class To, class From>
To convert(const From& x) {
  using R = real_t<To>;
  if constexpr (is_complex_v<To>) return To(static_cast<R>(std::real(x)), static_cast<R>(std::imag(x)));
  else return static_cast<To>(std::real(x));
}

template <class T>
T quiet_nan() {
  return T(std::numeric_limits<real_t<T>>::quiet_NaN());
}

template <class T>
bool is_finite(const T& x) {
  return std::isfinite(std::real(x)) && std::isfinite(std::imag(x));
}

template <class T>
bool is_nan(const T& x) {
  return std::isnan(std::real(x)) || std::isnan(std::imag(x));
}

// error / (scale · unit); scale = 0 means: 0 if the error is exactly 0, +∞ otherwise.
double relative(double error, double scale, double unit) {
  if (std::isnan(error)) return error;
  if (scale == 0) return error == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return error / scale / unit;
}

// ---- dense matrices in the checks' precision -----------------------------------------------------

template <class V>
struct Dense {
  int rows = 0, cols = 0;
  std::vector<V> v;
  Dense(int r, int c) : rows(r), cols(c), v(std::size_t(r) * c, V(0)) {}
  V& operator()(int i, int j) { return v[std::size_t(i) + std::size_t(j) * rows]; }
  const V& operator()(int i, int j) const { return v[std::size_t(i) + std::size_t(j) * rows]; }
};

template <class V, class T>
Dense<V> widen(const T* x, std::int64_t ld, int rows, int cols) {
  Dense<V> out(rows, cols);
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) out(i, j) = convert<V>(x[i + j * ld]);
  return out;
}

// op(x): as is, transposed or conjugate-transposed.
template <class V>
Dense<V> apply_op(Op op, const Dense<V>& x) {
  if (op == Op::none) return x;
  Dense<V> out(x.cols, x.rows);
  for (int j = 0; j < x.cols; ++j)
    for (int i = 0; i < x.rows; ++i) out(j, i) = op == Op::conj_trans ? conj_of(x(i, j)) : x(i, j);
  return out;
}

template <class V>
Dense<V> product(const Dense<V>& x, const Dense<V>& y) {
  Dense<V> out(x.rows, y.cols);
  for (int j = 0; j < y.cols; ++j)
    for (int l = 0; l < x.cols; ++l) {
      const V scale = y(l, j);
      if (scale == V(0)) continue;
      for (int i = 0; i < x.rows; ++i) out(i, j) += x(i, l) * scale;
    }
  return out;
}

template <class V>
Dense<V> difference(Dense<V> x, const Dense<V>& y) {
  for (std::size_t e = 0; e < x.v.size(); ++e) x.v[e] -= y.v[e];
  return x;
}

// ‖column j‖₂ (j ≥ 0, rows first … rows − 1) or ‖x‖_F (j < 0), in double.
template <class V>
double norm(const Dense<V>& x, int j = -1, int first = 0) {
  real_t<V> sum = 0;
  for (int c = j < 0 ? 0 : j; c < (j < 0 ? x.cols : j + 1); ++c)
    for (int i = first; i < x.rows; ++i) sum += abs2(x(i, c));
  return static_cast<double>(std::sqrt(sum));
}

// ---- generators (in D = double or complex<double>) -----------------------------------------------

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

// Writes the Hermitian matrix whose lower triangle `lower` holds (n×n, ld n) to out (packed) in T:
// the upper triangle the exact conjugate of the rounded lower one, the diagonal real.
template <class T, class D>
void store_hermitian(const std::vector<D>& lower, int n, T* out) {
  for (int j = 0; j < n; ++j) {
    out[j + std::size_t(j) * n] = T(static_cast<real_t<T>>(std::real(lower[j + std::size_t(j) * n])));
    for (int i = j + 1; i < n; ++i) {
      const T x = convert<T>(lower[i + std::size_t(j) * n]);
      out[i + std::size_t(j) * n] = x;
      out[j + std::size_t(i) * n] = conj_of(x);
    }
  }
}

// The lower triangle of G·Gᴴ (n×n, ld n), in D.
template <class D>
std::vector<D> gram_lower(const D* g, int n) {
  std::vector<D> a(std::size_t(n) * n, D(0));
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i) {
      D sum = D(0);
      for (int l = 0; l < n; ++l) sum += g[i + std::size_t(l) * n] * conj_of(g[j + std::size_t(l) * n]);
      a[i + std::size_t(j) * n] = sum;
    }
  return a;
}

// The lower triangle of L·D·Lᴴ with L = I + N·0.3/√n (N strictly lower Gaussian, so ‖L − I‖₂ ≈
// 0.6) and D as described for cholesky_fails_at.
template <class D>
std::vector<D> indefinite_at(int n, int minor, std::mt19937_64& rng) {
  std::vector<D> l(std::size_t(n) * n, D(0));
  const double scale = 0.3 / std::sqrt(double(n));
  for (int j = 0; j < n; ++j) {
    l[j + std::size_t(j) * n] = D(1);
    for (int i = j + 1; i < n; ++i) l[i + std::size_t(j) * n] = scale * gaussian<D>(rng);
  }
  std::uniform_real_distribution<double> uniform(1.0, 2.0);
  std::vector<double> d(n);
  for (int j = 0; j < n; ++j) d[j] = j == minor - 1 ? -1.0 : uniform(rng);
  std::vector<D> a(std::size_t(n) * n, D(0));
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i) {
      D sum = D(0);
      for (int p = 0; p <= j; ++p) sum += l[i + std::size_t(p) * n] * d[p] * conj_of(l[j + std::size_t(p) * n]);
      a[i + std::size_t(j) * n] = sum;
    }
  return a;
}

std::string format_number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", x);
  return text;
}

void require(bool ok, const std::string& why, const SolveSpec& spec) {
  if (!ok) throw std::invalid_argument("make_solve_case: " + why + " (" + describe(spec) + ")");
}

// ---- LAPACK in T ----------------------------------------------------------------------------------

void getrf(int n, float* a, int* ipiv, int* info) { sgetrf_(&n, &n, a, &n, ipiv, info); }
void getrf(int n, double* a, int* ipiv, int* info) { dgetrf_(&n, &n, a, &n, ipiv, info); }
void getrf(int n, std::complex<float>* a, int* ipiv, int* info) { cgetrf_(&n, &n, a, &n, ipiv, info); }
void getrf(int n, std::complex<double>* a, int* ipiv, int* info) { zgetrf_(&n, &n, a, &n, ipiv, info); }

template <class T>
std::string where(const SolveCase<T>& c, int b, const std::string& context) {
  return context + " [" + c.label() + " b=" + std::to_string(b) + "]";
}

}  // namespace

// ---- public --------------------------------------------------------------------------------------

std::string name(SolveKind kind) {
  switch (kind) {
    case SolveKind::random: return "random";
    case SolveKind::latms: return "latms";
    case SolveKind::hpd: return "hpd";
    case SolveKind::wilkinson: return "wilkinson";
    case SolveKind::permuted_identity: return "permuted_identity";
    case SolveKind::singular_column: return "singular_column";
    case SolveKind::cholesky_fails_at: return "cholesky_fails_at";
    case SolveKind::non_finite: return "non_finite";
    case SolveKind::dominant: return "dominant";
  }
  return "unknown";
}

SolveSpec SolveSpec::random(int m, int n, int count) {
  SolveSpec spec;
  spec.m = m;
  spec.n = n;
  spec.count = count;
  return spec;
}

SolveSpec SolveSpec::latms(int m, int n, int count, int mode, double cond) {
  SolveSpec spec = random(m, n, count);
  spec.kind = SolveKind::latms;
  spec.mode = mode;
  spec.cond = cond;
  return spec;
}

SolveSpec SolveSpec::hpd(int n, int count, double cond, int mode) {
  SolveSpec spec = latms(n, n, count, mode, cond);
  spec.kind = SolveKind::hpd;
  return spec;
}

SolveSpec SolveSpec::wilkinson(int n, int count) {
  SolveSpec spec = random(n, n, count);
  spec.kind = SolveKind::wilkinson;
  return spec;
}

SolveSpec SolveSpec::permuted_identity(int n, int count) {
  SolveSpec spec = random(n, n, count);
  spec.kind = SolveKind::permuted_identity;
  return spec;
}

SolveSpec SolveSpec::singular_column(int m, int n, int count, int column) {
  SolveSpec spec = random(m, n, count);
  spec.kind = SolveKind::singular_column;
  spec.index = column;
  return spec;
}

SolveSpec SolveSpec::cholesky_fails_at(int n, int count, int minor) {
  SolveSpec spec = random(n, n, count);
  spec.kind = SolveKind::cholesky_fails_at;
  spec.index = minor;
  return spec;
}

SolveSpec SolveSpec::non_finite(int n, int count, int position) {
  SolveSpec spec = hpd(n, count, 10.0);
  spec.kind = SolveKind::non_finite;
  spec.index = position;
  return spec;
}

SolveSpec SolveSpec::dominant(int n, int count) {
  SolveSpec spec = random(n, n, count);
  spec.kind = SolveKind::dominant;
  return spec;
}

std::string describe(const SolveSpec& spec) {
  std::string text = name(spec.kind);
  switch (spec.kind) {
    case SolveKind::latms:
    case SolveKind::hpd: text += " mode " + std::to_string(spec.mode) + " κ=" + format_number(spec.cond); break;
    case SolveKind::singular_column: text += " column " + std::to_string(spec.index); break;
    case SolveKind::cholesky_fails_at: text += " minor " + std::to_string(spec.index); break;
    case SolveKind::non_finite: text += " NaN at (" + std::to_string(spec.index) + ", " + std::to_string(spec.index) + ")"; break;
    default: break;
  }
  return text + " " + std::to_string(spec.m) + "×" + std::to_string(spec.n) + " ×" + std::to_string(spec.count);
}

template <class T>
std::string SolveCase<T>::label() const {
  return std::string(linalg::name(linalg::element_type_of<T>())) + " " + describe(spec) + ", case seed " +
         std::to_string(seed);
}

template <class T>
SolveCase<T> make_solve_case(const SolveSpec& spec, std::mt19937_64& rng) {
  return make_solve_case<T>(spec, static_cast<std::uint64_t>(rng()));
}

template <class T>
SolveCase<T> make_solve_case(const SolveSpec& spec, std::uint64_t seed) {
  using D = precise_t<T>;
  const int m = spec.m, n = spec.n;
  require(m >= 1 && n >= 1 && spec.count >= 0, "m and n must be ≥ 1 and count ≥ 0", spec);
  const bool rectangular =
      spec.kind == SolveKind::random || spec.kind == SolveKind::latms || spec.kind == SolveKind::singular_column;
  require(rectangular || m == n, "this kind is square", spec);
  require(spec.kind != SolveKind::singular_column || (m >= n && spec.index >= 0 && spec.index < n),
          "singular_column needs m ≥ n and 0 ≤ column < n", spec);
  require(spec.kind != SolveKind::cholesky_fails_at || (spec.index >= 1 && spec.index <= n),
          "cholesky_fails_at needs 1 ≤ minor ≤ n", spec);
  require(spec.kind != SolveKind::non_finite || (spec.index >= 0 && spec.index < n),
          "non_finite needs 0 ≤ position < n", spec);
  require((spec.kind != SolveKind::latms && spec.kind != SolveKind::hpd && spec.kind != SolveKind::non_finite) ||
              (spec.mode >= 1 && spec.mode <= 5 && spec.cond >= 1),
          "latms and hpd need mode 1–5 and cond ≥ 1", spec);

  SolveCase<T> c;
  c.spec = spec;
  c.seed = seed;
  const std::size_t mn = std::size_t(m) * n;
  c.a.assign(mn * spec.count, T(0));
  std::mt19937_64 rng(seed);
  switch (spec.kind) {
    case SolveKind::random:
    case SolveKind::singular_column:
      for (T& x : c.a) x = convert<T>(gaussian<D>(rng));
      if (spec.kind == SolveKind::singular_column) {
        for (int b = 0; b < spec.count; ++b) std::fill_n(c.a.data() + b * mn + std::size_t(spec.index) * m, m, T(0));
        c.expected_info = spec.index + 1;
      }
      break;
    case SolveKind::latms: {
      const LowrankCase<D> g = make_lowrank_case<D>(latms_spec(m, n, spec.count, spec.mode, spec.cond), rng);
      for (std::size_t e = 0; e < c.a.size(); ++e) c.a[e] = convert<T>(g.a[e]);
      break;
    }
    case SolveKind::hpd:
    case SolveKind::non_finite: {
      const LowrankCase<D> g =
          make_lowrank_case<D>(latms_spec(n, n, spec.count, spec.mode, std::sqrt(spec.cond)), rng);
      for (int b = 0; b < spec.count; ++b) store_hermitian(gram_lower(g.matrix(b), n), n, c.a.data() + b * mn);
      if (spec.kind == SolveKind::non_finite) {
        for (int b = 0; b < spec.count; ++b) c.a[b * mn + std::size_t(spec.index) * (n + 1)] = quiet_nan<T>();
        c.expected_info = linalg::status::non_finite_input;
      }
      break;
    }
    case SolveKind::wilkinson:
      for (int b = 0; b < spec.count; ++b)
        for (int j = 0; j < n; ++j)
          for (int i = 0; i < n; ++i)
            c.a[b * mn + i + std::size_t(j) * n] = T(i == j || j == n - 1 ? 1 : i > j ? -1 : 0);
      break;
    case SolveKind::permuted_identity: {
      std::vector<int> order(n);
      for (int b = 0; b < spec.count; ++b) {
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        for (int i = 0; i < n; ++i) c.a[b * mn + i + std::size_t(order[i]) * n] = T(1);
      }
      break;
    }
    case SolveKind::cholesky_fails_at:
      for (int b = 0; b < spec.count; ++b) store_hermitian(indefinite_at<D>(n, spec.index, rng), n, c.a.data() + b * mn);
      c.expected_info = spec.index;
      break;
    case SolveKind::dominant: {
      std::uniform_real_distribution<double> diagonal(1.0, 2.0), part(-1.0, 1.0);
      const double scale = 1.0 / (2.0 * n) / (is_complex_v<T> ? std::sqrt(2.0) : 1.0);
      for (int b = 0; b < spec.count; ++b) {
        T* out = c.a.data() + b * mn;
        for (int j = 0; j < n; ++j) {
          out[j + std::size_t(j) * n] = T(static_cast<real_t<T>>(diagonal(rng)));
          for (int i = j + 1; i < n; ++i) {
            D x;
            if constexpr (is_complex_v<D>) x = D(part(rng), part(rng)) * scale;
            else x = part(rng) * scale;
            out[i + std::size_t(j) * n] = convert<T>(x);
            out[j + std::size_t(i) * n] = conj_of(convert<T>(x));
          }
        }
      }
      break;
    }
  }
  return c;
}

template <class T>
std::vector<T> spread_batch(const T* packed, int rows, int cols, int count, std::int64_t ld, std::int64_t stride,
                            T pad) {
  std::vector<T> out(std::size_t(stride) * count, pad);
  for (int b = 0; b < count; ++b)
    for (int j = 0; j < cols; ++j)
      std::copy_n(packed + (std::size_t(b) * cols + j) * rows, rows, out.data() + b * stride + j * ld);
  return out;
}

template <class T>
LapackLu<T> lapack_getrf(const T* a, std::int64_t ld, int n) {
  LapackLu<T> out{std::vector<T>(std::size_t(n) * n), std::vector<int>(n), 0};
  for (int j = 0; j < n; ++j) std::copy_n(a + j * ld, n, out.lu.data() + std::size_t(j) * n);
  getrf(n, out.lu.data(), out.ipiv.data(), &out.info);
  if (out.info < 0) throw std::runtime_error("solve_cases: ?getrf rejected argument " + std::to_string(-out.info));
  return out;
}

template <class T>
double lu_error(const T* a, std::int64_t ld_a, int n, const T* lu, std::int64_t ld_lu, const int* ipiv) {
  using V = wide_t<T>;
  Dense<V> pa = widen<V>(a, ld_a, n, n);
  const double a_norm = norm(pa);
  for (int i = 0; i < n; ++i) {
    const int p = ipiv[i] - 1;
    if (p < 0 || p >= n) return std::numeric_limits<double>::infinity();
    if (p != i)
      for (int j = 0; j < n; ++j) std::swap(pa(i, j), pa(p, j));
  }
  Dense<V> l(n, n), u(n, n);
  for (int j = 0; j < n; ++j) {
    l(j, j) = V(1);
    for (int i = 0; i < n; ++i) {
      const V x = convert<V>(lu[i + j * ld_lu]);
      if (i > j) l(i, j) = x;
      else u(i, j) = x;
    }
  }
  return relative(norm(difference(pa, product(l, u))), a_norm, n * eps<T>());
}

template <class T>
double cholesky_error(Uplo uplo, const T* a, std::int64_t ld_a, int n, const T* factor, std::int64_t ld_factor,
                      int order) {
  using V = wide_t<T>;
  const int k = std::min(order, n);
  if (k <= 0) return 0;
  const bool lower = uplo == Uplo::lower;
  Dense<V> hermitian(k, k), triangle(k, k);
  for (int j = 0; j < k; ++j)
    for (int i = 0; i < k; ++i) {
      const bool stored = lower ? i >= j : i <= j;
      if (i == j) hermitian(i, j) = V(std::real(convert<V>(a[i + j * ld_a])));
      else hermitian(i, j) = stored ? convert<V>(a[i + j * ld_a]) : conj_of(convert<V>(a[j + i * ld_a]));
      if (stored) triangle(i, j) = convert<V>(factor[i + j * ld_factor]);
    }
  const Dense<V> reconstructed = lower ? product(triangle, apply_op(Op::conj_trans, triangle))
                                       : product(apply_op(Op::conj_trans, triangle), triangle);
  return relative(norm(difference(hermitian, reconstructed)), norm(hermitian), k * eps<T>());
}

template <class T>
double solve_residual(Op op, const T* a, std::int64_t ld_a, int n, const T* x, std::int64_t ld_x, const T* b,
                      std::int64_t ld_b, int nrhs) {
  using V = wide_t<T>;
  const Dense<V> matrix = widen<V>(a, ld_a, n, n), solution = widen<V>(x, ld_x, n, nrhs);
  const Dense<V> rhs = widen<V>(b, ld_b, n, nrhs);
  const Dense<V> residual = difference(product(apply_op(op, matrix), solution), rhs);
  return relative(norm(residual), norm(matrix) * norm(solution) + norm(rhs), n * eps<T>());
}

template <class T>
LeastSquaresErrors least_squares_errors(const T* a, std::int64_t ld_a, int m, int n, const T* factored,
                                        std::int64_t ld_factored, const T* b, std::int64_t ld_b, const T* qhb,
                                        std::int64_t ld_qhb, int nrhs) {
  using V = wide_t<T>;
  const double unit = std::max(m, n) * eps<T>();
  const Dense<V> matrix = widen<V>(a, ld_a, m, n);
  const double a_norm = norm(matrix);
  Dense<V> r(n, n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i <= j; ++i) r(i, j) = convert<V>(factored[i + j * ld_factored]);
  LeastSquaresErrors errors;
  errors.r_gram = relative(norm(difference(product(apply_op(Op::conj_trans, matrix), matrix),
                                           product(apply_op(Op::conj_trans, r), r))),
                           a_norm * a_norm, unit);
  if (nrhs == 0) return errors;

  const Dense<V> rhs = widen<V>(b, ld_b, m, nrhs), transformed = widen<V>(qhb, ld_qhb, m, nrhs);
  const Dense<V> x = widen<V>(qhb, ld_qhb, n, nrhs);
  const Dense<V> residual = difference(product(matrix, x), rhs);
  errors.optimality = relative(norm(product(apply_op(Op::conj_trans, matrix), residual)),
                               a_norm * (a_norm * norm(x) + norm(rhs)), unit);
  for (int j = 0; j < nrhs; ++j) {
    const double gap = std::abs(norm(residual, j) - norm(transformed, j, n));
    errors.residual_norm = worst_of(errors.residual_norm, relative(gap, a_norm * norm(x, j) + norm(rhs, j), unit));
  }
  return errors;
}

template <class T>
bool other_triangle_unchanged(Uplo uplo, const T* before, std::int64_t ld_before, const T* after,
                              std::int64_t ld_after, int n) {
  for (int j = 0; j < n; ++j) {
    const int first = uplo == Uplo::lower ? 0 : j + 1, last = uplo == Uplo::lower ? j : n;
    if (last > first &&
        std::memcmp(before + j * ld_before + first, after + j * ld_after + first, sizeof(T) * (last - first)) != 0)
      return false;
  }
  return true;
}

template <class T>
bool bitwise_equal(const T* x, std::int64_t ld_x, const T* y, std::int64_t ld_y, int rows, int cols) {
  for (int j = 0; j < cols; ++j)
    if (std::memcmp(x + j * ld_x, y + j * ld_y, sizeof(T) * rows) != 0) return false;
  return true;
}

double worst_of(double x, double y) {
  if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<double>::quiet_NaN();
  return std::max(x, y);
}

LeastSquaresErrors worst_of(const LeastSquaresErrors& x, const LeastSquaresErrors& y) {
  return {worst_of(x.optimality, y.optimality), worst_of(x.r_gram, y.r_gram),
          worst_of(x.residual_norm, y.residual_norm)};
}

template <class T>
double expect_getrf_results(const SolveCase<T>& c, Batch<const T> lu, const int* ipiv, const int* info,
                            const std::string& context) {
  const int n = c.n();
  double worst = 0;
  for (int b = 0; b < c.count(); ++b) {
    const std::string at = where(c, b, context);
    const T* factors = lu.matrix(b);
    const int* pivots = ipiv + std::size_t(b) * n;
    EXPECT_EQ(info[b], c.expected_info) << at << ": info";
    if (c.expected_info == linalg::status::non_finite_input) {
      int not_nan = 0, moved = 0;
      for (int j = 0; j < n; ++j) {
        for (int i = 0; i < n; ++i) not_nan += !is_nan(factors[i + j * lu.ld]);
        moved += pivots[j] != j + 1;
      }
      EXPECT_EQ(not_nan, 0) << at << ": elements of a non-finite matrix not set to NaN";
      EXPECT_EQ(moved, 0) << at << ": ipiv of a non-finite matrix is not 1 … n";
      continue;
    }
    int not_finite = 0;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) not_finite += !is_finite(factors[i + j * lu.ld]);
    EXPECT_EQ(not_finite, 0) << at << ": NaN or Inf written into the factors";
    const double e = lu_error(c.matrix(b), n, n, factors, lu.ld, pivots);
    EXPECT_LE(e, solve_tolerance) << at << ": ‖PA − LU‖_F/‖A‖_F = " << e << " n·ε";
    worst = worst_of(worst, e);
    const LapackLu<T> reference = lapack_getrf(c.matrix(b), n, n);
    EXPECT_EQ(reference.info, c.expected_info) << at << ": LAPACK's own info (the generator's promise)";
    const auto differ = std::mismatch(reference.ipiv.begin(), reference.ipiv.end(), pivots);
    if (differ.first != reference.ipiv.end())
      ADD_FAILURE() << at << ": ipiv[" << (differ.first - reference.ipiv.begin()) << "] = " << *differ.second
                    << ", LAPACK's ?getrf chose " << *differ.first;
  }
  return worst;
}

template <class T>
double expect_potrf_results(const SolveCase<T>& c, Uplo uplo, Batch<const T> factor, const int* info,
                            const std::string& context) {
  const int n = c.n();
  const bool lower = uplo == Uplo::lower;
  double worst = 0;
  for (int b = 0; b < c.count(); ++b) {
    const std::string at = where(c, b, context) + " uplo " + static_cast<char>(uplo);
    const T* result = factor.matrix(b);
    EXPECT_EQ(info[b], c.expected_info) << at << ": info";
    if (c.expected_info == linalg::status::non_finite_input) {
      int not_nan = 0;
      for (int j = 0; j < n; ++j)
        for (int i = lower ? j : 0; i < (lower ? n : j + 1); ++i) not_nan += !is_nan(result[i + j * factor.ld]);
      EXPECT_EQ(not_nan, 0) << at << ": elements of the triangle of a non-finite matrix not set to NaN";
      continue;
    }
    const int order = c.expected_info == 0 ? n : c.expected_info - 1;
    const double e = cholesky_error(uplo, c.matrix(b), n, n, result, factor.ld, order);
    EXPECT_LE(e, solve_tolerance) << at << ": ‖A − LLᴴ‖_F/‖A‖_F of the leading " << order << "×" << order
                                  << " block = " << e << " n·ε";
    worst = worst_of(worst, e);
    for (int j = 0; j < order; ++j) {
      const T d = result[j + j * factor.ld];
      if (!(std::real(d) > 0) || std::imag(d) != 0) {
        ADD_FAILURE() << at << ": the factor's diagonal (" << j << ", " << j << ") = " << std::real(d) << " + "
                      << std::imag(d) << "i is not real and positive";
        break;
      }
    }
  }
  return worst;
}

template <class T>
double expect_solve_results(const SolveCase<T>& c, Op op, const T* b, int nrhs, Batch<const T> x, const int* info,
                            const std::string& context) {
  const int n = c.n();
  double worst = 0;
  for (int m = 0; m < c.count(); ++m) {
    const std::string at = where(c, m, context) + " op " + static_cast<char>(op) + " nrhs " + std::to_string(nrhs);
    const T* rhs = b + std::size_t(m) * n * nrhs;
    if (info != nullptr && info[m] != 0) {
      EXPECT_TRUE(bitwise_equal(x.matrix(m), x.ld, rhs, n, n, nrhs)) << at << ": B written where info = " << info[m];
      continue;
    }
    const double e = solve_residual(op, c.matrix(m), n, n, x.matrix(m), x.ld, rhs, n, nrhs);
    EXPECT_LE(e, solve_tolerance) << at << ": ‖op(A)X − B‖_F/(‖A‖_F‖X‖_F + ‖B‖_F) = " << e << " n·ε";
    worst = worst_of(worst, e);
  }
  return worst;
}

template <class T>
LeastSquaresErrors expect_gels_results(const SolveCase<T>& c, Batch<const T> factored, const T* b, int nrhs,
                                       Batch<const T> qhb, const int* info, const std::string& context) {
  const int m = c.m(), n = c.n();
  LeastSquaresErrors worst;
  for (int k = 0; k < c.count(); ++k) {
    const std::string at = where(c, k, context) + " nrhs " + std::to_string(nrhs);
    const T* rhs = b + std::size_t(k) * m * nrhs;
    const T* result = factored.matrix(k);
    EXPECT_EQ(info[k], c.expected_info) << at << ": info";
    if (c.expected_info != 0) {
      if (nrhs > 0) {
        EXPECT_TRUE(bitwise_equal(qhb.matrix(k), qhb.ld, rhs, m, m, nrhs)) << at << ": B written";
      }
      int wrong = 0;
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i)
          wrong += c.expected_info == linalg::status::non_finite_input ? !is_nan(result[i + j * factored.ld])
                                                                       : !is_finite(result[i + j * factored.ld]);
      EXPECT_EQ(wrong, 0) << at << ": A not all NaN (non-finite input) or not all finite (rank deficient)";
      continue;
    }
    const LeastSquaresErrors e =
        least_squares_errors(c.matrix(k), m, m, n, result, factored.ld, rhs, m, qhb.matrix(k), qhb.ld, nrhs);
    EXPECT_LE(e.r_gram, solve_tolerance) << at << ": ‖AᴴA − RᴴR‖_F/‖A‖_F² = " << e.r_gram << " m·ε";
    EXPECT_LE(e.optimality, solve_tolerance)
        << at << ": ‖Aᴴ(AX − B)‖_F/(‖A‖_F(‖A‖_F‖X‖_F + ‖B‖_F)) = " << e.optimality << " m·ε";
    EXPECT_LE(e.residual_norm, solve_tolerance)
        << at << ": | ‖AX − B‖ − ‖(QᴴB)(n:m)‖ | per column = " << e.residual_norm << " m·ε";
    worst = worst_of(worst, e);
  }
  return worst;
}

#define COVFLOW_SOLVE_CASES(T)                                                                                      \
  template struct SolveCase<T>;                                                                                     \
  template SolveCase<T> make_solve_case<T>(const SolveSpec&, std::mt19937_64&);                                    \
  template SolveCase<T> make_solve_case<T>(const SolveSpec&, std::uint64_t);                                       \
  template std::vector<T> spread_batch<T>(const T*, int, int, int, std::int64_t, std::int64_t, T);                \
  template LapackLu<T> lapack_getrf<T>(const T*, std::int64_t, int);                                               \
  template double lu_error<T>(const T*, std::int64_t, int, const T*, std::int64_t, const int*);                    \
  template double cholesky_error<T>(Uplo, const T*, std::int64_t, int, const T*, std::int64_t, int);               \
  template double solve_residual<T>(Op, const T*, std::int64_t, int, const T*, std::int64_t, const T*,             \
                                    std::int64_t, int);                                                            \
  template LeastSquaresErrors least_squares_errors<T>(const T*, std::int64_t, int, int, const T*, std::int64_t,   \
                                                      const T*, std::int64_t, const T*, std::int64_t, int);        \
  template bool other_triangle_unchanged<T>(Uplo, const T*, std::int64_t, const T*, std::int64_t, int);           \
  template bool bitwise_equal<T>(const T*, std::int64_t, const T*, std::int64_t, int, int);                        \
  template double expect_getrf_results<T>(const SolveCase<T>&, Batch<const T>, const int*, const int*,            \
                                          const std::string&);                                                     \
  template double expect_potrf_results<T>(const SolveCase<T>&, Uplo, Batch<const T>, const int*,                  \
                                          const std::string&);                                                     \
  template double expect_solve_results<T>(const SolveCase<T>&, Op, const T*, int, Batch<const T>, const int*,     \
                                          const std::string&);                                                     \
  template LeastSquaresErrors expect_gels_results<T>(const SolveCase<T>&, Batch<const T>, const T*, int,          \
                                                     Batch<const T>, const int*, const std::string&);
COVFLOW_SOLVE_CASES(linalg::f32)
COVFLOW_SOLVE_CASES(linalg::f64)
COVFLOW_SOLVE_CASES(linalg::cf32)
COVFLOW_SOLVE_CASES(linalg::cf64)
#undef COVFLOW_SOLVE_CASES

}  // namespace covflow::test

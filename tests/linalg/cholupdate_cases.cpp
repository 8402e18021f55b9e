#include "cholupdate_cases.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "test_support.hpp"

extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, std::size_t);
void zpotrf_(const char* uplo, const int* n, std::complex<double>* a, const int* lda, int* info, std::size_t);
void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
            const int* lwork, int* info, std::size_t, std::size_t);
void zheev_(const char* jobz, const char* uplo, const int* n, std::complex<double>* a, const int* lda, double* w,
            std::complex<double>* work, const int* lwork, double* rwork, int* info, std::size_t, std::size_t);
}

namespace covflow::test {

using linalg::is_complex_v;
using linalg::real_t;
using linalg::Sign;

std::string name(FactorKind kind) {
  switch (kind) {
    case FactorKind::random: return "random";
    case FactorKind::graded: return "graded";
    case FactorKind::tiny_pivot: return "tiny-pivot";
  }
  return "?";
}

namespace {

// The same element type at precision P (double or long double).
template <class T, class P> using wide_t = std::conditional_t<is_complex_v<T>, std::complex<P>, P>;
// The precision the exact checks accumulate in: one step above T's.
template <class T> using acc_real_t = std::conditional_t<std::is_same_v<real_t<T>, float>, double, long double>;

template <class X> auto conj_(X x) {
  if constexpr (is_complex_v<X>) return std::conj(x);
  else return x;
}
template <class X> double abs2(X x) {
  if constexpr (is_complex_v<X>) return double(std::norm(x));
  else return double(x * x);
}
template <class To, class From> To convert(From x) {
  if constexpr (is_complex_v<To>) {
    using P = typename To::value_type;
    if constexpr (is_complex_v<From>) return To(P(x.real()), P(x.imag()));
    else return To(P(x), P(0));
  } else {
    if constexpr (is_complex_v<From>) return To(x.real());
    else return To(x);
  }
}

template <class T>
T gaussian(std::mt19937_64& rng, double deviation) {
  std::normal_distribution<double> normal(0.0, 1.0);
  if constexpr (is_complex_v<T>) {
    const double s = deviation / std::sqrt(2.0);
    return T(real_t<T>(s * normal(rng)), real_t<T>(s * normal(rng)));
  } else {
    return T(deviation * normal(rng));
  }
}

template <class T>
void fill_factor(T* l, int n, FactorKind kind, std::mt19937_64& rng) {
  using R = real_t<T>;
  std::uniform_real_distribution<double> diagonal(1.0, 2.0);
  const double decades = std::is_same_v<R, float> ? 3.0 : 6.0;
  const double off = 0.2 / std::sqrt(double(std::max(n, 1)));
  for (int j = 0; j < n; ++j) {
    double d = kind == FactorKind::graded ? std::pow(10.0, -decades * j / std::max(n - 1, 1)) : diagonal(rng);
    if (kind == FactorKind::tiny_pivot && j == n / 3) d = std::is_same_v<R, float> ? 1e-4 : 1e-9;
    for (int i = 0; i < j; ++i) l[i + std::size_t(j) * n] = T(std::numeric_limits<R>::quiet_NaN());
    l[j + std::size_t(j) * n] = T(R(d));
    for (int i = j + 1; i < n; ++i) {
      T x = gaussian<T>(rng, off);
      if (kind == FactorKind::graded) x = x * R(d);
      l[i + std::size_t(j) * n] = x;
    }
  }
}

template <class T>
std::vector<T> make_updates(int n, int k, int count, std::mt19937_64& rng) {
  std::vector<T> v(std::size_t(count) * n * k);
  const double deviation = 1.0 / std::sqrt(double(std::max(n, k)));
  for (auto& x : v) x = gaussian<T>(rng, deviation);
  return v;
}

// Rank-one updates by plane rotations, one column of V at a time, one precision above T's: the
// textbook algorithm, written independently of the code under test.
template <class T>
void reference_update(T* l, const T* v, int n, int k) {
  // In a wider type than T (long double for double T): the factor of A = B + VVᴴ is the downdate
  // tests' input, and their "update then downdate returns B" check would otherwise count this
  // reference's own rounding (k rotations, relative to ‖A‖) as the downdate's error.
  using P = acc_real_t<T>;
  using W = wide_t<T, P>;
  std::vector<W> a(std::size_t(n) * n), x(n);
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i) a[i + std::size_t(j) * n] = convert<W>(l[i + std::size_t(j) * n]);
  for (int p = 0; p < k; ++p) {
    for (int i = 0; i < n; ++i) x[i] = convert<W>(v[i + std::size_t(p) * n]);
    for (int j = 0; j < n; ++j) {
      const P ajj = std::real(a[j + std::size_t(j) * n]);
      P xj2;
      if constexpr (is_complex_v<W>) xj2 = std::norm(x[j]);
      else xj2 = x[j] * x[j];
      const P r = std::sqrt(ajj * ajj + xj2);
      const P c = r / ajj;
      const W s = x[j] / ajj;
      a[j + std::size_t(j) * n] = W(r);
      for (int i = j + 1; i < n; ++i) {
        W& lij = a[i + std::size_t(j) * n];
        lij = (lij + conj_(s) * x[i]) / c;
        x[i] = c * x[i] - s * lij;
      }
    }
  }
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i) l[i + std::size_t(j) * n] = convert<T>(a[i + std::size_t(j) * n]);
}

}  // namespace

template <class T>
CholCase<T> make_update_case(FactorKind kind, int n, int k, int count, std::mt19937_64& rng) {
  CholCase<T> c;
  c.n = n;
  c.k = k;
  c.count = count;
  c.sign = Sign::update;
  c.seed = rng();
  std::mt19937_64 local(c.seed);
  c.l.resize(std::size_t(count) * n * n);
  for (int b = 0; b < count; ++b) fill_factor(c.l.data() + std::size_t(b) * n * n, n, kind, local);
  c.v = make_updates<T>(n, k, count, local);
  return c;
}

template <class T>
CholCase<T> make_downdate_case(int n, int k, int count, std::mt19937_64& rng, std::vector<T>* base) {
  CholCase<T> c = make_update_case<T>(FactorKind::random, n, k, count, rng);
  c.sign = Sign::downdate;
  if (base != nullptr) *base = c.l;
  for (int b = 0; b < count; ++b)
    reference_update(c.l.data() + std::size_t(b) * n * n, c.v.data() + std::size_t(b) * n * k, n, k);
  return c;
}

template <class T>
double reconstruction_error(const CholCase<T>& c, int b, const T* result) {
  using R = real_t<T>;
  const int n = c.n, k = c.k;
  const T* l = c.factor(b);
  const T* v = c.update(b);
  const double sigma = c.sign == Sign::update ? 1.0 : -1.0;
  const double unit = double(n) * double(std::numeric_limits<R>::epsilon());
  auto lower = [n](const T* m, int i, int j) -> T {  // the diagonal read as its real part
    return i == j ? T(std::real(m[i + std::size_t(j) * n])) : m[i + std::size_t(j) * n];
  };
  if (n <= kExactLimit) {
    using P = acc_real_t<T>;
    using W = wide_t<T, P>;
    long double error = 0, norm = 0;
    for (int j = 0; j < n; ++j)
      for (int i = j; i < n; ++i) {
        W computed{}, original{}, outer{};
        for (int q = 0; q <= j; ++q) {
          computed += convert<W>(lower(result, i, q)) * conj_(convert<W>(lower(result, j, q)));
          original += convert<W>(lower(l, i, q)) * conj_(convert<W>(lower(l, j, q)));
        }
        for (int p = 0; p < k; ++p)
          outer += convert<W>(v[i + std::size_t(p) * n]) * conj_(convert<W>(v[j + std::size_t(p) * n]));
        const W target = original + P(sigma) * outer;
        const W difference = computed - target;
        const long double weight = i == j ? 1 : 2;
        error += weight * (long double)abs2(difference);
        norm += weight * (long double)abs2(target);
      }
    if (norm == 0) return error == 0 ? 0.0 : std::numeric_limits<double>::infinity();
    return double(std::sqrt(error / norm)) / unit;
  }
  // Probes: E Z and A Z for Gaussian Z, in double.
  using W = wide_t<T, double>;
  std::mt19937_64 rng(0x5eed0000u + std::uint64_t(n) * 131 + std::uint64_t(k));
  const int s = kProbes;
  std::vector<W> z(std::size_t(n) * s);
  for (auto& x : z) x = gaussian<W>(rng, 1.0);
  // y = M Mᴴ z for a lower factor M.
  auto apply_factor = [&](const T* m, std::vector<W>& out) {
    std::vector<W> tmp(std::size_t(n) * s, W{});
    out.assign(std::size_t(n) * s, W{});
    for (int q = 0; q < n; ++q)      // tmp = Mᴴ z: tmp_q = Σ_{i≥q} conj(M_iq) z_i
      for (int i = q; i < n; ++i) {
        const W mc = conj_(convert<W>(lower(m, i, q)));
        for (int r = 0; r < s; ++r) tmp[q + std::size_t(r) * n] += mc * z[i + std::size_t(r) * n];
      }
    for (int q = 0; q < n; ++q)      // out = M tmp: out_i += M_iq tmp_q
      for (int i = q; i < n; ++i) {
        const W m_iq = convert<W>(lower(m, i, q));
        for (int r = 0; r < s; ++r) out[i + std::size_t(r) * n] += m_iq * tmp[q + std::size_t(r) * n];
      }
  };
  std::vector<W> computed, original;
  apply_factor(result, computed);
  apply_factor(l, original);
  std::vector<W> outer(std::size_t(n) * s, W{});
  for (int p = 0; p < k; ++p)
    for (int r = 0; r < s; ++r) {
      W dot{};
      for (int i = 0; i < n; ++i) dot += conj_(convert<W>(v[i + std::size_t(p) * n])) * z[i + std::size_t(r) * n];
      for (int i = 0; i < n; ++i) outer[i + std::size_t(r) * n] += convert<W>(v[i + std::size_t(p) * n]) * dot;
    }
  double error = 0, norm = 0;
  for (std::size_t e = 0; e < computed.size(); ++e) {
    const W target = original[e] + sigma * outer[e];
    error += abs2(computed[e] - target);
    norm += abs2(target);
  }
  if (norm == 0) return error == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(error / norm) / unit;
}

template <class T>
double factor_difference(const T* x, const T* y, int n) {
  using R = real_t<T>;
  double error = 0, norm = 0;
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i) {
      const auto xi = convert<wide_t<T, double>>(x[i + std::size_t(j) * n]);
      const auto yi = convert<wide_t<T, double>>(y[i + std::size_t(j) * n]);
      error += abs2(xi - yi);
      norm += abs2(yi);
    }
  return std::sqrt(error / norm) / (double(n) * double(std::numeric_limits<R>::epsilon()));
}

template <class T>
PotrfReference<T> potrf_reference(const CholCase<T>& c, int b) {
  if (c.n > kExactLimit) throw std::invalid_argument("potrf_reference: n > kExactLimit");
  using W = wide_t<T, double>;
  const int n = c.n;
  const T* l = c.factor(b);
  const T* v = c.update(b);
  const double sigma = c.sign == Sign::update ? 1.0 : -1.0;
  std::vector<W> a(std::size_t(n) * n, W{});
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i) {
      W sum{};
      for (int q = 0; q <= j; ++q) {
        const W liq = q == i ? W(std::real(l[i + std::size_t(q) * n])) : convert<W>(l[i + std::size_t(q) * n]);
        const W ljq = q == j ? W(std::real(l[j + std::size_t(q) * n])) : convert<W>(l[j + std::size_t(q) * n]);
        sum += liq * conj_(ljq);
      }
      for (int p = 0; p < c.k; ++p)
        sum += sigma * convert<W>(v[i + std::size_t(p) * n]) * conj_(convert<W>(v[j + std::size_t(p) * n]));
      a[i + std::size_t(j) * n] = sum;
      a[j + std::size_t(i) * n] = conj_(sum);
    }
  PotrfReference<T> out;
  // κ₂ from the eigenvalues.
  {
    std::vector<W> copy = a;
    std::vector<double> w(n);
    int info = 0, lwork = std::max(1, 3 * n);
    const char jobz = 'N', uplo = 'L';
    if constexpr (is_complex_v<T>) {
      std::vector<W> work(lwork);
      std::vector<double> rwork(std::max(1, 3 * n));
      zheev_(&jobz, &uplo, &n, copy.data(), &n, w.data(), work.data(), &lwork, rwork.data(), &info, 1, 1);
    } else {
      std::vector<double> work(lwork);
      dsyev_(&jobz, &uplo, &n, copy.data(), &n, w.data(), work.data(), &lwork, &info, 1, 1);
    }
    out.condition = (info == 0 && w.front() > 0) ? w.back() / w.front() : std::numeric_limits<double>::infinity();
  }
  const char uplo = 'L';
  if constexpr (is_complex_v<T>) zpotrf_(&uplo, &n, a.data(), &n, &out.info, 1);
  else dpotrf_(&uplo, &n, a.data(), &n, &out.info, 1);
  out.factor.assign(std::size_t(n) * n, T{});
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i) out.factor[i + std::size_t(j) * n] = convert<T>(a[i + std::size_t(j) * n]);
  return out;
}

template <class T>
bool upper_untouched(const T* input, const T* result, int n) {
  for (int j = 1; j < n; ++j)
    if (std::memcmp(input + std::size_t(j) * n, result + std::size_t(j) * n, sizeof(T) * std::size_t(j)) != 0)
      return false;
  return true;
}

template <class T>
void make_downdate_fail_at(CholCase<T>& c, int b, int column) {
  using R = real_t<T>;
  const int n = c.n;
  T* v = c.v.data() + std::size_t(b) * n * c.k;
  const T* l = c.factor(b);
  for (int p = 0; p < c.k; ++p)
    for (int i = 0; i < column; ++i) v[i + std::size_t(p) * n] = T(0);
  double norm2 = 0;
  for (int p = 0; p < c.k; ++p) norm2 += abs2(v[column + std::size_t(p) * n]);
  const double diagonal = std::real(l[column + std::size_t(column) * n]);
  const R scale = R(std::sqrt(1.5 * diagonal * diagonal / norm2));
  for (int p = 0; p < c.k; ++p) v[column + std::size_t(p) * n] *= scale;
}

#define COVFLOW_CHOL_CASES(T)                                                                             \
  template CholCase<T> make_update_case<T>(FactorKind, int, int, int, std::mt19937_64&);                 \
  template CholCase<T> make_downdate_case<T>(int, int, int, std::mt19937_64&, std::vector<T>*);          \
  template void make_downdate_fail_at<T>(CholCase<T>&, int, int);                                        \
  template double reconstruction_error<T>(const CholCase<T>&, int, const T*);                            \
  template double factor_difference<T>(const T*, const T*, int);                                         \
  template PotrfReference<T> potrf_reference<T>(const CholCase<T>&, int);                                \
  template bool upper_untouched<T>(const T*, const T*, int);
COVFLOW_CHOL_CASES(linalg::f32)
COVFLOW_CHOL_CASES(linalg::f64)
COVFLOW_CHOL_CASES(linalg::cf32)
COVFLOW_CHOL_CASES(linalg::cf64)
#undef COVFLOW_CHOL_CASES

}  // namespace covflow::test

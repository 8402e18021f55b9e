// heev on the CUDA backend, against LAPACK (the CPU backend) on the same inputs: eigenvalue error,
// residual ‖AV − VΛ‖_F/‖A‖_F and orthogonality ‖VᴴV − I‖_F, each ≤ 10·n·ε (issue 3).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <thread>
#include <vector>

#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/heev.hpp"
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

template <class T> T conj_of(T v) {
  if constexpr (is_complex_v<T>) return std::conj(v);
  else return v;
}

enum class Kind { random, graded, clustered, radar, diagonal, tridiagonal, zero };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::random: return "random";
    case Kind::graded: return "graded";
    case Kind::clustered: return "clustered";
    case Kind::radar: return "radar";
    case Kind::diagonal: return "diagonal";
    case Kind::tridiagonal: return "tridiagonal";
    case Kind::zero: return "zero";
  }
  return "?";
}

// One Hermitian matrix of the kind, both triangles filled, built in double precision.
template <class T>
std::vector<T> make_matrix(Kind kind, int n, std::mt19937_64& rng) {
  using C = std::complex<double>;
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<C> a(std::size_t(n) * n, 0.0);
  auto at = [&](int i, int j) -> C& { return a[i + std::size_t(j) * n]; };
  auto rnd = [&]() { return is_complex_v<T> ? C(normal(rng), normal(rng)) : C(normal(rng), 0.0); };
  switch (kind) {
    case Kind::random:
    case Kind::tridiagonal:
      for (int j = 0; j < n; ++j)
        for (int i = j; i < n; ++i) {
          if (kind == Kind::tridiagonal && i > j + 1) continue;
          const C v = i == j ? C(normal(rng), 0) : rnd();
          at(i, j) = v;
          at(j, i) = std::conj(v);
        }
      break;
    case Kind::diagonal:
      for (int i = 0; i < n; ++i) at(i, i) = uniform(rng);
      break;
    case Kind::zero:
      break;
    case Kind::graded:
    case Kind::clustered: {
      // U Λ Uᴴ with U a product of n random Householder reflectors.
      std::vector<double> lambda(n);
      for (int k = 0; k < n; ++k)
        lambda[k] = kind == Kind::graded ? std::pow(10.0, -12.0 * k / std::max(n - 1, 1))
                                         : (k % 4 == 0 ? 1.0 : (k % 4 == 1 ? -1.0 : 1.0 + 1e-10 * k));
      for (int i = 0; i < n; ++i) at(i, i) = lambda[i];
      for (int r = 0; r < n; ++r) {
        std::vector<C> v(n);
        double norm2 = 0;
        for (auto& x : v) {
          x = rnd();
          norm2 += std::norm(x);
        }
        // a ← H a H with H = I − 2 v vᴴ / ‖v‖²
        std::vector<C> av(n, 0.0);
        for (int j = 0; j < n; ++j)
          for (int i = 0; i < n; ++i) av[i] += at(i, j) * v[j];
        C vav = 0;
        for (int i = 0; i < n; ++i) vav += std::conj(v[i]) * av[i];
        const double t = 2.0 / norm2;
        for (int j = 0; j < n; ++j)
          for (int i = 0; i < n; ++i)
            at(i, j) += -t * av[i] * std::conj(v[j]) - t * v[i] * std::conj(av[j]) + t * t * vav * v[i] * std::conj(v[j]);
      }
      for (int j = 0; j < n; ++j) {
        at(j, j) = at(j, j).real();
        for (int i = j + 1; i < n; ++i) at(j, i) = std::conj(at(i, j));
      }
      break;
    }
    case Kind::radar: {
      // Uniform linear array, half-wavelength spacing, 3 sources 10–30 dB over unit noise, K = 2n snapshots.
      const int k_snap = 2 * n;
      std::vector<double> angle(3), power(3);
      for (int s = 0; s < 3; ++s) {
        angle[s] = uniform(rng) * 1.2;
        power[s] = std::pow(10.0, (20.0 + 10.0 * uniform(rng)) / 10.0);
      }
      std::vector<C> x(std::size_t(n) * k_snap);
      for (int t = 0; t < k_snap; ++t)
        for (int m = 0; m < n; ++m) {
          C v = C(normal(rng), normal(rng)) / std::sqrt(2.0);
          for (int s = 0; s < 3; ++s) {
            const C steer = std::polar(1.0, M_PI * m * std::sin(angle[s]));
            v += std::sqrt(power[s]) * steer * C(normal(rng), normal(rng)) / std::sqrt(2.0);
          }
          x[m + std::size_t(t) * n] = is_complex_v<T> ? v : C(v.real(), 0);
        }
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) {
          C sum = 0;
          for (int t = 0; t < k_snap; ++t) sum += x[i + std::size_t(t) * n] * std::conj(x[j + std::size_t(t) * n]);
          at(i, j) = sum / double(k_snap);
        }
      for (int j = 0; j < n; ++j) {
        at(j, j) = at(j, j).real();
        for (int i = j + 1; i < n; ++i) at(j, i) = std::conj(at(i, j));
      }
      break;
    }
  }
  std::vector<T> out(a.size());
  for (std::size_t e = 0; e < a.size(); ++e) {
    if constexpr (is_complex_v<T>) out[e] = T(real_t<T>(a[e].real()), real_t<T>(a[e].imag()));
    else out[e] = T(a[e].real());
  }
  return out;
}

struct Errors {
  double residual = 0, orthogonality = 0, values = 0;  // units of n·ε
};

// Errors of one matrix: a is the original, v the vectors (nullable), w ours, ref LAPACK's values.
template <class T>
Errors measure(const T* a, const T* v, const real_t<T>* w, const real_t<T>* ref, int n) {
  using C = std::complex<double>;
  const double unit = n * double(std::numeric_limits<real_t<T>>::epsilon());
  Errors e;
  double a2 = 0, spectral = 0;
  for (std::size_t i = 0; i < std::size_t(n) * n; ++i) a2 += std::norm(C(a[i]));
  for (int k = 0; k < n; ++k) spectral = std::max(spectral, std::abs(double(ref[k])));
  double value_diff = 0;
  for (int k = 0; k < n; ++k) value_diff = std::max(value_diff, std::abs(double(w[k]) - double(ref[k])));
  e.values = spectral > 0 ? value_diff / spectral / unit : (value_diff == 0 ? 0 : INFINITY);
  if (v == nullptr) return e;
  std::vector<C> av(n);
  double r2 = 0, o2 = 0;
  for (int k = 0; k < n; ++k) {
    std::fill(av.begin(), av.end(), C(0));
    for (int j = 0; j < n; ++j) {
      const C vj(v[j + std::size_t(k) * n]);
      for (int i = 0; i < n; ++i) av[i] += C(a[i + std::size_t(j) * n]) * vj;
    }
    for (int i = 0; i < n; ++i) r2 += std::norm(av[i] - C(v[i + std::size_t(k) * n]) * double(w[k]));
    for (int l = 0; l < n; ++l) {
      C dot = 0;
      for (int i = 0; i < n; ++i) dot += std::conj(C(v[i + std::size_t(l) * n])) * C(v[i + std::size_t(k) * n]);
      o2 += std::norm(dot - (k == l ? 1.0 : 0.0));
    }
  }
  e.residual = a2 > 0 ? std::sqrt(r2 / a2) / unit : (r2 == 0 ? 0 : INFINITY);
  e.orthogonality = std::sqrt(o2) / unit;
  return e;
}

template <class T>
struct GpuRun {
  std::vector<T> vectors;
  std::vector<real_t<T>> values;
  std::vector<int> info;
};

template <class T>
GpuRun<T> run_gpu(Exec& exec, const std::vector<T>& a, int n, long long count, const HeevOptions& options) {
  cudaStream_t stream = exec.cuda_context().stream();
  cuda::DeviceBuffer<T> da(a.size());
  cuda::DeviceBuffer<real_t<T>> dw(std::size_t(count) * n);
  cuda::DeviceBuffer<int> dinfo{static_cast<std::size_t>(count)};
  da.upload(a, stream);
  dw.fill_bytes(0xFF, stream);     // NaN: an eigenvalue never written fails
  dinfo.fill_bytes(0x7F, stream);  // a large positive garbage value: info never written fails
  heev<T>(exec, Batch<T>::packed(da.data(), n, n, count), {dw.data(), dw.size()}, {dinfo.data(), dinfo.size()}, options);
  GpuRun<T> out;
  out.vectors.resize(a.size());
  out.values.resize(std::size_t(count) * n);
  out.info.resize(std::size_t(count));
  da.download(out.vectors, stream);
  dw.download(out.values, stream);
  dinfo.download(out.info, stream);
  exec.synchronize();
  return out;
}

template <class T>
std::vector<real_t<T>> lapack_values(const std::vector<T>& a, int n, long long count) {
  static Exec cpu = Exec::cpu();
  std::vector<T> copy = a;
  std::vector<real_t<T>> w(std::size_t(count) * n);
  std::vector<int> info(static_cast<std::size_t>(count));
  heev<T>(cpu, Batch<T>::packed(copy.data(), n, n, count), w, info, {.uplo = Uplo::lower, .vectors = false});
  for (int i : info) EXPECT_EQ(i, 0) << "LAPACK reference failed";
  return w;
}

// Checks matrices `which` of a batch in parallel; returns the worst errors seen.
template <class T>
Errors check_batch(const std::vector<T>& a, const GpuRun<T>& run, const std::vector<real_t<T>>& ref, int n,
                   const std::vector<long long>& which, bool vectors, const std::string& what) {
  std::vector<Errors> errors(which.size());
  std::vector<std::thread> threads;
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned t = 0; t < workers; ++t)
    threads.emplace_back([&, t] {
      for (std::size_t q = t; q < which.size(); q += workers) {
        const long long b = which[q];
        const std::size_t off = std::size_t(b) * n * n;
        errors[q] = measure<T>(a.data() + off, vectors ? run.vectors.data() + off : nullptr,
                               run.values.data() + std::size_t(b) * n, ref.data() + std::size_t(b) * n, n);
      }
    });
  for (auto& th : threads) th.join();
  Errors worst;
  for (std::size_t q = 0; q < which.size(); ++q) {
    const long long b = which[q];
    EXPECT_EQ(run.info[b], 0) << what << " matrix " << b;
    EXPECT_LE(errors[q].values, 10.0) << what << " matrix " << b << ": eigenvalue error (n·ε units)";
    if (vectors) {
      EXPECT_LE(errors[q].residual, 10.0) << what << " matrix " << b << ": residual (n·ε units)";
      EXPECT_LE(errors[q].orthogonality, 10.0) << what << " matrix " << b << ": orthogonality (n·ε units)";
    }
    worst.values = std::max(worst.values, errors[q].values);
    worst.residual = std::max(worst.residual, errors[q].residual);
    worst.orthogonality = std::max(worst.orthogonality, errors[q].orthogonality);
  }
  return worst;
}

std::vector<long long> sample(long long count, std::mt19937_64& rng, int how_many) {
  if (count <= how_many) {
    std::vector<long long> all(count);
    for (long long b = 0; b < count; ++b) all[b] = b;
    return all;
  }
  std::vector<long long> some = {0, count - 1};
  std::uniform_int_distribution<long long> pick(1, count - 2);
  while (static_cast<int>(some.size()) < how_many) some.push_back(pick(rng));
  return some;
}

template <class T>
class HeevGpu : public test::GpuTest {};
using Types = ::testing::Types<cf64, cf32, f64, f32>;
TYPED_TEST_SUITE(HeevGpu, Types);

TYPED_TEST(HeevGpu, MatchesLapackAcrossSizesAndSpectra) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("heev gpu sizes"));
  const std::vector<Kind> kinds = {Kind::random, Kind::graded, Kind::clustered, Kind::radar,
                                   Kind::diagonal, Kind::tridiagonal, Kind::zero};
  for (int n : {1, 2, 3, 5, 8, 16, 17, 31, 32, 33, 64, 100, 128, 200, 256, 512}) {
    Errors worst;
    for (Kind kind : kinds) {
      for (long long count : {1LL, 7LL}) {
        if (n >= 256 && count > 1 && kind != Kind::random && kind != Kind::radar) continue;  // CPU check cost
        std::vector<T> a;
        for (long long b = 0; b < count; ++b) {
          auto m = make_matrix<T>(kind, n, rng);
          a.insert(a.end(), m.begin(), m.end());
        }
        const auto ref = lapack_values(a, n, count);
        const auto run = run_gpu(exec, a, n, count, {.uplo = Uplo::lower, .vectors = true});
        const std::string what = std::string(kind_name(kind)) + " n=" + std::to_string(n) + " batch=" + std::to_string(count);
        const Errors e = check_batch<T>(a, run, ref, n, sample(count, rng, n >= 256 ? 2 : 7), true, what);
        worst.values = std::max(worst.values, e.values);
        worst.residual = std::max(worst.residual, e.residual);
        worst.orthogonality = std::max(worst.orthogonality, e.orthogonality);
      }
    }
    std::printf("[ errors   ] n=%-4d worst over kinds: values %.2f, residual %.2f, orthogonality %.2f (units of n·ε)\n", n,
                worst.values, worst.residual, worst.orthogonality);
  }
}

TYPED_TEST(HeevGpu, RadarBatchOf180) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("heev gpu batch 180"));
  for (int n : {64, 128}) {
    const long long count = 180;
    std::vector<T> a;
    for (long long b = 0; b < count; ++b) {
      auto m = make_matrix<T>(b % 2 ? Kind::radar : Kind::random, n, rng);
      a.insert(a.end(), m.begin(), m.end());
    }
    const auto ref = lapack_values(a, n, count);
    const auto run = run_gpu(exec, a, n, count, {.uplo = Uplo::lower, .vectors = true});
    std::vector<long long> all(count);
    for (long long b = 0; b < count; ++b) all[b] = b;
    // Every matrix's eigenvalues; residual and orthogonality on a sample.
    const auto values_only = GpuRun<T>{{}, run.values, run.info};
    check_batch<T>(a, values_only, ref, n, all, false, "batch 180 values n=" + std::to_string(n));
    check_batch<T>(a, run, ref, n, sample(count, rng, 16), true, "batch 180 n=" + std::to_string(n));
  }
}

TYPED_TEST(HeevGpu, UpperTriangleAndValuesOnly) {
  using T = TypeParam;
  using R = real_t<T>;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("heev gpu upper"));
  for (int n : {5, 33, 128, 200}) {
    const long long count = 3;
    std::vector<T> a;
    for (long long b = 0; b < count; ++b) {
      auto m = make_matrix<T>(Kind::random, n, rng);
      a.insert(a.end(), m.begin(), m.end());
    }
    const auto ref = lapack_values(a, n, count);
    // Upper triangle read: the strictly lower triangle holds NaN and must never be read.
    std::vector<T> garbled = a;
    for (long long b = 0; b < count; ++b)
      for (int j = 0; j < n; ++j)
        for (int i = j + 1; i < n; ++i) garbled[b * n * n + i + std::size_t(j) * n] = test::poison<T>();
    const auto upper = run_gpu(exec, garbled, n, count, {.uplo = Uplo::upper, .vectors = true});
    check_batch<T>(a, upper, ref, n, {0, 1, 2}, true, "upper n=" + std::to_string(n));
    // Values only.
    const auto values = run_gpu(exec, a, n, count, {.uplo = Uplo::lower, .vectors = false});
    check_batch<T>(a, values, ref, n, {0, 1, 2}, false, "values-only n=" + std::to_string(n));
    (void)R(0);
  }
}

TYPED_TEST(HeevGpu, NonFiniteMatrixIsIsolated) {
  using T = TypeParam;
  using R = real_t<T>;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("heev gpu nan"));
  for (int n : {8, 64, 128, 300}) {
    const long long count = 5;
    std::vector<T> a;
    for (long long b = 0; b < count; ++b) {
      auto m = make_matrix<T>(Kind::random, n, rng);
      a.insert(a.end(), m.begin(), m.end());
    }
    const auto ref = lapack_values(a, n, count);
    std::vector<T> bad = a;
    bad[1 * n * n + (n - 1) + 0 * n] = T(std::numeric_limits<R>::quiet_NaN());  // matrix 1: NaN in the lower triangle
    bad[3 * n * n + n / 2 + (n / 2) * n] = T(std::numeric_limits<R>::infinity());  // matrix 3: Inf on the diagonal
    for (bool vectors : {true, false}) {
      const auto run = run_gpu(exec, bad, n, count, {.uplo = Uplo::lower, .vectors = vectors});
      EXPECT_EQ(run.info[1], status::non_finite_input);
      EXPECT_EQ(run.info[3], status::non_finite_input);
      for (int k = 0; k < n; ++k) EXPECT_TRUE(std::isnan(run.values[1 * n + k]) && std::isnan(run.values[3 * n + k]));
      check_batch<T>(a, run, ref, n, {0, 2, 4}, vectors, "neighbours of NaN n=" + std::to_string(n));
    }
  }
}

TEST(HeevGpuWorkspace, ReservedOnceNeverGrowsAndStaysUnderTwiceTheInput) {
  if (!test::device_probe().available()) GTEST_SKIP() << test::device_probe().reason;
  Exec exec = Exec::cuda();
  const int n = 128;
  const long long count = 180;
  const std::size_t bytes = heev_workspace<cf64>(exec, n, count, {});
  const std::size_t input = sizeof(cf64) * n * n * count;
  EXPECT_LE(bytes, 2 * input) << "workspace " << bytes << " bytes for an input of " << input;
  exec.workspace().reserve(bytes);
  std::mt19937_64 rng(test::fresh_seed("heev gpu workspace"));
  std::vector<cf64> a;
  for (long long b = 0; b < count; ++b) {
    auto m = make_matrix<cf64>(Kind::random, n, rng);
    a.insert(a.end(), m.begin(), m.end());
  }
  run_gpu(exec, a, n, count, {});
  run_gpu(exec, a, n, count, {.uplo = Uplo::lower, .vectors = false});
  EXPECT_EQ(exec.workspace().growth_count(), 0u);
}

}  // namespace
}  // namespace covflow::linalg

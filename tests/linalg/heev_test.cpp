// heev on the CPU backend (LAPACK ?heevd/?syevd across the pool) against a double-precision
// LAPACK reference, with the required tolerances: residual ‖AV − VΛ‖_F/‖A‖_F, orthogonality
// ‖VᴴV − I‖_F and eigenvalue error / ‖A‖₂, each ≤ 10·n·ε, on every spectrum kind of
// eigen_cases.hpp. Inputs have their unread triangle filled with NaN and outputs are poisoned
// with NaN before each run.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "covflow/linalg/error.hpp"
#include "covflow/linalg/heev.hpp"
#include "eigen_cases.hpp"
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

using test::EigenCase;
using test::EigenErrors;
using test::SpectrumKind;

// The sizes every spectrum kind is checked at: the smallest, odd ones, and both sides of 32 (the
// CUDA path's one-warp-per-matrix limit).
const std::vector<int>& checked_sizes() {
  // To 256 here (the CPU path is LAPACK's ?heevd, two cores in CI); the GPU suite goes on to 512.
  static const std::vector<int> sizes = {1, 2, 3, 5, 8, 16, 17, 31, 32, 33, 64, 100, 128, 200, 256};
  return sizes;
}

// What info is filled with before a run: not ok, not any status code.
constexpr int info_poison = 0x7eadbeef;

std::string uplo_name(Uplo uplo) { return uplo == Uplo::lower ? "lower" : "upper"; }

template <class T>
struct HeevRun {
  std::vector<T> a;  // the eigenvectors on return (with vectors), scratch otherwise
  std::vector<real_t<T>> w;
  std::vector<int> info;
};

// A copy of the case's matrices with the unread triangle garbled, outputs poisoned; heev on it.
template <class T>
HeevRun<T> run_heev(Exec& exec, const EigenCase<T>& c, Uplo uplo, bool vectors) {
  HeevRun<T> run{c.a, std::vector<real_t<T>>(std::size_t(c.count) * c.n, test::poison<real_t<T>>()),
                 std::vector<int>(c.count, info_poison)};
  test::garble_unread_triangle(run.a, c.n, c.count, uplo);
  heev<T>(exec, Batch<T>::packed(run.a.data(), c.n, c.n, c.count), run.w, run.info,
          {.uplo = uplo, .vectors = vectors});
  return run;
}

std::vector<int> all_indices(int count) {
  std::vector<int> out(count);
  for (int b = 0; b < count; ++b) out[b] = b;
  return out;
}

// Largest errors seen per spectrum kind, with the n where each occurred, printed at the end of a
// sweep: how much of the 10·n·ε budget the reference backend uses.
class ErrorTable {
 public:
  void add(SpectrumKind kind, int n, const EigenErrors& e) {
    Row& row = rows_[kind];
    keep(row.residual, row.residual_n, e.residual, n);
    keep(row.orthogonality, row.orthogonality_n, e.orthogonality, n);
    keep(row.values, row.values_n, e.values, n);
    by_size_[n] = test::max_errors(by_size_[n], e);
  }
  void print(const std::string& title) const {
    std::printf("[ errors   ] %s — max over the sweep in units of n·ε (tolerance %.0f), at n\n", title.c_str(),
                test::eigen_tolerance);
    std::printf("[ errors   ] %-14s %8s %-7s %8s %-7s %8s\n", "kind", "residual", "", "orth.", "", "values");
    auto at = [](int n) { return n > 0 ? "n=" + std::to_string(n) : std::string("exact"); };
    for (const auto& [kind, r] : rows_)
      std::printf("[ errors   ] %-14s %8.3f %-7s %8.3f %-7s %8.3f %-7s\n", test::name(kind).c_str(), r.residual,
                  at(r.residual_n).c_str(), r.orthogonality, at(r.orthogonality_n).c_str(), r.values,
                  at(r.values_n).c_str());
    std::printf("[ errors   ] %-14s %8s %-7s %8s %-7s %8s\n", "n (all kinds)", "residual", "", "orth.", "", "values");
    for (const auto& [n, e] : by_size_)
      std::printf("[ errors   ] %-14d %8.3f %-7s %8.3f %-7s %8.3f\n", n, e.residual, "", e.orthogonality, "", e.values);
    std::fflush(stdout);
  }

 private:
  struct Row {
    double residual = 0, orthogonality = 0, values = 0;
    int residual_n = 0, orthogonality_n = 0, values_n = 0;
  };
  static void keep(double& worst, int& worst_n, double candidate, int n) {
    if (std::isnan(worst)) return;
    if (std::isnan(candidate) || candidate > worst) {
      worst = candidate;
      worst_n = n;
    }
  }
  std::map<SpectrumKind, Row> rows_;
  std::map<int, EigenErrors> by_size_;
};

template <class T>
class HeevCpu : public ::testing::Test {};
struct ElementName {
  template <class T>
  static std::string GetName(int) {
    return std::string(name(element_type_of<T>()));
  }
};
using ElementTypes = ::testing::Types<f32, f64, cf32, cf64>;
TYPED_TEST_SUITE(HeevCpu, ElementTypes, ElementName);

// Every size × every kind, batch 1 and 7, vectors on, lower and upper.
// Cut for CI time (2 cores, reference BLAS): checking costs grow as n³ in long double (at n = 512,
// which the GPU suite has, about a second per complex double matrix). For n ≥ 200: batch 1 only
// and one triangle per kind, alternating lower/upper between kinds, so every kind still meets
// n = 200 and 256 and both triangles appear at every large n.
TYPED_TEST(HeevCpu, VectorsMatchLapackOnEverySpectrum) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("heev cpu vectors"));
  Exec exec = Exec::cpu(2);
  ErrorTable table;
  for (const int n : checked_sizes()) {
    const bool large = n >= 200;
    const auto& kinds = test::all_spectrum_kinds();
    for (std::size_t k = 0; k < kinds.size(); ++k)
      for (const int count : large ? std::vector<int>{1} : std::vector<int>{1, 7}) {
        const EigenCase<T> c = test::make_eigen_case<T>(kinds[k], n, count, rng);
        for (const Uplo uplo : {Uplo::lower, Uplo::upper}) {
          if (large && (uplo == Uplo::lower) != (k % 2 == 0)) continue;
          const HeevRun<T> run = run_heev(exec, c, uplo, true);
          const std::vector<int> which = all_indices(count);
          table.add(c.kind, n, test::expect_eigen_results(c, run.a.data(), run.w.data(), run.info.data(), which,
                                                       "vectors uplo=" + uplo_name(uplo)));
        }
      }
  }
  table.print(std::string(name(element_type_of<T>())) + " heev cpu, vectors");
}

// Values-only mode against the same reference, every size and kind (batch 7 below n = 200,
// batch 1 above), the triangle alternating with the kind.
TYPED_TEST(HeevCpu, ValuesOnlyMatchLapackOnEverySpectrum) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("heev cpu values only"));
  Exec exec = Exec::cpu(2);
  ErrorTable table;
  for (const int n : checked_sizes()) {
    const auto& kinds = test::all_spectrum_kinds();
    for (std::size_t k = 0; k < kinds.size(); ++k) {
      const int count = n >= 200 ? 1 : 7;
      const Uplo uplo = (k + n) % 2 == 0 ? Uplo::lower : Uplo::upper;
      const EigenCase<T> c = test::make_eigen_case<T>(kinds[k], n, count, rng);
      const HeevRun<T> run = run_heev(exec, c, uplo, false);
      table.add(c.kind, n, test::expect_eigen_results<T>(c, nullptr, run.w.data(), run.info.data(), all_indices(count),
                                                      "values-only uplo=" + uplo_name(uplo)));
    }
  }
  table.print(std::string(name(element_type_of<T>())) + " heev cpu, values only");
}

// The radar frame's batch size, 180, for n ≤ 64 on the kinds that matter most for it. Every
// matrix's eigenvalues are checked; eigenvectors on a sample (first, last, six others).
TYPED_TEST(HeevCpu, BatchOf180) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("heev cpu batch 180"));
  Exec exec = Exec::cpu(2);
  constexpr int count = 180;
  int round = 0;
  for (const int n : checked_sizes()) {
    if (n > 64) break;
    for (const SpectrumKind kind : {SpectrumKind::radar, SpectrumKind::clustered, SpectrumKind::near_singular}) {
      const Uplo uplo = round++ % 2 == 0 ? Uplo::lower : Uplo::upper;
      const EigenCase<T> c = test::make_eigen_case<T>(kind, n, count, rng);
      const HeevRun<T> run = run_heev(exec, c, uplo, true);
      const std::string context = "batch 180 uplo=" + uplo_name(uplo);
      test::expect_eigen_results<T>(c, nullptr, run.w.data(), run.info.data(), all_indices(count), context);
      test::expect_eigen_results<T>(c, run.a.data(), run.w.data(), run.info.data(),
                                    test::sample_indices(count, 8, rng), context);
    }
  }
}

// A NaN (or ±Inf) in the read triangle of one matrix sets that matrix's info and NaNs its outputs;
// every other matrix comes out right — including one with a NaN in its unread triangle only.
TYPED_TEST(HeevCpu, NonFiniteInputIsReportedPerMatrix) {
  using T = TypeParam;
  using R = real_t<T>;
  std::mt19937_64 rng(test::fresh_seed("heev cpu non-finite"));
  Exec exec = Exec::cpu(2);
  constexpr int count = 7, with_nan = 2, with_inf = 5, unread_nan = 3;
  int variant = 0;
  for (const int n : {1, 2, 5, 33})
    for (const Uplo uplo : {Uplo::lower, Uplo::upper})
      for (const bool vectors : {true, false}) {
        ++variant;
        const EigenCase<T> c = test::make_eigen_case<T>(SpectrumKind::radar, n, count, rng);
        std::vector<T> a = c.a;
        test::garble_unread_triangle(a, n, count, uplo);
        // A random element of the read triangle (the diagonal included).
        auto read_element = [&](int b) -> T& {
          std::uniform_int_distribution<int> index(0, n - 1);
          int i = index(rng), j = index(rng);
          if ((uplo == Uplo::lower) != (i >= j)) std::swap(i, j);
          return a[std::size_t(b) * n * n + i + std::size_t(j) * n];
        };
        const R nan = std::numeric_limits<R>::quiet_NaN(), inf = std::numeric_limits<R>::infinity();
        T& bad = read_element(with_nan);
        // For complex T, alternate the NaN between the real and the imaginary part.
        if constexpr (is_complex_v<T>) bad = variant % 2 == 0 ? T(nan, bad.imag()) : T(bad.real(), nan);
        else bad = nan;
        read_element(with_inf) = T(variant % 2 == 0 ? inf : -inf);
        if (n > 1) {  // a NaN in the unread triangle (already garbled; make the point explicitly)
          const int i = uplo == Uplo::lower ? 0 : n - 1, j = uplo == Uplo::lower ? n - 1 : 0;
          a[std::size_t(unread_nan) * n * n + i + std::size_t(j) * n] = test::poison<T>();
        }

        std::vector<R> w(std::size_t(count) * n, test::poison<R>());
        std::vector<int> info(count, info_poison);
        heev<T>(exec, Batch<T>::packed(a.data(), n, n, count), w, info, {.uplo = uplo, .vectors = vectors});

        const std::string context = "non-finite n=" + std::to_string(n) + " uplo=" + uplo_name(uplo) +
                                    (vectors ? " vectors" : " values-only");
        for (const int b : {with_nan, with_inf}) {
          EXPECT_EQ(info[b], status::non_finite_input) << context << ": matrix " << b;
          for (int k = 0; k < n; ++k)
            EXPECT_TRUE(std::isnan(w[std::size_t(b) * n + k])) << context << ": matrix " << b << " w[" << k << "]";
          if (vectors) {
            for (std::size_t e = 0; e < std::size_t(n) * n; ++e)
              ASSERT_TRUE(std::isnan(std::real(a[std::size_t(b) * n * n + e]))) << context << ": matrix " << b;
          }
        }
        std::vector<int> good;
        for (int b = 0; b < count; ++b)
          if (b != with_nan && b != with_inf) good.push_back(b);
        test::expect_eigen_results<T>(c, vectors ? a.data() : nullptr, w.data(), info.data(), good, context);
      }
}

TYPED_TEST(HeevCpu, WorkspaceQueryCoversTheRun) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("heev cpu workspace"));
  for (const bool vectors : {true, false})
    for (const int n : {2, 17, 128}) {
      Exec exec = Exec::cpu(2);
      const HeevOptions options{.uplo = Uplo::lower, .vectors = vectors};
      const std::size_t bytes = heev_workspace<T>(exec, n, 7, options);
      EXPECT_GT(bytes, 0u) << "n=" << n;
      exec.workspace().reserve(bytes);
      ASSERT_EQ(exec.workspace().growth_count(), 0u);
      const EigenCase<T> c = test::make_eigen_case<T>(SpectrumKind::random, n, 7, rng);
      const HeevRun<T> run = run_heev(exec, c, options.uplo, vectors);
      EXPECT_EQ(exec.workspace().growth_count(), 0u)
          << "heev grew the workspace beyond heev_workspace() = " << bytes << " bytes at n=" << n;
      test::expect_eigen_results<T>(c, vectors ? run.a.data() : nullptr, run.w.data(), run.info.data(),
                                    all_indices(7), "workspace");
    }
  Exec exec = Exec::cpu(2);
  EXPECT_EQ(heev_workspace<T>(exec, 0, 7), 0u);
  EXPECT_EQ(heev_workspace<T>(exec, 16, 0), 0u);
}

// ---- the generators and the checker themselves ------------------------------------------------

// Each generator makes what its name promises: exactly Hermitian input with an ascending
// reference, and the structure of its kind.
TYPED_TEST(HeevCpu, GeneratorsBuildTheirSpectra) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("eigen_cases generators"));
  constexpr int n = 33, count = 2;
  const double e = test::eps<T>();
  for (const SpectrumKind kind : test::all_spectrum_kinds()) {
    const EigenCase<T> c = test::make_eigen_case<T>(kind, n, count, rng);
    ASSERT_EQ(c.a.size(), std::size_t(count) * n * n);
    ASSERT_EQ(c.reference_values.size(), std::size_t(count) * n);
    // The same seed gives the same case.
    EXPECT_EQ(test::make_eigen_case<T>(kind, n, count, c.seed).reference_values, c.reference_values);
    for (int b = 0; b < count; ++b) {
      const std::string where = test::name(kind) + " b=" + std::to_string(b) + " seed " + std::to_string(c.seed);
      const T* m = c.matrix(b);
      const double* ref = c.reference(b);
      auto at = [&](int i, int j) { return m[i + std::size_t(j) * n]; };
      for (int j = 0; j < n; ++j) {
        EXPECT_EQ(std::imag(at(j, j)), 0) << where;
        for (int i = 0; i < n; ++i) {
          ASSERT_TRUE(std::isfinite(std::abs(at(i, j)))) << where;
          if constexpr (is_complex_v<T>) {
            ASSERT_EQ(at(i, j), std::conj(at(j, i))) << where << " not Hermitian";
          } else {
            ASSERT_EQ(at(i, j), at(j, i)) << where << " not symmetric";
          }
        }
      }
      EXPECT_TRUE(std::is_sorted(ref, ref + n)) << where;
      const double norm2 = std::max(std::abs(ref[0]), std::abs(ref[n - 1]));
      const double slack = 100 * n * e * std::max(norm2, 1.0);  // rounding the built matrix to T
      auto count_near = [&](double value) {
        return std::count_if(ref, ref + n, [&](double x) { return std::abs(x - value) <= slack; });
      };
      bool complex_off_diagonal = false;
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i)
          if (i != j && std::imag(at(i, j)) != 0) complex_off_diagonal = true;
      switch (kind) {
        case SpectrumKind::random:
          EXPECT_LT(ref[0], 0) << where;
          EXPECT_GT(ref[n - 1], 0) << where;
          EXPECT_EQ(complex_off_diagonal, is_complex_v<T>) << where;
          break;
        case SpectrumKind::clustered:
          EXPECT_EQ(count_near(-2.0), n / 4) << where;
          EXPECT_EQ(count_near(0.5), n / 4) << where;
          EXPECT_EQ(count_near(3.0), n / 4) << where;
          // the rest: the tight cluster 1, 1 + 1e-9, …
          EXPECT_EQ(std::count_if(ref, ref + n, [&](double x) { return x >= 1 - slack && x <= 1 + 1e-9 * n + slack; }),
                    n - 3 * (n / 4)) << where;
          break;
        case SpectrumKind::graded:
          EXPECT_NEAR(ref[n - 1], 1.0, slack) << where;
          EXPECT_NEAR(ref[0], 1e-12, slack) << where;
          EXPECT_NEAR(ref[n / 2], std::pow(10.0, -12.0 * (n / 2) / (n - 1)), slack) << where;
          break;
        case SpectrumKind::diagonal: {
          std::vector<double> diagonal;
          for (int j = 0; j < n; ++j) diagonal.push_back(std::real(at(j, j)));
          std::sort(diagonal.begin(), diagonal.end());
          EXPECT_EQ(diagonal, std::vector<double>(ref, ref + n)) << where;
          for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i)
              if (i != j) {
                ASSERT_EQ(at(i, j), T(0)) << where;
              }
          break;
        }
        case SpectrumKind::tridiagonal:
          for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i)
              if (std::abs(i - j) > 1) {
                ASSERT_EQ(at(i, j), T(0)) << where;
              } else {
                ASSERT_NE(at(i, j), T(0)) << where;
              }
          EXPECT_EQ(complex_off_diagonal, is_complex_v<T>) << where;
          break;
        case SpectrumKind::zero:
          for (int k = 0; k < n * n; ++k) ASSERT_EQ(m[k], T(0)) << where;
          EXPECT_EQ(count_near(0.0), n) << where;
          break;
        case SpectrumKind::radar: {
          // Positive semidefinite; 2–4 sources of 10–30 dB with array gain n stand far above a
          // noise floor of about 1 (one eigenvalue per source for complex data, up to two for the
          // real part).
          EXPECT_GE(ref[0], -slack) << where;
          const auto strong = std::count_if(ref, ref + n, [](double x) { return x > 30.0; });
          EXPECT_GE(strong, 1) << where;
          EXPECT_LE(strong, is_complex_v<T> ? 4 : 8) << where;
          EXPECT_LT(ref[n / 2], 5.0) << where;
          EXPECT_GT(ref[n - 1], 100.0) << where;
          EXPECT_EQ(complex_off_diagonal, is_complex_v<T>) << where;
          break;
        }
        case SpectrumKind::padded: {
          // A radar block in the leading k rows and columns, exact zeros elsewhere.
          const int k = (n + 5) / 6;
          for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i)
              if (i >= k || j >= k) {
                ASSERT_EQ(at(i, j), T(0)) << where;
              }
          EXPECT_GE(count_near(0.0), n - k) << where;
          EXPECT_GE(ref[0], -slack) << where;
          break;
        }
        case SpectrumKind::near_singular:
          EXPECT_EQ(count_near(0.0), n / 3) << where;
          EXPECT_GE(ref[n / 3], 1.0 - slack) << where;
          EXPECT_LE(ref[n - 1], 2.0 + slack) << where;
          break;
      }
    }
  }
}

TYPED_TEST(HeevCpu, GarbleTouchesOnlyTheUnreadTriangle) {
  using T = TypeParam;
  constexpr int n = 4, count = 2;
  for (const Uplo read : {Uplo::lower, Uplo::upper}) {
    std::vector<T> a(count * n * n, T(1));
    test::garble_unread_triangle(a, n, count, read);
    for (int b = 0; b < count; ++b)
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) {
          const bool unread = read == Uplo::lower ? i < j : i > j;
          EXPECT_EQ(std::isnan(std::real(a[b * n * n + i + j * n])), unread) << i << "," << j;
        }
  }
}

// The checker can fail: errors of known size come back with that size, and the convenience check
// reports them.
TYPED_TEST(HeevCpu, CheckerCatchesWrongResults) {
  using T = TypeParam;
  using R = real_t<T>;
  std::mt19937_64 rng(test::fresh_seed("eigen_cases checker"));
  Exec exec = Exec::cpu(1);
  constexpr int n = 16;
  const double unit = n * test::eps<T>();
  const EigenCase<T> c = test::make_eigen_case<T>(SpectrumKind::random, n, 1, rng);
  const HeevRun<T> good = run_heev(exec, c, Uplo::lower, true);
  const double norm2 = std::max(std::abs(c.reference(0)[0]), std::abs(c.reference(0)[n - 1]));
  const EigenErrors fine = test::eigen_errors<T>(c.matrix(0), good.a.data(), good.w.data(), c.reference(0), n);
  ASSERT_LE(fine.residual, test::eigen_tolerance);
  ASSERT_LE(fine.orthogonality, test::eigen_tolerance);
  ASSERT_LE(fine.values, test::eigen_tolerance);

  {  // one eigenvector element off by 1000·n·ε: both vector checks see it
    std::vector<T> v = good.a;
    v[3 + 5 * n] += T(R(1000 * unit));
    const auto e = test::eigen_errors<T>(c.matrix(0), v.data(), good.w.data(), c.reference(0), n);
    EXPECT_GT(e.residual, test::eigen_tolerance);
    EXPECT_GT(e.orthogonality, 500.0);  // ≈ √2·1000 for a unit-norm row
    EXPECT_EQ(e.values, fine.values);
  }
  {  // eigenvalues in the wrong order
    std::vector<R> w = good.w;
    std::reverse(w.begin(), w.end());
    const auto e = test::eigen_errors<T>(c.matrix(0), good.a.data(), w.data(), c.reference(0), n);
    EXPECT_GT(e.values, 1e3);
    EXPECT_GT(e.residual, 1e3);
  }
  {  // one eigenvalue off by exactly 20 and then 5 units of n·ε·‖A‖₂: measured as such
    for (const double offset : {20.0, 5.0}) {
      std::vector<R> w(c.reference(0), c.reference(0) + n);
      w[7] += R(offset * unit * norm2);
      const auto e = test::eigen_errors<T>(c.matrix(0), nullptr, w.data(), c.reference(0), n);
      EXPECT_NEAR(e.values, offset, 0.5);
      EXPECT_EQ(e.residual, 0);  // not measured without vectors
    }
  }
  {  // an unwritten (poisoned) output is NaN, which no "≤" accepts, and max_errors keeps it
    std::vector<T> v = good.a;
    v[n * n - 1] = test::poison<T>();
    std::vector<R> w = good.w;
    w[0] = test::poison<R>();
    const auto e = test::eigen_errors<T>(c.matrix(0), v.data(), w.data(), c.reference(0), n);
    EXPECT_TRUE(std::isnan(e.residual));
    EXPECT_TRUE(std::isnan(e.orthogonality));
    EXPECT_TRUE(std::isnan(e.values));
    const auto worst = test::max_errors(test::max_errors(fine, e), fine);
    EXPECT_TRUE(std::isnan(worst.residual) && std::isnan(worst.orthogonality) && std::isnan(worst.values));
  }
  {  // the zero matrix: exact results pass, anything else is infinitely wrong
    const EigenCase<T> z = test::make_eigen_case<T>(SpectrumKind::zero, n, 1, rng);
    std::vector<T> identity(n * n, T(0));
    for (int k = 0; k < n; ++k) identity[k + k * n] = T(1);
    std::vector<R> w(n, R(0));
    auto e = test::eigen_errors<T>(z.matrix(0), identity.data(), w.data(), z.reference(0), n);
    EXPECT_EQ(e.residual, 0);
    EXPECT_EQ(e.orthogonality, 0);
    EXPECT_EQ(e.values, 0);
    w[n - 1] = std::numeric_limits<R>::denorm_min();
    e = test::eigen_errors<T>(z.matrix(0), identity.data(), w.data(), z.reference(0), n);
    EXPECT_EQ(e.values, std::numeric_limits<double>::infinity());
    EXPECT_EQ(e.residual, std::numeric_limits<double>::infinity());
  }
  {  // the EXPECTing wrapper reports a bad eigenvalue and a bad info, naming the kind and matrix
    const std::vector<int> which = {0};
    std::vector<R> w = good.w;
    w[7] += R(20 * unit * norm2);
    EXPECT_NONFATAL_FAILURE(test::expect_eigen_results<T>(c, nullptr, w.data(), good.info.data(), which, "self-test"),
                            "kind=random n=16 b=0");
    const int bad_info = status::no_convergence;
    EXPECT_NONFATAL_FAILURE(test::expect_eigen_results<T>(c, nullptr, good.w.data(), &bad_info, which, "self-test"),
                            ": info");
  }
}

// ---- argument errors ------------------------------------------------------------------------

TEST(HeevCpuErrors, BadArgumentsAreNamed) {
  Exec exec = Exec::cpu(1);
  std::vector<cf64> a(3 * 4 * 2);
  std::vector<double> w(6);
  std::vector<int> info(2);
  auto expect_message = [&](auto&& call, const std::string& fragment) {
    try {
      call();
      ADD_FAILURE() << "no error; expected " << fragment;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_message([&] { heev<cf64>(exec, Batch<cf64>::packed(a.data(), 3, 4, 2), w, info); },
                 "heev: A must be square, got 3×4");
  expect_message([&] { heev<cf64>(exec, Batch<cf64>::packed(a.data(), 3, 3, 2), std::span(w).first(5), info); },
                 "heev: w holds 5 values, 6 needed (count × n)");
  expect_message([&] { heev<cf64>(exec, Batch<cf64>::packed(a.data(), 3, 3, 2), w, std::span(info).first(1)); },
                 "heev: info holds 1 entries, 2 needed (one per matrix)");
  expect_message([&] { heev<cf64>(exec, Batch<cf64>{a.data(), 3, 3, 2, 9, 2}, w, info); },
                 "heev: A: leading dimension 2 < rows 3");
  expect_message([&] { heev<cf64>(exec, Batch<cf64>::packed(a.data(), 3, 3, 2), w, info, {.uplo = Uplo('X')}); },
                 "heev: uplo must be lower or upper");
  std::vector<float> wf(6);
  std::vector<float> af(3 * 4 * 2);
  expect_message([&] { heev<f32>(exec, Batch<f32>::packed(af.data(), 4, 3, 2), wf, info); },
                 "heev: A must be square, got 4×3");
}

TEST(HeevCpuErrors, EmptyBatchIsANoOp) {
  Exec exec = Exec::cpu(1);
  EXPECT_NO_THROW(heev<cf64>(exec, Batch<cf64>{nullptr, 8, 8, 8, 64, 0}, {}, {}));
  EXPECT_NO_THROW(heev<f32>(exec, Batch<f32>{nullptr, 0, 0, 1, 0, 3}, {}, {}));
}

}  // namespace
}  // namespace covflow::linalg

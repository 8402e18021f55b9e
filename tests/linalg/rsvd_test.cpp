// rsvd on the CPU backend through the public API: rsvd_cases.hpp's checks (fixed rank against the
// bound of Halko, Martinsson and Tropp; fixed accuracy on a batch of mixed ranks; the Hermitian form
// on radar sample covariances; reproducibility from the seed; a NaN in one matrix), and here the
// operator form and the argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "covflow/linalg/error.hpp"
#include "covflow/linalg/rsvd.hpp"
#include "lowrank_cases.hpp"
#include "rsvd_cases.hpp"
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

using test::precise_t;
using rsvd_checks::eps;
using rsvd_checks::frobenius;
using rsvd_checks::Result;

template <class T>
class RsvdCpu : public ::testing::Test {};
using ElementTypes = ::testing::Types<f32, f64, cf32, cf64>;
TYPED_TEST_SUITE(RsvdCpu, ElementTypes);

template <class T>
Result<T> call(Exec& exec, const std::vector<T>& a, int m, int n, int count, const RsvdOptions& options) {
  return rsvd_checks::call_host<T>(exec, a, m, n, count, options);
}

// rsvd_cases.hpp says what each of these checks.
TYPED_TEST(RsvdCpu, FixedRankMeetsTheHalkoMartinssonTroppBound) {
  Exec exec = Exec::cpu(3);
  rsvd_checks::fixed_rank_meets_the_bound<TypeParam>(exec, rsvd_checks::Runner<TypeParam>(call<TypeParam>));
}

TYPED_TEST(RsvdCpu, FixedAccuracyMeetsTheToleranceOnEveryMatrixOfAMixedBatch) {
  Exec exec = Exec::cpu(3);
  rsvd_checks::fixed_accuracy_meets_the_tolerance<TypeParam>(exec, rsvd_checks::Runner<TypeParam>(call<TypeParam>));
}

TYPED_TEST(RsvdCpu, HermitianFormFindsTheSignalEigenvaluesOfRadarCovariances) {
  Exec exec = Exec::cpu(3);
  rsvd_checks::hermitian_form_on_radar_covariances<TypeParam>(exec, rsvd_checks::Runner<TypeParam>(call<TypeParam>));
}

// The operator form: a sampler doing the same products (in double, rounded) gives the dense call's
// values to rounding, with the expected number of products; fixed rank needs no norms (the error
// is then unknown: NaN), fixed accuracy refuses to run without them.
TYPED_TEST(RsvdCpu, SamplerFormMatchesTheDenseForm) {
  using T = TypeParam;
  Exec exec = Exec::cpu(2);
  std::mt19937_64 rng(test::fresh_seed("RsvdCpu.Sampler"));
  const int m = 50, n = 40, count = 2;
  const auto lc = test::make_lowrank_case<T>(test::latms_spec(m, n, count, 3, 1e5), rng);
  RsvdOptions options;
  options.rank = 6;
  options.seed = 7;
  const Result<T> dense = call(exec, lc.a, m, n, count, options);
  std::vector<real_t<T>> norms(count);
  for (int b = 0; b < count; ++b) {
    double sum = 0;
    for (int e = 0; e < m * n; ++e) sum += std::norm(std::complex<double>(lc.matrix(b)[e]));
    norms[b] = real_t<T>(std::sqrt(sum));
  }
  int applied = 0;
  Sampler<T> sampler;
  sampler.m = m;
  sampler.n = n;
  sampler.count = count;
  sampler.norms = norms;
  auto product = [&](bool adjoint, Batch<const T> x, Batch<T> y) {
    ++applied;
    for (int b = 0; b < count; ++b)
      for (int j = 0; j < x.cols; ++j)
        for (int i = 0; i < y.rows; ++i) {
          precise_t<T> sum = 0;
          for (int l = 0; l < x.rows; ++l) {
            const precise_t<T> e = adjoint ? precise_t<T>(lc.matrix(b)[l + i * m]) : precise_t<T>(lc.matrix(b)[i + l * m]);
            if constexpr (is_complex_v<T>) sum += (adjoint ? std::conj(e) : e) * precise_t<T>(x.at(b, l, j));
            else sum += e * precise_t<T>(x.at(b, l, j));
          }
          y.at(b, i, j) = T(sum);
        }
  };
  sampler.apply = [&](Batch<const T> x, Batch<T> y) { product(false, x, y); };
  sampler.apply_adjoint = [&](Batch<const T> x, Batch<T> z) { product(true, x, z); };
  const int r = rsvd_output_rank(m, n, options);
  std::vector<real_t<T>> s(count * r);
  std::vector<T> u(count * m * r), v(count * n * r);
  std::vector<RsvdInfo> info(count);
  std::vector<std::byte> workspace(rsvd_workspace<T>(exec, m, n, count, options));
  rsvd<T>(exec, sampler, s, Batch<T>::packed(u.data(), m, r, count), Batch<T>::packed(v.data(), n, r, count), info,
          workspace, options);
  EXPECT_EQ(applied, 4);  // A·Ω, one power iteration (Aᴴ·Q, A·Z), Bᴴ = Aᴴ·Q
  for (int i = 0; i < count * r; ++i) EXPECT_NEAR(s[i], dense.s[i], 100 * eps<T>() * double(dense.s[(i / r) * r]));
  for (int b = 0; b < count; ++b) EXPECT_EQ(info[b].rank, dense.info[b].rank);
  sampler.norms = {};
  rsvd<T>(exec, sampler, s, Batch<T>::packed(u.data(), m, r, count), Batch<T>::packed(v.data(), n, r, count), info,
          workspace, options);
  for (int b = 0; b < count; ++b) {
    EXPECT_EQ(info[b].status, rsvd_status::ok);
    EXPECT_TRUE(std::isnan(info[b].error)) << "no norms: the error is not known";
  }
  for (bool absolute : {false, true}) {
    RsvdOptions accuracy;
    accuracy.tolerance = 0.1;
    accuracy.absolute = absolute;
    const int rr = rsvd_output_rank(m, n, accuracy);
    std::vector<real_t<T>> s2(count * rr);
    std::vector<T> u2(count * m * rr), v2(count * n * rr);
    std::vector<std::byte> w2(rsvd_workspace<T>(exec, m, n, count, accuracy));
    EXPECT_THROW(rsvd<T>(exec, sampler, s2, Batch<T>::packed(u2.data(), m, rr, count),
                         Batch<T>::packed(v2.data(), n, rr, count), info, w2, accuracy),
                 InvalidArgument);
  }
}

TYPED_TEST(RsvdCpu, SeedReproducesAndANaNMatrixLeavesTheOthersExact) {
  Exec exec = Exec::cpu(1);
  Exec four = Exec::cpu(4);
  rsvd_checks::seed_and_nan<TypeParam>(exec, four, rsvd_checks::Runner<TypeParam>(call<TypeParam>));
}

TEST(RsvdCpuArguments, AreCheckedWithClearMessages) {
  Exec exec = Exec::cpu(1);
  std::vector<f64> a(20 * 10, 1.0), s(100), u(2000), v(1000);
  std::vector<RsvdInfo> info(1);
  std::vector<std::byte> w(1 << 20);
  auto attempt = [&](RsvdOptions o, int m = 20, int n = 10) {
    const int r = rsvd_output_rank(m, n, o);
    rsvd<f64>(exec, Batch<const f64>::packed(a.data(), m, n, 1), s, Batch<f64>::packed(u.data(), m, r, 1),
              o.hermitian ? Batch<f64>{} : Batch<f64>::packed(v.data(), n, r, 1), info, w, o);
  };
  auto message = [&](RsvdOptions o, int m = 20, int n = 10) {
    try {
      attempt(o, m, n);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(RsvdOptions{}).find("give a rank (> 0) or a tolerance"), std::string::npos);
  EXPECT_NE(message(RsvdOptions{.rank = 3, .tolerance = 1e-3}).find("not both"), std::string::npos);
  EXPECT_NE(message(RsvdOptions{.tolerance = 1e-9}).find("below what this precision can confirm"), std::string::npos);
  EXPECT_NE(message(RsvdOptions{.rank = 3, .hermitian = true}).find("square"), std::string::npos);
  EXPECT_NE(message(RsvdOptions{.rank = 3, .max_rank = 5}).find("fixed-accuracy"), std::string::npos);
  std::vector<std::byte> small(16);
  const RsvdOptions o{.rank = 3};
  EXPECT_THROW(rsvd<f64>(exec, Batch<const f64>::packed(a.data(), 20, 10, 1), s, Batch<f64>::packed(u.data(), 20, 3, 1),
                         Batch<f64>::packed(v.data(), 10, 3, 1), info, small, o),
               InvalidArgument);
  EXPECT_THROW(rsvd<f64>(exec, Batch<const f64>::packed(a.data(), 20, 10, 1), s, Batch<f64>::packed(u.data(), 20, 4, 1),
                         Batch<f64>::packed(v.data(), 10, 3, 1), info, w, o),
               InvalidArgument);
}

}  // namespace
}  // namespace covflow::linalg

// rsvd on the CPU backend through the public API. Fixed rank against the bound of Halko, Martinsson
// and Tropp; fixed accuracy on a batch of mixed ranks (every matrix within the tolerance, no rank
// above the optimal one plus the block size, the reported error the achieved one); the Hermitian
// form on radar sample covariances against their exact eigenvalues, and in fixed accuracy; the
// operator form; reproducibility from the seed; a NaN in one matrix; argument errors. References
// and residuals in double (LAPACK's dgesvj/zgesvj through lowrank_cases.hpp).
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
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

using test::precise_t;

template <class T>
class RsvdCpu : public ::testing::Test {};
using ElementTypes = ::testing::Types<f32, f64, cf32, cf64>;
TYPED_TEST_SUITE(RsvdCpu, ElementTypes);

template <class T>
constexpr double eps() {
  return double(std::numeric_limits<real_t<T>>::epsilon());
}

// What one call returned, on the host.
template <class T>
struct Result {
  int r = 0;
  std::vector<real_t<T>> s;
  std::vector<T> u, v;
  std::vector<RsvdInfo> info;
};

template <class T>
Result<T> call(Exec& exec, const std::vector<T>& a, int m, int n, int count, const RsvdOptions& options) {
  Result<T> out;
  out.r = rsvd_output_rank(m, n, options);
  const auto c = static_cast<std::size_t>(count), r = static_cast<std::size_t>(out.r);
  out.s.assign(c * r, real_t<T>(std::nan("")));
  out.u.assign(c * m * r, T(std::nan("")));
  out.v.assign(options.hermitian ? 0 : c * n * r, T(std::nan("")));
  out.info.assign(c, RsvdInfo{-1, -1, -1});
  std::vector<std::byte> workspace(rsvd_workspace<T>(exec, m, n, count, options));
  rsvd<T>(exec, Batch<const T>::packed(a.data(), m, n, count), out.s, Batch<T>::packed(out.u.data(), m, out.r, count),
          options.hermitian ? Batch<T>{} : Batch<T>::packed(out.v.data(), n, out.r, count), out.info, workspace, options);
  return out;
}

// A − U·diag(s)·Vᴴ of matrix b in double (Hermitian: V = U), column-major m × n.
template <class T>
std::vector<precise_t<T>> residual(const std::vector<T>& a, const Result<T>& x, int b, int m, int n, bool hermitian) {
  using P = precise_t<T>;
  std::vector<P> d(static_cast<std::size_t>(m) * n);
  const std::size_t r = static_cast<std::size_t>(x.r);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      P sum = 0;
      for (std::size_t l = 0; l < r; ++l) {
        const P ui = P(x.u[b * m * r + l * m + i]);
        const P vj = hermitian ? P(x.u[b * m * r + l * m + j]) : P(x.v[b * n * r + l * n + j]);
        if constexpr (is_complex_v<T>) sum += ui * double(x.s[b * r + l]) * std::conj(vj);
        else sum += ui * double(x.s[b * r + l]) * vj;
      }
      d[i + static_cast<std::size_t>(j) * m] = P(a[b * m * n + i + static_cast<std::size_t>(j) * m]) - sum;
    }
  return d;
}

template <class P>
double frobenius(const std::vector<P>& x) {
  double sum = 0;
  for (const P& v : x) sum += std::norm(std::complex<double>(v));
  return std::sqrt(sum);
}

// ‖XᴴX − I‖_F for the first `cols` columns of an m × ld_cols block.
template <class T>
double orthogonality(const T* x, int m, int cols) {
  double sum = 0;
  for (int p = 0; p < cols; ++p)
    for (int q = 0; q < cols; ++q) {
      std::complex<double> dot = 0;
      for (int i = 0; i < m; ++i) dot += std::conj(std::complex<double>(x[i + p * m])) * std::complex<double>(x[i + q * m]);
      sum += std::norm(dot - (p == q ? 1.0 : 0.0));
    }
  return std::sqrt(sum);
}

// Fixed rank. Halko, Martinsson and Tropp (SIAM Review 2011), Corollary 10.10 with §10.3's
// simplification (their eq. (1.11)): with k + p Gaussian samples (p ≥ 2) and q power iterations,
//   ‖A − QQᴴA‖₂ ≤ [1 + 11·√(k+p)·√min(m,n)]^(1/(2q+1)) · σ_{k+1}
// except with probability at most 6·p^(−p) (p = 10: 6e-10), and truncating QQᴴA to rank k adds at
// most σ_{k+1} (their §9.4), so ‖A − U_kΣ_kV_kᴴ‖₂ ≤ (1 + [1 + 11·√(k+p)·√min(m,n)]^(1/(2q+1)))·σ_{k+1}.
// Checked on ?latms matrices with fast (geometric, mode 3) and slow (arithmetic, mode 4) decay, and
// on rank-10 plus noise; plus ‖UᴴU − I‖_F, ‖VᴴV − I‖_F ≤ 10·k·ε.
TYPED_TEST(RsvdCpu, FixedRankMeetsTheHalkoMartinssonTroppBound) {
  using T = TypeParam;
  Exec exec = Exec::cpu(2);
  std::mt19937_64 rng(test::fresh_seed("RsvdCpu.FixedRank"));
  const int m = 90, n = 70, count = 3, k = 10, p = 10;
  for (int q : {0, 1}) {
    std::vector<test::LowrankSpec> specs = {test::latms_spec(m, n, count, 3, 1e4), test::latms_spec(m, n, count, 4, 1e4)};
    for (const auto& spec : specs) {
      const auto lc = test::make_lowrank_case<T>(spec, rng);
      SCOPED_TRACE(lc.label() + " q=" + std::to_string(q));
      RsvdOptions options;
      options.rank = k;
      options.oversampling = p;
      options.power_iterations = q;
      options.seed = rng();
      const Result<T> x = call(exec, lc.a, m, n, count, options);
      const double c = 1.0 + std::pow(1.0 + 11.0 * std::sqrt(double(k + p)) * std::sqrt(double(std::min(m, n))), 1.0 / (2 * q + 1));
      for (int b = 0; b < count; ++b) {
        EXPECT_EQ(x.info[b].status, rsvd_status::ok);
        EXPECT_EQ(x.info[b].rank, k);
        const auto sigma = test::reference_singular_values<T>(lc.matrix(b), m, n);
        const auto d = residual(lc.a, x, b, m, n, false);
        const double spectral = test::reference_singular_values<precise_t<T>>(d.data(), m, n)[0];
        EXPECT_LE(spectral, c * sigma[k]) << "matrix " << b << ": ‖A − UΣVᴴ‖₂ " << spectral << ", σ_{k+1} " << sigma[k];
        EXPECT_LE(orthogonality(x.u.data() + b * m * k, m, k), 10.0 * k * eps<T>()) << "matrix " << b;
        EXPECT_LE(orthogonality(x.v.data() + b * n * k, n, k), 10.0 * k * eps<T>()) << "matrix " << b;
        // The reported error is the achieved one (Frobenius), to rounding of ‖A‖² − Σσᵢ².
        double norm2 = 0;
        for (double sv : sigma) norm2 += sv * sv;
        EXPECT_NEAR(x.info[b].error * x.info[b].error, frobenius(d) * frobenius(d),
                    1e-3 * frobenius(d) * frobenius(d) + (m + n) * eps<T>() * norm2);
        for (int i = 1; i < k; ++i) EXPECT_GE(x.s[b * k + i - 1], x.s[b * k + i]);
      }
    }
  }
}

// Fixed accuracy on one batch of matrices of different ranks (exact rank r plus noise far below the
// tolerance, and the zero matrix): every achieved ‖A − UΣVᴴ‖_F ≤ tol·‖A‖_F, every rank at most the
// optimal rank (from the exact singular values) plus the block size, the reported error the
// achieved one; a max_rank below what a matrix needs stops it there with max_rank_reached.
TYPED_TEST(RsvdCpu, FixedAccuracyMeetsTheToleranceOnEveryMatrixOfAMixedBatch) {
  using T = TypeParam;
  using P = precise_t<T>;
  Exec exec = Exec::cpu(3);
  std::mt19937_64 rng(test::fresh_seed("RsvdCpu.FixedAccuracy"));
  const int m = 80, n = 60;
  const std::vector<int> ranks = {0, 3, 17, 30, 45, 60};
  const int count = static_cast<int>(ranks.size());
  const double tol = std::is_same_v<real_t<T>, float> ? 1e-2 : 1e-6;
  const double noise = tol * 1e-3;
  std::vector<T> a(static_cast<std::size_t>(count) * m * n);
  std::normal_distribution<double> normal;
  for (int b = 0; b < count; ++b) {
    const auto lc = test::make_lowrank_case<T>(test::rank_deficient_spec(m, n, 1, ranks[b]), rng);
    double norm = 0;
    for (const T& v : lc.a) norm += std::norm(std::complex<double>(v));
    norm = std::sqrt(norm);
    for (int e = 0; e < m * n; ++e) {
      P x = P(lc.a[e]);
      if (ranks[b] > 0) x += P(noise * norm / std::sqrt(double(m) * n) * normal(rng));
      a[b * m * n + e] = T(x);
    }
  }
  for (int block : {8, 16}) {
    RsvdOptions options;
    options.tolerance = tol;
    options.block = block;
    options.seed = rng();
    SCOPED_TRACE("block " + std::to_string(block));
    const Result<T> x = call(exec, a, m, n, count, options);
    ASSERT_EQ(x.r, std::min(m, n));
    for (int b = 0; b < count; ++b) {
      SCOPED_TRACE("matrix " + std::to_string(b) + " (rank " + std::to_string(ranks[b]) + " + noise)");
      EXPECT_EQ(x.info[b].status, rsvd_status::ok);
      std::vector<T> one(a.begin() + b * m * n, a.begin() + (b + 1) * m * n);
      double norm = 0;
      for (const T& v : one) norm += std::norm(std::complex<double>(v));
      norm = std::sqrt(norm);
      const auto sigma = test::reference_singular_values<T>(one.data(), m, n);
      int optimal = 0;
      for (;; ++optimal) {
        double tail = 0;
        for (std::size_t i = optimal; i < sigma.size(); ++i) tail += sigma[i] * sigma[i];
        if (std::sqrt(tail) <= tol * norm || optimal == int(sigma.size())) break;
      }
      EXPECT_LE(x.info[b].rank, optimal + block);
      EXPECT_GE(x.info[b].rank, std::min(optimal, ranks[b]));
      const double achieved = frobenius(residual(a, x, b, m, n, false));
      EXPECT_LE(achieved, tol * norm) << "rank " << x.info[b].rank << ", optimal " << optimal;
      // The reported error comes from ‖A‖² − Σσᵢ²: its square is the achieved one's to (m + n)·ε·‖A‖²
      // (the rounding of the sums), far below tol²·‖A‖² at the tolerances accepted (≥ 10·√ε).
      EXPECT_NEAR(x.info[b].error * x.info[b].error, achieved * achieved,
                  0.1 * tol * tol * norm * norm + (m + n) * eps<T>() * norm * norm);
      for (int j = x.info[b].rank; j < x.r; ++j) EXPECT_EQ(x.s[b * x.r + j], real_t<T>(0));
    }
  }
  RsvdOptions capped;
  capped.tolerance = tol;
  capped.max_rank = 20;
  capped.block = 8;
  const Result<T> x = call(exec, a, m, n, count, capped);
  ASSERT_EQ(x.r, 20);
  EXPECT_EQ(x.info[1].status, rsvd_status::ok);
  EXPECT_EQ(x.info[4].status, rsvd_status::max_rank_reached);
  EXPECT_EQ(x.info[4].rank, 20);
  EXPECT_GT(x.info[4].error, tol * frobenius(std::vector<T>(a.begin() + 4 * m * n, a.begin() + 5 * m * n)));
}

// Radar sample covariances R = XXᴴ/K (X: snapshots of 2 sources and 2 jammers over unit noise):
// the Hermitian form's leading eigenvalues (the signal subspace, 4) within 1e-3 relative of the
// exact ones (LAPACK in double), U orthonormal; in fixed accuracy, ‖R − UΛUᴴ‖_F ≤ tol·‖R‖_F.
TYPED_TEST(RsvdCpu, HermitianFormFindsTheSignalEigenvaluesOfRadarCovariances) {
  using T = TypeParam;
  using P = precise_t<T>;
  Exec exec = Exec::cpu(2);
  std::mt19937_64 rng(test::fresh_seed("RsvdCpu.Hermitian"));
  const int n = 48, snapshots = 200, count = 3;
  const auto x = test::make_lowrank_case<T>(test::radar_spec(n, snapshots, count), rng);
  std::vector<T> cov(static_cast<std::size_t>(count) * n * n);
  for (int b = 0; b < count; ++b)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) {
        P sum = 0;
        for (int t = 0; t < snapshots; ++t) {
          const P xi = P(x.matrix(b)[i + t * n]), xj = P(x.matrix(b)[j + t * n]);
          if constexpr (is_complex_v<T>) sum += xi * std::conj(xj);
          else sum += xi * xj;
        }
        cov[b * n * n + i + j * n] = T(sum / double(snapshots));
      }
  RsvdOptions options;
  options.hermitian = true;
  options.rank = 8;
  options.seed = rng();
  const Result<T> r = call(exec, cov, n, n, count, options);
  for (int b = 0; b < count; ++b) {
    SCOPED_TRACE("matrix " + std::to_string(b));
    EXPECT_EQ(r.info[b].status, rsvd_status::ok);
    const auto lambda = test::reference_singular_values<T>(cov.data() + b * n * n, n, n);  // PSD: σ = λ
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(r.s[b * 8 + i], lambda[i], 1e-3 * lambda[i]) << "λ" << i;
    for (int i = 1; i < 8; ++i) EXPECT_GE(r.s[b * 8 + i - 1], r.s[b * 8 + i]);
    EXPECT_LE(orthogonality(r.u.data() + b * n * 8, n, 8), 10.0 * 8 * eps<T>());
  }
  RsvdOptions accurate;
  accurate.hermitian = true;
  accurate.tolerance = std::is_same_v<real_t<T>, float> ? 1e-2 : 1e-6;
  accurate.block = 8;
  accurate.seed = rng();
  const Result<T> f = call(exec, cov, n, n, count, accurate);
  for (int b = 0; b < count; ++b) {
    std::vector<T> one(cov.begin() + b * n * n, cov.begin() + (b + 1) * n * n);
    const double achieved = frobenius(residual(cov, f, b, n, n, true));
    EXPECT_LE(achieved, accurate.tolerance * frobenius(one)) << "matrix " << b << ", rank " << f.info[b].rank;
    const double norm = frobenius(one);
    EXPECT_NEAR(f.info[b].error * f.info[b].error, achieved * achieved,
                0.1 * accurate.tolerance * accurate.tolerance * norm * norm + 2 * n * eps<T>() * norm * norm);
  }
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

// Same seed → the same factors bit for bit, whatever the thread count and whatever follows the
// matrix in the batch; another seed → other factors. A NaN in one matrix flags it (NaN outputs, rank 0)
// and leaves the others bit-identical to a clean run.
TYPED_TEST(RsvdCpu, SeedReproducesAndANaNMatrixLeavesTheOthersExact) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("RsvdCpu.Seed"));
  const int m = 40, n = 30, count = 4;
  const auto lc = test::make_lowrank_case<T>(test::latms_spec(m, n, count, 5, 1e3), rng);
  for (bool fixed_rank : {true, false}) {
    SCOPED_TRACE(fixed_rank ? "fixed rank" : "fixed accuracy");
    RsvdOptions options;
    if (fixed_rank) options.rank = 5;
    else options.tolerance = 0.1;
    options.block = 4;
    options.seed = 42;
    Exec one = Exec::cpu(1), four = Exec::cpu(4);
    const Result<T> a = call(one, lc.a, m, n, count, options);
    const Result<T> b = call(four, lc.a, m, n, count, options);
    EXPECT_EQ(0, std::memcmp(a.u.data(), b.u.data(), a.u.size() * sizeof(T)));
    EXPECT_EQ(0, std::memcmp(a.s.data(), b.s.data(), a.s.size() * sizeof(real_t<T>)));
    // The first two matrices alone, as a batch of two: the same as in the batch of four.
    const std::vector<T> head(lc.a.begin(), lc.a.begin() + 2 * m * n);
    const Result<T> c = call(four, head, m, n, 2, options);
    EXPECT_EQ(0, std::memcmp(c.s.data(), a.s.data(), c.s.size() * sizeof(real_t<T>)));
    options.seed = 43;
    const Result<T> d = call(four, lc.a, m, n, count, options);
    EXPECT_NE(0, std::memcmp(a.u.data(), d.u.data(), a.u.size() * sizeof(T)));
    options.seed = 42;
    std::vector<T> bad = lc.a;
    bad[1 * m * n + 7] = T(std::numeric_limits<real_t<T>>::quiet_NaN());
    const Result<T> e = call(four, bad, m, n, count, options);
    EXPECT_EQ(e.info[1].status, rsvd_status::non_finite_input);
    EXPECT_EQ(e.info[1].rank, 0);
    for (int i = 0; i < e.r; ++i) EXPECT_TRUE(std::isnan(e.s[1 * e.r + i]));
    for (int mtx : {0, 2, 3}) {
      EXPECT_EQ(e.info[mtx].status, a.info[mtx].status);
      EXPECT_EQ(e.info[mtx].rank, a.info[mtx].rank);
      EXPECT_EQ(0, std::memcmp(e.s.data() + mtx * e.r, a.s.data() + mtx * a.r, e.r * sizeof(real_t<T>)));
      EXPECT_EQ(0, std::memcmp(e.u.data() + mtx * m * e.r, a.u.data() + mtx * m * a.r, m * e.r * sizeof(T)));
    }
  }
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

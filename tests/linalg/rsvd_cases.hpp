// rsvd's checks, shared by the CPU suite (rsvd_test.cpp) and the GPU suite (rsvd_gpu_test.cpp):
// each takes the Exec and a runner that calls rsvd on it and returns the outputs on the host.
// References and residuals in double (LAPACK's dgesvj/zgesvj through lowrank_cases.hpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "covflow/linalg/rsvd.hpp"
#include "lowrank_cases.hpp"
#include "test_support.hpp"

namespace covflow::linalg::rsvd_checks {

using test::precise_t;

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

// Calls rsvd on `exec` for count packed m × n matrices `a` (U, and V unless Hermitian, asked for;
// outputs poisoned with NaN first) and returns the outputs on the host.
// The runner of a host Exec.
template <class T>
Result<T> call_host(Exec& exec, const std::vector<T>& a, int m, int n, int count, const RsvdOptions& options) {
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

template <class T>
using Runner = std::function<Result<T>(Exec& exec, const std::vector<T>& a, int m, int n, int count, const RsvdOptions&)>;

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
template <class T>
void fixed_rank_meets_the_bound(Exec& exec, const Runner<T>& call) {
  std::mt19937_64 rng(test::fresh_seed("RsvdCpu.FixedRank"));
  const int m = 90, n = 70, count = 3, k = 10, p = 10;
  for (int q : {0, 1}) {
    std::vector<test::LowrankSpec> specs = {test::latms_spec(m, n, count, 3, 1e4), test::latms_spec(m, n, count, 4, 1e4),
                                            test::rank_deficient_spec(m, n, count, k)};
    for (const auto& spec : specs) {
      auto lc = test::make_lowrank_case<T>(spec, rng);
      if (spec.kind == test::LowrankKind::rank_deficient) {  // rank k plus noise 1e-3 of the signal (per element)
        std::normal_distribution<double> normal;
        double norm = 0;
        for (const T& x : lc.a) norm += std::norm(std::complex<double>(x));
        const double level = 1e-3 * std::sqrt(norm / double(lc.a.size()));
        for (T& x : lc.a) x += T(real_t<T>(level * normal(rng)));
      }
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
template <class T>
void fixed_accuracy_meets_the_tolerance(Exec& exec, const Runner<T>& call) {
  using P = precise_t<T>;
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
template <class T>
void hermitian_form_on_radar_covariances(Exec& exec, const Runner<T>& call) {
  using P = precise_t<T>;
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

// Same seed → the same factors bit for bit, on two Execs (the CPU suite: 1 and 4 threads) and
// whatever follows the matrix in the batch; another seed → other factors. A NaN in one matrix flags it (NaN outputs, rank 0)
// and leaves the others bit-identical to a clean run.
template <class T>
void seed_and_nan(Exec& first, Exec& second, const Runner<T>& call) {
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
    const Result<T> a = call(first, lc.a, m, n, count, options);
    const Result<T> b = call(second, lc.a, m, n, count, options);
    EXPECT_EQ(0, std::memcmp(a.u.data(), b.u.data(), a.u.size() * sizeof(T)));
    EXPECT_EQ(0, std::memcmp(a.s.data(), b.s.data(), a.s.size() * sizeof(real_t<T>)));
    // The first two matrices alone, as a batch of two: the same as in the batch of four.
    const std::vector<T> head(lc.a.begin(), lc.a.begin() + 2 * m * n);
    const Result<T> c = call(second, head, m, n, 2, options);
    EXPECT_EQ(0, std::memcmp(c.s.data(), a.s.data(), c.s.size() * sizeof(real_t<T>)));
    options.seed = 43;
    const Result<T> d = call(second, lc.a, m, n, count, options);
    EXPECT_NE(0, std::memcmp(a.u.data(), d.u.data(), a.u.size() * sizeof(T)));
    options.seed = 42;
    std::vector<T> bad = lc.a;
    bad[1 * m * n + 7] = T(std::numeric_limits<real_t<T>>::quiet_NaN());
    const Result<T> e = call(second, bad, m, n, count, options);
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

}  // namespace covflow::linalg::rsvd_checks

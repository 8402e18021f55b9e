// The CUDA heev follows A. Cosnuau, "Computation on GPU of Eigenvalues and Eigenvectors of a Large
// Number of Small Hermitian Matrices" (Procedia Computer Science, 2014). Its kernels are parallel
// versions of the serial algorithm below; this test pins the algorithm itself down on the CPU,
// against LAPACK, so that a wrong formula (reflector, phase scaling, rotation order, back-transform)
// shows up here in CI rather than only on a GPU:
//   §2.2  Householder reduction with Hermitian reflectors H = I − α w wᴴ, α real, w = x + e^{iθ}‖x‖e₁,
//         updated with one matrix-vector product per column (p = αAw, K = (α/2)wᴴp, q = p − Kw,
//         A ← A − wqᴴ − qwᴴ);
//   end of §2.2  the diagonal unitary S that turns the Hermitian tridiagonal into a real one;
//   §3    implicit Wilkinson-shifted QR on the real tridiagonal (linalg/heev/tridiagonal_qr.hpp,
//         the very code the GPU runs), its rotations applied to Z;
//   back-transform V = Q·S·Z.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <numeric>
#include <vector>

#include "../../linalg/heev/tridiagonal_dc.hpp"
#include "../../linalg/heev/tridiagonal_qr.hpp"
#include "eigen_cases.hpp"
#include "covflow/linalg/heev.hpp"
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

template <class T> T conj_of(T v) {
  if constexpr (is_complex_v<T>) return std::conj(v);
  else return v;
}
template <class T> real_t<T> abs2(T v) {
  if constexpr (is_complex_v<T>) return std::norm(v);
  else return v * v;
}

template <class R>
struct RecordingSink {
  std::vector<int> plane;
  std::vector<R> c, s;
  int sweeps = 0;
  bool reserve(int) {
    ++sweeps;
    return true;
  }
  void operator()(int j, R cj, R sj) {
    plane.push_back(j);
    c.push_back(cj);
    s.push_back(sj);
  }
};

template <class T>
struct ModelResult {
  std::vector<real_t<T>> values;  // ascending
  std::vector<T> vectors;         // n×n column-major
  int sweeps = 0;
  std::size_t rotations = 0;
};

// The divide and conquer of tridiagonal_dc.hpp, serially, as the GPU runs it in parallel: leaves by
// tridiagonal_qr, then the merges level by level. d holds T's diagonal on entry, its eigenvalues on
// exit (unsorted); z (n×n) the eigenvectors.
template <class R>
void model_divide_and_conquer(int n, std::vector<R>& d, const std::vector<R>& e, std::vector<R>& z, int leaf_max) {
  using namespace detail;
  z.assign(std::size_t(n) * n, R(0));
  auto Z = [&](int i, int j) -> R& { return z[std::size_t(i) + std::size_t(j) * n]; };
  const int levels = dc_levels(n, leaf_max);
  for (int leaf = 0; leaf < (1 << levels); ++leaf) {
    const int first = dc_begin(n, levels, leaf), m = dc_begin(n, levels, leaf + 1) - first;
    ASSERT_LE(m, leaf_max);
    std::vector<R> dl(d.begin() + first, d.begin() + first + m), el(std::max(m, 1), R(0));
    for (int k = 0; k + 1 < m; ++k) el[k] = e[first + k];
    dc_tear_leaf(n, first, m, dl.data(), e.data());
    RecordingSink<R> sink;
    QrState state;
    ASSERT_EQ(tridiagonal_qr(m, dl.data(), el.data(), sink, state, 30L * m), QrResult::done);
    for (int k = 0; k < m; ++k) {
      d[first + k] = dl[k];
      Z(first + k, first + k) = 1;
    }
    for (std::size_t t = 0; t < sink.plane.size(); ++t) {
      const int j = first + sink.plane[t];
      for (int r = first; r < first + m; ++r) {
        const R x = Z(r, j), y = Z(r, j + 1);
        Z(r, j + 1) = sink.c[t] * y - sink.s[t] * x;
        Z(r, j) = sink.s[t] * y + sink.c[t] * x;
      }
    }
  }
  for (int level = levels - 1; level >= 0; --level) {
    for (int node = 0; node < (1 << level); ++node) {
      const int first = dc_begin(n, level, node), m = dc_begin(n, level, node + 1) - first;
      const int m1 = dc_begin(n, level + 1, 2 * node + 1) - first;
      const R beta = e[first + m1 - 1], rho = 2 * std::fabs(beta);
      std::vector<R> lam(m), zz(m);
      for (int k = 0; k < m; ++k) {
        lam[k] = d[first + k];
        zz[k] = (k < m1 ? Z(first + m1 - 1, first + k) : (beta < 0 ? -1 : 1) * Z(first + m1, first + k)) / std::sqrt(R(2));
      }
      std::vector<int> order(m);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return lam[x] < lam[y]; });
      std::vector<int> kept_col(m), gone_col(m), rot_p(m), rot_q(m);
      std::vector<R> kept_d(m), kept_z(m), gone_d(m), rot_c(m), rot_s(m);
      const DcCounts counts = dc_deflate(m, lam.data(), zz.data(), rho, order.data(),
                                         DcLists<R>{kept_col.data(), kept_d.data(), kept_z.data(), gone_col.data(),
                                                    gone_d.data(), rot_p.data(), rot_q.data(), rot_c.data(), rot_s.data()});
      ASSERT_EQ(counts.kept + counts.gone, m);
      // Q = diag(Q₁, Q₂), then the deflation's rotations.
      std::vector<R> q(std::size_t(m) * m, R(0));
      for (int c = 0; c < m; ++c)
        for (int r = 0; r < m; ++r)
          if ((r < m1) == (c < m1)) q[r + std::size_t(c) * m] = Z(first + r, first + c);
      for (int t = 0; t < counts.rotations; ++t)
        for (int r = 0; r < m; ++r) {
          R& x = q[r + std::size_t(rot_p[t]) * m];
          R& y = q[r + std::size_t(rot_q[t]) * m];
          const R nx = rot_c[t] * x + rot_s[t] * y, ny = rot_c[t] * y - rot_s[t] * x;
          x = nx;
          y = ny;
        }
      const int K = counts.kept;
      std::vector<int> origin(K);
      std::vector<R> tau(K), zhat(K);
      for (int j = 0; j < K; ++j) {
        const DcRoot<R> root = dc_secular_root(j, K, kept_d.data(), kept_z.data(), rho);
        ASSERT_TRUE(root.converged) << "root " << j << " of " << K;
        origin[j] = root.origin;
        tau[j] = root.tau;
      }
      for (int i = 0; i < K; ++i) zhat[i] = dc_lowner_z(i, K, kept_d.data(), origin.data(), tau.data(), kept_z[i]);
      for (int j = 0; j < K; ++j) {
        const R scale = dc_inverse_norm(j, K, kept_d.data(), zhat.data(), origin[j], tau[j]);
        d[first + j] = kept_d[origin[j]] + tau[j];
        for (int r = 0; r < m; ++r) {
          R sum = 0;
          for (int i = 0; i < K; ++i)
            sum += q[r + std::size_t(kept_col[i]) * m] * (zhat[i] / dc_gap(kept_d.data(), i, origin[j], tau[j]) * scale);
          Z(first + r, first + j) = sum;
        }
      }
      for (int t = 0; t < counts.gone; ++t) {
        d[first + K + t] = gone_d[t];
        for (int r = 0; r < m; ++r) Z(first + r, first + K + t) = q[r + std::size_t(gone_col[t]) * m];
      }
    }
  }
}

// The serial model of the GPU algorithm, on one n×n matrix (lower triangle read). The eigenvectors
// of the tridiagonal come from the QR iteration (dc_leaf = 0) or from the divide and conquer with
// leaves of at most dc_leaf rows.
template <class T>
ModelResult<T> model_heev(std::vector<T> a, int n, int dc_leaf = 0) {
  using R = real_t<T>;
  auto A = [&](int i, int j) -> T& { return a[std::size_t(i) + std::size_t(j) * n]; };
  // Scale by a power of two so that max |a_ij| is about 1 (exact; undone on the eigenvalues).
  R amax = 0;
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i) amax = std::max(amax, std::abs(A(i, j)));
  const int exponent = amax > 0 ? std::ilogb(amax) : 0;
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i) A(i, j) = A(i, j) * std::ldexp(R(1), -exponent);

  std::vector<R> d(n), e(std::max(n - 1, 0)), alpha(std::max(n - 1, 0), R(0));
  std::vector<T> b(std::max(n - 1, 0));
  std::vector<std::vector<T>> reflectors(std::max(n - 1, 0));
  for (int k = 0; k + 1 < n; ++k) {
    const int m = n - k - 1;
    std::vector<T> w(m);
    R sigma2 = 0;
    for (int i = 0; i < m; ++i) {
      w[i] = A(k + 1 + i, k);
      sigma2 += abs2(w[i]);
    }
    const R sigma = std::sqrt(sigma2);
    const T x1 = w[0];
    const R ax1 = std::abs(x1);
    const T phase = ax1 > 0 ? x1 / ax1 : T(1);
    if (m == 1 || sigma == 0) {
      b[k] = x1;  // nothing to annihilate: H = I
    } else {
      w[0] += phase * sigma;
      alpha[k] = R(1) / (sigma * (sigma + ax1));
      b[k] = -phase * sigma;
      // p = α A22 w, A22 Hermitian from its lower triangle.
      std::vector<T> p(m, T(0));
      for (int j = 0; j < m; ++j)
        for (int i = 0; i < m; ++i) {
          const T aij = i >= j ? A(k + 1 + i, k + 1 + j) : conj_of(A(k + 1 + j, k + 1 + i));
          p[i] += aij * w[j];
        }
      for (auto& v : p) v *= alpha[k];
      T wp = 0;
      for (int i = 0; i < m; ++i) wp += conj_of(w[i]) * p[i];
      const R K = alpha[k] / 2 * std::real(wp);
      for (int i = 0; i < m; ++i) p[i] -= K * w[i];  // p is now q
      for (int j = 0; j < m; ++j)
        for (int i = j; i < m; ++i) A(k + 1 + i, k + 1 + j) -= w[i] * conj_of(p[j]) + p[i] * conj_of(w[j]);
    }
    reflectors[k] = w;
    d[k] = std::real(A(k, k));
  }
  d[n - 1] = std::real(A(n - 1, n - 1));
  // S: s₀ = 1, s_{k+1} = s_k·b_k/|b_k|, so that Sᴴ T S has the real off-diagonals |b_k|.
  std::vector<T> s(n, T(1));
  for (int k = 0; k + 1 < n; ++k) {
    e[k] = std::abs(b[k]);
    s[k + 1] = e[k] > 0 ? s[k] * (b[k] / e[k]) : s[k];
  }

  RecordingSink<R> sink;
  ModelResult<T> out;
  std::vector<R> z(std::size_t(n) * n, R(0));
  if (dc_leaf > 0) {
    model_divide_and_conquer(n, d, e, z, dc_leaf);
  } else {
    detail::QrState state;
    EXPECT_EQ(detail::tridiagonal_qr(n, d.data(), e.data(), sink, state, 30L * n), detail::QrResult::done);
    out.sweeps = sink.sweeps;
    out.rotations = sink.plane.size();
    // Z = product of the rotations (each thread of the GPU owns one row of Z).
    for (int i = 0; i < n; ++i) z[i + std::size_t(i) * n] = 1;
  }
  for (std::size_t t = 0; t < sink.plane.size(); ++t) {
    const int j = sink.plane[t];
    for (int r = 0; r < n; ++r) {
      R& zj = z[r + std::size_t(j) * n];
      R& zj1 = z[r + std::size_t(j + 1) * n];
      const R tmp = zj1;
      zj1 = sink.c[t] * tmp - sink.s[t] * zj;
      zj = sink.s[t] * tmp + sink.c[t] * zj;
    }
  }
  // Sort ascending, permuting Z's columns with the values.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return d[x] < d[y]; });
  out.values.resize(n);
  out.vectors.assign(std::size_t(n) * n, T(0));
  for (int k = 0; k < n; ++k) {
    out.values[k] = std::ldexp(d[order[k]], exponent);
    // V(:,k) = Q · S · Z(:, order[k]), Q = H₀ H₁ … H_{n−3}: apply the last reflector first.
    std::vector<T> v(n);
    for (int r = 0; r < n; ++r) v[r] = s[r] * z[r + std::size_t(order[k]) * n];
    for (int h = n - 2; h >= 0; --h) {
      if (alpha[h] == 0) continue;
      const auto& w = reflectors[h];
      T dot = 0;
      for (std::size_t i = 0; i < w.size(); ++i) dot += conj_of(w[i]) * v[h + 1 + i];
      for (std::size_t i = 0; i < w.size(); ++i) v[h + 1 + i] -= alpha[h] * w[i] * dot;
    }
    for (int r = 0; r < n; ++r) out.vectors[r + std::size_t(k) * n] = v[r];
  }
  return out;
}

template <class T>
class HeevModel : public ::testing::Test {};
using Types = ::testing::Types<f64, cf64, f32, cf32>;
TYPED_TEST_SUITE(HeevModel, Types);

TYPED_TEST(HeevModel, MatchesLapackAndIsAccurate) {
  using T = TypeParam;
  using R = real_t<T>;
  std::mt19937_64 rng(test::fresh_seed("heev model"));
  Exec cpu = Exec::cpu(2);
  for (int n : {1, 2, 3, 5, 8, 17, 32, 64, 100}) {
    for (int kind = 0; kind < 3; ++kind) {
      // 0: random Hermitian; 1: repeated eigenvalues (a projector-like matrix); 2: graded 1e-12..1.
      std::vector<T> g = test::random_normal<T>(std::size_t(n) * n, rng), a(std::size_t(n) * n);
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) a[i + std::size_t(j) * n] = (g[i + std::size_t(j) * n] + conj_of(g[j + std::size_t(i) * n])) / R(2);
      if (kind > 0) {
        // U Λ Uᴴ with U from LAPACK on the random matrix, Λ chosen.
        std::vector<T> u = a;
        std::vector<R> lambda(n);
        std::vector<int> info(1);
        heev<T>(cpu, Batch<T>::packed(u.data(), n, n, 1), lambda, info);
        for (int k = 0; k < n; ++k)
          lambda[k] = kind == 1 ? R(k % 3 == 0 ? 1 : 2) : R(std::pow(10.0, -12.0 * k / std::max(n - 1, 1)));
        for (int j = 0; j < n; ++j)
          for (int i = 0; i < n; ++i) {
            T sum = 0;
            for (int k = 0; k < n; ++k) sum += u[i + std::size_t(k) * n] * lambda[k] * conj_of(u[j + std::size_t(k) * n]);
            a[i + std::size_t(j) * n] = sum;
          }
      }
      ModelResult<T> model = model_heev<T>(a, n);
      std::vector<T> ref = a;
      std::vector<R> ref_values(n);
      std::vector<int> info(1, -1);
      heev<T>(cpu, Batch<T>::packed(ref.data(), n, n, 1), ref_values, info);
      ASSERT_EQ(info[0], 0);
      // Errors in units of n·ε.
      const double unit = n * double(std::numeric_limits<R>::epsilon());
      double anorm2 = 0, aspec = 0;
      for (const T& v : a) anorm2 += double(abs2(v));
      for (R v : ref_values) aspec = std::max(aspec, double(std::fabs(v)));
      double value_err = 0, res2 = 0, orth2 = 0;
      for (int k = 0; k < n; ++k) value_err = std::max(value_err, double(std::fabs(model.values[k] - ref_values[k])));
      for (int k = 0; k < n; ++k)
        for (int i = 0; i < n; ++i) {
          std::complex<double> av = 0;
          for (int j = 0; j < n; ++j)
            av += std::complex<double>(a[i + std::size_t(j) * n]) * std::complex<double>(model.vectors[j + std::size_t(k) * n]);
          av -= std::complex<double>(model.vectors[i + std::size_t(k) * n]) * double(model.values[k]);
          res2 += std::norm(av);
        }
      for (int k = 0; k < n; ++k)
        for (int l = 0; l < n; ++l) {
          std::complex<double> dot = 0;
          for (int i = 0; i < n; ++i)
            dot += std::conj(std::complex<double>(model.vectors[i + std::size_t(k) * n])) *
                   std::complex<double>(model.vectors[i + std::size_t(l) * n]);
          orth2 += std::norm(dot - (k == l ? 1.0 : 0.0));
        }
      const std::string where = "n=" + std::to_string(n) + " kind=" + std::to_string(kind);
      EXPECT_LE(std::sqrt(res2) / std::sqrt(anorm2) / unit, 10.0) << where;
      EXPECT_LE(std::sqrt(orth2) / unit, 10.0) << where;
      EXPECT_LE(value_err / aspec / unit, 10.0) << where;
      if (n == 100 && kind == 0)
        std::printf("[ model    ] n=100 random: %d sweeps, %zu rotations (%.2f n²), residual %.2f, orthogonality %.2f, "
                    "values %.2f (units of nε)\n",
                    model.sweeps, model.rotations, double(model.rotations) / (n * n), std::sqrt(res2 / anorm2) / unit,
                    std::sqrt(orth2) / unit, value_err / aspec / unit);
    }
  }
}

// The divide and conquer that the GPU runs for eigenvectors above n = 32 (tridiagonal_dc.hpp),
// serially: every spectrum kind of the GPU suite, sizes from one merge level to five, leaves of 4
// (many merges, small ones) and 16 (the GPU's default).
TYPED_TEST(HeevModel, DivideAndConquerMatchesLapack) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("heev model divide and conquer"));
  test::EigenErrors worst;
  for (int leaf : {4, 16}) {
    for (int n : {5, 17, 33, 64, 100, 130}) {
      for (test::SpectrumKind kind : test::all_spectrum_kinds()) {
        const test::EigenCase<T> c = test::make_eigen_case<T>(kind, n, 1, rng);
        ModelResult<T> model = model_heev<T>(c.a, n, leaf);
        const int info = 0, which = 0;
        worst = test::max_errors(worst, test::expect_eigen_results<T>(c, model.vectors.data(), model.values.data(),
                                                                      &info, std::span<const int>(&which, 1),
                                                                      "model d&c leaf=" + std::to_string(leaf)));
      }
    }
  }
  std::printf("[ model    ] divide and conquer, worst over kinds and n: residual %.2f, orthogonality %.2f, "
              "values %.2f (units of nε)\n",
              worst.residual, worst.orthogonality, worst.values);
}

// Matrices built to exercise the deflation: Wilkinson's W⁺ (pairs of eigenvalues equal to many
// digits), W⁺ glued to copies of itself by tiny couplings (clusters across the split points), and
// a tridiagonal with exact zeros at split points (β = 0: everything deflates).
TEST(TridiagonalDc, DeflationStressMatchesLapack) {
  Exec cpu = Exec::cpu(1);
  auto run = [&](const std::vector<double>& d, const std::vector<double>& e, int leaf, const std::string& what) {
    const int n = static_cast<int>(d.size());
    std::vector<double> a(std::size_t(n) * n, 0.0);
    for (int i = 0; i < n; ++i) a[i + std::size_t(i) * n] = d[i];
    for (int i = 0; i + 1 < n; ++i) a[i + 1 + std::size_t(i) * n] = a[i + std::size_t(i + 1) * n] = e[i];
    ModelResult<double> model = model_heev<double>(a, n, leaf);
    std::vector<double> ref = a, ref_values(n);
    std::vector<int> info(1, -1);
    heev<double>(cpu, Batch<double>::packed(ref.data(), n, n, 1), ref_values, info);
    ASSERT_EQ(info[0], 0);
    test::EigenCase<double> c{test::SpectrumKind::tridiagonal, n, 1, 0, a,
                              std::vector<double>(ref_values.begin(), ref_values.end())};
    const int ok = 0, which = 0;
    test::expect_eigen_results<double>(c, model.vectors.data(), model.values.data(), &ok,
                                       std::span<const int>(&which, 1), what + " leaf=" + std::to_string(leaf));
  };
  for (int leaf : {4, 16}) {
    for (int half : {10, 50}) {  // W⁺ of order 2·half + 1
      std::vector<double> d, e;
      for (int i = -half; i <= half; ++i) d.push_back(std::abs(i));
      e.assign(d.size() - 1, 1.0);
      run(d, e, leaf, "W+" + std::to_string(2 * half + 1));
      std::vector<double> dg, eg;
      for (int copy = 0; copy < 4; ++copy) {
        if (copy > 0) eg.push_back(1e-14);
        dg.insert(dg.end(), d.begin(), d.end());
        eg.insert(eg.end(), e.begin(), e.end());
      }
      run(dg, eg, leaf, "glued W+" + std::to_string(2 * half + 1));
    }
    std::vector<double> d(96), e(95);
    std::mt19937_64 rng(test::fresh_seed("dc split zeros"));
    std::normal_distribution<double> normal(0.0, 1.0);
    for (auto& v : d) v = normal(rng);
    for (std::size_t i = 0; i < e.size(); ++i) e[i] = (i + 1) % 12 == 0 ? 0.0 : normal(rng);
    run(d, e, leaf, "zero couplings");
  }
}

// A sink with room for only `capacity` rotations pauses the iteration; resuming after the buffer
// is drained must give exactly the rotations and eigenvalues of an uninterrupted run.
TEST(TridiagonalQr, PausesAtSweepBoundariesAndResumesExactly) {
  std::mt19937_64 rng(test::fresh_seed("tridiagonal qr pause"));
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int n : {2, 3, 10, 57, 130}) {
    std::vector<double> d0(n), e0(std::max(n - 1, 1));
    for (auto& v : d0) v = normal(rng);
    for (auto& v : e0) v = normal(rng);
    RecordingSink<double> whole;
    std::vector<double> d1 = d0, e1 = e0;
    detail::QrState s1;
    ASSERT_EQ(detail::tridiagonal_qr(n, d1.data(), e1.data(), whole, s1, 30L * n), detail::QrResult::done);

    struct SmallSink {
      int capacity = 0, used = 0;
      std::vector<int> plane;
      std::vector<double> c, s;
      bool reserve(int length) { return used + length <= capacity; }
      void operator()(int j, double cj, double sj) {
        ++used;
        plane.push_back(j);
        c.push_back(cj);
        s.push_back(sj);
      }
    } pieces;
    // The smallest buffer the iteration accepts: one group of kDefaultShifts sweeps of n−1 rotations.
    pieces.capacity = std::max(detail::kDefaultShifts * (n - 1), 1);
    std::vector<double> d2 = d0, e2 = e0;
    detail::QrState s2;
    int pauses = 0;
    for (;;) {
      const auto result = detail::tridiagonal_qr(n, d2.data(), e2.data(), pieces, s2, 30L * n);
      if (result == detail::QrResult::done) break;
      ASSERT_EQ(result, detail::QrResult::paused);
      ASSERT_GT(pieces.used, 0) << "paused without progress";
      pieces.used = 0;  // the consumer drained the buffer
      ++pauses;
    }
    EXPECT_EQ(pieces.plane, whole.plane) << "n=" << n;
    EXPECT_EQ(pieces.c, whole.c) << "n=" << n;
    EXPECT_EQ(pieces.s, whole.s) << "n=" << n;
    EXPECT_EQ(d2, d1) << "n=" << n;
    if (n >= 57) {
      EXPECT_GT(pauses, 0) << "the test did not exercise pausing";
    }
  }
}

}  // namespace
}  // namespace covflow::linalg

// h2_from_dense on the CPU backend: an H² matrix built from a given dense Hermitian matrix, for a
// kernel matrix (h2_build expanded), a radar sample covariance X·Xᴴ/K of a planar array (targets,
// clutter over a sector, noise; its real part for the real types) and a matrix of random
// eigenvectors with a geometric spectrum. Each at several tolerances: the error measured densely
// against tol and the reported bound, orthonormal nested bases, Hermitian symmetry, the memory
// formula, the matvec against the expanded matrix; and the argument errors.
// Rounding allowances are in units of ε of the element type (stated at each check).
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <iostream>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "covflow/linalg/error.hpp"
#include "covflow/linalg/h2.hpp"
#include "h2_test_support.hpp"
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

using namespace h2_test;
using test::eps;

// ---- inputs ------------------------------------------------------------------------------------

// Q·diag(λ)·Qᴴ, Q orthonormalised from a random matrix (Gram–Schmidt twice), λ_i = 10^(−6·i/n).
std::vector<cd> random_spectrum(std::size_t n, bool complex, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<cd> q(n * n);
  for (auto& v : q) v = complex ? cd(normal(rng), normal(rng)) : cd(normal(rng), 0.0);
  for (std::size_t j = 0; j < n; ++j)
    for (int pass = 0; pass < 2; ++pass) {
      for (std::size_t k = 0; k < j; ++k) {
        cd dot = 0;
        for (std::size_t i = 0; i < n; ++i) dot += std::conj(q[i + k * n]) * q[i + j * n];
        for (std::size_t i = 0; i < n; ++i) q[i + j * n] -= dot * q[i + k * n];
      }
      double s = 0;
      for (std::size_t i = 0; i < n; ++i) s += std::norm(q[i + j * n]);
      for (std::size_t i = 0; i < n; ++i) q[i + j * n] /= std::sqrt(s);
    }
  std::vector<cd> a(n * n, 0.0);
  for (std::size_t k = 0; k < n; ++k) {
    const double lambda = std::pow(10.0, -6.0 * double(k) / double(n));
    for (std::size_t j = 0; j < n; ++j) {
      const cd c = lambda * std::conj(q[j + k * n]);
      for (std::size_t i = 0; i < n; ++i) a[i + j * n] += q[i + k * n] * c;
    }
  }
  for (std::size_t j = 0; j < n; ++j) {
    a[j + j * n] = a[j + j * n].real();
    for (std::size_t i = 0; i < j; ++i) a[i + j * n] = std::conj(a[j + i * n]);
  }
  return a;
}

struct Case {
  std::string name;
  std::vector<double> points;
  int dim = 2;
  H2Options options;
};

// ---- the checks --------------------------------------------------------------------------------

// Every leaf basis and every parent's stacked transfers [E_c1; E_c2] have Gram matrix diag(1 or 0)
// (useful columns orthonormal, padding zero); the largest deviation.
template <class T>
double orthonormality_error(const H2<T>& h) {
  const H2Tree& tree = h.tree;
  const int depth = tree.depth;
  const std::int64_t m = tree.leaf_capacity;
  double worst = 0;
  auto gram = [&](auto column, std::int64_t rows, std::int64_t k) {
    for (std::int64_t a = 0; a < k; ++a)
      for (std::int64_t b = 0; b < k; ++b) {
        cd g = 0;
        for (std::int64_t r = 0; r < rows; ++r) g += std::conj(cd(column(r, a))) * cd(column(r, b));
        const double target = a == b && std::abs(g) > 0.5 ? 1.0 : 0.0;
        worst = worse(worst, std::abs(g - target));
      }
  };
  const std::int64_t kl = h.rank[static_cast<std::size_t>(depth)];
  for (std::int64_t t = 0; t < tree.nodes(depth); ++t)
    gram([&](std::int64_t r, std::int64_t c) { return h.leaf(t)[r + c * m]; }, m, kl);
  for (int l = 1; l <= depth; ++l) {
    const std::int64_t kc = h.rank[static_cast<std::size_t>(l)], kp = h.rank[static_cast<std::size_t>(l) - 1];
    for (std::int64_t p = 0; p < tree.nodes(l - 1); ++p)
      gram([&](std::int64_t r, std::int64_t c) { return h.transfer_of(l, 2 * p + r / kc)[r % kc + c * kc]; }, 2 * kc, kp);
  }
  return worst;
}

template <class T>
void check_case(const Case& c, const std::vector<cd>& reference, const std::vector<double>& tols, std::mt19937_64& rng) {
  SCOPED_TRACE(c.name + " " + std::string(name(element_type_of<T>())));
  Exec exec = Exec::cpu(2);
  const std::int64_t n = static_cast<std::int64_t>(c.points.size()) / c.dim;
  std::vector<T> a(reference.size());
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = from_cd<T>(reference[i]);
  const double anorm = norm(a);
  for (double tol : tols) {
    SCOPED_TRACE("tol " + std::to_string(tol));
    H2CompressReport report;
    const H2<T> h = h2_from_dense<T>(exec, Batch<const T>::packed(a.data(), n, n, 1), c.points, c.dim, tol, c.options, &report);
    const std::vector<T> e = expand(exec, h);
    const double measured = diff_norm(e, a) / anorm;
    const H2Stats st = h2_stats(h);
    std::string ranks;
    for (int k : h.rank) ranks += std::to_string(k) + " ";
    std::cout << "[ h2_dense ] " << c.name << " " << name(element_type_of<T>()) << " n=" << n << " tol=" << tol
              << " measured=" << measured << " bound=" << report.error_bound << " ranks " << ranks
              << "bytes " << st.total_bytes << " / dense " << st.dense_matrix_bytes << "\n";

    // The guarantee: the bound is at most tol, and the measured error at most the bound, up to the
    // rounding of forming and expanding the bases (≤ 10·√n·ε relative, in the element type).
    const double rounding = 10 * std::sqrt(double(n)) * eps<T>();
    EXPECT_LE(report.error_bound, tol);
    EXPECT_LE(measured, report.error_bound + rounding);
    EXPECT_LE(measured, tol);
    EXPECT_TRUE(h.orthogonal);
    EXPECT_DOUBLE_EQ(report.tolerance, tol);
    EXPECT_NEAR(report.norm, anorm, 1e-12 * anorm + 2 * eps<T>() * anorm);
    EXPECT_EQ(report.ranks_after, h.rank);
    // τ² = tol²·‖A‖²/(2N): N, a whole number of nodes, at most the tree's.
    if (report.node_threshold > 0) {
      const double nodes = tol * tol * anorm * anorm / (2 * report.node_threshold * report.node_threshold);
      EXPECT_NEAR(nodes, std::round(nodes), 1e-6 * nodes);
      EXPECT_GE(std::round(nodes), 1.0);
      EXPECT_LE(std::round(nodes), double((std::int64_t{2} << h.tree.depth) - 1));
    }

    // Orthonormal nested bases: Gram deviation ≤ 10·k·ε, k the largest level rank.
    int kmax = 1;
    for (int k : h.rank) kmax = std::max(kmax, k);
    EXPECT_LE(orthonormality_error(h), 10 * kmax * eps<T>());

    // Hermitian: the expansion equals its conjugate transpose — exactly off the diagonal blocks
    // (mirrored), and within the input's own asymmetry there (they are copied whole).
    double asym = 0, input_asym = 0;
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < n; ++i) {
        asym = std::max(asym, std::abs(cd(e[i + j * n]) - std::conj(cd(e[j + i * n]))));
        input_asym = std::max(input_asym, std::abs(cd(a[i + j * n]) - std::conj(cd(a[j + i * n]))));
      }
    EXPECT_LE(asym, input_asym);

    // Memory: the formula of h2.hpp from the ranks and pair counts.
    const std::size_t s = sizeof(T), m = static_cast<std::size_t>(h.tree.leaf_capacity);
    std::size_t basis = (std::size_t{1} << h.tree.depth) * m * static_cast<std::size_t>(h.rank.back()) * s, coupling = 0;
    for (int l = 0; l <= h.tree.depth; ++l) {
      const auto k = static_cast<std::size_t>(h.rank[static_cast<std::size_t>(l)]);
      coupling += static_cast<std::size_t>(h.couplings.count(l)) * k * k * s;
      if (l > 0) basis += (std::size_t{1} << l) * k * static_cast<std::size_t>(h.rank[static_cast<std::size_t>(l) - 1]) * s;
    }
    const std::size_t dense = static_cast<std::size_t>(h.dense_pairs.count()) * m * m * s;
    EXPECT_EQ(st.total_bytes, dense + basis + coupling);
    EXPECT_EQ(report.bytes_after, st.total_bytes);

    // Matvec: h2_gemv against the expanded matrix, ≤ 20·√n·ε relative.
    const std::int64_t nvec = 2;
    const std::vector<T> x = test::random_normal<T>(static_cast<std::size_t>(n * nvec), rng);
    std::vector<T> y(static_cast<std::size_t>(n * nvec), test::poison<T>());
    h2_gemv(exec, T(1), h, Batch<const T>::packed(x.data(), n, nvec, 1), T(0), Batch<T>::packed(y.data(), n, nvec, 1));
    std::vector<cd> ref(static_cast<std::size_t>(n * nvec), 0.0);
    for (std::int64_t j = 0; j < nvec; ++j)
      for (std::int64_t k = 0; k < n; ++k)
        for (std::int64_t i = 0; i < n; ++i) ref[i + j * n] += cd(e[i + k * n]) * cd(x[k + j * n]);
    EXPECT_LE(diff_norm(y, ref) / norm(ref), 20 * std::sqrt(double(n)) * eps<T>());
  }
}

template <class T>
std::vector<double> tolerances() {
  if constexpr (std::is_same_v<real_t<T>, double>) return {1e-2, 1e-4, 1e-6, 1e-8};
  else return {1e-2, 1e-3, 1e-4};
}

template <class T>
class H2Dense : public ::testing::Test {
 protected:
  void SetUp() override { rng_.seed(test::fresh_seed(std::string("H2Dense.") + std::string(name(element_type_of<T>())))); }
  std::mt19937_64 rng_;
};
TYPED_TEST_SUITE(H2Dense, ElementTypes, ElementName);

// A kernel matrix: h2_build's expansion (Matérn 3/2, or the clutter kernel for complex types) on
// random points of the unit square, rebuilt from its dense form.
TYPED_TEST(H2Dense, KernelMatrix) {
  using T = TypeParam;
  Exec exec = Exec::cpu(2);
  const std::int64_t n = 600;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Case c{"kernel", std::vector<double>(static_cast<std::size_t>(2 * n)), 2, H2Options{32, 1.0, 6, 0.0}};
  for (auto& v : c.points) v = u(this->rng_);
  H2KernelSpec spec{H2Kernel::matern, 1.0, 0.2, 1.5};
  if constexpr (is_complex_v<T>) spec = H2KernelSpec{H2Kernel::clutter, 1.0, 0.1, 0.5, 0.25, 0.3, 0.8};
  const H2<T> built = h2_build<T>(exec, c.points, 2, spec, c.options);
  const std::vector<T> dense = expand(exec, built);
  std::vector<cd> reference(dense.begin(), dense.end());
  check_case<T>(c, reference, tolerances<T>(), this->rng_);
}

// A sample covariance of a jittered 24 × 24 planar array (n = 576) from 2n snapshots.
TYPED_TEST(H2Dense, SampleCovariance) {
  using T = TypeParam;
  Case c{"sample covariance", planar_array(24, this->rng_), 2, H2Options{32, 1.0}};
  std::vector<cd> reference = sample_covariance(c.points, 1152, {10.0, 3.0, 1.0}, 40, this->rng_);
  if constexpr (!is_complex_v<T>)
    for (auto& v : reference) v = v.real();
  check_case<T>(c, reference, tolerances<T>(), this->rng_);
}

// Random eigenvectors (no structure to find), spectrum 1 … 10⁻⁶, on a line of n = 256 points.
TYPED_TEST(H2Dense, RandomSpectrum) {
  using T = TypeParam;
  const std::size_t n = 256;
  Case c{"random spectrum", {}, 1, H2Options{16, 0.7}};
  for (std::size_t i = 0; i < n; ++i) c.points.push_back(double(i));
  check_case<T>(c, random_spectrum(n, is_complex_v<T>, this->rng_), tolerances<T>(), this->rng_);
}

TEST(H2DenseErrors, NameTheArgument) {
  Exec exec = Exec::cpu(1);
  const std::int64_t n = 40;
  std::vector<double> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = double(i);
  std::vector<f64> a(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t i = 0; i < n; ++i) a[static_cast<std::size_t>(i * (n + 1))] = 1.0;
  const Batch<const f64> good = Batch<const f64>::packed(a.data(), n, n, 1);
  EXPECT_NO_THROW(h2_from_dense<f64>(exec, good, p, 1, 1e-3));
  test::expect_invalid_argument([&] { h2_from_dense<f64>(exec, good, p, 1, 0.0); }, "h2_from_dense: tol 0 must be positive");
  test::expect_invalid_argument([&] { h2_from_dense<f64>(exec, good, p, 1, -1.0); }, "h2_from_dense: tol -1");
  test::expect_invalid_argument([&] { h2_from_dense<f64>(exec, good, p, 1, std::nan("")); }, "h2_from_dense: tol nan");
  test::expect_invalid_argument([&] { h2_from_dense<f64>(exec, good, p, 4, 1e-3); }, "h2_from_dense: dim 4");
  test::expect_invalid_argument([&] { h2_from_dense<f64>(exec, good, std::span<const double>{}, 1, 1e-3); },
                                "h2_from_dense: points: n = 0");
  test::expect_invalid_argument([&] { h2_from_dense<f64>(exec, good, std::span<const double>(p).first(39), 1, 1e-3); },
                                "h2_from_dense: a is 40×40 but the points give n = 39");
  test::expect_invalid_argument([&] { h2_from_dense<f64>(exec, good, p, 2, 1e-3); },
                                "h2_from_dense: a is 40×40 but the points give n = 20");
  test::expect_invalid_argument([&] { h2_from_dense<f64>(exec, Batch<const f64>{a.data(), n, n - 1, n, n * n, 1}, p, 1, 1e-3); },
                                "h2_from_dense: a is 40×39");
  test::expect_invalid_argument([&] { h2_from_dense<f64>(exec, Batch<const f64>{a.data(), n, n, n, 0, 2}, p, 1, 1e-3); },
                                "h2_from_dense: a");
  test::expect_invalid_argument([&] { h2_from_dense<f64>(exec, Batch<const f64>{a.data(), n / 2, n / 2, n / 2, n * n / 4, 2}, p, 1, 1e-3); },
                                "count 1");
  test::expect_invalid_argument([&] { h2_from_dense<f64>(exec, Batch<const f64>{nullptr, n, n, n, n * n, 1}, p, 1, 1e-3); },
                                "h2_from_dense: a");
  test::expect_invalid_argument([&] { h2_from_dense<f64>(exec, good, p, 1, 1e-3, H2Options{0}); }, "h2_from_dense: leaf_size 0");
  test::expect_invalid_argument([&] { h2_from_dense<f64>(exec, good, p, 1, 1e-3, H2Options{8, 0.0}); }, "h2_from_dense: eta 0");
  std::vector<double> bad_points = p;
  bad_points[7] = std::numeric_limits<double>::infinity();
  test::expect_invalid_argument([&] { h2_from_dense<f64>(exec, good, bad_points, 1, 1e-3); },
                                "h2_from_dense: points: coordinate 0 of point 7 is not finite");
  std::vector<f64> bad = a;
  bad[static_cast<std::size_t>(3 + 5 * n)] = std::numeric_limits<double>::quiet_NaN();
  test::expect_invalid_argument([&] { h2_from_dense<f64>(exec, Batch<const f64>::packed(bad.data(), n, n, 1), p, 1, 1e-3); },
                                "h2_from_dense: a: entry (3, 5) is not finite");
}

// Small and degenerate shapes: one point, all points coincident, the zero matrix (rank 0 everywhere).
TEST(H2DenseEdge, TinyAndZero) {
  Exec exec = Exec::cpu(2);
  std::mt19937_64 rng(test::fresh_seed("H2DenseEdge"));
  {
    const std::vector<double> p{0.5};
    const std::vector<cf64> a{cf64(2.0, 0.0)};
    const H2<cf64> h = h2_from_dense<cf64>(exec, Batch<const cf64>::packed(a.data(), 1, 1, 1), p, 1, 1e-6);
    EXPECT_EQ(expand(exec, h), a);
  }
  {
    const std::int64_t n = 100;
    std::vector<double> p(static_cast<std::size_t>(n), 1.0);
    const std::vector<f64> a = test::random_normal<f64>(static_cast<std::size_t>(n * n), rng);
    std::vector<f64> sym(a.size());
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < n; ++i) sym[static_cast<std::size_t>(i + j * n)] = a[static_cast<std::size_t>(i + j * n)] + a[static_cast<std::size_t>(j + i * n)];
    H2CompressReport report;
    const H2<f64> h = h2_from_dense<f64>(exec, Batch<const f64>::packed(sym.data(), n, n, 1), p, 1, 1e-3, H2Options{8, 0.7}, &report);
    EXPECT_LE(diff_norm(expand(exec, h), sym), 1e-14 * norm(sym));  // coincident points: all near field
  }
  {
    const std::int64_t n = 200;
    std::vector<double> p(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = double(i);
    const std::vector<f32> a(static_cast<std::size_t>(n * n), 0.0f);
    H2CompressReport report;
    const H2<f32> h = h2_from_dense<f32>(exec, Batch<const f32>::packed(a.data(), n, n, 1), p, 1, 1e-3, H2Options{16, 0.7}, &report);
    for (int k : h.rank) EXPECT_EQ(k, 0);
    EXPECT_EQ(report.error_bound, 0.0);
    EXPECT_EQ(norm(expand(exec, h)), 0.0);
  }
}

}  // namespace
}  // namespace covflow::linalg

// gesvj on the CPU backend (LAPACK's ?gesvj across the pool) through the public API, against
// singular values from LAPACK's dgesvj/zgesvj in double: residual ‖A − UΣVᴴ‖_F/‖A‖_F, ‖UᴴU − I‖_F,
// ‖VᴴV − I‖_F and max |σ − σref|/σ₁, each ≤ 10·n·ε (n = max(m, n)), on ?latms matrices of every mode
// and condition, rank-deficient, radar-snapshot and random matrices, tall and wide, batch 1 and 7;
// graded A = B·D to relative accuracy max |σ − σref|/σ ≤ 10·n·ε·κ(B); values-only, U-only and
// V-only; non-finite input; the sweep limit; the off-diagonal tiles of kernel covariance matrices,
// most of whose columns are rounding noise; argument errors. Outputs are poisoned with NaN before
// each run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "covflow/linalg/error.hpp"
#include "covflow/linalg/svd.hpp"
#include "lowrank_cases.hpp"
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

using test::LowrankCase;
using test::LowrankKind;
using test::LowrankSpec;
using test::precise_t;
using test::SvdErrors;

// Shapes (m, n) of the CPU suite: square at the sizes around the CUDA path's limits (32, one warp),
// tall and wide. The large sizes are the GPU suite's.
const std::vector<std::pair<int, int>>& checked_shapes() {
  static const std::vector<std::pair<int, int>> shapes = {
      {1, 1},   {2, 2},    {17, 17}, {31, 31}, {32, 32},  {33, 33}, {64, 64}, {100, 100},
      {128, 128}, {512, 32}, {100, 17}, {64, 33}, {1, 5},   {2, 17},  {17, 31}, {33, 64}, {32, 100}};
  return shapes;
}

template <class T>
std::vector<double> latms_conditions() {
  if constexpr (std::is_same_v<real_t<T>, float>) return {10.0, 1e3, 1e5, 1e7};
  else return {10.0, 1e3, 1e6, 1e9, 1e12};
}

// Every condition at the small shapes; from max(m, n) = 100 on (CI time: 2 cores, reference BLAS)
// the largest and, in turn over the modes, one of the others.
template <class T>
std::vector<double> conditions_for(int m, int n, int mode) {
  const std::vector<double> all = latms_conditions<T>();
  if (std::max(m, n) < 100) return all;
  return {all[std::size_t(mode + m + n) % (all.size() - 1)], all.back()};
}

std::vector<int> all_indices(int count) {
  std::vector<int> out(count);
  for (int b = 0; b < count; ++b) out[b] = b;
  return out;
}

std::string shape_name(int m, int n) { return std::to_string(m) + "×" + std::to_string(n); }

const SvdInfo info_poison{0x7eadbeef, -1, -1.0};

template <class T>
struct GesvjRun {
  std::vector<T> a;  // scratch
  std::vector<real_t<T>> s;
  std::vector<T> u, v;  // packed; empty when not asked for
  std::vector<SvdInfo> info;
};

// gesvj on a copy of the case's matrices, every output poisoned.
template <class T>
GesvjRun<T> run_gesvj(Exec& exec, const LowrankCase<T>& c, const SvdOptions& options = {}) {
  const int m = c.m(), n = c.n(), k = c.k(), count = c.count();
  GesvjRun<T> run{c.a, std::vector<real_t<T>>(std::size_t(count) * k, test::poison<real_t<T>>()),
                  std::vector<T>(options.u ? std::size_t(count) * m * k : 0, test::poison<T>()),
                  std::vector<T>(options.v ? std::size_t(count) * n * k : 0, test::poison<T>()),
                  std::vector<SvdInfo>(count, info_poison)};
  gesvj<T>(exec, Batch<T>::packed(run.a.data(), m, n, count), run.s,
           options.u ? Batch<T>::packed(run.u.data(), m, k, count) : Batch<T>{},
           options.v ? Batch<T>::packed(run.v.data(), n, k, count) : Batch<T>{}, run.info, options);
  return run;
}

template <class T>
SvdErrors expect_run(const LowrankCase<T>& c, const GesvjRun<T>& run, const std::string& context) {
  return test::expect_gesvj_results(c, run.s.data(), run.u.empty() ? nullptr : run.u.data(),
                                    run.v.empty() ? nullptr : run.v.data(), run.info.data(), all_indices(c.count()),
                                    context);
}

// Worst errors per kind over a test, printed at its end: how much of the 10·n·ε budget LAPACK uses.
class SvdErrorTable {
 public:
  void add(LowrankKind kind, const SvdErrors& e) { rows_[kind] = test::max_errors(rows_[kind], e); }
  void print(const std::string& title) const {
    std::printf("[ errors   ] %s — max in units of n·ε (tolerance %.0f; relative values in n·ε·κ(B))\n",
                title.c_str(), test::lowrank_tolerance);
    for (const auto& [kind, e] : rows_)
      std::printf("[ errors   ] %-15s residual %7.3f  U orth. %7.3f  V orth. %7.3f  values %7.3f  relative %7.3f\n",
                  test::name(kind).c_str(), e.residual, e.u_orthogonality, e.v_orthogonality, e.values,
                  e.relative_values);
    std::fflush(stdout);
  }

 private:
  std::map<LowrankKind, SvdErrors> rows_;
};

template <class T>
class GesvjCpu : public ::testing::Test {};
struct ElementName {
  template <class T>
  static std::string GetName(int) {
    return std::string(name(element_type_of<T>()));
  }
};
using ElementTypes = ::testing::Types<f32, f64, cf32, cf64>;
TYPED_TEST_SUITE(GesvjCpu, ElementTypes, ElementName);

TYPED_TEST(GesvjCpu, LatmsEveryModeAndCondition) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("gesvj cpu latms"));
  Exec exec = Exec::cpu(2);
  SvdErrorTable table;
  int cases = 0;
  for (const auto& [m, n] : checked_shapes())
    for (int mode = 1; mode <= 5; ++mode)
      for (const double cond : conditions_for<T>(m, n, mode)) {
        const int count = std::max(m, n) <= 33 && (mode + cases) % 2 == 0 ? 7 : 1;
        const LowrankCase<T> c = test::make_lowrank_case<T>(test::latms_spec(m, n, count, mode, cond), rng);
        table.add(c.spec.kind, expect_run(c, run_gesvj(exec, c), "gesvj latms"));
        ++cases;
      }
  table.print("gesvj latms " + std::string(name(element_type_of<T>())));
}

TYPED_TEST(GesvjCpu, RankDeficientRadarRandom) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("gesvj cpu kinds"));
  Exec exec = Exec::cpu(2);
  SvdErrorTable table;
  for (const auto& [m, n] : checked_shapes()) {
    const int k = std::min(m, n), count = std::max(m, n) <= 33 ? 7 : 1;
    std::vector<LowrankSpec> specs;
    for (const int rank : {0, 1, k / 2})
      if (rank < k || rank == 0) specs.push_back(test::rank_deficient_spec(m, n, count, rank));
    specs.push_back(test::radar_spec(m, n, count));
    specs.push_back(test::random_spec(m, n, count));
    for (const LowrankSpec& spec : specs) {
      const LowrankCase<T> c = test::make_lowrank_case<T>(spec, rng);
      table.add(c.spec.kind, expect_run(c, run_gesvj(exec, c), "gesvj"));
    }
  }
  table.print("gesvj " + std::string(name(element_type_of<T>())));
}

// Graded A = B·D (D·B for m < n): the small singular values to relative accuracy ~ε·κ(B), however
// wide the grading — what one-sided Jacobi offers over bidiagonalisation.
TYPED_TEST(GesvjCpu, GradedToRelativeAccuracy) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("gesvj cpu graded"));
  Exec exec = Exec::cpu(2);
  SvdErrorTable table;
  const std::vector<double> spreads =
      std::is_same_v<real_t<T>, float> ? std::vector<double>{1e4, 1e10} : std::vector<double>{1e8, 1e20};
  for (const auto& [m, n] : checked_shapes())
    for (const double spread : spreads) {
      const int count = std::max(m, n) <= 33 ? 7 : 1;
      const LowrankCase<T> c = test::make_lowrank_case<T>(test::graded_spec(m, n, count, spread), rng);
      table.add(c.spec.kind, expect_run(c, run_gesvj(exec, c), "gesvj graded"));
    }
  table.print("gesvj graded " + std::string(name(element_type_of<T>())));
}

// ‖A − B·(BᴴA)‖_F / ‖A‖_F (left: B = U, m × k) or ‖A − (AB)·Bᴴ‖_F / ‖A‖_F (right: B = V, n × k) in
// units of max(m, n)·ε: U (or V) alone spans A's column (row) space.
template <class T>
double projection_residual(const T* a, int m, int n, const T* basis, bool left) {
  using D = precise_t<T>;
  const int k = std::min(m, n);
  auto conj_of = [](const D& x) {
    if constexpr (is_complex_v<D>) return std::conj(x);
    else return x;
  };
  auto at = [&](int i, int j) { return D(a[i + std::size_t(j) * m]); };
  const int rows = left ? m : n;
  auto b = [&](int i, int l) { return D(basis[i + std::size_t(l) * rows]); };
  double error2 = 0, norm2 = 0;
  if (left) {
    std::vector<D> p(std::size_t(k) * n, D(0));  // Uᴴ·A
    for (int j = 0; j < n; ++j)
      for (int l = 0; l < k; ++l)
        for (int i = 0; i < m; ++i) p[l + std::size_t(j) * k] += conj_of(b(i, l)) * at(i, j);
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        D x = at(i, j);
        for (int l = 0; l < k; ++l) x -= b(i, l) * p[l + std::size_t(j) * k];
        error2 += std::norm(x);
        norm2 += std::norm(at(i, j));
      }
  } else {
    std::vector<D> p(std::size_t(m) * k, D(0));  // A·V
    for (int l = 0; l < k; ++l)
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) p[i + std::size_t(l) * m] += at(i, j) * b(j, l);
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        D x = at(i, j);
        for (int l = 0; l < k; ++l) x -= p[i + std::size_t(l) * m] * conj_of(b(j, l));
        error2 += std::norm(x);
        norm2 += std::norm(at(i, j));
      }
  }
  if (norm2 == 0) return error2 == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(error2 / norm2) / (std::max(m, n) * test::eps<T>());
}

// Values only, U only, V only: the values as accurate as with both, the one factor orthonormal and
// spanning A's column (row) space.
TYPED_TEST(GesvjCpu, ValuesOnlyUOnlyVOnly) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("gesvj cpu partial"));
  Exec exec = Exec::cpu(2);
  const double cond = std::is_same_v<real_t<T>, float> ? 1e5 : 1e10;
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{
           {1, 1}, {2, 17}, {17, 17}, {33, 33}, {128, 128}, {512, 32}, {100, 17}, {32, 100}}) {
    const int count = std::max(m, n) <= 33 ? 7 : 1, k = std::min(m, n);
    for (const LowrankSpec& spec : {test::latms_spec(m, n, count, 3, cond), test::rank_deficient_spec(m, n, count, k / 2)}) {
      const LowrankCase<T> c = test::make_lowrank_case<T>(spec, rng);
      for (const auto& [u, v] : std::vector<std::pair<bool, bool>>{{false, false}, {true, false}, {false, true}}) {
        const std::string context = std::string("gesvj ") + (u ? "U only" : v ? "V only" : "values only");
        const GesvjRun<T> run = run_gesvj(exec, c, {.u = u, .v = v});
        expect_run(c, run, context);
        if (!u && !v) continue;
        for (int b = 0; b < count; ++b) {
          const double residual = projection_residual(
              c.matrix(b), m, n, u ? run.u.data() + std::size_t(b) * m * k : run.v.data() + std::size_t(b) * n * k, u);
          EXPECT_LE(residual, test::lowrank_tolerance)
              << context << " [" << c.label() << " b=" << b << "]: " << (u ? "‖A − U·UᴴA‖_F" : "‖A − AV·Vᴴ‖_F")
              << "/‖A‖_F = " << residual << " n·ε";
        }
      }
    }
  }
}

// A strided batch (ld > rows, gaps between matrices) for A, U and V gives bit for bit the packed
// batch's result.
TYPED_TEST(GesvjCpu, StridedBatchMatchesPacked) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("gesvj cpu strided"));
  Exec exec = Exec::cpu(2);
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{17, 17}, {33, 5}, {5, 33}}) {
    const int count = 7, k = std::min(m, n);
    const LowrankCase<T> c = test::make_lowrank_case<T>(test::random_spec(m, n, count), rng);
    const GesvjRun<T> packed = run_gesvj(exec, c);
    auto strided = [&](int rows, int cols) {
      const std::int64_t ld = rows + 2;
      return std::pair<std::vector<T>, Batch<T>>{std::vector<T>(std::size_t(ld * cols + 3) * count, test::poison<T>()),
                                                 Batch<T>{nullptr, rows, cols, ld, ld * cols + 3, count}};
    };
    auto [a, a_batch] = strided(m, n);
    auto [u, u_batch] = strided(m, k);
    auto [v, v_batch] = strided(n, k);
    a_batch.data = a.data();
    u_batch.data = u.data();
    v_batch.data = v.data();
    for (int b = 0; b < count; ++b)
      for (int j = 0; j < n; ++j) std::copy_n(c.matrix(b) + std::size_t(j) * m, m, &a_batch.at(b, 0, j));
    std::vector<real_t<T>> s(std::size_t(count) * k, test::poison<real_t<T>>());
    std::vector<SvdInfo> info(count, info_poison);
    gesvj<T>(exec, a_batch, s, u_batch, v_batch, info);
    const std::string where = c.label();
    EXPECT_EQ(std::memcmp(s.data(), packed.s.data(), s.size() * sizeof(s[0])), 0) << where << ": s";
    for (int b = 0; b < count; ++b) {
      EXPECT_EQ(info[b].status, packed.info[b].status) << where;
      EXPECT_EQ(info[b].sweeps, packed.info[b].sweeps) << where;
      for (int j = 0; j < k; ++j) {
        EXPECT_EQ(std::memcmp(&u_batch.at(b, 0, j), packed.u.data() + std::size_t(b) * m * k + std::size_t(j) * m,
                              m * sizeof(T)),
                  0)
            << where << ": U of b=" << b << " column " << j;
        EXPECT_EQ(std::memcmp(&v_batch.at(b, 0, j), packed.v.data() + std::size_t(b) * n * k + std::size_t(j) * n,
                              n * sizeof(T)),
                  0)
            << where << ": V of b=" << b << " column " << j;
        EXPECT_TRUE(std::isnan(std::real(u_batch.at(b, m, j)))) << where << ": U's padding written";
        EXPECT_TRUE(std::isnan(std::real(v_batch.at(b, n, j)))) << where << ": V's padding written";
      }
    }
  }
}

// A NaN in one matrix and an Inf in another: both flagged with NaN outputs, every other matrix bit
// for bit as in a clean run.
TYPED_TEST(GesvjCpu, NonFiniteInputFlagsOnlyThatMatrix) {
  using T = TypeParam;
  using R = real_t<T>;
  std::mt19937_64 rng(test::fresh_seed("gesvj cpu non-finite"));
  Exec exec = Exec::cpu(2);
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{1, 1}, {17, 17}, {33, 8}, {8, 33}}) {
    const int count = 7, k = std::min(m, n), with_nan = 2, with_inf = 5;
    const LowrankCase<T> clean = test::make_lowrank_case<T>(test::random_spec(m, n, count), rng);
    LowrankCase<T> dirty = clean;
    const std::size_t mn = std::size_t(m) * n;
    dirty.a[with_nan * mn + mn / 2] = T(std::numeric_limits<R>::quiet_NaN());
    dirty.a[with_inf * mn] = T(std::numeric_limits<R>::infinity());
    const GesvjRun<T> reference = run_gesvj(exec, clean);
    const GesvjRun<T> run = run_gesvj(exec, dirty);
    const std::string where = clean.label();
    for (int b = 0; b < count; ++b) {
      const std::size_t mk = std::size_t(m) * k, nk = std::size_t(n) * k;
      if (b == with_nan || b == with_inf) {
        EXPECT_EQ(run.info[b].status, status::non_finite_input) << where << ": b=" << b;
        for (int i = 0; i < k; ++i) EXPECT_TRUE(std::isnan(run.s[b * k + i])) << where << ": s of b=" << b;
        for (std::size_t e = 0; e < mk; ++e) EXPECT_TRUE(std::isnan(std::real(run.u[b * mk + e]))) << where << ": U";
        for (std::size_t e = 0; e < nk; ++e) EXPECT_TRUE(std::isnan(std::real(run.v[b * nk + e]))) << where << ": V";
      } else {
        EXPECT_EQ(run.info[b].status, status::ok) << where << ": b=" << b;
        EXPECT_EQ(run.info[b].sweeps, reference.info[b].sweeps) << where << ": b=" << b;
        EXPECT_EQ(std::memcmp(run.s.data() + b * k, reference.s.data() + b * k, k * sizeof(R)), 0) << where << ": s";
        EXPECT_EQ(std::memcmp(run.u.data() + b * mk, reference.u.data() + b * mk, mk * sizeof(T)), 0) << where << ": U";
        EXPECT_EQ(std::memcmp(run.v.data() + b * nk, reference.v.data() + b * nk, nk * sizeof(T)), 0) << where << ": V";
      }
    }
  }
}

// info reports the sweeps (0 for one column, where there is no pair) and the last sweep's largest
// |cos| between columns; a max_sweeps below what LAPACK needed is reported no_convergence.
TYPED_TEST(GesvjCpu, InfoReportsSweepsAndTheLimit) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("gesvj cpu sweeps"));
  Exec exec = Exec::cpu(2);
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{5, 1}, {1, 5}, {17, 17}, {64, 33}, {33, 64}}) {
    const int count = 3, k = std::min(m, n);
    const LowrankCase<T> c = test::make_lowrank_case<T>(test::latms_spec(m, n, count, 3, 1e3), rng);
    const GesvjRun<T> run = run_gesvj(exec, c);
    int needed = 0;
    for (int b = 0; b < count; ++b) {
      const SvdInfo& info = run.info[b];
      EXPECT_EQ(info.status, status::ok) << c.label();
      if (k == 1) {
        EXPECT_EQ(info.sweeps, 0) << c.label();
      } else {
        EXPECT_GE(info.sweeps, 1) << c.label();
        EXPECT_LE(info.sweeps, 30) << c.label();
      }
      // ?gesvj stops once its last sweep rotated no pair whose |cos| exceeded √k·tol, tol = √rows·ε
      // (rows = max(m, n), k = min(m, n): the matrix it sees is A or Aᴴ).
      EXPECT_LE(info.off, std::sqrt(double(std::max(m, n)) * k) * test::eps<T>()) << c.label();
      EXPECT_GE(info.off, 0.0) << c.label();
      needed = std::max(needed, info.sweeps);
    }
    if (k == 1 || needed < 2) continue;
    const GesvjRun<T> limited = run_gesvj(exec, c, {.max_sweeps = needed - 1});
    const GesvjRun<T> enough = run_gesvj(exec, c, {.max_sweeps = needed});
    for (int b = 0; b < count; ++b) {
      EXPECT_EQ(limited.info[b].status, run.info[b].sweeps > needed - 1 ? status::no_convergence : status::ok)
          << c.label() << " b=" << b << ": max_sweeps " << needed - 1 << ", LAPACK needed " << run.info[b].sweeps;
      EXPECT_EQ(enough.info[b].status, status::ok) << c.label() << " b=" << b;
    }
  }
}

// Exactly zero columns: singular values 0, for which ?gesvj leaves U's columns unnormalised;
// gesvj still returns U with orthonormal columns.
TYPED_TEST(GesvjCpu, ZeroColumnsStillGiveOrthonormalU) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("gesvj cpu zero columns"));
  Exec exec = Exec::cpu(1);
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{17, 5}, {5, 17}, {6, 6}}) {
    LowrankCase<T> c = test::make_lowrank_case<T>(test::random_spec(m, n, 2), rng);
    // Matrix 0: columns 1 and 3 zero; matrix 1: all zero.
    for (int i = 0; i < m; ++i) {
      c.a[i + std::size_t(1) * m] = T(0);
      c.a[i + std::size_t(3) * m] = T(0);
    }
    std::fill(c.a.begin() + std::size_t(m) * n, c.a.end(), T(0));
    const GesvjRun<T> run = run_gesvj(exec, c);
    expect_run(c, run, "gesvj zero columns");
    const int k = std::min(m, n);
    for (int i = 0; i < k; ++i) EXPECT_EQ(run.s[k + i], real_t<T>(0)) << c.label() << ": zero matrix";
  }
}

// An exactly singular matrix whose columns are all nonzero (a zero row; two equal columns in a
// square matrix): one column can only shrink to the rounding level, where its direction is noise
// that no rotation makes orthogonal to the rest. LAPACK's ?gesvj reports no convergence after its
// 30 sweeps on such inputs; gesvj judges convergence on the columns above the rounding level and
// completes U there, so these converge with the usual residual and orthogonality.
TYPED_TEST(GesvjCpu, ExactlySingularSquareMatricesConverge) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("gesvj cpu exactly singular"));
  Exec exec = Exec::cpu(1);
  for (const int n : {6, 17, 40}) {
    LowrankCase<T> c = test::make_lowrank_case<T>(test::random_spec(n, n, 3), rng);
    for (int j = 0; j < n; ++j) c.a[std::size_t(n - 1) + std::size_t(j) * n] = T(0);  // matrix 0: last row zero
    T* second = c.a.data() + std::size_t(n) * n;  // matrix 1: column n−1 equal to column 0
    std::copy_n(second, n, second + std::size_t(n - 1) * n);
    T* third = c.a.data() + 2 * std::size_t(n) * n;  // matrix 2: rows 0 and 1 equal
    for (int j = 0; j < n; ++j) third[1 + std::size_t(j) * n] = third[std::size_t(j) * n];
    const GesvjRun<T> run = run_gesvj(exec, c);
    expect_run(c, run, "gesvj exactly singular");
  }
}

// The GPU suite's kernel tiles (GesvjGpuKernelTiles): off-diagonal tiles of exponential and Matérn
// kernel matrices on random 2-D points, singular values decaying far below ε·σ₁. ?gesvj rotates
// every pair and may use all its 30 sweeps on the noise columns; gesvj judges convergence on the
// columns above max(m, n)·ε·σ₁ afterwards (svd.hpp) and completes U over the rest, so every tile is
// reported converged, with off ≤ max(m, n)·ε over those columns and the usual 10·n·ε checks.
template <class T>
class GesvjCpuKernelTiles : public ::testing::Test {};
using DoubleTypes = ::testing::Types<f64, cf64>;
TYPED_TEST_SUITE(GesvjCpuKernelTiles, DoubleTypes, ElementName);

TYPED_TEST(GesvjCpuKernelTiles, ConvergeOnTheirNonzeroColumns) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("gesvj cpu kernel tiles"));
  Exec exec = Exec::cpu(2);
  // Of the 56 tiles of 256², the first 7 (one row of tiles: the neighbour to the farthest), for the
  // suite's time on two cores (?gesvj takes its 30 sweeps on some); the GPU suite takes them all.
  LowrankSpec large = test::kernel_tiles_spec(256, 2048, 0.1);
  large.count = 7;
  for (const LowrankSpec& spec : {large, test::kernel_tiles_spec(64, 512, 0.1, true),
                                  test::kernel_tiles_spec(32, 256, 0.1), test::kernel_tiles_spec(32, 256, 0.1, true),
                                  test::kernel_tiles_spec(32, 256, 0.01, true)}) {
    const LowrankCase<T> c = test::make_lowrank_case<T>(spec, rng);
    const GesvjRun<T> run = run_gesvj(exec, c);
    const SvdErrors e = expect_run(c, run, "gesvj kernel tiles");
    int most_sweeps = 0;
    for (int b = 0; b < c.count(); ++b) {
      EXPECT_LE(run.info[b].off, std::max(c.m(), c.n()) * test::eps<T>()) << c.label() << " b=" << b;
      most_sweeps = std::max(most_sweeps, run.info[b].sweeps);
    }
    std::printf("[ errors   ] %s: residual %.2f, ‖UᴴU−I‖ %.2f, ‖VᴴV−I‖ %.2f, σ %.2f (n·ε); ?gesvj sweeps at most %d\n",
                c.label().c_str(), e.residual, e.u_orthogonality, e.v_orthogonality, e.values, most_sweeps);
  }
}

TYPED_TEST(GesvjCpu, WorkspaceQueryCoversTheRun) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("gesvj cpu workspace"));
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{2, 2}, {128, 128}, {512, 32}, {17, 64}})
    for (const bool vectors : {true, false}) {
      Exec exec = Exec::cpu(2);
      const SvdOptions options{.u = vectors, .v = vectors};
      const std::size_t bytes = gesvj_workspace<T>(exec, m, n, 3, options);
      EXPECT_GT(bytes, 0u);
      exec.workspace().reserve(bytes);
      ASSERT_EQ(exec.workspace().growth_count(), 0u);
      const LowrankCase<T> c = test::make_lowrank_case<T>(test::random_spec(m, n, 3), rng);
      const GesvjRun<T> run = run_gesvj(exec, c, options);
      EXPECT_EQ(exec.workspace().growth_count(), 0u)
          << shape_name(m, n) << ": gesvj grew the workspace beyond gesvj_workspace() = " << bytes << " bytes";
      expect_run(c, run, "gesvj workspace");
    }
  Exec exec = Exec::cpu(1);
  EXPECT_EQ(gesvj_workspace<T>(exec, 0, 4, 2), 0u);
  EXPECT_EQ(gesvj_workspace<T>(exec, 4, 4, 0), 0u);
}

// ---- argument errors ------------------------------------------------------------------------

TEST(GesvjCpuErrors, BadArgumentsAreNamed) {
  Exec exec = Exec::cpu(1);
  const int m = 6, n = 4, k = 4, count = 2;
  std::vector<cf64> a(m * n * count), u(m * k * count), v(n * k * count);
  std::vector<double> s(k * count);
  std::vector<SvdInfo> info(count);
  const auto A = Batch<cf64>::packed(a.data(), m, n, count);
  const auto U = Batch<cf64>::packed(u.data(), m, k, count);
  const auto V = Batch<cf64>::packed(v.data(), n, k, count);
  test::expect_invalid_argument([&] { gesvj<cf64>(exec, A, s, Batch<cf64>::packed(u.data(), m, 3, count), V, info); },
                 "gesvj: U must be 2 × 6×4, got 2 × 6×3");
  test::expect_invalid_argument([&] { gesvj<cf64>(exec, A, s, U, Batch<cf64>::packed(v.data(), n, k, 1), info); },
                 "gesvj: V must be 2 × 4×4, got 1 × 4×4");
  test::expect_invalid_argument([&] { gesvj<cf64>(exec, A, s, Batch<cf64>{}, V, info); }, "gesvj: U must be 2 × 6×4");
  test::expect_invalid_argument([&] { gesvj<cf64>(exec, A, std::span(s).first(7), U, V, info); },
                 "gesvj: s holds 7 values, 8 needed (count × min(m, n))");
  test::expect_invalid_argument([&] { gesvj<cf64>(exec, A, s, U, V, std::span(info).first(1)); },
                 "gesvj: info holds 1 entries, 2 needed (one per matrix)");
  test::expect_invalid_argument([&] { gesvj<cf64>(exec, Batch<cf64>::packed(a.data(), 0, n, count), s, U, V, info); },
                 "gesvj: A is 0×4: both dimensions must be ≥ 1");
  test::expect_invalid_argument([&] { gesvj<cf64>(exec, A, s, U, V, info, {.max_sweeps = -1}); },
                 "gesvj: max_sweeps must be ≥ 0");
  test::expect_invalid_argument([&] { gesvj<cf64>(exec, Batch<cf64>{a.data(), m, n, 5, 24, count}, s, U, V, info); },
                 "gesvj: A: leading dimension 5 < rows 6");
  // Without U and V the shapes of those arguments do not matter.
  EXPECT_NO_THROW(gesvj<cf64>(exec, A, s, Batch<cf64>{}, Batch<cf64>{}, info, {.u = false, .v = false}));
}

TEST(GesvjCpuErrors, EmptyBatchIsANoOp) {
  Exec exec = Exec::cpu(1);
  EXPECT_NO_THROW(gesvj<f32>(exec, Batch<f32>{nullptr, 8, 8, 8, 64, 0}, {}, {}, {}, {}, {.u = false, .v = false}));
}

}  // namespace
}  // namespace covflow::linalg

// geqrf / ungqr / unmqr on the CPU backend (LAPACK ?geqrf, ?ungqr, ?unmqr across the pool) through
// the public API, against double-precision LAPACK: residual ‖A − QR‖_F/‖A‖_F and orthogonality
// ‖QᴴQ − I‖_F ≤ 10·n·ε (n = max(m, n)) on ?latms matrices of every mode and condition, rank-deficient,
// graded, radar-snapshot and random matrices, tall and wide, batch 1 and 7; |R_ii| against LAPACK's
// in double within 10·n·ε·‖A‖_F·κ(A); unmqr against an explicit Q; non-finite input; argument errors.
// Outputs are poisoned with NaN before each run.
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
#include "covflow/linalg/qr.hpp"
#include "lowrank_cases.hpp"
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

using test::LowrankCase;
using test::LowrankKind;
using test::LowrankSpec;
using test::precise_t;
using test::QrErrors;

// What info is filled with before a run: not ok, not any status code.
constexpr int info_poison = 0x7eadbeef;

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

template <class T>
struct GeqrfRun {
  std::vector<T> a;  // R and the reflectors
  std::vector<T> tau;
  std::vector<int> info;
};

// geqrf on a copy of the case's matrices, tau and info poisoned.
template <class T>
GeqrfRun<T> run_geqrf(Exec& exec, const LowrankCase<T>& c) {
  GeqrfRun<T> run{c.a, std::vector<T>(std::size_t(c.count()) * c.k(), test::poison<T>()),
                  std::vector<int>(c.count(), info_poison)};
  geqrf<T>(exec, Batch<T>::packed(run.a.data(), c.m(), c.n(), c.count()), run.tau, run.info);
  return run;
}

// Worst errors per kind over a test, printed at its end: how much of the 10·n·ε budget LAPACK uses.
class QrErrorTable {
 public:
  void add(LowrankKind kind, const QrErrors& e) { rows_[kind] = test::max_errors(rows_[kind], e); }
  void print(const std::string& title) const {
    std::printf("[ errors   ] %s — max in units of n·ε (tolerance %.0f; R diagonal also × κ)\n", title.c_str(),
                test::lowrank_tolerance);
    for (const auto& [kind, e] : rows_)
      std::printf("[ errors   ] %-15s residual %7.3f  orthogonality %7.3f  |R_ii| %9.3g\n", test::name(kind).c_str(),
                  e.residual, e.orthogonality, e.r_diagonal);
    std::fflush(stdout);
  }

 private:
  std::map<LowrankKind, QrErrors> rows_;
};

template <class T>
class QrCpu : public ::testing::Test {};
struct ElementName {
  template <class T>
  static std::string GetName(int) {
    return std::string(name(element_type_of<T>()));
  }
};
using ElementTypes = ::testing::Types<f32, f64, cf32, cf64>;
TYPED_TEST_SUITE(QrCpu, ElementTypes, ElementName);

// ?latms modes 1–5 at every condition, every shape. |R_ii| is compared to LAPACK's in double with
// the bound scaled by κ(A) (see lowrank_cases.hpp: the perturbation of R grows with κ).
TYPED_TEST(QrCpu, GeqrfLatmsEveryModeAndCondition) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("geqrf cpu latms"));
  Exec exec = Exec::cpu(2);
  QrErrorTable table;
  int cases = 0;
  for (const auto& [m, n] : checked_shapes())
    for (int mode = 1; mode <= 5; ++mode)
      for (const double cond : conditions_for<T>(m, n, mode)) {
        // Batch 7 on the small shapes every other case, batch 1 otherwise.
        const int count = std::max(m, n) <= 33 && (mode + cases) % 2 == 0 ? 7 : 1;
        const LowrankCase<T> c = test::make_lowrank_case<T>(test::latms_spec(m, n, count, mode, cond), rng);
        const GeqrfRun<T> run = run_geqrf(exec, c);
        table.add(c.spec.kind, test::expect_geqrf_results(c, run.a.data(), run.tau.data(), run.info.data(),
                                                           all_indices(count), "geqrf latms", cond));
        ++cases;
      }
  table.print("geqrf latms " + std::string(name(element_type_of<T>())));
}

// Rank-deficient (rank 0, 1, k/2), graded, radar snapshots and random matrices. |R_ii| is compared
// for random matrices (κ from the reference singular values); for the others R's trailing diagonal
// depends on directions that rounding chooses.
TYPED_TEST(QrCpu, GeqrfRankDeficientGradedRadarRandom) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("geqrf cpu kinds"));
  Exec exec = Exec::cpu(2);
  QrErrorTable table;
  const double spread = std::is_same_v<real_t<T>, float> ? 1e6 : 1e12;
  for (const auto& [m, n] : checked_shapes()) {
    const int k = std::min(m, n);
    const int count = std::max(m, n) <= 33 ? 7 : 1;
    std::vector<LowrankSpec> specs;
    for (const int rank : {0, 1, k / 2})
      if (rank < k || rank == 0) specs.push_back(test::rank_deficient_spec(m, n, count, rank));
    specs.push_back(test::graded_spec(m, n, count, spread));
    specs.push_back(test::radar_spec(m, n, count));
    for (const LowrankSpec& spec : specs) {
      const LowrankCase<T> c = test::make_lowrank_case<T>(spec, rng);
      const GeqrfRun<T> run = run_geqrf(exec, c);
      table.add(c.spec.kind, test::expect_geqrf_results(c, run.a.data(), run.tau.data(), run.info.data(),
                                                         all_indices(count), "geqrf"));
    }
    const LowrankCase<T> c = test::make_lowrank_case<T>(test::random_spec(m, n, count), rng);
    const GeqrfRun<T> run = run_geqrf(exec, c);
    for (int b = 0; b < count; ++b) {
      const std::vector<double> sigma = test::reference_singular_values(c.matrix(b), m, n);
      const int one[] = {b};
      table.add(c.spec.kind, test::expect_geqrf_results(c, run.a.data(), run.tau.data(), run.info.data(), one,
                                                         "geqrf random", sigma.front() / sigma.back()));
    }
  }
  table.print("geqrf " + std::string(name(element_type_of<T>())));
}

// A strided batch (ld > m, gaps between matrices) gives bit for bit the packed batch's result and
// leaves the padding alone.
TYPED_TEST(QrCpu, GeqrfStridedBatchMatchesPacked) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("geqrf cpu strided"));
  Exec exec = Exec::cpu(2);
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{17, 17}, {33, 5}, {5, 33}}) {
    const int count = 7, k = std::min(m, n);
    const LowrankCase<T> c = test::make_lowrank_case<T>(test::random_spec(m, n, count), rng);
    const GeqrfRun<T> packed = run_geqrf(exec, c);
    const std::int64_t ld = m + 3, stride = ld * n + 5;
    const T pad = T(12345);
    std::vector<T> a(std::size_t(stride) * count, pad);
    for (int b = 0; b < count; ++b)
      for (int j = 0; j < n; ++j) std::copy_n(c.matrix(b) + std::size_t(j) * m, m, a.data() + b * stride + j * ld);
    std::vector<T> tau(std::size_t(count) * k, test::poison<T>());
    std::vector<int> info(count, info_poison);
    geqrf<T>(exec, Batch<T>{a.data(), m, n, ld, stride, count}, tau, info);
    const std::string where = shape_name(m, n) + " " + c.label();
    EXPECT_EQ(std::memcmp(tau.data(), packed.tau.data(), tau.size() * sizeof(T)), 0) << where << ": tau";
    EXPECT_EQ(info, packed.info) << where;
    for (int b = 0; b < count; ++b)
      for (int j = 0; j < n; ++j) {
        EXPECT_EQ(std::memcmp(a.data() + b * stride + j * ld, packed.a.data() + std::size_t(b) * m * n + std::size_t(j) * m,
                              m * sizeof(T)),
                  0)
            << where << ": b=" << b << " column " << j;
        for (std::int64_t i = m; i < ld && (j + 1 < n || b + 1 < count); ++i)
          EXPECT_EQ(a[b * stride + j * ld + i], pad) << where << ": padding written at b=" << b << " column " << j;
      }
  }
}

// A NaN in one matrix and an Inf in another: both flagged, their R, reflectors and tau NaN, and
// every other matrix bit for bit as in a clean run.
TYPED_TEST(QrCpu, GeqrfNonFiniteInputFlagsOnlyThatMatrix) {
  using T = TypeParam;
  using R = real_t<T>;
  std::mt19937_64 rng(test::fresh_seed("geqrf cpu non-finite"));
  Exec exec = Exec::cpu(2);
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{1, 1}, {17, 17}, {33, 8}, {8, 33}}) {
    const int count = 7, k = std::min(m, n), with_nan = 2, with_inf = 5;
    const LowrankCase<T> clean = test::make_lowrank_case<T>(test::random_spec(m, n, count), rng);
    LowrankCase<T> dirty = clean;
    const std::size_t mn = std::size_t(m) * n;
    dirty.a[with_nan * mn + mn / 2] = T(std::numeric_limits<R>::quiet_NaN());
    dirty.a[with_inf * mn + mn - 1] = T(-std::numeric_limits<R>::infinity());
    const GeqrfRun<T> reference = run_geqrf(exec, clean);
    const GeqrfRun<T> run = run_geqrf(exec, dirty);
    const std::string where = shape_name(m, n) + " " + clean.label();
    for (int b = 0; b < count; ++b) {
      const bool flagged = b == with_nan || b == with_inf;
      if (flagged) {
        EXPECT_EQ(run.info[b], status::non_finite_input) << where << ": b=" << b;
        for (std::size_t e = 0; e < mn; ++e)
          EXPECT_TRUE(std::isnan(std::real(run.a[b * mn + e]))) << where << ": b=" << b << " element " << e;
        for (int i = 0; i < k; ++i) EXPECT_TRUE(std::isnan(std::real(run.tau[b * k + i]))) << where << ": tau";
      } else {
        EXPECT_EQ(run.info[b], status::ok) << where << ": b=" << b;
        EXPECT_EQ(std::memcmp(run.a.data() + b * mn, reference.a.data() + b * mn, mn * sizeof(T)), 0)
            << where << ": b=" << b << " differs from the clean run";
        EXPECT_EQ(std::memcmp(run.tau.data() + b * k, reference.tau.data() + b * k, k * sizeof(T)), 0)
            << where << ": tau of b=" << b << " differs from the clean run";
      }
    }
  }
}

// ungqr forms the thin Q: tall matrices from their n reflectors, wide ones from the leading m×m
// block of geqrf's output; Q·R reproduces A and Q has orthonormal columns. Q comes from ungqr in T
// here, not from the checker's own double-precision ungqr.
TYPED_TEST(QrCpu, UngqrFormsTheThinQ) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("ungqr cpu"));
  Exec exec = Exec::cpu(2);
  QrErrorTable table;
  for (const auto& [m, n] : checked_shapes()) {
    const int k = std::min(m, n), count = std::max(m, n) <= 33 ? 7 : 1;
    for (const LowrankSpec& spec : {test::latms_spec(m, n, count, 3, std::is_same_v<real_t<T>, float> ? 1e5 : 1e10),
                                    test::rank_deficient_spec(m, n, count, k / 2)}) {
      const LowrankCase<T> c = test::make_lowrank_case<T>(spec, rng);
      GeqrfRun<T> run = run_geqrf(exec, c);
      // R (k × n) before ungqr overwrites the reflectors.
      std::vector<T> r(std::size_t(count) * k * n, T(0));
      for (int b = 0; b < count; ++b)
        for (int j = 0; j < n; ++j)
          for (int i = 0; i <= std::min(j, k - 1); ++i)
            r[std::size_t(b) * k * n + i + std::size_t(j) * k] = run.a[std::size_t(b) * m * n + i + std::size_t(j) * m];
      // The leading m × k block: all of a tall A, the m × m block of a wide one (ld = m either way).
      ungqr<T>(exec, Batch<T>{run.a.data(), m, k, m, std::int64_t(m) * n, count}, run.tau);
      for (int b = 0; b < count; ++b) {
        const QrErrors e = test::qr_errors_explicit(c.matrix(b), m, n, run.a.data() + std::size_t(b) * m * n,
                                                    r.data() + std::size_t(b) * k * n);
        const std::string where = "ungqr [" + c.label() + " b=" + std::to_string(b) + "]";
        EXPECT_LE(e.residual, test::lowrank_tolerance) << where << ": ‖A − QR‖_F/‖A‖_F = " << e.residual << " n·ε";
        EXPECT_LE(e.orthogonality, test::lowrank_tolerance) << where << ": ‖QᴴQ − I‖_F = " << e.orthogonality << " n·ε";
        table.add(c.spec.kind, e);
      }
    }
  }
  table.print("ungqr " + std::string(name(element_type_of<T>())));
}

// The full r×r Q = H₁…H_k of the k reflectors in v (r × k, leading dimension ld) and tau, formed in
// double from the stored reflectors: H_i = I − τ_i·v_i·v_iᴴ, v_i = (0 … 0, 1, v(i+1:r, i)).
template <class T>
std::vector<precise_t<T>> explicit_q(const T* v, std::int64_t ld, const T* tau, int r, int k) {
  using D = precise_t<T>;
  std::vector<D> q(std::size_t(r) * r, D(0));
  for (int i = 0; i < r; ++i) q[i + std::size_t(i) * r] = D(1);
  std::vector<D> reflector(r);
  // Q = H₁(H₂(…(H_k·I))): apply H_k first.
  for (int i = k - 1; i >= 0; --i) {
    std::fill(reflector.begin(), reflector.end(), D(0));
    reflector[i] = D(1);
    for (int row = i + 1; row < r; ++row) reflector[row] = D(v[row + i * ld]);
    const D t = D(tau[i]);
    for (int j = 0; j < r; ++j) {
      D dot = D(0);
      for (int row = i; row < r; ++row) {
        if constexpr (is_complex_v<D>) dot += std::conj(reflector[row]) * q[row + std::size_t(j) * r];
        else dot += reflector[row] * q[row + std::size_t(j) * r];
      }
      for (int row = i; row < r; ++row) q[row + std::size_t(j) * r] -= t * dot * reflector[row];
    }
  }
  return q;
}

// unmqr, Side::left and right × Op::none and conj_trans, against the product with the explicit Q,
// in double: ‖C_out − op(Q)·C‖_F / ‖C‖_F (or C·op(Q)) ≤ 10·r·ε. A and C are strided with padding.
TYPED_TEST(QrCpu, UnmqrMatchesTheExplicitQ) {
  using T = TypeParam;
  using D = precise_t<T>;
  std::mt19937_64 rng(test::fresh_seed("unmqr cpu"));
  Exec exec = Exec::cpu(2);
  double worst = 0;
  for (const int r : {1, 2, 17, 33, 64, 128})
    for (const int k : {1, std::max(1, r / 2), r}) {
      const int count = r <= 33 ? 7 : 1;
      const LowrankCase<T> reflectors = test::make_lowrank_case<T>(test::random_spec(r, k, count), rng);
      const GeqrfRun<T> qr = run_geqrf(exec, reflectors);
      // A with its reflectors at ld = r + 1.
      const std::int64_t lda = r + 1, stride_a = lda * k;
      std::vector<T> a(std::size_t(stride_a) * count, test::poison<T>());
      std::vector<std::vector<D>> q(count);
      for (int b = 0; b < count; ++b) {
        for (int j = 0; j < k; ++j)
          std::copy_n(qr.a.data() + std::size_t(b) * r * k + std::size_t(j) * r, r, a.data() + b * stride_a + j * lda);
        q[b] = explicit_q(a.data() + b * stride_a, lda, qr.tau.data() + std::size_t(b) * k, r, k);
      }
      for (const int other : {1, 5, 40})
        for (const Side side : {Side::left, Side::right})
          for (const Op op : {Op::none, Op::conj_trans}) {
            const int m_c = side == Side::left ? r : other, n_c = side == Side::left ? other : r;
            const LowrankCase<T> c = test::make_lowrank_case<T>(test::random_spec(m_c, n_c, count), rng);
            // C at ld = m_c + 2 with 3 elements between matrices.
            const std::int64_t ldc = m_c + 2, stride_c = ldc * n_c + 3;
            std::vector<T> out(std::size_t(stride_c) * count, test::poison<T>());
            for (int b = 0; b < count; ++b)
              for (int j = 0; j < n_c; ++j)
                std::copy_n(c.matrix(b) + std::size_t(j) * m_c, m_c, out.data() + b * stride_c + j * ldc);
            unmqr<T>(exec, side, op, Batch<const T>{a.data(), r, k, lda, stride_a, count}, qr.tau,
                     Batch<T>{out.data(), m_c, n_c, ldc, stride_c, count});
            for (int b = 0; b < count; ++b) {
              auto op_q = [&](int i, int j) {  // element (i, j) of op(Q)
                if (op == Op::none) return q[b][i + std::size_t(j) * r];
                if constexpr (is_complex_v<D>) return std::conj(q[b][j + std::size_t(i) * r]);
                else return q[b][j + std::size_t(i) * r];
              };
              const T* input = c.matrix(b);
              double error2 = 0, norm2 = 0;
              for (int j = 0; j < n_c; ++j)
                for (int i = 0; i < m_c; ++i) {
                  D expected = D(0);
                  if (side == Side::left)
                    for (int l = 0; l < r; ++l) expected += op_q(i, l) * D(input[l + std::size_t(j) * m_c]);
                  else
                    for (int l = 0; l < r; ++l) expected += D(input[i + std::size_t(l) * m_c]) * op_q(l, j);
                  error2 += std::norm(D(out[b * stride_c + j * ldc + i]) - expected);
                  norm2 += std::norm(D(input[i + std::size_t(j) * m_c]));
                }
              const double error = std::sqrt(error2) / std::sqrt(norm2) / (r * test::eps<T>());
              worst = std::max(worst, std::isnan(error) ? std::numeric_limits<double>::infinity() : error);
              EXPECT_LE(error, test::lowrank_tolerance)
                  << "unmqr side=" << static_cast<char>(side) << " op=" << static_cast<char>(op) << " r=" << r
                  << " k=" << k << " C " << shape_name(m_c, n_c) << " b=" << b << " [" << reflectors.label() << "; "
                  << c.label() << "]: ‖C − op(Q)C‖_F/‖C‖_F = " << error << " r·ε";
              for (int j = 0; j < n_c; ++j)
                for (std::int64_t i = m_c; i < ldc; ++i)
                  EXPECT_TRUE(std::isnan(std::real(out[b * stride_c + j * ldc + i]))) << "unmqr wrote C's padding";
            }
          }
    }
  std::printf("[ errors   ] unmqr %s — max ‖C − op(Q)·C‖_F/‖C‖_F %.3f r·ε (tolerance %.0f)\n",
              std::string(name(element_type_of<T>())).c_str(), worst, test::lowrank_tolerance);
}

// The workspace queries cover the runs: reserved up front, no call grows the arena.
TYPED_TEST(QrCpu, WorkspaceQueriesCoverTheRuns) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("qr cpu workspace"));
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{2, 2}, {128, 128}, {512, 32}, {17, 64}}) {
    Exec exec = Exec::cpu(2);
    const int count = 3, k = std::min(m, n);
    const std::size_t bytes = std::max({geqrf_workspace<T>(exec, m, n, count), ungqr_workspace<T>(exec, m, k, count),
                                        unmqr_workspace<T>(exec, Side::left, m, 7, k, count),
                                        unmqr_workspace<T>(exec, Side::right, 7, m, k, count)});
    EXPECT_GT(bytes, 0u);
    exec.workspace().reserve(bytes);
    ASSERT_EQ(exec.workspace().growth_count(), 0u);
    const LowrankCase<T> c = test::make_lowrank_case<T>(test::random_spec(m, n, count), rng);
    GeqrfRun<T> run = run_geqrf(exec, c);
    std::vector<T> left(std::size_t(count) * m * 7), right(std::size_t(count) * 7 * m);
    const Batch<const T> reflectors{run.a.data(), m, k, m, std::int64_t(m) * n, count};
    unmqr<T>(exec, Side::left, Op::conj_trans, reflectors, run.tau, Batch<T>::packed(left.data(), m, 7, count));
    unmqr<T>(exec, Side::right, Op::none, reflectors, run.tau, Batch<T>::packed(right.data(), 7, m, count));
    ungqr<T>(exec, Batch<T>{run.a.data(), m, k, m, std::int64_t(m) * n, count}, run.tau);
    EXPECT_EQ(exec.workspace().growth_count(), 0u) << shape_name(m, n) << ": a call grew the workspace beyond its query";
  }
  Exec exec = Exec::cpu(1);
  EXPECT_EQ(geqrf_workspace<T>(exec, 0, 4, 2), 0u);
  EXPECT_EQ(ungqr_workspace<T>(exec, 4, 4, 0), 0u);
  EXPECT_EQ(unmqr_workspace<T>(exec, Side::left, 4, 4, 0, 2), 0u);
}

// ---- argument errors ------------------------------------------------------------------------

TEST(QrCpuErrors, BadArgumentsAreNamed) {
  Exec exec = Exec::cpu(1);
  std::vector<cf64> a(6 * 4 * 2), c(6 * 3 * 2);
  std::vector<cf64> tau(8);
  std::vector<int> info(2);
  auto a_batch = [&](std::int64_t m, std::int64_t n) { return Batch<cf64>::packed(a.data(), m, n, 2); };
  test::expect_invalid_argument([&] { geqrf<cf64>(exec, a_batch(6, 4), std::span(tau).first(7), info); },
                 "geqrf: tau holds 7 scalars, 8 needed (count × 4)");
  test::expect_invalid_argument([&] { geqrf<cf64>(exec, a_batch(6, 4), tau, std::span(info).first(1)); },
                 "geqrf: info holds 1 entries, 2 needed (one per matrix)");
  test::expect_invalid_argument([&] { geqrf<cf64>(exec, a_batch(0, 4), tau, info); }, "geqrf: A is 0×4: both dimensions must be ≥ 1");
  test::expect_invalid_argument([&] { geqrf<cf64>(exec, a_batch(6, 0), tau, info); }, "geqrf: A is 6×0");
  test::expect_invalid_argument([&] { geqrf<cf64>(exec, Batch<cf64>{a.data(), 6, 4, 5, 24, 2}, tau, info); },
                 "geqrf: A: leading dimension 5 < rows 6");
  test::expect_invalid_argument([&] { ungqr<cf64>(exec, a_batch(3, 4), tau); }, "ungqr: A is 3×4: the thin Q needs m ≥ n");
  test::expect_invalid_argument([&] { ungqr<cf64>(exec, a_batch(6, 4), std::span<const cf64>(tau).first(6)); },
                 "ungqr: tau holds 6 scalars, 8 needed");
  test::expect_invalid_argument([&] { ungqr<cf64>(exec, a_batch(0, 4), tau); }, "ungqr: A is 0×4");
  const Batch<const cf64> reflectors = a_batch(6, 4);
  test::expect_invalid_argument([&] { unmqr<cf64>(exec, Side::left, Op::none, reflectors, tau, Batch<cf64>::packed(c.data(), 5, 3, 2)); },
                 "unmqr: the reflectors have 6 rows; applied from the left to C (5×3) they need 5");
  test::expect_invalid_argument([&] { unmqr<cf64>(exec, Side::right, Op::none, reflectors, tau, Batch<cf64>::packed(c.data(), 3, 5, 2)); },
                 "unmqr: the reflectors have 6 rows; applied from the right to C (3×5) they need 5");
  test::expect_invalid_argument([&] { unmqr<cf64>(exec, Side::left, Op::none, reflectors, tau, Batch<cf64>::packed(c.data(), 6, 3, 1)); },
                 "unmqr: A holds 2 matrices and C 1");
  test::expect_invalid_argument([&] { unmqr<cf64>(exec, Side::left, Op::none, reflectors, std::span<const cf64>(tau).first(3),
                                   Batch<cf64>::packed(c.data(), 6, 3, 2)); },
                 "unmqr: tau holds 3 scalars, 8 needed");
  test::expect_invalid_argument([&] { unmqr<cf64>(exec, Side::left, Op::none, Batch<const cf64>::packed(a.data(), 3, 4, 2), tau,
                                   Batch<cf64>::packed(c.data(), 3, 3, 2)); },
                 "unmqr: A (3×4) holds more reflectors than rows");
  test::expect_invalid_argument([&] { unmqr<cf64>(exec, Side('X'), Op::none, reflectors, tau, Batch<cf64>::packed(c.data(), 6, 3, 2)); },
                 "unmqr: side must be left or right");
  test::expect_invalid_argument([&] { unmqr<cf64>(exec, Side::left, Op('T'), reflectors, tau, Batch<cf64>::packed(c.data(), 6, 3, 2)); },
                 "unmqr: op must be none or conj_trans");
}

TEST(QrCpuErrors, EmptyBatchIsANoOp) {
  Exec exec = Exec::cpu(1);
  EXPECT_NO_THROW(geqrf<f32>(exec, Batch<f32>{nullptr, 8, 8, 8, 64, 0}, {}, {}));
  EXPECT_NO_THROW(ungqr<f64>(exec, Batch<f64>{nullptr, 8, 8, 8, 64, 0}, {}));
  EXPECT_NO_THROW(unmqr<cf32>(exec, Side::left, Op::none, Batch<const cf32>{nullptr, 8, 4, 8, 32, 0}, {},
                              Batch<cf32>{nullptr, 8, 3, 8, 24, 0}));
}

}  // namespace
}  // namespace covflow::linalg

// getrf / getrs / gesv, potrf / potrs / posv and gels on the CPU backend (LAPACK across the pool)
// through the public API: the shared bodies of solve_suite.hpp (backward errors ≤ 10·n·ε for every
// order 1 … 32 and a few larger, pivots and factors bit for bit LAPACK's ?getrf, Wilkinson's growth
// matrix and a permuted identity factored exactly, exact info of singular and failing matrices, batch
// counts up to 2²⁰ + 7, strided batches, non-finite input, dirty workspace, workspace queries) on a
// two-thread CPU Exec, and the argument errors, which the CPU path checks before LAPACK sees them —
// among them a getrs pivot outside 1 … n, which only the CPU path can refuse (solve.hpp).
#include <gtest/gtest.h>

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "covflow/linalg/error.hpp"
#include "covflow/linalg/solve.hpp"
#include "solve_suite.hpp"

namespace covflow::linalg {
namespace {

using namespace solve_suite;

// Each test on a fresh two-thread CPU Exec.
template <class T>
class SolveCpu : public ::testing::Test {
 protected:
  Exec exec_ = Exec::cpu(2);
};
struct ElementName {
  template <class T>
  static std::string GetName(int) {
    return element_name(element_type_of<T>());
  }
};
using ElementTypes = ::testing::Types<f32, f64, cf32, cf64>;
TYPED_TEST_SUITE(SolveCpu, ElementTypes, ElementName);

// ---- LU -------------------------------------------------------------------------------------------

TYPED_TEST(SolveCpu, GetrfBackwardErrorAndLapackPivotsEveryOrder) {
  check_getrf_backward_error_and_lapack_pivots<TypeParam>(this->exec_);
}
TYPED_TEST(SolveCpu, GesvResidualEveryOrder) { check_gesv_residual<TypeParam>(this->exec_); }
TYPED_TEST(SolveCpu, GetrsEveryOpEveryOrder) { check_getrs_every_op<TypeParam>(this->exec_); }
TYPED_TEST(SolveCpu, WilkinsonGrowthMatrixFactoredExactly) { check_wilkinson_growth_matrix<TypeParam>(this->exec_); }
TYPED_TEST(SolveCpu, PermutedIdentityFactoredAndSolvedExactly) { check_permuted_identity<TypeParam>(this->exec_); }
TYPED_TEST(SolveCpu, SingularColumnReportsItsIndex) { check_singular_column<TypeParam>(this->exec_); }

// ---- Cholesky -------------------------------------------------------------------------------------

TYPED_TEST(SolveCpu, PotrfBackwardErrorEveryOrderLowerAndUpper) { check_potrf_backward_error<TypeParam>(this->exec_); }
TYPED_TEST(SolveCpu, PotrsAndPosvResidualEveryOrder) { check_potrs_and_posv_residual<TypeParam>(this->exec_); }
TYPED_TEST(SolveCpu, CholeskyFailsAtTheChosenMinor) {
  check_cholesky_fails_at_the_chosen_minor<TypeParam>(this->exec_);
}

// ---- least squares --------------------------------------------------------------------------------

TYPED_TEST(SolveCpu, GelsTallLeastSquaresEveryOrder) { check_gels_tall_least_squares<TypeParam>(this->exec_); }
TYPED_TEST(SolveCpu, GelsRankDeficientLeavesBUntouched) { check_gels_rank_deficient<TypeParam>(this->exec_); }

// ---- shapes, counts and layouts -------------------------------------------------------------------

TYPED_TEST(SolveCpu, NoRightHandSidesOnlyFactors) { check_no_right_hand_sides_only_factors<TypeParam>(this->exec_); }
TYPED_TEST(SolveCpu, EveryBatchCount) { check_every_batch_count<TypeParam>(this->exec_); }
TYPED_TEST(SolveCpu, StridedBatchesMatchPackedAndLeavePaddingAlone) {
  check_strided_batches<TypeParam>(this->exec_);
}
TYPED_TEST(SolveCpu, NonFiniteMatrixIsFlaggedAlone) { check_non_finite_matrix_flagged_alone<TypeParam>(this->exec_); }
TYPED_TEST(SolveCpu, DirtyWorkspaceGivesIdenticalResults) {
  check_dirty_workspace_gives_identical_results<TypeParam>(this->exec_);
}
TYPED_TEST(SolveCpu, WorkspaceQueriesCoverTheRuns) { check_workspace_queries_cover_the_runs<TypeParam>(this->exec_); }

// ---- argument errors ------------------------------------------------------------------------------

TEST(SolveCpuErrors, BadArgumentsThrowInvalidArgument) {
  Exec exec = Exec::cpu(1);
  std::vector<f64> a(4 * 4 * 2), b(5 * 2 * 2);
  std::vector<int> ipiv(8), info(2);
  auto batch = [](std::vector<f64>& x, std::int64_t rows, std::int64_t cols) {
    return Batch<f64>::packed(x.data(), rows, cols, 2);
  };
  const Batch<f64> square = batch(a, 4, 4), wide = batch(a, 3, 4), rhs = batch(b, 4, 2);
  test::expect_invalid_argument([&] { getrf<f64>(exec, wide, ipiv, info); }, "getrf: A is 3×4: it must be square");
  test::expect_invalid_argument([&] { gesv<f64>(exec, wide, ipiv, rhs, info); }, "gesv: A is 3×4: it must be square");
  test::expect_invalid_argument([&] { getrs<f64>(exec, Op::none, wide, ipiv, rhs); }, "getrs: A is 3×4: it must be square");
  test::expect_invalid_argument([&] { potrf<f64>(exec, Uplo::lower, wide, info); }, "potrf: A is 3×4: it must be square");
  test::expect_invalid_argument([&] { potrs<f64>(exec, Uplo::lower, wide, rhs); }, "potrs: A is 3×4: it must be square");
  test::expect_invalid_argument([&] { posv<f64>(exec, Uplo::upper, wide, rhs, info); }, "posv: A is 3×4: it must be square");

  test::expect_invalid_argument([&] { gesv<f64>(exec, square, ipiv, batch(b, 5, 2), info); }, "gesv: B is 5×2 but A is 4×4");
  test::expect_invalid_argument([&] { getrs<f64>(exec, Op::trans, square, ipiv, batch(b, 3, 2)); }, "B needs 4 rows");
  test::expect_invalid_argument([&] { potrs<f64>(exec, Uplo::upper, square, batch(b, 5, 2)); }, "potrs: B is 5×2");
  test::expect_invalid_argument([&] { posv<f64>(exec, Uplo::lower, square, batch(b, 3, 2), info); }, "posv: B is 3×2");
  test::expect_invalid_argument([&] { gels<f64>(exec, batch(a, 5, 3), batch(b, 4, 2), info); }, "gels: B is 4×2 but A is 5×3");
  test::expect_invalid_argument([&] { gesv<f64>(exec, square, ipiv, Batch<f64>::packed(b.data(), 4, 2, 1), info); },
                 "gesv: A holds 2 matrices and B 1");

  test::expect_invalid_argument([&] { getrf<f64>(exec, square, std::span(ipiv).first(7), info); },
                 "getrf: ipiv holds 7 entries, 8 needed (count × n)");
  test::expect_invalid_argument([&] { gesv<f64>(exec, square, std::span(ipiv).first(4), rhs, info); }, "gesv: ipiv holds 4 entries");
  test::expect_invalid_argument([&] { getrs<f64>(exec, Op::none, square, std::span<const int>(ipiv).first(1), rhs); },
                 "getrs: ipiv holds 1 entries");
  test::expect_invalid_argument([&] { getrf<f64>(exec, square, ipiv, std::span(info).first(1)); },
                 "getrf: info holds 1 entries, 2 needed (one per matrix)");
  test::expect_invalid_argument([&] { gesv<f64>(exec, square, ipiv, rhs, std::span(info).first(1)); }, "gesv: info holds 1");
  test::expect_invalid_argument([&] { potrf<f64>(exec, Uplo::lower, square, std::span(info).first(0)); }, "potrf: info holds 0");
  test::expect_invalid_argument([&] { posv<f64>(exec, Uplo::lower, square, rhs, std::span(info).first(1)); }, "posv: info holds 1");
  test::expect_invalid_argument([&] { gels<f64>(exec, batch(a, 4, 3), batch(b, 4, 2), std::span(info).first(1)); },
                 "gels: info holds 1");

  test::expect_invalid_argument([&] { gels<f64>(exec, batch(a, 3, 4), batch(b, 3, 2), info); }, "least squares needs m ≥ n");
  test::expect_invalid_argument([&] { potrf<f64>(exec, Uplo('X'), square, info); }, "potrf: uplo must be lower or upper");
  test::expect_invalid_argument([&] { posv<f64>(exec, Uplo('X'), square, rhs, info); }, "posv: uplo must be lower or upper");
  test::expect_invalid_argument([&] { getrs<f64>(exec, Op('X'), square, ipiv, rhs); }, "getrs: op must be none, trans or conj_trans");
  test::expect_invalid_argument([&] { getrf<f64>(exec, Batch<f64>{a.data(), 4, 4, 3, 16, 2}, ipiv, info); },
                 "getrf: A: leading dimension 3 < rows 4");

  // Pivots that are not rows of the matrix would send LAPACK outside it: refused, B left alone.
  std::vector<int> bad(8, 1);
  bad[6] = 5;
  const std::vector<f64> before = b;
  test::expect_invalid_argument([&] { getrs<f64>(exec, Op::none, square, bad, rhs); }, "getrs: ipiv[6] = 5 is not a row");
  bad[6] = 0;
  test::expect_invalid_argument([&] { getrs<f64>(exec, Op::none, square, bad, rhs); }, "getrs: ipiv[6] = 0 is not a row");
  EXPECT_EQ(b, before);
}

TEST(SolveCpuErrors, EmptyBatchesAreNoOps) {
  Exec exec = Exec::cpu(1);
  check_empty_batches_are_no_ops(exec);
}
}  // namespace
}  // namespace covflow::linalg

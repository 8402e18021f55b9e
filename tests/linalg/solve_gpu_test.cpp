// getrf / getrs / gesv, potrf / potrs / posv and gels on the CUDA backend through the public API: the
// bodies of the CPU suite (solve_suite.hpp) on the shared CUDA Exec — inputs uploaded, outputs
// downloaded and checked on the host by the same checks. Orders 1 … 32 run the fused register
// kernels (no workspace), larger ones cuBLAS / cuSOLVER's batched routines (pointer arrays, flags
// and scratch in the workspace). What the GPU checks differently, by contract (solve.hpp): pivots
// must still be LAPACK's but the factors need not be its bits (exact factors only where the
// arithmetic is exact: Wilkinson's matrix, a permuted identity); every operation runs at every batch
// count up to 2²⁰ + 7; a getrs pivot outside 1 … n is ignored rather than refused, so that CPU-only
// argument test has no twin here.
#include <gtest/gtest.h>

#include <string>

#include "solve_suite.hpp"
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

using namespace solve_suite;

template <class T>
class SolveGpu : public test::GpuTest {};
struct ElementName {
  template <class T>
  static std::string GetName(int) {
    return element_name(element_type_of<T>());
  }
};
using ElementTypes = ::testing::Types<f32, f64, cf32, cf64>;
TYPED_TEST_SUITE(SolveGpu, ElementTypes, ElementName);

// ---- LU -------------------------------------------------------------------------------------------

TYPED_TEST(SolveGpu, GetrfBackwardErrorAndLapackPivotsEveryOrder) {
  check_getrf_backward_error_and_lapack_pivots<TypeParam>(test::GpuTest::gpu());
}
TYPED_TEST(SolveGpu, GesvResidualEveryOrder) { check_gesv_residual<TypeParam>(test::GpuTest::gpu()); }
TYPED_TEST(SolveGpu, GetrsEveryOpEveryOrder) { check_getrs_every_op<TypeParam>(test::GpuTest::gpu()); }
TYPED_TEST(SolveGpu, WilkinsonGrowthMatrixFactoredExactly) {
  check_wilkinson_growth_matrix<TypeParam>(test::GpuTest::gpu());
}
TYPED_TEST(SolveGpu, PermutedIdentityFactoredAndSolvedExactly) {
  check_permuted_identity<TypeParam>(test::GpuTest::gpu());
}
TYPED_TEST(SolveGpu, SingularColumnReportsItsIndex) { check_singular_column<TypeParam>(test::GpuTest::gpu()); }

// ---- Cholesky -------------------------------------------------------------------------------------

TYPED_TEST(SolveGpu, PotrfBackwardErrorEveryOrderLowerAndUpper) {
  check_potrf_backward_error<TypeParam>(test::GpuTest::gpu());
}
TYPED_TEST(SolveGpu, PotrsAndPosvResidualEveryOrder) {
  check_potrs_and_posv_residual<TypeParam>(test::GpuTest::gpu());
}
TYPED_TEST(SolveGpu, CholeskyFailsAtTheChosenMinor) {
  check_cholesky_fails_at_the_chosen_minor<TypeParam>(test::GpuTest::gpu());
}

// ---- least squares --------------------------------------------------------------------------------

TYPED_TEST(SolveGpu, GelsTallLeastSquaresEveryOrder) {
  check_gels_tall_least_squares<TypeParam>(test::GpuTest::gpu());
}
TYPED_TEST(SolveGpu, GelsRankDeficientLeavesBUntouched) {
  check_gels_rank_deficient<TypeParam>(test::GpuTest::gpu());
}

// ---- shapes, counts and layouts -------------------------------------------------------------------

TYPED_TEST(SolveGpu, NoRightHandSidesOnlyFactors) {
  check_no_right_hand_sides_only_factors<TypeParam>(test::GpuTest::gpu());
}
TYPED_TEST(SolveGpu, EveryBatchCount) { check_every_batch_count<TypeParam>(test::GpuTest::gpu()); }
TYPED_TEST(SolveGpu, StridedBatchesMatchPackedAndLeavePaddingAlone) {
  check_strided_batches<TypeParam>(test::GpuTest::gpu());
}
TYPED_TEST(SolveGpu, NonFiniteMatrixIsFlaggedAlone) {
  check_non_finite_matrix_flagged_alone<TypeParam>(test::GpuTest::gpu());
}
TYPED_TEST(SolveGpu, DirtyWorkspaceGivesIdenticalResults) {
  check_dirty_workspace_gives_identical_results<TypeParam>(test::GpuTest::gpu());
}
TYPED_TEST(SolveGpu, WorkspaceQueriesCoverTheRuns) {
  check_workspace_queries_cover_the_runs<TypeParam>(test::GpuTest::gpu());
}

class SolveGpuErrors : public test::GpuTest {};

TEST_F(SolveGpuErrors, EmptyBatchesAreNoOps) { check_empty_batches_are_no_ops(test::GpuTest::gpu()); }

}  // namespace
}  // namespace covflow::linalg

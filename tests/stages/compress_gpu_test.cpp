// The compress stage on a CUDA Exec: the checks of stages_test (compress_checks.hpp) with the
// compression, the factorizations and the reductions on the device and the numbers coming back
// through the lane's pinned staging buffer.
#include <gtest/gtest.h>

#include "compress_checks.hpp"

namespace covflow::test {
namespace {

template <class T>
class CompressGpu : public GpuTest {};
using ComplexTypes = ::testing::Types<linalg::cf32, linalg::cf64>;
TYPED_TEST_SUITE(CompressGpu, ComplexTypes);

TYPED_TEST(CompressGpu, FormsMeetTheToleranceAndAutoTakesTheSmaller) {
  compress_checks::check_forms_meet_the_tolerance<TypeParam>(GpuTest::gpu());
}
TYPED_TEST(CompressGpu, JammersOverNoiseAreIdentityPlusLowRank) {
  compress_checks::check_jammers_over_noise_are_identity_plus_low_rank<TypeParam>(GpuTest::gpu());
}
TYPED_TEST(CompressGpu, MvdrThroughTheTlrFactorLosesAtMostATenthOfADecibel) {
  compress_checks::check_mvdr_sinr_loss<TypeParam>(GpuTest::gpu());
}
TYPED_TEST(CompressGpu, NanCellSetsItsStatusAndLeavesTheOthers) {
  compress_checks::check_nan_cell_is_isolated<TypeParam>(GpuTest::gpu());
}
TYPED_TEST(CompressGpu, H2FormIsTheCovarianceOnTheElementPositions) {
  compress_checks::check_h2_form<TypeParam>(GpuTest::gpu());
}
TYPED_TEST(CompressGpu, AutoWithH2MatchesTheCpuLane) {
  compress_checks::check_auto_with_h2_matches_the_cpu_lane<TypeParam>(GpuTest::gpu());
}
TYPED_TEST(CompressGpu, H2NanCellSetsItsStatusAndLeavesTheOthers) {
  compress_checks::check_h2_nan_cell_is_isolated<TypeParam>(GpuTest::gpu());
}
TYPED_TEST(CompressGpu, H2SteadyStateNeitherGrowsTheWorkspaceNorCarriesState) {
  compress_checks::check_h2_steady_state<TypeParam>(GpuTest::gpu());
}
TYPED_TEST(CompressGpu, WrongInputsAreRefused) {
  compress_checks::check_wrong_inputs_are_refused<TypeParam>(GpuTest::gpu());
}

}  // namespace
}  // namespace covflow::test

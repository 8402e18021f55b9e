// The compress stage on a CPU Exec (compress_checks.hpp; stages_gpu_test runs the same checks on
// a CUDA one).
#include <gtest/gtest.h>

#include "compress_checks.hpp"

namespace covflow::test {
namespace {

template <class T>
class CompressCpu : public ::testing::Test {
 protected:
  linalg::Exec exec = linalg::Exec::cpu(2);
};
using ComplexTypes = ::testing::Types<linalg::cf32, linalg::cf64>;
TYPED_TEST_SUITE(CompressCpu, ComplexTypes);

TYPED_TEST(CompressCpu, FormsMeetTheToleranceAndAutoTakesTheSmaller) {
  compress_checks::check_forms_meet_the_tolerance<TypeParam>(this->exec);
}
TYPED_TEST(CompressCpu, JammersOverNoiseAreIdentityPlusLowRank) {
  compress_checks::check_jammers_over_noise_are_identity_plus_low_rank<TypeParam>(this->exec);
}
TYPED_TEST(CompressCpu, MvdrThroughTheTlrFactorLosesAtMostATenthOfADecibel) {
  compress_checks::check_mvdr_sinr_loss<TypeParam>(this->exec);
}
TYPED_TEST(CompressCpu, NanCellSetsItsStatusAndLeavesTheOthers) {
  compress_checks::check_nan_cell_is_isolated<TypeParam>(this->exec);
}
TYPED_TEST(CompressCpu, H2FormIsTheCovarianceOnTheElementPositions) {
  compress_checks::check_h2_form<TypeParam>(this->exec);
}
TYPED_TEST(CompressCpu, AutoWithH2MatchesTheCpuLane) {
  compress_checks::check_auto_with_h2_matches_the_cpu_lane<TypeParam>(this->exec);
}
TYPED_TEST(CompressCpu, H2NanCellSetsItsStatusAndLeavesTheOthers) {
  compress_checks::check_h2_nan_cell_is_isolated<TypeParam>(this->exec);
}
TYPED_TEST(CompressCpu, H2SteadyStateNeitherGrowsTheWorkspaceNorCarriesState) {
  compress_checks::check_h2_steady_state<TypeParam>(this->exec);
}
TYPED_TEST(CompressCpu, WrongInputsAreRefused) {
  compress_checks::check_wrong_inputs_are_refused<TypeParam>(this->exec);
}

}  // namespace
}  // namespace covflow::test

// The adaptive stage on a CUDA Exec: the same checks as stages_test (adaptive_checks.hpp), with
// the ring, the factors and the beams on the device and the results coming back through the
// lane's pinned staging buffer and host function; and the device lane against the CPU lane on
// the default scenario.
#include <gtest/gtest.h>

#include "adaptive_checks.hpp"

namespace covflow::test {
namespace {

template <class T>
class AdaptiveGpu : public GpuTest {};
using ComplexTypes = ::testing::Types<linalg::cf32, linalg::cf64>;
TYPED_TEST_SUITE(AdaptiveGpu, ComplexTypes);

TYPED_TEST(AdaptiveGpu, WeightsMatchAFreshFactorizationOfTheWindow) {
  adaptive_checks::check_weights_match_fresh_factorization<TypeParam>(GpuTest::gpu());
}
TYPED_TEST(AdaptiveGpu, NullsAtLeast30dBTowardTheDefaultJammer) {
  adaptive_checks::check_nulls_toward_the_jammer<TypeParam>(GpuTest::gpu());
}
TYPED_TEST(AdaptiveGpu, BeamPatternsAreZeroDbAtTheLookAndDeepTowardTheJammer) {
  adaptive_checks::check_beam_patterns<TypeParam>(GpuTest::gpu());
}
TYPED_TEST(AdaptiveGpu, RefactorEveryBoundsTheDrift) {
  adaptive_checks::check_refactor_bounds_drift<TypeParam>(GpuTest::gpu());
}
TYPED_TEST(AdaptiveGpu, FailedDowndateIsRecoveredAndCounted) {
  adaptive_checks::check_failed_downdate_is_recovered<TypeParam>(GpuTest::gpu());
}
TYPED_TEST(AdaptiveGpu, NanCellSetsItsStatusAndLeavesTheOthers) {
  adaptive_checks::check_nan_cell_is_isolated<TypeParam>(GpuTest::gpu());
}
TYPED_TEST(AdaptiveGpu, WrongShapesAreFrameErrorsAndCovarianceFramesAreLeftAlone) {
  adaptive_checks::check_wrong_shapes_and_covariance_frames<TypeParam>(GpuTest::gpu());
}

// The default configuration's stage (16 elements, 180 cells, W = 800, update_rank 16,
// refactor_every 50) on both lanes for 12 frames (the window fills at frame 3 and slides
// after): the GPU's weights agree with the CPU's to float rounding times κ, SINR and null depth
// to 0.01 dB, statuses exactly.
TEST_F(GpuTest, AdaptiveDefaultScenarioMatchesTheCpuLane) {
  config::Config c;
  c.scenario.seed = static_cast<std::int64_t>(fresh_seed("adaptive default scenario") >> 1);
  c.pipeline.stages.covariance.enabled = false;
  c.pipeline.stages.subspace.enabled = false;
  linalg::Exec cpu_exec = linalg::Exec::cpu(2);
  adaptive_checks::Harness<linalg::cf64> on_gpu(c, GpuTest::gpu()), on_cpu(c, cpu_exec);
  const std::size_t n = on_gpu.shape.channels, beams = std::size_t(on_gpu.shape.cells) * on_gpu.shape.looks;
  for (std::uint64_t f = 0; f < 12; ++f) {
    on_gpu.run(f);
    on_cpu.run(f);
    const auto& g = on_gpu.slot->slot.results;
    const auto& h = on_cpu.slot->slot.results;
    ASSERT_EQ(g.cells, h.cells);
    for (std::size_t cell = 0; cell < on_gpu.shape.cells; ++cell) EXPECT_EQ(g.cell_status[cell], h.cell_status[cell]);
    for (std::size_t b = 0; b < beams; ++b) {
      double diff = 0, norm = 0;
      for (std::size_t m = 0; m < n; ++m) {
        diff += std::norm(std::complex<double>(g.weights[b * n + m]) - std::complex<double>(h.weights[b * n + m]));
        norm += std::norm(std::complex<double>(h.weights[b * n + m]));
      }
      EXPECT_LE(std::sqrt(diff / norm), 1e-5) << "frame " << f << " beam " << b;
      EXPECT_NEAR(g.sinr_db[b], h.sinr_db[b], 0.01) << "frame " << f << " beam " << b;
      EXPECT_NEAR(g.null_depth_db[b], h.null_depth_db[b], 0.01 * std::abs(h.null_depth_db[b]) + 0.01)
          << "frame " << f << " beam " << b;
    }
  }
  const auto gc = on_gpu.stage->counters(), hc = on_cpu.stage->counters();
  EXPECT_EQ(gc.periodic_refactors, hc.periodic_refactors);
  EXPECT_EQ(gc.recovered_cells, hc.recovered_cells);
  EXPECT_EQ(gc.unrecoverable_cells, 0u);
}

}  // namespace
}  // namespace covflow::test

// The covariance and subspace stages on a CUDA Exec: the same checks as stages_test
// (processing_checks.hpp), with the slot's working arrays on the device and the results coming
// back through the pinned host scratch.
#include <gtest/gtest.h>

#include "processing_checks.hpp"

namespace covflow::test {
namespace {

template <class T>
class ProcessingGpu : public GpuTest {};
using ComplexTypes = ::testing::Types<linalg::cf32, linalg::cf64>;
TYPED_TEST_SUITE(ProcessingGpu, ComplexTypes);

TYPED_TEST(ProcessingGpu, AcceptanceMdlCountsThreeSourcesAndMusicFindsThemWithinHalfADegree) {
  check_acceptance<TypeParam>(GpuTest::gpu(), config::SourceCountRule::mdl, 5);
}
TYPED_TEST(ProcessingGpu, AicCountsAgreeWithTheReferenceCriterion) {
  check_acceptance<TypeParam>(GpuTest::gpu(), config::SourceCountRule::aic, 2);
}
TYPED_TEST(ProcessingGpu, NoiseOnlyCountsNoSourceAndTheSpectrumIsFlat) { check_noise_only<TypeParam>(GpuTest::gpu()); }
TYPED_TEST(ProcessingGpu, RefinementFindsOffGridSourcesOnTheModelCovariance) {
  check_refinement_on_model_covariance<TypeParam>(GpuTest::gpu(), std::is_same_v<TypeParam, linalg::cf32> ? 1e-3 : 1e-5);
}
TYPED_TEST(ProcessingGpu, WindowWithForgettingMatchesTheDirectSum) { check_window_and_forgetting<TypeParam>(GpuTest::gpu()); }
TYPED_TEST(ProcessingGpu, CovarianceFramesPassThrough) { check_pass_through<TypeParam>(GpuTest::gpu()); }
TYPED_TEST(ProcessingGpu, NonFiniteCellIsIsolated) { check_non_finite_cell<TypeParam>(GpuTest::gpu()); }
TYPED_TEST(ProcessingGpu, WrongShapesAreFrameErrors) { check_wrong_shapes<TypeParam>(GpuTest::gpu()); }

// pipeline.stages.subspace.method: svd — gesvj of the snapshots on the device, then the same
// device path as eig.
TYPED_TEST(ProcessingGpu, SvdMethodMdlCountsThreeSourcesAndMusicFindsThemWithinHalfADegree) {
  check_acceptance<TypeParam>(GpuTest::gpu(), config::SourceCountRule::mdl, 3, config::SubspaceMethod::svd);
}
TYPED_TEST(ProcessingGpu, SvdMethodNoiseOnlyCountsNoSourceAndTheSpectrumIsFlat) {
  check_noise_only<TypeParam>(GpuTest::gpu(), config::SubspaceMethod::svd);
}
TYPED_TEST(ProcessingGpu, SvdMethodNonFiniteCellIsIsolated) {
  check_non_finite_cell<TypeParam>(GpuTest::gpu(), config::SubspaceMethod::svd);
}
TYPED_TEST(ProcessingGpu, SvdMethodGivesTheSameCountsAndDoasAsEigOnTheDefaultScenario) {
  check_svd_matches_eig_on_default_scenario<TypeParam>(GpuTest::gpu(), std::is_same_v<TypeParam, linalg::cf32> ? 1e-3 : 1e-4);
}
TYPED_TEST(ProcessingGpu, SvdMethodRefusesCovarianceInputFewSnapshotsAndWindowsNamingTheKey) {
  check_svd_refuses_what_it_cannot_decompose<TypeParam>(GpuTest::gpu());
}
TEST_F(GpuTest, SvdMethodNoiseEigenvaluesStayAccurateNextToA60DbJammerInSinglePrecision) {
  check_svd_keeps_noise_eigenvalues_next_to_a_strong_jammer(GpuTest::gpu());
}

// The whole default chain on the default scenario (16 elements, 180 cells, a 30 dB jammer): the
// results arrive only through the host function, after the synchronisation the runner makes;
// they match the CPU lane's counts and lie within 0.05° of its DOAs.
TEST_F(GpuTest, DefaultScenarioMatchesTheCpuLane) {
  config::Config c;
  c.scenario.seed = static_cast<std::int64_t>(fresh_seed("default scenario") >> 1);
  linalg::Exec cpu_exec = linalg::Exec::cpu(2);
  Chain on_gpu(c, GpuTest::gpu()), on_cpu(c, cpu_exec);
  stages::ScenarioGenerator generator(c.scenario, 0, 2);
  const auto frame = generator.frame(0);
  on_gpu.run(frame);
  on_cpu.run(frame);
  const auto& g = on_gpu.slot->slot.results;
  const auto& h = on_cpu.slot->slot.results;
  ASSERT_EQ(g.cells, h.cells);
  const std::uint32_t s = on_gpu.shape.max_sources;
  int counted_four = 0;
  for (std::uint32_t cell = 0; cell < g.cells; ++cell) {
    EXPECT_EQ(g.cell_status[cell], 0);
    ASSERT_EQ(g.source_count[cell], h.source_count[cell]) << "cell " << cell;
    if (g.source_count[cell] == 4) ++counted_four;
    for (std::uint32_t k = 0; k < s; ++k) {
      const float a = g.doa_deg[cell * s + k], b = h.doa_deg[cell * s + k];
      if (std::isnan(b)) EXPECT_TRUE(std::isnan(a));
      else EXPECT_NEAR(a, b, 0.05) << "cell " << cell << " DOA " << k;
    }
  }
  EXPECT_EQ(counted_four, static_cast<int>(g.cells));  // three sources and the jammer
}

}  // namespace
}  // namespace covflow::test

// The covariance and subspace stages on a CPU Exec (processing_checks.hpp holds the checks, which
// stages_gpu_test runs on the device), and the factory and frame shape.
#include <gtest/gtest.h>

#include "processing_checks.hpp"

namespace covflow::test {
namespace {

linalg::Exec& cpu() {
  static linalg::Exec exec = linalg::Exec::cpu(2);
  return exec;
}

template <class T>
class ProcessingCpu : public ::testing::Test {};
using ComplexTypes = ::testing::Types<linalg::cf32, linalg::cf64>;
TYPED_TEST_SUITE(ProcessingCpu, ComplexTypes);

TYPED_TEST(ProcessingCpu, AcceptanceMdlCountsThreeSourcesAndMusicFindsThemWithinHalfADegree) {
  check_acceptance<TypeParam>(cpu(), config::SourceCountRule::mdl, 3);
}
TYPED_TEST(ProcessingCpu, AicCountsAgreeWithTheReferenceCriterion) {
  check_acceptance<TypeParam>(cpu(), config::SourceCountRule::aic, 1);
}
TYPED_TEST(ProcessingCpu, NoiseOnlyCountsNoSourceAndTheSpectrumIsFlat) { check_noise_only<TypeParam>(cpu()); }
TYPED_TEST(ProcessingCpu, RefinementFindsOffGridSourcesOnTheModelCovariance) {
  check_refinement_on_model_covariance<TypeParam>(cpu(), std::is_same_v<TypeParam, linalg::cf32> ? 1e-3 : 1e-5);
}
TYPED_TEST(ProcessingCpu, WindowWithForgettingMatchesTheDirectSum) { check_window_and_forgetting<TypeParam>(cpu()); }
TYPED_TEST(ProcessingCpu, CovarianceFramesPassThrough) { check_pass_through<TypeParam>(cpu()); }
TYPED_TEST(ProcessingCpu, NonFiniteCellIsIsolated) { check_non_finite_cell<TypeParam>(cpu()); }
TYPED_TEST(ProcessingCpu, WrongShapesAreFrameErrors) { check_wrong_shapes<TypeParam>(cpu()); }

// pipeline.stages.subspace.method: svd — gesvj of the snapshots instead of heev of the covariance.
TYPED_TEST(ProcessingCpu, SvdMethodMdlCountsThreeSourcesAndMusicFindsThemWithinHalfADegree) {
  check_acceptance<TypeParam>(cpu(), config::SourceCountRule::mdl, 2, config::SubspaceMethod::svd);
}
TYPED_TEST(ProcessingCpu, SvdMethodNoiseOnlyCountsNoSourceAndTheSpectrumIsFlat) {
  check_noise_only<TypeParam>(cpu(), config::SubspaceMethod::svd);
}
TYPED_TEST(ProcessingCpu, SvdMethodNonFiniteCellIsIsolated) {
  check_non_finite_cell<TypeParam>(cpu(), config::SubspaceMethod::svd);
}
TYPED_TEST(ProcessingCpu, SvdMethodGivesTheSameCountsAndDoasAsEigOnTheDefaultScenario) {
  check_svd_matches_eig_on_default_scenario<TypeParam>(cpu(), std::is_same_v<TypeParam, linalg::cf32> ? 1e-3 : 1e-4);
}
TYPED_TEST(ProcessingCpu, SvdMethodRefusesCovarianceInputFewSnapshotsAndWindowsNamingTheKey) {
  check_svd_refuses_what_it_cannot_decompose<TypeParam>(cpu());
}
TEST(ProcessingCpuSvd, NoiseEigenvaluesStayAccurateNextToA60DbJammerInSinglePrecision) {
  check_svd_keeps_noise_eigenvalues_next_to_a_strong_jammer(cpu());
}

// Covariance frames the generator makes from the model (scenario.covariance) go through the
// covariance stage (unchanged) into the subspace stage: on the exact model MUSIC finds sources far
// off the 0.5° grid to within rounding, as on check_refinement_on_model_covariance's hand-made
// frames; Wishart draws of K = 200 snapshots are counted and located as sample covariances are.
TYPED_TEST(ProcessingCpu, ModelAndWishartCovarianceFramesGoThroughTheStages) {
  const auto type = std::is_same_v<TypeParam, linalg::cf32> ? config::SampleType::cf32 : config::SampleType::cf64;
  config::Config c = acceptance_config(type, fresh_seed("model covariance frames"), 6);
  c.scenario.sources = {{-40.17, 20.0}, {-20.23, 10.0}, {5.11, 15.0}, {31.37, 10.0}};
  c.scenario.payload = config::ScenarioPayload::covariance;
  for (auto kind : {config::ScenarioCovariance::model, config::ScenarioCovariance::wishart}) {
    c.scenario.covariance = kind;
    Chain chain(c, cpu());
    stages::ScenarioGenerator generator(c.scenario, 0, 2);
    const double tolerance = kind == config::ScenarioCovariance::wishart ? 0.5
                             : std::is_same_v<TypeParam, linalg::cf32> ? 1e-3
                                                                        : 1e-5;
    for (std::uint64_t f = 0; f < 2; ++f) {
      const auto frame = generator.frame(f);
      chain.run(frame);
      const auto expected = replay::payload_as<TypeParam>(frame);
      const auto got = chain.slot->covariance<TypeParam>();
      ASSERT_EQ(std::memcmp(got.data(), expected.data(), expected.size_bytes()), 0) << "frame " << f;
      const auto& r = chain.slot->slot.results;
      for (std::uint32_t cell = 0; cell < chain.shape.cells; ++cell) {
        SCOPED_TRACE(std::string(config::name(kind)) + " frame " + std::to_string(f) + " cell " + std::to_string(cell));
        ASSERT_EQ(r.source_count[cell], 4);
        for (int s = 0; s < 4; ++s)
          EXPECT_NEAR(r.doa_deg[cell * chain.shape.max_sources + s], c.scenario.sources[s].angle_deg, tolerance);
      }
    }
  }
}

// The subspace stage's FFTs need the linear array: the factory refuses another geometry, naming
// the key, as the loader does.
TEST(ProcessingFactory, SubspaceStageRefusesAPlanarOrListedArray) {
  config::Config c;
  c.scenario.geometry = config::ArrayGeometry::planar;
  try {
    stages::make_processing_stages(c);
    ADD_FAILURE() << "no error";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key(), "pipeline.stages.subspace.enabled");
  }
  c.pipeline.stages.subspace.enabled = false;
  EXPECT_EQ(stages::make_processing_stages(c).size(), 2u);  // covariance and adaptive
}

TEST(ProcessingFactory, BuildsTheEnabledStagesInChainOrder) {
  config::Config c;
  c.pipeline.stages.adaptive.enabled = false;  // tests/stages/adaptive_test.cpp covers it
  auto chain = stages::make_processing_stages(c);
  ASSERT_EQ(chain.size(), 2u);
  EXPECT_EQ(chain[0]->name(), "covariance");
  EXPECT_EQ(chain[1]->name(), "subspace");
  auto* subspace = dynamic_cast<stages::SubspaceStage*>(chain[1].get());
  ASSERT_NE(subspace, nullptr);
  EXPECT_EQ(subspace->settings().snapshot_counts, chain[0].get());
  EXPECT_FALSE(subspace->settings().covariance_from_payload);
  EXPECT_EQ(subspace->settings().spacing_wavelengths, c.scenario.spacing_wavelengths);

  c.pipeline.stages.covariance.enabled = false;
  c.pipeline.stages.subspace.degradable = true;
  c.pipeline.stages.subspace.budget_ms = 2.5;
  chain = stages::make_processing_stages(c);
  ASSERT_EQ(chain.size(), 1u);
  EXPECT_EQ(chain[0]->name(), "subspace");
  EXPECT_TRUE(chain[0]->degradable());
  EXPECT_EQ(chain[0]->budget_ms(), 2.5);
  EXPECT_TRUE(dynamic_cast<stages::SubspaceStage*>(chain[0].get())->settings().covariance_from_payload);

  c.pipeline.stages.subspace.enabled = false;
  EXPECT_TRUE(stages::make_processing_stages(c).empty());

  // svd reads the snapshots itself, with or without the covariance stage, and takes its loading.
  c.pipeline.stages.subspace.enabled = true;
  c.pipeline.stages.subspace.method = config::SubspaceMethod::svd;
  c.pipeline.stages.covariance.diagonal_loading = 0.5;
  chain = stages::make_processing_stages(c);
  ASSERT_EQ(chain.size(), 1u);
  auto* svd = dynamic_cast<stages::SubspaceStage*>(chain[0].get());
  ASSERT_NE(svd, nullptr);
  EXPECT_FALSE(svd->settings().covariance_from_payload);
  EXPECT_EQ(svd->settings().diagonal_loading, 0.5);
  EXPECT_EQ(svd->settings().config.method, config::SubspaceMethod::svd);
}

TEST(ProcessingFactory, FrameShapeFollowsTheScenarioAndTheAngleGrid) {
  config::Config c;
  auto shape = stages::frame_shape(c);
  EXPECT_EQ(shape.element_type, replay::ElementType::cf64);
  EXPECT_EQ(shape.channels, 16u);
  EXPECT_EQ(shape.snapshots, 200u);
  EXPECT_EQ(shape.cells, 180u);
  EXPECT_EQ(shape.spectrum_points, 361u);  // −90° … 90° by 0.5°
  c.scenario.element_type = config::SampleType::cf32;
  c.scenario.payload = config::ScenarioPayload::covariance;
  c.pipeline.stages.subspace.angle_grid = {-60.0, 60.0, 0.25};
  shape = stages::frame_shape(c);
  EXPECT_EQ(shape.element_type, replay::ElementType::cf32);
  EXPECT_EQ(shape.snapshots, 0u);
  EXPECT_EQ(shape.spectrum_points, 481u);
  c.pipeline.stages.subspace.enabled = false;
  EXPECT_EQ(stages::frame_shape(c).spectrum_points, 0u);
  // A grid whose step does not divide the span stops before max_deg.
  EXPECT_EQ(stages::angle_grid_points({-10.0, 10.0, 3.0}).points, 7u);
}

TEST(ProcessingFactory, PrepareRefusesAShapeWhoseSpectrumIsNotTheGrid) {
  config::Config c;
  auto chain = stages::make_processing_stages(c);
  auto shape = stages::frame_shape(c);
  shape.spectrum_points = 100;
  EXPECT_THROW(chain[1]->prepare(shape, cpu()), std::invalid_argument);
}

TEST(ProcessingFactory, RunBeforePrepareIsALogicError) {
  config::Config c;
  auto chain = stages::make_processing_stages(c);
  pipeline::FrameSlot slot;
  EXPECT_THROW(chain[0]->run(slot, cpu()), std::logic_error);
  EXPECT_THROW(chain[1]->run(slot, cpu()), std::logic_error);
}

}  // namespace
}  // namespace covflow::test

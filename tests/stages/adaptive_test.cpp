// The adaptive stage on a CPU Exec (adaptive_checks.hpp holds the checks, which stages_gpu_test
// runs on the device), and its wiring by the factory.
#include <gtest/gtest.h>

#include "adaptive_checks.hpp"

namespace covflow::test {
namespace {

linalg::Exec& cpu() {
  static linalg::Exec exec = linalg::Exec::cpu(2);
  return exec;
}

template <class T>
class AdaptiveCpu : public ::testing::Test {};
using ComplexTypes = ::testing::Types<linalg::cf32, linalg::cf64>;
TYPED_TEST_SUITE(AdaptiveCpu, ComplexTypes);

TYPED_TEST(AdaptiveCpu, WeightsMatchAFreshFactorizationOfTheWindow) {
  adaptive_checks::check_weights_match_fresh_factorization<TypeParam>(cpu());
}
TYPED_TEST(AdaptiveCpu, NullsAtLeast30dBTowardTheDefaultJammer) {
  adaptive_checks::check_nulls_toward_the_jammer<TypeParam>(cpu());
}
TYPED_TEST(AdaptiveCpu, RefactorEveryBoundsTheDrift) { adaptive_checks::check_refactor_bounds_drift<TypeParam>(cpu()); }
TYPED_TEST(AdaptiveCpu, FailedDowndateIsRecoveredAndCounted) {
  adaptive_checks::check_failed_downdate_is_recovered<TypeParam>(cpu());
}
TYPED_TEST(AdaptiveCpu, NanCellSetsItsStatusAndLeavesTheOthers) {
  adaptive_checks::check_nan_cell_is_isolated<TypeParam>(cpu());
}
TYPED_TEST(AdaptiveCpu, WrongShapesAreFrameErrorsAndCovarianceFramesAreLeftAlone) {
  adaptive_checks::check_wrong_shapes_and_covariance_frames<TypeParam>(cpu());
}

TEST(AdaptiveFactory, FollowsTheConfiguration) {
  config::Config c;
  auto chain = stages::make_processing_stages(c);
  ASSERT_EQ(chain.size(), 3u);
  auto* adaptive = dynamic_cast<stages::AdaptiveStage*>(chain[2].get());
  ASSERT_NE(adaptive, nullptr);
  EXPECT_EQ(adaptive->name(), "adaptive");
  EXPECT_TRUE(adaptive->degradable());
  EXPECT_TRUE(adaptive->settings().model.has_value());  // ingest.source synth: the scenario is the model
  EXPECT_EQ(adaptive->settings().config.looks_deg, std::vector<double>{5.0});
  EXPECT_EQ(stages::frame_shape(c).looks, 1u);

  c.ingest.source = config::IngestSource::zmq;
  c.pipeline.stages.adaptive.looks_deg = {-10.0, 0.0, 10.0};
  c.pipeline.stages.adaptive.degradable = false;
  chain = stages::make_processing_stages(c);
  adaptive = dynamic_cast<stages::AdaptiveStage*>(chain.back().get());
  ASSERT_NE(adaptive, nullptr);
  EXPECT_FALSE(adaptive->settings().model.has_value());  // live data: no model, SINR and null depth NaN
  EXPECT_FALSE(adaptive->degradable());
  EXPECT_EQ(stages::frame_shape(c).looks, 3u);

  c.pipeline.stages.adaptive.enabled = false;
  EXPECT_EQ(stages::make_processing_stages(c).size(), 2u);
  EXPECT_EQ(stages::frame_shape(c).looks, 0u);
}

TEST(AdaptiveFactory, RefusesSettingsNoFrameCouldUse) {
  stages::AdaptiveSettings s;
  s.config.looks_deg.clear();
  EXPECT_THROW(stages::AdaptiveStage{s}, std::invalid_argument);
  s = {};
  s.config.diagonal_loading = -1.0;
  EXPECT_THROW(stages::AdaptiveStage{s}, std::invalid_argument);
  s = {};
  stages::AdaptiveStage stage(s);
  pipeline::FrameShape shape;
  shape.channels = 8;
  shape.cells = 2;
  shape.snapshots = 4;
  shape.looks = 2;  // the stage has one look
  EXPECT_THROW(stage.prepare(shape, cpu()), std::invalid_argument);
}

// Live data without a model: weights, but NaN SINR and null depth.
TEST(AdaptiveCpuModel, NoModelMeansNanMetricsButWeights) {
  config::Config c = adaptive_checks::small_config<linalg::cf64>(fresh_seed("adaptive no model"));
  c.ingest.source = config::IngestSource::zmq;
  adaptive_checks::Harness<linalg::cf64> h(c, cpu());
  h.run(0);
  h.run(1);
  adaptive_checks::check_weights(h, "frame 1");
  for (std::size_t b = 0; b < std::size_t(h.shape.cells) * h.shape.looks; ++b) {
    EXPECT_TRUE(std::isnan(h.slot->slot.results.sinr_db[b]));
    EXPECT_TRUE(std::isnan(h.slot->slot.results.null_depth_db[b]));
  }
}

}  // namespace
}  // namespace covflow::test

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
TYPED_TEST(AdaptiveCpu, BeamPatternsAreZeroDbAtTheLookAndDeepTowardTheJammer) {
  adaptive_checks::check_beam_patterns<TypeParam>(cpu());
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

  c.pipeline.stages.adaptive.beam_pattern_points = 37;
  EXPECT_EQ(stages::frame_shape(c).beam_pattern_points, 37u);

  c.pipeline.stages.adaptive.enabled = false;
  EXPECT_EQ(stages::make_processing_stages(c).size(), 2u);
  EXPECT_EQ(stages::frame_shape(c).looks, 0u);
  EXPECT_EQ(stages::frame_shape(c).beam_pattern_points, 0u);
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
  shape.looks = 1;
  shape.beam_pattern_points = 5;  // the stage keeps no pattern
  EXPECT_THROW(stage.prepare(shape, cpu()), std::invalid_argument);
  s.config.beam_pattern_points = 1;  // the grid needs -90 and 90
  EXPECT_THROW(stages::AdaptiveStage{s}, std::invalid_argument);
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

// A planar array with elevated emitters and clutter: the beams steer with its geometry (a look is
// an azimuth at elevation 0), and the metrics' model holds every emitter at its own elevation and
// the clutter's scatterers as interference. Once the window is full (W/K = 4 frames): the response
// toward the look is distortionless for the planar steering vector, the published SINR is the
// direct evaluation against the model R_i+n (every emitter but the look's source, clutter
// included) and does not exceed its optimum, and the jammer is nulled.
TEST(AdaptiveCpuModel, PlanarArrayWithClutterSteersWithItsGeometry) {
  using adaptive_checks::cd;
  using adaptive_checks::cl;
  config::Config c = adaptive_checks::small_config<linalg::cf64>(fresh_seed("adaptive planar"));
  c.scenario.geometry = config::ArrayGeometry::planar;
  c.scenario.planar = {3, 4, 0.5, 0.5};
  c.scenario.elements = 12;
  c.scenario.sources = {{5, 10}, {-20, 10, 30}};
  c.scenario.jammers = {{48, 30, 10}};
  c.scenario.clutter = {{.center_deg = -45, .width_deg = 20, .power_db = 20, .step_deg = 1}};
  c.scenario.snapshots = 64;
  c.pipeline.stages.adaptive.window_snapshots = 256;
  c.pipeline.stages.adaptive.update_rank = 8;
  c.pipeline.stages.adaptive.looks_deg = {5.0};
  adaptive_checks::Harness<linalg::cf64> h(c, cpu());
  const std::size_t n = 12;
  config::ScenarioConfig interference = c.scenario;
  interference.sources.erase(interference.sources.begin());
  const std::vector<cd> r_in = stages::model_covariance(interference);
  const std::vector<cd> a = stages::steering_vector(c.scenario, 5.0, 0.0);
  const std::vector<cl> w_opt = adaptive_checks::reference_weights(std::vector<cl>(r_in.begin(), r_in.end()), a);
  long double optimum_power = 0;  // w_optᴴR_i+n·w_opt = 1 / (aᴴR_i+n⁻¹a) for the normalised w_opt
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) optimum_power += (std::conj(w_opt[i]) * cl(r_in[i + j * n]) * w_opt[j]).real();
  const double optimum_db = 10.0 * std::log10(10.0 / static_cast<double>(optimum_power));
  for (std::uint64_t f = 0; f < 6; ++f) {
    h.run(f);
    if (f < 3) continue;
    const auto& r = h.slot->slot.results;
    for (std::size_t cell = 0; cell < h.shape.cells; ++cell) {
      cl response = 0;
      long double power = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const auto wi = r.weights[cell * n + i];
        response += std::conj(cl(wi.real(), wi.imag())) * cl(a[i]);
        for (std::size_t j = 0; j < n; ++j) {
          const auto wj = r.weights[cell * n + j];
          power += (std::conj(cl(wi.real(), wi.imag())) * cl(r_in[i + j * n]) * cl(wj.real(), wj.imag())).real();
        }
      }
      // The weights are published as float: 1e-4 of relative error on the response and the SINR.
      EXPECT_NEAR(static_cast<double>(std::abs(response)), 1.0, 1e-4) << "frame " << f << " cell " << cell;
      const double direct = 10.0 * std::log10(static_cast<double>(10.0L * std::norm(response) / power));
      EXPECT_NEAR(r.sinr_db[cell], direct, 1e-3) << "frame " << f << " cell " << cell;
      EXPECT_LE(r.sinr_db[cell], optimum_db + 1e-3) << "frame " << f << " cell " << cell;
      EXPECT_GE(r.null_depth_db[cell], 25.0) << "frame " << f << " cell " << cell;
    }
    if (f == 5)
      std::cout << "[ info     ] cell 0: null depth " << r.null_depth_db[0] << " dB, SINR " << r.sinr_db[0]
                << " dB (optimum " << optimum_db << " dB)\n";
  }
}

}  // namespace
}  // namespace covflow::test

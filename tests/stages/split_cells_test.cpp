// The runner with the cells of every frame split over CPU lanes (RunnerOptions::stateful_lanes),
// on the real chain that keeps state across frames: the covariance window, the subspace stage and
// the adaptive stage's factors. Each cell's state lives on one lane and sees every frame, so every
// result of every frame is the one a single lane gives, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>

#include "covflow/pipeline/runner.hpp"
#include "covflow/stages/ingest.hpp"
#include "covflow/stages/processing.hpp"
#include "test_support.hpp"

namespace covflow::stages {
namespace {

struct ChainRun {
  std::size_t lanes = 0;
  std::string split_reason;
  pipeline::MetricsSnapshot metrics;
  std::vector<std::uint64_t> sequences;
  std::vector<pipeline::FrameResults> results;
};

ChainRun run_chain(const config::Config& c, std::uint64_t frames, std::size_t lanes) {
  std::vector<linalg::Exec> execs;
  for (std::size_t l = 0; l < lanes; ++l) execs.push_back(linalg::Exec::cpu(1));
  std::vector<linalg::Exec*> exec;
  for (auto& e : execs) exec.push_back(&e);
  pipeline::Metrics metrics;
  ChainRun out;
  std::mutex mutex;
  auto source = scenario_source(c.scenario, frames);
  pipeline::Runner runner(frame_shape(c), make_processing_stages(c), exec,
                          {.budget_ms = 1e6, .queue_depth = 4, .overflow = config::Overflow::block}, metrics,
                          [&](const pipeline::FrameSlot& slot) {
                            std::lock_guard lock(mutex);
                            out.sequences.push_back(slot.sequence);
                            out.results.push_back(slot.results);
                          });
  out.lanes = runner.lane_count();
  out.split_reason = runner.cells_split_reason();
  runner.start(*source);
  runner.wait();
  out.metrics = metrics.snapshot();
  return out;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// The fields of `got` that differ from `want` ("" when none).
std::string differences(const pipeline::FrameResults& want, const pipeline::FrameResults& got) {
  std::string d;
  if (want.cells != got.cells) d += " cells";
  if (!same_bits(want.source_count, got.source_count)) d += " source_count";
  if (!same_bits(want.doa_deg, got.doa_deg)) d += " doa_deg";
  if (!same_bits(want.spectrum_db, got.spectrum_db)) d += " spectrum_db";
  if (!same_bits(want.eigenvalues, got.eigenvalues)) d += " eigenvalues";
  if (!same_bits(want.cell_status, got.cell_status)) d += " cell_status";
  if (!same_bits(want.weights, got.weights)) d += " weights";
  if (!same_bits(want.sinr_db, got.sinr_db)) d += " sinr_db";
  if (!same_bits(want.null_depth_db, got.null_depth_db)) d += " null_depth_db";
  if (!same_bits(want.beam_pattern_db, got.beam_pattern_db)) d += " beam_pattern_db";
  return d;
}

TEST(SplitCells, TheStatefulChainOnSeveralLanesGivesWhatOneLaneGivesBitForBit) {
  config::Config c;
  c.scenario.elements = 6;
  c.scenario.snapshots = 12;
  c.scenario.cells = 5;
  c.scenario.seed = std::int64_t(test::fresh_seed("split cells scenario") >> 1);
  c.pipeline.stages.covariance.window = 3;
  c.pipeline.stages.adaptive.window_snapshots = 36;
  c.pipeline.stages.adaptive.refactor_every = 4;  // the periodic refactorization happens within the run
  c.pipeline.stages.adaptive.beam_pattern_points = 9;
  constexpr std::uint64_t frames = 14;
  const ChainRun one = run_chain(c, frames, 1);
  ASSERT_EQ(one.lanes, 1u);
  ASSERT_EQ(one.results.size(), frames);
  ASSERT_EQ(one.metrics.frames_done, frames);
  for (const std::size_t lanes : {2u, 3u}) {
    SCOPED_TRACE(std::to_string(lanes) + " lanes");
    const ChainRun split = run_chain(c, frames, lanes);
    EXPECT_EQ(split.lanes, lanes);
    EXPECT_NE(split.split_reason.find("keeps state"), std::string::npos) << split.split_reason;
    EXPECT_EQ(split.metrics.frames_done, frames);
    EXPECT_EQ(split.metrics.frames_dropped, 0u);
    ASSERT_EQ(split.sequences, one.sequences);
    for (std::size_t f = 0; f < frames; ++f) {
      EXPECT_EQ(split.results[f].cells, c.scenario.cells) << "frame " << f;
      EXPECT_EQ(differences(one.results[f], split.results[f]), "") << "frame " << f;
    }
  }
  // The results are not trivially equal: the weights are computed (finite) and change over frames.
  EXPECT_TRUE(std::isfinite(one.results.back().weights.front().real()));
  EXPECT_FALSE(same_bits(one.results.front().weights, one.results.back().weights));
}

}  // namespace
}  // namespace covflow::stages

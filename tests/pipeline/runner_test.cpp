// The runner on a CPU lane with fake stages and inputs: every frame accounted for, degradable
// stages skipped exactly when their predicted cost does not fit, stage errors counted without
// stopping the pipeline, late frames, drain and stop, wrong-shape and damaged input.
#include <gtest/gtest.h>

#include <mutex>

#include <fmt/format.h>

#include "covflow/linalg/error.hpp"
#include "covflow/pipeline/runner.hpp"
#include "fakes.hpp"
#include "test_support.hpp"

namespace covflow::pipeline {
namespace {

using namespace std::chrono_literals;
using test::FakeStage;
using test::small_shape;

struct Chain {
  std::vector<std::unique_ptr<Stage>> stages;
  std::vector<FakeStage*> fakes;
  FakeStage& add(std::unique_ptr<FakeStage> stage) {
    fakes.push_back(stage.get());
    stages.push_back(std::move(stage));
    return *fakes.back();
  }
};

// What the completion callback saw.
struct Completed {
  std::mutex mutex;
  std::vector<std::uint64_t> sequences;
  std::vector<std::string> problems;
  std::uint64_t payload_mismatches = 0;
  Runner::Completion callback() {
    return [this](const FrameSlot& slot) {
      std::lock_guard lock(mutex);
      sequences.push_back(slot.sequence);
      problems.push_back(slot.problem);
      if (!test::payload_matches(slot, slot.sequence)) ++payload_mismatches;
    };
  }
};

void expect_accounted(const MetricsSnapshot& s) {
  EXPECT_EQ(s.frames_in, s.frames_done + s.frames_dropped + s.in_flight);
  std::uint64_t by_reason = 0;
  for (const auto& [reason, count] : s.dropped_by_reason) by_reason += count;
  EXPECT_EQ(by_reason, s.frames_dropped);
}

std::vector<replay::Frame> frames(std::uint64_t count) {
  std::vector<replay::Frame> out;
  for (std::uint64_t s = 0; s < count; ++s) out.push_back(test::frame_for(small_shape(), s));
  return out;
}

TEST(Runner, EveryFrameIsDoneInOrderWithItsOwnPayload) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  Chain chain;
  chain.add(std::make_unique<FakeStage>("a"));
  chain.add(std::make_unique<FakeStage>("b", 0us, false, [](FrameSlot& f) {
    f.results.cells = 1;
    f.results.source_count[0] = int(f.sequence % 3);
  }));
  Completed done;
  test::ListInput input(frames(200));
  Runner runner(small_shape(), std::move(chain.stages), exec, {.budget_ms = 1000, .queue_depth = 4, .overflow = Overflow::block},
                metrics, done.callback());
  runner.start(input);
  runner.wait();
  EXPECT_TRUE(runner.finished());
  EXPECT_TRUE(runner.input_ended());
  EXPECT_EQ(runner.in_flight(), 0u);
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.frames_in, 200u);
  EXPECT_EQ(s.frames_done, 200u);
  EXPECT_EQ(s.frames_dropped, 0u);
  EXPECT_EQ(s.end_to_end.count, 200u);
  ASSERT_EQ(done.sequences.size(), 200u);
  for (std::uint64_t i = 0; i < 200; ++i) EXPECT_EQ(done.sequences[i], i);
  EXPECT_EQ(done.payload_mismatches, 0u);
  // Every frame's storage went back to the input for reuse once copied into the pool.
  EXPECT_EQ(input.recycled(), 200u);
  EXPECT_EQ(input.recycled_with_storage(), 200u);
  EXPECT_EQ(chain.fakes[0]->runs(), 200u);
  EXPECT_EQ(s.stages.at(1).name, "b");
  EXPECT_EQ(s.stages.at(1).ran, 200u);
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
  EXPECT_EQ(runner.pool().growths(), 0u);
}

// Paced input (one frame every 60 ms, longer than the chain) so no frame waits in the queue and
// each starts with its whole budget; the slow stage's estimate is learnt on frame 0.
struct DegradeCase {
  double budget_ms;
  std::chrono::microseconds degradable_cost;
  std::chrono::microseconds later_cost;  // a non-degradable stage after it (0: none)
  std::uint32_t reprobe_after;
};

MetricsSnapshot run_degrade_case(const DegradeCase& c, std::uint64_t count, std::vector<StageRecord::Outcome>* outcomes) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  Chain chain;
  chain.add(std::make_unique<FakeStage>("fast"));
  chain.add(std::make_unique<FakeStage>("optional", c.degradable_cost, true));
  if (c.later_cost.count() > 0) chain.add(std::make_unique<FakeStage>("publish", c.later_cost));
  std::mutex mutex;
  test::ListInput input(frames(count), 60ms);
  Runner runner(small_shape(), std::move(chain.stages), exec,
                {.budget_ms = c.budget_ms, .queue_depth = 4, .overflow = Overflow::block, .reprobe_after = c.reprobe_after}, metrics,
                [&](const FrameSlot& slot) {
                  std::lock_guard lock(mutex);
                  outcomes->push_back(slot.stages[1].outcome);
                });
  runner.start(input);
  runner.wait();
  return metrics.snapshot();
}

TEST(Runner, DegradableStageIsSkippedWhenItsPredictedCostExceedsTheBudget) {
  std::vector<StageRecord::Outcome> outcomes;
  const auto s = run_degrade_case({.budget_ms = 15, .degradable_cost = 40ms, .later_cost = 0us, .reprobe_after = 0}, 8, &outcomes);
  expect_accounted(s);
  EXPECT_EQ(s.frames_done, 8u);
  EXPECT_EQ(s.stages.at(1).ran, 1u);  // frame 0: no estimate yet
  EXPECT_EQ(s.stages.at(1).skipped_degraded, 7u);
  EXPECT_GE(s.stages.at(1).predicted_ms, 40.0);
  EXPECT_EQ(s.stages.at(0).skipped_degraded, 0u);  // not degradable: always runs
  EXPECT_EQ(s.stages.at(0).ran, 8u);
  ASSERT_EQ(outcomes.size(), 8u);
  EXPECT_EQ(outcomes[0], StageRecord::Outcome::ran);
  for (std::size_t i = 1; i < 8; ++i) EXPECT_EQ(outcomes[i], StageRecord::Outcome::skipped_degraded) << i;
}

TEST(Runner, DegradableStageRunsWhenItFits) {
  std::vector<StageRecord::Outcome> outcomes;
  const auto s = run_degrade_case({.budget_ms = 40, .degradable_cost = 4ms, .later_cost = 0us, .reprobe_after = 0}, 8, &outcomes);
  EXPECT_EQ(s.stages.at(1).ran, 8u);
  EXPECT_EQ(s.stages.at(1).skipped_degraded, 0u);
}

TEST(Runner, LaterMandatoryStagesAreReservedBeforeADegradableOne) {
  // 4 ms fits a 40 ms budget alone, but not with a 45 ms mandatory stage after it.
  std::vector<StageRecord::Outcome> outcomes;
  const auto s = run_degrade_case({.budget_ms = 40, .degradable_cost = 4ms, .later_cost = 45ms, .reprobe_after = 0}, 6, &outcomes);
  EXPECT_EQ(s.stages.at(1).ran, 1u);
  EXPECT_EQ(s.stages.at(1).skipped_degraded, 5u);
  EXPECT_EQ(s.stages.at(2).ran, 6u);
}

TEST(Runner, ASkippedStageIsProbedAgainAfterReprobeAfterSkips) {
  std::vector<StageRecord::Outcome> outcomes;
  const auto s = run_degrade_case({.budget_ms = 10, .degradable_cost = 20ms, .later_cost = 0us, .reprobe_after = 3}, 10, &outcomes);
  // run, skip ×3, run (probe), skip ×3, run (probe), skip
  EXPECT_EQ(s.stages.at(1).ran, 3u);
  EXPECT_EQ(s.stages.at(1).skipped_degraded, 7u);
  ASSERT_EQ(outcomes.size(), 10u);
  EXPECT_EQ(outcomes[4], StageRecord::Outcome::ran);
  EXPECT_EQ(outcomes[8], StageRecord::Outcome::ran);
}

TEST(Runner, StageErrorsDropTheFrameAreCountedAndTheNextFramesGoOn) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  Chain chain;
  chain.add(std::make_unique<FakeStage>("check", 0us, false, [](FrameSlot& f) {
    if (f.sequence % 5 == 1) throw FrameError("non_finite", "cell 2 has a NaN");
    if (f.sequence % 5 == 3) throw std::runtime_error("cuSOLVER said no");
    if (f.sequence == 7) throw 42;  // not even a std::exception
  }));
  auto& after = chain.add(std::make_unique<FakeStage>("after"));
  Completed done;
  test::ListInput input(frames(20));
  Runner runner(small_shape(), std::move(chain.stages), exec, {.budget_ms = 1000, .queue_depth = 32, .overflow = Overflow::block},
                metrics, done.callback());
  runner.start(input);
  runner.wait();
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.frames_in, 20u);
  EXPECT_EQ(s.dropped_by_reason.at("non_finite"), 4u);   // 1 6 11 16
  EXPECT_EQ(s.dropped_by_reason.at("stage_error"), 5u);  // 3 8 13 18, and 7
  EXPECT_EQ(s.frames_done, 11u);
  EXPECT_EQ(s.stages.at(0).failures, 9u);
  EXPECT_EQ(s.stages.at(0).ran, 11u);
  EXPECT_EQ(after.runs(), 11u);
  // The callback sees every frame that reached the worker, failed ones with their problem.
  ASSERT_EQ(done.sequences.size(), 20u);
  EXPECT_EQ(done.problems[1], "cell 2 has a NaN");
  EXPECT_EQ(done.problems[3], "cuSOLVER said no");
  EXPECT_FALSE(done.problems[7].empty());
  EXPECT_TRUE(done.problems[2].empty());
}

// Each stage that ran on a frame collects it once, right after its run on a CPU lane and before
// the next stage runs; a stage that failed or never ran does not.
TEST(Runner, StagesThatRanCollectTheFrameInChainOrder) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  std::mutex mutex;
  std::vector<std::string> seen;  // "run A 3", "collect A 3", ...
  auto note = [&](const char* what, const char* stage) {
    return [&, what, stage](FrameSlot& f) {
      std::lock_guard lock(mutex);
      seen.push_back(fmt::format("{} {} {}", what, stage, f.sequence));
    };
  };
  Chain chain;
  chain.add(std::make_unique<FakeStage>("A", 0us, false, note("run", "A"))).on_collect(note("collect", "A"));
  chain.add(std::make_unique<FakeStage>("B", 0us, false, [&](FrameSlot& f) {
         note("run", "B")(f);
         if (f.sequence == 1) throw FrameError("non_finite", "frame 1 fails in B");
       })).on_collect(note("collect", "B"));
  auto& c = chain.add(std::make_unique<FakeStage>("C", 0us, false, note("run", "C")));
  c.on_collect(note("collect", "C"));
  test::ListInput input(frames(3));
  Runner runner(small_shape(), std::move(chain.stages), exec, {.budget_ms = 1000, .queue_depth = 8, .overflow = Overflow::block},
                metrics);
  runner.start(input);
  runner.wait();
  const std::vector<std::string> expected = {
      "run A 0", "collect A 0", "run B 0", "collect B 0", "run C 0", "collect C 0",
      "run A 1", "collect A 1", "run B 1",  // B failed: no collect, C never ran
      "run A 2", "collect A 2", "run B 2", "collect B 2", "run C 2", "collect C 2"};
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(c.collects(), 2u);
  expect_accounted(metrics.snapshot());
}

TEST(Runner, FramesDoneAfterTheirDeadlineAreLate) {
  for (const double budget : {1.0, 2000.0}) {
    auto exec = linalg::Exec::cpu(1);
    Metrics metrics;
    Chain chain;
    chain.add(std::make_unique<FakeStage>("slow", 5ms));
    test::ListInput input(frames(6));
    Runner runner(small_shape(), std::move(chain.stages), exec, {.budget_ms = budget, .queue_depth = 8, .overflow = Overflow::block},
                  metrics);
    runner.start(input);
    runner.wait();
    const auto s = metrics.snapshot();
    EXPECT_EQ(s.frames_done, 6u);
    EXPECT_EQ(s.frames_late, budget < 5 ? 6u : 0u) << "budget " << budget;
    EXPECT_GE(s.end_to_end.p50_ms, 5.0 * (1 - 1.0 / 128));
  }
}

TEST(Runner, DrainFinishesEveryQueuedFrame) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  Chain chain;
  chain.add(std::make_unique<FakeStage>("slow", 3ms));
  Completed done;
  test::GeneratedInput input(small_shape(), 0, 0us);  // endless, as fast as it goes
  Runner runner(small_shape(), std::move(chain.stages), exec, {.budget_ms = 1000, .queue_depth = 8, .overflow = Overflow::block},
                metrics, done.callback());
  runner.start(input);
  while (metrics.snapshot().queue_depth < 8) std::this_thread::sleep_for(1ms);
  const auto before = metrics.snapshot();
  runner.drain();
  EXPECT_TRUE(runner.finished());
  EXPECT_FALSE(runner.input_ended());
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.frames_dropped, 0u);  // block: nothing dropped, and drain drops nothing
  EXPECT_EQ(s.frames_done, s.frames_in);
  EXPECT_GE(s.frames_done, before.frames_done + 8);  // the queue that was full was worked off
  EXPECT_EQ(done.sequences.size(), s.frames_done);
  EXPECT_EQ(done.payload_mismatches, 0u);
  EXPECT_EQ(s.frames_in, input.produced());
}

TEST(Runner, StopNowDropsWhatIsQueuedAndCountsIt) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  Chain chain;
  chain.add(std::make_unique<FakeStage>("slow", 20ms));
  test::GeneratedInput input(small_shape(), 0, 0us);
  Runner runner(small_shape(), std::move(chain.stages), exec, {.budget_ms = 1000, .queue_depth = 8, .overflow = Overflow::block},
                metrics);
  runner.start(input);
  while (metrics.snapshot().queue_depth < 8) std::this_thread::sleep_for(1ms);
  const auto start = std::chrono::steady_clock::now();
  runner.stop_now();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1000ms);  // not 8 × 20 ms of work
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_GE(s.dropped_by_reason.at("shutdown"), 7u);
  EXPECT_EQ(s.frames_in, input.produced());
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
}

TEST(Runner, WrongShapeFramesAreDroppedWithReasonAndTheRestGoOn) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  Chain chain;
  chain.add(std::make_unique<FakeStage>("a"));
  const FrameShape shape = small_shape();
  std::vector<replay::Frame> list;
  list.push_back(test::frame_for(shape, 0));
  FrameShape other = shape;
  other.channels = 5;
  list.push_back(test::frame_for(other, 1));  // wrong channel count
  other = shape;
  other.cells = 2;
  list.push_back(test::frame_for(other, 2));  // wrong cell count
  {
    replay::FrameHeader h = test::frame_for(shape, 3).header;  // cf64 where cf32 is configured
    std::vector<std::complex<double>> values(h.element_count());
    list.push_back(replay::make_frame<std::complex<double>>(h, values));
  }
  {
    replay::FrameHeader h = test::frame_for(shape, 4).header;  // covariance of the wrong size
    h.kind = replay::PayloadKind::covariance;
    h.rows = h.cols = 3;
    std::vector<std::complex<float>> values(h.element_count());
    list.push_back(replay::make_frame<std::complex<float>>(h, values));
  }
  {
    replay::FrameHeader h = test::frame_for(shape, 5).header;  // a valid covariance frame
    h.kind = replay::PayloadKind::covariance;
    h.rows = h.cols = shape.channels;
    std::vector<std::complex<float>> values(h.element_count());
    list.push_back(replay::make_frame<std::complex<float>>(h, values));
  }
  {
    auto f = test::frame_for(shape, 6);  // payload shorter than its header says
    f.payload.resize(f.payload.size() - 8);
    list.push_back(std::move(f));
  }
  list.push_back(test::frame_for(shape, 7));
  Completed done;
  test::ListInput input(std::move(list));
  Runner runner(shape, std::move(chain.stages), exec, {.budget_ms = 1000, .queue_depth = 16, .overflow = Overflow::block}, metrics,
                done.callback());
  runner.start(input);
  runner.wait();
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.frames_in, 8u);
  EXPECT_EQ(s.dropped_by_reason.at("shape"), 5u);
  EXPECT_EQ(s.frames_done, 3u);
  EXPECT_EQ(done.sequences, (std::vector<std::uint64_t>{0, 5, 7}));

  // The messages name what was wrong.
  replay::FrameHeader h = test::frame_for(shape, 9).header;
  h.rows = 5;
  const auto problem = frame_shape_problem(shape, h, std::size_t(h.payload_bytes()));
  EXPECT_NE(problem.find("5×8×3"), std::string::npos) << problem;
  EXPECT_NE(problem.find("4×8×3"), std::string::npos) << problem;
  FrameShape covariance_only = shape;
  covariance_only.snapshots = 0;
  EXPECT_NE(frame_shape_problem(covariance_only, test::frame_for(shape, 0).header, 0).find("covariance frames only"), std::string::npos);
}

// A zero-copy input writes each frame into its slot: every frame is done with its own payload,
// the ingest thread never takes the copying path, wrong-shape and oversized frames are dropped
// (reason shape) and their slots go back to the pool — more of them than the pool holds.
TEST(Runner, InPlaceInputFillsTheSlotsAndBadFramesGiveThemBack) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  Chain chain;
  chain.add(std::make_unique<FakeStage>("a"));
  Completed done;
  test::InPlaceInput input(small_shape(), 300, 7, 11);
  Runner runner(small_shape(), std::move(chain.stages), exec, {.budget_ms = 1000, .queue_depth = 4, .overflow = Overflow::block},
                metrics, done.callback());
  runner.start(input);
  runner.wait();
  const auto s = metrics.snapshot();
  expect_accounted(s);
  std::uint64_t bad = 0;
  std::vector<std::uint64_t> good;
  for (std::uint64_t seq = 0; seq < 300; ++seq) {
    if (seq % 7 == 6 || seq % 11 == 10) ++bad;
    else good.push_back(seq);
  }
  ASSERT_GT(bad, runner.pool().capacity());  // a leaked slot would have stalled ingest
  EXPECT_EQ(s.frames_in, 300u);
  EXPECT_EQ(s.dropped_by_reason.at("shape"), bad);
  EXPECT_EQ(s.frames_done, good.size());
  EXPECT_EQ(done.sequences, good);
  EXPECT_EQ(done.payload_mismatches, 0u);
  EXPECT_EQ(input.copied_calls(), 0u);
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
}

TEST(Runner, DamagedInputRecordsAreCountedInAndDropped) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  Chain chain;
  chain.add(std::make_unique<FakeStage>("a"));
  test::GeneratedInput input(small_shape(), 30, 0us, /*rejected_every=*/10);
  Runner runner(small_shape(), std::move(chain.stages), exec, {.budget_ms = 1000, .queue_depth = 64, .overflow = Overflow::block},
                metrics);
  runner.start(input);
  runner.wait();
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.dropped_by_reason.at("rejected_input"), 3u);
  EXPECT_EQ(s.frames_in, 33u);
  EXPECT_EQ(s.frames_done, 30u);
}

TEST(Runner, OverBudgetStageRunsAreCounted) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  Chain chain;
  chain.add(std::make_unique<FakeStage>("slow", 3ms)).with_budget(1.0);
  chain.add(std::make_unique<FakeStage>("quick")).with_budget(1000.0);
  test::ListInput input(frames(5));
  Runner runner(small_shape(), std::move(chain.stages), exec, {.budget_ms = 1000, .queue_depth = 8, .overflow = Overflow::block},
                metrics);
  runner.start(input);
  runner.wait();
  const auto s = metrics.snapshot();
  EXPECT_EQ(s.stages.at(0).over_budget, 5u);
  EXPECT_EQ(s.stages.at(1).over_budget, 0u);
}

TEST(Runner, SlotsAreRaisedToTheMinimum) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  std::vector<std::unique_ptr<Stage>> stages;
  stages.push_back(std::make_unique<FakeStage>("a"));
  const RunnerOptions options{.queue_depth = 5, .slots = 2};
  Runner runner(small_shape(), std::move(stages), exec, options, metrics);
  EXPECT_EQ(runner.pool().capacity(), minimum_slots(options));
  EXPECT_EQ(minimum_slots(options), 5u + 2u + 1u);
  EXPECT_FALSE(runner.running());
  // Several lanes: two per lane (the frame computing and the one uploading), two placers per lane
  // (the automatic count's upper bound), the reorder buffer's three per lane and one.
  EXPECT_EQ(minimum_slots(options, 4), 5u + 8u + 8u + 13u);
}

TEST(Runner, AutomaticPlacersAreOneForOneLaneTwoPerCudaLaneAndOnePerCpuLane) {
  EXPECT_EQ(automatic_placers(1, true), 1u);
  EXPECT_EQ(automatic_placers(1, false), 1u);
  EXPECT_EQ(automatic_placers(4, true), 8u);
  EXPECT_EQ(automatic_placers(3, false), 3u);
}

TEST(Runner, TheInputsArrivalTimeStartsTheFramesLatency) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  Chain chain;
  chain.add(std::make_unique<FakeStage>("a"));
  // Frame 0 arrived 30 ms before the input returned it: its latency and deadline count from then.
  test::TimedInput input(small_shape(), {{.sequence = 0, .arrived_before = 30ms}, {.sequence = 1}});
  std::vector<std::int64_t> latency_ns;
  Runner runner(small_shape(), std::move(chain.stages), exec, {.budget_ms = 20, .queue_depth = 4, .overflow = Overflow::block},
                metrics, [&](const FrameSlot& slot) { latency_ns.push_back(slot.times.done_ns - slot.times.arrival_ns); });
  runner.start(input);
  runner.wait();
  ASSERT_EQ(latency_ns.size(), 2u);
  EXPECT_GE(latency_ns[0], 30'000'000);
  const auto s = metrics.snapshot();
  EXPECT_GE(s.end_to_end.max_ms, 30.0);
  EXPECT_GE(s.frames_late, 1u);  // 30 ms after a 20 ms budget began
}

TEST(Runner, InputLagBacklogPlacingAndSequenceGapsAreReported) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  Chain chain;
  chain.add(std::make_unique<FakeStage>("a"));
  using Item = test::TimedInput::Item;
  // Sequences 10, 11, 14 (12 and 13 missing), 15, then 3 (a step back: a replay's loop, not a gap)
  // and 5 (4 missing). Frames 11 and 14 were due 5 ms before they were taken (late), 10 on time.
  test::TimedInput input(small_shape(), {Item{.sequence = 10, .due_before = 0us, .place = 700us},
                                         Item{.sequence = 11, .due_before = 5ms, .more_waiting = true},
                                         Item{.sequence = 14, .due_before = 5ms, .more_waiting = true},
                                         Item{.sequence = 15},
                                         Item{.sequence = 3},
                                         Item{.sequence = 5}});
  Runner runner(small_shape(), std::move(chain.stages), exec, {.budget_ms = 1000, .queue_depth = 8, .overflow = Overflow::block},
                metrics);
  runner.start(input);
  runner.wait();
  const auto s = metrics.snapshot();
  EXPECT_EQ(s.frames_done, 6u);
  EXPECT_EQ(s.input.taken, 6u);
  EXPECT_EQ(s.input.sequence_gaps, 3u);
  EXPECT_EQ(s.input.behind, 2u);
  EXPECT_EQ(s.input.lag.count, 3u);  // the three frames with a due time
  EXPECT_EQ(s.input.taken_late, 2u);
  EXPECT_GE(s.input.lag.max_ms, 5.0);
  EXPECT_EQ(s.input.place.count, 1u);
  EXPECT_NEAR(s.input.place.max_ms, 0.7, 0.01);
  const auto json = to_json(s);
  EXPECT_EQ(json["input"]["sequence_gaps"], 3);
  EXPECT_EQ(json["input"]["taken_late"], 2);
  EXPECT_EQ(json["input"]["lag"]["count"], 3);
}

TEST(Runner, WarmUpRunsTheChainUncountedThenResetsTheStages) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  Chain chain;
  auto& a = chain.add(std::make_unique<FakeStage>("a", 0us, /*degradable=*/true));
  auto& b = chain.add(std::make_unique<FakeStage>("b")).warming_with(3);
  std::uint64_t completed = 0;
  test::ListInput input(frames(4));
  Runner runner(small_shape(), std::move(chain.stages), exec, {.budget_ms = 1000, .queue_depth = 4, .overflow = Overflow::block},
                metrics, [&](const FrameSlot&) { ++completed; });
  runner.warm_up(test::frame_for(small_shape(), 99));
  // The most any stage asked for, through every stage; reset once each; nothing counted or predicted.
  EXPECT_EQ(a.runs(), 3u);
  EXPECT_EQ(b.runs(), 3u);
  EXPECT_EQ(a.collects(), 3u);
  EXPECT_EQ(a.resets(), 1u);
  EXPECT_EQ(b.resets(), 1u);
  EXPECT_EQ(completed, 0u);
  EXPECT_LT(runner.predicted_ms(0), 0.0);
  auto s = metrics.snapshot();
  EXPECT_EQ(s.frames_in, 0u);
  EXPECT_EQ(s.stages.at(0).ran, 0u);
  // A frame of another shape is refused.
  auto other = small_shape();
  other.cells += 1;
  EXPECT_THROW(runner.warm_up(test::frame_for(other, 0)), std::invalid_argument);

  runner.start(input);
  runner.wait();
  s = metrics.snapshot();
  EXPECT_EQ(s.frames_done, 4u);
  EXPECT_EQ(a.runs(), 7u);
  EXPECT_EQ(completed, 4u);
  EXPECT_THROW(runner.warm_up(test::frame_for(small_shape(), 0)), std::logic_error);
}

TEST(Runner, WarmUpNamesTheStageThatFailed) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  Chain chain;
  chain.add(std::make_unique<FakeStage>("a"));
  chain.add(std::make_unique<FakeStage>("broken", 0us, false, [](FrameSlot&) { throw std::runtime_error("no kernel image"); }));
  Runner runner(small_shape(), std::move(chain.stages), exec, {}, metrics);
  try {
    runner.warm_up(test::frame_for(small_shape(), 0));
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "warm-up: stage broken: no kernel image");
  }
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());  // the slot went back
}

TEST(Runner, AnInputThatReportsItsPlacementIsTakenAsAnyOtherOnACpuLane) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  Chain chain;
  chain.add(std::make_unique<FakeStage>("a"));
  Completed done;
  test::PlacingInput input(small_shape(), 30, 100);
  Runner runner(small_shape(), std::move(chain.stages), exec, {.budget_ms = 1000, .queue_depth = 4, .overflow = Overflow::block},
                metrics, done.callback());
  runner.start(input);
  runner.wait();
  EXPECT_EQ(input.reported(), 0u) << "nothing to upload on a CPU lane";
  const auto s = metrics.snapshot();
  EXPECT_EQ(s.frames_done, 30u);
  EXPECT_EQ(s.dropped_by_reason.at("rejected_input"), 10u);
  EXPECT_EQ(done.payload_mismatches, 0u);
}

TEST(Runner, AStickyDeviceErrorStopsTheRunnerAndSaysWhy) {
  auto exec = linalg::Exec::cpu(1);
  Metrics metrics;
  Chain chain;
  // Frame 5 meets an illegal address (cudaErrorIllegalAddress, 700): every later CUDA call of the
  // process would fail the same way. A non-sticky CUDA error (an invalid argument, 1) on frame 2
  // drops that frame only.
  chain.add(std::make_unique<FakeStage>("gpu", 0us, false, [](FrameSlot& f) {
    if (f.sequence == 2) throw linalg::CudaError("cudaMemcpyAsync: invalid argument", 1);
    if (f.sequence == 5) throw linalg::CudaError("kernel: an illegal memory access was encountered", 700);
  }));
  test::GeneratedInput input(small_shape(), 0, 200us);  // never ends by itself
  Runner runner(small_shape(), std::move(chain.stages), exec, {.budget_ms = 1000, .queue_depth = 4, .overflow = Overflow::block},
                metrics);
  runner.start(input);
  runner.wait();  // ends by itself: the device failure stops it
  EXPECT_NE(runner.device_failure().find("illegal memory access"), std::string::npos) << runner.device_failure();
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.dropped_by_reason.at("stage_error"), 1u);
  EXPECT_EQ(s.dropped_by_reason.at("device_error"), 1u);
  EXPECT_EQ(s.frames_done, 4u);  // 0, 1, 3, 4
  EXPECT_LT(input.produced(), 5u + 4u + 4u) << "input stopped soon after the failure";
}

}  // namespace
}  // namespace covflow::pipeline

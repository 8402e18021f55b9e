// The runner on several CPU lanes (the code path several GPUs take): every frame is finished once
// and passed to the in-sequence stages in the order it came in, whichever lane ran it; a frame held
// on a lane holds later ones back within the budget and is passed on out of order (counted) past
// it; drops on a lane or in the queue never stall the order; a chain that keeps state across frames
// gets one lane; per-lane counters add up to the totals. No assertion depends on timing: where a
// test needs lanes to overlap, the stages wait for one another (latches, counters), not for time.
#include <gtest/gtest.h>

#include <functional>
#include <latch>
#include <map>
#include <mutex>
#include <set>

#include "covflow/pipeline/runner.hpp"
#include "fakes.hpp"

namespace covflow::pipeline {
namespace {

using namespace std::chrono_literals;
using test::FakeStage;
using test::small_shape;

using Lanes = test::CpuLanes;

// The order frames reached a point (the in-sequence stage, the completion callback).
struct Seen {
  std::mutex mutex;
  std::vector<std::uint64_t> sequences;
  std::vector<std::uint32_t> lanes;
  std::uint64_t payload_mismatches = 0;
  void add(const FrameSlot& slot) {
    std::lock_guard lock(mutex);
    sequences.push_back(slot.sequence);
    lanes.push_back(slot.lane);
    if (!test::payload_matches(slot, slot.sequence)) ++payload_mismatches;
  }
  std::size_t size() {
    std::lock_guard lock(mutex);
    return sequences.size();
  }
};

std::vector<replay::Frame> frames(std::uint64_t count) {
  std::vector<replay::Frame> out;
  for (std::uint64_t s = 0; s < count; ++s) out.push_back(test::frame_for(small_shape(), s));
  return out;
}

// With cells split (`split`) every lane counts its own part of a frame: a frame dropped on several
// lanes counts on each, so each lane's drops, not their sum, are bounded by the frames dropped.
void expect_accounted(const MetricsSnapshot& s, bool split = false) {
  EXPECT_EQ(s.frames_in, s.frames_done + s.frames_dropped + s.in_flight);
  std::uint64_t by_reason = 0, lane_dropped = 0;
  for (const auto& [reason, count] : s.dropped_by_reason) by_reason += count;
  EXPECT_EQ(by_reason, s.frames_dropped);
  for (const auto& lane : s.lanes) {
    EXPECT_EQ(lane.taken, lane.finished + lane.dropped) << lane.name;  // the runner ended: nothing left on a lane
    EXPECT_EQ(lane.latency.count, lane.finished) << lane.name;
    if (split) {
      EXPECT_LE(lane.dropped, s.frames_dropped) << lane.name;
    }
    lane_dropped += lane.dropped;
  }
  if (!split) {
    EXPECT_LE(lane_dropped, s.frames_dropped);
  }
}

std::uint64_t finished_on_lanes(const Metrics& metrics) {
  std::uint64_t n = 0;
  for (const auto& lane : metrics.snapshot().lanes) n += lane.finished;
  return n;
}

TEST(Lanes, ThreeLanesFinishEveryFrameOnceAndPublishInOrder) {
  Lanes lanes(3);
  Metrics metrics;
  Seen published, completed;
  std::latch all_lanes_busy(3);  // frames 0-2 wait for one another: each lane holds one
  std::vector<std::unique_ptr<Stage>> chain;
  auto work = std::make_unique<FakeStage>("work", 0us, false, [&](FrameSlot& f) {
    if (f.sequence < 3) all_lanes_busy.arrive_and_wait();
    // Uneven work, so that lanes finish out of order.
    std::this_thread::sleep_for(std::chrono::microseconds(100 * (f.sequence % 4)));
    f.results.cells = 1;
    f.results.source_count[0] = int(f.sequence % 7);
  });
  FakeStage* work_stage = work.get();
  auto publish = std::make_unique<FakeStage>("publish", 0us, false, [&](FrameSlot& f) {
    EXPECT_EQ(f.results.source_count[0], int(f.sequence % 7)) << "frame " << f.sequence << ": results of another frame";
    published.add(f);
  });
  publish->running_in_sequence();
  FakeStage* publish_stage = publish.get();
  chain.push_back(std::move(work));
  chain.push_back(std::move(publish));
  test::ListInput input(frames(240));
  Runner runner(small_shape(), std::move(chain), lanes.pointers(),
                {.budget_ms = 1e6, .queue_depth = 6, .overflow = Overflow::block}, metrics,
                [&](const FrameSlot& slot) { completed.add(slot); });
  EXPECT_EQ(runner.lane_count(), 3u);
  EXPECT_TRUE(runner.single_lane_reason().empty());
  EXPECT_EQ(runner.sequenced_from(), 1u);
  EXPECT_EQ(work_stage->prepares(), 3u);     // once per lane
  EXPECT_EQ(publish_stage->prepares(), 1u);  // the sequencing thread's
  runner.start(input);
  runner.wait();
  EXPECT_TRUE(runner.finished());

  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.frames_in, 240u);
  EXPECT_EQ(s.frames_done, 240u);
  EXPECT_EQ(s.end_to_end.count, 240u);
  ASSERT_EQ(published.sequences.size(), 240u);
  ASSERT_EQ(completed.sequences.size(), 240u);
  for (std::uint64_t i = 0; i < 240; ++i) {
    EXPECT_EQ(published.sequences[i], i);
    EXPECT_EQ(completed.sequences[i], i);
  }
  EXPECT_EQ(published.payload_mismatches, 0u);
  ASSERT_EQ(s.lanes.size(), 3u);
  std::uint64_t taken = 0;
  for (const auto& lane : s.lanes) {
    EXPECT_GE(lane.taken, 1u) << lane.name;
    taken += lane.taken;
  }
  EXPECT_EQ(taken, 240u);
  EXPECT_EQ(s.lanes[0].name, "cpu:0");
  EXPECT_EQ(s.lanes[2].name, "cpu:2");
  EXPECT_EQ(s.reorder.in_order, 240u);
  EXPECT_EQ(s.reorder.out_of_order, 0u);
  EXPECT_EQ(s.reorder.wait.count, 240u);
  EXPECT_EQ(s.stages.at(1).ran, 240u);
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
  EXPECT_EQ(runner.pool().growths(), 0u);
}

TEST(Lanes, AFrameHeldOnALaneHoldsLaterOnesBackWithinItsBudget) {
  Lanes lanes(2);
  Metrics metrics;
  Seen published;
  std::vector<std::unique_ptr<Stage>> chain;
  // Frame 0 stays on its lane until the other lane has finished three frames (1-3), and frames from
  // 4 on wait until frame 0 is published: frames 1-3, finished first, wait in the reorder buffer.
  chain.push_back(std::make_unique<FakeStage>("work", 0us, false, [&](FrameSlot& f) {
    if (f.sequence == 0)
      while (finished_on_lanes(metrics) < 3) std::this_thread::sleep_for(1ms);
    if (f.sequence >= 4)
      while (published.size() == 0) std::this_thread::sleep_for(1ms);
  }));
  auto publish = std::make_unique<FakeStage>("publish", 0us, false, [&](FrameSlot& f) { published.add(f); });
  publish->running_in_sequence();
  chain.push_back(std::move(publish));
  test::ListInput input(frames(20));
  Runner runner(small_shape(), std::move(chain), lanes.pointers(),
                {.budget_ms = 1e6, .queue_depth = 8, .overflow = Overflow::block}, metrics);
  runner.start(input);
  runner.wait();
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.frames_done, 20u);
  ASSERT_EQ(published.sequences.size(), 20u);
  for (std::uint64_t i = 0; i < 20; ++i) EXPECT_EQ(published.sequences[i], i);
  EXPECT_NE(published.lanes[1], published.lanes[0]);  // frame 1 went to the free lane
  EXPECT_EQ(published.lanes[3], published.lanes[1]);
  EXPECT_EQ(s.reorder.out_of_order, 0u);
  // Frames 1-3 waited for frame 0 (frame 3 may come in just after it, and not wait); later, frames
  // the sequencing thread has not reached yet count as held too.
  EXPECT_GE(s.reorder.max_held, 3u);
}

TEST(Lanes, AFrameOutlivingItsBudgetIsPassedOnOutOfOrderAndCounted) {
  Lanes lanes(2);
  Metrics metrics;
  Seen published;
  std::vector<std::unique_ptr<Stage>> chain;
  // Frame 0 stays on its lane until three later frames were published: they wait for it only until
  // their deadlines (5 ms) pass, so they go first, and frame 0 is passed on out of order, late.
  chain.push_back(std::make_unique<FakeStage>("work", 0us, false, [&](FrameSlot& f) {
    if (f.sequence == 0)
      while (published.size() < 3) std::this_thread::sleep_for(1ms);
  }));
  auto publish = std::make_unique<FakeStage>("publish", 0us, false, [&](FrameSlot& f) { published.add(f); });
  publish->running_in_sequence();
  chain.push_back(std::move(publish));
  test::ListInput input(frames(12));
  Runner runner(small_shape(), std::move(chain), lanes.pointers(),
                {.budget_ms = 5, .queue_depth = 8, .overflow = Overflow::block}, metrics);
  runner.start(input);
  runner.wait();
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.frames_done, 12u);
  ASSERT_EQ(published.sequences.size(), 12u);
  std::vector<std::uint64_t> sorted = published.sequences;
  std::sort(sorted.begin(), sorted.end());
  for (std::uint64_t i = 0; i < 12; ++i) EXPECT_EQ(sorted[i], i);  // each once
  EXPECT_NE(published.sequences[0], 0u);
  // Everything but frame 0 in order; frame 0 the one counted out of order.
  std::vector<std::uint64_t> others;
  for (const auto seq : published.sequences)
    if (seq != 0) others.push_back(seq);
  EXPECT_TRUE(std::is_sorted(others.begin(), others.end()));
  EXPECT_EQ(s.reorder.out_of_order, 1u);
  EXPECT_EQ(s.reorder.in_order, 11u);
  EXPECT_GE(s.frames_late, 1u);  // frame 0 at least
}

TEST(Lanes, AFrameDroppedOnALaneDoesNotHoldTheOthers) {
  Lanes lanes(2);
  Metrics metrics;
  Seen published;
  std::vector<std::unique_ptr<Stage>> chain;
  chain.push_back(std::make_unique<FakeStage>("work", 0us, false, [&](FrameSlot& f) {
    if (f.sequence == 4 || f.sequence == 9) throw FrameError("non_finite", "a NaN in cell 2");
  }));
  auto publish = std::make_unique<FakeStage>("publish", 0us, false, [&](FrameSlot& f) { published.add(f); });
  publish->running_in_sequence();
  chain.push_back(std::move(publish));
  test::ListInput input(frames(30));
  Runner runner(small_shape(), std::move(chain), lanes.pointers(),
                {.budget_ms = 1e6, .queue_depth = 8, .overflow = Overflow::block}, metrics);
  runner.start(input);
  runner.wait();
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.frames_done, 28u);
  EXPECT_EQ(s.frames_dropped, 2u);
  EXPECT_EQ(s.dropped_by_reason.at("non_finite"), 2u);
  EXPECT_EQ(s.lanes[0].dropped + s.lanes[1].dropped, 2u);
  ASSERT_EQ(published.sequences.size(), 28u);
  EXPECT_TRUE(std::is_sorted(published.sequences.begin(), published.sequences.end()));
  EXPECT_EQ(std::count(published.sequences.begin(), published.sequences.end(), 4u), 0);
  EXPECT_EQ(s.reorder.out_of_order, 0u);
}

TEST(Lanes, OverflowDropsNeverStallTheOrder) {
  Lanes lanes(3);
  Metrics metrics;
  Seen published;
  std::vector<std::unique_ptr<Stage>> chain;
  chain.push_back(std::make_unique<FakeStage>("work", 2ms));
  auto publish = std::make_unique<FakeStage>("publish", 0us, false, [&](FrameSlot& f) { published.add(f); });
  publish->running_in_sequence();
  chain.push_back(std::move(publish));
  test::GeneratedInput input(small_shape(), 300, 0us);  // far faster than three lanes of 2 ms
  Runner runner(small_shape(), std::move(chain), lanes.pointers(),
                {.budget_ms = 1e6, .queue_depth = 2, .overflow = Overflow::drop_oldest}, metrics);
  runner.start(input);
  runner.wait();
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.frames_in, 300u);
  EXPECT_EQ(s.frames_done, published.sequences.size());
  EXPECT_EQ(s.frames_done + s.dropped_by_reason.count("overflow_drop_oldest") * s.dropped_by_reason.at("overflow_drop_oldest"), 300u);
  EXPECT_TRUE(std::is_sorted(published.sequences.begin(), published.sequences.end()));
  EXPECT_EQ(std::adjacent_find(published.sequences.begin(), published.sequences.end()), published.sequences.end());
  EXPECT_EQ(s.reorder.out_of_order, 0u);
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
}

TEST(Lanes, StopNowWithSeveralLanesAccountsForEveryFrame) {
  for (const bool split : {false, true}) {  // whole frames over the lanes; a stateful chain's cells
    SCOPED_TRACE(split ? "cells split" : "whole frames");
    Lanes lanes(2);
    Metrics metrics;
    std::vector<std::unique_ptr<Stage>> chain;
    chain.push_back(std::make_unique<FakeStage>("work", 3ms));
    if (split) static_cast<FakeStage&>(*chain.back()).keeping_state();
    auto publish = std::make_unique<FakeStage>("publish");
    publish->running_in_sequence();
    chain.push_back(std::move(publish));
    test::GeneratedInput input(small_shape(), 0, 100us);  // never ends
    Runner runner(small_shape(), std::move(chain), lanes.pointers(),
                  {.budget_ms = 1e6, .queue_depth = 8, .overflow = Overflow::block}, metrics);
    EXPECT_EQ(runner.cells_split_reason().empty(), !split);
    runner.start(input);
    while (metrics.snapshot().frames_done < 10) std::this_thread::sleep_for(1ms);
    runner.stop_now();
    EXPECT_TRUE(runner.finished());
    const auto s = metrics.snapshot();
    expect_accounted(s, split);
    EXPECT_EQ(s.in_flight, 0u);
    EXPECT_EQ(runner.in_flight(), 0u);
    EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
  }
}

TEST(Lanes, AChainThatKeepsStateGetsOneLaneWhenToldTo) {
  Lanes lanes(3);
  Metrics metrics;
  Seen completed;
  std::vector<std::unique_ptr<Stage>> chain;
  auto window = std::make_unique<FakeStage>("window");
  window->keeping_state();
  FakeStage* window_stage = window.get();
  chain.push_back(std::move(window));
  auto publish = std::make_unique<FakeStage>("publish");
  publish->running_in_sequence();
  chain.push_back(std::move(publish));
  test::ListInput input(frames(25));
  Runner runner(small_shape(), std::move(chain), lanes.pointers(),
                {.budget_ms = 1e6, .queue_depth = 4, .overflow = Overflow::block,
                 .stateful_lanes = RunnerOptions::StatefulLanes::one_lane},
                metrics, [&](const FrameSlot& slot) { completed.add(slot); });
  EXPECT_EQ(runner.lane_count(), 1u);
  EXPECT_TRUE(runner.cells_split_reason().empty());
  EXPECT_NE(runner.single_lane_reason().find("window"), std::string::npos);
  EXPECT_EQ(runner.sequenced_from(), 2u);  // one lane: the publish stage runs on it
  EXPECT_EQ(window_stage->prepares(), 1u);
  runner.start(input);
  runner.wait();
  const auto s = metrics.snapshot();
  expect_accounted(s);
  ASSERT_EQ(s.lanes.size(), 1u);
  EXPECT_EQ(s.lanes[0].taken, 25u);
  ASSERT_EQ(completed.sequences.size(), 25u);
  EXPECT_TRUE(std::is_sorted(completed.sequences.begin(), completed.sequences.end()));
  EXPECT_EQ(s.reorder.in_order + s.reorder.out_of_order, 0u);  // no reorder buffer with one lane
}

// A stage that keeps state per cell, as the covariance window and the adaptive factors do: each
// cell counts the frames it saw (its state), and its results say which cell of the frame it ran on
// (read back from the payload: frame_for writes element k of frame s as (s, k)), of which frame,
// after how many frames, on which lane.
struct CellCounter {
  static constexpr std::uint32_t kCells = 5;
  std::mutex mutex;
  std::map<std::uint32_t, std::uint64_t> seen;             // by cell of the frame: frames seen
  std::map<std::uint32_t, std::set<std::uint32_t>> lanes;  // by cell of the frame: lanes it ran on
  std::function<void(FrameSlot&)> fail;                    // called first; may throw
  void run(FrameSlot& f) {
    if (fail) fail(f);
    const auto& h = f.header;
    const std::size_t per_cell = std::size_t(h.rows) * h.cols;
    const auto* v = reinterpret_cast<const std::complex<float>*>(f.host.payload.data());
    std::lock_guard lock(mutex);
    for (std::uint32_t c = 0; c < h.count; ++c) {
      const auto cell = static_cast<std::uint32_t>(v[c * per_cell].imag() / float(per_cell));
      f.results.source_count[c] = std::int32_t(cell);
      f.results.doa_deg[2 * c] = v[c * per_cell].real();   // the frame's sequence
      f.results.doa_deg[2 * c + 1] = float(++seen[cell]);  // frames this cell has seen
      f.results.cell_status[c] = std::int32_t(f.lane);
      lanes[cell].insert(f.lane);
    }
    f.results.cells = h.count;
  }
};

FrameShape five_cells() {
  FrameShape shape = small_shape();
  shape.cells = CellCounter::kCells;
  return shape;
}

std::vector<replay::Frame> five_cell_frames(std::uint64_t count) {
  std::vector<replay::Frame> out;
  for (std::uint64_t s = 0; s < count; ++s) out.push_back(test::frame_for(five_cells(), s));
  return out;
}

// The whole frame's results, as the in-sequence stage sees them, are every cell's, each run on its
// own lane after `seen(cell, sequence)` frames (every earlier frame and this one unless told
// otherwise). Returns the frame's problems ("" when none).
std::string split_problems(const FrameSlot& f, std::size_t lanes,
                           const std::function<std::uint64_t(std::uint32_t, std::uint64_t)>& seen = {}) {
  std::string problems;
  if (f.results.cells != CellCounter::kCells) problems += " cells " + std::to_string(f.results.cells);
  for (std::uint32_t c = 0; c < CellCounter::kCells; ++c) {
    std::uint32_t lane = 0;  // lane l runs the cells [l·C/L, (l+1)·C/L)
    while ((lane + 1) * CellCounter::kCells / lanes <= c) ++lane;
    if (f.results.source_count[c] != std::int32_t(c)) problems += " cell " + std::to_string(c) + " holds another's";
    if (f.results.doa_deg[2 * c] != float(f.sequence)) problems += " cell " + std::to_string(c) + " of another frame";
    if (f.results.doa_deg[2 * c + 1] != float(seen ? seen(c, f.sequence) : f.sequence + 1))
      problems += " cell " + std::to_string(c) + " saw " + std::to_string(f.results.doa_deg[2 * c + 1]) + " frames";
    if (f.results.cell_status[c] != std::int32_t(lane)) problems += " cell " + std::to_string(c) + " ran on another lane";
  }
  return problems;
}

TEST(Lanes, AChainThatKeepsStateSplitsEveryFramesCellsOverTheLanes) {
  for (const std::size_t count : {2u, 3u}) {
    SCOPED_TRACE(std::to_string(count) + " lanes");
    Lanes lanes(count);
    Metrics metrics;
    Seen completed;
    CellCounter counter;
    std::vector<std::string> problems;
    std::vector<std::unique_ptr<Stage>> chain;
    auto window = std::make_unique<FakeStage>("window", 0us, false, [&](FrameSlot& f) {
      // Uneven work, so that the lanes finish their parts of a frame in any order.
      std::this_thread::sleep_for(std::chrono::microseconds(50 * ((f.sequence + f.lane) % 3)));
      counter.run(f);
    });
    window->keeping_state();
    FakeStage* window_stage = window.get();
    chain.push_back(std::move(window));
    auto publish = std::make_unique<FakeStage>("publish", 0us, false, [&](FrameSlot& f) {
      if (const std::string p = split_problems(f, count); !p.empty())
        problems.push_back("frame " + std::to_string(f.sequence) + ":" + p);
    });
    publish->running_in_sequence();
    chain.push_back(std::move(publish));
    test::ListInput input(five_cell_frames(60));
    Runner runner(five_cells(), std::move(chain), lanes.pointers(),
                  {.budget_ms = 1e6, .queue_depth = 4, .overflow = Overflow::block}, metrics,
                  [&](const FrameSlot& slot) { completed.add(slot); });
    EXPECT_EQ(runner.lane_count(), count);
    EXPECT_TRUE(runner.single_lane_reason().empty());
    EXPECT_NE(runner.cells_split_reason().find("window"), std::string::npos);
    EXPECT_EQ(window_stage->prepares(), count);
    std::uint32_t covered = 0;
    for (std::size_t l = 0; l < count; ++l) {
      const auto cells = runner.lane_cells(l, CellCounter::kCells);
      EXPECT_EQ(cells.first, covered) << "lane " << l;
      EXPECT_GE(cells.count, 1u) << "lane " << l;
      covered += cells.count;
    }
    EXPECT_EQ(covered, CellCounter::kCells);
    // The warm start runs each lane once, on its own cells of the synthetic frame.
    runner.warm_up(test::frame_for(five_cells(), 0));
    EXPECT_EQ(window_stage->runs(), count);
    for (std::uint32_t c = 0; c < CellCounter::kCells; ++c) EXPECT_EQ(counter.seen[c], 1u) << "warm-up, cell " << c;
    EXPECT_EQ(window_stage->resets(), count);
    counter.seen.clear();  // as the stage's reset() would
    counter.lanes.clear();
    problems.clear();  // the in-sequence stage's warm-up frame holds lane 0's cells only (each lane warms up alone)
    runner.start(input);
    runner.wait();
    const auto s = metrics.snapshot();
    expect_accounted(s);
    EXPECT_EQ(s.frames_done, 60u);
    EXPECT_EQ(s.frames_dropped, 0u);
    EXPECT_EQ(problems, std::vector<std::string>{});
    ASSERT_EQ(completed.sequences.size(), 60u);
    EXPECT_TRUE(std::is_sorted(completed.sequences.begin(), completed.sequences.end()));
    EXPECT_EQ(completed.payload_mismatches, 0u);
    ASSERT_EQ(s.lanes.size(), count);
    for (const auto& lane : s.lanes) EXPECT_EQ(lane.taken, 60u) << lane.name << ": every lane takes every frame";
    EXPECT_EQ(window_stage->runs(), 61u * count);  // with the warm-up
    for (std::uint32_t c = 0; c < CellCounter::kCells; ++c) {
      EXPECT_EQ(counter.seen[c], 60u) << "cell " << c;
      EXPECT_EQ(counter.lanes[c].size(), 1u) << "cell " << c << " ran on several lanes";
    }
    EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
  }
}

TEST(Lanes, APartThatFailsDropsItsFrameOnceAndTheOthersGoOn) {
  Lanes lanes(2);
  Metrics metrics;
  Seen completed;
  CellCounter counter;
  // Lane 0 runs frame 7 unless it takes it after lane 1 failed it (it then skips it): which one
  // happened decides what lane 0's cells have seen after it.
  std::atomic<bool> lane0_ran_7{false};
  counter.fail = [&](FrameSlot& f) {
    if (f.sequence == 7 && f.lane == 0) lane0_ran_7 = true;
    if (f.sequence == 7 && f.lane == 1) throw FrameError("non_finite", "cell 3 of frame 7 is NaN");
  };
  std::vector<std::string> problems, failures;
  std::mutex failures_mutex;
  std::vector<std::unique_ptr<Stage>> chain;
  auto window = std::make_unique<FakeStage>("window", 0us, false, [&](FrameSlot& f) { counter.run(f); });
  window->keeping_state();
  chain.push_back(std::move(window));
  auto publish = std::make_unique<FakeStage>("publish", 0us, false, [&](FrameSlot& f) {
    // After frame 7, lane 1's cells (2 to 4) have seen one frame fewer: frame 7 failed there before
    // its state changed; lane 0's too if it skipped frame 7.
    const std::string p = split_problems(f, 2, [&](std::uint32_t cell, std::uint64_t seq) {
      return seq > 7 && (cell >= 2 || !lane0_ran_7.load()) ? seq : seq + 1;
    });
    if (!p.empty()) problems.push_back("frame " + std::to_string(f.sequence) + ":" + p);
  });
  publish->running_in_sequence();
  chain.push_back(std::move(publish));
  test::ListInput input(five_cell_frames(20));
  Runner runner(five_cells(), std::move(chain), lanes.pointers(),
                {.budget_ms = 1e6, .queue_depth = 4, .overflow = Overflow::block}, metrics, [&](const FrameSlot& slot) {
                  completed.add(slot);
                  std::lock_guard lock(failures_mutex);
                  if (!slot.problem.empty()) failures.push_back(std::to_string(slot.sequence) + ": " + slot.problem);
                });
  runner.start(input);
  runner.wait();
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.frames_done, 19u);
  EXPECT_EQ(s.frames_dropped, 1u);
  EXPECT_EQ(s.dropped_by_reason.at("non_finite"), 1u);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].find("7: cell 3 of frame 7 is NaN"), std::string::npos) << failures[0];
  EXPECT_EQ(problems, std::vector<std::string>{});
  ASSERT_EQ(completed.sequences.size(), 20u);  // the failed frame reaches the callback too, with its problem
  EXPECT_EQ(s.lanes[1].dropped, 1u);
  EXPECT_EQ(s.lanes[0].dropped, 0u);
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
}

TEST(Lanes, SplitFramesEvictedFromOneLanesQueueLeaveOnceAndTheRestKeepTheirOrder) {
  Lanes lanes(2);
  Metrics metrics;
  Seen published, completed;
  std::atomic<bool> release{false};
  std::vector<std::unique_ptr<Stage>> chain;
  auto window = std::make_unique<FakeStage>("window", 0us, false, [&](FrameSlot& f) {
    // Lane 1 holds its first part until ingest has given it more frames than its queue holds.
    if (f.lane == 1 && f.sequence == 0)
      while (!release.load()) std::this_thread::sleep_for(1ms);
    f.results.cells = f.header.count;
  });
  window->keeping_state();
  chain.push_back(std::move(window));
  auto publish = std::make_unique<FakeStage>("publish", 0us, false, [&](FrameSlot& f) { published.add(f); });
  publish->running_in_sequence();
  chain.push_back(std::move(publish));
  test::ListInput input(frames(30));
  Runner runner(small_shape(), std::move(chain), lanes.pointers(),
                {.budget_ms = 1e6, .queue_depth = 2, .overflow = Overflow::drop_oldest}, metrics,
                [&](const FrameSlot& slot) { completed.add(slot); });
  runner.start(input);
  while (!input.ended()) std::this_thread::sleep_for(1ms);  // every frame is in, most evicted from lane 1's queue
  release = true;
  runner.wait();
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.frames_in, 30u);
  EXPECT_GT(s.dropped_by_reason.at("overflow_drop_oldest"), 0u);
  EXPECT_EQ(s.frames_done + s.frames_dropped, 30u);
  EXPECT_EQ(published.sequences.size(), s.frames_done);
  EXPECT_TRUE(std::is_sorted(published.sequences.begin(), published.sequences.end()));
  EXPECT_EQ(std::set<std::uint64_t>(published.sequences.begin(), published.sequences.end()).size(), published.sequences.size());
  EXPECT_EQ(published.payload_mismatches, 0u);
  EXPECT_EQ(runner.in_flight(), 0u);
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
}

TEST(Lanes, WarmUpRunsEveryLaneAndResetsItsState) {
  Lanes lanes(2);
  Metrics metrics;
  std::vector<std::unique_ptr<Stage>> chain;
  auto work = std::make_unique<FakeStage>("work");
  work->warming_with(2);
  FakeStage* work_stage = work.get();
  chain.push_back(std::move(work));
  auto publish = std::make_unique<FakeStage>("publish");
  publish->running_in_sequence();
  FakeStage* publish_stage = publish.get();
  chain.push_back(std::move(publish));
  Runner runner(small_shape(), std::move(chain), lanes.pointers(), {.budget_ms = 1e6, .queue_depth = 4}, metrics);
  runner.warm_up(test::frame_for(small_shape(), 0));
  EXPECT_EQ(work_stage->runs(), 4u);     // two rounds on each lane
  EXPECT_EQ(work_stage->resets(), 2u);   // each lane forgets the warm-up
  EXPECT_EQ(publish_stage->runs(), 2u);  // on the first lane's rounds only
  EXPECT_EQ(publish_stage->resets(), 1u);
  EXPECT_EQ(metrics.snapshot().frames_in, 0u);
}

TEST(Lanes, NoLaneIsRefused) {
  Metrics metrics;
  std::vector<std::unique_ptr<Stage>> chain;
  chain.push_back(std::make_unique<FakeStage>("work"));
  EXPECT_THROW(Runner(small_shape(), std::move(chain), std::vector<linalg::Exec*>{}, {}, metrics), std::invalid_argument);
}

}  // namespace
}  // namespace covflow::pipeline

// The runner with an input that places several frames at once (FrameInput::concurrent_places):
// the ingest thread claims frames in order and the runner's placing threads place their payloads
// at the same time, each into its own slot; frames still enter the queue in claim order (their
// `order`), a refused payload is counted in and dropped (rejected_input) without holding the
// others, a payload no slot holds is refused by its shape unplaced, and stopping accounts for every
// frame. No assertion depends on timing: where placements must overlap, the first waits for the
// second to begin (a test that ran them one at a time would wait forever, so it gives up after a
// generous time and fails).
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "covflow/pipeline/runner.hpp"
#include "fakes.hpp"

namespace covflow::pipeline {
namespace {

using namespace std::chrono_literals;
using test::FakeStage;
using test::small_shape;

using Lanes = test::CpuLanes;

// Frames 0 … count−1 of small_shape(), claimed in order and placed by whoever calls place().
// Frame 1's placement begins only once frame 0's has, and frame 0's waits until frame 1's has
// finished: the two overlap, frame 1 is placed first and must still be admitted after frame 0. Sequences in `refuse` are refused
// when placed; `oversize` gets a header whose payload no slot holds. It also serves next_into()
// (one at a time) for a runner that places on its ingest thread.
class ClaimingInput final : public FrameInput {
 public:
  ClaimingInput(std::uint64_t count, std::size_t places, std::set<std::uint64_t> refuse = {},
                std::optional<std::uint64_t> oversize = std::nullopt, bool wait_for_second = true)
      : count_(count), places_(places), refuse_(std::move(refuse)), oversize_(oversize),
        wait_for_second_(wait_for_second) {}

  std::optional<replay::Frame> next(std::chrono::milliseconds) override { return std::nullopt; }
  bool fills_in_place() const override { return true; }
  std::optional<replay::FrameHeader> next_into(std::chrono::milliseconds wait, std::span<std::byte> payload) override {
    auto claimed = claim(wait);
    if (!claimed) return std::nullopt;
    if (claimed->header.payload_bytes() <= payload.size()) {
      const replay::Frame f = test::frame_for(small_shape(), claimed->header.sequence);
      std::memcpy(payload.data(), f.payload.data(), f.payload.size());
    }
    ++serial_places_;
    return claimed->header;
  }
  std::size_t concurrent_places() const override { return places_; }
  std::optional<Claim> claim(std::chrono::milliseconds) override {
    if (ended()) return std::nullopt;
    const std::uint64_t seq = claimed_++;
    replay::FrameHeader h = test::frame_for(small_shape(), seq).header;
    if (oversize_ && seq == *oversize_) h.count = 1u << 20;  // far more cells than a slot holds
    InputTiming timing;
    if (due_first_ns_ > 0) timing.arrival_ns = timing.due_ns = due_first_ns_ + std::int64_t(seq) * due_step_ns_;
    return Claim{.header = h, .timing = timing, .token = seq};
  }
  // Frame k is due at first_ns + k·step_ns on the steady clock (claimed at once, ahead of that).
  void due_from(std::int64_t first_ns, std::int64_t step_ns) {
    due_first_ns_ = first_ns;
    due_step_ns_ = step_ns;
  }
  std::string place(const Claim& claimed, std::span<std::byte> payload, PlacementObserver*) override {
    const std::uint64_t seq = claimed.token;
    {
      std::unique_lock lock(mutex_);
      ++placing_;
      most_at_once_ = std::max(most_at_once_, placing_);
      if (seq == 0) first_begun_ = true;
      if (seq == 1) second_begun_ = true;
      changed_.notify_all();
      // Frame 1 begins only once frame 0 has (so the two are placed at the same time), and frame 0
      // ends only once frame 1 has: a runner placing one frame at a time would wait here forever.
      if (seq == 1 && wait_for_second_ && !changed_.wait_for(lock, 60s, [&] { return first_begun_; })) {
        --placing_;
        return "frame 0 was never placed while frame 1 was (placements do not overlap)";
      }
      if (seq == 0 && wait_for_second_ && !changed_.wait_for(lock, 60s, [&] { return second_begun_ && second_done_; })) {
        --placing_;
        return "frame 1 was never placed while frame 0 was (placements do not overlap)";
      }
    }
    const replay::Frame f = test::frame_for(small_shape(), seq);
    std::memcpy(payload.data(), f.payload.data(), f.payload.size());
    std::lock_guard lock(mutex_);
    --placing_;
    ++placed_;
    if (seq == 1) second_done_ = true;
    changed_.notify_all();
    if (refuse_.contains(seq)) return "fake damage";
    return {};
  }
  bool ended() const override { return count_ != 0 && claimed_.load() >= count_; }
  std::string describe() const override { return "claiming"; }

  std::size_t most_at_once() const {
    std::lock_guard lock(mutex_);
    return most_at_once_;
  }
  std::uint64_t placed() const {
    std::lock_guard lock(mutex_);
    return placed_;
  }
  std::uint64_t serial_places() const { return serial_places_.load(); }

 private:
  std::uint64_t count_;
  std::size_t places_;
  std::set<std::uint64_t> refuse_;
  std::optional<std::uint64_t> oversize_;
  bool wait_for_second_;
  std::atomic<std::uint64_t> claimed_{0}, serial_places_{0};
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t placing_ = 0, most_at_once_ = 0;
  std::uint64_t placed_ = 0;
  bool first_begun_ = false, second_begun_ = false, second_done_ = false;
  std::int64_t due_first_ns_ = 0, due_step_ns_ = 0;
};

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// What the lanes saw: each frame's order (the queue's), and whether its payload was its own.
struct Seen {
  std::mutex mutex;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> sequence_order;
  std::uint64_t mismatches = 0;
  void add(const FrameSlot& slot) {
    std::lock_guard lock(mutex);
    sequence_order.emplace_back(slot.sequence, slot.order);
    if (!test::payload_matches(slot, slot.sequence)) ++mismatches;
  }
};

std::vector<std::unique_ptr<Stage>> chain_into(Seen& seen, std::vector<std::uint64_t>& published) {
  std::vector<std::unique_ptr<Stage>> chain;
  chain.push_back(std::make_unique<FakeStage>("work", 0us, false, [&](FrameSlot& f) { seen.add(f); }));
  auto publish = std::make_unique<FakeStage>("publish", 0us, false, [&](FrameSlot& f) { published.push_back(f.sequence); });
  publish->running_in_sequence();
  chain.push_back(std::move(publish));
  return chain;
}

// The lanes saw `frames` frames, each with its own payload, and the queue's order follows the
// claims (sequence order): frame 1, placed first, still came after frame 0.
void expect_in_claim_order(Seen& seen, std::size_t frames) {
  std::sort(seen.sequence_order.begin(), seen.sequence_order.end());
  ASSERT_EQ(seen.sequence_order.size(), frames);
  for (std::size_t k = 1; k < seen.sequence_order.size(); ++k)
    EXPECT_LT(seen.sequence_order[k - 1].second, seen.sequence_order[k].second) << "frame " << seen.sequence_order[k].first;
  EXPECT_EQ(seen.mismatches, 0u);
}

void expect_accounted(const MetricsSnapshot& s) {
  EXPECT_EQ(s.frames_in, s.frames_done + s.frames_dropped + s.in_flight);
  std::uint64_t by_reason = 0;
  for (const auto& [reason, count] : s.dropped_by_reason) by_reason += count;
  EXPECT_EQ(by_reason, s.frames_dropped);
}

TEST(Placers, ClaimedFramesArePlacedAtOnceAndEnterInClaimOrder) {
  Lanes lanes(3);
  Metrics metrics;
  Seen seen;
  std::vector<std::uint64_t> published;
  ClaimingInput input(200, 4, {5, 9, 150});
  Runner runner(small_shape(), chain_into(seen, published), lanes.pointers(),
                {.budget_ms = 1e6, .queue_depth = 6, .overflow = Overflow::block}, metrics);
  runner.start(input);
  runner.wait();
  EXPECT_EQ(runner.placers(), 3u);  // one per lane, fewer than the input offers
  EXPECT_EQ(input.serial_places(), 0u);
  EXPECT_GE(input.most_at_once(), 2u);
  EXPECT_LE(input.most_at_once(), 3u);
  EXPECT_EQ(input.placed(), 200u);

  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.frames_in, 200u);
  EXPECT_EQ(s.frames_done, 197u);
  EXPECT_EQ(s.dropped_by_reason.at(std::string(drop_reason::rejected_input)), 3u);
  EXPECT_EQ(s.input.taken, 197u);
  expect_in_claim_order(seen, 197);
  ASSERT_EQ(published.size(), 197u);
  std::vector<std::uint64_t> expected;
  for (std::uint64_t q = 0; q < 200; ++q)
    if (q != 5 && q != 9 && q != 150) expected.push_back(q);
  EXPECT_EQ(published, expected);
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
}

// RunnerOptions::LaneChoice::when_claimed (automatic on CUDA lanes; asked for here on CPU lanes,
// which have no GPU to upload to — the routing and its accounting are the same): each frame is
// given its lane as it is claimed and waits in that lane's own queue; frames still enter in claim
// order and come out in sequence order, each on the lane it was routed to. The first three claims
// go to three idle lanes in turn, so every lane works.
TEST(Placers, FramesRoutedAsClaimedRunOnTheirLaneInClaimOrder) {
  Lanes lanes(3);
  Metrics metrics;
  Seen seen;
  std::vector<std::uint64_t> published;
  std::atomic<std::uint64_t> elsewhere{0};
  ClaimingInput input(200, 4, {5, 9, 150});
  auto chain = chain_into(seen, published);
  chain.insert(chain.begin(), std::make_unique<FakeStage>("where", 0us, false, [&](FrameSlot& f) {
    if (f.routed_lane != std::int32_t(f.lane) || f.device_set != -1) ++elsewhere;
  }));
  RunnerOptions options{.budget_ms = 1e6, .queue_depth = 6, .overflow = Overflow::block};
  options.lane_choice = RunnerOptions::LaneChoice::when_claimed;
  Runner runner(small_shape(), std::move(chain), lanes.pointers(), options, metrics);
  runner.start(input);
  runner.wait();
  EXPECT_EQ(runner.placers(), 3u);
  EXPECT_EQ(input.placed(), 200u);
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.frames_done, 197u);
  EXPECT_EQ(s.dropped_by_reason.at(std::string(drop_reason::rejected_input)), 3u);
  EXPECT_EQ(elsewhere.load(), 0u) << "a frame ran on another lane than the one it was routed to";
  ASSERT_EQ(s.lanes.size(), 3u);
  for (const auto& lane : s.lanes) EXPECT_GT(lane.taken, 0u) << lane.name;
  EXPECT_EQ(s.queue_capacity, 6u);  // ⌈6 / 3⌉ per lane
  expect_in_claim_order(seen, 197);
  ASSERT_EQ(published.size(), 197u);
  for (std::size_t k = 1; k < published.size(); ++k) EXPECT_LT(published[k - 1], published[k]);
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
}

// Routed frames under drop_oldest with slow lanes: a lane's own queue overflows (its oldest frame
// dropped, counted), and stopping at once drops what the lanes' queues hold; every frame is
// accounted for and every slot comes back.
TEST(Placers, RoutedFramesOverflowTheirLaneQueueAndStopAccountsForEveryFrame) {
  Lanes lanes(2);
  Metrics metrics;
  ClaimingInput input(0, 2, {}, std::nullopt, false);  // never ends, as fast as it is claimed
  std::atomic<std::uint64_t> worked{0};
  std::vector<std::unique_ptr<Stage>> chain;
  chain.push_back(std::make_unique<FakeStage>("work", 2ms, false, [&](FrameSlot&) { ++worked; }));
  RunnerOptions options{.budget_ms = 1e6, .queue_depth = 2, .overflow = Overflow::drop_oldest};
  options.lane_choice = RunnerOptions::LaneChoice::when_claimed;
  Runner runner(small_shape(), std::move(chain), lanes.pointers(), options, metrics);
  runner.start(input);
  while (worked.load() < 20 || metrics.snapshot().frames_dropped == 0) std::this_thread::sleep_for(1ms);
  runner.stop_now();
  EXPECT_TRUE(runner.finished());
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_GT(s.dropped_by_reason.at(std::string(drop_reason::overflow_drop_oldest)), 0u);
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
}

TEST(Placers, APayloadNoSlotHoldsIsRefusedByItsShapeUnplaced) {
  Lanes lanes(2);
  Metrics metrics;
  Seen seen;
  std::vector<std::uint64_t> published;
  ClaimingInput input(40, 2, {}, 7);
  Runner runner(small_shape(), chain_into(seen, published), lanes.pointers(),
                {.budget_ms = 1e6, .queue_depth = 4, .overflow = Overflow::block}, metrics);
  runner.start(input);
  runner.wait();
  EXPECT_EQ(runner.placers(), 2u);
  EXPECT_EQ(input.placed(), 39u);  // frame 7 was never placed
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.frames_in, 40u);
  EXPECT_EQ(s.frames_done, 39u);
  EXPECT_EQ(s.dropped_by_reason.at(std::string(drop_reason::shape)), 1u);
  EXPECT_EQ(published.size(), 39u);
  EXPECT_EQ(seen.mismatches, 0u);
}

TEST(Placers, OneLaneOrOnePlacerPlacesOnTheIngestThread) {
  for (const std::size_t lane_count : {1u, 3u}) {
    Lanes lanes(lane_count);
    Metrics metrics;
    Seen seen;
    std::vector<std::uint64_t> published;
    ClaimingInput input(30, 4, {}, std::nullopt, false);
    RunnerOptions options{.budget_ms = 1e6, .queue_depth = 4, .overflow = Overflow::block};
    if (lane_count > 1) options.placers = 1;  // asked for; one lane picks it by itself
    Runner runner(small_shape(), chain_into(seen, published), lanes.pointers(), options, metrics);
    runner.start(input);
    runner.wait();
    EXPECT_EQ(runner.placers(), 1u) << lane_count << " lanes";
    EXPECT_EQ(input.serial_places(), 30u) << lane_count << " lanes";
    EXPECT_EQ(input.placed(), 0u);
    EXPECT_EQ(metrics.snapshot().frames_done, 30u);
    EXPECT_EQ(seen.mismatches, 0u);
  }
}

TEST(Placers, StopNowWhilePlacingAccountsForEveryFrame) {
  Lanes lanes(2);
  Metrics metrics;
  Seen seen;
  std::vector<std::uint64_t> published;
  ClaimingInput input(0, 2, {}, std::nullopt, false);  // never ends
  std::atomic<std::uint64_t> worked{0};
  std::vector<std::unique_ptr<Stage>> chain;
  chain.push_back(std::make_unique<FakeStage>("work", 200us, false, [&](FrameSlot&) { ++worked; }));
  Runner runner(small_shape(), std::move(chain), lanes.pointers(),
                {.budget_ms = 1e6, .queue_depth = 4, .overflow = Overflow::drop_oldest}, metrics);
  runner.start(input);
  while (worked.load() < 50) std::this_thread::sleep_for(1ms);
  runner.stop_now();
  EXPECT_TRUE(runner.finished());
  const auto s = metrics.snapshot();
  expect_accounted(s);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_GE(s.frames_done, 50u);
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
}

TEST(Placers, AFrameClaimedAheadOfItsDueTimeIsAdmittedWhenDue) {
  Lanes lanes(2);
  Metrics metrics;
  ClaimingInput input(12, 2, {}, std::nullopt, false);
  const std::int64_t first = steady_ns() + 20'000'000;
  input.due_from(first, 2'000'000);
  std::mutex mutex;
  std::vector<std::pair<std::uint64_t, std::int64_t>> ran;  // sequence, when its stage ran
  std::vector<std::unique_ptr<Stage>> chain;
  chain.push_back(std::make_unique<FakeStage>("work", 0us, false, [&](FrameSlot& f) {
    std::lock_guard lock(mutex);
    ran.emplace_back(f.sequence, steady_ns());
    EXPECT_EQ(f.times.arrival_ns, first + std::int64_t(f.sequence) * 2'000'000) << "frame " << f.sequence;
  }));
  Runner runner(small_shape(), std::move(chain), lanes.pointers(), {.budget_ms = 1e6, .queue_depth = 4}, metrics);
  runner.start(input);
  runner.wait();
  ASSERT_EQ(ran.size(), 12u);
  for (const auto& [seq, at] : ran) EXPECT_GE(at, first + std::int64_t(seq) * 2'000'000) << "frame " << seq << " ran before it was due";
  const auto s = metrics.snapshot();
  EXPECT_EQ(s.frames_done, 12u);
  EXPECT_EQ(s.input.lag.count, 12u);
}

TEST(Placers, DrainGivesBackFramesClaimedAheadAndNotYetDueUncounted) {
  Lanes lanes(2);
  Metrics metrics;
  ClaimingInput input(0, 2, {}, std::nullopt, false);
  input.due_from(steady_ns() + 3600'000'000'000, 1'000'000);  // an hour from now
  std::vector<std::unique_ptr<Stage>> chain;
  chain.push_back(std::make_unique<FakeStage>("work", 0us, false));
  Runner runner(small_shape(), std::move(chain), lanes.pointers(), {.budget_ms = 1e6, .queue_depth = 4}, metrics);
  runner.start(input);
  while (input.placed() < 2) std::this_thread::sleep_for(1ms);
  runner.drain();
  EXPECT_TRUE(runner.finished());
  const auto s = metrics.snapshot();
  EXPECT_EQ(s.frames_in, 0u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
}

TEST(Placers, AnInputThatFailsToClaimEndsIngest) {
  class Failing final : public FrameInput {
   public:
    std::optional<replay::Frame> next(std::chrono::milliseconds) override { return std::nullopt; }
    bool fills_in_place() const override { return true; }
    std::size_t concurrent_places() const override { return 2; }
    std::optional<Claim> claim(std::chrono::milliseconds) override { throw std::runtime_error("the recording is gone"); }
    std::string place(const Claim&, std::span<std::byte>, PlacementObserver*) override { return "never"; }
    bool ended() const override { return false; }
    std::string describe() const override { return "failing"; }
  } input;
  Lanes lanes(2);
  Metrics metrics;
  std::vector<std::unique_ptr<Stage>> chain;
  chain.push_back(std::make_unique<FakeStage>("work", 0us, false));
  Runner runner(small_shape(), std::move(chain), lanes.pointers(), {.budget_ms = 1e6, .queue_depth = 4}, metrics);
  runner.start(input);
  runner.wait();
  EXPECT_TRUE(runner.input_ended());
  EXPECT_EQ(metrics.snapshot().frames_in, 0u);
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
}

}  // namespace
}  // namespace covflow::pipeline

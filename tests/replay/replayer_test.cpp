// The replayer's schedule, checked on a fake clock that advances only when slept on.
#include <gtest/gtest.h>

#include "covflow/replay/replayer.hpp"
#include "replay_test_support.hpp"
#include "test_support.hpp"

namespace covflow::replay {
namespace {

using std::chrono::nanoseconds;

class FakeClock final : public Clock {
 public:
  nanoseconds now() override { return now_; }
  void sleep_until(nanoseconds deadline) override {
    ++sleeps;
    if (deadline > now_) now_ = deadline;
  }
  void advance(nanoseconds by) { now_ += by; }
  int sleeps = 0;

 private:
  nanoseconds now_{123'456'789};
};

struct Recording {
  std::vector<std::uint64_t> sequences;
  std::vector<std::int64_t> captures;
};

// Frames with irregular capture intervals (1 to 30 ms) and gaps in the sequence numbers.
Recording record(std::mt19937_64& rng, const std::filesystem::path& path, int frames, bool index) {
  Recording rec;
  Writer writer(path, {.write_index = index});
  std::uint64_t sequence = 10;
  std::int64_t capture = 5'000'000'000;
  for (int i = 0; i < frames; ++i) {
    Frame frame = test::random_frame(rng, sequence, PayloadKind::covariance, ElementType::cf32, 2);
    frame.header.capture_time_ns = capture;
    writer.write(frame);
    rec.sequences.push_back(sequence);
    rec.captures.push_back(capture);
    sequence += 1 + rng() % 2;
    capture += std::int64_t(1'000'000 + rng() % 29'000'000);
  }
  return rec;
}

TEST(Replayer, RecordedPaceFollowsCaptureTimesScaledBySpeed) {
  std::mt19937_64 rng(test::fresh_seed("recorded pace"));
  test::ScratchDir dir;
  const Recording rec = record(rng, dir / "r.cvf", 25, true);
  for (double speed : {1.0, 2.5, 0.5}) {
    Reader reader(dir / "r.cvf");
    FakeClock clock;
    const nanoseconds start = clock.now();
    Replayer replayer(reader, {.pace = Pace::recorded, .speed = speed}, clock);
    for (std::size_t i = 0; i < rec.sequences.size(); ++i) {
      const auto frame = replayer.next();
      ASSERT_TRUE(frame.has_value());
      EXPECT_EQ(frame->header.sequence, rec.sequences[i]);
      const double expected = double(rec.captures[i] - rec.captures[0]) / speed;
      EXPECT_NEAR(double((clock.now() - start).count()), expected, double(i + 1)) << "frame " << i << " speed " << speed;
    }
    EXPECT_FALSE(replayer.next().has_value());
    EXPECT_EQ(replayer.frames_delivered(), rec.sequences.size());
  }
}

TEST(Replayer, FixedRateAndFast) {
  std::mt19937_64 rng(test::fresh_seed("fixed pace"));
  test::ScratchDir dir;
  const Recording rec = record(rng, dir / "f.cvf", 12, false);
  {
    Reader reader(dir / "f.cvf");
    FakeClock clock;
    const nanoseconds start = clock.now();
    Replayer replayer(reader, {.pace = Pace::fixed, .rate_hz = 40, .speed = 2}, clock);
    for (std::size_t i = 0; i < rec.sequences.size(); ++i) {
      ASSERT_TRUE(replayer.next().has_value());
      EXPECT_EQ((clock.now() - start).count(), std::int64_t(i) * 12'500'000) << "frame " << i;  // 80 Hz
    }
  }
  {
    Reader reader(dir / "f.cvf");
    FakeClock clock;
    const nanoseconds start = clock.now();
    Replayer replayer(reader, {.pace = Pace::fast}, clock);
    std::size_t n = 0;
    while (replayer.next()) ++n;
    EXPECT_EQ(n, rec.sequences.size());
    EXPECT_EQ(clock.now(), start);
    EXPECT_EQ(clock.sleeps, 0);
  }
}

TEST(Replayer, ALateCallerGetsDueFramesAtOnceAndTheScheduleDoesNotDrift) {
  std::mt19937_64 rng(test::fresh_seed("late caller"));
  test::ScratchDir dir;
  record(rng, dir / "l.cvf", 10, true);
  Reader reader(dir / "l.cvf");
  FakeClock clock;
  const nanoseconds start = clock.now();
  Replayer replayer(reader, {.pace = Pace::fixed, .rate_hz = 100}, clock);
  ASSERT_TRUE(replayer.next());
  clock.advance(nanoseconds(35'000'000));  // the caller stalls for 3.5 frame intervals
  const int sleeps_before = clock.sleeps;
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(replayer.next());
  EXPECT_EQ(clock.sleeps, sleeps_before) << "frames already due must not wait";
  ASSERT_TRUE(replayer.next());  // frame 4 is due at 40 ms
  EXPECT_EQ((clock.now() - start).count(), 40'000'000);
  EXPECT_EQ((replayer.last_due() - start).count(), 40'000'000);
}

TEST(Replayer, LoopWithStartAndStopSequences) {
  std::mt19937_64 rng(test::fresh_seed("loop"));
  test::ScratchDir dir;
  for (bool index : {true, false}) {
    SCOPED_TRACE(index ? "with index" : "without index");
    const Recording rec = record(rng, dir / (index ? "a.cvf" : "b.cvf"), 20, index);
    // Bounds that fall between recorded sequence numbers as well as on them.
    const std::uint64_t start = rec.sequences[4] - (rng() % 2);
    const std::uint64_t stop = rec.sequences[13] + (rng() % 2);
    std::vector<std::size_t> selected;
    for (std::size_t i = 0; i < rec.sequences.size(); ++i)
      if (rec.sequences[i] >= start && rec.sequences[i] <= stop) selected.push_back(i);
    Reader reader(dir / (index ? "a.cvf" : "b.cvf"));
    FakeClock clock;
    const nanoseconds t0 = clock.now();
    Replayer replayer(reader, {.pace = Pace::recorded, .loop = true, .start_sequence = start, .stop_sequence = stop}, clock);
    const std::int64_t span = rec.captures[selected.back()] - rec.captures[selected.front()];
    const std::int64_t wrap_gap = span / std::int64_t(selected.size() - 1);
    for (int pass = 0; pass < 3; ++pass)
      for (std::size_t k : selected) {
        const auto frame = replayer.next();
        ASSERT_TRUE(frame.has_value());
        EXPECT_EQ(frame->header.sequence, rec.sequences[k]) << "pass " << pass;
        const std::int64_t expected = pass * (span + wrap_gap) + (rec.captures[k] - rec.captures[selected.front()]);
        EXPECT_NEAR(double((clock.now() - t0).count()), double(expected), 100.0) << "pass " << pass << " frame " << k;
      }
    EXPECT_EQ(replayer.passes(), 3u);
  }
}

TEST(Replayer, EmptySelectionEndsEvenWhenLooping) {
  std::mt19937_64 rng(test::fresh_seed("empty selection"));
  test::ScratchDir dir;
  const Recording rec = record(rng, dir / "e.cvf", 5, true);
  Reader reader(dir / "e.cvf");
  FakeClock clock;
  Replayer replayer(reader, {.pace = Pace::fast, .loop = true, .start_sequence = rec.sequences.back() + 1}, clock);
  EXPECT_FALSE(replayer.next().has_value());
}

TEST(Replayer, RefusesImpossibleOptions) {
  test::ScratchDir dir;
  { Writer writer(dir / "x.cvf"); }
  Reader reader(dir / "x.cvf");
  EXPECT_THROW(Replayer(reader, {.speed = 0}), std::invalid_argument);
  EXPECT_THROW(Replayer(reader, {.speed = std::nan("")}), std::invalid_argument);
  EXPECT_THROW(Replayer(reader, {.pace = Pace::fixed, .rate_hz = -1}), std::invalid_argument);
  EXPECT_THROW(Replayer(reader, {.start_sequence = 5, .stop_sequence = 4}), std::invalid_argument);
}

}  // namespace
}  // namespace covflow::replay

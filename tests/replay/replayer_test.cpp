// The replayer's schedule, checked on a fake clock that advances only when slept on.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <limits>

#include "covflow/replay/format.hpp"
#include "covflow/replay/payload_mover.hpp"
#include "covflow/replay/replayer.hpp"
#include "covflow/replay/writer.hpp"
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

// A file source that counts the payload bytes read through it (reads of more than a header).
class CountingSource final : public ByteSource {
 public:
  explicit CountingSource(const std::filesystem::path& path) : inner_(open_file_source(path)) {}
  std::uint64_t size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  void read(std::uint64_t offset, std::span<std::byte> out) override {
    if (out.size() > format::record_header_bytes) payload_bytes += out.size();
    inner_->read(offset, out);
  }
  std::atomic<std::uint64_t> payload_bytes{0};

 private:
  std::unique_ptr<ByteSource> inner_;
};

TEST(Replayer, NextIntoReadsAheadThenWaitsNoLongerThanToldUntilTheRecordIsDue) {
  std::mt19937_64 rng(test::fresh_seed("next_into"));
  test::ScratchDir dir;
  record(rng, dir / "n.cvf", 6, true);
  const auto expected = [&] {
    Reader plain(dir / "n.cvf");
    return test::read_all(plain);
  }();
  auto counting = std::make_unique<CountingSource>(dir / "n.cvf");
  CountingSource& source = *counting;
  Reader reader(std::move(counting));
  FakeClock clock;
  const nanoseconds start = clock.now();
  Replayer replayer(reader, {.pace = Pace::fixed, .rate_hz = 40}, clock);  // a frame every 25 ms
  PayloadMover mover({.threads = 2, .parallel_from_bytes = 0});
  std::vector<std::byte> slot(1 << 16, std::byte{0xAB});
  const nanoseconds wait(10'000'000);
  std::size_t delivered = 0;
  for (int call = 0; call < 100 && delivered < expected.size(); ++call) {
    const std::uint64_t read_before = source.payload_bytes;
    const nanoseconds before = clock.now();
    const auto got = replayer.next_into(slot, mover, wait);
    EXPECT_LE((clock.now() - before).count(), wait.count()) << "a call waits at most `wait`";
    if (!got) {
      EXPECT_FALSE(replayer.finished());
      continue;
    }
    const Frame& want = expected[delivered];
    EXPECT_EQ(got->header, want.header);
    EXPECT_TRUE(got->fits);
    EXPECT_EQ((got->due - start).count(), std::int64_t(delivered) * 25'000'000) << "frame " << delivered;
    EXPECT_GE(clock.now(), got->due);
    EXPECT_TRUE(std::equal(want.payload.begin(), want.payload.end(), slot.begin())) << "frame " << delivered;
    // Frame 0 is read by the call that delivers it; later ones by the first call that waits for them.
    if (delivered > 0) {
      EXPECT_EQ(source.payload_bytes, read_before) << "frame " << delivered << " was read twice";
    }
    ++delivered;
  }
  EXPECT_EQ(delivered, expected.size());
  EXPECT_FALSE(replayer.next_into(slot, mover, wait).has_value());
  EXPECT_TRUE(replayer.finished());
}

TEST(Replayer, NextIntoAnotherBufferReadsTheWaitingRecordAgainAndATooSmallOneIsNotRead) {
  std::mt19937_64 rng(test::fresh_seed("next_into buffers"));
  test::ScratchDir dir;
  record(rng, dir / "b.cvf", 3, false);
  Reader plain(dir / "b.cvf");
  const auto expected = test::read_all(plain);
  Reader reader(dir / "b.cvf");
  FakeClock clock;
  Replayer replayer(reader, {.pace = Pace::fixed, .rate_hz = 10}, clock);
  PayloadMover mover({.threads = 1});
  std::vector<std::byte> first(1 << 16), second(1 << 16, std::byte{0x5A});
  ASSERT_TRUE(replayer.next_into(first, mover, nanoseconds(0)).has_value());
  EXPECT_FALSE(replayer.next_into(first, mover, nanoseconds(1'000'000)).has_value());  // frame 1 due in 100 ms
  EXPECT_THROW(replayer.next(), std::logic_error) << "frame 1 waits to be delivered by next_into";
  const auto got = replayer.next_into(second, mover, nanoseconds(200'000'000));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->header.sequence, expected[1].header.sequence);
  EXPECT_TRUE(std::equal(expected[1].payload.begin(), expected[1].payload.end(), second.begin()));
  // A buffer smaller than the payload: the header comes back, marked as not fitting, nothing read.
  std::vector<std::byte> tiny(expected[2].payload.size() - 1, std::byte{0x11});
  const auto small = replayer.next_into(tiny, mover, nanoseconds(200'000'000));
  ASSERT_TRUE(small.has_value());
  EXPECT_FALSE(small->fits);
  EXPECT_EQ(small->header.sequence, expected[2].header.sequence);
  EXPECT_TRUE(std::all_of(tiny.begin(), tiny.end(), [](std::byte b) { return b == std::byte{0x11}; }));
}

TEST(Replayer, NextIntoSkipsADamagedRecordAndDeliversTheRest) {
  std::mt19937_64 rng(test::fresh_seed("next_into damage"));
  test::ScratchDir dir;
  record(rng, dir / "d.cvf", 5, true);
  Reader plain(dir / "d.cvf");
  const auto expected = test::read_all(plain);
  auto bytes = test::read_bytes(dir / "d.cvf");
  const std::uint64_t third = (*plain.index())[2].offset;
  bytes[third + format::record_header_bytes + 3] ^= std::byte{0x10};  // in record 2's payload
  test::write_bytes(dir / "d.cvf", bytes);
  Reader reader(dir / "d.cvf");
  FakeClock clock;
  Replayer replayer(reader, {.pace = Pace::fast}, clock);
  PayloadMover mover({.threads = 3, .parallel_from_bytes = 0});
  std::vector<std::byte> slot(1 << 16);
  std::vector<std::uint64_t> sequences;
  while (auto got = replayer.next_into(slot, mover, nanoseconds(0))) {
    const auto& want = *std::find_if(expected.begin(), expected.end(), [&](const Frame& f) { return f.header == got->header; });
    EXPECT_TRUE(std::equal(want.payload.begin(), want.payload.end(), slot.begin()));
    sequences.push_back(got->header.sequence);
  }
  EXPECT_EQ(sequences, (std::vector<std::uint64_t>{expected[0].header.sequence, expected[1].header.sequence,
                                                   expected[3].header.sequence, expected[4].header.sequence}));
  ASSERT_EQ(reader.damage().size(), 1u);
  EXPECT_EQ(reader.damage()[0].kind, DamageKind::payload_crc);
  EXPECT_EQ(reader.damage()[0].offset, third);
}

TEST(Replayer, ClaimHandsOutHeadersAndDueTimesAndReadPayloadChecksEachRecordApart) {
  std::mt19937_64 rng(test::fresh_seed("claim"));
  test::ScratchDir dir;
  record(rng, dir / "c.cvf", 6, true);
  Reader plain(dir / "c.cvf");
  const auto expected = test::read_all(plain);
  auto bytes = test::read_bytes(dir / "c.cvf");
  const std::uint64_t fourth = (*plain.index())[3].offset;
  bytes[fourth + format::record_header_bytes + 5] ^= std::byte{0x08};  // in record 3's payload
  test::write_bytes(dir / "c.cvf", bytes);

  Reader reader(dir / "c.cvf");
  FakeClock clock;
  const nanoseconds start = clock.now();
  Replayer replayer(reader, {.pace = Pace::fixed, .rate_hz = 40}, clock);
  std::vector<RecordInfo> claimed;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    RecordInfo record;
    const auto got = replayer.claim(&record);
    ASSERT_TRUE(got.has_value()) << "record " << i;
    EXPECT_EQ(got->header, expected[i].header);
    EXPECT_EQ(record.header, expected[i].header);
    EXPECT_EQ((got->due - start).count(), std::int64_t(i) * 25'000'000) << "record " << i;
    claimed.push_back(record);
  }
  EXPECT_FALSE(replayer.claim(nullptr).has_value());
  EXPECT_TRUE(replayer.finished());
  EXPECT_EQ(clock.sleeps, 0) << "claim never waits";
  EXPECT_TRUE(reader.damage().empty()) << "headers alone: the damaged payload is not seen yet";

  // Payloads read in another order than claimed, each by its own mover, the reader untouched.
  const std::uint64_t position = reader.position();
  PayloadMover mover({.threads = 2, .parallel_from_bytes = 0});
  std::vector<std::byte> slot(1 << 16);
  for (std::size_t k = claimed.size(); k-- > 0;) {
    const std::string problem = reader.read_payload(claimed[k], slot, mover);
    if (k == 3) {
      EXPECT_NE(problem.find("CRC mismatch"), std::string::npos) << problem;
      EXPECT_NE(problem.find(std::to_string(fourth)), std::string::npos) << problem;
      continue;
    }
    EXPECT_EQ(problem, "") << "record " << k;
    EXPECT_TRUE(std::equal(expected[k].payload.begin(), expected[k].payload.end(), slot.begin())) << "record " << k;
  }
  EXPECT_EQ(reader.position(), position);
  EXPECT_TRUE(reader.damage().empty());
  // With `placed`, each stretch is told as it lands: in order from 0, end to end, the whole payload.
  PayloadMover stretched({.threads = 2, .piece_bytes = 64, .parallel_from_bytes = 0, .stretch_bytes = 3});
  std::vector<std::pair<std::size_t, std::size_t>> told;
  std::fill(slot.begin(), slot.end(), std::byte{0});
  EXPECT_EQ(reader.read_payload(claimed[2], slot, stretched, [&](std::size_t b, std::size_t e) { told.emplace_back(b, e); }),
            "");
  const std::size_t size = expected[2].payload.size();
  ASSERT_GE(size, 7u);  // several stretches of 3 bytes, the last one shorter unless size is a multiple
  ASSERT_EQ(told.size(), (size + 2) / 3);
  for (std::size_t i = 0; i < told.size(); ++i)
    EXPECT_EQ(told[i], std::make_pair(i * 3, std::min(size, (i + 1) * 3))) << "stretch " << i;
  EXPECT_TRUE(std::equal(expected[2].payload.begin(), expected[2].payload.end(), slot.begin()));
  std::vector<std::byte> tiny(expected[0].payload.size() - 1);  // one byte short (payloads here are 8 to 64 bytes)
  EXPECT_NE(reader.read_payload(claimed[0], tiny, mover).find("does not fit"), std::string::npos);
  RecordInfo elsewhere = claimed[1];
  elsewhere.header.sequence += 1000;
  EXPECT_NE(reader.read_payload(elsewhere, slot, mover).find("no longer the one claimed"), std::string::npos);
}

TEST(Replayer, ClaimRefusesWhileNextIntoHoldsARecord) {
  std::mt19937_64 rng(test::fresh_seed("claim after next_into"));
  test::ScratchDir dir;
  record(rng, dir / "h.cvf", 3, false);
  Reader reader(dir / "h.cvf");
  FakeClock clock;
  Replayer replayer(reader, {.pace = Pace::fixed, .rate_hz = 1}, clock);
  PayloadMover mover({.threads = 1});
  std::vector<std::byte> slot(1 << 16);
  ASSERT_TRUE(replayer.next_into(slot, mover, nanoseconds(0)).has_value());    // frame 0 is due at once
  EXPECT_FALSE(replayer.next_into(slot, mover, nanoseconds(0)).has_value());   // frame 1 read, waiting
  EXPECT_THROW(replayer.claim(nullptr), std::logic_error);
}

TEST(Replayer, AbsurdGapsBetweenCaptureTimesAreShortenedAndCounted) {
  test::ScratchDir dir;
  std::mt19937_64 rng(test::fresh_seed("gaps"));
  {
    Writer writer(dir / "g.cvf");
    // An hour's pause, then capture times at the ends of the int64 range (their difference
    // overflows a signed subtraction), then a step back.
    const std::int64_t captures[] = {0, 3'600'000'000'000, std::numeric_limits<std::int64_t>::min(),
                                     std::numeric_limits<std::int64_t>::max(), 1'000};
    std::uint64_t sequence = 0;
    for (std::int64_t capture : captures) {
      Frame frame = test::random_frame(rng, sequence++, PayloadKind::covariance, ElementType::cf32, 2);
      frame.header.capture_time_ns = capture;
      writer.write(frame);
    }
  }
  Reader reader(dir / "g.cvf");
  FakeClock clock;
  const nanoseconds start = clock.now();
  Replayer replayer(reader, {.pace = Pace::recorded, .max_gap = std::chrono::seconds(2)}, clock);
  PayloadMover mover({.threads = 1});
  std::vector<std::byte> slot(1 << 12);
  std::vector<std::int64_t> due;
  while (auto got = replayer.next_into(slot, mover, std::chrono::seconds(5))) due.push_back((got->due - start).count());
  // 0; +1 h → 2 s; a step back → 0; min → max (2^64 − 1 ns) → 2 s; a step back → 0.
  EXPECT_EQ(due, (std::vector<std::int64_t>{0, 2'000'000'000, 2'000'000'000, 4'000'000'000, 4'000'000'000}));
  EXPECT_EQ(replayer.clamped_gaps(), 2u);
  EXPECT_THROW(Replayer(reader, {.max_gap = nanoseconds(0)}), std::invalid_argument);
}

}  // namespace
}  // namespace covflow::replay

// Ingest sources and the recorder: scenario → file, file → frames, ZeroMQ feed → file.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "covflow/pipeline/runner.hpp"
#include "covflow/replay/error.hpp"
#include "covflow/replay/writer.hpp"
#include "covflow/replay/format.hpp"
#include "covflow/stages/ingest.hpp"
#include "covflow/stages/record.hpp"
#include "replay_test_support.hpp"
#include "test_support.hpp"

namespace covflow::stages {
namespace {

using std::chrono::milliseconds;

config::ScenarioConfig tiny_scenario(std::uint64_t seed) {
  config::ScenarioConfig s;
  s.elements = 4;
  s.sources = {{10, 5}};
  s.jammers = {};
  s.snapshots = 6;
  s.cells = 3;
  s.seed = std::int64_t(seed >> 1);
  return s;
}

TEST(Ingest, ScenarioRecordedToAFileReadsBackAsGenerated) {
  const auto s = tiny_scenario(test::fresh_seed("record scenario"));
  test::ScratchDir dir;
  auto source = scenario_source(s, 7);
  std::vector<RecordProgress> updates;
  {
    replay::Writer writer(dir / "synth.cvf");
    const RecordProgress done = record_frames(*source, writer, {.progress = [&](const RecordProgress& p) { updates.push_back(p); }});
    EXPECT_EQ(done.frames, 7u);
    EXPECT_EQ(done.bytes, writer.bytes());
    writer.close();
  }
  EXPECT_TRUE(source->ended());
  ASSERT_EQ(updates.size(), 8u);  // after each frame and once at the end
  EXPECT_EQ(updates[2].frames, 3u);

  replay::Reader reader(dir / "synth.cvf");
  ScenarioGenerator generator(s);
  for (std::uint64_t i = 0; i < 7; ++i) {
    auto frame = reader.next();
    ASSERT_TRUE(frame.has_value());
    EXPECT_EQ(*frame, generator.frame(i));
  }
  EXPECT_FALSE(reader.next().has_value());
}

TEST(Ingest, RecordingStopsWhenAskedOrAtTheFrameCount) {
  const auto s = tiny_scenario(test::fresh_seed("record stop"));
  test::ScratchDir dir;
  {
    auto source = scenario_source(s);  // endless
    replay::Writer writer(dir / "count.cvf");
    EXPECT_EQ(record_frames(*source, writer, {.max_frames = 5}).frames, 5u);
  }
  {
    auto source = scenario_source(s);
    replay::Writer writer(dir / "stop.cvf");
    std::atomic<bool> stop{false};
    const auto done = record_frames(*source, writer, {.stop = &stop, .progress = [&](const RecordProgress& p) {
                                                        if (p.frames == 3) stop = true;
                                                      }});
    EXPECT_EQ(done.frames, 3u);
  }
}

TEST(Ingest, ReplaySourceFollowsTheFileConfig) {
  const auto s = tiny_scenario(test::fresh_seed("replay source"));
  test::ScratchDir dir;
  {
    replay::Writer writer(dir / "r.cvf");
    ScenarioGenerator generator(s);
    for (int i = 0; i < 10; ++i) writer.write(generator.next());
  }
  config::FileIngestConfig file;
  file.pace = config::Pace::fast;
  file.start_seq = 3;
  file.stop_seq = 6;
  auto source = replay_source((dir / "r.cvf").string(), replay_options(file));
  std::vector<std::uint64_t> sequences;
  while (auto frame = source->next(milliseconds(0))) sequences.push_back(frame->header.sequence);
  EXPECT_EQ(sequences, (std::vector<std::uint64_t>{3, 4, 5, 6}));
  EXPECT_TRUE(source->ended());
  EXPECT_EQ(source->rejected(), 0u);
  EXPECT_THROW(replay_source((dir / "missing.cvf").string(), {}), replay::IoError);
}

TEST(Ingest, ZeroMqFeedIsRecordedAndDamagedMessagesAreCounted) {
  const auto s = tiny_scenario(test::fresh_seed("zmq feed"));
  test::ScratchDir dir;
  ZmqFramePublisher publisher("tcp://127.0.0.1:*", ZmqFramePublisher::Pattern::push);
  auto source = zmq_source(publisher.endpoint(), config::ZmqPattern::pull);
  ScenarioGenerator generator(s);
  std::vector<replay::Frame> sent;
  for (int i = 0; i < 5; ++i) {
    sent.push_back(generator.next());
    if (i == 2) {
      auto damaged = replay::format::encode_record(sent.back());
      damaged[damaged.size() / 2] ^= std::byte{0x40};
      publisher.send_raw(damaged);  // lost: refused and counted
      sent.pop_back();
      continue;
    }
    publisher.send(sent.back());
  }
  {
    replay::Writer writer(dir / "feed.cvf");
    const auto done = record_frames(*source, writer, {.max_frames = 4, .poll = milliseconds(50)});
    EXPECT_EQ(done.frames, 4u);
    EXPECT_EQ(done.rejected, 1u);
  }
  EXPECT_NE(source->last_problem().find("record CRC mismatch"), std::string::npos) << source->last_problem();
  replay::Reader reader(dir / "feed.cvf");
  for (const replay::Frame& expected : sent) {
    auto frame = reader.next();
    ASSERT_TRUE(frame.has_value());
    EXPECT_EQ(*frame, expected);
  }
  // Nothing more arrives: a live source times out without ending.
  EXPECT_FALSE(source->next(milliseconds(20)).has_value());
  EXPECT_FALSE(source->ended());
}

// ---- into the slots: the daemon's path -------------------------------------------------------

// A stage that keeps a copy of every frame's payload as the slot held it.
// With several lanes it runs in sequence (after the reorder buffer), so frames are seen in order.
class CaptureStage final : public pipeline::Stage {
 public:
  explicit CaptureStage(bool sequenced = false) : sequenced_(sequenced) {}
  std::string_view name() const override { return "capture"; }
  bool in_sequence() const override { return sequenced_; }
  bool needs_host_results() const override { return sequenced_; }
  void run(pipeline::FrameSlot& frame, linalg::Exec&) override {
    const auto bytes = frame.host.payload.first(std::size_t(frame.header.payload_bytes()));
    std::lock_guard lock(mutex);
    seen.push_back({frame.header, std::vector<std::byte>(bytes.begin(), bytes.end())});
  }
  std::mutex mutex;
  std::vector<replay::Frame> seen;

 private:
  bool sequenced_;
};

struct Captured {
  pipeline::MetricsSnapshot metrics;
  std::vector<replay::Frame> frames;
};

// Runs `source` through a CPU runner sized for its own shape, with a capture stage as the chain,
// on `lanes` CPU lanes.
Captured run_into_slots(FrameSource& source, pipeline::FrameInput* input = nullptr, std::size_t lanes = 1) {
  std::vector<linalg::Exec> execs;
  for (std::size_t l = 0; l < lanes; ++l) execs.push_back(linalg::Exec::cpu(2));
  std::vector<linalg::Exec*> exec;
  for (auto& e : execs) exec.push_back(&e);
  pipeline::Metrics metrics;
  auto capture = std::make_unique<CaptureStage>(lanes > 1);
  CaptureStage& stage = *capture;
  std::vector<std::unique_ptr<pipeline::Stage>> chain;
  chain.push_back(std::move(capture));
  config::Config cfg;
  cfg.pipeline.stages.subspace.enabled = false;
  cfg.pipeline.stages.adaptive.enabled = false;
  pipeline::Runner runner(frame_shape(cfg, source.shape()), std::move(chain), exec,
                          {.budget_ms = 10'000, .queue_depth = 4, .overflow = config::Overflow::block}, metrics);
  runner.start(input != nullptr ? *input : source);
  runner.wait();
  return {metrics.snapshot(), std::move(stage.seen)};
}

std::vector<replay::Frame> write_frames(const std::filesystem::path& path, const config::ScenarioConfig& s, int count) {
  ScenarioGenerator generator(s);
  std::vector<replay::Frame> frames;
  replay::Writer writer(path);
  for (int i = 0; i < count; ++i) {
    frames.push_back(generator.next());
    writer.write(frames.back());
  }
  return frames;
}

TEST(IngestIntoSlots, FileReplayDeliversEveryRecordBitForBitAndRefusesADamagedOne) {
  auto s = tiny_scenario(test::fresh_seed("file into slots"));
  s.cells = 40;  // 4 × 6 × 40 cf64: 15 KiB per record
  test::ScratchDir dir;
  auto frames = write_frames(dir / "r.cvf", s, 9);
  // Damage record 4's payload in the middle of the file.
  replay::Reader clean(dir / "r.cvf");
  auto bytes = test::read_bytes(dir / "r.cvf");
  const std::uint64_t fifth = (*clean.index())[4].offset;
  bytes[fifth + replay::format::record_header_bytes + 1000] ^= std::byte{0x02};
  test::write_bytes(dir / "r.cvf", bytes);
  frames.erase(frames.begin() + 4);

  config::FileIngestConfig file;
  file.pace = config::Pace::fast;
  auto source = replay_source((dir / "r.cvf").string(), replay_options(file));
  ASSERT_TRUE(source->fills_in_place());
  const Captured got = run_into_slots(*source);
  ASSERT_EQ(got.frames.size(), frames.size());
  for (std::size_t i = 0; i < frames.size(); ++i) EXPECT_EQ(got.frames[i], frames[i]) << "frame " << i;
  EXPECT_EQ(got.metrics.frames_in, 9u);
  EXPECT_EQ(got.metrics.frames_done, 8u);
  EXPECT_EQ(got.metrics.dropped_by_reason.at("rejected_input"), 1u);
  EXPECT_NE(source->last_problem().find("CRC mismatch"), std::string::npos) << source->last_problem();
  EXPECT_EQ(got.metrics.input.taken, 8u);
  EXPECT_EQ(got.metrics.input.place.count, 8u);
  EXPECT_EQ(got.metrics.input.lag.count, 0u);  // a fast replay has no schedule
}

TEST(IngestIntoSlots, FileReplayPlacesSeveralRecordsAtOnceOnSeveralLanes) {
  auto s = tiny_scenario(test::fresh_seed("file placed at once"));
  s.cells = 40;
  test::ScratchDir dir;
  auto frames = write_frames(dir / "r.cvf", s, 24);
  replay::Reader clean(dir / "r.cvf");
  auto bytes = test::read_bytes(dir / "r.cvf");
  const std::uint64_t damaged = (*clean.index())[7].offset;
  bytes[damaged + replay::format::record_header_bytes + 500] ^= std::byte{0x40};
  test::write_bytes(dir / "r.cvf", bytes);
  frames.erase(frames.begin() + 7);

  for (const auto pace : {config::Pace::fast, config::Pace::fixed}) {
    config::FileIngestConfig file;
    file.pace = pace;
    file.rate_hz = 500;
    auto source = replay_source((dir / "r.cvf").string(), replay_options(file), 0, 2, 3);
    EXPECT_EQ(source->concurrent_places(), 3u);
    const Captured got = run_into_slots(*source, nullptr, 3);
    ASSERT_EQ(got.frames.size(), frames.size());
    for (std::size_t i = 0; i < frames.size(); ++i) EXPECT_EQ(got.frames[i], frames[i]) << "frame " << i;
    EXPECT_EQ(got.metrics.frames_in, 24u);
    EXPECT_EQ(got.metrics.frames_done, 23u);
    EXPECT_EQ(got.metrics.dropped_by_reason.at("rejected_input"), 1u);
    EXPECT_EQ(got.metrics.input.taken, 23u);
    EXPECT_EQ(got.metrics.input.place.count, 23u);
    EXPECT_EQ(got.metrics.input.sequence_gaps, 1u);  // the refused record's sequence number
    // A paced replay's frames are admitted when due (lag ≥ 0, one per frame), a fast one has no schedule.
    EXPECT_EQ(got.metrics.input.lag.count, pace == config::Pace::fast ? 0u : 23u);
  }
}

TEST(IngestIntoSlots, PacedReplayArrivesWhenDueAndReportsItsLag) {
  auto s = tiny_scenario(test::fresh_seed("paced into slots"));
  test::ScratchDir dir;
  const auto frames = write_frames(dir / "p.cvf", s, 5);
  config::FileIngestConfig file;
  file.pace = config::Pace::fixed;
  file.rate_hz = 200;
  auto source = replay_source((dir / "p.cvf").string(), replay_options(file));
  const Captured got = run_into_slots(*source);
  ASSERT_EQ(got.frames.size(), frames.size());
  for (std::size_t i = 0; i < frames.size(); ++i) EXPECT_EQ(got.frames[i], frames[i]);
  EXPECT_EQ(got.metrics.input.lag.count, 5u);
  EXPECT_EQ(got.metrics.input.sequence_gaps, 0u);
}

TEST(IngestIntoSlots, ZeroMqFeedDeliversEveryRecordBitForBitAndRefusesDamage) {
  auto s = tiny_scenario(test::fresh_seed("zmq into slots"));
  s.cells = 40;
  s.element_type = config::SampleType::cf32;
  ZmqFramePublisher publisher("tcp://127.0.0.1:*", ZmqFramePublisher::Pattern::push);
  auto source = zmq_source(publisher.endpoint(), config::ZmqPattern::pull, {.shape = scenario_shape(s), .receive_hwm = 4});
  ASSERT_TRUE(source->fills_in_place());
  EXPECT_EQ(source->shape(), scenario_shape(s));
  ScenarioGenerator generator(s);
  std::vector<replay::Frame> sent;
  // Ends once the good frames are in (the feed itself never ends).
  class Until final : public pipeline::FrameInput {
   public:
    Until(FrameSource& inner, std::uint64_t frames) : inner_(inner), frames_(frames) {}
    std::optional<replay::Frame> next(milliseconds wait) override { return inner_.next(wait); }
    bool fills_in_place() const override { return true; }
    std::optional<replay::FrameHeader> next_into(milliseconds wait, std::span<std::byte> payload) override {
      auto h = inner_.next_into(wait, payload);
      if (h) ++taken_;
      return h;
    }
    bool ended() const override { return taken_ >= frames_; }
    std::uint64_t rejected() const override { return inner_.rejected(); }
    std::string last_problem() const override { return inner_.last_problem(); }
    pipeline::InputTiming last_timing() const override { return inner_.last_timing(); }
    void observe_placement(pipeline::PlacementObserver* observer) override { inner_.observe_placement(observer); }
    std::string describe() const override { return inner_.describe(); }

   private:
    FrameSource& inner_;
    std::uint64_t frames_, taken_ = 0;
  } until(*source, 6);
  // Records come as one part or split into parts (the header itself across three parts of 20
  // bytes); the damaged ones in parts too, and one split into more parts than a record may have.
  const std::size_t split[] = {0, 1000, 20, 0, 4096, 7};
  std::thread feeder([&] {
    for (int i = 0; i < 6; ++i) {
      replay::Frame frame = generator.next();
      if (i == 2) {
        auto damaged = replay::format::encode_record(frame);
        damaged[damaged.size() - 7] ^= std::byte{0x80};  // in the payload
        publisher.send_raw(damaged, 999);
        publisher.send_raw(std::span(damaged).first(30));  // not even a header
        publisher.send_raw(replay::format::encode_record(frame), 1);  // 7736 parts
      }
      sent.push_back(frame);
      publisher.send(frame, split[i]);
    }
  });
  const Captured got = run_into_slots(*source, &until);
  feeder.join();
  ASSERT_EQ(got.frames.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) EXPECT_EQ(got.frames[i], sent[i]) << "frame " << i;
  EXPECT_EQ(got.metrics.dropped_by_reason.at("rejected_input"), 3u);
  EXPECT_EQ(got.metrics.input.taken, 6u);
  EXPECT_EQ(got.metrics.input.place.count, 6u);
  EXPECT_EQ(source->rejected(), 3u);
  EXPECT_NE(source->last_problem().find("more than 4096 parts"), std::string::npos) << source->last_problem();
}

TEST(IngestIntoSlots, ZeroMqRecordTooLargeForTheSlotIsCheckedThenRefusedByShape) {
  auto s = tiny_scenario(test::fresh_seed("zmq too large"));
  ZmqFramePublisher publisher("tcp://127.0.0.1:*", ZmqFramePublisher::Pattern::push);
  // No shape: ZeroMQ sets no size limit, so the record reaches next_into with a smaller buffer.
  auto source = zmq_source(publisher.endpoint(), config::ZmqPattern::pull);
  EXPECT_THROW(source->shape(), std::logic_error);
  const replay::Frame frame = ScenarioGenerator(s).next();
  auto damaged = replay::format::encode_record(frame);
  damaged.back() ^= std::byte{0x01};
  publisher.send_raw(damaged);
  publisher.send(frame);
  std::vector<std::byte> slot(16, std::byte{0x33});
  std::optional<replay::FrameHeader> header;
  for (int i = 0; i < 100 && !header; ++i) header = source->next_into(milliseconds(50), slot);
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(*header, frame.header);
  EXPECT_EQ(source->rejected(), 1u) << "the damaged one was told apart";
  EXPECT_TRUE(std::all_of(slot.begin(), slot.end(), [](std::byte b) { return b == std::byte{0x33}; }));
}

TEST(IngestIntoSlots, ReplayTakesItsShapeFromTheFilesFirstRecord) {
  test::ScratchDir dir;
  auto s = tiny_scenario(test::fresh_seed("file shape"));
  s.elements = 24;
  s.snapshots = 9;
  s.cells = 5;
  s.element_type = config::SampleType::cf32;
  write_frames(dir / "s.cvf", s, 2);
  auto snapshots = replay_source((dir / "s.cvf").string(), {});
  EXPECT_EQ(snapshots->shape(), (InputShape{replay::PayloadKind::snapshots, replay::ElementType::cf32, 24, 5, 9}));
  s.payload = config::ScenarioPayload::covariance;
  s.element_type = config::SampleType::cf64;
  write_frames(dir / "c.cvf", s, 2);
  auto covariance = replay_source((dir / "c.cvf").string(), {}, 300);
  EXPECT_EQ(covariance->shape(), (InputShape{replay::PayloadKind::covariance, replay::ElementType::cf64, 24, 5, 300}));
  { replay::Writer empty(dir / "empty.cvf"); }
  try {
    replay_source((dir / "empty.cvf").string(), {});
    FAIL() << "no exception";
  } catch (const replay::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("no valid record to replay"), std::string::npos) << e.what();
  }
}

// Records what an input reports placed, checking each stretch's bytes at the moment it is reported.
class StretchLog final : public pipeline::PlacementObserver {
 public:
  explicit StretchLog(std::span<const std::byte> slot) : slot_(slot) {}
  void placed(std::size_t begin, std::size_t end) override { stretches.push_back({begin, end, copy(begin, end)}); }
  struct Stretch {
    std::size_t begin, end;
    std::vector<std::byte> bytes;
  };
  std::vector<Stretch> stretches;
  // The stretches cover [0, payload.size()) in order, and each held the payload's bytes when told.
  void expect_payload(const std::vector<std::byte>& payload) const {
    std::size_t at = 0;
    for (const auto& s : stretches) {
      if (s.begin == 0) at = 0;  // a new payload in the same slot
      EXPECT_EQ(s.begin, at);
      EXPECT_TRUE(std::equal(s.bytes.begin(), s.bytes.end(), payload.begin() + std::ptrdiff_t(s.begin)));
      at = s.end;
    }
    EXPECT_EQ(at, payload.size());
  }

 private:
  std::vector<std::byte> copy(std::size_t begin, std::size_t end) const {
    return {slot_.begin() + std::ptrdiff_t(begin), slot_.begin() + std::ptrdiff_t(end)};
  }
  std::span<const std::byte> slot_;
};

TEST(IngestIntoSlots, FileAndFeedReportEachStretchAsItLands) {
  // 9.2 MB records: more than one 8 MiB stretch.
  auto s = tiny_scenario(test::fresh_seed("stretches"));
  s.elements = 16;
  s.snapshots = 200;
  s.cells = 180;
  test::ScratchDir dir;
  const auto frames = write_frames(dir / "big.cvf", s, 2);
  std::vector<std::byte> slot(frames[0].payload.size() + 64);
  {
    config::FileIngestConfig file;
    file.pace = config::Pace::fast;
    auto source = replay_source((dir / "big.cvf").string(), replay_options(file));
    StretchLog log(slot);
    source->observe_placement(&log);
    const auto header = source->next_into(milliseconds(0), slot);
    ASSERT_TRUE(header.has_value());
    EXPECT_EQ(*header, frames[0].header);
    EXPECT_EQ(log.stretches.size(), 2u);
    log.expect_payload(frames[0].payload);
    source->observe_placement(nullptr);
    log.stretches.clear();
    ASSERT_TRUE(source->next_into(milliseconds(0), slot).has_value());
    EXPECT_TRUE(log.stretches.empty()) << "no observer, no reports";
  }
  // The feed with plain stores and with the non-temporal ones covflowd uses for GPU lanes' slots.
  for (const bool streaming : {false, true}) {
    SCOPED_TRACE(streaming ? "streaming stores" : "plain stores");
    ZmqFramePublisher publisher("tcp://127.0.0.1:*", ZmqFramePublisher::Pattern::push);
    auto source = zmq_source(publisher.endpoint(), config::ZmqPattern::pull,
                             {.shape = scenario_shape(s), .streaming_stores = streaming});
    StretchLog log(slot);
    source->observe_placement(&log);
    std::fill(slot.begin(), slot.end(), std::byte{0x5a});
    publisher.send(frames[1], std::size_t(1) << 20);
    std::optional<replay::FrameHeader> header;
    for (int i = 0; i < 100 && !header; ++i) header = source->next_into(milliseconds(50), slot);
    ASSERT_TRUE(header.has_value());
    EXPECT_EQ(*header, frames[1].header);
    EXPECT_EQ(log.stretches.size(), 2u);
    log.expect_payload(frames[1].payload);
    EXPECT_TRUE(std::equal(frames[1].payload.begin(), frames[1].payload.end(), slot.begin()));
  }
}

}  // namespace
}  // namespace covflow::stages

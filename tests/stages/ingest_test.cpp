// Ingest sources and the recorder: scenario → file, file → frames, ZeroMQ feed → file.
#include <gtest/gtest.h>

#include <thread>

#include "covflow/replay/error.hpp"
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

}  // namespace
}  // namespace covflow::stages

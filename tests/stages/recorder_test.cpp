// The recorder: frames written on its own thread from the slots they came in (kept in their pool
// until written), a full queue leaving frames out rather than waiting, an existing file kept.
#include <gtest/gtest.h>

#include <vector>

#include "covflow/pipeline/frame_pool.hpp"
#include "covflow/replay/error.hpp"
#include "covflow/replay/reader.hpp"
#include "covflow/stages/recorder.hpp"
#include "covflow/stages/scenario.hpp"
#include "replay_test_support.hpp"
#include "test_support.hpp"

namespace covflow::stages {
namespace {

pipeline::FrameShape shape_of(const config::ScenarioConfig& s) {
  pipeline::FrameShape shape;
  shape.element_type = replay::ElementType::cf64;
  shape.channels = static_cast<std::uint32_t>(s.elements);
  shape.snapshots = static_cast<std::uint32_t>(s.snapshots);
  shape.cells = static_cast<std::uint32_t>(s.cells);
  return shape;
}

config::ScenarioConfig small(std::uint64_t seed) {
  config::ScenarioConfig s;
  s.elements = 4;
  s.snapshots = 6;
  s.cells = 3;
  s.sources = {{10, 5}};
  s.jammers = {};
  s.seed = std::int64_t(seed >> 1);
  return s;
}

// Loads `frame` into a slot of `pool` as the runner would, and hands it to the recorder.
bool offer(Recorder& recorder, pipeline::FramePool& pool, const replay::Frame& frame) {
  pipeline::FrameSlot* slot = pool.acquire();
  if (slot == nullptr) {
    ADD_FAILURE() << "the pool has no free slot";
    return false;
  }
  slot->header = frame.header;
  slot->sequence = frame.header.sequence;
  std::memcpy(slot->host.payload.data(), frame.payload.data(), frame.payload.size());
  const bool taken = recorder.offer(*slot);
  pool.release(slot);  // the runner's hold; the recorder keeps its own
  return taken;
}

TEST(Recorder, WritesEveryFrameItTakesAndGivesTheSlotsBack) {
  const auto s = small(test::fresh_seed("recorder"));
  test::ScratchDir dir;
  pipeline::Metrics metrics;
  // The recorder holds up to queue + 1 slots (5 queued, 1 being written) and offer() takes one
  // more: seven, so that acquire() never comes back empty however far the writer falls behind
  // (with six it did, under load: the test then dereferenced null).
  pipeline::FramePool pool(shape_of(s), {}, {.slots = 7});
  ScenarioGenerator generator(s);
  std::vector<replay::Frame> frames;
  {
    Recorder recorder({.path = dir / "rec.cvf", .queue = 5}, &metrics);
    EXPECT_EQ(recorder.path(), dir / "rec.cvf");
    std::uint64_t taken = 0;
    for (int i = 0; i < 40; ++i) {
      frames.push_back(generator.next());
      if (offer(recorder, pool, frames.back())) ++taken;
      else frames.pop_back();  // left out: the writer was behind
      if (i % 7 == 0) recorder.flush();
    }
    recorder.flush();
    EXPECT_EQ(pool.available(), pool.capacity()) << "every slot given back once written";
    recorder.close();
    EXPECT_EQ(recorder.written(), taken);
    EXPECT_EQ(recorder.written() + recorder.left_out(), 40u);
    EXPECT_EQ(recorder.failed(), 0u);
    const auto m = metrics.snapshot();
    EXPECT_EQ(m.recording.written, taken);
    EXPECT_EQ(m.recording.left_out, 40u - taken);
    EXPECT_FALSE(offer(recorder, pool, frames.front())) << "closed: nothing more is taken";
  }
  replay::Reader reader(dir / "rec.cvf");
  ASSERT_TRUE(reader.index().has_value()) << "closing wrote the index";
  for (const auto& frame : frames) {
    auto back = reader.next();
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, frame);
  }
  EXPECT_FALSE(reader.next().has_value());
}

TEST(Recorder, AnExistingFileIsKeptAndTheRecordingGoesBesideIt) {
  test::ScratchDir dir;
  test::write_bytes(dir / "run.cvf", std::vector<std::byte>(10, std::byte{7}));
  test::write_bytes(dir / "run.1.cvf", std::vector<std::byte>(10, std::byte{7}));
  {
    Recorder recorder({.path = dir / "run.cvf"});
    EXPECT_EQ(recorder.requested(), dir / "run.cvf");
    EXPECT_EQ(recorder.path(), dir / "run.2.cvf");
  }
  EXPECT_EQ(test::read_bytes(dir / "run.cvf"), std::vector<std::byte>(10, std::byte{7}));
  EXPECT_EQ(free_recording_path(dir / "none.cvf"), dir / "none.cvf");
  EXPECT_EQ(free_recording_path(dir / "run.cvf"), dir / "run.3.cvf");
  EXPECT_THROW(Recorder(RecorderOptions{.path = dir / "no-such-dir" / "x.cvf"}), replay::IoError);
}

}  // namespace
}  // namespace covflow::stages

// The stages' contract (pipeline/stage.hpp): nothing allocates in run(). Every heap allocation of
// the process is counted here (the global operator new and its forms are replaced, as in
// result_json_test.cpp), from every thread — the CPU backend's thread pool included — while a
// stage runs; after the warm-up frames the default chain on a CPU lane allocates nothing per
// frame, on frames that update its state and on frames that refactor it.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "covflow/pipeline/frame_pool.hpp"
#include "covflow/stages/processing.hpp"
#include "covflow/stages/scenario.hpp"
#include "test_support.hpp"

namespace {
std::atomic<bool> counting{false};
std::atomic<std::size_t> allocations{0};
void* counted(std::size_t size) noexcept {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
}  // namespace

// Not inlined, neither `new` nor `delete`: GCC would otherwise see malloc() paired with `delete`.
[[gnu::noinline]] void* operator new(std::size_t size) {
  if (void* p = counted(size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return counted(size); }
[[gnu::noinline]] void* operator new[](std::size_t size) { return ::operator new(size); }
[[gnu::noinline]] void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept { return ::operator new(size, tag); }
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace covflow::stages {
namespace {

TEST(NoAllocation, TheDefaultChainOnACpuLaneAllocatesNothingPerFrame) {
  config::Config c;
  c.scenario.elements = 8;
  c.scenario.snapshots = 32;
  c.scenario.cells = 6;
  c.scenario.seed = std::int64_t(test::fresh_seed("no allocation scenario") >> 1);
  c.pipeline.stages.covariance.window = 3;           // the window's ring in use
  c.pipeline.stages.adaptive.window_snapshots = 64;  // updates and downdates every frame
  c.pipeline.stages.adaptive.refactor_every = 4;     // and a refactor every fourth frame
  c.pipeline.stages.adaptive.beam_pattern_points = 5;
  const pipeline::FrameShape shape = frame_shape(c);
  auto chain = make_processing_stages(c);
  ASSERT_EQ(chain.size(), 3u);  // covariance, subspace, adaptive
  linalg::Exec exec = linalg::Exec::cpu(3);  // the pool's workers run the stages' batches too
  std::vector<pipeline::SlotNeeds> needs;
  for (auto& stage : chain) {
    stage->prepare(shape, exec);
    needs.push_back(stage->slot_needs(shape));
  }
  pipeline::FramePool pool(shape, needs, {.slots = 1, .memory = pipeline::SlotMemory::host, .stage_count = chain.size()});
  pipeline::FrameSlot& slot = pool.slot(0);
  ScenarioGenerator generator(c.scenario);
  constexpr int kWarm = 6, kFrames = 14;
  std::vector<replay::Frame> frames;
  for (int f = 0; f < kFrames; ++f) frames.push_back(generator.frame(std::uint64_t(f)));
  for (int f = 0; f < kFrames; ++f) {
    const replay::Frame& frame = frames[std::size_t(f)];
    slot.header = frame.header;
    slot.sequence = frame.header.sequence;
    slot.results.clear();
    std::memcpy(slot.host.payload.data(), frame.payload.data(), frame.payload.size());
    for (auto& stage : chain) {
      allocations = 0;
      counting = f >= kWarm;
      stage->run(slot, exec);
      stage->collect(slot, exec);
      counting = false;
      EXPECT_EQ(allocations.load(), 0u) << "stage " << stage->name() << ", frame " << f;
    }
    EXPECT_EQ(slot.results.cells, c.scenario.cells) << "frame " << f;
    EXPECT_TRUE(std::isfinite(slot.results.sinr_db[0])) << "frame " << f << ": the adaptive stage ran";
  }
}

}  // namespace
}  // namespace covflow::stages

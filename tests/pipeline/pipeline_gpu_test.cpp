// The runner on a CUDA lane (skips without a device): slots pinned and on the device, each frame's
// payload uploaded (on the copy stream, overlapping the previous frame) before its stages read it,
// stages timed by events, and a degradable stage skipped because GPU work of its frame is still
// queued ahead of it.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstring>
#include <mutex>

#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/pipeline/frame_pool.hpp"
#include "covflow/pipeline/runner.hpp"
#include "fakes.hpp"
#include "test_support.hpp"

namespace covflow::pipeline {
namespace {

using namespace std::chrono_literals;
using test::GpuTest;

cudaMemoryType kind_of(const void* p) {
  cudaPointerAttributes attributes{};
  EXPECT_EQ(cudaPointerGetAttributes(&attributes, p), cudaSuccess);
  return attributes.type;
}

class PipelineGpu : public GpuTest {};

TEST_F(PipelineGpu, CudaSlotsArePinnedOnTheHostAndAllocatedOnTheDevice) {
  gpu().cuda_context().make_current();
  const FrameShape shape = test::small_shape();
  FramePool pool(shape, {SlotNeeds{.host_scratch_bytes = 100, .device_scratch_bytes = 300}, SlotNeeds{.host_scratch_bytes = 200}},
                 {.slots = 3, .memory = SlotMemory::cuda, .stage_count = 2});
  ASSERT_EQ(pool.capacity(), 3u);
  for (int i = 0; i < 3; ++i) {
    FrameSlot* slot = pool.acquire();
    ASSERT_NE(slot, nullptr);
    EXPECT_EQ(slot->host.payload.size(), shape.max_payload_bytes());
    EXPECT_EQ(kind_of(slot->host.payload.data()), cudaMemoryTypeHost);
    EXPECT_EQ(slot->host.scratch.size(), 200u);
    EXPECT_EQ(kind_of(slot->host.scratch.data()), cudaMemoryTypeHost);
    EXPECT_TRUE(slot->host.covariance.empty());  // CUDA lanes keep working arrays on the device
    for (const void* p : std::vector<const void*>{slot->device.payload, slot->device.covariance, slot->device.eigenvalues, slot->device.eigenvectors,
                          static_cast<const void*>(slot->device.info), slot->device.scratch}) {
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(kind_of(p), cudaMemoryTypeDevice);
    }
    EXPECT_EQ(slot->device.scratch_bytes, 300u);
    EXPECT_EQ(slot->stages.size(), 2u);
  }
  EXPECT_EQ(pool.acquire(), nullptr);
}

// A GPU stage: device payload → device covariance → host scratch (pinned), on exec's stream.
class EchoStage final : public Stage {
 public:
  std::string_view name() const override { return "echo"; }
  // The payload (snapshots) is larger than the covariance array: the echo goes through device scratch.
  SlotNeeds slot_needs(const FrameShape& shape) const override {
    return {.host_scratch_bytes = shape.max_payload_bytes(), .device_scratch_bytes = shape.max_payload_bytes()};
  }
  void run(FrameSlot& f, linalg::Exec& exec) override {
    const auto stream = exec.cuda_context().stream();
    const auto bytes = std::size_t(f.header.payload_bytes());
    if (f.device.scratch_bytes < bytes || f.host.scratch.size() < bytes)
      throw std::logic_error("echo: the slot's scratch is smaller than the payload");
    COVFLOW_CUDA_TRY(cudaMemsetAsync(f.device.scratch, 0xFF, bytes, stream));  // poison first
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(f.device.scratch, f.device.payload, bytes, cudaMemcpyDeviceToDevice, stream));
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(f.host.scratch.data(), f.device.scratch, bytes, cudaMemcpyDeviceToHost, stream));
  }
};

TEST_F(PipelineGpu, EveryFrameIsUploadedBeforeItsStagesReadItWhileFramesOverlap) {
  const FrameShape shape = test::small_shape();
  std::vector<std::unique_ptr<Stage>> stages;
  stages.push_back(std::make_unique<EchoStage>());
  std::atomic<std::uint64_t> mismatches{0}, checked{0};
  stages.push_back(std::make_unique<test::FakeStage>("check", 0us, false, [&](FrameSlot& f) {
    const auto bytes = std::size_t(f.header.payload_bytes());
    if (std::memcmp(f.host.scratch.data(), f.host.payload.data(), bytes) != 0 || !test::payload_matches(f, f.sequence))
      ++mismatches;
    ++checked;
  }));
  static_cast<test::FakeStage&>(*stages.back()).needing_host_results();
  std::vector<replay::Frame> frames;
  for (std::uint64_t s = 0; s < 500; ++s) frames.push_back(test::frame_for(shape, s));
  test::ListInput input(std::move(frames));
  Metrics metrics;
  std::mutex mutex;
  std::vector<std::uint64_t> order;
  std::vector<double> echo_ms;
  Runner runner(shape, std::move(stages), gpu(), {.budget_ms = 1000, .queue_depth = 8, .overflow = Overflow::block}, metrics,
                [&](const FrameSlot& f) {
                  std::lock_guard lock(mutex);
                  order.push_back(f.sequence);
                  echo_ms.push_back(f.stages[0].ms);
                });
  runner.start(input);
  runner.wait();
  const auto s = metrics.snapshot();
  EXPECT_EQ(s.frames_done, 500u);
  EXPECT_EQ(s.frames_dropped, 0u);
  EXPECT_EQ(checked.load(), 500u);
  EXPECT_EQ(mismatches.load(), 0u) << "a stage saw another frame's payload, or one not yet uploaded";
  ASSERT_EQ(order.size(), 500u);
  for (std::uint64_t i = 0; i < 500; ++i) EXPECT_EQ(order[i], i);
  for (double ms : echo_ms) EXPECT_GT(ms, 0.0);  // from the stage's event pair
  EXPECT_EQ(s.stages.at(0).ran, 500u);
  EXPECT_EQ(runner.pool().growths(), 0u);
}

// The chain of the several-lane tests: the echo, a check that what the device held is the frame's
// own payload, whole (and that a routed frame ran on the lane it was routed to), and an in-sequence
// stage recording the order frames come out in.
// `count` CUDA lanes of a host with `devices` GPUs: lane k on GPU k where there is one, else on GPU
// 0 (several contexts' streams on one device: the same code path).
std::vector<linalg::Exec> cuda_lanes(int count, int devices) {
  std::vector<linalg::Exec> execs;
  for (int k = 0; k < count; ++k) execs.push_back(linalg::Exec::cuda({.device = devices > k ? k : 0}));
  return execs;
}

struct LaneChain {
  std::atomic<std::uint64_t> mismatches{0}, checked{0}, elsewhere{0};
  std::mutex mutex;
  std::vector<std::uint64_t> order;
  std::vector<std::unique_ptr<Stage>> make() {
    std::vector<std::unique_ptr<Stage>> stages;
    stages.push_back(std::make_unique<EchoStage>());
    stages.push_back(std::make_unique<test::FakeStage>("check", 0us, false, [this](FrameSlot& f) {
      const auto bytes = std::size_t(f.header.payload_bytes());
      if (std::memcmp(f.host.scratch.data(), f.host.payload.data(), bytes) != 0 || !test::payload_matches(f, f.sequence))
        ++mismatches;
      if (f.routed_lane >= 0 && f.routed_lane != std::int32_t(f.lane)) ++elsewhere;
      ++checked;
    }));
    static_cast<test::FakeStage&>(*stages.back()).needing_host_results();
    stages.push_back(std::make_unique<test::FakeStage>("publish", 0us, false, [this](FrameSlot& f) {
      std::lock_guard lock(mutex);
      order.push_back(f.sequence);
    }));
    static_cast<test::FakeStage&>(*stages.back()).running_in_sequence();
    return stages;
  }
};

// Several CUDA lanes (docs/scale.md): GPUs 0 and 1 when the host has two, else two lanes on GPU 0
// (two contexts' streams on one device: the same code path). Every frame's payload reaches the
// device arrays of the lane that took it before its stages read them, and the in-sequence stage
// sees the frames in order.
TEST_F(PipelineGpu, SeveralLanesUploadIntoTheirOwnDeviceArraysAndPublishInOrder) {
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  std::vector<linalg::Exec> execs = cuda_lanes(2, devices);
  std::printf("[ lanes    ] on GPUs 0 and %d\n", devices >= 2 ? 1 : 0);
  const FrameShape shape = test::small_shape();
  LaneChain chain;
  std::vector<replay::Frame> frames;
  for (std::uint64_t s = 0; s < 600; ++s) frames.push_back(test::frame_for(shape, s));
  test::ListInput input(std::move(frames));
  Metrics metrics;
  Runner runner(shape, chain.make(), std::vector<linalg::Exec*>{&execs[0], &execs[1]},
                {.budget_ms = 1e6, .queue_depth = 8, .overflow = Overflow::block}, metrics);
  ASSERT_EQ(runner.lane_count(), 2u);
  EXPECT_EQ(runner.pool().memory(), SlotMemory::pinned);
  runner.start(input);
  runner.wait();
  const auto s = metrics.snapshot();
  EXPECT_EQ(s.frames_done, 600u);
  EXPECT_EQ(s.frames_dropped, 0u);
  EXPECT_EQ(chain.checked.load(), 600u);
  EXPECT_EQ(chain.mismatches.load(), 0u) << "a stage saw another frame's payload, or one not yet uploaded to its lane's arrays";
  ASSERT_EQ(chain.order.size(), 600u);
  for (std::uint64_t i = 0; i < 600; ++i) EXPECT_EQ(chain.order[i], i);
  ASSERT_EQ(s.lanes.size(), 2u);
  EXPECT_EQ(s.lanes[0].taken + s.lanes[1].taken, 600u);
  EXPECT_EQ(s.lanes[0].name, "cuda:0");
  EXPECT_EQ(s.reorder.in_order, 600u);
  std::printf("[ lanes    ] took %llu and %llu frames; most held %llu\n", (unsigned long long)s.lanes[0].taken,
              (unsigned long long)s.lanes[1].taken, (unsigned long long)s.reorder.max_held);
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
}

// A chain that keeps state across frames on several CUDA lanes (RunnerOptions::stateful_lanes):
// every lane takes every frame and uploads only its share of the cells, into its own device
// arrays; each lane's stages read exactly those cells of that frame, and the in-sequence stage
// sees every frame once, in order, with every cell's results.
TEST_F(PipelineGpu, AStatefulChainSplitsEachFramesCellsOverTheLanesAndUploadsEachLaneItsOwn) {
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  std::vector<linalg::Exec> execs = cuda_lanes(2, devices);
  FrameShape shape = test::small_shape();
  shape.cells = 5;
  std::atomic<std::uint64_t> mismatches{0}, parts{0};
  std::mutex mutex;
  std::vector<std::uint64_t> order;
  std::uint64_t incomplete = 0;
  std::vector<std::unique_ptr<Stage>> stages;
  stages.push_back(std::make_unique<EchoStage>());
  auto check = std::make_unique<test::FakeStage>("window", 0us, false, [&](FrameSlot& f) {
    // The echo of the device payload is this part's cells of this frame: element j of the part is
    // element first_cell·N·K + j of the frame, (sequence, index).
    const auto bytes = std::size_t(f.header.payload_bytes());
    const std::size_t per_cell = std::size_t(f.header.rows) * f.header.cols;
    const auto* echo = reinterpret_cast<const std::complex<float>*>(f.host.scratch.data());
    bool same = bytes == per_cell * f.header.count * sizeof(std::complex<float>) && f.header.count < shape.cells;
    for (std::size_t j = 0; same && j < per_cell * f.header.count; ++j)
      same = echo[j] == std::complex<float>(float(f.sequence), float(f.first_cell * per_cell + j));
    if (!same) ++mismatches;
    for (std::uint32_t c = 0; c < f.header.count; ++c) f.results.source_count[c] = std::int32_t(f.first_cell + c);
    f.results.cells = f.header.count;
    ++parts;
  });
  check->needing_host_results().keeping_state();
  stages.push_back(std::move(check));
  auto publish = std::make_unique<test::FakeStage>("publish", 0us, false, [&](FrameSlot& f) {
    std::lock_guard lock(mutex);
    order.push_back(f.sequence);
    bool whole = f.results.cells == shape.cells;
    for (std::uint32_t c = 0; whole && c < shape.cells; ++c) whole = f.results.source_count[c] == std::int32_t(c);
    if (!whole) ++incomplete;
  });
  publish->running_in_sequence();
  stages.push_back(std::move(publish));
  std::vector<replay::Frame> frames;
  for (std::uint64_t s = 0; s < 400; ++s) frames.push_back(test::frame_for(shape, s));
  test::ListInput input(std::move(frames));
  Metrics metrics;
  Runner runner(shape, std::move(stages), std::vector<linalg::Exec*>{&execs[0], &execs[1]},
                {.budget_ms = 1e6, .queue_depth = 8, .overflow = Overflow::block}, metrics);
  ASSERT_EQ(runner.lane_count(), 2u);
  ASSERT_FALSE(runner.cells_split_reason().empty());
  runner.start(input);
  runner.wait();
  const auto s = metrics.snapshot();
  EXPECT_EQ(s.frames_done, 400u);
  EXPECT_EQ(s.frames_dropped, 0u);
  EXPECT_EQ(parts.load(), 800u);
  EXPECT_EQ(mismatches.load(), 0u) << "a lane read cells other than its own, or of another frame";
  EXPECT_EQ(incomplete, 0u) << "a frame left with some cells' results missing";
  ASSERT_EQ(order.size(), 400u);
  for (std::uint64_t i = 0; i < 400; ++i) EXPECT_EQ(order[i], i);
  ASSERT_EQ(s.lanes.size(), 2u);
  EXPECT_EQ(s.lanes[0].taken, 400u);
  EXPECT_EQ(s.lanes[1].taken, 400u);
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
}

// Several CUDA lanes fed by an input that places several frames at once: each frame's lane is
// chosen as it is claimed (RunnerOptions::LaneChoice, automatic on CUDA lanes) and the placing
// threads upload the stretches the input reports to that lane's device set as they land, the rest
// once placed (all of it when the input reported nothing). Every frame's stages on its lane read
// its own payload, whole; refused frames leave nothing behind; results come out in order.
TEST_F(PipelineGpu, FramesRoutedAsClaimedAreUploadedToTheirLaneAsTheyArePlaced) {
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  std::vector<linalg::Exec> execs = cuda_lanes(3, devices);
  const FrameShape shape = test::small_shape();  // 768 bytes: stretches of 100, the last shorter
  LaneChain chain;
  test::ClaimingPlacingInput input(shape, 660, 3, 100);
  Metrics metrics;
  Runner runner(shape, chain.make(), std::vector<linalg::Exec*>{&execs[0], &execs[1], &execs[2]},
                {.budget_ms = 1e6, .queue_depth = 6, .overflow = Overflow::block}, metrics);
  ASSERT_EQ(runner.lane_count(), 3u);
  runner.start(input);
  runner.wait();
  EXPECT_EQ(runner.placers(), 3u);
  // A frame routed when its lane had no device set free is placed without an observer and
  // uploaded by its lane (the other path this test covers); most have one.
  EXPECT_GT(input.observed(), 0u) << "frames routed to a CUDA lane are uploaded as they are placed";
  EXPECT_GT(input.reported(), 0u);
  const auto s = metrics.snapshot();
  EXPECT_EQ(s.frames_in, 660u);
  EXPECT_EQ(s.frames_done, 600u);
  EXPECT_EQ(s.dropped_by_reason.at("rejected_input"), 60u);
  EXPECT_EQ(chain.checked.load(), 600u);
  EXPECT_EQ(chain.mismatches.load(), 0u) << "a stage read a device payload not (wholly) uploaded, or another frame's";
  EXPECT_EQ(chain.elsewhere.load(), 0u) << "a frame ran on another lane than the one it was routed to";
  ASSERT_EQ(chain.order.size(), 600u);
  for (std::size_t i = 1; i < chain.order.size(); ++i) EXPECT_LT(chain.order[i - 1], chain.order[i]);
  ASSERT_EQ(s.lanes.size(), 3u);
  for (const auto& lane : s.lanes) EXPECT_GT(lane.taken, 0u) << lane.name;
  std::printf("[ routed   ] lanes took %llu, %llu and %llu frames; %llu placed with an observer, %llu stretches "
              "uploaded as placed\n",
              (unsigned long long)s.lanes[0].taken, (unsigned long long)s.lanes[1].taken,
              (unsigned long long)s.lanes[2].taken, (unsigned long long)input.observed(),
              (unsigned long long)input.reported());
  EXPECT_EQ(runner.pool().available(), runner.pool().capacity());
}

TEST_F(PipelineGpu, PinnedSlotsHaveNoDeviceArraysAndDeviceSlotsNoHostOnes) {
  gpu().cuda_context().make_current();
  const FrameShape shape = test::small_shape();
  FramePool pinned(shape, {SlotNeeds{.host_scratch_bytes = 64, .device_scratch_bytes = 128}}, {.slots = 2, .memory = SlotMemory::pinned});
  FramePool device(shape, {SlotNeeds{.host_scratch_bytes = 64, .device_scratch_bytes = 128}}, {.slots = 2, .memory = SlotMemory::device});
  for (std::size_t i = 0; i < 2; ++i) {
    const FrameSlot& p = pinned.slot(i);
    EXPECT_EQ(kind_of(p.host.payload.data()), cudaMemoryTypeHost);
    EXPECT_EQ(p.host.scratch.size(), 64u);
    EXPECT_EQ(p.device.payload, nullptr);
    EXPECT_EQ(p.device.covariance, nullptr);
    const FrameSlot& d = device.slot(i);
    EXPECT_TRUE(d.host.payload.empty());
    EXPECT_EQ(kind_of(d.device.payload), cudaMemoryTypeDevice);
    EXPECT_EQ(kind_of(d.device.covariance), cudaMemoryTypeDevice);
    EXPECT_EQ(d.device.scratch_bytes, 128u);
    EXPECT_NE(d.device.upload_event, nullptr);
  }
  EXPECT_EQ(pinned.device_bytes(), 0u);
  EXPECT_EQ(device.host_bytes(), 0u);
}

TEST_F(PipelineGpu, PayloadsPlacedInStretchesAreUploadedByIngestBeforeTheStagesReadThem) {
  const FrameShape shape = test::small_shape();  // 768 bytes: stretches of 100 bytes, the last shorter
  std::vector<std::unique_ptr<Stage>> stages;
  stages.push_back(std::make_unique<EchoStage>());
  std::atomic<std::uint64_t> mismatches{0}, checked{0};
  stages.push_back(std::make_unique<test::FakeStage>("check", 0us, false, [&](FrameSlot& f) {
    const auto bytes = std::size_t(f.header.payload_bytes());
    // What the device held (echoed back) is this frame's payload, whole.
    if (std::memcmp(f.host.scratch.data(), f.host.payload.data(), bytes) != 0 || !test::payload_matches(f, f.sequence))
      ++mismatches;
    ++checked;
  }));
  static_cast<test::FakeStage&>(*stages.back()).needing_host_results();
  test::PlacingInput input(shape, 300, 100);
  Metrics metrics;
  Runner runner(shape, std::move(stages), gpu(), {.budget_ms = 1000, .queue_depth = 8, .overflow = Overflow::block}, metrics);
  runner.start(input);
  runner.wait();
  EXPECT_GT(input.reported(), 0u) << "a CUDA runner observes an in-place input's placement";
  const auto s = metrics.snapshot();
  EXPECT_EQ(s.frames_done, 300u);
  EXPECT_EQ(s.dropped_by_reason.at("rejected_input"), 100u);
  EXPECT_EQ(checked.load(), 300u);
  EXPECT_EQ(mismatches.load(), 0u) << "a stage read a device payload not (wholly) uploaded, or another frame's";
}

// `repeats` memsets over a large buffer: GPU work of a few milliseconds, queued asynchronously.
class HeavyStage final : public Stage {
 public:
  HeavyStage(linalg::cuda::DeviceBuffer<std::byte>& buffer, int repeats) : buffer_(buffer), repeats_(repeats) {}
  std::string_view name() const override { return "heavy"; }
  void run(FrameSlot&, linalg::Exec& exec) override {
    for (int r = 0; r < repeats_; ++r)
      COVFLOW_CUDA_TRY(cudaMemsetAsync(buffer_.data(), r & 0xFF, buffer_.bytes(), exec.cuda_context().stream()));
  }

 private:
  linalg::cuda::DeviceBuffer<std::byte>& buffer_;
  int repeats_;
};

TEST_F(PipelineGpu, DegradableStageCountsGpuWorkStillQueuedAheadOfIt) {
  auto& exec = gpu();
  exec.cuda_context().make_current();
  linalg::cuda::DeviceBuffer<std::byte> buffer(std::size_t(256) << 20);
  constexpr int kRepeats = 20;
  // Calibrate: how long the heavy stage's GPU work takes here.
  double heavy_ms = 0;
  {
    HeavyStage heavy(buffer, kRepeats);
    FrameSlot unused;
    heavy.run(unused, exec);  // warm-up
    exec.synchronize();
    const auto start = std::chrono::steady_clock::now();
    heavy.run(unused, exec);
    exec.synchronize();
    heavy_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  ASSERT_GT(heavy_ms, 1.0) << "the heavy stage is too quick to tell queued work from done work";
  std::cout << "[ info     ] heavy stage: " << heavy_ms << " ms of GPU work\n";

  // Budget half the heavy work: the degradable stage itself is nearly free, and issuing the
  // heavy stage returns at once, so only the queued-work term can make it not fit. With a
  // budget of four times the heavy work it fits.
  for (const double budget : {heavy_ms / 2, heavy_ms * 4}) {
    const FrameShape shape = test::small_shape();
    std::vector<std::unique_ptr<Stage>> stages;
    stages.push_back(std::make_unique<HeavyStage>(buffer, kRepeats));
    stages.push_back(std::make_unique<test::FakeStage>("optional", 0us, true));
    std::vector<replay::Frame> frames;
    for (std::uint64_t s = 0; s < 8; ++s) frames.push_back(test::frame_for(shape, s));
    // Paced well apart so that no frame waits in the queue.
    test::ListInput input(std::move(frames), std::chrono::microseconds(std::int64_t(heavy_ms * 6000)));
    Metrics metrics;
    Runner runner(shape, std::move(stages), exec, {.budget_ms = budget, .queue_depth = 8, .overflow = Overflow::block}, metrics);
    runner.start(input);
    runner.wait();
    const auto s = metrics.snapshot();
    EXPECT_EQ(s.frames_done, 8u);
    EXPECT_NEAR(s.stages.at(0).predicted_ms, heavy_ms, heavy_ms * 0.5) << "event-timed heavy stage";
    if (budget < heavy_ms) {
      EXPECT_EQ(s.stages.at(1).ran, 1u) << "budget " << budget;
      EXPECT_EQ(s.stages.at(1).skipped_degraded, 7u) << "budget " << budget;
      EXPECT_EQ(s.frames_late, 8u);
    } else {
      EXPECT_EQ(s.stages.at(1).ran, 8u) << "budget " << budget;
      EXPECT_EQ(s.stages.at(1).skipped_degraded, 0u);
    }
  }
}

}  // namespace
}  // namespace covflow::pipeline

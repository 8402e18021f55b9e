#include "pipeline_bench.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "covflow/config/config.hpp"
#include "covflow/pipeline/endpoints.hpp"
#include "covflow/pipeline/metrics.hpp"
#include "covflow/pipeline/runner.hpp"
#include "covflow/stages/processing.hpp"
#include "covflow/stages/publish.hpp"
#include "covflow/stages/scenario.hpp"

namespace covflow::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Frames at a fixed rate from a few pre-generated templates (generating a 128-channel covariance
// frame takes longer than its 10 ms period), each delivered as a fresh copy with its own sequence
// number, as a live feed would deliver it. In place (the default): the copy goes straight into the
// pipeline's pinned frame slot, as a zero-copy receiver would write it; otherwise each frame is
// handed over for the ingest thread to copy.
class PacedInput final : public pipeline::FrameInput {
 public:
  PacedInput(std::vector<replay::Frame> templates, double rate_hz, std::uint64_t total, bool in_place)
      : templates_(std::move(templates)), period_(std::chrono::duration<double>(1.0 / rate_hz)), total_(total),
        in_place_(in_place) {}

  std::optional<replay::Frame> next(std::chrono::milliseconds wait) override {
    if (!wait_until_due(wait)) return std::nullopt;
    // Into the storage of a frame the runner handed back (recycle): no allocation, warm pages.
    const replay::Frame& model = templates_[sent_ % templates_.size()];
    replay::Frame frame = std::move(spare_);
    frame.header = stamped(model.header);
    frame.payload.assign(model.payload.begin(), model.payload.end());
    ++sent_;
    return frame;
  }
  bool fills_in_place() const override { return in_place_; }
  std::optional<replay::FrameHeader> next_into(std::chrono::milliseconds wait, std::span<std::byte> payload) override {
    if (!wait_until_due(wait)) return std::nullopt;
    const replay::Frame& model = templates_[sent_ % templates_.size()];
    const replay::FrameHeader header = stamped(model.header);
    if (model.payload.size() <= payload.size()) std::memcpy(payload.data(), model.payload.data(), model.payload.size());
    ++sent_;
    return header;
  }
  bool ended() const override { return sent_ >= total_; }
  void recycle(replay::Frame&& frame) override { spare_ = std::move(frame); }
  std::string describe() const override { return fmt::format("{} frames at {} Hz", total_, 1.0 / period_.count()); }
  std::uint64_t sent() const { return sent_; }

 private:
  // Sleeps until the next frame is due; false when it is not due within `wait` (or none is left).
  bool wait_until_due(std::chrono::milliseconds wait) {
    if (sent_ >= total_) return false;
    if (sent_ == 0 && start_ == Clock::time_point{}) start_ = Clock::now();
    const auto now = Clock::now();
    if (due() > now) {
      if (due() - now > wait) {
        std::this_thread::sleep_for(wait);
        return false;
      }
      std::this_thread::sleep_until(due());
    }
    return true;
  }
  Clock::time_point due() const {
    return start_ + std::chrono::duration_cast<Clock::duration>(period_ * double(sent_));
  }
  replay::FrameHeader stamped(replay::FrameHeader header) const {
    header.sequence = sent_;
    header.capture_time_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(due().time_since_epoch()).count();
    return header;
  }

 public:
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  std::vector<replay::Frame> templates_;
  std::chrono::duration<double> period_;
  std::uint64_t total_;
  bool in_place_;
  std::uint64_t sent_ = 0;
  Clock::time_point start_{};
  replay::Frame spare_;
};

// A thread that reads the clock in a tight loop and keeps every gap between two reads of at least
// 0.1 ms: time the host (kernel, hypervisor) took it off its CPU. It shows whether the frames' host
// work can be stalled for reasons outside the pipeline, and how often.
class HostProbe {
 public:
  HostProbe() : thread_([this] { spin(); }) {}
  ~HostProbe() { stop(); }
  HostProbe(const HostProbe&) = delete;
  HostProbe& operator=(const HostProbe&) = delete;
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  static constexpr std::pair<const char*, double> kFloors[] = {{"0.1", 0.1}, {"0.25", 0.25}, {"0.5", 0.5}, {"1", 1.0}, {"2", 2.0}};
  // Gap counts from each floor up (ms), the longest gap and the run's length.
  nlohmann::json summary() const {
    nlohmann::json counts = nlohmann::json::object();
    for (const auto& [label, floor_ms] : kFloors)
      counts[label] = std::count_if(gaps_ms_.begin(), gaps_ms_.end(), [&](double g) { return g >= floor_ms; });
    const double longest = gaps_ms_.empty() ? 0.0 : *std::max_element(gaps_ms_.begin(), gaps_ms_.end());
    double stalled = 0;
    for (double g : gaps_ms_) stalled += g;
    return {{"seconds", seconds_}, {"gaps_at_least_ms", counts}, {"longest_ms", longest}, {"stalled_ms", stalled}};
  }

 private:
  void spin() {
    gaps_ms_.reserve(1 << 20);
    const auto start = Clock::now();
    auto last = start;
    while (!stop_.load(std::memory_order_relaxed)) {
      const auto now = Clock::now();
      const double gap = std::chrono::duration<double, std::milli>(now - last).count();
      if (gap >= 0.1 && gaps_ms_.size() < gaps_ms_.capacity()) gaps_ms_.push_back(gap);
      last = now;
    }
    seconds_ = std::chrono::duration<double>(last - start).count();
  }
  std::atomic<bool> stop_{false};
  std::vector<double> gaps_ms_;
  double seconds_ = 0;
  std::thread thread_;
};

// Every done frame's end-to-end latency and the part of it its stages account for; summarised
// over the slowest 1 % of frames, it says whether the tail is in a stage or between them (the
// upload, the waits and the hand-offs, which no stage times).
struct FrameTimes {
  std::vector<double> end_to_end_ms, in_stages_ms, publish_ms;
  void add(const pipeline::FrameSlot& slot) {
    if (slot.times.done_ns == 0 || end_to_end_ms.size() == end_to_end_ms.capacity()) return;
    double stages = 0;
    for (const auto& record : slot.stages) stages += record.ms;
    end_to_end_ms.push_back(double(slot.times.done_ns - slot.times.arrival_ns) * 1e-6);
    in_stages_ms.push_back(stages);
    publish_ms.push_back(slot.stages.empty() ? 0.0 : slot.stages.back().ms);
  }
  nlohmann::json slowest_percent() const {
    std::vector<std::size_t> order(end_to_end_ms.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    const std::size_t count = std::max<std::size_t>(1, order.size() / 100);
    if (order.empty()) return nullptr;
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(count), order.end(),
                      [&](std::size_t a, std::size_t b) { return end_to_end_ms[a] > end_to_end_ms[b]; });
    double e2e = 0, in_stages = 0, publish = 0;
    for (std::size_t k = 0; k < count; ++k) {
      e2e += end_to_end_ms[order[k]];
      in_stages += in_stages_ms[order[k]];
      publish += publish_ms[order[k]];
    }
    const double n = double(count);
    return {{"frames", count}, {"end_to_end_ms", e2e / n}, {"in_stages_ms", in_stages / n},
            {"publish_ms", publish / n}, {"outside_stages_ms", (e2e - in_stages) / n}};
  }
};

config::Config reference_config(const PipelineBenchOptions& o) {
  config::Config cfg;
  cfg.scenario.elements = o.channels;
  cfg.scenario.cells = o.cells;
  cfg.scenario.snapshots = 4 * o.channels;  // the covariance estimates' snapshot count (MDL's K)
  cfg.scenario.payload = config::ScenarioPayload::covariance;
  cfg.scenario.element_type = config::SampleType::cf64;
  cfg.scenario.frame_rate_hz = o.rate_hz;
  cfg.pipeline.budget_ms = o.budget_ms;
  cfg.pipeline.queue_depth = 8;
  cfg.pipeline.overflow = config::Overflow::drop_oldest;
  cfg.pipeline.stages.adaptive.enabled = false;
  return cfg;
}

nlohmann::json run_one(const std::string& backend, linalg::Exec& exec, const config::Config& cfg,
                       const std::vector<replay::Frame>& templates, const PipelineBenchOptions& o, double seconds) {
  const auto total = std::uint64_t(std::max(1.0, seconds * o.rate_hz));
  pipeline::Metrics metrics;
  auto chain = stages::make_processing_stages(cfg);
  std::vector<std::string> names;
  for (const auto& stage : chain) names.emplace_back(stage->name());
  names.emplace_back("publish");
  auto results = std::make_shared<pipeline::ResultsPublisher>("tcp://127.0.0.1:*", "covflow-bench results");
  chain.push_back(std::make_unique<stages::PublishStage>(
      results, stages::PublishOptions{.record_path = {}, .stage_names = names, .json = {}}));
  pipeline::RunnerOptions options;
  options.budget_ms = cfg.pipeline.budget_ms;
  options.queue_depth = std::size_t(cfg.pipeline.queue_depth);
  options.overflow = cfg.pipeline.overflow;
  FrameTimes frame_times;
  frame_times.end_to_end_ms.reserve(total);
  frame_times.in_stages_ms.reserve(total);
  frame_times.publish_ms.reserve(total);
  pipeline::Runner runner(stages::frame_shape(cfg), std::move(chain), exec, options, metrics,
                          [&](const pipeline::FrameSlot& slot) { frame_times.add(slot); });

  fmt::print("pipeline on {}: {} frames at {} Hz ({:.0f} s) of {} cells × {}² complex double covariance, {}...\n", backend,
             total, o.rate_hz, seconds, o.cells, o.channels,
             o.copy_input ? "copied by the ingest thread" : "written into the frame slots");
  std::fflush(stdout);
  PacedInput input(templates, o.rate_hz, total, !o.copy_input);
  std::optional<HostProbe> probe;
  if (o.probe_host) probe.emplace();
  runner.start(input);
  const auto start = Clock::now();
  auto last_progress = start;
  while (!runner.wait_for(std::chrono::milliseconds(200))) {
    if (Clock::now() - last_progress > std::chrono::seconds(10)) {
      const auto s = metrics.snapshot();
      fmt::print("  {:.0f} s: in {}, done {}, dropped {}, late {}\n",
                 std::chrono::duration<double>(Clock::now() - start).count(), s.frames_in, s.frames_done,
                 s.frames_dropped, s.frames_late);
      std::fflush(stdout);
      last_progress = Clock::now();
    }
  }
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  if (probe) probe->stop();
  const auto s = metrics.snapshot();
  nlohmann::json run = pipeline::to_json(s);
  run["backend"] = backend;
  run["sent"] = input.sent();
  run["input"] = o.copy_input ? "copied by the ingest thread" : "written into the frame slots";
  run["wall_s"] = wall;
  run["frames_per_s"] = double(s.frames_done) / wall;
  run["rate_hz"] = o.rate_hz;
  run["budget_ms"] = o.budget_ms;

  fmt::print("  sent {}  done {}  dropped {}  late {}  ({:.1f} frames/s done over {:.1f} s; the input was paced "
             "for {:.0f} s)\n", input.sent(), s.frames_done, s.frames_dropped, s.frames_late,
             double(s.frames_done) / wall, wall, double(total) / o.rate_hz);
  for (const auto& [reason, count] : s.dropped_by_reason) fmt::print("    dropped ({}): {}\n", reason, count);
  fmt::print("  {:<12}{:>9}{:>9}{:>9}{:>10}{:>9}\n", "latency ms", "p50", "p90", "p99", "p99.9", "max");
  auto row = [](const std::string& name, const pipeline::LatencySummary& l) {
    fmt::print("  {:<12}{:>9.3f}{:>9.3f}{:>9.3f}{:>10.3f}{:>9.3f}\n", name, l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms,
               l.max_ms);
  };
  for (const auto& stage : s.stages) row(stage.name, stage.latency);
  row("end to end", s.end_to_end);
  run["slowest_percent"] = frame_times.slowest_percent();
  if (const auto& slow = run["slowest_percent"]; !slow.is_null())
    fmt::print("  slowest 1 % ({} frames), mean: end to end {:.3f} ms = stages {:.3f} (publish {:.3f}) + outside the "
               "stages {:.3f} (upload, waits, hand-offs)\n",
               slow["frames"].get<std::size_t>(), slow["end_to_end_ms"].get<double>(), slow["in_stages_ms"].get<double>(),
               slow["publish_ms"].get<double>(), slow["outside_stages_ms"].get<double>());
  if (probe) {
    run["host_probe"] = probe->summary();
    const auto& p = run["host_probe"];
    fmt::print("  host probe ({:.0f} s spinning on the clock): gaps >= 0.1 / 0.25 / 0.5 / 1 / 2 ms: {} / {} / {} / {} / {}; "
               "longest {:.3f} ms; {:.1f} ms off the CPU in all\n",
               p["seconds"].get<double>(), p["gaps_at_least_ms"]["0.1"].get<long>(), p["gaps_at_least_ms"]["0.25"].get<long>(),
               p["gaps_at_least_ms"]["0.5"].get<long>(), p["gaps_at_least_ms"]["1"].get<long>(),
               p["gaps_at_least_ms"]["2"].get<long>(), p["longest_ms"].get<double>(), p["stalled_ms"].get<double>());
  }
  return run;
}

}  // namespace

nlohmann::json run_pipeline_bench(const Settings& settings, const PipelineBenchOptions& options, linalg::Exec* gpu,
                                  linalg::Exec& cpu) {
  fmt::print("\n== pipeline: covariance frames of {} cells × {} channels at {} Hz, budget {} ms ==\n", options.cells,
             options.channels, options.rate_hz, options.budget_ms);
  const config::Config cfg = reference_config(options);
  stages::ScenarioGenerator generator(cfg.scenario);
  std::vector<replay::Frame> templates;
  for (std::uint64_t s = 0; s < 4; ++s) templates.push_back(generator.frame(s));

  nlohmann::json runs = nlohmann::json::array();
  const double scale = settings.quick ? 0.1 : 1.0;
  if (gpu) runs.push_back(run_one("cuda", *gpu, cfg, templates, options, options.gpu_seconds * scale));
  if (settings.cpu) runs.push_back(run_one("cpu", cpu, cfg, templates, options, options.cpu_seconds * scale));
  return {{"benchmark", "pipeline"},
          {"cells", options.cells},
          {"channels", options.channels},
          {"element_type", "cf64"},
          {"payload", "covariance"},
          {"runs", runs}};
}

}  // namespace covflow::bench

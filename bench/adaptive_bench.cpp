#include "adaptive_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "covflow/config/config.hpp"
#include "covflow/linalg/heev.hpp"
#include "covflow/pipeline/frame.hpp"
#include "covflow/pipeline/stage.hpp"
#include "covflow/stages/adaptive_stage.hpp"
#include "covflow/stages/processing.hpp"
#include "covflow/stages/scenario.hpp"
#if COVFLOW_HAS_CUDA
#include <cuda_runtime.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::bench {
namespace {

using Clock = std::chrono::steady_clock;
using cd = std::complex<double>;

constexpr const char* kLegacyVariable = "COVFLOW_ADAPTIVE_LEGACY";
// Distinct frames drawn from the scenario and cycled (with fresh sequence numbers): a window holds
// W/K of them (4 by default), so every window is made of distinct snapshots.
constexpr std::uint64_t kTemplates = 16;

// COVFLOW_ADAPTIVE_LEGACY set to select a path while a stage is prepared (prepare() reads it),
// then put back as it was.
class LegacySwitch {
 public:
  explicit LegacySwitch(bool legacy) {
    if (const char* value = std::getenv(kLegacyVariable)) previous_ = value;
    ::setenv(kLegacyVariable, legacy ? "1" : "0", 1);
  }
  ~LegacySwitch() {
    if (previous_) ::setenv(kLegacyVariable, previous_->c_str(), 1);
    else ::unsetenv(kLegacyVariable);
  }
  LegacySwitch(const LegacySwitch&) = delete;
  LegacySwitch& operator=(const LegacySwitch&) = delete;

 private:
  std::optional<std::string> previous_;
};

config::Config bench_config(const AdaptiveBenchOptions& options) {
  config::Config c;
  c.scenario.elements = options.channels;
  c.scenario.snapshots = options.snapshots;
  c.scenario.cells = options.cells;
  c.scenario.element_type = options.dtype == "cf32" ? config::SampleType::cf32 : config::SampleType::cf64;
  c.pipeline.stages.covariance.enabled = false;
  c.pipeline.stages.subspace.enabled = false;
  auto& adaptive = c.pipeline.stages.adaptive;
  adaptive.refactor_every = options.refactor_every;
  if (options.looks > 1) {
    adaptive.looks_deg.clear();
    for (int l = 0; l < options.looks; ++l) adaptive.looks_deg.push_back(-60.0 + 120.0 * l / (options.looks - 1));
  }
  return c;
}

// One path of the stage on one lane: its chain (the adaptive stage alone), a frame slot allocated
// as the runner allocates it (host payload; on a CUDA lane a pinned host payload and a device
// copy), and its frame times.
struct Path {
  Path(std::string path_name, const config::Config& c, const pipeline::FrameShape& shape, linalg::Exec& exec,
       bool legacy)
      : name(std::move(path_name)) {
    {
      LegacySwitch selected(legacy);
      chain = stages::make_processing_stages(c);
      if (chain.size() != 1) throw std::logic_error("adaptive bench: expected the adaptive stage alone");
      stage = dynamic_cast<stages::AdaptiveStage*>(chain.front().get());
      if (stage == nullptr) throw std::logic_error("adaptive bench: the chain's stage is not the adaptive stage");
      stage->prepare(shape, exec);
    }
    slot.results.reserve(shape);
    slot.stages.resize(1);
    const std::size_t payload_bytes = shape.max_payload_bytes();
    if (exec.is_cuda()) {
#if COVFLOW_HAS_CUDA
      pinned_payload = linalg::cuda::PinnedBuffer<std::byte>(payload_bytes);
      device_payload = linalg::cuda::DeviceBuffer<std::byte>(payload_bytes);
      slot.host.payload = std::span<std::byte>(pinned_payload.data(), payload_bytes);
      slot.device.payload = device_payload.data();
#endif
    } else {
      host_payload.resize(payload_bytes);
      slot.host.payload = host_payload;
    }
  }

  // The frame into the slot (and onto the device, waited for: the runner's copy stream has it
  // there before the stage runs), then the stage's run() and collect() on the clock. Whether the
  // frame refactored every cell comes back in `refactored`.
  double run(const replay::Frame& frame, std::uint64_t sequence, linalg::Exec& exec, bool* refactored = nullptr) {
    slot.sequence = sequence;
    slot.header = frame.header;
    slot.header.sequence = sequence;
    slot.results.clear();
    std::memcpy(slot.host.payload.data(), frame.payload.data(), frame.payload.size());
#if COVFLOW_HAS_CUDA
    if (exec.is_cuda()) {
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(slot.device.payload, slot.host.payload.data(), frame.payload.size(),
                                       cudaMemcpyHostToDevice, exec.cuda_context().stream()));
      exec.synchronize();
    }
#endif
    const std::uint64_t refactors = stage->counters().periodic_refactors;
    const auto start = Clock::now();
    stage->run(slot, exec);
    exec.synchronize();  // the runner's wait before collect() (nothing to wait for on a CPU lane)
    stage->collect(slot, exec);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (refactored != nullptr) *refactored = stage->counters().periodic_refactors != refactors;
    return ms;
  }

  std::string name;
  std::vector<std::unique_ptr<pipeline::Stage>> chain;
  stages::AdaptiveStage* stage = nullptr;
  pipeline::FrameSlot slot;
  std::vector<std::byte> host_payload;
#if COVFLOW_HAS_CUDA
  linalg::cuda::PinnedBuffer<std::byte> pinned_payload;
  linalg::cuda::DeviceBuffer<std::byte> device_payload;
#endif
  std::vector<double> ms, refactor_ms;
};

double percentile(std::vector<double> ms, double p) {
  if (ms.empty()) return 0.0;
  std::sort(ms.begin(), ms.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p * double(ms.size())));
  return ms[std::clamp<std::size_t>(rank, 1, ms.size()) - 1];
}

Timing timing_of(const std::vector<double>& ms) {
  Timing t;
  t.reps = static_cast<int>(ms.size());
  if (ms.empty()) return t;
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t mid = sorted.size() / 2;
  t.median_ms = sorted.size() % 2 ? sorted[mid] : 0.5 * (sorted[mid - 1] + sorted[mid]);
  t.min_ms = sorted.front();
  t.max_ms = sorted.back();
  return t;
}

// κ₂ of the scenario's model covariance plus the stage's loading, from linalg::heev on the CPU:
// the scale of the weights' sensitivity to rounding in the factor.
double model_condition(const config::Config& c, linalg::Exec& cpu) {
  const std::int64_t n = c.scenario.elements;
  std::vector<cd> r = stages::model_covariance(c.scenario);
  for (std::int64_t i = 0; i < n; ++i) r[std::size_t(i + i * n)] += c.pipeline.stages.adaptive.diagonal_loading;
  std::vector<double> w(static_cast<std::size_t>(n));
  std::vector<int> info(1);
  linalg::heev<cd>(cpu, linalg::Batch<cd>::packed(r.data(), n, n, 1), w, info);
  if (info[0] != 0) throw std::runtime_error("adaptive bench: heev of the model covariance failed");
  return w.back() / w.front();
}

// Largest ‖w_a − w_b‖ / ‖w_b‖ over the beams of the last frame; infinity where a weight is not
// finite on either path.
double weight_difference(const pipeline::FrameResults& a, const pipeline::FrameResults& b, std::size_t beams,
                         std::size_t n) {
  double worst = 0.0;
  for (std::size_t beam = 0; beam < beams; ++beam) {
    double diff = 0.0, norm = 0.0;
    for (std::size_t m = 0; m < n; ++m) {
      const cd x(a.weights[beam * n + m]), y(b.weights[beam * n + m]);
      diff += std::norm(x - y);
      norm += std::norm(y);
    }
    const double relative = std::sqrt(diff / norm);
    worst = std::isfinite(relative) ? std::max(worst, relative) : std::numeric_limits<double>::infinity();
  }
  return worst;
}

void run_device(Report& report, std::vector<double>& p99s, const AdaptiveBenchOptions& options, int frames,
                linalg::Exec& exec, linalg::Exec& cpu, const char* device) {
  const config::Config c = bench_config(options);
  const pipeline::FrameShape shape = stages::frame_shape(c);
  const std::size_t n = shape.channels, cells = shape.cells, looks = shape.looks, beams = cells * looks;
  const auto& adaptive = c.pipeline.stages.adaptive;
  const std::string shape_name = fmt::format("{}x{} K{} L{} W{} r{}", cells, n, shape.snapshots, looks,
                                             adaptive.window_snapshots, adaptive.refactor_every);
  fmt::print("adaptive {} {} {}: drawing {} frames from the scenario\n", device, options.dtype, shape_name, kTemplates);
  stages::ScenarioGenerator generator(c.scenario);
  std::vector<replay::Frame> templates;
  for (std::uint64_t s = 0; s < kTemplates; ++s) templates.push_back(generator.frame(s));

  std::vector<Path> paths;
  paths.reserve(2);
  paths.emplace_back("legacy", c, shape, exec, true);
  paths.emplace_back("linalg", c, shape, exec, false);
  // The runner's warm start: the stage's warm-up frames, then reset() (a fresh window, counters 0).
  const int warm_up = paths.front().stage->warm_up_frames(shape);
  for (Path& path : paths) {
    for (int f = 0; f < warm_up; ++f) path.run(templates[std::size_t(f) % kTemplates], std::uint64_t(f), exec);
    path.stage->reset(exec);
  }
  const std::size_t growth_before = exec.workspace().growth_count();
  for (int f = 0; f < frames; ++f)
    for (Path& path : paths) {
      bool refactored = false;
      const double ms = path.run(templates[std::size_t(f) % kTemplates], std::uint64_t(f), exec, &refactored);
      path.ms.push_back(ms);
      if (refactored) path.refactor_ms.push_back(ms);
    }
  const std::size_t growth = exec.workspace().growth_count() - growth_before;

  const double epsilon = options.dtype == "cf32" ? double(std::numeric_limits<float>::epsilon())
                                                 : std::numeric_limits<double>::epsilon();
  const double kappa = model_condition(c, cpu);
  const double tolerance = 8.0 * double(n) * epsilon * kappa + 4.0 * double(std::numeric_limits<float>::epsilon());
  const double difference = weight_difference(paths[1].slot.results, paths[0].slot.results, beams, n);
  const double legacy_median = timing_of(paths[0].ms).median_ms;
  for (Path& path : paths) {
    Row row;
    row.op = "adaptive";
    row.dtype = options.dtype;
    row.shape = shape_name;
    row.input = path.name;
    // A frame without a refactor (docs/stages.md, "Cost"): 16·K·N² real flops of rotations per
    // cell, 8·L·N² for the beams.
    row.flops = double(cells) * (16.0 * shape.snapshots * n * n + 8.0 * looks * n * n);
    const Timing timing = timing_of(path.ms);
    row.times[device] = timing;
    const double p99 = percentile(path.ms, 0.99);
    p99s.push_back(p99);
    row.notes["p99_ms"] = fmt::format("{:.4f}", p99);
    row.notes["refactor_frames"] =
        fmt::format("{} (median {:.4f} ms)", path.refactor_ms.size(), timing_of(path.refactor_ms).median_ms);
    if (path.name == "linalg") {
      row.notes["linalg_over_legacy"] = fmt::format("{:.3f}", timing.median_ms / legacy_median);
      row.notes["weights_vs_legacy"] = fmt::format("max ‖Δw‖/‖w‖ {:.3g} ≤ {:.3g} (8·N·ε·κ + 4·ε_float, κ {:.3g})",
                                                   difference, tolerance, kappa);
      if (!(difference <= tolerance))
        row.fail(fmt::format("last frame's weights differ from the legacy path's by {:.3g} > {:.3g}", difference,
                             tolerance));
    }
    const pipeline::FrameResults& results = path.slot.results;
    if (results.cells != cells) row.fail(fmt::format("the last frame has results for {} cells of {}", results.cells, cells));
    const auto bad = std::count_if(results.cell_status.begin(), results.cell_status.begin() + cells,
                                   [](std::int32_t status) { return status != 0; });
    if (bad > 0) row.fail(fmt::format("{} cells with a nonzero status on the last frame", bad));
    const auto counters = path.stage->counters();
    if (counters.unrecoverable_cells > 0) row.fail(fmt::format("{} unrecoverable cell-frames", counters.unrecoverable_cells));
    if (growth > 0) row.fail(fmt::format("the workspace grew {} times during the timed frames", growth));
    report.add(std::move(row));
  }
}

}  // namespace

nlohmann::json run_adaptive_bench(const Settings& settings, const AdaptiveBenchOptions& options, linalg::Exec* gpu,
                                  linalg::Exec& cpu) {
  const int frames = options.frames > 0 ? options.frames : (settings.quick ? 40 : 200);
  Report report("adaptive stage per frame (median; p99 and refactor frames below): legacy vs linalg");
  std::vector<double> p99s;
  const bool want_cpu = options.device != "cuda" && settings.cpu;
  const bool want_cuda = options.device != "cpu";
  if (want_cpu) run_device(report, p99s, options, frames, cpu, cpu, "cpu");
  if (want_cuda) {
    if (gpu != nullptr) run_device(report, p99s, options, frames, *gpu, cpu, "cuda");
    else fmt::print("adaptive: no GPU: the cuda rows are not run\n");
  }
  report.print();
  nlohmann::json json = report.to_json();
  json["frames"] = frames;
  auto& rows = json["rows"];
  for (std::size_t i = 0; i < rows.size() && i < p99s.size(); ++i)
    for (auto& timing : rows[i]["times"]) timing["p99_ms"] = p99s[i];
  return json;
}

}  // namespace covflow::bench

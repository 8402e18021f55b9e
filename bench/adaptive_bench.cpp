#include "adaptive_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <memory>
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

// Distinct frames drawn from the scenario and cycled (with fresh sequence numbers): a window holds
// W/K of them (4 by default), so every window is made of distinct snapshots.
constexpr std::uint64_t kTemplates = 16;

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
  adaptive.update_rank = options.update_rank;
  adaptive.window_snapshots = options.window;
  if (options.looks > 1) {
    adaptive.looks_deg.clear();
    for (int l = 0; l < options.looks; ++l) adaptive.looks_deg.push_back(-60.0 + 120.0 * l / (options.looks - 1));
  }
  return c;
}

// The stage on one lane: its chain (the adaptive stage alone), a frame slot allocated as the
// runner allocates it (host payload; on a CUDA lane a pinned host payload and a device copy), and
// its frame times.
struct Harness {
  Harness(const config::Config& c, const pipeline::FrameShape& shape, linalg::Exec& exec) {
    chain = stages::make_processing_stages(c);
    if (chain.size() != 1) throw std::logic_error("adaptive bench: expected the adaptive stage alone");
    stage = dynamic_cast<stages::AdaptiveStage*>(chain.front().get());
    if (stage == nullptr) throw std::logic_error("adaptive bench: the chain's stage is not the adaptive stage");
    stage->prepare(shape, exec);
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

// The last frame's weights against the factors the stage holds after it (adaptive_bench.hpp says
// what is checked and why): per beam the normwise residual of R̃·w = (wᴴR̃w)·a with R̃ = L·Lᴴ, and
// |wᴴa − 1| over its bound 8·N·ε·κ + 4·ε_float·√κ, κ = κ₂(R̃) from linalg::heev on the CPU. Sums in
// long double; a beam with a weight that is not finite is counted and not evaluated.
struct WeightCheck {
  std::size_t non_finite_beams = 0;
  double residual = 0.0;               // largest normwise residual
  double distortion = 0.0;             // largest |wᴴa − 1|
  double distortion_over_bound = 0.0;  // largest |wᴴa − 1| / its bound (+∞ where κ is unknown)
  double kappa = 0.0;                  // largest κ₂(R̃) over the cells
};

WeightCheck check_weights(const config::Config& c, const pipeline::FrameResults& results,
                          const std::vector<cd>& factors, std::size_t cells, std::size_t n, double epsilon,
                          linalg::Exec& cpu) {
  using cl = std::complex<long double>;
  const auto& looks_deg = c.pipeline.stages.adaptive.looks_deg;
  const std::size_t looks = looks_deg.size(), nn = n * n;
  const double epsilon_float = std::numeric_limits<float>::epsilon();
  std::vector<std::vector<cd>> steering;
  for (double look : looks_deg)
    steering.push_back(stages::steering_vector(std::int64_t(n), c.scenario.spacing_wavelengths, look));

  // R̃ = L·Lᴴ per cell (lower triangle, which is what heev reads), its Frobenius norm, and κ₂.
  std::vector<cd> held(cells * nn);
  std::vector<double> held_norm(cells);
  for (std::size_t cell = 0; cell < cells; ++cell) {
    const cd* l = factors.data() + cell * nn;
    long double norm2 = 0;
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = j; i < n; ++i) {
        cl sum = 0;
        for (std::size_t k = 0; k <= j; ++k) sum += cl(l[i + k * n]) * std::conj(cl(l[j + k * n]));
        held[cell * nn + i + j * n] = cd(sum);
        norm2 += (i == j ? 1 : 2) * std::norm(sum);
      }
    held_norm[cell] = static_cast<double>(std::sqrt(norm2));
  }
  std::vector<double> eigenvalues(cells * n);
  std::vector<int> info(cells);
  linalg::HeevOptions values_only;
  values_only.vectors = false;
  linalg::heev<cd>(cpu, linalg::Batch<cd>::packed(held.data(), std::int64_t(n), std::int64_t(n), std::int64_t(cells)),
                   eigenvalues, info, values_only);

  WeightCheck check;
  std::vector<cl> w(n), u(n);
  for (std::size_t cell = 0; cell < cells; ++cell) {
    const cd* l = factors.data() + cell * nn;
    const double smallest = eigenvalues[cell * n], largest = eigenvalues[cell * n + n - 1];
    const double kappa = info[cell] == 0 && smallest > 0.0 ? largest / smallest : std::numeric_limits<double>::infinity();
    check.kappa = std::max(check.kappa, kappa);
    for (std::size_t look = 0; look < looks; ++look) {
      const std::size_t beam = cell * looks + look;
      bool finite = true;
      for (std::size_t m = 0; m < n; ++m) {
        const std::complex<float> v = results.weights[beam * n + m];
        finite = finite && std::isfinite(v.real()) && std::isfinite(v.imag());
        w[m] = cl(v.real(), v.imag());
      }
      if (!finite) {
        ++check.non_finite_beams;
        continue;
      }
      const std::vector<cd>& a = steering[look];
      // u = Lᴴw, then R̃w = L·u and wᴴR̃w = ‖u‖².
      long double quadratic = 0, w_norm2 = 0;
      for (std::size_t k = 0; k < n; ++k) {
        cl sum = 0;
        for (std::size_t i = k; i < n; ++i) sum += std::conj(cl(l[i + k * n])) * w[i];
        u[k] = sum;
        quadratic += std::norm(sum);
        w_norm2 += std::norm(w[k]);
      }
      long double residual2 = 0, a_norm2 = 0;
      cl response = 0;  // wᴴa
      for (std::size_t i = 0; i < n; ++i) {
        cl r_w = 0;
        for (std::size_t k = 0; k <= i; ++k) r_w += cl(l[i + k * n]) * u[k];
        residual2 += std::norm(r_w - quadratic * cl(a[i]));
        response += std::conj(w[i]) * cl(a[i]);
        a_norm2 += std::norm(cl(a[i]));
      }
      const long double scale = held_norm[cell] * std::sqrt(w_norm2) + quadratic * std::sqrt(a_norm2);
      const double residual = static_cast<double>(std::sqrt(residual2) / scale);
      check.residual = std::isfinite(residual) ? std::max(check.residual, residual) : residual;
      const double distortion = static_cast<double>(std::abs(response - cl(1)));
      const double bound = 8.0 * double(n) * epsilon * kappa + 4.0 * epsilon_float * std::sqrt(kappa);
      check.distortion = std::max(check.distortion, distortion);
      check.distortion_over_bound = std::isfinite(bound) ? std::max(check.distortion_over_bound, distortion / bound)
                                                         : std::numeric_limits<double>::infinity();
    }
  }
  return check;
}

void run_device(Report& report, std::vector<double>& p99s, const AdaptiveBenchOptions& options, int frames,
                linalg::Exec& exec, linalg::Exec& cpu, const char* device) {
  const config::Config c = bench_config(options);
  const pipeline::FrameShape shape = stages::frame_shape(c);
  const std::size_t n = shape.channels, cells = shape.cells, looks = shape.looks;
  const auto& adaptive = c.pipeline.stages.adaptive;
  const std::string shape_name = fmt::format("{}x{} K{} L{} W{} r{} k{}", cells, n, shape.snapshots, looks,
                                             adaptive.window_snapshots, adaptive.refactor_every, adaptive.update_rank);
  fmt::print("adaptive {} {} {}: drawing {} frames from the scenario\n", device, options.dtype, shape_name, kTemplates);
  stages::ScenarioGenerator generator(c.scenario);
  std::vector<replay::Frame> templates;
  for (std::uint64_t s = 0; s < kTemplates; ++s) templates.push_back(generator.frame(s));

  Harness harness(c, shape, exec);
  // The runner's warm start: the stage's warm-up frames, then reset() (a fresh window, counters 0).
  const int warm_up = harness.stage->warm_up_frames(shape);
  for (int f = 0; f < warm_up; ++f) harness.run(templates[std::size_t(f) % kTemplates], std::uint64_t(f), exec);
  harness.stage->reset(exec);
  const std::size_t growth_before = exec.workspace().growth_count();
  for (int f = 0; f < frames; ++f) {
    bool refactored = false;
    const double ms = harness.run(templates[std::size_t(f) % kTemplates], std::uint64_t(f), exec, &refactored);
    harness.ms.push_back(ms);
    if (refactored) harness.refactor_ms.push_back(ms);
  }
  const std::size_t growth = exec.workspace().growth_count() - growth_before;

  Row row;
  row.op = "adaptive";
  row.dtype = options.dtype;
  row.shape = shape_name;
  // A frame without a refactor (docs/stages.md, "Cost"): 16·K·N² real flops of rotations per
  // cell, 8·L·N² for the beams.
  row.flops = double(cells) * (16.0 * shape.snapshots * n * n + 8.0 * looks * n * n);
  const Timing timing = timing_of(harness.ms);
  row.times[device] = timing;
  const double p99 = percentile(harness.ms, 0.99);
  p99s.push_back(p99);
  row.notes["p99_ms"] = fmt::format("{:.4f}", p99);
  row.notes["refactor_frames"] =
      fmt::format("{} (median {:.4f} ms)", harness.refactor_ms.size(), timing_of(harness.refactor_ms).median_ms);

  const pipeline::FrameResults& results = harness.slot.results;
  if (results.cells != cells) row.fail(fmt::format("the last frame has results for {} cells of {}", results.cells, cells));
  const auto bad = std::count_if(results.cell_status.begin(), results.cell_status.begin() + cells,
                                 [](std::int32_t status) { return status != 0; });
  if (bad > 0) row.fail(fmt::format("{} cells with a nonzero status on the last frame", bad));
  const auto counters = harness.stage->counters();
  if (counters.unrecoverable_cells > 0) row.fail(fmt::format("{} unrecoverable cell-frames", counters.unrecoverable_cells));
  if (growth > 0) row.fail(fmt::format("the workspace grew {} times during the timed frames", growth));

  const double epsilon = options.dtype == "cf32" ? double(std::numeric_limits<float>::epsilon())
                                                 : std::numeric_limits<double>::epsilon();
  const WeightCheck check = check_weights(c, results, harness.stage->factors(exec), cells, n, epsilon, cpu);
  const double residual_bound = 8.0 * double(n) * epsilon + 4.0 * double(std::numeric_limits<float>::epsilon());
  row.notes["mvdr_residual"] =
      fmt::format("max ‖R̃w − (wᴴR̃w)a‖/(‖R̃‖‖w‖ + (wᴴR̃w)‖a‖) {:.3g} ≤ {:.3g} (8·N·ε + 4·ε_float)", check.residual,
                  residual_bound);
  row.notes["distortionless"] = fmt::format("max |wᴴa − 1| {:.3g}, {:.3g} of its bound 8·N·ε·κ + 4·ε_float·√κ (κ ≤ {:.3g})",
                                            check.distortion, check.distortion_over_bound, check.kappa);
  if (check.non_finite_beams > 0)
    row.fail(fmt::format("{} beams of the last frame with a weight that is not finite", check.non_finite_beams));
  if (!(check.residual <= residual_bound))
    row.fail(fmt::format("the last frame's weights do not solve R̃w = (wᴴR̃w)a: residual {:.3g} > {:.3g}",
                         check.residual, residual_bound));
  if (!(check.distortion_over_bound <= 1.0))
    row.fail(fmt::format("the last frame's weights miss wᴴa = 1 by {:.3g}, {:.3g} times the bound", check.distortion,
                         check.distortion_over_bound));
  report.add(std::move(row));
}

}  // namespace

nlohmann::json run_adaptive_bench(const Settings& settings, const AdaptiveBenchOptions& options, linalg::Exec* gpu,
                                  linalg::Exec& cpu) {
  const int frames = options.frames > 0 ? options.frames : (settings.quick ? 40 : 200);
  Report report("adaptive stage per frame (median; p99 and refactor frames below)");
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

// covflowd: the daemon. Until the scheduler and stages exist (issue 5) it runs a stand-in main
// job: frames from the configured ingest source (the built-in scenario by default) through the
// covariance operation on the configured backend, ending with a latency report, so the README's
// main-job command exercises the real build end to end. Configuration: docs/config.md.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <complex>
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "covflow/config/load.hpp"
#include "covflow/config/schema.hpp"
#include "covflow/linalg/covariance.hpp"
#include "covflow/linalg/device.hpp"
#include "covflow/pipeline/logging.hpp"
#include "covflow/stages/ingest.hpp"
#include "common/guarded_main.hpp"
#if COVFLOW_HAS_CUDA
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace {

using namespace covflow;
using linalg::Batch;
using linalg::Exec;

std::atomic<bool> stop_requested{false};
extern "C" void on_signal(int) { stop_requested = true; }

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(p / 100.0 * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

// Times sample_covariance on one snapshot frame (host to host on CUDA).
class CovarianceTimer {
 public:
  explicit CovarianceTimer(Exec& exec) : exec_(exec) {}

  template <class T>
  double time(const replay::Frame& frame) {
    const auto x = replay::payload_as<T>(frame);
    const auto& h = frame.header;
    std::vector<T> r(std::size_t(h.rows) * h.rows * h.count);
    if (exec_.is_cuda()) {
#if COVFLOW_HAS_CUDA
      auto stream = exec_.cuda_context().stream();
      linalg::cuda::DeviceBuffer<T> dx(x.size()), dr(r.size());  // allocated outside the timed part
      const auto start = std::chrono::steady_clock::now();
      dx.upload(x, stream);
      linalg::sample_covariance<T>(exec_, Batch<const T>::packed(dx.data(), h.rows, h.cols, h.count),
                                   Batch<T>::packed(dr.data(), h.rows, h.rows, h.count), {.diagonal_loading = 1e-3});
      dr.download(r, stream);
      exec_.synchronize();
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
#endif
    }
    const auto start = std::chrono::steady_clock::now();
    linalg::sample_covariance<T>(exec_, Batch<const T>::packed(x.data(), h.rows, h.cols, h.count),
                                 Batch<T>::packed(r.data(), h.rows, h.rows, h.count), {.diagonal_loading = 1e-3});
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }

 private:
  Exec& exec_;
};

Exec make_exec(const config::DeviceConfig& device) {
  const int gpu = device.gpus.empty() ? 0 : int(device.gpus.front());
  switch (device.backend) {
    case config::Backend::cpu: return Exec::cpu();
    case config::Backend::cuda: return Exec::cuda({.device = gpu});
    case config::Backend::automatic: break;
  }
  return linalg::probe_devices().available() ? Exec::cuda({.device = gpu}) : Exec::cpu();
}

std::unique_ptr<stages::FrameSource> make_source(const config::Config& cfg, std::uint64_t frames) {
  switch (cfg.ingest.source) {
    case config::IngestSource::synth: return stages::scenario_source(cfg.scenario, frames);
    case config::IngestSource::file: return stages::replay_source(cfg.ingest.file.path, stages::replay_options(cfg.ingest.file));
    case config::IngestSource::zmq: return stages::zmq_source(cfg.ingest.zmq.endpoint, cfg.ingest.zmq.pattern);
  }
  throw std::logic_error("unknown ingest source");
}

int run_demo(const config::Config& cfg, int frames) {
  auto log = pipeline::logger("covflowd");
  log->warn("covflowd is a stand-in until the daemon lands (issue 5): it times the covariance "
            "stage on the configured input and prints a latency report");
  Exec exec = make_exec(cfg.device);
  auto source = make_source(cfg, std::uint64_t(frames));
  log->info("backend {}; input {}; {} frames", name(exec.backend()), source->describe(), frames);

  CovarianceTimer timer(exec);
  std::vector<double> latency_ms;
  int taken = 0, skipped = 0;
  while (taken < frames && !stop_requested) {
    auto frame = source->next(std::chrono::milliseconds(200));
    if (!frame) {
      if (source->ended()) break;
      continue;
    }
    ++taken;
    const auto type = frame->header.element_type;
    if (frame->header.kind != replay::PayloadKind::snapshots ||
        (type != replay::ElementType::cf32 && type != replay::ElementType::cf64)) {
      ++skipped;  // the stand-in times the covariance of complex snapshots only
      continue;
    }
    latency_ms.push_back(type == replay::ElementType::cf32 ? timer.time<std::complex<float>>(*frame)
                                                           : timer.time<std::complex<double>>(*frame));
  }
  fmt::print("\ncovflowd demo latency report ({} frames, backend {}, host to host)\n", taken, name(exec.backend()));
  if (latency_ms.empty()) {
    fmt::print("  no snapshot frames to time\n");
  } else {
    fmt::print("  stage       p50 ms   p90 ms   p99 ms   max ms\n");
    fmt::print("  covariance {:8.3f} {:8.3f} {:8.3f} {:8.3f}\n", percentile(latency_ms, 50), percentile(latency_ms, 90),
               percentile(latency_ms, 99), *std::max_element(latency_ms.begin(), latency_ms.end()));
  }
  fmt::print("  frames in {}, done {}, not snapshots {}, rejected {}, dropped 0, late n/a (no budget until issue 5)\n", taken,
             latency_ms.size(), skipped, source->rejected());
  return exit_code::ok;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"covflowd: real-time radar signal-processing daemon"};
  app.footer("Exit codes: 0 ok, 1 internal error (and an invalid file under --check-config), 2 usage, 3 configuration, "
             "4 damaged data, 5 I/O, 6 device unavailable.");
  std::string config_file, check_file;
  std::vector<std::string> overrides;
  bool print_config = false, print_reference = false;
  int frames = 200;
  std::string device;
  app.add_option("--config,-c", config_file, "YAML configuration (docs/config.md); default: the built-in demo");
  app.add_option("--set", overrides, "Override a configuration key, KEY=VALUE, e.g. pipeline.budget_ms=4 (repeatable)");
  app.add_option("--check-config", check_file, "Validate FILE (with any --set) and exit: 0 valid, 1 invalid");
  app.add_flag("--print-config", print_config, "Print the configuration in effect as YAML and exit");
  app.add_flag("--print-config-reference", print_reference, "Print the key reference of docs/config.md and exit");
  app.add_option("--frames", frames, "Frames to process before exiting")->check(CLI::Range(1, 10000000));
  app.add_option("--device", device, "auto | cuda | cpu: overrides device.backend")->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  if (const int code = apps::parse_command_line(app, argc, argv); code >= 0) return code;

  if (!check_file.empty()) {
    try {
      config::load_file(check_file, overrides);
      fmt::print("{}: valid\n", check_file);
      return 0;
    } catch (const config::ConfigError& e) {
      std::fprintf(stderr, "covflowd: %s\n", e.what());
      return 1;
    }
  }
  if (print_reference) {
    fmt::print("{}", config::reference_markdown());
    return exit_code::ok;
  }
  return apps::run_guarded("covflowd", [&]() -> int {
    if (!device.empty()) overrides.push_back("device.backend=" + device);
    const config::Config cfg = config_file.empty() ? config::load_defaults(overrides) : config::load_file(config_file, overrides);
    if (print_config) {
      fmt::print("{}", config::to_yaml(cfg));
      return exit_code::ok;
    }
    pipeline::set_log_level(std::string(name(cfg.daemon.log_level)));
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    return run_demo(cfg, frames);
  });
}

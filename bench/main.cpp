// covflow-bench: one subcommand per operation, or `all`.
#include <cstdio>
#include <exception>
#include <memory>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bench_common.hpp"
#include "cholupdate_bench.hpp"
#include "covariance_bench.hpp"
#include "heev_bench.hpp"
#include "pipeline_bench.hpp"
#if COVFLOW_HAS_CUDA
#include "heev_chase_bench.hpp"
#endif
#include "covflow/linalg/device.hpp"

int main(int argc, char** argv) {
  using namespace covflow;
  CLI::App app{"covflow-bench: covflow's kernels against cuBLAS/cuSOLVER and LAPACK, in one run"};
  bench::Settings settings;
  bool no_gpu = false;
  app.add_option("--json", settings.json_path, "Write the results as JSON to this file");
  app.add_option("--warmup", settings.warmup, "Untimed calls before timing")->check(CLI::Range(0, 1000));
  app.add_option("--reps", settings.reps, "Timed calls per contender (median reported)")->check(CLI::Range(1, 100000));
  app.add_option("--cpu-reps", settings.cpu_reps, "Timed calls of the CPU backend")->check(CLI::Range(1, 1000));
  app.add_flag("--no-cpu", [&](std::int64_t) { settings.cpu = false; }, "Skip the CPU backend");
  app.add_flag("--no-gpu", no_gpu, "Skip the GPU even when one is present");
  app.add_flag("--quick", settings.quick, "A few sizes only (smoke run)");
  app.require_subcommand(1);
  auto* covariance = app.add_subcommand("covariance", "Batched sample covariance R = X Xᴴ / K + δI");
  auto* heev = app.add_subcommand("heev", "Batched Hermitian eigendecomposition vs cuSOLVER and LAPACK");
  heev->add_option("--shape", settings.shapes, "Only these NxBATCH shapes (repeatable)");
  heev->add_option("--dtype", settings.dtype, "Only this element type")->check(CLI::IsMember({"cf64", "cf32"}));
  heev->add_option("--mode", settings.mode, "Only vectors or values")->check(CLI::IsMember({"vectors", "values"}));
  auto* cholupdate = app.add_subcommand("cholupdate", "Rank-k Cholesky update/downdate vs refactoring (cuSOLVER potrf)");
  auto* heev_chase = app.add_subcommand("heev-chase", "§3's QR iteration alone (heev's leaves), per arithmetic policy (diagnostic)");
  auto* pipeline = app.add_subcommand("pipeline", "The daemon's chain fed at a fixed rate: frames/s, drops, latency percentiles");
  bench::PipelineBenchOptions pipeline_options;
  pipeline->add_option("--seconds", pipeline_options.gpu_seconds, "How long the GPU run is fed")->capture_default_str();
  pipeline->add_option("--cpu-seconds", pipeline_options.cpu_seconds, "How long the CPU run is fed")->capture_default_str();
  pipeline->add_option("--rate", pipeline_options.rate_hz, "Frames per second")->capture_default_str()->check(CLI::PositiveNumber);
  pipeline->add_option("--cells", pipeline_options.cells, "Cells per frame")->capture_default_str()->check(CLI::PositiveNumber);
  pipeline->add_option("--channels", pipeline_options.channels, "Channels (array elements)")->capture_default_str()->check(CLI::Range(2, 1024));
  pipeline->add_option("--budget-ms", pipeline_options.budget_ms, "Per-frame budget")->capture_default_str()->check(CLI::PositiveNumber);
  pipeline->add_flag("--copy-input", pipeline_options.copy_input,
                     "Hand each frame to the ingest thread to copy, instead of writing it into the frame slot");
  pipeline->add_flag("--probe-host", pipeline_options.probe_host,
                     "Also run a thread that spins on the clock and reports the host's scheduling gaps (uses one core)");
  auto* all = app.add_subcommand("all", "Every benchmark");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    std::unique_ptr<linalg::Exec> gpu;
    const auto probe = linalg::probe_devices();
    if (!no_gpu && probe.available()) gpu = std::make_unique<linalg::Exec>(linalg::Exec::cuda());
    linalg::Exec cpu = linalg::Exec::cpu();
    fmt::print("covflow-bench on {} ({}); CPU backend {} threads; {} warm-up, median of {}\n",
               bench::device_description(), bench::today(), cpu.pool().size(), settings.warmup, settings.reps);
    if (!gpu) fmt::print("no GPU timing: {}\n", no_gpu ? "--no-gpu" : probe.reason);
    std::vector<nlohmann::json> results;
    if (covariance->parsed() || all->parsed()) results.push_back(bench::run_covariance_bench(settings, gpu.get(), cpu));
    if (heev->parsed() || all->parsed()) results.push_back(bench::run_heev_bench(settings, gpu.get(), cpu));
    if (cholupdate->parsed() || all->parsed()) results.push_back(bench::run_cholupdate_bench(settings, gpu.get(), cpu));
    if (pipeline->parsed() || all->parsed()) {
      results.push_back(bench::run_pipeline_bench(settings, pipeline_options, gpu.get(), cpu));
    }
    if (heev_chase->parsed()) {
#if COVFLOW_HAS_CUDA
      if (gpu) bench::run_heev_chase_bench(settings);
      else fmt::print("heev-chase needs a GPU\n");
#else
      fmt::print("heev-chase needs a CUDA build\n");
#endif
    }
    if (!settings.json_path.empty()) {
      bench::write_json(settings.json_path, results);
      fmt::print("\nwrote {}\n", settings.json_path);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "covflow-bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

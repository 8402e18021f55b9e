// covflowd: the daemon. Until the scheduler and stages exist (issue 5) it runs a stand-in main
// job: synthetic snapshot frames through the covariance operation on the best backend, ending
// with a latency report, so the README's main-job command exercises the real build end to end.
#include <algorithm>
#include <chrono>
#include <complex>
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "covflow/linalg/covariance.hpp"
#include "covflow/linalg/device.hpp"
#include "covflow/pipeline/logging.hpp"
#if COVFLOW_HAS_CUDA
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace {

using namespace covflow::linalg;

struct DemoShape {
  int channels = 16;
  int snapshots = 64;
  int cells = 180;
};

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(p / 100.0 * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

int run_demo(int frames, const std::string& device) {
  auto log = covflow::pipeline::logger("covflowd");
  log->warn("covflowd is a stand-in until the daemon lands (issue 5): it times the covariance "
            "stage on synthetic frames and prints a latency report");
  const DemoShape shape;
  const bool want_cuda = device == "cuda" || (device == "auto" && probe_devices().available());
  Exec exec = want_cuda ? Exec::cuda() : Exec::cpu();
  log->info("backend {}; {} frames of {} cells × {} channels × {} snapshots (complex double)",
            name(exec.backend()), frames, shape.cells, shape.channels, shape.snapshots);

  const std::size_t x_elems = std::size_t(shape.channels) * shape.snapshots * shape.cells;
  const std::size_t r_elems = std::size_t(shape.channels) * shape.channels * shape.cells;
  std::vector<cf64> x(x_elems), r(r_elems);
  std::mt19937_64 rng(20261121);
  std::normal_distribution<double> normal(0.0, std::sqrt(0.5));
  std::vector<double> latency_ms;
  latency_ms.reserve(static_cast<std::size_t>(frames));

#if COVFLOW_HAS_CUDA
  cuda::DeviceBuffer<cf64> dx(want_cuda ? x_elems : 0), dr(want_cuda ? r_elems : 0);
#endif
  for (int frame = 0; frame < frames; ++frame) {
    for (auto& v : x) v = {normal(rng), normal(rng)};
    const auto start = std::chrono::steady_clock::now();
    if (want_cuda) {
#if COVFLOW_HAS_CUDA
      auto stream = exec.cuda_context().stream();
      dx.upload(x, stream);
      sample_covariance<cf64>(exec, Batch<cf64>::packed(dx.data(), shape.channels, shape.snapshots, shape.cells),
                              Batch<cf64>::packed(dr.data(), shape.channels, shape.channels, shape.cells),
                              {.diagonal_loading = 1e-3});
      dr.download(r, stream);
      exec.synchronize();
#endif
    } else {
      sample_covariance<cf64>(exec, Batch<cf64>::packed(x.data(), shape.channels, shape.snapshots, shape.cells),
                              Batch<cf64>::packed(r.data(), shape.channels, shape.channels, shape.cells),
                              {.diagonal_loading = 1e-3});
    }
    latency_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  fmt::print("\ncovflowd demo latency report ({} frames, backend {}, host to host)\n", frames, name(exec.backend()));
  fmt::print("  stage       p50 ms   p90 ms   p99 ms   max ms\n");
  fmt::print("  covariance {:8.3f} {:8.3f} {:8.3f} {:8.3f}\n", percentile(latency_ms, 50),
             percentile(latency_ms, 90), percentile(latency_ms, 99),
             *std::max_element(latency_ms.begin(), latency_ms.end()));
  fmt::print("  frames in {}, done {}, dropped 0, late n/a (no budget until issue 5)\n", frames, frames);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"covflowd: real-time radar signal-processing daemon"};
  int frames = 200;
  std::string device = "auto";
  app.add_option("--frames", frames, "Frames to process before exiting")->check(CLI::Range(1, 10000000));
  app.add_option("--device", device, "auto | cuda | cpu")->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run_demo(frames, device);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "covflowd: error: %s\n", e.what());
    return 1;
  }
}

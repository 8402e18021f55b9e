// covflow-bench pipeline: the whole chain (covariance → subspace → publish) under the runner, fed
// at a fixed frame rate for a fixed time: frames/s, drops, misses and latency percentiles, on the
// GPU and on the CPU backend (issue 5's reference scenario: 180 cells × 128 channels covariance
// frames, complex double, at 100 Hz).
#pragma once

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::bench {

struct PipelineBenchOptions {
  double gpu_seconds = 60;  // how long the GPU run is fed
  double cpu_seconds = 10;  // the CPU run (it cannot keep up; a shorter run shows the same)
  double rate_hz = 100;
  int cells = 180;
  int channels = 128;
  double budget_ms = 10;
  bool copy_input = false;  // hand frames to the ingest thread to copy (the path before zero-copy input)
  bool probe_host = false;  // a thread spinning on the clock records how long the host takes it off the CPU
};

nlohmann::json run_pipeline_bench(const Settings& settings, const PipelineBenchOptions& options, linalg::Exec* gpu,
                                  linalg::Exec& cpu);

}  // namespace covflow::bench

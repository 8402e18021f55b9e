// covflow-bench adaptive: the adaptive stage (docs/stages.md, "adaptive") as the daemon runs it —
// frames drawn from the radar scenario, prepare() once per lane, the stage's warm-up frames and
// reset() as the runner does them, then run() and collect() per frame — timing each frame:
//
//   cpu   wall time of run() + collect() on the CPU backend
//   cuda  wall time of run(), the stream synchronisation the runner does before collect(), and
//         collect() (the payload is uploaded before the clock starts, as the runner's copy stream
//         does it ahead of the stage)
//
// Both paths of the stage in the same run, one row each: "linalg" (linalg::potrf / potrs) and
// "legacy" (the former hand-written Cholesky and solves, selected by COVFLOW_ADAPTIVE_LEGACY=1 at
// prepare(); a temporary switch). Their frames alternate, one frame of each in turn, so that a
// drift of the machine hits both alike. Median and p99 over the timed frames, and the median of
// the frames that refactored every cell (the first and every refactor_every-th).
//
// Checked, outside the timed region: on the last frame both paths' weights agree beam by beam to
//   ‖w_linalg − w_legacy‖ / ‖w_legacy‖ ≤ 8·N·ε·κ + 4·ε_float
// (ε of the frames' type, κ the condition number of the scenario's model covariance + δI), every
// cell's status is 0, no cell was unrecoverable, and no frame grew the Exec's workspace. A row
// that fails any of these fails the run.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::bench {

// Defaults: the configuration's defaults (config::Config{}), the daemon's radar scenario.
struct AdaptiveBenchOptions {
  int cells = 180;
  int channels = 16;
  int snapshots = 200;       // K per cell and frame
  int looks = 1;             // 1: the default look (5°); more: spread evenly over [−60°, 60°]
  int frames = 0;            // timed frames per path (0: 200, or 40 with --quick)
  int refactor_every = 50;
  std::string dtype = "cf64";   // cf32 | cf64
  std::string device = "both";  // cpu | cuda | both (cuda only where a GPU is present)
};

nlohmann::json run_adaptive_bench(const Settings& settings, const AdaptiveBenchOptions& options, linalg::Exec* gpu,
                                  linalg::Exec& cpu);

}  // namespace covflow::bench

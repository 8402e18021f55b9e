// covflow-bench adaptive: the adaptive stage (docs/stages.md, "adaptive") as the daemon runs it —
// frames drawn from the radar scenario, prepare() once per lane, the stage's warm-up frames and
// reset() as the runner does them, then run() and collect() per frame — timing each frame:
//
//   cpu   wall time of run() + collect() on the CPU backend
//   cuda  wall time of run(), the stream synchronisation the runner does before collect(), and
//         collect() (the payload is uploaded before the clock starts, as the runner's copy stream
//         does it ahead of the stage)
//
// One row per device. Median and p99 over the timed frames, and the median of the frames that
// refactored every cell (the first and every refactor_every-th).
//
// Checked, outside the timed region, on the last frame, against the factors the stage holds after
// it (AdaptiveStage::factors, L per cell; R̃ = L·Lᴴ is the covariance its beams were solved with):
//   - every cell's status is 0, no cell-frame was unrecoverable, every weight is finite, and no
//     frame grew the Exec's workspace;
//   - the MVDR equation R̃·w = (wᴴR̃w)·a, beam by beam, by its normwise residual
//       ‖R̃w − (wᴴR̃w)·a‖ / (‖R̃‖_F·‖w‖ + (wᴴR̃w)·‖a‖) ≤ 8·N·ε + 4·ε_float
//     (ε of the frames' type for potrs's backward error; ε_float for the published float weights).
//     A B left unsolved, a factor of another cell or a wrong look fails it;
//   - the distortionless constraint wᴴa = 1, beam by beam:
//       |wᴴa − 1| ≤ 8·N·ε·κ + 4·ε_float·√κ,   κ = κ₂(R̃) of the cell (linalg::heev on the CPU)
//     (its imaginary part is potrs's rounding seen through R̃⁻¹, its real part the rounding of the
//     float weights, Σ|w_m| ≤ √κ since ‖w‖² ≤ κ/N). The stage divides z = R̃⁻¹a by Re(aᴴz), so
//     this holds to rounding for any z: on its own it would not show that the solve was made.
// A row that fails any of these fails the run. The weights are checked against the stage's own
// factor, not a fresh factorization of the window: the kept factor drifts by rounding between
// refactors, which the stage's tests bound (tests/stages/adaptive_checks.hpp); the benchmark checks
// that each frame's solve is right for the factor it holds.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "covflow/config/config.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::bench {

// Defaults: the configuration's defaults (config::Config{}), the daemon's radar scenario.
struct AdaptiveBenchOptions {
  int cells = 180;
  int channels = 16;
  int snapshots = 200;       // K per cell and frame
  int looks = 1;             // 1: the default look (5°); more: spread evenly over [−60°, 60°]
  int frames = 0;            // timed frames per device (0: 200, or 40 with --quick)
  // The stage's own defaults (pipeline.stages.adaptive): frames between refactors, columns per
  // cholupdate call, snapshots in the window.
  int refactor_every = static_cast<int>(config::AdaptiveStageConfig{}.refactor_every);
  int update_rank = static_cast<int>(config::AdaptiveStageConfig{}.update_rank);
  int window = static_cast<int>(config::AdaptiveStageConfig{}.window_snapshots);
  std::string dtype = "cf64";   // cf32 | cf64
  std::string device = "both";  // cpu | cuda | both (cuda only where a GPU is present)
};

nlohmann::json run_adaptive_bench(const Settings& settings, const AdaptiveBenchOptions& options, linalg::Exec* gpu,
                                  linalg::Exec& cpu);

}  // namespace covflow::bench

// The adaptive stage: per cell, the lower Cholesky factor L of the covariance of a sliding window
// of the last W snapshots, kept across frames by rank-k updates (new snapshots) and downdates
// (snapshots leaving the window) with linalg::cholupdate, refactored from the window periodically
// and whenever an update or downdate fails (linalg::potrf on the window's covariance, in double);
// MVDR weights for the configured look directions from one linalg::potrs per frame with every look
// of every cell as a right-hand side; output SINR and null depth against the scenario's model
// (docs/stages.md, "adaptive").
//
//   R = (1/W)·Σ_{window} x·xᴴ + δ·I        (δ: diagonal_loading, in units of the noise power per
//                                          element, which is 1 in the scenario's model)
//   w = R⁻¹a(θ) / (a(θ)ᴴR⁻¹a(θ))           one beam per cell and look θ (an azimuth at elevation 0
//                                          for a planar or listed array)
//
// Reads:  header and payload of snapshot frames (host.payload on a CPU lane, device.payload on a
//         CUDA lane). Covariance frames carry no snapshots: the stage leaves them alone (no
//         results, no state change) and says so once per lane in the log.
// Writes: results.weights, results.sinr_db, results.null_depth_db ([cells × looks], cell-major),
//         results.cell_status where a cell's factor cannot be formed (kept when an earlier stage
//         already set a nonzero status), results.cells; with beam_pattern_points, results.beam_pattern_db
//         ([cells × looks × points]), computed on the host from the weights once they are there (in
//         run() on a CPU lane, in collect() on a CUDA lane).
// State:  per lane (keyed by the Exec, allocated in prepare()): a ring of W + min(K, W − 1)
//         snapshot columns per cell (stored scaled by 1/√W, so that the same stored bits are added
//         and later removed), the factors, per-cell status. On a CUDA lane all of it lives on the
//         device and the results come back with one asynchronous copy into a pinned buffer of the
//         lane, unpacked by collect() once the runner has synchronised the stream; run() never
//         synchronises.
#pragma once

#include <atomic>
#include <complex>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "covflow/config/config.hpp"
#include "covflow/pipeline/stage.hpp"
#include "covflow/stages/per_lane.hpp"

namespace covflow::stages {

// Azimuth i (degrees) of a beam pattern of `points` ≥ 2 points: evenly spaced from −90° to 90°
// inclusive, θ_i = 90·(2i − (points − 1)) / (points − 1), so that θ_i = −θ_{points−1−i} exactly.
double beam_pattern_azimuth_deg(std::uint32_t points, std::uint32_t i);

struct AdaptiveSettings {
  config::AdaptiveStageConfig config;
  double spacing_wavelengths = 0.5;  // element spacing d of the array (scenario.spacing_wavelengths)
  // The elements of a planar or listed array (scenario.geometry), whose looks are azimuths at
  // elevation 0; empty: the linear array of spacing_wavelengths.
  std::vector<config::ElementPosition> element_positions;
  // The scenario the frames are drawn from. With it the stage reports SINR and null depth against
  // its model (docs/scenario.md); without it (live or recorded data, whose emitters are unknown)
  // those results are NaN and only the weights are computed.
  std::optional<config::ScenarioConfig> model;
};

// Counters of one stage over all its lanes, since construction.
struct AdaptiveCounters {
  std::uint64_t frames = 0;               // snapshot frames processed
  std::uint64_t covariance_frames = 0;    // covariance frames left alone
  std::uint64_t periodic_refactors = 0;   // whole-lane refactorizations (refactor_every, window replaced)
  std::uint64_t recovered_cells = 0;      // cell-frames whose update/downdate failed and were refactored
  std::uint64_t unrecoverable_cells = 0;  // cell-frames whose factor could not be formed (cell_status set)
};

class AdaptiveStage final : public pipeline::Stage {
 public:
  // Throws std::invalid_argument for settings no frame could use (no look, W < 1, δ < 0, ...).
  explicit AdaptiveStage(const AdaptiveSettings& settings);
  ~AdaptiveStage() override;

  std::string_view name() const override { return "adaptive"; }
  bool degradable() const override { return settings_.config.degradable; }
  double budget_ms() const override { return settings_.config.budget_ms; }

  // Allocates this lane's ring, factors and buffers and reserves the workspace of cholupdate,
  // potrf and potrs (a frame never allocates). Throws
  // std::invalid_argument when the shape's look count or beam pattern points differ from the settings'. A second
  // prepare() on the same lane (a reload) starts the window afresh.
  void prepare(const pipeline::FrameShape& shape, linalg::Exec& exec) override;
  void run(pipeline::FrameSlot& frame, linalg::Exec& exec) override;
  // CUDA lane: the frame's results, copied back by run() into the lane's pinned staging, go into
  // FrameSlot::results (and the beam patterns are computed from its weights), and its failure
  // counts are taken (a CPU lane did all of it in run()).
  void collect(pipeline::FrameSlot& frame, linalg::Exec& exec) override;
  // Warm start: enough frames to reach the downdates (the window full), then a fresh window and
  // counters back to zero (the warm-up frames are not the radar's).
  int warm_up_frames(const pipeline::FrameShape& shape) const override;
  bool keeps_state() const override { return true; }  // the window and its factors, per cell
  void reset(linalg::Exec& exec) override;

  AdaptiveCounters counters() const;
  const AdaptiveSettings& settings() const { return settings_; }
  // Ring columns per cell for a shape (W + min(K, W − 1); W when K = 0).
  std::int64_t ring_columns(const pipeline::FrameShape& shape) const;

  // Diagnostics and tests, not for the frame loop (they synchronise a CUDA lane):
  // the lane's current lower factors, cells × N × N column-major (strict upper triangle zero),
  // for the cells of the last frame.
  std::vector<std::complex<double>> factors(linalg::Exec& exec) const;
  // Multiplies the stored window snapshots of one cell by `factor` without touching its factor,
  // so that the next downdate removes what was never added — how a test forces a failing downdate.
  void scale_window_for_testing(linalg::Exec& exec, std::uint32_t cell, double factor);

  struct Lane;  // per-lane state (adaptive_stage.cpp)

 private:
  Lane& lane(const linalg::Exec& exec) const;
  void count_failures(Lane& state, std::uint64_t sequence, std::uint32_t recovered, std::uint32_t unrecoverable);

  AdaptiveSettings settings_;
  PerLane<Lane> lanes_;
  std::atomic<std::uint64_t> frames_{0}, covariance_frames_{0}, periodic_refactors_{0}, recovered_cells_{0},
      unrecoverable_cells_{0};
};

}  // namespace covflow::stages

// The subspace stage: per cell, the eigen-pairs of the covariance → number of sources by MDL or
// AIC → MUSIC pseudo-spectrum over the angle grid, computed through FFTs of the noise eigenvectors
// → the directions of the highest peaks, refined far below the grid step (docs/stages.md,
// "subspace"). The eigen-pairs come from heev of the covariance (method eig) or from gesvj of the
// cell's N × K snapshot matrix X (method svd: eigenvalues σ²/K + δ, eigenvectors U), which does
// not square the condition number and so keeps the noise eigenvalues accurate next to a strong
// jammer.
//
// Reads:  eig: the slot's covariance array (or, when built with covariance_from_payload, the
//         payload of a covariance frame). svd: the payload of a snapshot frame.
// Writes: eigenvalues and eigenvectors arrays (heev's layout whatever the method: ascending
//         values, vectors as columns), info (the decomposition's per-cell status), and results:
//         cells, source_count, doa_deg
//         (ascending angle, NaN-padded to max_sources), eigenvalues, cell_status, spectrum_db
//         (when the frame shape keeps spectrum points).
// On a CUDA lane everything stays on the device; the small results are copied into the slot's
// host scratch (pinned, SlotNeeds) with one asynchronous copy, and collect() moves them into
// FrameResults once the runner has synchronised the stream; run() never synchronises.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "covflow/config/config.hpp"
#include "covflow/pipeline/stage.hpp"
#include "covflow/stages/per_lane.hpp"

namespace covflow::stages {

class CovarianceStage;

// The MUSIC angle grid: θ_i = min_deg + i·step_deg, i = 0 … points−1 (θ ≤ max_deg).
struct AngleGridPoints {
  double min_deg = 0.0;
  double step_deg = 0.0;
  std::uint32_t points = 0;
  double angle_deg(std::uint32_t i) const { return min_deg + step_deg * i; }
};
AngleGridPoints angle_grid_points(const config::AngleGrid& grid);

struct SubspaceSettings {
  config::SubspaceStageConfig config;
  double spacing_wavelengths = 0.5;  // element spacing d of the array (scenario.spacing_wavelengths)
  // K for the information criteria when no covariance stage reports one (covariance frames).
  double nominal_snapshots = 1.0;
  // The covariance stage of the same chain: the source of the effective snapshot count of each
  // frame (window and forgetting included). May be null.
  const CovarianceStage* snapshot_counts = nullptr;
  // Read the covariance from the payload of covariance frames (no covariance stage in the chain)
  // instead of the slot's covariance array. Method eig only.
  bool covariance_from_payload = false;
  // Method svd: δ added to every eigenvalue, as the covariance stage adds δI to its estimate
  // (pipeline.stages.covariance.diagonal_loading).
  double diagonal_loading = 0.0;
};

class SubspaceStage final : public pipeline::Stage {
 public:
  explicit SubspaceStage(const SubspaceSettings& settings);
  ~SubspaceStage() override;

  std::string_view name() const override { return "subspace"; }
  bool degradable() const override { return settings_.config.degradable; }
  double budget_ms() const override { return settings_.config.budget_ms; }

  // Reserves heev's (eig) or gesvj's (svd) workspace, plans the FFTs (FFTW on a CPU lane, cuFFT on
  // a CUDA lane) and allocates every buffer of this lane. Throws std::invalid_argument when the
  // shape keeps a spectrum whose length is not the angle grid's, and for svd when the shape has
  // no snapshots or fewer snapshots than channels.
  void prepare(const pipeline::FrameShape& shape, linalg::Exec& exec) override;
  // Host scratch for the results' way back from the device (pinned on a CUDA lane).
  pipeline::SlotNeeds slot_needs(const pipeline::FrameShape& shape) const override;
  void run(pipeline::FrameSlot& frame, linalg::Exec& exec) override;
  // CUDA lane: the results copied back by run() into the slot's host scratch go into
  // FrameSlot::results (nothing to do on a CPU lane: run() wrote them).
  void collect(pipeline::FrameSlot& frame, linalg::Exec& exec) override;

  const SubspaceSettings& settings() const { return settings_; }
  const AngleGridPoints& grid() const { return grid_; }

 private:
  struct Lane;
  Lane& lane(const linalg::Exec& exec) const;

  SubspaceSettings settings_;
  AngleGridPoints grid_;
  PerLane<Lane> lanes_;
};

}  // namespace covflow::stages

// The covariance stage: snapshot frames → per-cell sample covariance with diagonal loading,
// averaged over a sliding window of frames with exponential forgetting (docs/stages.md,
// "covariance"). Covariance frames pass through unchanged.
//
// Reads:  header, payload (host.payload on a CPU lane, device.payload on a CUDA lane, which the
//         runner has filled from the host copy before the stage runs).
// Writes: the slot's covariance array (host.covariance / device.covariance), [cells × N × N] of
//         the frame's element type, exactly Hermitian.
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

class CovarianceStage final : public pipeline::Stage {
 public:
  // `nominal_snapshots`: the K reported by effective_snapshots() for covariance frames, which do
  // not say how many snapshots they were estimated from (the scenario's snapshot count).
  explicit CovarianceStage(const config::CovarianceStageConfig& config, double nominal_snapshots);
  ~CovarianceStage() override;

  std::string_view name() const override { return "covariance"; }
  // Allocates this lane's window ring (window × cells × N × N elements; none for window 1).
  // A second prepare() on the same lane (a reload) starts the window afresh.
  void prepare(const pipeline::FrameShape& shape, linalg::Exec& exec) override;
  void run(pipeline::FrameSlot& frame, linalg::Exec& exec) override;
  // Warm start: two frames exercise the window's combination; reset() empties the window.
  int warm_up_frames(const pipeline::FrameShape& shape) const override { return config_.window > 1 ? 2 : 1; }
  bool keeps_state() const override { return config_.window > 1; }
  void reset(linalg::Exec& exec) override;

  // The effective number of snapshots behind the covariance that run() produced for frame
  // `sequence` on this lane: K·(Σ w_i)²/Σ w_i² over the frames in the window, w_i = λ^i (Kish's
  // effective sample size; W·K for λ = 1 and a full window). The last 64 frames of each lane are
  // remembered; for any other (and for covariance frames) it is the nominal count.
  double effective_snapshots(const linalg::Exec& exec, std::uint64_t sequence) const;

  const config::CovarianceStageConfig& config() const { return config_; }

 private:
  struct Lane;
  Lane& lane(const linalg::Exec& exec) const;

  config::CovarianceStageConfig config_;
  double nominal_snapshots_;
  PerLane<Lane> lanes_;
};

}  // namespace covflow::stages

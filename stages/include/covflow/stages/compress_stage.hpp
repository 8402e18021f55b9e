// The compress stage: each cell's covariance R (n × n, Hermitian) stored in a compressed form to a
// relative Frobenius tolerance τ, ‖R − R̃‖_F ≤ τ·‖R‖_F, with ranks, bytes and the achieved error
// reported per frame (docs/stages.md, "compress"):
//
//   tlr      tiles of b × b, the diagonal ones dense and the ones below it as U·Vᴴ of a rank chosen
//            per tile (linalg::tlr_compress, scope matrix; the Hermitian form stores the lower
//            tiles only). The achieved error is measured, not predicted: the form is expanded
//            (linalg::tlr_expand) and ‖R − R̃‖_F computed against R.
//   lowrank  R̃ = σ²·I + U·diag(d)·Uᴴ with U the r leading eigenvectors (linalg::heev), d_i = λ_i −
//            σ² and σ² the mean of the other n − r eigenvalues, r the least that meets τ; the
//            error Σ_{i>r} (λ_i − σ²)² follows from the eigenvalues. The form a few strong
//            emitters over noise take.
//   h2       an H² matrix on the array's element positions (linalg::h2_from_dense: cluster tree of the
//            elements, leaf_size and η from the config, nested bases from the covariance's own
//            far-field block rows, error bounded by τ), expanded (linalg::h2_expand) to measure the
//            achieved error against R, as tlr is. A CUDA lane builds and expands all cells of a
//            frame at once with linalg::H2DensePlan (made in prepare() for the element positions
//            and shape.cells): the same construction, ranks and bytes up to rounding.
//   auto     all of them, and per cell the one that meets τ in the fewest bytes.
//
// With looks, each cell's MVDR weights toward them are solved through the TLR factor
// (linalg::tlr_potrf, tlr_potrs: w = R̃⁻¹a / (aᴴR̃⁻¹a)) and compared with dense ones (linalg::potrf,
// potrs on R), both in complex double: the loss reported is
//   10·log10( (w_tᴴ R w_t) / (w_dᴴ R w_d) ),   unit gain toward the look (wᴴa = 1),
// the output SINR lost by using the compressed factor when R is the interference-plus-noise
// covariance (the dense weights minimise wᴴRw, so the loss is ≥ 0 up to rounding).
//
// Everything runs in complex double (cf32 frames are widened first); bytes count complex double
// elements too. Looks are azimuths at elevation 0 on the scenario's array.
//
// Reads:  the slot's covariance array, or a covariance frame's payload when built with
//         covariance_from_payload (no covariance stage in the chain).
// Writes: results.compress (per cell: form, ranks, bytes, error, SINR loss per look),
//         results.cell_status where a cell's covariance held a NaN or an Inf (kept when an
//         earlier stage already set one), results.cells.
// State:  per lane, the buffers of one frame (nothing carries from frame to frame), and with h2
//         on a CUDA lane the H² plan (the element positions' trees and index lists, storage and
//         scratch for shape.cells cells), all made in prepare(); a frame allocates nothing. On a
//         CUDA lane the work stays on the device and the few per-cell numbers come back with
//         asynchronous copies into a pinned buffer of the lane, unpacked by collect(); run()
//         never synchronises, h2 included: the H² construction sizes its levels by ranks bounded
//         from the tree (linalg::H2DensePlan) instead of reading the ranks back.
#pragma once

#include <atomic>
#include <cstddef>
#include <complex>
#include <cstdint>
#include <string_view>
#include <vector>

#include "covflow/config/config.hpp"
#include "covflow/pipeline/stage.hpp"
#include "covflow/stages/per_lane.hpp"

namespace covflow::stages {

struct CompressSettings {
  config::CompressStageConfig config;
  double spacing_wavelengths = 0.5;  // the linear array's element spacing (scenario.spacing_wavelengths)
  // The elements of a planar or listed array (scenario.geometry); empty: the linear array.
  std::vector<config::ElementPosition> element_positions;
  // Read the covariance from the payload of covariance frames (no covariance stage in the chain).
  bool covariance_from_payload = false;
};

// Counters of one stage over all its lanes, since construction (or the warm-up's end).
struct CompressCounters {
  std::uint64_t frames = 0;
  std::uint64_t cells = 0;              // cell-frames compressed
  std::uint64_t tlr_cells = 0;          // of them, stored as tlr
  std::uint64_t lowrank_cells = 0;      // ... as lowrank
  std::uint64_t h2_cells = 0;           // ... as h2
  std::uint64_t over_tolerance = 0;     // cell-frames whose form missed τ (a TLR tile capped at max_rank)
  std::uint64_t non_finite_cells = 0;   // cell-frames with a NaN or Inf in the covariance (not compressed)
  std::uint64_t mvdr_failures = 0;      // cell-frames whose dense or TLR factor could not be formed
};

class CompressStage final : public pipeline::Stage {
 public:
  // Throws std::invalid_argument for settings no frame could use (τ outside (0, 1), tile < 1,
  // max_rank > tile, looks outside [−90, 90] or with format lowrank).
  explicit CompressStage(const CompressSettings& settings);
  ~CompressStage() override;

  std::string_view name() const override { return "compress"; }
  bool degradable() const override { return settings_.config.degradable; }
  double budget_ms() const override { return settings_.config.budget_ms; }

  // Allocates this lane's buffers for frames up to `shape` and reserves the linalg calls'
  // workspace. Throws std::invalid_argument when the shape does not keep the stage's results
  // (FrameShape::compress, compress_looks) or the array's size differs from the frames'.
  void prepare(const pipeline::FrameShape& shape, linalg::Exec& exec) override;
  void run(pipeline::FrameSlot& frame, linalg::Exec& exec) override;
  // CUDA lane: the numbers run() copied back become FrameSlot::results.compress (a CPU lane did it
  // in run()).
  void collect(pipeline::FrameSlot& frame, linalg::Exec& exec) override;
  void reset(linalg::Exec& exec) override;

  CompressCounters counters() const;
  const CompressSettings& settings() const { return settings_; }

  struct Lane;  // per-lane state (compress_stage.cpp)

 private:
  Lane& lane(const linalg::Exec& exec) const;
  void finish(Lane& state, pipeline::FrameSlot& frame);
  void h2_cells_from_device(Lane& state, const std::byte* numbers, int cells) const;

  CompressSettings settings_;
  PerLane<Lane> lanes_;
  std::atomic<std::uint64_t> frames_{0}, cells_{0}, tlr_cells_{0}, lowrank_cells_{0}, h2_cells_{0}, over_tolerance_{0},
      non_finite_cells_{0}, mvdr_failures_{0}, problem_frames_{0};
};

}  // namespace covflow::stages

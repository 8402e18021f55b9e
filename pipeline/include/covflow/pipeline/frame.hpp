// A frame as the pipeline holds it: one coherent processing interval (CPI) in a slot of the frame
// pool. Slots are allocated once, when the pipeline starts, for the largest frame its
// configuration accepts (FrameShape); no frame allocates (docs/architecture.md, "A frame's path").
//
// Data flow through the default chain, in the slot's fields:
//   ingest      fills header, times and the payload (host; pinned when a GPU is used)
//   covariance  payload → covariance (snapshot frames; a covariance frame's payload is used as is)
//   subspace    covariance → eigenvalues, eigenvectors → results.source_count, results.doa_deg,
//               results.spectrum_db
//   adaptive    snapshots (payload) → per-cell Cholesky factors kept across frames (stage state) →
//               results.weights, results.sinr_db, results.null_depth_db, results.cell_status
//   compress    covariance (or a covariance frame's payload) → results.compress (stage state:
//               buffers only)
//   publish     results → ZeroMQ (and optionally a frame file)
// On a CUDA lane the working arrays live on the device (`device.*`) and only results come back to
// the host; on a CPU lane the host arrays are used. A stage reads and writes only the fields it
// documents.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "covflow/replay/frame.hpp"

namespace covflow::pipeline {

class FramePool;

// The largest frame a pool is sized for, and what the stages need to know of it.
struct FrameShape {
  replay::ElementType element_type = replay::ElementType::cf64;  // cf32 or cf64
  std::uint32_t channels = 0;         // N: array elements
  std::uint32_t snapshots = 0;        // K: snapshots per cell in a snapshot frame (0: covariance input)
  std::uint32_t cells = 0;            // range/Doppler cells per frame
  std::uint32_t max_sources = 8;      // DOA estimates kept per cell
  std::uint32_t spectrum_points = 0;  // points of the MUSIC angle grid (0: no spectrum kept)
  std::uint32_t looks = 0;            // look directions of the adaptive stage (0: no beamformer results kept)
  std::uint32_t beam_pattern_points = 0;  // points of its beams' patterns, −90° … 90° (0: no pattern kept)
  bool compress = false;              // the compress stage runs: its per-cell results are kept
  std::uint32_t compress_looks = 0;   // its MVDR looks (pipeline.stages.compress.looks_deg)

  std::size_t element_bytes() const { return replay::size_of(element_type); }
  // Bytes of the largest payload: snapshots (N·K·cells) or covariance (N·N·cells), whichever is larger.
  std::size_t max_payload_bytes() const;
  std::size_t covariance_elements() const { return std::size_t(channels) * channels * cells; }
};

// Times of one frame on the steady clock (ns), except capture, which is the recorder's clock.
struct FrameTimes {
  std::int64_t capture_ns = 0;   // from the record header
  std::int64_t arrival_ns = 0;   // when ingest handed the frame to the pipeline
  std::int64_t deadline_ns = 0;  // arrival + pipeline.budget_ms
  std::int64_t done_ns = 0;      // when the last stage finished (0 while in flight)
};

// What one stage did to one frame.
struct StageRecord {
  enum class Outcome : std::uint8_t { not_run, ran, skipped_degraded, failed } outcome = Outcome::not_run;
  double ms = 0.0;  // wall time of the stage on this frame (device time on a CUDA lane)
};

// Per-frame results, host side, with capacity for FrameShape's largest frame (reserved at start;
// stages write into the existing storage and set the sizes/valid counts, never grow it).
struct FrameResults {
  std::uint32_t cells = 0;                 // cells with results
  std::vector<std::int32_t> source_count;  // [cells]: sources detected (MDL or AIC); −1: not computed
  std::vector<float> doa_deg;              // [cells × max_sources]: DOA estimates, NaN-padded
  std::vector<float> spectrum_db;          // [cells × spectrum_points]: MUSIC pseudo-spectrum (dB)
  std::vector<float> eigenvalues;          // [cells × channels]: ascending (kept when the subspace stage ran)
  std::vector<std::int32_t> cell_status;   // [cells]: 0 ok; linalg status codes otherwise (first stage to fail wins)
  // The adaptive stage's MVDR beamformers, one per cell and look direction (FrameShape::looks),
  // cell-major: element [c × looks + l] (weights: [(c × looks + l) × channels + m]). NaN where
  // not computed.
  std::vector<std::complex<float>> weights;  // [cells × looks × channels]: w = R⁻¹a / (aᴴR⁻¹a)
  std::vector<float> sinr_db;                // [cells × looks]: output SINR against the scenario's model
  std::vector<float> null_depth_db;          // [cells × looks]: shallowest null toward the model's jammers
  // [cells × looks × beam_pattern_points]: |wᴴa(θ)|² in dB (0 dB at the look, where wᴴa = 1) on
  // azimuths θ evenly spaced from −90° to 90° inclusive (stages::beam_pattern_azimuth_deg).
  std::vector<float> beam_pattern_db;
  // The compress stage's per-cell results (empty unless FrameShape::compress): the form each
  // cell's covariance was stored in, its ranks (the off-diagonal tiles' for tlr, the one global
  // rank for lowrank, the levels' ranks with couplings for h2), bytes and achieved relative error, and per cell and look
  // (FrameShape::compress_looks) the SINR loss of the MVDR beam solved with the TLR factor.
  struct Compressed {
    static constexpr std::int8_t not_computed = -1, tlr = 0, lowrank = 1, h2 = 2;
    std::vector<std::int8_t> format;         // [cells]
    std::vector<std::int32_t> rank_min, rank_max;  // [cells]
    std::vector<std::int64_t> rank_sum, rank_count;  // [cells]: the mean rank is Σ sum / Σ count
    std::vector<std::uint64_t> bytes;        // [cells]: what the stored form takes (complex double)
    std::uint64_t dense_bytes = 0;           // of one cell's dense matrix, n²·16
    std::vector<float> error;                // [cells]: ‖R − R̃‖_F / ‖R‖_F
    std::vector<float> sinr_loss_db;         // [cells × compress_looks]
  } compress;

  void reserve(const FrameShape& shape);
  void clear();  // sizes to "nothing computed" (source_count −1, NaN DOAs, NaN weights); no deallocation
  // Copies the results of cells [0, count) of `part` (results sized for fewer cells, the same
  // shape otherwise) to cells [first, first + count) here; `cells` grows to cover them when the
  // part had results. No allocation; std::logic_error when the layouts do not match.
  void place_cells(const FrameResults& part, std::uint32_t first, std::uint32_t count);
};

// A device array owned by a slot (CUDA lanes); null on CPU lanes.
struct DeviceArrays {
  void* payload = nullptr;      // the payload, copied from the host
  void* covariance = nullptr;   // [cells × N × N], element_type
  void* eigenvalues = nullptr;  // [cells × N], real of element_type
  void* eigenvectors = nullptr; // [cells × N × N], element_type
  int* info = nullptr;          // [cells]
  void* scratch = nullptr;      // stage-private, sized by the stages' prepare()
  std::size_t scratch_bytes = 0;
  // A cudaEvent_t of the slot's own: recorded after the ingest thread uploaded the payload while
  // it was being placed (FrameSlot::payload_on_device).
  void* upload_event = nullptr;
};

// Host arrays of a slot (CPU lanes use them for everything; CUDA lanes only for the payload and
// results).
struct HostArrays {
  std::span<std::byte> payload;   // pinned on CUDA lanes
  std::span<std::byte> covariance;
  std::span<std::byte> eigenvalues;
  std::span<std::byte> eigenvectors;
  std::span<int> info;
  std::span<std::byte> scratch;
};

struct FrameSlot {
  std::uint64_t sequence = 0;
  // The runner's own: the frame's place in the order lanes took frames (the reorder buffer's key)
  // and the lane that took it.
  std::uint64_t order = 0;
  std::uint32_t lane = 0;
  // Frames given their lane when claimed (RunnerOptions::lane_choice): that lane (−1: none yet)
  // and the set of its device arrays reserved for the frame (−1: none; the lane binds one).
  std::int32_t routed_lane = -1;
  std::int32_t device_set = -1;
  replay::FrameHeader header;  // kind, element type and dimensions as received
  FrameTimes times;
  HostArrays host;
  DeviceArrays device;
  FrameResults results;
  std::vector<StageRecord> stages;  // one per stage of the chain, in order
  std::string problem;              // why the frame was rejected, when it was
  // The ingest thread already copied the payload to device.payload, stretch by stretch as the
  // input placed it, and recorded device.upload_event after the last stretch: the lane waits for
  // that event instead of uploading.
  bool payload_on_device = false;
  // The pool the slot belongs to: a stage that keeps the slot past the frame's end (the publish
  // stage's recorder) retains it there and releases it when done (FramePool::retain, release).
  FramePool* pool = nullptr;
  // Cells split over the lanes (RunnerOptions::stateful_lanes): a lane's part slot holds the cells
  // [first_cell, first_cell + header.count) of the frame in `whole`, its payload a view of the
  // whole's; on the whole frame, the lanes yet to finish (or skip) their part and the reason the
  // first part failed, if one did ("": none). The runner's, under its lock.
  FrameSlot* whole = nullptr;
  std::uint32_t first_cell = 0;
  std::uint32_t parts_left = 0;
  std::string part_failure;
};

}  // namespace covflow::pipeline

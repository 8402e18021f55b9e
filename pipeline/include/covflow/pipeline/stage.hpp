// The stage interface: a thin adapter from frames to linalg calls (docs/architecture.md, "Adding
// a stage"). The runner calls prepare() once per lane when the pipeline starts (and on a reload),
// then run() for every frame, in chain order.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "covflow/linalg/exec.hpp"
#include "covflow/pipeline/frame.hpp"

namespace covflow::pipeline {

// Buffers a stage wants in every frame slot, beyond the standard arrays of FrameSlot.
struct SlotNeeds {
  std::size_t host_scratch_bytes = 0;
  std::size_t device_scratch_bytes = 0;
};

class Stage {
 public:
  virtual ~Stage() = default;

  // "covariance", "subspace", ... (the key of its section under pipeline.stages).
  virtual std::string_view name() const = 0;
  // A degradable stage is skipped when the frame's remaining budget is below its predicted cost.
  virtual bool degradable() const { return false; }
  // This stage's own budget in ms (0: none); exceeding it is counted, not fatal.
  virtual double budget_ms() const { return 0.0; }
  // True when run() reads the frame's host results (FrameSlot::results), as the publish stage
  // does. On a CUDA lane the runner then waits for the frame's GPU work (the stream) before
  // calling run(), so the results the earlier stages copied back are complete; such a stage is
  // timed on the host clock.
  virtual bool needs_host_results() const { return false; }
  // True when the stage must see the frames in the order they came in (the publish stage: results
  // leave in sequence order). With several lanes the runner runs such a stage, and every stage
  // after it, on its sequencing thread after the reorder buffer, on host results only (run() and
  // collect() on the first lane's Exec, no GPU arrays). With one lane it runs on the lane.
  virtual bool in_sequence() const { return false; }
  // True when what the stage does to a frame depends on earlier frames through state it keeps
  // per lane (the covariance window, the adaptive stage's factors). Several lanes would each see
  // only the frames they took, so the runner splits such a chain's frames by cells instead: each
  // lane runs every frame on its own share of the cells (a frame of fewer cells than prepare()'s
  // shape, the same share every time), or one lane runs it all (RunnerOptions::stateful_lanes;
  // docs/scale.md).
  virtual bool keeps_state() const { return false; }

  // Once per lane, before any frame: reserve every workspace, plan every FFT, for frames up to
  // `shape`. Nothing may allocate in run().
  virtual void prepare(const FrameShape& shape, linalg::Exec& exec) {}
  virtual SlotNeeds slot_needs(const FrameShape& shape) const { return {}; }

  // Processes one frame. On a CUDA lane, GPU work is issued on exec's stream and need not be
  // complete when run() returns: the runner records an event after each stage and synchronises
  // once, after the last (or before the first stage that needs_host_results()). A problem with
  // this frame alone (wrong shape, non-finite data) is reported by throwing FrameError; the
  // runner counts it, drops the frame and goes on.
  virtual void run(FrameSlot& frame, linalg::Exec& exec) = 0;

  // Called once the work run() issued for this frame is complete, for every stage that ran on it,
  // in chain order: on a CUDA lane after the runner's stream synchronisation, on a CPU lane right
  // after run(). A stage whose kernels copy results back into host staging moves them into
  // FrameSlot::results here — on the lane's thread, rather than in a host function queued on the
  // stream, which would hold the stream (and the next frame's work) until a driver thread ran it.
  virtual void collect(FrameSlot& frame, linalg::Exec& exec) {}

  // Warm start (Runner::warm_up): before the first frame the chain runs on synthetic frames of the
  // shape in force, so that the first real frames meet the budget like the rest — kernels loaded,
  // plans executed, buffers touched. warm_up() is run() without effects outside the stage (the
  // publish stage formats its message but sends and records nothing); once every warm-up frame
  // is through, reset() forgets what the stage carries from frame to frame on this lane
  // (covariance window, adaptive factors), so the first real frame starts afresh.
  virtual void warm_up(FrameSlot& frame, linalg::Exec& exec) { run(frame, exec); }
  virtual void reset(linalg::Exec& exec) {}
  // Synthetic frames this stage needs to go through every path it takes in steady state (a stage
  // that updates state across frames may need several).
  virtual int warm_up_frames(const FrameShape& shape) const { return 1; }
};

// A problem with one frame (not with the pipeline): the frame is dropped and counted by reason.
class FrameError : public std::runtime_error {
 public:
  FrameError(std::string reason, const std::string& message) : std::runtime_error(message), reason_(std::move(reason)) {}
  // Short counter key: "shape", "non_finite", "stage_error", ...
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string reason_;
};

}  // namespace covflow::pipeline

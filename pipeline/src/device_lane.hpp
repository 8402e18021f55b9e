// The CUDA side of one runner lane: the copy stream that uploads payloads while the previous
// frame computes, and the events that order and time a frame's stages. Internal to the runner;
// it keeps every CUDA runtime call out of runner.cpp, which builds the same with and without CUDA.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "covflow/linalg/exec.hpp"
#include "covflow/pipeline/frame.hpp"

namespace covflow::pipeline::detail {

class DeviceLane {
 public:
  static constexpr std::size_t kStart = static_cast<std::size_t>(-1);

  // The lane of a CUDA Exec, with one timing event per stage; nullptr for a CPU Exec.
  static std::unique_ptr<DeviceLane> make(linalg::Exec& exec, std::size_t stage_count);
  virtual ~DeviceLane() = default;

  // The CUDA device id of the lane.
  virtual int device() const = 0;
  // Makes the Exec's device current on the calling thread (each worker does it once).
  virtual void make_current() = 0;
  // Copies `bytes` of the slot's pinned host payload to its device payload on the lane's copy
  // stream and records upload event `parity` (0 or 1: two frames can be in flight on a lane). A
  // slot whose payload the ingest thread already uploaded (FrameSlot::payload_on_device) is not
  // copied again: the copy stream waits for the slot's upload event instead.
  virtual void upload(FrameSlot& slot, std::size_t bytes, int parity) = 0;
  // Orders the compute stream after upload `parity` and records the frame's start event.
  virtual void begin(int parity) = 0;
  // Records stage `stage`'s end event on the compute stream.
  virtual void stage_end(std::size_t stage) = 0;
  // Whether that event has completed (does not block).
  virtual bool stage_complete(std::size_t stage) = 0;
  // Waits for everything issued on the compute stream.
  virtual void synchronize() = 0;
  // Whether work issued on the compute stream is still running (does not block).
  virtual bool computing() = 0;
  // Waits for every upload issued on the copy stream (before a slot is released unprocessed).
  virtual void wait_uploads() = 0;
  // GPU milliseconds from the end event of `from` (kStart: the start event) to the end event of
  // `to`; both must have completed.
  virtual double elapsed_ms(std::size_t from, std::size_t to) = 0;
  // After an error: what left the device unusable for this process ("" when it still works). A
  // sticky error (an illegal address in a kernel, a launch failure) is returned by every later
  // CUDA call, a device synchronisation included.
  virtual std::string lost() = 0;
};

// The ingest thread's side of the upload: stretches of a payload copied to the slot's device
// payload, on a stream of its own, while the input is still placing the rest (PlacementObserver),
// and the slot's upload event recorded after the last. Internal to the runner.
class IngestUploader {
 public:
  // For a CUDA Exec; nullptr for a CPU one. Makes the Exec's device current on the caller's thread.
  static std::unique_ptr<IngestUploader> make(linalg::Exec& exec);
  virtual ~IngestUploader() = default;
  virtual void make_current() = 0;
  // Host payload bytes [begin, end) of `slot` to its device payload, asynchronously.
  virtual void copy(FrameSlot& slot, std::size_t begin, std::size_t end) = 0;
  // Records the slot's upload event after everything copied so far.
  virtual void finish(FrameSlot& slot) = 0;
  // Waits for every copy issued (before the ingest thread ends).
  virtual void wait() = 0;
};

}  // namespace covflow::pipeline::detail

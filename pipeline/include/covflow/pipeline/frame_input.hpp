// Where the pipeline's frames come from: the ingest thread's view of an input. stages::FrameSource
// (scenario generator, frame file replay, ZeroMQ feed) implements it; tests implement it directly.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "covflow/replay/frame.hpp"

namespace covflow::pipeline {

class FrameInput {
 public:
  virtual ~FrameInput() = default;
  // The next frame; nullopt when none arrived within `wait` (a live feed) or when the input has
  // ended (ended() then says so). Called from the ingest thread only.
  virtual std::optional<replay::Frame> next(std::chrono::milliseconds wait) = 0;
  virtual bool ended() const = 0;
  // Input refused as damaged so far (messages that are not one whole record, damaged records).
  // The pipeline counts each one as a frame in and dropped (reason rejected_input).
  virtual std::uint64_t rejected() const { return 0; }
  // The latest refusal, for the log.
  virtual std::string last_problem() const { return {}; }
  // What the input is, for the log and the status reply.
  virtual std::string describe() const = 0;
  // The runner hands each frame back once its payload has been copied into the frame pool, so an
  // input that makes frames itself can reuse the payload's storage: a fresh allocation of tens of
  // MB per frame costs its page faults on every frame (on a 47 MB covariance frame, longer than
  // the 10 ms frame period on the H100 host). Called from the ingest thread; the default drops it.
  virtual void recycle(replay::Frame&& frame) { (void)frame; }

  // Zero-copy inputs write each frame straight into the pipeline's frame slot (pinned host memory
  // on a GPU lane) instead of handing over a Frame that the ingest thread copies there — on a
  // 47 MB covariance frame that copy is about 5 ms of the frame's latency. Such an input returns
  // true here and implements next_into(); the ingest thread then calls only next_into().
  virtual bool fills_in_place() const { return false; }
  // Like next(), but the payload goes into `payload` (the slot's whole capacity) and only the
  // header comes back: its payload_bytes() bytes at the start of `payload` are the frame's. A
  // frame whose payload would not fit is not written; its header still comes back, and the
  // runner drops it (reason shape) without reading the slot.
  virtual std::optional<replay::FrameHeader> next_into(std::chrono::milliseconds wait, std::span<std::byte> payload);
};

}  // namespace covflow::pipeline

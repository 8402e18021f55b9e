// Where the pipeline's frames come from: the ingest thread's view of an input. stages::FrameSource
// (scenario generator, frame file replay, ZeroMQ feed) implements it; tests implement it directly.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "covflow/replay/frame.hpp"

namespace covflow::pipeline {

// When the frame an input just returned reached covflowd, on the steady clock (ns since its
// epoch), so that latency is counted from the moment the record was in covflowd's hands rather
// than from when the ingest thread got round to it.
struct InputTiming {
  // The frame's arrival: a live feed's message received, a paced replay's record due (read ahead,
  // it was in hand by then), a fast replay's read begun. Latency and the deadline count from it.
  // 0: the moment next()/next_into() returned.
  std::int64_t arrival_ns = 0;
  // When a paced input (a replay, the generator) was due to deliver it; 0 for a live feed, which
  // has no schedule. The runner reports taken − due as input lag.
  std::int64_t due_ns = 0;
  // Another frame was already waiting when this one was taken (queued in the socket, or already
  // due): the input is behind the pipeline.
  bool more_waiting = false;
  // Time the input spent placing and checking the payload (copy or read, CRC), ns; 0: not measured.
  std::int64_t place_ns = 0;
};

// Told by an in-place input as each stretch of a payload lands, in order from byte 0: on the
// ingest thread, in the slot next_into() was given, or on a placing thread, in the slot place()
// was given — so that the runner can move it on (upload it to the GPU) while the rest is still
// being placed. A call that starts again from 0 begins a new payload in the same slot (the
// previous one was refused).
class PlacementObserver {
 public:
  virtual ~PlacementObserver() = default;
  // Bytes [begin, end) of the payload are in the slot (their CRC is not known until next_into returns).
  virtual void placed(std::size_t begin, std::size_t end) = 0;
};

// A frame an input has handed out (FrameInput::claim) whose payload is not yet placed.
struct Claim {
  replay::FrameHeader header;
  // As last_timing() would say; place_ns is the runner's to fill in. A claim may come before its
  // frame is due (due_ns ahead: a replay reads ahead): the runner places it at once and admits it
  // when due.
  InputTiming timing;
  std::uint64_t token = 0;  // the input's own note of what to place (a record's offset, a template)
};

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

  // The timing of the frame next() or next_into() last returned; the default says nothing (the
  // runner then takes the frame as arriving when it was returned).
  virtual InputTiming last_timing() const { return {}; }

  // The runner's observer of next_into()'s placement (null: none). An input that places a payload
  // in stretches tells it of each; one that does not simply ignores it (the default). Wrappers
  // forward it to what they wrap.
  virtual void observe_placement(PlacementObserver* observer) { (void)observer; }

  // Inputs that can place several frames at once — whose next frame is known before the previous
  // one's payload is in place (a recording, a generator) — say how many here (> 1) and implement
  // claim() and place(). The ingest thread then claims frames in order and the runner's placing
  // threads place up to that many claimed payloads at the same time, each into its own slot: one
  // thread placing one 47 MB payload at a time, however many threads share its copy, is the ceiling
  // of a host with several GPUs (docs/scale.md). Frames still enter the queue in claim order.
  virtual std::size_t concurrent_places() const { return 1; }
  // The next frame's header and timing, its payload not yet placed; nullopt as next_into() (none
  // within `wait`, or the input ended). Called from the ingest thread only; the runner claims at
  // most as many frames ahead of their admission as it places at once.
  virtual std::optional<Claim> claim(std::chrono::milliseconds wait);
  // Places a claimed frame's payload (claim.header.payload_bytes() bytes, which fit) at the start
  // of `payload` and checks it. Called from up to concurrent_places() threads at once, each on its
  // own claim and slot, while claim() goes on. "" when placed; otherwise why the payload was
  // refused (damaged): the runner counts the frame in and dropped (rejected_input) and logs it —
  // the input does not count it in rejected(). With an `observer` (not null), an input that places
  // the payload in stretches tells it of each, in order from byte 0, on the calling thread, so that
  // the runner can upload them to the frame's GPU while the rest is placed; one that does not tell
  // may ignore it (the runner then uploads the payload once placed).
  virtual std::string place(const Claim& claim, std::span<std::byte> payload, PlacementObserver* observer);
};

}  // namespace covflow::pipeline

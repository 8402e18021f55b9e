// Replayer: the frames of a file, delivered on a schedule.
//
//   recorded  each frame is due when its capture time, relative to the previous frame's, says
//             (divided by `speed`); a capture time that goes backwards counts as no gap
//   fixed     frames are due at rate_hz × speed
//   fast      as fast as the caller takes them
//
// The schedule is kept against the clock rather than by sleeping an interval after each frame,
// so it does not drift; a caller that falls behind gets the frames that are already due without
// waiting until it has caught up. With `loop`, the file starts again after its last frame, one
// frame interval later (the recording's mean interval under `recorded`). `start_sequence` and
// `stop_sequence` (both inclusive) bound each pass: it starts at the first record whose sequence
// is at least start and ends at the first record whose sequence is above stop.
//
// Under `recorded`, a gap between two capture times longer than `max_gap` (after `speed`) is
// shortened to it and counted (clamped_gaps()): a recording with the radar off for an hour, or a
// corrupt capture time that still passed its CRC, does not hold the replay for that long.
//
// next() sleeps until its frame is due. next_into() is the daemon's way: it reads the record into
// the caller's buffer at once (ahead of its due time) and waits for it at most as long as told, so
// that the ingest thread can look at its stop flags; a record not yet due stays in the buffer for
// the next call.
//
// The clock is injectable, so tests check the schedule without sleeping.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "covflow/replay/frame.hpp"
#include "covflow/replay/reader.hpp"

namespace covflow::replay {

enum class Pace { recorded, fixed, fast };
std::string_view name(Pace pace);
std::optional<Pace> parse_pace(std::string_view text);

struct ReplayOptions {
  Pace pace = Pace::recorded;
  double rate_hz = 100.0;  // Pace::fixed
  double speed = 1.0;      // > 0; multiplies the recorded or fixed rate
  bool loop = false;
  std::optional<std::uint64_t> start_sequence = std::nullopt;
  std::optional<std::uint64_t> stop_sequence = std::nullopt;
  std::chrono::nanoseconds max_gap = std::chrono::seconds(10);  // > 0
};

// Monotonic time in nanoseconds from an arbitrary origin.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::nanoseconds now() = 0;
  // Returns at `deadline` or later.
  virtual void sleep_until(std::chrono::nanoseconds deadline) = 0;
};

// A record next_into() delivered.
struct Delivery {
  FrameHeader header;
  std::chrono::nanoseconds due{0};     // when it was due, on the replayer's clock
  std::chrono::nanoseconds read{0};    // time spent reading and checking it
  bool fits = true;                    // false: too large for the buffer, not read (refuse it)
  bool next_due = false;               // the frame after it was due already when it was delivered
};

// std::chrono::steady_clock.
Clock& steady_clock();

class Replayer {
 public:
  // Throws std::invalid_argument for a speed or rate that is not finite and positive, or a start
  // above the stop. The reader must outlive the replayer.
  Replayer(Reader& reader, const ReplayOptions& options, Clock& clock = steady_clock());

  // Waits until the next frame is due and returns it; nullopt when the replay is over (the end
  // of the file without loop, or a pass that found no frame).
  std::optional<Frame> next();
  // The next record, read into the start of `payload` by `mover` (CRC checked on the way) as soon
  // as the call needs it, then delivered when due. Waits at most `wait` for that: nullopt when the
  // record is not due by then (it stays read, and the next call with the same buffer delivers it
  // without reading it again) or when the replay is over (finished() then says so).
  // `placed` hears of each stretch of a payload as it lands (PayloadMover::read).
  std::optional<Delivery> next_into(std::span<std::byte> payload, PayloadMover& mover, std::chrono::nanoseconds wait,
                                    const Placed& placed = {});
  // The next record's header and when it is due, at once: neither its payload is read nor the
  // call waits (for a caller that reads payloads itself, several at once, through
  // Reader::read_payload, and delivers each when due). nullopt when the replay is over
  // (finished()). Not to be mixed with next_into() while it holds a record (std::logic_error).
  std::optional<Delivery> claim(RecordInfo* record);
  // The replay is over: no record is left to deliver.
  bool finished() const { return finished_; }

  std::uint64_t frames_delivered() const { return delivered_; }
  // Passes through the file begun so far.
  std::uint64_t passes() const { return passes_; }
  // When the frame next() last returned was due.
  std::chrono::nanoseconds last_due() const { return due_; }
  // Gaps between capture times shortened to max_gap so far.
  std::uint64_t clamped_gaps() const { return clamped_; }

 private:
  void start_pass();
  // The next record of the replay, its payload read into `into` (or, with `mover`, through it into
  // `span`; with neither, not read); nullopt when the replay is over.
  std::optional<RecordInfo> fetch(std::vector<std::byte>* into, std::span<std::byte> span, PayloadMover* mover,
                                  const Placed& placed = {});
  // The due time of the record just fetched; updates the schedule's state.
  std::chrono::nanoseconds schedule(std::int64_t capture);
  // What the schedule says about the record after the one due at `due` (pace fixed: known; recorded: unknown).
  bool next_is_due(std::chrono::nanoseconds due);

  Reader& reader_;
  ReplayOptions options_;
  Clock& clock_;
  bool in_pass_ = false;
  std::uint64_t passes_ = 0;
  std::uint64_t delivered_ = 0;
  std::uint64_t pass_frames_ = 0;
  std::int64_t pass_first_capture_ = 0;
  std::int64_t previous_capture_ = 0;
  double wrap_interval_ns_ = 0;  // the gap after the last frame of a pass, under loop
  bool wrapped_ = false;
  bool finished_ = false;
  std::uint64_t clamped_ = 0;
  std::chrono::nanoseconds due_{0};
  // next_into(): the record read and scheduled, not yet delivered.
  struct StagedRecord {
    bool valid = false;
    std::uint64_t offset = 0;  // in the file, to read it again into another buffer
    const std::byte* buffer = nullptr;
    Delivery delivery;
  } staged_;
};

}  // namespace covflow::replay

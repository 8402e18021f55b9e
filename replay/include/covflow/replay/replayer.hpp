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
// The clock is injectable, so tests check the schedule without sleeping.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
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
};

// Monotonic time in nanoseconds from an arbitrary origin.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::nanoseconds now() = 0;
  // Returns at `deadline` or later.
  virtual void sleep_until(std::chrono::nanoseconds deadline) = 0;
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

  std::uint64_t frames_delivered() const { return delivered_; }
  // Passes through the file begun so far.
  std::uint64_t passes() const { return passes_; }
  // When the frame next() last returned was due.
  std::chrono::nanoseconds last_due() const { return due_; }

 private:
  void start_pass();

  Reader& reader_;
  ReplayOptions options_;
  Clock& clock_;
  bool in_pass_ = false;
  std::uint64_t passes_ = 0;
  std::uint64_t delivered_ = 0;
  std::uint64_t pass_frames_ = 0;
  std::int64_t pass_first_capture_ = 0;
  std::int64_t previous_capture_ = 0;
  std::int64_t wrap_interval_ns_ = 0;  // the gap after the last frame of a pass, under loop
  bool wrapped_ = false;
  std::chrono::nanoseconds due_{0};
};

}  // namespace covflow::replay

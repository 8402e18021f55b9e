#include "covflow/replay/replayer.hpp"

#include <cmath>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

namespace covflow::replay {
namespace {

class SteadyClock final : public Clock {
 public:
  std::chrono::nanoseconds now() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch());
  }
  void sleep_until(std::chrono::nanoseconds deadline) override {
    std::this_thread::sleep_until(std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(deadline)));
  }
};

}  // namespace

std::string_view name(Pace pace) {
  switch (pace) {
    case Pace::recorded: return "recorded";
    case Pace::fixed: return "fixed";
    case Pace::fast: return "fast";
  }
  return "unknown";
}

std::optional<Pace> parse_pace(std::string_view text) {
  for (Pace p : {Pace::recorded, Pace::fixed, Pace::fast})
    if (text == name(p)) return p;
  return std::nullopt;
}

Clock& steady_clock() {
  static SteadyClock clock;
  return clock;
}

Replayer::Replayer(Reader& reader, const ReplayOptions& options, Clock& clock)
    : reader_(reader), options_(options), clock_(clock) {
  if (!std::isfinite(options.speed) || options.speed <= 0)
    throw std::invalid_argument(fmt::format("replay speed must be finite and above 0 (got {})", options.speed));
  if (options.pace == Pace::fixed && (!std::isfinite(options.rate_hz) || options.rate_hz <= 0))
    throw std::invalid_argument(fmt::format("replay rate must be finite and above 0 Hz (got {})", options.rate_hz));
  if (options.start_sequence && options.stop_sequence && *options.start_sequence > *options.stop_sequence)
    throw std::invalid_argument(fmt::format("replay start sequence {} is above the stop sequence {}",
                                            *options.start_sequence, *options.stop_sequence));
}

void Replayer::start_pass() {
  if (options_.start_sequence) reader_.seek_sequence(*options_.start_sequence);
  else reader_.rewind();
  in_pass_ = true;
  pass_frames_ = 0;
  ++passes_;
}

std::optional<Frame> Replayer::next() {
  std::optional<Frame> frame;
  while (!frame) {
    if (!in_pass_) start_pass();
    frame = reader_.next();
    if (frame && options_.stop_sequence && frame->header.sequence > *options_.stop_sequence) frame.reset();
    if (!frame) {
      in_pass_ = false;
      if (!options_.loop || pass_frames_ == 0) return std::nullopt;
      // The gap after a pass's last frame: its mean interval (none for a single frame).
      wrap_interval_ns_ = pass_frames_ > 1 ? (previous_capture_ - pass_first_capture_) / std::int64_t(pass_frames_ - 1) : 0;
      wrapped_ = true;
      continue;
    }
    if (options_.start_sequence && frame->header.sequence < *options_.start_sequence) frame.reset();
  }

  const std::int64_t capture = frame->header.capture_time_ns;
  if (delivered_ == 0) {
    due_ = clock_.now();
  } else {
    double gap_ns = 0;
    switch (options_.pace) {
      case Pace::recorded:
        gap_ns = double(wrapped_ ? wrap_interval_ns_ : std::max<std::int64_t>(0, capture - previous_capture_)) / options_.speed;
        break;
      case Pace::fixed: gap_ns = 1e9 / (options_.rate_hz * options_.speed); break;
      case Pace::fast: gap_ns = 0; break;
    }
    due_ += std::chrono::nanoseconds(std::llround(gap_ns));
  }
  if (options_.pace != Pace::fast && clock_.now() < due_) clock_.sleep_until(due_);
  if (pass_frames_ == 0) pass_first_capture_ = capture;
  previous_capture_ = capture;
  wrapped_ = false;
  ++pass_frames_;
  ++delivered_;
  return frame;
}

}  // namespace covflow::replay

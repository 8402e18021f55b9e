#include "covflow/replay/replayer.hpp"

#include <cmath>
#include <limits>
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
  if (options.max_gap.count() <= 0)
    throw std::invalid_argument(fmt::format("replay max_gap must be above 0 (got {} ns)", options.max_gap.count()));
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

namespace {

// later − earlier in ns, without overflow; 0 when `later` is not later.
double capture_gap_ns(std::int64_t earlier, std::int64_t later) {
  return later > earlier ? double(std::uint64_t(later) - std::uint64_t(earlier)) : 0.0;
}

}  // namespace

std::optional<RecordInfo> Replayer::fetch(std::vector<std::byte>* into, std::span<std::byte> span, PayloadMover* mover,
                                          const Placed& placed) {
  for (;;) {
    if (!in_pass_) start_pass();
    std::optional<RecordInfo> info;
    if (mover != nullptr) {
      info = reader_.next_into(span, *mover, placed);
    } else if (into == nullptr) {
      info = reader_.next_header();
    } else if (auto frame = reader_.next()) {
      info = RecordInfo{reader_.last_offset(), frame->header};
      *into = std::move(frame->payload);
    }
    if (info && options_.stop_sequence && info->header.sequence > *options_.stop_sequence) info.reset();
    if (!info) {
      in_pass_ = false;
      if (!options_.loop || pass_frames_ == 0) {
        finished_ = true;
        return std::nullopt;
      }
      // The gap after the pass's last frame: its mean interval (none for a single frame).
      wrap_interval_ns_ =
          pass_frames_ > 1 ? capture_gap_ns(pass_first_capture_, previous_capture_) / double(pass_frames_ - 1) : 0.0;
      wrapped_ = true;
      continue;
    }
    if (options_.start_sequence && info->header.sequence < *options_.start_sequence) continue;
    return info;
  }
}

std::chrono::nanoseconds Replayer::schedule(std::int64_t capture) {
  if (delivered_ == 0 || options_.pace == Pace::fast) {
    due_ = clock_.now();
  } else {
    double gap_ns = 0;
    if (options_.pace == Pace::fixed) {
      gap_ns = 1e9 / (options_.rate_hz * options_.speed);
    } else {
      const double interval = wrapped_ ? wrap_interval_ns_ : capture_gap_ns(previous_capture_, capture);
      gap_ns = interval / options_.speed;
      if (gap_ns > double(options_.max_gap.count())) {
        gap_ns = double(options_.max_gap.count());
        ++clamped_;
      }
    }
    due_ += std::chrono::nanoseconds(std::llround(gap_ns));
  }
  if (pass_frames_ == 0) pass_first_capture_ = capture;
  previous_capture_ = capture;
  wrapped_ = false;
  ++pass_frames_;
  ++delivered_;
  return due_;
}

std::optional<Frame> Replayer::next() {
  if (staged_.valid) throw std::logic_error("Replayer::next: a record read by next_into is waiting to be delivered");
  Frame frame;
  const auto info = fetch(&frame.payload, {}, nullptr);
  if (!info) return std::nullopt;
  frame.header = info->header;
  const std::chrono::nanoseconds due = schedule(frame.header.capture_time_ns);
  if (options_.pace != Pace::fast && clock_.now() < due) clock_.sleep_until(due);
  return frame;
}

std::optional<Delivery> Replayer::claim(RecordInfo* record) {
  if (staged_.valid) throw std::logic_error("Replayer::claim: a record read by next_into is waiting to be delivered");
  if (finished_) return std::nullopt;
  const auto now = clock_.now();
  const auto info = fetch(nullptr, {}, nullptr);
  if (!info) return std::nullopt;
  Delivery delivery{.header = info->header, .due = now, .read = std::chrono::nanoseconds(0), .fits = true, .next_due = false};
  const auto due = schedule(info->header.capture_time_ns);
  if (options_.pace != Pace::fast) delivery.due = due;
  if (options_.pace == Pace::fixed)
    delivery.next_due = now >= delivery.due + std::chrono::nanoseconds(std::llround(1e9 / (options_.rate_hz * options_.speed)));
  if (record != nullptr) *record = *info;
  return delivery;
}

std::optional<Delivery> Replayer::next_into(std::span<std::byte> payload, PayloadMover& mover, std::chrono::nanoseconds wait,
                                            const Placed& placed) {
  if (staged_.valid && staged_.buffer != payload.data()) {
    // Another buffer than the one the record waits in: read it again, into this one.
    const std::uint64_t resume = reader_.position();
    reader_.seek_offset(staged_.offset);
    const auto started = clock_.now();
    const auto again = reader_.next_into(payload, mover, placed);
    reader_.seek_offset(resume);
    if (!again || again->offset != staged_.offset) {
      staged_.valid = false;  // the record no longer reads back: it was damaged in between (reported)
      return std::nullopt;
    }
    staged_.buffer = payload.data();
    staged_.delivery.read = clock_.now() - started;
    staged_.delivery.fits = again->header.payload_bytes() <= payload.size();
  }
  if (!staged_.valid) {
    if (finished_) return std::nullopt;
    const auto started = clock_.now();
    const auto info = fetch(nullptr, payload, &mover, placed);
    if (!info) return std::nullopt;
    staged_.valid = true;
    staged_.offset = info->offset;
    staged_.buffer = payload.data();
    staged_.delivery = Delivery{.header = info->header,
                                .due = std::chrono::nanoseconds(0),
                                .read = clock_.now() - started,
                                .fits = info->header.payload_bytes() <= payload.size(),
                                .next_due = false};
    // A fast replay's record is due when its read began; a paced one's when the schedule says.
    staged_.delivery.due = options_.pace == Pace::fast ? started : schedule(info->header.capture_time_ns);
    if (options_.pace == Pace::fast) schedule(info->header.capture_time_ns);
  }
  if (options_.pace != Pace::fast) {
    const auto now = clock_.now();
    if (now < staged_.delivery.due) {
      if (staged_.delivery.due - now > wait) {
        clock_.sleep_until(now + wait);
        return std::nullopt;
      }
      clock_.sleep_until(staged_.delivery.due);
    }
  }
  staged_.valid = false;
  Delivery delivery = staged_.delivery;
  if (options_.pace == Pace::fixed)
    delivery.next_due = clock_.now() >= delivery.due + std::chrono::nanoseconds(std::llround(1e9 / (options_.rate_hz * options_.speed)));
  return delivery;
}

}  // namespace covflow::replay

// Fake inputs and stages for the pipeline tests: frames whose payload encodes their sequence
// number (so a test can tell that the right bytes reached the right slot), inputs that end or
// never end, and stages that sleep, throw or record what they saw.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <complex>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "covflow/linalg/exec.hpp"
#include "covflow/pipeline/frame_input.hpp"
#include "covflow/pipeline/stage.hpp"
#include "covflow/replay/frame.hpp"

namespace covflow::test {

using pipeline::FrameShape;
using pipeline::FrameSlot;

inline FrameShape small_shape() {
  FrameShape s;
  s.element_type = replay::ElementType::cf32;
  s.channels = 4;
  s.snapshots = 8;
  s.cells = 3;
  s.max_sources = 2;
  return s;
}

// `n` CPU lanes (an Exec each, one thread), and the pointers a Runner takes.
struct CpuLanes {
  std::vector<linalg::Exec> execs;
  explicit CpuLanes(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) execs.push_back(linalg::Exec::cpu(1));
  }
  std::vector<linalg::Exec*> pointers() {
    std::vector<linalg::Exec*> out;
    for (auto& e : execs) out.push_back(&e);
    return out;
  }
};

// A snapshot frame of `shape` whose element k is (seq, k).
inline replay::Frame frame_for(const FrameShape& shape, std::uint64_t seq) {
  replay::FrameHeader h;
  h.sequence = seq;
  h.capture_time_ns = std::int64_t(seq) * 1000;
  h.kind = replay::PayloadKind::snapshots;
  h.rows = shape.channels;
  h.cols = shape.snapshots;
  h.count = shape.cells;
  std::vector<std::complex<float>> values(h.element_count());
  for (std::size_t k = 0; k < values.size(); ++k) values[k] = {float(seq), float(k)};
  return replay::make_frame<std::complex<float>>(h, values);
}

// Whether a slot's host payload is frame_for(seq)'s.
inline bool payload_matches(const FrameSlot& slot, std::uint64_t seq) {
  const auto count = std::size_t(slot.header.element_count());
  const auto* v = reinterpret_cast<const std::complex<float>*>(slot.host.payload.data());
  for (std::size_t k = 0; k < count; ++k)
    if (v[k] != std::complex<float>(float(seq), float(k))) return false;
  return true;
}

// Frames from a list, then ended; optionally a pause before each frame.
class ListInput final : public pipeline::FrameInput {
 public:
  explicit ListInput(std::vector<replay::Frame> frames, std::chrono::microseconds gap = {})
      : frames_(frames.begin(), frames.end()), gap_(gap) {}
  std::optional<replay::Frame> next(std::chrono::milliseconds) override {
    std::lock_guard lock(mutex_);
    if (frames_.empty()) return std::nullopt;
    if (gap_.count() > 0) std::this_thread::sleep_for(gap_);
    replay::Frame f = std::move(frames_.front());
    frames_.pop_front();
    return f;
  }
  bool ended() const override {
    std::lock_guard lock(mutex_);
    return frames_.empty();
  }
  std::string describe() const override { return "test list"; }
  // Frames handed back after their payload was copied into the pool, with their storage intact.
  void recycle(replay::Frame&& frame) override {
    std::lock_guard lock(mutex_);
    ++recycled_;
    if (frame.payload.capacity() > 0) ++recycled_with_storage_;
  }
  std::uint64_t recycled() const {
    std::lock_guard lock(mutex_);
    return recycled_;
  }
  std::uint64_t recycled_with_storage() const {
    std::lock_guard lock(mutex_);
    return recycled_with_storage_;
  }

 private:
  mutable std::mutex mutex_;
  std::deque<replay::Frame> frames_;
  std::uint64_t recycled_ = 0, recycled_with_storage_ = 0;
  std::chrono::microseconds gap_;
};

// Frames 0, 1, 2, ... of a shape, `count` of them (0: without end), with a gap before each;
// `rejected_every` > 0 makes it also report one damaged record every that many frames.
class GeneratedInput final : public pipeline::FrameInput {
 public:
  GeneratedInput(FrameShape shape, std::uint64_t count, std::chrono::microseconds gap, std::uint64_t rejected_every = 0)
      : shape_(shape), count_(count), gap_(gap), rejected_every_(rejected_every) {}
  std::optional<replay::Frame> next(std::chrono::milliseconds) override {
    if (ended()) return std::nullopt;
    if (gap_.count() > 0) std::this_thread::sleep_for(gap_);
    const std::uint64_t seq = produced_++;
    if (rejected_every_ > 0 && seq % rejected_every_ == rejected_every_ - 1) ++rejected_;
    return frame_for(shape_, seq);
  }
  bool ended() const override { return count_ != 0 && produced_.load() >= count_; }
  std::uint64_t rejected() const override { return rejected_.load(); }
  std::string last_problem() const override { return "fake damage"; }
  std::string describe() const override { return "generated"; }
  std::uint64_t produced() const { return produced_.load(); }

 private:
  FrameShape shape_;
  std::uint64_t count_;
  std::chrono::microseconds gap_;
  std::uint64_t rejected_every_;
  std::atomic<std::uint64_t> produced_{0};
  std::atomic<std::uint64_t> rejected_{0};
};

// Frames 0 … count−1 of `shape` written straight into the runner's frame slot (a zero-copy input);
// every `wrong_every`-th frame (> 0) has one channel too many, and every `oversize_every`-th a
// payload larger than any slot (neither is written).
class InPlaceInput final : public pipeline::FrameInput {
 public:
  InPlaceInput(FrameShape shape, std::uint64_t count, std::uint64_t wrong_every = 0, std::uint64_t oversize_every = 0)
      : shape_(shape), count_(count), wrong_every_(wrong_every), oversize_every_(oversize_every) {}
  std::optional<replay::Frame> next(std::chrono::milliseconds) override {
    ++copied_calls_;  // the runner must not use this path for an in-place input
    return std::nullopt;
  }
  bool fills_in_place() const override { return true; }
  std::optional<replay::FrameHeader> next_into(std::chrono::milliseconds, std::span<std::byte> payload) override {
    if (ended()) return std::nullopt;
    const std::uint64_t seq = produced_++;
    replay::Frame f = frame_for(shape_, seq);
    if (wrong_every_ > 0 && seq % wrong_every_ == wrong_every_ - 1) {
      FrameShape other = shape_;
      other.channels += 1;
      f = frame_for(other, seq);
    }
    if (oversize_every_ > 0 && seq % oversize_every_ == oversize_every_ - 1) {
      f.header.count = std::uint32_t(payload.size());  // far more cells than a slot holds
      return f.header;
    }
    if (f.payload.size() <= payload.size()) std::memcpy(payload.data(), f.payload.data(), f.payload.size());
    return f.header;
  }
  bool ended() const override { return produced_.load() >= count_; }
  std::string describe() const override { return "in place"; }
  std::uint64_t copied_calls() const { return copied_calls_.load(); }

 private:
  FrameShape shape_;
  std::uint64_t count_, wrong_every_, oversize_every_;
  std::atomic<std::uint64_t> produced_{0}, copied_calls_{0};
};

// Frames 0 … count−1 of `shape`, written into the runner's slot in stretches of `stretch` bytes,
// each reported to the runner's placement observer as it lands, as the file and ZeroMQ inputs do.
// Every third frame is first placed as garbage and refused (a failed CRC: next_into returns nothing,
// counted in rejected()), then placed again from byte 0; every fifth reports only its first half
// (the runner must move the rest itself).
class PlacingInput final : public pipeline::FrameInput {
 public:
  PlacingInput(FrameShape shape, std::uint64_t count, std::size_t stretch) : shape_(shape), count_(count), stretch_(stretch) {}
  bool fills_in_place() const override { return true; }
  void observe_placement(pipeline::PlacementObserver* observer) override { observer_ = observer; }
  std::optional<replay::Frame> next(std::chrono::milliseconds) override { return std::nullopt; }
  std::optional<replay::FrameHeader> next_into(std::chrono::milliseconds, std::span<std::byte> payload) override {
    if (ended()) return std::nullopt;
    const std::uint64_t seq = produced_;
    replay::Frame f = frame_for(shape_, seq);
    if (seq % 3 == 2 && !refused_once_) {
      refused_once_ = true;
      std::vector<std::byte> garbage(f.payload.size(), std::byte{0x5C});
      place(garbage, payload, garbage.size());
      ++rejected_;
      return std::nullopt;
    }
    refused_once_ = false;
    place(f.payload, payload, seq % 5 == 4 ? f.payload.size() / 2 : f.payload.size());
    ++produced_;
    return f.header;
  }
  bool ended() const override { return produced_.load() >= count_; }
  std::uint64_t rejected() const override { return rejected_.load(); }
  std::string describe() const override { return "placing"; }
  // Stretches reported to an observer (the runner clears its observer when ingest ends).
  std::uint64_t reported() const { return reported_.load(); }

 private:
  // Copies `bytes` into `slot` stretch by stretch, reporting the first `reported` bytes' stretches.
  void place(const std::vector<std::byte>& bytes, std::span<std::byte> slot, std::size_t reported) {
    for (std::size_t at = 0; at < bytes.size(); at += stretch_) {
      const std::size_t n = std::min(stretch_, bytes.size() - at);
      std::memcpy(slot.data() + at, bytes.data() + at, n);
      if (observer_ != nullptr && at + n <= reported) {
        observer_->placed(at, at + n);
        ++reported_;
      }
    }
  }
  FrameShape shape_;
  std::uint64_t count_;
  std::size_t stretch_;
  pipeline::PlacementObserver* observer_ = nullptr;
  bool refused_once_ = false;
  std::atomic<std::uint64_t> produced_{0}, rejected_{0}, reported_{0};
};

// An input that places several frames at once (claim, then place from the runner's placing
// threads), each payload in stretches of `stretch` bytes told to the observer place() is given:
// all of them, or only the first half's (sequence % 5 == 4), or none (sequence % 7 == 3; the runner
// must then upload the rest, or the whole, itself). Every 11th frame (sequence % 11 == 6) is
// refused after garbage was placed (and reported). Frames 0 … count−1.
class ClaimingPlacingInput final : public pipeline::FrameInput {
 public:
  ClaimingPlacingInput(FrameShape shape, std::uint64_t count, std::size_t places, std::size_t stretch)
      : shape_(shape), count_(count), places_(places), stretch_(stretch) {}
  bool fills_in_place() const override { return true; }
  std::optional<replay::Frame> next(std::chrono::milliseconds) override { return std::nullopt; }
  std::size_t concurrent_places() const override { return places_; }
  std::optional<pipeline::Claim> claim(std::chrono::milliseconds) override {
    if (ended()) return std::nullopt;
    const std::uint64_t seq = claimed_++;
    return pipeline::Claim{.header = frame_for(shape_, seq).header, .timing = {}, .token = seq};
  }
  std::string place(const pipeline::Claim& claimed, std::span<std::byte> payload,
                    pipeline::PlacementObserver* observer) override {
    const std::uint64_t seq = claimed.token;
    if (observer != nullptr) ++observed_;
    replay::Frame f = frame_for(shape_, seq);
    if (seq % 11 == 6) std::fill(f.payload.begin(), f.payload.end(), std::byte{0x5C});
    const std::size_t reported = seq % 7 == 3 ? 0 : seq % 5 == 4 ? f.payload.size() / 2 : f.payload.size();
    for (std::size_t at = 0; at < f.payload.size(); at += stretch_) {
      const std::size_t n = std::min(stretch_, f.payload.size() - at);
      std::memcpy(payload.data() + at, f.payload.data() + at, n);
      if (observer != nullptr && at + n <= reported) {
        observer->placed(at, at + n);
        ++reported_;
      }
    }
    return seq % 11 == 6 ? "fake damage" : "";
  }
  bool ended() const override { return claimed_.load() >= count_; }
  std::string describe() const override { return "claiming-placing"; }
  // place() calls that were given an observer, and stretches told to one.
  std::uint64_t observed() const { return observed_.load(); }
  std::uint64_t reported() const { return reported_.load(); }

 private:
  FrameShape shape_;
  std::uint64_t count_;
  std::size_t places_, stretch_;
  std::atomic<std::uint64_t> claimed_{0}, observed_{0}, reported_{0};
};

// A stage that runs `action` (if any), can sleep, and counts the frames it ran on and the
// collect() calls it got (`on_collect`, if set, sees each).
class FakeStage final : public pipeline::Stage {
 public:
  using Action = std::function<void(FrameSlot&)>;
  FakeStage(std::string name, std::chrono::microseconds sleep = {}, bool degradable = false, Action action = {})
      : name_(std::move(name)), sleep_(sleep), degradable_(degradable), action_(std::move(action)) {}
  std::string_view name() const override { return name_; }
  bool degradable() const override { return degradable_; }
  double budget_ms() const override { return budget_ms_; }
  bool needs_host_results() const override { return host_ || in_sequence_; }
  bool in_sequence() const override { return in_sequence_; }
  bool keeps_state() const override { return keeps_state_; }
  void prepare(const FrameShape&, linalg::Exec&) override { ++prepares_; }
  void run(FrameSlot& frame, linalg::Exec&) override {
    ++runs_;
    if (sleep_.count() > 0) std::this_thread::sleep_for(sleep_);
    if (action_) action_(frame);
  }
  void collect(FrameSlot& frame, linalg::Exec&) override {
    ++collects_;
    if (on_collect_) on_collect_(frame);
  }
  int warm_up_frames(const FrameShape&) const override { return warm_frames_; }
  void reset(linalg::Exec&) override { ++resets_; }
  FakeStage& warming_with(int frames) {
    warm_frames_ = frames;
    return *this;
  }
  std::uint64_t resets() const { return resets_.load(); }
  FakeStage& on_collect(Action action) {
    on_collect_ = std::move(action);
    return *this;
  }
  FakeStage& with_budget(double ms) {
    budget_ms_ = ms;
    return *this;
  }
  FakeStage& needing_host_results() {
    host_ = true;
    return *this;
  }
  // Runs after the reorder buffer when the runner has several lanes (as the publish stage does).
  FakeStage& running_in_sequence() {
    in_sequence_ = true;
    return *this;
  }
  FakeStage& keeping_state() {
    keeps_state_ = true;
    return *this;
  }
  std::uint64_t prepares() const { return prepares_.load(); }
  std::uint64_t runs() const { return runs_.load(); }
  std::uint64_t collects() const { return collects_.load(); }

 private:
  std::string name_;
  std::chrono::microseconds sleep_;
  bool degradable_;
  Action action_;
  double budget_ms_ = 0;
  bool host_ = false, in_sequence_ = false, keeps_state_ = false;
  Action on_collect_;
  int warm_frames_ = 1;
  std::atomic<std::uint64_t> runs_{0}, collects_{0}, resets_{0}, prepares_{0};
};

// Frames of `shape` with chosen sequence numbers, each with the timing given for it: its arrival
// and due time as offsets before the moment it is returned, and whether another was waiting.
class TimedInput final : public pipeline::FrameInput {
 public:
  struct Item {
    std::uint64_t sequence;
    std::chrono::microseconds arrived_before{0};  // 0: no arrival time given
    std::chrono::microseconds due_before{-1};     // negative: no schedule
    bool more_waiting = false;
    std::chrono::microseconds place{0};
  };
  TimedInput(FrameShape shape, std::vector<Item> items) : shape_(shape), items_(std::move(items)) {}
  std::optional<replay::Frame> next(std::chrono::milliseconds) override {
    if (ended()) return std::nullopt;
    const Item& item = items_[next_++];
    const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch()).count();
    timing_ = {};
    if (item.arrived_before.count() > 0) timing_.arrival_ns = now - item.arrived_before.count() * 1000;
    if (item.due_before.count() >= 0) timing_.due_ns = now - item.due_before.count() * 1000;
    timing_.more_waiting = item.more_waiting;
    timing_.place_ns = item.place.count() * 1000;
    return frame_for(shape_, item.sequence);
  }
  bool ended() const override { return next_ >= items_.size(); }
  pipeline::InputTiming last_timing() const override { return timing_; }
  std::string describe() const override { return "timed"; }

 private:
  FrameShape shape_;
  std::vector<Item> items_;
  std::size_t next_ = 0;  // ingest thread only
  pipeline::InputTiming timing_;
};

}  // namespace covflow::test

// A bounded reorder buffer for items that carry a sequence number and arrive out of order (the
// results of several workers): it releases them in sequence order, and never holds one for longer
// than it was told. A sequence that has not arrived is given up on as missing when
//   - `capacity` items wait behind it, or
//   - the item that has waited longest behind it has waited `wait`;
// what follows it is then released and the missing sequence counted. One that arrives after it
// was given up is released at once, out of order, and counted late (no longer missing); one that
// arrives a second time is a duplicate, counted and not released again.
//
// The first sequence is `first` when given. Without it, the buffer takes the smallest sequence it
// has when it first has to release something (the first give-up decision), so results of the first
// frames that finish out of order still come out in order.
//
// Time is passed in (any monotonic clock), so tests need no sleeping. Not thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace covflow::pipeline {

struct SequenceReorderOptions {
  std::size_t capacity = 256;                       // >= 1: items held behind a gap at most
  std::chrono::nanoseconds wait = std::chrono::seconds(1);  // > 0: longest an item waits for a gap
  std::optional<std::uint64_t> first = std::nullopt;        // the first sequence, when known
};

struct SequenceReorderCounters {
  std::uint64_t received = 0;      // items offered
  std::uint64_t duplicates = 0;    // of those, a sequence already received: dropped
  std::uint64_t out_of_order = 0;  // of those, arrived after a higher sequence had arrived
  std::uint64_t released = 0;      // released in order
  std::uint64_t missing = 0;       // sequences given up on that never arrived (so far)
  std::uint64_t late = 0;          // sequences given up on that arrived afterwards: released out of order
  std::uint64_t stale = 0;         // older than the first sequence, or than the history kept: dropped
};

template <class T>
class SequenceReorder {
 public:
  using Time = std::chrono::nanoseconds;  // on any monotonic clock
  // History of the last this-many sequences below the next one, to tell late from duplicate.
  static constexpr std::uint64_t history = 1u << 16;

  explicit SequenceReorder(const SequenceReorderOptions& options)
      : options_(options), states_(history, State::unknown) {
    options_.capacity = std::max<std::size_t>(options_.capacity, 1);
    if (options_.first) start(*options_.first);
  }

  // Takes an item that arrived at `now`; `emit(seq, T&&, bool late)` receives what it releases,
  // in the order released.
  template <class Emit>
  void offer(std::uint64_t seq, T value, Time now, Emit&& emit) {
    ++counters_.received;
    if (highest_ && seq < *highest_) ++counters_.out_of_order;
    if (!highest_ || seq > *highest_) highest_ = seq;
    if (next_ && seq < *next_) {
      if (seq < *first_ || *next_ - seq > history) {
        ++counters_.stale;
        return;
      }
      State& state = states_[seq % history];
      if (state == State::missing) {
        state = State::late;
        --counters_.missing;
        ++counters_.late;
        emit(seq, std::move(value), true);
      } else {
        ++counters_.duplicates;
      }
      return;
    }
    if (!buffer_.emplace(seq, Held{std::move(value), now}).second) {
      ++counters_.duplicates;
      return;
    }
    release_run(emit);
    while (buffer_.size() >= options_.capacity) give_up_first_gap(emit);
  }

  // Gives up on the gaps that items have waited `wait` behind, as of `now`.
  template <class Emit>
  void expire(Time now, Emit&& emit) {
    while (!buffer_.empty() && oldest_arrival() + options_.wait <= now) give_up_first_gap(emit);
  }

  // When expire() will next have something to do; nullopt while nothing waits.
  std::optional<Time> next_deadline() const {
    if (buffer_.empty()) return std::nullopt;
    return oldest_arrival() + options_.wait;
  }

  // The end: releases everything held, in order, the gaps between counted missing; with `total`
  // > 0, the run was that many sequences from the first, and those of them that never came are
  // counted missing too (the first is 0 when neither given nor seen).
  template <class Emit>
  void flush(Emit&& emit, std::uint64_t total = 0) {
    while (!buffer_.empty()) give_up_first_gap(emit);
    if (total > 0) {
      if (!next_) start(0);
      if (*next_ < *first_ + total) give_up_until(*first_ + total);
    }
  }

  const SequenceReorderCounters& counters() const { return counters_; }
  std::size_t held() const { return buffer_.size(); }
  // The first sequence, once known.
  std::optional<std::uint64_t> first() const { return first_; }
  // The next sequence to release, once known.
  std::optional<std::uint64_t> next() const { return next_; }
  // Sequences from the first that are released or given up on: next − first.
  std::uint64_t accounted() const { return next_ && first_ ? *next_ - *first_ : 0; }

 private:
  enum class State : std::uint8_t { unknown, released, missing, late };
  struct Held {
    T value;
    Time arrival;
  };

  void start(std::uint64_t first) {
    first_ = first;
    next_ = first;
  }
  Time oldest_arrival() const {
    Time oldest = buffer_.begin()->second.arrival;
    for (const auto& [seq, held] : buffer_) oldest = std::min(oldest, held.arrival);
    return oldest;
  }
  template <class Emit>
  void release_run(Emit& emit) {
    if (!next_) return;
    for (auto it = buffer_.begin(); it != buffer_.end() && it->first == *next_; it = buffer_.erase(it)) {
      states_[*next_ % history] = State::released;
      ++counters_.released;
      ++*next_;
      emit(it->first, std::move(it->second.value), false);
    }
  }
  void give_up_until(std::uint64_t end) {
    const std::uint64_t count = end - *next_;
    counters_.missing += count;
    // Only the last `history` of them can still be told apart from a duplicate.
    for (std::uint64_t seq = count > history ? end - history : *next_; seq < end; ++seq) states_[seq % history] = State::missing;
    next_ = end;
  }
  // Gives up on the sequences before the first one held, and releases what follows.
  template <class Emit>
  void give_up_first_gap(Emit& emit) {
    const std::uint64_t first_held = buffer_.begin()->first;
    if (!next_) start(first_held);
    if (*next_ < first_held) give_up_until(first_held);
    release_run(emit);
  }

  SequenceReorderOptions options_;
  std::map<std::uint64_t, Held> buffer_;
  std::vector<State> states_;
  std::optional<std::uint64_t> first_;
  std::optional<std::uint64_t> next_;
  std::optional<std::uint64_t> highest_;
  SequenceReorderCounters counters_;
};

}  // namespace covflow::pipeline

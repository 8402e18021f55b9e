// A bounded FIFO between pipeline threads, with the overflow policy of pipeline.overflow
// (docs/architecture.md, "The scheduler"): when it is full, drop the oldest item, reject the newest,
// or block the producer. Blocking always has a timeout, so that a producer can look at shutdown
// and never hangs. Whatever is dropped is handed back to the caller, which counts it and gives
// its resources back: nothing leaves the queue silently.
//
// Storage is a ring allocated in the constructor; push and pop never allocate (T's own copy or
// move aside: the pipeline queues pointers).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "covflow/config/config.hpp"

namespace covflow::pipeline {

using Overflow = config::Overflow;

enum class PushStatus {
  accepted,        // queued
  evicted_oldest,  // queued; the oldest item was dropped to make room (drop_oldest); see `dropped`
  rejected,        // not queued: the queue was full (reject_newest); `dropped` is the item
  timed_out,       // not queued: still full after the wait (block); `dropped` is the item, to retry
  closed,          // not queued: the queue is closed; `dropped` is the item
};

template <class T>
struct PushResult {
  PushStatus status;
  std::optional<T> dropped;  // what did not end up in the queue, by status above
  bool queued() const { return status == PushStatus::accepted || status == PushStatus::evicted_oldest; }
};

template <class T>
class BoundedQueue {
 public:
  BoundedQueue(std::size_t capacity, Overflow policy) : ring_(capacity), policy_(policy) {
    if (capacity == 0) throw std::invalid_argument("BoundedQueue: capacity must be at least 1");
  }
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  // Adds `item` under the queue's policy. `wait` bounds the time a blocking push waits for room.
  PushResult<T> push(T item, std::chrono::milliseconds wait = std::chrono::milliseconds(0)) {
    std::unique_lock lock(mutex_);
    if (closed_) return {PushStatus::closed, std::move(item)};
    if (size_ == ring_.size()) {
      switch (policy_) {
        case Overflow::drop_oldest: {
          std::optional<T> oldest(std::move(ring_[head_]));
          head_ = (head_ + 1) % ring_.size();
          --size_;
          put(std::move(item));
          lock.unlock();
          not_empty_.notify_one();
          return {PushStatus::evicted_oldest, std::move(oldest)};
        }
        case Overflow::reject_newest:
          return {PushStatus::rejected, std::move(item)};
        case Overflow::block:
          if (!not_full_.wait_for(lock, wait, [&] { return closed_ || size_ < ring_.size(); }))
            return {PushStatus::timed_out, std::move(item)};
          if (closed_) return {PushStatus::closed, std::move(item)};
          break;
      }
    }
    put(std::move(item));
    lock.unlock();
    not_empty_.notify_one();
    return {PushStatus::accepted, std::nullopt};
  }

  // The oldest item, waiting up to `wait` for one; nullopt on timeout or when closed and empty.
  std::optional<T> pop(std::chrono::milliseconds wait) {
    std::unique_lock lock(mutex_);
    if (!not_empty_.wait_for(lock, wait, [&] { return closed_ || size_ > 0; })) return std::nullopt;
    return take(lock);
  }
  std::optional<T> try_pop() {
    std::unique_lock lock(mutex_);
    return take(lock);
  }

  // No more pushes; pops return what is left, then nullopt at once. Wakes every waiter.
  void close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    not_empty_.notify_all();
    not_full_.notify_all();
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return size_;
  }
  bool empty() const { return size() == 0; }
  bool closed() const {
    std::lock_guard lock(mutex_);
    return closed_;
  }
  // Closed and empty: nothing more will come out.
  bool finished() const {
    std::lock_guard lock(mutex_);
    return closed_ && size_ == 0;
  }
  std::size_t capacity() const { return ring_.size(); }
  Overflow policy() const { return policy_; }
  // The largest size the queue has had.
  std::size_t high_water() const {
    std::lock_guard lock(mutex_);
    return high_water_;
  }

 private:
  void put(T&& item) {
    ring_[(head_ + size_) % ring_.size()] = std::move(item);
    ++size_;
    if (size_ > high_water_) high_water_ = size_;
  }
  std::optional<T> take(std::unique_lock<std::mutex>& lock) {
    if (size_ == 0) return std::nullopt;
    std::optional<T> item(std::move(ring_[head_]));
    head_ = (head_ + 1) % ring_.size();
    --size_;
    lock.unlock();
    not_full_.notify_one();
    return item;
  }

  mutable std::mutex mutex_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::vector<T> ring_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
  std::size_t high_water_ = 0;
  bool closed_ = false;
  Overflow policy_;
};

}  // namespace covflow::pipeline

// A fixed pool of worker threads for the CPU backend. parallel_for hands indices to workers and
// tells each call which worker runs it, so callers can give each worker its own scratch slice.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace covflow::linalg {

// What parallel_for runs: a reference to a callable taking (index, worker), neither owning nor
// copying it, so that a call allocates nothing (a std::function would, for a lambda that captures
// more than two pointers). The callable must outlive the call, as a lambda written in place does.
class IndexBody {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, IndexBody>>>
  IndexBody(F&& body) noexcept  // NOLINT(google-explicit-constructor): lambdas convert in place
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(body)))),
        call_([](void* object, std::size_t index, unsigned worker) {
          (*static_cast<std::remove_reference_t<F>*>(object))(index, worker);
        }) {}
  void operator()(std::size_t index, unsigned worker) const { call_(object_, index, worker); }

 private:
  void* object_;
  void (*call_)(void*, std::size_t, unsigned);
};

class ThreadPool {
 public:
  // threads == 0: one per hardware thread.
  explicit ThreadPool(unsigned threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Workers including the calling thread, which takes part in every parallel_for.
  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  // Runs body(index, worker) for index in [0, count); worker < size(). Blocks until all are
  // done; rethrows the first exception a body threw (the remaining indices are skipped). Allocates
  // nothing.
  void parallel_for(std::size_t count, IndexBody body);

 private:
  struct Job;
  void worker_loop(unsigned worker);
  static void run_share(Job& job, unsigned worker);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  Job* job_ = nullptr;
  std::size_t generation_ = 0;
  unsigned busy_ = 0;
  bool stopping_ = false;
  std::mutex serial_;  // one parallel_for at a time
};

}  // namespace covflow::linalg

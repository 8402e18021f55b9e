// A fixed pool of worker threads for the CPU backend. parallel_for hands indices to workers and
// tells each call which worker runs it, so callers can give each worker its own scratch slice.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace covflow::linalg {

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
  // done; rethrows the first exception a body threw (the remaining indices are skipped).
  void parallel_for(std::size_t count, const std::function<void(std::size_t, unsigned)>& body);

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

#include "covflow/linalg/thread_pool.hpp"

#include <algorithm>
#include <atomic>

namespace covflow::linalg {

// One parallel_for in progress. Indices are handed out one at a time through `next`: batched
// matrices have similar costs, and one atomic increment per matrix is noise next to the matrix.
struct ThreadPool::Job {
  const IndexBody* body = nullptr;
  std::size_t count = 0;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
};

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  workers_.reserve(threads - 1);
  for (unsigned w = 1; w < threads; ++w) workers_.emplace_back([this, w] { worker_loop(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::run_share(Job& job, unsigned worker) {
  for (;;) {
    if (job.failed.load(std::memory_order_relaxed)) return;
    const std::size_t index = job.next.fetch_add(1, std::memory_order_relaxed);
    if (index >= job.count) return;
    try {
      (*job.body)(index, worker);
    } catch (...) {
      std::lock_guard lock(job.error_mutex);
      if (!job.error) job.error = std::current_exception();
      job.failed.store(true, std::memory_order_relaxed);
    }
  }
}

void ThreadPool::worker_loop(unsigned worker) {
  std::size_t seen = 0;
  for (;;) {
    Job* job = nullptr;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
      // A worker that wakes after the job was finished and taken down finds no job.
      if (job == nullptr) continue;
      ++busy_;
    }
    run_share(*job, worker);
    {
      std::lock_guard lock(mutex_);
      --busy_;
    }
    done_.notify_all();
  }
}

void ThreadPool::parallel_for(std::size_t count, IndexBody body) {
  if (count == 0) return;
  std::lock_guard serial(serial_);
  Job job;
  job.body = &body;
  job.count = count;
  if (count > 1 && !workers_.empty()) {
    {
      std::lock_guard lock(mutex_);
      job_ = &job;
      ++generation_;
    }
    wake_.notify_all();
  }
  run_share(job, 0);
  if (count > 1 && !workers_.empty()) {
    // Every worker that picked the job up must leave it before `job` goes out of scope; a
    // worker that wakes late sees the next generation or an exhausted counter.
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return busy_ == 0; });
    job_ = nullptr;
  }
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace covflow::linalg

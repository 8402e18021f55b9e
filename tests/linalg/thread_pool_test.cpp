#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "covflow/linalg/thread_pool.hpp"

namespace covflow::linalg {
namespace {

TEST(ThreadPool, EveryIndexRunsExactlyOnce) {
  ThreadPool pool(4);
  for (std::size_t count : {0u, 1u, 3u, 4u, 5u, 1000u}) {
    std::vector<std::atomic<int>> hits(count);
    pool.parallel_for(count, [&](std::size_t i, unsigned worker) {
      ASSERT_LT(worker, pool.size());
      hits[i].fetch_add(1);
    });
    for (std::size_t i = 0; i < count; ++i) EXPECT_EQ(hits[i].load(), 1) << "index " << i << " of " << count;
  }
}

TEST(ThreadPool, WorkerIndexIdentifiesAThread) {
  // Two indices running at once never share a worker index, so per-worker scratch is safe.
  ThreadPool pool(4);
  std::vector<std::atomic<int>> in_use(pool.size());
  std::atomic<bool> clash{false};
  pool.parallel_for(2000, [&](std::size_t, unsigned worker) {
    if (in_use[worker].fetch_add(1) != 0) clash = true;
    std::this_thread::yield();
    in_use[worker].fetch_sub(1);
  });
  EXPECT_FALSE(clash.load());
}

TEST(ThreadPool, FirstExceptionIsRethrownAndPoolStaysUsable) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.parallel_for(100, [](std::size_t i, unsigned) {
                 if (i == 17) throw std::runtime_error("index 17");
               }),
               std::runtime_error);
  std::atomic<int> sum{0};
  pool.parallel_for(10, [&](std::size_t i, unsigned) { sum += static_cast<int>(i); });
  EXPECT_EQ(sum.load(), 45);
}

TEST(ThreadPool, ManySmallJobsBackToBack) {
  // Exercises the hand-over between jobs (a worker waking late must not touch a finished job).
  ThreadPool pool(4);
  std::atomic<long> total{0};
  for (int round = 0; round < 2000; ++round)
    pool.parallel_for(3, [&](std::size_t i, unsigned) { total += static_cast<long>(i) + 1; });
  EXPECT_EQ(total.load(), 2000L * 6);
}

}  // namespace
}  // namespace covflow::linalg

// BoundedQueue: each overflow policy with exact drop counts and order, blocking with a consumer,
// close/drain semantics.
#include <gtest/gtest.h>

#include <thread>

#include "covflow/pipeline/bounded_queue.hpp"

namespace covflow::pipeline {
namespace {

using std::chrono::milliseconds;

std::vector<int> drain_all(BoundedQueue<int>& q) {
  std::vector<int> out;
  while (auto v = q.try_pop()) out.push_back(*v);
  return out;
}

TEST(BoundedQueue, DropOldestEvictsExactlyTheOldest) {
  BoundedQueue<int> q(4, Overflow::drop_oldest);
  std::vector<int> evicted;
  for (int i = 0; i < 11; ++i) {
    auto r = q.push(i);
    EXPECT_TRUE(r.queued());
    if (r.status == PushStatus::evicted_oldest) evicted.push_back(*r.dropped);
    else EXPECT_EQ(r.status, PushStatus::accepted);
  }
  EXPECT_EQ(evicted, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(q.high_water(), 4u);
  EXPECT_EQ(drain_all(q), (std::vector<int>{7, 8, 9, 10}));
}

TEST(BoundedQueue, RejectNewestKeepsTheQueuedAndHandsBackTheArrival) {
  BoundedQueue<int> q(3, Overflow::reject_newest);
  std::vector<int> rejected;
  for (int i = 0; i < 10; ++i) {
    auto r = q.push(i);
    if (r.status == PushStatus::rejected) rejected.push_back(*r.dropped);
    else EXPECT_EQ(r.status, PushStatus::accepted);
  }
  EXPECT_EQ(rejected, (std::vector<int>{3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(drain_all(q), (std::vector<int>{0, 1, 2}));
}

TEST(BoundedQueue, BlockWaitsForRoomAndDropsNothing) {
  BoundedQueue<int> q(2, Overflow::block);
  ASSERT_EQ(q.push(0).status, PushStatus::accepted);
  ASSERT_EQ(q.push(1).status, PushStatus::accepted);
  auto timed_out = q.push(2, milliseconds(20));  // nobody pops: gives up, hands the item back
  EXPECT_EQ(timed_out.status, PushStatus::timed_out);
  EXPECT_EQ(*timed_out.dropped, 2);

  // A consumer pops everything; the producer pushes 200 more, each accepted after waiting.
  std::vector<int> seen;
  std::thread consumer([&] {
    while (seen.size() < 202) {
      if (auto v = q.pop(milliseconds(1000))) seen.push_back(*v);
      else break;
    }
  });
  for (int i = 2; i < 202; ++i) {
    PushResult<int> r{PushStatus::timed_out, std::nullopt};
    while (r.status == PushStatus::timed_out) r = q.push(i, milliseconds(50));
    EXPECT_EQ(r.status, PushStatus::accepted);
  }
  consumer.join();
  ASSERT_EQ(seen.size(), 202u);
  for (int i = 0; i < 202; ++i) EXPECT_EQ(seen[std::size_t(i)], i);
}

TEST(BoundedQueue, CloseLetsTheRestOutThenEnds) {
  BoundedQueue<int> q(4, Overflow::block);
  q.push(1);
  q.push(2);
  q.close();
  EXPECT_TRUE(q.closed());
  EXPECT_FALSE(q.finished());
  auto refused = q.push(3);
  EXPECT_EQ(refused.status, PushStatus::closed);
  EXPECT_EQ(*refused.dropped, 3);
  EXPECT_EQ(q.pop(milliseconds(0)), 1);
  EXPECT_EQ(q.pop(milliseconds(0)), 2);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(q.pop(milliseconds(5000)), std::nullopt);  // closed and empty: at once, no wait
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
  EXPECT_TRUE(q.finished());
}

TEST(BoundedQueue, CloseWakesABlockedProducerAndAWaitingConsumer) {
  BoundedQueue<int> full(1, Overflow::block);
  full.push(0);
  std::thread producer([&] { EXPECT_EQ(full.push(1, milliseconds(10000)).status, PushStatus::closed); });
  BoundedQueue<int> empty(1, Overflow::block);
  std::thread consumer([&] { EXPECT_EQ(empty.pop(milliseconds(10000)), std::nullopt); });
  std::this_thread::sleep_for(milliseconds(30));
  const auto start = std::chrono::steady_clock::now();
  full.close();
  empty.close();
  producer.join();
  consumer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
}

TEST(BoundedQueue, ZeroCapacityIsRefused) { EXPECT_THROW(BoundedQueue<int>(0, Overflow::block), std::invalid_argument); }

}  // namespace
}  // namespace covflow::pipeline

// The collector's reorder buffer (covflow/pipeline/sequence_reorder.hpp) and its reading of a
// result's "seq" (common/collect_cli.hpp), without sockets or sleeping: time is passed in.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "common/collect_cli.hpp"
#include "covflow/pipeline/sequence_reorder.hpp"

namespace covflow::test {
namespace {

using namespace std::chrono_literals;
using pipeline::SequenceReorder;
using pipeline::SequenceReorderOptions;

// What the buffer released: (seq, value, late) in order.
struct Released {
  std::vector<std::uint64_t> seqs;
  std::vector<std::string> values;
  std::vector<bool> late;
  auto emit() {
    return [this](std::uint64_t seq, std::string&& value, bool was_late) {
      seqs.push_back(seq);
      values.push_back(std::move(value));
      late.push_back(was_late);
    };
  }
};

std::string body(std::uint64_t seq) { return "result " + std::to_string(seq); }

TEST(SequenceReorder, InOrderArrivalsAreReleasedAtOnce) {
  SequenceReorder<std::string> reorder({.capacity = 4, .wait = 1s, .first = 10});
  Released out;
  for (std::uint64_t s = 10; s < 20; ++s) {
    reorder.offer(s, body(s), 0ns, out.emit());
    EXPECT_EQ(out.seqs.size(), s - 9) << "held back " << s;
  }
  EXPECT_EQ(out.seqs, (std::vector<std::uint64_t>{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
  EXPECT_EQ(out.values[3], body(13));
  EXPECT_EQ(reorder.held(), 0u);
  EXPECT_FALSE(reorder.next_deadline());
  const auto& c = reorder.counters();
  EXPECT_EQ(c.received, 10u);
  EXPECT_EQ(c.released, 10u);
  EXPECT_EQ(c.out_of_order + c.duplicates + c.missing + c.late + c.stale, 0u);
  EXPECT_EQ(reorder.accounted(), 10u);
}

TEST(SequenceReorder, GapFilledLateWithinTheWindowComesOutInOrder) {
  SequenceReorder<std::string> reorder({.capacity = 8, .wait = 1s, .first = 0});
  Released out;
  for (std::uint64_t s : {0, 2, 4, 3}) reorder.offer(s, body(s), 0ns, out.emit());
  EXPECT_EQ(out.seqs, (std::vector<std::uint64_t>{0}));
  EXPECT_EQ(reorder.held(), 3u);
  EXPECT_EQ(reorder.next_deadline(), std::optional<std::chrono::nanoseconds>(1s));
  reorder.offer(1, body(1), 500ms, out.emit());
  EXPECT_EQ(out.seqs, (std::vector<std::uint64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(out.values, (std::vector<std::string>{body(0), body(1), body(2), body(3), body(4)}));
  EXPECT_EQ(out.late, std::vector<bool>(5, false));
  const auto& c = reorder.counters();
  EXPECT_EQ(c.out_of_order, 2u);  // 3 after 4, 1 after 4
  EXPECT_EQ(c.missing, 0u);
  EXPECT_EQ(c.released, 5u);
}

TEST(SequenceReorder, DuplicatesAreCountedAndNotReleasedAgain) {
  SequenceReorder<std::string> reorder({.capacity = 8, .wait = 1s, .first = 0});
  Released out;
  reorder.offer(0, body(0), 0ns, out.emit());
  reorder.offer(0, "again", 0ns, out.emit());  // already released
  reorder.offer(2, body(2), 0ns, out.emit());
  reorder.offer(2, "again", 0ns, out.emit());  // still held
  reorder.offer(1, body(1), 0ns, out.emit());
  EXPECT_EQ(out.seqs, (std::vector<std::uint64_t>{0, 1, 2}));
  EXPECT_EQ(out.values[2], body(2));
  EXPECT_EQ(reorder.counters().duplicates, 2u);
  EXPECT_EQ(reorder.counters().received, 5u);
  EXPECT_EQ(reorder.counters().released, 3u);
}

TEST(SequenceReorder, GapGivenUpWhenTheWindowIsFullThenLateArrivalIsCounted) {
  SequenceReorder<std::string> reorder({.capacity = 3, .wait = 1h, .first = 0});
  Released out;
  reorder.offer(1, body(1), 0ns, out.emit());
  reorder.offer(2, body(2), 0ns, out.emit());
  EXPECT_TRUE(out.seqs.empty());
  reorder.offer(3, body(3), 0ns, out.emit());  // three held behind 0: 0 is given up
  EXPECT_EQ(out.seqs, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(reorder.counters().missing, 1u);
  EXPECT_EQ(reorder.accounted(), 4u);

  reorder.offer(0, body(0), 0ns, out.emit());  // after it was given up: released at once, late
  EXPECT_EQ(out.seqs.back(), 0u);
  EXPECT_TRUE(out.late.back());
  EXPECT_EQ(reorder.counters().missing, 0u);
  EXPECT_EQ(reorder.counters().late, 1u);
  reorder.offer(0, body(0), 0ns, out.emit());  // and a second time: a duplicate
  EXPECT_EQ(out.seqs.size(), 4u);
  EXPECT_EQ(reorder.counters().duplicates, 1u);
}

TEST(SequenceReorder, GapGivenUpAfterTheWaitAndOnlyThen) {
  SequenceReorder<std::string> reorder({.capacity = 100, .wait = 10ms, .first = 0});
  Released out;
  reorder.offer(0, body(0), 0ms, out.emit());
  reorder.offer(3, body(3), 2ms, out.emit());  // 1 and 2 missing for now
  reorder.offer(5, body(5), 4ms, out.emit());  // 4 too
  EXPECT_EQ(reorder.next_deadline(), std::optional<std::chrono::nanoseconds>(12ms));
  reorder.expire(11ms, out.emit());
  EXPECT_EQ(out.seqs, (std::vector<std::uint64_t>{0}));
  reorder.expire(12ms, out.emit());  // 3 waited 10 ms: 1, 2 given up; 3 out; 5 now waits for 4
  EXPECT_EQ(out.seqs, (std::vector<std::uint64_t>{0, 3}));
  EXPECT_EQ(reorder.counters().missing, 2u);
  EXPECT_EQ(reorder.next_deadline(), std::optional<std::chrono::nanoseconds>(14ms));
  reorder.offer(4, body(4), 13ms, out.emit());  // in time
  EXPECT_EQ(out.seqs, (std::vector<std::uint64_t>{0, 3, 4, 5}));
  EXPECT_EQ(reorder.counters().missing, 2u);
  EXPECT_FALSE(reorder.next_deadline());
}

TEST(SequenceReorder, WithoutAFirstSequenceTheSmallestOfTheFirstResultsStarts) {
  SequenceReorder<std::string> reorder({.capacity = 100, .wait = 10ms});
  Released out;
  reorder.offer(7, body(7), 0ms, out.emit());
  reorder.offer(5, body(5), 1ms, out.emit());
  reorder.offer(6, body(6), 2ms, out.emit());
  EXPECT_TRUE(out.seqs.empty());  // 5 might not be the first yet
  EXPECT_FALSE(reorder.first());
  reorder.expire(10ms, out.emit());
  EXPECT_EQ(out.seqs, (std::vector<std::uint64_t>{5, 6, 7}));
  EXPECT_EQ(reorder.first(), std::optional<std::uint64_t>(5));
  EXPECT_EQ(reorder.counters().missing, 0u);
  reorder.offer(4, body(4), 11ms, out.emit());  // before the start: dropped, counted
  EXPECT_EQ(out.seqs.size(), 3u);
  EXPECT_EQ(reorder.counters().stale, 1u);
}

TEST(SequenceReorder, FlushReleasesWhatIsHeldAndCountsTheRunsMissingTail) {
  SequenceReorder<std::string> reorder({.capacity = 100, .wait = 1h, .first = 0});
  Released out;
  for (std::uint64_t s : {0, 1, 3}) reorder.offer(s, body(s), 0ns, out.emit());
  reorder.flush(out.emit(), 6);  // a run of 6: 2 missing between, 4 and 5 never came
  EXPECT_EQ(out.seqs, (std::vector<std::uint64_t>{0, 1, 3}));
  EXPECT_EQ(reorder.counters().missing, 3u);
  EXPECT_EQ(reorder.counters().released + reorder.counters().missing, 6u);
  EXPECT_EQ(reorder.accounted(), 6u);
}

TEST(SequenceReorder, ReceivedPlusMissingIsTheRunWhateverTheOrder) {
  // Three "workers" deliver interleaved sequences with different delays; one stops after 10.
  SequenceReorder<std::string> reorder({.capacity = 16, .wait = 50ms, .first = 0});
  Released out;
  constexpr std::uint64_t run = 300;
  std::vector<std::pair<std::int64_t, std::uint64_t>> arrivals;  // (time in ms, seq)
  for (std::uint64_t s = 0; s < run; ++s) {
    const std::uint64_t worker = s % 3;
    if (worker == 1 && s > 30) continue;  // worker 1 died
    arrivals.emplace_back(std::int64_t(s) + std::int64_t(worker) * 3, s);
  }
  std::sort(arrivals.begin(), arrivals.end());
  for (const auto& [ms, seq] : arrivals) {
    reorder.expire(std::chrono::milliseconds(ms), out.emit());
    reorder.offer(seq, body(seq), std::chrono::milliseconds(ms), out.emit());
  }
  reorder.flush(out.emit(), run);
  EXPECT_TRUE(std::is_sorted(out.seqs.begin(), out.seqs.end()));
  EXPECT_EQ(std::adjacent_find(out.seqs.begin(), out.seqs.end()), out.seqs.end());
  const auto& c = reorder.counters();
  EXPECT_EQ(c.released, arrivals.size());
  EXPECT_EQ(c.late, 0u);
  EXPECT_EQ(c.released + c.missing, run);
  std::uint64_t lost = 0;
  for (std::uint64_t s = 31; s < run; ++s) lost += s % 3 == 1;
  EXPECT_EQ(c.missing, lost);
}

TEST(CollectSeq, ReadsTheTopLevelSeq) {
  using cli::parse_result_seq;
  EXPECT_EQ(parse_result_seq(R"({"seq": 4211, "capture_ns": 1})"), std::optional<std::uint64_t>(4211));
  EXPECT_EQ(parse_result_seq(R"( {"seq":0})"), std::optional<std::uint64_t>(0));
  EXPECT_EQ(parse_result_seq(R"({"seq":18446744073709551615})"), std::optional<std::uint64_t>(18446744073709551615u));
  EXPECT_EQ(parse_result_seq(R"({"a": {"seq": 1}, "b": [{"seq": 2}], "c": "\"seq\": 3", "seq": 9})"),
            std::optional<std::uint64_t>(9));
  EXPECT_EQ(parse_result_seq(R"({"x": "seq", "seq": 5})"), std::optional<std::uint64_t>(5));
  EXPECT_FALSE(parse_result_seq(R"({"seq": -1})"));
  EXPECT_FALSE(parse_result_seq(R"({"seq": 1.5})"));
  EXPECT_FALSE(parse_result_seq(R"({"seq": "7"})"));
  EXPECT_FALSE(parse_result_seq(R"({"seq":18446744073709551616})"));
  EXPECT_FALSE(parse_result_seq(R"({"a": {"seq": 1}})"));
  EXPECT_FALSE(parse_result_seq(R"([{"seq": 1}])"));
  EXPECT_FALSE(parse_result_seq("not json"));
  EXPECT_FALSE(parse_result_seq(R"({"seq)"));
  EXPECT_FALSE(parse_result_seq(""));
}

}  // namespace
}  // namespace covflow::test

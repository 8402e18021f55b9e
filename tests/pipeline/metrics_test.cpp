// Latency histograms against a sorted-vector reference, the frame-accounting invariant under
// concurrency, reset, and the JSON shape of a snapshot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

#include "covflow/pipeline/metrics.hpp"
#include "test_support.hpp"

namespace covflow::pipeline {
namespace {

// The sample of rank ceil(p/100 · n) (1-based) — the definition the histogram follows.
double reference_percentile(const std::vector<std::int64_t>& sorted, double p) {
  const auto n = double(sorted.size());
  const auto rank = std::max<std::size_t>(1, std::size_t(std::ceil(p / 100.0 * n - 1e-9)));
  return double(sorted[rank - 1]);
}

TEST(LatencyHistogram, BucketsTileTheLineWithBoundedRelativeWidth) {
  std::mt19937_64 rng(test::fresh_seed("histogram buckets"));
  std::uniform_int_distribution<int> octave(0, LatencyHistogram::kMaxOctave - 1);
  for (int trial = 0; trial < 20000; ++trial) {
    const std::uint64_t base = std::uint64_t(1) << octave(rng);
    const std::uint64_t v = base + (rng() % base);
    const std::size_t b = LatencyHistogram::bucket_of(v);
    ASSERT_LT(b, LatencyHistogram::kBuckets);
    ASSERT_LE(LatencyHistogram::bucket_lower(b), v) << v;
    ASSERT_LT(v, LatencyHistogram::bucket_upper(b)) << v;
    const double width = double(LatencyHistogram::bucket_upper(b) - LatencyHistogram::bucket_lower(b));
    ASSERT_LE(width, std::max(1.0, double(v) / 64.0)) << v;
  }
  for (std::size_t b = 1; b < LatencyHistogram::kBuckets; ++b)
    ASSERT_EQ(LatencyHistogram::bucket_lower(b), LatencyHistogram::bucket_upper(b - 1)) << b;
  EXPECT_EQ(LatencyHistogram::bucket_of(std::uint64_t(1) << 50), LatencyHistogram::kBuckets - 1);
}

TEST(LatencyHistogram, PercentilesMatchASortedReferenceWithinHalfABucket) {
  std::mt19937_64 rng(test::fresh_seed("histogram percentiles"));
  // Latencies over five decades (1 µs … 100 ms), log-normal with a heavy tail, plus a cluster
  // of identical values (a common case: a stage that always takes the same time).
  std::lognormal_distribution<double> lognormal(std::log(2e5), 1.5);
  for (std::size_t n : {1u, 7u, 1000u, 100000u}) {
    LatencyHistogram h;
    std::vector<std::int64_t> samples;
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = i % 10 == 3 ? std::int64_t(123456) : std::int64_t(std::clamp(lognormal(rng), 1e3, 1e8));
      samples.push_back(v);
      h.record_ns(v);
    }
    std::sort(samples.begin(), samples.end());
    EXPECT_EQ(h.count(), n);
    for (double p : {0.0, 10.0, 50.0, 90.0, 99.0, 99.9, 100.0}) {
      const double want = reference_percentile(samples, p);
      // Half a bucket of relative width 2^-kSubBits.
      const double tolerance = want * std::ldexp(1.0, -(LatencyHistogram::kSubBits + 1));
      EXPECT_NEAR(h.percentile_ns(p), want, tolerance) << "n " << n << " p" << p;
    }
    const auto s = h.summary();
    EXPECT_DOUBLE_EQ(s.max_ms, double(samples.back()) * 1e-6);
    double mean = 0;
    for (auto v : samples) mean += double(v);
    EXPECT_NEAR(s.mean_ms, mean / double(n) * 1e-6, 1e-9 * s.max_ms);
  }
}

TEST(LatencyHistogram, EmptyAndReset) {
  LatencyHistogram h;
  EXPECT_EQ(h.summary().count, 0u);
  EXPECT_EQ(h.percentile_ns(99), 0.0);
  h.record_ms(3.0);
  EXPECT_NEAR(h.summary().p50_ms, 3.0, 3.0 / 128);
  h.reset();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.summary().max_ms, 0.0);
}

TEST(Metrics, InvariantHoldsAtEverySnapshotUnderConcurrency) {
  const std::uint64_t seed = test::fresh_seed("metrics concurrency");
  Metrics metrics({"a", "b"});
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> snapshots{0}, violations{0};
  std::thread observer([&] {
    while (!stop.load()) {
      const auto s = metrics.snapshot();
      std::uint64_t by_reason = 0;
      for (const auto& [reason, count] : s.dropped_by_reason) by_reason += count;
      if (s.frames_in != s.frames_done + s.frames_dropped + s.in_flight || by_reason != s.frames_dropped) ++violations;
      ++snapshots;
    }
  });
  constexpr int kThreads = 4, kFrames = 20000;
  const char* reasons[] = {"overflow_drop_oldest", "shape", "non_finite"};
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(seed + std::uint64_t(t));
      for (int i = 0; i < kFrames; ++i) {
        metrics.frame_in();
        metrics.stage_ran(std::size_t(i % 2), 0.5, false);
        if (rng() % 4 == 0) metrics.frame_dropped(reasons[rng() % 3]);
        else metrics.frame_done(1.0 + double(rng() % 100) * 0.01, rng() % 8 == 0);
        if (i % 1000 == 0) metrics.frames_rejected("rejected_input", 2);
      }
    });
  }
  for (auto& w : workers) w.join();
  while (snapshots.load() < 10) std::this_thread::yield();
  stop = true;
  observer.join();
  EXPECT_EQ(violations.load(), 0u) << "of " << snapshots.load() << " snapshots";
  const auto s = metrics.snapshot();
  const std::uint64_t rejected = kThreads * (kFrames / 1000) * 2;
  EXPECT_EQ(s.frames_in, std::uint64_t(kThreads) * kFrames + rejected);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.frames_done + s.frames_dropped, s.frames_in);
  EXPECT_EQ(s.dropped_by_reason.at("rejected_input"), rejected);
  EXPECT_EQ(s.end_to_end.count, s.frames_done);
  EXPECT_EQ(s.stages.at(0).ran + s.stages.at(1).ran, std::uint64_t(kThreads) * kFrames);
  EXPECT_LE(s.frames_late, s.frames_done);
}

TEST(Metrics, ResetKeepsFramesInFlightAccounted) {
  Metrics m({"x"});
  for (int i = 0; i < 5; ++i) m.frame_in();
  m.frame_done(1.0, false);
  m.frame_dropped("shape");
  m.stage_skipped(0);
  m.queue_depth(3, 8);
  m.reset();
  auto s = m.snapshot();
  EXPECT_EQ(s.frames_in, 3u);
  EXPECT_EQ(s.in_flight, 3u);
  EXPECT_EQ(s.frames_done, 0u);
  EXPECT_TRUE(s.dropped_by_reason.empty());
  EXPECT_EQ(s.stages.at(0).skipped_degraded, 0u);
  EXPECT_EQ(s.queue_max_depth, 3u);  // the depth now
  for (int i = 0; i < 3; ++i) m.frame_done(2.0, true);
  s = m.snapshot();
  EXPECT_EQ(s.frames_in, s.frames_done + s.frames_dropped + s.in_flight);
  EXPECT_EQ(s.frames_late, 3u);
}

TEST(Metrics, JsonHasTheDocumentedFields) {
  Metrics m({"covariance", "subspace"});
  m.frame_in();
  m.frame_in();
  m.frame_done(2.5, true);
  m.frame_dropped("overflow_drop_oldest");
  m.stage_ran(0, 1.25, false);
  m.stage_skipped(1);
  m.stage_predicted(0, 1.25);
  m.queue_depth(1, 8);
  const auto j = to_json(m.snapshot());
  EXPECT_EQ(j.at("frames").at("in"), 2);
  EXPECT_EQ(j.at("frames").at("done"), 1);
  EXPECT_EQ(j.at("frames").at("late"), 1);
  EXPECT_EQ(j.at("frames").at("dropped"), 1);
  EXPECT_EQ(j.at("frames").at("in_flight"), 0);
  EXPECT_EQ(j.at("frames").at("dropped_by_reason").at("overflow_drop_oldest"), 1);
  EXPECT_EQ(j.at("queue").at("capacity"), 8);
  EXPECT_EQ(j.at("queue").at("max_depth"), 1);
  EXPECT_NEAR(j.at("end_to_end").at("p50_ms").get<double>(), 2.5, 2.5 / 128);
  for (const char* key : {"count", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"})
    EXPECT_TRUE(j.at("end_to_end").contains(key)) << key;
  ASSERT_EQ(j.at("stages").size(), 2u);
  EXPECT_EQ(j.at("stages")[0].at("name"), "covariance");
  EXPECT_EQ(j.at("stages")[0].at("ran"), 1);
  EXPECT_EQ(j.at("stages")[1].at("skipped_degraded"), 1);
  EXPECT_DOUBLE_EQ(j.at("stages")[0].at("predicted_ms").get<double>(), 1.25);
  EXPECT_TRUE(j.contains("uptime_s"));
  EXPECT_TRUE(j.contains("ingest_blocked_ms"));
}

}  // namespace
}  // namespace covflow::pipeline

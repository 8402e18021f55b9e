// The pipeline's counters and latency histograms (docs/architecture.md, "The scheduler"), shared by
// the ingest thread, the lanes' workers, the report publisher and the control server.
//
// Frame accounting: every frame that reaches the pipeline is counted in once and leaves exactly
// once, done or dropped (with a reason), so that at every snapshot
//     frames_in == frames_done + frames_dropped + in_flight.
// The counters change together under one lock, so a snapshot never sees a frame half-moved.
// Latency samples go to fixed, log-bucketed histograms with atomic buckets: recording a sample
// takes no lock and never allocates.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace covflow::pipeline {

// Drop reasons the pipeline itself uses (stages add their own through FrameError::reason()).
namespace drop_reason {
inline constexpr std::string_view overflow_drop_oldest = "overflow_drop_oldest";
inline constexpr std::string_view overflow_reject_newest = "overflow_reject_newest";
inline constexpr std::string_view shape = "shape";                    // wrong kind/type/dimensions
inline constexpr std::string_view rejected_input = "rejected_input";  // damaged record or message
inline constexpr std::string_view stage_error = "stage_error";        // a stage threw something else
inline constexpr std::string_view shutdown = "shutdown";              // queued when stop_now() was called
inline constexpr std::string_view device_error = "device_error";      // the device failed for good on this frame
}  // namespace drop_reason

// Percentiles of one histogram, in milliseconds.
struct LatencySummary {
  std::uint64_t count = 0;
  double mean_ms = 0, p50_ms = 0, p90_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0;
};

// A latency histogram with buckets of equal relative width (log-linear, as HDR histograms do):
// values are integer nanoseconds; below 2^(kSubBits+1) ns every nanosecond has its bucket, above
// it each power-of-two octave is split into 2^kSubBits buckets. A percentile is reported as the
// middle of its bucket, so it is within half a bucket — a relative 2^-(kSubBits+1) = 1/128 — of
// the sample at that rank; it is clamped to the smallest and largest samples, which are exact.
// Values above 2^kMaxOctave ns (about 18 minutes) land in the last bucket. Fixed memory (about
// 18 KiB); thread-safe, lock-free.
class LatencyHistogram {
 public:
  static constexpr int kSubBits = 6;
  static constexpr int kMaxOctave = 40;
  static constexpr std::size_t kLinear = std::size_t(1) << (kSubBits + 1);
  // Octaves 2^(kSubBits+1) … 2^(kMaxOctave−1), each 2^kSubBits buckets, above the linear part.
  static constexpr std::size_t kBuckets = kLinear + (std::size_t(kMaxOctave - kSubBits - 1) << kSubBits);

  void record_ns(std::int64_t ns) noexcept;
  void record_ms(double ms) noexcept { record_ns(static_cast<std::int64_t>(ms * 1e6 + 0.5)); }
  // The value (ns) below which `percent` % of the samples lie: the sample of rank ceil(p/100·n).
  double percentile_ns(double percent) const noexcept;
  LatencySummary summary() const noexcept;
  std::uint64_t count() const noexcept;
  void reset() noexcept;

  static std::size_t bucket_of(std::uint64_t ns) noexcept;
  // [lower, upper) of bucket `index`, ns.
  static std::uint64_t bucket_lower(std::size_t index) noexcept;
  static std::uint64_t bucket_upper(std::size_t index) noexcept;

 private:
  std::array<std::atomic<std::uint64_t>, kBuckets> buckets_{};
  std::atomic<std::uint64_t> sum_ns_{0};
  std::atomic<std::uint64_t> min_ns_{UINT64_MAX};
  std::atomic<std::uint64_t> max_ns_{0};
};

struct StageSnapshot {
  std::string name;
  LatencySummary latency;          // of the frames it ran on
  std::uint64_t ran = 0;           // frames it completed
  std::uint64_t skipped_degraded = 0;
  std::uint64_t failures = 0;      // frames it dropped (FrameError or another exception)
  std::uint64_t over_budget = 0;   // runs longer than the stage's own budget_ms
  double predicted_ms = 0;         // the runner's current estimate of its cost
};

// How the input kept up: what a pipeline fed faster than it takes frames shows, besides its drops.
struct InputSnapshot {
  std::uint64_t taken = 0;          // frames taken from the input (records it refused are not taken)
  LatencySummary lag;               // paced inputs (replay, generator): time taken − time due
  std::uint64_t taken_late = 0;     // paced inputs: frames taken more than kLateTakeMs after they were due
  std::uint64_t behind = 0;         // frames taken while another was already waiting (in the socket, or due)
  std::uint64_t sequence_gaps = 0;  // frames missing between consecutive sequence numbers taken
  LatencySummary place;             // placing and checking each payload (read or copy, CRC), when measured
};

// A paced frame taken more than this after it was due counts as taken late: a sleeping ingest
// thread wakes within tens of microseconds, so a millisecond means it was held up.
inline constexpr double kLateTakeMs = 1.0;

// One lane of the runner (a GPU, or a CPU lane): the frames it took and how they left it. A frame
// a lane finished still goes through the reorder buffer (and the in-sequence stages) before it is
// done, so `latency` is arrival → the lane's last stage, and end_to_end can only be later.
struct LaneSnapshot {
  std::string name;                // "cuda:1", "cpu:0"
  std::uint64_t taken = 0;         // frames the lane took from the queue
  std::uint64_t finished = 0;      // frames it ran through its stages
  std::uint64_t dropped = 0;       // frames it took and dropped: a stage's error, a stop (in frames_dropped too)
  LatencySummary latency;          // arrival → the lane's last stage, of the finished frames
};

// The reorder buffer between several lanes and the in-sequence stages (empty with one lane).
struct ReorderSnapshot {
  std::uint64_t in_order = 0;       // frames passed on in the order the lanes took them
  std::uint64_t out_of_order = 0;   // passed on after a later frame (an earlier one outlived the budget)
  std::uint64_t max_held = 0;       // the most finished frames held at once (waiting for earlier ones, or their turn)
  LatencySummary wait;              // time a finished frame waited there
};

struct MetricsSnapshot {
  double uptime_s = 0;        // since the Metrics was made or last reset
  std::uint64_t frames_in = 0;
  std::uint64_t frames_done = 0;
  std::uint64_t frames_late = 0;  // done after their deadline (counted in frames_done too)
  std::uint64_t frames_dropped = 0;
  std::uint64_t in_flight = 0;    // queued or being processed
  std::map<std::string, std::uint64_t, std::less<>> dropped_by_reason;
  std::uint64_t queue_depth = 0;      // frames queued now
  std::uint64_t queue_max_depth = 0;  // the largest depth since the last reset
  std::uint64_t queue_capacity = 0;
  double ingest_blocked_ms = 0;       // time ingest waited for room (overflow: block)
  LatencySummary end_to_end;          // arrival → last stage done
  std::vector<StageSnapshot> stages;  // in chain order
  std::vector<LaneSnapshot> lanes;    // one per lane of the runner
  ReorderSnapshot reorder;
  InputSnapshot input;
  // The recording of the input (pipeline.stages.publish.record_path), off the frames' path.
  struct {
    std::uint64_t written = 0;   // records written
    std::uint64_t left_out = 0;  // frames left out: the writer was behind (its queue full)
    std::uint64_t failed = 0;    // writes that failed (logged)
  } recording;
  // The results on disk (pipeline.stages.publish.results_path, stages::ResultsRecorder): lines of
  // published results and reports, off the frames' path.
  struct {
    std::uint64_t written = 0;   // lines written
    std::uint64_t left_out = 0;  // lines left out: the writer's queue was full
    std::uint64_t failed = 0;    // lines whose write failed (logged once)
  } results_recording;
};

// The JSON of docs/zmq.md ("latency" reports, the "stats" control reply).
nlohmann::json to_json(const LatencySummary& summary);
nlohmann::json to_json(const MetricsSnapshot& snapshot);

class Metrics {
 public:
  explicit Metrics(std::vector<std::string> stage_names = {});
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Sets the chain whose stages are reported (the runner does it when it is made); per-stage
  // figures start from zero. Allocates: call at start-up, not per frame, and never while a
  // runner records into this Metrics.
  void set_stages(const std::vector<std::string>& stage_names);
  std::size_t stage_count() const { return stages_.size(); }
  // Likewise for the runner's lanes (their names); per-lane figures start from zero.
  void set_lanes(const std::vector<std::string>& lane_names);
  std::size_t lane_count() const { return lanes_.size(); }

  // Frame accounting.
  void frame_in();                                  // in and in flight
  void frame_done(double end_to_end_ms, bool late);  // leaves flight, done
  void frame_dropped(std::string_view reason);       // leaves flight, dropped
  void frames_rejected(std::string_view reason, std::uint64_t count);  // in and dropped at once (never in flight)

  // Stage outcomes (index in chain order; out-of-range indices are ignored).
  void stage_ran(std::size_t stage, double ms, bool over_budget);
  void stage_skipped(std::size_t stage);
  void stage_failed(std::size_t stage);
  void stage_predicted(std::size_t stage, double ms);

  // Lane outcomes (out-of-range lanes are ignored). Lock-free.
  void lane_took(std::size_t lane);
  void lane_finished(std::size_t lane, double since_arrival_ms);
  void lane_dropped(std::size_t lane);
  // The reorder buffer: a frame passed on (in order or not) after waiting `waited_ms` there, and
  // the frames it holds now.
  void reorder_passed(bool in_order, double waited_ms);
  void reorder_held(std::size_t held);

  void queue_depth(std::size_t depth, std::size_t capacity);
  void ingest_blocked(double ms);
  // A frame taken from the input (before its shape is checked): lag_ns is taken − due (negative:
  // the input has no schedule), more_waiting says another frame already waited, place_ns is the
  // time spent placing and checking its payload (0: not measured), missing the frames its sequence
  // number skipped over. Lock-free.
  void frame_taken(std::int64_t lag_ns, bool more_waiting, std::int64_t place_ns, std::uint64_t missing);
  // The recorder's counts (stages::Recorder, on its own thread).
  void frame_recorded() { recorded_.fetch_add(1, std::memory_order_relaxed); }
  void recording_left_out() { record_left_out_.fetch_add(1, std::memory_order_relaxed); }
  void recording_failed() { record_failed_.fetch_add(1, std::memory_order_relaxed); }
  // The results recorder's counts (stages::ResultsRecorder, on its own thread and the offering ones).
  void results_written() { results_written_.fetch_add(1, std::memory_order_relaxed); }
  void results_left_out() { results_left_out_.fetch_add(1, std::memory_order_relaxed); }
  void results_failed() { results_failed_.fetch_add(1, std::memory_order_relaxed); }

  MetricsSnapshot snapshot() const;
  // Counters, histograms and the queue maximum back to zero. Frames in flight stay in flight
  // (frames_in restarts at in_flight), so the invariant holds across a reset.
  void reset();

 private:
  struct StageCounters {
    std::string name;
    LatencyHistogram latency;
    std::atomic<std::uint64_t> ran{0}, skipped{0}, failures{0}, over_budget{0};
    std::atomic<double> predicted_ms{0};
  };

  mutable std::mutex mutex_;  // the frame counters below, the reason map and the stage list
  std::uint64_t in_ = 0, done_ = 0, late_ = 0, dropped_ = 0, in_flight_ = 0;
  std::map<std::string, std::uint64_t, std::less<>> dropped_by_reason_;
  std::int64_t since_ns_ = 0;

  std::atomic<std::uint64_t> queue_depth_{0}, queue_max_{0}, queue_capacity_{0};
  std::atomic<std::int64_t> blocked_ns_{0};
  std::atomic<std::uint64_t> taken_{0}, taken_late_{0}, behind_{0}, sequence_gaps_{0};
  std::atomic<std::uint64_t> recorded_{0}, record_left_out_{0}, record_failed_{0};
  std::atomic<std::uint64_t> results_written_{0}, results_left_out_{0}, results_failed_{0};
  LatencyHistogram input_lag_, input_place_;
  LatencyHistogram end_to_end_;
  std::vector<std::unique_ptr<StageCounters>> stages_;
  struct LaneCounters {
    std::string name;
    LatencyHistogram latency;
    std::atomic<std::uint64_t> taken{0}, finished{0}, dropped{0};
  };
  std::vector<std::unique_ptr<LaneCounters>> lanes_;
  std::atomic<std::uint64_t> reorder_in_order_{0}, reorder_out_of_order_{0}, reorder_max_held_{0};
  LatencyHistogram reorder_wait_;
};

}  // namespace covflow::pipeline

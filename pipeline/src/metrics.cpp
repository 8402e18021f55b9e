#include "covflow/pipeline/metrics.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>

namespace covflow::pipeline {
namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void atomic_max(std::atomic<std::uint64_t>& target, std::uint64_t value) noexcept {
  std::uint64_t seen = target.load(std::memory_order_relaxed);
  while (value > seen && !target.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}
void atomic_min(std::atomic<std::uint64_t>& target, std::uint64_t value) noexcept {
  std::uint64_t seen = target.load(std::memory_order_relaxed);
  while (value < seen && !target.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

}  // namespace

// ---- LatencyHistogram ----------------------------------------------------------------------

std::size_t LatencyHistogram::bucket_of(std::uint64_t ns) noexcept {
  if (ns < kLinear) return std::size_t(ns);
  constexpr std::uint64_t top = (std::uint64_t(1) << kMaxOctave) - 1;
  if (ns > top) ns = top;
  const int octave = std::bit_width(ns) - 1;  // ≥ kSubBits + 1
  const int shift = octave - kSubBits;
  const std::uint64_t mantissa = ns >> shift;  // in [2^kSubBits, 2^(kSubBits+1))
  return kLinear + (std::size_t(octave - kSubBits - 1) << kSubBits) + std::size_t(mantissa - (std::uint64_t(1) << kSubBits));
}

std::uint64_t LatencyHistogram::bucket_lower(std::size_t index) noexcept {
  if (index < kLinear) return index;
  const std::size_t above = index - kLinear;
  const int octave = int(above >> kSubBits) + kSubBits + 1;
  const std::uint64_t mantissa = (std::uint64_t(1) << kSubBits) + (above & ((std::size_t(1) << kSubBits) - 1));
  return mantissa << (octave - kSubBits);
}

std::uint64_t LatencyHistogram::bucket_upper(std::size_t index) noexcept {
  if (index < kLinear) return index + 1;
  const std::size_t above = index - kLinear;
  const int octave = int(above >> kSubBits) + kSubBits + 1;
  return bucket_lower(index) + (std::uint64_t(1) << (octave - kSubBits));
}

void LatencyHistogram::record_ns(std::int64_t ns) noexcept {
  const std::uint64_t value = ns < 0 ? 0 : std::uint64_t(ns);
  buckets_[bucket_of(value)].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(value, std::memory_order_relaxed);
  atomic_min(min_ns_, value);
  atomic_max(max_ns_, value);
}

std::uint64_t LatencyHistogram::count() const noexcept {
  std::uint64_t total = 0;
  for (const auto& b : buckets_) total += b.load(std::memory_order_relaxed);
  return total;
}

double LatencyHistogram::percentile_ns(double percent) const noexcept {
  // The total is taken from the buckets themselves, so a sample recorded during the walk cannot
  // push the rank past the end.
  std::array<std::uint64_t, kBuckets> counts;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) total += counts[i] = buckets_[i].load(std::memory_order_relaxed);
  if (total == 0) return 0.0;
  const double clamped = std::clamp(percent, 0.0, 100.0);
  const auto rank = std::max<std::uint64_t>(1, std::uint64_t(std::ceil(clamped / 100.0 * double(total) - 1e-9)));
  std::uint64_t seen = 0;
  std::size_t index = kBuckets - 1;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += counts[i];
    if (seen >= rank) {
      index = i;
      break;
    }
  }
  const double middle = index < kLinear ? double(index) : 0.5 * double(bucket_lower(index) + bucket_upper(index));
  const double lo = double(min_ns_.load(std::memory_order_relaxed));
  const double hi = double(max_ns_.load(std::memory_order_relaxed));
  return std::clamp(middle, std::min(lo, hi), hi);
}

LatencySummary LatencyHistogram::summary() const noexcept {
  LatencySummary s;
  s.count = count();
  if (s.count == 0) return s;
  s.mean_ms = double(sum_ns_.load(std::memory_order_relaxed)) / double(s.count) * 1e-6;
  s.p50_ms = percentile_ns(50) * 1e-6;
  s.p90_ms = percentile_ns(90) * 1e-6;
  s.p99_ms = percentile_ns(99) * 1e-6;
  s.p999_ms = percentile_ns(99.9) * 1e-6;
  s.max_ms = double(max_ns_.load(std::memory_order_relaxed)) * 1e-6;
  return s;
}

void LatencyHistogram::reset() noexcept {
  for (auto& b : buckets_) b.store(0, std::memory_order_relaxed);
  sum_ns_.store(0, std::memory_order_relaxed);
  min_ns_.store(UINT64_MAX, std::memory_order_relaxed);
  max_ns_.store(0, std::memory_order_relaxed);
}

// ---- JSON ----------------------------------------------------------------------------------

nlohmann::json to_json(const LatencySummary& s) {
  return {{"count", s.count}, {"mean_ms", s.mean_ms}, {"p50_ms", s.p50_ms},   {"p90_ms", s.p90_ms},
          {"p99_ms", s.p99_ms}, {"p999_ms", s.p999_ms}, {"max_ms", s.max_ms}};
}

nlohmann::json to_json(const MetricsSnapshot& m) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : m.stages) {
    stages.push_back({{"name", s.name},
                      {"latency", to_json(s.latency)},
                      {"ran", s.ran},
                      {"skipped_degraded", s.skipped_degraded},
                      {"failures", s.failures},
                      {"over_budget", s.over_budget},
                      {"predicted_ms", s.predicted_ms}});
  }
  nlohmann::json reasons = nlohmann::json::object();
  for (const auto& [reason, count] : m.dropped_by_reason) reasons[reason] = count;
  nlohmann::json lanes = nlohmann::json::array();
  for (const auto& l : m.lanes)
    lanes.push_back({{"name", l.name},
                     {"taken", l.taken},
                     {"finished", l.finished},
                     {"dropped", l.dropped},
                     {"latency", to_json(l.latency)}});
  return {{"uptime_s", m.uptime_s},
          {"frames",
           {{"in", m.frames_in},
            {"done", m.frames_done},
            {"late", m.frames_late},
            {"dropped", m.frames_dropped},
            {"in_flight", m.in_flight},
            {"dropped_by_reason", reasons}}},
          {"queue", {{"depth", m.queue_depth}, {"max_depth", m.queue_max_depth}, {"capacity", m.queue_capacity}}},
          {"ingest_blocked_ms", m.ingest_blocked_ms},
          {"end_to_end", to_json(m.end_to_end)},
          {"stages", stages},
          {"input",
           {{"taken", m.input.taken},
            {"lag", to_json(m.input.lag)},
            {"taken_late", m.input.taken_late},
            {"behind", m.input.behind},
            {"sequence_gaps", m.input.sequence_gaps},
            {"place", to_json(m.input.place)}}},
          {"recording",
           {{"written", m.recording.written}, {"left_out", m.recording.left_out}, {"failed", m.recording.failed}}},
          {"results_recording",
           {{"written", m.results_recording.written},
            {"left_out", m.results_recording.left_out},
            {"failed", m.results_recording.failed}}},
          {"lanes", lanes},
          {"reorder",
           {{"in_order", m.reorder.in_order},
            {"out_of_order", m.reorder.out_of_order},
            {"max_held", m.reorder.max_held},
            {"wait", to_json(m.reorder.wait)}}}};
}

// ---- Metrics -------------------------------------------------------------------------------

Metrics::Metrics(std::vector<std::string> stage_names) : since_ns_(steady_ns()) { set_stages(stage_names); }

void Metrics::set_stages(const std::vector<std::string>& stage_names) {
  std::vector<std::unique_ptr<StageCounters>> fresh;
  for (const auto& name : stage_names) {
    fresh.push_back(std::make_unique<StageCounters>());
    fresh.back()->name = name;
  }
  std::lock_guard lock(mutex_);
  stages_ = std::move(fresh);
}

void Metrics::set_lanes(const std::vector<std::string>& lane_names) {
  std::vector<std::unique_ptr<LaneCounters>> fresh;
  for (const auto& name : lane_names) {
    fresh.push_back(std::make_unique<LaneCounters>());
    fresh.back()->name = name;
  }
  std::lock_guard lock(mutex_);
  lanes_ = std::move(fresh);
}

void Metrics::lane_took(std::size_t lane) {
  if (lane < lanes_.size()) lanes_[lane]->taken.fetch_add(1, std::memory_order_relaxed);
}

void Metrics::lane_finished(std::size_t lane, double since_arrival_ms) {
  if (lane >= lanes_.size()) return;
  lanes_[lane]->latency.record_ms(since_arrival_ms);
  lanes_[lane]->finished.fetch_add(1, std::memory_order_relaxed);
}

void Metrics::lane_dropped(std::size_t lane) {
  if (lane < lanes_.size()) lanes_[lane]->dropped.fetch_add(1, std::memory_order_relaxed);
}

void Metrics::reorder_passed(bool in_order, double waited_ms) {
  (in_order ? reorder_in_order_ : reorder_out_of_order_).fetch_add(1, std::memory_order_relaxed);
  reorder_wait_.record_ms(waited_ms);
}

void Metrics::reorder_held(std::size_t held) { atomic_max(reorder_max_held_, held); }

void Metrics::frame_in() {
  std::lock_guard lock(mutex_);
  ++in_;
  ++in_flight_;
}

void Metrics::frame_done(double end_to_end_ms, bool late) {
  end_to_end_.record_ms(end_to_end_ms);
  std::lock_guard lock(mutex_);
  ++done_;
  if (late) ++late_;
  if (in_flight_ > 0) --in_flight_;
}

void Metrics::frame_dropped(std::string_view reason) {
  std::lock_guard lock(mutex_);
  ++dropped_;
  if (in_flight_ > 0) --in_flight_;
  // Heterogeneous lookup: no string is built for a reason already seen.
  auto it = dropped_by_reason_.find(reason);
  if (it == dropped_by_reason_.end()) it = dropped_by_reason_.emplace(std::string(reason), 0).first;
  ++it->second;
}

void Metrics::frames_rejected(std::string_view reason, std::uint64_t count) {
  if (count == 0) return;
  std::lock_guard lock(mutex_);
  in_ += count;
  dropped_ += count;
  auto it = dropped_by_reason_.find(reason);
  if (it == dropped_by_reason_.end()) it = dropped_by_reason_.emplace(std::string(reason), 0).first;
  it->second += count;
}

void Metrics::stage_ran(std::size_t stage, double ms, bool over_budget) {
  if (stage >= stages_.size()) return;
  auto& s = *stages_[stage];
  s.latency.record_ms(ms);
  s.ran.fetch_add(1, std::memory_order_relaxed);
  if (over_budget) s.over_budget.fetch_add(1, std::memory_order_relaxed);
}

void Metrics::stage_skipped(std::size_t stage) {
  if (stage < stages_.size()) stages_[stage]->skipped.fetch_add(1, std::memory_order_relaxed);
}

void Metrics::stage_failed(std::size_t stage) {
  if (stage < stages_.size()) stages_[stage]->failures.fetch_add(1, std::memory_order_relaxed);
}

void Metrics::stage_predicted(std::size_t stage, double ms) {
  if (stage < stages_.size()) stages_[stage]->predicted_ms.store(ms, std::memory_order_relaxed);
}

void Metrics::queue_depth(std::size_t depth, std::size_t capacity) {
  queue_depth_.store(depth, std::memory_order_relaxed);
  queue_capacity_.store(capacity, std::memory_order_relaxed);
  atomic_max(queue_max_, depth);
}

void Metrics::ingest_blocked(double ms) { blocked_ns_.fetch_add(std::int64_t(ms * 1e6), std::memory_order_relaxed); }

void Metrics::frame_taken(std::int64_t lag_ns, bool more_waiting, std::int64_t place_ns, std::uint64_t missing) {
  taken_.fetch_add(1, std::memory_order_relaxed);
  if (lag_ns >= 0) {
    input_lag_.record_ns(lag_ns);
    if (double(lag_ns) > kLateTakeMs * 1e6) taken_late_.fetch_add(1, std::memory_order_relaxed);
  }
  if (more_waiting) behind_.fetch_add(1, std::memory_order_relaxed);
  if (place_ns > 0) input_place_.record_ns(place_ns);
  if (missing > 0) sequence_gaps_.fetch_add(missing, std::memory_order_relaxed);
}

MetricsSnapshot Metrics::snapshot() const {
  MetricsSnapshot m;
  m.input = {.taken = taken_.load(std::memory_order_relaxed),
             .lag = input_lag_.summary(),
             .taken_late = taken_late_.load(std::memory_order_relaxed),
             .behind = behind_.load(std::memory_order_relaxed),
             .sequence_gaps = sequence_gaps_.load(std::memory_order_relaxed),
             .place = input_place_.summary()};
  m.recording.written = recorded_.load(std::memory_order_relaxed);
  m.recording.left_out = record_left_out_.load(std::memory_order_relaxed);
  m.recording.failed = record_failed_.load(std::memory_order_relaxed);
  m.results_recording.written = results_written_.load(std::memory_order_relaxed);
  m.results_recording.left_out = results_left_out_.load(std::memory_order_relaxed);
  m.results_recording.failed = results_failed_.load(std::memory_order_relaxed);
  m.end_to_end = end_to_end_.summary();
  m.queue_depth = queue_depth_.load(std::memory_order_relaxed);
  m.queue_max_depth = queue_max_.load(std::memory_order_relaxed);
  m.queue_capacity = queue_capacity_.load(std::memory_order_relaxed);
  m.ingest_blocked_ms = double(blocked_ns_.load(std::memory_order_relaxed)) * 1e-6;
  std::lock_guard lock(mutex_);
  m.uptime_s = double(steady_ns() - since_ns_) * 1e-9;
  m.frames_in = in_;
  m.frames_done = done_;
  m.frames_late = late_;
  m.frames_dropped = dropped_;
  m.in_flight = in_flight_;
  m.dropped_by_reason = dropped_by_reason_;
  for (const auto& s : stages_) {
    m.stages.push_back({.name = s->name,
                        .latency = s->latency.summary(),
                        .ran = s->ran.load(std::memory_order_relaxed),
                        .skipped_degraded = s->skipped.load(std::memory_order_relaxed),
                        .failures = s->failures.load(std::memory_order_relaxed),
                        .over_budget = s->over_budget.load(std::memory_order_relaxed),
                        .predicted_ms = s->predicted_ms.load(std::memory_order_relaxed)});
  }
  for (const auto& l : lanes_) {
    m.lanes.push_back({.name = l->name,
                       .taken = l->taken.load(std::memory_order_relaxed),
                       .finished = l->finished.load(std::memory_order_relaxed),
                       .dropped = l->dropped.load(std::memory_order_relaxed),
                       .latency = l->latency.summary()});
  }
  m.reorder = {.in_order = reorder_in_order_.load(std::memory_order_relaxed),
               .out_of_order = reorder_out_of_order_.load(std::memory_order_relaxed),
               .max_held = reorder_max_held_.load(std::memory_order_relaxed),
               .wait = reorder_wait_.summary()};
  return m;
}

void Metrics::reset() {
  end_to_end_.reset();
  input_lag_.reset();
  input_place_.reset();
  for (auto* counter : {&taken_, &taken_late_, &behind_, &sequence_gaps_, &recorded_, &record_left_out_, &record_failed_,
                        &results_written_, &results_left_out_, &results_failed_})
    counter->store(0, std::memory_order_relaxed);
  queue_max_.store(queue_depth_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  reorder_wait_.reset();
  for (auto* counter : {&reorder_in_order_, &reorder_out_of_order_, &reorder_max_held_}) counter->store(0, std::memory_order_relaxed);
  blocked_ns_.store(0, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  in_ = in_flight_;
  done_ = late_ = dropped_ = 0;
  dropped_by_reason_.clear();
  since_ns_ = steady_ns();
  for (auto& s : stages_) {
    s->latency.reset();
    s->ran = 0;
    s->skipped = 0;
    s->failures = 0;
    s->over_budget = 0;
  }
  for (auto& l : lanes_) {
    l->latency.reset();
    l->taken = 0;
    l->finished = 0;
    l->dropped = 0;
  }
}

}  // namespace covflow::pipeline

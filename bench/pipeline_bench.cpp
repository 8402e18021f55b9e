#include "pipeline_bench.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>
#include <zmq.hpp>

#include "covflow/config/config.hpp"
#include "covflow/linalg/device.hpp"
#include "covflow/pipeline/endpoints.hpp"
#include "covflow/pipeline/metrics.hpp"
#include "covflow/pipeline/runner.hpp"
#include "covflow/replay/format.hpp"
#include "covflow/replay/payload_mover.hpp"
#include "covflow/replay/writer.hpp"
#include "covflow/stages/ingest.hpp"
#include "covflow/stages/processing.hpp"
#include "covflow/stages/publish.hpp"
#include "covflow/stages/scenario.hpp"

namespace covflow::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Frames at a fixed rate from a few pre-generated templates (generating a 128-channel covariance
// frame takes longer than its 10 ms period), each delivered as a fresh copy with its own sequence
// number, as a live feed would deliver it. In place (the default): the copy goes straight into the
// pipeline's pinned frame slot, on the threads of a PayloadMover with its CRC taken on the way, as
// the ZeroMQ input copies a message it received (one thread cannot copy 47 MB more than about 175
// times a second, which capped this input below what several GPUs take); otherwise each frame is
// handed over for the ingest thread to copy. With several placers the frames are claimed in order
// and copied by the runner's placing threads at once, each through a mover of its own (threads
// shared out between them), as covflowd's inputs that can place several frames at once do.
class PacedInput final : public pipeline::FrameInput {
 public:
  PacedInput(std::vector<replay::Frame> templates, double rate_hz, std::uint64_t total, bool in_place,
             std::size_t placers = 1, bool streaming_stores = false)
      : mover_(replay::PayloadMoverOptions{.streaming_stores = streaming_stores}),
        templates_(std::move(templates)), period_(std::chrono::duration<double>(1.0 / rate_hz)), total_(total),
        in_place_(in_place) {
    if (in_place_ && placers > 1) {
      const unsigned share = std::max(2u, std::min(12u, std::thread::hardware_concurrency() * 3 / 4 / unsigned(placers)));
      for (std::size_t i = 0; i < placers; ++i)
        movers_.push_back(std::make_unique<replay::PayloadMover>(
            replay::PayloadMoverOptions{.threads = share, .streaming_stores = streaming_stores}));
      for (auto& m : movers_) free_movers_.push_back(m.get());
    }
  }

  std::optional<replay::Frame> next(std::chrono::milliseconds wait) override {
    if (!wait_until_due(wait)) return std::nullopt;
    // Into the storage of a frame the runner handed back (recycle): no allocation, warm pages.
    const replay::Frame& model = templates_[sent_ % templates_.size()];
    replay::Frame frame = std::move(spare_);
    frame.header = stamped(model.header);
    frame.payload.assign(model.payload.begin(), model.payload.end());
    ++sent_;
    return frame;
  }
  bool fills_in_place() const override { return in_place_; }
  std::optional<replay::FrameHeader> next_into(std::chrono::milliseconds wait, std::span<std::byte> payload) override {
    if (!wait_until_due(wait)) return std::nullopt;
    const replay::Frame& model = templates_[sent_ % templates_.size()];
    const replay::FrameHeader header = stamped(model.header);
    if (model.payload.size() <= payload.size()) {
      replay::Placed placed;
      if (observer_ != nullptr) placed = [this](std::size_t begin, std::size_t end) { observer_->placed(begin, end); };
      mover_.copy(std::span<const std::byte>(model.payload), payload.first(model.payload.size()), 0, placed);
    }
    ++sent_;
    return header;
  }
  // One lane: the ingest thread uploads each stretch as it lands, as for covflowd's file and
  // ZeroMQ inputs.
  void observe_placement(pipeline::PlacementObserver* observer) override { observer_ = observer; }
  std::size_t concurrent_places() const override { return std::max<std::size_t>(1, movers_.size()); }
  std::optional<pipeline::Claim> claim(std::chrono::milliseconds wait) override {
    if (!wait_until_due(wait)) return std::nullopt;
    const std::uint64_t token = sent_ % templates_.size();
    pipeline::Claim claimed{.header = stamped(templates_[token].header), .timing = {}, .token = token};
    ++sent_;
    return claimed;
  }
  std::string place(const pipeline::Claim& claimed, std::span<std::byte> payload,
                    pipeline::PlacementObserver* observer) override {
    const replay::Frame& model = templates_.at(claimed.token);
    replay::PayloadMover* mover = nullptr;
    {
      std::lock_guard lock(movers_mutex_);
      if (free_movers_.empty()) return "more frames placed at once than the input offers";
      mover = free_movers_.back();
      free_movers_.pop_back();
    }
    replay::Placed placed;
    if (observer != nullptr) placed = [observer](std::size_t begin, std::size_t end) { observer->placed(begin, end); };
    mover->copy(std::span<const std::byte>(model.payload), payload.first(model.payload.size()), 0, placed);
    std::lock_guard lock(movers_mutex_);
    free_movers_.push_back(mover);
    return {};
  }
  bool ended() const override { return sent_ >= total_; }
  void recycle(replay::Frame&& frame) override { spare_ = std::move(frame); }
  std::string describe() const override { return fmt::format("{} frames at {} Hz", total_, 1.0 / period_.count()); }
  std::uint64_t sent() const { return sent_; }

 private:
  replay::PayloadMover mover_;
  pipeline::PlacementObserver* observer_ = nullptr;
  std::vector<std::unique_ptr<replay::PayloadMover>> movers_;  // several placers: one each
  std::mutex movers_mutex_;
  std::vector<replay::PayloadMover*> free_movers_;
  // Sleeps until the next frame is due; false when it is not due within `wait` (or none is left).
  bool wait_until_due(std::chrono::milliseconds wait) {
    if (sent_ >= total_) return false;
    if (sent_ == 0 && start_ == Clock::time_point{}) start_ = Clock::now();
    const auto now = Clock::now();
    if (due() > now) {
      if (due() - now > wait) {
        std::this_thread::sleep_for(wait);
        return false;
      }
      std::this_thread::sleep_until(due());
    }
    return true;
  }
  Clock::time_point due() const {
    return start_ + std::chrono::duration_cast<Clock::duration>(period_ * double(sent_));
  }
  replay::FrameHeader stamped(replay::FrameHeader header) const {
    header.sequence = sent_;
    header.capture_time_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(due().time_since_epoch()).count();
    return header;
  }

 public:
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  std::vector<replay::Frame> templates_;
  std::chrono::duration<double> period_;
  std::uint64_t total_;
  bool in_place_;
  std::uint64_t sent_ = 0;
  Clock::time_point start_{};
  replay::Frame spare_;
};

// A thread that reads the clock in a tight loop and keeps every gap between two reads of at least
// 0.1 ms: time the host (kernel, hypervisor) took it off its CPU. It shows whether the frames' host
// work can be stalled for reasons outside the pipeline, and how often.
class HostProbe {
 public:
  HostProbe() : thread_([this] { spin(); }) {}
  ~HostProbe() { stop(); }
  HostProbe(const HostProbe&) = delete;
  HostProbe& operator=(const HostProbe&) = delete;
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  static constexpr std::pair<const char*, double> kFloors[] = {{"0.1", 0.1}, {"0.25", 0.25}, {"0.5", 0.5}, {"1", 1.0}, {"2", 2.0}};
  // Gap counts from each floor up (ms), the longest gap and the run's length.
  nlohmann::json summary() const {
    nlohmann::json counts = nlohmann::json::object();
    for (const auto& [label, floor_ms] : kFloors)
      counts[label] = std::count_if(gaps_ms_.begin(), gaps_ms_.end(), [&](double g) { return g >= floor_ms; });
    const double longest = gaps_ms_.empty() ? 0.0 : *std::max_element(gaps_ms_.begin(), gaps_ms_.end());
    double stalled = 0;
    for (double g : gaps_ms_) stalled += g;
    return {{"seconds", seconds_}, {"gaps_at_least_ms", counts}, {"longest_ms", longest}, {"stalled_ms", stalled}};
  }

 private:
  void spin() {
    gaps_ms_.reserve(1 << 20);
    const auto start = Clock::now();
    auto last = start;
    while (!stop_.load(std::memory_order_relaxed)) {
      const auto now = Clock::now();
      const double gap = std::chrono::duration<double, std::milli>(now - last).count();
      if (gap >= 0.1 && gaps_ms_.size() < gaps_ms_.capacity()) gaps_ms_.push_back(gap);
      last = now;
    }
    seconds_ = std::chrono::duration<double>(last - start).count();
  }
  std::atomic<bool> stop_{false};
  std::vector<double> gaps_ms_;
  double seconds_ = 0;
  std::thread thread_;
};

// Every done frame's end-to-end latency and the part of it its stages account for; summarised
// over the slowest 1 % of frames, it says whether the tail is in a stage or between them (the
// upload, the waits and the hand-offs, which no stage times).
struct FrameTimes {
  std::vector<double> end_to_end_ms, in_stages_ms, publish_ms;
  std::vector<std::uint64_t> sequences;
  std::vector<std::uint32_t> lanes;
  void add(const pipeline::FrameSlot& slot) {
    if (slot.times.done_ns == 0 || end_to_end_ms.size() == end_to_end_ms.capacity()) return;
    double stages = 0;
    for (const auto& record : slot.stages) stages += record.ms;
    sequences.push_back(slot.sequence);
    lanes.push_back(slot.lane);
    end_to_end_ms.push_back(double(slot.times.done_ns - slot.times.arrival_ns) * 1e-6);
    in_stages_ms.push_back(stages);
    publish_ms.push_back(slot.stages.empty() ? 0.0 : slot.stages.back().ms);
  }
  nlohmann::json slowest_percent() const {
    std::vector<std::size_t> order(end_to_end_ms.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    const std::size_t count = std::max<std::size_t>(1, order.size() / 100);
    if (order.empty()) return nullptr;
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(count), order.end(),
                      [&](std::size_t a, std::size_t b) { return end_to_end_ms[a] > end_to_end_ms[b]; });
    double e2e = 0, in_stages = 0, publish = 0;
    for (std::size_t k = 0; k < count; ++k) {
      e2e += end_to_end_ms[order[k]];
      in_stages += in_stages_ms[order[k]];
      publish += publish_ms[order[k]];
    }
    const double n = double(count);
    // Which frames they were (sequence, lane), slowest first: whether the tail is the first frames
    // through fresh slots, one lane, or spread over the run.
    nlohmann::json which = nlohmann::json::array();
    for (std::size_t k = 0; k < std::min<std::size_t>(count, 24); ++k)
      which.push_back({sequences[order[k]], lanes[order[k]]});
    return {{"frames", count}, {"end_to_end_ms", e2e / n}, {"in_stages_ms", in_stages / n},
            {"publish_ms", publish / n}, {"outside_stages_ms", (e2e - in_stages) / n}, {"sequence_lane", which}};
  }
};

// ---- the real inputs -------------------------------------------------------------------------

// Ends an input after `total` frames taken, or (a live feed) once its sender has finished and
// nothing has arrived for a while; forwards everything else, as covflowd's own --frames wrapper does.
class CountedInput final : public pipeline::FrameInput {
 public:
  CountedInput(stages::FrameSource& source, std::uint64_t total, const std::atomic<bool>* sender_done = nullptr)
      : source_(source), total_(total), sender_done_(sender_done) {}
  std::optional<replay::Frame> next(std::chrono::milliseconds wait) override {
    if (ended()) return std::nullopt;
    auto frame = source_.next(wait);
    note(frame.has_value());
    return frame;
  }
  bool fills_in_place() const override { return source_.fills_in_place(); }
  std::optional<replay::FrameHeader> next_into(std::chrono::milliseconds wait, std::span<std::byte> payload) override {
    if (ended()) return std::nullopt;
    auto header = source_.next_into(wait, payload);
    note(header.has_value());
    return header;
  }
  std::size_t concurrent_places() const override { return source_.concurrent_places(); }
  std::optional<pipeline::Claim> claim(std::chrono::milliseconds wait) override {
    if (ended()) return std::nullopt;
    auto claimed = source_.claim(wait);
    note(claimed.has_value());
    return claimed;
  }
  std::string place(const pipeline::Claim& claimed, std::span<std::byte> payload,
                    pipeline::PlacementObserver* observer) override {
    return source_.place(claimed, payload, observer);
  }
  bool ended() const override {
    if (taken_ >= total_ || source_.ended()) return true;
    return sender_done_ != nullptr && sender_done_->load() && Clock::now() - last_arrival_ > std::chrono::seconds(2);
  }
  std::uint64_t rejected() const override { return source_.rejected(); }
  std::string last_problem() const override { return source_.last_problem(); }
  std::string describe() const override { return source_.describe(); }
  pipeline::InputTiming last_timing() const override { return source_.last_timing(); }
  void observe_placement(pipeline::PlacementObserver* observer) override { source_.observe_placement(observer); }
  void recycle(replay::Frame&& frame) override { source_.recycle(std::move(frame)); }
  std::uint64_t taken() const { return taken_; }

 private:
  void note(bool took) {
    if (took) ++taken_;
    if (took || last_arrival_ == Clock::time_point{}) last_arrival_ = Clock::now();
  }
  stages::FrameSource& source_;
  std::uint64_t total_;
  const std::atomic<bool>* sender_done_;
  std::uint64_t taken_ = 0;
  Clock::time_point last_arrival_{};
};

// The feed's other end: a thread with its own ZeroMQ context binds a PUSH socket on loopback and
// sends the records at the rate, each message pointing at a record encoded once (ZeroMQ sends it
// without copying). PUSH holds the sender back when the receiver's queue is full, so a slow input
// shows as messages sent late.
class ZmqSender {
 public:
  ZmqSender(const std::vector<std::vector<std::byte>>& records, double rate_hz, std::uint64_t total, std::size_t part_bytes,
            const std::string& transport)
      : records_(records), period_(1.0 / rate_hz), total_(total), part_bytes_(part_bytes),
        socket_(context_, zmq::socket_type::push) {
    socket_.set(zmq::sockopt::sndhwm, 2);
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind(transport == "ipc" ? fmt::format("ipc://{}/covflow-bench-feed-{}",
                                                  std::filesystem::temp_directory_path().string(), ::getpid())
                                    : std::string("tcp://127.0.0.1:*"));
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }
  ~ZmqSender() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }
  void start() { thread_ = std::thread([this] { send_all(); }); }
  const std::atomic<bool>& done() const { return done_; }
  std::uint64_t sent() const { return sent_; }
  std::uint64_t sent_late() const { return late_; }
  double worst_lag_ms() const { return worst_lag_ms_; }

 private:
  void send_all() {
    const auto start = Clock::now();
    for (std::uint64_t i = 0; i < total_ && !stop_; ++i) {
      const auto due = start + std::chrono::duration_cast<Clock::duration>(period_ * double(i));
      std::this_thread::sleep_until(due);
      const auto& record = records_[i % records_.size()];
      const std::size_t part = part_bytes_ == 0 ? record.size() : part_bytes_;
      for (std::size_t at = 0; at < record.size() && !stop_; at += part) {
        const std::size_t n = std::min(part, record.size() - at);
        zmq::message_t message(const_cast<std::byte*>(record.data() + at), n, [](void*, void*) {}, nullptr);
        const auto flags = at + n < record.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
        while (!stop_) {
          if (socket_.send(message, flags | zmq::send_flags::dontwait)) break;
          std::this_thread::sleep_for(std::chrono::microseconds(50));  // the receiver's queue is full
        }
      }
      const double lag_ms = std::chrono::duration<double, std::milli>(Clock::now() - due).count();
      worst_lag_ms_ = std::max(worst_lag_ms_.load(), lag_ms);
      if (lag_ms > pipeline::kLateTakeMs) ++late_;
      ++sent_;
    }
    done_ = true;
  }
  const std::vector<std::vector<std::byte>>& records_;
  std::chrono::duration<double> period_;
  std::uint64_t total_;
  std::size_t part_bytes_;
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, done_{false};
  std::atomic<std::uint64_t> sent_{0}, late_{0};
  std::atomic<double> worst_lag_ms_{0};
};

// One payload kind of the reference scenario: its configuration, the frames' shape, a few
// distinct frames (templates) and, made on first use, the file and the encoded records built from
// them: record i carries template i mod templates with sequence number i.
struct Scenario {
  std::string name;
  config::Config cfg;
  stages::InputShape shape;
  std::vector<replay::Frame> templates;
  std::filesystem::path file;
  std::vector<std::vector<std::byte>> records;

  Scenario() = default;
  Scenario(const Scenario&) = delete;
  Scenario& operator=(const Scenario&) = delete;
  ~Scenario() {
    std::error_code ignored;
    if (!file.empty()) std::filesystem::remove(file, ignored);
  }
  replay::Frame record(std::uint64_t i, double rate_hz) const {
    replay::Frame frame = templates[i % templates.size()];
    frame.header.sequence = i;
    frame.header.capture_time_ns = std::int64_t(double(i) * 1e9 / rate_hz);
    return frame;
  }
};

constexpr std::size_t kTemplates = 4;

std::unique_ptr<Scenario> make_scenario(const std::string& payload, const PipelineBenchOptions& o) {
  auto s = std::make_unique<Scenario>();
  s->name = payload;
  config::Config& cfg = s->cfg;
  cfg.scenario.elements = o.channels;
  cfg.scenario.cells = o.cells;
  cfg.scenario.frame_rate_hz = o.rate_hz;
  if (payload == "covariance") {
    cfg.scenario.payload = config::ScenarioPayload::covariance;
    cfg.scenario.element_type = config::SampleType::cf64;
    cfg.scenario.snapshots = 4 * o.channels;  // the estimates' snapshot count (the source count's K)
  } else {
    cfg.scenario.payload = config::ScenarioPayload::snapshots;
    cfg.scenario.element_type = config::SampleType::cf32;
    cfg.scenario.snapshots = o.snapshots;
  }
  cfg.pipeline.budget_ms = o.budget_ms;
  cfg.pipeline.queue_depth = 8;
  cfg.pipeline.overflow = config::Overflow::drop_oldest;
  cfg.pipeline.stages.adaptive.enabled = o.adaptive && payload == "snapshots";
  s->shape = stages::scenario_shape(cfg.scenario);
  stages::ScenarioGenerator generator(cfg.scenario);
  for (std::uint64_t t = 0; t < kTemplates; ++t) s->templates.push_back(generator.frame(t));
  return s;
}

void write_file(Scenario& s, const PipelineBenchOptions& o) {
  if (!s.file.empty()) return;
  const std::filesystem::path dir = o.dir.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(o.dir);
  s.file = dir / fmt::format("covflow-bench-{}-{}.cvf", s.name, ::getpid());
  const auto started = Clock::now();
  replay::Writer writer(s.file, {.overwrite = true});
  for (int i = 0; i < o.file_frames; ++i) writer.write(s.record(std::uint64_t(i), o.rate_hz));
  writer.close();
  fmt::print("  wrote {} ({} records, {:.0f} MB) in {:.1f} s\n", s.file.string(), o.file_frames,
             double(std::filesystem::file_size(s.file)) / 1e6, std::chrono::duration<double>(Clock::now() - started).count());
}

void encode_records(Scenario& s, const PipelineBenchOptions& o) {
  if (!s.records.empty()) return;
  for (int i = 0; i < o.file_frames; ++i) s.records.push_back(replay::format::encode_record(s.record(std::uint64_t(i), o.rate_hz)));
}

// The answer the run times: every frame carrying the same template must give the same results
// (source counts exactly, directions of arrival to 1e-3°), through every input and at every rate —
// a payload damaged or misplaced on the way in would not. The first frame of each template seen
// in the whole benchmark is the reference.
struct ResultCheck {
  struct Reference {
    std::vector<std::int32_t> source_count;
    std::vector<float> doa_deg;
  };
  std::array<std::optional<Reference>, kTemplates> reference;
  std::uint64_t checked = 0, mismatched = 0;
  std::string first_mismatch;

  void add(const pipeline::FrameSlot& slot) {
    if (slot.times.done_ns == 0 || !slot.problem.empty()) return;
    const auto& r = slot.results;
    auto& ref = reference[slot.sequence % kTemplates];
    if (!ref) {
      ref = Reference{r.source_count, r.doa_deg};
      return;
    }
    ++checked;
    bool same = r.source_count == ref->source_count && r.doa_deg.size() == ref->doa_deg.size();
    for (std::size_t i = 0; same && i < r.doa_deg.size(); ++i) {
      const float a = r.doa_deg[i], b = ref->doa_deg[i];
      same = (std::isnan(a) && std::isnan(b)) || std::abs(a - b) <= 1e-3f;
    }
    if (!same && mismatched++ == 0)
      first_mismatch = fmt::format("frame {} differs from the first frame of template {}", slot.sequence, slot.sequence % kTemplates);
  }
};

struct Run {
  std::string backend, input;
  double rate_hz = 0, seconds = 0;
};

nlohmann::json run_one(const Run& run, const std::vector<linalg::Exec*>& lanes, Scenario& s, const PipelineBenchOptions& o,
                       ResultCheck& check, bool quiet = false) {
  const auto total = std::uint64_t(std::max(1.0, run.seconds * run.rate_hz));
  pipeline::Metrics metrics;
  auto chain = stages::make_processing_stages(s.cfg, s.shape);
  std::vector<std::string> names;
  for (const auto& stage : chain) names.emplace_back(stage->name());
  names.emplace_back("publish");
  auto results = std::make_shared<pipeline::ResultsPublisher>("tcp://127.0.0.1:*", "covflow-bench results");
  chain.push_back(std::make_unique<stages::PublishStage>(
      results, stages::PublishOptions{.recorder = nullptr, .stage_names = names, .json = {}, .results = nullptr}));
  pipeline::RunnerOptions options;
  options.budget_ms = s.cfg.pipeline.budget_ms;
  options.queue_depth = std::size_t(s.cfg.pipeline.queue_depth);
  options.overflow = s.cfg.pipeline.overflow;
  options.placers = o.placers;
  options.take_while_computing = o.take_while_computing;
  options.lane_choice = o.lane_choice == "claimed" ? pipeline::RunnerOptions::LaneChoice::when_claimed
                        : o.lane_choice == "taken" ? pipeline::RunnerOptions::LaneChoice::when_taken
                                                   : pipeline::RunnerOptions::LaneChoice::automatic;
  FrameTimes frame_times;
  frame_times.end_to_end_ms.reserve(total);
  frame_times.in_stages_ms.reserve(total);
  frame_times.sequences.reserve(total);
  frame_times.lanes.reserve(total);
  frame_times.publish_ms.reserve(total);
  std::mutex completed;  // several lanes: frames a lane dropped complete on that lane's thread
  pipeline::Runner runner(stages::frame_shape(s.cfg, s.shape), std::move(chain), lanes, options, metrics,
                          [&](const pipeline::FrameSlot& slot) {
                            std::lock_guard lock(completed);
                            frame_times.add(slot);
                            check.add(slot);
                          });
  if (runner.lane_count() != lanes.size())
    throw std::runtime_error(fmt::format("pipeline bench: the chain runs on {} lane(s) of {}: {}", runner.lane_count(),
                                         lanes.size(), runner.single_lane_reason()));
  runner.warm_up(stages::warm_up_frame(s.shape));

  // The input, as covflowd makes it.
  std::unique_ptr<stages::FrameSource> source;
  std::unique_ptr<ZmqSender> sender;
  std::unique_ptr<pipeline::FrameInput> input;
  PacedInput* paced = nullptr;
  const bool slot_input = run.input == "slot";
  const bool cuda_lanes = !lanes.empty() && lanes.front()->is_cuda();
  // Streaming stores where only GPUs read the slots again, as covflowd chooses them.
  const bool all_cuda =
      !lanes.empty() && std::all_of(lanes.begin(), lanes.end(), [](const linalg::Exec* e) { return e->is_cuda(); });
  const bool streaming = !o.plain_stores && (o.streaming_stores || all_cuda);
  if (run.input == "file") {
    write_file(s, o);
    replay::ReplayOptions replay{.pace = replay::Pace::fixed, .rate_hz = run.rate_hz, .loop = true};
    source = stages::replay_source(s.file.string(), replay, s.shape.snapshots, o.ingest_threads,
                                   o.placers > 0 ? o.placers : pipeline::automatic_placers(lanes.size(), cuda_lanes));
    input = std::make_unique<CountedInput>(*source, total);
  } else if (run.input == "zmq") {
    encode_records(s, o);
    sender = std::make_unique<ZmqSender>(s.records, run.rate_hz, total, o.zmq_part_bytes, o.zmq_transport);
    source = stages::zmq_source(sender->endpoint(), config::ZmqPattern::pull,
                                {.shape = s.shape,
                                 .receive_hwm = static_cast<int>(s.cfg.pipeline.queue_depth),
                                 .threads = o.ingest_threads,
                                 .streaming_stores = streaming});
    input = std::make_unique<CountedInput>(*source, total, &sender->done());
  } else {
    auto p = std::make_unique<PacedInput>(s.templates, run.rate_hz, total, !o.copy_input,
                                          o.placers > 0 ? o.placers : pipeline::automatic_placers(lanes.size(), cuda_lanes),
                                          streaming);
    paced = p.get();
    input = std::move(p);
  }
  const std::string input_label = slot_input ? (o.copy_input ? "slot (copied by the ingest thread)" : "slot (upper bound)")
                                             : run.input;
  if (!quiet)
    fmt::print("pipeline on {} ({} lane{}): {} frames at {} Hz ({:.0f} s) of {}, input {}...\n", run.backend, lanes.size(),
               lanes.size() == 1 ? "" : "s", total, run.rate_hz, run.seconds, stages::describe(s.shape), input_label);
  std::fflush(stdout);
  std::optional<HostProbe> probe;
  if (o.probe_host && !quiet) probe.emplace();
  runner.start(*input);
  if (sender) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the PULL side connects
    sender->start();
  }
  const auto start = Clock::now();
  auto last_progress = start;
  while (!runner.wait_for(std::chrono::milliseconds(200))) {
    if (Clock::now() - last_progress > std::chrono::seconds(10)) {
      const auto m = metrics.snapshot();
      fmt::print("  {:.0f} s: in {}, done {}, dropped {}, late {}\n", std::chrono::duration<double>(Clock::now() - start).count(),
                 m.frames_in, m.frames_done, m.frames_dropped, m.frames_late);
      std::fflush(stdout);
      last_progress = Clock::now();
    }
  }
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  if (probe) probe->stop();
  const auto m = metrics.snapshot();
  nlohmann::json out = pipeline::to_json(m);
  out["backend"] = run.backend;
  out["lane_count"] = lanes.size();
  out["placers"] = runner.placers();
  out["take_while_computing"] = o.take_while_computing;
  out["lane_choice"] = o.lane_choice;
  out["streaming_stores"] = streaming && run.input != "file";
  out["adaptive"] = o.adaptive;
  out["payload"] = s.name;
  out["shape"] = stages::describe(s.shape);
  out["input_kind"] = run.input;  // "input" is the metrics' object
  out["input_label"] = input_label;
  if (run.input == "zmq") {
    out["zmq_part_bytes"] = o.zmq_part_bytes;
    out["zmq_endpoint"] = sender->endpoint();
  }
  out["offered"] = total;
  out["wall_s"] = wall;
  out["frames_per_s"] = double(m.frames_done) / wall;
  out["rate_hz"] = run.rate_hz;
  out["budget_ms"] = o.budget_ms;
  if (sender) {
    out["sender"] = {{"sent", sender->sent()}, {"sent_late", sender->sent_late()}, {"worst_lag_ms", sender->worst_lag_ms()}};
  }
  if (paced) out["sent"] = paced->sent();
  // The path is checked, not only timed: nothing may be refused on the way in.
  std::uint64_t refused = 0;
  for (const auto& [reason, count] : m.dropped_by_reason)
    if (reason == pipeline::drop_reason::rejected_input || reason == pipeline::drop_reason::shape) refused += count;
  out["refused_on_input"] = refused;

  if (!quiet) {
    fmt::print("  offered {}  in {}  done {}  dropped {}  late {}  ({:.1f} frames/s done over {:.1f} s)\n", total, m.frames_in,
               m.frames_done, m.frames_dropped, m.frames_late, double(m.frames_done) / wall, wall);
    for (const auto& [reason, count] : m.dropped_by_reason) fmt::print("    dropped ({}): {}\n", reason, count);
    fmt::print("  {:<14}{:>9}{:>9}{:>9}{:>10}{:>9}\n", "ms", "p50", "p90", "p99", "p99.9", "max");
    auto row = [](const std::string& name, const pipeline::LatencySummary& l) {
      fmt::print("  {:<14}{:>9.3f}{:>9.3f}{:>9.3f}{:>10.3f}{:>9.3f}\n", name, l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, l.max_ms);
    };
    for (const auto& stage : m.stages) row(stage.name, stage.latency);
    row("end to end", m.end_to_end);
    if (m.lanes.size() > 1) {
      for (const auto& lane : m.lanes) row("lane " + lane.name, lane.latency);
      fmt::print("  lanes took {}; reorder: in order {}, out of order {}, most held {}\n",
                 fmt::join([&] {
                   std::vector<std::string> t;
                   for (const auto& lane : m.lanes) t.push_back(fmt::format("{} {}", lane.name, lane.taken));
                   return t;
                 }(), ", "),
                 m.reorder.in_order, m.reorder.out_of_order, m.reorder.max_held);
    }
    if (m.input.place.count > 0) row("input place", m.input.place);
    if (m.input.lag.count > 0) row("input lag", m.input.lag);
    fmt::print("  input: taken {}, taken late {}, behind {}, sequence gaps {}, placed {} at once", m.input.taken,
               m.input.taken_late, m.input.behind, m.input.sequence_gaps, runner.placers());
    if (sender)
      fmt::print("; sender: sent {}, late {} (worst {:.2f} ms)", sender->sent(), sender->sent_late(), sender->worst_lag_ms());
    fmt::print("\n");
    out["slowest_percent"] = frame_times.slowest_percent();
    if (const auto& slow = out["slowest_percent"]; !slow.is_null())
      fmt::print("  slowest 1 % ({} frames), mean: end to end {:.3f} ms = stages {:.3f} (publish {:.3f}) + outside the "
                 "stages {:.3f} (upload, waits, hand-offs)\n",
                 slow["frames"].get<std::size_t>(), slow["end_to_end_ms"].get<double>(), slow["in_stages_ms"].get<double>(),
                 slow["publish_ms"].get<double>(), slow["outside_stages_ms"].get<double>());
    if (const auto& slow = out["slowest_percent"]; !slow.is_null()) {
      std::vector<std::string> which;
      for (const auto& e : slow["sequence_lane"]) which.push_back(fmt::format("{}@{}", e[0].get<std::uint64_t>(), e[1].get<std::uint32_t>()));
      fmt::print("  slowest frames (sequence@lane): {}\n", fmt::join(which, " "));
    }
    if (probe) {
      out["host_probe"] = probe->summary();
      const auto& p = out["host_probe"];
      fmt::print("  host probe ({:.0f} s spinning on the clock): gaps >= 0.1 / 0.25 / 0.5 / 1 / 2 ms: {} / {} / {} / {} / {}; "
                 "longest {:.3f} ms; {:.1f} ms off the CPU in all\n",
                 p["seconds"].get<double>(), p["gaps_at_least_ms"]["0.1"].get<long>(), p["gaps_at_least_ms"]["0.25"].get<long>(),
                 p["gaps_at_least_ms"]["0.5"].get<long>(), p["gaps_at_least_ms"]["1"].get<long>(),
                 p["gaps_at_least_ms"]["2"].get<long>(), p["longest_ms"].get<double>(), p["stalled_ms"].get<double>());
    }
    std::fflush(stdout);
  }
  if (refused > 0)
    throw std::runtime_error(fmt::format("pipeline bench: {} frames of the {} input were refused on the way in ({})", refused,
                                         run.input, source ? source->last_problem() : std::string("shape")));
  return out;
}

// A rate is sustained when every frame offered was done, none dropped, p99 within the bound, and
// the frames came at the rate: a feed that could not send them that fast (its transport, or a
// receiver that held it back) or a replay that fell behind its schedule does not pass.
bool passes_headroom(const nlohmann::json& run, double p99_bound_ms) {
  const auto offered = run["offered"].get<std::uint64_t>();
  const double span_s = double(offered) / run["rate_hz"].get<double>();
  return run["frames"]["dropped"].get<std::uint64_t>() == 0 && run["end_to_end"]["p99_ms"].get<double>() <= p99_bound_ms &&
         run["frames"]["done"].get<std::uint64_t>() == offered && run["wall_s"].get<double>() <= 1.02 * span_s + 0.1;
}

}  // namespace

nlohmann::json run_pipeline_bench(const Settings& settings, const PipelineBenchOptions& options, linalg::Exec* gpu,
                                  linalg::Exec& cpu) {
  fmt::print("\n== pipeline: {} cells × {} channels at {} Hz, budget {} ms; inputs {}; payloads {}; GPU lanes {}; CPU lanes {} ==\n",
             options.cells, options.channels, options.rate_hz, options.budget_ms, fmt::join(options.inputs, ", "),
             fmt::join(options.payloads, ", "), fmt::join(options.gpu_counts, ","), fmt::join(options.cpu_lane_counts, ","));
  const double scale = settings.quick ? 0.1 : 1.0;
  // GPU lanes: the given Exec is GPU 0; GPUs 1 … N−1 get their own.
  std::vector<std::unique_ptr<linalg::Exec>> more_gpus;
  if (gpu != nullptr) {
    const int most = *std::max_element(options.gpu_counts.begin(), options.gpu_counts.end());
    const int present = int(linalg::probe_devices().devices.size());
    if (most > present)
      throw std::invalid_argument(fmt::format("pipeline bench: --gpus asks for {} GPUs; this host has {}", most, present));
    for (int d = 1; d < most; ++d) more_gpus.push_back(std::make_unique<linalg::Exec>(linalg::Exec::cuda({.device = d})));
  }
  auto gpu_lanes = [&](int n) {
    std::vector<linalg::Exec*> lanes{gpu};
    for (int d = 1; d < n; ++d) lanes.push_back(more_gpus[std::size_t(d - 1)].get());
    return lanes;
  };
  // CPU lanes: one lane is the bench's CPU Exec; several share the host's threads.
  std::map<int, std::vector<linalg::Exec>> cpu_sets;
  auto cpu_lanes = [&](int n) {
    std::vector<linalg::Exec*> lanes;
    if (n == 1) return std::vector<linalg::Exec*>{&cpu};
    auto& set = cpu_sets[n];
    if (set.empty())
      for (int l = 0; l < n; ++l) set.push_back(linalg::Exec::cpu(std::max(1u, unsigned(cpu.pool().size()) / unsigned(n))));
    for (auto& e : set) lanes.push_back(&e);
    return lanes;
  };
  nlohmann::json runs = nlohmann::json::array();
  nlohmann::json headroom = nlohmann::json::array();
  ResultCheck check;
  for (const std::string& payload : options.payloads) {
    auto scenario = make_scenario(payload, options);
    check = ResultCheck{};  // each payload's frames are their own templates
    for (const std::string& input : options.inputs) {
      if (gpu)
        for (const int n : options.gpu_counts)
          runs.push_back(run_one({"cuda", input, options.rate_hz, options.gpu_seconds * scale}, gpu_lanes(n), *scenario, options, check));
      if (settings.cpu)
        for (const int n : options.cpu_lane_counts)
          runs.push_back(run_one({"cpu", input, options.rate_hz, options.cpu_seconds * scale}, cpu_lanes(n), *scenario, options, check));
    }
    // Headroom on the GPU lanes, or on the CPU lanes when there is no GPU.
    const bool on_gpu = gpu != nullptr;
    if ((on_gpu || settings.cpu) && !options.max_rates.empty()) {
      const std::string backend = on_gpu ? "cuda" : "cpu";
      for (const std::string& input : options.inputs) {
        std::optional<double> one_lane_best;
        for (const int n : on_gpu ? options.gpu_counts : options.cpu_lane_counts) {
          const auto lanes = on_gpu ? gpu_lanes(n) : cpu_lanes(n);
          double best = 0;
          nlohmann::json steps = nlohmann::json::array();
          for (double rate : options.max_rates) {
            auto result = run_one({backend, input, rate, options.step_seconds * scale}, lanes, *scenario, options, check, true);
            const bool pass = passes_headroom(result, options.headroom_p99_ms);
            fmt::print("  headroom {} {} on {} lane(s) at {} Hz: done {} of {} in {:.2f} s, dropped {}, p99 {:.3f} ms, input lag "
                       "p99 {:.3f} ms, sender late {}, reorder out of order {}: {}\n",
                       payload, input, n, rate, result["frames"]["done"].get<std::uint64_t>(),
                       result["offered"].get<std::uint64_t>(), result["wall_s"].get<double>(),
                       result["frames"]["dropped"].get<std::uint64_t>(), result["end_to_end"]["p99_ms"].get<double>(),
                       result["input"]["lag"]["p99_ms"].get<double>(),
                       result.contains("sender") ? result["sender"]["sent_late"].get<std::uint64_t>() : 0,
                       result["reorder"]["out_of_order"].get<std::uint64_t>(), pass ? "passes" : "fails");
            std::fflush(stdout);
            steps.push_back(result);
            if (!pass) break;
            best = rate;
          }
          if (n == 1) one_lane_best = best;
          nlohmann::json row = {{"payload", payload}, {"input", input}, {"backend", backend}, {"lane_count", n},
                                {"largest_rate_hz", best}, {"p99_bound_ms", options.headroom_p99_ms}, {"steps", steps}};
          std::string scaling;
          if (one_lane_best && *one_lane_best > 0 && n > 1) {
            row["scaling_over_one_lane"] = best / *one_lane_best;
            scaling = fmt::format(" ({:.2f}× one lane's)", best / *one_lane_best);
          }
          headroom.push_back(row);
          fmt::print("  headroom {} {} on {} {} lane(s): largest rate with no drop and p99 <= {} ms: {} Hz{}\n", payload, input,
                     n, backend, options.headroom_p99_ms, best, scaling);
        }
      }
    }
    fmt::print("  results checked: {} frames against the first of their template, {} differ\n", check.checked, check.mismatched);
    if (check.mismatched > 0) throw std::runtime_error("pipeline bench: " + check.first_mismatch);
  }
  return {{"benchmark", "pipeline"},
          {"cells", options.cells},
          {"channels", options.channels},
          {"snapshots", options.snapshots},
          {"runs", runs},
          {"headroom", headroom}};
}

}  // namespace covflow::bench

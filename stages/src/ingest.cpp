#include "covflow/stages/ingest.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <zmq.hpp>

#include "covflow/pipeline/logging.hpp"
#include "covflow/replay/error.hpp"
#include "covflow/replay/payload_mover.hpp"
#include "covflow/replay/format.hpp"

namespace covflow::stages {
namespace {

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class ScenarioSource final : public FrameSource {
 public:
  ScenarioSource(const config::ScenarioConfig& scenario, std::uint64_t frames, std::int64_t start_time_ns,
                 replay::Clock* pace)
      : generator_(scenario, start_time_ns), frames_(frames), pace_(pace) {}
  std::optional<replay::Frame> next(std::chrono::milliseconds) override {
    if (ended()) return std::nullopt;
    replay::Frame frame = generator_.next();
    timing_ = {};
    if (pace_ != nullptr) {
      if (produced_ == 0) first_due_ = pace_->now();
      const std::chrono::nanoseconds due =
          first_due_ + std::chrono::nanoseconds(frame.header.capture_time_ns - generator_.capture_time_ns(0));
      if (pace_->now() < due) pace_->sleep_until(due);
      timing_ = {.arrival_ns = due.count(), .due_ns = due.count()};
    }
    ++produced_;
    return frame;
  }
  bool ended() const override { return frames_ != 0 && produced_ >= frames_; }
  pipeline::InputTiming last_timing() const override { return timing_; }
  InputShape shape() const override { return scenario_shape(generator_.scenario()); }
  std::string describe() const override {
    const auto& s = generator_.scenario();
    const std::string payload = s.payload == config::ScenarioPayload::covariance
                                    ? fmt::format("covariance ({})", name(s.covariance))
                                    : std::string(name(s.payload));
    return fmt::format("scenario ({} elements ({}), {} sources, {} jammers, {} clutter sectors, {} snapshots × {} cells, "
                       "{} frames of {} at {} Hz, seed {})",
                       s.elements, name(s.geometry), s.sources.size(), s.jammers.size(), s.clutter.size(), s.snapshots,
                       s.cells, payload, name(s.element_type), s.frame_rate_hz, s.seed);
  }

 private:
  ScenarioGenerator generator_;
  std::uint64_t frames_;
  replay::Clock* pace_;
  std::chrono::nanoseconds first_due_{0};
  std::uint64_t produced_ = 0;
  pipeline::InputTiming timing_;
};

// The shape of a file's first valid record (the reader is left at its first record).
InputShape first_record_shape(replay::Reader& reader, const std::string& path, std::uint32_t covariance_snapshots) {
  reader.rewind();
  const auto first = reader.next_header();
  reader.rewind();
  if (!first)
    throw replay::FormatError(fmt::format("{}: no valid record to replay, so no frame shape to size the pipeline for{}", path,
                                          reader.damage().empty() ? std::string() : "; " + reader.damage().front().message()),
                              0);
  const auto& h = first->header;
  if (h.kind == replay::PayloadKind::covariance) return {h.kind, h.element_type, h.rows, h.count, covariance_snapshots};
  return {h.kind, h.element_type, h.rows, h.count, h.cols};
}

class ReplaySource final : public FrameSource {
 public:
  ReplaySource(const std::string& path, const replay::ReplayOptions& options, std::uint32_t covariance_snapshots,
               unsigned threads, std::size_t places)
      : path_(path),
        threads_(threads),
        places_(std::max<std::size_t>(places, 1)),
        options_(options),
        reader_(std::filesystem::path(path)),
        shape_(first_record_shape(reader_, path, covariance_snapshots)),
        replayer_(reader_, options) {}

  std::optional<replay::Frame> next(std::chrono::milliseconds) override {
    if (ended_) return std::nullopt;
    auto frame = replayer_.next();
    if (!frame) ended_ = true;
    timing_ = {};
    if (frame && options_.pace != replay::Pace::fast)
      timing_ = {.arrival_ns = replayer_.last_due().count(), .due_ns = replayer_.last_due().count()};
    note_clamped_gaps();
    return frame;
  }
  bool fills_in_place() const override { return true; }
  void observe_placement(pipeline::PlacementObserver* observer) override {
    placed_ = observer != nullptr ? replay::Placed([observer](std::size_t begin, std::size_t end) { observer->placed(begin, end); })
                                  : replay::Placed{};
  }
  std::optional<replay::FrameHeader> next_into(std::chrono::milliseconds wait, std::span<std::byte> payload) override {
    if (ended_) return std::nullopt;
    const auto delivery = replayer_.next_into(payload, mover(), wait, placed_);
    note_clamped_gaps();
    if (!delivery) {
      if (replayer_.finished()) ended_ = true;
      return std::nullopt;
    }
    const bool paced = options_.pace != replay::Pace::fast;
    timing_ = {.arrival_ns = delivery->due.count(),
               .due_ns = paced ? delivery->due.count() : 0,
               .more_waiting = delivery->next_due,
               .place_ns = delivery->fits ? delivery->read.count() : 0};
    return delivery->header;
  }
  // Several records at once: the ingest thread claims each record's header in file order (the
  // reader's position and damage list are its alone), and the runner's placing threads read the
  // claimed payloads at the same time (Reader::read_payload: positioned reads, each placer with a
  // mover of its own), ahead of their due times; the runner admits each when due.
  std::size_t concurrent_places() const override { return places_; }
  std::optional<pipeline::Claim> claim(std::chrono::milliseconds) override {
    if (ended_) return std::nullopt;
    replay::RecordInfo record;
    const auto delivery = replayer_.claim(&record);
    note_clamped_gaps();
    if (!delivery) {
      if (replayer_.finished()) ended_ = true;
      return std::nullopt;
    }
    const bool paced = options_.pace != replay::Pace::fast;
    return pipeline::Claim{.header = delivery->header,
                           .timing = {.arrival_ns = delivery->due.count(),
                                      .due_ns = paced ? delivery->due.count() : 0,
                                      .more_waiting = delivery->next_due,
                                      .place_ns = 0},
                           .token = record.offset};
  }
  std::string place(const pipeline::Claim& claim, std::span<std::byte> payload,
                    pipeline::PlacementObserver* observer) override {
    replay::PayloadMover* mover = nullptr;
    {
      std::lock_guard lock(movers_mutex_);
      if (free_movers_.empty()) {
        if (movers_.size() >= places_) return "more records placed at once than the input offers";
        const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
        const unsigned whole = threads_ != 0 ? threads_ : std::max(1u, std::min(12u, cores * 3 / 4));
        const unsigned share = std::max(2u, std::min(whole, cores * 3 / 4 / unsigned(places_)));
        movers_.push_back(std::make_unique<replay::PayloadMover>(replay::PayloadMoverOptions{.threads = share}));
        free_movers_.push_back(movers_.back().get());
      }
      mover = free_movers_.back();
      free_movers_.pop_back();
    }
    std::string problem;
    try {
      replay::Placed placed;
      if (observer != nullptr) placed = [observer](std::size_t begin, std::size_t end) { observer->placed(begin, end); };
      problem = reader_.read_payload(replay::RecordInfo{.offset = claim.token, .header = claim.header}, payload, *mover,
                                     placed);
    } catch (const std::exception& e) {
      problem = e.what();
    }
    {
      std::lock_guard lock(movers_mutex_);
      free_movers_.push_back(mover);
    }
    return problem.empty() ? problem : path_ + ": " + problem;
  }
  pipeline::InputTiming last_timing() const override { return timing_; }
  bool ended() const override { return ended_; }
  std::uint64_t rejected() const override { return reader_.damage().size(); }
  std::string last_problem() const override {
    return reader_.damage().empty() ? std::string() : path_ + ": " + reader_.damage().back().message();
  }
  InputShape shape() const override { return shape_; }
  std::string describe() const override { return "file " + path_; }

 private:
  // Made on first use: a replay read through next() (covflow's tools) needs no threads.
  replay::PayloadMover& mover() {
    if (!mover_) mover_ = std::make_unique<replay::PayloadMover>(replay::PayloadMoverOptions{.threads = threads_});
    return *mover_;
  }
  void note_clamped_gaps() {
    if (replayer_.clamped_gaps() == clamped_seen_) return;
    clamped_seen_ = replayer_.clamped_gaps();
    pipeline::logger("ingest")->warn("{}: a gap between capture times longer than {:.3f} s was shortened to it ({} so far)",
                                     path_, double(options_.max_gap.count()) * 1e-9, clamped_seen_);
  }

  std::string path_;
  unsigned threads_;
  std::size_t places_;
  replay::ReplayOptions options_;
  replay::Reader reader_;
  InputShape shape_;
  replay::Replayer replayer_;
  std::unique_ptr<replay::PayloadMover> mover_;
  std::mutex movers_mutex_;  // place(): a mover per record placed at once, made on first use
  std::vector<std::unique_ptr<replay::PayloadMover>> movers_;
  std::vector<replay::PayloadMover*> free_movers_;
  replay::Placed placed_;  // the runner's placement observer, when it has one
  pipeline::InputTiming timing_;
  std::uint64_t clamped_seen_ = 0;
  bool ended_ = false;
};

std::uint64_t record_bytes(const InputShape& s) {
  const std::uint64_t per_cell = s.payload == replay::PayloadKind::covariance ? std::uint64_t(s.elements) * s.elements
                                                                              : std::uint64_t(s.elements) * s.snapshots;
  return replay::format::record_header_bytes + per_cell * s.cells * replay::size_of(s.element_type);
}

// A record comes as one ZeroMQ message: one part, or several parts whose bytes, in order, are the
// record (a sender splits a large record so that ZeroMQ's receiving thread reads it into buffers
// of a few MiB that the allocator reuses, instead of mapping fresh pages for every 47 MB message).
class ZmqSource final : public FrameSource {
 public:
  static constexpr std::size_t kMaxParts = 4096;

  ZmqSource(const std::string& endpoint, config::ZmqPattern pattern, const ZmqInputOptions& options)
      : endpoint_(endpoint), pattern_(pattern), options_(options),
        socket_(context_, pattern == config::ZmqPattern::sub ? zmq::socket_type::sub : zmq::socket_type::pull),
        mover_(replay::PayloadMoverOptions{.threads = options.threads, .streaming_stores = options.streaming_stores}) {
    parts_.resize(64);
    pieces_.reserve(kMaxParts);
    try {
      if (pattern == config::ZmqPattern::sub) socket_.set(zmq::sockopt::subscribe, "");
      socket_.set(zmq::sockopt::linger, 0);
      if (options.receive_hwm > 0) socket_.set(zmq::sockopt::rcvhwm, options.receive_hwm);
      // A part larger than a whole record of the shape cannot belong to one: ZeroMQ refuses it.
      if (options.shape) socket_.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(record_bytes(*options.shape)));
      socket_.connect(endpoint);
    } catch (const zmq::error_t& e) {
      throw std::runtime_error(fmt::format("{}: cannot connect: {}", endpoint, e.what()));
    }
  }

  std::optional<replay::Frame> next(std::chrono::milliseconds wait) override {
    if (!receive(wait)) return std::nullopt;
    try {
      if (part_count_ == 1) return replay::format::decode_record(part(0));
      joined_.resize(message_bytes_);
      std::size_t at = 0;
      for (std::size_t i = 0; i < part_count_; ++i) {
        const auto bytes = part(i);
        if (!bytes.empty()) std::memcpy(joined_.data() + at, bytes.data(), bytes.size());
        at += bytes.size();
      }
      return replay::format::decode_record(joined_);
    } catch (const replay::FormatError& e) {
      refuse(e.what());
      return std::nullopt;
    }
  }

  bool fills_in_place() const override { return true; }
  void observe_placement(pipeline::PlacementObserver* observer) override {
    placed_ = observer != nullptr ? replay::Placed([observer](std::size_t begin, std::size_t end) { observer->placed(begin, end); })
                                  : replay::Placed{};
  }
  std::optional<replay::FrameHeader> next_into(std::chrono::milliseconds wait, std::span<std::byte> payload) override {
    if (!receive(wait)) return std::nullopt;
    namespace format = replay::format;
    if (message_bytes_ < format::record_header_bytes) {
      refuse(fmt::format("offset 0: a record needs at least {} bytes, got {}", format::record_header_bytes, message_bytes_));
      return std::nullopt;
    }
    std::array<std::byte, format::record_header_bytes> header{};
    gather(0, header);
    if (auto problem = format::record_header_problem(header)) {
      refuse("offset 0: " + *problem);
      return std::nullopt;
    }
    const format::RawRecordHeader raw = format::decode_record_header(header);
    const std::uint64_t body_bytes = message_bytes_ - format::record_header_bytes;
    if (raw.payload_bytes != body_bytes) {
      refuse(fmt::format("offset {}: the header says {} payload bytes, {} follow it", format::record_header_bytes,
                         raw.payload_bytes, body_bytes));
      return std::nullopt;
    }
    // A record too large for the slot is refused by its shape, but only once it checks out:
    // damage is still told apart from a feed of the wrong shape.
    const bool fits = body_bytes <= payload.size();
    // The payload's pieces: every part's bytes after the record header, copied in one job.
    pieces_.clear();
    std::uint64_t offset = 0;  // into the record
    for (std::size_t i = 0; i < part_count_; ++i) {
      const auto bytes = part(i);
      const std::uint64_t skip = offset < format::record_header_bytes
                                     ? std::min<std::uint64_t>(bytes.size(), format::record_header_bytes - offset)
                                     : 0;
      if (skip < bytes.size()) pieces_.push_back(bytes.subspan(static_cast<std::size_t>(skip)));
      offset += bytes.size();
    }
    const std::uint32_t seed = format::crc32(std::span(header).first(52));
    const std::uint32_t crc = fits ? mover_.gather_copy(pieces_, payload.first(static_cast<std::size_t>(body_bytes)), seed, placed_)
                                   : mover_.gather_check(pieces_, seed);
    if (crc != raw.record_crc) {
      refuse(fmt::format("offset 0: record CRC mismatch (stored {:08x}, computed {:08x})", raw.record_crc, crc));
      return std::nullopt;
    }
    timing_.place_ns = fits ? steady_now_ns() - timing_.arrival_ns : 0;
    return raw.frame_header();
  }

  pipeline::InputTiming last_timing() const override { return timing_; }
  bool ended() const override { return false; }
  std::uint64_t rejected() const override { return rejected_; }
  std::string last_problem() const override { return last_problem_; }
  InputShape shape() const override {
    if (!options_.shape) throw std::logic_error(fmt::format("zmq input {}: no frame shape was given", endpoint_));
    return *options_.shape;
  }
  std::string describe() const override { return fmt::format("zmq {} {}", name(pattern_), endpoint_); }

 private:
  // Waits up to `wait` for a message and takes all its parts; false when none came, or when it
  // had more parts than a record may be split into (then refused).
  bool receive(std::chrono::milliseconds wait) {
    try {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, wait) == 0) return false;
      part_count_ = 0;
      message_bytes_ = 0;
      bool more = true;
      bool first = true;
      while (more) {
        // ZeroMQ delivers a multipart message whole: once its first part is here, so are the others.
        if (part_count_ == parts_.size()) {
          if (parts_.size() >= kMaxParts) {
            zmq::message_t rest;
            while (more && socket_.recv(rest)) {
              message_bytes_ += rest.size();
              more = rest.more();
            }
            ++received_;
            refuse(fmt::format("more than {} parts: not one record", kMaxParts));
            return false;
          }
          parts_.resize(std::min(kMaxParts, parts_.size() * 2));  // a rare, large split: grows once
        }
        zmq::message_t& piece = parts_[part_count_];
        if (!socket_.recv(piece, first ? zmq::recv_flags::dontwait : zmq::recv_flags::none)) return false;
        first = false;
        ++part_count_;
        message_bytes_ += piece.size();
        more = piece.more();
      }
      timing_ = {.arrival_ns = steady_now_ns()};
      timing_.more_waiting = (socket_.get(zmq::sockopt::events) & ZMQ_POLLIN) != 0;
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) return false;  // a signal: the caller decides whether to stop
      throw std::runtime_error(fmt::format("{}: receive failed: {}", endpoint_, e.what()));
    }
    ++received_;
    return true;
  }
  std::span<const std::byte> part(std::size_t i) const {
    return {static_cast<const std::byte*>(parts_[i].data()), parts_[i].size()};
  }
  // Copies the message's bytes [offset, offset + out.size()) into `out`, across its parts.
  void gather(std::uint64_t offset, std::span<std::byte> out) const {
    std::uint64_t at = 0;
    std::size_t done = 0;
    for (std::size_t i = 0; i < part_count_ && done < out.size(); ++i) {
      const auto bytes = part(i);
      const std::uint64_t end = at + bytes.size();
      if (end > offset + done) {
        const auto from = static_cast<std::size_t>(offset + done - at);
        const std::size_t n = std::min(bytes.size() - from, out.size() - done);
        std::memcpy(out.data() + done, bytes.data() + from, n);
        done += n;
      }
      at = end;
    }
  }
  void refuse(const std::string& problem) {
    ++rejected_;
    last_problem_ = fmt::format("{}: message {} ({} bytes{}): {}", endpoint_, received_, message_bytes_,
                                part_count_ > 1 ? fmt::format(" in {} parts", part_count_) : std::string(), problem);
  }

  std::string endpoint_;
  config::ZmqPattern pattern_;
  ZmqInputOptions options_;
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::vector<zmq::message_t> parts_;  // the latest message's parts, kept until the next receive
  std::size_t part_count_ = 0;
  std::uint64_t message_bytes_ = 0;
  std::vector<std::span<const std::byte>> pieces_;  // next_into(): the payload's bytes in each part
  std::vector<std::byte> joined_;      // next(): a multipart record joined
  replay::PayloadMover mover_;
  replay::Placed placed_;  // the runner's placement observer, when it has one
  pipeline::InputTiming timing_;
  std::uint64_t rejected_ = 0;
  std::uint64_t received_ = 0;
  std::string last_problem_;
};

}  // namespace

std::unique_ptr<FrameSource> scenario_source(const config::ScenarioConfig& scenario, std::uint64_t frames,
                                             std::int64_t start_time_ns, replay::Clock* pace) {
  return std::make_unique<ScenarioSource>(scenario, frames, start_time_ns, pace);
}

std::unique_ptr<FrameSource> replay_source(const std::string& path, const replay::ReplayOptions& options,
                                           std::uint32_t covariance_snapshots, unsigned threads, std::size_t places) {
  return std::make_unique<ReplaySource>(path, options, covariance_snapshots, threads, places);
}

replay::ReplayOptions replay_options(const config::FileIngestConfig& file) {
  replay::ReplayOptions options;
  options.pace = file.pace == config::Pace::recorded ? replay::Pace::recorded
                 : file.pace == config::Pace::fixed  ? replay::Pace::fixed
                                                     : replay::Pace::fast;
  options.rate_hz = file.rate_hz;
  options.speed = file.speed;
  options.loop = file.loop;
  if (file.start_seq) options.start_sequence = std::uint64_t(*file.start_seq);
  if (file.stop_seq) options.stop_sequence = std::uint64_t(*file.stop_seq);
  options.max_gap = std::chrono::nanoseconds(std::llround(file.max_gap_s * 1e9));
  return options;
}

std::unique_ptr<FrameSource> zmq_source(const std::string& endpoint, config::ZmqPattern pattern,
                                        const ZmqInputOptions& options) {
  return std::make_unique<ZmqSource>(endpoint, pattern, options);
}

namespace {

// Counts the receivers whose handshake is done and that have not disconnected since.
class PeerMonitor : public zmq::monitor_t {
 public:
  int connected = 0;

 private:
  void on_event_handshake_succeeded(const zmq_event_t&, const char*) override { ++connected; }
  void on_event_disconnected(const zmq_event_t&, const char*) override { --connected; }
};

}  // namespace

struct ZmqFramePublisher::State {
  zmq::context_t context;
  zmq::socket_t socket;
  PeerMonitor monitor;  // destroyed before the socket it watches
  State(Pattern pattern) : socket(context, pattern == Pattern::pub ? zmq::socket_type::pub : zmq::socket_type::push) {}
};

ZmqFramePublisher::ZmqFramePublisher(const std::string& endpoint, Pattern pattern) : state_(std::make_unique<State>(pattern)) {
  try {
    state_->monitor.init(state_->socket, "inproc://covflow-feed-monitor", ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED);
    state_->socket.set(zmq::sockopt::linger, 1000);
    state_->socket.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error(fmt::format("{}: cannot bind: {}", endpoint, e.what()));
  }
}

ZmqFramePublisher::~ZmqFramePublisher() = default;

void ZmqFramePublisher::send(const replay::Frame& frame, std::size_t part_bytes) {
  send_raw(replay::format::encode_record(frame), part_bytes);
}

void ZmqFramePublisher::send_raw(std::span<const std::byte> bytes, std::size_t part_bytes) {
  const std::size_t part = part_bytes == 0 || part_bytes >= bytes.size() ? bytes.size() : part_bytes;
  if (part == 0) {
    state_->socket.send(zmq::const_buffer(bytes.data(), 0), zmq::send_flags::none);
    return;
  }
  for (std::size_t at = 0; at < bytes.size(); at += part) {
    const std::size_t n = std::min(part, bytes.size() - at);
    state_->socket.send(zmq::const_buffer(bytes.data() + at, n),
                        at + n < bytes.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

std::string ZmqFramePublisher::endpoint() const { return state_->socket.get(zmq::sockopt::last_endpoint); }

int ZmqFramePublisher::peers(std::chrono::milliseconds wait) {
  if (state_->monitor.check_event(int(wait.count()))) {
    while (state_->monitor.check_event(0)) {
    }
  }
  return state_->monitor.connected;
}

void ZmqFramePublisher::set_linger(std::chrono::milliseconds linger) { state_->socket.set(zmq::sockopt::linger, int(linger.count())); }

}  // namespace covflow::stages

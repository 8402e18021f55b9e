#include "covflow/stages/ingest.hpp"

#include <cerrno>

#include <fmt/format.h>
#include <zmq.hpp>

#include "covflow/replay/error.hpp"
#include "covflow/replay/format.hpp"

namespace covflow::stages {
namespace {

class ScenarioSource final : public FrameSource {
 public:
  ScenarioSource(const config::ScenarioConfig& scenario, std::uint64_t frames, std::int64_t start_time_ns,
                 replay::Clock* pace)
      : generator_(scenario, start_time_ns), frames_(frames), pace_(pace) {}
  std::optional<replay::Frame> next(std::chrono::milliseconds) override {
    if (ended()) return std::nullopt;
    replay::Frame frame = generator_.next();
    if (pace_ != nullptr) {
      if (produced_ == 0) first_due_ = pace_->now();
      const std::chrono::nanoseconds due =
          first_due_ + std::chrono::nanoseconds(frame.header.capture_time_ns - generator_.capture_time_ns(0));
      if (pace_->now() < due) pace_->sleep_until(due);
    }
    ++produced_;
    return frame;
  }
  bool ended() const override { return frames_ != 0 && produced_ >= frames_; }
  std::string describe() const override {
    const auto& s = generator_.scenario();
    return fmt::format("scenario ({} elements, {} sources, {} jammers, {} snapshots × {} cells, {} frames of {} at {} Hz, seed {})",
                       s.elements, s.sources.size(), s.jammers.size(), s.snapshots, s.cells, name(s.payload),
                       name(s.element_type), s.frame_rate_hz, s.seed);
  }

 private:
  ScenarioGenerator generator_;
  std::uint64_t frames_;
  replay::Clock* pace_;
  std::chrono::nanoseconds first_due_{0};
  std::uint64_t produced_ = 0;
};

class ReplaySource final : public FrameSource {
 public:
  ReplaySource(const std::string& path, const replay::ReplayOptions& options)
      : path_(path), reader_(std::filesystem::path(path)), replayer_(reader_, options) {}
  std::optional<replay::Frame> next(std::chrono::milliseconds) override {
    if (ended_) return std::nullopt;
    auto frame = replayer_.next();
    if (!frame) ended_ = true;
    return frame;
  }
  bool ended() const override { return ended_; }
  std::uint64_t rejected() const override { return reader_.damage().size(); }
  std::string last_problem() const override {
    return reader_.damage().empty() ? std::string() : path_ + ": " + reader_.damage().back().message();
  }
  std::string describe() const override { return "file " + path_; }

 private:
  std::string path_;
  replay::Reader reader_;
  replay::Replayer replayer_;
  bool ended_ = false;
};

class ZmqSource final : public FrameSource {
 public:
  ZmqSource(const std::string& endpoint, config::ZmqPattern pattern)
      : endpoint_(endpoint), pattern_(pattern),
        socket_(context_, pattern == config::ZmqPattern::sub ? zmq::socket_type::sub : zmq::socket_type::pull) {
    try {
      if (pattern == config::ZmqPattern::sub) socket_.set(zmq::sockopt::subscribe, "");
      socket_.set(zmq::sockopt::linger, 0);
      socket_.connect(endpoint);
    } catch (const zmq::error_t& e) {
      throw std::runtime_error(fmt::format("{}: cannot connect: {}", endpoint, e.what()));
    }
  }
  std::optional<replay::Frame> next(std::chrono::milliseconds wait) override {
    zmq::message_t message;
    try {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, wait) == 0) return std::nullopt;
      if (!socket_.recv(message, zmq::recv_flags::dontwait)) return std::nullopt;
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) return std::nullopt;  // a signal: the caller decides whether to stop
      throw std::runtime_error(fmt::format("{}: receive failed: {}", endpoint_, e.what()));
    }
    ++received_;
    try {
      return replay::format::decode_record({static_cast<const std::byte*>(message.data()), message.size()});
    } catch (const replay::FormatError& e) {
      ++rejected_;
      last_problem_ = fmt::format("{}: message {} ({} bytes): {}", endpoint_, received_, message.size(), e.what());
      return std::nullopt;
    }
  }
  bool ended() const override { return false; }
  std::uint64_t rejected() const override { return rejected_; }
  std::string last_problem() const override { return last_problem_; }
  std::string describe() const override { return fmt::format("zmq {} {}", name(pattern_), endpoint_); }

 private:
  std::string endpoint_;
  config::ZmqPattern pattern_;
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::uint64_t rejected_ = 0;
  std::uint64_t received_ = 0;
  std::string last_problem_;
};

}  // namespace

std::unique_ptr<FrameSource> scenario_source(const config::ScenarioConfig& scenario, std::uint64_t frames,
                                             std::int64_t start_time_ns, replay::Clock* pace) {
  return std::make_unique<ScenarioSource>(scenario, frames, start_time_ns, pace);
}

std::unique_ptr<FrameSource> replay_source(const std::string& path, const replay::ReplayOptions& options) {
  return std::make_unique<ReplaySource>(path, options);
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
  return options;
}

std::unique_ptr<FrameSource> zmq_source(const std::string& endpoint, config::ZmqPattern pattern) {
  return std::make_unique<ZmqSource>(endpoint, pattern);
}

struct ZmqFramePublisher::State {
  zmq::context_t context;
  zmq::socket_t socket;
  State(Pattern pattern) : socket(context, pattern == Pattern::pub ? zmq::socket_type::pub : zmq::socket_type::push) {}
};

ZmqFramePublisher::ZmqFramePublisher(const std::string& endpoint, Pattern pattern) : state_(std::make_unique<State>(pattern)) {
  try {
    state_->socket.set(zmq::sockopt::linger, 1000);
    state_->socket.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error(fmt::format("{}: cannot bind: {}", endpoint, e.what()));
  }
}

ZmqFramePublisher::~ZmqFramePublisher() = default;

void ZmqFramePublisher::send(const replay::Frame& frame) { send_raw(replay::format::encode_record(frame)); }

void ZmqFramePublisher::send_raw(std::span<const std::byte> bytes) {
  state_->socket.send(zmq::const_buffer(bytes.data(), bytes.size()), zmq::send_flags::none);
}

std::string ZmqFramePublisher::endpoint() const { return state_->socket.get(zmq::sockopt::last_endpoint); }

}  // namespace covflow::stages

// Ingest: where frames come from. The scenario generator (the default), a frame file through the
// replayer, or a ZeroMQ feed carrying one frame record per message (docs/frame-format.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "covflow/config/config.hpp"
#include "covflow/pipeline/frame_input.hpp"
#include "covflow/replay/frame.hpp"
#include "covflow/replay/reader.hpp"
#include "covflow/replay/replayer.hpp"
#include "covflow/stages/scenario.hpp"

namespace covflow::stages {

// An ingest source: the pipeline's FrameInput (next, ended, rejected, last_problem, describe; see
// covflow/pipeline/frame_input.hpp). describe() reads "scenario (16 elements, ...)",
// "file recordings/a.cvf", "zmq sub tcp://...".
class FrameSource : public pipeline::FrameInput {};

// Scenario frames 0, 1, ..., `frames` of them (0: without end). Without a clock they come as
// fast as they are generated; with one, frame s is held back until s / frame_rate_hz after the
// first, as a live sensor would deliver it.
std::unique_ptr<FrameSource> scenario_source(const config::ScenarioConfig& scenario, std::uint64_t frames = 0,
                                             std::int64_t start_time_ns = 0, replay::Clock* pace = nullptr);

// A frame file replayed as `options` say. Opening errors throw (replay::IoError, FormatError);
// damage inside the file is skipped and counted.
std::unique_ptr<FrameSource> replay_source(const std::string& path, const replay::ReplayOptions& options);
replay::ReplayOptions replay_options(const config::FileIngestConfig& file);

// A live feed: connects a SUB (subscribed to everything) or PULL socket to `endpoint`. Messages
// that are not exactly one valid record are counted and skipped. Throws std::runtime_error
// naming the endpoint when ZeroMQ refuses it.
std::unique_ptr<FrameSource> zmq_source(const std::string& endpoint, config::ZmqPattern pattern);

// The sending side of a feed: binds a PUB or PUSH socket and sends one record per message.
class ZmqFramePublisher {
 public:
  enum class Pattern { pub, push };
  // `endpoint` may end in ":*" to take a free port; endpoint() then says which.
  ZmqFramePublisher(const std::string& endpoint, Pattern pattern);
  ~ZmqFramePublisher();
  ZmqFramePublisher(const ZmqFramePublisher&) = delete;
  ZmqFramePublisher& operator=(const ZmqFramePublisher&) = delete;
  void send(const replay::Frame& frame);
  // Any bytes, for tests of the receiving side.
  void send_raw(std::span<const std::byte> bytes);
  std::string endpoint() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace covflow::stages

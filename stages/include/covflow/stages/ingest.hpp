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
#include "covflow/stages/processing.hpp"
#include "covflow/stages/scenario.hpp"

namespace covflow::stages {

// An ingest source: the pipeline's FrameInput (next, ended, rejected, last_problem, describe; see
// covflow/pipeline/frame_input.hpp), and the shape of the frames it delivers, which the pipeline
// is sized for. describe() reads "scenario (16 elements, ...)", "file recordings/a.cvf",
// "zmq sub tcp://...".
class FrameSource : public pipeline::FrameInput {
 public:
  virtual InputShape shape() const = 0;
};

// Scenario frames 0, 1, ..., `frames` of them (0: without end). Without a clock they come as
// fast as they are generated; with one, frame s is held back until s / frame_rate_hz after the
// first, as a live sensor would deliver it (its timing then says when it was due).
std::unique_ptr<FrameSource> scenario_source(const config::ScenarioConfig& scenario, std::uint64_t frames = 0,
                                             std::int64_t start_time_ns = 0, replay::Clock* pace = nullptr);

// A frame file replayed as `options` say. The shape is the file's first valid record's (for
// covariance records with K = covariance_snapshots, 0 when not given). Opening errors throw
// (replay::IoError; replay::FormatError also for a file without a single valid record); damage
// inside the file is skipped and counted. The daemon's path is next_into(): each record is read
// straight into the frame slot on several threads with its CRC checked on the way
// (replay::PayloadMover), ahead of its due time, and delivered when due; its timing's arrival is
// the time it was due (a fast replay: when its read began). With `places` > 1 it offers to place
// that many records at once (pipeline::FrameInput::concurrent_places: covflowd passes its lane
// count), each read by a mover of its own with the threads shared out between them.
std::unique_ptr<FrameSource> replay_source(const std::string& path, const replay::ReplayOptions& options,
                                           std::uint32_t covariance_snapshots = 0, unsigned threads = 0,
                                           std::size_t places = 1);
replay::ReplayOptions replay_options(const config::FileIngestConfig& file);

struct ZmqInputOptions {
  // The frames the feed carries: the pipeline's shape, and what ZMQ_MAXMSGSIZE is set from (a
  // message larger than one such record is refused by ZeroMQ, which drops the connection that sent
  // it). Unset: any valid record is taken (covflow record) and no size limit is set.
  std::optional<InputShape> shape;
  // ZMQ_RCVHWM: messages ZeroMQ queues on this side before a PUSH sender is held back (a PUB
  // sender drops them). 0: ZeroMQ's default (1000).
  int receive_hwm = 0;
  // Threads that check and copy each message into its slot (replay::PayloadMoverOptions::threads; 0: automatic).
  unsigned threads = 0;
  // Copy into the slot with non-temporal stores (replay::PayloadMoverOptions::streaming_stores):
  // for slots that only a GPU reads again (covflowd sets it when every lane is a CUDA lane).
  bool streaming_stores = false;
};

// A live feed: connects a SUB (subscribed to everything) or PULL socket to `endpoint`. Messages
// that are not exactly one valid record are counted and skipped. Throws std::runtime_error
// naming the endpoint when ZeroMQ refuses it. The daemon's path is next_into(): the message is
// copied into the frame slot on several threads with its CRC checked on the way; its timing's
// arrival is when the message was received, and more_waiting says another was already queued.
std::unique_ptr<FrameSource> zmq_source(const std::string& endpoint, config::ZmqPattern pattern,
                                        const ZmqInputOptions& options = {});

// The sending side of a feed: binds a PUB or PUSH socket and sends one record per message.
class ZmqFramePublisher {
 public:
  enum class Pattern { pub, push };
  // `endpoint` may end in ":*" to take a free port; endpoint() then says which.
  ZmqFramePublisher(const std::string& endpoint, Pattern pattern);
  ~ZmqFramePublisher();
  ZmqFramePublisher(const ZmqFramePublisher&) = delete;
  ZmqFramePublisher& operator=(const ZmqFramePublisher&) = delete;
  // One record per message; with part_bytes > 0, split into parts of that size (the receiver
  // joins them): a large record then costs ZeroMQ's receiving thread no fresh pages per message.
  void send(const replay::Frame& frame, std::size_t part_bytes = 0);
  // Any bytes, for tests of the receiving side, split the same way.
  void send_raw(std::span<const std::byte> bytes, std::size_t part_bytes = 0);
  std::string endpoint() const;
  // Receivers connected now (their ZeroMQ handshake done, not disconnected since), after waiting
  // up to `wait` for a change. A PUSH socket spreads its messages over these.
  int peers(std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  // How long the destructor keeps trying to deliver messages still queued (default 1 s; -1: until
  // delivered, 0: drop them).
  void set_linger(std::chrono::milliseconds linger);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace covflow::stages

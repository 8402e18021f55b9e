// The publish stage, last of the chain: each frame's results go out on the results PUB socket as
// one [topic "result", JSON] message (docs/zmq.md), and, when pipeline.stages.publish.record_path
// is set, the frame's input record (header and payload as received, not its results) is handed to
// the recorder, which appends it to a frame file on its own thread (stages/recorder.hpp), so a run
// can be replayed later through the same chain. When pipeline.stages.publish.results_path is set,
// each result message is also offered, as sent, to the results recorder, which writes it to a
// JSON Lines file on its own thread (stages/results_recorder.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "covflow/pipeline/endpoints.hpp"
#include "covflow/pipeline/stage.hpp"
#include "covflow/stages/recorder.hpp"
#include "covflow/stages/results_recorder.hpp"

namespace covflow::stages {

struct PublishOptions {
  std::shared_ptr<Recorder> recorder;    // null: nothing recorded
  std::vector<std::string> stage_names;  // the chain, to label each frame's stage records
  pipeline::ResultJsonOptions json;      // optional arrays in the result message
  std::shared_ptr<ResultsRecorder> results;  // null: results not written to disk
};

class PublishStage final : public pipeline::Stage {
 public:
  // `publisher` may be null (record only, or write the results to disk only).
  PublishStage(std::shared_ptr<pipeline::ResultsPublisher> publisher, PublishOptions options);
  ~PublishStage() override;

  std::string_view name() const override { return "publish"; }
  bool needs_host_results() const override { return true; }
  bool in_sequence() const override { return true; }
  void run(pipeline::FrameSlot& frame, linalg::Exec& exec) override;
  // Formats the frame's message (the buffer grows to its size) but sends and records nothing.
  void warm_up(pipeline::FrameSlot& frame, linalg::Exec& exec) override;

  std::uint64_t published() const { return published_; }
  std::uint64_t unsent() const { return unsent_; }  // refused by ZeroMQ (never blocks)

 private:
  std::shared_ptr<pipeline::ResultsPublisher> publisher_;
  PublishOptions options_;
  std::uint64_t published_ = 0, unsent_ = 0;
};

}  // namespace covflow::stages

// The publish stage, last of the chain (DESIGN.md, "Frames and stages"): each frame's results go
// out on the results PUB socket as one [topic "result", JSON] message (docs/zmq.md), and, when
// pipeline.stages.publish.record_path is set, the frame's input record (header and payload as
// received, not its results) is appended to that frame file with replay's writer, so a run can
// be replayed later through the same chain.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "covflow/pipeline/endpoints.hpp"
#include "covflow/pipeline/stage.hpp"
#include "covflow/replay/writer.hpp"

namespace covflow::stages {

struct PublishOptions {
  std::string record_path;               // empty: nothing recorded
  bool overwrite_record = false;         // replace an existing file at record_path (else opening fails)
  std::vector<std::string> stage_names;  // the chain, to label each frame's stage records
  pipeline::ResultJsonOptions json;      // optional arrays in the result message
};

class PublishStage final : public pipeline::Stage {
 public:
  // `publisher` may be null (record only). Opens the record file now: replay::IoError names the
  // path when it cannot be created.
  PublishStage(std::shared_ptr<pipeline::ResultsPublisher> publisher, PublishOptions options);
  ~PublishStage() override;

  std::string_view name() const override { return "publish"; }
  bool needs_host_results() const override { return true; }
  void run(pipeline::FrameSlot& frame, linalg::Exec& exec) override;
  // Formats the frame's message (the buffer grows to its size) but sends and records nothing.
  void warm_up(pipeline::FrameSlot& frame, linalg::Exec& exec) override;

  // Writes the record file's index and closes it (also done by the destructor). Idempotent.
  void close();
  std::uint64_t published() const { return published_; }
  std::uint64_t unsent() const { return unsent_; }  // refused by ZeroMQ (never blocks)
  std::uint64_t recorded() const { return writer_ ? writer_->records() : 0; }

 private:
  std::shared_ptr<pipeline::ResultsPublisher> publisher_;
  PublishOptions options_;
  std::unique_ptr<replay::Writer> writer_;
  std::uint64_t published_ = 0, unsent_ = 0;
};

}  // namespace covflow::stages

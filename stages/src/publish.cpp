#include "covflow/stages/publish.hpp"

#include <string>

#include "covflow/pipeline/logging.hpp"

namespace covflow::stages {

PublishStage::PublishStage(std::shared_ptr<pipeline::ResultsPublisher> publisher, PublishOptions options)
    : publisher_(std::move(publisher)), options_(std::move(options)) {}

PublishStage::~PublishStage() = default;

namespace {

// One message buffer per thread rather than per stage: should several runner lanes share this
// stage, each lane's thread writes into its own string and none waits for another's. The string
// keeps the capacity of the largest message its thread has written, so that after the first few
// frames writing a message allocates nothing.
std::string& message_buffer() {
  thread_local std::string message;
  return message;
}

}  // namespace

void PublishStage::warm_up(pipeline::FrameSlot& frame, linalg::Exec&) {
  // The runner warms the chain on the thread that calls Runner::warm_up, not the lane's: the
  // lane's buffer grows on its first real frame, which costs a few microseconds.
  pipeline::write_result_json(frame, options_.stage_names, options_.json, message_buffer());
}

void PublishStage::run(pipeline::FrameSlot& frame, linalg::Exec&) {
  if (publisher_ || options_.results) {
    std::string& message = message_buffer();
    pipeline::write_result_json(frame, options_.stage_names, options_.json, message);
    if (publisher_) {
      if (publisher_->publish(message))
        ++published_;
      else
        ++unsent_;
    }
    // Never waits for the disk either: a line the results recorder has no room for is left out and
    // counted there.
    if (options_.results) options_.results->offer(ResultsTopic::result, message);
  }
  // Never waits for the disk: a frame the recorder has no room for is left out of the recording
  // and counted there.
  if (options_.recorder) options_.recorder->offer(frame);
}

}  // namespace covflow::stages

#include "covflow/stages/publish.hpp"

#include <string>

#include "covflow/pipeline/logging.hpp"

namespace covflow::stages {

PublishStage::PublishStage(std::shared_ptr<pipeline::ResultsPublisher> publisher, PublishOptions options)
    : publisher_(std::move(publisher)), options_(std::move(options)) {
  if (!options_.record_path.empty())
    writer_ = std::make_unique<replay::Writer>(options_.record_path, replay::WriterOptions{.overwrite = options_.overwrite_record});
}

PublishStage::~PublishStage() {
  try {
    close();
  } catch (const std::exception& e) {
    pipeline::logger("stages")->error("publish: closing {}: {}", options_.record_path, e.what());
  }
}

void PublishStage::close() {
  if (writer_) writer_->close();
}

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
  if (publisher_) {
    std::string& message = message_buffer();
    pipeline::write_result_json(frame, options_.stage_names, options_.json, message);
    if (publisher_->publish(message))
      ++published_;
    else
      ++unsent_;
  }
  // A write error is this frame's stage error (counted, logged by the runner); the next frame
  // tries again.
  if (writer_) writer_->write(frame.header, frame.host.payload.first(std::size_t(frame.header.payload_bytes())));
}

}  // namespace covflow::stages

#include "covflow/stages/publish.hpp"

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

void PublishStage::run(pipeline::FrameSlot& frame, linalg::Exec&) {
  if (publisher_) {
    if (publisher_->publish(pipeline::result_json(frame, options_.stage_names, options_.json)))
      ++published_;
    else
      ++unsent_;
  }
  // A write error is this frame's stage error (counted, logged by the runner); the next frame
  // tries again.
  if (writer_) writer_->write(frame.header, frame.host.payload.first(std::size_t(frame.header.payload_bytes())));
}

}  // namespace covflow::stages

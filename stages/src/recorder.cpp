#include "covflow/stages/recorder.hpp"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "covflow/pipeline/frame_pool.hpp"
#include "covflow/pipeline/logging.hpp"
#include "covflow/replay/error.hpp"

namespace covflow::stages {

std::filesystem::path free_recording_path(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return path;
  const std::filesystem::path stem = path.parent_path() / path.stem();
  const std::string extension = path.extension().string();
  for (int n = 1; n <= 9999; ++n) {
    std::filesystem::path candidate = stem;
    candidate += fmt::format(".{}{}", n, extension);
    if (!std::filesystem::exists(candidate, error)) return candidate;
  }
  throw replay::IoError(fmt::format("{}: cannot record: it and {}.1{} … {}.9999{} all exist", path.string(), stem.string(),
                                    extension, stem.string(), extension));
}

Recorder::Recorder(const RecorderOptions& options, pipeline::Metrics* metrics)
    : options_(options), metrics_(metrics), path_(free_recording_path(options.path)) {
  if (options_.queue == 0) throw std::invalid_argument("Recorder: the queue must hold at least one frame");
  // O_EXCL: a file that appeared since the check above is not overwritten (the open fails).
  writer_ = std::make_unique<replay::Writer>(path_, replay::WriterOptions{.sync_each_record = options_.sync_each_record});
  ring_.assign(options_.queue, nullptr);
  if (path_ != options_.path)
    pipeline::logger("stages")->warn("recording to {}: {} exists and is kept", path_.string(), options_.path.string());
  else
    pipeline::logger("stages")->info("recording to {}", path_.string());
  thread_ = std::thread([this] { write_loop(); });
}

Recorder::~Recorder() { close(); }

bool Recorder::offer(pipeline::FrameSlot& slot) {
  if (slot.pool == nullptr) {  // not a pool's slot: nothing to keep it alive, so written now
    {
      std::lock_guard lock(mutex_);
      if (closing_) return false;
    }
    write_one(slot);
    return true;
  }
  {
    std::lock_guard lock(mutex_);
    if (closing_ || count_ == ring_.size()) {
      ++left_out_;
      if (metrics_) metrics_->recording_left_out();
      return false;
    }
    slot.pool->retain(&slot);
    ring_[(head_ + count_) % ring_.size()] = &slot;
    ++count_;
  }
  wake_.notify_one();
  return true;
}

void Recorder::write_loop() {
  for (;;) {
    pipeline::FrameSlot* slot = nullptr;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return count_ > 0 || closing_; });
      if (count_ == 0) return;  // closing, and nothing left
      slot = ring_[head_];
      head_ = (head_ + 1) % ring_.size();
      --count_;
      writing_ = true;
    }
    write_one(*slot);
    slot->pool->release(slot);
    {
      std::lock_guard lock(mutex_);
      writing_ = false;
    }
    idle_.notify_all();
  }
}

void Recorder::write_one(pipeline::FrameSlot& slot) {
  try {
    writer_->write(slot.header, slot.host.payload.first(static_cast<std::size_t>(slot.header.payload_bytes())));
    std::lock_guard lock(mutex_);
    ++written_;
    if (metrics_) metrics_->frame_recorded();
  } catch (const std::exception& e) {
    std::uint64_t failures = 0;
    {
      std::lock_guard lock(mutex_);
      failures = ++failed_;
      if (metrics_) metrics_->recording_failed();
    }
    // The first failures, then one line each time their count passes a power of two.
    if (failures <= 3 || (failures & (failures - 1)) == 0)
      pipeline::logger("stages")->error("recording frame {} to {} failed ({} so far): {}", slot.sequence, path_.string(),
                                        failures, e.what());
  }
}

void Recorder::flush() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return count_ == 0 && !writing_; });
}

void Recorder::close() {
  {
    std::lock_guard lock(mutex_);
    if (closing_ && !thread_.joinable()) return;
    closing_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();  // the thread writes what was queued before it ends
  try {
    if (writer_) writer_->close();
  } catch (const std::exception& e) {
    pipeline::logger("stages")->error("recording: closing {}: {}", path_.string(), e.what());
  }
}

std::uint64_t Recorder::written() const {
  std::lock_guard lock(mutex_);
  return written_;
}
std::uint64_t Recorder::left_out() const {
  std::lock_guard lock(mutex_);
  return left_out_;
}
std::uint64_t Recorder::failed() const {
  std::lock_guard lock(mutex_);
  return failed_;
}

}  // namespace covflow::stages

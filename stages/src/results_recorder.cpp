#include "covflow/stages/results_recorder.hpp"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "covflow/pipeline/logging.hpp"
#include "covflow/replay/error.hpp"
#include "covflow/stages/recorder.hpp"

namespace covflow::stages {

std::string_view name(ResultsTopic topic) { return topic == ResultsTopic::result ? "result" : "latency"; }

ResultsFile::ResultsFile(std::filesystem::path path, bool overwrite) : path_(std::move(path)) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (overwrite ? O_TRUNC : O_EXCL);
  fd_ = ::open(path_.c_str(), flags, 0644);
  if (fd_ < 0) {
    const int error = errno;
    throw replay::IoError(fmt::format("{}: cannot create: {}{}", path_.string(), std::strerror(error),
                                      error == EEXIST ? " (it exists and is kept)" : ""));
  }
}

ResultsFile::~ResultsFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ResultsFile::append(ResultsTopic topic, std::string_view message) {
  const std::string head = fmt::format(R"({{"topic":"{}","message":)", name(topic));
  constexpr std::string_view tail = "}\n";
  iovec parts[3] = {{const_cast<char*>(head.data()), head.size()},
                    {const_cast<char*>(message.data()), message.size()},
                    {const_cast<char*>(tail.data()), tail.size()}};
  iovec* next = parts;
  int left = 3;
  while (left > 0) {
    const ssize_t n = ::writev(fd_, next, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw replay::IoError(fmt::format("{}: write failed: {}", path_.string(), std::strerror(errno)));
    }
    // The system wrote part of the line: go on from where it stopped.
    std::size_t done = static_cast<std::size_t>(n);
    while (left > 0 && done >= next->iov_len) {
      done -= next->iov_len;
      ++next;
      --left;
    }
    if (left > 0) {
      next->iov_base = static_cast<char*>(next->iov_base) + done;
      next->iov_len -= done;
    }
  }
}

ResultsRecorder::ResultsRecorder(std::unique_ptr<ResultsSink> sink, std::size_t queue_lines, pipeline::Metrics* metrics)
    : sink_(std::move(sink)), metrics_(metrics) {
  if (!sink_) throw std::invalid_argument("ResultsRecorder: no sink");
  if (queue_lines == 0) throw std::invalid_argument("ResultsRecorder: the queue must hold at least one line");
  ring_.resize(queue_lines);
  thread_ = std::thread([this] { write_loop(); });
}

ResultsRecorder::~ResultsRecorder() { close(); }

bool ResultsRecorder::offer(ResultsTopic topic, std::string_view message) {
  {
    std::lock_guard lock(mutex_);
    if (closing_ || count_ == ring_.size()) {
      ++left_out_;
      if (metrics_) metrics_->results_left_out();
      return false;
    }
    Line& line = ring_[(head_ + count_) % ring_.size()];
    line.topic = topic;
    line.message.assign(message);  // within the capacity the string had, once it has grown
    ++count_;
  }
  wake_.notify_one();
  return true;
}

void ResultsRecorder::write_loop() {
  Line line;  // swapped with the queue's: the strings keep their capacity as they go round
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return count_ > 0 || closing_; });
      if (count_ == 0) return;  // closing, and nothing left
      std::swap(line, ring_[head_]);
      head_ = (head_ + 1) % ring_.size();
      --count_;
      writing_ = true;
    }
    bool ok = true;
    std::string error;
    try {
      sink_->append(line.topic, line.message);
    } catch (const std::exception& e) {
      ok = false;
      error = e.what();
    }
    std::uint64_t failures = 0;
    {
      std::lock_guard lock(mutex_);
      if (ok) {
        ++written_;
        if (metrics_) metrics_->results_written();
      } else {
        failures = ++failed_;
        if (metrics_) metrics_->results_failed();
      }
      writing_ = false;
    }
    // Once: the count in the reports (results_recording.failed) tells the rest, and close() sums up.
    if (failures == 1)
      pipeline::logger("stages")->error("results recording: writing a {} line to {} failed; such lines are left out "
                                        "and counted (results_recording.failed): {}",
                                        name(line.topic), sink_->describe(), error);
    idle_.notify_all();
  }
}

void ResultsRecorder::flush() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return count_ == 0 && !writing_; });
}

void ResultsRecorder::close() {
  {
    std::lock_guard lock(mutex_);
    if (closing_ && !thread_.joinable()) return;
    closing_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();  // the thread writes what was queued before it ends
  idle_.notify_all();
  std::lock_guard lock(mutex_);
  if (failed_ > 1)
    pipeline::logger("stages")->error("results recording to {}: {} lines failed in all", sink_->describe(), failed_);
}

std::uint64_t ResultsRecorder::written() const {
  std::lock_guard lock(mutex_);
  return written_;
}
std::uint64_t ResultsRecorder::left_out() const {
  std::lock_guard lock(mutex_);
  return left_out_;
}
std::uint64_t ResultsRecorder::failed() const {
  std::lock_guard lock(mutex_);
  return failed_;
}

std::shared_ptr<ResultsRecorder> open_results_recording(const std::filesystem::path& path, pipeline::Metrics* metrics,
                                                        std::size_t queue_lines) {
  constexpr std::string_view key = "pipeline.stages.publish.results_path";
  std::unique_ptr<ResultsFile> file;
  try {
    // O_EXCL: a file that appeared since free_recording_path looked is not overwritten (the open fails).
    file = std::make_unique<ResultsFile>(free_recording_path(path));
  } catch (const replay::IoError& e) {
    throw replay::IoError(fmt::format("{}: {}", key, e.what()));
  }
  auto log = pipeline::logger("stages");
  if (file->path() != path)
    log->warn("recording results to {}: {} exists and is kept", file->path().string(), path.string());
  else
    log->info("recording results to {}", file->path().string());
  return std::make_shared<ResultsRecorder>(std::move(file), queue_lines, metrics);
}

}  // namespace covflow::stages

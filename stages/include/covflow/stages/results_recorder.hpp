// Results on disk (docs/zmq.md, "Results on disk"): the messages covflowd publishes — each frame's
// `result` and each `latency` report — as JSON Lines, one line per message:
//
//   {"topic":"result","message":{...}}
//   {"topic":"latency","message":{...}}
//
// where `message` is the very JSON text sent on the ZeroMQ socket. Two writers make such files:
// covflowd itself (pipeline.stages.publish.results_path: a ResultsRecorder fed by the publish stage
// and the report publisher) and `covflow record-results`, a subscriber (a ResultsFile written
// directly).
//
// The recorder follows the frame-file recorder (recorder.hpp): the lines wait in a bounded queue
// and a thread of its own writes them, so a slow disk never holds a frame's lane; a line that
// finds the queue full is left out and counted, never waited for. The queue's strings keep their
// capacity as they go round, so once they have grown to the largest message nothing allocates.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "covflow/pipeline/metrics.hpp"

namespace covflow::stages {

enum class ResultsTopic : std::uint8_t { result, latency };
std::string_view name(ResultsTopic topic);

// Where the lines go. append() writes one whole line for `message` (JSON text) or throws
// (replay::IoError for a file) when it cannot.
class ResultsSink {
 public:
  virtual ~ResultsSink() = default;
  virtual void append(ResultsTopic topic, std::string_view message) = 0;
  virtual std::string describe() const = 0;
};

// A JSON Lines file. Each line goes out in one write(2) (retried when the system writes part of
// it), so a reader following the file sees whole lines but for a line cut by a crash.
class ResultsFile final : public ResultsSink {
 public:
  // Creates `path`; throws replay::IoError naming it when it cannot, and when it exists unless
  // `overwrite` (then it is truncated).
  explicit ResultsFile(std::filesystem::path path, bool overwrite = false);
  ~ResultsFile() override;
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;

  void append(ResultsTopic topic, std::string_view message) override;
  std::string describe() const override { return path_.string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// Lines a ResultsRecorder queue holds by default: at 100 frames/s, 2.5 s of results before any is
// left out.
inline constexpr std::size_t kResultsQueueLines = 256;

class ResultsRecorder {
 public:
  // Starts the writing thread. `metrics` (may be null) counts the lines written, left out and
  // failed (MetricsSnapshot::results_recording). Throws std::invalid_argument for an empty queue.
  ResultsRecorder(std::unique_ptr<ResultsSink> sink, std::size_t queue_lines = kResultsQueueLines,
                  pipeline::Metrics* metrics = nullptr);
  // close()
  ~ResultsRecorder();
  ResultsRecorder(const ResultsRecorder&) = delete;
  ResultsRecorder& operator=(const ResultsRecorder&) = delete;

  // Any thread: queues a copy of `message` and returns true, or — the queue full, or closed —
  // counts it left out and returns false. Never waits for the writer.
  bool offer(ResultsTopic topic, std::string_view message);
  // Returns once every line queued so far is written (or has failed).
  void flush();
  // flush(), then the thread ends; later offers are left out. Idempotent.
  void close();

  std::string describe() const { return sink_->describe(); }
  std::uint64_t written() const;
  std::uint64_t left_out() const;
  std::uint64_t failed() const;

 private:
  struct Line {
    ResultsTopic topic = ResultsTopic::result;
    std::string message;
  };
  void write_loop();

  std::unique_ptr<ResultsSink> sink_;
  pipeline::Metrics* metrics_;

  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::vector<Line> ring_;  // queue capacity, allocated once
  std::size_t head_ = 0, count_ = 0;
  bool writing_ = false;  // the thread has a line out of the queue
  bool closing_ = false;
  std::uint64_t written_ = 0, left_out_ = 0, failed_ = 0;
  std::thread thread_;
};

// covflowd's recorder for pipeline.stages.publish.results_path: the file goes to `path`, or, when
// a file exists there, beside it as the frame-file recording does (free_recording_path: run.jsonl
// → run.1.jsonl), so a daemon restarted by its supervisor records again at once. Throws
// replay::IoError naming the key and the path when it cannot be created.
std::shared_ptr<ResultsRecorder> open_results_recording(const std::filesystem::path& path, pipeline::Metrics* metrics,
                                                        std::size_t queue_lines = kResultsQueueLines);

}  // namespace covflow::stages

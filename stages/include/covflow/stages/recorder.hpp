// The recording behind the publish stage (pipeline.stages.publish.record_path): every frame's input
// record — header and payload as received — appended to a frame file on a thread of its own, so
// that writing it (47 MB a frame in the reference scenario, and an fdatasync per record when asked)
// never holds the frame's lane.
//
// The publish stage offers each frame; the recorder takes it when its queue has room, keeping the
// frame's slot (FramePool::retain) until the record is written, then gives it back. When the
// queue is full — the disk cannot keep up — the frame is left out of the recording and counted;
// the pipeline never waits for the disk. Write errors are counted and logged, the frame is left
// out, and recording goes on with the next.
//
// One recorder serves the daemon across reloads: a reload that keeps record_path keeps recording
// into the same file. A file that already exists at record_path is never overwritten: the
// recording goes to the first free "STEM.N.EXT" beside it (run.cvf → run.1.cvf), which the log and
// path() name, so a daemon restarted by its supervisor records again at once.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "covflow/pipeline/frame.hpp"
#include "covflow/pipeline/metrics.hpp"
#include "covflow/replay/writer.hpp"

namespace covflow::stages {

struct RecorderOptions {
  std::filesystem::path path;     // requested; path() says which file is written
  std::size_t queue = 4;          // frames waiting to be written; their slots are kept meanwhile
  bool sync_each_record = false;  // fdatasync after every record
};

class Recorder {
 public:
  // Creates the file (throws replay::IoError naming it when it cannot) and starts the writing
  // thread. `metrics` (may be null) counts what was recorded, left out and failed.
  explicit Recorder(const RecorderOptions& options, pipeline::Metrics* metrics = nullptr);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // On a lane thread: takes the frame when the queue has room (its slot is retained in its pool
  // and released once written) and returns true; otherwise counts it left out and returns false.
  // A slot from no pool (tests) is written before offer() returns.
  bool offer(pipeline::FrameSlot& slot);
  // Returns once every frame taken so far is written and its slot given back.
  void flush();
  // flush(), then the index, and the file closed; later offers are refused. Idempotent; errors are
  // logged.
  void close();

  const std::filesystem::path& requested() const { return options_.path; }
  const std::filesystem::path& path() const { return path_; }
  std::uint64_t written() const;
  std::uint64_t left_out() const;
  std::uint64_t failed() const;

 private:
  void write_loop();
  void write_one(pipeline::FrameSlot& slot);

  RecorderOptions options_;
  pipeline::Metrics* metrics_;
  std::filesystem::path path_;
  std::unique_ptr<replay::Writer> writer_;

  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::vector<pipeline::FrameSlot*> ring_;  // queue capacity, allocated once
  std::size_t head_ = 0, count_ = 0;
  bool writing_ = false;  // the thread has a frame out of the queue
  bool closing_ = false;
  std::uint64_t written_ = 0, left_out_ = 0, failed_ = 0;
  std::thread thread_;
};

// The file a recording asked for `path` goes to: `path` itself when it does not exist, else the
// first of STEM.1.EXT, STEM.2.EXT, ... that does not (throws replay::IoError past 9999).
std::filesystem::path free_recording_path(const std::filesystem::path& path);

}  // namespace covflow::stages

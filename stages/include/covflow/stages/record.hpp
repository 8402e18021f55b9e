// Recording: frames from a source into a frame file, for `covflow synth` and `covflow record`.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include "covflow/replay/writer.hpp"
#include "covflow/stages/ingest.hpp"

namespace covflow::stages {

struct RecordProgress {
  std::uint64_t frames = 0;    // written
  std::uint64_t bytes = 0;     // in the file so far
  std::uint64_t rejected = 0;  // refused by the source as damaged
  double elapsed_s = 0;
};

struct RecordOptions {
  std::uint64_t max_frames = 0;              // 0: until the source ends or `stop` is set
  const std::atomic<bool>* stop = nullptr;   // checked between frames (a signal handler sets it)
  std::chrono::milliseconds poll{100};       // how long one wait on a live source lasts
  std::function<void(const RecordProgress&)> progress = nullptr;  // after every frame, and once at the end
};

// Writes frames until the count is reached, the source ends or `stop` is set. The writer is
// left open: the caller closes it (writing the index).
RecordProgress record_frames(FrameSource& source, replay::Writer& writer, const RecordOptions& options);

}  // namespace covflow::stages

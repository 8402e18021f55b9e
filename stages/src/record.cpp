#include "covflow/stages/record.hpp"

namespace covflow::stages {

RecordProgress record_frames(FrameSource& source, replay::Writer& writer, const RecordOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  RecordProgress progress;
  auto update = [&] {
    progress.bytes = writer.bytes();
    progress.rejected = source.rejected();
    progress.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (options.progress) options.progress(progress);
  };
  while (options.max_frames == 0 || progress.frames < options.max_frames) {
    if (options.stop != nullptr && options.stop->load()) break;
    auto frame = source.next(options.poll);
    if (!frame) {
      if (source.ended()) break;
      continue;
    }
    writer.write(*frame);
    ++progress.frames;
    update();
  }
  update();
  return progress;
}

}  // namespace covflow::stages

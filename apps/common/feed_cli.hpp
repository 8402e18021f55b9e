// `covflow feed`: a frame file's records sent to covflowd workers through a PUSH socket, one
// record per message (docs/scale.md, docs/frame-format.md). ZeroMQ spreads the messages over the
// workers connected to it.
//   covflow feed FILE.cvf --push ENDPOINT [--rate HZ] [--loop] [--frames N] [--part-bytes B] [--workers N] [--drain-ms MS]
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

namespace covflow::cli {

struct FeedRequest {
  std::string file;                          // the frame file
  std::string push;                          // bound; the workers' ingest.zmq.endpoint (pattern pull) connect to it
  std::optional<double> rate_hz;             // frames/s; unset: the file's recorded pace; 0: as fast as the workers take them
  bool loop = false;                         // start the file again after its last record
  std::uint64_t frames = 0;                  // send this many, then end (0: the file once, or forever with loop)
  std::size_t part_bytes = std::size_t(4) << 20;  // split larger records into parts of this size (0: one part)
  int workers = 1;                           // connected workers to wait for before the first frame
  std::int64_t drain_ms = 5000;              // connections kept open after the last frame, for the workers to take it
};

// Sends the records (damaged ones are skipped and named on `err`), with a progress line on
// `err`, until the file (or `frames`) is done or `stop` is set. At the end it keeps the connections
// open for `drain_ms`, then waits up to 60 s for the frames still queued to leave. Exit codes: 0; 4 when the file had
// damage (the valid records were sent) or holds no valid record; 5 when it cannot be opened or
// the endpoint cannot be bound. Throws replay::IoError / replay::FormatError for a file that
// cannot be read or is not a frame file (run_guarded maps them to 5 and 4).
int run_feed(const FeedRequest& request, const std::atomic<bool>& stop, std::ostream& err);

}  // namespace covflow::cli

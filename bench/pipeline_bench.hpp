// covflow-bench pipeline: the daemon's chain (covariance → subspace → publish) under the runner,
// fed at a fixed frame rate for a fixed time through the inputs covflowd itself uses:
//
//   file   a frame file written to a temporary folder, replayed by the daemon's file input (pace
//          fixed at the rate, in a loop): each record read into its frame slot with its CRC checked
//   zmq    a sender thread with its own ZeroMQ context pushes records over tcp://127.0.0.1 at the
//          rate into the daemon's ZeroMQ input (PULL), which checks each and copies it into its slot
//   slot   frames written straight into the pinned frame slots by the bench: no input at all, the
//          upper bound the real inputs are measured against
//
// Latency counts from the moment the whole record is in covflowd's hands (the record due, the
// message received; for slot, the frame written) to the result published. Reference scenario:
// 180 cells × 128 channels at 100 Hz, as covariance frames (cf64, 47 MB) and as snapshot frames
// (256 snapshots, cf32, 47 MB). With --max-rate, each input is also run at rising rates to find
// the largest it sustains with no drop and p99 within the headroom bound. With --gpus N,... (and
// --cpu-lanes N,...) each run is made on that many lanes (GPUs 0 … N−1; CPU lanes sharing the
// host's threads), so that the frame rates of one and of several lanes come from one session.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::bench {

struct PipelineBenchOptions {
  double gpu_seconds = 60;  // how long each GPU run is fed
  double cpu_seconds = 10;  // each CPU run (it cannot keep up; a shorter run shows the same)
  double rate_hz = 100;
  int cells = 180;
  int channels = 128;
  int snapshots = 256;   // per cell in a snapshot frame
  double budget_ms = 10;
  std::vector<std::string> inputs{"file", "zmq"};                // file, zmq, slot
  std::vector<std::string> payloads{"covariance", "snapshots"};  // covariance (cf64), snapshots (cf32)
  unsigned ingest_threads = 0;    // threads that check and place each record (0: covflowd's default)
  std::string zmq_transport = "tcp";                  // tcp (127.0.0.1) or ipc (a socket file in the temporary folder)
  std::size_t zmq_part_bytes = std::size_t(1) << 20;  // the sender splits each record into parts this large (0: one part)
  int file_frames = 30;           // records in the replayed file (and distinct messages the sender cycles)
  std::string dir;                // where the frame files go (empty: the system's temporary folder)
  bool copy_input = false;        // slot input only: hand frames to the ingest thread to copy instead
  // Slot and ZeroMQ inputs: copy into the slot with non-temporal stores (PayloadMoverOptions) —
  // by default when every lane is a CUDA lane, as covflowd does; these force it on or off.
  bool streaming_stores = false;
  bool plain_stores = false;
  std::size_t placers = 0;         // frames placed at once (RunnerOptions::placers; 0: one per lane, 1: the ingest thread alone)
  bool take_while_computing = true;  // RunnerOptions::take_while_computing
  std::string lane_choice = "auto";  // RunnerOptions::lane_choice: auto, claimed or taken
  bool adaptive = false;             // snapshot frames: the adaptive stage runs too (its factors are state across frames)
  bool probe_host = false;        // a thread spinning on the clock reports how long the host takes it off the CPU
  // Headroom: rates tried in turn for each input (stop at the first that fails), each for step_seconds.
  std::vector<double> max_rates;
  double step_seconds = 10;
  double headroom_p99_ms = 10;    // a rate passes with no drop and end-to-end p99 at or below this
  std::vector<int> gpu_counts{1};       // lanes (GPUs 0 … N−1) of each GPU run
  std::vector<int> cpu_lane_counts{1};  // lanes of each CPU run
};

// Throws std::runtime_error when a run lost frames it should not (a record refused as damaged, a
// frame dropped for its shape): the benchmark checks the path it times.
nlohmann::json run_pipeline_bench(const Settings& settings, const PipelineBenchOptions& options, linalg::Exec* gpu,
                                  linalg::Exec& cpu);

}  // namespace covflow::bench

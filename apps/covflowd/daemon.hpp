// The daemon behind covflowd: one pipeline (runner, stages, frame pool) on one Exec, its input,
// and the ZeroMQ endpoints (results, latency reports, control). docs/daemon.md is the user's
// description; docs/zmq.md the messages.
//
// Threads: the caller's (run(): start, signals, reloads, the end), the runner's ingest and lane
// threads, the report thread and the control thread. Control requests that change the pipeline
// (reload, shutdown) are handed to run()'s loop, which alone builds and tears down pipelines.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "covflow/config/config.hpp"
#include "covflow/linalg/exec.hpp"
#include "covflow/pipeline/endpoints.hpp"
#include "covflow/pipeline/metrics.hpp"
#include "covflow/pipeline/runner.hpp"
#include "covflow/stages/ingest.hpp"
#include "covflow/stages/publish.hpp"
#include "covflow/stages/recorder.hpp"
#include "covflow/stages/results_recorder.hpp"
#include "covflowd/service_notifier.hpp"

namespace covflow::daemon {

struct Options {
  std::string config_path;             // empty: the built-in defaults
  std::vector<std::string> overrides;  // --set KEY=VALUE, applied again on every reload
  std::uint64_t frames = 0;            // stop after this many frames from the input (0: no limit)
  bool print_report = true;            // print the final latency report on stdout at the end
};

// Signals, set by the handlers main() installs (async-signal-safe: plain atomics).
struct Signals {
  std::atomic<bool> terminate{false};  // SIGTERM, SIGINT: drain and exit
  std::atomic<bool> hangup{false};     // SIGHUP: reload the configuration
};
Signals& signals();

// The configuration run() starts from and every reload re-reads: the file (or the defaults)
// with the overrides. Throws config::ConfigError.
config::Config load_configuration(const Options& options);

class Daemon final : public pipeline::ControlHandler {
 public:
  // Builds everything (Exec, endpoints, pipeline, input) from `config`; throws on what cannot be
  // built (config::ConfigError, pipeline::EndpointError, linalg::Unavailable, replay::IoError).
  Daemon(Options options, config::Config config);
  ~Daemon() override;

  // Runs until SIGTERM/SIGINT, a shutdown request, or the input's end (a file replayed once, or
  // options.frames taken): every frame taken from the input is finished (a second SIGTERM or
  // SIGINT stops at once, dropping what is queued, counted), the recording is closed with its
  // index, the final report is published (and printed), and 0 is returned. After a device failure
  // (a sticky CUDA error) the same ending comes at once and returns exit_code::device_unavailable,
  // so that a supervisor restarts the process; after a reload that could neither apply nor restore
  // the running pipeline, exit_code::internal_error.
  int run();

  // pipeline::ControlHandler (called on the control thread)
  nlohmann::json status() override;
  nlohmann::json stats() override;
  void reset() override;
  nlohmann::json reload() override;
  void shutdown() override;

  const pipeline::Metrics& metrics() const { return metrics_; }

 private:
  struct Pipeline;
  // What a reload changed, and what it could not change without a restart.
  struct Change {
    std::vector<std::string> applied, needs_restart;
  };

  // The chain (stages, runner, pool) for `config` and frames of `shape`, warmed up, without its
  // input; its publish stage records through `recorder` and writes its results through `results`
  // (null: none).
  std::unique_ptr<Pipeline> build_chain(const config::Config& config, const stages::InputShape& shape,
                                        std::shared_ptr<stages::Recorder> recorder,
                                        std::shared_ptr<stages::ResultsRecorder> results);
  // The recorder `config` asks for: the running one when record_path is unchanged, a new one
  // (its file created now: replay::IoError when it cannot be) when it changed, null for none.
  std::shared_ptr<stages::Recorder> recorder_for(const config::Config& config);
  // Likewise for the results on disk (results_path): the running recorder when the path is
  // unchanged, a new one (replay::IoError naming the key when its file cannot be created), or null.
  std::shared_ptr<stages::ResultsRecorder> results_recorder_for(const config::Config& config);
  // Makes `results` (made for results_path `requested`) the running results recorder — the reports
  // go to it too — and closes the one it replaces.
  void switch_results_recorder(std::shared_ptr<stages::ResultsRecorder> results, const std::string& requested);
  // Stops the running pipeline's input and waits until its frames are done; a second SIGTERM or
  // SIGINT meanwhile drops what is still queued instead (counted) and returns at once.
  void drain_running();
  // The sockets' security from the configuration's key files (config::ConfigError naming the key
  // when a file cannot be read).
  pipeline::EndpointSecurity security(const config::Config& config) const;
  // For the watchdog: frames are leaving the pipeline, or none is held.
  bool making_progress();
  // Gives `p` its input (with what is left of options.frames) and starts it.
  void attach_and_start(Pipeline& p, std::unique_ptr<stages::FrameSource> source);
  std::unique_ptr<stages::FrameSource> make_input(const config::Config& config);
  // Loads the configuration again and, when it is valid, rebuilds what changed (the frames in
  // flight are finished first). Throws config::ConfigError (nothing changed) when it is not.
  Change apply_reload();
  void print_final_report();
  nlohmann::json lane_names() const;
  // Every lane is a CUDA lane: the input's slots are read again by GPUs alone.
  bool all_lanes_cuda() const;
  std::string lanes_description() const;

  Options options_;
  config::Config config_;  // the running configuration (main loop writes, under mutex_)
  std::vector<linalg::Exec> execs_;  // a lane each (device.gpus, device.cpu_lanes)
  pipeline::Metrics metrics_;
  std::shared_ptr<pipeline::ResultsPublisher> results_;
  std::unique_ptr<pipeline::ReportPublisher> reports_;
  std::unique_ptr<pipeline::ControlServer> control_;
  std::unique_ptr<Pipeline> pipeline_;
  std::shared_ptr<stages::Recorder> recorder_;  // pipeline.stages.publish.record_path's, across reloads
  std::shared_ptr<stages::ResultsRecorder> results_recorder_;  // pipeline.stages.publish.results_path's, likewise
  std::string results_requested_;  // the results_path results_recorder_ was made for
  std::unique_ptr<stages::FrameSource> initial_input_;  // made with the first pipeline, started by run()
  std::uint64_t frames_taken_before_ = 0;  // taken by pipelines a reload replaced (for options.frames)
  std::int64_t started_ns_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable reload_done_;
  enum class State { running, reloading, draining } state_ = State::running;
  bool shutdown_requested_ = false;
  std::uint64_t pending_reload_requests_ = 0;  // control requests not yet taken by the main loop
  std::uint64_t reload_generation_ = 0;        // reload attempts finished (SIGHUP or control)
  std::uint64_t reloads_done_ = 0, reload_failures_ = 0;
  std::string last_reload_error_;
  std::optional<nlohmann::json> last_reload_reply_;
  std::string fatal_;  // why the daemon must stop with an error (main loop only)
  ServiceNotifier notifier_;
  // The watchdog's view of progress (main loop only): frames leaving the pipeline, and when that
  // count last moved.
  std::uint64_t frames_out_ = 0;
  std::chrono::steady_clock::time_point moved_at_{};
};

}  // namespace covflow::daemon

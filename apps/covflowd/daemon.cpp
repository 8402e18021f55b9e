#include "covflowd/daemon.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "common/daemon_cli.hpp"
#include "common/exit_codes.hpp"
#include "covflow/config/build_info.hpp"
#include "covflow/config/error.hpp"
#include "covflow/config/load.hpp"
#include "covflow/linalg/device.hpp"
#include "covflow/pipeline/logging.hpp"
#include "covflow/stages/processing.hpp"

namespace covflow::daemon {
namespace {

using nlohmann::json;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The pipeline's lanes: an Exec per GPU of device.gpus (empty: every GPU the host has), or
// device.cpu_lanes CPU Execs sharing the host's hardware threads.
std::vector<linalg::Exec> make_execs(const config::DeviceConfig& device) {
  std::vector<linalg::Exec> execs;
  bool cuda = device.backend == config::Backend::cuda;
  linalg::DeviceProbe probe;
  if (device.backend != config::Backend::cpu) {
    probe = linalg::probe_devices();
    if (device.backend == config::Backend::automatic) cuda = probe.available();
  }
  if (cuda) {
    std::vector<int> ids;
    for (const auto id : device.gpus) ids.push_back(int(id));
    if (ids.empty())
      for (std::size_t i = 0; i < std::max<std::size_t>(probe.devices.size(), 1); ++i) ids.push_back(int(i));
    for (const int id : ids) execs.push_back(linalg::Exec::cuda({.device = id}));  // Unavailable names a missing id
    if (device.cpu_lanes > 1)
      pipeline::logger("covflowd")->warn("device.cpu_lanes {} is not used: the pipeline runs on the GPUs", device.cpu_lanes);
    return execs;
  }
  const auto lanes = static_cast<unsigned>(std::max<std::int64_t>(device.cpu_lanes, 1));
  const unsigned total = device.cpu_threads > 0 ? unsigned(device.cpu_threads) : std::thread::hardware_concurrency();
  const unsigned threads = lanes == 1 && device.cpu_threads == 0 ? 0 : std::max(1u, total / lanes);
  for (unsigned l = 0; l < lanes; ++l) execs.push_back(linalg::Exec::cpu(threads));
  return execs;
}

std::vector<linalg::Exec*> pointers(std::vector<linalg::Exec>& execs) {
  std::vector<linalg::Exec*> out;
  for (auto& e : execs) out.push_back(&e);
  return out;
}

// The daemon's input with --frames applied: ends after `limit` frames (nullopt: never by count).
class LimitedInput final : public pipeline::FrameInput {
 public:
  // The runner counts rejected() from zero: a source reused across a reload reports only what it
  // refused since this wrapper was made, so no refusal is counted twice.
  LimitedInput(stages::FrameSource& source, std::optional<std::uint64_t> limit)
      : source_(source), limit_(limit), rejected_before_(source.rejected()) {}
  std::optional<replay::Frame> next(std::chrono::milliseconds wait) override {
    if (limit_reached()) return std::nullopt;
    auto frame = source_.next(wait);
    if (frame) ++taken_;
    return frame;
  }
  bool ended() const override { return limit_reached() || source_.ended(); }
  std::uint64_t rejected() const override { return source_.rejected() - rejected_before_; }
  std::string last_problem() const override { return source_.last_problem(); }
  std::string describe() const override { return source_.describe(); }
  pipeline::InputTiming last_timing() const override { return source_.last_timing(); }
  void observe_placement(pipeline::PlacementObserver* observer) override { source_.observe_placement(observer); }
  void recycle(replay::Frame&& frame) override { source_.recycle(std::move(frame)); }
  bool fills_in_place() const override { return source_.fills_in_place(); }
  std::optional<replay::FrameHeader> next_into(std::chrono::milliseconds wait, std::span<std::byte> payload) override {
    if (limit_reached()) return std::nullopt;
    auto header = source_.next_into(wait, payload);
    if (header) ++taken_;
    return header;
  }
  std::size_t concurrent_places() const override { return source_.concurrent_places(); }
  std::optional<pipeline::Claim> claim(std::chrono::milliseconds wait) override {
    if (limit_reached()) return std::nullopt;
    auto claimed = source_.claim(wait);
    if (claimed) ++taken_;
    return claimed;
  }
  std::string place(const pipeline::Claim& claimed, std::span<std::byte> payload,
                    pipeline::PlacementObserver* observer) override {
    return source_.place(claimed, payload, observer);
  }
  std::uint64_t taken() const { return taken_.load(); }

 private:
  bool limit_reached() const { return limit_ && taken_.load() >= *limit_; }
  stages::FrameSource& source_;
  std::optional<std::uint64_t> limit_;
  std::uint64_t rejected_before_;
  std::atomic<std::uint64_t> taken_{0};
};

// Frames the recorder may hold waiting for the disk; beyond, frames are left out of the recording.
constexpr std::size_t kRecordQueue = 4;

pipeline::RunnerOptions runner_options(const config::PipelineConfig& p, bool recording) {
  pipeline::RunnerOptions options;
  options.budget_ms = p.budget_ms;
  options.queue_depth = std::size_t(p.queue_depth);
  options.overflow = p.overflow;
  options.kept_slots = recording ? kRecordQueue : 0;
  return options;
}

const std::string& record_path(const config::Config& cfg) {
  static const std::string none;
  return cfg.pipeline.stages.publish.enabled ? cfg.pipeline.stages.publish.record_path : none;
}

const std::string& results_path(const config::Config& cfg) {
  static const std::string none;
  return cfg.pipeline.stages.publish.enabled ? cfg.pipeline.stages.publish.results_path : none;
}

}  // namespace

Signals& signals() {
  static Signals instance;
  return instance;
}

config::Config load_configuration(const Options& options) {
  return options.config_path.empty() ? config::load_defaults(options.overrides)
                                     : config::load_file(options.config_path, options.overrides);
}

struct Daemon::Pipeline {
  std::unique_ptr<stages::FrameSource> source;
  std::unique_ptr<LimitedInput> input;
  std::vector<std::string> stage_names;
  std::unique_ptr<pipeline::Runner> runner;
  stages::PublishStage* publish = nullptr;  // owned by the runner's chain
};

pipeline::EndpointSecurity Daemon::security(const config::Config& cfg) const {
  pipeline::EndpointSecurity security;
  const auto& curve = cfg.daemon.curve;
  const std::string where = options_.config_path.empty() ? std::string("--set") : options_.config_path;
  try {
    if (!curve.secret_key_file.empty()) security.server_secret_key = pipeline::read_curve_secret(curve.secret_key_file).secret_key;
  } catch (const std::exception& e) {
    throw config::ConfigError(where, "daemon.curve.secret_key_file", e.what());
  }
  try {
    if (!curve.clients_file.empty()) {
      security.authorized_clients = pipeline::read_curve_key_list(curve.clients_file);
      if (security.authorized_clients.empty())
        throw std::runtime_error(curve.clients_file + ": no key: no client could connect");
    }
  } catch (const std::exception& e) {
    throw config::ConfigError(where, "daemon.curve.clients_file", e.what());
  }
  return security;
}

Daemon::Daemon(Options options, config::Config config)
    : options_(std::move(options)), config_(std::move(config)), execs_(make_execs(config_.device)) {
  auto log = pipeline::logger("covflowd");
  const auto& d = config_.daemon;
  const pipeline::EndpointSecurity secured = security(config_);
  results_ = std::make_shared<pipeline::ResultsPublisher>(d.results_endpoint, "daemon.results_endpoint", secured);
  reports_ = std::make_unique<pipeline::ReportPublisher>(d.reports_endpoint, metrics_,
                                                         std::chrono::milliseconds(d.report_interval_ms),
                                                         "daemon.reports_endpoint", secured);
  control_ = std::make_unique<pipeline::ControlServer>(d.control_endpoint, *this, "daemon.control_endpoint", secured);
  if (secured.curve())
    log->info("sockets secured with CURVE; {}", secured.authorized_clients.empty()
                                                    ? std::string("any client holding the daemon's public key is admitted")
                                                    : fmt::format("{} client key(s) admitted", secured.authorized_clients.size()));
  initial_input_ = make_input(config_);
  recorder_ = recorder_for(config_);
  switch_results_recorder(results_recorder_for(config_), results_path(config_));
  pipeline_ = build_chain(config_, initial_input_->shape(), recorder_, results_recorder_);
  log->info("covflowd {} on {}; results {}, reports {} every {} ms, control {}", config::build_info().version,
            lanes_description(), results_->endpoint(), reports_->endpoint(), d.report_interval_ms,
            control_->endpoint());
}

Daemon::~Daemon() {
  if (control_) control_->stop();
  if (pipeline_ && pipeline_->runner) pipeline_->runner->stop_now();
  if (recorder_) recorder_->close();  // before the pool whose slots it may hold goes
  pipeline_.reset();
  if (reports_) reports_->stop();
  if (reports_) reports_->set_tap({});
  if (results_recorder_) results_recorder_->close();
}

std::shared_ptr<stages::Recorder> Daemon::recorder_for(const config::Config& cfg) {
  const std::string& path = record_path(cfg);
  if (path.empty()) return nullptr;
  if (recorder_ && recorder_->requested() == std::filesystem::path(path)) return recorder_;
  return std::make_shared<stages::Recorder>(stages::RecorderOptions{.path = path, .queue = kRecordQueue}, &metrics_);
}

std::shared_ptr<stages::ResultsRecorder> Daemon::results_recorder_for(const config::Config& cfg) {
  const std::string& path = results_path(cfg);
  if (path.empty()) return nullptr;
  if (results_recorder_ && results_requested_ == path) return results_recorder_;
  return stages::open_results_recording(path, &metrics_);
}

void Daemon::switch_results_recorder(std::shared_ptr<stages::ResultsRecorder> results, const std::string& requested) {
  if (results == results_recorder_) return;
  if (results)
    reports_->set_tap([results](std::string_view body) { results->offer(stages::ResultsTopic::latency, body); });
  else
    reports_->set_tap({});
  std::shared_ptr<stages::ResultsRecorder> replaced;
  {
    std::lock_guard lock(mutex_);  // status() names the file
    replaced = std::exchange(results_recorder_, std::move(results));
    results_requested_ = results_recorder_ ? requested : std::string();
  }
  if (replaced) replaced->close();
}

std::unique_ptr<stages::FrameSource> Daemon::make_input(const config::Config& cfg) {
  switch (cfg.ingest.source) {
    case config::IngestSource::synth: {
      // Paced at the scenario's frame rate, as a live array would deliver frames.
      // Capture times on the wall clock (ns since the epoch), as a recorder would stamp them.
      const auto epoch = std::chrono::system_clock::now().time_since_epoch();
      return stages::scenario_source(cfg.scenario, 0, std::chrono::duration_cast<std::chrono::nanoseconds>(epoch).count(),
                                     &replay::steady_clock());
    }
    case config::IngestSource::file: {
      auto source = stages::replay_source(cfg.ingest.file.path, stages::replay_options(cfg.ingest.file),
                                          static_cast<std::uint32_t>(cfg.ingest.file.covariance_snapshots.value_or(0)),
                                          static_cast<unsigned>(cfg.ingest.threads),
                                          pipeline::automatic_placers(execs_.size(), !execs_.empty() && execs_.front().is_cuda()));
      if (source->shape().payload == replay::PayloadKind::covariance && !cfg.ingest.file.covariance_snapshots &&
          cfg.pipeline.stages.subspace.enabled)
        throw config::ConfigError(options_.config_path.empty() ? std::string("(built-in defaults)") : options_.config_path,
                                  "ingest.file.covariance_snapshots",
                                  fmt::format("required: {} holds covariance records, which do not say how many "
                                              "snapshots each estimate was formed from (the source count needs it)",
                                              cfg.ingest.file.path));
      return source;
    }
    case config::IngestSource::zmq:
      // ZeroMQ queues about as many messages as the pipeline's queue holds before it holds a PUSH
      // sender back (a PUB sender drops them, which the sequence gaps then show).
      return stages::zmq_source(cfg.ingest.zmq.endpoint, cfg.ingest.zmq.pattern,
                                {.shape = stages::feed_shape(cfg.ingest.zmq.shape),
                                 .receive_hwm = static_cast<int>(cfg.pipeline.queue_depth),
                                 .threads = static_cast<unsigned>(cfg.ingest.threads),
                                 .streaming_stores = all_lanes_cuda()});
  }
  throw std::logic_error("unknown ingest source");
}

bool Daemon::all_lanes_cuda() const {
  return !execs_.empty() && std::all_of(execs_.begin(), execs_.end(), [](const linalg::Exec& e) { return e.is_cuda(); });
}

std::unique_ptr<Daemon::Pipeline> Daemon::build_chain(const config::Config& cfg, const stages::InputShape& shape,
                                                     std::shared_ptr<stages::Recorder> recorder,
                                                     std::shared_ptr<stages::ResultsRecorder> results) {
  auto log = pipeline::logger("covflowd");
  auto p = std::make_unique<Pipeline>();
  auto chain = stages::make_processing_stages(cfg, shape);
  for (const auto& stage : chain) p->stage_names.emplace_back(stage->name());
  if (cfg.pipeline.stages.publish.enabled) {
    p->stage_names.emplace_back("publish");
    stages::PublishOptions publish{.recorder = recorder, .stage_names = p->stage_names, .json = {.spectrum = cfg.pipeline.stages.publish.spectrum,
                                                      .eigenvalues = cfg.pipeline.stages.publish.eigenvalues,
                                                      .weights = cfg.pipeline.stages.publish.weights},
                                             .results = results};
    auto stage = std::make_unique<stages::PublishStage>(results_, std::move(publish));
    p->publish = stage.get();
    chain.push_back(std::move(stage));
  }
  p->runner = std::make_unique<pipeline::Runner>(stages::frame_shape(cfg, shape), std::move(chain), pointers(execs_),
                                                 runner_options(cfg.pipeline, recorder != nullptr), metrics_);
  log->info("frames: {}", stages::describe(shape));
  // Warm start: the first real frames then meet the budget like the rest.
  p->runner->warm_up(stages::warm_up_frame(shape));
  return p;
}

void Daemon::attach_and_start(Pipeline& p, std::unique_ptr<stages::FrameSource> source) {
  p.source = std::move(source);
  std::optional<std::uint64_t> limit;
  if (options_.frames > 0) limit = options_.frames - std::min(options_.frames, frames_taken_before_);
  p.input = std::make_unique<LimitedInput>(*p.source, limit);
  p.runner->start(*p.input);
}

int Daemon::run() {
  auto log = pipeline::logger("covflowd");
  started_ns_ = now_ns();
  reports_->start();
  attach_and_start(*pipeline_, std::move(initial_input_));
  // The control socket answers only once the input is attached: a status or reload request that
  // came in before would read the input wrapper before it exists (UBSan saw a status request do
  // so in the CURVE lifecycle test, the daemon then answering nothing more).
  control_->start();
  log->info("running: input {}; stages {}; budget {} ms; queue {} ({})", pipeline_->input->describe(),
            fmt::join(pipeline_->stage_names, " → "), config_.pipeline.budget_ms, config_.pipeline.queue_depth,
            name(config_.pipeline.overflow));
  notifier_.ready(fmt::format("running: input {}", pipeline_->input->describe()));
  moved_at_ = std::chrono::steady_clock::now();

  const char* why = "";
  while (true) {
    if (signals().terminate.exchange(false)) {
      why = "signal";
      break;
    }
    bool reload_now = signals().hangup.exchange(false);
    {
      std::lock_guard lock(mutex_);
      if (shutdown_requested_) {
        why = "shutdown request";
        break;
      }
      if (pending_reload_requests_ > 0) {
        pending_reload_requests_ = 0;  // one reload answers every request made before it started
        reload_now = true;
      }
    }
    if (reload_now) {
      json reply;
      std::string error;
      notifier_.reloading();
      try {
        const Change change = apply_reload();
        reply = {{"applied", change.applied}, {"needs_restart", change.needs_restart}};
        log->info("configuration reloaded: {}{}", change.applied.empty() ? "nothing changed" : fmt::format("{}", fmt::join(change.applied, ", ")),
                  change.needs_restart.empty() ? "" : fmt::format("; needs a restart to change: {}", fmt::join(change.needs_restart, ", ")));
      } catch (const std::exception& e) {
        error = e.what();
        log->error("reload refused, the running configuration stays: {}", error);
      }
      {
        std::lock_guard lock(mutex_);
        if (error.empty()) {
          ++reloads_done_;
          last_reload_reply_ = reply;
        } else {
          ++reload_failures_;
          last_reload_error_ = error;
          last_reload_reply_.reset();
        }
        ++reload_generation_;
        state_ = State::running;
      }
      reload_done_.notify_all();
      notifier_.ready(error.empty() ? "running: configuration reloaded" : "running: reload refused: " + error);
    }
    if (!fatal_.empty()) {
      why = "the running pipeline could not be restored after a reload";
      break;
    }
    if (const std::string failure = pipeline_->runner->device_failure(); !failure.empty()) {
      fatal_ = "device failure: " + failure;
      why = "device failure";
      break;
    }
    if (pipeline_->runner->finished()) {
      why = "end of input";
      break;
    }
    if (notifier_.watchdog_interval().count() > 0) notifier_.tick(making_progress());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  notifier_.stopping(fmt::format("stopping ({})", why));

  {
    std::lock_guard lock(mutex_);
    state_ = State::draining;
  }
  reload_done_.notify_all();  // a control reload waiting for the main loop is answered now
  log->info("stopping ({}): finishing {} frames in flight", why, pipeline_->runner->in_flight());
  drain_running();
  if (recorder_) recorder_->close();
  control_->stop();
  // The results on disk: every result line is written before the final report is taken, so that
  // its results_recording counts cover them all; the final report is the file's last line.
  reports_->stop_periodic();
  if (results_recorder_) results_recorder_->flush();
  reports_->stop();  // the final report
  if (results_recorder_) results_recorder_->close();
  const auto snapshot = metrics_.snapshot();
  log->info("stopped: frames in {}, done {}, late {}, dropped {}", snapshot.frames_in, snapshot.frames_done,
            snapshot.frames_late, snapshot.frames_dropped);
  if (options_.print_report) print_final_report();
  if (!fatal_.empty()) {
    log->critical("exiting with an error: {}", fatal_);
    return fatal_.starts_with("device failure") ? exit_code::device_unavailable : exit_code::internal_error;
  }
  return 0;
}

bool Daemon::making_progress() {
  const auto now = std::chrono::steady_clock::now();
  const auto m = metrics_.snapshot();
  const std::uint64_t out = m.frames_done + m.frames_dropped;
  if (out != frames_out_ || m.in_flight == 0) {
    frames_out_ = out;
    moved_at_ = now;
    return true;
  }
  // Frames are held and none has left: stuck once that lasts a whole watchdog interval.
  return now - moved_at_ < notifier_.watchdog_interval();
}

void Daemon::drain_running() {
  auto& runner = *pipeline_->runner;
  runner.request_drain();
  while (!runner.wait_for(std::chrono::milliseconds(50))) {
    if (signals().terminate.exchange(false)) {
      pipeline::logger("covflowd")->warn("second stop signal: dropping the {} frames still queued", runner.in_flight());
      runner.stop_now();
      return;
    }
  }
}

void Daemon::print_final_report() {
  json report = pipeline::to_json(metrics_.snapshot());
  report["final"] = true;
  const auto& frames = report["frames"];
  const double uptime = report.value("uptime_s", 0.0);
  std::optional<double> rate;
  if (uptime > 0) rate = frames.value("done", 0.0) / uptime;
  std::fputs("\n", stdout);
  std::fputs(cli::format_report(report, rate, "over the run").c_str(), stdout);
  std::fflush(stdout);
}

Daemon::Change Daemon::apply_reload() {
  auto log = pipeline::logger("covflowd");
  {
    std::lock_guard lock(mutex_);
    state_ = State::reloading;
  }
  config::Config next = load_configuration(options_);  // throws ConfigError: nothing changes
  Change change;
  config::Config running;
  {
    std::lock_guard lock(mutex_);
    running = config_;
  }
  // What cannot change while running: sockets are bound and the Exec is made at start.
  if (next.daemon.results_endpoint != running.daemon.results_endpoint) change.needs_restart.emplace_back("daemon.results_endpoint");
  if (next.daemon.reports_endpoint != running.daemon.reports_endpoint) change.needs_restart.emplace_back("daemon.reports_endpoint");
  if (next.daemon.control_endpoint != running.daemon.control_endpoint) change.needs_restart.emplace_back("daemon.control_endpoint");
  if (next.daemon.report_interval_ms != running.daemon.report_interval_ms) change.needs_restart.emplace_back("daemon.report_interval_ms");
  if (!(next.daemon.curve == running.daemon.curve) || next.daemon.allow_unauthenticated != running.daemon.allow_unauthenticated)
    change.needs_restart.emplace_back("daemon.curve");
  if (!(next.device == running.device)) change.needs_restart.emplace_back("device");
  config::Config effective = next;
  effective.daemon = running.daemon;
  effective.device = running.device;
  if (next.daemon.log_level != running.daemon.log_level) {
    pipeline::set_log_level(std::string(name(next.daemon.log_level)));
    effective.daemon.log_level = next.daemon.log_level;
    change.applied.emplace_back("daemon.log_level");
  }
  const bool input_changed = !(next.ingest == running.ingest) || !(next.scenario == running.scenario);
  const bool pipeline_changed = input_changed || !(next.pipeline == running.pipeline);
  if (pipeline_changed) {
    if (!(next.ingest == running.ingest)) change.applied.emplace_back("ingest");
    if (!(next.scenario == running.scenario)) change.applied.emplace_back("scenario");
    if (!(next.pipeline == running.pipeline)) change.applied.emplace_back("pipeline");
    // A new input is opened before anything stops: a file that cannot be opened or an endpoint
    // ZeroMQ refuses refuses the reload while the old pipeline runs on.
    std::unique_ptr<stages::FrameSource> fresh_input = input_changed ? make_input(effective) : nullptr;
    const stages::InputShape old_shape = pipeline_->source->shape();
    const stages::InputShape new_shape = fresh_input ? fresh_input->shape() : old_shape;
    // Likewise the recording: an unchanged record_path keeps the running recorder (the same file
    // goes on), a new one is created now.
    std::shared_ptr<stages::Recorder> next_recorder = recorder_for(effective);
    std::shared_ptr<stages::ResultsRecorder> next_results;
    try {
      next_results = results_recorder_for(effective);
    } catch (...) {
      if (next_recorder && next_recorder != recorder_) next_recorder->close();
      throw;
    }
    log->info("reload: finishing {} frames in flight before switching pipelines", pipeline_->runner->in_flight());
    drain_running();
    if (recorder_) recorder_->flush();  // it gives back the old pool's slots before the pool goes
    frames_taken_before_ += pipeline_->input->taken();
    // The stages are prepared on the Exec only once the old chain is idle. If the new chain
    // cannot be built, the running configuration's chain is rebuilt on the old input (and the
    // old recorder) and the reload is refused; if even that fails, the daemon stops with an error.
    std::unique_ptr<Pipeline> replacement;
    try {
      replacement = build_chain(effective, new_shape, next_recorder, next_results);
    } catch (const std::exception& e) {
      log->error("reload: the new pipeline cannot be built ({}); restarting the running one", e.what());
      if (next_recorder && next_recorder != recorder_) next_recorder->close();
      if (next_results && next_results != results_recorder_) next_results->close();
      try {
        replacement = build_chain(running, old_shape, recorder_, results_recorder_);
        attach_and_start(*replacement, std::move(pipeline_->source));
      } catch (const std::exception& again) {
        fatal_ = fmt::format("the running pipeline cannot be rebuilt either: {}", again.what());
        log->critical("reload: {}", fatal_);
        throw;
      }
      {
        std::lock_guard lock(mutex_);
        pipeline_ = std::move(replacement);
      }
      throw;
    }
    attach_and_start(*replacement, input_changed ? std::move(fresh_input) : std::move(pipeline_->source));
    if (next_recorder != recorder_) {
      if (recorder_) recorder_->close();
      recorder_ = next_recorder;
      change.applied.emplace_back(recorder_ ? "recording to " + recorder_->path().string() : std::string("recording stopped"));
    }
    if (next_results != results_recorder_) {
      switch_results_recorder(next_results, results_path(effective));
      change.applied.emplace_back(results_recorder_ ? "results to " + results_recorder_->describe()
                                                    : std::string("results recording stopped"));
    }
    std::lock_guard lock(mutex_);
    pipeline_ = std::move(replacement);
  }
  std::lock_guard lock(mutex_);
  config_ = effective;
  return change;
}

json Daemon::lane_names() const {
  json names = json::array();
  for (const auto& lane : metrics_.snapshot().lanes) names.push_back(lane.name);
  return names;
}

std::string Daemon::lanes_description() const {
  const auto snapshot = metrics_.snapshot();
  std::vector<std::string> names;
  for (const auto& lane : snapshot.lanes) names.push_back(lane.name);
  return fmt::format("{} lane{} ({})", names.size(), names.size() == 1 ? "" : "s", fmt::join(names, ", "));
}

json Daemon::status() {
  std::lock_guard lock(mutex_);
  const auto snapshot = metrics_.snapshot();
  const char* state = state_ == State::running ? "running" : state_ == State::reloading ? "reloading" : "draining";
  json stages = json::array();
  for (const auto& name : pipeline_->stage_names) stages.push_back(name);
  return {{"state", state},
          {"version", config::build_info().version},
          {"backend", std::string(name(execs_.front().backend()))},
          {"lanes", lane_names()},
          {"single_lane_reason", pipeline_->runner->single_lane_reason()},
          {"cells_split_reason", pipeline_->runner->cells_split_reason()},
          {"input", pipeline_->input->describe()},
          {"input_ended", pipeline_->runner->input_ended()},
          {"config_file", options_.config_path.empty() ? "(built-in defaults)" : options_.config_path},
          {"uptime_s", double(now_ns() - started_ns_) * 1e-9},
          {"stages", stages},
          {"budget_ms", config_.pipeline.budget_ms},
          {"queue_depth", config_.pipeline.queue_depth},
          {"overflow", std::string(name(config_.pipeline.overflow))},
          {"frames", {{"in", snapshot.frames_in}, {"done", snapshot.frames_done}, {"late", snapshot.frames_late},
                      {"dropped", snapshot.frames_dropped}, {"in_flight", snapshot.in_flight}}},
          {"results_sent", results_->sent()},
          {"results_file", results_recorder_ ? results_recorder_->describe() : std::string()},
          {"reloads", reloads_done_},
          {"reload_failures", reload_failures_},
          {"last_reload_error", last_reload_error_}};
}

json Daemon::stats() { return pipeline::to_json(metrics_.snapshot()); }

void Daemon::reset() { metrics_.reset(); }

json Daemon::reload() {
  std::unique_lock lock(mutex_);
  // The main loop applies it (draining the frames in flight when the chain changes); the answer
  // is that of the first reload that starts after this request.
  const std::uint64_t before = reload_generation_;
  ++pending_reload_requests_;
  if (!reload_done_.wait_for(lock, std::chrono::seconds(60), [&] {
        return reload_generation_ > before || state_ == State::draining;
      })) {
    throw std::runtime_error("reload did not finish within 60 s; see the log");
  }
  if (state_ == State::draining) throw std::runtime_error("covflowd is shutting down");
  if (!last_reload_reply_) throw std::runtime_error(last_reload_error_);
  return *last_reload_reply_;
}

void Daemon::shutdown() {
  std::lock_guard lock(mutex_);
  shutdown_requested_ = true;
}

}  // namespace covflow::daemon

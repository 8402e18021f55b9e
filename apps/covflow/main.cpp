// covflow: the command-line tool. This file only parses arguments and wires modules (exit codes:
// apps/common/exit_codes.hpp, docs/cli.md).
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/collect_cli.hpp"
#include "common/daemon_cli.hpp"
#include "common/feed_cli.hpp"
#include "common/report_cli.hpp"
#include "common/exit_codes.hpp"
#include "common/linalg_cli.hpp"
#include "covflow/config/build_info.hpp"
#include "covflow/pipeline/security.hpp"
#include "covflow/config/load.hpp"
#include "covflow/linalg/device.hpp"
#include "covflow/replay/inspect.hpp"
#include "covflow/replay/writer.hpp"
#include "covflow/stages/ingest.hpp"
#include "covflow/stages/record.hpp"
#include "common/guarded_main.hpp"
#include "common/progress.hpp"

namespace {

using namespace covflow;

std::atomic<bool> stop_requested{false};
extern "C" void on_signal(int) {
  stop_requested = true;
  cli::request_stop();
}

int run_version() {
  const auto& info = config::build_info();
  fmt::print("covflow {} ({}; CUDA architectures: {})\n", info.version, info.build_type, info.cuda_architectures);
  return exit_code::ok;
}

int run_devices() {
  using namespace covflow::linalg;
  const DeviceProbe probe = probe_devices();
  if (!probe.available()) {
    fmt::print("no GPU: {}\nthe CPU backend is available\n", probe.reason);
    return exit_code::ok;
  }
  for (const DeviceInfo& d : probe.devices)
    fmt::print("cuda:{}  {}  sm_{}{}  {} SMs  {:.1f} GiB  L2 {} MiB  smem/block {} KiB\n", d.index, d.name, d.cc_major,
               d.cc_minor, d.multiprocessors, static_cast<double>(d.global_memory) / (1 << 30), d.l2_cache >> 20,
               d.shared_memory_per_block >> 10);
  return exit_code::ok;
}

// Options shared by the subcommands that read the daemon's configuration.
struct ConfigOptions {
  std::string file;
  std::vector<std::string> overrides;

  void add_to(CLI::App* command) {
    // No CLI11 existence check: a missing file is a configuration error (exit 3) like any other.
    command->add_option("--config", file, "YAML configuration (docs/config.md); default: the built-in demo");
    command->add_option("--set", overrides, "Override a configuration key, KEY=VALUE (repeatable)");
  }
  config::Config load() const { return file.empty() ? config::load_defaults(overrides) : config::load_file(file, overrides); }
};

std::string megabytes(std::uint64_t bytes) { return fmt::format("{:.1f} MB", double(bytes) / 1e6); }

// The recorder's loop with a progress line; shared by synth and record.
int record(stages::FrameSource& source, const std::string& out, const replay::WriterOptions& writer_options,
           std::uint64_t frames, const char* verb) {
  replay::Writer writer(out, writer_options);
  apps::ProgressLine line;
  stages::RecordOptions options;
  options.max_frames = frames;
  options.stop = &stop_requested;
  options.progress = [&](const stages::RecordProgress& p) {
    const std::string of = frames == 0 ? std::string() : fmt::format("/{}", frames);
    line.update(fmt::format("{} {}{} frames, {}, {:.1f} s, {:.1f} frames/s{}", verb, p.frames, of, megabytes(p.bytes), p.elapsed_s,
                            p.elapsed_s > 0 ? double(p.frames) / p.elapsed_s : 0.0,
                            p.rejected ? fmt::format(", {} rejected", p.rejected) : std::string()));
  };
  const stages::RecordProgress done = stages::record_frames(source, writer, options);
  writer.close();
  line.finish(fmt::format("{}: {} frames, {} in {:.2f} s from {}{}{}", out, done.frames, megabytes(writer.bytes()), done.elapsed_s,
                          source.describe(), done.rejected ? fmt::format("; {} messages rejected", done.rejected) : std::string(),
                          stop_requested ? " (interrupted)" : ""));
  if (done.rejected) std::fprintf(stderr, "covflow: last rejected: %s\n", source.last_problem().c_str());
  return exit_code::ok;
}

std::string utc(std::int64_t unix_ns) {
  if (unix_ns == 0) return "unknown";
  const std::time_t seconds = std::time_t(unix_ns / 1'000'000'000);
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

int run_inspect(const std::string& path, bool verify, bool list_records) {
  replay::Reader reader{std::filesystem::path(path)};
  const replay::ScanReport r = replay::scan(reader, {.check_payloads = verify, .keep_records = list_records});
  fmt::print("{}\n", path);
  fmt::print("  format version {}, created {}, {} bytes\n", r.file_header.version, utc(r.file_header.created_unix_ns), r.file_size);
  if (r.records == 0) {
    fmt::print("  records: none\n");
  } else {
    fmt::print("  records: {} (sequences {} .. {}; {} gaps, {} out of order)\n", r.records, *r.first_sequence, *r.last_sequence,
               r.sequence_gaps, r.out_of_order);
    const double span_s = double(r.last_capture_ns - r.first_capture_ns) / 1e9;
    fmt::print("  capture times: {:.6f} s .. {:.6f} s (span {:.3f} s{})\n", double(r.first_capture_ns) / 1e9,
               double(r.last_capture_ns) / 1e9, span_s,
               r.records > 1 ? fmt::format(", mean interval {:.3f} ms", span_s * 1e3 / double(r.records - 1)) : std::string());
    fmt::print("  payloads: {} bytes\n", r.payload_bytes);
    for (const auto& [shape, count] : r.shapes) fmt::print("    {} × {}\n", count, shape);
  }
  fmt::print("  index: {}\n", r.index_present ? "present" : "absent (records found by scanning)");
  fmt::print("  CRCs: {}\n", verify ? "headers and payloads checked" : "headers checked (payloads with --verify)");
  if (list_records) {
    fmt::print("\n  {:>12}  {:>10}  {:>20}  {:<11} {:<5} {:>16}  {:>10}\n", "offset", "sequence", "capture_ns", "kind", "type",
               "dimensions", "bytes");
    for (const replay::RecordInfo& info : r.record_list) {
      const auto& h = info.header;
      fmt::print("  {:>12}  {:>10}  {:>20}  {:<11} {:<5} {:>16}  {:>10}\n", info.offset, h.sequence, h.capture_time_ns,
                 name(h.kind), name(h.element_type), fmt::format("{}×{}×{}", h.rows, h.cols, h.count), h.payload_bytes());
    }
  }
  if (r.whole()) {
    fmt::print("  damage: none\n");
    return exit_code::ok;
  }
  fmt::print("  damage: {} place{} (on stderr)\n", r.damage.size(), r.damage.size() == 1 ? "" : "s");
  for (const replay::Damage& d : r.damage)
    std::fprintf(stderr, "covflow: %s: %s: %s\n", path.c_str(), std::string(name(d.kind)).c_str(), d.message().c_str());
  return exit_code::input_damaged;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"covflow: record, replay, inspect and compute on radar frames"};
  app.require_subcommand(1);
  app.footer("Exit codes: 0 ok, 1 internal error, 2 usage, 3 configuration, 4 damaged data, 5 I/O, 6 device unavailable, 7 some matrices failed, 8 covflowd did not answer, 9 a package is missing.");

  const auto& build = config::build_info();
  app.set_version_flag("--version", fmt::format("covflow {} ({}; CUDA architectures: {})", build.version, build.build_type,
                                                build.cuda_architectures));
  auto* version = app.add_subcommand("version", "Print the version and build configuration");
  auto* devices = app.add_subcommand("devices", "List the CUDA devices covflow can use");
  auto* keygen = app.add_subcommand("keygen", "Make a CURVE key pair for covflowd's sockets: NAME.secret (mode 0600) and NAME.public");
  std::string keygen_name;
  keygen->add_option("name", keygen_name, "NAME: the files' path without .secret/.public")->required();
  covflow::cli::LinalgCommands linalg(app);

  auto* synth = app.add_subcommand("synth", "Write frames of the built-in scenario to a frame file");
  ConfigOptions synth_config;
  std::string synth_out;
  std::uint64_t synth_frames = 100;
  bool synth_force = false;
  synth->add_option("--out,-o", synth_out, "Frame file to write")->required();
  synth->add_option("--frames,-n", synth_frames, "Frames to write")->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 40));
  synth->add_flag("--force", synth_force, "Overwrite the output file if it exists");
  synth_config.add_to(synth);
  synth->footer("The scenario is the configuration's `scenario` section, e.g. --set scenario.payload=covariance.");

  auto* inspect = app.add_subcommand("inspect", "Summarise a frame file; --verify checks every record");
  std::string inspect_path;
  bool inspect_verify = false, inspect_records = false;
  inspect->add_option("file", inspect_path, "Frame file")->required();
  inspect->add_flag("--verify", inspect_verify, "Read every payload and check its CRC; exit 4 on any damage");
  inspect->add_flag("--records", inspect_records, "List every record");

  auto* record_command = app.add_subcommand("record", "Record frames from the scenario generator or a ZeroMQ feed");
  ConfigOptions record_config;
  std::string record_out, record_endpoint, record_pattern;
  bool record_synth = false, record_force = false, record_sync = false;
  std::uint64_t record_frames = 0;
  auto* from_synth = record_command->add_flag("--synth", record_synth, "Record the scenario generator, paced at its frame rate");
  auto* from_feed = record_command->add_option("--connect", record_endpoint, "Record a ZeroMQ feed from this endpoint");
  from_synth->excludes(from_feed);
  record_command->add_option("--pattern", record_pattern, "Socket for --connect: sub or pull (default: ingest.zmq.pattern)")
      ->check(CLI::IsMember({"sub", "pull"}));
  record_command->add_option("--out,-o", record_out, "Frame file to write")->required();
  record_command->add_option("--frames,-n", record_frames, "Frames to record (default: until interrupted)");
  record_command->add_flag("--force", record_force, "Overwrite the output file if it exists");
  record_command->add_flag("--sync", record_sync, "fdatasync every record (survives a power cut; slower)");
  record_config.add_to(record_command);

  auto* stats = app.add_subcommand("stats", "Show covflowd's latency reports as a live table");
  cli::StatsRequest stats_request;
  stats->add_option("--connect,-c", stats_request.endpoint, "covflowd's daemon.reports_endpoint")->capture_default_str();
  stats->add_option("--curve-server-key", stats_request.curve.server_key_file,
                    "The daemon's CURVE public key file, when its sockets require CURVE");
  stats->add_option("--curve-client-key", stats_request.curve.client_key_file,
                    "This client's CURVE secret key file (default: a key made for this run)");
  stats->add_option("--count,-n", stats_request.count, "Reports to show, then exit (default: until interrupted)");
  stats->add_option("--timeout-ms", stats_request.timeout_ms, "Give up (exit 8) when no report comes for this long (0: wait forever)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  stats->add_flag("--json", stats_request.json, "Print each report's JSON on one line instead of the table");
  bool stats_append = false;
  stats->add_flag("--append", stats_append, "Print each table below the last even on a terminal (default: redraw in place there)");

  auto* record_results = app.add_subcommand(
      "record-results", "Write covflowd's results (and latency reports) to a JSON Lines file, as results_path does");
  cli::RecordResultsRequest record_results_request;
  record_results->add_option("--connect,-c", record_results_request.endpoint, "covflowd's daemon.results_endpoint")
      ->capture_default_str();
  record_results->add_option("--reports", record_results_request.reports_endpoint,
                             "covflowd's daemon.reports_endpoint: record the latency reports too (and end with the final one)");
  record_results->add_option("--out,-o", record_results_request.out, "JSON Lines file to write")->required();
  record_results->add_flag("--force", record_results_request.overwrite, "Overwrite the output file if it exists");
  auto* results_frames = record_results->add_option("--frames,-n", record_results_request.frames,
                                                    "Results to write, then exit (default: until interrupted)")
                             ->check(CLI::PositiveNumber);
  record_results->add_option("--seconds", record_results_request.seconds, "Record for this long, then exit")
      ->check(CLI::PositiveNumber)
      ->excludes(results_frames);
  record_results->add_option("--curve-server-key", record_results_request.curve.server_key_file,
                             "The daemon's CURVE public key file, when its sockets require CURVE");
  record_results->add_option("--curve-client-key", record_results_request.curve.client_key_file,
                             "This client's CURVE secret key file (default: a key made for this run)");

  auto* report = app.add_subcommand("report", "Write the HTML report of a run from its results file (docs/report.md)");
  cli::ReportRequest report_request;
  ConfigOptions report_config;
  std::uint64_t report_frame = 0;
  report->add_option("results", report_request.results, "Results file: JSON Lines of result and latency messages")->required();
  report->add_option("--out,-o", report_request.out, "HTML page to write (replaced if it exists)")->required();
  report->add_option("--frames", report_request.frames,
                     "The run's input frame file (.cvf): its record headers tell which input frames got no result");
  auto* report_frame_option =
      report->add_option("--frame", report_frame, "Sequence number of the frame whose spectrum and beam pattern are drawn "
                                                  "(default: the last that has them)");
  report_config.add_to(report);
  report->footer("--config/--set: the run's configuration, as covflowd was given it (budget, angle grid, looks, the "
                 "scenario's truth); without either the report draws no truth. Needs python3-matplotlib.");

  auto* ctl = app.add_subcommand("ctl", "Send a control request to covflowd and print its reply");
  cli::CtlRequest ctl_request;
  ctl->add_option("command", ctl_request.command, "status | stats | reset | reload | shutdown")
      ->required()->check(CLI::IsMember({"status", "stats", "reset", "reload", "shutdown"}));
  ctl->add_option("--connect,-c", ctl_request.endpoint, "covflowd's daemon.control_endpoint")->capture_default_str();
  ctl->add_option("--curve-server-key", ctl_request.curve.server_key_file,
                  "The daemon's CURVE public key file, when its sockets require CURVE");
  ctl->add_option("--curve-client-key", ctl_request.curve.client_key_file,
                  "This client's CURVE secret key file (default: a key made for this run)");
  ctl->add_option("--timeout-ms", ctl_request.timeout_ms,
                  "Give up (exit 8) when no reply comes for this long (default: 70000 for reload, which waits for the "
                  "frames in flight and a rebuilt pipeline, 5000 for the others)")
      ->check(CLI::PositiveNumber);

  auto* feed = app.add_subcommand("feed", "Send a frame file's records to covflowd workers through a PUSH socket (docs/scale.md)");
  cli::FeedRequest feed_request;
  double feed_rate = 0;
  feed->add_option("file", feed_request.file, "Frame file (.cvf)")->required();
  feed->add_option("--push", feed_request.push, "Endpoint to bind the PUSH socket to; the workers' ingest.zmq.endpoint")
      ->required();
  auto* feed_rate_option = feed->add_option("--rate", feed_rate, "Frames/s (default: the file's recorded pace; 0: as fast as "
                                                                "the workers take them)")
                               ->check(CLI::NonNegativeNumber);
  feed->add_flag("--loop", feed_request.loop, "Start the file again after its last record");
  feed->add_option("--frames,-n", feed_request.frames, "Frames to send, then exit (default: the file once; with --loop, "
                                                      "until interrupted)");
  feed->add_option("--part-bytes", feed_request.part_bytes, "Send a larger record as parts of this many bytes (0: one part)")
      ->capture_default_str();
  feed->add_option("--workers", feed_request.workers, "Wait until this many workers are connected before the first frame")
      ->capture_default_str()->check(CLI::PositiveNumber);
  feed->add_option("--drain-ms", feed_request.drain_ms, "After the last frame, keep the connections open this long for the "
                                                        "workers to take their last frames")
      ->capture_default_str()->check(CLI::NonNegativeNumber);

  auto* collect = app.add_subcommand("collect", "Take several workers' results, put them in sequence order and publish them "
                                                "on one PUB socket (docs/scale.md)");
  cli::CollectRequest collect_request;
  std::uint64_t collect_first = 0;
  collect->add_option("--connect,-c", collect_request.connect, "A worker's daemon.results_endpoint (repeatable)")->required();
  collect->add_option("--publish", collect_request.publish, "Endpoint to bind the ordered results' PUB socket to")->required();
  collect->add_option("--reports-publish", collect_request.reports_publish,
                      "Endpoint to bind a PUB socket to for the collector's counters (topic collect)");
  collect->add_option("--window", collect_request.window, "Results held behind a missing sequence before it is given up")
      ->capture_default_str()->check(CLI::Range(std::size_t(1), std::size_t(1) << 20));
  collect->add_option("--wait-ms", collect_request.wait_ms, "Longest a result waits for a missing sequence before it is given up")
      ->capture_default_str()->check(CLI::PositiveNumber);
  auto* collect_first_option = collect->add_option("--first-seq", collect_first,
                                                   "The first sequence (default: the smallest of the first results)");
  collect->add_option("--frames,-n", collect_request.frames,
                      "Sequences to account for (published or missing), then exit (default: until interrupted)");
  collect->add_option("--interval-ms", collect_request.interval_ms, "Counters on stderr (and --reports-publish) this often")
      ->capture_default_str()->check(CLI::PositiveNumber);

  if (const int code = apps::parse_command_line(app, argc, argv); code >= 0) return code;
  if (feed_rate_option->count()) feed_request.rate_hz = feed_rate;
  if (collect_first_option->count()) collect_request.first_seq = collect_first;
  if (record_command->parsed() && record_synth == !record_endpoint.empty()) {
    std::fprintf(stderr, "covflow record: give exactly one of --synth and --connect ENDPOINT\nRun with --help for more information.\n");
    return exit_code::usage;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  return apps::run_guarded("covflow", [&]() -> int {
    if (version->parsed()) return run_version();
    if (devices->parsed()) return run_devices();
    if (keygen->parsed()) {
      try {
        pipeline::write_curve_keys(keygen_name, pipeline::generate_curve_keys());
      } catch (const std::runtime_error& e) {
        std::fprintf(stderr, "covflow keygen: error: %s\n", e.what());
        return exit_code::io;
      }
      fmt::print("{0}.secret: the secret key (keep it to its owner); {0}.public: the public key to hand out\n", keygen_name);
      return exit_code::ok;
    }
    if (linalg.parsed()) return linalg.run(std::cout, std::cerr);
    if (stats->parsed()) {
      stats_request.live = !stats_append && !stats_request.json && isatty(STDOUT_FILENO);
      return cli::run_stats(stats_request, std::cout, std::cerr);
    }
    if (ctl->parsed()) return cli::run_ctl(ctl_request, std::cout, std::cerr);
    if (report->parsed()) {
      if (report_frame_option->count()) report_request.frame = report_frame;
      if (!report_config.file.empty() || !report_config.overrides.empty()) {
        report_request.config_yaml = config::to_yaml(report_config.load());
        report_request.config_label = report_config.file.empty() ? "the built-in configuration" : report_config.file;
        for (std::size_t i = 0; i < report_config.overrides.size(); ++i)
          report_request.config_label += (i == 0 ? " with --set " : ", ") + report_config.overrides[i];
      }
      return cli::run_report(report_request, std::cerr);
    }
    if (record_results->parsed()) return cli::run_record_results(record_results_request, std::cerr);
    if (feed->parsed()) return cli::run_feed(feed_request, stop_requested, std::cerr);
    if (collect->parsed()) return cli::run_collect(collect_request, stop_requested, std::cout, std::cerr);
    if (synth->parsed()) {
      const config::Config cfg = synth_config.load();
      auto source = stages::scenario_source(cfg.scenario, synth_frames);
      return record(*source, synth_out, {.overwrite = synth_force}, synth_frames, "synth");
    }
    if (inspect->parsed()) return run_inspect(inspect_path, inspect_verify, inspect_records);
    if (record_command->parsed()) {
      const config::Config cfg = record_config.load();
      const replay::WriterOptions writer{.overwrite = record_force, .sync_each_record = record_sync};
      std::unique_ptr<stages::FrameSource> source;
      if (record_synth) {
        const auto now = std::chrono::system_clock::now().time_since_epoch();
        source = stages::scenario_source(cfg.scenario, record_frames,
                                         std::chrono::duration_cast<std::chrono::nanoseconds>(now).count(), &replay::steady_clock());
      } else {
        const auto pattern = record_pattern.empty() ? cfg.ingest.zmq.pattern
                             : record_pattern == "sub" ? config::ZmqPattern::sub
                                                       : config::ZmqPattern::pull;
        source = stages::zmq_source(record_endpoint, pattern);
      }
      return record(*source, record_out, writer, record_frames, "recorded");
    }
    return exit_code::usage;
  });
}

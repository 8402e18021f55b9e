// `covflow stats`, `covflow ctl` and `covflow record-results`: the user's side of covflowd's
// sockets (docs/zmq.md has the messages).
//   covflow stats [--connect ENDPOINT] [--count N] [--timeout-ms MS] [--json]
//   covflow ctl COMMAND [--connect ENDPOINT] [--timeout-ms MS]
//   covflow record-results --connect ENDPOINT [--reports ENDPOINT] --out FILE [--frames N | --seconds S]
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace covflow::cli {

// CURVE, for a daemon whose sockets require it (docs/zmq.md, "Security").
struct CurveClient {
  std::string server_key_file;  // the daemon's public key; empty: no CURVE
  std::string client_key_file;  // this client's secret key; empty: a key made for this run
};

struct StatsRequest {
  std::string endpoint = "tcp://127.0.0.1:5601";  // daemon.reports_endpoint
  std::uint64_t count = 0;                         // reports to show, then exit 0 (0: until interrupted)
  std::int64_t timeout_ms = 5000;                  // longest wait for a report before giving up
  bool json = false;                               // print each report's JSON, one per line
  bool live = false;                               // redraw in place (a terminal) instead of appending
  CurveClient curve{};
};

struct CtlRequest {
  std::string endpoint = "tcp://127.0.0.1:5602";  // daemon.control_endpoint
  std::string command;                             // status | stats | reset | reload | shutdown
  // 0: long enough for the command — a reload drains the frames in flight, rebuilds and warms the
  // chain, and covflowd itself gives up on it after 60 s: 70 s for reload, 5 s for the others.
  std::int64_t timeout_ms = 0;
  CurveClient curve{};
};

struct RecordResultsRequest {
  std::string endpoint = "tcp://127.0.0.1:5600";  // daemon.results_endpoint
  std::string reports_endpoint;                    // daemon.reports_endpoint; empty: the results alone
  std::string out;                                 // the JSON Lines file (docs/zmq.md, "Results on disk")
  bool overwrite = false;                          // truncate `out` when it exists (else: exit 5)
  std::uint64_t frames = 0;                        // stop after this many results (0: no limit)
  double seconds = 0;                              // stop after this long (0: no limit)
  CurveClient curve{};
};

// The wait `covflow ctl` uses for a request (CtlRequest::timeout_ms, resolved).
std::int64_t ctl_timeout_ms(const CtlRequest& request);

// Subscribes to the latency reports and prints a table per report. Exit codes: 0 after `count`
// reports or when interrupted; 8 when no report arrived within the timeout; 2 for a bad endpoint.
int run_stats(const StatsRequest& request, std::ostream& out, std::ostream& err);

// Sends one control request and prints the reply (pretty JSON). Exit codes: 0 when the daemon
// answered ok; 1 when it answered with an error (printed on stderr); 8 when no answer came
// within the timeout; 2 for a bad endpoint or command.
int run_ctl(const CtlRequest& request, std::ostream& out, std::ostream& err);

// Subscribes to the results (and the reports, when asked) and writes every message as one JSON
// line, {"topic": ..., "message": ...}, the format covflowd's results_path has. Ends after
// `frames` results, `seconds`, the daemon's final report (with reports), or when interrupted, and
// prints what it wrote on `err`. Exit codes: 0 then; 2 for a bad endpoint or key file; 5 when the
// file cannot be created or written.
int run_record_results(const RecordResultsRequest& request, std::ostream& err);

// One latency report as the table `covflow stats` prints (exposed for tests).
// `frames_per_s` is shown as "N frames/s done <rate_span>".
std::string format_report(const nlohmann::json& report, std::optional<double> frames_per_s = {},
                          std::string_view rate_span = "since the last report");

// Set by a signal handler to end run_stats and run_record_results between messages.
void request_stop();

}  // namespace covflow::cli

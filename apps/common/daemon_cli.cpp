// `covflow stats`, `covflow ctl` and `covflow record-results` (daemon_cli.hpp). The field names read here are those of
// docs/zmq.md; a field a report lacks is shown as "-" rather than failing, so a newer daemon's
// report still prints.
#include "common/daemon_cli.hpp"

#include <atomic>
#include <chrono>
#include <optional>
#include <ostream>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/exit_codes.hpp"
#include "covflow/pipeline/security.hpp"
#include "covflow/replay/error.hpp"
#include "covflow/stages/results_recorder.hpp"

namespace covflow::cli {
namespace {

std::atomic<bool> stop_flag{false};

using nlohmann::json;

std::string number(const json& object, std::string_view key, int decimals) {
  if (!object.is_object()) return "-";
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return "-";
  if (it->is_number_integer() || it->is_number_unsigned()) return fmt::format("{}", it->get<std::int64_t>());
  return fmt::format("{:.{}f}", it->get<double>(), decimals);
}

// Stage rows in chain order: docs/zmq.md sends `stages` as an array of objects with a `name`.
std::vector<std::pair<std::string, json>> stage_rows(const json& report) {
  std::vector<std::pair<std::string, json>> rows;
  const auto it = report.find("stages");
  if (it == report.end()) return rows;
  if (it->is_array()) {
    for (const auto& stage : *it) rows.emplace_back(stage.value("name", std::string("?")), stage);
  } else if (it->is_object()) {
    for (const auto& [name, stage] : it->items()) rows.emplace_back(name, stage);
  }
  return rows;
}

// One row: a stage (docs/zmq.md: `latency` object, `ran`, `skipped_degraded`, `failures`) or the
// end-to-end latency object itself.
std::string histogram_row(std::string_view name, const json& row) {
  const json latency = row.contains("latency") ? row["latency"] : row;
  return fmt::format("{:<14}{:>9}{:>9}{:>9}{:>10}{:>10}{:>10}{:>10}{:>10}\n", name, number(latency, "count", 0),
                     number(row, "skipped_degraded", 0), number(row, "failures", 0), number(latency, "p50_ms", 3),
                     number(latency, "p90_ms", 3), number(latency, "p99_ms", 3), number(latency, "p999_ms", 3),
                     number(latency, "max_ms", 3));
}

// A ZeroMQ error on connect names the endpoint, a key file that cannot be used names the file;
// anything else is the caller's problem.
bool connect(zmq::socket_t& socket, const std::string& endpoint, const CurveClient& curve, std::ostream& err,
             std::string_view program) {
  try {
    if (!curve.server_key_file.empty()) {
      const auto client = curve.client_key_file.empty() ? pipeline::generate_curve_keys()
                                                        : pipeline::read_curve_secret(curve.client_key_file);
      pipeline::secure_client(socket, pipeline::read_curve_key(curve.server_key_file), client);
    }
  } catch (const std::exception& e) {
    err << program << ": error: " << e.what() << '\n';
    return false;
  }
  try {
    socket.connect(endpoint);
    return true;
  } catch (const zmq::error_t& e) {
    err << program << ": error: cannot connect to " << endpoint << ": " << e.what() << '\n';
    return false;
  }
}

}  // namespace

void request_stop() { stop_flag = true; }

std::string format_report(const json& report, std::optional<double> frames_per_s, std::string_view rate_span) {
  std::string text;
  const json frames = report.value("frames", json::object());
  const json queue = report.value("queue", json::object());
  const std::string ordinal = report.contains("report") ? " " + number(report, "report", 0) : "";
  text += fmt::format("covflowd{} report{} at {} s uptime\n", report.value("final", false) ? " final" : "", ordinal,
                      number(report, "uptime_s", 1));
  std::string drops;
  if (const auto it = frames.find("dropped_by_reason"); it != frames.end() && it->is_object()) {
    for (const auto& [reason, count] : it->items()) {
      if (count.is_number() && count.get<std::int64_t>() > 0) {
        drops += fmt::format("{}{} {}", drops.empty() ? "" : ", ", reason, count.get<std::int64_t>());
      }
    }
  }
  text += fmt::format("frames: in {}  done {}  late {}  dropped {}{}  in flight {}\n", number(frames, "in", 0),
                      number(frames, "done", 0), number(frames, "late", 0), number(frames, "dropped", 0),
                      drops.empty() ? "" : " (" + drops + ")", number(frames, "in_flight", 0));
  text += fmt::format("queue: depth {} of {} (max {}); {} frames/s done {}\n", number(queue, "depth", 0),
                      number(queue, "capacity", 0), number(queue, "max_depth", 0),
                      frames_per_s ? fmt::format("{:.1f}", *frames_per_s) : std::string("-"), rate_span);
  text += fmt::format("{:<14}{:>9}{:>9}{:>9}{:>10}{:>10}{:>10}{:>10}{:>10}\n", "stage", "count", "skipped", "failed",
                      "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms");
  for (const auto& [name, stage] : stage_rows(report)) text += histogram_row(name, stage);
  text += histogram_row("end to end", report.value("end_to_end", json::object()));
  // Several lanes (docs/scale.md): each lane's frames, arrival → its last stage, and the reorder
  // buffer before the in-sequence stages.
  if (const json lanes = report.value("lanes", json::array()); lanes.is_array() && lanes.size() > 1) {
    for (const auto& lane : lanes) {
      if (!lane.is_object()) continue;
      json row = lane;
      row["failures"] = lane.value("dropped", 0);  // dropped by a stage on the lane
      text += histogram_row("lane " + lane.value("name", std::string("?")), row);
    }
    const json reorder = report.value("reorder", json::object());
    text += fmt::format("lanes: taken {}; reorder: in order {}  out of order {}  most held {}\n",
                        [&] {
                          std::string taken;
                          for (const auto& lane : lanes)
                            if (lane.is_object())
                              taken += fmt::format("{}{} {}", taken.empty() ? "" : ", ", lane.value("name", std::string("?")),
                                                   lane.value("taken", 0));
                          return taken;
                        }(),
                        number(reorder, "in_order", 0), number(reorder, "out_of_order", 0), number(reorder, "max_held", 0));
  }
  // How the input kept up (docs/zmq.md, `input`): lag behind a paced input's schedule, frames taken
  // late or with another already waiting, sequence numbers skipped, and the time to place each payload.
  if (const json input = report.value("input", json::object()); !input.empty()) {
    const json lag = input.value("lag", json::object());
    if (lag.value("count", 0) > 0) text += histogram_row("input lag", lag);
    const json place = input.value("place", json::object());
    if (place.value("count", 0) > 0) text += histogram_row("input place", place);
    text += fmt::format("input: taken {}  taken late {}  behind {}  sequence gaps {}\n", number(input, "taken", 0),
                        number(input, "taken_late", 0), number(input, "behind", 0), number(input, "sequence_gaps", 0));
  }
  return text;
}

int run_stats(const StatsRequest& request, std::ostream& out, std::ostream& err) {
  zmq::context_t context;
  zmq::socket_t socket(context, zmq::socket_type::sub);
  socket.set(zmq::sockopt::subscribe, "latency");
  socket.set(zmq::sockopt::linger, 0);
  if (!connect(socket, request.endpoint, request.curve, err, "covflow stats")) return exit_code::usage;

  std::uint64_t shown = 0;
  std::optional<double> previous_uptime;
  double previous_done = 0;
  auto waited_since = std::chrono::steady_clock::now();
  while (!stop_flag && (request.count == 0 || shown < request.count)) {
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(100));
    if (!(item.revents & ZMQ_POLLIN)) {
      const auto waited = std::chrono::steady_clock::now() - waited_since;
      if (request.timeout_ms > 0 && waited > std::chrono::milliseconds(request.timeout_ms)) {
        err << "covflow stats: no latency report from " << request.endpoint << " within " << request.timeout_ms
            << " ms (is covflowd running, and is this its daemon.reports_endpoint?)\n";
        return exit_code::unreachable;
      }
      continue;
    }
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(socket, std::back_inserter(parts))) continue;
    waited_since = std::chrono::steady_clock::now();
    if (parts.size() != 2) {
      err << "covflow stats: ignored a message of " << parts.size() << " parts (expected topic and JSON)\n";
      continue;
    }
    json report = json::parse(parts[1].to_string_view(), nullptr, /*allow_exceptions=*/false);
    if (report.is_discarded()) {
      err << "covflow stats: ignored a report that is not JSON\n";
      continue;
    }
    ++shown;
    // Frames per second from two consecutive reports (a reset in between restarts the counters).
    std::optional<double> rate;
    const json frames = report.value("frames", json::object());
    const double done = frames.value("done", 0.0), uptime = report.value("uptime_s", 0.0);
    if (previous_uptime && uptime > *previous_uptime && done >= previous_done) {
      rate = (done - previous_done) / (uptime - *previous_uptime);
    }
    previous_uptime = uptime;
    previous_done = done;
    if (request.json) {
      out << report.dump() << '\n';
    } else {
      if (request.live) out << "\x1b[H\x1b[2J";  // home and clear: the table redraws in place
      out << format_report(report, rate);
      if (!request.live) out << '\n';
    }
    out.flush();
  }
  return exit_code::ok;
}

std::int64_t ctl_timeout_ms(const CtlRequest& request) {
  if (request.timeout_ms > 0) return request.timeout_ms;
  return request.command == "reload" ? 70'000 : 5'000;
}

int run_ctl(const CtlRequest& request, std::ostream& out, std::ostream& err) {
  static constexpr std::string_view commands[] = {"status", "stats", "reset", "reload", "shutdown"};
  bool known = false;
  for (auto c : commands) known = known || c == request.command;
  if (!known) {
    err << "covflow ctl: unknown command '" << request.command << "' (expected status, stats, reset, reload or shutdown)\n";
    return exit_code::usage;
  }
  zmq::context_t context;
  zmq::socket_t socket(context, zmq::socket_type::req);
  socket.set(zmq::sockopt::linger, 0);
  if (!connect(socket, request.endpoint, request.curve, err, "covflow ctl")) return exit_code::usage;
  const std::string body = json{{"command", request.command}}.dump();
  socket.send(zmq::buffer(body), zmq::send_flags::none);

  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  const std::int64_t timeout_ms = ctl_timeout_ms(request);
  zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms));
  if (!(item.revents & ZMQ_POLLIN)) {
    err << "covflow ctl: no reply from " << request.endpoint << " within " << timeout_ms
        << " ms (is covflowd running, and is this its daemon.control_endpoint?)\n";
    return exit_code::unreachable;
  }
  zmq::message_t reply;
  (void)socket.recv(reply, zmq::recv_flags::none);
  const json answer = json::parse(reply.to_string_view(), nullptr, /*allow_exceptions=*/false);
  if (answer.is_discarded() || !answer.is_object()) {
    err << "covflow ctl: the reply is not a JSON object: " << reply.to_string() << '\n';
    return exit_code::internal_error;
  }
  if (!answer.value("ok", false)) {
    err << "covflow ctl: " << request.command << " refused: " << answer.value("error", std::string("(no reason given)"))
        << '\n';
    return exit_code::internal_error;
  }
  out << answer.dump(2) << '\n';
  return exit_code::ok;
}

int run_record_results(const RecordResultsRequest& request, std::ostream& err) {
  constexpr std::string_view program = "covflow record-results";
  zmq::context_t context;
  zmq::socket_t results(context, zmq::socket_type::sub);
  results.set(zmq::sockopt::subscribe, "result");
  results.set(zmq::sockopt::linger, 0);
  if (!connect(results, request.endpoint, request.curve, err, program)) return exit_code::usage;
  std::optional<zmq::socket_t> reports;
  if (!request.reports_endpoint.empty()) {
    reports.emplace(context, zmq::socket_type::sub);
    reports->set(zmq::sockopt::subscribe, "latency");
    reports->set(zmq::sockopt::linger, 0);
    if (!connect(*reports, request.reports_endpoint, request.curve, err, program)) return exit_code::usage;
  }
  std::optional<stages::ResultsFile> file;
  try {
    file.emplace(request.out, request.overwrite);
  } catch (const replay::IoError& e) {
    err << program << ": error: " << e.what() << (request.overwrite ? "" : " (--force overwrites it)") << '\n';
    return exit_code::io;
  }

  std::uint64_t result_lines = 0, report_lines = 0, ignored = 0;
  bool final_report = false;
  const auto started = std::chrono::steady_clock::now();
  const auto out_of_time = [&] {
    return request.seconds > 0 &&
           std::chrono::steady_clock::now() - started >= std::chrono::duration<double>(request.seconds);
  };
  // One message from `socket`, written as a line when it is [topic, JSON object] of that topic.
  const auto take = [&](zmq::socket_t& socket, stages::ResultsTopic topic) {
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(socket, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
    // Subscriptions match prefixes: the topic must be the whole first part.
    if (parts.size() != 2 || parts[0].to_string_view() != stages::name(topic)) {
      ++ignored;
      return;
    }
    const std::string_view body = parts[1].to_string_view();
    const json message = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (message.is_discarded() || !message.is_object()) {
      if (++ignored == 1) err << program << ": ignored a " << stages::name(topic) << " message that is not a JSON object\n";
      return;
    }
    file->append(topic, body);
    if (topic == stages::ResultsTopic::result) {
      ++result_lines;
    } else {
      ++report_lines;
      final_report = message.value("final", false);
    }
  };
  try {
    while (!stop_flag && !final_report && (request.frames == 0 || result_lines < request.frames) && !out_of_time()) {
      zmq::pollitem_t items[2] = {{results.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, 0, ZMQ_POLLIN, 0}};
      int count = 1;
      if (reports) {
        items[1].socket = reports->handle();
        count = 2;
      }
      zmq::poll(items, static_cast<std::size_t>(count), std::chrono::milliseconds(100));
      if (items[0].revents & ZMQ_POLLIN) take(results, stages::ResultsTopic::result);
      if (count == 2 && (items[1].revents & ZMQ_POLLIN)) take(*reports, stages::ResultsTopic::latency);
    }
  } catch (const replay::IoError& e) {
    err << program << ": error: " << e.what() << '\n';
    return exit_code::io;
  }
  err << program << ": " << result_lines << " results" << (reports ? fmt::format(" and {} reports", report_lines) : "")
      << " written to " << request.out;
  if (final_report) err << " (the daemon sent its final report)";
  if (ignored > 0) err << "; " << ignored << " messages ignored";
  err << '\n';
  return exit_code::ok;
}

}  // namespace covflow::cli

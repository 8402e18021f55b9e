// `covflow collect` (collect_cli.hpp): several workers' results in, one ordered stream out.
#include "common/collect_cli.hpp"

#include <chrono>
#include <ostream>
#include <vector>

#include <fmt/format.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/exit_codes.hpp"

namespace covflow::cli {
namespace {

using nlohmann::json;
constexpr std::string_view program = "covflow collect";

std::chrono::nanoseconds steady_now() { return std::chrono::steady_clock::now().time_since_epoch(); }

// Logs the workers' connections as they come and go: a worker that dies is named at once.
class WorkerMonitor : public zmq::monitor_t {
 public:
  explicit WorkerMonitor(std::ostream& err) : err_(err) {}
  int connected() const { return connected_; }

 private:
  void on_event_handshake_succeeded(const zmq_event_t&, const char* address) override {
    ++connected_;
    err_ << program << ": connected to " << address << '\n';
  }
  void on_event_disconnected(const zmq_event_t&, const char* address) override {
    --connected_;
    err_ << program << ": " << address << " disconnected (its results still to come are lost; the collector goes on)\n";
  }
  std::ostream& err_;
  int connected_ = 0;
};

std::string summary_line(const json& c, int connected, std::size_t workers) {
  return fmt::format("{}: workers {}/{}; received {} (duplicates {}, out of order {}, malformed {}); published {} "
                     "in order, {} late; missing {}; held {}",
                     program, connected, workers, c["received"].get<std::uint64_t>(), c["duplicates"].get<std::uint64_t>(),
                     c["out_of_order"].get<std::uint64_t>(), c["malformed"].get<std::uint64_t>(),
                     c["published"].get<std::uint64_t>(), c["late"].get<std::uint64_t>(), c["missing"].get<std::uint64_t>(),
                     c["held"].get<std::uint64_t>());
}

}  // namespace

std::optional<std::uint64_t> parse_result_seq(std::string_view text) {
  std::size_t at = 0;
  const auto skip_space = [&] {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r')) ++at;
  };
  skip_space();
  if (at >= text.size() || text[at] != '{') return std::nullopt;
  ++at;
  int depth = 1;
  bool expect_key = true;
  while (at < text.size()) {
    const char c = text[at];
    if (c == '"') {
      const std::size_t begin = ++at;
      while (at < text.size() && text[at] != '"') at += text[at] == '\\' ? 2 : 1;
      if (at >= text.size()) return std::nullopt;
      const std::string_view word = text.substr(begin, at - begin);
      ++at;
      if (depth == 1 && expect_key) {
        expect_key = false;
        skip_space();
        if (at >= text.size() || text[at] != ':') return std::nullopt;
        ++at;
        if (word != "seq") continue;
        skip_space();
        std::uint64_t value = 0;
        const std::size_t digits = at;
        for (; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at) {
          const auto digit = std::uint64_t(text[at] - '0');
          if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
          value = value * 10 + digit;
        }
        if (at == digits) return std::nullopt;
        if (at < text.size() && (text[at] == '.' || text[at] == 'e' || text[at] == 'E')) return std::nullopt;
        return value;
      }
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') {
      if (--depth == 0) return std::nullopt;
    }
    if (c == ',' && depth == 1) expect_key = true;
    ++at;
  }
  return std::nullopt;
}

json collect_counters_json(const pipeline::SequenceReorderCounters& counters, std::uint64_t malformed, std::uint64_t held,
                           std::optional<std::uint64_t> first, std::optional<std::uint64_t> next) {
  return json{{"received", counters.received},
              {"duplicates", counters.duplicates},
              {"out_of_order", counters.out_of_order},
              {"malformed", malformed},
              {"published", counters.released},
              {"late", counters.late},
              {"missing", counters.missing},
              {"stale", counters.stale},
              {"held", held},
              {"first_seq", first ? json(*first) : json(nullptr)},
              {"next_seq", next ? json(*next) : json(nullptr)}};
}

int run_collect(const CollectRequest& request, const std::atomic<bool>& stop, std::ostream& out, std::ostream& err) {
  zmq::context_t context;
  zmq::socket_t results(context, zmq::socket_type::sub);
  results.set(zmq::sockopt::subscribe, "result");
  results.set(zmq::sockopt::linger, 0);
  results.set(zmq::sockopt::rcvhwm, 0);  // nothing dropped on this side: the reorder buffer bounds what is held
  WorkerMonitor monitor(err);
  monitor.init(results, "inproc://covflow-collect-monitor", ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED);
  for (const std::string& endpoint : request.connect) {
    try {
      results.connect(endpoint);
    } catch (const zmq::error_t& e) {
      err << program << ": error: --connect " << endpoint << ": cannot connect: " << e.what() << '\n';
      return exit_code::usage;
    }
  }
  const auto bind = [&](zmq::socket_t& socket, const std::string& endpoint, std::string_view option) {
    try {
      socket.set(zmq::sockopt::linger, 2000);  // the last results and the final report still go out
      socket.bind(endpoint);
      return true;
    } catch (const zmq::error_t& e) {
      err << program << ": error: " << option << ' ' << endpoint << ": cannot bind: " << e.what() << '\n';
      return false;
    }
  };
  zmq::socket_t publish(context, zmq::socket_type::pub);
  if (!bind(publish, request.publish, "--publish")) return exit_code::io;
  std::optional<zmq::socket_t> reports;
  if (!request.reports_publish.empty()) {
    reports.emplace(context, zmq::socket_type::pub);
    if (!bind(*reports, request.reports_publish, "--reports-publish")) return exit_code::io;
  }

  pipeline::SequenceReorder<zmq::message_t> reorder(
      {.capacity = request.window, .wait = std::chrono::milliseconds(request.wait_ms), .first = request.first_seq});
  std::uint64_t malformed = 0, report_number = 0;
  const auto emit = [&](std::uint64_t, zmq::message_t&& body, bool) {
    publish.send(zmq::str_buffer("result"), zmq::send_flags::sndmore);
    publish.send(body, zmq::send_flags::none);
  };
  const auto counters = [&] {
    return collect_counters_json(reorder.counters(), malformed, reorder.held(), reorder.first(), reorder.next());
  };
  const auto report = [&](bool final) {
    json message = counters();
    message["report"] = ++report_number;
    message["final"] = final;
    message["workers"] = request.connect;
    message["workers_connected"] = monitor.connected();
    if (reports) {
      const std::string body = message.dump();
      reports->send(zmq::str_buffer("collect"), zmq::send_flags::sndmore);
      reports->send(zmq::buffer(body), zmq::send_flags::none);
    }
    return message;
  };
  err << program << ": collecting from " << request.connect.size() << " worker(s), publishing on " << request.publish
      << (request.frames ? fmt::format(", {} sequences", request.frames) : std::string()) << '\n';

  const auto interval = std::chrono::milliseconds(std::max<std::int64_t>(request.interval_ms, 1));
  auto next_report = steady_now() + interval;
  const auto done = [&] { return request.frames != 0 && reorder.accounted() >= request.frames; };
  std::vector<zmq::message_t> parts;
  try {
    while (!stop && !done()) {
      auto now = steady_now();
      auto until = std::min(next_report, now + std::chrono::milliseconds(100));
      if (const auto deadline = reorder.next_deadline()) until = std::min(until, *deadline);
      const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(std::max(until - now, std::chrono::nanoseconds(0)));
      zmq::pollitem_t item{results.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, timeout + std::chrono::milliseconds(1));
      while (monitor.check_event(0)) {
      }
      // Take what is waiting (a bounded batch, so the deadlines and reports keep their time).
      for (int taken = 0; taken < 1024 && !done(); ++taken) {
        parts.clear();
        if (!zmq::recv_multipart(results, std::back_inserter(parts), zmq::recv_flags::dontwait)) break;
        const auto seq = parts.size() == 2 && parts[0].to_string_view() == "result"
                             ? parse_result_seq(parts[1].to_string_view())
                             : std::nullopt;
        if (!seq) {
          if (++malformed == 1) err << program << ": ignored a message that is not a result with a \"seq\"\n";
          continue;
        }
        reorder.offer(*seq, std::move(parts[1]), steady_now(), emit);
      }
      now = steady_now();
      reorder.expire(now, emit);
      if (now >= next_report) {
        err << summary_line(report(false), monitor.connected(), request.connect.size()) << '\n';
        next_report = now + interval;
      }
    }
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;
  }
  reorder.flush(emit, request.frames);
  const json final_counters = report(true);
  err << summary_line(final_counters, monitor.connected(), request.connect.size())
      << (stop ? " (interrupted)" : "") << '\n';
  out << counters().dump() << '\n';
  out.flush();
  return exit_code::ok;
}

}  // namespace covflow::cli

#include "covflow/pipeline/endpoints.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <iterator>
#include <type_traits>

#include <fmt/compile.h>
#include <fmt/format.h>
#include <zmq.hpp>

#include "covflow/pipeline/logging.hpp"

namespace covflow::pipeline {
namespace {

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char* outcome_name(StageRecord::Outcome outcome) {
  switch (outcome) {
    case StageRecord::Outcome::not_run: return "not_run";
    case StageRecord::Outcome::ran: return "ran";
    case StageRecord::Outcome::skipped_degraded: return "skipped_degraded";
    case StageRecord::Outcome::failed: return "failed";
  }
  return "unknown";
}

// A bound socket with its own context, secured as `security` says (CURVE with its ZAP handler; an
// ipc socket file kept to its owner); binding errors name the key and the endpoint.
struct BoundSocket {
  zmq::context_t context{1};
  zmq::socket_t socket;
  std::unique_ptr<ZapHandler> zap;  // before the context goes: its socket belongs to it
  BoundSocket(zmq::socket_type type, const std::string& endpoint, const std::string& key, int linger_ms,
              const EndpointSecurity& security)
      : socket(context, type) {
    try {
      socket.set(zmq::sockopt::linger, linger_ms);
      zap = secure_server(context, socket, security);
      socket.bind(endpoint);
    } catch (const zmq::error_t& e) {
      throw EndpointError(key, endpoint, fmt::format("{}: cannot bind {}: {}", key, endpoint, e.what()));
    }
    restrict_ipc_endpoint(this->endpoint());
  }
  std::string endpoint() const { return socket.get(zmq::sockopt::last_endpoint); }
  // [topic, body] without blocking; false when ZeroMQ would have had to wait or failed.
  bool send_pair(std::string_view topic, std::string_view body) {
    try {
      if (!socket.send(zmq::buffer(topic.data(), topic.size()), zmq::send_flags::sndmore | zmq::send_flags::dontwait))
        return false;
      return socket.send(zmq::buffer(body.data(), body.size()), zmq::send_flags::dontwait).has_value();
    } catch (const zmq::error_t& e) {
      logger("pipeline")->warn("{}: send failed: {}", endpoint(), e.what());
      return false;
    }
  }
};

}  // namespace

EndpointError::EndpointError(std::string key, std::string endpoint, const std::string& message)
    : std::runtime_error(message), key_(std::move(key)), endpoint_(std::move(endpoint)) {}

// ---- results --------------------------------------------------------------------------------

// JSON text appended to a std::string, for the result message. None of these allocates while the
// string's capacity holds what they append.
namespace {

// `"key":`, after a comma unless it is the object's first.
void append_key(std::string& out, std::string_view key) {
  if (out.back() != '{') out += ',';
  out += '"';
  out += key;
  out += "\":";
}

// A JSON string: quotes, backslashes and control characters escaped (RFC 8259, section 7); other
// bytes as they are.
void append_string(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          fmt::format_to(std::back_inserter(out), FMT_COMPILE("\\u{:04x}"), static_cast<unsigned>(c));
        else
          out += c;
    }
  }
  out += '"';
}

// Numbers are formatted on the stack and then appended: fmt writes faster into a char array than
// through a back_insert_iterator, and append_real looks at the digits before they go out.
template <class Integer>
void append_integer(std::string& out, Integer value) {
  static_assert(std::is_integral_v<Integer> && sizeof(Integer) <= 8);
  char text[24];  // 20 characters at most: "-9223372036854775808", "18446744073709551615"
  out.append(text, fmt::format_to(text, FMT_COMPILE("{}"), value));
}

// The shortest text that reads back to the same value of its type (fmt's "{}": a float reads back
// to the same float, not to the double nearest to it), or null when not finite. An integral value
// gets a ".0", so that a typed reader still sees a floating-point number there, as before.
template <class Real>
void append_real(std::string& out, Real value) {
  static_assert(std::is_same_v<Real, float> || std::is_same_v<Real, double>);
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char text[48];  // 24 characters at most ("-2.2250738585072014e-308"), and ".0"
  char* end = fmt::format_to(text, FMT_COMPILE("{}"), value);
  if (std::none_of(text, end, [](char c) { return c == '.' || c == 'e'; })) {
    *end++ = '.';
    *end++ = '0';
  }
  out.append(text, end);
}

void append_integers(std::string& out, std::span<const std::int32_t> values) {
  out += '[';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    append_integer(out, values[i]);
  }
  out += ']';
}

// Per-cell rows of a [capacity_cells × stride] array, the first `cells` rows; non-finite values
// null, or left out when `drop_non_finite`.
void append_rows(std::string& out, std::span<const float> values, std::size_t capacity_cells, std::size_t cells,
                 bool drop_non_finite) {
  out += '[';
  const std::size_t stride = capacity_cells == 0 ? 0 : values.size() / capacity_cells;
  for (std::size_t c = 0; c < cells && c < capacity_cells; ++c) {
    if (c > 0) out += ',';
    out += '[';
    bool first = true;
    for (const float v : values.subspan(c * stride, stride)) {
      if (drop_non_finite && !std::isfinite(v)) continue;
      if (!first) out += ',';
      first = false;
      append_real(out, v);
    }
    out += ']';
  }
  out += ']';
}

// The compress stage's object, when it ran on some cell of the frame: per-cell forms and errors,
// the frame's rank range and mean, bytes against dense, and the SINR loss per cell and look.
void append_compress(std::string& out, const FrameResults::Compressed& c, std::size_t cells) {
  const std::size_t n = std::min(cells, c.format.size());
  std::size_t computed = 0;
  std::int32_t rank_min = 0, rank_max = 0;
  std::int64_t rank_sum = 0, rank_count = 0;
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (c.format[i] == FrameResults::Compressed::not_computed) continue;
    rank_min = computed == 0 ? c.rank_min[i] : std::min(rank_min, c.rank_min[i]);
    rank_max = computed == 0 ? c.rank_max[i] : std::max(rank_max, c.rank_max[i]);
    rank_sum += c.rank_sum[i];
    rank_count += c.rank_count[i];
    bytes += c.bytes[i];
    ++computed;
  }
  if (computed == 0) return;
  append_key(out, "compress");
  out += '{';
  append_key(out, "format");
  out += '[';
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += ',';
    if (c.format[i] == FrameResults::Compressed::not_computed)
      out += "null";
    else
      append_string(out, c.format[i] == FrameResults::Compressed::tlr    ? "tlr"
                         : c.format[i] == FrameResults::Compressed::h2 ? "h2"
                                                                       : "lowrank");
  }
  out += ']';
  append_key(out, "rank_min");
  append_integer(out, rank_min);
  append_key(out, "rank_mean");
  append_real(out, rank_count > 0 ? double(rank_sum) / double(rank_count) : 0.0);
  append_key(out, "rank_max");
  append_integer(out, rank_max);
  append_key(out, "bytes");
  append_integer(out, bytes);
  append_key(out, "dense_bytes");
  append_integer(out, c.dense_bytes * computed);
  append_key(out, "error");
  out += '[';
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += ',';
    append_real(out, c.error[i]);
  }
  out += ']';
  if (!c.sinr_loss_db.empty()) {
    append_key(out, "sinr_loss_db");
    append_rows(out, c.sinr_loss_db, c.format.size(), n, /*drop_non_finite=*/false);
  }
  out += '}';
}

}  // namespace

// Fields in the order of docs/zmq.md's table.
void write_result_json(const FrameSlot& f, std::span<const std::string> stage_names, const ResultJsonOptions& options,
                       std::string& out) {
  const auto& r = f.results;
  const std::int64_t done = f.times.done_ns != 0 ? f.times.done_ns : steady_now_ns();
  const std::size_t capacity_cells = r.source_count.size();
  const std::size_t cells = std::min<std::size_t>(r.cells, capacity_cells);

  out.clear();
  out += '{';
  append_key(out, "seq");
  append_integer(out, f.sequence);
  append_key(out, "capture_ns");
  append_integer(out, f.times.capture_ns);
  append_key(out, "arrival_ns");
  append_integer(out, f.times.arrival_ns);
  append_key(out, "deadline_ns");
  append_integer(out, f.times.deadline_ns);
  append_key(out, "done_ns");
  append_integer(out, done);
  append_key(out, "latency_ms");
  append_real(out, double(done - f.times.arrival_ns) * 1e-6);
  append_key(out, "late");
  out += done > f.times.deadline_ns ? "true" : "false";
  append_key(out, "kind");
  append_string(out, replay::name(f.header.kind));
  append_key(out, "element_type");
  append_string(out, replay::name(f.header.element_type));
  append_key(out, "cells");
  append_integer(out, cells);
  append_key(out, "source_count");
  append_integers(out, std::span(r.source_count).first(cells));
  append_key(out, "doa_deg");
  append_rows(out, r.doa_deg, capacity_cells, cells, /*drop_non_finite=*/true);
  append_key(out, "cell_status");
  append_integers(out, std::span(r.cell_status).first(std::min(cells, r.cell_status.size())));
  // Adaptive results: [cells][looks] (an empty row per cell when no look is configured).
  append_key(out, "sinr_db");
  append_rows(out, r.sinr_db, capacity_cells, cells, /*drop_non_finite=*/false);
  append_key(out, "null_depth_db");
  append_rows(out, r.null_depth_db, capacity_cells, cells, /*drop_non_finite=*/false);
  append_compress(out, r.compress, cells);

  append_key(out, "stages");
  out += '[';
  for (std::size_t i = 0; i < f.stages.size(); ++i) {
    if (i > 0) out += ',';
    out += '{';
    append_key(out, "name");
    if (i < stage_names.size()) {
      append_string(out, stage_names[i]);
    } else {
      out += '"';
      append_integer(out, i);
      out += '"';
    }
    append_key(out, "outcome");
    append_string(out, outcome_name(f.stages[i].outcome));
    append_key(out, "ms");
    append_real(out, f.stages[i].ms);
    out += '}';
  }
  out += ']';

  if (options.spectrum) {
    append_key(out, "spectrum_db");
    append_rows(out, r.spectrum_db, capacity_cells, cells, /*drop_non_finite=*/false);
  }
  if (options.eigenvalues) {
    append_key(out, "eigenvalues");
    append_rows(out, r.eigenvalues, capacity_cells, cells, /*drop_non_finite=*/false);
  }
  if (options.weights) {
    // [cells][looks][channels][re, im]; the looks from sinr_db's size, as the adaptive stage keeps them.
    const std::size_t looks = capacity_cells == 0 ? 0 : r.sinr_db.size() / capacity_cells;
    const std::size_t channels = capacity_cells * looks == 0 ? 0 : r.weights.size() / (capacity_cells * looks);
    append_key(out, "weights");
    out += '[';
    for (std::size_t c = 0; c < cells; ++c) {
      if (c > 0) out += ',';
      out += '[';
      for (std::size_t l = 0; l < looks; ++l) {
        if (l > 0) out += ',';
        out += '[';
        for (std::size_t m = 0; m < channels; ++m) {
          if (m > 0) out += ',';
          const std::complex<float> w = r.weights[(c * looks + l) * channels + m];
          out += '[';
          append_real(out, w.real());
          out += ',';
          append_real(out, w.imag());
          out += ']';
        }
        out += ']';
      }
      out += ']';
    }
    out += ']';
  }
  // The adaptive stage's beam patterns, when kept (pipeline.stages.adaptive.beam_pattern_points):
  // [cells][looks][points], the points from the array's size.
  if (!r.beam_pattern_db.empty()) {
    const std::size_t looks = capacity_cells == 0 ? 0 : r.sinr_db.size() / capacity_cells;
    const std::size_t points = capacity_cells * looks == 0 ? 0 : r.beam_pattern_db.size() / (capacity_cells * looks);
    append_key(out, "beam_pattern_db");
    out += '[';
    for (std::size_t c = 0; c < cells; ++c) {
      if (c > 0) out += ',';
      append_rows(out, std::span(r.beam_pattern_db).subspan(c * looks * points, looks * points), looks, looks,
                  /*drop_non_finite=*/false);
    }
    out += ']';
  }
  out += '}';
}

struct ResultsPublisher::Socket : BoundSocket {
  using BoundSocket::BoundSocket;
};

ResultsPublisher::ResultsPublisher(const std::string& endpoint, std::string key, const EndpointSecurity& security)
    : socket_(std::make_unique<Socket>(zmq::socket_type::pub, endpoint, key, 0, security)) {}
ResultsPublisher::~ResultsPublisher() = default;

bool ResultsPublisher::publish(std::string_view body) {
  std::lock_guard lock(mutex_);
  const bool ok = socket_->send_pair("result", body);
  if (ok) ++sent_;
  return ok;
}

std::string ResultsPublisher::endpoint() const { return socket_->endpoint(); }

// ---- reports --------------------------------------------------------------------------------

struct ReportPublisher::Socket : BoundSocket {
  using BoundSocket::BoundSocket;
};

// Linger: the final report is sent just before the socket closes; give it a second to leave.
ReportPublisher::ReportPublisher(const std::string& endpoint, Metrics& metrics, std::chrono::milliseconds interval,
                                 std::string key, const EndpointSecurity& security)
    : socket_(std::make_unique<Socket>(zmq::socket_type::pub, endpoint, key, 1000, security)),
      metrics_(metrics),
      interval_(interval.count() > 0 ? interval : std::chrono::milliseconds(1000)) {}

ReportPublisher::~ReportPublisher() { stop(); }

void ReportPublisher::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    std::unique_lock lock(wake_mutex_);
    while (!stopping_) {
      if (wake_.wait_for(lock, interval_, [&] { return stopping_; })) break;
      lock.unlock();
      publish_now(false);
      lock.lock();
    }
  });
}

void ReportPublisher::stop_periodic() {
  {
    std::lock_guard lock(wake_mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ReportPublisher::stop() {
  {
    std::lock_guard lock(wake_mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  stop_periodic();
  publish_now(true);
}

void ReportPublisher::set_tap(Tap tap) {
  std::lock_guard lock(send_mutex_);
  tap_ = std::move(tap);
}

void ReportPublisher::publish_now(bool final_report) {
  nlohmann::json body = to_json(metrics_.snapshot());
  std::lock_guard lock(send_mutex_);
  body["report"] = sent_.load() + 1;
  body["final"] = final_report;
  body["interval_ms"] = interval_.count();
  const std::string text = body.dump();
  if (socket_->send_pair("latency", text)) ++sent_;
  if (tap_) tap_(text);
}

std::string ReportPublisher::endpoint() const { return socket_->endpoint(); }

// ---- control --------------------------------------------------------------------------------

struct ControlServer::Socket : BoundSocket {
  using BoundSocket::BoundSocket;
};

ControlServer::ControlServer(const std::string& endpoint, ControlHandler& handler, std::string key,
                             const EndpointSecurity& security)
    : socket_(std::make_unique<Socket>(zmq::socket_type::rep, endpoint, key, 0, security)), handler_(handler) {}

ControlServer::~ControlServer() { stop(); }

void ControlServer::start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { loop(); });
}

void ControlServer::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::string ControlServer::endpoint() const { return socket_->endpoint(); }

nlohmann::json ControlServer::handle(ControlHandler& handler, std::string_view request) {
  auto refuse = [](const std::string& error) { return nlohmann::json{{"ok", false}, {"error", error}}; };
  std::string command;
  // A JSON object {"command": "..."}, or the bare word (with or without JSON quotes).
  const auto parsed = nlohmann::json::parse(request.begin(), request.end(), nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_discarded()) {
    if (parsed.is_object()) {
      const auto it = parsed.find("command");
      if (it == parsed.end()) return refuse("malformed request: the object has no \"command\" key");
      if (!it->is_string()) return refuse("malformed request: \"command\" must be a string, not " + std::string(it->type_name()));
      command = it->get<std::string>();
    } else if (parsed.is_string()) {
      command = parsed.get<std::string>();
    } else {
      return refuse(std::string("malformed request: expected a JSON object {\"command\": ...} or a command word, got a ") +
                    parsed.type_name());
    }
  } else {
    std::string_view word = request;
    while (!word.empty() && std::isspace(static_cast<unsigned char>(word.back()))) word.remove_suffix(1);
    while (!word.empty() && std::isspace(static_cast<unsigned char>(word.front()))) word.remove_prefix(1);
    const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
    if (!plain) {
      std::string shown(request.substr(0, 60));
      for (char& c : shown)
        if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
      return refuse("malformed request: not JSON and not a command word: \"" + shown + (request.size() > 60 ? "...\"" : "\""));
    }
    command = std::string(word);
  }
  try {
    nlohmann::json result;
    if (command == "status") result = handler.status();
    else if (command == "stats") result = handler.stats();
    else if (command == "reset") { handler.reset(); result = nlohmann::json::object(); }
    else if (command == "reload") result = handler.reload();
    else if (command == "shutdown") { handler.shutdown(); result = {{"draining", true}}; }
    else return refuse("unknown command \"" + command + "\" (expected status, stats, reset, reload or shutdown)");
    return {{"ok", true}, {"command", command}, {"result", std::move(result)}};
  } catch (const std::exception& e) {
    return {{"ok", false}, {"command", command}, {"error", e.what()}};
  }
}

void ControlServer::loop() {
  auto log = logger("pipeline");
  auto& socket = socket_->socket;
  while (!stop_.load()) {
    try {
      zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
      // A request may come in several parts: the first is the command, the rest are ignored
      // (REP must read them all before it can answer).
      zmq::message_t first, part;
      if (!socket.recv(first, zmq::recv_flags::dontwait)) continue;
      bool more = first.more();
      while (more) {
        if (!socket.recv(part, zmq::recv_flags::none)) break;
        more = part.more();
      }
      ++requests_;
      const nlohmann::json reply = handle(handler_, first.to_string_view());
      // Non-UTF-8 bytes in an echoed command must not make dump() throw.
      const std::string text = reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      socket.send(zmq::buffer(text), zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      log->error("control {}: {}", endpoint(), e.what());
    } catch (const std::exception& e) {
      log->error("control {}: {}", endpoint(), e.what());
    }
  }
}

}  // namespace covflow::pipeline

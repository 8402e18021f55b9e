#include "covflow/pipeline/endpoints.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>

#include <fmt/format.h>
#include <zmq.hpp>

#include "covflow/pipeline/logging.hpp"

namespace covflow::pipeline {
namespace {

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

nlohmann::json number_or_null(float value) { return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr); }

const char* outcome_name(StageRecord::Outcome outcome) {
  switch (outcome) {
    case StageRecord::Outcome::not_run: return "not_run";
    case StageRecord::Outcome::ran: return "ran";
    case StageRecord::Outcome::skipped_degraded: return "skipped_degraded";
    case StageRecord::Outcome::failed: return "failed";
  }
  return "unknown";
}

// Per-cell rows of a [cells × stride] array, the first `cells` rows; NaN → null.
nlohmann::json rows(const std::vector<float>& values, std::size_t capacity_cells, std::size_t cells, bool drop_nan) {
  nlohmann::json out = nlohmann::json::array();
  if (capacity_cells == 0) return out;
  const std::size_t stride = values.size() / capacity_cells;
  for (std::size_t c = 0; c < cells && c < capacity_cells; ++c) {
    nlohmann::json row = nlohmann::json::array();
    for (std::size_t k = 0; k < stride; ++k) {
      const float v = values[c * stride + k];
      if (drop_nan && !std::isfinite(v)) continue;
      row.push_back(number_or_null(v));
    }
    out.push_back(std::move(row));
  }
  return out;
}

// A bound socket with its own context; binding errors name the key and the endpoint.
struct BoundSocket {
  zmq::context_t context{1};
  zmq::socket_t socket;
  BoundSocket(zmq::socket_type type, const std::string& endpoint, const std::string& key, int linger_ms)
      : socket(context, type) {
    try {
      socket.set(zmq::sockopt::linger, linger_ms);
      socket.bind(endpoint);
    } catch (const zmq::error_t& e) {
      throw EndpointError(key, endpoint, fmt::format("{}: cannot bind {}: {}", key, endpoint, e.what()));
    }
  }
  std::string endpoint() const { return socket.get(zmq::sockopt::last_endpoint); }
  // [topic, body] without blocking; false when ZeroMQ would have had to wait or failed.
  bool send_pair(std::string_view topic, const std::string& body) {
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

nlohmann::json result_json(const FrameSlot& f, std::span<const std::string> stage_names, const ResultJsonOptions& options) {
  const auto& r = f.results;
  const std::int64_t done = f.times.done_ns != 0 ? f.times.done_ns : steady_now_ns();
  const std::size_t capacity_cells = r.source_count.size();
  const std::size_t cells = std::min<std::size_t>(r.cells, capacity_cells);

  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t i = 0; i < f.stages.size(); ++i) {
    stages.push_back({{"name", i < stage_names.size() ? stage_names[i] : std::to_string(i)},
                      {"outcome", outcome_name(f.stages[i].outcome)},
                      {"ms", f.stages[i].ms}});
  }
  nlohmann::json out = {
      {"seq", f.sequence},
      {"capture_ns", f.times.capture_ns},
      {"arrival_ns", f.times.arrival_ns},
      {"deadline_ns", f.times.deadline_ns},
      {"done_ns", done},
      {"latency_ms", double(done - f.times.arrival_ns) * 1e-6},
      {"late", done > f.times.deadline_ns},
      {"kind", std::string(replay::name(f.header.kind))},
      {"element_type", std::string(replay::name(f.header.element_type))},
      {"cells", cells},
      {"source_count", std::vector<std::int32_t>(r.source_count.begin(), r.source_count.begin() + std::ptrdiff_t(cells))},
      {"doa_deg", rows(r.doa_deg, capacity_cells, cells, true)},
      {"cell_status", std::vector<std::int32_t>(r.cell_status.begin(), r.cell_status.begin() + std::ptrdiff_t(std::min(cells, r.cell_status.size())))},
      {"stages", stages},
  };
  // Adaptive results: [cells][looks] (an empty row per cell when no look is configured).
  out["sinr_db"] = rows(r.sinr_db, capacity_cells, cells, false);
  out["null_depth_db"] = rows(r.null_depth_db, capacity_cells, cells, false);
  if (options.weights) {
    const std::size_t looks = capacity_cells == 0 ? 0 : r.sinr_db.size() / capacity_cells;
    const std::size_t channels = capacity_cells * looks == 0 ? 0 : r.weights.size() / (capacity_cells * looks);
    nlohmann::json weights = nlohmann::json::array();
    for (std::size_t c = 0; c < cells; ++c) {
      nlohmann::json per_look = nlohmann::json::array();
      for (std::size_t l = 0; l < looks; ++l) {
        nlohmann::json w = nlohmann::json::array();
        for (std::size_t m = 0; m < channels; ++m) {
          const auto v = r.weights[(c * looks + l) * channels + m];
          w.push_back(nlohmann::json::array({number_or_null(v.real()), number_or_null(v.imag())}));
        }
        per_look.push_back(std::move(w));
      }
      weights.push_back(std::move(per_look));
    }
    out["weights"] = std::move(weights);
  }
  if (options.spectrum) out["spectrum_db"] = rows(r.spectrum_db, capacity_cells, cells, false);
  if (options.eigenvalues) out["eigenvalues"] = rows(r.eigenvalues, capacity_cells, cells, false);
  return out;
}

struct ResultsPublisher::Socket : BoundSocket {
  using BoundSocket::BoundSocket;
};

ResultsPublisher::ResultsPublisher(const std::string& endpoint, std::string key)
    : socket_(std::make_unique<Socket>(zmq::socket_type::pub, endpoint, key, 0)) {}
ResultsPublisher::~ResultsPublisher() = default;

bool ResultsPublisher::publish(const nlohmann::json& body) {
  const std::string text = body.dump();
  std::lock_guard lock(mutex_);
  const bool ok = socket_->send_pair("result", text);
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
                                 std::string key)
    : socket_(std::make_unique<Socket>(zmq::socket_type::pub, endpoint, key, 1000)),
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

void ReportPublisher::stop() {
  {
    std::lock_guard lock(wake_mutex_);
    if (stopped_) return;
    stopped_ = stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  publish_now(true);
}

void ReportPublisher::publish_now(bool final_report) {
  nlohmann::json body = to_json(metrics_.snapshot());
  std::lock_guard lock(send_mutex_);
  body["report"] = sent_.load() + 1;
  body["final"] = final_report;
  body["interval_ms"] = interval_.count();
  if (socket_->send_pair("latency", body.dump())) ++sent_;
}

std::string ReportPublisher::endpoint() const { return socket_->endpoint(); }

// ---- control --------------------------------------------------------------------------------

struct ControlServer::Socket : BoundSocket {
  using BoundSocket::BoundSocket;
};

ControlServer::ControlServer(const std::string& endpoint, ControlHandler& handler, std::string key)
    : socket_(std::make_unique<Socket>(zmq::socket_type::rep, endpoint, key, 0)), handler_(handler) {}

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

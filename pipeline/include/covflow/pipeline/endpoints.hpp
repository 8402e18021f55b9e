// The daemon's ZeroMQ endpoints (docs/architecture.md, "The scheduler"); docs/zmq.md is the
// reference for every socket, topic and field.
//
//   ResultsPublisher  PUB  daemon.results_endpoint  [ "result", JSON ] per completed frame
//   ReportPublisher   PUB  daemon.reports_endpoint  [ "latency", JSON ] every report_interval_ms
//                                                   and once more, final, when it stops
//   ControlServer     REP  daemon.control_endpoint  {"command": ...} → {"ok": ..., ...}
//
// Each binds when it is made; a refused endpoint (address in use, malformed) throws
// EndpointError naming the endpoint and the configuration key it came from. An endpoint may end
// in ":*" (tcp) for a free port: endpoint() says which was taken. Each is secured as its
// EndpointSecurity says (security.hpp): CURVE when it has a server key; an ipc socket file is
// always made its owner's alone.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>

#include "covflow/pipeline/frame.hpp"
#include "covflow/pipeline/metrics.hpp"
#include "covflow/pipeline/security.hpp"

namespace covflow::pipeline {

class EndpointError : public std::runtime_error {
 public:
  EndpointError(std::string key, std::string endpoint, const std::string& message);
  const std::string& key() const noexcept { return key_; }
  const std::string& endpoint() const noexcept { return endpoint_; }

 private:
  std::string key_, endpoint_;
};

struct ResultJsonOptions {
  bool spectrum = false;     // include the MUSIC pseudo-spectrum (cells × spectrum_points floats)
  bool eigenvalues = false;  // include the eigenvalues (cells × channels floats)
  bool weights = false;      // include the adaptive weights (cells × looks × channels [re, im] pairs)
};

// Writes the "result" message body of one frame (docs/zmq.md) into `out`, replacing what it held
// but keeping its capacity: once `out` has grown to the size of the largest message, writing
// allocates nothing (this runs on every frame's critical path). `stage_names` label the frame's
// stage records (chain order); a record without a name is labelled by its index. Non-finite
// numbers become JSON null; floats are written in the shortest form that reads back to the same
// float.
void write_result_json(const FrameSlot& frame, std::span<const std::string> stage_names,
                       const ResultJsonOptions& options, std::string& out);

class ResultsPublisher {
 public:
  explicit ResultsPublisher(const std::string& endpoint, std::string key = "daemon.results_endpoint",
                            const EndpointSecurity& security = {});
  ~ResultsPublisher();
  ResultsPublisher(const ResultsPublisher&) = delete;
  ResultsPublisher& operator=(const ResultsPublisher&) = delete;

  // Sends [topic "result", body] (body: JSON text, e.g. from write_result_json); never blocks (a
  // PUB socket drops what a slow subscriber cannot take). Thread-safe. False when ZeroMQ refused
  // the message.
  bool publish(std::string_view body);
  std::string endpoint() const;
  std::uint64_t sent() const { return sent_.load(); }

 private:
  struct Socket;
  std::unique_ptr<Socket> socket_;
  std::mutex mutex_;
  std::atomic<std::uint64_t> sent_{0};
};

class ReportPublisher {
 public:
  ReportPublisher(const std::string& endpoint, Metrics& metrics, std::chrono::milliseconds interval,
                  std::string key = "daemon.reports_endpoint", const EndpointSecurity& security = {});
  // stop()
  ~ReportPublisher();
  ReportPublisher(const ReportPublisher&) = delete;
  ReportPublisher& operator=(const ReportPublisher&) = delete;

  // Starts the thread that publishes a report every interval.
  void start();
  // Stops the thread without a report (stop() sends the final one): what the reports count can then
  // be settled before the final report is taken. Idempotent.
  void stop_periodic();
  // Stops the thread and publishes the final report ("final": true). Idempotent.
  void stop();
  // Publishes one report now (thread-safe).
  void publish_now(bool final_report = false);
  // Each report's JSON text, as sent (whether or not a subscriber takes it), is also handed to
  // `tap` (empty: none): covflowd's results recording. Called under the send lock on the
  // publishing thread: it must not block. Thread-safe.
  using Tap = std::function<void(std::string_view body)>;
  void set_tap(Tap tap);
  std::string endpoint() const;
  std::uint64_t sent() const { return sent_.load(); }

 private:
  struct Socket;
  std::unique_ptr<Socket> socket_;
  Metrics& metrics_;
  std::chrono::milliseconds interval_;
  std::mutex send_mutex_;
  Tap tap_;  // under send_mutex_
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::thread thread_;
  std::atomic<std::uint64_t> sent_{0};
};

// What the daemon does for each control command. Each call comes from the control thread; a
// handler that throws turns into {"ok": false, "error": <what()>}.
class ControlHandler {
 public:
  virtual ~ControlHandler() = default;
  virtual nlohmann::json status() = 0;  // state, input, backend, ... (the daemon decides)
  virtual nlohmann::json stats() = 0;   // usually to_json(metrics.snapshot())
  virtual void reset() = 0;             // usually metrics.reset()
  virtual nlohmann::json reload() = 0;  // re-read the configuration; throw to refuse
  virtual void shutdown() = 0;          // start a drain; must not block until it is done
};

class ControlServer {
 public:
  ControlServer(const std::string& endpoint, ControlHandler& handler, std::string key = "daemon.control_endpoint",
                const EndpointSecurity& security = {});
  // stop()
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  void start();
  // Stops the thread within one poll period (100 ms). Idempotent.
  void stop();
  std::string endpoint() const;
  std::uint64_t requests() const { return requests_.load(); }

  // The reply to one request (the bytes of a message), as the server sends it. Never throws.
  static nlohmann::json handle(ControlHandler& handler, std::string_view request);

 private:
  void loop();
  struct Socket;
  std::unique_ptr<Socket> socket_;
  ControlHandler& handler_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::atomic<std::uint64_t> requests_{0};
};

}  // namespace covflow::pipeline

// covflowd end to end, on real sockets, as a user runs it: start the daemon, feed frames over
// ZeroMQ, receive results and latency reports, ask for status, reload a bad and then a good
// configuration (SIGHUP and the control socket), run the Python example client, send SIGTERM:
// every frame sent comes back as a result, the final report accounts for each, and the exit
// status is 0. Shared by the CPU suite (daemon_e2e_test) and the GPU one.
#pragma once

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "covflow/config/config.hpp"
#include "covflow/stages/ingest.hpp"
#include "covflow/stages/scenario.hpp"
#include "replay_test_support.hpp"
#include "test_support.hpp"

extern char** environ;

namespace covflow::test {

using nlohmann::json;
using namespace std::chrono_literals;

inline std::string slurp_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A child process with stdout and stderr in files; killed (SIGKILL) if still running at the end.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::filesystem::path& out, const std::filesystem::path& err) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int rc = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  void signal(int sig) const { ::kill(pid_, sig); }
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return false;
    }
    return true;
  }
  // The exit status (128 + signal when killed by one); -1 when it did not end within `timeout`.
  int wait(std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (running()) {
      if (std::chrono::steady_clock::now() > until) return -1;
      std::this_thread::sleep_for(10ms);
    }
    return exit_status_;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int exit_status_ = -1;
};

// One control request on a fresh REQ socket; null when no reply came within `timeout`.
inline json control(zmq::context_t& context, const std::string& endpoint, const std::string& command,
                    std::chrono::milliseconds timeout = 5000ms) {
  zmq::socket_t req(context, zmq::socket_type::req);
  req.set(zmq::sockopt::linger, 0);
  req.set(zmq::sockopt::rcvtimeo, int(timeout.count()));
  req.connect(endpoint);
  const std::string body = json{{"command", command}}.dump();
  req.send(zmq::buffer(body), zmq::send_flags::none);
  zmq::message_t reply;
  if (!req.recv(reply)) return nullptr;
  return json::parse(reply.to_string_view());
}

struct DaemonFixturePaths {
  std::filesystem::path config, out, err;
  std::string results, reports, control, feed;
};

inline DaemonFixturePaths write_daemon_config(const ScratchDir& dir, const std::string& backend, double budget_ms,
                                              const std::string& overflow, int queue_depth) {
  DaemonFixturePaths p;
  p.config = dir / "covflowd.yaml";
  p.out = dir / "covflowd.out";
  p.err = dir / "covflowd.err";
  const std::string base = "ipc://" + dir.path().string() + "/";
  p.results = base + "results";
  p.reports = base + "reports";
  p.control = base + "control";
  p.feed = base + "feed";
  std::ofstream(p.config) << "daemon:\n"
                          << "  results_endpoint: " << p.results << "\n"
                          << "  reports_endpoint: " << p.reports << "\n"
                          << "  control_endpoint: " << p.control << "\n"
                          << "  report_interval_ms: 200\n"
                          << "device:\n  backend: " << backend << "\n"
                          << "ingest:\n  source: zmq\n  zmq:\n    endpoint: " << p.feed << "\n    pattern: pull\n"
                          << "    shape: {elements: 16, snapshots: 64, cells: 8}\n"
                          << "pipeline:\n  budget_ms: " << budget_ms << "\n  queue_depth: " << queue_depth
                          << "\n  overflow: " << overflow << "\n";
  return p;
}

// Waits until the daemon answers `status` (it binds its sockets before it starts the pipeline).
inline json wait_until_up(zmq::context_t& context, Child& daemon, const DaemonFixturePaths& p) {
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < until && daemon.running()) {
    json status = control(context, p.control, "status", 300ms);
    if (!status.is_null()) return status;
  }
  ADD_FAILURE() << "covflowd did not answer status; stderr:\n" << slurp_file(p.err);
  return nullptr;
}

// True when /usr/bin/python3 can import zmq (Debian's python3-zmq), which the example client needs.
inline bool python_zmq_available() {
  return std::system("/usr/bin/python3 -c 'import zmq' >/dev/null 2>&1") == 0;
}

// `python_required`: fail (CI) rather than skip the Python client step when python3-zmq is missing
// (a bare GPU host may lack it).
inline void run_daemon_end_to_end(const std::string& covflowd, const std::string& python_client,
                                  const std::string& backend, bool python_required) {
  ScratchDir dir;
  const auto p = write_daemon_config(dir, backend, 2000.0, "block", 16);
  zmq::context_t context;
  // The feed: covflowd connects a PULL socket to it; PUSH never drops, it waits for the reader.
  stages::ZmqFramePublisher feed(p.feed, stages::ZmqFramePublisher::Pattern::push);
  Child daemon({covflowd, "--config", p.config.string()}, p.out, p.err);

  zmq::socket_t results(context, zmq::socket_type::sub), reports(context, zmq::socket_type::sub);
  results.set(zmq::sockopt::subscribe, "result");
  reports.set(zmq::sockopt::subscribe, "latency");
  results.connect(p.results);
  reports.connect(p.reports);

  const json status = wait_until_up(context, daemon, p);
  ASSERT_FALSE(status.is_null());
  ASSERT_TRUE(status.value("ok", false)) << status.dump();
  EXPECT_EQ(status["result"]["state"], "running") << status.dump();
  EXPECT_EQ(status["result"]["backend"], backend) << status.dump();

  // A latency report proves the SUB sockets are joined (both connected at the same moment).
  zmq::pollitem_t report_item{reports.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&report_item, 1, 5000ms);
  ASSERT_TRUE(report_item.revents & ZMQ_POLLIN) << "no latency report within 5 s";
  std::this_thread::sleep_for(200ms);

  // Frames with known sources; the sequence numbers come back in the results.
  config::ScenarioConfig scenario;
  scenario.elements = 16;
  scenario.snapshots = 64;
  scenario.cells = 8;
  scenario.jammers.clear();
  scenario.seed = std::int64_t(fresh_seed("covflowd end to end scenario") & 0x7fffffff);
  stages::ScenarioGenerator generator(scenario);
  constexpr int sent = 60;
  std::set<std::uint64_t> expected;
  for (int s = 0; s < sent; ++s) {
    feed.send(generator.frame(std::uint64_t(s)));
    expected.insert(std::uint64_t(s));
  }
  // One record that is not a record: counted as rejected input, nothing else lost.
  const std::byte junk[5] = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}};
  feed.send_raw(junk);

  std::set<std::uint64_t> received;
  int with_three_sources = 0, cells_seen = 0;
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (received.size() < expected.size() && std::chrono::steady_clock::now() < until) {
    zmq::pollitem_t item{results.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, 200ms);
    if (!(item.revents & ZMQ_POLLIN)) continue;
    std::vector<zmq::message_t> parts;
    ASSERT_TRUE(zmq::recv_multipart(results, std::back_inserter(parts)));
    ASSERT_EQ(parts.size(), 2u);
    const json result = json::parse(parts[1].to_string_view());
    received.insert(result.at("seq").get<std::uint64_t>());
    for (const auto& count : result.at("source_count")) {
      ++cells_seen;
      with_three_sources += count.get<int>() == 3;
    }
  }
  EXPECT_EQ(received, expected) << "stderr:\n" << slurp_file(p.err);
  // 10 dB sources at −20°, 5°, 31° with 64 snapshots: MDL finds all three in (nearly) every cell.
  EXPECT_GE(with_three_sources, cells_seen * 9 / 10) << with_three_sources << " of " << cells_seen;

  // The Python example client prints a report line.
  if (!python_required && !python_zmq_available()) {
    std::printf("[ note     ] /usr/bin/python3 with zmq is missing here: the Python client step is left out\n");
  } else {
    const auto client_out = dir / "client.out", client_err = dir / "client.err";
    Child client({"/usr/bin/python3", python_client, "--connect", p.reports, "--count", "2", "--timeout", "10"},
                 client_out, client_err);
    EXPECT_EQ(client.wait(30s), 0) << slurp_file(client_err);
    const std::string text = slurp_file(client_out);
    EXPECT_NE(text.find("in " + std::to_string(sent + 1) + " done " + std::to_string(sent)), std::string::npos) << text;
  }

  // SIGHUP with a broken file: refused, named, the daemon runs on.
  const std::string good = slurp_file(p.config);
  std::ofstream(p.config) << good << "  budget_mss: 3\n";
  daemon.signal(SIGHUP);
  json after_bad;
  for (int i = 0; i < 100; ++i) {
    after_bad = control(context, p.control, "status");
    if (!after_bad.is_null() && after_bad["result"].value("reload_failures", 0) >= 1) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_FALSE(after_bad.is_null());
  EXPECT_EQ(after_bad["result"]["state"], "running");
  EXPECT_EQ(after_bad["result"]["reload_failures"], 1);
  const std::string reload_error = after_bad["result"].value("last_reload_error", "");
  EXPECT_NE(reload_error.find("covflowd.yaml:18: pipeline.budget_mss: unknown key"), std::string::npos) << reload_error;
  EXPECT_NE(reload_error.find("did you mean 'budget_ms'"), std::string::npos) << reload_error;

  // The control socket's reload with a good change: applied.
  std::ofstream(p.config) << good << "  stages:\n    subspace:\n      source_count: aic\n";
  const json reloaded = control(context, p.control, "reload", 60s);
  ASSERT_FALSE(reloaded.is_null());
  ASSERT_TRUE(reloaded.value("ok", false)) << reloaded.dump();
  EXPECT_EQ(reloaded["result"]["applied"], json::array({"pipeline"})) << reloaded.dump();

  // Frames after the reload are processed too.
  constexpr int more = 10;
  for (int s = sent; s < sent + more; ++s) {
    feed.send(generator.frame(std::uint64_t(s)));
    expected.insert(std::uint64_t(s));
  }
  const auto until2 = std::chrono::steady_clock::now() + 60s;
  while (received.size() < expected.size() && std::chrono::steady_clock::now() < until2) {
    zmq::pollitem_t item{results.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, 200ms);
    if (!(item.revents & ZMQ_POLLIN)) continue;
    std::vector<zmq::message_t> parts;
    ASSERT_TRUE(zmq::recv_multipart(results, std::back_inserter(parts)));
    received.insert(json::parse(parts[1].to_string_view()).at("seq").get<std::uint64_t>());
  }
  EXPECT_EQ(received, expected);

  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait(60s), 0) << slurp_file(p.err);
  const std::string out = slurp_file(p.out);
  // The final report: every frame in is done or dropped, and the one dropped is the junk message.
  const std::string frames_line = "frames: in " + std::to_string(sent + more + 1) + "  done " +
                                  std::to_string(sent + more) + "  late 0  dropped 1 (rejected_input 1)  in flight 0";
  EXPECT_NE(out.find(frames_line), std::string::npos) << out << "\nstderr:\n" << slurp_file(p.err);
}

}  // namespace covflow::test

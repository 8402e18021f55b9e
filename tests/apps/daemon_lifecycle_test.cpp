// covflowd's lifecycle as a supervisor and an operator meet it: a reload while recording, a stop
// signal while a control reload waits, a second stop signal during a long drain, a stop signal
// during a long gap of a recorded replay. Each started as a user starts it, on the CPU backend.
#include "daemon_e2e.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cstring>
#include <regex>

#include "covflow/replay/reader.hpp"
#include "covflow/replay/writer.hpp"

namespace covflow::test {
namespace {

struct Setup {
  DaemonFixturePaths paths;
  std::string yaml;  // the configuration as written (a test may rewrite it)
};

// A configuration with the daemon's sockets in `dir` (ipc), the CPU backend and `body` below it.
Setup daemon_setup(const ScratchDir& dir, const std::string& body) {
  Setup s;
  auto& p = s.paths;
  p.config = dir / "covflowd.yaml";
  p.out = dir / "covflowd.out";
  p.err = dir / "covflowd.err";
  const std::string base = "ipc://" + dir.path().string() + "/";
  p.results = base + "results";
  p.reports = base + "reports";
  p.control = base + "control";
  s.yaml = "daemon:\n  results_endpoint: " + p.results + "\n  reports_endpoint: " + p.reports +
           "\n  control_endpoint: " + p.control + "\n  report_interval_ms: 100\ndevice:\n  backend: cpu\n" + body;
  std::ofstream(p.config) << s.yaml;
  return s;
}

std::uint64_t frames_done(zmq::context_t& context, const DaemonFixturePaths& p) {
  const json status = control(context, p.control, "status", 2000ms);
  if (status.is_null() || !status.contains("result")) return 0;
  return status["result"]["frames"].value("done", std::uint64_t{0});
}

// Waits (up to 60 s) until `done` frames are through.
bool wait_for_frames(zmq::context_t& context, const DaemonFixturePaths& p, std::uint64_t done) {
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < until) {
    if (frames_done(context, p) >= done) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

TEST(DaemonLifecycle, AReloadWhileRecordingKeepsTheDaemonRunningAndTheRecording) {
  ScratchDir dir;
  // A file from an earlier run is at the record path: it is kept, the recording goes beside it.
  write_bytes(dir / "rec.cvf", std::vector<std::byte>(100, std::byte{1}));
  auto s = daemon_setup(dir, "scenario:\n  cells: 4\n  snapshots: 32\npipeline:\n  budget_ms: 1000\n  stages:\n"
                             "    publish:\n      record_path: " + (dir / "rec.cvf").string() + "\n");
  zmq::context_t context;
  Child daemon({COVFLOWD, "--config", s.paths.config.string()}, s.paths.out, s.paths.err);
  ASSERT_FALSE(wait_until_up(context, daemon, s.paths).is_null());
  ASSERT_TRUE(wait_for_frames(context, s.paths, 10)) << slurp_file(s.paths.err);

  // A change the chain must be rebuilt for, with the recording target unchanged.
  const std::string edited = std::regex_replace(s.yaml, std::regex("budget_ms: 1000"), "budget_ms: 900");
  ASSERT_NE(edited, s.yaml);
  std::ofstream(s.paths.config) << edited;
  daemon.signal(SIGHUP);
  json status;
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < until) {
    status = control(context, s.paths.control, "status", 2000ms);
    if (!status.is_null() && status["result"].value("reloads", 0) >= 1) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_FALSE(status.is_null());
  EXPECT_EQ(status["result"].value("reloads", 0), 1) << slurp_file(s.paths.err);
  EXPECT_EQ(status["result"].value("reload_failures", 0), 0) << slurp_file(s.paths.err);
  EXPECT_EQ(status["result"].value("budget_ms", 0.0), 900.0);
  // Still taking frames after the reload.
  const std::uint64_t after_reload = frames_done(context, s.paths);
  EXPECT_TRUE(wait_for_frames(context, s.paths, after_reload + 10)) << slurp_file(s.paths.err);

  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait(30s), 0) << slurp_file(s.paths.err);
  EXPECT_EQ(read_bytes(dir / "rec.cvf"), std::vector<std::byte>(100, std::byte{1})) << "the earlier file is kept";
  const std::string log = slurp_file(s.paths.err);
  EXPECT_NE(log.find("recording to " + (dir / "rec.1.cvf").string()), std::string::npos) << log;
  replay::Reader recording(dir / "rec.1.cvf");
  EXPECT_TRUE(recording.index().has_value()) << "closed with its index";
  EXPECT_GE(recording.index()->size(), after_reload + 10) << "one file across the reload";
  EXPECT_TRUE(recording.damage().empty());
}

TEST(DaemonLifecycle, AStopSignalWhileAControlReloadWaitsEndsPromptly) {
  ScratchDir dir;
  auto s = daemon_setup(dir, "scenario:\n  cells: 4\n  snapshots: 32\npipeline:\n  budget_ms: 1000\n");
  zmq::context_t context;
  Child daemon({COVFLOWD, "--config", s.paths.config.string()}, s.paths.out, s.paths.err);
  ASSERT_FALSE(wait_until_up(context, daemon, s.paths).is_null());
  // The reload request and the signal land together: the daemon stops, and the request waiting
  // for the main loop is answered rather than left to time out (60 s).
  zmq::socket_t req(context, zmq::socket_type::req);
  req.set(zmq::sockopt::linger, 0);
  req.set(zmq::sockopt::rcvtimeo, 30000);
  req.connect(s.paths.control);
  req.send(zmq::buffer(json{{"command", "reload"}}.dump()), zmq::send_flags::none);
  daemon.signal(SIGTERM);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(daemon.wait(20s), 0) << "the daemon did not stop within 20 s: " << slurp_file(s.paths.err);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 20s);
  zmq::message_t reply;
  if (req.recv(reply)) {
    const json answer = json::parse(reply.to_string_view());
    // Either the reload ran before the signal was seen, or it was refused as the daemon stopped.
    if (!answer.value("ok", false)) {
      EXPECT_NE(answer.value("error", std::string()).find("shutting down"), std::string::npos) << answer.dump();
    }
  }
  EXPECT_NE(slurp_file(s.paths.out).find("covflowd final report"), std::string::npos);
}

TEST(DaemonLifecycle, ASecondStopSignalEndsALongDrainAtOnce) {
  ScratchDir dir;
  // Frames the CPU backend takes a good while each (heev of 128 × 128 in 64 cells), replayed as
  // fast as they are taken into a blocking queue of 8: the queue is full of them, a drain would take
  // seconds.
  const std::string synth = std::string(COVFLOW_CLI) + " synth -o " + (dir / "heavy.cvf").string() +
                            " -n 16 --set scenario.elements=128 --set scenario.cells=64 --set scenario.snapshots=160";
  ASSERT_EQ(std::system((synth + " >/dev/null 2>&1").c_str()), 0);
  auto s = daemon_setup(dir, "ingest:\n  source: file\n  file:\n    path: " + (dir / "heavy.cvf").string() +
                                 "\n    pace: fast\npipeline:\n  budget_ms: 60000\n  queue_depth: 8\n  overflow: block\n"
                                 "  stages:\n    adaptive:\n      enabled: false\n");
  zmq::context_t context;
  Child daemon({COVFLOWD, "--config", s.paths.config.string()}, s.paths.out, s.paths.err);
  ASSERT_FALSE(wait_until_up(context, daemon, s.paths).is_null());
  ASSERT_TRUE(wait_for_frames(context, s.paths, 1)) << slurp_file(s.paths.err);
  daemon.signal(SIGTERM);
  std::this_thread::sleep_for(100ms);
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait(60s), 0) << slurp_file(s.paths.err);
  const std::string out = slurp_file(s.paths.out), err = slurp_file(s.paths.err);
  EXPECT_NE(err.find("second stop signal"), std::string::npos) << err;
  EXPECT_NE(out.find("shutdown "), std::string::npos) << "the frames still queued are dropped and counted: " << out;
}

TEST(DaemonLifecycle, AStopSignalDuringAGapOfARecordedReplayEndsPromptly) {
  ScratchDir dir;
  {
    config::ScenarioConfig scenario;
    scenario.cells = 2;
    scenario.snapshots = 32;
    stages::ScenarioGenerator generator(scenario);
    replay::Writer writer(dir / "gap.cvf");
    replay::Frame first = generator.next(), second = generator.next();
    second.header.capture_time_ns = first.header.capture_time_ns + 3'600'000'000'000;  // an hour later
    writer.write(first);
    writer.write(second);
  }
  // (max_gap_s, 10 s by default, would shorten the gap; the stop must be prompt whatever the gap.)
  auto s = daemon_setup(dir, "ingest:\n  source: file\n  file:\n    path: " + (dir / "gap.cvf").string() +
                                 "\n    pace: recorded\n");
  zmq::context_t context;
  Child daemon({COVFLOWD, "--config", s.paths.config.string()}, s.paths.out, s.paths.err);
  ASSERT_FALSE(wait_until_up(context, daemon, s.paths).is_null());
  ASSERT_TRUE(wait_for_frames(context, s.paths, 1)) << slurp_file(s.paths.err);
  // The second record is due in an hour: the stop must not wait for it.
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait(20s), 0) << "the daemon did not stop within 20 s: " << slurp_file(s.paths.err);
  EXPECT_NE(slurp_file(s.paths.out).find("frames: in 1  done 1"), std::string::npos) << slurp_file(s.paths.out);
}

// systemd's side of the notify protocol: a datagram socket named by NOTIFY_SOCKET.
class NotifySocket {
 public:
  explicit NotifySocket(const std::filesystem::path& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0)
      throw std::runtime_error("cannot bind " + path.string());
  }
  ~NotifySocket() { ::close(fd_); }
  // Every message that arrives within `wait`, in order.
  std::vector<std::string> receive(std::chrono::milliseconds wait) {
    std::vector<std::string> messages;
    const auto until = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < until) {
      pollfd item{fd_, POLLIN, 0};
      if (::poll(&item, 1, 20) <= 0) continue;
      char buffer[4096];
      const ssize_t got = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (got > 0) messages.emplace_back(buffer, std::size_t(got));
    }
    return messages;
  }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

std::size_t count_with(const std::vector<std::string>& messages, const std::string& what) {
  std::size_t n = 0;
  for (const auto& m : messages) n += m.find(what) != std::string::npos ? 1 : 0;
  return n;
}

TEST(DaemonLifecycle, TellsSystemdWhenReadyReloadingAndStoppingAndFeedsItsWatchdog) {
#if !COVFLOW_HAS_SYSTEMD
  GTEST_SKIP() << "covflowd was built without libsystemd (Debian's libsystemd-dev): it does not speak the notify protocol";
#endif
  ScratchDir dir;
  auto s = daemon_setup(dir, "scenario:\n  cells: 4\n  snapshots: 32\npipeline:\n  budget_ms: 1000\n");
  NotifySocket notify(dir / "notify");
  ::setenv("NOTIFY_SOCKET", (dir / "notify").c_str(), 1);
  ::setenv("WATCHDOG_USEC", "200000", 1);  // a ping at least every 100 ms
  Child daemon({COVFLOWD, "--config", s.paths.config.string()}, s.paths.out, s.paths.err);
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  zmq::context_t context;
  ASSERT_FALSE(wait_until_up(context, daemon, s.paths).is_null());
  auto messages = notify.receive(1000ms);
  ASSERT_FALSE(messages.empty()) << slurp_file(s.paths.err);
  EXPECT_EQ(messages.front().rfind("READY=1", 0), 0u) << messages.front();
  EXPECT_GE(count_with(messages, "WATCHDOG=1"), 3u) << "pings at half the 200 ms interval";
  daemon.signal(SIGHUP);
  messages = notify.receive(1000ms);
  EXPECT_EQ(count_with(messages, "RELOADING=1"), 1u);
  EXPECT_EQ(count_with(messages, "READY=1"), 1u);
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait(30s), 0) << slurp_file(s.paths.err);
  messages = notify.receive(200ms);
  EXPECT_EQ(count_with(messages, "STOPPING=1"), 1u);
}

// Runs a shell command line, returning its exit status.
int shell(const std::string& line) {
  const int status = std::system(line.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(DaemonLifecycle, ACurveSecuredDaemonIsControlledByAdmittedClientsAlone) {
  ScratchDir dir;
  const std::string covflow = COVFLOW_CLI;
  ASSERT_EQ(shell(covflow + " keygen " + (dir / "daemon").string() + " >/dev/null"), 0);
  ASSERT_EQ(shell(covflow + " keygen " + (dir / "ops").string() + " >/dev/null"), 0);
  ASSERT_EQ(shell(covflow + " keygen " + (dir / "stranger").string() + " >/dev/null"), 0);
  std::filesystem::copy_file(dir / "ops.public", dir / "clients");
  auto s = daemon_setup(dir, "scenario:\n  cells: 4\n  snapshots: 32\n");
  // The daemon section gains the CURVE keys.
  std::ofstream(s.paths.config) << std::regex_replace(s.yaml, std::regex("  report_interval_ms: 100\n"),
                                                       "  report_interval_ms: 100\n  curve:\n    secret_key_file: " +
                                                           (dir / "daemon.secret").string() + "\n    clients_file: " +
                                                           (dir / "clients").string() + "\n");
  Child daemon({COVFLOWD, "--config", s.paths.config.string()}, s.paths.out, s.paths.err);
  const std::string ctl = covflow + " ctl status --connect " + s.paths.control + " --curve-server-key " +
                          (dir / "daemon.public").string() + " >/dev/null 2>&1";
  int admitted = -1;
  for (int attempt = 0; attempt < 30 && admitted != 0; ++attempt) {  // until the daemon is up
    admitted = shell(ctl + " --timeout-ms 2000 --curve-client-key " + (dir / "ops.secret").string());
    if (admitted != 0) std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(admitted, 0) << slurp_file(s.paths.err);
  EXPECT_EQ(shell(covflow + " ctl status --connect " + s.paths.control + " --timeout-ms 1000 >/dev/null 2>&1"), 8)
      << "a client without CURVE gets no answer";
  EXPECT_EQ(shell(ctl + " --curve-client-key " + (dir / "stranger.secret").string() + " --timeout-ms 1000"), 8)
      << "a client key not in the list gets no answer";
  EXPECT_NE(slurp_file(s.paths.err).find("refused a CURVE client"), std::string::npos) << slurp_file(s.paths.err);
  // covflow record-results takes the same keys: an admitted client gets the results, a stranger none.
  const std::string record = covflow + " record-results --connect " + s.paths.results + " --curve-server-key " +
                             (dir / "daemon.public").string() + " --curve-client-key ";
  EXPECT_EQ(shell(record + (dir / "ops.secret").string() + " --frames 3 --out " + (dir / "ops.jsonl").string() +
                  " 2>/dev/null"),
            0);
  const std::string admitted_lines = slurp_file(dir / "ops.jsonl");
  EXPECT_EQ(std::count(admitted_lines.begin(), admitted_lines.end(), '\n'), 3) << admitted_lines.substr(0, 300);
  EXPECT_EQ(shell(record + (dir / "stranger.secret").string() + " --seconds 1 --out " +
                  (dir / "stranger.jsonl").string() + " 2>/dev/null"),
            0);
  EXPECT_EQ(slurp_file(dir / "stranger.jsonl"), "") << "a client key not in the list gets no results";
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait(30s), 0) << slurp_file(s.paths.err);
}

}  // namespace
}  // namespace covflow::test

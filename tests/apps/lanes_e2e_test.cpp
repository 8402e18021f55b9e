// One covflowd with several CPU lanes (device.cpu_lanes), as a user runs it: frames over a ZeroMQ
// PUSH feed, results on its PUB socket in sequence order whichever lane ran them, the lanes in the
// status reply, the latency reports and the final report; a chain that keeps state across frames
// (the adaptive stage) splits every frame's cells over the lanes and says why.
#include <signal.h>

#include <iterator>
#include <string>
#include <vector>

#include "daemon_e2e.hpp"

namespace covflow::test {
namespace {

DaemonFixturePaths write_lanes_config(const ScratchDir& dir, int lanes, bool adaptive) {
  DaemonFixturePaths p = write_daemon_config(dir, "cpu", 2000.0, "block", 16);
  std::ofstream(p.config, std::ios::app) << "  stages:\n    adaptive:\n      enabled: " << (adaptive ? "true" : "false")
                                         << "\n    publish:\n      weights: " << (adaptive ? "true" : "false") << "\n";
  // device.cpu_lanes goes under the device section write_daemon_config wrote.
  std::string text = slurp_file(p.config);
  const std::string device = "device:\n  backend: cpu\n";
  text.replace(text.find(device), device.size(), device + "  cpu_lanes: " + std::to_string(lanes) + "\n");
  std::ofstream(p.config) << text;
  return p;
}

// Frames 0 … sent − 1 of the configured scenario's shape (16 elements × 64 snapshots × 8 cells),
// drawn with a fresh seed under `label`, pushed to the feed.
void send_frames(stages::ZmqFramePublisher& feed, const char* label, int sent) {
  config::ScenarioConfig scenario;
  scenario.elements = 16;
  scenario.snapshots = 64;
  scenario.cells = 8;
  scenario.seed = std::int64_t(fresh_seed(label) & 0x7fffffff);
  stages::ScenarioGenerator generator(scenario);
  for (int s = 0; s < sent; ++s) feed.send(generator.frame(std::uint64_t(s)));
}

TEST(DaemonLanes, ThreeCpuLanesPublishEveryResultOnceInSequenceOrder) {
  ScratchDir dir;
  const auto p = write_lanes_config(dir, 3, /*adaptive=*/false);
  zmq::context_t context;
  stages::ZmqFramePublisher feed(p.feed, stages::ZmqFramePublisher::Pattern::push);
  Child daemon({COVFLOWD, "--config", p.config.string()}, p.out, p.err);
  zmq::socket_t results(context, zmq::socket_type::sub), reports(context, zmq::socket_type::sub);
  results.set(zmq::sockopt::subscribe, "result");
  reports.set(zmq::sockopt::subscribe, "latency");
  results.connect(p.results);
  reports.connect(p.reports);

  const json status = wait_until_up(context, daemon, p);
  ASSERT_FALSE(status.is_null());
  EXPECT_EQ(status["result"]["lanes"], json::array({"cpu:0", "cpu:1", "cpu:2"})) << status.dump();
  EXPECT_EQ(status["result"]["single_lane_reason"], "") << status.dump();
  zmq::pollitem_t report_item{reports.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&report_item, 1, 5000ms);
  ASSERT_TRUE(report_item.revents & ZMQ_POLLIN) << "no latency report within 5 s";
  std::this_thread::sleep_for(200ms);

  constexpr int sent = 90;
  send_frames(feed, "covflowd lanes scenario", sent);

  std::vector<std::uint64_t> received;
  json last_report;
  const auto until = std::chrono::steady_clock::now() + 90s;
  while (received.size() < std::size_t(sent) && std::chrono::steady_clock::now() < until) {
    zmq::pollitem_t items[2] = {{results.handle(), 0, ZMQ_POLLIN, 0}, {reports.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, 200ms);
    std::vector<zmq::message_t> parts;
    if (items[0].revents & ZMQ_POLLIN) {
      ASSERT_TRUE(zmq::recv_multipart(results, std::back_inserter(parts)));
      ASSERT_EQ(parts.size(), 2u);
      received.push_back(json::parse(parts[1].to_string_view()).at("seq").get<std::uint64_t>());
    }
    parts.clear();
    if (items[1].revents & ZMQ_POLLIN && zmq::recv_multipart(reports, std::back_inserter(parts)) && parts.size() == 2)
      last_report = json::parse(parts[1].to_string_view());
  }
  std::vector<std::uint64_t> expected;
  for (int s = 0; s < sent; ++s) expected.push_back(std::uint64_t(s));
  EXPECT_EQ(received, expected) << "stderr:\n" << slurp_file(p.err);  // each once, in order

  // The counters once every frame is through: per lane, and the reorder buffer.
  json stats;
  for (int i = 0; i < 100; ++i) {
    stats = control(context, p.control, "stats");
    if (!stats.is_null() && stats["result"]["frames"].value("done", 0) >= sent) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_FALSE(stats.is_null());
  const json& m = stats["result"];
  EXPECT_EQ(m["frames"]["done"], sent) << m.dump();
  ASSERT_EQ(m["lanes"].size(), 3u) << m.dump();
  std::uint64_t taken = 0;
  for (const auto& lane : m["lanes"]) taken += lane.value("taken", std::uint64_t(0));
  EXPECT_EQ(taken, std::uint64_t(sent)) << m.dump();
  EXPECT_EQ(m["reorder"]["in_order"].get<std::uint64_t>() + m["reorder"]["out_of_order"].get<std::uint64_t>(),
            std::uint64_t(sent));
  EXPECT_EQ(m["reorder"]["out_of_order"], 0) << m.dump();  // budget 2 s: nothing outlives it here

  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait(60s), 0) << slurp_file(p.err);
  const std::string printed = slurp_file(p.out);
  EXPECT_NE(printed.find("lane cpu:0"), std::string::npos) << printed;
  EXPECT_NE(printed.find("lane cpu:2"), std::string::npos) << printed;
  EXPECT_NE(printed.find("reorder: in order"), std::string::npos) << printed;
}

TEST(DaemonLanes, AChainThatKeepsStateSplitsEveryFramesCellsOverTheLanesAndSaysWhy) {
  ScratchDir dir;
  const auto p = write_lanes_config(dir, 3, /*adaptive=*/true);
  zmq::context_t context;
  stages::ZmqFramePublisher feed(p.feed, stages::ZmqFramePublisher::Pattern::push);
  Child daemon({COVFLOWD, "--config", p.config.string()}, p.out, p.err);
  zmq::socket_t results(context, zmq::socket_type::sub);
  results.set(zmq::sockopt::subscribe, "result");
  results.connect(p.results);
  const json status = wait_until_up(context, daemon, p);
  ASSERT_FALSE(status.is_null());
  EXPECT_EQ(status["result"]["lanes"], json::array({"cpu:0", "cpu:1", "cpu:2"})) << status.dump();
  EXPECT_EQ(status["result"]["single_lane_reason"], "") << status.dump();
  EXPECT_NE(status["result"].value("cells_split_reason", "").find("adaptive"), std::string::npos) << status.dump();
  std::this_thread::sleep_for(200ms);  // the SUB socket's subscription reaches the daemon

  constexpr int sent = 30;
  send_frames(feed, "covflowd split cells scenario", sent);

  // Every frame's result once, in order, with every cell's beam computed (whichever lane ran it).
  std::vector<std::uint64_t> received;
  std::vector<std::string> incomplete;
  const auto until = std::chrono::steady_clock::now() + 90s;
  while (received.size() < std::size_t(sent) && std::chrono::steady_clock::now() < until) {
    zmq::pollitem_t item{results.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, 200ms);
    if (!(item.revents & ZMQ_POLLIN)) continue;
    std::vector<zmq::message_t> parts;
    ASSERT_TRUE(zmq::recv_multipart(results, std::back_inserter(parts)));
    ASSERT_EQ(parts.size(), 2u);
    const json r = json::parse(parts[1].to_string_view());
    received.push_back(r.at("seq").get<std::uint64_t>());
    // weights: [cells][looks][channels][re, im], NaN (null) where not computed.
    const json& weights = r.at("weights");
    bool whole = weights.is_array() && weights.size() == 8;
    for (std::size_t c = 0; whole && c < weights.size(); ++c)
      whole = weights[c].size() == 1 && weights[c][0].size() == 16 && weights[c][0][15].size() == 2 &&
              weights[c][0][15][0].is_number();
    if (!whole) incomplete.push_back(r.dump());
  }
  std::vector<std::uint64_t> expected;
  for (int s = 0; s < sent; ++s) expected.push_back(std::uint64_t(s));
  EXPECT_EQ(received, expected) << "stderr:\n" << slurp_file(p.err);
  EXPECT_EQ(incomplete, std::vector<std::string>{});
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait(60s), 0) << slurp_file(p.err);
  EXPECT_NE(slurp_file(p.err).find("every lane takes every frame"), std::string::npos) << slurp_file(p.err);
}

}  // namespace
}  // namespace covflow::test

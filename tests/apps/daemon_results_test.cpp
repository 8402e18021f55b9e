// Results on disk, both ways (docs/zmq.md, "Results on disk"): covflowd's own
// pipeline.stages.publish.results_path, and `covflow record-results` subscribed to a running
// daemon. Each file is read back line by line: every line parses, has a documented topic and the
// very message object; the results come in order, one per published frame; the reports end with
// the final one. On the CPU backend, over ipc sockets in a scratch directory.
#include "daemon_e2e.hpp"

namespace covflow::test {
namespace {

struct Line {
  std::string topic;
  json message;
};

// Every line of a JSON Lines file, each checked for the documented form.
std::vector<Line> read_lines(const std::filesystem::path& path) {
  std::vector<Line> lines;
  std::ifstream in(path);
  std::string text;
  std::size_t number = 0;
  while (std::getline(in, text)) {
    ++number;
    const json line = json::parse(text, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(line.is_object()) << path << ":" << number << ": " << text.substr(0, 200);
    if (!line.is_object()) continue;
    EXPECT_EQ(line.size(), 2u) << path << ":" << number;
    const std::string topic = line.value("topic", "");
    EXPECT_TRUE(topic == "result" || topic == "latency") << path << ":" << number << ": topic " << topic;
    EXPECT_TRUE(line.contains("message") && line["message"].is_object()) << path << ":" << number;
    lines.push_back({topic, line.value("message", json::object())});
  }
  return lines;
}

struct RunDir {
  DaemonFixturePaths paths;
  ScratchDir dir;
};

// The daemon's sockets in the scratch directory (ipc), the CPU backend, a small scenario, and `body`.
void write_config(RunDir& s, const std::string& body) {
  auto& p = s.paths;
  p.config = s.dir / "covflowd.yaml";
  p.out = s.dir / "covflowd.out";
  p.err = s.dir / "covflowd.err";
  const std::string base = "ipc://" + s.dir.path().string() + "/";
  p.results = base + "results";
  p.reports = base + "reports";
  p.control = base + "control";
  std::ofstream(p.config) << "daemon:\n  results_endpoint: " << p.results << "\n  reports_endpoint: " << p.reports
                          << "\n  control_endpoint: " << p.control
                          << "\n  report_interval_ms: 100\ndevice:\n  backend: cpu\nscenario:\n  cells: 4\n  snapshots: 32\n"
                          << body;
}

TEST(DaemonResults, TheResultsFileHoldsEveryPublishedFrameInOrderAndTheReportsEndingWithTheFinalOne) {
  RunDir s;
  // A file from an earlier run is at the path: it is kept, the results go beside it.
  std::ofstream(s.dir / "run.jsonl") << "earlier run\n";
  write_config(s, "pipeline:\n  budget_ms: 1000\n  stages:\n    adaptive:\n      beam_pattern_points: 37\n"
                  "    publish:\n      results_path: " + (s.dir / "run.jsonl").string() + "\n");
  constexpr int frames = 12;
  Child daemon({COVFLOWD, "--config", s.paths.config.string(), "--frames", std::to_string(frames)}, s.paths.out, s.paths.err);
  ASSERT_EQ(daemon.wait(120s), 0) << slurp_file(s.paths.err);
  EXPECT_EQ(slurp_file(s.dir / "run.jsonl"), "earlier run\n");
  const std::string log = slurp_file(s.paths.err);
  EXPECT_NE(log.find("recording results to " + (s.dir / "run.1.jsonl").string()), std::string::npos) << log;

  const std::vector<Line> lines = read_lines(s.dir / "run.1.jsonl");
  ASSERT_FALSE(lines.empty());
  const Line& last = lines.back();
  ASSERT_EQ(last.topic, "latency") << "the final report is the last line";
  EXPECT_TRUE(last.message.value("final", false)) << last.message.dump();
  const json& counts = last.message.at("frames");
  const std::uint64_t done = counts.at("done"), dropped = counts.at("dropped");
  EXPECT_EQ(done + dropped, std::uint64_t(frames)) << counts.dump();

  std::uint64_t results = 0, reports = 0, finals = 0;
  std::int64_t previous_seq = -1;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const Line& line = lines[i];
    if (line.topic == "latency") {
      ++reports;
      finals += line.message.value("final", false) ? 1 : 0;
      EXPECT_EQ(line.message.at("report").get<std::uint64_t>(), reports) << "line " << i + 1;
      continue;
    }
    ++results;
    const std::int64_t seq = line.message.at("seq");
    EXPECT_GT(seq, previous_seq) << "line " << i + 1 << ": results out of order";
    previous_seq = seq;
    // The beam patterns: [cells][looks][points], 0 dB at the look (5°, point 19 of 37 at 5° steps).
    const json& pattern = line.message.at("beam_pattern_db");
    ASSERT_EQ(pattern.size(), 4u) << "line " << i + 1;
    for (const auto& cell : pattern) {
      ASSERT_EQ(cell.size(), 1u);
      ASSERT_EQ(cell[0].size(), 37u);
      ASSERT_TRUE(cell[0][19].is_number()) << cell.dump();
      EXPECT_NEAR(cell[0][19].get<double>(), 0.0, 1e-3) << "line " << i + 1;
    }
  }
  EXPECT_EQ(results, done) << "one result line per published frame";
  EXPECT_EQ(finals, 1u);
  // Everything before the final report was written before it was taken, and nothing was left out.
  const json& recording = last.message.at("results_recording");
  EXPECT_EQ(recording.at("written").get<std::uint64_t>(), lines.size() - 1) << recording.dump();
  EXPECT_EQ(recording.at("left_out"), 0) << recording.dump();
  EXPECT_EQ(recording.at("failed"), 0) << recording.dump();
  EXPECT_EQ(last.message.at("recording").at("written"), 0) << "no frame file was recorded";
}

TEST(DaemonResults, AResultsPathThatCannotBeCreatedIsRefusedAtStartNamingTheKey) {
  RunDir s;
  write_config(s, "pipeline:\n  stages:\n    publish:\n      results_path: " + (s.dir / "missing" / "run.jsonl").string() + "\n");
  Child daemon({COVFLOWD, "--config", s.paths.config.string()}, s.paths.out, s.paths.err);
  EXPECT_EQ(daemon.wait(60s), 5);
  const std::string log = slurp_file(s.paths.err);
  EXPECT_NE(log.find("pipeline.stages.publish.results_path"), std::string::npos) << log;
  EXPECT_NE(log.find((s.dir / "missing" / "run.jsonl").string()), std::string::npos) << log;
}

// A reload that keeps results_path keeps writing the same file; one that changes it switches to the
// new file, the old one keeping what came before (no final report), the new one going on from there
// and ending with the final report.
TEST(DaemonResults, AReloadKeepsOrSwitchesTheResultsFile) {
  RunDir s;
  const std::string first = (s.dir / "a.jsonl").string(), second = (s.dir / "b.jsonl").string();
  const auto body = [](int queue_depth, const std::string& path) {
    return "pipeline:\n  budget_ms: 1000\n  queue_depth: " + std::to_string(queue_depth) +
           "\n  stages:\n    publish:\n      results_path: " + path + "\n";
  };
  write_config(s, body(8, first));
  zmq::context_t context;
  Child daemon({COVFLOWD, "--config", s.paths.config.string()}, s.paths.out, s.paths.err);
  ASSERT_FALSE(wait_until_up(context, daemon, s.paths).is_null());
  // Waits until the file at `path` holds `count` result lines.
  const auto wait_for_results = [&](const std::string& path, std::size_t count) {
    const auto until = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < until) {
      std::size_t results = 0;
      std::ifstream in(path);
      for (std::string line; std::getline(in, line);) results += line.starts_with("{\"topic\":\"result\"") ? 1 : 0;
      if (results >= count) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  };
  ASSERT_TRUE(wait_for_results(first, 3)) << slurp_file(s.paths.err);

  write_config(s, body(7, first));  // the chain is rebuilt, the path kept
  json reply = control(context, s.paths.control, "reload", 60s);
  ASSERT_TRUE(!reply.is_null() && reply.value("ok", false)) << reply.dump() << slurp_file(s.paths.err);
  EXPECT_EQ(reply["result"]["applied"], json::array({"pipeline"})) << reply.dump();
  const std::size_t before_switch = read_lines(first).size();
  ASSERT_TRUE(wait_for_results(first, before_switch + 3)) << "still the same file after the reload";

  write_config(s, body(7, second));
  reply = control(context, s.paths.control, "reload", 60s);
  ASSERT_TRUE(!reply.is_null() && reply.value("ok", false)) << reply.dump() << slurp_file(s.paths.err);
  EXPECT_EQ(reply["result"]["applied"], json::array({"pipeline", "results to " + second})) << reply.dump();
  const json status = control(context, s.paths.control, "status");
  EXPECT_EQ(status["result"].value("results_file", ""), second) << status.dump();
  ASSERT_TRUE(wait_for_results(second, 3)) << slurp_file(s.paths.err);
  daemon.signal(SIGTERM);
  ASSERT_EQ(daemon.wait(60s), 0) << slurp_file(s.paths.err);

  const std::vector<Line> old_lines = read_lines(first), new_lines = read_lines(second);
  std::int64_t last_old_seq = -1;
  for (const Line& line : old_lines) {
    if (line.topic == "result") last_old_seq = line.message.at("seq");
    EXPECT_FALSE(line.topic == "latency" && line.message.value("final", false)) << "the final report went to the old file";
  }
  ASSERT_FALSE(new_lines.empty());
  for (const Line& line : new_lines)
    if (line.topic == "result") {
      EXPECT_GT(line.message.at("seq").get<std::int64_t>(), last_old_seq) << "a result in both files, or out of order";
      break;
    }
  EXPECT_EQ(new_lines.back().topic, "latency");
  EXPECT_TRUE(new_lines.back().message.value("final", false));
}

TEST(RecordResults, WritesARunningDaemonsResultsAndReportsAsJsonLines) {
  RunDir s;
  write_config(s, "pipeline:\n  budget_ms: 1000\n");
  zmq::context_t context;
  Child daemon({COVFLOWD, "--config", s.paths.config.string()}, s.paths.out, s.paths.err);
  ASSERT_FALSE(wait_until_up(context, daemon, s.paths).is_null());

  // --frames: exactly that many results, then exit 0.
  const auto first = s.dir / "first.jsonl", first_err = s.dir / "first.err";
  Child counted({COVFLOW_CLI, "record-results", "--connect", s.paths.results, "--reports", s.paths.reports, "--out",
                 first.string(), "--frames", "5"},
                s.dir / "first.out", first_err);
  ASSERT_EQ(counted.wait(60s), 0) << slurp_file(first_err);
  std::vector<Line> lines = read_lines(first);
  std::int64_t previous_seq = -1;
  int results = 0;
  for (const Line& line : lines) {
    if (line.topic != "result") continue;
    ++results;
    EXPECT_GT(line.message.at("seq").get<std::int64_t>(), previous_seq);
    previous_seq = line.message.at("seq");
    EXPECT_EQ(line.message.at("cells"), 4);
  }
  EXPECT_EQ(results, 5);
  EXPECT_NE(slurp_file(first_err).find("5 results and"), std::string::npos) << slurp_file(first_err);

  // --seconds: ends by itself.
  const auto timed = s.dir / "timed.jsonl";
  Child seconds({COVFLOW_CLI, "record-results", "--connect", s.paths.results, "--out", timed.string(), "--seconds", "0.5"},
                s.dir / "timed.out", s.dir / "timed.err");
  EXPECT_EQ(seconds.wait(30s), 0) << slurp_file(s.dir / "timed.err");
  for (const Line& line : read_lines(timed)) EXPECT_EQ(line.topic, "result");

  // An existing file is refused (exit 5) and kept.
  const std::string kept = slurp_file(first);
  Child refused({COVFLOW_CLI, "record-results", "--connect", s.paths.results, "--out", first.string(), "--frames", "1"},
                s.dir / "refused.out", s.dir / "refused.err");
  EXPECT_EQ(refused.wait(30s), 5) << slurp_file(s.dir / "refused.err");
  EXPECT_NE(slurp_file(s.dir / "refused.err").find(first.string()), std::string::npos);
  EXPECT_EQ(slurp_file(first), kept);

  // Without a count it runs until the daemon's final report, the file's last line.
  const auto second = s.dir / "second.jsonl", second_err = s.dir / "second.err";
  Child until_final({COVFLOW_CLI, "record-results", "--connect", s.paths.results, "--reports", s.paths.reports, "--out",
                     second.string()},
                    s.dir / "second.out", second_err);
  // Once a result and a report have arrived, both subscriptions are joined.
  const auto until = std::chrono::steady_clock::now() + 60s;
  bool joined = false;
  while (!joined && std::chrono::steady_clock::now() < until && until_final.running()) {
    const std::string text = slurp_file(second);
    joined = text.find("{\"topic\":\"result\"") != std::string::npos && text.find("{\"topic\":\"latency\"") != std::string::npos;
    if (!joined) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(joined) << slurp_file(second_err);
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait(60s), 0) << slurp_file(s.paths.err);
  ASSERT_EQ(until_final.wait(30s), 0) << slurp_file(second_err);
  EXPECT_NE(slurp_file(second_err).find("the daemon sent its final report"), std::string::npos) << slurp_file(second_err);
  lines = read_lines(second);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().topic, "latency");
  EXPECT_TRUE(lines.back().message.value("final", false)) << lines.back().message.dump();
}

}  // namespace
}  // namespace covflow::test

// Many hosts in one, as separate processes on ipc sockets (docs/scale.md): three covflowd workers
// (CPU backend) with PULL inputs, `covflow feed` PUSHing a frame file made by `covflow synth`, and
// `covflow collect` ordering the workers' results onto one PUB socket. Every frame's result comes
// out exactly once and in order; a worker killed mid-run loses only the frames it held, and the
// collector counts them as missing while the others' results all come out, still in order.
#include <signal.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "covflow/replay/reader.hpp"
#include "daemon_e2e.hpp"

namespace covflow::test {
namespace {

constexpr int worker_count = 3;

struct Worker {
  DaemonFixturePaths paths;
  std::unique_ptr<Child> process;
  std::unique_ptr<zmq::socket_t> watch;  // the test's own SUB on its results and reports
  std::set<std::uint64_t> published;     // the sequences it published, as the test saw them
};

// A small frame shape, the same in the file and in every worker's ingest.zmq.shape.
constexpr int elements = 8, snapshots = 32, cells = 4;

class ScaleOut : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = "ipc://" + dir_.path().string() + "/";
    feed_endpoint_ = base_ + "feed";
    publish_endpoint_ = base_ + "collected";
    collect_reports_endpoint_ = base_ + "collect-reports";
  }

  // The frame file, written by `covflow synth`.
  std::string make_frames(int frames) {
    const auto path = dir_ / "frames.cvf";
    Child synth({COVFLOW_CLI, "synth", "-o", path.string(), "-n", std::to_string(frames), "--set",
                 "scenario.elements=" + std::to_string(elements), "--set", "scenario.snapshots=" + std::to_string(snapshots),
                 "--set", "scenario.cells=" + std::to_string(cells)},
                dir_ / "synth.out", dir_ / "synth.err");
    EXPECT_EQ(synth.wait(60s), 0) << slurp_file(dir_ / "synth.err");
    return path.string();
  }

  void start_workers() {
    for (int w = 0; w < worker_count; ++w) {
      Worker& worker = workers_[std::size_t(w)];
      const std::string name = fmt::format("w{}", w);
      auto& p = worker.paths;
      p.config = dir_ / (name + ".yaml");
      p.out = dir_ / (name + ".out");
      p.err = dir_ / (name + ".err");
      p.results = base_ + name + "-results";
      p.reports = base_ + name + "-reports";
      p.control = base_ + name + "-control";
      p.feed = feed_endpoint_;
      // block: a worker never drops; its backlog waits in its socket (and the feed's).
      std::ofstream(p.config) << "daemon:\n"
                              << "  results_endpoint: " << p.results << "\n"
                              << "  reports_endpoint: " << p.reports << "\n"
                              << "  control_endpoint: " << p.control << "\n"
                              << "  report_interval_ms: 200\n"
                              << "device:\n  backend: cpu\n"
                              << "ingest:\n  source: zmq\n  zmq:\n    endpoint: " << p.feed << "\n    pattern: pull\n"
                              << "    shape: {elements: " << elements << ", snapshots: " << snapshots << ", cells: " << cells
                              << "}\n"
                              << "pipeline:\n  budget_ms: 2000\n  queue_depth: 4\n  overflow: block\n";
      worker.process = std::make_unique<Child>(std::vector<std::string>{COVFLOWD, "--config", p.config.string()}, p.out, p.err);
    }
    for (Worker& worker : workers_) {
      ASSERT_FALSE(wait_until_up(context_, *worker.process, worker.paths).is_null());
      worker.watch = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::sub);
      worker.watch->set(zmq::sockopt::subscribe, "");
      worker.watch->connect(worker.paths.results);
      worker.watch->connect(worker.paths.reports);
    }
    // A latency report from each proves the test's SUB joined (results connected at the same moment).
    for (Worker& worker : workers_) {
      bool report = false;
      const auto until = std::chrono::steady_clock::now() + 10s;
      while (!report && std::chrono::steady_clock::now() < until) {
        std::vector<zmq::message_t> parts;
        zmq::pollitem_t item{worker.watch->handle(), 0, ZMQ_POLLIN, 0};
        zmq::poll(&item, 1, 100ms);
        if ((item.revents & ZMQ_POLLIN) && zmq::recv_multipart(*worker.watch, std::back_inserter(parts)))
          report = parts[0].to_string_view() == "latency";
      }
      ASSERT_TRUE(report) << "no latency report from " << worker.paths.reports;
    }
  }

  // `covflow collect` on the three workers, and the test's SUB on its output and counters,
  // joined before the first frame is fed (the collector reports all three workers connected).
  void start_collector(const std::vector<std::string>& options) {
    std::vector<std::string> argv{COVFLOW_CLI, "collect", "--publish", publish_endpoint_, "--reports-publish",
                                  collect_reports_endpoint_, "--interval-ms", "100"};
    for (const Worker& worker : workers_) {
      argv.push_back("--connect");
      argv.push_back(worker.paths.results);
    }
    argv.insert(argv.end(), options.begin(), options.end());
    collector_ = std::make_unique<Child>(argv, dir_ / "collect.out", dir_ / "collect.err");
    collected_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::sub);
    collected_->set(zmq::sockopt::subscribe, "result");
    collected_->connect(publish_endpoint_);
    zmq::socket_t reports(context_, zmq::socket_type::sub);
    reports.set(zmq::sockopt::subscribe, "collect");
    reports.connect(collect_reports_endpoint_);
    int connected = 0;
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (connected < worker_count && std::chrono::steady_clock::now() < until && collector_->running()) {
      zmq::pollitem_t item{reports.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, 100ms);
      std::vector<zmq::message_t> parts;
      if ((item.revents & ZMQ_POLLIN) && zmq::recv_multipart(reports, std::back_inserter(parts)) && parts.size() == 2)
        connected = json::parse(parts[1].to_string_view()).at("workers_connected").get<int>();
    }
    ASSERT_EQ(connected, worker_count) << slurp_file(dir_ / "collect.err");
    std::this_thread::sleep_for(200ms);  // the subscriptions travel to the workers
  }

  // Takes what arrived on the collector's output and on the workers' own results sockets.
  void drain(std::chrono::milliseconds wait) {
    std::vector<zmq::pollitem_t> items{{collected_->handle(), 0, ZMQ_POLLIN, 0}};
    for (Worker& worker : workers_)
      if (worker.watch) items.push_back({worker.watch->handle(), 0, ZMQ_POLLIN, 0});
    zmq::poll(items.data(), items.size(), wait);
    std::vector<zmq::message_t> parts;
    while (zmq::recv_multipart(*collected_, std::back_inserter(parts), zmq::recv_flags::dontwait)) {
      ASSERT_EQ(parts.size(), 2u);
      EXPECT_EQ(parts[0].to_string_view(), "result");
      collected_seqs_.push_back(json::parse(parts[1].to_string_view()).at("seq").get<std::uint64_t>());
      parts.clear();
    }
    for (Worker& worker : workers_) {
      if (!worker.watch) continue;
      parts.clear();
      while (zmq::recv_multipart(*worker.watch, std::back_inserter(parts), zmq::recv_flags::dontwait)) {
        if (parts[0].to_string_view() == "result")
          worker.published.insert(json::parse(parts[1].to_string_view()).at("seq").get<std::uint64_t>());
        parts.clear();
      }
    }
  }

  // The collector's final counters (its last line on stdout).
  json collector_counters() {
    std::string text = slurp_file(dir_ / "collect.out");
    while (!text.empty() && text.back() == '\n') text.pop_back();
    const auto line = text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
    return json::parse(line);
  }

  void stop_workers(int skip = -1) {
    for (int w = 0; w < worker_count; ++w) {
      if (w == skip) continue;
      workers_[std::size_t(w)].process->signal(SIGTERM);
      EXPECT_EQ(workers_[std::size_t(w)].process->wait(60s), 0) << slurp_file(workers_[std::size_t(w)].paths.err);
    }
  }

  ScratchDir dir_;
  zmq::context_t context_;
  std::string base_, feed_endpoint_, publish_endpoint_, collect_reports_endpoint_;
  std::array<Worker, worker_count> workers_;
  std::unique_ptr<Child> collector_;
  std::unique_ptr<zmq::socket_t> collected_;
  std::vector<std::uint64_t> collected_seqs_;
};

TEST_F(ScaleOut, ThreeWorkersEveryResultOnceInOrder) {
  constexpr int frames = 150;
  const std::string file = make_frames(frames);
  ASSERT_NO_FATAL_FAILURE(start_workers());
  // No --first-seq: the collector holds the first results for up to --wait-ms to find the smallest.
  ASSERT_NO_FATAL_FAILURE(start_collector({"--frames", std::to_string(frames), "--wait-ms", "3000"}));
  // As fast as the workers take them: their backlogs make the results arrive out of order.
  Child feed({COVFLOW_CLI, "feed", file, "--push", feed_endpoint_, "--rate", "0", "--workers", "3"}, dir_ / "feed.out",
             dir_ / "feed.err");

  const auto until = std::chrono::steady_clock::now() + 90s;
  while (collected_seqs_.size() < std::size_t(frames) && std::chrono::steady_clock::now() < until) drain(100ms);
  EXPECT_EQ(feed.wait(30s), 0) << slurp_file(dir_ / "feed.err");
  EXPECT_NE(slurp_file(dir_ / "feed.err").find("150 frames sent"), std::string::npos) << slurp_file(dir_ / "feed.err");
  EXPECT_EQ(collector_->wait(30s), 0) << slurp_file(dir_ / "collect.err");
  drain(100ms);

  std::vector<std::uint64_t> expected(frames);
  for (int s = 0; s < frames; ++s) expected[std::size_t(s)] = std::uint64_t(s);
  EXPECT_EQ(collected_seqs_, expected) << slurp_file(dir_ / "collect.err");

  // ZeroMQ spread the frames: each worker did some, none twice.
  std::size_t total = 0;
  std::set<std::uint64_t> all;
  for (const Worker& worker : workers_) {
    EXPECT_GT(worker.published.size(), 0u) << worker.paths.results << " got no frame";
    total += worker.published.size();
    all.insert(worker.published.begin(), worker.published.end());
  }
  EXPECT_EQ(total, std::size_t(frames));
  EXPECT_EQ(all.size(), std::size_t(frames));

  const json counters = collector_counters();
  std::printf("[ note     ] collector: %s\n", counters.dump().c_str());
  EXPECT_EQ(counters["published"], frames) << counters.dump();
  EXPECT_EQ(counters["received"], frames) << counters.dump();
  EXPECT_EQ(counters["missing"], 0) << counters.dump();
  EXPECT_EQ(counters["duplicates"], 0) << counters.dump();
  EXPECT_EQ(counters["late"], 0) << counters.dump();
  EXPECT_EQ(counters["first_seq"], 0) << counters.dump();
  stop_workers();
}

TEST_F(ScaleOut, KilledWorkerLosesOnlyTheFramesItHeldCountedMissing) {
  constexpr int frames = 400;
  const std::string file = make_frames(frames);
  ASSERT_NO_FATAL_FAILURE(start_workers());
  ASSERT_NO_FATAL_FAILURE(
      start_collector({"--frames", std::to_string(frames), "--first-seq", "0", "--window", "32", "--wait-ms", "20000"}));
  Child feed({COVFLOW_CLI, "feed", file, "--push", feed_endpoint_, "--rate", "200", "--workers", "3"}, dir_ / "feed.out",
             dir_ / "feed.err");

  // Worker 1 is stopped mid-run, so that frames pile up for it, then killed with them.
  constexpr int victim = 1;
  const auto until = std::chrono::steady_clock::now() + 90s;
  while (collected_seqs_.size() < 40 && std::chrono::steady_clock::now() < until) drain(20ms);
  workers_[victim].process->signal(SIGSTOP);
  while (collected_seqs_.size() < 120 && std::chrono::steady_clock::now() < until) drain(20ms);
  drain(0ms);
  workers_[victim].process->signal(SIGKILL);
  EXPECT_EQ(workers_[victim].process->wait(10s), 128 + SIGKILL);
  workers_[victim].watch.reset();

  EXPECT_EQ(feed.wait(60s), 0) << slurp_file(dir_ / "feed.err");
  // The collector ends once every sequence is published or given up; when the last ones were the
  // dead worker's (nothing after them to show the gap), it is stopped and counts them at the end.
  if (collector_->wait(30s) == -1) collector_->signal(SIGTERM);
  EXPECT_EQ(collector_->wait(30s), 0) << slurp_file(dir_ / "collect.err");
  const json counters = collector_counters();
  std::printf("[ note     ] collector: %s\n", counters.dump().c_str());
  const auto published = counters["published"].get<std::uint64_t>();
  const auto drain_until = std::chrono::steady_clock::now() + 10s;
  while (collected_seqs_.size() < published && std::chrono::steady_clock::now() < drain_until) drain(50ms);

  // In order, each once, and what came out is what the collector says it published.
  EXPECT_TRUE(std::adjacent_find(collected_seqs_.begin(), collected_seqs_.end(), std::greater_equal<>()) ==
              collected_seqs_.end())
      << "out of order or repeated";
  EXPECT_EQ(collected_seqs_.size(), published) << counters.dump();
  // Every result the live workers published came out.
  const std::set<std::uint64_t> out(collected_seqs_.begin(), collected_seqs_.end());
  for (int w = 0; w < worker_count; ++w) {
    if (w == victim) continue;
    for (const std::uint64_t seq : workers_[std::size_t(w)].published) EXPECT_TRUE(out.count(seq)) << "lost " << seq;
  }
  // The victim's results before it stopped came out too; what is missing is what it held.
  EXPECT_GT(workers_[victim].published.size(), 0u);
  for (const std::uint64_t seq : workers_[victim].published) EXPECT_TRUE(out.count(seq)) << "lost " << seq;
  const auto missing = counters["missing"].get<std::uint64_t>();
  EXPECT_GT(missing, 0u) << counters.dump();
  EXPECT_EQ(published + missing, std::uint64_t(frames)) << counters.dump();
  EXPECT_EQ(counters["late"], 0) << counters.dump();
  EXPECT_EQ(counters["duplicates"], 0) << counters.dump();
  EXPECT_NE(slurp_file(dir_ / "collect.err").find(workers_[victim].paths.results + " disconnected"), std::string::npos)
      << slurp_file(dir_ / "collect.err");

  // The live workers finish what they took: nothing dropped inside them.
  stop_workers(victim);
  for (int w = 0; w < worker_count; ++w) {
    if (w == victim) continue;
    const std::string report = slurp_file(workers_[std::size_t(w)].paths.out);
    EXPECT_NE(report.find("dropped 0"), std::string::npos) << report;
  }
}

// covflow feed on its own, into `covflow record --pattern pull`: a damaged record is named and
// skipped (exit 4) while the others go; --loop keeps the sequence numbers increasing; a missing
// file or one that is not a frame file is refused with its name.
TEST_F(ScaleOut, FeedSkipsDamageNamesItAndKeepsSequencesIncreasingWhenLooping) {
  constexpr int frames = 10;
  const std::string file = make_frames(frames);
  {
    // Record 5's payload: 32-byte file header, records of 56 + elements × snapshots × cells × 16 bytes.
    std::fstream damage(file, std::ios::in | std::ios::out | std::ios::binary);
    damage.seekp(32 + 5 * (56 + elements * snapshots * cells * 16) + 56 + 100);
    damage.write("XXXX", 4);
  }
  const auto recording = dir_ / "received.cvf";
  Child record({COVFLOW_CLI, "record", "--connect", feed_endpoint_, "--pattern", "pull", "--out", recording.string(),
                "--frames", "20"},
               dir_ / "record.out", dir_ / "record.err");
  Child feed({COVFLOW_CLI, "feed", file, "--push", feed_endpoint_, "--rate", "0", "--loop", "--frames", "20"},
             dir_ / "feed.out", dir_ / "feed.err");
  EXPECT_EQ(feed.wait(60s), 4) << slurp_file(dir_ / "feed.err");
  const std::string feed_err = slurp_file(dir_ / "feed.err");
  EXPECT_NE(feed_err.find("frames.cvf: payload CRC: offset " + std::to_string(32 + 5 * (56 + elements * snapshots * cells * 16))),
            std::string::npos)
      << feed_err;
  EXPECT_NE(feed_err.find("20 frames sent"), std::string::npos) << feed_err;
  EXPECT_EQ(record.wait(60s), 0) << slurp_file(dir_ / "record.err");
  // Pass 1: 0..9 without 5; pass 2: 10..19 without 15; pass 3: 20, 21.
  std::vector<std::uint64_t> expected;
  for (std::uint64_t s = 0; s < 22; ++s)
    if (s % 10 != 5) expected.push_back(s);
  replay::Reader reader{recording};
  std::vector<std::uint64_t> sequences;
  while (auto frame = reader.next()) sequences.push_back(frame->header.sequence);
  EXPECT_EQ(sequences, expected);

  const auto missing = (dir_ / "absent.cvf").string();
  Child absent({COVFLOW_CLI, "feed", missing, "--push", base_ + "other"}, dir_ / "absent.out", dir_ / "absent.err");
  EXPECT_EQ(absent.wait(30s), 5);
  EXPECT_NE(slurp_file(dir_ / "absent.err").find(missing + ": cannot open"), std::string::npos) << slurp_file(dir_ / "absent.err");
  std::ofstream(dir_ / "text.cvf") << "not a frame file\n";
  Child foreign({COVFLOW_CLI, "feed", (dir_ / "text.cvf").string(), "--push", base_ + "other"}, dir_ / "foreign.out",
                dir_ / "foreign.err");
  EXPECT_EQ(foreign.wait(30s), 4);
  EXPECT_NE(slurp_file(dir_ / "foreign.err").find("not a covflow frame file"), std::string::npos)
      << slurp_file(dir_ / "foreign.err");
}

}  // namespace
}  // namespace covflow::test

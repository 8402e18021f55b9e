// Results on disk (stages/results_recorder.hpp): the JSON Lines file's exact lines, an existing
// file kept, a full queue leaving lines out (counted) rather than waiting for a blocked sink, the
// lines in order, a failing write counted while the recorder goes on, and the daemon's file beside
// an existing one or refused with the key named.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "covflow/pipeline/metrics.hpp"
#include "covflow/replay/error.hpp"
#include "covflow/stages/results_recorder.hpp"
#include "replay_test_support.hpp"

namespace covflow::stages {
namespace {

using namespace std::chrono_literals;
using test::ScratchDir;

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A sink that keeps its lines and, while held, blocks every append until released — a disk that
// stopped answering. It can also refuse the lines whose message is "fail".
class HeldSink final : public ResultsSink {
 public:
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    bool held = false;
    int blocked = 0;  // appends waiting now
    std::vector<std::string> lines;
  };
  explicit HeldSink(std::shared_ptr<State> state) : state_(std::move(state)) {}
  void append(ResultsTopic topic, std::string_view message) override {
    std::unique_lock lock(state_->mutex);
    ++state_->blocked;
    state_->changed.notify_all();
    state_->changed.wait(lock, [&] { return !state_->held; });
    --state_->blocked;
    if (message == "fail") throw replay::IoError("held sink: refused");
    state_->lines.push_back(std::string(name(topic)) + " " + std::string(message));
  }
  std::string describe() const override { return "held sink"; }

 private:
  std::shared_ptr<State> state_;
};

TEST(ResultsFile, WritesOneLinePerMessageAndKeepsAnExistingFile) {
  ScratchDir dir;
  const auto path = dir / "run.jsonl";
  {
    ResultsFile file(path);
    file.append(ResultsTopic::result, R"({"seq":1,"doa_deg":[[5.0]]})");
    file.append(ResultsTopic::latency, R"({"report":1,"final":false})");
  }
  const std::string expected =
      "{\"topic\":\"result\",\"message\":{\"seq\":1,\"doa_deg\":[[5.0]]}}\n"
      "{\"topic\":\"latency\",\"message\":{\"report\":1,\"final\":false}}\n";
  EXPECT_EQ(slurp(path), expected);
  for (const auto& line : lines_of(expected)) {
    const auto parsed = nlohmann::json::parse(line);
    EXPECT_TRUE(parsed.at("message").is_object());
  }
  try {
    ResultsFile again(path);
    ADD_FAILURE() << "an existing file was opened";
  } catch (const replay::IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(path), expected) << "the existing file is kept";
  {
    ResultsFile overwrite(path, /*overwrite=*/true);
    overwrite.append(ResultsTopic::result, "{}");
  }
  EXPECT_EQ(slurp(path), "{\"topic\":\"result\",\"message\":{}}\n");
}

TEST(ResultsRecorder, AFullQueueLeavesLinesOutInsteadOfWaiting) {
  auto state = std::make_shared<HeldSink::State>();
  state->held = true;
  pipeline::Metrics metrics;
  ResultsRecorder recorder(std::make_unique<HeldSink>(state), /*queue_lines=*/2, &metrics);
  // The writer takes the first line and blocks in the sink; two more fill the queue.
  EXPECT_TRUE(recorder.offer(ResultsTopic::result, "1"));
  {
    std::unique_lock lock(state->mutex);
    ASSERT_TRUE(state->changed.wait_for(lock, 30s, [&] { return state->blocked == 1; })) << "the writer never took a line";
  }
  EXPECT_TRUE(recorder.offer(ResultsTopic::latency, "2"));
  EXPECT_TRUE(recorder.offer(ResultsTopic::result, "3"));
  // The queue is full and the sink still blocked: these return at once, left out and counted.
  EXPECT_FALSE(recorder.offer(ResultsTopic::result, "4"));
  EXPECT_FALSE(recorder.offer(ResultsTopic::latency, "5"));
  EXPECT_EQ(recorder.left_out(), 2u);
  EXPECT_EQ(recorder.written(), 0u);
  EXPECT_EQ(metrics.snapshot().results_recording.left_out, 2u);
  {
    std::lock_guard lock(state->mutex);
    state->held = false;
  }
  state->changed.notify_all();
  recorder.flush();
  EXPECT_EQ(recorder.written(), 3u);
  EXPECT_EQ(recorder.failed(), 0u);
  {
    std::lock_guard lock(state->mutex);
    EXPECT_EQ(state->lines, (std::vector<std::string>{"result 1", "latency 2", "result 3"}));
  }
  // Room again: taken, and written in order after the others.
  EXPECT_TRUE(recorder.offer(ResultsTopic::result, "6"));
  recorder.close();
  EXPECT_FALSE(recorder.offer(ResultsTopic::result, "7")) << "closed";
  const auto counts = metrics.snapshot().results_recording;
  EXPECT_EQ(counts.written, 4u);
  EXPECT_EQ(counts.left_out, 3u);
  EXPECT_EQ(counts.failed, 0u);
  const auto report = pipeline::to_json(metrics.snapshot());
  EXPECT_EQ(report.at("results_recording").at("written"), 4);
  EXPECT_EQ(report.at("results_recording").at("left_out"), 3);
  EXPECT_EQ(report.at("recording").at("written"), 0) << "the frame-file recording's counters are apart";
  std::lock_guard lock(state->mutex);
  EXPECT_EQ(state->lines.back(), "result 6");
}

TEST(ResultsRecorder, AFailedWriteIsCountedAndTheNextLinesGoOn) {
  auto state = std::make_shared<HeldSink::State>();
  pipeline::Metrics metrics;
  ResultsRecorder recorder(std::make_unique<HeldSink>(state), 8, &metrics);
  for (const char* message : {"a", "fail", "b", "fail", "c"}) EXPECT_TRUE(recorder.offer(ResultsTopic::result, message));
  recorder.close();
  EXPECT_EQ(recorder.written(), 3u);
  EXPECT_EQ(recorder.failed(), 2u);
  EXPECT_EQ(recorder.left_out(), 0u);
  EXPECT_EQ(metrics.snapshot().results_recording.failed, 2u);
  EXPECT_EQ(state->lines, (std::vector<std::string>{"result a", "result b", "result c"}));
}

TEST(ResultsRecording, AnExistingFileIsKeptAndAPathThatCannotBeCreatedNamesTheKey) {
  ScratchDir dir;
  const auto path = dir / "run.jsonl";
  std::ofstream(path) << "earlier run\n";
  {
    auto recorder = open_results_recording(path, nullptr);
    EXPECT_EQ(recorder->describe(), (dir / "run.1.jsonl").string());
    EXPECT_TRUE(recorder->offer(ResultsTopic::latency, R"({"report":1})"));
    recorder->close();
  }
  EXPECT_EQ(slurp(path), "earlier run\n");
  EXPECT_EQ(slurp(dir / "run.1.jsonl"), "{\"topic\":\"latency\",\"message\":{\"report\":1}}\n");
  try {
    open_results_recording(dir / "missing" / "run.jsonl", nullptr);
    ADD_FAILURE() << "a file in a missing directory was made";
  } catch (const replay::IoError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("pipeline.stages.publish.results_path"), std::string::npos) << what;
    EXPECT_NE(what.find((dir / "missing" / "run.jsonl").string()), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace covflow::stages

// covflow stats and covflow ctl against stand-in daemons on real sockets: the table shows what the
// report says, every control outcome has its exit code, and a silent daemon is reported as such.
#include <gtest/gtest.h>

#include <atomic>
#include <sstream>
#include <thread>

#include <zmq.hpp>

#include "common/daemon_cli.hpp"
#include "common/exit_codes.hpp"

namespace covflow {
namespace {

using nlohmann::json;

json sample_report() {
  return json{{"type", "latency"},
              {"uptime_s", 12.5},
              {"backend", "cpu"},
              {"input", "scenario"},
              {"frames_per_s", 99.5},
              {"frames", {{"in", 1203}, {"done", 1195}, {"late", 2}, {"dropped", 7}, {"in_flight", 1},
                          {"dropped_by_reason", {{"overflow_drop_oldest", 5}, {"shape", 2}, {"stage_error", 0}}}}},
              {"queue", {{"depth", 1}, {"capacity", 8}, {"max_depth", 6}}},
              {"stages", json::array({json{{"name", "covariance"}, {"count", 1195}, {"skipped", 0}, {"failed", 0},
                                           {"p50_ms", 0.4125}, {"p90_ms", 0.5}, {"p99_ms", 0.75}, {"p999_ms", 1.0},
                                           {"max_ms", 1.25}},
                                      json{{"name", "subspace"}, {"count", 1190}, {"skipped", 5}, {"failed", 0},
                                           {"p50_ms", 2.0}, {"p90_ms", 2.5}, {"p99_ms", 3.0}, {"p999_ms", 3.5},
                                           {"max_ms", 4.0}}})},
              {"end_to_end", {{"count", 1195}, {"p50_ms", 2.5}, {"p90_ms", 3.0}, {"p99_ms", 4.0}, {"p999_ms", 4.5},
                              {"max_ms", 5.0}}}};
}

TEST(FormatReport, ShowsCountersDropReasonsAndStagesInChainOrder) {
  const std::string text = cli::format_report(sample_report());
  EXPECT_NE(text.find("frames: in 1203  done 1195  late 2  dropped 7 (overflow_drop_oldest 5, shape 2)  in flight 1"),
            std::string::npos) << text;
  EXPECT_NE(text.find("queue: depth 1 of 8 (max 6); 99.5 frames/s"), std::string::npos) << text;
  const auto covariance = text.find("covariance"), subspace = text.find("subspace"), total = text.find("end to end");
  ASSERT_NE(covariance, std::string::npos);
  ASSERT_NE(subspace, std::string::npos);
  EXPECT_LT(covariance, subspace);  // chain order, not alphabetical by accident: covariance < subspace either way,
  EXPECT_LT(subspace, total);       // but the end-to-end row must come last
  EXPECT_NE(text.find("0.412"), std::string::npos) << text;  // p50 of covariance, 3 decimals
  EXPECT_NE(text.find("4.500"), std::string::npos) << text;  // p99.9 end to end
}

TEST(FormatReport, MissingFieldsShowAsDashes) {
  const std::string text = cli::format_report(json{{"frames", {{"in", 3}}}});
  EXPECT_NE(text.find("frames: in 3  done -  late -  dropped -  in flight -"), std::string::npos) << text;
}

TEST(Stats, PrintsReportsFromARealPublisher) {
  zmq::context_t context;
  zmq::socket_t pub(context, zmq::socket_type::pub);
  pub.bind("tcp://127.0.0.1:*");
  const std::string endpoint = pub.get(zmq::sockopt::last_endpoint);

  std::atomic<bool> done{false};
  std::thread publisher([&] {
    // PUB drops what is sent before the subscriber has joined: keep sending until it has read enough.
    while (!done) {
      const std::string body = sample_report().dump();
      pub.send(zmq::buffer(std::string_view("latency")), zmq::send_flags::sndmore);
      pub.send(zmq::buffer(body), zmq::send_flags::none);
      pub.send(zmq::buffer(std::string_view("result")), zmq::send_flags::sndmore);  // another topic: not shown
      pub.send(zmq::buffer(std::string_view("{}")), zmq::send_flags::none);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::ostringstream out, err;
  const int code = cli::run_stats({.endpoint = endpoint, .count = 2, .timeout_ms = 5000}, out, err);
  done = true;
  publisher.join();
  EXPECT_EQ(code, exit_code::ok) << err.str();
  const std::string text = out.str();
  const auto first = text.find("frames: in 1203");
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_NE(text.find("frames: in 1203", first + 1), std::string::npos) << "two reports expected:\n" << text;
}

TEST(Stats, NoReportWithinTheTimeoutIsExitCode8) {
  zmq::context_t context;
  zmq::socket_t silent(context, zmq::socket_type::pub);
  silent.bind("tcp://127.0.0.1:*");
  std::ostringstream out, err;
  const int code = cli::run_stats({.endpoint = silent.get(zmq::sockopt::last_endpoint), .count = 1, .timeout_ms = 300},
                                  out, err);
  EXPECT_EQ(code, exit_code::unreachable);
  EXPECT_NE(err.str().find("no latency report from tcp://127.0.0.1:"), std::string::npos) << err.str();
}

// A REP server that answers `replies` requests with `answer(request)`.
class FakeControl {
 public:
  template <class Answer>
  FakeControl(int replies, Answer answer) : socket_(context_, zmq::socket_type::rep) {
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this, replies, answer] {
      for (int i = 0; i < replies; ++i) {
        zmq::message_t request;
        if (!socket_.recv(request)) return;
        requests_.push_back(request.to_string());
        const std::string reply = answer(request.to_string());
        socket_.send(zmq::buffer(reply), zmq::send_flags::none);
      }
    });
  }
  ~FakeControl() { thread_.join(); }
  const std::string& endpoint() const { return endpoint_; }
  const std::vector<std::string>& requests() const { return requests_; }

 private:
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

TEST(Ctl, SendsTheCommandAsJsonAndPrintsAnOkReply) {
  std::ostringstream out, err;
  int code = -1;
  std::vector<std::string> requests;
  {
    FakeControl daemon(1, [](const std::string&) { return json{{"ok", true}, {"state", "running"}}.dump(); });
    code = cli::run_ctl({.endpoint = daemon.endpoint(), .command = "status", .timeout_ms = 5000}, out, err);
    requests = daemon.requests();
  }
  EXPECT_EQ(code, exit_code::ok) << err.str();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(json::parse(requests[0]), (json{{"command", "status"}}));
  EXPECT_NE(out.str().find("\"state\": \"running\""), std::string::npos) << out.str();
}

TEST(Ctl, ARefusalIsPrintedWithItsReasonAndExitCode1) {
  std::ostringstream out, err;
  int code = -1;
  {
    FakeControl daemon(1, [](const std::string&) {
      return json{{"ok", false}, {"error", "cfg.yaml:3: pipeline.budget_ms: expected a number > 0"}}.dump();
    });
    code = cli::run_ctl({.endpoint = daemon.endpoint(), .command = "reload", .timeout_ms = 5000}, out, err);
  }
  EXPECT_EQ(code, exit_code::internal_error);
  EXPECT_EQ(err.str(), "covflow ctl: reload refused: cfg.yaml:3: pipeline.budget_ms: expected a number > 0\n");
}

TEST(Ctl, ANonJsonReplyIsReported) {
  std::ostringstream out, err;
  int code = -1;
  {
    FakeControl daemon(1, [](const std::string&) { return std::string("hello"); });
    code = cli::run_ctl({.endpoint = daemon.endpoint(), .command = "stats", .timeout_ms = 5000}, out, err);
  }
  EXPECT_EQ(code, exit_code::internal_error);
  EXPECT_NE(err.str().find("not a JSON object: hello"), std::string::npos) << err.str();
}

TEST(Ctl, NoAnswerIsExitCode8AndAnUnknownCommandIsAUsageError) {
  zmq::context_t context;
  zmq::socket_t deaf(context, zmq::socket_type::rep);  // bound, never answers
  deaf.bind("tcp://127.0.0.1:*");
  std::ostringstream out, err;
  EXPECT_EQ(cli::run_ctl({.endpoint = deaf.get(zmq::sockopt::last_endpoint), .command = "status", .timeout_ms = 200},
                         out, err),
            exit_code::unreachable);
  EXPECT_NE(err.str().find("no reply from tcp://127.0.0.1:"), std::string::npos) << err.str();
  std::ostringstream err2;
  EXPECT_EQ(cli::run_ctl({.endpoint = "tcp://127.0.0.1:1", .command = "restart"}, out, err2), exit_code::usage);
  EXPECT_NE(err2.str().find("unknown command 'restart'"), std::string::npos);
  std::ostringstream err3;
  EXPECT_EQ(cli::run_ctl({.endpoint = "not-an-endpoint", .command = "status"}, out, err3), exit_code::usage);
  EXPECT_NE(err3.str().find("cannot connect to not-an-endpoint"), std::string::npos) << err3.str();
}

}  // namespace
}  // namespace covflow

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

// A report as docs/zmq.md specifies it ("latency" topic).
json sample_report(double uptime_s = 12.5, int done = 1195) {
  auto latency = [](double p50, double p90, double p99, double p999, double max, int count) {
    return json{{"count", count}, {"mean_ms", p50}, {"p50_ms", p50}, {"p90_ms", p90}, {"p99_ms", p99},
                {"p999_ms", p999}, {"max_ms", max}};
  };
  return json{{"report", 12},
              {"final", false},
              {"interval_ms", 1000},
              {"uptime_s", uptime_s},
              {"frames", {{"in", 1203}, {"done", done}, {"late", 2}, {"dropped", 7}, {"in_flight", 1},
                          {"dropped_by_reason", {{"overflow_drop_oldest", 5}, {"shape", 2}, {"stage_error", 0}}}}},
              {"queue", {{"depth", 1}, {"capacity", 8}, {"max_depth", 6}}},
              {"ingest_blocked_ms", 0.0},
              {"stages", json::array({json{{"name", "subspace"}, {"latency", latency(2.0, 2.5, 3.0, 3.5, 4.0, 1190)},
                                           {"ran", 1190}, {"skipped_degraded", 5}, {"failures", 0},
                                           {"over_budget", 0}, {"predicted_ms", 2.0}},
                                      json{{"name", "covariance"}, {"latency", latency(0.4125, 0.5, 0.75, 1.0, 1.25, 1195)},
                                           {"ran", 1195}, {"skipped_degraded", 0}, {"failures", 3},
                                           {"over_budget", 0}, {"predicted_ms", 0.41}}})},
              {"end_to_end", latency(2.5, 3.0, 4.0, 4.5, 5.0, 1195)}};
}

TEST(FormatReport, ShowsCountersDropReasonsAndStagesInChainOrder) {
  const std::string text = cli::format_report(sample_report(), 99.5);
  EXPECT_NE(text.find("covflowd report 12 at 12.5 s uptime"), std::string::npos) << text;
  EXPECT_NE(text.find("frames: in 1203  done 1195  late 2  dropped 7 (overflow_drop_oldest 5, shape 2)  in flight 1"),
            std::string::npos) << text;
  EXPECT_NE(text.find("queue: depth 1 of 8 (max 6); 99.5 frames/s done since the last report"), std::string::npos) << text;
  // The array's order (the chain's), not the alphabet's: subspace was put first in this report.
  const auto subspace = text.find("subspace"), covariance = text.find("covariance"), total = text.find("end to end");
  ASSERT_NE(covariance, std::string::npos);
  ASSERT_NE(subspace, std::string::npos);
  EXPECT_LT(subspace, covariance);
  EXPECT_LT(covariance, total);
  const std::string covariance_row = text.substr(covariance, text.find('\n', covariance) - covariance);
  EXPECT_EQ(covariance_row, "covariance         1195        0        3     0.412     0.500     0.750     1.000     1.250");
  const std::string subspace_row = text.substr(subspace, text.find('\n', subspace) - subspace);
  EXPECT_EQ(subspace_row, "subspace           1190        5        0     2.000     2.500     3.000     3.500     4.000");
  EXPECT_NE(text.find("end to end         1195        -        -     2.500     3.000     4.000     4.500     5.000"),
            std::string::npos) << text;
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

  std::atomic<bool> finished{false};
  std::thread publisher([&] {
    double uptime = 10.0;
    int done = 1000;
    // PUB drops what is sent before the subscriber has joined: keep sending until it has read enough.
    while (!finished) {
      const std::string body = sample_report(uptime, done).dump();
      uptime += 1.0;
      done += 100;
      pub.send(zmq::buffer(std::string_view("latency")), zmq::send_flags::sndmore);
      pub.send(zmq::buffer(body), zmq::send_flags::none);
      pub.send(zmq::buffer(std::string_view("result")), zmq::send_flags::sndmore);  // another topic: not shown
      pub.send(zmq::buffer(std::string_view("{}")), zmq::send_flags::none);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::ostringstream out, err;
  const int code = cli::run_stats({.endpoint = endpoint, .count = 2, .timeout_ms = 5000}, out, err);
  finished = true;
  publisher.join();
  EXPECT_EQ(code, exit_code::ok) << err.str();
  const std::string text = out.str();
  const auto first = text.find("frames: in 1203");
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_NE(text.find("frames: in 1203", first + 1), std::string::npos) << "two reports expected:\n" << text;
  // The second report's rate comes from the first: 100 more frames done in 1 s (sent 20 ms apart,
  // but the rate is taken from the reports' own uptime, not the wall clock).
  EXPECT_NE(text.find("100.0 frames/s done since the last report"), std::string::npos) << text;
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

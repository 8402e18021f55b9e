// The ZeroMQ endpoints on real loopback sockets (ephemeral ports): results through the publish
// stage, latency reports with the final one, control round trips, binding errors, recording.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <optional>

#include <zmq.hpp>

#include "covflow/pipeline/endpoints.hpp"
#include "covflow/pipeline/security.hpp"
#include "covflow/pipeline/runner.hpp"
#include "covflow/replay/reader.hpp"
#include "covflow/stages/publish.hpp"
#include "fakes.hpp"
#include "replay_test_support.hpp"

namespace covflow::pipeline {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr auto kAny = "tcp://127.0.0.1:*";

// A SUB connected to `endpoint`, subscribed to `topic`; receive() waits up to `timeout`.
struct Subscriber {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::sub};
  Subscriber(const std::string& endpoint, const std::string& topic) {
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::subscribe, topic);
    socket.connect(endpoint);
  }
  // [topic, body], or nullopt after `timeout`.
  std::optional<std::pair<std::string, json>> receive(std::chrono::milliseconds timeout) {
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, timeout) == 0) return std::nullopt;
    zmq::message_t topic, body;
    if (!socket.recv(topic)) return std::nullopt;
    EXPECT_TRUE(topic.more()) << "a message of one part";
    if (!socket.recv(body)) return std::nullopt;
    EXPECT_FALSE(body.more()) << "a message of more than two parts";
    return std::make_pair(topic.to_string(), json::parse(body.to_string()));
  }
};

// PUB/SUB loses what is sent before the subscription reaches the publisher (the "slow joiner"):
// send probes until one arrives, then every later message is delivered.
template <class Send>
void wait_for_subscription(Subscriber& sub, Send send) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    send();
    if (sub.receive(20ms)) return;
  }
  FAIL() << "the subscriber never received a probe";
}

TEST(ZmqEndpoints, PublishStageSendsOneResultPerFrameAndRecordsTheInput) {
  test::ScratchDir dir;
  auto publisher = std::make_shared<ResultsPublisher>(kAny);
  Subscriber sub(publisher->endpoint(), "result");
  wait_for_subscription(sub, [&] { publisher->publish(R"({"seq": -1, "probe": true})"); });
  while (sub.receive(50ms)) {
  }  // probes still in flight

  const auto shape = test::small_shape();
  std::vector<std::unique_ptr<Stage>> stages;
  stages.push_back(std::make_unique<test::FakeStage>("subspace", 0us, false, [](FrameSlot& f) {
    f.results.cells = 2;
    f.results.source_count[0] = 1;
    f.results.source_count[1] = 2;
    const std::size_t stride = f.results.doa_deg.size() / f.results.source_count.size();
    f.results.doa_deg[0] = -20.5f;
    f.results.doa_deg[stride] = 5.0f;
    f.results.doa_deg[stride + 1] = float(f.sequence);
  }));
  // A queue as long as the run: no frame is left out however slow the disk.
  auto recorder = std::make_shared<stages::Recorder>(stages::RecorderOptions{.path = dir / "run.cvf", .queue = 8});
  auto publish = std::make_unique<stages::PublishStage>(
      publisher, stages::PublishOptions{.recorder = recorder, .stage_names = {"subspace", "publish"}, .json = {}, .results = nullptr});
  auto* publish_stage = publish.get();
  stages.push_back(std::move(publish));
  Metrics metrics;
  auto exec = linalg::Exec::cpu(1);
  std::vector<replay::Frame> sent;
  for (std::uint64_t s = 0; s < 5; ++s) sent.push_back(test::frame_for(shape, 100 + s));
  test::ListInput input(sent);
  {
    Runner runner(shape, std::move(stages), exec, {.budget_ms = 1000, .queue_depth = 8, .overflow = Overflow::block}, metrics);
    runner.start(input);
    runner.wait();
    EXPECT_EQ(publish_stage->published(), 5u);
    recorder->close();
    EXPECT_EQ(recorder->written(), 5u);
  }
  for (std::uint64_t s = 0; s < 5; ++s) {
    auto message = sub.receive(2000ms);
    ASSERT_TRUE(message) << "result " << s << " not received";
    const auto& [topic, body] = *message;
    EXPECT_EQ(topic, "result");
    EXPECT_EQ(body.at("seq"), 100 + s);
    EXPECT_EQ(body.at("cells"), 2);
    EXPECT_EQ(body.at("source_count"), json::array({1, 2}));
    EXPECT_EQ(body.at("doa_deg"), json::parse(R"([[-20.5], [5.0, )" + std::to_string(100 + s) + ".0]]"));
    EXPECT_EQ(body.at("kind"), "snapshots");
    EXPECT_EQ(body.at("element_type"), "cf32");
    EXPECT_EQ(body.at("capture_ns"), std::int64_t(100 + s) * 1000);
    EXPECT_GE(body.at("latency_ms").get<double>(), 0.0);
    EXPECT_LE(body.at("arrival_ns").get<std::int64_t>(), body.at("done_ns").get<std::int64_t>());
    EXPECT_EQ(body.at("deadline_ns").get<std::int64_t>() - body.at("arrival_ns").get<std::int64_t>(), 1000 * 1000000LL);
    EXPECT_FALSE(body.at("late").get<bool>());
    ASSERT_EQ(body.at("stages").size(), 2u);
    EXPECT_EQ(body.at("stages")[0].at("name"), "subspace");
    EXPECT_EQ(body.at("stages")[0].at("outcome"), "ran");
    EXPECT_EQ(body.at("stages")[1].at("outcome"), "not_run");  // publish itself is still running
    EXPECT_FALSE(body.contains("spectrum_db"));
  }
  replay::Reader reader(dir / "run.cvf");
  for (const auto& frame : sent) {
    auto back = reader.next();
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, frame);
  }
  EXPECT_FALSE(reader.next());
}

TEST(ZmqEndpoints, ReportsComeAtTheIntervalAndAFinalOneAtStop) {
  Metrics metrics({"covariance"});
  metrics.frame_in();
  metrics.frame_done(3.0, false);
  ReportPublisher reports(kAny, metrics, 30ms);
  Subscriber sub(reports.endpoint(), "latency");
  reports.start();
  auto first = sub.receive(3000ms);  // the subscription is made within a few periods
  ASSERT_TRUE(first);
  EXPECT_EQ(first->first, "latency");
  EXPECT_EQ(first->second.at("frames").at("done"), 1);
  EXPECT_EQ(first->second.at("final"), false);
  EXPECT_EQ(first->second.at("interval_ms"), 30);
  EXPECT_EQ(first->second.at("stages")[0].at("name"), "covariance");
  auto second = sub.receive(3000ms);
  ASSERT_TRUE(second);
  EXPECT_GT(second->second.at("report").get<int>(), first->second.at("report").get<int>());
  metrics.frame_in();
  metrics.frame_dropped("shape");
  reports.stop();
  bool saw_final = false;
  while (auto m = sub.receive(1000ms)) {
    if (m->second.at("final").get<bool>()) {
      saw_final = true;
      EXPECT_EQ(m->second.at("frames").at("dropped_by_reason").at("shape"), 1);
      break;
    }
  }
  EXPECT_TRUE(saw_final);
  reports.stop();  // idempotent
}

struct FakeControl final : ControlHandler {
  Metrics& metrics;
  std::atomic<bool> shut{false};
  std::atomic<int> reloads{0};
  explicit FakeControl(Metrics& m) : metrics(m) {}
  json status() override { return {{"state", "running"}, {"input", "test"}}; }
  json stats() override { return to_json(metrics.snapshot()); }
  void reset() override { metrics.reset(); }
  json reload() override {
    if (++reloads == 2) throw std::runtime_error("config.yaml:3: unknown key 'pipline'");
    return {{"reloaded", true}};
  }
  void shutdown() override { shut = true; }
};

struct Requester {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::req};
  explicit Requester(const std::string& endpoint) {
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::rcvtimeo, 3000);
    socket.connect(endpoint);
  }
  json ask(const std::string& request) {
    socket.send(zmq::buffer(request), zmq::send_flags::none);
    zmq::message_t reply;
    if (!socket.recv(reply)) throw std::runtime_error("no reply to " + request);
    return json::parse(reply.to_string());
  }
};

TEST(ZmqEndpoints, ControlRoundTrips) {
  Metrics metrics({"a"});
  metrics.frame_in();
  metrics.frame_done(1.0, false);
  FakeControl control(metrics);
  ControlServer server(kAny, control);
  server.start();
  Requester req(server.endpoint());

  auto status = req.ask(R"({"command": "status"})");
  EXPECT_EQ(status.at("ok"), true);
  EXPECT_EQ(status.at("command"), "status");
  EXPECT_EQ(status.at("result").at("state"), "running");
  EXPECT_EQ(req.ask("status").at("result").at("input"), "test");  // the bare word
  EXPECT_EQ(req.ask("\"status\"\n").at("ok"), true);

  auto stats = req.ask(R"({"command":"stats"})");
  EXPECT_EQ(stats.at("ok"), true);
  EXPECT_EQ(stats.at("result").at("frames").at("done"), 1);

  EXPECT_EQ(req.ask(R"({"command":"reset"})").at("ok"), true);
  EXPECT_EQ(metrics.snapshot().frames_done, 0u);

  EXPECT_EQ(req.ask("reload").at("result").at("reloaded"), true);
  auto refused = req.ask("reload");  // the handler throws: ok false with its message
  EXPECT_EQ(refused.at("ok"), false);
  EXPECT_EQ(refused.at("error"), "config.yaml:3: unknown key 'pipline'");

  auto unknown = req.ask(R"({"command":"explode"})");
  EXPECT_EQ(unknown.at("ok"), false);
  EXPECT_NE(unknown.at("error").get<std::string>().find("unknown command \"explode\""), std::string::npos);

  for (const std::string& bad : std::vector<std::string>{R"({"command": 3})", R"({"cmd": "status"})", "[1, 2]", "{not json", "", "stat us",
                                std::string("\xff\xfe\x00garbage", 10)}) {
    auto reply = req.ask(bad);
    EXPECT_EQ(reply.at("ok"), false) << bad;
    EXPECT_NE(reply.at("error").get<std::string>().find("malformed request"), std::string::npos) << reply.dump();
  }

  EXPECT_FALSE(control.shut.load());
  auto bye = req.ask("shutdown");
  EXPECT_EQ(bye.at("ok"), true);
  EXPECT_TRUE(control.shut.load());
  EXPECT_GE(server.requests(), 14u);

  const auto start = std::chrono::steady_clock::now();
  server.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1000ms);
}

TEST(ZmqEndpoints, BindingFailuresNameTheEndpointAndTheKey) {
  ResultsPublisher first(kAny);
  const std::string taken = first.endpoint();
  Metrics metrics;
  try {
    ReportPublisher second(taken, metrics, 100ms, "daemon.reports_endpoint");
    FAIL() << "a second bind to " << taken << " succeeded";
  } catch (const EndpointError& e) {
    EXPECT_EQ(e.endpoint(), taken);
    EXPECT_EQ(e.key(), "daemon.reports_endpoint");
    EXPECT_NE(std::string(e.what()).find(taken), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("daemon.reports_endpoint"), std::string::npos) << e.what();
  }
  FakeControl control(metrics);
  EXPECT_THROW(ControlServer("tcp://not an endpoint", control), EndpointError);
  EXPECT_THROW(ResultsPublisher("bogus://127.0.0.1:1"), EndpointError);
}

// A REQ socket that asks once and waits `wait` for the answer: null when none came (a CURVE
// server does not even complete a handshake with a client it does not admit).
json ask_once(const std::string& endpoint, const std::optional<std::pair<std::string, CurveKeys>>& curve,
              std::chrono::milliseconds wait) {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::req};
  socket.set(zmq::sockopt::linger, 0);
  if (curve) secure_client(socket, curve->first, curve->second);
  socket.connect(endpoint);
  socket.send(zmq::str_buffer("status"), zmq::send_flags::none);
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, wait) == 0) return nullptr;
  zmq::message_t reply;
  if (!socket.recv(reply)) return nullptr;
  return json::parse(reply.to_string());
}

TEST(ZmqSecurity, ACurveControlSocketAnswersAdmittedClientsAlone) {
  Metrics metrics;
  FakeControl control(metrics);
  const CurveKeys server = generate_curve_keys(), admitted = generate_curve_keys(), stranger = generate_curve_keys();
  ControlServer secured(kAny, control, "daemon.control_endpoint", {.server_secret_key = server.secret_key,
                                                                  .authorized_clients = {admitted.public_key}});
  secured.start();
  // No CURVE at all; CURVE with a key the daemon does not admit; the wrong server key.
  EXPECT_TRUE(ask_once(secured.endpoint(), std::nullopt, 500ms).is_null());
  EXPECT_TRUE(ask_once(secured.endpoint(), std::pair{server.public_key, stranger}, 500ms).is_null());
  EXPECT_TRUE(ask_once(secured.endpoint(), std::pair{stranger.public_key, admitted}, 500ms).is_null());
  EXPECT_EQ(secured.requests(), 0u) << "no request of theirs reached the handler";
  const json answer = ask_once(secured.endpoint(), std::pair{server.public_key, admitted}, 5000ms);
  ASSERT_FALSE(answer.is_null());
  EXPECT_EQ(answer.at("ok"), true);
  secured.stop();

  // Without a client list, any client that holds the server's public key is admitted.
  ControlServer open_to_keyholders(kAny, control, "daemon.control_endpoint", {.server_secret_key = server.secret_key, .authorized_clients = {}});
  open_to_keyholders.start();
  EXPECT_TRUE(ask_once(open_to_keyholders.endpoint(), std::nullopt, 500ms).is_null());
  EXPECT_FALSE(ask_once(open_to_keyholders.endpoint(), std::pair{server.public_key, stranger}, 5000ms).is_null());
}

TEST(ZmqSecurity, AnIpcSocketFileIsItsOwnersAlone) {
  test::ScratchDir dir;
  Metrics metrics;
  FakeControl control(metrics);
  const std::string endpoint = "ipc://" + (dir / "control").string();
  ControlServer server(endpoint, control);
  struct stat st {};
  ASSERT_EQ(::stat((dir / "control").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(ZmqSecurity, KeyFilesRoundTripAndBadOnesAreNamed) {
  test::ScratchDir dir;
  const CurveKeys keys = generate_curve_keys();
  write_curve_keys(dir / "daemon", keys);
  EXPECT_EQ(read_curve_secret(dir / "daemon.secret").secret_key, keys.secret_key);
  EXPECT_EQ(read_curve_secret(dir / "daemon.secret").public_key, keys.public_key);
  EXPECT_EQ(read_curve_key(dir / "daemon.public"), keys.public_key);
  struct stat st {};
  ASSERT_EQ(::stat((dir / "daemon.secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_THROW(write_curve_keys(dir / "daemon", keys), std::runtime_error) << "never overwritten";
  std::ofstream(dir / "bad") << "# a comment\nnot a key\n";
  try {
    read_curve_key(dir / "bad");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad:2: not a CURVE key"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "clients") << "# admitted\n" << keys.public_key << "\n\n" << generate_curve_keys().public_key << "\n";
  EXPECT_EQ(read_curve_key_list(dir / "clients").size(), 2u);
}

}  // namespace
}  // namespace covflow::pipeline

// covflow and covflowd as a user runs them: each class of error has its exit code, errors go to
// stderr, --help works everywhere.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "covflow/config/build_info.hpp"
#include "covflow/config/load.hpp"
#include "covflow/config/schema.hpp"
#include "covflow/linalg/device.hpp"
#include "covflow/stages/ingest.hpp"
#include "covflow/stages/scenario.hpp"
#include "replay_test_support.hpp"

namespace covflow {
namespace {

struct Outcome {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs a shell command line in `dir`, capturing stdout and stderr.
Outcome run(const test::ScratchDir& dir, const std::string& command) {
  const std::string line = "cd '" + dir.path().string() + "' && " + command + " >stdout.txt 2>stderr.txt";
  const int status = std::system(line.c_str());
  Outcome r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / "stdout.txt");
  r.err = slurp(dir / "stderr.txt");
  return r;
}

const std::string covflow_cli = COVFLOW_CLI;
const std::string covflowd = COVFLOWD;

TEST(Cli, HelpEverywhereAndUsageErrorsExitTwo) {
  test::ScratchDir dir;
  for (const std::string sub : {"", " version", " devices", " synth", " inspect", " record"}) {
    const Outcome r = run(dir, covflow_cli + sub + " --help");
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_NE(r.out.find("Usage:"), std::string::npos) << sub;
  }
  EXPECT_EQ(run(dir, covflowd + " --help").code, 0);
  EXPECT_EQ(run(dir, covflow_cli).code, 2);
  EXPECT_EQ(run(dir, covflow_cli + " frobnicate").code, 2);
  const Outcome no_out = run(dir, covflow_cli + " synth");
  EXPECT_EQ(no_out.code, 2);
  EXPECT_NE(no_out.err.find("--out is required"), std::string::npos) << no_out.err;
  const Outcome both = run(dir, covflow_cli + " record --synth --connect tcp://127.0.0.1:5999 -o x.cvf");
  EXPECT_EQ(both.code, 2);
  const Outcome neither = run(dir, covflow_cli + " record -o x.cvf");
  EXPECT_EQ(neither.code, 2);
  EXPECT_NE(neither.err.find("give exactly one of --synth and --connect"), std::string::npos) << neither.err;
  EXPECT_EQ(run(dir, covflowd + " --frames 0").code, 2);
}

TEST(Cli, SynthThenInspectAndVerify) {
  test::ScratchDir dir;
  const Outcome synth = run(dir, covflow_cli + " synth --out s.cvf --frames 4 --set scenario.cells=5 --set scenario.snapshots=7");
  ASSERT_EQ(synth.code, 0) << synth.err;
  EXPECT_TRUE(synth.out.empty()) << "progress and summary go to stderr: " << synth.out;
  EXPECT_NE(synth.err.find("s.cvf: 4 frames"), std::string::npos) << synth.err;

  const Outcome inspect = run(dir, covflow_cli + " inspect s.cvf --verify --records");
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("records: 4 (sequences 0 .. 3; 0 gaps, 0 out of order)"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("4 × snapshots cf64 16×7×5"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("index: present"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("damage: none"), std::string::npos) << inspect.out;
  EXPECT_TRUE(inspect.err.empty()) << inspect.err;

  // The file holds what the generator makes.
  replay::Reader reader(dir / "s.cvf");
  config::ScenarioConfig scenario;
  scenario.cells = 5;
  scenario.snapshots = 7;
  stages::ScenarioGenerator generator(scenario);
  for (std::uint64_t s = 0; s < 4; ++s) EXPECT_EQ(reader.next(), generator.frame(s));

  // An existing output is not overwritten without --force.
  const Outcome again = run(dir, covflow_cli + " synth --out s.cvf --frames 1");
  EXPECT_EQ(again.code, 5);
  EXPECT_NE(again.err.find("s.cvf: cannot create: File exists"), std::string::npos) << again.err;
  EXPECT_EQ(run(dir, covflow_cli + " synth --out s.cvf --frames 1 --force --set scenario.cells=2").code, 0);
}

TEST(Cli, VerifyNamesTheOffsetsOfDamageAndExitsFour) {
  test::ScratchDir dir;
  ASSERT_EQ(run(dir, covflow_cli + " synth -o d.cvf -n 3 --set scenario.cells=2 --set scenario.snapshots=4").code, 0);
  auto bytes = test::read_bytes(dir / "d.cvf");
  replay::Reader clean(dir / "d.cvf");
  ASSERT_TRUE(clean.index().has_value());
  const std::uint64_t second = (*clean.index())[1].offset;
  bytes[second + 100] ^= std::byte{0x01};  // in record 1's payload
  test::write_bytes(dir / "d.cvf", bytes);

  const Outcome verify = run(dir, covflow_cli + " inspect d.cvf --verify");
  EXPECT_EQ(verify.code, 4);
  EXPECT_NE(verify.out.find("records: 2"), std::string::npos) << verify.out;
  EXPECT_NE(verify.err.find("covflow: d.cvf: payload CRC: offset " + std::to_string(second) + ": record (sequence 1) CRC mismatch"),
            std::string::npos)
      << verify.err;
  // Headers alone do not see a payload flip.
  EXPECT_EQ(run(dir, covflow_cli + " inspect d.cvf").code, 0);

  test::write_bytes(dir / "cut.cvf", std::span(bytes).first(second + 20));
  const Outcome cut = run(dir, covflow_cli + " inspect cut.cvf");
  EXPECT_EQ(cut.code, 4);
  EXPECT_NE(cut.err.find("truncated: offset " + std::to_string(second)), std::string::npos) << cut.err;

  std::ofstream(dir / "notes.txt") << "these are notes, not frames; long enough for a header";
  const Outcome foreign = run(dir, covflow_cli + " inspect notes.txt");
  EXPECT_EQ(foreign.code, 4);
  EXPECT_NE(foreign.err.find("covflow: error: notes.txt: offset 0: bad magic"), std::string::npos) << foreign.err;
  const Outcome missing = run(dir, covflow_cli + " inspect nothing.cvf");
  EXPECT_EQ(missing.code, 5);
  EXPECT_EQ(missing.err, "covflow: error: nothing.cvf: cannot open: No such file or directory\n");
}

TEST(Cli, ConfigErrorsExitThree) {
  test::ScratchDir dir;
  const Outcome r = run(dir, covflow_cli + " synth -o x.cvf --set scenario.elemnts=8");
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(r.err,
            "covflow: error: --set: scenario.elemnts: unknown key; expected one of elements, spacing_wavelengths, sources, "
            "jammers, snapshots, cells, frame_rate_hz, seed, payload, element_type; did you mean 'scenario.elements'?\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "x.cvf"));
  const Outcome missing = run(dir, covflow_cli + " synth -o x.cvf --config nowhere.yaml");
  EXPECT_EQ(missing.code, 3);
  EXPECT_EQ(missing.err, "covflow: error: nowhere.yaml: -: cannot read the file (No such file or directory)\n");
}

TEST(Cli, RecordFromTheGeneratorAndFromAZeroMqFeed) {
  test::ScratchDir dir;
  const Outcome synth = run(dir, covflow_cli + " record --synth -o live.cvf -n 3 --set scenario.frame_rate_hz=50 --set scenario.cells=2");
  ASSERT_EQ(synth.code, 0) << synth.err;
  replay::Reader live(dir / "live.cvf");
  const auto frames = test::read_all(live);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[2].header.capture_time_ns - frames[0].header.capture_time_ns, 40'000'000);

  stages::ZmqFramePublisher publisher("tcp://127.0.0.1:*", stages::ZmqFramePublisher::Pattern::push);
  Outcome recorded;
  std::thread recorder([&] { recorded = run(dir, covflow_cli + " record --connect " + publisher.endpoint() + " --pattern pull -o feed.cvf -n 2"); });
  config::ScenarioConfig scenario;
  scenario.cells = 3;
  stages::ScenarioGenerator generator(scenario);
  const replay::Frame first = generator.next(), second = generator.next();
  publisher.send(first);  // blocks until the recorder has connected
  publisher.send_raw(std::vector<std::byte>(10));
  publisher.send(second);
  recorder.join();
  ASSERT_EQ(recorded.code, 0) << recorded.err;
  EXPECT_NE(recorded.err.find("1 messages rejected"), std::string::npos) << recorded.err;
  replay::Reader feed(dir / "feed.cvf");
  EXPECT_EQ(feed.next(), first);
  EXPECT_EQ(feed.next(), second);
}

TEST(Cli, CovflowdChecksPrintsAndRunsConfigurations) {
  test::ScratchDir dir;
  std::ofstream(dir / "bad.yaml") << "pipeline:\n  stages:\n    subspace:\n      source_count: bic\n";
  const Outcome bad = run(dir, covflowd + " --check-config bad.yaml");
  EXPECT_EQ(bad.code, 3);
  EXPECT_EQ(bad.err, "covflowd: bad.yaml:4: pipeline.stages.subspace.source_count: expected one of mdl, aic (got bic); did you mean 'aic'?\n");
  const Outcome missing = run(dir, covflowd + " --check-config none.yaml");
  EXPECT_EQ(missing.code, 3);
  EXPECT_EQ(missing.err, "covflowd: none.yaml: -: cannot read the file (No such file or directory)\n");
  const Outcome good_with_bad_set = run(dir, covflowd + " --check-config " COVFLOW_SOURCE_DIR "/config/examples/default.yaml --set pipeline.queue_depth=0");
  EXPECT_EQ(good_with_bad_set.code, 3);
  for (const auto& [program, name] : {std::pair{covflowd, "covflowd "}, std::pair{covflow_cli, "covflow "}}) {
    const Outcome version = run(dir, program + " --version");
    EXPECT_EQ(version.code, 0) << program;
    EXPECT_TRUE(version.out.starts_with(name + config::build_info().version)) << version.out;
  }
  EXPECT_EQ(run(dir, covflowd + " --config bad.yaml --frames 1").code, 3);

  // --print-config writes a file that reads back to the same configuration.
  const Outcome printed = run(dir, covflowd + " --print-config --set scenario.elements=9 --set device.gpus=[2]");
  ASSERT_EQ(printed.code, 0) << printed.err;
  EXPECT_EQ(config::load_string(printed.out, "printed"), config::load_defaults(std::vector<std::string>{"scenario.elements=9", "device.gpus=[2]"}));
  const Outcome reference = run(dir, covflowd + " --print-config-reference");
  EXPECT_EQ(reference.out, config::reference_markdown());

  // The daemon on the built-in scenario: 3 frames, then the final report on stdout. Its sockets go
  // to this test's directory, so a daemon already running on the default ports does not matter.
  const std::string ipc = " --set daemon.results_endpoint=ipc://" + (dir / "r").string() +
                          " --set daemon.reports_endpoint=ipc://" + (dir / "p").string() +
                          " --set daemon.control_endpoint=ipc://" + (dir / "c").string();
  const Outcome demo = run(dir, covflowd + " --frames 3 --device cpu --set scenario.cells=4 --set daemon.log_level=error" + ipc);
  EXPECT_EQ(demo.code, 0) << demo.err;
  EXPECT_NE(demo.out.find("covflowd final report"), std::string::npos) << demo.out;
  EXPECT_NE(demo.out.find("frames: in 3  done 3  late "), std::string::npos) << demo.out;
  EXPECT_NE(demo.out.find("dropped 0  in flight 0"), std::string::npos) << demo.out;
  EXPECT_TRUE(demo.err.empty()) << "a clean run logs nothing at log_level error: " << demo.err;
  if (!linalg::probe_devices().available()) {
    const Outcome cuda = run(dir, covflowd + " --frames 1 --device cuda");
    EXPECT_EQ(cuda.code, 6) << cuda.err;
  }
}

TEST(Cli, CovflowdReplaysAFileInTheShapeOfItsRecords) {
  // A recorded 24-element cf32 file and a configuration with no scenario section: the pipeline is
  // sized from the file's first record, so every frame goes through (none dropped for its shape).
  test::ScratchDir dir;
  const Outcome synth = run(dir, covflow_cli + " synth -o small.cvf -n 12 --set scenario.elements=24 "
                                               "--set scenario.element_type=cf32 --set scenario.cells=6 "
                                               "--set scenario.snapshots=64");
  ASSERT_EQ(synth.code, 0) << synth.err;
  const std::string ipc = "ipc://" + dir.path().string() + "/";
  std::ofstream(dir / "replay.yaml") << "daemon:\n  results_endpoint: " << ipc << "r\n  reports_endpoint: " << ipc
                                     << "p\n  control_endpoint: " << ipc << "c\n"
                                     << "device:\n  backend: cpu\n"
                                     << "ingest:\n  source: file\n  file:\n    path: small.cvf\n    pace: fast\n"
                                     << "pipeline:\n  budget_ms: 5000\n  overflow: block\n";
  const Outcome replay = run(dir, covflowd + " --config replay.yaml");
  EXPECT_EQ(replay.code, 0) << replay.err;
  EXPECT_NE(replay.out.find("frames: in 12  done 12  late 0  dropped 0  in flight 0"), std::string::npos) << replay.out;
  EXPECT_NE(replay.err.find("frames: snapshots 24 × 64 × 6 cf32"), std::string::npos) << replay.err;
  EXPECT_EQ(replay.err.find("dropped (shape)"), std::string::npos) << replay.err;

  // Covariance records do not say how many snapshots each estimate was formed from: the key that
  // must say it is named, as a configuration error.
  ASSERT_EQ(run(dir, covflow_cli + " synth -o cov.cvf -n 3 --set scenario.payload=covariance --set scenario.cells=2").code, 0);
  std::ofstream(dir / "cov.yaml") << "daemon:\n  results_endpoint: " << ipc << "r\n  reports_endpoint: " << ipc
                                  << "p\n  control_endpoint: " << ipc << "c\n"
                                  << "device:\n  backend: cpu\n"
                                  << "ingest:\n  source: file\n  file:\n    path: cov.cvf\n    pace: fast\n";
  const Outcome no_k = run(dir, covflowd + " --config cov.yaml");
  EXPECT_EQ(no_k.code, 3) << no_k.err;
  EXPECT_NE(no_k.err.find("cov.yaml: ingest.file.covariance_snapshots: required: cov.cvf holds covariance records"),
            std::string::npos)
      << no_k.err;
  const Outcome with_k = run(dir, covflowd + " --config cov.yaml --set ingest.file.covariance_snapshots=200");
  EXPECT_EQ(with_k.code, 0) << with_k.err;
  EXPECT_NE(with_k.out.find("frames: in 3  done 3"), std::string::npos) << with_k.out;
}

}  // namespace
}  // namespace covflow

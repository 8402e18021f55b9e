// Loading: the defaults are the built-in demo, every key can be set from a file or from --set,
// to_yaml round-trips, and every example file loads.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "covflow/config/endpoint.hpp"
#include "covflow/config/load.hpp"
#include "covflow/config/schema.hpp"
#include "test_support.hpp"

namespace covflow::config {
namespace {

TEST(ConfigLoad, NoFileOrAnEmptyFileIsTheBuiltInDemo) {
  const Config defaults;
  EXPECT_EQ(load_defaults(), defaults);
  EXPECT_EQ(load_string("", "empty.yaml"), defaults);
  EXPECT_EQ(load_string("# only a comment\n\n", "comments.yaml"), defaults);
  EXPECT_EQ(load_string("pipeline:\ndaemon: {}\n", "sections.yaml"), defaults);

  EXPECT_EQ(defaults.ingest.source, IngestSource::synth);
  EXPECT_EQ(defaults.scenario.elements, 16);
  EXPECT_EQ(defaults.scenario.spacing_wavelengths, 0.5);
  const std::vector<Emitter> sources{{-20, 10}, {5, 10}, {31, 10}};
  EXPECT_EQ(defaults.scenario.sources, sources);
  EXPECT_EQ(defaults.scenario.jammers.size(), 1u);
  EXPECT_EQ(defaults.scenario.snapshots, 200);
  EXPECT_EQ(defaults.scenario.cells, 180);
  EXPECT_EQ(defaults.scenario.frame_rate_hz, 100.0);
  for (const std::string& endpoint : {defaults.daemon.results_endpoint, defaults.daemon.reports_endpoint,
                                      defaults.daemon.control_endpoint, defaults.ingest.zmq.endpoint})
    EXPECT_TRUE(endpoint.starts_with("tcp://127.0.0.1:")) << endpoint << " must bind to loopback by default";
}

TEST(ConfigLoad, AFileSetsNestedKeysListsAndChoices) {
  const Config c = load_string(R"(
daemon:
  log_level: debug
  report_interval_ms: 250
device:
  backend: cuda
  gpus: [1, 3]
ingest:
  source: file
  file:
    path: "recordings/run 7.cvf"
    pace: fixed
    rate_hz: 50
    speed: 2.5
    loop: true
    start_seq: 100
    stop_seq: null
scenario:
  sources:
    - angle_deg: -12.5
      power_db: 3
  jammers: []
pipeline:
  budget_ms: 4
  overflow: block
  stages:
    subspace: {source_count: aic, angle_grid: {min_deg: -60, max_deg: 60, step_deg: 0.25}}
    adaptive: {looks_deg: [-12.5, 0, 30], refactor_every: 0}
    publish:
      record_path: out.cvf
)",
                               "full.yaml");
  EXPECT_EQ(c.daemon.log_level, LogLevel::debug);
  EXPECT_EQ(c.daemon.report_interval_ms, 250);
  EXPECT_EQ(c.device.backend, Backend::cuda);
  EXPECT_EQ(c.device.gpus, (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(c.device.cpu_lanes, 1);
  EXPECT_EQ(c.ingest.source, IngestSource::file);
  EXPECT_EQ(c.ingest.file.path, "recordings/run 7.cvf");
  EXPECT_EQ(c.ingest.file.pace, Pace::fixed);
  EXPECT_EQ(c.ingest.file.rate_hz, 50.0);
  EXPECT_EQ(c.ingest.file.speed, 2.5);
  EXPECT_TRUE(c.ingest.file.loop);
  EXPECT_EQ(c.ingest.file.start_seq, 100);
  EXPECT_EQ(c.ingest.file.stop_seq, std::nullopt);
  EXPECT_EQ(c.scenario.sources, (std::vector<Emitter>{{-12.5, 3}}));
  EXPECT_TRUE(c.scenario.jammers.empty());
  EXPECT_EQ(c.pipeline.budget_ms, 4.0);
  EXPECT_EQ(c.pipeline.overflow, Overflow::block);
  EXPECT_EQ(c.pipeline.stages.subspace.source_count, SourceCountRule::aic);
  EXPECT_EQ(c.pipeline.stages.subspace.angle_grid, (AngleGrid{-60, 60, 0.25}));
  EXPECT_EQ(c.pipeline.stages.publish.record_path, "out.cvf");
  EXPECT_EQ(c.pipeline.stages.adaptive.looks_deg, (std::vector<double>{-12.5, 0, 30}));
  EXPECT_EQ(c.pipeline.stages.adaptive.refactor_every, 0);
  // Keys the file does not mention keep their defaults.
  EXPECT_EQ(c.scenario.elements, Config{}.scenario.elements);
  EXPECT_EQ(c.pipeline.stages.adaptive.window_snapshots, Config{}.pipeline.stages.adaptive.window_snapshots);
  EXPECT_EQ(c.pipeline.stages.covariance, Config{}.pipeline.stages.covariance);
}

TEST(ConfigLoad, OverridesApplyAfterTheFileInOrder) {
  const std::vector<std::string> overrides{"pipeline.budget_ms=4",
                                           "device.backend=cpu",
                                           "scenario.sources=[{angle_deg: 1, power_db: 2}, {angle_deg: 3, power_db: 4}]",
                                           "pipeline.stages.subspace={source_count: aic, degradable: true}",
                                           "daemon.log_level=warn",
                                           "daemon.log_level=error"};
  const Config c = load_string("pipeline:\n  budget_ms: 7\ndevice:\n  backend: cuda\n", "base.yaml", overrides);
  EXPECT_EQ(c.pipeline.budget_ms, 4.0);
  EXPECT_EQ(c.device.backend, Backend::cpu);
  EXPECT_EQ(c.scenario.sources, (std::vector<Emitter>{{1, 2}, {3, 4}}));
  EXPECT_EQ(c.pipeline.stages.subspace.source_count, SourceCountRule::aic);
  EXPECT_TRUE(c.pipeline.stages.subspace.degradable);
  EXPECT_EQ(c.pipeline.stages.subspace.angle_grid, Config{}.pipeline.stages.subspace.angle_grid);
  EXPECT_EQ(c.daemon.log_level, LogLevel::error);
}

// The adaptive stage's update rank left at its default (16) is a chunk size: a shorter window is
// updated in chunks of the whole window. Set, it is kept (and must fit the window: errors_test).
TEST(ConfigLoad, AnUnsetUpdateRankFitsAShortWindow) {
  const std::string adaptive = "pipeline:\n  stages:\n    adaptive:\n";
  EXPECT_EQ(load_string(adaptive + "      window_snapshots: 10\n", "short.yaml").pipeline.stages.adaptive.update_rank, 10);
  EXPECT_EQ(load_string(adaptive + "      window_snapshots: 800\n", "long.yaml").pipeline.stages.adaptive.update_rank,
            Config{}.pipeline.stages.adaptive.update_rank);
  EXPECT_EQ(load_string(adaptive + "      window_snapshots: 10\n      update_rank: 4\n", "set.yaml")
                .pipeline.stages.adaptive.update_rank,
            4);
  const std::vector<std::string> overrides{"pipeline.stages.adaptive.window_snapshots=3"};
  EXPECT_EQ(load_string("", "empty.yaml", overrides).pipeline.stages.adaptive.update_rank, 3);
}

// Every key of the schema can be overridden: setting it to its default changes nothing, and
// the text to_yaml writes for a changed configuration reads back to the same configuration.
TEST(ConfigLoad, EveryKeyOverridesAndRoundTripsThroughToYaml) {
  for (const KeyInfo& key : schema_keys()) {
    if (key.path.find("[]") != std::string::npos) continue;  // list item fields go with their list
    const std::vector<std::string> same{key.path + "=" + key.default_text};
    EXPECT_EQ(load_defaults(same), Config{}) << key.path;
  }
  std::mt19937_64 rng(test::fresh_seed("config round trip"));
  for (int trial = 0; trial < 20; ++trial) {
    std::uniform_real_distribution<double> angle(-90, 90), power(-100, 100), ms(0.5, 60);
    std::vector<std::string> overrides{
        fmt::format("pipeline.budget_ms={}", ms(rng)),
        fmt::format("scenario.sources=[{{angle_deg: {}, power_db: {}}}]", angle(rng), power(rng)),
        fmt::format("scenario.jammers=[{{angle_deg: {}, power_db: {}}}, {{angle_deg: {}, power_db: {}}}]", angle(rng), power(rng),
                    angle(rng), power(rng)),
        fmt::format("scenario.seed={}", rng() >> 1),
        fmt::format("scenario.spacing_wavelengths={}", std::uniform_real_distribution<double>(0.01, 10)(rng)),
        fmt::format("ingest.file.start_seq={}", rng() % 1000),
        fmt::format("ingest.file.path=\"dir/with \\\"quotes\\\" and: colon #{}\"", rng() % 100),
        fmt::format("device.gpus=[{}]", rng() % 64),
        fmt::format("pipeline.stages.subspace.angle_grid.step_deg={}", std::uniform_real_distribution<double>(0.001, 10)(rng)),
        fmt::format("pipeline.overflow={}", rng() % 2 ? "block" : "reject_newest"),
        fmt::format("pipeline.stages.adaptive.looks_deg=[{}, {}]", angle(rng), angle(rng)),
    };
    const Config changed = load_defaults(overrides);
    EXPECT_NE(changed, Config{});
    const std::string text = to_yaml(changed);
    EXPECT_EQ(load_string(text, "dumped.yaml"), changed) << text;
  }
}

// A planar array's and a position list's element count is set from them; elevations and clutter
// sectors take their optional fields' defaults; all of it round-trips through to_yaml, which
// writes an optional field only when it differs from its default.
TEST(ConfigLoad, ArraysElevationsClutterAndCovarianceKinds) {
  const Config defaults;
  EXPECT_EQ(defaults.scenario.geometry, ArrayGeometry::linear);
  EXPECT_TRUE(defaults.scenario.positions.empty());
  EXPECT_TRUE(defaults.scenario.clutter.empty());
  EXPECT_EQ(defaults.scenario.covariance, ScenarioCovariance::sample);
  for (const Emitter& e : defaults.scenario.sources) EXPECT_EQ(e.elevation_deg, 0.0);

  const Config planar = load_string(R"(
scenario:
  geometry: planar
  planar: {rows: 32, cols: 24, row_spacing_wavelengths: 0.45, col_spacing_wavelengths: 0.6}
  sources: [{angle_deg: 10, power_db: 0, elevation_deg: 5}]
  jammers: [{angle_deg: -40, power_db: 40}]
  clutter:
    - {center_deg: 0, width_deg: 60, power_db: 30}
    - {center_deg: 45, width_deg: 10, power_db: 20, elevation_deg: -2, step_deg: 0.5}
  payload: covariance
  covariance: wishart
  cells: 4
pipeline: {stages: {subspace: {enabled: false}}}
)",
                                    "planar.yaml");
  EXPECT_EQ(planar.scenario.elements, 32 * 24);
  EXPECT_EQ(planar.scenario.planar, (PlanarArray{32, 24, 0.45, 0.6}));
  EXPECT_EQ(planar.scenario.sources, (std::vector<Emitter>{{10, 0, 5}}));
  EXPECT_EQ(planar.scenario.jammers, (std::vector<Emitter>{{-40, 40, 0}}));
  const std::vector<ClutterSector> clutter{{0, 60, 30, 0, 0.1}, {45, 10, 20, -2, 0.5}};
  EXPECT_EQ(planar.scenario.clutter, clutter);
  EXPECT_EQ(planar.scenario.covariance, ScenarioCovariance::wishart);
  const std::string text = to_yaml(planar);
  EXPECT_NE(text.find("sources: [{angle_deg: 10, power_db: 0, elevation_deg: 5}]"), std::string::npos) << text;
  EXPECT_NE(text.find("clutter: [{center_deg: 0, width_deg: 60, power_db: 30}, {center_deg: 45, width_deg: 10, "
                      "power_db: 20, elevation_deg: -2, step_deg: 0.5}]"),
            std::string::npos)
      << text;
  EXPECT_EQ(load_string(text, "dumped.yaml"), planar) << text;
  // A value for scenario.elements that agrees is taken.
  EXPECT_EQ(load_string("scenario: {geometry: planar, planar: {rows: 2, cols: 3}, elements: 6}\n", "six.yaml",
                        std::vector<std::string>{"pipeline.stages.subspace.enabled=false"})
                .scenario.elements,
            6);

  const Config listed = load_defaults(std::vector<std::string>{
      "scenario.geometry=positions", "scenario.positions=[[0, 0, 0], [0.25, 0.5, 0], [0, 1, -0.75]]",
      "scenario.sources=[{angle_deg: 3, power_db: 1}]", "scenario.jammers=[]", "pipeline.stages.subspace.enabled=false"});
  EXPECT_EQ(listed.scenario.elements, 3);
  EXPECT_EQ(listed.scenario.positions, (std::vector<ElementPosition>{{0, 0, 0}, {0.25, 0.5, 0}, {0, 1, -0.75}}));
  EXPECT_EQ(load_string(to_yaml(listed), "dumped.yaml"), listed) << to_yaml(listed);
  EXPECT_EQ(name(ArrayGeometry::positions), "positions");
  EXPECT_EQ(name(ScenarioCovariance::model), "model");
}

TEST(ConfigLoad, AnEndpointOffLoopbackIsTakenWhenSecuredOrTrustedByChoice) {
  const Config curve = load_string("daemon:\n  control_endpoint: tcp://0.0.0.0:5602\n  curve:\n    secret_key_file: d.secret\n",
                                   "c.yaml");
  EXPECT_EQ(curve.daemon.curve.secret_key_file, "d.secret");
  const Config trusted =
      load_string("daemon:\n  results_endpoint: tcp://10.1.2.3:5600\n  allow_unauthenticated: true\n", "t.yaml");
  EXPECT_TRUE(trusted.daemon.allow_unauthenticated);
  for (const char* local : {"tcp://127.0.0.1:1", "tcp://127.9.8.7:2", "tcp://localhost:3", "tcp://[::1]:4", "ipc:///tmp/x",
                            "inproc://x"})
    EXPECT_TRUE(endpoint_is_local(local)) << local;
  for (const char* remote : {"tcp://0.0.0.0:1", "tcp://*:2", "tcp://10.0.0.1:3", "tcp://eth0:4", "tcp://128.0.0.1:5",
                             "tcp://127.0.0.1.example.com:6"})
    EXPECT_FALSE(endpoint_is_local(remote)) << remote;
}

TEST(ConfigLoad, EveryExampleFileLoads) {
  const std::filesystem::path dir = COVFLOW_SOURCE_DIR "/config/examples";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    EXPECT_NO_THROW(load_file(entry.path())) << entry.path();
  }
  EXPECT_GE(count, 4);
  // default.yaml spells out every default.
  EXPECT_EQ(load_file(dir / "default.yaml"), Config{});
}

}  // namespace
}  // namespace covflow::config

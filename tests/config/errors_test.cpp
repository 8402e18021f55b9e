// Bad configurations and the exact message each gets: FILE:LINE: KEY: what was expected (got ...)
#include <gtest/gtest.h>

#include <random>

#include "covflow/config/load.hpp"
#include "test_support.hpp"

namespace covflow::config {
namespace {

struct BadConfig {
  std::string yaml;
  std::vector<std::string> overrides;
  std::string message;
};

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides) {
  try {
    load_string(yaml, "bad.yaml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ConfigErrors, MessagesNameFileLineAndKey) {
  const BadConfig cases[] = {
      {"pipeline:\n  budgt_ms: 4\n", {},
       "bad.yaml:2: pipeline.budgt_ms: unknown key; expected one of budget_ms, queue_depth, overflow, stages; "
       "did you mean 'budget_ms'?"},
      {"pipline:\n  budget_ms: 4\n", {},
       "bad.yaml:1: pipline: unknown key; expected one of daemon, device, ingest, scenario, pipeline; did you mean 'pipeline'?"},
      {"# latency\npipeline:\n  budget_ms: -4\n", {}, "bad.yaml:3: pipeline.budget_ms: expected a number in (0, 60000] (got -4)"},
      {"pipeline:\n  budget_ms: \"4\"\n", {}, "bad.yaml:2: pipeline.budget_ms: expected a number in (0, 60000] (got \"4\")"},
      {"pipeline:\n  queue_depth: 2.5\n", {}, "bad.yaml:2: pipeline.queue_depth: expected an integer in [1, 4096] (got 2.5)"},
      {"pipeline:\n  budget_ms: 4\n  budget_ms: 5\n", {}, "bad.yaml:3: pipeline.budget_ms: given twice (first on line 2)"},
      {"pipeline: [1, 2]\n", {}, "bad.yaml:1: pipeline: expected a mapping of budget_ms, queue_depth, overflow, stages (got a list)"},
      {"device:\n  backend: cdua\n", {},
       "bad.yaml:2: device.backend: expected one of auto, cuda, cpu (got cdua); did you mean 'cuda'?"},
      {"device:\n  gpus: [0, 1, 1]\n", {}, "bad.yaml:2: device.gpus[2]: expected each id once (got 1 again)"},
      {"device:\n  gpus:\n    - 0\n    - 64\n", {}, "bad.yaml:4: device.gpus[1]: expected an integer in [0, 63] (got 64)"},
      {"device:\n  backend: cpu\n  gpus: [0]\n", {}, "bad.yaml:3: device.gpus: expected no GPU ids when device.backend is 'cpu' (got [0])"},
      {"daemon:\n  control_endpoint: tcp://0.0.0.0:5602\n", {},
       "bad.yaml:2: daemon.control_endpoint: expected an endpoint on loopback, ipc or inproc (got \"tcp://0.0.0.0:5602\", "
       "reachable from the network): secure it with daemon.curve.secret_key_file, or set daemon.allow_unauthenticated: "
       "true to trust the network"},
      {"", {"daemon.results_endpoint=tcp://*:5600"},
       "--set: daemon.results_endpoint: expected an endpoint on loopback, ipc or inproc (got \"tcp://*:5600\", reachable "
       "from the network): secure it with daemon.curve.secret_key_file, or set daemon.allow_unauthenticated: true to "
       "trust the network"},
      {"daemon:\n  curve:\n    clients_file: clients.keys\n", {},
       "bad.yaml:3: daemon.curve.clients_file: needs daemon.curve.secret_key_file: client keys are checked in CURVE "
       "handshakes"},
      {"device:\n  backend: cuda\n  cpu_lanes: 3\n", {},
       "bad.yaml:3: device.cpu_lanes: expected 1 when device.backend is 'cuda' (a lane per GPU: device.gpus) (got 3)"},
      {"device:\n  cpu_lanes: 0\n", {}, "bad.yaml:2: device.cpu_lanes: expected an integer in [1, 64] (got 0)"},
      {"pipeline:\n  stages:\n    compress:\n      tile: 64\n      max_rank: 65\n", {},
       "bad.yaml:5: pipeline.stages.compress.max_rank: expected at most pipeline.stages.compress.tile (64), or 0 for "
       "tile / 2 (got 65)"},
      {"", {"pipeline.stages.compress.format=lowrank", "pipeline.stages.compress.looks_deg=[10]"},
       "--set: pipeline.stages.compress.looks_deg: expected no looks with format lowrank: the MVDR weights are solved "
       "with the TLR Cholesky factor, which format tlr or auto makes (got 1 looks)"},
      {"pipeline:\n  stages:\n    compress:\n      format: hodlr\n", {},
       "bad.yaml:4: pipeline.stages.compress.format: expected one of tlr, lowrank, auto, h2 (got hodlr)"},
      {"ingest:\n  source: file\n", {}, "bad.yaml:2: ingest.file.path: required when ingest.source is 'file' (got nothing)"},
      {"ingest:\n  file:\n    loop: yes\n", {}, "bad.yaml:3: ingest.file.loop: expected true or false (got yes)"},
      {"pipeline:\n  stages:\n    adaptive:\n      window_snapshots: 10\n      update_rank: 12\n", {},
       "bad.yaml:5: pipeline.stages.adaptive.update_rank: expected at most window_snapshots (10) (got 12)"},
      {"ingest:\n  file:\n    start_seq: 10\n    stop_seq: 5\n", {},
       "bad.yaml:4: ingest.file.stop_seq: expected at least ingest.file.start_seq (10) (got 5)"},
      {"scenario:\n  sources:\n    - {angle_deg: 10, powr_db: 3}\n", {},
       "bad.yaml:3: scenario.sources[0].powr_db: unknown key; expected one of angle_deg, power_db, elevation_deg; did you "
       "mean 'power_db'?"},
      {"scenario:\n  jammers:\n    - angle_deg: 12\n      power_db: 20\n    - angle_deg: 95\n      power_db: 20\n", {},
       "bad.yaml:5: scenario.jammers[1].angle_deg: expected a number in [-90, 90] (got 95)"},
      {"scenario:\n  jammers:\n    - angle_deg: 12\n", {},
       "bad.yaml:3: scenario.jammers[0].power_db: required: expected a number in [-100, 100] (got nothing)"},
      {"scenario:\n  elements: 4\n", {},
       "bad.yaml:2: scenario.elements: expected fewer emitters (sources and jammers) than scenario.elements (4) (got 4)"},
      {"scenario:\n  snapshots: 100000\n  cells: 10000\n", {},
       "bad.yaml:3: scenario.cells: expected a frame of at most 4294967296 bytes (got 256000000000 bytes: 1600000 samples "
       "per cell × 10000 cells × 16 bytes)"},
      {"daemon:\n  results_endpoint: tcp://127.0.0.1\n", {},
       "bad.yaml:2: daemon.results_endpoint: expected a tcp endpoint as tcp://HOST:PORT (got tcp://127.0.0.1)"},
      {"daemon:\n  control_endpoint: tcp://127.0.0.1:5600\n", {},
       "bad.yaml:2: daemon.control_endpoint: expected an endpoint other than daemon.results_endpoint's (got "
       "\"tcp://127.0.0.1:5600\")"},
      {"daemon:\n  log_level: verbose\n", {},
       "bad.yaml:2: daemon.log_level: expected one of trace, debug, info, warn, error, critical, off (got verbose)"},
      {"pipeline:\n  stages:\n    subspace:\n      budget_ms: 20\n", {},
       "bad.yaml:4: pipeline.stages.subspace.budget_ms: expected at most pipeline.budget_ms (10) (got 20)"},
      {"pipeline:\n  stages:\n    subspace:\n      angle_grid: {min_deg: 10, max_deg: 10}\n", {},
       "bad.yaml:4: pipeline.stages.subspace.angle_grid.max_deg: expected more than angle_grid.min_deg (10) (got 10)"},
      {"pipeline:\n  budget_ms: [4\n", {}, "bad.yaml:3: -: YAML syntax: end of sequence flow not found"},
      {"a: 1\n---\nb: 2\n", {}, "bad.yaml: -: expected one YAML document (got more)"},
      {"# comment\n, daemon:\n", {}, "bad.yaml:2: -: YAML syntax: a node cannot start with ','"},
      {"", {"pipeline.budget_ms=,4"}, "--set: pipeline.budget_ms: YAML syntax: a node cannot start with ','"},
      {"just text\n", {}, "bad.yaml:1: (top level): expected a mapping of daemon, device, ingest, scenario, pipeline (got just text)"},
      // The array, elevations, clutter and the covariance kinds.
      {"scenario:\n  geometry: planar\n", {},
       "bad.yaml:2: pipeline.stages.subspace.enabled: expected false when scenario.geometry is 'planar': the subspace "
       "stage computes its MUSIC spectrum through FFTs along a uniform linear array (got true)"},
      {"scenario:\n  geometry: circular\n", {}, "bad.yaml:2: scenario.geometry: expected one of linear, planar, positions (got circular)"},
      {"scenario:\n  geometry: planar\n  planar: {rows: 1, cols: 1}\npipeline:\n  stages:\n    subspace: {enabled: false}\n", {},
       "bad.yaml:3: scenario.planar.cols: expected rows × cols in [2, 4096] (got 1 × 1 = 1)"},
      {"scenario:\n  planar:\n    row_spacing_wavelengths: -0.5\n", {},
       "bad.yaml:3: scenario.planar.row_spacing_wavelengths: expected a number in (0, 10] (got -0.5)"},
      {"scenario:\n  geometry: planar\n  planar: {rows: 2, cols: 3}\n  elements: 8\n", {"pipeline.stages.subspace.enabled=false"},
       "bad.yaml:4: scenario.elements: expected 6 for a 2 × 3 planar array, or no value (got 8)"},
      {"scenario:\n  geometry: positions\npipeline:\n  stages:\n    subspace: {enabled: false}\n", {},
       "bad.yaml:2: scenario.positions: expected at least 2 positions when scenario.geometry is 'positions' (got 0)"},
      {"scenario:\n  positions: [[0, 0, 0], [0, 0.5, 0]]\n", {},
       "bad.yaml:2: scenario.positions: expected no positions when scenario.geometry is 'linear' (got 2); set "
       "scenario.geometry to positions to use them"},
      {"scenario:\n  geometry: positions\n  positions: [[0, 0, 0], [0, 1]]\n", {},
       "bad.yaml:3: scenario.positions[1]: expected [x, y, z] with each coordinate a number in [-100000, 100000] (got a "
       "list of 2)"},
      {"scenario:\n  geometry: positions\n  positions:\n    - [0, 0, 0]\n    - [0, 0.5, 0]\n    - [0, 0, 0]\n", {},
       "bad.yaml:6: scenario.positions[2]: expected a position of its own (got [0, 0, 0], the position of "
       "scenario.positions[0])"},
      {"scenario:\n  geometry: positions\n  positions: [[0, 0, 0], [0, 1e6, 0]]\n", {},
       "bad.yaml:3: scenario.positions[1][1]: expected a number in [-100000, 100000] (got 1e6)"},
      {"", {"scenario.positions=7"},
       "--set: scenario.positions: expected a list of at most 4096 positions [x, y, z] with coordinates in [-100000, "
       "100000], such as [[0, 0, 0], [0, 0.5, 0]] (got 7)"},
      {"scenario:\n  sources:\n    - {angle_deg: 10, power_db: 3, elevation_deg: 91}\n", {},
       "bad.yaml:3: scenario.sources[0].elevation_deg: expected a number in [-90, 90] (got 91)"},
      {"scenario:\n  clutter:\n    - {center_deg: 0, width_deg: 0, power_db: 10}\n", {},
       "bad.yaml:3: scenario.clutter[0].width_deg: expected a number in (0, 180] (got 0)"},
      {"scenario:\n  clutter:\n    - {center_deg: 0, width_deg: 20, power_db: 10}\n    - {center_deg: 80, width_deg: 30, "
       "power_db: 10}\n",
       {},
       "bad.yaml:4: scenario.clutter[1].width_deg: expected at most 20 for a sector centred at 80, so that it lies within "
       "[-90, 90] (got 30)"},
      {"scenario:\n  clutter:\n    - {center_deg: 0, width_deg: 10}\n", {},
       "bad.yaml:3: scenario.clutter[0].power_db: required: expected a number in [-100, 100] (got nothing)"},
      {"scenario:\n  clutter:\n    - {center_deg: 0, width_deg: 10, power_db: 3, step_deg: 0}\n", {},
       "bad.yaml:3: scenario.clutter[0].step_deg: expected a number in [0.001, 10] (got 0)"},
      {"scenario:\n  clutter: [3]\n", {},
       "bad.yaml:2: scenario.clutter[0]: expected a mapping with center_deg, width_deg and power_db (got 3)"},
      {"", {"scenario.clutter=5"},
       "--set: scenario.clutter: expected a list of {center_deg, width_deg, power_db} mappings, such as [{center_deg: 0, "
       "width_deg: 30, power_db: 20}] (got 5)"},
      {"scenario:\n  covariance: model\n", {},
       "bad.yaml:2: scenario.covariance: expected sample when scenario.payload is 'snapshots': model and wishart are what "
       "covariance frames carry (got model)"},
      // Command-line overrides.
      {"", {"pipeline.budgt_ms=4"},
       "--set: pipeline.budgt_ms: unknown key; expected one of budget_ms, queue_depth, overflow, stages; did you mean "
       "'pipeline.budget_ms'?"},
      {"", {"pipeline.budget_ms=fast"}, "--set: pipeline.budget_ms: expected a number in (0, 60000] (got fast)"},
      {"", {"pipeline.budget_ms.max=1"}, "--set: pipeline.budget_ms.max: unknown key; pipeline.budget_ms is a value, not a section"},
      {"", {"budget_ms"}, "--set: budget_ms: expected KEY=VALUE, such as pipeline.budget_ms=4"},
      {"pipeline:\n  stages:\n    adaptive:\n      looks_deg: [5, 95]\n", {},
       "bad.yaml:4: pipeline.stages.adaptive.looks_deg[1]: expected a number in [-90, 90] (got 95)"},
      {"", {"pipeline.stages.adaptive.looks_deg=[]"},
       "--set: pipeline.stages.adaptive.looks_deg: expected a list of 1 to 64 numbers in [-90, 90], such as [5, -10] (got a list)"},
      {"", {"pipeline.stages.adaptive.looks_deg=5"},
       "--set: pipeline.stages.adaptive.looks_deg: expected a list of 1 to 64 numbers in [-90, 90], such as [5, -10] (got 5)"},
      {"", {"pipeline.stages.adaptive.refactor_every=-1"},
       "--set: pipeline.stages.adaptive.refactor_every: expected an integer in [0, 1000000] (got -1)"},
      {"pipeline:\n  budget_ms: 20\n", {"pipeline.stages.adaptive.budget_ms=25"},
       "--set: pipeline.stages.adaptive.budget_ms: expected at most pipeline.budget_ms (20) (got 25)"},
      // The svd method decomposes snapshots: covariance input is refused, naming the key.
      {"pipeline:\n  stages:\n    subspace:\n      method: qr\n", {},
       "bad.yaml:4: pipeline.stages.subspace.method: expected one of eig, svd (got qr)"},
      {"scenario:\n  payload: covariance\npipeline:\n  stages:\n    subspace:\n      method: svd\n", {},
       "bad.yaml:6: pipeline.stages.subspace.method: expected eig for an input of covariance frames (scenario.payload is "
       "'covariance'): svd decomposes each cell's snapshots, which such frames do not carry (got svd)"},
      {"pipeline:\n  stages:\n    subspace: {method: svd}\n", {"scenario.payload=covariance"},
       "bad.yaml:3: pipeline.stages.subspace.method: expected eig for an input of covariance frames (scenario.payload is "
       "'covariance'): svd decomposes each cell's snapshots, which such frames do not carry (got svd)"},
      {"ingest:\n  source: zmq\n  zmq:\n    shape: {payload: covariance}\n", {"pipeline.stages.subspace.method=svd"},
       "--set: pipeline.stages.subspace.method: expected eig for an input of covariance frames (ingest.zmq.shape.payload "
       "is 'covariance'): svd decomposes each cell's snapshots, which such frames do not carry (got svd)"},
      {"scenario:\n  snapshots: 12\n", {"pipeline.stages.subspace.method=svd"},
       "--set: pipeline.stages.subspace.method: expected eig when a cell has fewer snapshots than array elements "
       "(scenario.snapshots 12 < scenario.elements 16): svd's singular vectors then miss part of the noise subspace "
       "(got svd)"},
      {"pipeline:\n  stages:\n    covariance: {window: 4}\n    subspace: {method: svd}\n", {},
       "bad.yaml:4: pipeline.stages.subspace.method: expected pipeline.stages.covariance.window 1 with svd, which "
       "decomposes the snapshots of one frame, not a window of frames (got window 4)"},
  };
  for (const BadConfig& c : cases) EXPECT_EQ(error_of(c.yaml, c.overrides), c.message) << "config:\n" << c.yaml;
}

// What the svd method's rules leave alone: snapshot input of every source, covariance input with
// eig or with the subspace stage off, and a file, whose records say what they hold only once it is
// opened (the pipeline checks them then).
TEST(ConfigErrors, SvdMethodIsTakenWhereTheInputCarriesSnapshots) {
  EXPECT_EQ(load_defaults(std::vector<std::string>{"pipeline.stages.subspace.method=svd"}).pipeline.stages.subspace.method,
            SubspaceMethod::svd);
  EXPECT_NO_THROW(load_string("ingest:\n  source: zmq\npipeline:\n  stages:\n    subspace: {method: svd}\n", "ok.yaml"));
  EXPECT_NO_THROW(load_string("ingest:\n  source: file\n  file: {path: cov.cvf}\npipeline:\n  stages:\n    subspace: "
                              "{method: svd}\n",
                              "ok.yaml"));
  EXPECT_NO_THROW(load_string("scenario:\n  payload: covariance\npipeline:\n  stages:\n    subspace: {method: eig}\n",
                              "ok.yaml"));
  EXPECT_NO_THROW(load_string("scenario:\n  payload: covariance\npipeline:\n  stages:\n    subspace: {method: svd, "
                              "enabled: false}\n",
                              "ok.yaml"));
  EXPECT_EQ(name(SubspaceMethod::eig), "eig");
  EXPECT_EQ(name(SubspaceMethod::svd), "svd");
}

// The adaptive stage's beam pattern grid runs from -90 to 90 degrees inclusive: none, or at least 2
// points; and the results file's path is a string like the other paths.
TEST(ConfigErrors, BeamPatternPointsAreNoneOrAtLeastTwo) {
  EXPECT_EQ(error_of("pipeline:\n  stages:\n    adaptive:\n      beam_pattern_points: 1\n", {}),
            "bad.yaml:4: pipeline.stages.adaptive.beam_pattern_points: expected 0 (no pattern) or at least 2: the grid "
            "runs from -90 to 90 degrees inclusive (got 1)");
  EXPECT_EQ(error_of("pipeline:\n  stages:\n    adaptive:\n      beam_pattern_points: 3602\n", {}),
            "bad.yaml:4: pipeline.stages.adaptive.beam_pattern_points: expected an integer in [0, 3601] (got 3602)");
  EXPECT_EQ(load_string("pipeline:\n  stages:\n    adaptive:\n      beam_pattern_points: 2\n", "ok.yaml")
                .pipeline.stages.adaptive.beam_pattern_points,
            2);
  EXPECT_EQ(error_of("pipeline:\n  stages:\n    publish:\n      results_path: [a]\n", {}).rfind(
                "bad.yaml:4: pipeline.stages.publish.results_path: ", 0),
            0u);
  EXPECT_EQ(load_defaults(std::vector<std::string>{"pipeline.stages.publish.results_path=run.jsonl"})
                .pipeline.stages.publish.results_path,
            "run.jsonl");
}

TEST(ConfigErrors, MissingFileIsOneErrorNamingIt) {
  try {
    load_file("/nonexistent/covflow.yaml");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/covflow.yaml: -: cannot read the file (No such file or directory)");
    EXPECT_EQ(e.where(), "/nonexistent/covflow.yaml");
  }
}

// Mangled configurations: each either loads or gives a ConfigError; nothing else escapes.
TEST(ConfigErrors, MangledInputNeverEscapesAsAnythingElse) {
  std::mt19937_64 rng(test::fresh_seed("mangled config"));
  const std::string valid =
      "daemon:\n  log_level: debug\ndevice:\n  backend: cpu\ningest:\n  source: synth\n  file: {path: x.cvf, pace: fixed}\n"
      "scenario:\n  elements: 8\n  sources:\n    - {angle_deg: -3, power_db: 12}\n  jammers: []\npipeline:\n"
      "  budget_ms: 4\n  stages:\n    subspace: {angle_grid: {min_deg: -60, max_deg: 60}}\n";
  const std::string alphabet = " \n\t:-[]{},#&*!|>'\"%@`0123456789abcxyz.";
  int loaded = 0, refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text = valid;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: text = text.substr(0, at) + text.substr(std::min(text.size(), at + 1 + rng() % 8)); break;
        default: text = text.substr(0, at) + alphabet[rng() % alphabet.size()] + text.substr(at); break;
      }
      if (text.empty()) text.push_back('x');
    }
    try {
      load_string(text, "mangled.yaml");
      ++loaded;
    } catch (const ConfigError& e) {
      ++refused;
      EXPECT_TRUE(std::string(e.what()).starts_with("mangled.yaml")) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "escaped as " << typeid(e).name() << ": " << e.what() << "\ninput:\n" << text;
    }
  }
  std::cout << "[ info     ] " << loaded << " mangled configurations loaded, " << refused << " refused\n";
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace covflow::config

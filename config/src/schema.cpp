// The schema table: every key of the configuration, once.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "covflow/config/schema.hpp"
#include "schema_table.hpp"

namespace covflow::config {
namespace detail {
namespace {

#define COVFLOW_REF(member) +[](Config& c) -> auto& { return c.member; }
#define COVFLOW_CHOICE(member) choice([](Config& c) -> auto& { return c.member; })

template <std::size_t N>
std::vector<std::string_view> names(const std::array<std::string_view, N>& values) {
  return {values.begin(), values.end()};
}

std::string endpoint_problem(const std::string& value) {
  const auto scheme_end = value.find("://");
  if (scheme_end == std::string::npos) return "expected a ZeroMQ endpoint such as tcp://127.0.0.1:5600";
  const std::string scheme = value.substr(0, scheme_end);
  const std::string address = value.substr(scheme_end + 3);
  if (scheme != "tcp" && scheme != "ipc" && scheme != "inproc")
    return "expected a ZeroMQ endpoint with transport tcp, ipc or inproc";
  if (address.empty()) return "expected a ZeroMQ endpoint with an address after " + scheme + "://";
  if (scheme == "tcp") {
    const auto colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0) return "expected a tcp endpoint as tcp://HOST:PORT";
    const std::string port = address.substr(colon + 1);
    if (port == "*") return {};
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) ||
        std::stoi(port) < 1 || std::stoi(port) > 65535)
      return "expected a tcp endpoint as tcp://HOST:PORT with PORT in [1, 65535] or *";
  }
  return {};
}

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr RealRange positive_ms{0, 60'000, true, false};
constexpr RealRange stage_ms{0, 60'000};

std::vector<Key> make_keys() {
  return {
      // daemon
      {.path = "daemon.results_endpoint", .access = COVFLOW_REF(daemon.results_endpoint),
       .description = "ZeroMQ PUB endpoint the results are published on", .check = endpoint_problem,
       .expected = "ZeroMQ endpoint (tcp://, ipc://, inproc://)"},
      {.path = "daemon.reports_endpoint", .access = COVFLOW_REF(daemon.reports_endpoint),
       .description = "ZeroMQ PUB endpoint the latency reports (JSON) are published on", .check = endpoint_problem,
       .expected = "ZeroMQ endpoint (tcp://, ipc://, inproc://)"},
      {.path = "daemon.control_endpoint", .access = COVFLOW_REF(daemon.control_endpoint),
       .description = "ZeroMQ REP endpoint answering status, stats, reload and shutdown", .check = endpoint_problem,
       .expected = "ZeroMQ endpoint (tcp://, ipc://, inproc://)"},
      {.path = "daemon.report_interval_ms", .access = COVFLOW_REF(daemon.report_interval_ms),
       .description = "Interval between two latency reports, in milliseconds", .ints = {10, 3'600'000}},
      {.path = "daemon.log_level", .access = COVFLOW_CHOICE(daemon.log_level),
       .description = "Least severe log message written to stderr", .choices = names(log_level_names)},
      {.path = "daemon.curve.secret_key_file", .access = COVFLOW_REF(daemon.curve.secret_key_file),
       .description = "The daemon's CURVE secret key (a file written by covflow keygen): its three sockets require "
                      "CURVE clients that hold its public key (empty: no CURVE)",
       .expected = "path"},
      {.path = "daemon.curve.clients_file", .access = COVFLOW_REF(daemon.curve.clients_file),
       .description = "The client public keys admitted, one per line (empty: any client that holds the daemon's "
                      "public key)",
       .expected = "path"},
      {.path = "daemon.allow_unauthenticated", .access = COVFLOW_REF(daemon.allow_unauthenticated),
       .description = "Bind endpoints reachable from the network (off loopback) without CURVE, trusting the network; "
                      "without it such an endpoint is refused unless daemon.curve.secret_key_file is set"},
      // device
      {.path = "device.backend", .access = COVFLOW_CHOICE(device.backend),
       .description = "Where the linear algebra runs: the GPUs when there are any (auto), only the GPUs, or only the CPU",
       .choices = names(backend_names)},
      {.path = "device.gpus", .access = COVFLOW_REF(device.gpus),
       .description = "The CUDA device ids to use, a pipeline lane each (frames spread over them, or each frame's cells "
                      "when a stage keeps state across frames; results in sequence order); empty means every GPU of the host",
       .ints = {0, 63}},
      {.path = "device.cpu_lanes", .access = COVFLOW_REF(device.cpu_lanes),
       .description = "Pipeline lanes on the CPU backend, each with its share of the host's cores (frames spread over "
                      "them, or each frame's cells when a stage keeps state across frames; results in sequence order)",
       .ints = {1, 64}},
      {.path = "device.cpu_threads", .access = COVFLOW_REF(device.cpu_threads),
       .description = "Threads of the CPU backend, shared evenly by its lanes (at least one each); 0 means every "
                      "hardware thread of the host (several covflowd workers on one host each take their share)",
       .ints = {0, 4096}},
      // ingest
      {.path = "ingest.source", .access = COVFLOW_CHOICE(ingest.source),
       .description = "Where frames come from: the built-in scenario, a frame file, or a ZeroMQ feed",
       .choices = names(ingest_source_names)},
      {.path = "ingest.threads", .access = COVFLOW_REF(ingest.threads),
       .description = "Threads that check (CRC) and place each record of a file or feed into its frame slot; 0: three "
                      "quarters of the host's cores, at most 12",
       .ints = {0, 256}},
      {.path = "ingest.file.path", .access = COVFLOW_REF(ingest.file.path),
       .description = "Frame file to replay (required when ingest.source is file); relative to the working directory",
       .expected = "path"},
      {.path = "ingest.file.pace", .access = COVFLOW_CHOICE(ingest.file.pace),
       .description = "Replay paced by the recorded capture times, at rate_hz, or as fast as frames are taken",
       .choices = names(pace_names)},
      {.path = "ingest.file.rate_hz", .access = COVFLOW_REF(ingest.file.rate_hz),
       .description = "Frame rate when pace is fixed", .reals = {0, 1e6, true, false}},
      {.path = "ingest.file.speed", .access = COVFLOW_REF(ingest.file.speed),
       .description = "Factor on the recorded or fixed rate (2 replays twice as fast)", .reals = {0, 1000, true, false}},
      {.path = "ingest.file.loop", .access = COVFLOW_REF(ingest.file.loop),
       .description = "Start again from the first frame after the last"},
      {.path = "ingest.file.start_seq", .access = COVFLOW_REF(ingest.file.start_seq),
       .description = "First sequence number replayed (null: from the first record)",
       .ints = {0, std::numeric_limits<std::int64_t>::max()}},
      {.path = "ingest.file.stop_seq", .access = COVFLOW_REF(ingest.file.stop_seq),
       .description = "Last sequence number replayed, inclusive (null: to the last record)",
       .ints = {0, std::numeric_limits<std::int64_t>::max()}},
      {.path = "ingest.file.max_gap_s", .access = COVFLOW_REF(ingest.file.max_gap_s),
       .description = "Pace recorded: a gap between capture times longer than this (after speed) is shortened to it "
                      "and logged, so a pause in the recording or a wild capture time does not hold the replay",
       .reals = {0, 86'400, true, false}},
      {.path = "ingest.file.covariance_snapshots", .access = COVFLOW_REF(ingest.file.covariance_snapshots),
       .description = "For a file of covariance records: the snapshots each estimate was formed from (the source "
                      "count's K; records do not carry it). Required for such a file when the subspace stage is on; "
                      "snapshot records carry their own count",
       .ints = {1, 1'000'000}},
      {.path = "ingest.zmq.endpoint", .access = COVFLOW_REF(ingest.zmq.endpoint),
       .description = "ZeroMQ endpoint to connect to for a live feed (one frame record per message)",
       .check = endpoint_problem, .expected = "ZeroMQ endpoint (tcp://, ipc://, inproc://)"},
      {.path = "ingest.zmq.pattern", .access = COVFLOW_CHOICE(ingest.zmq.pattern),
       .description = "Socket type: SUB (a publisher's feed) or PULL (a share of a pushed feed)",
       .choices = names(zmq_pattern_names)},
      {.path = "ingest.zmq.shape.payload", .access = COVFLOW_CHOICE(ingest.zmq.shape.payload),
       .description = "What the feed's records carry: snapshots, or their sample covariance (a file's records say "
                      "it themselves; generated frames follow scenario)",
       .choices = names(scenario_payload_names)},
      {.path = "ingest.zmq.shape.element_type", .access = COVFLOW_CHOICE(ingest.zmq.shape.element_type),
       .description = "Complex sample type of the feed's records", .choices = names(sample_type_names)},
      {.path = "ingest.zmq.shape.elements", .access = COVFLOW_REF(ingest.zmq.shape.elements),
       .description = "Array elements (channels) of the feed's records", .ints = {2, 4096}},
      {.path = "ingest.zmq.shape.cells", .access = COVFLOW_REF(ingest.zmq.shape.cells),
       .description = "Range/Doppler cells per record of the feed", .ints = {1, 1'000'000}},
      {.path = "ingest.zmq.shape.snapshots", .access = COVFLOW_REF(ingest.zmq.shape.snapshots),
       .description = "Snapshot records: snapshots per cell; covariance records: the snapshots each estimate was "
                      "formed from (the source count's K)",
       .ints = {1, 1'000'000}},
      // scenario
      {.path = "scenario.geometry", .access = COVFLOW_CHOICE(scenario.geometry),
       .description = "The array: linear (scenario.elements spaced scenario.spacing_wavelengths apart), planar "
                      "(scenario.planar) or positions (scenario.positions); docs/scenario.md has the coordinate frame",
       .choices = names(array_geometry_names)},
      {.path = "scenario.elements", .access = COVFLOW_REF(scenario.elements),
       .description = "Elements of the linear array (channels). For geometry planar and positions it is rows × cols "
                      "or the number of positions: leave it out, or give that number",
       .ints = {2, 4096}},
      {.path = "scenario.spacing_wavelengths", .access = COVFLOW_REF(scenario.spacing_wavelengths),
       .description = "Element spacing of the linear array in wavelengths (0.5: no grating lobes)",
       .reals = {0, 10, true, false}},
      {.path = "scenario.planar.rows", .access = COVFLOW_REF(scenario.planar.rows),
       .description = "Rows of the planar array (geometry planar), stacked upward (z); rows × cols is in [2, 4096]",
       .ints = {1, 4096}},
      {.path = "scenario.planar.cols", .access = COVFLOW_REF(scenario.planar.cols),
       .description = "Columns of the planar array: elements per row, along y as the linear array's elements",
       .ints = {1, 4096}},
      {.path = "scenario.planar.row_spacing_wavelengths", .access = COVFLOW_REF(scenario.planar.row_spacing_wavelengths),
       .description = "Distance between neighbouring rows in wavelengths", .reals = {0, 10, true, false}},
      {.path = "scenario.planar.col_spacing_wavelengths", .access = COVFLOW_REF(scenario.planar.col_spacing_wavelengths),
       .description = "Distance between neighbouring columns in wavelengths", .reals = {0, 10, true, false}},
      {.path = "scenario.positions", .access = COVFLOW_REF(scenario.positions),
       .description = "Element positions (geometry positions), each [x, y, z] in wavelengths, element 0 (the phase "
                      "reference) first; no two alike",
       .ints = {0, 4096}, .reals = {-100'000, 100'000}},
      {.path = "scenario.sources", .access = COVFLOW_REF(scenario.sources),
       .description = "Target signals, each {angle_deg, power_db} and optionally elevation_deg"},
      {.path = "scenario.jammers", .access = COVFLOW_REF(scenario.jammers),
       .description = "Jammers (interference to be nulled), each {angle_deg, power_db} and optionally elevation_deg"},
      {.path = "scenario.clutter", .access = COVFLOW_REF(scenario.clutter),
       .description = "Clutter (diffuse interference) sectors, each {center_deg, width_deg, power_db} and optionally "
                      "elevation_deg and step_deg"},
      {.path = "scenario.snapshots", .access = COVFLOW_REF(scenario.snapshots),
       .description = "Snapshots (samples per channel) per cell per frame", .ints = {1, 1'000'000}},
      {.path = "scenario.cells", .access = COVFLOW_REF(scenario.cells),
       .description = "Range/Doppler cells per frame", .ints = {1, 1'000'000}},
      {.path = "scenario.frame_rate_hz", .access = COVFLOW_REF(scenario.frame_rate_hz),
       .description = "Frames per second (spacing of the capture times)", .reals = {0, 100'000, true, false}},
      {.path = "scenario.seed", .access = COVFLOW_REF(scenario.seed),
       .description = "Seed of the generator; the same seed gives the same frames",
       .ints = {0, std::numeric_limits<std::int64_t>::max()}},
      {.path = "scenario.payload", .access = COVFLOW_CHOICE(scenario.payload),
       .description = "Frames carry the snapshots, or one covariance matrix per cell (which one: scenario.covariance)",
       .choices = names(scenario_payload_names)},
      {.path = "scenario.covariance", .access = COVFLOW_CHOICE(scenario.covariance),
       .description = "What covariance frames carry: sample, the sample covariance of the generated snapshots; model, "
                      "the model covariance itself (no estimation noise); wishart, the sample covariance of "
                      "scenario.snapshots draws from the model, made from its Cholesky factor. model and wishart need "
                      "payload covariance; docs/scenario.md has their costs",
       .choices = names(scenario_covariance_names)},
      {.path = "scenario.element_type", .access = COVFLOW_CHOICE(scenario.element_type),
       .description = "Complex sample type of the frames", .choices = names(sample_type_names)},
      // pipeline
      {.path = "pipeline.budget_ms", .access = COVFLOW_REF(pipeline.budget_ms),
       .description = "Per-frame latency budget: deadline = arrival + budget", .reals = positive_ms},
      {.path = "pipeline.queue_depth", .access = COVFLOW_REF(pipeline.queue_depth),
       .description = "Frames the queue between ingest and processing holds", .ints = {1, 4096}},
      {.path = "pipeline.overflow", .access = COVFLOW_CHOICE(pipeline.overflow),
       .description = "What a full queue does with a new frame; every drop is counted",
       .choices = names(overflow_names)},
      {.path = "pipeline.stages.covariance.enabled", .access = COVFLOW_REF(pipeline.stages.covariance.enabled),
       .description = "Estimate covariance from snapshot frames"},
      {.path = "pipeline.stages.covariance.diagonal_loading", .access = COVFLOW_REF(pipeline.stages.covariance.diagonal_loading),
       .description = "Added to every diagonal element of the estimate (units of noise power)", .reals = {0, 1e9}},
      {.path = "pipeline.stages.covariance.window", .access = COVFLOW_REF(pipeline.stages.covariance.window),
       .description = "Frames whose snapshots the estimate spans (sliding window; 1: this frame only)", .ints = {1, 1024}},
      {.path = "pipeline.stages.covariance.forgetting", .access = COVFLOW_REF(pipeline.stages.covariance.forgetting),
       .description = "Weight per frame of age within the window (1: equal weights)", .reals = {0, 1, true, false}},
      {.path = "pipeline.stages.subspace.enabled", .access = COVFLOW_REF(pipeline.stages.subspace.enabled),
       .description = "Eigendecomposition, source count and MUSIC direction finding per cell"},
      {.path = "pipeline.stages.subspace.degradable", .access = COVFLOW_REF(pipeline.stages.subspace.degradable),
       .description = "Skip (and count) the stage when the remaining budget is below its predicted cost"},
      {.path = "pipeline.stages.subspace.budget_ms", .access = COVFLOW_REF(pipeline.stages.subspace.budget_ms),
       .description = "The stage's own budget (0: none beyond the frame's)", .reals = stage_ms},
      {.path = "pipeline.stages.subspace.source_count", .access = COVFLOW_CHOICE(pipeline.stages.subspace.source_count),
       .description = "Information criterion that counts the sources", .choices = names(source_count_names)},
      {.path = "pipeline.stages.subspace.method", .access = COVFLOW_CHOICE(pipeline.stages.subspace.method),
       .description = "How each cell's eigen-pairs are found: eig, heev of the covariance estimate; svd, a one-sided "
                      "Jacobi SVD of the cell's N × K snapshots (the same eigenvalues, σ²/K, without squaring the "
                      "condition number: accurate noise eigenvalues next to a strong jammer). svd needs snapshot "
                      "frames, K ≥ N and pipeline.stages.covariance.window 1",
       .choices = names(subspace_method_names)},
      {.path = "pipeline.stages.subspace.angle_grid.min_deg", .access = COVFLOW_REF(pipeline.stages.subspace.angle_grid.min_deg),
       .description = "First angle of the MUSIC pseudo-spectrum", .reals = {-90, 90}},
      {.path = "pipeline.stages.subspace.angle_grid.max_deg", .access = COVFLOW_REF(pipeline.stages.subspace.angle_grid.max_deg),
       .description = "Last angle of the MUSIC pseudo-spectrum", .reals = {-90, 90}},
      {.path = "pipeline.stages.subspace.angle_grid.step_deg", .access = COVFLOW_REF(pipeline.stages.subspace.angle_grid.step_deg),
       .description = "Angle step of the MUSIC pseudo-spectrum", .reals = {0.001, 10}},
      {.path = "pipeline.stages.adaptive.enabled", .access = COVFLOW_REF(pipeline.stages.adaptive.enabled),
       .description = "MVDR weights from Cholesky factors kept current by rank-k updates and downdates"},
      {.path = "pipeline.stages.adaptive.degradable", .access = COVFLOW_REF(pipeline.stages.adaptive.degradable),
       .description = "Skip (and count) the stage when the remaining budget is below its predicted cost"},
      {.path = "pipeline.stages.adaptive.budget_ms", .access = COVFLOW_REF(pipeline.stages.adaptive.budget_ms),
       .description = "The stage's own budget (0: none beyond the frame's)", .reals = stage_ms},
      {.path = "pipeline.stages.adaptive.looks_deg", .access = COVFLOW_REF(pipeline.stages.adaptive.looks_deg),
       .description = "Look directions: one MVDR beamformer (weights, SINR, null depth) per cell and look",
       .ints = {1, 64}, .reals = {-90, 90}},
      {.path = "pipeline.stages.adaptive.window_snapshots", .access = COVFLOW_REF(pipeline.stages.adaptive.window_snapshots),
       .description = "Snapshots the factor covers; older ones are downdated out", .ints = {1, 1'000'000}},
      {.path = "pipeline.stages.adaptive.update_rank", .access = COVFLOW_REF(pipeline.stages.adaptive.update_rank),
       .description = "Snapshots folded into the factor per rank-k update or downdate (unset: 16, or window_snapshots when shorter)",
       .ints = {1, 1024}},
      {.path = "pipeline.stages.adaptive.diagonal_loading", .access = COVFLOW_REF(pipeline.stages.adaptive.diagonal_loading),
       .description = "Loading added before factoring (units of noise power)", .reals = {0, 1e9}},
      {.path = "pipeline.stages.adaptive.refactor_every", .access = COVFLOW_REF(pipeline.stages.adaptive.refactor_every),
       .description = "Frames between refactorizations of the factors from the window, bounding drift (0: never)",
       .ints = {0, 1'000'000}},
      {.path = "pipeline.stages.adaptive.beam_pattern_points", .access = COVFLOW_REF(pipeline.stages.adaptive.beam_pattern_points),
       .description = "Points of each beam's pattern |wᴴa(θ)|² in dB, kept and published on azimuths evenly spaced "
                      "from -90 to 90 degrees inclusive (0: none; otherwise at least 2)",
       .ints = {0, 3601}},
      {.path = "pipeline.stages.compress.enabled", .access = COVFLOW_REF(pipeline.stages.compress.enabled),
       .description = "Compress each cell's covariance (tile low-rank, identity plus low rank, or H²) and report "
                      "ranks, bytes and the achieved error"},
      {.path = "pipeline.stages.compress.degradable", .access = COVFLOW_REF(pipeline.stages.compress.degradable),
       .description = "Skip (and count) the stage when the remaining budget is below its predicted cost"},
      {.path = "pipeline.stages.compress.budget_ms", .access = COVFLOW_REF(pipeline.stages.compress.budget_ms),
       .description = "The stage's own budget (0: none beyond the frame's)", .reals = stage_ms},
      {.path = "pipeline.stages.compress.format", .access = COVFLOW_CHOICE(pipeline.stages.compress.format),
       .description = "tlr: tiles, the off-diagonal ones as U·Vᴴ of per-tile rank; lowrank: σ²I plus one Hermitian "
                      "low-rank part (a few strong emitters over noise); h2: an H² matrix on the array's element "
                      "positions; auto: per cell, whichever of them meets the tolerance in the fewest bytes",
       .choices = names(compress_format_names)},
      {.path = "pipeline.stages.compress.tolerance", .access = COVFLOW_REF(pipeline.stages.compress.tolerance),
       .description = "Relative Frobenius error allowed per cell: ‖R − R̃‖_F ≤ tolerance·‖R‖_F",
       .reals = {0, 1, true, true}},
      {.path = "pipeline.stages.compress.tile", .access = COVFLOW_REF(pipeline.stages.compress.tile),
       .description = "TLR tile size (the last tile row may be smaller)", .ints = {1, 4096}},
      {.path = "pipeline.stages.compress.max_rank", .access = COVFLOW_REF(pipeline.stages.compress.max_rank),
       .description = "TLR rank cap per tile (0: tile / 2); a tile that needs more is cut and its cell's error reported",
       .ints = {0, 4096}},
      {.path = "pipeline.stages.compress.looks_deg", .access = COVFLOW_REF(pipeline.stages.compress.looks_deg),
       .description = "MVDR looks solved through the TLR Cholesky factor, with their SINR loss against dense weights "
                      "(empty: none)",
       .ints = {0, 64}, .reals = {-90, 90}},
      {.path = "pipeline.stages.compress.leaf_size", .access = COVFLOW_REF(pipeline.stages.compress.leaf_size),
       .description = "H² (format h2 or auto): the most array elements a leaf cluster holds", .ints = {1, 4096}},
      {.path = "pipeline.stages.compress.eta", .access = COVFLOW_REF(pipeline.stages.compress.eta),
       .description = "H² (format h2 or auto): admissibility η, a pair of element clusters is stored at low rank when "
                      "max(diam t, diam s) ≤ η·dist(t, s)",
       .reals = {0, 100, true, false}},
      {.path = "pipeline.stages.publish.enabled", .access = COVFLOW_REF(pipeline.stages.publish.enabled),
       .description = "Publish the results on daemon.results_endpoint"},
      {.path = "pipeline.stages.publish.record_path", .access = COVFLOW_REF(pipeline.stages.publish.record_path),
       .description = "Frame file the input frames are also recorded to (empty: none)", .expected = "path"},
      {.path = "pipeline.stages.publish.results_path", .access = COVFLOW_REF(pipeline.stages.publish.results_path),
       .description = "JSON Lines file every published result and latency report is also written to (empty: none)",
       .expected = "path"},
      {.path = "pipeline.stages.publish.spectrum", .access = COVFLOW_REF(pipeline.stages.publish.spectrum),
       .description = "Add the MUSIC pseudo-spectrum (spectrum_db, cells × angle grid) to each result message"},
      {.path = "pipeline.stages.publish.eigenvalues", .access = COVFLOW_REF(pipeline.stages.publish.eigenvalues),
       .description = "Add each cell's covariance eigenvalues (eigenvalues, ascending) to each result message"},
      {.path = "pipeline.stages.publish.weights", .access = COVFLOW_REF(pipeline.stages.publish.weights),
       .description = "Add the adaptive stage's MVDR weights (weights, [re, im] pairs) to each result message"},
  };
}

#undef COVFLOW_REF
#undef COVFLOW_CHOICE

}  // namespace

std::string IntRange::text() const { return fmt::format("[{}, {}]", min, max); }

bool RealRange::contains(double value) const {
  if (std::isnan(value)) return false;
  const bool above = min_open ? value > min : value >= min;
  const bool below = max_open ? value < max : value <= max;
  return above && below;
}

std::string RealRange::text() const {
  return fmt::format("{}{}, {}{}", min_open ? '(' : '[', min, max, max_open ? ')' : ']');
}

const std::vector<Key>& keys() {
  static const std::vector<Key> table = make_keys();
  return table;
}

const std::array<ItemField<Emitter>, 3>& emitter_fields() {
  static const std::array<ItemField<Emitter>, 3> fields{{
      {"angle_deg", &Emitter::angle_deg, {-90, 90},
       "Azimuth from broadside, positive toward increasing element index (+y; docs/scenario.md)"},
      {"power_db", &Emitter::power_db, {-100, 100}, "Power per element in dB relative to the noise power per element"},
      {"elevation_deg", &Emitter::elevation_deg, {-90, 90}, "Elevation above the horizontal plane (x, y), positive up (+z)",
       false},
  }};
  return fields;
}

const std::array<ItemField<ClutterSector>, 5>& clutter_fields() {
  static const std::array<ItemField<ClutterSector>, 5> fields{{
      {"center_deg", &ClutterSector::center_deg, {-90, 90}, "Azimuth of the sector's centre, as an emitter's angle_deg"},
      {"width_deg", &ClutterSector::width_deg, {0, 180, true, false},
       "Azimuth width of the sector; the sector lies within [-90, 90]"},
      {"power_db", &ClutterSector::power_db, {-100, 100},
       "Power of the whole sector per element in dB relative to the noise power per element"},
      {"elevation_deg", &ClutterSector::elevation_deg, {-90, 90}, "Elevation of the sector, as an emitter's", false},
      {"step_deg", &ClutterSector::step_deg, {0.001, 10},
       "Largest azimuth step between the point scatterers that model the sector", false},
  }};
  return fields;
}

const Key* find_key(std::string_view path) {
  for (const Key& key : keys())
    if (key.path == path) return &key;
  return nullptr;
}

std::vector<std::string> children(std::string_view section) {
  std::vector<std::string> out;
  const std::string prefix = section.empty() ? std::string() : std::string(section) + ".";
  for (const Key& key : keys()) {
    if (!key.path.starts_with(prefix)) continue;
    const std::string_view rest = key.path.substr(prefix.size());
    std::string child(rest.substr(0, rest.find('.')));
    if (std::find(out.begin(), out.end(), child) == out.end()) out.push_back(std::move(child));
  }
  return out;
}

bool is_section(std::string_view path) {
  if (path.empty()) return true;
  const std::string prefix = std::string(path) + ".";
  return std::any_of(keys().begin(), keys().end(), [&](const Key& key) { return key.path.starts_with(prefix); });
}

std::string quote(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(ch));
        else out += ch;
    }
  }
  return out + "\"";
}

namespace {

// A list of mappings in flow style: every required field, and the optional ones that differ from
// their default (a list that uses no optional field reads as it would be written by hand).
template <class Item, std::size_t N>
std::string items_text(const std::vector<Item>& list, const std::array<ItemField<Item>, N>& fields) {
  const Item defaults{};
  std::vector<std::string> items;
  for (const Item& item : list) {
    std::vector<std::string> parts;
    for (const auto& field : fields)
      if (field.required || item.*field.member != defaults.*field.member)
        parts.push_back(fmt::format("{}: {}", field.name, item.*field.member));
    items.push_back(fmt::format("{{{}}}", fmt::join(parts, ", ")));
  }
  return fmt::format("[{}]", fmt::join(items, ", "));
}

}  // namespace

std::string value_text(const Key& key, const Config& config) {
  Config& c = const_cast<Config&>(config);  // accessors are shared by reads and writes; this one only reads
  struct Visitor {
    const Key& key;
    Config& c;
    std::string operator()(bool& (*f)(Config&)) const { return f(c) ? "true" : "false"; }
    std::string operator()(std::int64_t& (*f)(Config&)) const { return fmt::format("{}", f(c)); }
    std::string operator()(std::optional<std::int64_t>& (*f)(Config&)) const {
      return f(c) ? fmt::format("{}", *f(c)) : "null";
    }
    std::string operator()(double& (*f)(Config&)) const { return fmt::format("{}", f(c)); }
    std::string operator()(std::string& (*f)(Config&)) const { return quote(f(c)); }
    std::string operator()(ChoiceRef f) const { return std::string(key.choices.at(std::size_t(f.get(c)))); }
    std::string operator()(std::vector<std::int64_t>& (*f)(Config&)) const { return fmt::format("[{}]", fmt::join(f(c), ", ")); }
    std::string operator()(std::vector<double>& (*f)(Config&)) const { return fmt::format("[{}]", fmt::join(f(c), ", ")); }
    std::string operator()(std::vector<Emitter>& (*f)(Config&)) const { return items_text(f(c), emitter_fields()); }
    std::string operator()(std::vector<ClutterSector>& (*f)(Config&)) const { return items_text(f(c), clutter_fields()); }
    std::string operator()(std::vector<ElementPosition>& (*f)(Config&)) const {
      std::vector<std::string> items;
      for (const ElementPosition& p : f(c)) items.push_back(fmt::format("[{}, {}, {}]", p.x, p.y, p.z));
      return fmt::format("[{}]", fmt::join(items, ", "));
    }
  };
  return std::visit(Visitor{key, c}, key.access);
}

}  // namespace detail

namespace {

using detail::Key;

std::string type_of(const Key& key) {
  switch (key.access.index()) {
    case 0: return "boolean";
    case 1: return "integer";
    case 2: return "integer or null";
    case 3: return "number";
    case 4: return "string";
    case 5: return "string";
    case 6: return "list of integers";
    case 7: return "list of emitters";
    case 8: return "list of numbers";
    case 9: return "list of clutter sectors";
    default: return "list of positions";
  }
}

std::string allowed_of(const Key& key) {
  switch (key.access.index()) {
    case 0: return "true, false";
    case 1: return key.ints.text();
    case 2: return "null or " + key.ints.text();
    case 3: return key.reals.text();
    case 4: return std::string(key.expected);
    case 5: return fmt::format("{}", fmt::join(key.choices, ", "));
    case 6: return "each in " + key.ints.text() + ", no repeats";
    case 8: return fmt::format("{} to {} items, each in {}", key.ints.min, key.ints.max, key.reals.text());
    case 10: return fmt::format("{} to {} items [x, y, z], each coordinate in {}", key.ints.min, key.ints.max, key.reals.text());
    default: return "see below";
  }
}

// The fields of a list of mappings, as rows of the reference below the list's own.
template <class Item, std::size_t N>
void add_fields(std::vector<KeyInfo>& out, const Key& key, const std::array<detail::ItemField<Item>, N>& fields) {
  const Item defaults{};
  for (const auto& field : fields)
    out.push_back({std::string(key.path) + "[]." + std::string(field.name), "number", field.range.text(),
                   field.required ? std::string("required") : fmt::format("{}", defaults.*field.member),
                   std::string(field.description)});
}

}  // namespace

std::vector<KeyInfo> schema_keys() {
  const Config defaults;
  std::vector<KeyInfo> out;
  for (const Key& key : detail::keys()) {
    out.push_back({std::string(key.path), type_of(key), allowed_of(key), detail::value_text(key, defaults),
                   std::string(key.description)});
    if (key.access.index() == 7) add_fields(out, key, detail::emitter_fields());
    if (key.access.index() == 9) add_fields(out, key, detail::clutter_fields());
  }
  return out;
}

std::string reference_markdown() {
  std::string out;
  std::string section;
  auto escape = [](const std::string& text) {
    std::string escaped;
    for (char ch : text) escaped += ch == '|' ? std::string("\\|") : std::string(1, ch);
    return escaped;
  };
  for (const KeyInfo& key : schema_keys()) {
    const std::string top = key.path.substr(0, key.path.find('.'));
    if (top != section) {
      section = top;
      out += fmt::format("{}### `{}`\n\n| key | type | default | allowed | description |\n|---|---|---|---|---|\n",
                         out.empty() ? "" : "\n", section);
    }
    out += fmt::format("| `{}` | {} | `{}` | {} | {} |\n", key.path, key.type, escape(key.default_text), escape(key.allowed),
                       escape(key.description));
  }
  return out;
}

}  // namespace covflow::config

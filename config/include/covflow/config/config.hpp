// The daemon's configuration as plain, validated structs. covflow::config parses YAML into these
// once (load.hpp); nothing outside config/ sees YAML. Every default below is the documented
// default (docs/config.md is generated from the schema, which reads them from here): with no
// file at all, covflowd runs the built-in demo scenario.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace covflow::config {

// Enumerations: the YAML spelling of each value is its name() (the enumerator's name, except
// Backend::automatic, spelled "auto").
enum class LogLevel { trace, debug, info, warn, error, critical, off };
enum class Backend { automatic, cuda, cpu };
enum class IngestSource { synth, file, zmq };
enum class Pace { recorded, fixed, fast };
enum class ZmqPattern { sub, pull };
enum class ScenarioPayload { snapshots, covariance };
enum class ArrayGeometry { linear, planar, positions };
enum class ScenarioCovariance { sample, model, wishart };
enum class SampleType { cf32, cf64 };
enum class Overflow { drop_oldest, reject_newest, block };
enum class SourceCountRule { mdl, aic };
enum class SubspaceMethod { eig, svd };
enum class CompressFormat { tlr, lowrank, automatic, h2 };

std::string_view name(LogLevel value);
std::string_view name(Backend value);
std::string_view name(IngestSource value);
std::string_view name(Pace value);
std::string_view name(ZmqPattern value);
std::string_view name(ScenarioPayload value);
std::string_view name(ArrayGeometry value);
std::string_view name(ScenarioCovariance value);
std::string_view name(SampleType value);
std::string_view name(Overflow value);
std::string_view name(SourceCountRule value);
std::string_view name(SubspaceMethod value);
std::string_view name(CompressFormat value);

// ZeroMQ CURVE security for the daemon's sockets (docs/zmq.md, "Security").
struct CurveConfig {
  std::string secret_key_file;  // the daemon's secret key (covflow keygen); empty: no CURVE
  std::string clients_file;     // the client public keys admitted; empty: any that holds the daemon's public key
  bool operator==(const CurveConfig&) const = default;
};

struct DaemonConfig {
  std::string results_endpoint = "tcp://127.0.0.1:5600";
  std::string reports_endpoint = "tcp://127.0.0.1:5601";
  std::string control_endpoint = "tcp://127.0.0.1:5602";
  std::int64_t report_interval_ms = 1000;
  LogLevel log_level = LogLevel::info;
  CurveConfig curve;
  // Bind endpoints off loopback without CURVE (the network is trusted): refused otherwise.
  bool allow_unauthenticated = false;
  bool operator==(const DaemonConfig&) const = default;
};

struct DeviceConfig {
  Backend backend = Backend::automatic;
  std::vector<std::int64_t> gpus;  // the GPUs to use, a lane each; empty: every GPU of the host
  std::int64_t cpu_lanes = 1;      // lanes on the CPU backend, sharing the host's cores
  std::int64_t cpu_threads = 0;    // the CPU backend's threads, shared by its lanes; 0: every hardware thread
  bool operator==(const DeviceConfig&) const = default;
};

struct FileIngestConfig {
  std::string path;
  Pace pace = Pace::recorded;
  double rate_hz = 100.0;
  double speed = 1.0;
  bool loop = false;
  std::optional<std::int64_t> start_seq;
  std::optional<std::int64_t> stop_seq;
  double max_gap_s = 10.0;  // pace recorded: longer gaps between capture times are shortened to this
  // A file's frame shape comes from its first record; covariance records do not say how many
  // snapshots each estimate was formed from, which the source count needs.
  std::optional<std::int64_t> covariance_snapshots;
  bool operator==(const FileIngestConfig&) const = default;
};

// The frames a ZeroMQ feed carries. A feed cannot be asked for its shape, so it is stated here;
// the pipeline is sized for it and frames of another shape are dropped (reason shape).
struct FeedShape {
  ScenarioPayload payload = ScenarioPayload::snapshots;
  SampleType element_type = SampleType::cf64;
  std::int64_t elements = 16;
  std::int64_t cells = 180;
  // Snapshot frames: snapshots per cell. Covariance frames: the snapshots each estimate was
  // formed from (the source count's K), as scenario.snapshots means for generated frames.
  std::int64_t snapshots = 200;
  bool operator==(const FeedShape&) const = default;
};

struct ZmqIngestConfig {
  std::string endpoint = "tcp://127.0.0.1:5550";
  ZmqPattern pattern = ZmqPattern::sub;
  FeedShape shape;
  bool operator==(const ZmqIngestConfig&) const = default;
};

struct IngestConfig {
  IngestSource source = IngestSource::synth;
  std::int64_t threads = 0;  // that check and place each record of a file or feed; 0: automatic
  FileIngestConfig file;
  ZmqIngestConfig zmq;
  bool operator==(const IngestConfig&) const = default;
};

// A plane-wave emitter seen by the array: direction (azimuth from broadside, elevation above the
// array's horizontal plane) and power relative to the noise power of one element
// (docs/scenario.md).
struct Emitter {
  double angle_deg = 0.0;  // azimuth
  double power_db = 0.0;
  double elevation_deg = 0.0;
  bool operator==(const Emitter&) const = default;
};

// Diffuse interference (clutter): a total power spread evenly over an azimuth sector at one
// elevation, modelled as point scatterers at most step_deg apart (docs/scenario.md, "Clutter").
struct ClutterSector {
  double center_deg = 0.0;
  double width_deg = 0.0;
  double power_db = 0.0;  // the whole sector's, relative to the noise power of one element
  double elevation_deg = 0.0;
  double step_deg = 0.1;
  bool operator==(const ClutterSector&) const = default;
};

// Rows × cols elements in the array's vertical plane, rows stacked upward (docs/scenario.md).
struct PlanarArray {
  std::int64_t rows = 4;
  std::int64_t cols = 4;
  double row_spacing_wavelengths = 0.5;
  double col_spacing_wavelengths = 0.5;
  bool operator==(const PlanarArray&) const = default;
};

// An element's position in wavelengths, in the frame docs/scenario.md defines (x broadside,
// y along the linear array, z up).
struct ElementPosition {
  double x = 0.0;
  double y = 0.0;
  double z = 0.0;
  bool operator==(const ElementPosition&) const = default;
};

struct ScenarioConfig {
  // linear: `elements` spaced `spacing_wavelengths` apart; planar: `planar`; positions:
  // `positions`. `elements` is the channel count for every geometry (the loader sets it from
  // the planar shape or the list).
  ArrayGeometry geometry = ArrayGeometry::linear;
  std::int64_t elements = 16;
  double spacing_wavelengths = 0.5;
  PlanarArray planar;
  std::vector<ElementPosition> positions;
  std::vector<Emitter> sources{{-20.0, 10.0}, {5.0, 10.0}, {31.0, 10.0}};
  std::vector<Emitter> jammers{{48.0, 30.0}};
  std::vector<ClutterSector> clutter;
  std::int64_t snapshots = 200;
  std::int64_t cells = 180;
  double frame_rate_hz = 100.0;
  std::int64_t seed = 1;
  ScenarioPayload payload = ScenarioPayload::snapshots;
  // What covariance frames carry: the sample covariance of the snapshots, the model covariance
  // itself, or a draw of the sample covariance of `snapshots` snapshots made from the model.
  ScenarioCovariance covariance = ScenarioCovariance::sample;
  SampleType element_type = SampleType::cf64;
  bool operator==(const ScenarioConfig&) const = default;
};

struct CovarianceStageConfig {
  bool enabled = true;
  double diagonal_loading = 0.0;
  std::int64_t window = 1;
  double forgetting = 1.0;
  bool operator==(const CovarianceStageConfig&) const = default;
};

struct AngleGrid {
  double min_deg = -90.0;
  double max_deg = 90.0;
  double step_deg = 0.5;
  bool operator==(const AngleGrid&) const = default;
};

struct SubspaceStageConfig {
  bool enabled = true;
  bool degradable = false;
  double budget_ms = 0.0;
  SourceCountRule source_count = SourceCountRule::mdl;
  // eig: heev of the covariance estimate. svd: gesvj of each cell's snapshot matrix, whose
  // singular values square to the same eigenvalues without squaring the condition number.
  SubspaceMethod method = SubspaceMethod::eig;
  AngleGrid angle_grid;
  bool operator==(const SubspaceStageConfig&) const = default;
};

struct AdaptiveStageConfig {
  bool enabled = true;
  bool degradable = true;
  double budget_ms = 0.0;
  std::vector<double> looks_deg{5.0};  // steering directions of the MVDR beamformers
  std::int64_t window_snapshots = 800;
  std::int64_t update_rank = 16;  // fastest per frame at the default scenario on a GPU (docs/performance.md)
  double diagonal_loading = 0.01;
  std::int64_t refactor_every = 50;  // frames between refactorizations from the window (0: never)
  // Points of each beam's pattern |wᴴa(θ)|² (dB) kept, on azimuths from −90° to 90° inclusive
  // evenly spaced (0: no pattern; otherwise at least 2).
  std::int64_t beam_pattern_points = 0;
  bool operator==(const AdaptiveStageConfig&) const = default;
};


// The compress stage (docs/stages.md, "compress"): each cell's covariance stored as a tile
// low-rank matrix (tlr), as a scaled identity plus one low-rank part (lowrank), as an H² matrix on
// the array's element positions (h2), or as the smallest of them (auto, CompressFormat::automatic),
// to a relative Frobenius tolerance.
struct CompressStageConfig {
  bool enabled = false;
  bool degradable = true;
  double budget_ms = 0.0;
  CompressFormat format = CompressFormat::automatic;
  double tolerance = 1e-6;        // ‖R − R̃‖_F ≤ tolerance·‖R‖_F per cell
  std::int64_t tile = 128;        // TLR tile size b
  std::int64_t max_rank = 0;      // TLR rank cap per tile (0: b/2, past which a tile is cheaper dense)
  std::vector<double> looks_deg;  // MVDR looks through tlr_potrf/potrs (empty: no weights)
  std::int64_t leaf_size = 32;    // H²: the most elements a leaf cluster holds
  double eta = 0.7;               // H²: admissibility, max(diam t, diam s) ≤ η·dist(t, s)
  bool operator==(const CompressStageConfig&) const = default;
};

struct PublishStageConfig {
  bool enabled = true;
  std::string record_path;  // empty: the input frames are not recorded
  std::string results_path;  // empty: the published results and reports are not written to disk (JSON Lines)
  // Optional arrays of the result message (docs/zmq.md): the MUSIC pseudo-spectrum, the
  // eigenvalues, the MVDR weights.
  bool spectrum = false;
  bool eigenvalues = false;
  bool weights = false;
  bool operator==(const PublishStageConfig&) const = default;
};

struct StagesConfig {
  CovarianceStageConfig covariance;
  SubspaceStageConfig subspace;
  AdaptiveStageConfig adaptive;
  CompressStageConfig compress;
  PublishStageConfig publish;
  bool operator==(const StagesConfig&) const = default;
};

struct PipelineConfig {
  double budget_ms = 10.0;
  std::int64_t queue_depth = 8;
  Overflow overflow = Overflow::drop_oldest;
  StagesConfig stages;
  bool operator==(const PipelineConfig&) const = default;
};

struct Config {
  DaemonConfig daemon;
  DeviceConfig device;
  IngestConfig ingest;
  ScenarioConfig scenario;
  PipelineConfig pipeline;
  bool operator==(const Config&) const = default;
};

}  // namespace covflow::config

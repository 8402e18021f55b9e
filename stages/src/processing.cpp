// The processing stages from the configuration, and the pool shape it implies.
#include "covflow/stages/processing.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "covflow/config/error.hpp"

#include "covflow/stages/adaptive_stage.hpp"
#include "covflow/stages/compress_stage.hpp"
#include "covflow/stages/covariance_stage.hpp"
#include "covflow/stages/scenario.hpp"
#include "covflow/stages/subspace_stage.hpp"

namespace covflow::stages {

namespace {

replay::ElementType element_type(config::SampleType type) {
  return type == config::SampleType::cf32 ? replay::ElementType::cf32 : replay::ElementType::cf64;
}
replay::PayloadKind payload_kind(config::ScenarioPayload payload) {
  return payload == config::ScenarioPayload::covariance ? replay::PayloadKind::covariance : replay::PayloadKind::snapshots;
}

}  // namespace

std::string describe(const InputShape& s) {
  if (s.payload == replay::PayloadKind::covariance)
    return fmt::format("covariance {} × {}² {} ({})", s.cells, s.elements, replay::name(s.element_type),
                       s.snapshots > 0 ? fmt::format("K = {}", s.snapshots) : std::string("K not given"));
  return fmt::format("snapshots {} × {} × {} {} (elements × snapshots × cells)", s.elements, s.snapshots, s.cells,
                     replay::name(s.element_type));
}

InputShape scenario_shape(const config::ScenarioConfig& scenario) {
  return {payload_kind(scenario.payload), element_type(scenario.element_type), static_cast<std::uint32_t>(scenario.elements),
          static_cast<std::uint32_t>(scenario.cells), static_cast<std::uint32_t>(scenario.snapshots)};
}

InputShape feed_shape(const config::FeedShape& feed) {
  return {payload_kind(feed.payload), element_type(feed.element_type), static_cast<std::uint32_t>(feed.elements),
          static_cast<std::uint32_t>(feed.cells), static_cast<std::uint32_t>(feed.snapshots)};
}

replay::Frame warm_up_frame(const InputShape& input) {
  config::ScenarioConfig noise;
  noise.sources.clear();
  noise.jammers.clear();
  noise.elements = input.elements;
  noise.cells = input.cells;
  noise.element_type = input.element_type == replay::ElementType::cf32 ? config::SampleType::cf32 : config::SampleType::cf64;
  if (input.payload == replay::PayloadKind::covariance) {
    noise.payload = config::ScenarioPayload::covariance;
    // Only the covariance's shape matters here; a few more snapshots than elements keep it full rank.
    noise.snapshots = 2 * std::int64_t(input.elements);
  } else {
    noise.payload = config::ScenarioPayload::snapshots;
    noise.snapshots = input.snapshots;
  }
  return ScenarioGenerator(noise).frame(0);
}

pipeline::FrameShape frame_shape(const config::Config& config) { return frame_shape(config, scenario_shape(config.scenario)); }

std::vector<std::unique_ptr<pipeline::Stage>> make_processing_stages(const config::Config& config) {
  return make_processing_stages(config, scenario_shape(config.scenario));
}

pipeline::FrameShape frame_shape(const config::Config& config, const InputShape& input) {
  pipeline::FrameShape shape;
  shape.element_type = input.element_type;
  shape.channels = input.elements;
  shape.snapshots = input.payload == replay::PayloadKind::snapshots ? input.snapshots : 0;
  shape.cells = input.cells;
  const auto& subspace = config.pipeline.stages.subspace;
  shape.spectrum_points = subspace.enabled ? angle_grid_points(subspace.angle_grid).points : 0;
  const auto& adaptive = config.pipeline.stages.adaptive;
  shape.looks = adaptive.enabled ? static_cast<std::uint32_t>(adaptive.looks_deg.size()) : 0;
  const auto& compress = config.pipeline.stages.compress;
  shape.compress = compress.enabled;
  shape.compress_looks = compress.enabled ? static_cast<std::uint32_t>(compress.looks_deg.size()) : 0;
  shape.beam_pattern_points = adaptive.enabled ? static_cast<std::uint32_t>(adaptive.beam_pattern_points) : 0;
  return shape;
}

std::vector<std::unique_ptr<pipeline::Stage>> make_processing_stages(const config::Config& config, const InputShape& input) {
  const auto& stages = config.pipeline.stages;
  // The svd method decomposes snapshots. The loader refuses it for the generator's and a feed's
  // covariance frames; a file's records say what they are only now, so this names the key the same
  // way (covflowd reports it as a configuration error).
  if (stages.subspace.enabled && stages.subspace.method == config::SubspaceMethod::svd) {
    if (input.payload == replay::PayloadKind::covariance)
      throw config::ConfigError(
          "input", "pipeline.stages.subspace.method",
          fmt::format("expected eig for an input of covariance frames ({}): svd decomposes each cell's snapshots, "
                      "which such frames do not carry (got svd)",
                      describe(input)));
    if (input.snapshots < input.elements)
      throw config::ConfigError(
          "input", "pipeline.stages.subspace.method",
          fmt::format("expected eig when a cell has fewer snapshots than array elements ({}): svd's singular vectors "
                      "then miss part of the noise subspace (got svd)",
                      describe(input)));
    if (stages.covariance.window > 1)
      throw config::ConfigError(
          "configuration", "pipeline.stages.subspace.method",
          fmt::format("expected pipeline.stages.covariance.window 1 with svd, which decomposes the snapshots of one "
                      "frame, not a window of frames (got window {})",
                      stages.covariance.window));
  }
  // The loader refuses this too; a configuration built in code meets it here.
  if (stages.subspace.enabled && config.scenario.geometry != config::ArrayGeometry::linear)
    throw config::ConfigError(
        "configuration", "pipeline.stages.subspace.enabled",
        fmt::format("expected false when scenario.geometry is '{}': the subspace stage computes its MUSIC spectrum "
                    "through FFTs along a uniform linear array (got true)",
                    config::name(config.scenario.geometry)));
  if (stages.subspace.enabled && input.payload == replay::PayloadKind::covariance && input.snapshots == 0)
    throw std::invalid_argument(
        "the input's covariance frames do not say how many snapshots each estimate was formed from, which the "
        "subspace stage's source count needs (for a file: set ingest.file.covariance_snapshots)");
  const double nominal_snapshots = static_cast<double>(input.snapshots);
  std::vector<std::unique_ptr<pipeline::Stage>> chain;
  const CovarianceStage* covariance = nullptr;
  if (stages.covariance.enabled) {
    auto stage = std::make_unique<CovarianceStage>(stages.covariance, nominal_snapshots);
    covariance = stage.get();
    chain.push_back(std::move(stage));
  }
  if (stages.subspace.enabled) {
    SubspaceSettings settings;
    settings.config = stages.subspace;
    settings.spacing_wavelengths = config.scenario.spacing_wavelengths;
    settings.nominal_snapshots = nominal_snapshots;
    settings.snapshot_counts = covariance;
    // svd reads the snapshots from the payload whether or not the covariance stage runs.
    settings.covariance_from_payload = covariance == nullptr && stages.subspace.method == config::SubspaceMethod::eig;
    settings.diagonal_loading = stages.covariance.diagonal_loading;
    chain.push_back(std::make_unique<SubspaceStage>(settings));
  }
  if (stages.adaptive.enabled) {
    AdaptiveSettings settings;
    settings.config = stages.adaptive;
    settings.spacing_wavelengths = config.scenario.spacing_wavelengths;
    if (config.scenario.geometry != config::ArrayGeometry::linear) settings.element_positions = element_positions(config.scenario);
    // The frames follow the scenario's model only when the daemon draws them from it.
    if (config.ingest.source == config::IngestSource::synth) settings.model = config.scenario;
    chain.push_back(std::make_unique<AdaptiveStage>(settings));
  }
  if (stages.compress.enabled) {
    if (covariance == nullptr && input.payload != replay::PayloadKind::covariance)
      throw config::ConfigError(
          "configuration", "pipeline.stages.compress.enabled",
          fmt::format("expected pipeline.stages.covariance.enabled true for an input of snapshot frames ({}): the "
                      "compress stage compresses covariance matrices (got compress without covariance)",
                      describe(input)));
    CompressSettings settings;
    settings.config = stages.compress;
    settings.spacing_wavelengths = config.scenario.spacing_wavelengths;
    if (config.scenario.geometry != config::ArrayGeometry::linear) settings.element_positions = element_positions(config.scenario);
    settings.covariance_from_payload = covariance == nullptr;
    chain.push_back(std::make_unique<CompressStage>(settings));
  }
  return chain;
}

}  // namespace covflow::stages

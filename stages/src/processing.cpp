// The processing stages from the configuration, and the pool shape it implies.
#include "covflow/stages/processing.hpp"

#include "covflow/stages/adaptive_stage.hpp"
#include "covflow/stages/covariance_stage.hpp"
#include "covflow/stages/subspace_stage.hpp"

namespace covflow::stages {

pipeline::FrameShape frame_shape(const config::Config& config) {
  const auto& scenario = config.scenario;
  pipeline::FrameShape shape;
  shape.element_type =
      scenario.element_type == config::SampleType::cf32 ? replay::ElementType::cf32 : replay::ElementType::cf64;
  shape.channels = static_cast<std::uint32_t>(scenario.elements);
  shape.snapshots =
      scenario.payload == config::ScenarioPayload::snapshots ? static_cast<std::uint32_t>(scenario.snapshots) : 0;
  shape.cells = static_cast<std::uint32_t>(scenario.cells);
  const auto& subspace = config.pipeline.stages.subspace;
  shape.spectrum_points = subspace.enabled ? angle_grid_points(subspace.angle_grid).points : 0;
  const auto& adaptive = config.pipeline.stages.adaptive;
  shape.looks = adaptive.enabled ? static_cast<std::uint32_t>(adaptive.looks_deg.size()) : 0;
  return shape;
}

std::vector<std::unique_ptr<pipeline::Stage>> make_processing_stages(const config::Config& config) {
  const auto& stages = config.pipeline.stages;
  const double nominal_snapshots = static_cast<double>(config.scenario.snapshots);
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
    settings.covariance_from_payload = covariance == nullptr;
    chain.push_back(std::make_unique<SubspaceStage>(settings));
  }
  if (stages.adaptive.enabled) {
    AdaptiveSettings settings;
    settings.config = stages.adaptive;
    settings.spacing_wavelengths = config.scenario.spacing_wavelengths;
    // The frames follow the scenario's model only when the daemon draws them from it.
    if (config.ingest.source == config::IngestSource::synth) settings.model = config.scenario;
    chain.push_back(std::make_unique<AdaptiveStage>(settings));
  }
  return chain;
}

}  // namespace covflow::stages

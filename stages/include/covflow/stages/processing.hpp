// The processing stages of the default chain (covariance, subspace, adaptive, compress), built from the configuration.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "covflow/config/config.hpp"
#include "covflow/pipeline/frame.hpp"
#include "covflow/pipeline/stage.hpp"
#include "covflow/replay/frame.hpp"

namespace covflow::stages {

// What an input's frames are, which the pipeline is sized for: the scenario section for the
// built-in generator, a file's first record for a replay, ingest.zmq.shape for a feed.
struct InputShape {
  replay::PayloadKind payload = replay::PayloadKind::snapshots;
  replay::ElementType element_type = replay::ElementType::cf64;
  std::uint32_t elements = 0;  // N: array elements (channels)
  std::uint32_t cells = 0;
  // Snapshot frames: snapshots per cell. Covariance frames: the snapshots each estimate was formed
  // from (the source count's K; 0 when the input does not say).
  std::uint32_t snapshots = 0;

  bool operator==(const InputShape&) const = default;
};

// "covariance 180 × 128² cf64 (K = 512)", "snapshots 24 × 200 × 180 cf32" (elements × snapshots ×
// cells), for the log.
std::string describe(const InputShape& shape);

InputShape scenario_shape(const config::ScenarioConfig& scenario);
InputShape feed_shape(const config::FeedShape& feed);

// A synthetic frame of `input`'s shape for the warm start (pipeline::Runner::warm_up): the built-in
// generator's noise alone (no emitters), on the array the shape describes.
replay::Frame warm_up_frame(const InputShape& input);

// The pool shape for frames of `input`: its element type, elements, cells and (snapshot frames)
// snapshots, with the MUSIC angle grid's length as spectrum points when the subspace stage is
// enabled, the adaptive stage's look count as looks when it is enabled, and the compress stage's
// results and look count when it is enabled.
pipeline::FrameShape frame_shape(const config::Config& config, const InputShape& input);
// The same for the built-in generator's frames (scenario_shape(config.scenario)).
pipeline::FrameShape frame_shape(const config::Config& config);

// The enabled processing stages in chain order: covariance, subspace, adaptive, compress, for
// frames of `input`. The array is the scenario's (scenario.geometry and its keys, for every input). The
// subspace stage needs it linear and takes its spacing from scenario.spacing_wavelengths, the
// effective snapshot count of each frame from the covariance stage (input.snapshots for
// covariance frames), and reads the payload of covariance frames directly when the covariance
// stage is disabled. The adaptive stage takes the array's element positions when it is not
// linear, reads the snapshots itself and gets the scenario as its model (SINR, null depth) only
// when ingest.source is synth. Throws config::ConfigError naming pipeline.stages.subspace.enabled
// when the subspace stage meets an array that is not linear.
// With pipeline.stages.subspace.method svd the subspace stage reads the snapshots from the payload
// (whether or not the covariance stage runs) and adds pipeline.stages.covariance.diagonal_loading
// to its eigenvalues. Throws config::ConfigError naming pipeline.stages.subspace.method when svd
// meets an input of covariance frames, or of fewer snapshots than elements (the loader refuses
// these for the generator and a feed; a file's records are known only here), and
// std::invalid_argument when the subspace stage would need K for covariance frames that do not
// say it. The compress stage reads the covariance stage's estimate, or covariance frames'
// payloads when there is no covariance stage (a config::ConfigError naming
// pipeline.stages.compress.enabled for snapshot frames then), and takes the array's element
// positions for its looks. The stages refer to each other: keep the vector (or all of its elements) alive
// together.
std::vector<std::unique_ptr<pipeline::Stage>> make_processing_stages(const config::Config& config, const InputShape& input);
// The same for the built-in generator's frames.
std::vector<std::unique_ptr<pipeline::Stage>> make_processing_stages(const config::Config& config);

}  // namespace covflow::stages

// The processing stages of the default chain (covariance, subspace, adaptive), built from the configuration.
#pragma once

#include <memory>
#include <vector>

#include "covflow/config/config.hpp"
#include "covflow/pipeline/frame.hpp"
#include "covflow/pipeline/stage.hpp"

namespace covflow::stages {

// The pool shape the configuration implies: the array (elements), snapshots and cells of the
// scenario section (which describes the array for every ingest source), its element type, and
// the MUSIC angle grid's length as spectrum points when the subspace stage is enabled, and the
// adaptive stage's look count as looks when it is enabled.
pipeline::FrameShape frame_shape(const config::Config& config);

// The enabled processing stages in chain order: covariance, subspace, adaptive. The subspace stage
// takes the element spacing from scenario.spacing_wavelengths, the effective snapshot count of
// each frame from the covariance stage (scenario.snapshots for covariance frames), and reads the
// payload of covariance frames directly when the covariance stage is disabled. The adaptive stage
// reads the snapshots itself and gets the scenario as its model (SINR, null depth) only when
// ingest.source is synth. The stages refer
// to each other: keep the vector (or all of its elements) alive together.
std::vector<std::unique_ptr<pipeline::Stage>> make_processing_stages(const config::Config& config);

}  // namespace covflow::stages

// The built-in scenario: a uniform linear array receiving plane waves from sources and jammers
// in complex Gaussian noise; the ingest stage's default input. docs/scenario.md has the model:
//
//   x_c(t) = Σ_k a(θ_k) s_k,c(t) + n_c(t),   a_m(θ) = exp(j·2π·d·m·sin θ),  m = 0 … M−1
//   s_k,c(t) ~ CN(0, p_k),  p_k = 10^(power_db/10),  n_c(t) ~ CN(0, I)
//
// independent across emitters, snapshots t, cells c and frames. θ is measured from broadside,
// positive toward increasing element index m; d is the spacing in wavelengths; powers are
// relative to the noise power of one element.
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <vector>

#include "covflow/config/config.hpp"
#include "covflow/replay/frame.hpp"

namespace covflow::linalg {
class Exec;
}

namespace covflow::stages {

// a(θ) for an array of `elements` with `spacing_wavelengths`, θ in degrees.
std::vector<std::complex<double>> steering_vector(std::int64_t elements, double spacing_wavelengths, double angle_deg);

// The covariance the scenario's snapshots have, R = Σ_k p_k a(θ_k) a(θ_k)ᴴ + I, column-major N×N.
std::vector<std::complex<double>> model_covariance(const config::ScenarioConfig& scenario);

class ScenarioGenerator {
 public:
  // `start_time_ns` is the capture time of frame 0; frame s is captured s / frame_rate_hz later.
  // `threads` share the work of one frame (0: one per hardware thread); the frames do not
  // depend on it.
  explicit ScenarioGenerator(const config::ScenarioConfig& scenario, std::int64_t start_time_ns = 0, unsigned threads = 0);
  ~ScenarioGenerator();
  ScenarioGenerator(ScenarioGenerator&&) noexcept;
  ScenarioGenerator& operator=(ScenarioGenerator&&) noexcept;

  // The frame with this sequence number. Each frame draws from its own random stream, keyed by
  // the seed and the sequence number, so frames come out the same in any order.
  replay::Frame frame(std::uint64_t sequence);
  // Frames 0, 1, 2, ... in turn.
  replay::Frame next() { return frame(next_sequence_++); }

  const config::ScenarioConfig& scenario() const { return scenario_; }
  std::int64_t capture_time_ns(std::uint64_t sequence) const;

 private:
  template <class T>
  replay::Frame make(std::uint64_t sequence);
  template <class T>
  void snapshots(std::uint64_t sequence, std::vector<T>& out);

  config::ScenarioConfig scenario_;
  std::int64_t start_time_ns_;
  std::uint64_t next_sequence_ = 0;
  // steering[k * M + m] = a_m(θ_k) √p_k for every emitter k (sources, then jammers).
  std::vector<std::complex<double>> scaled_steering_;
  std::unique_ptr<linalg::Exec> exec_;  // CPU: the thread pool, and sample_covariance
};

}  // namespace covflow::stages

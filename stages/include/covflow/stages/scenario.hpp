// The built-in scenario: an array (linear, planar, or elements at listed positions) receiving
// plane waves from sources, jammers and clutter in complex Gaussian noise; the ingest stage's
// default input. docs/scenario.md has the model and its conventions:
//
//   x_c(t) = Σ_k a(u_k) s_k,c(t) + n_c(t),   a_m(u) = exp(j·2π·(p_m − p_0)·u)
//   u(az, el) = (cos el·cos az, cos el·sin az, sin el)
//   s_k,c(t) ~ CN(0, p_k),  n_c(t) ~ CN(0, I),   R = Σ_k p_k a(u_k) a(u_k)ᴴ + I
//
// summed over the point emitters k: the sources, the jammers, and the point scatterers that each
// clutter sector is made of; all independent across emitters, snapshots t, cells c and frames.
// p_m is element m's position in wavelengths (x broadside, y along the linear array, z up); the
// linear array has p_m = (0, m·d, 0), so a_m = exp(j·2π·d·m·sin az·cos el). Powers are relative
// to the noise power of one element.
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "covflow/config/config.hpp"
#include "covflow/replay/frame.hpp"

namespace covflow::linalg {
class Exec;
}

namespace covflow::stages {

// One point emitter of the model: its direction in degrees and its power p (linear, relative to
// the noise power of one element).
struct PointEmitter {
  double azimuth_deg = 0.0;
  double elevation_deg = 0.0;
  double power = 1.0;
};

// A clutter sector as the point scatterers that model it: the sector split into P = ⌈width/step⌉
// equal azimuth slices, one scatterer of power p/P at the centre of each.
std::vector<PointEmitter> clutter_scatterers(const config::ClutterSector& sector);
// Every point emitter of the scenario, in the order the generator draws their amplitudes: the
// sources, the jammers, then each clutter sector's scatterers by increasing azimuth.
std::vector<PointEmitter> point_emitters(const config::ScenarioConfig& scenario);

// Every element's position in wavelengths, element 0 first: (0, m·d, 0) for the linear array,
// (0, c·d_col, r·d_row) for element m = r·cols + c of the planar one, the list as given otherwise.
std::vector<config::ElementPosition> element_positions(const config::ScenarioConfig& scenario);

// a(θ) of a linear array of `elements` with `spacing_wavelengths`, θ the azimuth in degrees, at
// an elevation (degrees) that shortens the spacing seen along the wave by cos el.
std::vector<std::complex<double>> steering_vector(std::int64_t elements, double spacing_wavelengths, double angle_deg,
                                                  double elevation_deg = 0.0);
// a(az, el) of elements at `positions`: a_m = exp(j·2π·(p_m − p_0)·u(az, el)).
std::vector<std::complex<double>> steering_vector(std::span<const config::ElementPosition> positions, double azimuth_deg,
                                                  double elevation_deg);
// a(az, el) of the scenario's array. The linear array takes the first form, which is how every
// frame of a linear array has been made (the general form equals it up to rounding); the others
// take the second.
std::vector<std::complex<double>> steering_vector(const config::ScenarioConfig& scenario, double azimuth_deg,
                                                  double elevation_deg = 0.0);

// The covariance the scenario's snapshots have, R = Σ_k p_k a(u_k) a(u_k)ᴴ + I over every point
// emitter, column-major N×N, exactly Hermitian. O(N²·emitters), through one BLAS herk.
std::vector<std::complex<double>> model_covariance(const config::ScenarioConfig& scenario);

class ScenarioGenerator {
 public:
  // `start_time_ns` is the capture time of frame 0; frame s is captured s / frame_rate_hz later.
  // `threads` share the work of one frame (0: one per hardware thread); the frames do not
  // depend on it. Covariance frames of the model or of Wishart draws compute R (and for wishart
  // its Cholesky factor) here, once.
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
  template <class T>
  void wishart_factors(std::uint64_t sequence, std::vector<T>& out);

  config::ScenarioConfig scenario_;
  std::int64_t start_time_ns_;
  std::uint64_t next_sequence_ = 0;
  // Snapshots (and their sample covariance): steering[k * M + m] = a_m(u_k) √p_k for every point
  // emitter k in draw order.
  std::vector<std::complex<double>> scaled_steering_;
  // Covariance frames of the model: R. Of Wishart draws: its lower Cholesky factor L (R = L·Lᴴ,
  // the strict upper triangle zero). Column-major N×N; empty otherwise.
  std::vector<std::complex<double>> model_, model_factor_;
  std::unique_ptr<linalg::Exec> exec_;  // CPU: the thread pool, sample_covariance and potrf
};

}  // namespace covflow::stages

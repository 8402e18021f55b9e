// Internal: the scalar mathematics of the adaptive stage, shared by its CPU path and its CUDA
// kernels (host and device code alike, in double precision whatever the frames' type): MVDR
// weights from the solution z = R⁻¹a of linalg::potrs, and the beam's SINR and null depth against
// the scenario's model. docs/stages.md, "adaptive", derives each formula.
#pragma once

#include <cmath>

#include "covflow/stages/music_math.hpp"  // COVFLOW_HD, music::is_finite

namespace covflow::stages::adaptive {

struct Cplx {
  double re, im;
};
COVFLOW_HD inline Cplx operator+(Cplx a, Cplx b) { return {a.re + b.re, a.im + b.im}; }
COVFLOW_HD inline Cplx operator*(Cplx a, Cplx b) { return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }
COVFLOW_HD inline Cplx scaled(Cplx a, double s) { return {a.re * s, a.im * s}; }
COVFLOW_HD inline Cplx conj(Cplx a) { return {a.re, -a.im}; }
COVFLOW_HD inline double norm2(Cplx a) { return a.re * a.re + a.im * a.im; }

// w = z / (aᴴz) from z = R⁻¹a (one column of linalg::potrs's solution with the look's steering
// vector a as right-hand side). In exact arithmetic aᴴz = aᴴR⁻¹a is real and positive (R is
// Hermitian positive definite); its computed imaginary part is rounding and is dropped:
//   gain = Re(aᴴz) = Σ_m Re(conj(a_m)·z_m),   w = z / gain,   so Re(wᴴa) = 1 and wᴴa = 1 + O(ε·κ).
// `solution(m)` returns z_m. False when gain is not positive and finite (w untouched) — z solved
// with a factor that is not one — or when a weight is not finite.
template <class Solution>
COVFLOW_HD bool mvdr_weights_from_solution(const Solution& solution, int n, const Cplx* a, Cplx* w) {
  double gain = 0.0;
  for (int m = 0; m < n; ++m) {
    const Cplx z = solution(m);
    gain += a[m].re * z.re + a[m].im * z.im;  // Re(conj(a_m)·z_m)
  }
  if (!(gain > 0.0) || !music::is_finite(gain)) return false;
  const double inverse = 1.0 / gain;
  bool finite = true;
  for (int m = 0; m < n; ++m) {
    w[m] = scaled(solution(m), inverse);
    finite = finite && music::is_finite(w[m].re) && music::is_finite(w[m].im);
  }
  return finite;
}

// wᴴb = Σ conj(w_m)·b_m.
COVFLOW_HD inline Cplx inner(const Cplx* w, const Cplx* b, int n) {
  Cplx sum{0.0, 0.0};
  for (int m = 0; m < n; ++m) sum = sum + conj(w[m]) * b[m];
  return sum;
}

// The scenario's model for one look, as the metrics need it: every emitter's steering vector
// (emitters × n, emitter-major) and power, which of them are jammers, which emitter (if any) sits
// at the look direction, and the power assumed for the look's signal.
struct BeamModelView {
  const Cplx* steering = nullptr;  // [emitters × n]
  const double* power = nullptr;   // [emitters], linear (noise power per element = 1)
  const int* jammer = nullptr;     // [emitters], 1 for a jammer
  int emitters = 0;
  int look_emitter = -1;           // emitter at the look direction, excluded from R_i+n; −1: none
  double look_power = 1.0;         // its power; 1 (0 dB) when there is none
};

// Against the model R_i+n = Σ_{k ≠ look} p_k·a_k·a_kᴴ + I:
//   SINR  = p_look·|wᴴa_look|² / (wᴴR_i+n·w) = p_look·|wᴴa_look|² / (‖w‖² + Σ_{k≠look} p_k·|wᴴa_k|²)
//   null  = min over jammers j of −10·log10(|wᴴa_j|² / |wᴴa_look|²)   (NaN: no jammers)
// both in dB.
COVFLOW_HD inline void beam_metrics(const Cplx* w, const Cplx* look, int n, const BeamModelView& model, double* sinr_db,
                                    double* null_depth_db) {
  const double look_gain = norm2(inner(w, look, n));
  double interference = 0.0;
  for (int m = 0; m < n; ++m) interference += norm2(w[m]);
  double shallowest = NAN;
  for (int k = 0; k < model.emitters; ++k) {
    const double gain = norm2(inner(w, model.steering + static_cast<long long>(k) * n, n));
    if (k != model.look_emitter) interference += model.power[k] * gain;
    if (model.jammer[k] != 0) {
      const double depth = -10.0 * log10(gain / look_gain);
      shallowest = music::is_finite(shallowest) ? fmin(shallowest, depth) : depth;
    }
  }
  *sinr_db = 10.0 * log10(model.look_power * look_gain / interference);
  *null_depth_db = shallowest;
}

}  // namespace covflow::stages::adaptive

// The checks of the adaptive stage, written once against an Exec so that stages_test runs them on
// a CPU Exec and stages_gpu_test on a CUDA one. The reference is computed here, independently of
// the stage: the window's covariance from the frames' own snapshots, a fresh Cholesky
// factorization and the MVDR weights in long double, and the eigenvalues of the covariance (for
// κ(R)) from linalg::heev on the CPU.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "covflow/config/config.hpp"
#include "covflow/linalg/heev.hpp"
#include "covflow/linalg/types.hpp"
#include "covflow/stages/adaptive_stage.hpp"
#include "covflow/stages/processing.hpp"
#include "covflow/stages/scenario.hpp"
#include "slot_support.hpp"
#include "test_support.hpp"

namespace covflow::test::adaptive_checks {

using cd = std::complex<double>;
using cl = std::complex<long double>;

template <class T>
constexpr config::SampleType sample_type() {
  return std::is_same_v<T, linalg::cf32> ? config::SampleType::cf32 : config::SampleType::cf64;
}

// A small configuration that exercises every path of the window: K = 16 snapshots per frame, a
// window of W = 64 (four frames), update_rank 5 (chunks that do not divide K and a ring of
// W + K − 1 = 79 columns, so chunks wrap), the default scenario's emitters on 8 elements.
template <class T>
config::Config small_config(std::uint64_t seed) {
  config::Config c;
  c.scenario.elements = 8;
  c.scenario.snapshots = 16;
  c.scenario.cells = 6;
  c.scenario.seed = static_cast<std::int64_t>(seed >> 1);
  c.scenario.element_type = sample_type<T>();
  c.pipeline.stages.covariance.enabled = false;
  c.pipeline.stages.subspace.enabled = false;
  auto& a = c.pipeline.stages.adaptive;
  a.window_snapshots = 64;
  a.update_rank = 5;
  a.diagonal_loading = 0.01;
  a.refactor_every = 0;
  a.looks_deg = {5.0, -30.0};
  return c;
}

// The stage alone, prepared on `exec`, with a slot; and the reference window: the last W
// snapshots of every cell as the frames carried them.
template <class T>
struct Harness {
  Harness(const config::Config& c, linalg::Exec& e) : config(c), exec(e), shape(stages::frame_shape(c)), generator(c.scenario, 0, 1) {
    auto chain = stages::make_processing_stages(c);
    EXPECT_EQ(chain.size(), 1u);
    owned = std::move(chain.front());
    stage = dynamic_cast<stages::AdaptiveStage*>(owned.get());
    stage->prepare(shape, exec);
    stages.push_back(stage);
    slot = std::make_unique<TestSlot>(shape, exec, stages);
    window.resize(shape.cells);
  }

  // Loads frame `sequence` from the generator (modified by `edit`), runs the stage, and keeps the
  // reference window in step.
  template <class Edit>
  void run(std::uint64_t sequence, Edit edit) {
    replay::Frame frame = generator.frame(sequence);
    edit(frame);
    run_frame(frame);
  }
  void run(std::uint64_t sequence) {
    run(sequence, [](replay::Frame&) {});
  }
  void run_frame(const replay::Frame& frame) {
    slot->load(frame);
    std::fill(slot->slot.results.cell_status.begin(), slot->slot.results.cell_status.end(), 0);
    slot->run(stages);
    const auto* x = reinterpret_cast<const T*>(frame.payload.data());
    const std::size_t n = shape.channels, k = frame.header.cols;
    const std::size_t w = static_cast<std::size_t>(config.pipeline.stages.adaptive.window_snapshots);
    for (std::size_t cell = 0; cell < frame.header.count; ++cell)
      for (std::size_t t = 0; t < k; ++t) {
        std::vector<cl> column(n);
        for (std::size_t m = 0; m < n; ++m) column[m] = cl(x[(cell * k + t) * n + m]);
        window[cell].push_back(std::move(column));
        if (window[cell].size() > w) window[cell].pop_front();
      }
  }

  // R = (1/W)·Σ x·xᴴ + δI of one cell's reference window (W is the configured size: a window
  // not yet full is still divided by W, as the stage's V = X/√W implies).
  std::vector<cl> covariance(std::size_t cell) const {
    const std::size_t n = shape.channels;
    const long double w = static_cast<long double>(config.pipeline.stages.adaptive.window_snapshots);
    std::vector<cl> r(n * n);
    for (const auto& x : window[cell])
      for (std::size_t j = 0; j < n; ++j)
        for (std::size_t i = 0; i < n; ++i) r[i + j * n] += x[i] * std::conj(x[j]) / w;
    for (std::size_t i = 0; i < n; ++i) r[i + i * n] += config.pipeline.stages.adaptive.diagonal_loading;
    return r;
  }

  config::Config config;
  linalg::Exec& exec;
  pipeline::FrameShape shape;
  stages::ScenarioGenerator generator;
  std::unique_ptr<pipeline::Stage> owned;
  stages::AdaptiveStage* stage = nullptr;
  std::vector<pipeline::Stage*> stages;
  std::unique_ptr<TestSlot> slot;
  std::vector<std::deque<std::vector<cl>>> window;
};

inline double frobenius(const std::vector<cl>& a) {
  long double s = 0;
  for (const auto& v : a) s += std::norm(v);
  return static_cast<double>(std::sqrt(s));
}

// MVDR weights of R for steering a, from a fresh Cholesky factorization in long double.
inline std::vector<cl> reference_weights(const std::vector<cl>& r, const std::vector<cd>& a) {
  const std::size_t n = a.size();
  std::vector<cl> l(n * n);
  for (std::size_t j = 0; j < n; ++j) {
    long double d = r[j + j * n].real();
    for (std::size_t k = 0; k < j; ++k) d -= std::norm(l[j + k * n]);
    l[j + j * n] = std::sqrt(d);
    for (std::size_t i = j + 1; i < n; ++i) {
      cl s = r[i + j * n];
      for (std::size_t k = 0; k < j; ++k) s -= l[i + k * n] * std::conj(l[j + k * n]);
      l[i + j * n] = s / l[j + j * n];
    }
  }
  std::vector<cl> y(n), z(n);
  long double gain = 0;
  for (std::size_t i = 0; i < n; ++i) {
    cl s = cl(a[i]);
    for (std::size_t j = 0; j < i; ++j) s -= l[i + j * n] * y[j];
    y[i] = s / l[i + i * n];
    gain += std::norm(y[i]);
  }
  for (std::size_t i = n; i-- > 0;) {
    cl s = y[i];
    for (std::size_t j = i + 1; j < n; ++j) s -= std::conj(l[j + i * n]) * z[j];
    z[i] = s / l[i + i * n];
  }
  for (auto& v : z) v /= gain;
  return z;
}

// κ₂(R) = λ_max/λ_min from linalg::heev on a CPU Exec (R rounded to double).
inline double condition_number(const std::vector<cl>& r, std::size_t n) {
  static linalg::Exec cpu = linalg::Exec::cpu(1);
  std::vector<cd> a(r.begin(), r.end());
  std::vector<double> w(n);
  std::vector<int> info(1);
  linalg::heev<cd>(cpu, linalg::Batch<cd>::packed(a.data(), std::int64_t(n), std::int64_t(n), 1), w, info);
  EXPECT_EQ(info[0], 0);
  return w.back() / w.front();
}

// ‖L·Lᴴ − R‖_F / ‖R‖_F of one cell's factor (the backward error of the kept factor).
template <class T>
double factor_error(Harness<T>& h, const std::vector<cd>& factors, std::size_t cell) {
  const std::size_t n = h.shape.channels;
  const cd* l = factors.data() + cell * n * n;
  std::vector<cl> r = h.covariance(cell);
  const double norm = frobenius(r);
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t i = 0; i < n; ++i) {
      cl s = 0;
      for (std::size_t k = 0; k <= std::min(i, j); ++k) s += cl(l[i + k * n]) * std::conj(cl(l[j + k * n]));
      r[i + j * n] -= s;
    }
  return frobenius(r) / norm;
}

// The stage's weights of every cell and look against the reference:
//   ‖w − w_ref‖ / ‖w_ref‖ ≤ 8·n·ε·κ(R) + 4·ε_float
// (ε of the frames' type for the kept factor, whose backward error is O(n·ε) per rotation pass
// and enters the solution times κ; ε_float for the rounding of the published float weights).
// Cells listed in `skip` are not checked. Returns the largest error relative to its bound.
template <class T>
double check_weights(Harness<T>& h, const std::string& where, const std::vector<std::size_t>& skip = {}) {
  const std::size_t n = h.shape.channels, looks = h.shape.looks;
  const auto& r = h.slot->slot.results;
  double worst = 0.0;
  for (std::size_t cell = 0; cell < h.shape.cells; ++cell) {
    if (std::find(skip.begin(), skip.end(), cell) != skip.end()) continue;
    const std::vector<cl> cov = h.covariance(cell);
    const double kappa = condition_number(cov, n);
    const double bound = 8.0 * n * eps<T>() * kappa + 4.0 * std::numeric_limits<float>::epsilon();
    EXPECT_EQ(r.cell_status[cell], 0) << where << " cell " << cell;
    for (std::size_t look = 0; look < looks; ++look) {
      const auto a = stages::steering_vector(std::int64_t(n), h.config.scenario.spacing_wavelengths,
                                             h.config.pipeline.stages.adaptive.looks_deg[look]);
      const std::vector<cl> ref = reference_weights(cov, a);
      long double diff = 0, norm = 0;
      for (std::size_t m = 0; m < n; ++m) {
        const auto got = r.weights[(cell * looks + look) * n + m];
        diff += std::norm(cl(got.real(), got.imag()) - ref[m]);
        norm += std::norm(ref[m]);
      }
      const double error = static_cast<double>(std::sqrt(diff / norm));
      EXPECT_LE(error, bound) << where << " cell " << cell << " look " << look << " κ(R) " << kappa;
      worst = std::max(worst, error / bound);
    }
  }
  return worst;
}

// After many frames of updates and downdates (no refactor), the weights match those from a
// fresh factorization of the window's covariance, every frame, and so does the factor.
template <class T>
void check_weights_match_fresh_factorization(linalg::Exec& exec) {
  const auto seed = fresh_seed("adaptive weights");
  Harness<T> h(small_config<T>(seed), exec);
  double worst = 0.0, worst_factor = 0.0;
  const std::size_t n = h.shape.channels;
  for (std::uint64_t f = 0; f < 40; ++f) {
    h.run(f);
    worst = std::max(worst, check_weights(h, "frame " + std::to_string(f)));
    const auto factors = h.stage->factors(exec);
    for (std::size_t cell = 0; cell < h.shape.cells; ++cell) {
      // Backward error of the kept factor after f frames of K updates and K downdates each:
      // O(n·ε) per rotation pass; 40 frames × (16 + 16) columns in 14 calls per frame.
      const double error = factor_error(h, factors, cell);
      const double bound = 4.0 * n * eps<T>() * double(f + 1);
      EXPECT_LE(error, bound) << "frame " << f << " cell " << cell;
      worst_factor = std::max(worst_factor, error / bound);
    }
  }
  const auto counters = h.stage->counters();
  EXPECT_EQ(counters.frames, 40u);
  EXPECT_EQ(counters.periodic_refactors, 1u);  // the first frame only: refactor_every is 0
  EXPECT_EQ(counters.recovered_cells, 0u);
  EXPECT_EQ(counters.unrecoverable_cells, 0u);
  std::cout << "[ info     ] worst weight error / bound " << worst << ", factor error / bound " << worst_factor << "\n";
}

// Nulls of at least 30 dB toward the default scenario's jammer (48°, 30 dB) with the look at 5°
// (the default 16-element array and emitters; W = 256 snapshots, frames of 64, 8 cells), on every
// cell of every frame once the window is full, and an SINR that never exceeds the optimum
// p·a_lookᴴ·R_i+n⁻¹·a_look against the model — and equals the direct evaluation of
// p·|wᴴa|²/(wᴴR_i+n·w) with the model covariance.
template <class T>
void check_nulls_toward_the_jammer(linalg::Exec& exec) {
  const auto seed = fresh_seed("adaptive nulls");
  config::Config c;
  c.scenario.snapshots = 64;
  c.scenario.cells = 8;
  c.scenario.seed = static_cast<std::int64_t>(seed >> 1);
  c.scenario.element_type = sample_type<T>();
  c.pipeline.stages.covariance.enabled = false;
  c.pipeline.stages.subspace.enabled = false;
  c.pipeline.stages.adaptive.window_snapshots = 256;
  c.pipeline.stages.adaptive.looks_deg = {5.0};
  ASSERT_EQ(c.scenario.jammers.size(), 1u);
  ASSERT_EQ(c.scenario.jammers[0].angle_deg, 48.0);
  ASSERT_EQ(c.scenario.jammers[0].power_db, 30.0);
  Harness<T> h(c, exec);
  const std::size_t n = h.shape.channels;
  // R_i+n: every emitter but the source at 5° (10 dB), plus noise.
  config::ScenarioConfig interference = c.scenario;
  interference.sources.erase(std::remove_if(interference.sources.begin(), interference.sources.end(),
                                            [](const config::Emitter& e) { return e.angle_deg == 5.0; }),
                             interference.sources.end());
  const std::vector<cd> r_in = stages::model_covariance(interference);
  const std::vector<cd> a = stages::steering_vector(std::int64_t(n), c.scenario.spacing_wavelengths, 5.0);
  const double p_look = 10.0;
  const std::vector<cl> r_in_l(r_in.begin(), r_in.end());
  const std::vector<cl> w_opt = reference_weights(r_in_l, a);  // ∝ R_i+n⁻¹a, normalised: aᴴw = 1
  long double optimum_gain = 0;  // aᴴR⁻¹a = 1 / (w_optᴴ R w_opt) for the normalised w_opt
  {
    long double q = 0;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) q += (std::conj(w_opt[i]) * r_in_l[i + j * n] * w_opt[j]).real();
    optimum_gain = 1.0L / q;
  }
  const double optimum_db = 10.0 * std::log10(p_look * static_cast<double>(optimum_gain));
  for (std::uint64_t f = 0; f < 6; ++f) {
    h.run(f);
    const auto& r = h.slot->slot.results;
    ASSERT_EQ(r.cells, h.shape.cells);
    for (std::size_t cell = 0; cell < h.shape.cells; ++cell) {
      // Once the window is full (W/K = 4 frames): while it fills, R rests on as few as 64
      // snapshots for 16 elements and the null is that estimate's, not the stage's.
      if (f >= 3) {
        EXPECT_GE(r.null_depth_db[cell], 30.0) << "frame " << f << " cell " << cell;
      }
      EXPECT_GT(r.null_depth_db[cell], 20.0) << "frame " << f << " cell " << cell;
      EXPECT_LE(r.sinr_db[cell], optimum_db + 1e-3) << "frame " << f << " cell " << cell;
      // Training data that hold the look's own signal cost SINR (SMI with the signal present);
      // a beam still far above 0 dB shows the jammer and the other sources are suppressed.
      EXPECT_GT(r.sinr_db[cell], 0.0) << "frame " << f << " cell " << cell;
      // The published SINR is the direct evaluation with the model covariance (float weights).
      long double gain = 0, power = 0;
      cl response = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const auto wi = r.weights[cell * n + i];
        response += std::conj(cl(wi.real(), wi.imag())) * cl(a[i]);
        for (std::size_t j = 0; j < n; ++j) {
          const auto wj = r.weights[cell * n + j];
          power += (std::conj(cl(wi.real(), wi.imag())) * cl(r_in[i + j * n]) * cl(wj.real(), wj.imag())).real();
        }
      }
      gain = std::norm(response);
      const double direct = 10.0 * std::log10(static_cast<double>(p_look * gain / power));
      EXPECT_NEAR(r.sinr_db[cell], direct, 1e-3) << "frame " << f << " cell " << cell;
      EXPECT_NEAR(static_cast<double>(std::abs(response)), 1.0, 1e-4) << "distortionless: wᴴa = 1";
    }
    if (f == 5)
      std::cout << "[ info     ] cell 0: null depth " << r.null_depth_db[0] << " dB, SINR " << r.sinr_db[0]
                << " dB (optimum " << optimum_db << " dB)\n";
  }
}

// refactor_every bounds the drift: with refactor_every = 8 the factor's backward error is that of
// a fresh factorization (≤ 4·n·ε) on every refactor frame and never exceeds the bound for 8
// frames of updates, whatever the number of frames; the refactors happen when they should.
// The same run without refactors is reported for comparison.
template <class T>
void check_refactor_bounds_drift(linalg::Exec& exec) {
  const auto seed = fresh_seed("adaptive refactor");
  const std::uint64_t frames = 100;
  const std::int64_t every = 8;
  double drift_without = 0.0;
  for (const std::int64_t refactor_every : {std::int64_t(0), every}) {
    config::Config c = small_config<T>(seed);
    c.pipeline.stages.adaptive.refactor_every = refactor_every;
    Harness<T> h(c, exec);
    const std::size_t n = h.shape.channels;
    double worst = 0.0;
    for (std::uint64_t f = 0; f < frames; ++f) {
      h.run(f);
      const auto factors = h.stage->factors(exec);
      const std::uint64_t since = refactor_every == 0 ? f : f % std::uint64_t(every);
      for (std::size_t cell = 0; cell < h.shape.cells; ++cell) {
        const double error = factor_error(h, factors, cell);
        worst = std::max(worst, error);
        if (refactor_every != 0) {
          EXPECT_LE(error, 4.0 * n * eps<T>() * double(since + 1)) << "frame " << f << " cell " << cell;
        }
      }
    }
    const auto counters = h.stage->counters();
    if (refactor_every == 0) {
      drift_without = worst;
      EXPECT_EQ(counters.periodic_refactors, 1u);
    } else {
      // Frame 0 (a fresh window), then frames 8, 16, …, 96.
      EXPECT_EQ(counters.periodic_refactors, 1u + (frames - 1) / std::uint64_t(every));
      EXPECT_LE(worst, 4.0 * n * eps<T>() * double(every));
      std::cout << "[ info     ] largest backward error over " << frames << " frames: " << drift_without
                << " without refactors, " << worst << " with refactor_every " << every << " (n·ε = " << n * eps<T>()
                << ")\n";
    }
  }
}

// A downdate forced to fail (the stored window of one cell scaled by 10 behind the factor's back,
// so the next downdates remove 100 times what was added) is recovered by refactoring from the
// window, in the same frame, and counted; the other cells are untouched; once the corrupted
// snapshots have left the window the cell matches the reference again.
template <class T>
void check_failed_downdate_is_recovered(linalg::Exec& exec) {
  const auto seed = fresh_seed("adaptive recovery");
  Harness<T> h(small_config<T>(seed), exec);
  for (std::uint64_t f = 0; f < 6; ++f) h.run(f);
  const std::size_t bad = 2;
  h.stage->scale_window_for_testing(exec, static_cast<std::uint32_t>(bad), 10.0);
  h.run(6);
  const auto after = h.stage->counters();
  EXPECT_GE(after.recovered_cells, 1u);
  EXPECT_EQ(after.unrecoverable_cells, 0u);
  const auto& r = h.slot->slot.results;
  EXPECT_EQ(r.cell_status[bad], 0);
  for (std::size_t look = 0; look < h.shape.looks; ++look)
    EXPECT_TRUE(std::isfinite(r.weights[(bad * h.shape.looks + look) * h.shape.channels].real()));
  check_weights(h, "frame 6 (other cells)", {bad});
  // W/K = 4 frames later every corrupted snapshot has left the window.
  for (std::uint64_t f = 7; f < 11; ++f) h.run(f);
  check_weights(h, "frame 10 (all cells)");
  const auto last = h.stage->counters();
  EXPECT_LE(last.recovered_cells, 4u) << "one recovery per frame while corrupted snapshots leave";
}

// A NaN snapshot in one cell: that cell reports non_finite_input with NaN weights and metrics for
// as long as the NaN is in the window, the others are exact; afterwards it recovers.
template <class T>
void check_nan_cell_is_isolated(linalg::Exec& exec) {
  const auto seed = fresh_seed("adaptive nan");
  config::Config c = small_config<T>(seed);
  Harness<T> h(c, exec);
  for (std::uint64_t f = 0; f < 5; ++f) h.run(f);
  const std::size_t bad = 1, n = h.shape.channels, k = h.shape.snapshots;
  h.run(5, [&](replay::Frame& frame) {
    auto* x = reinterpret_cast<T*>(frame.payload.data());
    x[(bad * k + 3) * n + 2] = T(std::numeric_limits<linalg::real_t<T>>::quiet_NaN(), 0);
  });
  for (std::uint64_t f = 5; f < 9; ++f) {
    if (f > 5) h.run(f);
    const auto& r = h.slot->slot.results;
    EXPECT_EQ(r.cell_status[bad], linalg::status::non_finite_input) << "frame " << f;
    for (std::size_t look = 0; look < h.shape.looks; ++look) {
      EXPECT_TRUE(std::isnan(r.weights[(bad * h.shape.looks + look) * n].real())) << "frame " << f;
      EXPECT_TRUE(std::isnan(r.sinr_db[bad * h.shape.looks + look])) << "frame " << f;
    }
    check_weights(h, "frame " + std::to_string(f), {bad});
  }
  EXPECT_GE(h.stage->counters().unrecoverable_cells, 4u);
  h.run(9);  // the NaN snapshot (frame 5) has left the 4-frame window
  check_weights(h, "frame 9 (recovered)");
}

// Frames the stage cannot take are FrameErrors with reason "shape" and change no state;
// covariance frames are left alone.
template <class T>
void check_wrong_shapes_and_covariance_frames(linalg::Exec& exec) {
  const auto seed = fresh_seed("adaptive shapes");
  Harness<T> h(small_config<T>(seed), exec);
  for (std::uint64_t f = 0; f < 3; ++f) h.run(f);
  auto expect_shape_error = [&](replay::FrameHeader header, const char* what) {
    h.slot->load_header(header);
    try {
      h.stage->run(h.slot->slot, exec);
      ADD_FAILURE() << what << ": no FrameError";
    } catch (const pipeline::FrameError& e) {
      EXPECT_EQ(e.reason(), "shape") << what;
      EXPECT_NE(std::string(e.what()).find("adaptive"), std::string::npos) << e.what();
    }
  };
  const replay::FrameHeader good = h.generator.frame(3).header;
  auto header = good;
  header.rows += 1;
  expect_shape_error(header, "one channel too many");
  header = good;
  header.element_type = std::is_same_v<T, linalg::cf32> ? replay::ElementType::cf64 : replay::ElementType::cf32;
  expect_shape_error(header, "the other element type");
  header = good;
  header.count = h.shape.cells + 1;
  expect_shape_error(header, "too many cells");
  EXPECT_EQ(h.stage->counters().frames, 3u);
  h.run(3);  // the window went on as if the bad frames had not come
  check_weights(h, "frame 3 after refused frames");

  replay::Frame covariance = h.generator.frame(4);
  covariance.header.kind = replay::PayloadKind::covariance;
  covariance.header.cols = covariance.header.rows;
  covariance.payload.resize(covariance.header.payload_bytes());
  h.slot->load(covariance);
  h.slot->run(h.stages);
  EXPECT_EQ(h.stage->counters().covariance_frames, 1u);
  EXPECT_EQ(h.slot->slot.results.cells, 0u);
  EXPECT_TRUE(std::isnan(h.slot->slot.results.sinr_db[0]));
  h.run(4);
  check_weights(h, "frame 4 after a covariance frame");
}

// The beam patterns (pipeline.stages.adaptive.beam_pattern_points): the grid runs from −90° to 90°
// inclusive, antisymmetric; each beam's pattern is 10·log10|wᴴa(θ)|² of the published weights
// (recomputed here in long double from independently made steering vectors), 0 dB at the look
// (wᴴa = 1) and below −30 dB toward the default scenario's 30 dB jammer at 48° once the window is
// full; poisoned before each frame so that a pattern left unwritten fails.
template <class T>
void check_beam_patterns(linalg::Exec& exec) {
  const auto seed = fresh_seed("adaptive beam pattern");
  config::Config c;
  c.scenario.snapshots = 64;
  c.scenario.cells = 4;
  c.scenario.seed = static_cast<std::int64_t>(seed >> 1);
  c.scenario.element_type = sample_type<T>();
  c.pipeline.stages.covariance.enabled = false;
  c.pipeline.stages.subspace.enabled = false;
  c.pipeline.stages.adaptive.window_snapshots = 256;
  c.pipeline.stages.adaptive.looks_deg = {5.0, -30.0};
  c.pipeline.stages.adaptive.beam_pattern_points = 181;  // 1° steps: the looks and the jammer lie on the grid
  ASSERT_EQ(c.scenario.jammers.size(), 1u);
  ASSERT_EQ(c.scenario.jammers[0].angle_deg, 48.0);
  ASSERT_EQ(c.scenario.jammers[0].power_db, 30.0);
  Harness<T> h(c, exec);
  const std::uint32_t points = 181;
  ASSERT_EQ(h.shape.beam_pattern_points, points);
  const std::size_t n = h.shape.channels, looks = 2;
  for (std::uint32_t i = 0; i < points; ++i)
    EXPECT_EQ(stages::beam_pattern_azimuth_deg(points, i), -stages::beam_pattern_azimuth_deg(points, points - 1 - i)) << i;
  EXPECT_EQ(stages::beam_pattern_azimuth_deg(points, 0), -90.0);
  EXPECT_EQ(stages::beam_pattern_azimuth_deg(points, 95), 5.0);
  EXPECT_EQ(stages::beam_pattern_azimuth_deg(points, 138), 48.0);
  EXPECT_EQ(stages::beam_pattern_azimuth_deg(points, points - 1), 90.0);
  EXPECT_EQ(stages::beam_pattern_azimuth_deg(2, 0), -90.0);
  EXPECT_EQ(stages::beam_pattern_azimuth_deg(2, 1), 90.0);
  std::vector<std::vector<cd>> steering(points);
  for (std::uint32_t p = 0; p < points; ++p)
    steering[p] = stages::steering_vector(std::int64_t(n), c.scenario.spacing_wavelengths, -90.0 + p);
  const std::size_t look_index[looks] = {95, 60};  // 5° and −30°
  const double tolerance_db = 1e-4;  // the pattern is computed in double and stored as float
  for (std::uint64_t f = 0; f < 6; ++f) {
    auto& r = h.slot->slot.results;
    std::fill(r.beam_pattern_db.begin(), r.beam_pattern_db.end(), 1234.0f);
    h.run(f);
    ASSERT_EQ(r.beam_pattern_db.size(), std::size_t(h.shape.cells) * looks * points);
    for (std::size_t cell = 0; cell < h.shape.cells; ++cell)
      for (std::size_t look = 0; look < looks; ++look) {
        const std::size_t beam = cell * looks + look;
        const float* pattern = r.beam_pattern_db.data() + beam * points;
        const std::complex<float>* w = r.weights.data() + beam * n;
        for (std::uint32_t p = 0; p < points; ++p) {
          cl sum = 0;
          for (std::size_t m = 0; m < n; ++m) sum += std::conj(cl(w[m])) * cl(steering[p][m]);
          const double expected = 10.0 * std::log10(static_cast<double>(std::norm(sum)));
          ASSERT_NEAR(pattern[p], expected, tolerance_db * std::max(1.0, std::abs(expected)))
              << "frame " << f << " cell " << cell << " look " << look << " point " << p;
        }
        EXPECT_NEAR(pattern[look_index[look]], 0.0, 1e-3) << "frame " << f << " cell " << cell << " look " << look;
        if (f >= 4) {
          EXPECT_LT(pattern[138], -30.0) << "frame " << f << " cell " << cell << " look " << look;
        }
      }
  }
}

}  // namespace covflow::test::adaptive_checks

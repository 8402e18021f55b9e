// The checks of the covariance and subspace stages, written once against an Exec so that
// stages_test runs them on a CPU Exec and stages_gpu_test on a CUDA one.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "covflow/config/config.hpp"
#include "covflow/config/error.hpp"
#include "covflow/linalg/heev.hpp"
#include "covflow/linalg/types.hpp"
#include "covflow/stages/covariance_stage.hpp"
#include "covflow/stages/processing.hpp"
#include "covflow/stages/scenario.hpp"
#include "covflow/stages/subspace_stage.hpp"
#include "slot_support.hpp"
#include "test_support.hpp"

namespace covflow::test {

using cd = std::complex<double>;

// The acceptance scenario: a 16-element half-wavelength ULA, sources at −20°, 5° and 31°
// at 10 dB, 200 snapshots per cell, no jammers.
inline config::Config acceptance_config(config::SampleType type, std::uint64_t seed, std::int64_t cells = 48) {
  config::Config c;
  c.scenario.elements = 16;
  c.scenario.spacing_wavelengths = 0.5;
  c.scenario.sources = {{-20.0, 10.0}, {5.0, 10.0}, {31.0, 10.0}};
  c.scenario.jammers = {};
  c.scenario.snapshots = 200;
  c.scenario.cells = cells;
  c.scenario.seed = static_cast<std::int64_t>(seed >> 1);
  c.scenario.element_type = type;
  return c;
}

// The stages a configuration builds, prepared on one Exec, with a slot to run frames in.
struct Chain {
  Chain(const config::Config& c, linalg::Exec& exec) : config(c), shape(stages::frame_shape(c)) {
    owned = stages::make_processing_stages(c);
    for (auto& s : owned) {
      s->prepare(shape, exec);
      stages.push_back(s.get());
    }
    slot = std::make_unique<TestSlot>(shape, exec, stages);
  }
  void run(const replay::Frame& frame) {
    slot->load(frame);
    slot->run(stages);
  }
  config::Config config;
  pipeline::FrameShape shape;
  std::vector<std::unique_ptr<pipeline::Stage>> owned;
  std::vector<pipeline::Stage*> stages;
  std::unique_ptr<TestSlot> slot;
};

// Wax & Kailath's criteria (IEEE Trans. ASSP, 1985), written out from the paper independently of
// music_math.hpp: eigenvalues sorted descending, the k largest taken as signal.
inline int reference_source_count(std::vector<double> values, double snapshots, bool mdl) {
  std::sort(values.begin(), values.end(), std::greater<>());
  const int n = static_cast<int>(values.size());
  const double floor_value = std::max(values[0], std::numeric_limits<double>::min()) * n * 2.220446049250313e-16;
  for (double& v : values) v = std::max(v, floor_value);
  int best_k = 0;
  double best = std::numeric_limits<double>::infinity();
  for (int k = 0; k < n; ++k) {
    double arithmetic = 0.0, log_geometric = 0.0;
    for (int i = k; i < n; ++i) {
      arithmetic += values[i];
      log_geometric += std::log(values[i]);
    }
    arithmetic /= (n - k);
    log_geometric /= (n - k);
    const double likelihood = snapshots * (n - k) * std::max(0.0, std::log(arithmetic) - log_geometric);
    const double penalty = double(k) * (2 * n - k);
    const double value = mdl ? likelihood + 0.5 * penalty * std::log(snapshots) : 2 * likelihood + 2 * penalty;
    if (value < best) {
      best = value;
      best_k = k;
    }
  }
  return best_k;
}

// Q(θ) = Σ_{k<N−d} |e_kᴴ a(θ)|² straight from the eigenvectors (column-major N × N, ascending).
template <class T>
double direct_null_spectrum(const T* vectors, int n, int sources, double spacing, double angle_deg) {
  const auto a = stages::steering_vector(n, spacing, angle_deg);
  double q = 0.0;
  for (int k = 0; k < n - sources; ++k) {
    cd dot = 0.0;
    for (int m = 0; m < n; ++m) dot += std::conj(cd(vectors[k * n + m])) * a[m];
    q += std::norm(dot);
  }
  return q;
}

// The acceptance test: MDL counts the three sources in every cell, and every estimate lies within
// 0.5° of the truth; the counts agree with the reference criterion on the same eigenvalues, and
// the spectrum with the direct evaluation of 1/(aᴴ E_n E_nᴴ a) on the grid.
template <class T>
void check_acceptance(linalg::Exec& exec, config::SourceCountRule rule, int frames,
                      config::SubspaceMethod method = config::SubspaceMethod::eig) {
  using R = linalg::real_t<T>;
  const auto type = std::is_same_v<T, linalg::cf32> ? config::SampleType::cf32 : config::SampleType::cf64;
  const std::uint64_t seed = fresh_seed(std::string("acceptance ") + (rule == config::SourceCountRule::mdl ? "mdl" : "aic") +
                                        " " + std::string(config::name(method)));
  config::Config c = acceptance_config(type, seed);
  c.pipeline.stages.subspace.source_count = rule;
  c.pipeline.stages.subspace.method = method;
  Chain chain(c, exec);
  stages::ScenarioGenerator generator(c.scenario, 0, 2);
  const auto grid = stages::angle_grid_points(c.pipeline.stages.subspace.angle_grid);
  const double truth[] = {-20.0, 5.0, 31.0};
  const int n = 16;
  const std::uint32_t cells = chain.shape.cells, points = chain.shape.spectrum_points;
  const std::uint32_t max_sources = chain.shape.max_sources;
  ASSERT_EQ(points, grid.points);
  int exact_counts = 0, total = 0;
  double worst_error = 0.0, worst_spectrum = 0.0;
  for (int f = 0; f < frames; ++f) {
    chain.run(generator.frame(f));
    const auto& results = chain.slot->slot.results;
    ASSERT_EQ(results.cells, cells);
    const auto values = chain.slot->eigenvalues<R>();
    const auto vectors = chain.slot->eigenvectors<T>();
    for (std::uint32_t cell = 0; cell < cells; ++cell) {
      SCOPED_TRACE("frame " + std::to_string(f) + " cell " + std::to_string(cell));
      ASSERT_EQ(chain.slot->info()[cell], 0);
      ASSERT_EQ(results.cell_status[cell], 0);
      std::vector<double> w(values.begin() + cell * n, values.begin() + (cell + 1) * n);
      for (int k = 0; k < n; ++k) EXPECT_EQ(results.eigenvalues[cell * n + k], static_cast<float>(w[k]));
      const int count = results.source_count[cell];
      EXPECT_EQ(count, reference_source_count(w, 200.0, rule == config::SourceCountRule::mdl));
      ++total;
      if (count == 3) ++exact_counts;
      if (rule == config::SourceCountRule::mdl) {
        ASSERT_EQ(count, 3);
        for (int s = 0; s < 3; ++s) {
          const float estimate = results.doa_deg[cell * max_sources + s];
          EXPECT_NEAR(estimate, truth[s], 0.5);
          worst_error = std::max(worst_error, std::abs(estimate - truth[s]));
        }
        for (std::uint32_t s = 3; s < max_sources; ++s) EXPECT_TRUE(std::isnan(results.doa_deg[cell * max_sources + s]));
      }
      // The spectrum through FFTs against the direct quadratic form. The series is exact up to
      // rounding: |ΔQ| ≲ 64·N²·ε(R) (|r_s| ≤ N, 2N−1 terms, FFT rounding of order log₂L); the dB value is
      // then rounded to float.
      const T* v = vectors.data() + std::size_t(cell) * n * n;
      for (std::uint32_t i = 0; i < points; ++i) {
        const double q = direct_null_spectrum(v, n, count, 0.5, grid.angle_deg(i));
        const double db = -10.0 * std::log10(q);
        const double tolerance = 10.0 / std::numbers::ln10 * (64.0 * n * n * eps<T>() / q) +
                                 2.0 * std::numeric_limits<float>::epsilon() * std::abs(db);
        const double error = std::abs(results.spectrum_db[cell * points + i] - db);
        worst_spectrum = std::max(worst_spectrum, error / tolerance);
        EXPECT_LE(error, tolerance) << "grid point " << i << " (" << grid.angle_deg(i) << "°)";
      }
    }
  }
  std::cout << "[ info     ] " << total << " cells: " << exact_counts << " counted 3; worst DOA error " << worst_error
            << "°; worst spectrum error " << worst_spectrum << " of its tolerance\n";
  if (rule == config::SourceCountRule::aic) {
    // AIC is not consistent (it over-counts with a probability that does not vanish with K), but
    // at 10 dB it never misses a source here.
    for (std::uint32_t cell = 0; cell < cells; ++cell) EXPECT_GE(chain.slot->slot.results.source_count[cell], 3);
    EXPECT_GE(exact_counts, total * 3 / 4);
  }
}

// Noise only: MDL counts no source, no DOA is reported, and with the whole space as the noise
// subspace Q(θ) = aᴴa = N: the spectrum is flat at −10·log10 N dB.
template <class T>
void check_noise_only(linalg::Exec& exec, config::SubspaceMethod method = config::SubspaceMethod::eig) {
  const auto type = std::is_same_v<T, linalg::cf32> ? config::SampleType::cf32 : config::SampleType::cf64;
  config::Config c = acceptance_config(type, fresh_seed("noise only " + std::string(config::name(method))));
  c.scenario.sources = {};
  c.pipeline.stages.subspace.method = method;
  Chain chain(c, exec);
  stages::ScenarioGenerator generator(c.scenario, 0, 2);
  const std::uint32_t points = chain.shape.spectrum_points;
  const double flat = -10.0 * std::log10(16.0);
  for (int f = 0; f < 2; ++f) {
    chain.run(generator.frame(f));
    const auto& r = chain.slot->slot.results;
    for (std::uint32_t cell = 0; cell < chain.shape.cells; ++cell) {
      EXPECT_EQ(r.source_count[cell], 0) << "cell " << cell;
      EXPECT_EQ(r.cell_status[cell], 0);
      for (std::uint32_t s = 0; s < chain.shape.max_sources; ++s) EXPECT_TRUE(std::isnan(r.doa_deg[cell * chain.shape.max_sources + s]));
      for (std::uint32_t i = 0; i < points; ++i)
        EXPECT_NEAR(r.spectrum_db[cell * points + i], flat, 10.0 / std::numbers::ln10 * 64 * 16 * eps<T>() + 1e-5)
            << "cell " << cell << " point " << i;
    }
  }
}

// On the exact model covariance the noise subspace is exactly orthogonal to the steering vectors:
// MUSIC's estimates are then exact, and the refinement must find angles far off the 0.5° grid to
// within rounding.
template <class T>
void check_refinement_on_model_covariance(linalg::Exec& exec, double tolerance_deg) {
  config::Config c = acceptance_config(std::is_same_v<T, linalg::cf32> ? config::SampleType::cf32 : config::SampleType::cf64, 1, 4);
  c.scenario.sources = {{-40.17, 20.0}, {-20.23, 10.0}, {5.11, 15.0}, {31.37, 10.0}};
  c.scenario.payload = config::ScenarioPayload::covariance;
  c.pipeline.stages.covariance.enabled = false;  // the subspace stage reads the payload
  Chain chain(c, exec);
  const auto model = stages::model_covariance(c.scenario);
  std::vector<T> payload;
  for (std::int64_t cell = 0; cell < c.scenario.cells; ++cell)
    for (const cd& v : model) payload.emplace_back(static_cast<linalg::real_t<T>>(v.real()), static_cast<linalg::real_t<T>>(v.imag()));
  replay::FrameHeader h;
  h.kind = replay::PayloadKind::covariance;
  h.rows = h.cols = 16;
  h.count = static_cast<std::uint32_t>(c.scenario.cells);
  chain.run(replay::make_frame<T>(h, payload));
  const auto& r = chain.slot->slot.results;
  for (std::uint32_t cell = 0; cell < chain.shape.cells; ++cell) {
    ASSERT_EQ(r.source_count[cell], 4) << "cell " << cell;
    for (int s = 0; s < 4; ++s)
      EXPECT_NEAR(r.doa_deg[cell * chain.shape.max_sources + s], c.scenario.sources[s].angle_deg, tolerance_deg)
          << "cell " << cell << " source " << s;
  }
}

// R_t = Σ_{i<n} λ^i R̂_{t−i} / Σ λ^i + δI computed here from the payloads, in double.
template <class T>
void check_window_and_forgetting(linalg::Exec& exec) {
  const auto type = std::is_same_v<T, linalg::cf32> ? config::SampleType::cf32 : config::SampleType::cf64;
  config::Config c = acceptance_config(type, fresh_seed("window"), 6);
  c.scenario.elements = 8;
  c.scenario.snapshots = 20;
  c.pipeline.stages.covariance.window = 3;
  c.pipeline.stages.covariance.forgetting = 0.7;
  c.pipeline.stages.covariance.diagonal_loading = 0.25;
  c.pipeline.stages.subspace.enabled = false;
  Chain chain(c, exec);
  auto* covariance = dynamic_cast<stages::CovarianceStage*>(chain.stages.at(0));
  ASSERT_NE(covariance, nullptr);
  stages::ScenarioGenerator generator(c.scenario, 0, 2);
  const int n = 8, k = 20, cells = 6;
  std::vector<std::vector<cd>> history;  // per frame, cells × n × n unloaded sample covariances
  auto estimate = [&](const replay::Frame& frame) {
    const auto x = replay::payload_as<T>(frame);
    const int kk = static_cast<int>(frame.header.cols);
    std::vector<cd> r(std::size_t(cells) * n * n);
    for (int cell = 0; cell < cells; ++cell)
      for (int t = 0; t < kk; ++t)
        for (int j = 0; j < n; ++j)
          for (int i = 0; i < n; ++i)
            r[cell * n * n + i + j * n] += cd(x[cell * n * kk + t * n + i]) * std::conj(cd(x[cell * n * kk + t * n + j])) / double(kk);
    return r;
  };
  auto check = [&](const std::string& what, int entries) {
    double weight_sum = 0.0, weight_squares = 0.0;
    for (int i = 0; i < entries; ++i) {
      weight_sum += std::pow(0.7, i);
      weight_squares += std::pow(0.49, i);
    }
    const auto got = chain.slot->covariance<T>();
    double scale = 0.0;
    for (const cd& v : history.back()) scale = std::max(scale, std::abs(v));
    const double tolerance = 8.0 * (k + entries) * eps<T>() * (scale + 0.25);
    for (int e = 0; e < cells * n * n; ++e) {
      cd expected = 0.0;
      for (int i = 0; i < entries; ++i) expected += std::pow(0.7, i) * history[history.size() - 1 - i][e];
      expected /= weight_sum;
      if ((e % (n * n)) % (n + 1) == 0) expected += 0.25;
      ASSERT_LE(std::abs(cd(got[e]) - expected), tolerance) << what << ", element " << e;
      const int cell = e / (n * n), i = (e % (n * n)) % n, j = (e % (n * n)) / n;
      ASSERT_EQ(got[e], std::conj(got[cell * n * n + j + i * n])) << what << ": not exactly Hermitian";
    }
    EXPECT_NEAR(covariance->effective_snapshots(exec, chain.slot->slot.sequence),
                k * weight_sum * weight_sum / weight_squares, 1e-12 * k * entries)
        << what;
  };
  for (int f = 0; f < 5; ++f) {
    const auto frame = generator.frame(f);
    history.push_back(estimate(frame));
    chain.run(frame);
    check("frame " + std::to_string(f), std::min(f + 1, 3));
  }
  // A frame with another snapshot count starts the window afresh.
  config::ScenarioConfig other = c.scenario;
  other.snapshots = 13;
  auto frame = stages::ScenarioGenerator(other, 0, 2).frame(7);
  history.push_back(estimate(frame));
  chain.run(frame);
  EXPECT_NEAR(covariance->effective_snapshots(exec, 7), 13.0, 1e-12);
  (void)k;
}

// A covariance frame is copied into the covariance array as it came, bit for bit.
template <class T>
void check_pass_through(linalg::Exec& exec) {
  const auto type = std::is_same_v<T, linalg::cf32> ? config::SampleType::cf32 : config::SampleType::cf64;
  config::Config c = acceptance_config(type, fresh_seed("pass-through"), 5);
  c.scenario.payload = config::ScenarioPayload::covariance;
  c.pipeline.stages.covariance.diagonal_loading = 3.0;  // not applied to covariance frames
  c.pipeline.stages.covariance.window = 4;
  Chain chain(c, exec);
  auto* covariance = dynamic_cast<stages::CovarianceStage*>(chain.stages.at(0));
  stages::ScenarioGenerator generator(c.scenario, 0, 2);
  for (int f = 0; f < 2; ++f) {
    const auto frame = generator.frame(f);
    chain.run(frame);
    const auto expected = replay::payload_as<T>(frame);
    const auto got = chain.slot->covariance<T>();
    ASSERT_EQ(std::memcmp(got.data(), expected.data(), expected.size_bytes()), 0) << "frame " << f;
    EXPECT_EQ(covariance->effective_snapshots(exec, frame.header.sequence), 200.0);
    for (std::uint32_t cell = 0; cell < chain.shape.cells; ++cell) EXPECT_EQ(chain.slot->slot.results.source_count[cell], 3);
  }
}

// A NaN in one cell's snapshots marks that cell (status non_finite_input, no count, no DOA, NaN
// spectrum) and leaves every other cell exactly as it is without the NaN.
template <class T>
void check_non_finite_cell(linalg::Exec& exec, config::SubspaceMethod method = config::SubspaceMethod::eig) {
  const auto type = std::is_same_v<T, linalg::cf32> ? config::SampleType::cf32 : config::SampleType::cf64;
  config::Config c = acceptance_config(type, fresh_seed("non-finite cell " + std::string(config::name(method))), 8);
  c.pipeline.stages.subspace.method = method;
  Chain chain(c, exec);
  stages::ScenarioGenerator generator(c.scenario, 0, 2);
  const auto clean = generator.frame(0);
  chain.run(clean);
  const pipeline::FrameResults reference = chain.slot->slot.results;
  auto damaged = clean;
  const std::uint32_t bad = 3;
  auto x = replay::payload_as<T>(damaged);
  x[bad * 16 * 200 + 5 * 16 + 7] = T(std::numeric_limits<linalg::real_t<T>>::quiet_NaN(), 0);
  chain.run(damaged);
  const auto& r = chain.slot->slot.results;
  const std::uint32_t s = chain.shape.max_sources, p = chain.shape.spectrum_points;
  EXPECT_EQ(r.cell_status[bad], linalg::status::non_finite_input);
  EXPECT_EQ(r.source_count[bad], -1);
  for (std::uint32_t k = 0; k < s; ++k) EXPECT_TRUE(std::isnan(r.doa_deg[bad * s + k]));
  for (std::uint32_t i = 0; i < p; ++i) EXPECT_TRUE(std::isnan(r.spectrum_db[bad * p + i]));
  for (std::uint32_t cell = 0; cell < chain.shape.cells; ++cell) {
    if (cell == bad) continue;
    EXPECT_EQ(r.cell_status[cell], 0) << "cell " << cell;
    EXPECT_EQ(r.source_count[cell], reference.source_count[cell]) << "cell " << cell;
    for (std::uint32_t k = 0; k < s; ++k) {
      const float a = r.doa_deg[cell * s + k], b = reference.doa_deg[cell * s + k];
      EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << "cell " << cell << " DOA " << k << ": " << a << " vs " << b;
    }
    for (std::uint32_t i = 0; i < p; ++i) ASSERT_EQ(r.spectrum_db[cell * p + i], reference.spectrum_db[cell * p + i]);
  }
}

// Frames the stages cannot take are refused with FrameError("shape"), naming the stage.
template <class T>
void check_wrong_shapes(linalg::Exec& exec) {
  const auto type = std::is_same_v<T, linalg::cf32> ? config::SampleType::cf32 : config::SampleType::cf64;
  config::Config c = acceptance_config(type, 1, 4);
  Chain chain(c, exec);
  auto expect_refused = [&](replay::FrameHeader h, const std::string& what, std::size_t stage = 0) {
    chain.slot->load_header(h);
    try {
      chain.stages.at(stage)->run(chain.slot->slot, exec);
      ADD_FAILURE() << what << ": accepted";
    } catch (const pipeline::FrameError& e) {
      EXPECT_EQ(e.reason(), "shape") << what;
      EXPECT_NE(std::string(e.what()).find(std::string(chain.stages.at(stage)->name())), std::string::npos) << e.what();
    }
  };
  replay::FrameHeader good;
  good.kind = replay::PayloadKind::snapshots;
  good.element_type = std::is_same_v<T, linalg::cf32> ? replay::ElementType::cf32 : replay::ElementType::cf64;
  good.rows = 16;
  good.cols = 200;
  good.count = 4;
  for (std::size_t stage : {std::size_t(0), std::size_t(1)}) {
    auto h = good;
    h.rows = 15;
    expect_refused(h, "15 channels", stage);
    h = good;
    h.count = 5;
    expect_refused(h, "too many cells", stage);
    h = good;
    h.element_type = good.element_type == replay::ElementType::cf32 ? replay::ElementType::cf64 : replay::ElementType::cf32;
    expect_refused(h, "other element type", stage);
    h = good;
    h.kind = replay::PayloadKind::covariance;
    h.cols = 15;
    expect_refused(h, "non-square covariance", stage);
    h = good;
    h.cols = 201;
    expect_refused(h, "more snapshots than the slot holds", stage);
  }
  // Without a covariance stage, the subspace stage takes covariance frames only.
  c.pipeline.stages.covariance.enabled = false;
  Chain alone(c, exec);
  replay::Frame frame{good, std::vector<std::byte>(good.payload_bytes())};
  alone.slot->load(frame);
  EXPECT_THROW(alone.stages.at(0)->run(alone.slot->slot, exec), pipeline::FrameError);
}

// ---- the svd method (pipeline.stages.subspace.method: svd) ----------------------------------

// Ascending eigenvalues of each cell's sample covariance X·Xᴴ/K + δI, from the frame's samples
// promoted to double and LAPACK's zheevd in double: the reference both methods are measured
// against. Its own error, of order 10⁻¹⁶·λ_max, is far below either method's in the frame's type.
template <class T>
std::vector<double> reference_eigenvalues(const replay::Frame& frame, double loading = 0.0) {
  static linalg::Exec host = linalg::Exec::cpu(2);
  const auto x = replay::payload_as<T>(frame);
  const int n = static_cast<int>(frame.header.rows), k = static_cast<int>(frame.header.cols);
  const int cells = static_cast<int>(frame.header.count);
  std::vector<cd> r(std::size_t(cells) * n * n);
  for (int cell = 0; cell < cells; ++cell) {
    cd* rc = r.data() + std::size_t(cell) * n * n;
    const T* xc = x.data() + std::size_t(cell) * n * k;
    for (int t = 0; t < k; ++t)
      for (int j = 0; j < n; ++j) {
        const cd xj = std::conj(cd(xc[std::size_t(t) * n + j]));
        for (int i = j; i < n; ++i) rc[i + j * n] += cd(xc[std::size_t(t) * n + i]) * xj;
      }
    for (int j = 0; j < n; ++j)
      for (int i = j; i < n; ++i) rc[i + j * n] = rc[i + j * n] / double(k) + (i == j ? loading : 0.0);
  }
  std::vector<double> w(std::size_t(cells) * n);
  std::vector<int> info(cells, -1);
  linalg::heev<linalg::cf64>(host, linalg::Batch<linalg::cf64>::packed(r.data(), n, n, cells), w, info,
                             {linalg::Uplo::lower, false});
  for (int cell = 0; cell < cells; ++cell) EXPECT_EQ(info[cell], 0) << "reference, cell " << cell;
  return w;
}

inline config::SampleType sample_type_of(bool single) { return single ? config::SampleType::cf32 : config::SampleType::cf64; }

// On the default scenario (16 elements, sources at −20°, 5° and 31° at 10 dB, a 30 dB jammer at 48°,
// 200 snapshots, 180 cells) the svd method counts the same sources as eig in every cell and finds
// the same DOAs; its eigenvalues agree with eig's to eig's own accuracy, O(N·ε·λ_max), with and
// without diagonal loading.
template <class T>
void check_svd_matches_eig_on_default_scenario(linalg::Exec& exec, double doa_tolerance_deg) {
  using R = linalg::real_t<T>;
  const bool single = std::is_same_v<T, linalg::cf32>;
  config::Config c;
  c.scenario.seed = static_cast<std::int64_t>(fresh_seed("svd against eig, default scenario") >> 1);
  c.scenario.element_type = sample_type_of(single);
  c.pipeline.stages.adaptive.enabled = false;  // not what is compared here
  config::Config with_svd = c;
  with_svd.pipeline.stages.subspace.method = config::SubspaceMethod::svd;
  Chain eig(c, exec), svd(with_svd, exec);
  stages::ScenarioGenerator generator(c.scenario, 0, 2);
  const std::uint32_t n = eig.shape.channels, cells = eig.shape.cells, s = eig.shape.max_sources;
  double worst_doa = 0.0, worst_value = 0.0;
  for (int f = 0; f < 2; ++f) {
    const auto frame = generator.frame(f);
    eig.run(frame);
    svd.run(frame);
    const auto& e = eig.slot->slot.results;
    const auto& v = svd.slot->slot.results;
    ASSERT_EQ(v.cells, cells);
    const auto e_values = eig.slot->eigenvalues<R>();
    const auto v_values = svd.slot->eigenvalues<R>();
    for (std::uint32_t cell = 0; cell < cells; ++cell) {
      SCOPED_TRACE("frame " + std::to_string(f) + " cell " + std::to_string(cell));
      ASSERT_EQ(svd.slot->info()[cell], 0);
      ASSERT_EQ(v.cell_status[cell], 0);
      ASSERT_EQ(v.source_count[cell], e.source_count[cell]);
      EXPECT_EQ(v.source_count[cell], 4);  // three sources and the jammer
      for (std::uint32_t k = 0; k < s; ++k) {
        const float a = v.doa_deg[cell * s + k], b = e.doa_deg[cell * s + k];
        if (std::isnan(b)) {
          EXPECT_TRUE(std::isnan(a)) << "DOA " << k;
          continue;
        }
        EXPECT_NEAR(a, b, doa_tolerance_deg) << "DOA " << k;
        worst_doa = std::max(worst_doa, double(std::abs(a - b)));
      }
      const double largest = e_values[std::size_t(cell + 1) * n - 1];
      for (std::uint32_t k = 0; k < n; ++k) {
        const double difference = std::abs(double(v_values[cell * n + k]) - double(e_values[cell * n + k]));
        EXPECT_LE(difference, 8.0 * n * eps<T>() * largest) << "eigenvalue " << k;
        worst_value = std::max(worst_value, difference / (n * eps<T>() * largest));
        EXPECT_EQ(v.eigenvalues[cell * n + k], static_cast<float>(v_values[cell * n + k]));
      }
    }
  }
  std::cout << "[ info     ] svd against eig: worst DOA difference " << worst_doa << "°, worst eigenvalue difference "
            << worst_value << " N·ε·λ_max\n";

  // Diagonal loading δ: eig decomposes R̂ + δI, svd adds δ to σ²/K; the same eigenvalues.
  c.pipeline.stages.covariance.diagonal_loading = with_svd.pipeline.stages.covariance.diagonal_loading = 0.25;
  Chain eig_loaded(c, exec), svd_loaded(with_svd, exec);
  const auto frame = generator.frame(5);
  eig_loaded.run(frame);
  svd_loaded.run(frame);
  const auto e_values = eig_loaded.slot->eigenvalues<R>();
  const auto v_values = svd_loaded.slot->eigenvalues<R>();
  const auto reference = reference_eigenvalues<T>(frame, 0.25);
  for (std::uint32_t cell = 0; cell < cells; ++cell) {
    const double largest = reference[std::size_t(cell + 1) * n - 1];
    for (std::uint32_t k = 0; k < n; ++k) {
      EXPECT_LE(std::abs(double(v_values[cell * n + k]) - double(e_values[cell * n + k])), 8.0 * n * eps<T>() * largest)
          << "loaded, cell " << cell << " eigenvalue " << k;
      EXPECT_GT(v_values[cell * n + k], 0.25 * (1 - 4 * eps<T>())) << "loaded, cell " << cell << " eigenvalue " << k;
    }
  }
}

// The reason for the svd method: a 60 dB jammer on 16 elements makes λ_max/λ_noise ≈ 1.6·10⁷. In
// single precision, heev of the covariance leaves every noise eigenvalue with an error of order
// ε·λ_max — about the noise power itself — while gesvj of the snapshots leaves an error of order
// ε·√(λ_max·λ_noise). Both are measured against the double-precision eigenvalues of the same
// samples; the svd error must be within 2·N·ε·√(λ_max·λ_i) and at least 30 times below eig's, and
// the svd method's source counts must be the reference criterion's on the reference eigenvalues.
inline void check_svd_keeps_noise_eigenvalues_next_to_a_strong_jammer(linalg::Exec& exec) {
  using T = linalg::cf32;
  using R = float;
  config::Config c = acceptance_config(config::SampleType::cf32, fresh_seed("60 dB jammer"), 48);
  c.scenario.sources = {{-20.0, 10.0}, {5.0, 10.0}, {31.0, 0.0}};
  c.scenario.jammers = {{48.0, 60.0}};
  c.pipeline.stages.adaptive.enabled = false;
  config::Config with_svd = c;
  with_svd.pipeline.stages.subspace.method = config::SubspaceMethod::svd;
  Chain eig(c, exec), svd(with_svd, exec);
  stages::ScenarioGenerator generator(c.scenario, 0, 2);
  const auto frame = generator.frame(0);
  eig.run(frame);
  svd.run(frame);
  const auto reference = reference_eigenvalues<T>(frame);
  const auto e_values = eig.slot->eigenvalues<R>();
  const auto v_values = svd.slot->eigenvalues<R>();
  const int n = 16, noise = n - 4;  // three sources and the jammer
  const std::uint32_t cells = eig.shape.cells;
  double eig_error = 0.0, svd_error = 0.0, svd_budget_used = 0.0, largest = 0.0;
  int eig_counts_right = 0, svd_counts_right = 0;
  for (std::uint32_t cell = 0; cell < cells; ++cell) {
    const double* w = reference.data() + std::size_t(cell) * n;
    largest = std::max(largest, w[n - 1]);
    for (int k = 0; k < noise; ++k) {
      // The noise power per element is 1: these errors are in units of it.
      const double e = std::abs(double(e_values[cell * n + k]) - w[k]);
      const double v = std::abs(double(v_values[cell * n + k]) - w[k]);
      const double bound = 2.0 * n * eps<T>() * std::sqrt(w[n - 1] * w[k]) + 2.0 * eps<T>() * w[k];
      EXPECT_LE(v, bound) << "cell " << cell << " noise eigenvalue " << k << " (reference " << w[k] << ")";
      eig_error = std::max(eig_error, e);
      svd_error = std::max(svd_error, v);
      svd_budget_used = std::max(svd_budget_used, v / bound);
    }
    const int expected = reference_source_count(std::vector<double>(w, w + n), 200.0, true);
    EXPECT_EQ(svd.slot->slot.results.source_count[cell], expected) << "cell " << cell;
    if (svd.slot->slot.results.source_count[cell] == expected) ++svd_counts_right;
    if (eig.slot->slot.results.source_count[cell] == expected) ++eig_counts_right;
  }
  std::cout << "[ info     ] 60 dB jammer, cf32, λ_max/σ² = " << largest << ": largest noise-eigenvalue error (units of σ²) "
            << "eig " << eig_error << ", svd " << svd_error << " (" << svd_budget_used
            << " of its bound); source counts as the double reference's: eig " << eig_counts_right << "/" << cells
            << ", svd " << svd_counts_right << "/" << cells << "\n";
  EXPECT_GE(eig_error, 30.0 * svd_error) << "the covariance route should lose far more accuracy than the SVD";
}

// What the svd method cannot decompose is refused, naming the key: covariance frames, fewer
// snapshots than elements, a window of several frames — when the chain is built for such an input
// (a configuration error), and frame by frame at run time (FrameError "shape"). Without a
// covariance stage the svd method still takes snapshot frames: it reads the payload itself.
template <class T>
void check_svd_refuses_what_it_cannot_decompose(linalg::Exec& exec) {
  const bool single = std::is_same_v<T, linalg::cf32>;
  config::Config c = acceptance_config(sample_type_of(single), fresh_seed("svd refusals"), 4);
  c.pipeline.stages.subspace.method = config::SubspaceMethod::svd;
  const auto element_type = single ? replay::ElementType::cf32 : replay::ElementType::cf64;
  auto expect_config_error = [&](const config::Config& config, const stages::InputShape& input, const std::string& phrase) {
    try {
      stages::make_processing_stages(config, input);
      ADD_FAILURE() << phrase << ": accepted";
    } catch (const config::ConfigError& e) {
      EXPECT_EQ(e.key(), "pipeline.stages.subspace.method") << e.what();
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
  };
  expect_config_error(c, {replay::PayloadKind::covariance, element_type, 16, 4, 200}, "covariance frames");
  expect_config_error(c, {replay::PayloadKind::snapshots, element_type, 16, 4, 12}, "fewer snapshots than array elements");
  config::Config windowed = c;
  windowed.pipeline.stages.covariance.window = 3;
  expect_config_error(windowed, stages::scenario_shape(c.scenario), "covariance.window 1");
  // eig takes the same covariance input.
  config::Config eig = c;
  eig.pipeline.stages.subspace.method = config::SubspaceMethod::eig;
  EXPECT_NO_THROW(stages::make_processing_stages(eig, {replay::PayloadKind::covariance, element_type, 16, 4, 200}));

  Chain chain(c, exec);
  pipeline::Stage& subspace = *chain.stages.at(1);
  ASSERT_EQ(subspace.name(), "subspace");
  auto expect_refused = [&](replay::FrameHeader h, const std::string& what) {
    chain.slot->load_header(h);
    try {
      subspace.run(chain.slot->slot, exec);
      ADD_FAILURE() << what << ": accepted";
    } catch (const pipeline::FrameError& e) {
      EXPECT_EQ(e.reason(), "shape") << what;
      EXPECT_NE(std::string(e.what()).find("pipeline.stages.subspace.method"), std::string::npos) << e.what();
    }
  };
  replay::FrameHeader h;
  h.kind = replay::PayloadKind::covariance;
  h.element_type = element_type;
  h.rows = h.cols = 16;
  h.count = 4;
  expect_refused(h, "covariance frame");
  h.kind = replay::PayloadKind::snapshots;
  h.cols = 15;
  expect_refused(h, "15 snapshots for 16 channels");

  // prepare() refuses a frame shape without enough snapshots.
  stages::SubspaceSettings settings;
  settings.config = c.pipeline.stages.subspace;
  stages::SubspaceStage alone(settings);
  auto shape = chain.shape;
  shape.snapshots = 8;
  EXPECT_THROW(alone.prepare(shape, exec), std::invalid_argument);

  // No covariance stage: the svd method reads the snapshots from the payload.
  c.pipeline.stages.covariance.enabled = false;
  c.pipeline.stages.adaptive.enabled = false;
  Chain without_covariance(c, exec);
  ASSERT_EQ(without_covariance.stages.size(), 1u);
  without_covariance.run(stages::ScenarioGenerator(c.scenario, 0, 2).frame(0));
  for (std::uint32_t cell = 0; cell < chain.shape.cells; ++cell) {
    EXPECT_EQ(without_covariance.slot->slot.results.cell_status[cell], 0) << "cell " << cell;
    EXPECT_EQ(without_covariance.slot->slot.results.source_count[cell], 3) << "cell " << cell;
  }
}

}  // namespace covflow::test

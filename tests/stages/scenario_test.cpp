// The scenario generator: its conventions (steering vectors of every geometry, angle sign,
// power), clutter, its statistics against the model covariance, the model and Wishart covariance
// frames, and determinism from the seed.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "covflow/linalg/covariance.hpp"
#include "covflow/linalg/solve.hpp"
#include "covflow/stages/scenario.hpp"
#include "test_support.hpp"

namespace covflow::stages {
namespace {

using cd = std::complex<double>;

config::ScenarioConfig small_scenario() {
  config::ScenarioConfig s;
  s.elements = 8;
  s.snapshots = 50;
  s.cells = 12;
  s.sources = {{-20, 10}, {14, 3}};
  s.jammers = {{40, 25}};
  return s;
}

// Per-cell sample covariance computed here, naively, from a snapshot frame.
std::vector<std::vector<cd>> cell_covariances(const replay::Frame& frame) {
  const auto m = frame.header.rows, k = frame.header.cols, c = frame.header.count;
  const auto x = replay::payload_as<cd>(frame);
  std::vector<std::vector<cd>> out(c, std::vector<cd>(std::size_t(m) * m));
  for (std::uint32_t cell = 0; cell < c; ++cell)
    for (std::uint32_t t = 0; t < k; ++t) {
      const cd* column = x.data() + std::size_t(cell) * m * k + std::size_t(t) * m;
      for (std::uint32_t j = 0; j < m; ++j)
        for (std::uint32_t i = 0; i < m; ++i) out[cell][i + j * m] += column[i] * std::conj(column[j]) / double(k);
    }
  return out;
}

TEST(Scenario, SteeringVectorFollowsTheDocumentedConvention) {
  // d = 1/2, θ = 30°: the phase advances by 2π·½·sin 30° = π/2 per element, toward increasing m.
  const auto a = steering_vector(4, 0.5, 30.0);
  const cd expected[] = {{1, 0}, {0, 1}, {-1, 0}, {0, -1}};
  // The phase m·π/2 is computed from sin 30° in floating point: a few ulps per element.
  auto tolerance = [](int m) { return 10.0 * (m + 1) * test::eps<cd>(); };
  for (int m = 0; m < 4; ++m) EXPECT_LT(std::abs(a[m] - expected[m]), tolerance(m)) << "element " << m;
  const auto b = steering_vector(4, 0.5, -30.0);
  for (int m = 0; m < 4; ++m) EXPECT_LT(std::abs(b[m] - std::conj(expected[m])), tolerance(m)) << "element " << m;
  for (const cd& v : steering_vector(5, 0.7, 0.0)) EXPECT_EQ(v, cd(1, 0));  // broadside: in phase
  // d = 1, θ = 90°: a full turn per element (a grating lobe at endfire).
  for (const cd& v : steering_vector(3, 1.0, 90.0)) EXPECT_LT(std::abs(v - cd(1, 0)), tolerance(3));
}

TEST(Scenario, FramesCarryTheConfiguredShapeAndTimes) {
  config::ScenarioConfig s = small_scenario();
  s.frame_rate_hz = 250;
  for (auto payload : {config::ScenarioPayload::snapshots, config::ScenarioPayload::covariance})
    for (auto type : {config::SampleType::cf32, config::SampleType::cf64}) {
      s.payload = payload;
      s.element_type = type;
      ScenarioGenerator generator(s, 1'000'000, 2);
      for (std::uint64_t sequence = 0; sequence < 3; ++sequence) {
        const replay::Frame f = generator.next();
        EXPECT_EQ(f.header.sequence, sequence);
        EXPECT_EQ(f.header.capture_time_ns, 1'000'000 + std::int64_t(sequence) * 4'000'000);
        EXPECT_EQ(f.header.element_type, type == config::SampleType::cf32 ? replay::ElementType::cf32 : replay::ElementType::cf64);
        EXPECT_EQ(f.header.rows, 8u);
        EXPECT_EQ(f.header.count, 12u);
        if (payload == config::ScenarioPayload::snapshots) {
          EXPECT_EQ(f.header.kind, replay::PayloadKind::snapshots);
          EXPECT_EQ(f.header.cols, 50u);
        } else {
          EXPECT_EQ(f.header.kind, replay::PayloadKind::covariance);
          EXPECT_EQ(f.header.cols, 8u);
        }
        EXPECT_EQ(f.payload.size(), f.header.payload_bytes());
      }
    }
}

TEST(Scenario, DeterministicFromTheSeedInAnyOrderAndOnAnyThreadCount) {
  config::ScenarioConfig s = small_scenario();
  s.seed = std::int64_t(test::fresh_seed("scenario seed") >> 1);
  ScenarioGenerator sequential(s, 0, 1);
  std::vector<replay::Frame> frames;
  for (int i = 0; i < 4; ++i) frames.push_back(sequential.next());
  ScenarioGenerator random_access(s, 0, 3);
  for (int i : {3, 1, 0, 2}) EXPECT_EQ(random_access.frame(std::uint64_t(i)), frames[std::size_t(i)]) << "frame " << i;
  EXPECT_NE(frames[0].payload, frames[1].payload);
  config::ScenarioConfig other = s;
  other.seed = s.seed ^ 1;
  EXPECT_NE(ScenarioGenerator(other).frame(0).payload, frames[0].payload);
}

TEST(Scenario, CovarianceFramesAreTheSampleCovarianceOfTheSnapshotFrames) {
  config::ScenarioConfig s = small_scenario();
  s.seed = std::int64_t(test::fresh_seed("covariance frames") >> 1);
  const replay::Frame snapshots = ScenarioGenerator(s).frame(5);
  s.payload = config::ScenarioPayload::covariance;
  const replay::Frame covariance = ScenarioGenerator(s).frame(5);
  const auto expected = cell_covariances(snapshots);
  const auto r = replay::payload_as<cd>(covariance);
  const std::size_t n = 8;
  for (std::size_t c = 0; c < expected.size(); ++c) {
    double scale = 0;
    for (const cd& v : expected[c]) scale = std::max(scale, std::abs(v));
    for (std::size_t i = 0; i < n * n; ++i)
      EXPECT_LE(std::abs(r[c * n * n + i] - expected[c][i]), 8 * 50 * test::eps<cd>() * scale) << "cell " << c << " entry " << i;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) EXPECT_EQ(r[c * n * n + i + j * n], std::conj(r[c * n * n + j + i * n]));
  }
}

// Emitters at random angles and powers (fresh seed): the covariance averaged over all cells of a
// frame matches the model entry by entry, within 6 standard errors. The standard error of an
// entry's mean over S = snapshots × cells samples is sqrt(R_ii R_jj / S); a complex mean's
// error beyond 6 of them has probability e^-36. This pins the angle convention, the sign, the
// powers and the noise floor.
TEST(Scenario, AveragedCovarianceMatchesTheModelEntryByEntry) {
  std::mt19937_64 rng(test::fresh_seed("scenario statistics"));
  std::uniform_real_distribution<double> angle(-80, 80), power(-5, 25);
  for (int trial = 0; trial < 3; ++trial) {
    config::ScenarioConfig s;
    s.elements = 6;
    s.spacing_wavelengths = std::uniform_real_distribution<double>(0.2, 0.9)(rng);
    s.sources = {{angle(rng), power(rng)}, {angle(rng), power(rng)}};
    s.jammers = trial == 0 ? std::vector<config::Emitter>{} : std::vector<config::Emitter>{{angle(rng), power(rng)}};
    s.snapshots = 400;
    s.cells = 100;
    s.seed = std::int64_t(rng() >> 1);
    const auto model = model_covariance(s);
    const auto cells = cell_covariances(ScenarioGenerator(s).frame(rng() % 1000));
    const std::size_t n = 6;
    const double samples = double(s.snapshots * s.cells);
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < n; ++i) {
        cd mean = 0;
        for (const auto& r : cells) mean += r[i + j * n] / double(cells.size());
        const double standard_error = std::sqrt(model[i + i * n].real() * model[j + j * n].real() / samples);
        EXPECT_LT(std::abs(mean - model[i + j * n]), 6 * standard_error)
            << "trial " << trial << " entry (" << i << ", " << j << "): mean " << mean << " model " << model[i + j * n];
      }
  }
}

// ‖R̂ − R‖²_F has expectation (tr R)² / K for K complex Gaussian snapshots, so
// z = K ‖R̂ − R‖²_F / (tr R)² has mean 1 whatever K is: the sample covariance approaches the model
// as 1/√K, without bias. Checked for K from 16 to 1024 on the mean over cells, within 5 standard
// errors estimated from the cells themselves.
TEST(Scenario, SampleCovarianceApproachesTheModelAsSnapshotsGrow) {
  std::mt19937_64 rng(test::fresh_seed("convergence"));
  config::ScenarioConfig s;
  s.elements = 8;
  s.sources = {{-20, 10}, {5, 10}, {31, 10}};
  s.jammers = {{48, 30}};
  s.cells = 400;
  const auto model = model_covariance(s);
  double trace = 0;
  for (std::int64_t i = 0; i < s.elements; ++i) trace += model[std::size_t(i + i * s.elements)].real();
  double previous_error = INFINITY;
  for (std::int64_t k : {16, 64, 256, 1024}) {
    s.snapshots = k;
    s.seed = std::int64_t(rng() >> 1);
    const auto cells = cell_covariances(ScenarioGenerator(s).frame(0));
    std::vector<double> z;
    double error = 0;
    for (const auto& r : cells) {
      double squared = 0;
      for (std::size_t i = 0; i < r.size(); ++i) squared += std::norm(r[i] - model[i]);
      z.push_back(double(k) * squared / (trace * trace));
      error += std::sqrt(squared) / double(cells.size());
    }
    double mean = 0, variance = 0;
    for (double v : z) mean += v / double(z.size());
    for (double v : z) variance += (v - mean) * (v - mean) / double(z.size() - 1);
    const double standard_error = std::sqrt(variance / double(z.size()));
    EXPECT_LT(std::abs(mean - 1.0), 5 * standard_error) << "K = " << k << ": mean " << mean;
    EXPECT_LT(error, previous_error) << "K = " << k;
    previous_error = error;
    std::cout << "[ info     ] K = " << k << ": mean ‖R̂ − R‖_F / ‖R‖ scale " << error / trace << ", E z = " << mean
              << " ± " << standard_error << "\n";
  }
}

TEST(Scenario, NoiseAloneIsWhiteWithUnitPower) {
  config::ScenarioConfig s;
  s.elements = 4;
  s.sources.clear();
  s.jammers.clear();
  s.snapshots = 500;
  s.cells = 80;
  s.seed = std::int64_t(test::fresh_seed("noise") >> 1);
  const auto cells = cell_covariances(ScenarioGenerator(s).frame(0));
  const double standard_error = std::sqrt(1.0 / double(s.snapshots * s.cells));
  for (std::size_t j = 0; j < 4; ++j)
    for (std::size_t i = 0; i < 4; ++i) {
      cd mean = 0;
      for (const auto& r : cells) mean += r[i + j * 4] / double(cells.size());
      EXPECT_LT(std::abs(mean - cd(i == j ? 1.0 : 0.0)), 6 * standard_error) << i << ", " << j;
    }
}

// The phase of a_m is computed from sines and cosines of the angles in floating point: a few
// ulps per turn of phase, and element m is at most a few turns from element 0 in these tests.
double phase_tolerance(int m) { return 10.0 * (m + 1) * test::eps<cd>(); }

void expect_steering(const std::vector<cd>& a, const std::vector<cd>& expected, const std::string& what) {
  ASSERT_EQ(a.size(), expected.size()) << what;
  for (std::size_t m = 0; m < a.size(); ++m)
    EXPECT_LT(std::abs(a[m] - expected[m]), phase_tolerance(int(m))) << what << ", element " << m << ": " << a[m];
}

config::ScenarioConfig planar_scenario(std::int64_t rows, std::int64_t cols, double row_spacing, double col_spacing) {
  config::ScenarioConfig s;
  s.geometry = config::ArrayGeometry::planar;
  s.planar = {rows, cols, row_spacing, col_spacing};
  s.elements = rows * cols;
  return s;
}

// docs/scenario.md's worked example and the element order: m = r·cols + c at (0, c·d_c, r·d_r).
TEST(Scenario, PlanarSteeringVectorsFollowTheDocumentedConvention) {
  const cd j(0, 1);
  const auto square = planar_scenario(2, 2, 1.0 / std::numbers::sqrt2, 0.5);
  const auto positions = element_positions(square);
  ASSERT_EQ(positions.size(), 4u);
  EXPECT_EQ(positions[1], (config::ElementPosition{0, 0.5, 0}));
  EXPECT_EQ(positions[2], (config::ElementPosition{0, 0, 1.0 / std::numbers::sqrt2}));
  // az 30°, el 0: each row is the linear array's a(30°) at d = ½, a quarter turn per column.
  expect_steering(steering_vector(square, 30.0, 0.0), {1, j, 1, j}, "2 × 2, az 30°, el 0°");
  // az 45°, el 45°: u = (½, ½, 1/√2); a quarter turn per column, half a turn per row.
  expect_steering(steering_vector(square, 45.0, 45.0), {1, j, -1.0, -j}, "2 × 2, az 45°, el 45°");
  // 2 rows × 3 columns, d_r = ¼: at az 30° the rows are alike; straight up (el 90°) the columns
  // are, and the upper row leads by a quarter turn.
  const auto wide = planar_scenario(2, 3, 0.25, 0.5);
  expect_steering(steering_vector(wide, 30.0, 0.0), {1, j, -1.0, 1, j, -1.0}, "2 × 3, az 30°, el 0°");
  expect_steering(steering_vector(wide, 0.0, 90.0), {1, 1, 1, j, j, j}, "2 × 3, az 0°, el 90°");
}

// Element 0 is the phase reference wherever it is, and the sign is the linear array's: an element
// further along the direction of arrival leads.
TEST(Scenario, ListedPositionsAreSteeredRelativeToElementZero) {
  config::ScenarioConfig s;
  s.geometry = config::ArrayGeometry::positions;
  s.positions = {{1, 1, 1}, {1.25, 1, 1}, {1, 1, 1.5}, {1, 1.5, 1}};
  s.elements = 4;
  EXPECT_EQ(element_positions(s), s.positions);
  const cd j(0, 1);
  expect_steering(steering_vector(s, 0.0, 0.0), {1, j, 1, 1}, "broadside (+x)");
  expect_steering(steering_vector(s, 90.0, 0.0), {1, 1, 1, -1.0}, "az 90° (+y)");
  expect_steering(steering_vector(s, -90.0, 0.0), {1, 1, 1, -1.0}, "az −90° (−y)");
  expect_steering(steering_vector(s, 0.0, 90.0), {1, 1, -1.0, 1}, "el 90° (+z)");
  expect_steering(steering_vector(s, 0.0, -60.0), {1, std::polar(1.0, std::numbers::pi / 4), std::polar(1.0, -std::numbers::pi * std::sqrt(3.0) / 2), 1},
                  "el −60°: u = (½, 0, −√3/2)");
}

// The linear array is the general formula with p_m = (0, m·d, 0), and a planar array of one row
// is the linear array of its column spacing: the same vectors to rounding, at random spacings and
// directions. The scenario's own steering vector of a linear array is the linear formula, bit for
// bit (the frames of linear arrays are made with it).
TEST(Scenario, TheLinearArrayIsASpecialCaseOfTheGeneralSteeringFormula) {
  std::mt19937_64 rng(test::fresh_seed("linear special case"));
  std::uniform_real_distribution<double> angle(-90, 90), spacing(0.05, 3);
  for (int trial = 0; trial < 50; ++trial) {
    config::ScenarioConfig s;
    s.elements = 2 + std::int64_t(rng() % 30);
    s.spacing_wavelengths = spacing(rng);
    const double azimuth = angle(rng), elevation = trial % 2 == 0 ? 0.0 : angle(rng);
    const auto linear = steering_vector(s.elements, s.spacing_wavelengths, azimuth, elevation);
    EXPECT_EQ(steering_vector(s, azimuth, elevation), linear);
    if (elevation == 0.0) {
      EXPECT_EQ(steering_vector(s.elements, s.spacing_wavelengths, azimuth), linear);
    }
    const auto general = steering_vector(element_positions(s), azimuth, elevation);
    const auto row = steering_vector(planar_scenario(1, s.elements, 0.5, s.spacing_wavelengths), azimuth, elevation);
    ASSERT_EQ(general.size(), linear.size());
    for (std::size_t m = 0; m < linear.size(); ++m) {
      // The phase reaches 2π·m·d: its rounding is a few ulps of that.
      const double tolerance = 8.0 * test::eps<cd>() * (1.0 + 2.0 * std::numbers::pi * double(m) * s.spacing_wavelengths);
      EXPECT_LT(std::abs(general[m] - linear[m]), tolerance) << "trial " << trial << " element " << m;
      EXPECT_LT(std::abs(row[m] - linear[m]), tolerance) << "trial " << trial << " element " << m;
    }
  }
}

// A linear array with emitters at elevation 0 and no clutter gives, bit for bit, the frames
// recorded from it: FNV-1a digests of payloads made by the generator when that was its only model
// (they depend on the C library's sin, cos and log, here glibc's).
TEST(Scenario, ExistingConfigurationsGiveTheFramesTheyGaveBefore) {
  auto digest = [](const replay::Frame& frame) {
    std::uint64_t h = 1469598103934665603ull;
    for (std::byte b : frame.payload) h = (h ^ std::uint64_t(b)) * 1099511628211ull;
    return h;
  };
  config::ScenarioConfig covariance_cf32;
  covariance_cf32.elements = 8;
  covariance_cf32.snapshots = 50;
  covariance_cf32.cells = 12;
  covariance_cf32.sources = {{-20, 10}, {14, 3}};
  covariance_cf32.jammers = {{40, 25}};
  covariance_cf32.seed = 12345;
  covariance_cf32.payload = config::ScenarioPayload::covariance;
  covariance_cf32.element_type = config::SampleType::cf32;
  config::ScenarioConfig snapshots_cf64 = covariance_cf32;
  snapshots_cf64.payload = config::ScenarioPayload::snapshots;
  snapshots_cf64.element_type = config::SampleType::cf64;
  snapshots_cf64.spacing_wavelengths = 0.37;
  snapshots_cf64.elements = 6;
  config::ScenarioConfig noise_only = covariance_cf32;
  noise_only.sources.clear();
  noise_only.jammers.clear();
  noise_only.element_type = config::SampleType::cf64;
  config::ScenarioConfig snapshots_cf32 = covariance_cf32;
  snapshots_cf32.payload = config::ScenarioPayload::snapshots;
  snapshots_cf32.seed = 98765;
  const struct {
    const char* what;
    config::ScenarioConfig scenario;
    std::uint64_t frame0, frame3;
  } cases[] = {
      {"the default scenario", config::ScenarioConfig{}, 0x529f8fc240722454ull, 0x9c4c744211fb148cull},
      {"sample covariance, cf32", covariance_cf32, 0xd81e9201f4e44140ull, 0xc2592193cd49660bull},
      {"snapshots, cf64, d = 0.37", snapshots_cf64, 0x4cde33ca77ab76cdull, 0x1d27304d04290d9dull},
      {"noise alone", noise_only, 0x73d7bcf34e45a451ull, 0xc689702f23868f7cull},
      {"snapshots, cf32", snapshots_cf32, 0xd4fb36d6df03c3cfull, 0x7534789ed0d5e655ull},
  };
  for (const auto& c : cases) {
    ScenarioGenerator generator(c.scenario, 0, 2);
    EXPECT_EQ(digest(generator.frame(0)), c.frame0) << c.what << ", frame 0";
    EXPECT_EQ(digest(generator.frame(3)), c.frame3) << c.what << ", frame 3";
  }
}

// A sector of width w cut into P = ⌈w/step⌉ slices: scatterers at the slices' centres, each with
// p/P of the power.
TEST(Scenario, ClutterIsPointScatterersAtTheCentresOfEqualSlices) {
  const auto sector = clutter_scatterers({.center_deg = 10, .width_deg = 30, .power_db = 20, .elevation_deg = -5, .step_deg = 0.1});
  ASSERT_EQ(sector.size(), 300u);
  double total = 0;
  for (std::size_t i = 0; i < sector.size(); ++i) {
    EXPECT_NEAR(sector[i].azimuth_deg, -4.95 + 0.1 * double(i), 1e-12) << i;
    EXPECT_EQ(sector[i].elevation_deg, -5.0);
    EXPECT_NEAR(sector[i].power, 100.0 / 300.0, 1e-14);
    total += sector[i].power;
  }
  EXPECT_NEAR(total, 100.0, 1e-11);
  // 2.1 / 0.3 is 7.000000000000001 in floating point: still 7 slices of 0.3°.
  EXPECT_EQ(clutter_scatterers({.center_deg = 0, .width_deg = 2.1, .power_db = 0, .step_deg = 0.3}).size(), 7u);
  // A step that does not divide the width: ⌈1/0.3⌉ = 4 slices of 0.25°.
  const auto uneven = clutter_scatterers({.center_deg = -60, .width_deg = 1, .power_db = 0, .step_deg = 0.3});
  ASSERT_EQ(uneven.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(uneven[i].azimuth_deg, -60.375 + 0.25 * double(i), 1e-12);
    EXPECT_DOUBLE_EQ(uneven[i].power, 0.25);
  }
  // The scenario's point emitters: sources, jammers, then the scatterers.
  config::ScenarioConfig s;
  s.sources = {{-20, 10, 15}};
  s.jammers = {{48, 30}};
  s.clutter = {{.center_deg = 0, .width_deg = 2, .power_db = 10, .step_deg = 1}};
  const auto emitters = point_emitters(s);
  ASSERT_EQ(emitters.size(), 4u);
  EXPECT_EQ(emitters[0].azimuth_deg, -20.0);
  EXPECT_EQ(emitters[0].elevation_deg, 15.0);
  EXPECT_DOUBLE_EQ(emitters[0].power, 10.0);
  EXPECT_DOUBLE_EQ(emitters[1].power, 1000.0);
  EXPECT_EQ(emitters[2].azimuth_deg, -0.5);
  EXPECT_EQ(emitters[3].azimuth_deg, 0.5);
  EXPECT_DOUBLE_EQ(emitters[3].power, 5.0);
}

// A planar array with sources and jammers off the horizon and a clutter sector.
config::ScenarioConfig planar_clutter_scenario() {
  config::ScenarioConfig s = planar_scenario(2, 3, 0.4, 0.5);
  s.sources = {{-20, 10, 10}};
  s.jammers = {{40, 20, -15}};
  s.clutter = {{.center_deg = 5, .width_deg = 40, .power_db = 15, .elevation_deg = -3, .step_deg = 1}};
  return s;
}

// R = Σ p_i a_i a_iᴴ + I summed here term by term over every point emitter, scatterers included,
// against model_covariance's herk: a sum of E products of unit-modulus entries, each within a few
// ulps, so |ΔR_ij| ≤ c·(E + 1)·ε·Σ p_i.
TEST(Scenario, ModelCovarianceIsTheSumOverEveryPointEmitter) {
  for (const config::ScenarioConfig& s : {planar_clutter_scenario(), config::ScenarioConfig{}}) {
    const auto n = static_cast<std::size_t>(s.elements);
    const auto emitters = point_emitters(s);
    std::vector<cd> expected(n * n);
    double total_power = 0;
    for (std::size_t i = 0; i < n; ++i) expected[i + i * n] = 1.0;
    for (const PointEmitter& e : emitters) {
      const auto a = steering_vector(s, e.azimuth_deg, e.elevation_deg);
      for (std::size_t j = 0; j < n; ++j)
        for (std::size_t i = 0; i < n; ++i) expected[i + j * n] += e.power * a[i] * std::conj(a[j]);
      total_power += e.power;
    }
    const auto r = model_covariance(s);
    const double tolerance = 8.0 * double(emitters.size() + 1) * test::eps<cd>() * (1.0 + total_power);
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < n; ++i) {
        EXPECT_LT(std::abs(r[i + j * n] - expected[i + j * n]), tolerance) << "(" << i << ", " << j << ")";
        EXPECT_EQ(r[i + j * n], std::conj(r[j + i * n])) << "not exactly Hermitian at (" << i << ", " << j << ")";
      }
  }
}

// The snapshots of a planar array with elevated emitters and clutter have the model covariance:
// the mean over S = snapshots × cells samples of each entry of x xᴴ is within 6 standard errors,
// sqrt(R_ii R_jj / S), of R_ij (for complex Gaussian x, E|x_i x_j* − R_ij|² = R_ii R_jj; a
// complex mean beyond 6 standard errors has probability e^-36). The clutter's 40 scatterers make
// most of R's off-diagonal structure, so a scatterer left out of the snapshots, or the wrong
// geometry in them, fails this.
TEST(Scenario, ClutterSnapshotsOfAPlanarArrayHaveTheModelCovariance) {
  config::ScenarioConfig s = planar_clutter_scenario();
  s.snapshots = 400;
  s.cells = 100;
  s.seed = std::int64_t(test::fresh_seed("planar clutter statistics") >> 1);
  const auto model = model_covariance(s);
  const auto cells = cell_covariances(ScenarioGenerator(s).frame(7));
  const auto n = static_cast<std::size_t>(s.elements);
  const double samples = double(s.snapshots * s.cells);
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t i = 0; i < n; ++i) {
      cd mean = 0;
      for (const auto& r : cells) mean += r[i + j * n] / double(cells.size());
      const double standard_error = std::sqrt(model[i + i * n].real() * model[j + j * n].real() / samples);
      EXPECT_LT(std::abs(mean - model[i + j * n]), 6 * standard_error)
          << "entry (" << i << ", " << j << "): mean " << mean << " model " << model[i + j * n];
    }
}

// Covariance frames of the model carry R itself in every cell of every frame: bit for bit
// model_covariance for cf64, its rounding for cf32.
TEST(Scenario, ModelCovarianceFramesCarryTheModelExactly) {
  config::ScenarioConfig s = planar_clutter_scenario();
  s.payload = config::ScenarioPayload::covariance;
  s.covariance = config::ScenarioCovariance::model;
  s.cells = 5;
  const auto model = model_covariance(s);
  const std::size_t matrix = model.size();
  for (auto type : {config::SampleType::cf64, config::SampleType::cf32}) {
    s.element_type = type;
    ScenarioGenerator generator(s, 0, 2);
    for (std::uint64_t sequence : {0, 9}) {
      const replay::Frame f = generator.frame(sequence);
      EXPECT_EQ(f.header.kind, replay::PayloadKind::covariance);
      EXPECT_EQ(f.header.rows, 6u);
      EXPECT_EQ(f.header.cols, 6u);
      EXPECT_EQ(f.header.count, 5u);
      for (std::size_t cell = 0; cell < 5; ++cell)
        for (std::size_t i = 0; i < matrix; ++i) {
          if (type == config::SampleType::cf64)
            ASSERT_EQ(replay::payload_as<cd>(f)[cell * matrix + i], model[i]) << "cell " << cell << " entry " << i;
          else
            ASSERT_EQ(replay::payload_as<std::complex<float>>(f)[cell * matrix + i], std::complex<float>(model[i]))
                << "cell " << cell << " entry " << i;
        }
    }
  }
}

// Wishart frames are draws of the sample covariance of K snapshots from CN(0, R), through the
// snapshots themselves (K < N) or the Bartlett factor (K ≥ N). Each is exactly Hermitian and, for
// K ≥ N, positive definite; over C cells their mean approaches R entry by entry as the sample
// covariance's does, E|W_ij − R_ij|² = R_ii R_jj / K (6 standard errors of the mean over C cells);
// and their spread is the sample covariance's: z = K‖W − R‖²_F / (tr R)² has mean 1, within 5
// standard errors estimated from the cells — a wrong Bartlett scaling or diagonal fails this.
// z is skewed to the right (K as small as N here), which makes its standardised mean skewed to
// the left; C = 2000 cells keep that skew small enough for the 5 standard errors to hold.
TEST(Scenario, WishartFramesAreHermitianDefiniteAndDistributedAsASampleCovariance) {
  std::mt19937_64 rng(test::fresh_seed("wishart frames"));
  config::ScenarioConfig s = planar_clutter_scenario();
  s.payload = config::ScenarioPayload::covariance;
  s.covariance = config::ScenarioCovariance::wishart;
  s.cells = 2000;
  const auto model = model_covariance(s);
  const auto n = static_cast<std::size_t>(s.elements);
  const auto cells = static_cast<std::size_t>(s.cells);
  double trace = 0;
  for (std::size_t i = 0; i < n; ++i) trace += model[i + i * n].real();
  linalg::Exec exec = linalg::Exec::cpu(2);
  for (std::int64_t k : {4, 6, 20}) {  // K < N: the snapshots; K = N and K > N: the Bartlett factor
    s.snapshots = k;
    s.seed = std::int64_t(rng() >> 1);
    const replay::Frame f = ScenarioGenerator(s, 0, 2).frame(rng() % 100);
    const auto w = replay::payload_as<cd>(f);
    ASSERT_EQ(w.size(), n * n * cells);
    std::vector<cd> factors(w.begin(), w.end());
    std::vector<int> info(cells);
    linalg::potrf<cd>(exec, linalg::Uplo::lower, linalg::Batch<cd>::packed(factors.data(), s.elements, s.elements, s.cells), info);
    std::vector<double> z;
    for (std::size_t cell = 0; cell < cells; ++cell) {
      const cd* r = w.data() + cell * n * n;
      double squared = 0;
      for (std::size_t j = 0; j < n; ++j)
        for (std::size_t i = 0; i < n; ++i) {
          ASSERT_EQ(r[i + j * n], std::conj(r[j + i * n])) << "K = " << k << " cell " << cell << ": not exactly Hermitian";
          squared += std::norm(r[i + j * n] - model[i + j * n]);
        }
      z.push_back(double(k) * squared / (trace * trace));
      if (k >= s.elements) {
        EXPECT_EQ(info[cell], 0) << "K = " << k << " cell " << cell << ": not positive definite";
      }
    }
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < n; ++i) {
        cd mean = 0;
        for (std::size_t cell = 0; cell < cells; ++cell) mean += w[cell * n * n + i + j * n] / double(cells);
        const double standard_error = std::sqrt(model[i + i * n].real() * model[j + j * n].real() / (double(k) * double(cells)));
        EXPECT_LT(std::abs(mean - model[i + j * n]), 6 * standard_error)
            << "K = " << k << " entry (" << i << ", " << j << "): mean " << mean << " model " << model[i + j * n];
      }
    double mean = 0, variance = 0;
    for (double v : z) mean += v / double(z.size());
    for (double v : z) variance += (v - mean) * (v - mean) / double(z.size() - 1);
    const double standard_error = std::sqrt(variance / double(z.size()));
    EXPECT_LT(std::abs(mean - 1.0), 5 * standard_error) << "K = " << k << ": E z = " << mean;
    std::cout << "[ info     ] K = " << k << ": E z = " << mean << " ± " << standard_error << "\n";
  }
}

// The generator refuses what the loader refuses, for a configuration built in code.
TEST(Scenario, GeneratorRefusesAnInconsistentArrayOrPayload) {
  config::ScenarioConfig s = planar_scenario(2, 3, 0.5, 0.5);
  s.elements = 16;
  EXPECT_THROW(ScenarioGenerator{s}, std::invalid_argument);
  s = {};
  s.geometry = config::ArrayGeometry::positions;
  s.positions = {{0, 0, 0}, {0, 1, 0}};
  EXPECT_THROW(ScenarioGenerator{s}, std::invalid_argument);  // 16 elements, 2 positions
  s = {};
  s.covariance = config::ScenarioCovariance::model;  // with snapshot frames
  EXPECT_THROW(ScenarioGenerator{s}, std::invalid_argument);
  s = {};
  s.clutter = {{.center_deg = 80, .width_deg = 30, .power_db = 0}};
  EXPECT_THROW(ScenarioGenerator{s}, std::invalid_argument);
}

}  // namespace
}  // namespace covflow::stages

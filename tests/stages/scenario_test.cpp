// The scenario generator: its conventions (steering vector, angle sign, power), its statistics
// against the model covariance, and determinism from the seed.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "covflow/linalg/covariance.hpp"
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

}  // namespace
}  // namespace covflow::stages

#include "covflow/stages/scenario.hpp"

#include <cmath>
#include <numbers>
#include <stdexcept>

#include <fmt/format.h>

#include "covflow/linalg/covariance.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::stages {
namespace {

// SplitMix64: turns (seed, sequence, cell) into well-mixed, independent stream keys.
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256++ (Blackman and Vigna): fast, 2^256 period, fully specified, so the frames are the
// same with every standard library (std::normal_distribution's algorithm is not specified).
class Xoshiro256 {
 public:
  explicit Xoshiro256(std::uint64_t key) {
    for (auto& word : s_) word = splitmix64(key);
  }
  std::uint64_t operator()() {
    const std::uint64_t result = rotl(s_[0] + s_[3], 23) + s_[0];
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [-1, 1): 53 random bits.
  double symmetric_uniform() { return double((*this)() >> 11) * 0x1.0p-52 - 1.0; }
  // CN(0, 1): E|z|² = 1, real and imaginary parts independent N(0, 1/2). Marsaglia's polar
  // method: a point uniform in the unit disc, scaled; no trigonometry, 1.27 tries on average.
  std::complex<double> complex_normal() {
    for (;;) {
      const double u = symmetric_uniform(), v = symmetric_uniform();
      const double s = u * u + v * v;
      if (s > 0.0 && s < 1.0) {
        const double scale = std::sqrt(-std::log(s) / s);
        return {u * scale, v * scale};
      }
    }
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

std::uint64_t stream_key(std::int64_t seed, std::uint64_t sequence, std::uint64_t cell) {
  std::uint64_t state = std::uint64_t(seed);
  std::uint64_t key = splitmix64(state);
  state = key ^ sequence;
  key = splitmix64(state);
  state = key ^ cell;
  return splitmix64(state);
}

}  // namespace

std::vector<std::complex<double>> steering_vector(std::int64_t elements, double spacing_wavelengths, double angle_deg) {
  const double phase_step = 2.0 * std::numbers::pi * spacing_wavelengths * std::sin(angle_deg * std::numbers::pi / 180.0);
  std::vector<std::complex<double>> a(static_cast<std::size_t>(elements));
  for (std::int64_t m = 0; m < elements; ++m) a[std::size_t(m)] = std::polar(1.0, phase_step * double(m));
  return a;
}

std::vector<std::complex<double>> model_covariance(const config::ScenarioConfig& scenario) {
  const auto n = static_cast<std::size_t>(scenario.elements);
  std::vector<std::complex<double>> r(n * n);
  for (std::size_t i = 0; i < n; ++i) r[i + i * n] = 1.0;
  for (const auto* list : {&scenario.sources, &scenario.jammers})
    for (const config::Emitter& e : *list) {
      const double power = std::pow(10.0, e.power_db / 10.0);
      const auto a = steering_vector(scenario.elements, scenario.spacing_wavelengths, e.angle_deg);
      for (std::size_t j = 0; j < n; ++j)
        for (std::size_t i = 0; i < n; ++i) r[i + j * n] += power * a[i] * std::conj(a[j]);
    }
  return r;
}

ScenarioGenerator::ScenarioGenerator(const config::ScenarioConfig& scenario, std::int64_t start_time_ns, unsigned threads)
    : scenario_(scenario), start_time_ns_(start_time_ns), exec_(std::make_unique<linalg::Exec>(linalg::Exec::cpu(threads))) {
  if (scenario.elements < 1 || scenario.snapshots < 1 || scenario.cells < 1 || !(scenario.frame_rate_hz > 0))
    throw std::invalid_argument(fmt::format("scenario: impossible shape {} elements × {} snapshots × {} cells at {} Hz",
                                            scenario.elements, scenario.snapshots, scenario.cells, scenario.frame_rate_hz));
  const auto m = static_cast<std::size_t>(scenario.elements);
  for (const auto* list : {&scenario.sources, &scenario.jammers})
    for (const config::Emitter& e : *list) {
      const double amplitude = std::sqrt(std::pow(10.0, e.power_db / 10.0));
      const auto a = steering_vector(scenario.elements, scenario.spacing_wavelengths, e.angle_deg);
      for (std::size_t i = 0; i < m; ++i) scaled_steering_.push_back(amplitude * a[i]);
    }
}

ScenarioGenerator::~ScenarioGenerator() = default;
ScenarioGenerator::ScenarioGenerator(ScenarioGenerator&&) noexcept = default;
ScenarioGenerator& ScenarioGenerator::operator=(ScenarioGenerator&&) noexcept = default;

std::int64_t ScenarioGenerator::capture_time_ns(std::uint64_t sequence) const {
  return start_time_ns_ + std::llround(double(sequence) * 1e9 / scenario_.frame_rate_hz);
}

template <class T>
void ScenarioGenerator::snapshots(std::uint64_t sequence, std::vector<T>& out) {
  const auto m_count = static_cast<std::size_t>(scenario_.elements);
  const auto k_count = static_cast<std::size_t>(scenario_.snapshots);
  const std::size_t emitters = scaled_steering_.size() / m_count;
  out.resize(m_count * k_count * static_cast<std::size_t>(scenario_.cells));
  exec_->pool().parallel_for(static_cast<std::size_t>(scenario_.cells), [&](std::size_t cell, unsigned) {
    Xoshiro256 rng(stream_key(scenario_.seed, sequence, cell));
    std::vector<std::complex<double>> waveform(emitters);
    T* x = out.data() + cell * m_count * k_count;
    for (std::size_t t = 0; t < k_count; ++t) {
      for (auto& s : waveform) s = rng.complex_normal();
      for (std::size_t m = 0; m < m_count; ++m) {
        std::complex<double> sample = rng.complex_normal();
        for (std::size_t k = 0; k < emitters; ++k) sample += scaled_steering_[k * m_count + m] * waveform[k];
        x[m + t * m_count] = T(sample);
      }
    }
  });
}

template <class T>
replay::Frame ScenarioGenerator::make(std::uint64_t sequence) {
  const auto m = static_cast<std::uint32_t>(scenario_.elements);
  const auto k = static_cast<std::uint32_t>(scenario_.snapshots);
  const auto c = static_cast<std::uint32_t>(scenario_.cells);
  std::vector<T> x;
  snapshots<T>(sequence, x);
  replay::FrameHeader header{.sequence = sequence, .capture_time_ns = capture_time_ns(sequence)};
  if (scenario_.payload == config::ScenarioPayload::snapshots) {
    header.kind = replay::PayloadKind::snapshots;
    header.rows = m;
    header.cols = k;
    header.count = c;
    return replay::make_frame<T>(header, std::span<const T>(x));
  }
  header.kind = replay::PayloadKind::covariance;
  header.rows = header.cols = m;
  header.count = c;
  std::vector<T> r(std::size_t(m) * m * c);
  linalg::sample_covariance<T>(*exec_, linalg::Batch<const T>::packed(x.data(), m, k, c),
                               linalg::Batch<T>::packed(r.data(), m, m, c));
  return replay::make_frame<T>(header, std::span<const T>(r));
}

replay::Frame ScenarioGenerator::frame(std::uint64_t sequence) {
  return scenario_.element_type == config::SampleType::cf32 ? make<std::complex<float>>(sequence)
                                                            : make<std::complex<double>>(sequence);
}

}  // namespace covflow::stages

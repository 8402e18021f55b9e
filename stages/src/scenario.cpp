#include "covflow/stages/scenario.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include <fmt/format.h>

#include "covflow/linalg/covariance.hpp"
#include "covflow/linalg/exec.hpp"
#include "covflow/linalg/solve.hpp"

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
  // Uniform in (0, 1]: 53 random bits, never 0 (its logarithm is taken).
  double positive_uniform() { return 1.0 - double((*this)() >> 11) * 0x1.0p-53; }
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

// Gamma(shape, 1) for shape ≥ 1: Marsaglia and Tsang, "A simple method for generating gamma
// variables", ACM TOMS 26(3), 2000 — a transformed normal, accepted with probability above 0.95.
double gamma_variate(Xoshiro256& rng, double shape) {
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = std::numbers::sqrt2 * rng.complex_normal().real();  // N(0, 1)
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    if (std::log(rng.positive_uniform()) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

std::uint64_t stream_key(std::int64_t seed, std::uint64_t sequence, std::uint64_t cell) {
  std::uint64_t state = std::uint64_t(seed);
  std::uint64_t key = splitmix64(state);
  state = key ^ sequence;
  key = splitmix64(state);
  state = key ^ cell;
  return splitmix64(state);
}

// R = B·Bᴴ/P + I through one herk (sample_covariance with a loading of 1), B's P columns
// √(P·p_k)·a(u_k): the point emitters as P "snapshots" whose sample covariance is Σ_k p_k a_k a_kᴴ.
std::vector<std::complex<double>> covariance_of(const config::ScenarioConfig& scenario, linalg::Exec& exec) {
  const auto n = static_cast<std::size_t>(scenario.elements);
  std::vector<std::complex<double>> r(n * n);
  const auto emitters = point_emitters(scenario);
  if (emitters.empty()) {
    for (std::size_t i = 0; i < n; ++i) r[i + i * n] = 1.0;
    return r;
  }
  const auto count = static_cast<std::int64_t>(emitters.size());
  std::vector<std::complex<double>> columns;
  columns.reserve(n * emitters.size());
  for (const PointEmitter& e : emitters) {
    const double amplitude = std::sqrt(double(count) * e.power);
    for (const auto& v : steering_vector(scenario, e.azimuth_deg, e.elevation_deg)) columns.push_back(amplitude * v);
  }
  linalg::sample_covariance<linalg::cf64>(exec, linalg::Batch<const linalg::cf64>::packed(columns.data(), scenario.elements, count, 1),
                                          linalg::Batch<linalg::cf64>::packed(r.data(), scenario.elements, scenario.elements, 1),
                                          {.diagonal_loading = 1.0});
  return r;
}

}  // namespace

std::vector<PointEmitter> clutter_scatterers(const config::ClutterSector& sector) {
  // A quotient within 10⁻⁹ of an integer is that integer: 2.1° by 0.3° (7.000000000000001 in
  // floating point) is 7 slices, not 8.
  const double slices = std::max(1.0, std::ceil(sector.width_deg / sector.step_deg - 1e-9));
  const double slice = sector.width_deg / slices;
  const double power = std::pow(10.0, sector.power_db / 10.0) / slices;
  std::vector<PointEmitter> out;
  for (double i = 0; i < slices; ++i)
    out.push_back({sector.center_deg - 0.5 * sector.width_deg + (i + 0.5) * slice, sector.elevation_deg, power});
  return out;
}

std::vector<PointEmitter> point_emitters(const config::ScenarioConfig& scenario) {
  std::vector<PointEmitter> out;
  for (const auto* list : {&scenario.sources, &scenario.jammers})
    for (const config::Emitter& e : *list) out.push_back({e.angle_deg, e.elevation_deg, std::pow(10.0, e.power_db / 10.0)});
  for (const config::ClutterSector& sector : scenario.clutter)
    for (const PointEmitter& scatterer : clutter_scatterers(sector)) out.push_back(scatterer);
  return out;
}

std::vector<config::ElementPosition> element_positions(const config::ScenarioConfig& scenario) {
  std::vector<config::ElementPosition> out;
  switch (scenario.geometry) {
    case config::ArrayGeometry::linear:
      for (std::int64_t m = 0; m < scenario.elements; ++m) out.push_back({0.0, double(m) * scenario.spacing_wavelengths, 0.0});
      break;
    case config::ArrayGeometry::planar:
      for (std::int64_t row = 0; row < scenario.planar.rows; ++row)
        for (std::int64_t col = 0; col < scenario.planar.cols; ++col)
          out.push_back({0.0, double(col) * scenario.planar.col_spacing_wavelengths,
                         double(row) * scenario.planar.row_spacing_wavelengths});
      break;
    case config::ArrayGeometry::positions:
      out = scenario.positions;
      break;
  }
  return out;
}

std::vector<std::complex<double>> steering_vector(std::int64_t elements, double spacing_wavelengths, double angle_deg,
                                                  double elevation_deg) {
  // cos 0 is exactly 1: at elevation 0 this is, bit for bit, the formula without elevation.
  const double phase_step = 2.0 * std::numbers::pi * spacing_wavelengths * std::sin(angle_deg * std::numbers::pi / 180.0) *
                            std::cos(elevation_deg * std::numbers::pi / 180.0);
  std::vector<std::complex<double>> a(static_cast<std::size_t>(elements));
  for (std::int64_t m = 0; m < elements; ++m) a[std::size_t(m)] = std::polar(1.0, phase_step * double(m));
  return a;
}

std::vector<std::complex<double>> steering_vector(std::span<const config::ElementPosition> positions, double azimuth_deg,
                                                  double elevation_deg) {
  const double azimuth = azimuth_deg * std::numbers::pi / 180.0, elevation = elevation_deg * std::numbers::pi / 180.0;
  // 2π·u: the phase per wavelength of displacement along each axis.
  const double kx = 2.0 * std::numbers::pi * std::cos(elevation) * std::cos(azimuth);
  const double ky = 2.0 * std::numbers::pi * std::cos(elevation) * std::sin(azimuth);
  const double kz = 2.0 * std::numbers::pi * std::sin(elevation);
  std::vector<std::complex<double>> a;
  if (positions.empty()) return a;
  const config::ElementPosition& reference = positions.front();
  a.reserve(positions.size());
  for (const config::ElementPosition& p : positions)
    a.push_back(std::polar(1.0, kx * (p.x - reference.x) + ky * (p.y - reference.y) + kz * (p.z - reference.z)));
  return a;
}

std::vector<std::complex<double>> steering_vector(const config::ScenarioConfig& scenario, double azimuth_deg,
                                                  double elevation_deg) {
  if (scenario.geometry == config::ArrayGeometry::linear)
    return steering_vector(scenario.elements, scenario.spacing_wavelengths, azimuth_deg, elevation_deg);
  return steering_vector(element_positions(scenario), azimuth_deg, elevation_deg);
}

std::vector<std::complex<double>> model_covariance(const config::ScenarioConfig& scenario) {
  linalg::Exec exec = linalg::Exec::cpu(1);
  return covariance_of(scenario, exec);
}

ScenarioGenerator::ScenarioGenerator(const config::ScenarioConfig& scenario, std::int64_t start_time_ns, unsigned threads)
    : scenario_(scenario), start_time_ns_(start_time_ns), exec_(std::make_unique<linalg::Exec>(linalg::Exec::cpu(threads))) {
  if (scenario.elements < 1 || scenario.snapshots < 1 || scenario.cells < 1 || !(scenario.frame_rate_hz > 0))
    throw std::invalid_argument(fmt::format("scenario: impossible shape {} elements × {} snapshots × {} cells at {} Hz",
                                            scenario.elements, scenario.snapshots, scenario.cells, scenario.frame_rate_hz));
  const auto listed = static_cast<std::int64_t>(element_positions(scenario).size());
  if (listed != scenario.elements)
    throw std::invalid_argument(fmt::format("scenario: {} elements, but the {} array has {}", scenario.elements,
                                            config::name(scenario.geometry), listed));
  for (const config::ClutterSector& sector : scenario.clutter)
    if (!(sector.width_deg > 0) || !(sector.step_deg > 0) || std::abs(sector.center_deg) + 0.5 * sector.width_deg > 90.0)
      throw std::invalid_argument(fmt::format("scenario: a clutter sector of width {}° (step {}°) centred at {}° does "
                                              "not lie within [-90°, 90°]",
                                              sector.width_deg, sector.step_deg, sector.center_deg));
  const bool covariance_frames = scenario.payload == config::ScenarioPayload::covariance;
  if (scenario.covariance != config::ScenarioCovariance::sample && !covariance_frames)
    throw std::invalid_argument(fmt::format("scenario: covariance {} makes covariance frames, not {}",
                                            config::name(scenario.covariance), config::name(scenario.payload)));
  if (covariance_frames && scenario.covariance == config::ScenarioCovariance::model) {
    model_ = covariance_of(scenario, *exec_);
    return;
  }
  if (covariance_frames && scenario.covariance == config::ScenarioCovariance::wishart) {
    model_factor_ = covariance_of(scenario, *exec_);
    const auto n = static_cast<std::size_t>(scenario.elements);
    std::vector<int> info(1);
    linalg::potrf<linalg::cf64>(*exec_, linalg::Uplo::lower,
                                linalg::Batch<linalg::cf64>::packed(model_factor_.data(), scenario.elements, scenario.elements, 1),
                                info);
    if (info[0] != 0)  // R ≥ I: only a non-finite R gets here
      throw std::invalid_argument(fmt::format("scenario: the model covariance has no Cholesky factor (info {})", info[0]));
    for (std::size_t j = 1; j < n; ++j) std::fill_n(model_factor_.begin() + std::ptrdiff_t(j * n), j, 0.0);
    return;
  }
  for (const PointEmitter& e : point_emitters(scenario)) {
    const double amplitude = std::sqrt(e.power);
    for (const auto& v : steering_vector(scenario, e.azimuth_deg, e.elevation_deg)) scaled_steering_.push_back(amplitude * v);
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
    std::vector<std::complex<double>> waveform(emitters), sample(m_count);
    T* x = out.data() + cell * m_count * k_count;
    for (std::size_t t = 0; t < k_count; ++t) {
      for (auto& s : waveform) s = rng.complex_normal();
      for (auto& v : sample) v = rng.complex_normal();
      // Emitter by emitter, each a contiguous steering vector; every element still sums its
      // noise first and then the emitters in order.
      for (std::size_t k = 0; k < emitters; ++k) {
        const std::complex<double>* a = scaled_steering_.data() + k * m_count;
        for (std::size_t m = 0; m < m_count; ++m) sample[m] += a[m] * waveform[k];
      }
      for (std::size_t m = 0; m < m_count; ++m) x[m + t * m_count] = T(sample[m]);
    }
  });
}

// Per cell, an N × C matrix Y with Y·Yᴴ/C distributed as the sample covariance of K snapshots
// drawn from CN(0, R), R = L·Lᴴ; sample_covariance makes Y·Yᴴ/C from it.
//   K < N: Y = L·G, G an N × K matrix of CN(0, 1) entries (C = K): the K snapshots themselves.
//   K ≥ N: Y = L·T·√(N/K) (C = N), T the Bartlett factor of the white Wishart matrix G·Gᴴ of K
//          snapshots — lower triangular, T_jj = √Gamma(K − j, 1), T_ij ~ CN(0, 1) below the
//          diagonal, all independent (a complex Gaussian N × K matrix's LQ factorization G = T·Q
//          has this T, and G·Gᴴ = T·Tᴴ); N(N+1)/2 draws instead of N·K, and N³/6 products
//          instead of N²·K/2.
// One column of G or T at a time, accumulated into Y as L's columns times its entries.
template <class T>
void ScenarioGenerator::wishart_factors(std::uint64_t sequence, std::vector<T>& out) {
  const auto n = static_cast<std::size_t>(scenario_.elements);
  const auto k = static_cast<std::size_t>(scenario_.snapshots);
  const bool bartlett = k >= n;
  const std::size_t columns = bartlett ? n : k;
  const double scale = bartlett ? std::sqrt(double(n) / double(k)) : 1.0;
  out.resize(n * columns * static_cast<std::size_t>(scenario_.cells));
  exec_->pool().parallel_for(static_cast<std::size_t>(scenario_.cells), [&](std::size_t cell, unsigned) {
    Xoshiro256 rng(stream_key(scenario_.seed, sequence, cell));
    std::vector<std::complex<double>> y(n);
    T* block = out.data() + cell * n * columns;
    for (std::size_t j = 0; j < columns; ++j) {
      std::fill(y.begin(), y.end(), std::complex<double>(0.0));
      for (std::size_t i = bartlett ? j : 0; i < n; ++i) {
        const std::complex<double> entry =
            bartlett && i == j ? std::complex<double>(std::sqrt(gamma_variate(rng, double(k - j)))) : rng.complex_normal();
        const std::complex<double>* l = model_factor_.data() + i * n;  // column i of L, zero above row i
        for (std::size_t r = i; r < n; ++r) y[r] += l[r] * entry;
      }
      for (std::size_t r = 0; r < n; ++r) block[r + j * n] = T(scale * y[r]);
    }
  });
}

template <class T>
replay::Frame ScenarioGenerator::make(std::uint64_t sequence) {
  const auto m = static_cast<std::uint32_t>(scenario_.elements);
  const auto k = static_cast<std::uint32_t>(scenario_.snapshots);
  const auto c = static_cast<std::uint32_t>(scenario_.cells);
  replay::FrameHeader header{.sequence = sequence, .capture_time_ns = capture_time_ns(sequence)};
  std::vector<T> x;
  if (scenario_.payload == config::ScenarioPayload::snapshots) {
    snapshots<T>(sequence, x);
    header.kind = replay::PayloadKind::snapshots;
    header.rows = m;
    header.cols = k;
    header.count = c;
    return replay::make_frame<T>(header, std::span<const T>(x));
  }
  header.kind = replay::PayloadKind::covariance;
  header.rows = header.cols = m;
  header.count = c;
  const std::size_t matrix = std::size_t(m) * m;
  std::vector<T> r(matrix * c);
  if (!model_.empty()) {
    for (std::size_t i = 0; i < matrix; ++i) r[i] = T(model_[i]);
    for (std::size_t cell = 1; cell < c; ++cell) std::copy_n(r.begin(), matrix, r.begin() + std::ptrdiff_t(cell * matrix));
    return replay::make_frame<T>(header, std::span<const T>(r));
  }
  std::int64_t columns = k;
  if (!model_factor_.empty()) {
    wishart_factors<T>(sequence, x);
    columns = std::min(k, m);
  } else {
    snapshots<T>(sequence, x);
  }
  linalg::sample_covariance<T>(*exec_, linalg::Batch<const T>::packed(x.data(), m, columns, c),
                               linalg::Batch<T>::packed(r.data(), m, m, c));
  return replay::make_frame<T>(header, std::span<const T>(r));
}

replay::Frame ScenarioGenerator::frame(std::uint64_t sequence) {
  return scenario_.element_type == config::SampleType::cf32 ? make<std::complex<float>>(sequence)
                                                            : make<std::complex<double>>(sequence);
}

}  // namespace covflow::stages

// The subspace stage (docs/stages.md, "subspace"): the eigen-pairs of each cell's covariance (heev
// of the estimate, or gesvj of the snapshots), the source count by MDL or AIC, the MUSIC
// pseudo-spectrum through FFTs of the noise eigenvectors, and the refined DOAs. This file holds the
// host logic and the CPU path (FFTW); processing_cuda.cu holds the device path, which follows the
// same steps with the same formulas (covflow/stages/music_math.hpp), and subspace_svd_cuda.cu the
// svd method's conversion to heev's layout.
//
// MUSIC through FFTs (Schmidt, "Multiple emitter location and signal parameter estimation", IEEE
// Trans. AP 34(3), 1986, for the spectrum itself): with the noise eigenvectors e_k zero-padded to
// L ≥ 2N−1 points,
//   1. F_k = FFT_L(e_k): F_k[l] = Σ_m e_k[m]·exp(−j2π·l·m/L), so |F_k[l]|² = |e_kᴴ a(u = l/L)|²;
//   2. Q_l = Σ_k |F_k[l]|²: the null spectrum Q(u) = a(u)ᴴ E_n E_nᴴ a(u) sampled at u = l/L;
//   3. the real-to-complex FFT of Q_l gives L·conj(r_s), r_s the summed autocorrelation of the e_k,
//      s = 0 … N−1 (L ≥ 2N−1 keeps the lags ±s apart: no circular aliasing);
//   4. Q at any u, here the angle grid's u_i = d·sin θ_i, is the degree-(N−1) trigonometric series
//      in r_s (music::null_spectrum), exact up to rounding — no interpolation error, because the
//      grid in θ is not uniform in u and no FFT length would put it on bins.
// P(θ) = 1/Q; the spectrum is written as 10·log10 P(θ) (dB, unnormalised: P ≥ 1/N since |a_m| = 1).
//
// Why the svd method: with X the N × K snapshots of a cell, R̂ = X·Xᴴ/K has eigenvalues σ_i²/K and
// eigenvectors the left singular vectors of X. A backward-stable eigensolver on R̂, formed in the
// frame's precision ε, leaves each eigenvalue with an absolute error of order ε·λ_max (Weyl), a
// relative one of ε·λ_max/λ_i; the SVD of X leaves each σ_i with an error of order ε·σ_max, so
// λ_i = σ_i²/K with a relative error of order ε·√(λ_max/λ_i) — half the digits lost (Golub & Van
// Loan, "Matrix Computations", 4th ed., §8.1.2 and §8.6.1). With a 60 dB jammer on 16 elements,
// λ_max/λ_noise ≈ 1.6·10⁷: in single precision the noise eigenvalues from heev are wrong by about
// their own size or more, those from the SVD by 10⁻⁴ of it at most (tests/stages measures both
// against double precision).
#include "covflow/stages/subspace_stage.hpp"

#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <numbers>
#include <stdexcept>

#include "covflow/linalg/heev.hpp"
#include "covflow/linalg/svd.hpp"
#include "covflow/stages/covariance_stage.hpp"
#include "covflow/stages/music_math.hpp"
#include "frame_checks.hpp"
#include "processing_device.hpp"
#include "subspace_svd_device.hpp"

#if COVFLOW_HAS_CUDA
#include <cuda_runtime.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::stages {

using linalg::cf32;
using linalg::cf64;

AngleGridPoints angle_grid_points(const config::AngleGrid& grid) {
  if (!(grid.step_deg > 0.0) || !(grid.max_deg >= grid.min_deg) || grid.min_deg < -90.0 || grid.max_deg > 90.0)
    throw std::invalid_argument("subspace stage: the angle grid needs -90 <= min_deg <= max_deg <= 90 and step_deg > 0");
  const double span = (grid.max_deg - grid.min_deg) / grid.step_deg;
  if (span >= double(std::numeric_limits<std::uint32_t>::max() - 1))
    throw std::invalid_argument("subspace stage: the angle grid has too many points");
  return {grid.min_deg, grid.step_deg, static_cast<std::uint32_t>(std::floor(span + 1e-9)) + 1};
}

namespace {

// FFTW's planner is not thread-safe (execution is): lanes may be prepared from several threads.
std::mutex& fftw_planner_mutex() {
  static std::mutex mutex;
  return mutex;
}

template <class R> struct Fftw;
template <> struct Fftw<double> {
  using plan = fftw_plan;
  using complex = fftw_complex;
  static void* allocate(std::size_t bytes) { return fftw_malloc(bytes); }
  static void release(void* p) { fftw_free(p); }
  static plan forward_many(int length, int howmany, complex* buffer) {
    int dims[] = {length};
    return fftw_plan_many_dft(1, dims, howmany, buffer, nullptr, 1, length, buffer, nullptr, 1, length, FFTW_FORWARD,
                              FFTW_ESTIMATE);
  }
  static plan real_to_complex(int length, double* in, complex* out) {
    return fftw_plan_dft_r2c_1d(length, in, out, FFTW_ESTIMATE);
  }
  static void execute(plan p, complex* io) { fftw_execute_dft(p, io, io); }
  static void execute(plan p, double* in, complex* out) { fftw_execute_dft_r2c(p, in, out); }
  static void destroy(plan p) { fftw_destroy_plan(p); }
};
template <> struct Fftw<float> {
  using plan = fftwf_plan;
  using complex = fftwf_complex;
  static void* allocate(std::size_t bytes) { return fftwf_malloc(bytes); }
  static void release(void* p) { fftwf_free(p); }
  static plan forward_many(int length, int howmany, complex* buffer) {
    int dims[] = {length};
    return fftwf_plan_many_dft(1, dims, howmany, buffer, nullptr, 1, length, buffer, nullptr, 1, length,
                               FFTW_FORWARD, FFTW_ESTIMATE);
  }
  static plan real_to_complex(int length, float* in, complex* out) {
    return fftwf_plan_dft_r2c_1d(length, in, out, FFTW_ESTIMATE);
  }
  static void execute(plan p, complex* io) { fftwf_execute_dft(p, io, io); }
  static void execute(plan p, float* in, complex* out) { fftwf_execute_dft_r2c(p, in, out); }
  static void destroy(plan p) { fftwf_destroy_plan(p); }
};

// The CPU lane's FFT plans and per-worker buffers (all allocated here, in prepare()).
template <class R>
class CpuMusic {
 public:
  using F = Fftw<R>;
  using C = typename F::complex;
  struct Scratch {
    C* padded = nullptr;   // N columns × L
    R* samples = nullptr;  // L: Q at u = l/L
    C* coeffs = nullptr;   // L/2 + 1
    double* q = nullptr;   // grid points
    std::vector<R> re, im; // r_0 … r_{N−1}
  };

  CpuMusic(int n, std::size_t points, unsigned workers) : n_(n), length_(music::autocorrelation_fft_length(n)) {
    scratch_.resize(workers);
    for (auto& s : scratch_) {
      s.padded = static_cast<C*>(allocate(sizeof(C) * std::size_t(n) * length_));
      s.samples = static_cast<R*>(allocate(sizeof(R) * length_));
      s.coeffs = static_cast<C*>(allocate(sizeof(C) * (length_ / 2 + 1)));
      s.q = static_cast<double*>(allocate(sizeof(double) * std::max<std::size_t>(points, 1)));
      s.re.assign(n, R(0));
      s.im.assign(n, R(0));
    }
    std::lock_guard lock(fftw_planner_mutex());
    forward_ = F::forward_many(length_, n, scratch_[0].padded);
    r2c_ = F::real_to_complex(length_, scratch_[0].samples, scratch_[0].coeffs);
    if (forward_ == nullptr || r2c_ == nullptr) throw std::runtime_error("subspace stage: FFTW could not plan");
  }
  ~CpuMusic() {
    {
      std::lock_guard lock(fftw_planner_mutex());
      if (forward_ != nullptr) F::destroy(forward_);
      if (r2c_ != nullptr) F::destroy(r2c_);
    }
    for (auto& s : scratch_)
      for (void* p : {static_cast<void*>(s.padded), static_cast<void*>(s.samples), static_cast<void*>(s.coeffs),
                      static_cast<void*>(s.q)})
        if (p != nullptr) F::release(p);
  }
  CpuMusic(const CpuMusic&) = delete;
  CpuMusic& operator=(const CpuMusic&) = delete;

  int length() const { return length_; }
  Scratch& scratch(unsigned worker) { return scratch_[worker]; }

  // Steps 1–3 of the file comment for one cell: r_s (s < N) of the first `noise` columns of
  // `vectors` (N × N, column-major) into s.re / s.im.
  template <class T>
  void autocorrelation(Scratch& s, const T* vectors, int noise) const {
    const int n = n_, length = length_;
    for (int k = 0; k < noise; ++k) {
      C* column = s.padded + std::size_t(k) * length;
      for (int m = 0; m < length; ++m) {
        const T v = m < n ? vectors[std::size_t(k) * n + m] : T(0);
        column[m][0] = v.real();
        column[m][1] = v.imag();
      }
    }
    // The plan transforms all N columns; the ones past `noise` hold stale data and are not read.
    F::execute(forward_, s.padded);
    for (int l = 0; l < length; ++l) {
      R sum = 0;
      for (int k = 0; k < noise; ++k) {
        const C& f = s.padded[std::size_t(k) * length + l];
        sum += f[0] * f[0] + f[1] * f[1];
      }
      s.samples[l] = sum;
    }
    F::execute(r2c_, s.samples, s.coeffs);
    for (int lag = 0; lag < n; ++lag) {  // r_s = conj(FFT(Q)[s]) / L
      s.re[lag] = s.coeffs[lag][0] / R(length);
      s.im[lag] = -s.coeffs[lag][1] / R(length);
    }
  }

 private:
  static void* allocate(std::size_t bytes) {
    void* p = F::allocate(bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  int n_;
  int length_;
  std::vector<Scratch> scratch_;
  typename F::plan forward_ = nullptr;
  typename F::plan r2c_ = nullptr;
};

struct Peak {
  double q;
  std::uint32_t index;
  bool operator<(const Peak& other) const { return q < other.q || (q == other.q && index < other.index); }
};

// The `wanted` deepest interior local minima of q (the highest peaks of P = 1/q), in (q, index)
// order — the same selection the device path makes.
std::size_t deepest_minima(const double* q, std::uint32_t points, std::size_t wanted, Peak* out) {
  std::size_t found = 0;
  if (wanted == 0) return 0;
  for (std::uint32_t i = 1; i + 1 < points; ++i) {
    if (!(q[i] < q[i - 1] && q[i] <= q[i + 1])) continue;
    const Peak candidate{q[i], i};
    if (found == wanted && !(candidate < out[found - 1])) continue;
    std::size_t at = found < wanted ? found++ : found - 1;
    while (at > 0 && candidate < out[at - 1]) {
      out[at] = out[at - 1];
      --at;
    }
    out[at] = candidate;
  }
  return found;
}

constexpr std::size_t kDescriptorBytes = 256;

#if COVFLOW_HAS_CUDA
// A descriptor at the start of the slot's host scratch, written by run() and read by collect()
// (which clears `frame`, so that a slot's stale descriptor is never unpacked twice).
struct ResultCopy {
  const pipeline::FrameSlot* frame;
  std::uint64_t sequence;
  std::uint32_t cells, channels, max_sources, points;
  detail::ResultLayout layout;
};
static_assert(sizeof(ResultCopy) <= kDescriptorBytes);

void unpack_results(const ResultCopy& copy, const std::byte* staging, pipeline::FrameResults& results) {
  const std::size_t cells = copy.cells;
  std::memcpy(results.source_count.data(), staging + copy.layout.source_count, 4 * cells);
  std::memcpy(results.cell_status.data(), staging + copy.layout.cell_status, 4 * cells);
  std::memcpy(results.doa_deg.data(), staging + copy.layout.doa, 4 * cells * copy.max_sources);
  std::memcpy(results.eigenvalues.data(), staging + copy.layout.eigenvalues, 4 * cells * copy.channels);
  if (copy.points > 0) std::memcpy(results.spectrum_db.data(), staging + copy.layout.spectrum, 4 * cells * copy.points);
  results.cells = copy.cells;
}
#endif

}  // namespace

struct SubspaceStage::Lane {
  pipeline::FrameShape shape;
  bool cuda = false;
  bool keep_spectrum = false;
  std::vector<double> grid_u;  // u_i = d·sin θ_i
  std::vector<double> omega_re, omega_im;  // exp(−j2π·u_i)
  std::unique_ptr<CpuMusic<float>> cpu32;
  std::unique_ptr<CpuMusic<double>> cpu64;
  // Method svd, on a CPU lane: the snapshots copied for gesvj to overwrite (bytes of the frame's
  // element type; cf64 units keep them aligned for either), the singular values (double units
  // hold either real type) and gesvj's per-cell info.
  std::vector<cf64> svd_snapshots;
  std::vector<double> svd_values;
  std::vector<linalg::SvdInfo> svd_info;
#if COVFLOW_HAS_CUDA
  std::unique_ptr<detail::SubspaceDeviceLane> device;
  // The same on the device, for a CUDA lane.
  linalg::cuda::DeviceBuffer<std::byte> device_svd_snapshots, device_svd_values;
  linalg::cuda::DeviceBuffer<linalg::SvdInfo> device_svd_info;
#endif
};

SubspaceStage::SubspaceStage(const SubspaceSettings& settings)
    : settings_(settings), grid_(angle_grid_points(settings.config.angle_grid)) {
  if (!(settings_.spacing_wavelengths > 0.0) || !std::isfinite(settings_.spacing_wavelengths))
    throw std::invalid_argument("subspace stage: the element spacing must be positive");
  if (!(settings_.nominal_snapshots >= 1.0))
    throw std::invalid_argument("subspace stage: the nominal snapshot count must be at least 1");
  if (!(settings_.diagonal_loading >= 0.0) || !std::isfinite(settings_.diagonal_loading))
    throw std::invalid_argument("subspace stage: diagonal loading must be finite and non-negative");
}

SubspaceStage::~SubspaceStage() = default;

SubspaceStage::Lane& SubspaceStage::lane(const linalg::Exec& exec) const { return lanes_.get(exec, "subspace stage"); }

pipeline::SlotNeeds SubspaceStage::slot_needs(const pipeline::FrameShape& shape) const {
  const std::size_t points = shape.spectrum_points > 0 ? grid_.points : 0;
  return {.host_scratch_bytes =
              kDescriptorBytes + detail::ResultLayout::of(shape.cells, shape.channels, shape.max_sources, points).bytes,
          .device_scratch_bytes = 0};
}

void SubspaceStage::prepare(const pipeline::FrameShape& shape, linalg::Exec& exec) {
  if (shape.element_type != replay::ElementType::cf32 && shape.element_type != replay::ElementType::cf64)
    throw std::invalid_argument("subspace stage: frames must hold cf32 or cf64 samples");
  if (shape.channels < 2) throw std::invalid_argument("subspace stage: the array needs at least 2 elements");
  if (shape.max_sources > 64) throw std::invalid_argument("subspace stage: at most 64 DOAs per cell are kept (max_sources)");
  if (shape.spectrum_points != 0 && shape.spectrum_points != grid_.points)
    throw std::invalid_argument("subspace stage: the frame shape keeps " + std::to_string(shape.spectrum_points) +
                                " spectrum points but the angle grid has " + std::to_string(grid_.points));
  auto state = std::make_unique<Lane>();
  state->shape = shape;
  state->cuda = exec.is_cuda();
  state->keep_spectrum = shape.spectrum_points > 0;
  const std::size_t points = grid_.points;
  state->grid_u.resize(points);
  state->omega_re.resize(points);
  state->omega_im.resize(points);
  for (std::size_t i = 0; i < points; ++i) {
    const double u = music::spatial_frequency(grid_.angle_deg(static_cast<std::uint32_t>(i)), settings_.spacing_wavelengths);
    state->grid_u[i] = u;
    state->omega_re[i] = std::cos(-2.0 * std::numbers::pi * u);
    state->omega_im[i] = std::sin(-2.0 * std::numbers::pi * u);
  }
  const int n = static_cast<int>(shape.channels);
  const bool single = shape.element_type == replay::ElementType::cf32;
  if (settings_.config.method == config::SubspaceMethod::svd) {
    // gesvj's U holds min(N, K) columns: with K < N part of the noise subspace would be missing.
    if (shape.snapshots < shape.channels)
      throw std::invalid_argument(
          "subspace stage: method svd (pipeline.stages.subspace.method) decomposes snapshot frames with at least as "
          "many snapshots as channels; the frame shape has " +
          std::to_string(shape.snapshots) + " snapshots (0: covariance frames) for " + std::to_string(shape.channels) +
          " channels");
    const linalg::SvdOptions options{.u = true, .v = false};
    exec.workspace().reserve(single ? linalg::gesvj_workspace<cf32>(exec, n, shape.snapshots, shape.cells, options)
                                    : linalg::gesvj_workspace<cf64>(exec, n, shape.snapshots, shape.cells, options));
    const std::size_t snapshot_bytes = shape.max_payload_bytes();
    const std::size_t value_count = std::size_t(n) * shape.cells;
    if (exec.is_cuda()) {
#if COVFLOW_HAS_CUDA
      state->device_svd_snapshots = linalg::cuda::DeviceBuffer<std::byte>(snapshot_bytes);
      state->device_svd_values = linalg::cuda::DeviceBuffer<std::byte>(value_count * (single ? 4 : 8));
      state->device_svd_info = linalg::cuda::DeviceBuffer<linalg::SvdInfo>(shape.cells);
#endif
    } else {
      state->svd_snapshots.resize((snapshot_bytes + sizeof(cf64) - 1) / sizeof(cf64));
      state->svd_values.resize(value_count);
      state->svd_info.resize(shape.cells);
    }
  } else {
    exec.workspace().reserve(single ? linalg::heev_workspace<cf32>(exec, n, shape.cells)
                                    : linalg::heev_workspace<cf64>(exec, n, shape.cells));
  }
  if (state->cuda) {
#if COVFLOW_HAS_CUDA
    detail::SubspaceDeviceParams params;
    params.type = shape.element_type;
    params.channels = n;
    params.max_cells = static_cast<int>(shape.cells);
    params.max_sources = static_cast<int>(shape.max_sources);
    params.keep_spectrum = state->keep_spectrum;
    params.criterion = settings_.config.source_count == config::SourceCountRule::aic ? music::Criterion::aic
                                                                                     : music::Criterion::mdl;
    params.spacing_wavelengths = settings_.spacing_wavelengths;
    params.grid_u = state->grid_u;
    state->device = detail::make_subspace_device_lane(exec.cuda_context(), params);
#endif
  } else if (single) {
    state->cpu32 = std::make_unique<CpuMusic<float>>(n, points, exec.pool().size());
  } else {
    state->cpu64 = std::make_unique<CpuMusic<double>>(n, points, exec.pool().size());
  }
  lanes_.set(exec, std::move(state));
}

namespace {

void require_results(const pipeline::FrameResults& results, const pipeline::FrameShape& shape, std::size_t cells) {
  if (results.source_count.size() < cells || results.cell_status.size() < cells ||
      results.doa_deg.size() < cells * shape.max_sources || results.eigenvalues.size() < cells * shape.channels ||
      results.spectrum_db.size() < cells * shape.spectrum_points)
    throw std::logic_error("subspace stage: the slot's results are not reserved for the frame shape");
}

// Method svd on a CPU lane: from gesvj's output (σ descending, U's columns in the same order) to
// heev's layout, in place — eigenvalue j = σ²_{N−1−j}/K + δ ascending, column j of U the
// eigenvector of eigenvalue j — and gesvj's status as the cell's info (subspace_svd_cuda.cu does the
// same on the device).
template <class T>
void svd_to_eigen_cpu(linalg::ThreadPool& pool, int n, std::uint32_t cells, double snapshots, double loading,
                      const linalg::real_t<T>* singular_values, const linalg::SvdInfo* svd_info,
                      linalg::real_t<T>* eigenvalues, T* vectors, int* info) {
  using R = linalg::real_t<T>;
  pool.parallel_for(cells, [&](std::size_t cell, unsigned) {
    T* u = vectors + cell * std::size_t(n) * n;
    for (int j = 0; j < n / 2; ++j)
      std::swap_ranges(u + std::size_t(j) * n, u + std::size_t(j + 1) * n, u + std::size_t(n - 1 - j) * n);
    for (int j = 0; j < n; ++j) {
      const double sigma = singular_values[cell * n + (n - 1 - j)];
      eigenvalues[cell * n + j] = static_cast<R>(sigma * sigma / snapshots + loading);
    }
    info[cell] = svd_info[cell].status;
  });
}

// Everything after the decomposition for the cells of a CPU lane, one cell per pool task.
// What music_cpu needs of the lane.
struct CpuGrid {
  const pipeline::FrameShape& shape;
  bool keep_spectrum;
  const std::vector<double>& grid_u;
  const std::vector<double>& omega_re;
  const std::vector<double>& omega_im;
};

template <class T>
void music_cpu(linalg::ThreadPool& pool, CpuMusic<linalg::real_t<T>>& fft, const CpuGrid& state,
               const AngleGridPoints& grid, const T* vectors, const linalg::real_t<T>* values, const int* info,
               std::uint32_t cells, double snapshots, music::Criterion criterion, double spacing,
               pipeline::FrameResults& results) {
  using R = linalg::real_t<T>;
  const int n = static_cast<int>(state.shape.channels);
  const std::size_t max_sources = state.shape.max_sources;
  const std::uint32_t points = grid.points;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  pool.parallel_for(cells, [&](std::size_t cell, unsigned worker) {
    const R* w = values + cell * n;
    for (int k = 0; k < n; ++k) results.eigenvalues[cell * n + k] = static_cast<float>(w[k]);
    float* doa = results.doa_deg.data() + cell * max_sources;
    std::fill(doa, doa + max_sources, nan);
    float* spectrum = state.keep_spectrum ? results.spectrum_db.data() + cell * points : nullptr;
    int status = info[cell];
    const int sources = status == 0 ? music::estimate_source_count(w, n, snapshots, criterion) : -1;
    if (status == 0 && sources < 0) status = linalg::status::non_finite_input;
    results.cell_status[cell] = status;
    results.source_count[cell] = status == 0 ? sources : -1;
    if (status != 0) {
      if (spectrum != nullptr) std::fill(spectrum, spectrum + points, nan);
      return;
    }
    auto& s = fft.scratch(worker);
    const int noise = n - sources;  // ≥ 1: the criteria stop at k = N − 1
    fft.autocorrelation(s, vectors + cell * std::size_t(n) * n, noise);
    const double floor_value = double(noise) * n * std::numeric_limits<R>::epsilon();
    for (std::uint32_t i = 0; i < points; ++i) {
      const double q = std::max(music::null_spectrum(s.re.data(), s.im.data(), n, state.omega_re[i], state.omega_im[i]),
                                floor_value);
      s.q[i] = q;
      if (spectrum != nullptr) spectrum[i] = static_cast<float>(-10.0 * std::log10(q));
    }
    Peak peaks[64];
    const std::size_t wanted = std::min<std::size_t>({std::size_t(sources), max_sources, 64});
    const std::size_t found = deepest_minima(s.q, points, wanted, peaks);
    double angles[64];
    for (std::size_t p = 0; p < found; ++p) {
      const std::uint32_t i = peaks[p].index;
      const double u = music::refine_minimum(s.re.data(), s.im.data(), n, state.grid_u[i - 1], state.grid_u[i],
                                             state.grid_u[i + 1]);
      angles[p] = music::angle_of(u, spacing);
    }
    std::sort(angles, angles + found);
    for (std::size_t p = 0; p < found; ++p) doa[p] = static_cast<float>(angles[p]);
  });
  results.cells = cells;
}

}  // namespace

void SubspaceStage::run(pipeline::FrameSlot& frame, linalg::Exec& exec) {
  constexpr std::string_view stage = "subspace";
  Lane& state = lane(exec);
  const pipeline::FrameShape& shape = state.shape;
  detail::require_fits(stage, frame, shape);
  const bool svd = settings_.config.method == config::SubspaceMethod::svd;
  const bool from_payload = settings_.covariance_from_payload && !svd;
  if (from_payload && frame.header.kind != replay::PayloadKind::covariance)
    throw detail::shape_error(stage, frame, "snapshot frame, but no covariance stage runs before this stage");
  if (svd && frame.header.kind != replay::PayloadKind::snapshots)
    throw detail::shape_error(
        stage, frame, "covariance frame, but method svd (pipeline.stages.subspace.method) decomposes snapshots");
  if (svd && frame.header.cols < frame.header.rows)
    throw detail::shape_error(stage, frame,
                              "method svd (pipeline.stages.subspace.method) needs at least as many snapshots per "
                              "cell as channels");
  const std::uint32_t n = frame.header.rows, cells = frame.header.count;
  require_results(frame.results, shape, cells);
  const std::size_t matrix_elements = std::size_t(n) * n * cells;
  const std::size_t element_bytes = shape.element_bytes();
  // svd: the frame's own K (the estimate it stands for is this frame's: window 1, config rule).
  const double snapshots = svd ? double(frame.header.cols)
                           : settings_.snapshot_counts != nullptr && !from_payload
                               ? settings_.snapshot_counts->effective_snapshots(exec, frame.sequence)
                               : settings_.nominal_snapshots;
  const music::Criterion criterion =
      settings_.config.source_count == config::SourceCountRule::aic ? music::Criterion::aic : music::Criterion::mdl;

  // eig: the covariance (the slot's array, or a covariance frame's payload); svd: the snapshots.
  const bool input_is_payload = from_payload || svd;
  const std::size_t input_bytes = svd ? frame.header.payload_bytes() : matrix_elements * element_bytes;
  const void* input = nullptr;
  void* vectors = nullptr;
  void* values = nullptr;
  int* info = nullptr;
  void* svd_snapshots = nullptr;  // gesvj's A, which it overwrites
  void* svd_values = nullptr;
  linalg::SvdInfo* svd_info = nullptr;
  if (state.cuda) {
    input = detail::device_array<std::byte>(input_is_payload ? frame.device.payload : frame.device.covariance, stage,
                                            input_is_payload ? "payload" : "covariance");
    vectors = detail::device_array<std::byte>(frame.device.eigenvectors, stage, "eigenvectors");
    values = detail::device_array<std::byte>(frame.device.eigenvalues, stage, "eigenvalues");
    info = detail::device_array<int>(frame.device.info, stage, "info");
#if COVFLOW_HAS_CUDA
    svd_snapshots = state.device_svd_snapshots.data();
    svd_values = state.device_svd_values.data();
    svd_info = state.device_svd_info.data();
#endif
  } else {
    input = detail::host_array<std::byte>(input_is_payload ? frame.host.payload : frame.host.covariance, input_bytes,
                                          stage, input_is_payload ? "payload" : "covariance");
    vectors = detail::host_array<std::byte>(frame.host.eigenvectors, matrix_elements * element_bytes, stage, "eigenvectors");
    values = detail::host_array<std::byte>(frame.host.eigenvalues, std::size_t(n) * cells * element_bytes / 2, stage,
                                           "eigenvalues");
    info = detail::host_array<int>(std::span<std::byte>(reinterpret_cast<std::byte*>(frame.host.info.data()),
                                                        frame.host.info.size_bytes()),
                                   cells, stage, "info");
    svd_snapshots = state.svd_snapshots.data();
    svd_values = state.svd_values.data();
    svd_info = state.svd_info.data();
  }

  // Both decompositions overwrite their input: work on a copy — of the covariance into the
  // eigenvectors array (heev), of the snapshots into the lane's buffer (gesvj) — so the covariance
  // and the payload stay as they are for the stages after this one.
  void* work = svd ? svd_snapshots : vectors;
  if (svd && (work == nullptr || input_bytes > shape.max_payload_bytes()))
    throw std::logic_error("subspace stage: the svd buffers are not prepared for this frame");
  if (state.cuda) {
#if COVFLOW_HAS_CUDA
    COVFLOW_CUDA_TRY(
        cudaMemcpyAsync(work, input, input_bytes, cudaMemcpyDeviceToDevice, exec.cuda_context().stream()));
#endif
  } else {
    std::memcpy(work, input, input_bytes);
  }

  auto decompose = [&]<class T>(T*) {
    using R = linalg::real_t<T>;
    if (svd) {
      const std::int64_t k = frame.header.cols;
      linalg::gesvj<T>(exec, linalg::Batch<T>::packed(static_cast<T*>(work), n, k, cells),
                       std::span<R>(static_cast<R*>(svd_values), std::size_t(n) * cells),
                       linalg::Batch<T>::packed(static_cast<T*>(vectors), n, n, cells), linalg::Batch<T>{},
                       std::span<linalg::SvdInfo>(svd_info, cells), linalg::SvdOptions{.u = true, .v = false});
      if (state.cuda) {
#if COVFLOW_HAS_CUDA
        detail::svd_to_eigen(exec.cuda_context(), frame.header.element_type, static_cast<int>(n),
                             static_cast<int>(cells), snapshots, settings_.diagonal_loading, svd_values, svd_info,
                             values, vectors, info);
#endif
      } else {
        svd_to_eigen_cpu<T>(exec.pool(), static_cast<int>(n), cells, snapshots, settings_.diagonal_loading,
                            static_cast<const R*>(svd_values), svd_info, static_cast<R*>(values),
                            static_cast<T*>(vectors), info);
      }
    } else {
      linalg::heev<T>(exec, linalg::Batch<T>::packed(static_cast<T*>(vectors), n, n, cells),
                      std::span<R>(static_cast<R*>(values), std::size_t(n) * cells), std::span<int>(info, cells));
    }
    if (state.cuda) return;
    const CpuGrid cpu_grid{state.shape, state.keep_spectrum, state.grid_u, state.omega_re, state.omega_im};
    if constexpr (std::is_same_v<T, cf32>)
      music_cpu<T>(exec.pool(), *state.cpu32, cpu_grid, grid_, static_cast<const T*>(vectors), static_cast<const R*>(values),
                   info, cells, snapshots, criterion, settings_.spacing_wavelengths, frame.results);
    else
      music_cpu<T>(exec.pool(), *state.cpu64, cpu_grid, grid_, static_cast<const T*>(vectors), static_cast<const R*>(values),
                   info, cells, snapshots, criterion, settings_.spacing_wavelengths, frame.results);
  };
  if (frame.header.element_type == replay::ElementType::cf32) decompose(static_cast<cf32*>(nullptr));
  else decompose(static_cast<cf64*>(nullptr));
  if (!state.cuda) return;

#if COVFLOW_HAS_CUDA
  const std::uint32_t kept_points = state.keep_spectrum ? grid_.points : 0;
  const detail::ResultLayout layout = detail::ResultLayout::of(cells, n, shape.max_sources, kept_points);
  std::span<std::byte> scratch = frame.host.scratch;
  if (scratch.size() < kDescriptorBytes + layout.bytes ||
      reinterpret_cast<std::uintptr_t>(scratch.data()) % alignof(ResultCopy) != 0)
    throw std::logic_error("subspace stage: the slot's host scratch is smaller than slot_needs() asked for, or misaligned");
  new (scratch.data()) ResultCopy{&frame, frame.sequence, cells, n, shape.max_sources, kept_points, layout};
  state.device->run(values, vectors, info, static_cast<int>(cells), snapshots, layout, scratch.data() + kDescriptorBytes);
#endif
}

void SubspaceStage::collect(pipeline::FrameSlot& frame, linalg::Exec& exec) {
#if COVFLOW_HAS_CUDA
  if (!lane(exec).cuda || frame.host.scratch.size() < kDescriptorBytes) return;
  auto* copy = reinterpret_cast<ResultCopy*>(frame.host.scratch.data());
  if (copy->frame != &frame || copy->sequence != frame.sequence) return;  // run() issued nothing for this frame
  unpack_results(*copy, frame.host.scratch.data() + kDescriptorBytes, frame.results);
  copy->frame = nullptr;
#else
  (void)frame;
  (void)exec;
#endif
}

}  // namespace covflow::stages

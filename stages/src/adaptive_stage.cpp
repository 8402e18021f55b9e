// The adaptive stage (docs/stages.md, "adaptive"): sliding-window Cholesky factors kept current by
// linalg::cholupdate (C. Walder, "Rank k Cholesky Up/Down-dating on the GPU: gpucholmodV0.2", 2010,
// Algorithm 1 and §2's downdate), refactored from the window by linalg::potrf, MVDR weights from
// one linalg::potrs per frame with every look of every cell as a right-hand side, SINR and null
// depth against the scenario's model. This file holds the window bookkeeping (the same on CPU and
// CUDA lanes: it depends only on the frames' dimensions, so the host never waits for the device to
// know what to do), the linalg calls of both lanes and the CPU lane's own work; adaptive_cuda.cu
// holds the device kernels, which follow the same formulas (adaptive_math.hpp).
//
// Per frame of K snapshots, with the window holding `filled` of at most W:
//   - a fresh window (first frame, a change of the cell count) or K ≥ W: the newest min(K, W)
//     snapshots replace the window and every factor is computed from it;
//   - otherwise the K new snapshots enter as rank-k updates with V = X/√W, in chunks of
//     update_rank columns, then the max(0, filled + K − W) oldest leave as downdates. Updating
//     first keeps every intermediate matrix at least as well conditioned as the final one, which
//     is what the hyperbolic rotations of a downdate need; the ring has room for W + K columns
//     so the leaving snapshots are still there when they are downdated;
//   - every refactor_every frames the factors are recomputed from the window (bounding the drift
//     that O(n·ε) per rotation accumulates over a daemon's lifetime), and a cell whose update or
//     downdate failed (cholupdate info ≠ 0; its factor is then left as it was) is recomputed
//     from the window in the same frame and counted. A cell whose window cannot be factored
//     (a NaN snapshot, or δ = 0 with fewer snapshots than elements) gets a cell_status and is
//     retried every frame until it can.
#include "covflow/stages/adaptive_stage.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string_view>

#include "adaptive_device.hpp"
#include "adaptive_math.hpp"
#include "covflow/linalg/cholupdate.hpp"
#include "covflow/linalg/solve.hpp"
#include "covflow/pipeline/logging.hpp"
#include "covflow/stages/scenario.hpp"
#include "frame_checks.hpp"

#if COVFLOW_HAS_CUDA
#include <cuda_runtime.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::stages {

using adaptive::Cplx;
using linalg::cf32;
using linalg::cf64;

namespace {

constexpr std::size_t kDescriptorBytes = 256;

// Splits ring columns position … position+count−1 (mod columns) into pieces of at most `rank`
// columns that do not wrap, and calls f(first_column, width) for each.
template <class F>
void for_each_chunk(std::int64_t position, std::int64_t count, std::int64_t columns, std::int64_t rank, F&& f) {
  while (count > 0) {
    const std::int64_t width = std::min({count, rank, columns - position});
    f(position, width);
    position = (position + width) % columns;
    count -= width;
  }
}

// Steering vectors of the looks and the model's emitters, which emitter sits at each look. The
// model's clutter scatterers are interference like its jammers, but no null is asked of each.
detail::BeamSetup beam_setup(const AdaptiveSettings& settings, int n) {
  const auto& positions = settings.element_positions;
  if (!positions.empty() && positions.size() != std::size_t(n))
    throw std::invalid_argument("adaptive stage: the array has " + std::to_string(positions.size()) +
                                " elements, the frames " + std::to_string(n));
  auto steering = [&](double azimuth_deg, double elevation_deg) {
    return positions.empty() ? steering_vector(n, settings.spacing_wavelengths, azimuth_deg, elevation_deg)
                             : steering_vector(positions, azimuth_deg, elevation_deg);
  };
  detail::BeamSetup setup;
  const auto& looks = settings.config.looks_deg;
  setup.looks = static_cast<int>(looks.size());
  for (double look : looks)
    for (const auto& v : steering(look, 0.0)) setup.look_steering.push_back(v);
  if (!settings.model) return setup;
  const config::ScenarioConfig& scenario = *settings.model;
  if (scenario.elements != n)
    throw std::invalid_argument("adaptive stage: the model's array has " + std::to_string(scenario.elements) +
                                " elements, the frames " + std::to_string(n));
  setup.has_model = true;
  auto add = [&](const PointEmitter& e, int jammer) {
    for (const auto& v : steering(e.azimuth_deg, e.elevation_deg)) setup.emitter_steering.push_back(v);
    setup.emitter_power.push_back(e.power);
    setup.emitter_jammer.push_back(jammer);
  };
  // point_emitters' order: the sources, the jammers, then the clutter scatterers.
  const std::size_t sources = scenario.sources.size(), jammers = scenario.jammers.size();
  const auto emitters = point_emitters(scenario);
  for (std::size_t k = 0; k < emitters.size(); ++k) add(emitters[k], k >= sources && k < sources + jammers ? 1 : 0);
  for (double look : looks) {
    int at = -1;
    for (std::size_t k = 0; k < sources + jammers && at < 0; ++k)
      if (std::abs(emitters[k].azimuth_deg - look) <= 1e-9 && std::abs(emitters[k].elevation_deg) <= 1e-9)
        at = static_cast<int>(k);
    setup.look_emitter.push_back(at);
    setup.look_power.push_back(at >= 0 ? setup.emitter_power[std::size_t(at)] : 1.0);
  }
  return setup;
}

// a(θ_p) for the beam pattern's azimuths θ_p (elevation 0, as the looks), point-major [points × N].
// In double: a null 60 dB down is a sum that cancels to 1e-3 of its terms, which single-precision
// steering vectors would blur.
std::vector<std::complex<double>> pattern_steering(const AdaptiveSettings& settings, int n, std::uint32_t points) {
  std::vector<std::complex<double>> out;
  out.reserve(std::size_t(points) * n);
  const auto& positions = settings.element_positions;
  for (std::uint32_t p = 0; p < points; ++p) {
    const double azimuth = beam_pattern_azimuth_deg(points, p);
    const auto a = positions.empty() ? steering_vector(n, settings.spacing_wavelengths, azimuth, 0.0)
                                     : steering_vector(positions, azimuth, 0.0);
    out.insert(out.end(), a.begin(), a.end());
  }
  return out;
}

std::vector<Cplx> to_cplx(const std::vector<std::complex<double>>& v) {
  std::vector<Cplx> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = {v[i].real(), v[i].imag()};
  return out;
}

}  // namespace

struct AdaptiveStage::Lane {
  pipeline::FrameShape shape;
  bool cuda = false;
  int n = 0;
  std::int64_t columns = 0;  // ring columns per cell
  std::int64_t rank = 1;     // columns per cholupdate call
  int max_chunks = 1;

  // The window, the same for every cell (they advance together).
  std::uint32_t cells = 0;
  std::int64_t start = 0;   // ring column of the oldest snapshot
  std::int64_t filled = 0;  // snapshots in the window (0: fresh)
  std::int64_t frames_since_refactor = 0;

  detail::BeamSetup beams;
  std::atomic<bool> told_covariance{false};
  std::uint32_t pattern_points = 0;
  std::vector<std::complex<double>> pattern_steering;  // [pattern_points × N]

  // CPU lane.
  std::vector<std::byte> ring, factors;
  std::vector<int> info;      // [max_chunks × cells]
  std::vector<int> flagged;   // [cells]: an update/downdate failed this frame
  std::vector<int> pending;   // [cells]: the factor is not valid (refactor next frame)
  std::vector<int> status;    // [cells]: 0, or why the factor could not be formed
  std::vector<int> outcome;   // [cells]: this frame: 0 untouched/ok, 1 recovered, 2 unrecoverable
  std::vector<Cplx> work;     // per worker: N (a beam's weights)
  std::vector<Cplx> look_steering, emitter_steering;
  // The window covariances of the cells refactored this frame, packed in the order of
  // refactor_cells, for potrf in double; potrf's info; the right-hand sides of potrs (every look
  // of every cell, cells × N × L of the frames' type), overwritten by z = R⁻¹a.
  std::vector<cf64> refactor_matrices;     // [cells × N × N]
  std::vector<std::uint32_t> refactor_cells;  // [cells]: the first `count` are this frame's
  std::vector<int> refactor_info;          // [cells]
  std::vector<std::byte> solutions;        // [cells × N × L] of T

#if COVFLOW_HAS_CUDA
  std::unique_ptr<detail::AdaptiveDeviceLane> device;
  linalg::cuda::PinnedBuffer<std::byte> staging;  // a descriptor (ResultCopy), then the results
#endif
};

namespace {

// Descriptor at the start of a staging buffer, written by run() and read by collect().
struct ResultCopy {
  const pipeline::FrameSlot* frame;
  std::uint64_t sequence;
  std::uint32_t cells, looks, channels;
  detail::AdaptiveLayout layout;
};
static_assert(sizeof(ResultCopy) <= kDescriptorBytes);

}  // namespace

double beam_pattern_azimuth_deg(std::uint32_t points, std::uint32_t i) {
  if (points < 2) throw std::invalid_argument("beam pattern: at least 2 points (-90 and 90 degrees)");
  const double last = double(points - 1);
  return 90.0 * (2.0 * double(i) - last) / last;
}

AdaptiveStage::AdaptiveStage(const AdaptiveSettings& settings) : settings_(settings) {
  const auto& c = settings_.config;
  if (c.looks_deg.empty()) throw std::invalid_argument("adaptive stage: at least one look direction is needed");
  for (double look : c.looks_deg)
    if (!(look >= -90.0 && look <= 90.0)) throw std::invalid_argument("adaptive stage: look directions lie in [-90, 90] degrees");
  if (c.window_snapshots < 1) throw std::invalid_argument("adaptive stage: window_snapshots must be at least 1");
  if (c.update_rank < 1) throw std::invalid_argument("adaptive stage: update_rank must be at least 1");
  if (c.refactor_every < 0) throw std::invalid_argument("adaptive stage: refactor_every must be 0 (never) or positive");
  if (c.beam_pattern_points < 0 || c.beam_pattern_points == 1)
    throw std::invalid_argument("adaptive stage: beam_pattern_points must be 0 (none) or at least 2");
  if (!(c.diagonal_loading >= 0.0) || !std::isfinite(c.diagonal_loading))
    throw std::invalid_argument("adaptive stage: diagonal loading must be finite and non-negative");
  if (!(settings_.spacing_wavelengths > 0.0) || !std::isfinite(settings_.spacing_wavelengths))
    throw std::invalid_argument("adaptive stage: the element spacing must be positive");
}

AdaptiveStage::~AdaptiveStage() = default;

AdaptiveStage::Lane& AdaptiveStage::lane(const linalg::Exec& exec) const { return lanes_.get(exec, "adaptive stage"); }

std::int64_t AdaptiveStage::ring_columns(const pipeline::FrameShape& shape) const {
  const std::int64_t w = settings_.config.window_snapshots;
  return w + std::min<std::int64_t>(shape.snapshots, w - 1);
}

int AdaptiveStage::warm_up_frames(const pipeline::FrameShape& shape) const {
  if (shape.snapshots == 0) return 1;  // covariance frames leave the stage idle
  const std::int64_t to_fill = (settings_.config.window_snapshots + shape.snapshots - 1) / shape.snapshots;
  return static_cast<int>(std::min<std::int64_t>(to_fill + 1, 16));
}

void AdaptiveStage::reset(linalg::Exec& exec) {
  Lane& state = lane(exec);
  state.cells = 0;  // the next frame starts a new window (and resets the device side)
  state.filled = 0;
  state.start = 0;
  state.frames_since_refactor = 0;
  state.told_covariance = false;
  // Warm-up runs before any frame of the radar's: none of what was counted was.
  for (auto* counter : {&frames_, &covariance_frames_, &periodic_refactors_, &recovered_cells_, &unrecoverable_cells_})
    counter->store(0);
}

AdaptiveCounters AdaptiveStage::counters() const {
  return {frames_.load(), covariance_frames_.load(), periodic_refactors_.load(), recovered_cells_.load(),
          unrecoverable_cells_.load()};
}

void AdaptiveStage::prepare(const pipeline::FrameShape& shape, linalg::Exec& exec) {
  if (shape.element_type != replay::ElementType::cf32 && shape.element_type != replay::ElementType::cf64)
    throw std::invalid_argument("adaptive stage: frames must hold cf32 or cf64 samples");
  if (shape.channels < 1) throw std::invalid_argument("adaptive stage: the array needs at least one element");
  if (shape.looks != settings_.config.looks_deg.size())
    throw std::invalid_argument("adaptive stage: the frame shape keeps " + std::to_string(shape.looks) +
                                " looks but the stage has " + std::to_string(settings_.config.looks_deg.size()));
  if (std::int64_t(shape.beam_pattern_points) != settings_.config.beam_pattern_points)
    throw std::invalid_argument("adaptive stage: the frame shape keeps beam patterns of " +
                                std::to_string(shape.beam_pattern_points) + " points but the stage makes " +
                                std::to_string(settings_.config.beam_pattern_points));
  auto state = std::make_unique<Lane>();
  state->shape = shape;
  state->cuda = exec.is_cuda();
  state->n = static_cast<int>(shape.channels);
  state->columns = ring_columns(shape);
  state->rank = settings_.config.update_rank;
  if (state->cuda) state->rank = std::min(state->rank, linalg::kCudaMaxRank);
  const std::int64_t k_max = std::min<std::int64_t>(shape.snapshots, settings_.config.window_snapshots - 1);
  state->max_chunks = static_cast<int>(std::max<std::int64_t>(1, 2 * ((k_max + state->rank - 1) / state->rank + 1)));
  state->beams = beam_setup(settings_, state->n);
  state->pattern_points = shape.beam_pattern_points;
  if (state->pattern_points > 0) state->pattern_steering = pattern_steering(settings_, state->n, state->pattern_points);

  const std::size_t n = shape.channels, cells = shape.cells, e = shape.element_bytes();
  const std::size_t ring_bytes = cells * std::size_t(state->columns) * n * e;
  const std::size_t factor_bytes = cells * n * n * e;
  const bool single = shape.element_type == replay::ElementType::cf32;
  const std::int64_t looks = static_cast<std::int64_t>(shape.looks);
  // One arena serves every call of a frame, one after another: the largest of their needs. The
  // refactor's potrf runs in double whatever the frames' type; potrs in the factors' type.
  std::size_t workspace = single ? linalg::cholupdate_workspace<cf32>(exec, state->n, state->rank, cells)
                                 : linalg::cholupdate_workspace<cf64>(exec, state->n, state->rank, cells);
  workspace = std::max(workspace, linalg::potrf_workspace<cf64>(exec, state->n, cells));
  workspace = std::max(workspace, single ? linalg::potrs_workspace<cf32>(exec, state->n, looks, cells)
                                         : linalg::potrs_workspace<cf64>(exec, state->n, looks, cells));
  exec.workspace().reserve(workspace);
  if (state->cuda) {
#if COVFLOW_HAS_CUDA
    detail::AdaptiveDeviceParams params;
    params.type = shape.element_type;
    params.channels = state->n;
    params.max_cells = static_cast<int>(cells);
    params.ring_columns = static_cast<int>(state->columns);
    params.max_chunks = state->max_chunks;
    params.loading = settings_.config.diagonal_loading;
    params.beams = state->beams;
    state->device = detail::make_adaptive_device_lane(exec.cuda_context(), params);
    const std::size_t staging = kDescriptorBytes + detail::AdaptiveLayout::of(cells, shape.looks, n).bytes;
    // One buffer: a lane's frames run one after another, and collect() empties it before the
    // next frame's run().
    state->staging = linalg::cuda::PinnedBuffer<std::byte>(staging);
    new (state->staging.data()) ResultCopy{};  // no frame yet: collect() finds nothing to unpack
#endif
  } else {
    state->ring.assign(ring_bytes, std::byte{0});
    state->factors.assign(factor_bytes, std::byte{0});
    state->info.assign(std::size_t(state->max_chunks) * cells, 0);
    state->flagged.assign(cells, 0);
    state->pending.assign(cells, 1);
    state->status.assign(cells, 0);
    state->outcome.assign(cells, 0);
    state->work.assign(std::size_t(exec.pool().size()) * n, Cplx{0.0, 0.0});
    state->look_steering = to_cplx(state->beams.look_steering);
    state->emitter_steering = to_cplx(state->beams.emitter_steering);
    state->refactor_matrices.assign(cells * n * n, cf64(0.0, 0.0));
    state->refactor_cells.assign(cells, 0);
    state->refactor_info.assign(cells, 0);
    state->solutions.assign(cells * n * shape.looks * e, std::byte{0});
  }
  lanes_.set(exec, std::move(state));
}

void AdaptiveStage::count_failures(Lane& state, std::uint64_t sequence, std::uint32_t recovered,
                                   std::uint32_t unrecoverable) {
  (void)state;
  if (recovered == 0 && unrecoverable == 0) return;
  const std::uint64_t before = recovered_cells_.fetch_add(recovered) + unrecoverable_cells_.fetch_add(unrecoverable);
  const std::uint64_t after = before + recovered + unrecoverable;
  // The first ones, then one line each time the total passes a power of two.
  if (before < 16 || std::bit_width(before) != std::bit_width(after))
    pipeline::logger("stages")->warn(
        "adaptive: frame {}: {} cells refactored after a failed update/downdate, {} cells without a factor "
        "(totals {} and {})",
        sequence, recovered, unrecoverable, recovered_cells_.load(), unrecoverable_cells_.load());
}

namespace {

// The CPU lane's refactorization of one frame. The cells to refactor (every cell, or those whose
// update/downdate failed or whose factor is not valid yet) are packed; each one's window covariance
//   R = Σ_window v·vᴴ + δ·I    (lower triangle, summed in double from the ring)
// goes into its slot of the packed batch, one linalg::potrf<cf64> (lower) factors them all, and
// the cells whose factor was formed get it rounded to the frames' type (strict upper triangle
// zero). potrf's info is the cell's status: the 1-based failing minor, or non_finite_input for a
// NaN or Inf in R. A cell that fails keeps its former factor, unused while its status is set.
template <class T>
void refactor_cpu(linalg::Exec& exec, AdaptiveStage::Lane& s, std::uint32_t cells, bool all, double loading) {
  const int n = s.n;
  const std::size_t nn = std::size_t(n) * n;
  std::size_t count = 0;
  for (std::uint32_t cell = 0; cell < cells; ++cell) {
    s.outcome[cell] = 0;
    if (all || s.flagged[cell] != 0 || s.pending[cell] != 0) s.refactor_cells[count++] = cell;
  }
  if (count == 0) return;
  const T* ring = reinterpret_cast<const T*>(s.ring.data());
  T* factors = reinterpret_cast<T*>(s.factors.data());
  linalg::ThreadPool& pool = exec.pool();
  pool.parallel_for(count, [&](std::size_t slot, unsigned) {
    const std::size_t cell = s.refactor_cells[slot];
    cf64* r = s.refactor_matrices.data() + slot * nn;
    for (int j = 0; j < n; ++j) std::fill(r + j * n + j, r + (j + 1) * n, cf64(0.0, 0.0));
    const T* base = ring + cell * std::size_t(s.columns) * n;
    for (std::int64_t t = 0; t < s.filled; ++t) {
      const T* v = base + ((s.start + t) % s.columns) * n;
      for (int j = 0; j < n; ++j) {
        const double br = v[j].real(), bi = v[j].imag();
        for (int i = j; i < n; ++i) {
          const double ar = v[i].real(), ai = v[i].imag();
          r[i + j * n] += cf64(ar * br + ai * bi, ai * br - ar * bi);  // v_i·conj(v_j)
        }
      }
    }
    for (int j = 0; j < n; ++j) r[j + j * n] = cf64(r[j + j * n].real() + loading, 0.0);
  });
  const auto packed = linalg::Batch<cf64>::packed(s.refactor_matrices.data(), n, n, std::int64_t(count));
  linalg::potrf<cf64>(exec, linalg::Uplo::lower, packed, std::span<int>(s.refactor_info.data(), count));
  pool.parallel_for(count, [&](std::size_t slot, unsigned) {
    const std::size_t cell = s.refactor_cells[slot];
    const int info = s.refactor_info[slot];
    if (info == 0) {
      const cf64* r = s.refactor_matrices.data() + slot * nn;
      T* l = factors + cell * nn;
      using R = linalg::real_t<T>;
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i)
          l[i + j * n] = i >= j ? T(static_cast<R>(r[i + j * n].real()), static_cast<R>(r[i + j * n].imag())) : T(0);
    }
    s.outcome[cell] = info != 0 ? 2 : (s.flagged[cell] != 0 ? 1 : 0);
    s.status[cell] = info;
    s.pending[cell] = info != 0 ? 1 : 0;
  });
}

// The CPU lane's beams of one frame. B = cells × (N × L), each cell's columns the looks' steering
// vectors, solved in one linalg::potrs<T> with the cells' factors: column l of cell c becomes
// z = R_c⁻¹·a_l, from which adaptive::mvdr_weights_from_solution forms w = z / Re(aᴴz). Cells with
// a nonzero status are solved too (with a factor that is not theirs) and their results ignored:
// NaN weights.
template <class T>
void beams_cpu(linalg::Exec& exec, AdaptiveStage::Lane& s, std::uint32_t cells, pipeline::FrameResults& results) {
  const int n = s.n;
  const std::size_t looks = s.beams.looks, per_cell = looks * n;
  const T* factors = reinterpret_cast<const T*>(s.factors.data());
  T* solutions = reinterpret_cast<T*>(s.solutions.data());
  linalg::ThreadPool& pool = exec.pool();
  using R = linalg::real_t<T>;
  pool.parallel_for(cells, [&](std::size_t cell, unsigned) {
    T* b = solutions + cell * per_cell;
    for (std::size_t i = 0; i < per_cell; ++i)
      b[i] = T(static_cast<R>(s.look_steering[i].re), static_cast<R>(s.look_steering[i].im));
  });
  linalg::potrs<T>(exec, linalg::Uplo::lower, linalg::Batch<const T>::packed(factors, n, n, cells),
                   linalg::Batch<T>::packed(solutions, n, std::int64_t(looks), cells));
  const std::size_t per_worker = s.work.size() / pool.size();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  pool.parallel_for(cells, [&](std::size_t cell, unsigned worker) {
    Cplx* w = s.work.data() + worker * per_worker;
    for (std::size_t look = 0; look < looks; ++look) {
      const std::size_t beam = cell * looks + look;
      std::complex<float>* out = results.weights.data() + beam * n;
      results.sinr_db[beam] = nan;
      results.null_depth_db[beam] = nan;
      const Cplx* a = s.look_steering.data() + look * n;
      const T* z = solutions + beam * n;
      const auto solution = [z](int m) { return Cplx{static_cast<double>(z[m].real()), static_cast<double>(z[m].imag())}; };
      if (s.status[cell] != 0 || !adaptive::mvdr_weights_from_solution(solution, n, a, w)) {
        std::fill(out, out + n, std::complex<float>(nan, nan));
        continue;
      }
      for (int m = 0; m < n; ++m) out[m] = {static_cast<float>(w[m].re), static_cast<float>(w[m].im)};
      if (!s.beams.has_model) continue;
      const adaptive::BeamModelView model{s.emitter_steering.data(), s.beams.emitter_power.data(),
                                          s.beams.emitter_jammer.data(), static_cast<int>(s.beams.emitter_power.size()),
                                          s.beams.look_emitter[look], s.beams.look_power[look]};
      double sinr = 0.0, null_depth = 0.0;
      adaptive::beam_metrics(w, a, n, model, &sinr, &null_depth);
      results.sinr_db[beam] = static_cast<float>(sinr);
      results.null_depth_db[beam] = static_cast<float>(null_depth);
    }
    if (s.status[cell] != 0 && results.cell_status[cell] == 0) results.cell_status[cell] = s.status[cell];
  });
}

// The beam patterns of one frame, on the host from the weights in `results`: for every cell, look
// and azimuth θ_p, 10·log10|wᴴa(θ_p)|² = 10·log10|Σ_m conj(w_m)·a_m(θ_p)|², summed in double. The
// weights satisfy wᴴa(look) = 1, so the pattern is 0 dB at the look without further scaling. A beam
// without weights (NaN) has a NaN pattern. Cost: cells × looks × points × N complex products.
void beam_patterns(linalg::Exec& exec, const AdaptiveStage::Lane& s, std::uint32_t cells, pipeline::FrameResults& results) {
  const std::size_t n = std::size_t(s.n), looks = std::size_t(s.beams.looks), points = s.pattern_points;
  if (points == 0) return;
  if (results.beam_pattern_db.size() < std::size_t(cells) * looks * points)
    throw std::logic_error("adaptive stage: the slot's beam pattern is not reserved for the frame shape");
  exec.pool().parallel_for(std::size_t(cells) * looks, [&](std::size_t beam, unsigned) {
    const std::complex<float>* w = results.weights.data() + beam * n;
    float* out = results.beam_pattern_db.data() + beam * points;
    if (!std::all_of(w, w + n, [](std::complex<float> v) { return std::isfinite(v.real()) && std::isfinite(v.imag()); })) {
      std::fill(out, out + points, std::numeric_limits<float>::quiet_NaN());
      return;
    }
    for (std::size_t p = 0; p < points; ++p) {
      const std::complex<double>* a = s.pattern_steering.data() + p * n;
      double re = 0.0, im = 0.0;
      for (std::size_t m = 0; m < n; ++m) {  // conj(w_m)·a_m
        const double wr = w[m].real(), wi = w[m].imag(), ar = a[m].real(), ai = a[m].imag();
        re += wr * ar + wi * ai;
        im += wr * ai - wi * ar;
      }
      out[p] = static_cast<float>(10.0 * std::log10(re * re + im * im));
    }
  });
}

}  // namespace

void AdaptiveStage::run(pipeline::FrameSlot& frame, linalg::Exec& exec) {
  constexpr std::string_view stage = "adaptive";
  Lane& state = lane(exec);
  const pipeline::FrameShape& shape = state.shape;
  detail::require_fits(stage, frame, shape);
  const auto& h = frame.header;
  if (h.kind == replay::PayloadKind::covariance) {
    ++covariance_frames_;
    if (!state.told_covariance.exchange(true))
      pipeline::logger("stages")->info(
          "adaptive: covariance frames carry no snapshots to update the factors with; the stage leaves them "
          "without beamformer results (first: frame {})",
          frame.sequence);
    return;
  }
  const std::int64_t k = h.cols;
  const std::uint32_t cells = h.count;
  if (k > std::int64_t(shape.snapshots))
    throw detail::shape_error(stage, frame, "more snapshots than the " + std::to_string(shape.snapshots) +
                                                " the pipeline is prepared for");
  const std::size_t looks = state.beams.looks;
  auto& results = frame.results;
  if (results.weights.size() < std::size_t(cells) * looks * state.n || results.sinr_db.size() < cells * looks ||
      results.null_depth_db.size() < cells * looks || results.cell_status.size() < cells)
    throw std::logic_error("adaptive stage: the slot's results are not reserved for the frame shape");
  const std::size_t element_bytes = shape.element_bytes();
  const void* payload = nullptr;
  if (state.cuda)
    payload = detail::device_array<std::byte>(frame.device.payload, stage, "payload");
  else
    payload = detail::host_array<std::byte>(frame.host.payload, h.element_count() * element_bytes, stage, "payload");

  // Everything below changes the lane's state: only a well-formed frame gets here.
  ++frames_;
  const std::int64_t window = settings_.config.window_snapshots;
  const std::int64_t columns = state.columns;
  const int n = state.n;
  if (cells != state.cells) {  // another cell count: a new window
    state.cells = cells;
    state.filled = 0;
    state.start = 0;
#if COVFLOW_HAS_CUDA
    if (state.cuda) state.device->reset();
#endif
    if (!state.cuda) std::fill(state.pending.begin(), state.pending.end(), 1);
  }

  const double scale = 1.0 / std::sqrt(double(window));
  auto process = [&]<class T>(T*) {
    using R = linalg::real_t<T>;
    T* ring = nullptr;
    T* factors = nullptr;
#if COVFLOW_HAS_CUDA
    if (state.cuda) {
      ring = static_cast<T*>(state.device->ring());
      factors = static_cast<T*>(state.device->factors());
      state.device->begin_frame(static_cast<int>(cells));
    }
#endif
    if (!state.cuda) {
      ring = reinterpret_cast<T*>(state.ring.data());
      factors = reinterpret_cast<T*>(state.factors.data());
      std::fill(state.flagged.begin(), state.flagged.begin() + cells, 0);
    }
    const T* x = static_cast<const T*>(payload);
    // Snapshots first … first+count−1 of every cell, scaled, into the ring from `position` on.
    auto write = [&](std::int64_t first, std::int64_t count, std::int64_t position) {
      if (state.cuda) {
#if COVFLOW_HAS_CUDA
        state.device->write_snapshots(payload, static_cast<int>(cells), static_cast<int>(k), static_cast<int>(first),
                                      static_cast<int>(count), static_cast<int>(position), scale);
#endif
        return;
      }
      exec.pool().parallel_for(cells, [&](std::size_t cell, unsigned) {
        for (std::int64_t t = 0; t < count; ++t) {
          const T* from = x + (cell * std::size_t(k) + std::size_t(first + t)) * n;
          T* to = ring + (cell * std::size_t(columns) + std::size_t((position + t) % columns)) * n;
          for (int m = 0; m < n; ++m) to[m] = from[m] * static_cast<R>(scale);
        }
      });
    };

    bool all = false;
    if (state.filled == 0 || k >= window) {
      const std::int64_t take = std::min(k, window);
      write(k - take, take, 0);
      state.start = 0;
      state.filled = take;
      all = true;
    } else {
      write(0, k, (state.start + state.filled) % columns);
      int chunk = 0;
      const auto l = linalg::Batch<T>::packed(factors, n, n, cells);
      auto apply = [&](std::int64_t position, std::int64_t width, linalg::Sign sign) {
        const linalg::Batch<const T> v{ring + position * n, n, width, n, columns * n, cells};
        int* info = nullptr;
#if COVFLOW_HAS_CUDA
        if (state.cuda) info = state.device->chunk_info(chunk);
#endif
        if (!state.cuda) info = state.info.data() + std::size_t(chunk) * cells;
        linalg::cholupdate<T>(exec, l, v, sign, std::span<int>(info, cells));
        if (!state.cuda)
          for (std::uint32_t c = 0; c < cells; ++c) state.flagged[c] |= info[c] != 0 ? 1 : 0;
        ++chunk;
      };
      for_each_chunk((state.start + state.filled) % columns, k, columns, state.rank,
                     [&](std::int64_t p, std::int64_t w) { apply(p, w, linalg::Sign::update); });
      const std::int64_t leaving = std::max<std::int64_t>(0, state.filled + k - window);
      for_each_chunk(state.start, leaving, columns, state.rank,
                     [&](std::int64_t p, std::int64_t w) { apply(p, w, linalg::Sign::downdate); });
      state.start = (state.start + leaving) % columns;
      state.filled += k - leaving;
#if COVFLOW_HAS_CUDA
      if (state.cuda) state.device->collect_failures(chunk, static_cast<int>(cells));
#endif
      const std::int64_t every = settings_.config.refactor_every;
      all = every > 0 && state.frames_since_refactor + 1 >= every;
    }
    state.frames_since_refactor = all ? 0 : state.frames_since_refactor + 1;
    if (all) ++periodic_refactors_;

    if (state.cuda) {
#if COVFLOW_HAS_CUDA
      detail::AdaptiveDeviceLane& device = *state.device;
      const int start = static_cast<int>(state.start), length = static_cast<int>(state.filled);
      // Every cell goes through potrf: one that needs no refactor holds the identity in its slot
      // (factored harmlessly, its info ignored), since which cells failed an update is known on
      // the device only. Then the looks' steering vectors into B and one potrs with the factors.
      device.form_covariance(static_cast<int>(cells), all, start, length);
      linalg::potrf<cf64>(exec, linalg::Uplo::lower,
                          linalg::Batch<cf64>::packed(static_cast<cf64*>(device.refactor_matrices()), n, n, cells),
                          std::span<int>(device.refactor_info(), cells));
      device.store_factors(static_cast<int>(cells), all);
      device.load_steering(static_cast<int>(cells));
      linalg::potrs<T>(exec, linalg::Uplo::lower, linalg::Batch<const T>::packed(factors, n, n, cells),
                       linalg::Batch<T>::packed(static_cast<T*>(device.solutions()), n, std::int64_t(looks), cells));
#endif
      return;
    }
    refactor_cpu<T>(exec, state, cells, all, settings_.config.diagonal_loading);
    beams_cpu<T>(exec, state, cells, results);
    beam_patterns(exec, state, cells, results);
    results.cells = cells;
    std::uint32_t recovered = 0, unrecoverable = 0;
    for (std::uint32_t c = 0; c < cells; ++c) {
      recovered += state.outcome[c] == 1 ? 1 : 0;
      unrecoverable += state.outcome[c] == 2 ? 1 : 0;
    }
    count_failures(state, frame.sequence, recovered, unrecoverable);
  };
  if (h.element_type == replay::ElementType::cf32) process(static_cast<cf32*>(nullptr));
  else process(static_cast<cf64*>(nullptr));
  if (!state.cuda) return;

#if COVFLOW_HAS_CUDA
  const auto layout = detail::AdaptiveLayout::of(cells, looks, std::size_t(n));
  std::byte* staging = state.staging.data();
  new (staging) ResultCopy{&frame, frame.sequence, cells, static_cast<std::uint32_t>(looks), static_cast<std::uint32_t>(n),
                           layout};
  state.device->beamform(static_cast<int>(cells), layout, staging + kDescriptorBytes);
#endif
}

void AdaptiveStage::collect(pipeline::FrameSlot& frame, linalg::Exec& exec) {
#if COVFLOW_HAS_CUDA
  Lane& state = lane(exec);
  if (!state.cuda) return;
  auto* copy = reinterpret_cast<ResultCopy*>(state.staging.data());
  if (copy->frame != &frame || copy->sequence != frame.sequence) return;  // run() issued no beams for this frame
  copy->frame = nullptr;  // unpacked once
  const std::byte* staging = state.staging.data() + kDescriptorBytes;
  pipeline::FrameResults& results = frame.results;
  const std::size_t cells = copy->cells, beams = cells * copy->looks;
  std::memcpy(results.weights.data(), staging + copy->layout.weights, 8 * beams * copy->channels);
  std::memcpy(results.sinr_db.data(), staging + copy->layout.sinr, 4 * beams);
  std::memcpy(results.null_depth_db.data(), staging + copy->layout.null_depth, 4 * beams);
  const auto* status = reinterpret_cast<const std::int32_t*>(staging + copy->layout.status);
  for (std::size_t c = 0; c < cells; ++c)
    if (status[c] != 0 && results.cell_status[c] == 0) results.cell_status[c] = status[c];
  results.cells = copy->cells;
  beam_patterns(exec, state, copy->cells, results);
  const auto* counts = reinterpret_cast<const std::int32_t*>(staging + copy->layout.counts);
  count_failures(state, copy->sequence, static_cast<std::uint32_t>(counts[0]), static_cast<std::uint32_t>(counts[1]));
#else
  (void)frame;
  (void)exec;
#endif
}

std::vector<std::complex<double>> AdaptiveStage::factors(linalg::Exec& exec) const {
  Lane& state = lane(exec);
  const std::size_t n = state.n, count = std::size_t(state.cells) * n * n;
  std::vector<std::complex<double>> out(count);
  const bool single = state.shape.element_type == replay::ElementType::cf32;
  std::vector<std::byte> bytes(count * state.shape.element_bytes());
  if (state.cuda) {
#if COVFLOW_HAS_CUDA
    exec.synchronize();
    COVFLOW_CUDA_TRY(cudaMemcpy(bytes.data(), state.device->factors(), bytes.size(), cudaMemcpyDeviceToHost));
#endif
  } else {
    std::memcpy(bytes.data(), state.factors.data(), bytes.size());
  }
  for (std::size_t i = 0; i < count; ++i)
    out[i] = single ? std::complex<double>(reinterpret_cast<const cf32*>(bytes.data())[i])
                    : reinterpret_cast<const cf64*>(bytes.data())[i];
  return out;
}

void AdaptiveStage::scale_window_for_testing(linalg::Exec& exec, std::uint32_t cell, double factor) {
  Lane& state = lane(exec);
  if (cell >= state.shape.cells) throw std::invalid_argument("adaptive stage: no such cell");
  if (state.cuda) {
#if COVFLOW_HAS_CUDA
    state.device->scale_cell(static_cast<int>(cell), factor);
#endif
    return;
  }
  const std::size_t per_cell = std::size_t(state.columns) * state.n;
  if (state.shape.element_type == replay::ElementType::cf32) {
    auto* ring = reinterpret_cast<cf32*>(state.ring.data()) + cell * per_cell;
    for (std::size_t i = 0; i < per_cell; ++i) ring[i] *= static_cast<float>(factor);
  } else {
    auto* ring = reinterpret_cast<cf64*>(state.ring.data()) + cell * per_cell;
    for (std::size_t i = 0; i < per_cell; ++i) ring[i] *= factor;
  }
}

}  // namespace covflow::stages

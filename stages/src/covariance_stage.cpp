// The covariance stage (docs/stages.md, "covariance"). Each frame's sample covariance is
// estimated with linalg::sample_covariance; with a window of W > 1 frames the per-frame estimates
// R̂_t (unloaded) are kept in a ring of W entries per lane and combined as
//
//   R_t = Σ_{i<n} λ^i·R̂_{t−i} / Σ_{i<n} λ^i + δ·I,   n = min(frames seen, W),
//
// which weighs every snapshot of frame t−i by λ^i (all frames of a window have the same K; a
// change of K or of the cell count starts the window afresh). The sum is recomputed from the ring
// every frame (W·N² per cell) rather than updated recursively (add the new, subtract the expired),
// which would let rounding drift accumulate without bound in a daemon that runs for days.
#include "covflow/stages/covariance_stage.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "covflow/linalg/covariance.hpp"
#include "frame_checks.hpp"
#include "processing_device.hpp"

#if COVFLOW_HAS_CUDA
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::stages {

using linalg::cf32;
using linalg::cf64;

struct CovarianceStage::Lane {
  pipeline::FrameShape shape;
  bool cuda = false;
  std::int64_t entry_elements = 0;  // cells × N × N: one ring entry
  std::vector<std::byte> host_ring;
#if COVFLOW_HAS_CUDA
  linalg::cuda::DeviceBuffer<std::byte> device_ring;
#endif
  std::vector<double> weights;  // normalised λ^i for the current fill
  int head = -1;                // ring entry of the newest frame
  int entries = 0;              // frames in the window so far
  std::uint32_t cells = 0;      // of the frames in the window
  std::uint32_t snapshots = 0;  // K of the frames in the window

  // The effective snapshot counts of the latest frames, keyed by sequence (stored as sequence + 1;
  // 0 is empty), read by the subspace stage of the same frame.
  static constexpr std::size_t kRecent = 64;
  mutable std::mutex recent_mutex;
  std::array<std::pair<std::uint64_t, double>, kRecent> recent{};

  void remember(std::uint64_t sequence, double value) {
    std::lock_guard lock(recent_mutex);
    recent[sequence % kRecent] = {sequence + 1, value};
  }
};

CovarianceStage::CovarianceStage(const config::CovarianceStageConfig& config, double nominal_snapshots)
    : config_(config), nominal_snapshots_(nominal_snapshots) {
  if (config_.window < 1) throw std::invalid_argument("covariance stage: window must be at least 1");
  if (!(config_.forgetting > 0.0 && config_.forgetting <= 1.0))
    throw std::invalid_argument("covariance stage: forgetting must lie in (0, 1]");
  if (!(config_.diagonal_loading >= 0.0) || !std::isfinite(config_.diagonal_loading))
    throw std::invalid_argument("covariance stage: diagonal loading must be finite and non-negative");
}

CovarianceStage::~CovarianceStage() = default;

CovarianceStage::Lane& CovarianceStage::lane(const linalg::Exec& exec) const { return lanes_.get(exec, "covariance stage"); }

void CovarianceStage::prepare(const pipeline::FrameShape& shape, linalg::Exec& exec) {
  if (shape.element_type != replay::ElementType::cf32 && shape.element_type != replay::ElementType::cf64)
    throw std::invalid_argument("covariance stage: frames must hold cf32 or cf64 samples");
  auto state = std::make_unique<Lane>();
  state->shape = shape;
  state->cuda = exec.is_cuda();
  state->entry_elements = std::int64_t(shape.channels) * shape.channels * shape.cells;
  const std::size_t ring_bytes =
      config_.window > 1 ? std::size_t(config_.window) * state->entry_elements * shape.element_bytes() : 0;
  if (ring_bytes > 0) {
    if (state->cuda) {
#if COVFLOW_HAS_CUDA
      state->device_ring = linalg::cuda::DeviceBuffer<std::byte>(ring_bytes);
#endif
    } else {
      state->host_ring.assign(ring_bytes, std::byte{0});
    }
  }
  state->weights.assign(std::size_t(config_.window), 0.0);
  lanes_.set(exec, std::move(state));
}

void CovarianceStage::reset(linalg::Exec& exec) {
  Lane& state = lane(exec);
  state.head = -1;
  state.entries = 0;
  state.cells = 0;
  state.snapshots = 0;
  std::lock_guard lock(state.recent_mutex);
  state.recent.fill({0, 0.0});
}

double CovarianceStage::effective_snapshots(const linalg::Exec& exec, std::uint64_t sequence) const {
  const Lane& state = lane(exec);
  std::lock_guard lock(state.recent_mutex);
  const auto& [key, value] = state.recent[sequence % Lane::kRecent];
  return key == sequence + 1 ? value : nominal_snapshots_;
}

namespace {

template <class T>
void combine_window_cpu(linalg::ThreadPool& pool, const T* ring, std::int64_t entry_elements, int window, int head,
                        std::span<const double> weights, std::int64_t cells, int n, double loading, T* out) {
  using R = linalg::real_t<T>;
  const std::int64_t per_cell = std::int64_t(n) * n;
  pool.parallel_for(static_cast<std::size_t>(cells), [&](std::size_t cell, unsigned) {
    for (std::int64_t e = 0; e < per_cell; ++e) {
      const std::int64_t element = std::int64_t(cell) * per_cell + e;
      double re = 0.0, im = 0.0;
      for (std::size_t i = 0; i < weights.size(); ++i) {
        const int entry = (head - static_cast<int>(i) + window) % window;
        const T v = ring[entry * entry_elements + element];
        re += weights[i] * static_cast<double>(v.real());
        im += weights[i] * static_cast<double>(v.imag());
      }
      if (e % (n + 1) == 0) re += loading;  // diagonal: e = j·n + j
      out[element] = T(static_cast<R>(re), static_cast<R>(im));
    }
  });
}

}  // namespace

void CovarianceStage::run(pipeline::FrameSlot& frame, linalg::Exec& exec) {
  constexpr std::string_view stage = "covariance";
  Lane& state = lane(exec);
  const pipeline::FrameShape& shape = state.shape;
  detail::require_fits(stage, frame, shape);
  const auto& h = frame.header;
  const std::uint32_t n = h.rows, cells = h.count;
  const std::size_t matrix_elements = std::size_t(n) * n * cells;
  const std::size_t element_bytes = shape.element_bytes();

  void* covariance = nullptr;
  const void* payload = nullptr;
  if (state.cuda) {
    covariance = detail::device_array<std::byte>(frame.device.covariance, stage, "covariance");
    payload = detail::device_array<std::byte>(frame.device.payload, stage, "payload");
  } else {
    covariance = detail::host_array<std::byte>(frame.host.covariance, matrix_elements * element_bytes, stage, "covariance");
    payload = detail::host_array<std::byte>(frame.host.payload, h.element_count() * element_bytes, stage, "payload");
  }

  if (h.kind == replay::PayloadKind::covariance) {  // pass-through, as received
    if (state.cuda) {
#if COVFLOW_HAS_CUDA
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(covariance, payload, matrix_elements * element_bytes, cudaMemcpyDeviceToDevice,
                                       exec.cuda_context().stream()));
#endif
    } else {
      std::memcpy(covariance, payload, matrix_elements * element_bytes);
    }
    state.remember(frame.sequence, nominal_snapshots_);
    return;
  }

  const std::uint32_t k = h.cols;
  const int window = static_cast<int>(config_.window);
  auto estimate = [&]<class T>(T*) {
    const auto x = linalg::Batch<const T>::packed(static_cast<const T*>(payload), n, k, cells);
    if (window == 1) {
      linalg::sample_covariance<T>(exec, x, linalg::Batch<T>::packed(static_cast<T*>(covariance), n, n, cells),
                                   {.diagonal_loading = config_.diagonal_loading});
      return;
    }
    if (state.entries > 0 && (cells != state.cells || k != state.snapshots)) state.entries = 0;  // new window
    state.head = (state.head + 1) % window;
    state.entries = std::min(state.entries + 1, window);
    state.cells = cells;
    state.snapshots = k;
    std::byte* ring_base = nullptr;
#if COVFLOW_HAS_CUDA
    if (state.cuda) ring_base = state.device_ring.data();
#endif
    if (!state.cuda) ring_base = state.host_ring.data();
    T* ring = reinterpret_cast<T*>(ring_base);
    linalg::sample_covariance<T>(exec, x, linalg::Batch<T>::packed(ring + state.head * state.entry_elements, n, n, cells));
    if (state.cuda) {
#if COVFLOW_HAS_CUDA
      detail::window_combine(exec.cuda_context(), h.element_type, ring, state.entry_elements, window, state.head,
                             state.entries, config_.forgetting, std::int64_t(matrix_elements), static_cast<int>(n),
                             config_.diagonal_loading, covariance);
#endif
    } else {
      double total = 0.0, w = 1.0;
      for (int i = 0; i < state.entries; ++i, w *= config_.forgetting) total += w;
      w = 1.0;
      for (int i = 0; i < state.entries; ++i, w *= config_.forgetting) state.weights[i] = w / total;
      combine_window_cpu<T>(exec.pool(), ring, state.entry_elements, window, state.head,
                            std::span<const double>(state.weights.data(), std::size_t(state.entries)), cells,
                            static_cast<int>(n), config_.diagonal_loading, static_cast<T*>(covariance));
    }
  };
  if (h.element_type == replay::ElementType::cf32) estimate(static_cast<cf32*>(nullptr));
  else estimate(static_cast<cf64*>(nullptr));

  // Kish's effective sample size of the weighted window: K·(Σw)²/Σw², w_i = λ^i.
  const int entries = window == 1 ? 1 : state.entries;
  double sum = 0.0, sum_squares = 0.0, w = 1.0;
  for (int i = 0; i < entries; ++i, w *= config_.forgetting) {
    sum += w;
    sum_squares += w * w;
  }
  state.remember(frame.sequence, double(k) * sum * sum / sum_squares);
}

}  // namespace covflow::stages

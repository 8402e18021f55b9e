// The device side of the adaptive stage (docs/stages.md, "adaptive"): the snapshot ring, the
// failure flags of the cholupdate calls (which adaptive_stage.cpp issues through linalg on the
// same stream), the refactorization of the cells that need it, and the MVDR beams with their
// SINR and null depth, packed for one copy back. The formulas are adaptive_math.hpp's, as on the
// CPU path. Every buffer is allocated in the constructor (prepare()); nothing here allocates or
// synchronises per frame, and all work is issued on the Exec's stream.
#include <cuComplex.h>

#include <cmath>
#include <span>
#include <stdexcept>
#include <vector>

#include "adaptive_device.hpp"
#include "adaptive_math.hpp"
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/types.hpp"

namespace covflow::stages::detail {
namespace {

using adaptive::Cplx;

template <class R> struct complex_of;
template <> struct complex_of<float> { using type = float2; };
template <> struct complex_of<double> { using type = double2; };

constexpr int kThreads = 256;
constexpr int kRefactorThreads = 256;

unsigned blocks_for(long long work) {
  const long long blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 8192 ? 8192 : blocks));
}

// One thread per element (cell, snapshot t, channel m) of the snapshots that enter the ring,
// grid-stride: payload column (cell, first + t) times `scale` into ring column
// (cell, (position + t) mod columns). Memory-bound; coalesced along m.
template <class R>
__global__ void write_kernel(const typename complex_of<R>::type* payload, int cells, int snapshots, int first, int count,
                             int position, int columns, int n, R scale, typename complex_of<R>::type* ring) {
  const long long total = static_cast<long long>(cells) * count * n;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int m = static_cast<int>(idx % n);
    const long long column = idx / n;
    const int t = static_cast<int>(column % count);
    const long long cell = column / count;
    const auto v = payload[(cell * snapshots + first + t) * n + m];
    ring[(cell * columns + (position + t) % columns) * n + m] = {v.x * scale, v.y * scale};
  }
}

// One thread per cell: flagged = any of the frame's cholupdate calls reported info ≠ 0.
__global__ void collect_kernel(const int* info, int chunks, int max_cells, int cells, int* flagged) {
  const int cell = blockIdx.x * blockDim.x + threadIdx.x;
  if (cell >= cells) return;
  int any = 0;
  for (int c = 0; c < chunks; ++c) any |= info[static_cast<long long>(c) * max_cells + cell] != 0;
  flagged[cell] = any;
}

// One block of 256 threads per cell; a block whose cell needs nothing returns at once (the
// common case between periodic refactors, so the launch costs almost nothing). Otherwise, in the
// cell's double-precision scratch S (N² complex, global memory: any N fits, and the data is L2
// resident at the sizes this runs at):
//   1. thread (i, j), i ≥ j, strided over the lower triangle: S_ij = Σ_window v_i·conj(v_j)
//      (+ δ on the diagonal);
//   2. a non-finite entry fails the cell (status::non_finite_input);
//   3. right-looking Cholesky, column j at a time: thread 0 takes the pivot's square root, the
//      threads scale column j below it, then update the trailing lower triangle, one element
//      each, strided; three barriers per column;
//   4. on success the factor is written to L in the frames' precision (strict upper zero).
// Status, the pending flag and this frame's counts (recovered, unrecoverable) are written by
// thread 0. Shared memory: one int.
template <class R>
__global__ void refactor_kernel(const typename complex_of<R>::type* ring, int columns, int n, int start, int length,
                                double loading, int all, const int* flagged, int* pending, int* status, int* counts,
                                double2* scratch, typename complex_of<R>::type* factors) {
  using C = typename complex_of<R>::type;
  const int cell = blockIdx.x;
  if (!(all != 0 || flagged[cell] != 0 || pending[cell] != 0)) return;  // uniform across the block
  __shared__ int fail;
  const int tid = threadIdx.x;
  const long long nn = static_cast<long long>(n) * n;
  double2* s = scratch + cell * nn;
  const C* base = ring + static_cast<long long>(cell) * columns * n;
  if (tid == 0) fail = 0;
  for (long long idx = tid; idx < nn; idx += blockDim.x) {
    const int i = static_cast<int>(idx % n), j = static_cast<int>(idx / n);
    if (i < j) continue;
    double re = 0.0, im = 0.0;
    for (int t = 0; t < length; ++t) {
      const C* v = base + static_cast<long long>((start + t) % columns) * n;
      const double ar = v[i].x, ai = v[i].y, br = v[j].x, bi = v[j].y;
      re += ar * br + ai * bi;  // v_i · conj(v_j)
      im += ai * br - ar * bi;
    }
    if (i == j) {
      re += loading;
      im = 0.0;
    }
    s[idx] = double2{re, im};
  }
  __syncthreads();
  for (long long idx = tid; idx < nn; idx += blockDim.x) {
    const int i = static_cast<int>(idx % n), j = static_cast<int>(idx / n);
    if (i >= j && !(isfinite(s[idx].x) && isfinite(s[idx].y))) fail = linalg::status::non_finite_input;
  }
  __syncthreads();
  for (int j = 0; j < n && fail == 0; ++j) {
    if (tid == 0) {
      const double d = s[j + static_cast<long long>(j) * n].x;
      if (!(d > 0.0) || !isfinite(d)) fail = j + 1;
      else s[j + static_cast<long long>(j) * n] = double2{sqrt(d), 0.0};
    }
    __syncthreads();
    if (fail != 0) break;  // read after the barrier: uniform
    const double inverse = 1.0 / s[j + static_cast<long long>(j) * n].x;
    for (int i = j + 1 + tid; i < n; i += blockDim.x) {
      double2& v = s[i + static_cast<long long>(j) * n];
      v = double2{v.x * inverse, v.y * inverse};
    }
    __syncthreads();
    const int rest = n - j - 1;
    for (long long idx = tid; idx < static_cast<long long>(rest) * rest; idx += blockDim.x) {
      const int i = j + 1 + static_cast<int>(idx % rest), k = j + 1 + static_cast<int>(idx / rest);
      if (k > i) continue;
      const double2 a = s[i + static_cast<long long>(j) * n], b = s[k + static_cast<long long>(j) * n];
      double2& v = s[i + static_cast<long long>(k) * n];
      v = double2{v.x - (a.x * b.x + a.y * b.y), v.y - (a.y * b.x - a.x * b.y)};  // −= a·conj(b)
    }
    __syncthreads();
  }
  const int outcome = fail;
  if (outcome == 0) {
    C* l = factors + cell * nn;
    for (long long idx = tid; idx < nn; idx += blockDim.x) {
      const int i = static_cast<int>(idx % n), j = static_cast<int>(idx / n);
      l[idx] = i >= j ? C{static_cast<R>(s[idx].x), static_cast<R>(s[idx].y)} : C{R(0), R(0)};
    }
  }
  if (tid == 0) {
    status[cell] = outcome;
    pending[cell] = outcome != 0;
    if (outcome != 0) atomicAdd(counts + 1, 1);
    else if (flagged[cell] != 0) atomicAdd(counts, 1);
  }
}

template <class C>
struct DeviceFactor {
  const C* l;
  int n;
  COVFLOW_HD Cplx operator()(int i, int j) const {
    const C v = l[i + static_cast<long long>(j) * n];
    return {static_cast<double>(v.x), static_cast<double>(v.y)};
  }
};

struct DeviceModel {
  const Cplx* look_steering;  // [looks × N]
  int looks;
  int has_model;
  const Cplx* steering;       // [emitters × N]
  const double* power;
  const int* jammer;
  int emitters;
  const int* look_emitter;    // [looks]
  const double* look_power;   // [looks]
};

// One thread per beam (cell, look): the two triangular solves with the cell's factor (read from
// global memory, O(N²) per beam in double), the normalisation, the metrics against the model, all
// written into the packed results; the look-0 thread of a cell also packs the cell's status and
// thread 0 this frame's counts. Scratch: 2N complex per beam (y and w) in global memory.
template <class R>
__global__ void beam_kernel(const typename complex_of<R>::type* factors, int cells, int n, DeviceModel model,
                            const int* status, const int* counts, Cplx* work, int* out_status, int* out_counts,
                            float2* out_weights, float* out_sinr, float* out_null) {
  using C = typename complex_of<R>::type;
  const long long beam = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (beam == 0) {
    out_counts[0] = counts[0];
    out_counts[1] = counts[1];
  }
  if (beam >= static_cast<long long>(cells) * model.looks) return;
  const int cell = static_cast<int>(beam / model.looks), look = static_cast<int>(beam % model.looks);
  if (look == 0) out_status[cell] = status[cell];
  Cplx* y = work + beam * 2 * n;
  Cplx* w = y + n;
  const Cplx* a = model.look_steering + static_cast<long long>(look) * n;
  float2* out = out_weights + beam * n;
  out_sinr[beam] = nanf("");
  out_null[beam] = nanf("");
  const DeviceFactor<C> factor{factors + static_cast<long long>(cell) * n * n, n};
  if (status[cell] != 0 || !adaptive::mvdr_weights(factor, n, a, y, w)) {
    for (int m = 0; m < n; ++m) out[m] = float2{nanf(""), nanf("")};
    return;
  }
  for (int m = 0; m < n; ++m) out[m] = float2{static_cast<float>(w[m].re), static_cast<float>(w[m].im)};
  if (model.has_model == 0) return;
  const adaptive::BeamModelView view{model.steering, model.power, model.jammer, model.emitters,
                                     model.look_emitter[look], model.look_power[look]};
  double sinr = 0.0, null_depth = 0.0;
  adaptive::beam_metrics(w, a, n, view, &sinr, &null_depth);
  out_sinr[beam] = static_cast<float>(sinr);
  out_null[beam] = static_cast<float>(null_depth);
}

template <class R>
__global__ void scale_kernel(typename complex_of<R>::type* data, long long count, R factor) {
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < count;
       idx += static_cast<long long>(gridDim.x) * blockDim.x)
    data[idx] = {data[idx].x * factor, data[idx].y * factor};
}

template <class T>
void upload_vector(linalg::cuda::DeviceBuffer<T>& buffer, const std::vector<T>& host, cudaStream_t stream) {
  buffer = linalg::cuda::DeviceBuffer<T>(std::max<std::size_t>(host.size(), 1));
  if (!host.empty()) buffer.upload(std::span<const T>(host.data(), host.size()), stream);
}

template <class R>
class AdaptiveDeviceLaneImpl final : public AdaptiveDeviceLane {
 public:
  using C = typename complex_of<R>::type;

  AdaptiveDeviceLaneImpl(linalg::CudaContext& context, const AdaptiveDeviceParams& params)
      : context_(context), params_(params) {
    context_.make_current();
    const std::size_t n = params.channels, cells = params.max_cells, looks = params.beams.looks;
    const cudaStream_t stream = context_.stream();
    ring_ = linalg::cuda::DeviceBuffer<C>(cells * params.ring_columns * n);
    factors_ = linalg::cuda::DeviceBuffer<C>(cells * n * n);
    info_ = linalg::cuda::DeviceBuffer<int>(std::size_t(params.max_chunks) * cells);
    flagged_ = linalg::cuda::DeviceBuffer<int>(cells);
    pending_ = linalg::cuda::DeviceBuffer<int>(cells);
    status_ = linalg::cuda::DeviceBuffer<int>(cells);
    counts_ = linalg::cuda::DeviceBuffer<int>(2);
    scratch_ = linalg::cuda::DeviceBuffer<double2>(cells * n * n);
    work_ = linalg::cuda::DeviceBuffer<Cplx>(std::max<std::size_t>(cells * looks * 2 * n, 1));
    results_ = linalg::cuda::DeviceBuffer<std::byte>(AdaptiveLayout::of(cells, looks, n).bytes);
    ring_.fill_bytes(0, stream);
    factors_.fill_bytes(0, stream);
    info_.fill_bytes(0, stream);
    flagged_.fill_bytes(0, stream);
    status_.fill_bytes(0, stream);
    counts_.fill_bytes(0, stream);
    pending_.fill_bytes(1, stream);  // every factor is invalid until the first refactor

    const BeamSetup& beams = params.beams;
    auto cplx = [](const std::vector<std::complex<double>>& v) {
      std::vector<Cplx> out(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) out[i] = {v[i].real(), v[i].imag()};
      return out;
    };
    const std::vector<Cplx> look_steering = cplx(beams.look_steering), emitter_steering = cplx(beams.emitter_steering);
    upload_vector(look_steering_, look_steering, stream);
    upload_vector(emitter_steering_, emitter_steering, stream);
    upload_vector(power_, beams.emitter_power, stream);
    upload_vector(jammer_, beams.emitter_jammer, stream);
    upload_vector(look_emitter_, beams.look_emitter, stream);
    upload_vector(look_power_, beams.look_power, stream);
    // The uploads read host vectors that die with this constructor.
    COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));
    model_ = DeviceModel{look_steering_.data(), beams.looks, beams.has_model ? 1 : 0, emitter_steering_.data(),
                         power_.data(), jammer_.data(), static_cast<int>(beams.emitter_power.size()),
                         look_emitter_.data(), look_power_.data()};
  }

  void* ring() override { return ring_.data(); }
  void* factors() override { return factors_.data(); }
  int* chunk_info(int chunk) override {
    if (chunk < 0 || chunk >= params_.max_chunks) throw std::logic_error("adaptive stage: more cholupdate calls than planned");
    return info_.data() + static_cast<std::size_t>(chunk) * params_.max_cells;
  }

  void begin_frame(int cells) override {
    (void)cells;
    context_.make_current();
    const cudaStream_t stream = context_.stream();
    flagged_.fill_bytes(0, stream);
    counts_.fill_bytes(0, stream);
  }

  void write_snapshots(const void* payload, int cells, int snapshots, int first, int count, int position,
                       double scale) override {
    if (count <= 0) return;
    write_kernel<R><<<blocks_for(static_cast<long long>(cells) * count * params_.channels), kThreads, 0,
                      context_.stream()>>>(static_cast<const C*>(payload), cells, snapshots, first, count, position,
                                           params_.ring_columns, params_.channels, static_cast<R>(scale), ring_.data());
    COVFLOW_CHECK_LAUNCH();
  }

  void collect_failures(int chunks, int cells) override {
    collect_kernel<<<(cells + 127) / 128, 128, 0, context_.stream()>>>(info_.data(), chunks, params_.max_cells, cells,
                                                                       flagged_.data());
    COVFLOW_CHECK_LAUNCH();
  }

  void refactor(int cells, bool all, int start, int length) override {
    refactor_kernel<R><<<cells, kRefactorThreads, 0, context_.stream()>>>(
        ring_.data(), params_.ring_columns, params_.channels, start, length, params_.loading, all ? 1 : 0,
        flagged_.data(), pending_.data(), status_.data(), counts_.data(), scratch_.data(), factors_.data());
    COVFLOW_CHECK_LAUNCH();
  }

  void beamform(int cells, const AdaptiveLayout& layout, void* host_staging) override {
    const cudaStream_t stream = context_.stream();
    std::byte* results = results_.data();
    const long long beams = static_cast<long long>(cells) * params_.beams.looks;
    beam_kernel<R><<<static_cast<unsigned>((beams + 127) / 128), 128, 0, stream>>>(
        factors_.data(), cells, params_.channels, model_, status_.data(), counts_.data(), work_.data(),
        reinterpret_cast<int*>(results + layout.status), reinterpret_cast<int*>(results + layout.counts),
        reinterpret_cast<float2*>(results + layout.weights), reinterpret_cast<float*>(results + layout.sinr),
        reinterpret_cast<float*>(results + layout.null_depth));
    COVFLOW_CHECK_LAUNCH();
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(host_staging, results, layout.bytes, cudaMemcpyDeviceToHost, stream));
  }

  void reset() override {
    context_.make_current();
    pending_.fill_bytes(1, context_.stream());
    status_.fill_bytes(0, context_.stream());
  }

  void scale_cell(int cell, double factor) override {
    context_.make_current();
    const long long count = static_cast<long long>(params_.ring_columns) * params_.channels;
    scale_kernel<R><<<blocks_for(count), kThreads, 0, context_.stream()>>>(ring_.data() + cell * count, count,
                                                                           static_cast<R>(factor));
    COVFLOW_CHECK_LAUNCH();
  }

 private:
  linalg::CudaContext& context_;
  AdaptiveDeviceParams params_;
  linalg::cuda::DeviceBuffer<C> ring_, factors_;
  linalg::cuda::DeviceBuffer<int> info_, flagged_, pending_, status_, counts_;
  linalg::cuda::DeviceBuffer<double2> scratch_;
  linalg::cuda::DeviceBuffer<Cplx> work_;
  linalg::cuda::DeviceBuffer<std::byte> results_;
  linalg::cuda::DeviceBuffer<Cplx> look_steering_, emitter_steering_;
  linalg::cuda::DeviceBuffer<double> power_, look_power_;
  linalg::cuda::DeviceBuffer<int> jammer_, look_emitter_;
  DeviceModel model_{};
};

}  // namespace

std::unique_ptr<AdaptiveDeviceLane> make_adaptive_device_lane(linalg::CudaContext& context,
                                                              const AdaptiveDeviceParams& params) {
  if (params.type == replay::ElementType::cf32) return std::make_unique<AdaptiveDeviceLaneImpl<float>>(context, params);
  return std::make_unique<AdaptiveDeviceLaneImpl<double>>(context, params);
}

}  // namespace covflow::stages::detail

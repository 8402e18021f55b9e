// The device side of the adaptive stage (docs/stages.md, "adaptive"): the snapshot ring, the
// failure flags of the cholupdate calls, the window covariances of the cells to refactor and the
// bookkeeping around linalg::potrf (which, like cholupdate and potrs, adaptive_stage.cpp issues
// through linalg on the same stream), the right-hand sides of potrs, and the MVDR beams with their
// SINR and null depth from potrs's solutions, packed for one copy back. The formulas are
// adaptive_math.hpp's, as on the CPU path. Every buffer is allocated in the constructor
// (prepare()); nothing here allocates or synchronises per frame, and all work is issued on the
// Exec's stream.
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

// Whether a cell is refactored this frame: all cells, or one whose update/downdate failed
// (flagged) or whose factor is not valid yet (pending).
__device__ inline bool needs_refactor(int cell, int all, const int* flagged, const int* pending) {
  return all != 0 || flagged[cell] != 0 || pending[cell] != 0;
}

// The calling block's threads, strided over the lower triangle (i ≥ j) of a cell's n×n
// double-precision slot S (column-major): S_ij = Σ_{t<length} v_i·conj(v_j) over ring columns
// start + t (mod columns), plus δ on the diagonal, whose imaginary part is zero. The ring column
// reads are L2 resident at the sizes this runs at; each thread sums its element alone.
template <class C>
__device__ void window_covariance(const C* base, int columns, int n, int start, int length, double loading,
                                  double2* s) {
  const long long nn = static_cast<long long>(n) * n;
  for (long long idx = threadIdx.x; idx < nn; idx += blockDim.x) {
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
}

// Before potrf. One block of 256 threads per cell; a block whose cell needs nothing
// returns at once (its slot already holds the identity, which potrf factors harmlessly), the
// common case between periodic refactors. Otherwise window_covariance into the cell's slot.
// No shared memory, no barrier.
template <class R>
__global__ void covariance_kernel(const typename complex_of<R>::type* ring, int columns, int n, int start, int length,
                                  double loading, int all, const int* flagged, const int* pending, double2* slots) {
  const int cell = blockIdx.x;
  if (!needs_refactor(cell, all, flagged, pending)) return;
  window_covariance(ring + static_cast<long long>(cell) * columns * n, columns, n, start, length, loading,
                    slots + static_cast<long long>(cell) * n * n);
}

// After potrf. One block of 256 threads per cell refactored this frame (the others return at
// once), thread-strided over the n² elements: where potrf's info is 0 the factor is rounded into
// the frames' precision (strict upper triangle zero); every element of the slot goes back to the
// identity, so that the next frame's potrf finds one where no covariance is formed. After a
// barrier (every thread has read pending), thread 0 turns info into the cell's status, its pending
// flag and this frame's counts (recovered, unrecoverable).
template <class R>
__global__ void store_kernel(const int* info, int n, int all, const int* flagged, int* pending, int* status,
                             int* counts, double2* slots, typename complex_of<R>::type* factors) {
  using C = typename complex_of<R>::type;
  const int cell = blockIdx.x;
  if (!needs_refactor(cell, all, flagged, pending)) return;  // uniform across the block
  const int outcome = info[cell];
  const long long nn = static_cast<long long>(n) * n;
  double2* s = slots + cell * nn;
  C* l = factors + cell * nn;
  for (long long idx = threadIdx.x; idx < nn; idx += blockDim.x) {
    const int i = static_cast<int>(idx % n), j = static_cast<int>(idx / n);
    if (outcome == 0) l[idx] = i >= j ? C{static_cast<R>(s[idx].x), static_cast<R>(s[idx].y)} : C{R(0), R(0)};
    s[idx] = double2{i == j ? 1.0 : 0.0, 0.0};
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    status[cell] = outcome;
    pending[cell] = outcome != 0;
    if (outcome != 0) atomicAdd(counts + 1, 1);
    else if (flagged[cell] != 0) atomicAdd(counts, 1);
  }
}

// Every slot the identity (construction: no cell's slot has held a covariance yet).
__global__ void identity_kernel(double2* slots, long long count, int n) {
  const long long nn = static_cast<long long>(n) * n;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < count * nn;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long e = idx % nn;
    slots[idx] = double2{e % n == e / n ? 1.0 : 0.0, 0.0};
  }
}

// Before potrs. One thread per element (cell, look, m), grid-stride: B's column
// (cell, look) ← the look's steering vector, rounded to the frames' type. Memory-bound, coalesced.
template <class R>
__global__ void steering_kernel(const Cplx* look_steering, int per_cell, long long total,
                                typename complex_of<R>::type* solutions) {
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const Cplx a = look_steering[idx % per_cell];
    solutions[idx] = {static_cast<R>(a.re), static_cast<R>(a.im)};
  }
}

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

template <class C>
struct DeviceSolution {
  const C* z;
  COVFLOW_HD Cplx operator()(int m) const { return {static_cast<double>(z[m].x), static_cast<double>(z[m].y)}; }
};

// One thread per beam (cell, look), after potrs: z = R⁻¹a is column `look` of the cell's block of
// solutions (beam-major, N each), w = z / Re(aᴴz) in double (O(N) per beam), the metrics against
// the model (NaN without a model), all written into the packed results; a beam whose weights
// could not be formed gets NaN weights. The look-0 thread of a cell also packs the cell's status
// and thread 0 this frame's counts. Scratch: N complex per beam (w) in global memory.
template <class R>
__global__ void beam_kernel(const typename complex_of<R>::type* solutions, int cells, int n, DeviceModel model,
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
  Cplx* w = work + beam * n;
  const Cplx* a = model.look_steering + static_cast<long long>(look) * n;
  const DeviceSolution<C> solution{solutions + beam * n};
  float2* out = out_weights + beam * n;
  out_sinr[beam] = nanf("");
  out_null[beam] = nanf("");
  if (status[cell] != 0 || !adaptive::mvdr_weights_from_solution(solution, n, a, w)) {
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
    slots_ = linalg::cuda::DeviceBuffer<double2>(cells * n * n);
    refactor_info_ = linalg::cuda::DeviceBuffer<int>(cells);
    solutions_ = linalg::cuda::DeviceBuffer<C>(std::max<std::size_t>(cells * looks * n, 1));
    work_ = linalg::cuda::DeviceBuffer<Cplx>(std::max<std::size_t>(cells * looks * n, 1));
    results_ = linalg::cuda::DeviceBuffer<std::byte>(AdaptiveLayout::of(cells, looks, n).bytes);
    ring_.fill_bytes(0, stream);
    factors_.fill_bytes(0, stream);
    info_.fill_bytes(0, stream);
    flagged_.fill_bytes(0, stream);
    status_.fill_bytes(0, stream);
    counts_.fill_bytes(0, stream);
    pending_.fill_bytes(1, stream);  // every factor is invalid until the first refactor
    refactor_info_.fill_bytes(0, stream);
    solutions_.fill_bytes(0, stream);
    identity_kernel<<<blocks_for(static_cast<long long>(cells * n * n)), kThreads, 0, stream>>>(
        slots_.data(), static_cast<long long>(cells), params.channels);
    COVFLOW_CHECK_LAUNCH();

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

  void* refactor_matrices() override { return slots_.data(); }
  int* refactor_info() override { return refactor_info_.data(); }
  void* solutions() override { return solutions_.data(); }

  void form_covariance(int cells, bool all, int start, int length) override {
    covariance_kernel<R><<<cells, kRefactorThreads, 0, context_.stream()>>>(
        ring_.data(), params_.ring_columns, params_.channels, start, length, params_.loading, all ? 1 : 0,
        flagged_.data(), pending_.data(), slots_.data());
    COVFLOW_CHECK_LAUNCH();
  }

  void store_factors(int cells, bool all) override {
    store_kernel<R><<<cells, kRefactorThreads, 0, context_.stream()>>>(
        refactor_info_.data(), params_.channels, all ? 1 : 0, flagged_.data(), pending_.data(), status_.data(),
        counts_.data(), slots_.data(), factors_.data());
    COVFLOW_CHECK_LAUNCH();
  }

  void load_steering(int cells) override {
    const int per_cell = params_.beams.looks * params_.channels;
    const long long total = static_cast<long long>(cells) * per_cell;
    steering_kernel<R><<<blocks_for(total), kThreads, 0, context_.stream()>>>(look_steering_.data(), per_cell, total,
                                                                              solutions_.data());
    COVFLOW_CHECK_LAUNCH();
  }

  void beamform(int cells, const AdaptiveLayout& layout, void* host_staging) override {
    const cudaStream_t stream = context_.stream();
    std::byte* results = results_.data();
    const long long beams = static_cast<long long>(cells) * params_.beams.looks;
    const unsigned blocks = static_cast<unsigned>((beams + 127) / 128);
    auto* out_status = reinterpret_cast<int*>(results + layout.status);
    auto* out_counts = reinterpret_cast<int*>(results + layout.counts);
    auto* out_weights = reinterpret_cast<float2*>(results + layout.weights);
    auto* out_sinr = reinterpret_cast<float*>(results + layout.sinr);
    auto* out_null = reinterpret_cast<float*>(results + layout.null_depth);
    beam_kernel<R><<<blocks, 128, 0, stream>>>(solutions_.data(), cells, params_.channels, model_, status_.data(),
                                               counts_.data(), work_.data(), out_status, out_counts, out_weights,
                                               out_sinr, out_null);
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
  linalg::cuda::DeviceBuffer<int> info_, flagged_, pending_, status_, counts_, refactor_info_;
  linalg::cuda::DeviceBuffer<double2> slots_;  // potrf's A: [max_cells × N × N], the identity between refactors
  linalg::cuda::DeviceBuffer<C> solutions_;    // potrs's B: [max_cells × looks × N]
  linalg::cuda::DeviceBuffer<Cplx> work_;      // beam_kernel's w: [max_cells × looks × N]
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

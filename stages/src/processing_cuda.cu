// The device side of the covariance and subspace stages: the window combination of the
// covariance stage, and everything the subspace stage does after heev — source counting, the MUSIC
// spectrum through batched cuFFT transforms of the noise eigenvectors, peak search and refinement,
// and the packing of the small results for one copy back. The formulas are those of
// covflow/stages/music_math.hpp and subspace_stage.cpp's file comment (the CPU path); nothing here
// allocates or synchronises per frame: buffers and cuFFT plans are made in prepare() (the lane's
// constructor below), and all work is issued on the Exec's stream.
#include <cuComplex.h>
#include <cufft.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/cuda/warp.cuh"
#include "covflow/linalg/types.hpp"
#include "covflow/stages/music_math.hpp"
#include "processing_device.hpp"

namespace covflow::stages::detail {
namespace {

template <class R> struct complex_of;
template <> struct complex_of<float> { using type = float2; };
template <> struct complex_of<double> { using type = double2; };

constexpr int kThreads = 256;
constexpr int kPeakThreads = 128;
constexpr int kMaxPeaks = 64;  // DOAs kept per cell, at most

unsigned blocks_for(long long work) {
  const long long blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 8192 ? 8192 : blocks));
}

// ---- covariance window ---------------------------------------------------------------------
// One thread per output element (grid-stride): it reads the same element of the `entries` newest
// ring entries (ages 0 … entries−1, entry (head − age) mod window), weighs them by λ^age / Σλ^j in
// double precision and adds the loading on the diagonal. (i, j) and (j, i) see conjugate inputs
// and the same weights in the same order, so the result stays exactly Hermitian. Memory-bound:
// entries × N² × cells loads per frame.
template <class R>
__global__ void window_combine_kernel(const typename complex_of<R>::type* ring, long long entry_elements, int window,
                                      int head, int entries, double forgetting, double normaliser,
                                      long long elements, int n, double loading,
                                      typename complex_of<R>::type* out) {
  using C = typename complex_of<R>::type;
  const long long per_cell = static_cast<long long>(n) * n;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < elements;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    double re = 0.0, im = 0.0, w = 1.0 / normaliser;
    for (int age = 0; age < entries; ++age, w *= forgetting) {
      const int entry = (head - age + window) % window;
      const C v = ring[entry * entry_elements + e];
      re += w * static_cast<double>(v.x);
      im += w * static_cast<double>(v.y);
    }
    if ((e % per_cell) % (n + 1) == 0) re += loading;
    out[e] = C{static_cast<R>(re), static_cast<R>(im)};
  }
}

// ---- subspace: after heev -----------------------------------------------------------------
// One warp per cell (kCellsPerBlock to a block), music::estimate_source_count's walk split over
// the lanes with the same helpers: the lanes write the cell's eigenvalues as float into the packed
// results (coalesced) and put the floored values and their logarithms in shared memory; lane 0
// turns both into prefix sums, in the walk's order (adds only); each lane evaluates the criterion
// for m = lane + 1, lane + 33, … and a butterfly keeps the best (smallest value, ties to the
// larger m: the walk's choice). A thread per cell running the whole walk from global memory would
// do the logarithms and loads one after another.
constexpr int kCellsPerBlock = 4;

template <class R>
__global__ void criterion_kernel(const R* values, const int* info, int cells, int n, double snapshots,
                                 music::Criterion criterion, int* sources, int* out_count, int* out_status,
                                 float* out_values) {
  extern __shared__ double criterion_shared[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int cell = blockIdx.x * kCellsPerBlock + warp;
  if (cell >= cells) return;  // whole warps leave
  double* sum = criterion_shared + 2LL * warp * n;  // prefix sums of the floored eigenvalues
  double* log_sum = sum + n;                        // and of their logarithms
  const R* w = values + static_cast<long long>(cell) * n;
  const double floor_value = music::eigenvalue_floor(static_cast<double>(w[n - 1]), n);
  bool finite = true;
  for (int k = lane; k < n; k += 32) {
    const double raw = static_cast<double>(w[k]);
    out_values[static_cast<long long>(cell) * n + k] = static_cast<float>(raw);
    finite = finite && music::is_finite(raw);
    const double value = raw > floor_value ? raw : floor_value;
    sum[k] = value;
    log_sum[k] = log(value);
  }
  finite = __all_sync(0xffffffffu, finite);
  __syncwarp();
  if (lane == 0 && finite)
    for (int k = 1; k < n; ++k) {
      sum[k] += sum[k - 1];
      log_sum[k] += log_sum[k - 1];
    }
  __syncwarp();
  double best = INFINITY;
  int best_m = 0;
  if (finite)
    for (int m = lane + 1; m <= n; m += 32) {
      const double value = music::criterion_value(sum[m - 1], log_sum[m - 1], m, n, snapshots, criterion);
      if (best_m == 0 || music::criterion_better(value, m, best, best_m)) {
        best = value;
        best_m = m;
      }
    }
  for (int offset = 16; offset > 0; offset >>= 1) {  // lanes without an m (best_m 0) never win
    const double other = __shfl_xor_sync(0xffffffffu, best, offset);
    const int other_m = __shfl_xor_sync(0xffffffffu, best_m, offset);
    if (other_m != 0 && (best_m == 0 || music::criterion_better(other, other_m, best, best_m))) {
      best = other;
      best_m = other_m;
    }
  }
  if (lane != 0) return;
  int status = info[cell];
  const int d = status == 0 ? (finite ? n - best_m : -1) : -1;
  if (status == 0 && d < 0) status = linalg::status::non_finite_input;
  sources[cell] = status == 0 ? d : -1;
  out_count[cell] = status == 0 ? d : -1;
  out_status[cell] = status;
}

// One thread per element of the padded FFT input: cells × N columns × L points; point l < N of
// column k is eigenvector k's element l, the rest zeros.
template <class R>
__global__ void pad_kernel(const typename complex_of<R>::type* vectors, int cells, int n, int length,
                           typename complex_of<R>::type* padded) {
  using C = typename complex_of<R>::type;
  const long long total = static_cast<long long>(cells) * n * length;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long column = idx / length;
    const int l = static_cast<int>(idx % length);
    padded[idx] = l < n ? vectors[column * n + l] : C{R(0), R(0)};
  }
}

// One thread per (cell, l): Q_l = Σ over the cell's noise columns of |F_k[l]|² (steps 1–2).
template <class R>
__global__ void noise_power_kernel(const typename complex_of<R>::type* spectra, const int* sources, int cells, int n,
                                   int length, R* samples) {
  const long long total = static_cast<long long>(cells) * length;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long cell = idx / length;
    const int l = static_cast<int>(idx % length);
    const int d = sources[cell];
    R sum = 0;
    if (d >= 0)
      for (int k = 0; k < n - d; ++k) {
        const auto f = spectra[(cell * n + k) * length + l];
        sum += f.x * f.x + f.y * f.y;
      }
    samples[idx] = sum;
  }
}

// Grid (cells, points / 256), 256 threads: the block loads its cell's r_s = conj(FFT(Q)[s]) / L
// into shared memory (2N reals) and each thread evaluates the series at one grid point (step 4).
template <class R>
__global__ void spectrum_kernel(const typename complex_of<R>::type* coeffs, const int* sources, int n, int length,
                                const double2* omega, int points, double epsilon, double* q_grid, float* spectrum) {
  extern __shared__ unsigned char shared_bytes[];
  R* re = reinterpret_cast<R*>(shared_bytes);
  R* im = re + n;
  const int cell = blockIdx.x;
  const auto* c = coeffs + static_cast<long long>(cell) * (length / 2 + 1);
  for (int s = threadIdx.x; s < n; s += blockDim.x) {
    re[s] = c[s].x / static_cast<R>(length);
    im[s] = -c[s].y / static_cast<R>(length);
  }
  __syncthreads();
  const int i = blockIdx.y * blockDim.x + threadIdx.x;
  if (i >= points) return;
  const int d = sources[cell];
  const long long at = static_cast<long long>(cell) * points + i;
  if (d < 0) {
    q_grid[at] = nan("");
    if (spectrum != nullptr) spectrum[at] = nanf("");
    return;
  }
  const double floor_value = double(n - d) * n * epsilon;
  const double q = fmax(music::null_spectrum(re, im, n, omega[i].x, omega[i].y), floor_value);
  q_grid[at] = q;
  if (spectrum != nullptr) spectrum[at] = static_cast<float>(-10.0 * log10(q));
}

// (q, index) ordering of peak candidates: deeper first, then lower index — the CPU path's order.
__device__ bool before(double qa, unsigned ia, double qb, unsigned ib) { return qa < qb || (qa == qb && ia < ib); }

// One block of 128 threads per cell. Round t (t < wanted = min(d, max_sources)): each thread
// scans grid points tid+1, tid+1+128, … for interior local minima of Q that come after the
// previous round's pick in (q, index) order and keeps its best; a shared-memory reduction picks
// the block's best. Then warp w refines picks w, w + 4, … by music::refine_minimum_by (double
// precision, r_s in shared memory), each evaluation of Q, Q' and Q'' split over the warp's lanes
// (terms s = lane + 1, lane + 33, …) and summed by a butterfly, so every lane sees the same values
// and takes the same Newton steps; thread 0 sorts the angles and writes the DOA row. (With one
// thread per pick each evaluation would be a serial chain of N − 1 double sincos, which would make
// the refinement most of the subspace stage's time after heev.)
// Shared memory: 2N reals of r_s plus 128 (q, index) pairs and 64 picks.
template <class R>
__global__ void peaks_kernel(const typename complex_of<R>::type* coeffs, const int* sources, int n, int length,
                             const double* grid_u, const double* q_grid, int points, int max_sources,
                             double spacing, float* doa) {
  extern __shared__ unsigned char shared_bytes[];
  R* re = reinterpret_cast<R*>(shared_bytes);
  R* im = re + n;
  __shared__ double best_q[kPeakThreads];
  __shared__ unsigned best_i[kPeakThreads];
  __shared__ unsigned picks[kMaxPeaks];
  __shared__ double angles[kMaxPeaks];
  __shared__ int found;

  const int cell = blockIdx.x;
  const int tid = threadIdx.x;
  float* row = doa + static_cast<long long>(cell) * max_sources;
  for (int k = tid; k < max_sources; k += blockDim.x) row[k] = nanf("");
  const int d = sources[cell];
  const int wanted = d < 0 ? 0 : min(min(d, max_sources), kMaxPeaks);
  if (wanted == 0) return;  // uniform across the block
  const auto* c = coeffs + static_cast<long long>(cell) * (length / 2 + 1);
  for (int s = tid; s < n; s += blockDim.x) {
    re[s] = c[s].x / static_cast<R>(length);
    im[s] = -c[s].y / static_cast<R>(length);
  }
  const double* q = q_grid + static_cast<long long>(cell) * points;
  if (tid == 0) found = 0;
  double previous_q = -1.0;  // q ≥ floor > 0: every candidate comes after (−1, 0)
  unsigned previous_i = 0;
  __syncthreads();
  for (int round = 0; round < wanted; ++round) {
    double mine_q = INFINITY;
    unsigned mine_i = 0xffffffffu;
    for (int i = tid + 1; i + 1 < points; i += blockDim.x) {
      const double v = q[i];
      if (!(v < q[i - 1] && v <= q[i + 1])) continue;
      if (!before(previous_q, previous_i, v, static_cast<unsigned>(i))) continue;
      if (before(v, static_cast<unsigned>(i), mine_q, mine_i)) {
        mine_q = v;
        mine_i = static_cast<unsigned>(i);
      }
    }
    best_q[tid] = mine_q;
    best_i[tid] = mine_i;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
      if (tid < stride && before(best_q[tid + stride], best_i[tid + stride], best_q[tid], best_i[tid])) {
        best_q[tid] = best_q[tid + stride];
        best_i[tid] = best_i[tid + stride];
      }
      __syncthreads();
    }
    const double pick_q = best_q[0];
    const unsigned pick_i = best_i[0];
    __syncthreads();  // everyone has read the winner before the next round overwrites it
    if (pick_i == 0xffffffffu) break;
    if (tid == 0) {
      picks[round] = pick_i;
      found = round + 1;
    }
    previous_q = pick_q;
    previous_i = pick_i;
  }
  __syncthreads();
  const int lane = tid % 32;
  const auto at = [&](double u) {
    music::NullSpectrumDerivatives sums = music::null_spectrum_terms(re, im, n, u, 1 + lane, 32);
    sums.q = static_cast<double>(re[0]) + linalg::cuda::warp_sum(sums.q);
    sums.dq = linalg::cuda::warp_sum(sums.dq);
    sums.d2q = linalg::cuda::warp_sum(sums.d2q);
    return sums;
  };
  for (int p = tid / 32; p < found; p += blockDim.x / 32) {  // warp-uniform
    const unsigned i = picks[p];
    const double u = music::refine_minimum_by(at, grid_u[i - 1], grid_u[i], grid_u[i + 1]);
    if (lane == 0) angles[p] = music::angle_of(u, spacing);
  }
  __syncthreads();
  if (tid == 0) {
    for (int a = 1; a < found; ++a) {  // insertion sort, ascending angle
      const double v = angles[a];
      int b = a;
      while (b > 0 && angles[b - 1] > v) {
        angles[b] = angles[b - 1];
        --b;
      }
      angles[b] = v;
    }
    for (int a = 0; a < found; ++a) row[a] = static_cast<float>(angles[a]);
  }
}

inline cufftResult forward_in_place(cufftHandle plan, float2* data) { return cufftExecC2C(plan, data, data, CUFFT_FORWARD); }
inline cufftResult forward_in_place(cufftHandle plan, double2* data) { return cufftExecZ2Z(plan, data, data, CUFFT_FORWARD); }
inline cufftResult real_to_complex(cufftHandle plan, float* in, float2* out) { return cufftExecR2C(plan, in, out); }
inline cufftResult real_to_complex(cufftHandle plan, double* in, double2* out) { return cufftExecD2Z(plan, in, out); }

template <class R>
class SubspaceDeviceLaneImpl final : public SubspaceDeviceLane {
 public:
  using C = typename complex_of<R>::type;

  SubspaceDeviceLaneImpl(linalg::CudaContext& context, const SubspaceDeviceParams& params)
      : context_(context), params_(params), length_(music::autocorrelation_fft_length(params.channels)),
        points_(static_cast<int>(params.grid_u.size())) {
    if (params.max_sources > kMaxPeaks)
      throw std::invalid_argument("subspace stage: at most 64 DOAs per cell are kept (max_sources)");
    context_.make_current();
    const int n = params.channels, cells = params.max_cells;
    if (static_cast<long long>(cells) * n > std::numeric_limits<int>::max())
      throw std::invalid_argument("subspace stage: cells × elements exceeds cuFFT's batch limit");
    if ((points_ + kThreads - 1) / kThreads > 65535)
      throw std::invalid_argument("subspace stage: the angle grid has too many points for the spectrum kernel");
    // r_s lives in shared memory (2N reals), as do the criterion kernel's prefix sums (2N doubles
    // for each of its kCellsPerBlock cells); above the default 48 KiB per block, opt in.
    const std::size_t lag_bytes = 2 * std::size_t(n) * sizeof(R);
    const std::size_t criterion_bytes = kCellsPerBlock * 2 * std::size_t(n) * sizeof(double);
    if (std::max(lag_bytes + 4096, criterion_bytes) > context_.info().shared_memory_per_block)
      throw std::invalid_argument("subspace stage: too many elements for the shared-memory spectrum kernels");
    if (lag_bytes > 48 * 1024) {
      COVFLOW_CUDA_TRY(cudaFuncSetAttribute(spectrum_kernel<R>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(lag_bytes)));
      COVFLOW_CUDA_TRY(cudaFuncSetAttribute(peaks_kernel<R>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(lag_bytes)));
    }
    if (criterion_bytes > 48 * 1024)
      COVFLOW_CUDA_TRY(cudaFuncSetAttribute(criterion_kernel<R>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(criterion_bytes)));
    padded_ = linalg::cuda::DeviceBuffer<C>(std::size_t(cells) * n * length_);
    samples_ = linalg::cuda::DeviceBuffer<R>(std::size_t(cells) * length_);
    coeffs_ = linalg::cuda::DeviceBuffer<C>(std::size_t(cells) * (length_ / 2 + 1));
    q_grid_ = linalg::cuda::DeviceBuffer<double>(std::size_t(cells) * std::max(points_, 1));
    grid_u_ = linalg::cuda::DeviceBuffer<double>(std::max(points_, 1));
    omega_ = linalg::cuda::DeviceBuffer<double2>(std::max(points_, 1));
    sources_ = linalg::cuda::DeviceBuffer<int>(cells);
    const ResultLayout layout =
        ResultLayout::of(cells, n, params.max_sources, params.keep_spectrum ? std::size_t(points_) : 0);
    results_ = linalg::cuda::DeviceBuffer<std::byte>(layout.bytes);

    std::vector<double2> omega(points_);
    for (int i = 0; i < points_; ++i) {
      const double angle = -2.0 * 3.141592653589793 * params.grid_u[i];
      omega[i] = double2{std::cos(angle), std::sin(angle)};
    }
    const cudaStream_t stream = context_.stream();
    if (points_ > 0) {
      grid_u_.upload(std::span<const double>(params.grid_u.data(), params.grid_u.size()), stream);
      omega_.upload(std::span<const double2>(omega.data(), omega.size()), stream);
    }
    padded_.fill_bytes(0, stream);
    // The uploads read host vectors that die with this constructor.
    COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));

    int dims[] = {length_};
    constexpr bool single = std::is_same_v<R, float>;
    COVFLOW_CUFFT_TRY(cufftPlanMany(&forward_, 1, dims, nullptr, 1, length_, nullptr, 1, length_,
                                    single ? CUFFT_C2C : CUFFT_Z2Z, cells * n));
    have_forward_ = true;
    COVFLOW_CUFFT_TRY(cufftPlanMany(&r2c_, 1, dims, nullptr, 1, length_, nullptr, 1, length_ / 2 + 1,
                                    single ? CUFFT_R2C : CUFFT_D2Z, cells));
    have_r2c_ = true;
    COVFLOW_CUFFT_TRY(cufftSetStream(forward_, stream));
    COVFLOW_CUFFT_TRY(cufftSetStream(r2c_, stream));
  }

  ~SubspaceDeviceLaneImpl() override {
    if (have_forward_) cufftDestroy(forward_);
    if (have_r2c_) cufftDestroy(r2c_);
  }

  void run(const void* eigenvalues, const void* eigenvectors, const int* info, int cells, double snapshots,
           const ResultLayout& layout, void* host_staging) override {
    context_.make_current();
    const cudaStream_t stream = context_.stream();
    const int n = params_.channels;
    std::byte* results = results_.data();
    auto* out_count = reinterpret_cast<int*>(results + layout.source_count);
    auto* out_status = reinterpret_cast<int*>(results + layout.cell_status);
    auto* out_doa = reinterpret_cast<float*>(results + layout.doa);
    auto* out_values = reinterpret_cast<float*>(results + layout.eigenvalues);
    auto* out_spectrum = params_.keep_spectrum ? reinterpret_cast<float*>(results + layout.spectrum) : nullptr;

    criterion_kernel<R><<<(cells + kCellsPerBlock - 1) / kCellsPerBlock, 32 * kCellsPerBlock,
                          kCellsPerBlock * 2 * n * sizeof(double), stream>>>(static_cast<const R*>(eigenvalues), info, cells, n,
                                                                    snapshots, params_.criterion, sources_.data(),
                                                                    out_count, out_status, out_values);
    COVFLOW_CHECK_LAUNCH();
    pad_kernel<R><<<blocks_for(static_cast<long long>(cells) * n * length_), kThreads, 0, stream>>>(
        static_cast<const C*>(eigenvectors), cells, n, length_, padded_.data());
    COVFLOW_CHECK_LAUNCH();
    // Plans are made for max_cells; the rows past `cells` are transformed too, and never read.
    COVFLOW_CUFFT_TRY(forward_in_place(forward_, padded_.data()));
    noise_power_kernel<R><<<blocks_for(static_cast<long long>(cells) * length_), kThreads, 0, stream>>>(
        padded_.data(), sources_.data(), cells, n, length_, samples_.data());
    COVFLOW_CHECK_LAUNCH();
    COVFLOW_CUFFT_TRY(real_to_complex(r2c_, samples_.data(), coeffs_.data()));
    if (points_ > 0) {
      const dim3 grid(static_cast<unsigned>(cells), static_cast<unsigned>((points_ + kThreads - 1) / kThreads));
      spectrum_kernel<R><<<grid, kThreads, 2 * n * sizeof(R), stream>>>(
          coeffs_.data(), sources_.data(), n, length_, omega_.data(), points_,
          static_cast<double>(std::numeric_limits<R>::epsilon()), q_grid_.data(), out_spectrum);
      COVFLOW_CHECK_LAUNCH();
    }
    peaks_kernel<R><<<cells, kPeakThreads, 2 * n * sizeof(R), stream>>>(
        coeffs_.data(), sources_.data(), n, length_, grid_u_.data(), q_grid_.data(), points_, params_.max_sources,
        params_.spacing_wavelengths, out_doa);
    COVFLOW_CHECK_LAUNCH();
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(host_staging, results, layout.bytes, cudaMemcpyDeviceToHost, stream));
  }

 private:
  linalg::CudaContext& context_;
  SubspaceDeviceParams params_;
  int length_;
  int points_;
  linalg::cuda::DeviceBuffer<C> padded_;
  linalg::cuda::DeviceBuffer<R> samples_;
  linalg::cuda::DeviceBuffer<C> coeffs_;
  linalg::cuda::DeviceBuffer<double> q_grid_;
  linalg::cuda::DeviceBuffer<double> grid_u_;
  linalg::cuda::DeviceBuffer<double2> omega_;
  linalg::cuda::DeviceBuffer<int> sources_;
  linalg::cuda::DeviceBuffer<std::byte> results_;
  cufftHandle forward_{};
  cufftHandle r2c_{};
  bool have_forward_ = false;
  bool have_r2c_ = false;
};

}  // namespace

void window_combine(linalg::CudaContext& context, replay::ElementType type, const void* ring,
                    std::int64_t entry_elements, int window, int head, int entries, double forgetting,
                    std::int64_t elements, int n, double loading, void* out) {
  context.make_current();
  double normaliser = 0.0, w = 1.0;
  for (int i = 0; i < entries; ++i, w *= forgetting) normaliser += w;
  const cudaStream_t stream = context.stream();
  if (type == replay::ElementType::cf32)
    window_combine_kernel<float><<<blocks_for(elements), kThreads, 0, stream>>>(
        static_cast<const float2*>(ring), entry_elements, window, head, entries, forgetting, normaliser, elements, n,
        loading, static_cast<float2*>(out));
  else
    window_combine_kernel<double><<<blocks_for(elements), kThreads, 0, stream>>>(
        static_cast<const double2*>(ring), entry_elements, window, head, entries, forgetting, normaliser, elements, n,
        loading, static_cast<double2*>(out));
  COVFLOW_CHECK_LAUNCH();
}

std::unique_ptr<SubspaceDeviceLane> make_subspace_device_lane(linalg::CudaContext& context,
                                                              const SubspaceDeviceParams& params) {
  if (params.type == replay::ElementType::cf32) return std::make_unique<SubspaceDeviceLaneImpl<float>>(context, params);
  return std::make_unique<SubspaceDeviceLaneImpl<double>>(context, params);
}

}  // namespace covflow::stages::detail

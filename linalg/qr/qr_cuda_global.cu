// The QR kernels for what the register kernels cannot hold, working on global memory directly —
// LAPACK's unblocked ?geqr2, ?org2r and ?larf one reflector at a time — and the pass that writes
// NaN over the matrices whose input held a NaN or an Inf.
//
// global_factor_kernel — one block of 256 threads per matrix on a panel taller than a cluster of
//   blocks holds (more than 16 × 1024 rows). Per column: the tail's sum of squares by a block
//   reduction (fixed order: warp butterflies, then the eight warp sums in order), the reflector
//   (qr_cuda_device.cuh), the tail scaled into v, then each warp applies Hᴴ to its share of the
//   panel's later columns (a warp per column: lanes stride the rows, a butterfly for vᴴa_c).
// global_apply_kernel — a warp per column of the logical C (8 per block), the reflectors read from
//   global memory; no barrier (each warp owns its column).
// global_org2r_kernel — one block per matrix: ?org2r on a panel, columns from last to first.
// poison_kernel — a grid over each flagged matrix's elements (up to 64 blocks of 256 per matrix);
//   a block whose matrix has info 0 returns at once.
// These are correctness paths (their global-memory traffic grows like m·n² per panel); the sizes
// covflow's pipeline uses never reach them. Budget: 256 threads and 30–66 registers per thread,
// shared memory only the eight warp sums of a block reduction.
#include <algorithm>

#include "covflow/linalg/types.hpp"
#include "qr_cuda_device.cuh"
#include "qr_cuda_launch.hpp"

namespace covflow::linalg::detail::qr {
namespace {

constexpr int kGlobalThreads = 256;
constexpr int kGlobalWarps = kGlobalThreads / 32;

// Sum over the block in a fixed order; every thread gets the result. `scratch` holds kGlobalWarps.
template <class X>
__device__ X block_sum(X v, X* scratch) {
  v = warp_sum(v);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if ((threadIdx.x & 31) == 0) scratch[warp] = v;
  __syncthreads();
  X total = scratch[0];
  for (int w = 1; w < kGlobalWarps; ++w) total += scratch[w];
  __syncthreads();
  return total;
}
template <class R>
__device__ R block_max(R v, R* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if ((threadIdx.x & 31) == 0) scratch[warp] = v;
  __syncthreads();
  R total = scratch[0];
  for (int w = 1; w < kGlobalWarps; ++w) total = fmax(total, scratch[w]);
  __syncthreads();
  return total;
}

template <class D>
__global__ void __launch_bounds__(kGlobalThreads) global_factor_kernel(FactorArgs<D> args) {
  using R = sreal_t<D>;
  __shared__ R scratch[kGlobalWarps];
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid / 32;
  const long long b = args.first + blockIdx.y;
  D* A = args.a + b * args.stride;
  const long long lda = args.lda;
  const int rows = args.rows, cols = args.cols;

  if (args.check == 1) {
    bool finite = true;
    for (int c = 0; c < cols; ++c)
      for (int i = tid; i < rows; i += kGlobalThreads) finite = finite && is_finite(A[i + c * lda]);
    if (__syncthreads_or(!finite) && tid == 0) args.info[b] = status::non_finite_input;
  }

  for (int j = 0; j < args.reflectors; ++j) {
    D* x = A + j * lda;
    R ssq = R(0);
    for (int i = j + 1 + tid; i < rows; i += kGlobalThreads) ssq += abs2(x[i]);
    ssq = block_sum(ssq, scratch);
    R xnorm;
    if (needs_rescaling(ssq)) {
      R largest = R(0);
      for (int i = j + 1 + tid; i < rows; i += kGlobalThreads) largest = fmax(largest, max_abs(x[i]));
      largest = block_max(largest, scratch);
      if (largest == R(0) || !isfinite(largest)) {
        xnorm = largest;
      } else {
        const R unit = rescue_unit(largest), inverse = R(1) / unit;
        R scaled = R(0);
        for (int i = j + 1 + tid; i < rows; i += kGlobalThreads) scaled += abs2(x[i] * inverse);
        xnorm = unit * sqrt(block_sum(scaled, scratch));
      }
    } else {
      xnorm = sqrt(ssq);
    }
    const Reflector<D> h = make_reflector(x[j], xnorm);
    __syncthreads();  // α read everywhere before it is overwritten
    for (int i = j + 1 + tid; i < rows; i += kGlobalThreads) x[i] = x[i] * h.scale;
    if (tid == 0) {
      x[j] = from_real<D>(h.beta);
      args.tau[b * args.tau_stride + j] = h.tau;
    }
    __syncthreads();
    const D ctau = conj_of(h.tau);
    for (int c = j + 1 + warp; c < cols; c += kGlobalWarps) {
      D* y = A + c * lda;
      D s = zero_of<D>();
      for (int i = j + 1 + lane; i < rows; i += 32) s = fma_conj(s, x[i], y[i]);
      s = warp_sum(s) + y[j];
      __syncwarp();
      const D f = ctau * s;
      if (lane == 0) y[j] -= f;
      const D g = -f;
      for (int i = j + 1 + lane; i < rows; i += 32) y[i] = fma_(y[i], g, x[i]);
    }
    __syncthreads();
  }
}

template <class D>
__global__ void __launch_bounds__(kGlobalThreads) global_apply_kernel(ApplyArgs<D> args) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int col = static_cast<int>(blockIdx.x) * kGlobalWarps + static_cast<int>(threadIdx.x) / 32;
  if (col >= args.cols) return;  // the whole warp
  const long long b = args.first + blockIdx.y;
  const D* V = args.v + b * args.stride_v;
  const D* tau = args.tau + b * args.tau_stride;
  D* C = args.c + b * args.stride_c;
  const long long ldc = args.ldc;
  const int rows = args.rows;
  const auto at = [&](int i) -> long long {
    return args.transposed ? col + static_cast<long long>(i) * ldc : i + static_cast<long long>(col) * ldc;
  };
  const auto load = [&](int i) { return args.transposed ? conj_of(C[at(i)]) : C[at(i)]; };
  const auto store = [&](int i, D value) { C[at(i)] = args.transposed ? conj_of(value) : value; };

  if (args.identity) {
    for (int i = lane; i < rows; i += 32) store(i, from_real<D>(sreal_t<D>(i == col ? 1 : 0)));
    for (int i = lane; i < args.zero_above; i += 32) C[at(i - args.zero_above)] = zero_of<D>();
  } else if (args.info != nullptr) {
    bool finite = true;
    for (int i = lane; i < rows; i += 32) finite = finite && is_finite(C[at(i)]);
    if (__any_sync(0xffffffffu, !finite) && lane == 0) args.info[b] = status::non_finite_input;
  }
  __syncwarp();
  const int k = args.reflectors;
  for (int step = 0; step < k; ++step) {
    const int p = args.backward ? k - 1 - step : step;
    const D* v = V + static_cast<long long>(p) * args.ldv;
    D s = zero_of<D>();
    for (int i = p + lane; i < rows; i += 32) s = fma_conj(s, i == p ? from_real<D>(sreal_t<D>(1)) : v[i], load(i));
    s = warp_sum(s);
    const D f = -((args.backward ? tau[p] : conj_of(tau[p])) * s);
    for (int i = p + lane; i < rows; i += 32) store(i, fma_(load(i), f, i == p ? from_real<D>(sreal_t<D>(1)) : v[i]));
    __syncwarp();
  }
}

template <class D>
__global__ void __launch_bounds__(kGlobalThreads) global_org2r_kernel(D* a, long long lda, long long stride,
                                                                      const D* tau_all, long long tau_stride, int rows,
                                                                      int cols, int zero_above, long long first) {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid / 32;
  const long long b = first + blockIdx.y;
  D* A = a + b * stride;
  const D* tau = tau_all + b * tau_stride;
  for (int e = tid; e < zero_above * cols; e += kGlobalThreads)
    A[static_cast<long long>(e % zero_above - zero_above) + static_cast<long long>(e / zero_above) * lda] = zero_of<D>();
  for (int p = cols - 1; p >= 0; --p) {
    D* v = A + p * lda;
    const D t = tau[p];
    for (int c = p + 1 + warp; c < cols; c += kGlobalWarps) {  // H_p·A(p:, p+1:)
      D* y = A + c * lda;
      D s = zero_of<D>();
      for (int i = p + 1 + lane; i < rows; i += 32) s = fma_conj(s, v[i], y[i]);
      s = warp_sum(s) + y[p];
      __syncwarp();
      const D f = t * s;
      if (lane == 0) y[p] -= f;
      const D g = -f;
      for (int i = p + 1 + lane; i < rows; i += 32) y[i] = fma_(y[i], g, v[i]);
    }
    __syncthreads();
    const D minus_t = -t;
    for (int i = p + 1 + tid; i < rows; i += kGlobalThreads) v[i] = minus_t * v[i];
    for (int i = tid; i < p; i += kGlobalThreads) v[i] = zero_of<D>();
    if (tid == 0) v[p] = from_real<D>(sreal_t<D>(1)) - t;
    __syncthreads();
  }
}

template <class D>
__global__ void poison_kernel(D* a, long long lda, long long stride, int rows, int cols, D* tau, long long tau_stride,
                              int k, const int* info, long long first) {
  const long long b = first + blockIdx.y;
  if (info[b] == 0) return;
  const long long elements = static_cast<long long>(rows) * cols;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < elements;
       e += static_cast<long long>(gridDim.x) * blockDim.x)
    a[b * stride + e % rows + (e / rows) * lda] = nan_of<D>();
  if (blockIdx.x == 0)
    for (int e = static_cast<int>(threadIdx.x); e < k; e += static_cast<int>(blockDim.x)) tau[b * tau_stride + e] = nan_of<D>();
}

template <class Kernel, class Args>
void launch_per_matrix(Kernel kernel, unsigned blocks_x, long long count, cudaStream_t stream, Args args) {
  for (long long first = 0; first < count; first += kMaxGridY) {
    args.first = first;
    const unsigned matrices = static_cast<unsigned>(std::min(kMaxGridY, count - first));
    kernel<<<dim3(blocks_x, matrices), kGlobalThreads, 0, stream>>>(args);
    COVFLOW_CHECK_LAUNCH();
  }
}

}  // namespace

template <class D>
void launch_global_factor(FactorArgs<D> args, long long count, cudaStream_t stream) {
  launch_per_matrix(global_factor_kernel<D>, 1, count, stream, args);
}

template <class D>
void launch_global_apply(ApplyArgs<D> args, long long count, cudaStream_t stream) {
  launch_per_matrix(global_apply_kernel<D>, static_cast<unsigned>((args.cols + kGlobalWarps - 1) / kGlobalWarps), count,
                    stream, args);
}

template <class D>
void launch_global_org2r(D* a, long long lda, long long stride, const D* tau, long long tau_stride, int rows, int cols,
                         int zero_above, long long count, cudaStream_t stream) {
  for (long long first = 0; first < count; first += kMaxGridY) {
    const unsigned matrices = static_cast<unsigned>(std::min(kMaxGridY, count - first));
    global_org2r_kernel<D><<<dim3(1, matrices), kGlobalThreads, 0, stream>>>(a, lda, stride, tau, tau_stride, rows, cols,
                                                                             zero_above, first);
    COVFLOW_CHECK_LAUNCH();
  }
}

template <class D>
void launch_poison_flagged(D* a, long long lda, long long stride, int rows, int cols, D* tau, long long tau_stride, int k,
                           const int* info, long long count, cudaStream_t stream) {
  const long long elements = static_cast<long long>(rows) * cols;
  const unsigned blocks = static_cast<unsigned>(std::clamp<long long>((elements + 255) / 256, 1, 64));
  for (long long first = 0; first < count; first += kMaxGridY) {
    const unsigned matrices = static_cast<unsigned>(std::min(kMaxGridY, count - first));
    poison_kernel<D><<<dim3(blocks, matrices), 256, 0, stream>>>(a, lda, stride, rows, cols, tau, tau_stride, k, info, first);
    COVFLOW_CHECK_LAUNCH();
  }
}

#define COVFLOW_QR_GLOBAL(D)                                                                                       \
  template void launch_global_factor<D>(FactorArgs<D>, long long, cudaStream_t);                                 \
  template void launch_global_apply<D>(ApplyArgs<D>, long long, cudaStream_t);                                   \
  template void launch_global_org2r<D>(D*, long long, long long, const D*, long long, int, int, int, long long,     \
                                       cudaStream_t);                                                              \
  template void launch_poison_flagged<D>(D*, long long, long long, int, int, D*, long long, int, const int*,        \
                                         long long, cudaStream_t);
COVFLOW_QR_GLOBAL(float)
COVFLOW_QR_GLOBAL(double)
COVFLOW_QR_GLOBAL(Cx<float>)
COVFLOW_QR_GLOBAL(Cx<double>)
#undef COVFLOW_QR_GLOBAL

}  // namespace covflow::linalg::detail::qr

// geqrf for tiny matrices (n ≤ 32 columns, m ≤ 128 rows): one group of G lanes per matrix (G the
// power of two ≥ n), the matrix in shared memory, after A. Abdelfattah, A. Haidar, S. Tomov,
// J. Dongarra, "Batched one-sided factorizations of tiny matrices using GPUs: challenges and
// countermeasures", J. Comput. Sci. 26 (2018), §8: for QR, y = vᴴC is best computed as
// independent dot products, one per column and thread, from shared memory, rather than as a
// reduction across threads per column. Here lane c owns column c of the trailing matrix: per
// reflector it forms its own vᴴ·A(:, c) and updates its own column, with one __syncwarp of the
// group between reflectors; the reflector itself (the norm of the column below the diagonal) is a
// sum over the group's lanes. Several groups share a block (§9). The matrix is read once and
// written once; reflectors as LAPACK's ?larfg makes them (qr_cuda_device.cuh), NaN input handled
// as the other geqrf paths do.
#include <algorithm>

#include "../common/device_scalar.cuh"
#include "covflow/linalg/cuda/check.hpp"
#include "qr_cuda_device.cuh"
#include "qr_cuda_launch.hpp"

namespace covflow::linalg::detail::qr {
namespace {

constexpr int kTinyThreads = 128;
constexpr std::size_t kTinySharedLimit = 200 * 1024;

template <class D>
struct TinyArgs {
  D* a;
  long long lda, stride;
  D* tau;
  int* info;
  int m, n, lds;
  long long count;
};

template <int G, class R>
__device__ inline R group_max(R v, unsigned mask) {
#pragma unroll
  for (int offset = G / 2; offset > 0; offset >>= 1) v = fmax(v, __shfl_xor_sync(mask, v, offset, G));
  return v;
}

template <class D, int G>
__global__ void __launch_bounds__(kTinyThreads) tiny_geqrf_kernel(TinyArgs<D> args) {
  using R = sreal_t<D>;
  extern __shared__ __align__(16) unsigned char raw[];
  const int groups = blockDim.x / G;
  const int group = threadIdx.x / G, lane = threadIdx.x % G;
  const unsigned mask = cuda::group_mask<G>();
  const int m = args.m, n = args.n, k = min(m, n), lds = args.lds;
  D* s = reinterpret_cast<D*>(raw) + static_cast<long long>(group) * lds * n;
  for (long long block = blockIdx.x;; block += gridDim.x) {
    if (block * groups >= args.count) return;
    const long long b = block * groups + group;
    if (b >= args.count) return;  // whole groups leave together
    D* a = args.a + b * args.stride;
    D* tau = args.tau + b * k;
    bool finite = true;
    for (int e = lane; e < m * n; e += G) {
      const int i = e % m, c = e / m;
      const D v = a[i + c * args.lda];
      s[i + c * lds] = v;
      finite = finite && is_finite(v);
    }
    if (!__all_sync(mask, finite)) {
      for (int e = lane; e < m * n; e += G) a[e % m + (e / m) * args.lda] = nan_of<D>();
      for (int j = lane; j < k; j += G) tau[j] = nan_of<D>();
      if (lane == 0) args.info[b] = status::non_finite_input;
      continue;
    }
    __syncwarp(mask);
    for (int j = 0; j < k; ++j) {
      R ssq = R(0);
      for (int i = j + 1 + lane; i < m; i += G) ssq += abs2(s[i + j * lds]);
      ssq = cuda::group_sum<G>(ssq);
      const D alpha = s[j + j * lds];
      Reflector<D> h;
      if (!fast_reflector(alpha, ssq, h)) {
        // The sum of squares left its safe range: the norm again, scaled by the largest entry.
        R big = R(0);
        for (int i = j + 1 + lane; i < m; i += G)
          big = fmax(big, fmax(fabs(real_part(s[i + j * lds])), fabs(imag_part(s[i + j * lds]))));
        big = group_max<G>(big, mask);
        R scaled = R(0);
        const R unit = rescue_unit(big);
        if (big > R(0)) {
          const R inverse = R(1) / unit;
          for (int i = j + 1 + lane; i < m; i += G) scaled += abs2(s[i + j * lds] * inverse);
        }
        scaled = cuda::group_sum<G>(scaled);
        h = make_reflector(alpha, big > R(0) ? unit * sqrt(scaled) : big);
      }
      if (!h.identity)
        for (int i = j + 1 + lane; i < m; i += G) s[i + j * lds] = s[i + j * lds] * h.scale;
      __syncwarp(mask);  // v complete; every lane has read α
      if (lane == 0) {
        s[j + j * lds] = from_real<D>(h.beta);
        tau[j] = h.tau;
      }
      if (!h.identity) {
        const D ctau = conj_of(h.tau);
        for (int c = j + 1 + lane; c < n; c += G) {
          // w = vᴴ·A(:, c) with v(j) = 1, two chains to halve the latency; then A(:, c) −= v·τ̄w.
          D w0 = s[j + c * lds], w1 = zero_of<D>();
          int i = j + 1;
          for (; i + 1 < m; i += 2) {
            w0 = fma_conj(w0, s[i + j * lds], s[i + c * lds]);
            w1 = fma_conj(w1, s[i + 1 + j * lds], s[i + 1 + c * lds]);
          }
          if (i < m) w0 = fma_conj(w0, s[i + j * lds], s[i + c * lds]);
          const D w = ctau * (w0 + w1);
          s[j + c * lds] = s[j + c * lds] - w;
          for (int r = j + 1; r < m; ++r) s[r + c * lds] = fma_(s[r + c * lds], -w, s[r + j * lds]);
        }
      }
      __syncwarp(mask);
    }
    for (int e = lane; e < m * n; e += G) {
      const int i = e % m, c = e / m;
      a[i + c * args.lda] = s[i + c * lds];
    }
    if (lane == 0) args.info[b] = 0;
    __syncwarp(mask);
  }
}

template <class D, int G>
void launch(const TinyArgs<D>& args, cudaStream_t stream) {
  const std::size_t per_group = sizeof(D) * std::size_t(args.lds) * args.n;
  const int groups = static_cast<int>(std::max<std::size_t>(
      1, std::min<std::size_t>(kTinyThreads / G, kTinySharedLimit / per_group)));
  const std::size_t shared = per_group * groups;
  static const bool configured = [] {
    COVFLOW_CUDA_TRY(cudaFuncSetAttribute(tiny_geqrf_kernel<D, G>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kTinySharedLimit)));
    return true;
  }();
  (void)configured;
  const long long blocks = (args.count + groups - 1) / groups;
  const unsigned grid = static_cast<unsigned>(std::min<long long>(blocks, 0x7fffffff));
  tiny_geqrf_kernel<D, G><<<grid, groups * G, shared, stream>>>(args);
  COVFLOW_CHECK_LAUNCH();
}

}  // namespace

bool tiny_fits(int m, int n) { return n >= 1 && n <= kTinyMaxCols && m >= 1 && m <= kTinyMaxRows; }

template <class D>
void launch_tiny_geqrf(D* a, long long lda, long long stride, D* tau, int* info, int m, int n, long long count,
                       cudaStream_t stream) {
  const TinyArgs<D> args{a, lda, stride, tau, info, m, n, m | 1, count};
  if (n <= 1) launch<D, 1>(args, stream);
  else if (n <= 2) launch<D, 2>(args, stream);
  else if (n <= 4) launch<D, 4>(args, stream);
  else if (n <= 8) launch<D, 8>(args, stream);
  else if (n <= 16) launch<D, 16>(args, stream);
  else launch<D, 32>(args, stream);
}

#define COVFLOW_TINY_QR(D) \
  template void launch_tiny_geqrf<D>(D*, long long, long long, D*, int*, int, int, long long, cudaStream_t);
COVFLOW_TINY_QR(float)
COVFLOW_TINY_QR(double)
COVFLOW_TINY_QR(Cx<float>)
COVFLOW_TINY_QR(Cx<double>)
#undef COVFLOW_TINY_QR

}  // namespace covflow::linalg::detail::qr

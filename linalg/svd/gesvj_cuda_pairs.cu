// Block Jacobi's step with each pair of block columns in shared memory (gesvj_cuda_blockjacobi.cu
// drives it): the direct form of W. Boukaram, G. Turkiyyah, H. Ltaief, D. E. Keyes, "Batched QR and
// SVD Algorithms on GPUs with Applications in Hierarchical Matrix Compression" (Parallel Computing,
// 2018), §6.2 — [Y_i Y_j] = Q·R, the SVD of R by the one-sided Jacobi method, [Y_i Y_j] ← Q·(R·V_R)
// — with the pair's QR and its update each one block that holds the n × P pair in shared memory:
//
//   pair_factor_kernel   reads [Y_i Y_j] from Y, Householder QR in shared memory (reflectors as
//                        LAPACK's ?larfg makes them), writes R and the reflectors to W and τ
//   (warp Jacobi)        R·V_R = R' (gesvj_cuda_warp.cu, pair mode, one warp per pair)
//   pair_update_kernel   reads the reflectors, forms Q's first P columns Q₁ in place (backward,
//                        as LAPACK's ?ung2r), writes [Y_i Y_j] ← Q₁·R' to Y and
//                        [V_i V_j] ← [V_i V_j]·V_R
//
// It replaces the four launches of the global-memory step (gather, batched geqrf, unmqr, apply),
// whose tall-panel QR ran at a few per cent of the H100's FP64 rate: with the pair in shared memory
// each reflector is made by one warp and applied by all, two barriers a column. Q₁·R' rather than
// Q applied to [R'; 0]: the same product; Q₁'s rows carry Y's row grading (Q₁ = [Y_i Y_j]·R⁻¹), so
// each row of the result is rounded relative to its own scale, as with the reflectors applied.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "../qr/qr_cuda_device.cuh"
#include "covflow/linalg/cuda/check.hpp"
#include "gesvj_cuda.cuh"

namespace covflow::linalg::detail::svdj {
namespace {

// Threads per block: the factor holds no row in registers; the update holds one (P elements) per
// thread, which at P = 32 complex double leaves room for 256.
template <int P>
constexpr int factor_threads() { return 512; }
template <int P>
constexpr int update_threads() { return P == 32 ? 256 : 512; }

template <class D>
std::size_t factor_smem(int n, int width) {
  return sizeof(D) * (static_cast<std::size_t>(n) * width + width);
}
template <class D>
std::size_t update_smem(int n, int width) {
  return sizeof(D) * (static_cast<std::size_t>(n) * width + 2 * static_cast<std::size_t>(width) * width + width);
}

// Column c of pair k of matrix b in Y at this step.
template <int P>
__device__ inline int pair_column(int nb, int step, int k, int c) {
  int p, q;
  round_robin_pair(nb, step, k, p, q);
  constexpr int B = P / 2;
  return c < B ? p * B + c : q * B + (c - B);
}

template <class D, int P>
__global__ void __launch_bounds__(factor_threads<P>()) pair_factor_kernel(PairStep<D> s) {
  using R = sreal_t<D>;
  constexpr int kThreads = factor_threads<P>(), kWarps = kThreads / 32;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  D* a = reinterpret_cast<D*>(smem_raw);  // n × P, ld n
  D* tau = a + static_cast<std::size_t>(s.n) * P;
  const long long pp = blockIdx.x;
  const long long b = pp / s.per_matrix;
  if (s.active[b] == 0) return;
  const int k = static_cast<int>(pp % s.per_matrix), n = s.n, nb = s.n_p / (P / 2);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const D* y = s.y + b * static_cast<long long>(n) * s.n_p;
  {
    // A thread per row, its P elements loaded before any is stored: P loads in flight per thread
    // (the step is latency-bound at one block per SM).
    int column[P];
#pragma unroll
    for (int c = 0; c < P; ++c) column[c] = pair_column<P>(nb, s.step, k, c);
    for (int i = tid; i < n; i += kThreads) {
      D row[P];
#pragma unroll
      for (int c = 0; c < P; ++c) row[c] = y[i + static_cast<long long>(column[c]) * n];
#pragma unroll
      for (int c = 0; c < P; ++c) a[i + c * n] = row[c];
    }
  }
  __syncthreads();
  for (int j = 0; j < P; ++j) {
    D* x = a + static_cast<std::size_t>(j) * n;
    if (warp == 0) {
      R ssq = R(0), ssq2 = R(0);
      int i = j + 1 + lane;
      for (; i + 32 < n; i += 64) {
        ssq += abs2(x[i]);
        ssq2 += abs2(x[i + 32]);
      }
      if (i < n) ssq += abs2(x[i]);
      ssq = warp_sum(ssq + ssq2);
      const D alpha = x[j];
      qr::Reflector<D> h;
      if (!qr::fast_reflector(alpha, ssq, h)) {
        // The tail's norm with scaling: its largest element first.
        R amax = R(0);
        for (int i = j + 1 + lane; i < n; i += 32) amax = fmax(amax, qr::max_abs(x[i]));
        for (int offset = 16; offset > 0; offset >>= 1) amax = fmax(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
        R scaled_ssq = R(0);
        const R unit = qr::rescue_unit(amax);
        if (amax > R(0)) {
          const R inv = R(1) / unit;
          for (int i = j + 1 + lane; i < n; i += 32) scaled_ssq += abs2(x[i] * inv);
        }
        scaled_ssq = warp_sum(scaled_ssq);
        h = qr::make_reflector(alpha, amax > R(0) ? unit * sqrt(scaled_ssq) : R(0));
      }
      for (int i = j + 1 + lane; i < n; i += 32) x[i] = x[i] * h.scale;
      __syncwarp();
      if (lane == 0) {
        x[j] = from_real<D>(h.beta);
        tau[j] = h.tau;
      }
    }
    __syncthreads();
    // Hᴴ applied to the columns right of j: a_c ← a_c − conj(τ)·v·(vᴴa_c), v(j) = 1.
    const D tj = conj_of(tau[j]);
    for (int c = j + 1 + warp; c < P; c += kWarps) {
      D* col = a + static_cast<std::size_t>(c) * n;
      D dot = lane == 0 ? col[j] : from_real<D>(R(0)), dot2 = from_real<D>(R(0));
      int i = j + 1 + lane;
      for (; i + 32 < n; i += 64) {
        dot = fma_conj(dot, x[i], col[i]);
        dot2 = fma_conj(dot2, x[i + 32], col[i + 32]);
      }
      if (i < n) dot = fma_conj(dot, x[i], col[i]);
      const D f = tj * warp_sum(dot + dot2);
      if (lane == 0) col[j] = col[j] - f;
      for (int i = j + 1 + lane; i < n; i += 32) col[i] = fma_(col[i], -x[i], f);
    }
    __syncthreads();
  }
  D* w = s.w + pp * static_cast<long long>(n) * P;
#pragma unroll 8
  for (int e = tid; e < n * P; e += kThreads) w[e] = a[e];
  for (int e = tid; e < P; e += kThreads) s.tau[pp * P + e] = tau[e];
}

template <class D, int P>
__global__ void __launch_bounds__(update_threads<P>()) pair_update_kernel(PairStep<D> s) {
  using R = sreal_t<D>;
  constexpr int kThreads = update_threads<P>(), kWarps = kThreads / 32;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  D* q = reinterpret_cast<D*>(smem_raw);  // n × P, ld n: the reflectors, then Q₁
  D* rp = q + static_cast<std::size_t>(s.n) * P;  // R' (P × P)
  D* rot = rp + P * P;                            // V_R (P × P)
  D* tau = rot + P * P;
  const long long pp = blockIdx.x;
  const long long b = pp / s.per_matrix;
  if (s.active[b] == 0) return;
  const int k = static_cast<int>(pp % s.per_matrix), n = s.n, nb = s.n_p / (P / 2);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const D zero = from_real<D>(R(0)), one = from_real<D>(R(1));
  const D* w = s.w + pp * static_cast<long long>(n) * P;
  for (int i = tid; i < n; i += kThreads) {  // as in pair_factor_kernel: P loads in flight
    D row[P];
#pragma unroll
    for (int c = 0; c < P; ++c) row[c] = w[i + c * n];
#pragma unroll
    for (int c = 0; c < P; ++c) q[i + c * n] = row[c];
  }
  for (int e = tid; e < P * P; e += kThreads) {
    rp[e] = s.rprime[pp * P * P + e];
    rot[e] = s.vr[pp * P * P + e];
  }
  for (int e = tid; e < P; e += kThreads) tau[e] = s.tau[pp * P + e];
  __syncthreads();
  // Q₁ = H₀·H₁·…·H_{P−1}·[I; 0], in place from the last reflector (LAPACK's ?ung2r).
  for (int i = P - 1; i >= 0; --i) {
    const D* v = q + static_cast<std::size_t>(i) * n;
    const D ti = tau[i];
    for (int c = i + 1 + warp; c < P; c += kWarps) {  // H_i on rows i … n − 1 of the columns right of i
      D* col = q + static_cast<std::size_t>(c) * n;
      D dot = lane == 0 ? col[i] : zero, dot2 = zero;
      int r = i + 1 + lane;
      for (; r + 32 < n; r += 64) {
        dot = fma_conj(dot, v[r], col[r]);
        dot2 = fma_conj(dot2, v[r + 32], col[r + 32]);
      }
      if (r < n) dot = fma_conj(dot, v[r], col[r]);
      const D f = ti * warp_sum(dot + dot2);
      if (lane == 0) col[i] = col[i] - f;
      for (int r = i + 1 + lane; r < n; r += 32) col[r] = fma_(col[r], -v[r], f);
    }
    __syncthreads();
    D* own = q + static_cast<std::size_t>(i) * n;
    for (int r = tid; r < n; r += kThreads) {
      if (r > i) own[r] = -(ti * own[r]);
      else own[r] = r == i ? one - ti : zero;
    }
    __syncthreads();
  }
  // [Y_i Y_j] ← Q₁·R': thread per row, the row of Q₁ in registers.
  D* y = s.y + b * static_cast<long long>(n) * s.n_p;
  for (int row = tid; row < n; row += kThreads) {
    D qrow[P];
#pragma unroll
    for (int l = 0; l < P; ++l) qrow[l] = q[row + static_cast<std::size_t>(l) * n];
#pragma unroll 4
    for (int c = 0; c < P; ++c) {
      D acc = zero;
#pragma unroll
      for (int l = 0; l < P; ++l) acc = fma_(acc, qrow[l], rp[l + c * P]);
      y[row + static_cast<long long>(pair_column<P>(nb, s.step, k, c)) * n] = acc;
    }
  }
  if (s.vy == nullptr) return;
  // [V_i V_j] ← [V_i V_j]·V_R: thread per row, read whole before written (in place).
  D* vy = s.vy + b * static_cast<long long>(s.n_p) * s.n_p;
  for (int row = tid; row < s.n_p; row += kThreads) {
    D old[P];
#pragma unroll
    for (int c = 0; c < P; ++c) old[c] = vy[row + static_cast<long long>(pair_column<P>(nb, s.step, k, c)) * s.n_p];
#pragma unroll 4
    for (int c = 0; c < P; ++c) {
      D acc = zero;
#pragma unroll
      for (int l = 0; l < P; ++l) acc = fma_(acc, old[l], rot[l + c * P]);
      vy[row + static_cast<long long>(pair_column<P>(nb, s.step, k, c)) * s.n_p] = acc;
    }
  }
}

template <class D, int P>
void configure() {
  COVFLOW_CUDA_TRY(cudaFuncSetAttribute(pair_factor_kernel<D, P>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kPairSmemLimit)));
  COVFLOW_CUDA_TRY(cudaFuncSetAttribute(pair_update_kernel<D, P>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kPairSmemLimit)));
}

template <class D, int P>
void launch(const PairStep<D>& s, cudaStream_t stream) {
  if (s.phase == PairPhase::factor)
    pair_factor_kernel<D, P><<<static_cast<unsigned>(s.pairs), factor_threads<P>(), factor_smem<D>(s.n, P), stream>>>(s);
  else
    pair_update_kernel<D, P><<<static_cast<unsigned>(s.pairs), update_threads<P>(), update_smem<D>(s.n, P), stream>>>(s);
  COVFLOW_CHECK_LAUNCH();
}

}  // namespace

template <class D>
bool pair_step_fits(int n, int width) {
  return n >= width && std::max(factor_smem<D>(n, width), update_smem<D>(n, width)) <= kPairSmemLimit;
}

template <class D>
void configure_pair_step(int width) {
  if (width == 32) configure<D, 32>();
  else if (width == 16) configure<D, 16>();
  else if (width == 8) configure<D, 8>();
  else throw std::logic_error("gesvj: pair width " + std::to_string(width) + " has no shared-memory step");
}

template <class D>
void launch_pair_step(const PairStep<D>& step, cudaStream_t stream) {
  if (step.width == 32) launch<D, 32>(step, stream);
  else if (step.width == 16) launch<D, 16>(step, stream);
  else if (step.width == 8) launch<D, 8>(step, stream);
  else throw std::logic_error("gesvj: pair width " + std::to_string(step.width) + " has no shared-memory step");
}

#define COVFLOW_PAIR_STEP(D)                                               \
  template bool pair_step_fits<D>(int, int);                               \
  template void configure_pair_step<D>(int);                               \
  template void launch_pair_step<D>(const PairStep<D>&, cudaStream_t);
COVFLOW_PAIR_STEP(float)
COVFLOW_PAIR_STEP(double)
COVFLOW_PAIR_STEP(Cx<float>)
COVFLOW_PAIR_STEP(Cx<double>)
#undef COVFLOW_PAIR_STEP

}  // namespace covflow::linalg::detail::svdj

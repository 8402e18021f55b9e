// Internal: device code shared by the QR kernels (qr_cuda_factor.cu, qr_cuda_apply.cu,
// qr_cuda_global.cu): the Householder reflector as LAPACK's ?larfg makes it, sums over the lanes
// that share a column and over the blocks of a cluster, and the register budget of a thread that
// holds RPT rows of one column.
#pragma once

#include <cooperative_groups.h>

#include <cfloat>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../common/device_scalar.cuh"
#include "covflow/linalg/cuda/check.hpp"

namespace covflow::linalg::detail::qr {

namespace cg = cooperative_groups;

constexpr int kMaxGroup = 32;    // lanes that share one column (a power of two, within one warp)
constexpr int kMaxCluster = 16;  // blocks per cluster (above 8: sm_90's non-portable sizes)

// 32-bit registers one element takes.
template <class D>
constexpr int words_of() {
  return static_cast<int>(sizeof(D) / 4);
}
constexpr int words_of(int element_bytes) { return element_bytes / 4; }

// The most threads a block may have when each holds `rpt` elements of `words` registers, from the
// 64K-register file of an SM: the data plus `overhead` registers of addresses, loop state and
// temporaries, rounded down to a power of two. The overheads are what ptxas (-v, sm_90) needs
// without spilling: about 72 in the factor kernels (the reflector's arithmetic and three sums live at
// once), about 40 in apply_kernel.
constexpr int kFactorOverhead = 72;
constexpr int kApplyOverhead = 40;
constexpr int max_threads(int words, int rpt, int overhead) {
  const int registers = rpt * words + overhead;
  int threads = 1024;
  while (threads > 32 && registers * threads > 65536) threads /= 2;
  return threads;
}
template <class D, int RPT, int Overhead>
constexpr int max_threads() {
  return max_threads(words_of<D>(), RPT, Overhead);
}

// Sum over the `group` consecutive lanes that share a column (group a power of two ≤ 32 dividing
// 32). Every lane of the warp must call it. Each level adds a lane's value to its partner's, and
// addition commutes, so every lane of a group ends with bit-identical sums.
template <class R>
__device__ inline R group_sum_rt(R v, int group) {
  for (int offset = group >> 1; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
template <class R>
__device__ inline Cx<R> group_sum_rt(Cx<R> v, int group) {
  return {group_sum_rt(v.x, group), group_sum_rt(v.y, group)};
}
template <class R>
__device__ inline R group_max_rt(R v, int group) {
  for (int offset = group >> 1; offset > 0; offset >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The same sums when only this thread's group of lanes takes part (other groups of the warp may be
// elsewhere in the code): `mask` = group_mask_rt(group).
__device__ inline unsigned group_mask_rt(int group) {
  if (group >= 32) return 0xffffffffu;
  const unsigned lane = threadIdx.x & 31u;
  return ((1u << group) - 1u) << (lane & ~static_cast<unsigned>(group - 1));
}
template <class R>
__device__ inline R group_sum_in(R v, int group, unsigned mask) {
  for (int offset = group >> 1; offset > 0; offset >>= 1) v += __shfl_xor_sync(mask, v, offset);
  return v;
}
template <class R>
__device__ inline Cx<R> group_sum_in(Cx<R> v, int group, unsigned mask) {
  return {group_sum_in(v.x, group, mask), group_sum_in(v.y, group, mask)};
}
template <class R>
__device__ inline R group_max_in(R v, int group, unsigned mask) {
  for (int offset = group >> 1; offset > 0; offset >>= 1) v = fmax(v, __shfl_xor_sync(mask, v, offset));
  return v;
}

template <class D>
__device__ inline D zero_of() {
  return from_real<D>(sreal_t<D>(0));
}

// Largest component magnitude: the scale of the rescaled norm.
template <class R>
__device__ inline R max_abs(R v) {
  return fabs(v);
}
template <class R>
__device__ inline R max_abs(Cx<R> v) {
  return fmax(fabs(v.x), fabs(v.y));
}

template <class R>
__device__ inline R quiet_nan() {
  if constexpr (sizeof(R) == 8) return __longlong_as_double(0x7ff8000000000000ll);
  else return __int_as_float(0x7fc00000);
}
template <class D>
__device__ inline D nan_of() {
  using R = sreal_t<D>;
  if constexpr (is_cx<D>) return D{quiet_nan<R>(), quiet_nan<R>()};
  else return quiet_nan<R>();
}

// A sum of squares is trusted when it lies in [kSafeLow, kSafeHigh]: below, the squares of the
// largest elements may have lost bits to underflow (or all of them were zero); above, the sum may
// have overflowed. Outside that range the norm is recomputed with the elements scaled by their
// largest magnitude, as LAPACK's ?nrm2 does in one pass.
template <class R>
struct SafeRange;
// `tiny` is the smallest normal number (LAPACK's safmin, a power of two).
template <>
struct SafeRange<double> {
  static constexpr double low = DBL_MIN / DBL_EPSILON;
  static constexpr double high = DBL_MAX / 4;
  static constexpr double tiny = DBL_MIN;
};
template <>
struct SafeRange<float> {
  static constexpr float low = FLT_MIN / FLT_EPSILON;
  static constexpr float high = FLT_MAX / 4;
  static constexpr float tiny = FLT_MIN;
};
template <class R>
__device__ inline bool needs_rescaling(R sum_of_squares) {
  return !(sum_of_squares >= SafeRange<R>::low && sum_of_squares <= SafeRange<R>::high);
}

// The unit the rescued norm scales by: the largest magnitude, but no less than the smallest normal
// number, so that its reciprocal stays finite (1/x overflows for subnormal x; 1/tiny is an exact
// power of two) and the scaled squares stay representable. The norm is rescue_unit(largest) ·
// sqrt(Σ|x_i/unit|²). Subnormal columns are what Householder QR leaves of a rank-deficient matrix
// with repeated rows (e.g. a leaf basis of coincident points): each reflector shrinks the trailing
// columns' tails by about ε.
template <class R>
__device__ inline R rescue_unit(R largest) {
  return fmax(largest, SafeRange<R>::tiny);
}

// 1/d without overflow in |d|².
template <class R>
__device__ inline R reciprocal(R d) {
  return R(1) / d;
}
template <class R>
__device__ inline Cx<R> reciprocal(Cx<R> d) {
  const R s = fmax(fabs(d.x), fabs(d.y));
  const R inv = R(1) / s;
  const R xr = d.x * inv, xi = d.y * inv;
  const R q = inv / (xr * xr + xi * xi);
  return {xr * q, -xi * q};
}

// One Householder reflector H = I − τ·v·vᴴ with v(0) = 1 and Hᴴ·[α; x] = [β; 0], as LAPACK's
// ?larfg makes it: β = −sign(Re α)·‖[α; x]‖ real, τ = (β − Re α)/β − i·Im α/β, v = x/(α − β); τ = 0
// (H = I) when x = 0 and α is real. `scale` = 1/(α − β) multiplies x into v.
// Where ?larfg rescales a column that lies wholly below the smallest normal number (every |α|, |x_i|
// and ‖x‖ < tiny), this takes H = I with β = Re α, i.e. treats the column as zero: a perturbation
// below the smallest normal number, where 1/β and 1/(α − β) would overflow (τ, v = Inf or NaN).
template <class D>
struct Reflector {
  D tau;
  D scale;
  sreal_t<D> beta;
  bool identity;
};

template <class D>
__device__ inline Reflector<D> make_reflector(D alpha, sreal_t<D> xnorm) {
  using R = sreal_t<D>;
  const R ar = real_part(alpha), ai = imag_part(alpha);
  Reflector<D> h;
  if (xnorm == R(0) && ai == R(0)) {
    h.tau = zero_of<D>();
    h.scale = zero_of<D>();
    h.beta = ar;
    h.identity = true;
    return h;
  }
  const R s = fmax(fmax(fabs(ar), fabs(ai)), xnorm);
  if (s < SafeRange<R>::tiny) {
    h.tau = zero_of<D>();
    h.scale = zero_of<D>();
    h.beta = ar;
    h.identity = true;
    return h;
  }
  const R inv = R(1) / s;
  const R r0 = ar * inv, r1 = ai * inv, r2 = xnorm * inv;
  const R norm = s * sqrt(r0 * r0 + r1 * r1 + r2 * r2);
  const R beta = signbit(ar) ? norm : -norm;  // −sign(Re α)·‖·‖, Fortran's SIGN (−0 counts as negative)
  const R inv_beta = R(1) / beta;
  if constexpr (is_cx<D>) {
    h.tau = D{(beta - ar) * inv_beta, -ai * inv_beta};
    h.scale = reciprocal(D{ar - beta, ai});
  } else {
    h.tau = (beta - ar) * inv_beta;
    h.scale = R(1) / (ar - beta);
  }
  h.beta = beta;
  h.identity = false;
  return h;
}

// Reflector from α and the tail's sum of squares when no scaling is needed (both |α|² and the sum
// in their safe range): one reciprocal square root gives ‖[α; x]‖ and 1/β, one reciprocal gives
// 1/(α − β). False, with `h` unset, when the scaled path (a norm by make_reflector) must be taken.
template <class D>
__device__ inline bool fast_reflector(D alpha, sreal_t<D> ssq, Reflector<D>& h) {
  using R = sreal_t<D>;
  const R ar = real_part(alpha), ai = imag_part(alpha);
  const R alpha2 = ar * ar + ai * ai;
  if (needs_rescaling(ssq) || !(alpha2 <= SafeRange<R>::high)) return false;
  const R total = alpha2 + ssq;
  const R inverse_norm = rsqrt(total);
  const R norm = total * inverse_norm;
  const bool negative = signbit(ar);
  const R beta = negative ? norm : -norm;
  const R inv_beta = negative ? inverse_norm : -inverse_norm;
  h.beta = beta;
  h.identity = false;
  if constexpr (is_cx<D>) {
    h.tau = D{(beta - ar) * inv_beta, -ai * inv_beta};
    const R dr = ar - beta;
    const R q = R(1) / (dr * dr + ai * ai);
    h.scale = D{dr * q, -ai * q};
  } else {
    h.tau = (beta - ar) * inv_beta;
    h.scale = R(1) / (ar - beta);
  }
  return true;
}

// The cluster this block belongs to: `blocks` = 1 when the kernel was launched without clusters,
// where no cluster instruction is issued.
struct ClusterView {
  int blocks;
  int rank;
  __device__ void sync() const {
    if (blocks > 1) cg::this_cluster().sync();
  }
  // `local` (a shared-memory address of this block) in block q of the cluster.
  template <class X>
  __device__ X* at(X* local, int q) const {
    return blocks > 1 ? cg::this_cluster().map_shared_rank(local, q) : local;
  }
};

__device__ inline ClusterView cluster_view(int blocks) {
  if (blocks > 1) return {blocks, static_cast<int>(cg::this_cluster().block_rank())};
  return {1, 0};
}

// Launches `kernel` on `grid` × `threads` with `smem` bytes of dynamic shared memory (opted in
// above 48 KB) as clusters of `cluster` blocks along x (none when 1; above 8, sm_90's
// non-portable sizes).
template <class Kernel, class Args>
void launch_kernel(Kernel kernel, dim3 grid, int threads, std::size_t smem, int cluster, cudaStream_t stream,
                   const Args& args) {
  if (smem > 48 * 1024)
    COVFLOW_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  if (cluster > 1) {
    if (cluster > 8) COVFLOW_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = static_cast<unsigned>(cluster);
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  COVFLOW_CUDA_TRY(cudaLaunchKernelEx(&config, kernel, args));
}

// Calls body(std::integral_constant<int, RPT>) for the runtime rows-per-thread `rpt`.
template <class F>
void with_rpt(int rpt, F&& body) {
  switch (rpt) {
    case 4: body(std::integral_constant<int, 4>{}); break;
    case 8: body(std::integral_constant<int, 8>{}); break;
    case 16: body(std::integral_constant<int, 16>{}); break;
    case 32: body(std::integral_constant<int, 32>{}); break;
    default: throw std::logic_error("qr: no kernel for " + std::to_string(rpt) + " rows per thread");
  }
}

}  // namespace covflow::linalg::detail::qr

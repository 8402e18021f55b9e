// Warp-group sums for kernels in every module (linalg's own and the stages'): device code only.
#pragma once

#include <cuda_runtime.h>

namespace covflow::linalg::cuda {

// The lanes of this thread's aligned group of kWidth lanes (kWidth a power of two ≤ 32).
template <int kWidth> __device__ inline unsigned group_mask() {
  static_assert(kWidth > 0 && kWidth <= 32 && (kWidth & (kWidth - 1)) == 0, "a power of two up to 32");
  if constexpr (kWidth == 32) return 0xffffffffu;
  else return ((1u << kWidth) - 1) << ((threadIdx.x & 31) & ~unsigned(kWidth - 1));
}
// Sum over an aligned group of kWidth lanes; every lane of the group gets the same result (a
// butterfly: each partial sum is commutative, so the rounding is identical in every lane, and
// control flow that depends on the sum stays uniform). Only the group's own lanes need take part,
// so groups of a warp may diverge from each other.
template <int kWidth, class R> __device__ inline R group_sum(R v) {
  const unsigned mask = group_mask<kWidth>();
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(mask, v, offset);
  return v;
}
// Warp-wide sum; every lane gets the result.
template <class R> __device__ inline R warp_sum(R v) { return group_sum<32>(v); }

}  // namespace covflow::linalg::cuda

// cp.async (sm_80+): one element from global into shared memory without passing through
// registers, and the commit/wait bookkeeping of its groups. Shared by the cholupdate kernels.
#pragma once

namespace covflow::linalg::detail {

// The element's size is 4, 8 or 16 bytes (float … complex double): the sizes cp.async.ca copies.
template <class D>
__device__ inline void copy_async(D* shared, const D* global) {
  static_assert(sizeof(D) == 4 || sizeof(D) == 8 || sizeof(D) == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(address), "l"(global), "n"(sizeof(D)) : "memory");
}
// 16 bytes, both addresses 16-byte aligned; through L2 only (.cg: the data is used once).
__device__ inline void copy_async_16(void* shared, const void* global) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(address), "l"(global) : "memory");
}
// dst[0..count) = src[0..count), 16-byte pieces shared among `threads` threads (this one is `tid`),
// then the tail element by element. Both arrays start 16-byte aligned.
template <class X>
__device__ inline void copy_range_async(X* dst, const X* src, int count, int tid, int threads) {
  constexpr int per = 16 / sizeof(X);
  const int pieces = count / per;
  for (int c = tid; c < pieces; c += threads) copy_async_16(dst + c * per, src + c * per);
  for (int e = pieces * per + tid; e < count; e += threads) copy_async(dst + e, src + e);
}
__device__ inline void commit_async() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ inline void wait_async() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace covflow::linalg::detail

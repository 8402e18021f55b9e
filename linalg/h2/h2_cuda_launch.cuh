// Internal: what the H² device kernels share about their launches (h2_cuda_kernels.cuh,
// h2_cuda_dense_kernels.cuh): blocks of kThreads threads, a grid of at most 2^20 blocks that the
// kernels stride over, and the zero of a device scalar type.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "../common/device_scalar.cuh"

namespace covflow::linalg::detail::h2_cuda {
// Internal linkage: each .cu file that includes this header gets its own copies.
namespace {

constexpr int kThreads = 256;

template <class D>
__host__ __device__ inline D zero_of() {
  return from_real<D>(sreal_t<D>(0));
}

// Blocks for `total` elements, one per thread, the grid capped (the kernels stride over the rest).
inline unsigned blocks_for(long long total) {
  return static_cast<unsigned>(std::clamp((total + kThreads - 1) / kThreads, 1LL, 1LL << 20));
}

}  // namespace
}  // namespace covflow::linalg::detail::h2_cuda

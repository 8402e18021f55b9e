// Internal: rsvd's CUDA backend (rsvd_cuda.cu). Arguments are validated by rsvd.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "covflow/linalg/rsvd.hpp"

namespace covflow::linalg::detail {

template <class T>
std::size_t rsvd_cuda_workspace(std::int64_t m, std::int64_t n, std::int64_t count, const RsvdOptions& options);
// The dense matrix as a sampler: cuBLAS strided-batched GEMMs on the context's stream.
template <class T>
Sampler<T> rsvd_cuda_dense_sampler(Exec& exec, Batch<const T> a);
// dense: the matrix behind the sampler when there is one (its norms are then computed on the
// device), else empty (the sampler's host norms are copied in).
template <class T>
void rsvd_cuda(Exec& exec, const Sampler<T>& a, Batch<const T> dense, std::span<real_t<T>> s, Batch<T> u, Batch<T> v,
               std::span<RsvdInfo> info, std::span<std::byte> workspace, const RsvdOptions& options);

}  // namespace covflow::linalg::detail

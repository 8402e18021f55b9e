// Internal: gesvj's backends. Arguments are validated by gesvj.cpp; u and v are empty Batches when
// not wanted.
#pragma once

#include "covflow/linalg/svd.hpp"

namespace covflow::linalg::detail {

template <class T>
std::size_t gesvj_cpu_workspace(unsigned workers, std::int64_t m, std::int64_t n, const SvdOptions& options);
template <class T>
void gesvj_cpu(ThreadPool& pool, Workspace& workspace, Batch<T> a, std::span<real_t<T>> s, Batch<T> u, Batch<T> v,
               std::span<SvdInfo> info, const SvdOptions& options);

#if COVFLOW_HAS_CUDA
template <class T>
std::size_t gesvj_cuda_workspace(std::int64_t m, std::int64_t n, std::int64_t count, const SvdOptions& options);
template <class T>
void gesvj_cuda(CudaContext& context, Batch<T> a, std::span<real_t<T>> s, Batch<T> u, Batch<T> v,
                std::span<SvdInfo> info, const SvdOptions& options);
#endif

}  // namespace covflow::linalg::detail

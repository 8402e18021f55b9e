// Internal: heev's backends. Arguments are validated by heev.cpp.
#pragma once

#include "covflow/linalg/heev.hpp"

namespace covflow::linalg::detail {

template <class T>
std::size_t heev_cpu_workspace(unsigned workers, std::int64_t n, const HeevOptions& options);
template <class T>
void heev_cpu(ThreadPool& pool, Workspace& workspace, Batch<T> a, std::span<real_t<T>> w, std::span<int> info,
              const HeevOptions& options);

#if COVFLOW_HAS_CUDA
template <class T>
std::size_t heev_cuda_workspace(std::int64_t n, std::int64_t count, const HeevOptions& options);
template <class T>
void heev_cuda(CudaContext& context, Batch<T> a, std::span<real_t<T>> w, std::span<int> info,
               const HeevOptions& options);
#endif

}  // namespace covflow::linalg::detail

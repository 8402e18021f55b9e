// Internal: the backends of sample_covariance. Arguments are validated by covariance.cpp.
#pragma once

#include "covflow/linalg/covariance.hpp"

namespace covflow::linalg::detail {

template <class T>
void sample_covariance_cpu(ThreadPool& pool, Batch<const T> x, Batch<T> r, double loading);

#if COVFLOW_HAS_CUDA
template <class T>
void sample_covariance_cuda(CudaContext& context, Batch<const T> x, Batch<T> r, double loading);
#endif

}  // namespace covflow::linalg::detail

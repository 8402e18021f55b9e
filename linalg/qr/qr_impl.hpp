// Internal: the QR operations' backends. Arguments are validated by qr.cpp.
#pragma once

#include "covflow/linalg/qr.hpp"

namespace covflow::linalg::detail {

template <class T>
std::size_t geqrf_cpu_workspace(unsigned workers, std::int64_t m, std::int64_t n);
template <class T>
void geqrf_cpu(ThreadPool& pool, Workspace& workspace, Batch<T> a, std::span<T> tau, std::span<int> info);
template <class T>
std::size_t ungqr_cpu_workspace(unsigned workers, std::int64_t m, std::int64_t n);
template <class T>
void ungqr_cpu(ThreadPool& pool, Workspace& workspace, Batch<T> a, std::span<const T> tau);
template <class T>
std::size_t unmqr_cpu_workspace(unsigned workers, Side side, std::int64_t m_c, std::int64_t n_c, std::int64_t k);
template <class T>
void unmqr_cpu(ThreadPool& pool, Workspace& workspace, Side side, Op op, Batch<const T> a, std::span<const T> tau,
               Batch<T> c);

#if COVFLOW_HAS_CUDA
template <class T>
std::size_t geqrf_cuda_workspace(std::int64_t m, std::int64_t n, std::int64_t count);
template <class T>
void geqrf_cuda(CudaContext& context, Batch<T> a, std::span<T> tau, std::span<int> info);
template <class T>
std::size_t ungqr_cuda_workspace(std::int64_t m, std::int64_t n, std::int64_t count);
template <class T>
void ungqr_cuda(CudaContext& context, Batch<T> a, std::span<const T> tau);
template <class T>
std::size_t unmqr_cuda_workspace(Side side, std::int64_t m_c, std::int64_t n_c, std::int64_t k, std::int64_t count);
template <class T>
void unmqr_cuda(CudaContext& context, Side side, Op op, Batch<const T> a, std::span<const T> tau, Batch<T> c);
#endif

}  // namespace covflow::linalg::detail

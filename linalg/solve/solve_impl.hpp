// Internal: the backends of getrf / getrs / gesv / potrf / potrs / posv / gels. Arguments are
// validated by solve.cpp: shapes agree, ipiv / info are large enough, every array lives where the
// Exec runs, count ≥ 1 and n ≥ 1. getrs and potrs see nrhs ≥ 1; gesv, posv and gels may see
// nrhs = 0 (and then a null B), when they only factor.
#pragma once

#include "covflow/linalg/solve.hpp"

namespace covflow::linalg {
class ThreadPool;
class Workspace;
class CudaContext;
}  // namespace covflow::linalg

namespace covflow::linalg::detail {

// ---- CPU (solve_cpu.cpp): LAPACK per matrix across the pool -------------------------------------
template <class T>
std::size_t getrf_cpu_workspace(unsigned workers, std::int64_t n);
template <class T>
void getrf_cpu(ThreadPool& pool, Workspace& workspace, Batch<T> a, std::span<int> ipiv, std::span<int> info);
template <class T>
void getrs_cpu(ThreadPool& pool, Op op, Batch<const T> lu, std::span<const int> ipiv, Batch<T> b);
template <class T>
void gesv_cpu(ThreadPool& pool, Workspace& workspace, Batch<T> a, std::span<int> ipiv, Batch<T> b,
              std::span<int> info);
template <class T>
void potrf_cpu(ThreadPool& pool, Uplo uplo, Batch<T> a, std::span<int> info);
template <class T>
void potrs_cpu(ThreadPool& pool, Uplo uplo, Batch<const T> factor, Batch<T> b);
template <class T>
void posv_cpu(ThreadPool& pool, Uplo uplo, Batch<T> a, Batch<T> b, std::span<int> info);
template <class T>
std::size_t gels_cpu_workspace(unsigned workers, std::int64_t m, std::int64_t n, std::int64_t nrhs);
template <class T>
void gels_cpu(ThreadPool& pool, Workspace& workspace, Batch<T> a, Batch<T> b, std::span<int> info);

#if COVFLOW_HAS_CUDA
// ---- CUDA: n ≤ 32 fused kernels (solve_tiny_*.cu), larger n through cuBLAS / cuSOLVER
// (solve_cuda.cu) --------------------------------------------------------------------------------
inline constexpr std::int64_t tiny_max_n = 32;

template <class T>
std::size_t getrf_cuda_workspace(std::int64_t n, std::int64_t count);
template <class T>
void getrf_cuda(CudaContext& context, Batch<T> a, std::span<int> ipiv, std::span<int> info);
template <class T>
std::size_t getrs_cuda_workspace(std::int64_t n, std::int64_t nrhs, std::int64_t count);
template <class T>
void getrs_cuda(CudaContext& context, Op op, Batch<const T> lu, std::span<const int> ipiv, Batch<T> b);
template <class T>
std::size_t gesv_cuda_workspace(std::int64_t n, std::int64_t nrhs, std::int64_t count);
template <class T>
void gesv_cuda(CudaContext& context, Batch<T> a, std::span<int> ipiv, Batch<T> b, std::span<int> info);
template <class T>
std::size_t potrf_cuda_workspace(std::int64_t n, std::int64_t count);
template <class T>
void potrf_cuda(CudaContext& context, Uplo uplo, Batch<T> a, std::span<int> info);
template <class T>
std::size_t potrs_cuda_workspace(std::int64_t n, std::int64_t nrhs, std::int64_t count);
template <class T>
void potrs_cuda(CudaContext& context, Uplo uplo, Batch<const T> factor, Batch<T> b);
template <class T>
std::size_t posv_cuda_workspace(std::int64_t n, std::int64_t nrhs, std::int64_t count);
template <class T>
void posv_cuda(CudaContext& context, Uplo uplo, Batch<T> a, Batch<T> b, std::span<int> info);
template <class T>
std::size_t gels_cuda_workspace(std::int64_t m, std::int64_t n, std::int64_t nrhs, std::int64_t count);
template <class T>
void gels_cuda(CudaContext& context, Batch<T> a, Batch<T> b, std::span<int> info);
#endif

}  // namespace covflow::linalg::detail

// Internal: cholupdate's backends. Arguments are validated by cholupdate.cpp.
#pragma once

#include <vector>

#include "covflow/linalg/cholupdate.hpp"

namespace covflow::linalg::detail {

template <class T>
std::size_t cholupdate_cpu_workspace(unsigned workers, std::int64_t n, std::int64_t k, std::int64_t count);
template <class T>
void cholupdate_cpu(ThreadPool& pool, Workspace& workspace, Batch<T> l, Batch<const T> v, Sign sign,
                    std::span<int> info);

#if COVFLOW_HAS_CUDA
}  // namespace covflow::linalg::detail

#include <cuda_runtime_api.h>

namespace covflow::linalg::detail {

template <class T>
std::size_t cholupdate_cuda_workspace(std::int64_t n, std::int64_t k, std::int64_t count);
template <class T>
void cholupdate_cuda(CudaContext& context, Batch<T> l, Batch<const T> v, Sign sign, std::span<int> info);
// Test hook, never called by the library: for each of the `count` matrices of the last n > 256
// cholupdate_cuda call on `context`, whether the product path committed it (1) or left it to the
// rotation pipeline (0). Synchronises the stream and reads the status from the workspace.
std::vector<int> cholupdate_cuda_product_committed(CudaContext& context, std::int64_t count);
// Benchmark hook: the tensor-core product path's timeline for the first matrix of the last call, in
// µs after its solve began: last W published, solve ended, first apply block started, first apply
// tile started, apply ended, finish started (empty when that path did not run). Synchronises.
std::vector<double> cholupdate_cuda_product_timeline(CudaContext& context, std::int64_t count);
// Test hook: launches one thread that waits, as the kernels' progress waits do, for a counter that
// nothing ever publishes, with the wait bounded at bound_ns instead of the kernels' 2 s. Returns the
// launch's own error; the bounded wait then ends the kernel with a sticky error, which the next
// synchronisation reports. Leaves the context unusable: call it only in a process of its own.
cudaError_t cholupdate_cuda_launch_unpublished_wait(CudaContext& context, unsigned long long bound_ns);
#endif

}  // namespace covflow::linalg::detail

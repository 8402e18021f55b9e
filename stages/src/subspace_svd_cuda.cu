// The subspace stage's svd method on the device: from gesvj's output (singular values descending,
// U's columns in the same order) to heev's layout (eigenvalues ascending, eigenvectors as columns
// in the same order), in place, so that everything after the decomposition (source count, MUSIC,
// peaks) runs unchanged. Memory-bound and small next to gesvj: N² elements moved per cell.
#include <cuComplex.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "subspace_svd_device.hpp"

namespace covflow::stages::detail {
namespace {

template <class R> struct complex_of;
template <> struct complex_of<float> { using type = float2; };
template <> struct complex_of<double> { using type = double2; };

constexpr int kThreads = 256;

unsigned blocks_for(long long work) {
  const long long blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 8192 ? 8192 : blocks));
}

// One thread per (cell, row i, column pair j < N/2), grid-stride: it swaps U(i, j) and
// U(i, N−1−j) of its cell (column-major N × N). The pairs are disjoint, so no thread reads what
// another writes.
template <class R>
__global__ void reverse_columns_kernel(typename complex_of<R>::type* vectors, int n, long long pairs_total) {
  const int half = n / 2;
  for (long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; t < pairs_total;
       t += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long cell = t / (static_cast<long long>(n) * half);
    const long long rest = t % (static_cast<long long>(n) * half);
    const int i = static_cast<int>(rest % n), j = static_cast<int>(rest / n);
    auto* u = vectors + cell * n * n;
    const auto left = u[static_cast<long long>(j) * n + i];
    u[static_cast<long long>(j) * n + i] = u[static_cast<long long>(n - 1 - j) * n + i];
    u[static_cast<long long>(n - 1 - j) * n + i] = left;
  }
}

// One thread per (cell, eigenvalue j), grid-stride: λ_j = σ²_{N−1−j}/K + δ, squared and divided
// in double before rounding to R; the thread of j = 0 also carries the cell's status over.
template <class R>
__global__ void eigenvalues_kernel(const R* singular_values, const linalg::SvdInfo* svd_info, R* eigenvalues, int* info,
                                   int n, long long total, double inverse_snapshots, double loading) {
  for (long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long cell = t / n;
    const int j = static_cast<int>(t % n);
    const double sigma = singular_values[cell * n + (n - 1 - j)];
    eigenvalues[t] = static_cast<R>(sigma * sigma * inverse_snapshots + loading);
    if (j == 0) info[cell] = svd_info[cell].status;
  }
}

template <class R>
void launch(linalg::CudaContext& context, int n, int cells, double snapshots, double loading,
            const void* singular_values, const linalg::SvdInfo* svd_info, void* eigenvalues, void* vectors, int* info) {
  using C = typename complex_of<R>::type;
  const cudaStream_t stream = context.stream();
  const long long pairs = static_cast<long long>(cells) * n * (n / 2);
  if (pairs > 0) {
    reverse_columns_kernel<R><<<blocks_for(pairs), kThreads, 0, stream>>>(static_cast<C*>(vectors), n, pairs);
    COVFLOW_CHECK_LAUNCH();
  }
  const long long values = static_cast<long long>(cells) * n;
  eigenvalues_kernel<R><<<blocks_for(values), kThreads, 0, stream>>>(static_cast<const R*>(singular_values), svd_info,
                                                                    static_cast<R*>(eigenvalues), info, n, values,
                                                                    1.0 / snapshots, loading);
  COVFLOW_CHECK_LAUNCH();
}

}  // namespace

void svd_to_eigen(linalg::CudaContext& context, replay::ElementType type, int n, int cells, double snapshots,
                  double loading, const void* singular_values, const linalg::SvdInfo* svd_info, void* eigenvalues,
                  void* vectors, int* info) {
  if (cells <= 0 || n <= 0) return;
  if (type == replay::ElementType::cf32)
    launch<float>(context, n, cells, snapshots, loading, singular_values, svd_info, eigenvalues, vectors, info);
  else
    launch<double>(context, n, cells, snapshots, loading, singular_values, svd_info, eigenvalues, vectors, info);
}

}  // namespace covflow::stages::detail

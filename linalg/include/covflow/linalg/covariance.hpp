// Batched sample covariance: R_b = X_b X_bᴴ / K + δ I for snapshot matrices X_b (N channels ×
// K snapshots). Both triangles of R_b are written and R_b is exactly Hermitian (real diagonal,
// R(j,i) = conj(R(i,j)) bit for bit), which is what the eigensolvers downstream assume.
#pragma once

#include <cstddef>

#include "covflow/linalg/batch.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::linalg {

struct CovarianceOptions {
  double diagonal_loading = 0.0;  // δ, added to every diagonal element (same units as R)
};

// snapshots: count × (N × K), K >= 1; covariance: count × (N × N). T is cf32 or cf64.
// CPU: BLAS herk per matrix across the thread pool. CUDA: cuBLAS strided-batched GEMM and one
// kernel that adds the loading and makes the result exactly Hermitian; no host synchronisation.
template <class T>
void sample_covariance(Exec& exec, Batch<const T> snapshots, Batch<T> covariance,
                       const CovarianceOptions& options = {});

// Scratch bytes sample_covariance takes from the Exec's workspace: none.
constexpr std::size_t sample_covariance_workspace(std::int64_t /*channels*/, std::int64_t /*snapshots*/,
                                                  std::int64_t /*count*/) {
  return 0;
}

}  // namespace covflow::linalg

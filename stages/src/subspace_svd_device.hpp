// Internal: the device side of the subspace stage's svd method, behind an interface that needs no
// CUDA headers (the stage sources compile in CPU-only builds too).
#pragma once

#include "covflow/linalg/svd.hpp"
#include "covflow/replay/element_type.hpp"

namespace covflow::linalg {
class CudaContext;
}

namespace covflow::stages::detail {

#if COVFLOW_HAS_CUDA

// After gesvj of each cell's N × K snapshot matrix X = U·Σ·Vᴴ (singular values descending, U
// written into `vectors`): the eigen-pairs of X·Xᴴ/K + δI in heev's layout, which the rest of the
// stage reads — `eigenvalues[c·N + j]` = σ²_{N−1−j}/K + δ (ascending), the columns of each cell's
// U reversed in place (column j is the eigenvector of eigenvalue j), and `info[c]` = gesvj's
// status. Issued on the context's stream; `type` is cf32 or cf64 (the reals are float or double).
void svd_to_eigen(linalg::CudaContext& context, replay::ElementType type, int n, int cells, double snapshots,
                  double loading, const void* singular_values, const linalg::SvdInfo* svd_info, void* eigenvalues,
                  void* vectors, int* info);

#endif

}  // namespace covflow::stages::detail

// Kernels of covflow-bench heev-chase: the QR iteration of Cosnuau 2014, §3 (tridiagonal_qr.hpp;
// heev runs it for n ≤ 32 and on the divide and conquer's leaves) alone, one warp per matrix, for
// each arithmetic policy of the sweep step.
#include <cuda_runtime.h>

#include "../linalg/heev/tridiagonal_qr.hpp"
#include "heev_chase_bench.hpp"

namespace covflow::bench {
namespace {

using namespace covflow::linalg::detail;

struct CountSink {
  long long used = 0;
  __device__ bool reserve(int) { return true; }
  __device__ void operator()(int, double, double) { ++used; }
  __device__ void step(int, double, double, bool on) { used += __popc(__ballot_sync(0xffffffffu, on)); }
};

template <class Policy, int kShifts>
__global__ void chase_only(int n, int count, const double* d0, const double* e0, long long* rotations) {
  extern __shared__ double smem[];
  const int b = blockIdx.x;
  if (b >= count) return;
  double* d = smem;
  double* e = smem + n;
  for (int k = threadIdx.x; k < n; k += 32) {
    d[k] = d0[static_cast<long long>(b) * n + k];
    e[k] = e0[static_cast<long long>(b) * n + k];
  }
  __syncwarp();
  CountSink sink;
  QrState state;
  tridiagonal_qr<double, true, Policy, kShifts>(n, d, e, sink, state, 30L * n);
  if (threadIdx.x == 0) rotations[b] = sink.used;
}

}  // namespace

const char* chase_policy_name(int policy) {
  switch (policy) {
    case 0: return "steqr sequence, IEEE, 1 shift";
    case 1: return "short chain, approx, 1 shift";
    case 2: return "short chain, approx, 2 shifts";
    case 3: return "short chain, approx, 4 shifts (default)";
    case 4: return "short chain, approx, 8 shifts";
  }
  return nullptr;
}

void launch_chase_only(int policy, int n, int count, const double* d, const double* e, long long* rotations,
                       cudaStream_t stream) {
  const std::size_t smem = 2 * sizeof(double) * static_cast<std::size_t>(n);
  switch (policy) {
    case 0: chase_only<SweepPolicy<MathIeee, false>, 1><<<count, 32, smem, stream>>>(n, count, d, e, rotations); break;
    case 1: chase_only<SweepPolicy<MathApprox, true>, 1><<<count, 32, smem, stream>>>(n, count, d, e, rotations); break;
    case 2: chase_only<SweepPolicy<MathApprox, true>, 2><<<count, 32, smem, stream>>>(n, count, d, e, rotations); break;
    case 3: chase_only<SweepPolicy<MathApprox, true>, 4><<<count, 32, smem, stream>>>(n, count, d, e, rotations); break;
    default: chase_only<SweepPolicy<MathApprox, true>, 8><<<count, 32, smem, stream>>>(n, count, d, e, rotations); break;
  }
}

}  // namespace covflow::bench

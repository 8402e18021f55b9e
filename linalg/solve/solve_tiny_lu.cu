// The n ≤ 32 LU kernels (getrf, gesv, getrs) for the four element types: solve_tiny.cuh.
#include <algorithm>

#include "covflow/linalg/cuda/check.hpp"
#include "solve_tiny.cuh"
#include "solve_tiny_launch.hpp"

namespace covflow::linalg::detail::tiny {
namespace {

// Blocks for `count` matrices in groups of kNp lanes; a grid-stride loop covers the rest.
template <int kNp>
unsigned grid_for(std::int64_t count) {
  const std::int64_t blocks = (count + kThreads / kNp - 1) / (kThreads / kNp);
  return static_cast<unsigned>(std::min<std::int64_t>(blocks, 0x7fffffff));
}


template <class T, int kNp>
void run_lu(cudaStream_t stream, const Args<T>& args) {
  if (args.mode & solve) lu_kernel<T, kNp, true><<<grid_for<kNp>(args.count), kThreads, 0, stream>>>(args);
  else lu_kernel<T, kNp, false><<<grid_for<kNp>(args.count), kThreads, 0, stream>>>(args);
}
template <class T, int kNp>
void run_getrs(cudaStream_t stream, const Args<T>& args) {
  if (args.op == 'N') getrs_kernel<T, kNp, false><<<grid_for<kNp>(args.count), kThreads, 0, stream>>>(args);
  else getrs_kernel<T, kNp, true><<<grid_for<kNp>(args.count), kThreads, 0, stream>>>(args);
}

}  // namespace

template <class T>
void launch_lu(cudaStream_t stream, const Args<T>& args) {
  if (args.n <= 1) run_lu<T, 1>(stream, args);
  else if (args.n <= 2) run_lu<T, 2>(stream, args);
  else if (args.n <= 4) run_lu<T, 4>(stream, args);
  else if (args.n <= 8) run_lu<T, 8>(stream, args);
  else if (args.n <= 16) run_lu<T, 16>(stream, args);
  else run_lu<T, 32>(stream, args);
  COVFLOW_CHECK_LAUNCH();
}

template <class T>
void launch_getrs(cudaStream_t stream, const Args<T>& args) {
  if (args.n <= 1) run_getrs<T, 1>(stream, args);
  else if (args.n <= 2) run_getrs<T, 2>(stream, args);
  else if (args.n <= 4) run_getrs<T, 4>(stream, args);
  else if (args.n <= 8) run_getrs<T, 8>(stream, args);
  else if (args.n <= 16) run_getrs<T, 16>(stream, args);
  else run_getrs<T, 32>(stream, args);
  COVFLOW_CHECK_LAUNCH();
}

#define COVFLOW_TINY_LU(T)                                        \
  template void launch_lu<T>(cudaStream_t, const Args<T>&); \
  template void launch_getrs<T>(cudaStream_t, const Args<T>&);
COVFLOW_TINY_LU(float)
COVFLOW_TINY_LU(double)
COVFLOW_TINY_LU(Cx<float>)
COVFLOW_TINY_LU(Cx<double>)
#undef COVFLOW_TINY_LU

}  // namespace covflow::linalg::detail::tiny

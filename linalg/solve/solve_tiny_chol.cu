// The n ≤ 32 Cholesky kernels (potrf, potrs, posv; lower and upper) for the four element types:
// solve_tiny.cuh.
#include <algorithm>

#include "covflow/linalg/cuda/check.hpp"
#include "solve_tiny.cuh"
#include "solve_tiny_launch.hpp"

namespace covflow::linalg::detail::tiny {
namespace {

template <int kNp>
unsigned grid_for(std::int64_t count) {
  const std::int64_t blocks = (count + kThreads / kNp - 1) / (kThreads / kNp);
  return static_cast<unsigned>(std::min<std::int64_t>(blocks, 0x7fffffff));
}

template <class T, int kNp, bool kUpper>
void run_mode(cudaStream_t stream, const Args<T>& args) {
  const unsigned grid = grid_for<kNp>(args.count);
  if (args.mode == factor) chol_kernel<T, kNp, kUpper, factor><<<grid, kThreads, 0, stream>>>(args);
  else if (args.mode == solve) potrs_kernel<T, kNp, kUpper><<<grid, kThreads, 0, stream>>>(args);
  else chol_kernel<T, kNp, kUpper, factor | solve><<<grid, kThreads, 0, stream>>>(args);
}

template <class T, int kNp>
void run(cudaStream_t stream, const Args<T>& args, bool upper) {
  if (upper) run_mode<T, kNp, true>(stream, args);
  else run_mode<T, kNp, false>(stream, args);
}

}  // namespace

template <class T>
void launch_chol(cudaStream_t stream, const Args<T>& args, bool upper) {
  if (args.n <= 1) run<T, 1>(stream, args, upper);
  else if (args.n <= 2) run<T, 2>(stream, args, upper);
  else if (args.n <= 4) run<T, 4>(stream, args, upper);
  else if (args.n <= 8) run<T, 8>(stream, args, upper);
  else if (args.n <= 16) run<T, 16>(stream, args, upper);
  else run<T, 32>(stream, args, upper);
  COVFLOW_CHECK_LAUNCH();
}

template void launch_chol<float>(cudaStream_t, const Args<float>&, bool);
template void launch_chol<double>(cudaStream_t, const Args<double>&, bool);
template void launch_chol<Cx<float>>(cudaStream_t, const Args<Cx<float>>&, bool);
template void launch_chol<Cx<double>>(cudaStream_t, const Args<Cx<double>>&, bool);

}  // namespace covflow::linalg::detail::tiny

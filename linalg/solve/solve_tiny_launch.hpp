// Internal: host launchers of the n ≤ 32 kernels (solve_tiny.cuh), one per kernel family, picking
// the thread-group width (the power of two ≥ n) and the grid. Element types are device types
// (device_scalar.cuh: float, double, Cx<float>, Cx<double>).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "covflow/linalg/types.hpp"

namespace covflow::linalg::detail::tiny {

// What a launch does with A and B.
enum Mode : int {
  factor = 1,  // factor A (getrf / potrf), writing the factor back
  solve = 2,   // solve with B (after factoring, or with a factor read from A)
};

template <class T>
struct Args {
  T* a = nullptr;
  std::int64_t lda = 0, stride_a = 0;
  T* b = nullptr;  // may be null when nrhs = 0
  std::int64_t ldb = 0, stride_b = 0;
  int* ipiv = nullptr;  // LU only: count × n
  int* info = nullptr;  // count, or null for a solve with a given factor
  int n = 0;
  int nrhs = 0;
  std::int64_t count = 0;
  int mode = factor;
  int op = 'N';  // getrs: 'N', 'T' or 'C'
};


// getrf (args.mode = factor) or gesv (factor | solve).
template <class T>
void launch_lu(cudaStream_t stream, const Args<T>& args);
// getrs with args.op.
template <class T>
void launch_getrs(cudaStream_t stream, const Args<T>& args);
// potrf (factor), potrs (solve) or posv (factor | solve).
template <class T>
void launch_chol(cudaStream_t stream, const Args<T>& args, bool upper);

}  // namespace covflow::linalg::detail::tiny

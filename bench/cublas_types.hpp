// cuBLAS data and compute types of covflow's element types, for the benchmarks' cublasGemmEx /
// cublasAxpyEx / cublasNrm2Ex calls on the vendor side.
#pragma once

#include <cublas_v2.h>

#include "covflow/linalg/types.hpp"

namespace covflow::bench {

template <class T> struct Cu;
template <> struct Cu<linalg::f32> { static constexpr cudaDataType data = CUDA_R_32F; static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F; };
template <> struct Cu<linalg::f64> { static constexpr cudaDataType data = CUDA_R_64F; static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_64F; };
template <> struct Cu<linalg::cf32> { static constexpr cudaDataType data = CUDA_C_32F; static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F; };
template <> struct Cu<linalg::cf64> { static constexpr cudaDataType data = CUDA_C_64F; static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_64F; };

}  // namespace covflow::bench

// Internal: cuBLAS strided-batched GEMM for the four element types (device_scalar.cuh's float,
// double, Cx<float>, Cx<double>), C = alpha·op(A)·op(B) + beta·C for `count` matrices. The handle
// must already be on the caller's stream (CudaContext::cublas() is).
#pragma once

#include <cublas_v2.h>

#include "device_scalar.cuh"

namespace covflow::linalg::detail {

// op(X) for X real or complex: N, or the (conjugate) transpose.
template <class D>
constexpr cublasOperation_t adjoint_op() {
  return is_cx<D> ? CUBLAS_OP_C : CUBLAS_OP_T;
}

inline cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   float alpha, const float* a, int lda, long long sa, const float* b, int ldb,
                                   long long sb, float beta, float* c, int ldc, long long sc, int count) {
  return cublasSgemmStridedBatched(h, ta, tb, m, n, k, &alpha, a, lda, sa, b, ldb, sb, &beta, c, ldc, sc, count);
}
inline cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   double alpha, const double* a, int lda, long long sa, const double* b, int ldb,
                                   long long sb, double beta, double* c, int ldc, long long sc, int count) {
  return cublasDgemmStridedBatched(h, ta, tb, m, n, k, &alpha, a, lda, sa, b, ldb, sb, &beta, c, ldc, sc, count);
}
inline cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   Cx<float> alpha, const Cx<float>* a, int lda, long long sa, const Cx<float>* b,
                                   int ldb, long long sb, Cx<float> beta, Cx<float>* c, int ldc, long long sc,
                                   int count) {
  return cublasCgemmStridedBatched(h, ta, tb, m, n, k, reinterpret_cast<const cuComplex*>(&alpha),
                                   reinterpret_cast<const cuComplex*>(a), lda, sa, reinterpret_cast<const cuComplex*>(b),
                                   ldb, sb, reinterpret_cast<const cuComplex*>(&beta), reinterpret_cast<cuComplex*>(c),
                                   ldc, sc, count);
}
inline cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   Cx<double> alpha, const Cx<double>* a, int lda, long long sa, const Cx<double>* b,
                                   int ldb, long long sb, Cx<double> beta, Cx<double>* c, int ldc, long long sc,
                                   int count) {
  return cublasZgemmStridedBatched(h, ta, tb, m, n, k, reinterpret_cast<const cuDoubleComplex*>(&alpha),
                                   reinterpret_cast<const cuDoubleComplex*>(a), lda, sa,
                                   reinterpret_cast<const cuDoubleComplex*>(b), ldb, sb,
                                   reinterpret_cast<const cuDoubleComplex*>(&beta),
                                   reinterpret_cast<cuDoubleComplex*>(c), ldc, sc, count);
}

}  // namespace covflow::linalg::detail

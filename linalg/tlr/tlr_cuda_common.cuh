// Internal: what the CUDA TLR files share — the tile geometry on the device, the workspace carving,
// grid-stride launch sizes, a block sum, a TLR operand of op(X) as kernels read it, and cuBLAS
// batched GEMM and triangular solves on device-built pointer arrays (strided GEMM too).
// Included by tlr_cuda_*.cu only.
#pragma once

#include <cublas_v2.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../common/cublas_gemm.cuh"
#include "../common/device_scalar.cuh"
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "tlr_cuda.hpp"

namespace covflow::linalg::detail::tlr_cuda {

constexpr int kThreads = 256;

// The shape as kernels see it (TlrShape's arithmetic, callable on the device).
struct Geometry {
  int n = 0, b = 0, r = 0, nt = 0;
  long long slots = 0, count = 0;
  bool hermitian = false;

  __host__ __device__ int rows(int i) const { return i + 1 < nt ? b : n - (nt - 1) * b; }
  __host__ __device__ long long slot(int i, int j) const {
    return hermitian ? static_cast<long long>(i) * (i - 1) / 2 + j
                     : static_cast<long long>(i) * (nt - 1) + j - (j > i ? 1 : 0);
  }
  // The stored tile (i, j) of slot s (slot's inverse).
  __host__ __device__ void tile(long long s, int& i, int& j) const {
    if (hermitian) {
      int t = static_cast<int>((1.0 + sqrt(1.0 + 8.0 * double(s))) / 2);
      while (static_cast<long long>(t) * (t - 1) / 2 > s) --t;
      while (static_cast<long long>(t + 1) * t / 2 <= s) ++t;
      i = t;
      j = static_cast<int>(s - static_cast<long long>(t) * (t - 1) / 2);
    } else {
      i = static_cast<int>(s / (nt - 1));
      const int column = static_cast<int>(s % (nt - 1));
      j = column + (column >= i ? 1 : 0);
    }
  }
  __host__ __device__ long long tile_elements() const { return static_cast<long long>(b) * b; }
  __host__ __device__ long long slab_elements() const { return static_cast<long long>(b) * r; }
  __host__ __device__ long long padded() const { return static_cast<long long>(nt) * b; }  // nt·b
};

inline Geometry geometry(const TlrShape& shape) {
  Geometry g;
  g.n = static_cast<int>(shape.n);
  g.b = static_cast<int>(shape.tile);
  g.r = static_cast<int>(shape.max_rank);
  g.nt = static_cast<int>(shape.tiles());
  g.slots = shape.slots();
  g.count = shape.count;
  g.hermitian = shape.hermitian;
  return g;
}

// Parts of the caller's workspace on 256-byte boundaries; with a null base it only counts bytes
// (the *_workspace queries run the same carving as the calls).
class Carve {
 public:
  explicit Carve(std::byte* base) : base_(base) {}
  template <class X>
  X* take(long long elements) {
    std::byte* at = base_ == nullptr ? nullptr : base_ + bytes_;
    bytes_ += (static_cast<std::size_t>(std::max(elements, 0LL)) * sizeof(X) + 255) / 256 * 256;
    return reinterpret_cast<X*>(at);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  std::byte* base_;
  std::size_t bytes_ = 0;
};

// Blocks for a grid-stride loop over `total` items.
inline unsigned blocks_for(long long total) {
  return static_cast<unsigned>(std::clamp((total + kThreads - 1) / kThreads, 1LL, 1LL << 20));
}
#define COVFLOW_TLR_GRID_STRIDE(e, total) \
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < (total); \
       e += static_cast<long long>(gridDim.x) * blockDim.x)

template <class D>
__host__ __device__ inline D nan_of() {
  using R = sreal_t<D>;
  if constexpr (is_cx<D>) return D{R(NAN), R(NAN)};
  else return R(NAN);
}
template <class D>
__host__ __device__ inline D zero_of() {
  return from_real<D>(sreal_t<D>(0));
}

// Sum over the block; every thread gets it. scratch holds blockDim.x / 32 doubles.
__device__ inline double block_sum(double value, double* scratch) {
  value = warp_sum(value);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += scratch[w];
  __syncthreads();
  return total;
}

// dst[e] = conj(src[e]): op T of a complex operand runs as op C on conjugated copies, because
// op_T(A) = conj(A)ᴴ and cuBLAS has no "conjugate, not transposed" operation.
template <class D>
__global__ void conj_copy_kernel(const D* src, D* dst, long long total) {
  COVFLOW_TLR_GRID_STRIDE(e, total) dst[e] = conj_of(src[e]);
}

// C = alpha·op(A)·op(B) + beta·C over `count` triples of pointers in device memory (a kernel wrote
// them, in the workspace). The handle must be on the caller's stream.
inline cublasStatus_t gemm_pointers(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                    float alpha, float* const* a, int lda, float* const* b, int ldb, float beta,
                                    float* const* c, int ldc, int count) {
  return cublasSgemmBatched(h, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc, count);
}
inline cublasStatus_t gemm_pointers(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                    double alpha, double* const* a, int lda, double* const* b, int ldb, double beta,
                                    double* const* c, int ldc, int count) {
  return cublasDgemmBatched(h, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc, count);
}
inline cublasStatus_t gemm_pointers(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                    Cx<float> alpha, Cx<float>* const* a, int lda, Cx<float>* const* b, int ldb,
                                    Cx<float> beta, Cx<float>* const* c, int ldc, int count) {
  return cublasCgemmBatched(h, ta, tb, m, n, k, reinterpret_cast<const cuComplex*>(&alpha),
                            reinterpret_cast<const cuComplex* const*>(a), lda,
                            reinterpret_cast<const cuComplex* const*>(b), ldb,
                            reinterpret_cast<const cuComplex*>(&beta), reinterpret_cast<cuComplex* const*>(c), ldc,
                            count);
}
inline cublasStatus_t gemm_pointers(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                    Cx<double> alpha, Cx<double>* const* a, int lda, Cx<double>* const* b, int ldb,
                                    Cx<double> beta, Cx<double>* const* c, int ldc, int count) {
  return cublasZgemmBatched(h, ta, tb, m, n, k, reinterpret_cast<const cuDoubleComplex*>(&alpha),
                            reinterpret_cast<const cuDoubleComplex* const*>(a), lda,
                            reinterpret_cast<const cuDoubleComplex* const*>(b), ldb,
                            reinterpret_cast<const cuDoubleComplex*>(&beta),
                            reinterpret_cast<cuDoubleComplex* const*>(c), ldc, count);
}

// One batched product's pointer arrays (a, b, c; `count` entries each), carved from the workspace.
template <class D>
struct PointerSet {
  D** a = nullptr;
  D** b = nullptr;
  D** c = nullptr;
  long long count = 0;

  PointerSet() = default;
  PointerSet(Carve& carve, long long entries) : count(entries) {
    a = carve.take<D*>(entries);
    b = carve.take<D*>(entries);
    c = carve.take<D*>(entries);
  }
  __device__ void set(long long e, const D* pa, const D* pb, D* pc) const {
    a[e] = const_cast<D*>(pa);
    b[e] = const_cast<D*>(pb);
    c[e] = pc;
  }
};

// Runs one batched product over a PointerSet (nothing when it is empty).
template <class D>
void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, D alpha,
          const PointerSet<D>& p, int lda, int ldb, D beta, int ldc) {
  if (p.count == 0 || m == 0 || n == 0) return;
  COVFLOW_CUBLAS_TRY(
      gemm_pointers(h, ta, tb, m, n, k, alpha, p.a, lda, p.b, ldb, beta, p.c, ldc, static_cast<int>(p.count)));
}

template <class T>
using dev_t = device_t<std::remove_const_t<T>>;

// A TLR operand as the kernels read it.
template <class D>
struct Operand {
  Geometry g;
  const D* diag = nullptr;
  const D* u = nullptr;
  const D* v = nullptr;
  bool adjoint = false;  // op C (or T, on conjugated arrays)

  __device__ const D* diagonal(long long c, int k) const { return diag + (c * g.nt + k) * g.tile_elements(); }
  // op(X)_ik = L·Rᴴ for i ≠ k.
  __device__ void pair(long long c, int i, int k, const D*& left, const D*& right) const {
    const bool swap = g.hermitian ? i < k : adjoint;
    const long long t = c * g.slots + (swap ? g.slot(k, i) : g.slot(i, k));
    const D* us = u + t * g.slab_elements();
    const D* vs = v + t * g.slab_elements();
    left = swap ? vs : us;
    right = swap ? us : vs;
  }
};

// The operand as the kernels read it; a complex op T copies its arrays conjugated into `scratch`.
template <class T>
Operand<dev_t<T>> operand(Tlr<const T> x, Op op, dev_t<T>* scratch, cudaStream_t stream) {
  using D = dev_t<T>;
  Operand<D> out;
  out.g = geometry(x.shape);
  out.adjoint = op != Op::none;
  out.diag = dev(x.diag);
  out.u = dev(x.u);
  out.v = dev(x.v);
  if (is_complex_v<T> && op == Op::trans) {
    const long long diag = out.g.count * out.g.nt * out.g.tile_elements();
    const long long slabs = out.g.count * out.g.slots * out.g.slab_elements();
    const D* from[3] = {out.diag, out.u, out.v};
    const long long sizes[3] = {diag, slabs, slabs};
    D* to = scratch;
    for (int part = 0; part < 3; ++part) {
      if (sizes[part] > 0) {
        conj_copy_kernel<D><<<blocks_for(sizes[part]), kThreads, 0, stream>>>(from[part], to, sizes[part]);
        COVFLOW_CHECK_LAUNCH();
      }
      (part == 0 ? out.diag : part == 1 ? out.u : out.v) = to;
      to += sizes[part];
    }
  }
  return out;
}

// B = alpha·op(A)⁻¹·B (side left) over `count` pointer pairs in device memory.
inline cublasStatus_t trsm_pointers(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t op, int m, int n,
                                    float alpha, float* const* a, int lda, float* const* b, int ldb, int count) {
  return cublasStrsmBatched(h, CUBLAS_SIDE_LEFT, uplo, op, CUBLAS_DIAG_NON_UNIT, m, n, &alpha, a, lda, b, ldb, count);
}
inline cublasStatus_t trsm_pointers(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t op, int m, int n,
                                    double alpha, double* const* a, int lda, double* const* b, int ldb, int count) {
  return cublasDtrsmBatched(h, CUBLAS_SIDE_LEFT, uplo, op, CUBLAS_DIAG_NON_UNIT, m, n, &alpha, a, lda, b, ldb, count);
}
inline cublasStatus_t trsm_pointers(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t op, int m, int n,
                                    Cx<float> alpha, Cx<float>* const* a, int lda, Cx<float>* const* b, int ldb,
                                    int count) {
  return cublasCtrsmBatched(h, CUBLAS_SIDE_LEFT, uplo, op, CUBLAS_DIAG_NON_UNIT, m, n,
                            reinterpret_cast<const cuComplex*>(&alpha), reinterpret_cast<const cuComplex* const*>(a),
                            lda, reinterpret_cast<cuComplex* const*>(b), ldb, count);
}
inline cublasStatus_t trsm_pointers(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t op, int m, int n,
                                    Cx<double> alpha, Cx<double>* const* a, int lda, Cx<double>* const* b, int ldb,
                                    int count) {
  return cublasZtrsmBatched(h, CUBLAS_SIDE_LEFT, uplo, op, CUBLAS_DIAG_NON_UNIT, m, n,
                            reinterpret_cast<const cuDoubleComplex*>(&alpha),
                            reinterpret_cast<const cuDoubleComplex* const*>(a), lda,
                            reinterpret_cast<cuDoubleComplex* const*>(b), ldb, count);
}

// Lower triangular solves over a PointerSet's a (the triangles) and b (the right-hand sides).
template <class D>
void trsm(cublasHandle_t h, cublasOperation_t op, int m, int n, const PointerSet<D>& p, int lda, int ldb) {
  if (p.count == 0 || m == 0 || n == 0) return;
  COVFLOW_CUBLAS_TRY(trsm_pointers(h, CUBLAS_FILL_MODE_LOWER, op, m, n, from_real<D>(sreal_t<D>(1)), p.a, lda, p.b, ldb,
                                   static_cast<int>(p.count)));
}

// Strided-batched C = alpha·op(A)·op(B) + beta·C (nothing when empty).
template <class D>
void gemm_strided(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, D alpha,
                  const D* a, int lda, long long sa, const D* b, int ldb, long long sb, D beta, D* c, int ldc,
                  long long sc, long long count) {
  if (count == 0 || m == 0 || n == 0) return;
  COVFLOW_CUBLAS_TRY(
      gemm_batched(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, static_cast<int>(count)));
}

}  // namespace covflow::linalg::detail::tlr_cuda

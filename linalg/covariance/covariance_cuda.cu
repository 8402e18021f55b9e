// sample_covariance on the GPU: one cuBLAS strided-batched GEMM (R = X Xᴴ / K) followed by one
// kernel that adds the diagonal loading and makes R exactly Hermitian.
//
// Why the second kernel: GEMM computes R(i,j) and R(j,i) in separate tiles whose summation
// order can differ, and the diagonal's imaginary part comes out as rounding noise rather than 0.
// Downstream eigensolvers read one triangle; users read both. Mirroring the lower triangle into
// the upper one fixes both problems for one extra pass over R, which is memory-bound and small
// next to the GEMM (N²·K complex MACs against N² elements).
#include <cuComplex.h>

#include "covariance_impl.hpp"
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"

namespace covflow::linalg::detail {
namespace {

template <class R> struct complex_of;
template <> struct complex_of<float> { using type = float2; };
template <> struct complex_of<double> { using type = double2; };

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;

// One block per (32×32 tile of the lower triangle, matrix). Block 32×8 threads; the tile is
// staged in shared memory (padded by one column against bank conflicts) so that both the read
// of tile (ti, tj) and the write of its conjugate transpose into tile (tj, ti) are coalesced.
// Diagonal tiles mirror only their own strictly lower part and fix the diagonal.
template <class R>
__global__ void hermitian_finish(typename complex_of<R>::type* r, int n, long long ld,
                                 long long stride, long long count, R loading) {
  using C = typename complex_of<R>::type;
  __shared__ C tile[kTile][kTile + 1];
  // Linear lower-tile index -> (ti, tj), ti >= tj: row ti holds tiles 0..ti.
  const int t = blockIdx.x;
  int ti = static_cast<int>((sqrt(8.0 * t + 1.0) - 1.0) / 2.0);
  while ((ti + 1) * (ti + 2) / 2 <= t) ++ti;
  while (ti * (ti + 1) / 2 > t) --ti;
  const int tj = t - ti * (ti + 1) / 2;
  const int row0 = ti * kTile;
  const int col0 = tj * kTile;

  for (long long b = blockIdx.y; b < count; b += gridDim.y) {
    C* m = r + b * stride;
    // Load tile (row0.., col0..): thread x walks rows (contiguous in memory).
    for (int c = threadIdx.y; c < kTile; c += kRowsPerPass) {
      const int i = row0 + threadIdx.x;
      const int j = col0 + c;
      if (i < n && j < n) tile[threadIdx.x][c] = m[i + j * ld];
    }
    __syncthreads();
    // Store its conjugate transpose into tile (col0.., row0..): element (j, i) = conj(R(i, j)).
    for (int c = threadIdx.y; c < kTile; c += kRowsPerPass) {
      const int j = col0 + threadIdx.x;  // destination row
      const int i = row0 + c;            // destination column
      if (i < n && j < n) {
        if (i > j) {
          const C v = tile[c][threadIdx.x];
          m[j + i * ld] = C{v.x, -v.y};
        } else if (i == j) {
          const C v = tile[c][threadIdx.x];
          m[j + i * ld] = C{v.x + loading, R(0)};
        }
      }
    }
    __syncthreads();
  }
}

inline cublasStatus_t gemm_strided_batched(cublasHandle_t h, int n, int k, float alpha, const cf32* x,
                                           int ldx, long long sx, cf32* r, int ldr, long long sr, int count) {
  const cuComplex a{alpha, 0.f}, zero{0.f, 0.f};
  auto* xp = reinterpret_cast<const cuComplex*>(x);
  return cublasCgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_C, n, n, k, &a, xp, ldx, sx, xp, ldx, sx,
                                   &zero, reinterpret_cast<cuComplex*>(r), ldr, sr, count);
}
inline cublasStatus_t gemm_strided_batched(cublasHandle_t h, int n, int k, double alpha, const cf64* x,
                                           int ldx, long long sx, cf64* r, int ldr, long long sr, int count) {
  const cuDoubleComplex a{alpha, 0.0}, zero{0.0, 0.0};
  auto* xp = reinterpret_cast<const cuDoubleComplex*>(x);
  return cublasZgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_C, n, n, k, &a, xp, ldx, sx, xp, ldx, sx,
                                   &zero, reinterpret_cast<cuDoubleComplex*>(r), ldr, sr, count);
}

}  // namespace

template <class T>
void sample_covariance_cuda(CudaContext& context, Batch<const T> x, Batch<T> r, double loading) {
  using R = real_t<T>;
  context.make_current();
  const int n = static_cast<int>(x.rows);
  const int k = static_cast<int>(x.cols);
  // cuBLAS takes the batch count as int; split larger batches.
  constexpr long long kMaxBatch = 1 << 30;
  for (long long first = 0; first < x.count; first += kMaxBatch) {
    const long long chunk = std::min(kMaxBatch, x.count - first);
    COVFLOW_CUBLAS_TRY(gemm_strided_batched(context.cublas(), n, k, R(1) / static_cast<R>(k),
                                            x.matrix(first), static_cast<int>(x.ld), x.stride,
                                            r.matrix(first), static_cast<int>(r.ld), r.stride,
                                            static_cast<int>(chunk)));
  }
  const int tiles = (n + kTile - 1) / kTile;
  const dim3 grid(static_cast<unsigned>(tiles * (tiles + 1) / 2),
                  static_cast<unsigned>(std::min<long long>(x.count, 65535)));
  hermitian_finish<R><<<grid, dim3(kTile, kRowsPerPass), 0, context.stream()>>>(
      reinterpret_cast<typename complex_of<R>::type*>(r.data), n, r.ld, r.stride, r.count,
      static_cast<R>(loading));
  COVFLOW_CHECK_LAUNCH();
}

template void sample_covariance_cuda<cf32>(CudaContext&, Batch<const cf32>, Batch<cf32>, double);
template void sample_covariance_cuda<cf64>(CudaContext&, Batch<const cf64>, Batch<cf64>, double);

}  // namespace covflow::linalg::detail

// The compress stage's own device work (docs/stages.md, "compress"): widening cf32 covariances to
// complex double, the Frobenius norms of R and of R − R̃, and the sums behind the SINR loss of the
// TLR beams. The factorizations, solves and compressions are linalg's, issued by
// compress_stage.cpp on the same stream. Reductions run in a fixed order per block, so a frame's
// numbers do not depend on scheduling.
#include <cuComplex.h>

#include <algorithm>

#include "compress_device.hpp"
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"

namespace covflow::stages::detail {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(long long work) {
  const long long blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<long long>(blocks, 1, 8192));
}

__global__ void widen_kernel(const float2* in, long long elements, double2* out) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < elements;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    out[i] = make_double2(in[i].x, in[i].y);
}

// Sums of kThreads per-thread partials, thread 0 holding the result (a fixed tree: deterministic).
__device__ double block_total(double value, double* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

// One block per cell.
__global__ void frobenius_kernel(const double2* r, const double2* approx, long long nn, double* err2, double* norm2) {
  __shared__ double shared[kThreads];
  const long long cell = blockIdx.x;
  const double2* a = r + cell * nn;
  const double2* b = approx != nullptr ? approx + cell * nn : nullptr;
  double norm = 0.0, err = 0.0;
  for (long long i = threadIdx.x; i < nn; i += kThreads) {
    const double2 v = a[i];
    norm += v.x * v.x + v.y * v.y;
    if (b != nullptr) {
      const double dx = v.x - b[i].x, dy = v.y - b[i].y;
      err += dx * dx + dy * dy;
    }
  }
  norm = block_total(norm, shared);
  if (b != nullptr) err = block_total(err, shared);
  if (threadIdx.x == 0) {
    norm2[cell] = norm;
    if (b != nullptr) err2[cell] = err;
  }
}

__global__ void steering_kernel(const double2* steering, long long per_cell, long long total, double2* rhs) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    rhs[i] = steering[i % per_cell];
}

// One block per (cell, look): thread i walks rows i, i + kThreads, …; (R·z)_i = Σ_j R(i, j)·z_j
// reads R column-major, coalesced across the block.
__global__ void beam_sums_kernel(const double2* r, const double2* steering, const double2* z_dense,
                                 const double2* z_tlr, int n, int looks, double2* g_dense, double2* g_tlr,
                                 double* q_tlr) {
  __shared__ double shared[kThreads];
  const int look = blockIdx.x % looks;
  const long long cell = blockIdx.x / looks;
  const double2* a = steering + static_cast<long long>(look) * n;
  const double2* rc = r + cell * n * n;
  const double2* zd = z_dense + (cell * looks + look) * n;
  const double2* zt = z_tlr + (cell * looks + look) * n;
  double gd_re = 0, gd_im = 0, gt_re = 0, gt_im = 0, q = 0;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    // conj(a_i)·z_i
    gd_re += a[i].x * zd[i].x + a[i].y * zd[i].y;
    gd_im += a[i].x * zd[i].y - a[i].y * zd[i].x;
    gt_re += a[i].x * zt[i].x + a[i].y * zt[i].y;
    gt_im += a[i].x * zt[i].y - a[i].y * zt[i].x;
    double rz_re = 0, rz_im = 0;
    for (int j = 0; j < n; ++j) {
      const double2 rij = rc[i + static_cast<long long>(j) * n];
      const double2 zj = zt[j];
      rz_re += rij.x * zj.x - rij.y * zj.y;
      rz_im += rij.x * zj.y + rij.y * zj.x;
    }
    q += zt[i].x * rz_re + zt[i].y * rz_im;  // Re(conj(z_i)·(Rz)_i); the sum is real for Hermitian R
  }
  gd_re = block_total(gd_re, shared);
  gd_im = block_total(gd_im, shared);
  gt_re = block_total(gt_re, shared);
  gt_im = block_total(gt_im, shared);
  q = block_total(q, shared);
  if (threadIdx.x == 0) {
    g_dense[blockIdx.x] = make_double2(gd_re, gd_im);
    g_tlr[blockIdx.x] = make_double2(gt_re, gt_im);
    q_tlr[blockIdx.x] = q;
  }
}

}  // namespace

void compress_widen(linalg::CudaContext& context, const void* in, replay::ElementType type, std::size_t elements,
                    cf64* out) {
  if (elements == 0) return;
  if (type == replay::ElementType::cf64) {
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(out, in, elements * sizeof(cf64), cudaMemcpyDeviceToDevice, context.stream()));
    return;
  }
  widen_kernel<<<blocks_for(static_cast<long long>(elements)), kThreads, 0, context.stream()>>>(
      static_cast<const float2*>(in), static_cast<long long>(elements), reinterpret_cast<double2*>(out));
  COVFLOW_CUDA_TRY(cudaGetLastError());
}

void compress_frobenius(linalg::CudaContext& context, const cf64* r, const cf64* approx, int cells, int n,
                        double* err2, double* norm2) {
  if (cells == 0) return;
  frobenius_kernel<<<cells, kThreads, 0, context.stream()>>>(reinterpret_cast<const double2*>(r),
                                                            reinterpret_cast<const double2*>(approx),
                                                            static_cast<long long>(n) * n, err2, norm2);
  COVFLOW_CUDA_TRY(cudaGetLastError());
}

void compress_load_steering(linalg::CudaContext& context, const cf64* steering, int cells, int n, int looks,
                            cf64* rhs) {
  const long long per_cell = static_cast<long long>(n) * looks, total = per_cell * cells;
  if (total == 0) return;
  steering_kernel<<<blocks_for(total), kThreads, 0, context.stream()>>>(reinterpret_cast<const double2*>(steering),
                                                                       per_cell, total, reinterpret_cast<double2*>(rhs));
  COVFLOW_CUDA_TRY(cudaGetLastError());
}

void compress_beam_sums(linalg::CudaContext& context, const cf64* r, const cf64* steering, const cf64* z_dense,
                        const cf64* z_tlr, int cells, int n, int looks, cf64* g_dense, cf64* g_tlr, double* q_tlr) {
  if (cells == 0 || looks == 0) return;
  beam_sums_kernel<<<cells * looks, kThreads, 0, context.stream()>>>(
      reinterpret_cast<const double2*>(r), reinterpret_cast<const double2*>(steering),
      reinterpret_cast<const double2*>(z_dense), reinterpret_cast<const double2*>(z_tlr), n, looks,
      reinterpret_cast<double2*>(g_dense), reinterpret_cast<double2*>(g_tlr), q_tlr);
  COVFLOW_CUDA_TRY(cudaGetLastError());
}

}  // namespace covflow::stages::detail

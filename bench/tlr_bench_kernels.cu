// The matrices of covflow-bench tlr, made on the device (an n = 32768 complex double matrix is
// 17 GB: not something to build on the host and upload).
#include <cuda_runtime.h>

#include <complex>
#include <numbers>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/types.hpp"
#include "tlr_bench.hpp"

namespace covflow::bench {
namespace {

template <class T>
__device__ void store(T* a, std::int64_t at, double re, double im) {
  using R = linalg::real_t<T>;
  if constexpr (linalg::is_complex_v<T>) {
    reinterpret_cast<R*>(a)[2 * at] = R(re);
    reinterpret_cast<R*>(a)[2 * at + 1] = R(im);
  } else {
    a[at] = T(re);
  }
}

template <class T>
__global__ void exponential_kernel(T* a, const double* p, std::int64_t n, double length, double kx, double ky) {
  const std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  const std::int64_t j = blockIdx.y;
  if (i >= n) return;
  const double dx = p[i] - p[j], dy = p[i + n] - p[j + n];
  const double value = exp(-sqrt(dx * dx + dy * dy) / length);
  double s, c;
  sincospi(2.0 * (kx * dx + ky * dy), &s, &c);
  store(a, i + j * n, value * c, linalg::is_complex_v<T> ? value * s : 0.0);
}

template <class T>
__global__ void clutter_kernel(T* a, const double* p, std::int64_t n, double clutter, double centre, double width,
                               int steps, double jammer, double jammer_deg) {
  const std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  const std::int64_t j = blockIdx.y;
  if (i >= n) return;
  const double dx = p[i] - p[j], dy = p[i + n] - p[j + n];
  // Σ over directions of p·e^{j2π(d·u)}, u = (sin az, cos az) at elevation 0 (midpoint rule).
  auto term = [&](double az_deg, double power, double& re, double& im) {
    double s_az, c_az, s, c;
    sincospi(az_deg / 180.0, &s_az, &c_az);
    sincospi(2.0 * (dx * s_az + dy * c_az), &s, &c);
    re += power * c;
    im += power * s;
  };
  double re = i == j ? 1.0 : 0.0, im = 0;
  for (int q = 0; q < steps; ++q)
    term(centre - width / 2 + width * (q + 0.5) / steps, clutter / steps, re, im);
  term(jammer_deg, jammer, re, im);
  term(-jammer_deg, jammer, re, im);
  store(a, i + j * n, re, linalg::is_complex_v<T> ? im : 0.0);
}

dim3 grid_of(std::int64_t n) { return dim3(static_cast<unsigned>((n + 255) / 256), static_cast<unsigned>(n)); }

}  // namespace

template <class T>
void exponential_matrix(T* a, const double* points, std::int64_t n, double length, double kx, double ky,
                        cudaStream_t stream) {
  if (n == 0) return;
  exponential_kernel<T><<<grid_of(n), 256, 0, stream>>>(a, points, n, length, kx, ky);
  COVFLOW_CUDA_TRY(cudaGetLastError());
}

template <class T>
void clutter_matrix(T* a, const double* positions, std::int64_t n, double clutter, double centre_deg, double width_deg,
                    int steps, double jammer, double jammer_deg, cudaStream_t stream) {
  if (n == 0) return;
  clutter_kernel<T><<<grid_of(n), 256, 0, stream>>>(a, positions, n, clutter, centre_deg, width_deg, steps, jammer,
                                                    jammer_deg);
  COVFLOW_CUDA_TRY(cudaGetLastError());
}

#define COVFLOW_TLR_BENCH_MATRICES(T)                                                                                 \
  template void exponential_matrix<T>(T*, const double*, std::int64_t, double, double, double, cudaStream_t);       \
  template void clutter_matrix<T>(T*, const double*, std::int64_t, double, double, double, int, double, double,     \
                                  cudaStream_t);
COVFLOW_TLR_BENCH_MATRICES(linalg::f32)
COVFLOW_TLR_BENCH_MATRICES(linalg::f64)
COVFLOW_TLR_BENCH_MATRICES(linalg::cf32)
COVFLOW_TLR_BENCH_MATRICES(linalg::cf64)
#undef COVFLOW_TLR_BENCH_MATRICES

}  // namespace covflow::bench

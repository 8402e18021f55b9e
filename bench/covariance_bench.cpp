// covflow-bench covariance: R_b = X_b X_bᴴ / K + δI.
//   covflow      linalg::sample_covariance on the CUDA backend
//   cublas-gemm  what a user writes by hand: copy δI into R, then one
//                cublas{C,Z}gemmStridedBatched with alpha = 1/K, beta = 1
//   cpu          linalg::sample_covariance on the CPU backend (BLAS herk across the pool)
#include <complex>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "bench_common.hpp"
#include "covflow/linalg/covariance.hpp"
#include "covariance_bench.hpp"
#if COVFLOW_HAS_CUDA
#include <cublas_v2.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::bench {
namespace {

using namespace covflow::linalg;

struct Shape {
  int channels, snapshots, cells;
};

template <class T>
std::vector<T> random_snapshots(std::size_t count, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, std::sqrt(0.5));
  std::vector<T> x(count);
  for (auto& v : x) v = T(static_cast<real_t<T>>(normal(rng)), static_cast<real_t<T>>(normal(rng)));
  return x;
}

#if COVFLOW_HAS_CUDA
cublasStatus_t vendor_gemm(cublasHandle_t h, const Shape& s, const cf32* x, cf32* r) {
  const cuComplex alpha{1.0f / static_cast<float>(s.snapshots), 0.f}, one{1.f, 0.f};
  auto* xp = reinterpret_cast<const cuComplex*>(x);
  return cublasCgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_C, s.channels, s.channels, s.snapshots, &alpha, xp,
                                   s.channels, std::int64_t(s.channels) * s.snapshots, xp, s.channels,
                                   std::int64_t(s.channels) * s.snapshots, &one, reinterpret_cast<cuComplex*>(r),
                                   s.channels, std::int64_t(s.channels) * s.channels, s.cells);
}
cublasStatus_t vendor_gemm(cublasHandle_t h, const Shape& s, const cf64* x, cf64* r) {
  const cuDoubleComplex alpha{1.0 / s.snapshots, 0.0}, one{1.0, 0.0};
  auto* xp = reinterpret_cast<const cuDoubleComplex*>(x);
  return cublasZgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_C, s.channels, s.channels, s.snapshots, &alpha, xp,
                                   s.channels, std::int64_t(s.channels) * s.snapshots, xp, s.channels,
                                   std::int64_t(s.channels) * s.snapshots, &one, reinterpret_cast<cuDoubleComplex*>(r),
                                   s.channels, std::int64_t(s.channels) * s.channels, s.cells);
}
#endif

template <class T>
Row bench_shape(const Shape& s, const Settings& settings, Exec* gpu, Exec& cpu, std::mt19937_64& rng) {
  constexpr double loading = 1e-2;
  const std::size_t x_elems = std::size_t(s.channels) * s.snapshots * s.cells;
  const std::size_t r_elems = std::size_t(s.channels) * s.channels * s.cells;
  Row row;
  row.op = "covariance";
  row.dtype = std::string(name(element_type_of<T>()));
  row.shape = fmt::format("N={} K={} batch={}", s.channels, s.snapshots, s.cells);
  row.flops = 8.0 * s.channels * double(s.channels) * s.snapshots * s.cells;  // complex GEMM count
  row.vendors = {"cublas-gemm"};
  const std::vector<T> x = random_snapshots<T>(x_elems, rng);

#if COVFLOW_HAS_CUDA
  if (gpu != nullptr) {
    cudaStream_t stream = gpu->cuda_context().stream();
    // Rotate among input sets so that small problems are not timed out of L2 alone.
    const int sets = static_cast<int>(std::clamp<std::size_t>((256u << 20) / (x_elems * sizeof(T) + 1), 1, 4));
    std::vector<cuda::DeviceBuffer<T>> dx;
    for (int i = 0; i < sets; ++i) {
      dx.emplace_back(x_elems);
      dx.back().upload(x, stream);
    }
    cuda::DeviceBuffer<T> dr(r_elems), loaded_identity(r_elems);
    std::vector<T> identity(r_elems, T(0));
    for (int c = 0; c < s.cells; ++c)
      for (int i = 0; i < s.channels; ++i)
        identity[std::size_t(c) * s.channels * s.channels + i + std::size_t(i) * s.channels] = T(loading);
    loaded_identity.upload(identity, stream);

    row.times["covflow"] = time_device(
        stream,
        [&](int rep) {
          sample_covariance<T>(*gpu, Batch<T>::packed(dx[rep % sets].data(), s.channels, s.snapshots, s.cells),
                               Batch<T>::packed(dr.data(), s.channels, s.channels, s.cells),
                               {.diagonal_loading = loading});
        },
        settings.warmup, settings.reps);
    row.times["cublas-gemm"] = time_device(
        stream,
        [&](int rep) {
          COVFLOW_CUDA_TRY(cudaMemcpyAsync(dr.data(), loaded_identity.data(), r_elems * sizeof(T),
                                           cudaMemcpyDeviceToDevice, stream));
          COVFLOW_CUBLAS_TRY(vendor_gemm(gpu->cuda_context().cublas(), s, dx[rep % sets].data(), dr.data()));
        },
        settings.warmup, settings.reps);
    identity.clear();
    gpu->synchronize();
  }
#endif
  if (settings.cpu) {
    std::vector<T> r(r_elems);
    row.times["cpu"] = time_host(
        [&] {
          sample_covariance<T>(cpu, Batch<const T>::packed(x.data(), s.channels, s.snapshots, s.cells),
                               Batch<T>::packed(r.data(), s.channels, s.channels, s.cells), {.diagonal_loading = loading});
        },
        1, settings.cpu_reps);
  }
  return row;
}

}  // namespace

nlohmann::json run_covariance_bench(const Settings& settings, Exec* gpu, Exec& cpu) {
  std::mt19937_64 rng(12345);
  std::vector<Shape> shapes = {{16, 64, 180}, {64, 128, 180}, {128, 256, 180}, {16, 32, 10000}};
  if (settings.quick) shapes = {{16, 64, 180}, {128, 256, 180}};
  Report report("covariance: R = X Xᴴ / K + δI");
  for (const Shape& s : shapes) {
    report.add(bench_shape<cf32>(s, settings, gpu, cpu, rng));
    report.add(bench_shape<cf64>(s, settings, gpu, cpu, rng));
  }
  report.print();
  return report.to_json();
}

}  // namespace covflow::bench

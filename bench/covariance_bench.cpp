// covflow-bench covariance: R_b = X_b X_bᴴ / K + δI.
//   covflow      linalg::sample_covariance on the CUDA backend
//   cublas-gemm  what a user writes by hand: copy δI into R, then one
//                cublas{C,Z}gemmStridedBatched with alpha = 1/K, beta = 1
//   cpu          linalg::sample_covariance on the CPU backend (BLAS herk across the pool)
// After timing, outside the timed region, covflow's R is compared with cublas-gemm's, every cell;
// a row that disagrees fails, so the table never times a wrong answer.
#include <cmath>
#include <complex>
#include <limits>
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
// Each of two R's is within 4·(K + 2)·ε·‖|X||X|ᴴ‖_F / K of the exact R_b, in the Frobenius norm
// (the componentwise bound of a K-term dot product, as the test suites state it), so they differ by
// at most twice that. ‖|X||X|ᴴ‖_F ≤ ‖X‖_F² keeps the bound O(N·K) to evaluate, and loosens it only
// by about 4/π for Gaussian snapshots.
constexpr double kCovarianceTolerance = 2 * 4;  // units of (K + 2)·ε·‖X‖_F² / K

// max over cells of ‖R_covflow − R_vendor‖_F / ((K + 2)·ε·‖X_b‖_F² / K); NaN anywhere gives NaN.
template <class T>
double covariance_difference(const std::vector<T>& covflow, const std::vector<T>& vendor, const std::vector<T>& x,
                             const Shape& s) {
  const double eps = std::numeric_limits<real_t<T>>::epsilon();
  const std::size_t square = std::size_t(s.channels) * s.channels, panel = std::size_t(s.channels) * s.snapshots;
  double worst = 0;
  for (int b = 0; b < s.cells; ++b) {
    double diff2 = 0, x2 = 0;
    for (std::size_t e = 0; e < square; ++e)
      diff2 += std::norm(std::complex<double>(covflow[b * square + e]) - std::complex<double>(vendor[b * square + e]));
    for (std::size_t e = 0; e < panel; ++e) x2 += std::norm(std::complex<double>(x[b * panel + e]));
    const double bound = (s.snapshots + 2) * eps * x2 / s.snapshots;
    const double scaled = std::sqrt(diff2) / bound;
    if (std::isnan(scaled) || std::isnan(worst)) worst = std::numeric_limits<double>::quiet_NaN();
    else worst = std::max(worst, scaled);
  }
  return worst;
}

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

    dr.fill_bytes(0xFF, stream);  // NaN: an element no call writes fails the check
    row.times["covflow"] = time_device(
        stream,
        [&](int rep) {
          sample_covariance<T>(*gpu, Batch<T>::packed(dx[rep % sets].data(), s.channels, s.snapshots, s.cells),
                               Batch<T>::packed(dr.data(), s.channels, s.channels, s.cells),
                               {.diagonal_loading = loading});
        },
        settings.warmup, settings.reps);
    std::vector<T> covflow_r(r_elems), vendor_r(r_elems);
    dr.download(covflow_r, stream);
    row.times["cublas-gemm"] = time_device(
        stream,
        [&](int rep) {
          COVFLOW_CUDA_TRY(cudaMemcpyAsync(dr.data(), loaded_identity.data(), r_elems * sizeof(T),
                                           cudaMemcpyDeviceToDevice, stream));
          COVFLOW_CUBLAS_TRY(vendor_gemm(gpu->cuda_context().cublas(), s, dx[rep % sets].data(), dr.data()));
        },
        settings.warmup, settings.reps);
    identity.clear();
    dr.download(vendor_r, stream);
    gpu->synchronize();
    const double difference = covariance_difference(covflow_r, vendor_r, x, s);
    row.notes["‖R_covflow − R_cublas‖_F"] = fmt::format("{:.3f} (K + 2)·ε·‖X‖_F²/K (tolerance {:.0f})", difference,
                                                      kCovarianceTolerance);
    if (!(difference <= kCovarianceTolerance))
      row.fail(fmt::format("R differs from cublas-gemm's by {:.3f} (K + 2)·ε·‖X‖_F²/K (tolerance {:.0f})", difference,
                           kCovarianceTolerance));
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

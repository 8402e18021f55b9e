// covflow-bench heev: batched Hermitian eigendecomposition.
//   covflow         linalg::heev on the CUDA backend
//   xsyev-batched   cusolverDnXsyevBatched (cuSOLVER's batched syev/heev)
//   heevj-batched   cusolverDn{C,Z}heevjBatched (Jacobi; cuSOLVER supports it for n ≤ 32 only)
//   cpu             linalg::heev on the CPU backend (LAPACK ?heevd across the pool), timed on a
//                   sub-batch of one matrix per thread and scaled to the full batch (marked so)
// Every contender overwrites A, so each timed call starts from a fresh copy made before its start
// event. After timing, the eigenvalues of covflow and of the best vendor path are compared so the
// table never times a wrong answer.
#include <algorithm>
#include <complex>
#include <cstdio>
#include <stdexcept>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "heev_bench.hpp"
#include "covflow/linalg/heev.hpp"
#if COVFLOW_HAS_CUDA
#include <cusolverDn.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::bench {
namespace {

using namespace covflow::linalg;

// Random Hermitian matrices with a radar-like spectrum: a few strong eigenvalues over a noise floor.
template <class T>
std::vector<T> make_inputs(int n, long long count, std::mt19937_64& rng) {
  using R = real_t<T>;
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<T> a(static_cast<std::size_t>(count) * n * n);
  for (long long b = 0; b < count; ++b) {
    T* m = a.data() + b * n * n;
    for (int j = 0; j < n; ++j)
      for (int i = j; i < n; ++i) {
        T v;
        if constexpr (is_complex_v<T>) v = T(R(normal(rng)), i == j ? R(0) : R(normal(rng)));
        else v = R(normal(rng));
        if (i == j) v += R(n);  // diagonal dominance keeps the spectrum positive like a covariance
        m[i + j * n] = v;
        if constexpr (is_complex_v<T>) m[j + i * n] = std::conj(v);
        else m[j + i * n] = v;
      }
  }
  return a;
}

double nominal_flops(int n, bool complex, bool vectors) {
  // Tridiagonalization 4/3·n³, plus about 23/3·n³ for the eigenvectors (QR updates and the
  // back-transform), in real operations; ×4 for complex arithmetic. A convention, stated in
  // docs/performance.md, so GFLOP/s compare contenders, not algorithms.
  const double n3 = double(n) * n * n;
  return (complex ? 4.0 : 1.0) * (vectors ? 9.0 : 4.0 / 3.0) * n3;
}

#if COVFLOW_HAS_CUDA
template <class T> cudaDataType cuda_type();
template <> cudaDataType cuda_type<cf32>() { return CUDA_C_32F; }
template <> cudaDataType cuda_type<cf64>() { return CUDA_C_64F; }
template <class R> cudaDataType cuda_real_type();
template <> cudaDataType cuda_real_type<float>() { return CUDA_R_32F; }
template <> cudaDataType cuda_real_type<double>() { return CUDA_R_64F; }

cusolverStatus_t heevj_buffer(cusolverDnHandle_t h, cusolverEigMode_t jobz, int n, const cf32* a, const float* w,
                              int* lwork, syevjInfo_t p, int batch) {
  return cusolverDnCheevjBatched_bufferSize(h, jobz, CUBLAS_FILL_MODE_LOWER, n, reinterpret_cast<const cuComplex*>(a), n,
                                            w, lwork, p, batch);
}
cusolverStatus_t heevj_buffer(cusolverDnHandle_t h, cusolverEigMode_t jobz, int n, const cf64* a, const double* w,
                              int* lwork, syevjInfo_t p, int batch) {
  return cusolverDnZheevjBatched_bufferSize(h, jobz, CUBLAS_FILL_MODE_LOWER, n,
                                            reinterpret_cast<const cuDoubleComplex*>(a), n, w, lwork, p, batch);
}
cusolverStatus_t heevj(cusolverDnHandle_t h, cusolverEigMode_t jobz, int n, cf32* a, float* w, cf32* work, int lwork,
                       int* info, syevjInfo_t p, int batch) {
  return cusolverDnCheevjBatched(h, jobz, CUBLAS_FILL_MODE_LOWER, n, reinterpret_cast<cuComplex*>(a), n, w,
                                 reinterpret_cast<cuComplex*>(work), lwork, info, p, batch);
}
cusolverStatus_t heevj(cusolverDnHandle_t h, cusolverEigMode_t jobz, int n, cf64* a, double* w, cf64* work, int lwork,
                       int* info, syevjInfo_t p, int batch) {
  return cusolverDnZheevjBatched(h, jobz, CUBLAS_FILL_MODE_LOWER, n, reinterpret_cast<cuDoubleComplex*>(a), n, w,
                                 reinterpret_cast<cuDoubleComplex*>(work), lwork, info, p, batch);
}
#endif

template <class T>
Row bench_one(int n, long long count, bool vectors, const Settings& settings, Exec* gpu, Exec& cpu, std::mt19937_64& rng) {
  using R = real_t<T>;
  Row row;
  row.op = "heev";
  row.dtype = std::string(name(element_type_of<T>()));
  row.shape = fmt::format("n={} batch={} {}", n, count, vectors ? "vectors" : "values");
  row.flops = nominal_flops(n, is_complex_v<T>, vectors) * double(count);
  row.vendors = {"xsyev-batched", "heevj-batched"};
  const std::size_t elems = static_cast<std::size_t>(count) * n * n;
  const std::vector<T> host_a = make_inputs<T>(n, count, rng);

#if COVFLOW_HAS_CUDA
  if (gpu != nullptr) {
    CudaContext& context = gpu->cuda_context();
    cudaStream_t stream = context.stream();
    const int sets = static_cast<int>(std::clamp<std::size_t>((512u << 20) / (elems * sizeof(T) + 1), 1, 3));
    std::vector<cuda::DeviceBuffer<T>> pristine;
    for (int i = 0; i < sets; ++i) {
      pristine.emplace_back(elems);
      pristine.back().upload(host_a, stream);
    }
    cuda::DeviceBuffer<T> work_a(elems);
    cuda::DeviceBuffer<R> w_covflow(static_cast<std::size_t>(count) * n), w_vendor(static_cast<std::size_t>(count) * n);
    cuda::DeviceBuffer<int> info(static_cast<std::size_t>(count));
    auto restore = [&](int rep) {
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(work_a.data(), pristine[rep % sets].data(), elems * sizeof(T),
                                       cudaMemcpyDeviceToDevice, stream));
    };
    const HeevOptions options{.uplo = Uplo::lower, .vectors = vectors};
    gpu->workspace().reserve(heev_workspace<T>(*gpu, n, count, options));
    row.notes["covflow workspace"] =
        fmt::format("{:.1f} MiB ({:.2f}× the input batch)", heev_workspace<T>(*gpu, n, count, options) / 1048576.0,
                    double(heev_workspace<T>(*gpu, n, count, options)) / double(elems * sizeof(T)));
    const std::size_t growth_before = gpu->workspace().growth_count();
    row.times["covflow"] = time_device(
        stream,
        [&](int) {
          heev<T>(*gpu, Batch<T>::packed(work_a.data(), n, n, count), {w_covflow.data(), w_covflow.size()},
                  {info.data(), info.size()}, options);
        },
        settings.warmup, settings.reps, restore);
    if (gpu->workspace().growth_count() != growth_before) row.notes["warning"] = "covflow workspace grew while timed";
    std::vector<int> info_host(static_cast<std::size_t>(count));
    info.download(info_host, stream);
    gpu->synchronize();
    const auto bad = std::count_if(info_host.begin(), info_host.end(), [](int v) { return v != 0; });
    if (bad) row.notes["covflow info"] = fmt::format("{} matrices with info != 0", bad);

    // cusolverDnXsyevBatched
    const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
    cusolverDnParams_t params = nullptr;
    COVFLOW_CUSOLVER_TRY(cusolverDnCreateParams(&params));
    std::size_t device_bytes = 0, host_bytes = 0;
    COVFLOW_CUSOLVER_TRY(cusolverDnXsyevBatched_bufferSize(context.cusolver(), params, jobz, CUBLAS_FILL_MODE_LOWER, n,
                                                           cuda_type<T>(), work_a.data(), n, cuda_real_type<R>(),
                                                           w_vendor.data(), cuda_type<T>(), &device_bytes, &host_bytes,
                                                           count));
    {
      cuda::DeviceBuffer<std::byte> device_work(std::max<std::size_t>(device_bytes, 1));
      std::vector<std::byte> host_work(std::max<std::size_t>(host_bytes, 1));
      row.times["xsyev-batched"] = time_device(
          stream,
          [&](int) {
            COVFLOW_CUSOLVER_TRY(cusolverDnXsyevBatched(context.cusolver(), params, jobz, CUBLAS_FILL_MODE_LOWER, n,
                                                        cuda_type<T>(), work_a.data(), n, cuda_real_type<R>(),
                                                        w_vendor.data(), cuda_type<T>(), device_work.data(), device_bytes,
                                                        host_work.data(), host_bytes, info.data(), count));
          },
          settings.warmup, settings.reps, restore);
      row.notes["xsyev workspace"] = fmt::format("{:.1f} MiB", device_bytes / 1048576.0);
    }
    cusolverDnDestroyParams(params);
    // Same answer? Compare the eigenvalues of the last timed calls.
    std::vector<R> wc(static_cast<std::size_t>(count) * n), wv(static_cast<std::size_t>(count) * n);
    w_covflow.download(wc, stream);
    w_vendor.download(wv, stream);
    gpu->synchronize();
    double worst = 0;
    for (long long b = 0; b < count; ++b) {
      double scale = 0, diff = 0;
      for (int k = 0; k < n; ++k) {
        scale = std::max(scale, std::abs(double(wv[b * n + k])));
        diff = std::max(diff, std::abs(double(wc[b * n + k]) - double(wv[b * n + k])));
      }
      worst = std::max(worst, scale > 0 ? diff / scale : diff);
    }
    row.notes["max |λ_covflow − λ_xsyev| / ‖A‖₂"] =
        fmt::format("{:.2e} ({:.2f} n·ε)", worst, worst / (n * std::numeric_limits<R>::epsilon()));

    // {C,Z}heevjBatched: n ≤ 32 only
    if (n <= 32) {
      syevjInfo_t jparams = nullptr;
      COVFLOW_CUSOLVER_TRY(cusolverDnCreateSyevjInfo(&jparams));
      int lwork = 0;
      COVFLOW_CUSOLVER_TRY(heevj_buffer(context.cusolver(), jobz, n, work_a.data(), w_vendor.data(), &lwork, jparams,
                                        static_cast<int>(count)));
      cuda::DeviceBuffer<T> jwork(static_cast<std::size_t>(std::max(lwork, 1)));
      row.times["heevj-batched"] = time_device(
          stream,
          [&](int) {
            COVFLOW_CUSOLVER_TRY(heevj(context.cusolver(), jobz, n, work_a.data(), w_vendor.data(), jwork.data(), lwork,
                                       info.data(), jparams, static_cast<int>(count)));
          },
          settings.warmup, settings.reps, restore);
      cusolverDnDestroySyevjInfo(jparams);
    }
  }
#endif
  if (settings.cpu) {
    const long long sub = std::min<long long>(count, cpu.pool().size());
    std::vector<T> a(host_a.begin(), host_a.begin() + static_cast<std::ptrdiff_t>(sub) * n * n), work(a.size());
    std::vector<R> w(static_cast<std::size_t>(sub) * n);
    std::vector<int> info(static_cast<std::size_t>(sub));
    const HeevOptions options{.uplo = Uplo::lower, .vectors = vectors};
    Timing t = time_host(
        [&] {
          work = a;
          heev<T>(cpu, Batch<T>::packed(work.data(), n, n, sub), w, info, options);
        },
        n >= 256 ? 0 : 1, n >= 256 ? 1 : settings.cpu_reps);
    const double scale = double(count) / double(sub);
    t.median_ms *= scale;
    t.min_ms *= scale;
    t.max_ms *= scale;
    row.times["cpu"] = t;
    if (sub < count) row.notes["cpu"] = fmt::format("timed on {} matrices ({} threads), scaled ×{:.0f}", sub,
                                                    cpu.pool().size(), scale);
  }
  return row;
}

}  // namespace

nlohmann::json run_heev_bench(const Settings& settings, Exec* gpu, Exec& cpu) {
  std::mt19937_64 rng(2026);
  struct Shape {
    int n;
    long long count;
  };
  std::vector<Shape> shapes = {{16, 180}, {32, 180}, {64, 180}, {128, 180}, {256, 180}, {512, 180}, {16, 10000}, {32, 10000}};
  if (settings.quick) shapes = {{32, 180}, {128, 180}};
  if (!settings.shapes.empty()) {
    shapes.clear();
    for (const std::string& text : settings.shapes) {
      Shape s{};
      if (std::sscanf(text.c_str(), "%dx%lld", &s.n, &s.count) != 2 || s.n < 1 || s.count < 1)
        throw std::invalid_argument("--shape expects NxBATCH, e.g. 128x180; got '" + text + "'");
      shapes.push_back(s);
    }
  }
  Report report("heev: batched Hermitian eigendecomposition");
  for (bool vectors : {true, false}) {
    if (!settings.mode.empty() && settings.mode != (vectors ? "vectors" : "values")) continue;
    for (const Shape& s : shapes) {
      if (settings.dtype.empty() || settings.dtype == "cf64")
        report.add(bench_one<cf64>(s.n, s.count, vectors, settings, gpu, cpu, rng));
      if (settings.dtype.empty() || settings.dtype == "cf32")
        report.add(bench_one<cf32>(s.n, s.count, vectors, settings, gpu, cpu, rng));
    }
  }
  report.print();
  return report.to_json();
}

}  // namespace covflow::bench

// covflow-bench svd: batched thin SVD.
//   covflow          linalg::gesvj on the CUDA backend (one-sided Jacobi; see linalg/svd/)
//   gesvdj-batched   cusolverDn<t>gesvdjBatched (cuSOLVER's batched Jacobi; m, n ≤ 32 only; full U, V)
//   gesvda-strided   cusolverDn<t>gesvdaStridedBatched (approximate: it works on the Gram matrix,
//                    so small σ lose accuracy — its residual and σ error are reported beside ours;
//                    its h_R_nrmF must be a host array: a null pointer faults); m ≥ n
//                    (COVFLOW_BENCH_GESVDA=0 leaves it out)
//   gesvdj-streams   cusolverDn<t>gesvdj (economy) on each matrix, the calls spread over 20 streams,
//                    each with its own handle and workspace (W. Boukaram et al., "Batched QR and SVD
//                    Algorithms on GPUs…" (Parallel Computing, 2018), §6.3 compares with cuSOLVER
//                    the same way)
//   cpu              linalg::gesvj on the CPU backend (LAPACK ?gesvj across the pool), timed on one
//                    matrix per thread and scaled to the batch (marked so)
// Shapes (the paper's §4–§6 sizes and a radar snapshot block): 1000 × 32², 1000 × 64², 200 × 256²,
// 200 × 512², 100 × 2048×64; complex double, complex float, double; with U and V, and values only.
// Inputs: Gaussian entries (cuRAND, fixed seed). Every contender overwrites A, so each timed call
// starts from a fresh copy made before its start event; reps adapt to a time budget per contender
// and row (time_adaptive).
// After timing, outside the timed region: every info is read; covflow's σ of every matrix are
// compared with the reference vendor's (gesvdj-batched where it applies, else gesvdj-streams): two
// backward-stable SVDs each within 10·n·ε·σ₁ of the exact σ differ by at most 20·n·ε·σ₁ (n =
// max(m, n)); a row whose covflow info is nonzero, or whose σ disagree, fails. With vectors, the
// residual ‖A − UΣVᴴ‖_F/‖A‖_F (in n·ε) of a sample of matrices is computed on the host for covflow
// and every vendor, and reported. GFLOP/s use a nominal count (values: 4mn² − 4n³/3; vectors:
// 6mn² + 11n³, Golub and Van Loan's thin SVD; ×4 for complex), so they compare contenders, not
// algorithms (Jacobi does several times those flops).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "svd_bench.hpp"
#include "covflow/linalg/svd.hpp"
#if COVFLOW_HAS_CUDA
#include <curand.h>
#include <cusolverDn.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/cuda/stream.hpp"
#endif

namespace covflow::bench {
namespace {

using namespace covflow::linalg;

struct Shape {
  int m, n;
  long long count;
};

constexpr int kStreams = 20;
constexpr double kValueTolerance = 20;  // units of max(m, n)·ε·σ₁
constexpr int kResidualSample = 3;      // matrices whose residual is computed on the host
constexpr double kBudgetMs = 1500;      // time one contender of one row is given

double nominal_flops(int m, int n, bool complex, bool vectors) {
  const double md = m, nd = n;
  const double real = vectors ? 6 * md * nd * nd + 11 * nd * nd * nd : 4 * md * nd * nd - 4 * nd * nd * nd / 3;
  return (complex ? 4.0 : 1.0) * real;
}

// "N matrices with info != 0 (first: matrix B, info I)", or "".
[[maybe_unused]] std::string info_problem(const std::vector<int>& info) {
  const auto first = std::find_if(info.begin(), info.end(), [](int v) { return v != 0; });
  if (first == info.end()) return "";
  const auto bad = std::count_if(info.begin(), info.end(), [](int v) { return v != 0; });
  return fmt::format("{} matrices with info != 0 (first: matrix {}, info {})", bad, first - info.begin(), *first);
}

// NaN-sticky maximum.
double worse(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN() : std::max(a, b);
}

// max over matrices of max_i |σ_a,i − σ_b,i| / σ_b,1, in units of max(m, n)·ε.
template <class R>
double value_difference(const std::vector<R>& a, const std::vector<R>& b, int k, long long count, int m, int n) {
  double worst = 0;
  for (long long j = 0; j < count; ++j) {
    const double scale = std::abs(double(b[j * k]));
    double diff = 0;
    for (int i = 0; i < k; ++i) diff = worse(diff, std::abs(double(a[j * k + i]) - double(b[j * k + i])));
    worst = worse(worst, scale > 0 ? diff / scale : diff);
  }
  return worst / (double(std::max(m, n)) * std::numeric_limits<R>::epsilon());
}

// ‖A − U·diag(s)·Vᴴ‖_F / ‖A‖_F in units of max(m, n)·ε, for one m×n matrix (ld m), U m×k (ld ldu),
// V n×k (ld ldv); in long double.
template <class T>
double residual(const T* a, const real_t<T>* s, const T* u, int ldu, const T* v, int ldv, int m, int n) {
  using C = std::complex<long double>;
  const int k = std::min(m, n);
  long double diff = 0, norm = 0;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      C sum = 0;
      for (int l = 0; l < k; ++l) sum += C(u[i + std::size_t(l) * ldu]) * (long double)(s[l]) * std::conj(C(v[j + std::size_t(l) * ldv]));
      const C x(a[i + std::size_t(j) * m]);
      diff += std::norm(x - sum);
      norm += std::norm(x);
    }
  return double(std::sqrt(diff / norm)) / (double(std::max(m, n)) * std::numeric_limits<real_t<T>>::epsilon());
}

#if COVFLOW_HAS_CUDA
// ---- cuSOLVER, the four element types -------------------------------------------------------------
template <class T> struct Cu;
template <> struct Cu<f32> { using type = float; };
template <> struct Cu<f64> { using type = double; };
template <> struct Cu<cf32> { using type = cuComplex; };
template <> struct Cu<cf64> { using type = cuDoubleComplex; };
template <class T> using cu_t = typename Cu<T>::type;
template <class T> cu_t<T>* cu(T* p) { return reinterpret_cast<cu_t<T>*>(p); }

#define COVFLOW_SVD_VENDOR(T, P)                                                                                       \
  cusolverStatus_t gesvdj_batched_buffer(cusolverDnHandle_t h, cusolverEigMode_t jobz, int m, int n, T* a, real_t<T>* s, \
                                         T* u, T* v, int* lwork, gesvdjInfo_t p, int batch) {                        \
    return cusolverDn##P##gesvdjBatched_bufferSize(h, jobz, m, n, cu(a), m, s, cu(u), m, cu(v), n, lwork, p, batch);   \
  }                                                                                                                    \
  cusolverStatus_t gesvdj_batched(cusolverDnHandle_t h, cusolverEigMode_t jobz, int m, int n, T* a, real_t<T>* s,    \
                                  T* u, T* v, T* work, int lwork, int* info, gesvdjInfo_t p, int batch) {            \
    return cusolverDn##P##gesvdjBatched(h, jobz, m, n, cu(a), m, s, cu(u), m, cu(v), n, cu(work), lwork, info, p,     \
                                        batch);                                                                        \
  }                                                                                                                    \
  cusolverStatus_t gesvdj_buffer(cusolverDnHandle_t h, cusolverEigMode_t jobz, int m, int n, T* a, real_t<T>* s, T* u, \
                                 T* v, int* lwork, gesvdjInfo_t p) {                                                   \
    return cusolverDn##P##gesvdj_bufferSize(h, jobz, 1, m, n, cu(a), m, s, cu(u), m, cu(v), n, lwork, p);             \
  }                                                                                                                    \
  cusolverStatus_t gesvdj(cusolverDnHandle_t h, cusolverEigMode_t jobz, int m, int n, T* a, real_t<T>* s, T* u, T* v, \
                          T* work, int lwork, int* info, gesvdjInfo_t p) {                                             \
    return cusolverDn##P##gesvdj(h, jobz, 1, m, n, cu(a), m, s, cu(u), m, cu(v), n, cu(work), lwork, info, p);        \
  }                                                                                                                    \
  cusolverStatus_t gesvda_buffer(cusolverDnHandle_t h, cusolverEigMode_t jobz, int m, int n, T* a, real_t<T>* s, T* u, \
                                 T* v, int* lwork, int batch) {                                                        \
    const int k = std::min(m, n);                                                                                      \
    return cusolverDn##P##gesvdaStridedBatched_bufferSize(h, jobz, k, m, n, cu(a), m, (long long)m * n, s, k, cu(u),   \
                                                          m, (long long)m * k, cu(v), n, (long long)n * k, lwork,      \
                                                          batch);                                                      \
  }                                                                                                                    \
  cusolverStatus_t gesvda(cusolverDnHandle_t h, cusolverEigMode_t jobz, int m, int n, T* a, real_t<T>* s, T* u, T* v, \
                          T* work, int lwork, int* info, double* residuals, int batch) {                               \
    const int k = std::min(m, n);                                                                                      \
    return cusolverDn##P##gesvdaStridedBatched(h, jobz, k, m, n, cu(a), m, (long long)m * n, s, k, cu(u), m,          \
                                               (long long)m * k, cu(v), n, (long long)n * k, cu(work), lwork, info,    \
                                               residuals, batch);                                                      \
  }
COVFLOW_SVD_VENDOR(f32, S)
COVFLOW_SVD_VENDOR(f64, D)
COVFLOW_SVD_VENDOR(cf32, C)
COVFLOW_SVD_VENDOR(cf64, Z)
#undef COVFLOW_SVD_VENDOR

// COVFLOW_BENCH_GESVDA=0 leaves gesvdaStridedBatched out (it is slow on the large rows).
bool with_gesvda() {
  const char* text = std::getenv("COVFLOW_BENCH_GESVDA");
  return !(text != nullptr && std::string(text) == "0");
}
#endif

// What one contender left: σ, and U/V of the residual sample (host copies).
template <class T>
struct Result {
  std::vector<real_t<T>> s;
  std::vector<int> info;
  std::vector<T> u, v;  // kResidualSample matrices each, with ldu/ldv
  int ldu = 0, ldv = 0;
  bool vectors = false;
};

template <class T>
Row bench_one(const Shape& shape, bool vectors, const Settings& settings, Exec* gpu, Exec& cpu, std::mt19937_64& rng) {
  using R = real_t<T>;
  const int m = shape.m, n = shape.n, k = std::min(m, n);
  const long long count = shape.count;
  Row row;
  row.op = "gesvj";
  row.dtype = std::string(name(element_type_of<T>()));
  row.shape = fmt::format("{}×{} batch={} {}", m, n, count, vectors ? "vectors" : "values");
  row.flops = nominal_flops(m, n, is_complex_v<T>, vectors) * double(count);
  [[maybe_unused]] const std::size_t elements = static_cast<std::size_t>(count) * m * n;
  const int sample = static_cast<int>(std::min<long long>(count, kResidualSample));
  std::vector<T> host_sample(std::size_t(sample) * m * n);  // the first matrices, for residuals

#if COVFLOW_HAS_CUDA
  if (gpu != nullptr) {
    CudaContext& context = gpu->cuda_context();
    cudaStream_t stream = context.stream();
    cuda::DeviceBuffer<T> pristine(elements), work(elements);
    fill_gaussian(pristine.data(), elements, rng(), stream);
    pristine.download(host_sample, stream);
    auto restore = [&](int) {
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(work.data(), pristine.data(), elements * sizeof(T), cudaMemcpyDeviceToDevice, stream));
    };
    cuda::DeviceBuffer<R> s(static_cast<std::size_t>(count) * k);
    cuda::DeviceBuffer<int> info(static_cast<std::size_t>(count));
    // U and V, as large as any contender's (gesvdjBatched returns m×m and n×n). Also for values
    // only: cuSOLVER's gesvdj and gesvdaStridedBatched fault on null U and V (an illegal address
    // that ends the context, seen with CUDA 13.0 on an H100) even when told not to compute them.
    const bool full = m <= 32 && n <= 32;
    cuda::DeviceBuffer<T> u(static_cast<std::size_t>(count) * m * (full ? m : k));
    cuda::DeviceBuffer<T> v(static_cast<std::size_t>(count) * n * (full ? n : k));

    auto read = [&](int ldu, int ldv, std::size_t u_stride, std::size_t v_stride) {
      Result<T> r;
      r.vectors = vectors;
      r.s.resize(static_cast<std::size_t>(count) * k);
      r.info.resize(static_cast<std::size_t>(count));
      s.download(r.s, stream);
      info.download(r.info, stream);
      if (vectors) {
        r.ldu = ldu;
        r.ldv = ldv;
        r.u.resize(std::size_t(sample) * u_stride);
        r.v.resize(std::size_t(sample) * v_stride);
        u.download(r.u, stream);
        v.download(r.v, stream);
      }
      gpu->synchronize();
      return r;
    };
    auto residual_of = [&](const Result<T>& r, std::size_t u_stride, std::size_t v_stride) {
      double worst = 0;
      for (int j = 0; j < sample; ++j)
        worst = worse(worst, residual<T>(host_sample.data() + std::size_t(j) * m * n, r.s.data() + std::size_t(j) * k,
                                         r.u.data() + j * u_stride, r.ldu, r.v.data() + j * v_stride, r.ldv, m, n));
      return worst;
    };

    // covflow
    const SvdOptions options{.u = vectors, .v = vectors};
    const std::size_t workspace = gesvj_workspace<T>(*gpu, m, n, count, options);
    gpu->workspace().reserve(workspace);
    const std::size_t growth = gpu->workspace().growth_count();
    cuda::DeviceBuffer<SvdInfo> svd_info(static_cast<std::size_t>(count));
    s.fill_bytes(0xFF, stream);
    svd_info.fill_bytes(0xFF, stream);
    row.times["covflow"] = time_adaptive(
        stream,
        [&](int) {
          gesvj<T>(*gpu, Batch<T>::packed(work.data(), m, n, count), {s.data(), s.size()},
                   vectors ? Batch<T>::packed(u.data(), m, k, count) : Batch<T>{},
                   vectors ? Batch<T>::packed(v.data(), n, k, count) : Batch<T>{}, {svd_info.data(), svd_info.size()},
                   options);
        },
        restore, settings, kBudgetMs);
    if (gpu->workspace().growth_count() != growth) row.notes["warning"] = "covflow workspace grew while timed";
    row.notes["covflow workspace"] = fmt::format("{:.1f} MiB", workspace / 1048576.0);
    std::vector<SvdInfo> covflow_info(static_cast<std::size_t>(count));
    svd_info.download(covflow_info, stream);
    Result<T> covflow = read(m, n, std::size_t(m) * k, std::size_t(n) * k);
    {
      std::vector<int> statuses(covflow_info.size());
      int most = 0;
      double mean = 0;
      for (std::size_t j = 0; j < covflow_info.size(); ++j) {
        statuses[j] = covflow_info[j].status;
        most = std::max(most, covflow_info[j].sweeps);
        mean += covflow_info[j].sweeps;
      }
      row.notes["covflow sweeps"] = fmt::format("mean {:.1f}, max {}", mean / double(count), most);
      if (const std::string problem = info_problem(statuses); !problem.empty()) row.fail("covflow: " + problem);
    }
    if (vectors)
      row.notes["residual covflow"] = fmt::format("{:.2f} n·ε", residual_of(covflow, std::size_t(m) * k, std::size_t(n) * k));

    cusolverDnHandle_t handle = context.cusolver();
    const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
    std::string reference;
    Result<T> reference_result;

    // gesvdjBatched (m, n ≤ 32)
    if (full) {
      row.vendors.push_back("gesvdj-batched");
      gesvdjInfo_t params = nullptr;
      COVFLOW_CUSOLVER_TRY(cusolverDnCreateGesvdjInfo(&params));
      int lwork = 0;
      COVFLOW_CUSOLVER_TRY(gesvdj_batched_buffer(handle, jobz, m, n, work.data(), s.data(), u.data(), v.data(), &lwork,
                                                 params, static_cast<int>(count)));
      cuda::DeviceBuffer<T> vendor_work(static_cast<std::size_t>(std::max(lwork, 1)));
      info.fill_bytes(0xFF, stream);
      row.times["gesvdj-batched"] = time_adaptive(
          stream,
          [&](int) {
            COVFLOW_CUSOLVER_TRY(gesvdj_batched(handle, jobz, m, n, work.data(), s.data(), u.data(), v.data(),
                                                vendor_work.data(), lwork, info.data(), params, static_cast<int>(count)));
          },
          restore, settings, kBudgetMs);
      cusolverDnDestroyGesvdjInfo(params);
      reference = "gesvdj-batched";
      reference_result = read(m, n, std::size_t(m) * m, std::size_t(n) * n);
      if (vectors)
        row.notes["residual gesvdj-batched"] =
            fmt::format("{:.2f} n·ε", residual_of(reference_result, std::size_t(m) * m, std::size_t(n) * n));
    }

    // gesvdaStridedBatched (m ≥ n)
    if (m >= n && with_gesvda()) {
      row.vendors.push_back("gesvda-strided");
      int lwork = 0;
      COVFLOW_CUSOLVER_TRY(gesvda_buffer(handle, jobz, m, n, work.data(), s.data(), u.data(), v.data(), &lwork,
                                         static_cast<int>(count)));
      cuda::DeviceBuffer<T> vendor_work(static_cast<std::size_t>(std::max(lwork, 1)));
      std::vector<double> vendor_residuals(static_cast<std::size_t>(count));  // h_R_nrmF: a host array, one per matrix
      info.fill_bytes(0xFF, stream);
      row.times["gesvda-strided"] = time_adaptive(
          stream,
          [&](int) {
            COVFLOW_CUSOLVER_TRY(gesvda(handle, jobz, m, n, work.data(), s.data(), u.data(), v.data(), vendor_work.data(),
                                        lwork, info.data(), vendor_residuals.data(), static_cast<int>(count)));
          },
          restore, settings, kBudgetMs);
      const Result<T> r = read(m, n, std::size_t(m) * k, std::size_t(n) * k);
      const double values = value_difference(r.s, covflow.s, k, count, m, n);
      row.notes["gesvda-strided"] = fmt::format("max |σ − σ_covflow|/σ₁ {:.2f} n·ε{}{}", values,
                                                vectors ? fmt::format(", residual {:.2f} n·ε",
                                                                      residual_of(r, std::size_t(m) * k, std::size_t(n) * k))
                                                        : "",
                                                info_problem(r.info).empty() ? "" : "; " + info_problem(r.info));
    }

    // gesvdj over 20 streams
    {
      row.vendors.push_back("gesvdj-streams");
      std::vector<cuda::Stream> streams(kStreams);
      std::vector<cusolverDnHandle_t> handles(kStreams, nullptr);
      std::vector<gesvdjInfo_t> params(kStreams, nullptr);
      std::vector<cuda::Event> forks, joins;
      forks.emplace_back(cudaEventDisableTiming);
      for (int i = 0; i < kStreams; ++i) {
        joins.emplace_back(cudaEventDisableTiming);
        COVFLOW_CUSOLVER_TRY(cusolverDnCreate(&handles[i]));
        COVFLOW_CUSOLVER_TRY(cusolverDnSetStream(handles[i], streams[i]));
        COVFLOW_CUSOLVER_TRY(cusolverDnCreateGesvdjInfo(&params[i]));
      }
      int lwork = 0;
      COVFLOW_CUSOLVER_TRY(gesvdj_buffer(handles[0], jobz, m, n, work.data(), s.data(), u.data(), v.data(), &lwork, params[0]));
      cuda::DeviceBuffer<T> vendor_work(static_cast<std::size_t>(std::max(lwork, 1)) * kStreams);
      const std::size_t u_stride = std::size_t(m) * k, v_stride = std::size_t(n) * k;
      info.fill_bytes(0xFF, stream);
      row.times["gesvdj-streams"] = time_adaptive(
          stream,
          [&](int) {
            forks[0].record(stream);
            for (int i = 0; i < kStreams; ++i) COVFLOW_CUDA_TRY(cudaStreamWaitEvent(streams[i], forks[0].get(), 0));
            for (long long j = 0; j < count; ++j) {
              const int i = static_cast<int>(j % kStreams);
              COVFLOW_CUSOLVER_TRY(gesvdj(handles[i], jobz, m, n, work.data() + j * m * n, s.data() + j * k,
                                          vectors ? u.data() + j * u_stride : u.data(),
                                          vectors ? v.data() + j * v_stride : v.data(),
                                          vendor_work.data() + std::size_t(i) * std::max(lwork, 1), lwork, info.data() + j,
                                          params[i]));
            }
            for (int i = 0; i < kStreams; ++i) {
              joins[i].record(streams[i]);
              COVFLOW_CUDA_TRY(cudaStreamWaitEvent(stream, joins[i].get(), 0));
            }
          },
          restore, settings, kBudgetMs);
      for (int i = 0; i < kStreams; ++i) {
        cusolverDnDestroyGesvdjInfo(params[i]);
        cusolverDnDestroy(handles[i]);
      }
      const Result<T> r = read(m, n, u_stride, v_stride);
      if (vectors) row.notes["residual gesvdj-streams"] = fmt::format("{:.2f} n·ε", residual_of(r, u_stride, v_stride));
      if (reference.empty()) {
        reference = "gesvdj-streams";
        reference_result = r;
      } else if (const std::string problem = info_problem(r.info); !problem.empty()) {
        row.notes["gesvdj-streams info"] = problem;
      }
    }

    // covflow's σ against the reference's, every matrix.
    if (const std::string problem = info_problem(reference_result.info); !problem.empty()) {
      row.fail(reference + ": " + problem + ": nothing to compare with");
    } else {
      const double values = value_difference(covflow.s, reference_result.s, k, count, m, n);
      row.notes["max |σ_covflow − σ_" + reference + "|/σ₁"] =
          fmt::format("{:.2f} n·ε (tolerance {:.0f})", values, kValueTolerance);
      if (!(values <= kValueTolerance))
        row.fail(fmt::format("σ differ from {}'s by {:.2f} n·ε·σ₁ (tolerance {:.0f})", reference, values, kValueTolerance));
    }
    const auto covflow_time = row.times["covflow"].median_ms;
    std::string ratios;
    for (const std::string& vendor : row.vendors)
      if (row.times.count(vendor) && covflow_time > 0)
        ratios += fmt::format("{}{} {:.1f}×", ratios.empty() ? "" : ", ", vendor, row.times[vendor].median_ms / covflow_time);
    row.notes["speed-up over"] = ratios;
  }
#endif
  if (settings.cpu) {
    const long long sub = std::min<long long>(count, cpu.pool().size());
    std::mt19937_64 local(rng());
    std::normal_distribution<double> normal;
    std::vector<T> a(static_cast<std::size_t>(sub) * m * n), scratch(a.size());
    for (auto& x : a) {
      if constexpr (is_complex_v<T>) x = T(R(normal(local)), R(normal(local)));
      else x = T(normal(local));
    }
    std::vector<R> s(static_cast<std::size_t>(sub) * k);
    std::vector<T> u(vectors ? static_cast<std::size_t>(sub) * m * k : 0), v(vectors ? static_cast<std::size_t>(sub) * n * k : 0);
    std::vector<SvdInfo> info(static_cast<std::size_t>(sub));
    const SvdOptions options{.u = vectors, .v = vectors};
    cpu.workspace().reserve(gesvj_workspace<T>(cpu, m, n, sub, options));
    Timing t = time_host(
        [&] {
          scratch = a;
          gesvj<T>(cpu, Batch<T>::packed(scratch.data(), m, n, sub), s,
                   vectors ? Batch<T>::packed(u.data(), m, k, sub) : Batch<T>{},
                   vectors ? Batch<T>::packed(v.data(), n, k, sub) : Batch<T>{}, info, options);
        },
        m * n >= 256 * 256 ? 0 : 1, m * n >= 256 * 256 ? 1 : settings.cpu_reps);
    const double scale = double(count) / double(sub);
    t.median_ms *= scale;
    t.min_ms *= scale;
    t.max_ms *= scale;
    row.times["cpu"] = t;
    if (sub < count)
      row.notes["cpu"] = fmt::format("timed on {} matrices ({} threads), scaled ×{:.0f}", sub, cpu.pool().size(), scale);
  }
  return row;
}

}  // namespace

nlohmann::json run_svd_bench(const Settings& settings, Exec* gpu, Exec& cpu) {
  std::mt19937_64 rng(2026);
  std::vector<Shape> shapes = {{32, 32, 1000}, {64, 64, 1000}, {256, 256, 200}, {512, 512, 200}, {2048, 64, 100}};
  if (settings.quick) shapes = {{32, 32, 1000}, {256, 256, 20}};
  if (!settings.shapes.empty()) {
    shapes.clear();
    for (const std::string& text : settings.shapes) {
      Shape s{};
      if (std::sscanf(text.c_str(), "%dx%dx%lld", &s.m, &s.n, &s.count) != 3 || s.m < 1 || s.n < 1 || s.count < 1)
        throw std::invalid_argument("--shape expects MxNxBATCH, e.g. 256x256x200; got '" + text + "'");
      shapes.push_back(s);
    }
  }
  Report report("svd: batched thin SVD (one-sided Jacobi) vs cuSOLVER");
  // Each row is also printed as soon as it is done, so that a run cut short keeps what it measured.
  auto add = [&](Row row) {
    std::string times;
    for (const auto& [who, t] : row.times) times += fmt::format("  {} {:.3f} ms", who, t.median_ms);
    fmt::print("svd {} {}:{}{}\n", row.dtype, row.shape, times, row.failed.empty() ? "" : "  FAILED: " + row.failed);
    std::fflush(stdout);
    report.add(std::move(row));
  };
  for (const Shape& s : shapes)
    for (bool vectors : {true, false}) {
      if (!settings.mode.empty() && settings.mode != (vectors ? "vectors" : "values")) continue;
      if (settings.dtype.empty() || settings.dtype == "cf64") add(bench_one<cf64>(s, vectors, settings, gpu, cpu, rng));
      if (settings.dtype.empty() || settings.dtype == "cf32") add(bench_one<cf32>(s, vectors, settings, gpu, cpu, rng));
      if (settings.dtype.empty() || settings.dtype == "f64") add(bench_one<f64>(s, vectors, settings, gpu, cpu, rng));
    }
  report.print();
  return report.to_json();
}

}  // namespace covflow::bench

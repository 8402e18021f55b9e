// covflow-bench qr: batched Householder QR.
//   geqrf rows
//     covflow          linalg::geqrf on the CUDA backend (the public API)
//     geqrf-batched    cublas<t>geqrfBatched on the same matrices (its pointer arrays built once,
//                      outside the timing)
//   ungqr rows (the thin Q from those factorizations)
//     covflow          linalg::ungqr on covflow's geqrf output
//     ungqr-loop       cusolverDn<t>ungqr / <t>orgqr, one call per matrix of the batch, on cuBLAS's
//                      geqrf output: cuSOLVER has no batched ungqr, so this is what a user of the
//                      vendor libraries writes (fewer repetitions: it is thousands of calls)
//   cpu                linalg::geqrf / ungqr on the CPU backend, timed on one matrix per thread and
//                      scaled to the batch (marked so)
// Shapes: 1000 × 32², 1000 × 64², 180 × 128², 200 × 256², 100 × 4096×64, in complex double,
// complex float and double. Inputs: A = 3·[I; 0] + G/√m with G Gaussian — κ₂(A) ≤ 5, so two
// backward-stable QRs have |R_ii| within a few n·ε·‖A‖_F of each other (the work is the same for
// any input). Every contender overwrites its input, so each timed call starts from a fresh copy
// made before its start event. After timing, outside the timed region: every info of both
// libraries is read; |R_ii| of every matrix is compared with cuBLAS's (≤ 2·10·κ n·ε·‖A‖_F, κ ≤ 5);
// for a sample of matrices ‖A − QR‖_F/‖A‖_F and ‖QᴴQ − I‖_F (Q from covflow's ungqr, R from its
// geqrf, in double) ≤ 10·n·ε. A failed check fails the row and the run.
// Targets (H100): geqrf ≥ 3× faster than geqrfBatched on every row.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "covflow/linalg/qr.hpp"
#include "qr_bench.hpp"
#if COVFLOW_HAS_CUDA
#include <cublas_v2.h>
#include <cusolverDn.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::bench {
namespace {

using namespace covflow::linalg;

struct QrShape {
  int m, n;
  long long count;
};

constexpr double kConditionBound = 5;
constexpr double kRDiagonalTolerance = 2 * 10 * kConditionBound;  // units of n·ε·‖A‖_F
constexpr double kTolerance = 10;                                 // units of n·ε
constexpr int kSampled = 4;                                       // matrices checked in full per row

template <class T>
using precise = std::conditional_t<is_complex_v<T>, std::complex<double>, double>;

template <class T>
double eps() {
  return std::numeric_limits<real_t<T>>::epsilon();
}

// A = 3·[I; 0] + G/√m: σ(G/√m) ⊂ [0, 2] for m ≥ n, so σ(A) ⊂ [1, 5].
template <class T>
std::vector<T> make_inputs(int m, int n, long long count, std::mt19937_64& rng) {
  using R = real_t<T>;
  std::normal_distribution<double> normal(0.0, 1.0 / std::sqrt(double(m)));
  std::vector<T> a(static_cast<std::size_t>(count) * m * n);
  for (long long b = 0; b < count; ++b)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        T& x = a[static_cast<std::size_t>((b * n + j) * m + i)];
        if constexpr (is_complex_v<T>) x = T(R(normal(rng) * std::sqrt(0.5)), R(normal(rng) * std::sqrt(0.5)));
        else x = T(normal(rng));
        if (i == j) x += T(3);
      }
  return a;
}

// LAPACK's operation counts (m ≥ n): geqrf 2mn² − 2n³/3, ungqr (k = n) mn² − n³/3; ×4 complex.
double geqrf_flops(int m, int n, bool complex) {
  return (complex ? 4.0 : 1.0) * (2.0 * m * n * n - 2.0 * n * double(n) * n / 3.0);
}
double ungqr_flops(int m, int n, bool complex) {
  return (complex ? 4.0 : 1.0) * (double(m) * n * n - double(n) * n * n / 3.0);
}

std::string info_problem(const std::vector<int>& info) {
  const auto first = std::find_if(info.begin(), info.end(), [](int v) { return v != 0; });
  if (first == info.end()) return "";
  const auto bad = std::count_if(info.begin(), info.end(), [](int v) { return v != 0; });
  return fmt::format("{} matrices with info != 0 (first: matrix {}, info {})", bad, first - info.begin(), *first);
}

// max over the batch of max_i | |R̂_ii| − |R_ii| | / ‖A‖_F, in units of max(m, n)·ε; NaN sticks.
template <class T>
double r_diagonal_difference(const std::vector<T>& input, const std::vector<T>& x, const std::vector<T>& y, int m, int n,
                             long long count) {
  double worst = 0;
  const std::size_t mn = std::size_t(m) * n;
  for (long long b = 0; b < count; ++b) {
    double norm2 = 0, diff = 0;
    for (std::size_t e = 0; e < mn; ++e) norm2 += std::norm(precise<T>(input[b * mn + e]));
    for (int i = 0; i < std::min(m, n); ++i) {
      const std::size_t e = b * mn + i + std::size_t(i) * m;
      diff = std::max(diff, std::abs(std::abs(precise<T>(x[e])) - std::abs(precise<T>(y[e]))));
      if (std::isnan(std::abs(precise<T>(x[e]))) || std::isnan(std::abs(precise<T>(y[e]))))
        return std::numeric_limits<double>::quiet_NaN();
    }
    worst = std::max(worst, diff / std::sqrt(norm2));
  }
  return worst / (std::max(m, n) * eps<T>());
}

struct Errors {
  double residual = 0, orthogonality = 0;
};

// ‖A − QR‖_F/‖A‖_F and ‖QᴴQ − I‖_F of matrix b, in units of max(m, n)·ε, in double: Q (m × n)
// from ungqr, R the upper triangle of geqrf's output.
template <class T>
Errors qr_errors(const T* a, const T* factored, const T* q, int m, int n) {
  using P = precise<T>;
  const auto conj_ = [](P v) {
    if constexpr (is_complex_v<P>) return std::conj(v);
    else return v;
  };
  double residual2 = 0, norm2 = 0, orth2 = 0;
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      P qr = P(0);
      for (int l = 0; l <= j; ++l) qr += P(q[i + std::size_t(l) * m]) * P(factored[l + std::size_t(j) * m]);
      residual2 += std::norm(P(a[i + std::size_t(j) * m]) - qr);
      norm2 += std::norm(P(a[i + std::size_t(j) * m]));
    }
    for (int l = 0; l < n; ++l) {
      P g = P(0);
      for (int i = 0; i < m; ++i) g += conj_(P(q[i + std::size_t(l) * m])) * P(q[i + std::size_t(j) * m]);
      orth2 += std::norm(g - P(l == j ? 1 : 0));
    }
  }
  const double unit = std::max(m, n) * eps<T>();
  Errors e;
  e.residual = std::sqrt(residual2 / norm2) / unit;
  e.orthogonality = std::sqrt(orth2) / unit;
  if (std::isnan(e.residual)) e.residual = std::numeric_limits<double>::infinity();
  if (std::isnan(e.orthogonality)) e.orthogonality = std::numeric_limits<double>::infinity();
  return e;
}

// The sampled matrices' errors, one thread per matrix.
template <class T>
Errors sampled_errors(const std::vector<T>& input, const std::vector<T>& factored, const std::vector<T>& q, int m, int n,
                      long long count) {
  std::vector<long long> which;
  for (int s = 0; s < kSampled; ++s) which.push_back(count == 1 ? 0 : s * (count - 1) / (kSampled - 1));
  std::vector<Errors> errors(which.size());
  std::vector<std::thread> threads;
  const std::size_t mn = std::size_t(m) * n;
  for (std::size_t s = 0; s < which.size(); ++s)
    threads.emplace_back([&, s] {
      const std::size_t offset = which[s] * mn;
      errors[s] = qr_errors(input.data() + offset, factored.data() + offset, q.data() + offset, m, n);
    });
  for (auto& t : threads) t.join();
  Errors worst;
  for (const Errors& e : errors) {
    worst.residual = std::max(worst.residual, e.residual);
    worst.orthogonality = std::max(worst.orthogonality, e.orthogonality);
  }
  return worst;
}

#if COVFLOW_HAS_CUDA
// The vendor calls per element type.
cublasStatus_t geqrf_batched(cublasHandle_t h, int m, int n, f32* const a[], int lda, f32* const tau[], int* info, int batch) {
  return cublasSgeqrfBatched(h, m, n, a, lda, tau, info, batch);
}
cublasStatus_t geqrf_batched(cublasHandle_t h, int m, int n, f64* const a[], int lda, f64* const tau[], int* info, int batch) {
  return cublasDgeqrfBatched(h, m, n, a, lda, tau, info, batch);
}
cublasStatus_t geqrf_batched(cublasHandle_t h, int m, int n, cf32* const a[], int lda, cf32* const tau[], int* info,
                             int batch) {
  return cublasCgeqrfBatched(h, m, n, reinterpret_cast<cuComplex* const*>(a), lda,
                             reinterpret_cast<cuComplex* const*>(tau), info, batch);
}
cublasStatus_t geqrf_batched(cublasHandle_t h, int m, int n, cf64* const a[], int lda, cf64* const tau[], int* info,
                             int batch) {
  return cublasZgeqrfBatched(h, m, n, reinterpret_cast<cuDoubleComplex* const*>(a), lda,
                             reinterpret_cast<cuDoubleComplex* const*>(tau), info, batch);
}
cusolverStatus_t ungqr_buffer(cusolverDnHandle_t h, int m, int n, const f32* a, const f32* tau, int* lwork) {
  return cusolverDnSorgqr_bufferSize(h, m, n, n, a, m, tau, lwork);
}
cusolverStatus_t ungqr_buffer(cusolverDnHandle_t h, int m, int n, const f64* a, const f64* tau, int* lwork) {
  return cusolverDnDorgqr_bufferSize(h, m, n, n, a, m, tau, lwork);
}
cusolverStatus_t ungqr_buffer(cusolverDnHandle_t h, int m, int n, const cf32* a, const cf32* tau, int* lwork) {
  return cusolverDnCungqr_bufferSize(h, m, n, n, reinterpret_cast<const cuComplex*>(a), m,
                                     reinterpret_cast<const cuComplex*>(tau), lwork);
}
cusolverStatus_t ungqr_buffer(cusolverDnHandle_t h, int m, int n, const cf64* a, const cf64* tau, int* lwork) {
  return cusolverDnZungqr_bufferSize(h, m, n, n, reinterpret_cast<const cuDoubleComplex*>(a), m,
                                     reinterpret_cast<const cuDoubleComplex*>(tau), lwork);
}
cusolverStatus_t ungqr_one(cusolverDnHandle_t h, int m, int n, f32* a, const f32* tau, f32* work, int lwork, int* info) {
  return cusolverDnSorgqr(h, m, n, n, a, m, tau, work, lwork, info);
}
cusolverStatus_t ungqr_one(cusolverDnHandle_t h, int m, int n, f64* a, const f64* tau, f64* work, int lwork, int* info) {
  return cusolverDnDorgqr(h, m, n, n, a, m, tau, work, lwork, info);
}
cusolverStatus_t ungqr_one(cusolverDnHandle_t h, int m, int n, cf32* a, const cf32* tau, cf32* work, int lwork, int* info) {
  return cusolverDnCungqr(h, m, n, n, reinterpret_cast<cuComplex*>(a), m, reinterpret_cast<const cuComplex*>(tau),
                          reinterpret_cast<cuComplex*>(work), lwork, info);
}
cusolverStatus_t ungqr_one(cusolverDnHandle_t h, int m, int n, cf64* a, const cf64* tau, cf64* work, int lwork, int* info) {
  return cusolverDnZungqr(h, m, n, n, reinterpret_cast<cuDoubleComplex*>(a), m,
                          reinterpret_cast<const cuDoubleComplex*>(tau), reinterpret_cast<cuDoubleComplex*>(work), lwork,
                          info);
}
#endif

template <class T>
void add_rows(Report& report, const QrShape& s, const Settings& settings, Exec* gpu, Exec& cpu, std::mt19937_64& rng) {
  const int m = s.m, n = s.n;
  const long long count = s.count;
  const bool complex = is_complex_v<T>;
  const std::string shape = fmt::format("{} × {}×{}", count, m, n);
  Row factor, form;
  factor.op = "geqrf";
  form.op = "ungqr";
  factor.dtype = form.dtype = std::string(name(element_type_of<T>()));
  factor.shape = form.shape = shape;
  factor.flops = geqrf_flops(m, n, complex) * double(count);
  form.flops = ungqr_flops(m, n, complex) * double(count);
  factor.vendors = {"geqrf-batched"};
  form.vendors = {"ungqr-loop"};
  const std::size_t mn = std::size_t(m) * n;
  [[maybe_unused]] const std::size_t elems = mn * std::size_t(count), taus = std::size_t(n) * count;  // device buffers
  const std::vector<T> input = make_inputs<T>(m, n, count, rng);

#if COVFLOW_HAS_CUDA
  if (gpu != nullptr) {
    CudaContext& context = gpu->cuda_context();
    cudaStream_t stream = context.stream();
    cuda::DeviceBuffer<T> pristine(elems), work(elems), factored(elems), q(elems), tau(taus);
    cuda::DeviceBuffer<int> info(static_cast<std::size_t>(count));
    pristine.upload(input, stream);
    gpu->workspace().reserve(std::max(geqrf_workspace<T>(*gpu, m, n, count), ungqr_workspace<T>(*gpu, m, n, count)));
    const auto restore = [&](cuda::DeviceBuffer<T>& to, const cuda::DeviceBuffer<T>& from) {
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(to.data(), from.data(), elems * sizeof(T), cudaMemcpyDeviceToDevice, stream));
    };
    info.fill_bytes(0xFF, stream);
    factor.times["covflow"] = time_device(
        stream,
        [&](int) {
          geqrf<T>(*gpu, Batch<T>::packed(work.data(), m, n, count), {tau.data(), tau.size()}, {info.data(), info.size()});
        },
        settings.warmup, settings.reps, [&](int) { restore(work, pristine); });
    restore(factored, work);
    form.times["covflow"] = time_device(
        stream, [&](int) { ungqr<T>(*gpu, Batch<T>::packed(q.data(), m, n, count), {tau.data(), tau.size()}); },
        settings.warmup, settings.reps, [&](int) { restore(q, factored); });
    std::vector<T> covflow_r(elems), covflow_q(elems);
    std::vector<int> covflow_info(static_cast<std::size_t>(count));
    factored.download(covflow_r, stream);
    q.download(covflow_q, stream);
    info.download(covflow_info, stream);

    // cuBLAS geqrfBatched and cuSOLVER ungqr per matrix, on their own buffers.
    cuda::DeviceBuffer<T> vwork(elems), vfactored(elems), vq(elems), vtau(taus);
    cuda::DeviceBuffer<int> vinfo(static_cast<std::size_t>(count));
    std::vector<T*> a_pointers(static_cast<std::size_t>(count)), tau_pointers(static_cast<std::size_t>(count));
    for (long long b = 0; b < count; ++b) {
      a_pointers[b] = vwork.data() + b * mn;
      tau_pointers[b] = vtau.data() + b * n;
    }
    cuda::DeviceBuffer<T*> a_array(a_pointers.size()), tau_array(tau_pointers.size());
    a_array.upload(a_pointers, stream);
    tau_array.upload(tau_pointers, stream);
    int host_info = 0;
    factor.times["geqrf-batched"] = time_device(
        stream,
        [&](int) {
          COVFLOW_CUBLAS_TRY(geqrf_batched(context.cublas(), m, n, a_array.data(), m, tau_array.data(), &host_info,
                                           static_cast<int>(count)));
        },
        settings.warmup, settings.reps, [&](int) { restore(vwork, pristine); });
    restore(vfactored, vwork);
    int lwork = 0;
    COVFLOW_CUSOLVER_TRY(ungqr_buffer(context.cusolver(), m, n, vfactored.data(), vtau.data(), &lwork));
    cuda::DeviceBuffer<T> ungqr_work(static_cast<std::size_t>(std::max(lwork, 1)));
    vinfo.fill_bytes(0xFF, stream);
    form.times["ungqr-loop"] = time_device(
        stream,
        [&](int) {
          for (long long b = 0; b < count; ++b)
            COVFLOW_CUSOLVER_TRY(ungqr_one(context.cusolver(), m, n, vq.data() + b * mn, vtau.data() + b * n,
                                           ungqr_work.data(), lwork, vinfo.data() + b));
        },
        std::min(settings.warmup, 1), std::min(settings.reps, 5), [&](int) { restore(vq, vfactored); });
    form.notes["ungqr-loop"] = fmt::format("{} cusolverDn ungqr/orgqr calls per repetition, median of {}", count,
                                           std::min(settings.reps, 5));
    std::vector<T> vendor_r(elems);
    std::vector<int> vendor_info(static_cast<std::size_t>(count));
    vfactored.download(vendor_r, stream);
    vinfo.download(vendor_info, stream);
    gpu->synchronize();

    if (const std::string problem = info_problem(covflow_info); !problem.empty()) factor.fail("covflow: " + problem);
    if (host_info != 0) factor.fail(fmt::format("geqrf-batched: info {} (argument error)", host_info));
    if (const std::string problem = info_problem(vendor_info); !problem.empty()) form.fail("ungqr-loop: " + problem);
    const double diagonal = r_diagonal_difference(input, covflow_r, vendor_r, m, n, count);
    factor.notes["max | |R_ii| − |R_ii|(cuBLAS) | / ‖A‖_F"] =
        fmt::format("{:.2f} n·ε (tolerance {:.0f} = 2·10·κ, κ ≤ {:.0f})", diagonal, kRDiagonalTolerance, kConditionBound);
    if (!(diagonal <= kRDiagonalTolerance))
      factor.fail(fmt::format("|R_ii| differ from cuBLAS's by {:.2f} n·ε·‖A‖_F (tolerance {:.0f})", diagonal,
                              kRDiagonalTolerance));
    const Errors errors = sampled_errors(input, covflow_r, covflow_q, m, n, count);
    const std::string summary = fmt::format("‖A − QR‖_F/‖A‖_F {:.2f}, ‖QᴴQ − I‖_F {:.2f} n·ε over {} matrices "
                                            "(tolerance {:.0f})",
                                            errors.residual, errors.orthogonality, std::min<long long>(count, kSampled),
                                            kTolerance);
    factor.notes["covflow QR"] = form.notes["covflow QR"] = summary;
    if (!(errors.residual <= kTolerance) || !(errors.orthogonality <= kTolerance)) {
      factor.fail("covflow's QR: " + summary);
      form.fail("covflow's QR: " + summary);
    }
  }
#endif
  if (settings.cpu) {
    const long long sub = std::min<long long>(count, cpu.pool().size());
    std::vector<T> a(input.begin(), input.begin() + static_cast<std::ptrdiff_t>(sub * mn));
    std::vector<T> tau(static_cast<std::size_t>(sub) * n);
    std::vector<int> info(static_cast<std::size_t>(sub), -1);
    const double scale = double(count) / double(sub);
    Timing t = time_host(
        [&] {
          std::copy(input.begin(), input.begin() + static_cast<std::ptrdiff_t>(sub * mn), a.begin());
          geqrf<T>(cpu, Batch<T>::packed(a.data(), m, n, sub), tau, info);
        },
        1, settings.cpu_reps);
    const std::vector<T> factored_cpu = a;
    Timing u = time_host(
        [&] {
          a = factored_cpu;
          ungqr<T>(cpu, Batch<T>::packed(a.data(), m, n, sub), tau);
        },
        1, settings.cpu_reps);
    for (Timing* x : {&t, &u}) {
      x->median_ms *= scale;
      x->min_ms *= scale;
      x->max_ms *= scale;
    }
    factor.times["cpu"] = t;
    form.times["cpu"] = u;
    factor.notes["cpu"] = form.notes["cpu"] =
        fmt::format("timed on {} matrices ({} threads), scaled ×{:.0f}", sub, cpu.pool().size(), scale);
    if (const std::string problem = info_problem(info); !problem.empty()) factor.fail("cpu: " + problem);
  }
  report.add(std::move(factor));
  report.add(std::move(form));
}

}  // namespace

nlohmann::json run_qr_bench(const Settings& settings, Exec* gpu, Exec& cpu) {
  std::mt19937_64 rng(2026);
  Report report("qr: batched Householder QR (geqrf, ungqr) vs cuBLAS geqrfBatched and cuSOLVER ungqr");
  std::vector<QrShape> shapes = {{32, 32, 1000}, {64, 64, 1000}, {128, 128, 180}, {256, 256, 200}, {4096, 64, 100}};
  if (settings.quick) shapes = {{32, 32, 100}, {256, 256, 20}, {4096, 64, 10}};
  if (!settings.shapes.empty()) {
    shapes.clear();
    for (const std::string& text : settings.shapes) {
      QrShape s{};
      if (std::sscanf(text.c_str(), "%dx%dx%lld", &s.m, &s.n, &s.count) != 3 || s.m < s.n || s.n < 1 || s.count < 1)
        throw std::invalid_argument("qr: --shape " + text + ": expected MxNxBATCH with M ≥ N ≥ 1");
      shapes.push_back(s);
    }
  }
  for (const QrShape& s : shapes) {
    if (settings.dtype.empty() || settings.dtype == "cf64") add_rows<cf64>(report, s, settings, gpu, cpu, rng);
    if (settings.dtype.empty() || settings.dtype == "cf32") add_rows<cf32>(report, s, settings, gpu, cpu, rng);
    if (settings.dtype.empty() || settings.dtype == "f64") add_rows<f64>(report, s, settings, gpu, cpu, rng);
  }
  report.print();
  return report.to_json();
}

}  // namespace covflow::bench

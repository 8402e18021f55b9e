// covflow-bench cholupdate: rank-k Cholesky update/downdate.
//   covflow           linalg::cholupdate on the CUDA backend
//   xpotrf-refactor   one large factor: A ± VVᴴ formed with cublasDsyrk on a copy of A, then
//                     cusolverDnXpotrf — refactoring, what the update replaces (A kept on the
//                     device, so forming L·Lᴴ is not timed: the vendor path's best case)
//   zpotrf-batched    batches of small factors: A ± VVᴴ by cublasZgemmStridedBatched on a copy of
//                     the batch, then cusolverDnZpotrfBatched
//   cpu               linalg::cholupdate on the CPU backend (for the batch: timed on one matrix
//                     per thread and scaled, marked so)
// Rows: n = 5000, k ∈ {1, 16}, double, update and downdate; 4096 cells of 64×64 complex double,
// k = 4. Every contender overwrites its input, so each timed call starts from a fresh copy made
// before its start event. After timing, outside the timed region, every info is read and covflow's
// factor is compared with the vendor's; a row that disagrees fails, so the table never times a
// wrong answer. Targets (H100): n = 5000, k = 16 update ≥ 10× faster than xpotrf-refactor;
// 4096 × 64×64, k = 4 ≥ 5× faster than zpotrf-batched.
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cholupdate_bench.hpp"
#include "covflow/linalg/cholupdate.hpp"
#if COVFLOW_HAS_CUDA
#include <cublas_v2.h>
#include <cusolverDn.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "../linalg/cholupdate/cholupdate_impl.hpp"  // the product path's timeline (a benchmark hook)
#endif

namespace covflow::bench {
namespace {

using namespace covflow::linalg;

// Lower factors with diagonal in [1, 2] and small Gaussian entries below (κ₂(LLᴴ) ≲ 20), packed,
// column-major, zero above the diagonal; V Gaussian with ‖VVᴴ‖ of the order of ‖LLᴴ‖.
template <class T>
std::vector<T> make_factors(int n, long long count, std::mt19937_64& rng) {
  using R = real_t<T>;
  std::normal_distribution<double> normal(0.0, 0.2 / std::sqrt(double(n)));
  std::uniform_real_distribution<double> diagonal(1.0, 2.0);
  std::vector<T> l(static_cast<std::size_t>(count) * n * n, T(0));
  for (long long b = 0; b < count; ++b)
    for (int j = 0; j < n; ++j) {
      T* column = l.data() + (b * n + j) * n;
      column[j] = T(R(diagonal(rng)));
      for (int i = j + 1; i < n; ++i) {
        if constexpr (is_complex_v<T>) column[i] = T(R(normal(rng)), R(normal(rng)));
        else column[i] = T(normal(rng));
      }
    }
  return l;
}

template <class T>
std::vector<T> make_updates(int n, int k, long long count, std::mt19937_64& rng) {
  using R = real_t<T>;
  std::normal_distribution<double> normal(0.0, 1.0 / std::sqrt(double(std::max(n, k))));
  std::vector<T> v(static_cast<std::size_t>(count) * n * k);
  for (auto& x : v) {
    if constexpr (is_complex_v<T>) x = T(R(normal(rng)), R(normal(rng)));
    else x = T(normal(rng));
  }
  return v;
}

// Nominal operations of one rank-k modification: per element of the lower triangle and per column
// of V, one rotation of 2 multiply-adds and a multiply (6 real flops; ×4 for complex). A
// convention, so GFLOP/s compare contenders on the same work.
double nominal_flops(int n, int k, bool complex) { return (complex ? 4.0 : 1.0) * 6.0 * 0.5 * double(n) * n * k; }

// "N factors with info != 0 (first: matrix B, info I)", or "" when every info is 0.
std::string info_problem(const std::vector<int>& info) {
  const auto first = std::find_if(info.begin(), info.end(), [](int v) { return v != 0; });
  if (first == info.end()) return "";
  const auto bad = std::count_if(info.begin(), info.end(), [](int v) { return v != 0; });
  return fmt::format("{} factors with info != 0 (first: matrix {}, info {})", bad, first - info.begin(), *first);
}

#if COVFLOW_HAS_CUDA
// The factors are compared as the test suites compare cholupdate with LAPACK's potrf: two
// backward-stable factors of one matrix, each with a backward error of at most 10·n·ε
// (cholupdate_cases.hpp), differ by ‖ΔL‖_F/‖L‖_F ≲ κ₂ times the two backward errors, since the
// forward error of a Cholesky factor is at most about κ₂ times its backward error. κ₂ is bounded by
// construction here: make_factors gives κ₂(LLᴴ) ≲ 20 (σ(L) ∈ [0.6, 2.4]), and VVᴴ, of norm ≲ 1.6,
// at most doubles the largest eigenvalue of the updated matrix; the downdates end at such an LLᴴ.
constexpr double kConditionBound = 40;
constexpr double kFactorTolerance = 2 * 10 * kConditionBound;  // units of n·ε

// max over the batch of ‖X − Y‖_F / ‖Y‖_F on the lower triangles, in units of n·ε; NaN anywhere
// gives NaN.
template <class T>
double factor_difference(const std::vector<T>& x, const std::vector<T>& y, int n, long long count) {
  double worst = 0;
  for (long long b = 0; b < count; ++b) {
    long double diff2 = 0, norm2 = 0;
    for (int j = 0; j < n; ++j)
      for (int i = j; i < n; ++i) {
        const std::size_t e = static_cast<std::size_t>((b * n + j) * n + i);
        diff2 += std::norm(std::complex<long double>(x[e]) - std::complex<long double>(y[e]));
        norm2 += std::norm(std::complex<long double>(y[e]));
      }
    const double relative = double(std::sqrt(diff2 / norm2));
    if (std::isnan(relative) || std::isnan(worst)) worst = std::numeric_limits<double>::quiet_NaN();
    else worst = std::max(worst, relative);
  }
  return worst / (double(n) * std::numeric_limits<real_t<T>>::epsilon());
}

// Fails `row` unless covflow's factors agree with the vendor's; notes the difference either way.
template <class T>
void check_factors(Row& row, const std::string& vendor, const std::vector<T>& covflow_l, const std::vector<T>& vendor_l,
                   int n, long long count) {
  const double difference = factor_difference(covflow_l, vendor_l, n, count);
  row.notes["‖L_covflow − L_" + vendor + "‖_F / ‖L‖_F"] =
      fmt::format("{:.2f} n·ε (tolerance {:.0f} = 2·10·κ₂ with κ₂ ≤ {:.0f})", difference, kFactorTolerance, kConditionBound);
  if (!(difference <= kFactorTolerance))
    row.fail(fmt::format("factor differs from {}'s by {:.2f} n·ε (tolerance {:.0f})", vendor, difference, kFactorTolerance));
}
#endif

Row bench_large(int n, int k, Sign sign, const Settings& settings, Exec* gpu, Exec& cpu, std::mt19937_64& rng) {
  using T = f64;
  Row row;
  row.op = "cholupdate";
  row.dtype = "f64";
  row.shape = fmt::format("n={} k={} {}", n, k, sign == Sign::update ? "update" : "downdate");
  row.flops = nominal_flops(n, k, false);
  row.vendors = {"xpotrf-refactor"};
  [[maybe_unused]] const std::size_t elems = std::size_t(n) * n;
  const std::vector<T> base = make_factors<T>(n, 1, rng);  // L_B
  const std::vector<T> host_v = make_updates<T>(n, k, 1, rng);
  std::vector<T> host_l = base;  // the factor covflow starts from: L_B (update) or chol(B + VVᴴ) (downdate)
  if (sign == Sign::downdate) {
    std::vector<int> info(1);
    cholupdate<T>(cpu, Batch<T>::packed(host_l.data(), n, n, 1), Batch<const T>::packed(host_v.data(), n, k, 1),
                  Sign::update, info);
  }

#if COVFLOW_HAS_CUDA
  if (gpu != nullptr) {
    CudaContext& context = gpu->cuda_context();
    cudaStream_t stream = context.stream();
    cuda::DeviceBuffer<T> pristine(elems), work(elems), a(elems), v(std::size_t(n) * k);
    cuda::DeviceBuffer<int> info(1);
    pristine.upload(host_l, stream);
    v.upload(host_v, stream);
    // A = L·Lᴴ of the factor covflow starts from, formed once (not timed).
    {
      cuda::DeviceBuffer<T> lb(elems);
      lb.upload(host_l, stream);
      const T one = 1, zero = 0;
      COVFLOW_CUBLAS_TRY(cublasDgemm(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &one, lb.data(), n, lb.data(), n,
                                     &zero, a.data(), n));
      gpu->synchronize();
    }
    gpu->workspace().reserve(cholupdate_workspace<T>(*gpu, n, k, 1));
    info.fill_bytes(0xFF, stream);  // −1 until the contender writes it
    row.times["covflow"] = time_device(
        stream,
        [&](int) {
          cholupdate<T>(*gpu, Batch<T>::packed(work.data(), n, n, 1), Batch<const T>::packed(v.data(), n, k, 1), sign,
                        {info.data(), 1});
        },
        settings.warmup, settings.reps,
        [&](int) {
          COVFLOW_CUDA_TRY(cudaMemcpyAsync(work.data(), pristine.data(), elems * sizeof(T), cudaMemcpyDeviceToDevice, stream));
        });
    // Where the last timed call's time went, on the tensor-core product path (empty elsewhere).
    if (const std::vector<double> clock = linalg::detail::cholupdate_cuda_product_timeline(context, 1); !clock.empty())
      row.notes["timeline µs (last W, solve end, apply first block, first tile, apply end, finish)"] =
          fmt::format("{:.1f}", fmt::join(clock, " / "));
    std::vector<T> covflow_l(elems);
    std::vector<int> covflow_info(1), vendor_info(1);
    work.download(covflow_l, stream);
    info.download(covflow_info, stream);

    cusolverDnParams_t params = nullptr;
    COVFLOW_CUSOLVER_TRY(cusolverDnCreateParams(&params));
    std::size_t device_bytes = 0, host_bytes = 0;
    COVFLOW_CUSOLVER_TRY(cusolverDnXpotrf_bufferSize(context.cusolver(), params, CUBLAS_FILL_MODE_LOWER, n, CUDA_R_64F,
                                                     work.data(), n, CUDA_R_64F, &device_bytes, &host_bytes));
    cuda::DeviceBuffer<std::byte> device_work(std::max<std::size_t>(device_bytes, 1));
    std::vector<std::byte> host_work(std::max<std::size_t>(host_bytes, 1));
    const T alpha = sign == Sign::update ? 1.0 : -1.0, beta = 1.0;
    info.fill_bytes(0xFF, stream);  // −1 until the contender writes it
    row.times["xpotrf-refactor"] = time_device(
        stream,
        [&](int) {
          COVFLOW_CUBLAS_TRY(cublasDsyrk(context.cublas(), CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, n, k, &alpha, v.data(), n,
                                         &beta, work.data(), n));
          COVFLOW_CUSOLVER_TRY(cusolverDnXpotrf(context.cusolver(), params, CUBLAS_FILL_MODE_LOWER, n, CUDA_R_64F,
                                                work.data(), n, CUDA_R_64F, device_work.data(), device_bytes,
                                                host_work.data(), host_bytes, info.data()));
        },
        settings.warmup, settings.reps,
        [&](int) {
          COVFLOW_CUDA_TRY(cudaMemcpyAsync(work.data(), a.data(), elems * sizeof(T), cudaMemcpyDeviceToDevice, stream));
        });
    cusolverDnDestroyParams(params);
    std::vector<T> vendor_l(elems);
    work.download(vendor_l, stream);
    info.download(vendor_info, stream);
    gpu->synchronize();
    if (const std::string problem = info_problem(covflow_info); !problem.empty()) row.fail("covflow: " + problem);
    if (const std::string problem = info_problem(vendor_info); !problem.empty())
      row.fail("xpotrf-refactor: " + problem + ": nothing to compare with");
    else check_factors(row, "xpotrf", covflow_l, vendor_l, n, 1);
  }
#endif
  if (settings.cpu) {
    std::vector<T> l = host_l;
    std::vector<int> info(1, -1);
    row.times["cpu"] = time_host(
        [&] {
          l = host_l;
          cholupdate<T>(cpu, Batch<T>::packed(l.data(), n, n, 1), Batch<const T>::packed(host_v.data(), n, k, 1), sign, info);
        },
        0, settings.cpu_reps);
    if (const std::string problem = info_problem(info); !problem.empty()) row.fail("cpu: " + problem);
  }
  return row;
}

Row bench_batch(int n, int k, long long count, const Settings& settings, Exec* gpu, Exec& cpu, std::mt19937_64& rng) {
  using T = cf64;
  Row row;
  row.op = "cholupdate";
  row.dtype = "cf64";
  row.shape = fmt::format("n={} k={} batch={} update", n, k, count);
  row.flops = nominal_flops(n, k, true) * double(count);
  row.vendors = {"zpotrf-batched"};
  [[maybe_unused]] const std::size_t elems = static_cast<std::size_t>(count) * n * n;
  const std::vector<T> host_l = make_factors<T>(n, count, rng);
  const std::vector<T> host_v = make_updates<T>(n, k, count, rng);

#if COVFLOW_HAS_CUDA
  if (gpu != nullptr) {
    CudaContext& context = gpu->cuda_context();
    cudaStream_t stream = context.stream();
    cuda::DeviceBuffer<T> pristine(elems), work(elems), a(elems), v(host_v.size());
    cuda::DeviceBuffer<int> info(static_cast<std::size_t>(count));
    pristine.upload(host_l, stream);
    v.upload(host_v, stream);
    auto* lz = reinterpret_cast<cuDoubleComplex*>(pristine.data());
    auto* az = reinterpret_cast<cuDoubleComplex*>(a.data());
    auto* wz = reinterpret_cast<cuDoubleComplex*>(work.data());
    auto* vz = reinterpret_cast<cuDoubleComplex*>(v.data());
    const cuDoubleComplex one{1, 0}, zero{0, 0};
    const long long square = std::int64_t(n) * n, panel = std::int64_t(n) * k;
    COVFLOW_CUBLAS_TRY(cublasZgemmStridedBatched(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_C, n, n, n, &one, lz, n, square,
                                                 lz, n, square, &zero, az, n, square, static_cast<int>(count)));
    info.fill_bytes(0xFF, stream);  // −1 until the contender writes it
    row.times["covflow"] = time_device(
        stream,
        [&](int) {
          cholupdate<T>(*gpu, Batch<T>::packed(work.data(), n, n, count), Batch<const T>::packed(v.data(), n, k, count),
                        Sign::update, {info.data(), info.size()});
        },
        settings.warmup, settings.reps,
        [&](int) {
          COVFLOW_CUDA_TRY(cudaMemcpyAsync(work.data(), pristine.data(), elems * sizeof(T), cudaMemcpyDeviceToDevice, stream));
        });
    std::vector<T> covflow_l(elems);
    std::vector<int> covflow_info(static_cast<std::size_t>(count)), vendor_info(static_cast<std::size_t>(count));
    work.download(covflow_l, stream);
    info.download(covflow_info, stream);

    std::vector<cuDoubleComplex*> pointers(static_cast<std::size_t>(count));
    for (long long b = 0; b < count; ++b) pointers[b] = wz + b * square;
    cuda::DeviceBuffer<cuDoubleComplex*> device_pointers(pointers.size());
    device_pointers.upload(pointers, stream);
    info.fill_bytes(0xFF, stream);  // −1 until the contender writes it
    row.times["zpotrf-batched"] = time_device(
        stream,
        [&](int) {
          COVFLOW_CUBLAS_TRY(cublasZgemmStridedBatched(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_C, n, n, k, &one, vz, n,
                                                       panel, vz, n, panel, &one, wz, n, square, static_cast<int>(count)));
          COVFLOW_CUSOLVER_TRY(cusolverDnZpotrfBatched(context.cusolver(), CUBLAS_FILL_MODE_LOWER, n, device_pointers.data(),
                                                       n, info.data(), static_cast<int>(count)));
        },
        settings.warmup, settings.reps,
        [&](int) {
          COVFLOW_CUDA_TRY(cudaMemcpyAsync(work.data(), a.data(), elems * sizeof(T), cudaMemcpyDeviceToDevice, stream));
        });
    std::vector<T> vendor_l(elems);
    work.download(vendor_l, stream);
    info.download(vendor_info, stream);
    gpu->synchronize();
    if (const std::string problem = info_problem(covflow_info); !problem.empty()) row.fail("covflow: " + problem);
    if (const std::string problem = info_problem(vendor_info); !problem.empty())
      row.fail("zpotrf-batched: " + problem + ": nothing to compare with");
    else check_factors(row, "zpotrf", covflow_l, vendor_l, n, count);
  }
#endif
  if (settings.cpu) {
    const long long sub = std::min<long long>(count, cpu.pool().size());
    std::vector<T> l(host_l.begin(), host_l.begin() + static_cast<std::ptrdiff_t>(sub) * n * n);
    std::vector<int> info(static_cast<std::size_t>(sub), -1);
    Timing t = time_host(
        [&] {
          std::copy(host_l.begin(), host_l.begin() + static_cast<std::ptrdiff_t>(sub) * n * n, l.begin());
          cholupdate<T>(cpu, Batch<T>::packed(l.data(), n, n, sub), Batch<const T>::packed(host_v.data(), n, k, sub),
                        Sign::update, info);
        },
        1, settings.cpu_reps);
    const double scale = double(count) / double(sub);
    t.median_ms *= scale;
    t.min_ms *= scale;
    t.max_ms *= scale;
    row.times["cpu"] = t;
    row.notes["cpu"] = fmt::format("timed on {} matrices ({} threads), scaled ×{:.0f}", sub, cpu.pool().size(), scale);
    if (const std::string problem = info_problem(info); !problem.empty()) row.fail("cpu: " + problem);
  }
  return row;
}

}  // namespace

nlohmann::json run_cholupdate_bench(const Settings& settings, Exec* gpu, Exec& cpu) {
  std::mt19937_64 rng(2026);
  Report report("cholupdate: rank-k Cholesky update/downdate vs refactoring");
  const int n = settings.quick ? 1000 : 5000;
  for (int k : {1, 16})
    for (Sign sign : {Sign::update, Sign::downdate}) report.add(bench_large(n, k, sign, settings, gpu, cpu, rng));
  report.add(bench_batch(64, 4, settings.quick ? 256 : 4096, settings, gpu, cpu, rng));
  report.print();
  return report.to_json();
}

}  // namespace covflow::bench

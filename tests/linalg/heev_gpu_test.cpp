// heev on the CUDA backend against LAPACK in double precision (eigen_cases.hpp): eigenvalue error,
// residual ‖AV − VΛ‖_F/‖A‖_F and orthogonality ‖VᴴV − I‖_F, each ≤ 10·n·ε, on every
// spectrum kind, with outputs poisoned before each run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <thread>
#include <vector>

#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/heev.hpp"
#include "eigen_cases.hpp"
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

using test::EigenCase;
using test::EigenErrors;
using test::SpectrumKind;

template <class T>
struct GpuRun {
  std::vector<T> vectors;
  std::vector<real_t<T>> values;
  std::vector<int> info;
};

// Runs heev on the device on a copy of `a`, every output poisoned first: NaN eigenvalues and
// vectors-to-be, and an info value heev never writes.
template <class T>
GpuRun<T> run_gpu(Exec& exec, const std::vector<T>& a, int n, int count, const HeevOptions& options) {
  cudaStream_t stream = exec.cuda_context().stream();
  cuda::DeviceBuffer<T> da(a.size());
  cuda::DeviceBuffer<real_t<T>> dw(std::size_t(count) * n);
  cuda::DeviceBuffer<int> dinfo{static_cast<std::size_t>(count)};
  da.upload(a, stream);
  dw.fill_bytes(0xFF, stream);
  dinfo.fill_bytes(0x7F, stream);
  heev<T>(exec, Batch<T>::packed(da.data(), n, n, count), {dw.data(), dw.size()}, {dinfo.data(), dinfo.size()}, options);
  GpuRun<T> out;
  out.vectors.resize(a.size());
  out.values.resize(std::size_t(count) * n);
  out.info.resize(static_cast<std::size_t>(count));
  da.download(out.vectors, stream);
  dw.download(out.values, stream);
  dinfo.download(out.info, stream);
  exec.synchronize();
  return out;
}

// Measures the matrices `which` in parallel (each check is O(n³) on the host), then asserts
// serially: info 0, ascending values, every error ≤ 10·n·ε.
template <class T>
EigenErrors check(const EigenCase<T>& c, const GpuRun<T>& run, const std::vector<int>& which, bool vectors,
                  const std::string& context) {
  std::vector<EigenErrors> errors(which.size());
  std::vector<std::thread> threads;
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned t = 0; t < workers; ++t)
    threads.emplace_back([&, t] {
      for (std::size_t k = t; k < which.size(); k += workers) {
        const int b = which[k];
        const std::size_t off = std::size_t(b) * c.n * c.n;
        errors[k] = test::eigen_errors<T>(c.matrix(b), vectors ? run.vectors.data() + off : nullptr,
                                          run.values.data() + std::size_t(b) * c.n, c.reference(b), c.n);
      }
    });
  for (auto& th : threads) th.join();
  EigenErrors worst;
  for (std::size_t k = 0; k < which.size(); ++k) {
    const int b = which[k];
    const std::string where = context + " " + test::name(c.kind) + " n=" + std::to_string(c.n) + " matrix " +
                              std::to_string(b) + " (case seed " + std::to_string(c.seed) + ")";
    EXPECT_EQ(run.info[b], 0) << where;
    EXPECT_TRUE(std::is_sorted(run.values.begin() + std::ptrdiff_t(b) * c.n, run.values.begin() + std::ptrdiff_t(b + 1) * c.n))
        << where << ": eigenvalues not ascending";
    EXPECT_LE(errors[k].values, test::eigen_tolerance) << where << ": eigenvalue error (n·ε)";
    if (vectors) {
      EXPECT_LE(errors[k].residual, test::eigen_tolerance) << where << ": residual (n·ε)";
      EXPECT_LE(errors[k].orthogonality, test::eigen_tolerance) << where << ": orthogonality (n·ε)";
    }
    worst = test::max_errors(worst, errors[k]);
  }
  return worst;
}

template <class T>
class HeevGpu : public test::GpuTest {};
using Types = ::testing::Types<cf64, cf32, f64, f32>;
TYPED_TEST_SUITE(HeevGpu, Types);

TYPED_TEST(HeevGpu, MatchesLapackOnEverySizeAndSpectrum) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("heev gpu sizes"));
  for (int n : {1, 2, 3, 5, 8, 16, 17, 31, 32, 33, 64, 100, 128, 200, 256, 512}) {
    EigenErrors worst;
    for (SpectrumKind kind : test::all_spectrum_kinds()) {
      for (int count : {1, 7}) {
        // Above n = 200 the host-side checks dominate the run: batches of 7 only for the two
        // kinds that exercise the most iterations, two of their matrices checked.
        if (n >= 200 && count > 1 && kind != SpectrumKind::random && kind != SpectrumKind::radar) continue;
        const EigenCase<T> c = test::make_eigen_case<T>(kind, n, count, rng);
        const auto run = run_gpu(exec, c.a, n, count, {.uplo = Uplo::lower, .vectors = true});
        worst = test::max_errors(worst, check(c, run, test::sample_indices(count, n >= 200 ? 2 : 7, rng), true,
                                              "batch " + std::to_string(count)));
      }
    }
    std::printf("[ errors   ] n=%-4d worst over kinds: values %.2f, residual %.2f, orthogonality %.2f (units of n·ε)\n", n,
                worst.values, worst.residual, worst.orthogonality);
  }
}

TYPED_TEST(HeevGpu, BatchOf180RadarCells) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("heev gpu batch 180"));
  for (int n : {16, 64, 128}) {
    for (SpectrumKind kind : {SpectrumKind::radar, SpectrumKind::clustered}) {
      const EigenCase<T> c = test::make_eigen_case<T>(kind, n, 180, rng);
      const auto run = run_gpu(exec, c.a, n, 180, {.uplo = Uplo::lower, .vectors = true});
      std::vector<int> all(180);
      for (int b = 0; b < 180; ++b) all[b] = b;
      check(c, run, all, false, "batch 180 (values of all)");
      check(c, run, test::sample_indices(180, 12, rng), true, "batch 180");
    }
  }
}

TYPED_TEST(HeevGpu, UpperTriangleAndValuesOnly) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("heev gpu upper"));
  for (int n : {5, 32, 33, 128, 200}) {
    const EigenCase<T> c = test::make_eigen_case<T>(SpectrumKind::random, n, 3, rng);
    // Upper triangle read: the strict lower triangle holds NaN and must never be read.
    std::vector<T> garbled = c.a;
    test::garble_unread_triangle(garbled, n, 3, Uplo::upper);
    const auto upper = run_gpu(exec, garbled, n, 3, {.uplo = Uplo::upper, .vectors = true});
    check(c, upper, {0, 1, 2}, true, "upper");
    std::vector<T> lower_only = c.a;
    test::garble_unread_triangle(lower_only, n, 3, Uplo::lower);
    const auto values = run_gpu(exec, lower_only, n, 3, {.uplo = Uplo::lower, .vectors = false});
    check(c, values, {0, 1, 2}, false, "values-only");
  }
}

// The top of the supported range (any n up to 1024): the divide and conquer's merges of
// 1024 rows (the largest shared-memory panel), the reduction in global memory for complex double,
// and the shared-memory back-transform above n = 512. One matrix of each type: the LAPACK reference
// and the checks take seconds at this size.
TYPED_TEST(HeevGpu, LargestSize) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("heev gpu n=1024"));
  const int n = 1024;
  const EigenCase<T> c = test::make_eigen_case<T>(SpectrumKind::random, n, 1, rng);
  const auto run = run_gpu(exec, c.a, n, 1, {.uplo = Uplo::lower, .vectors = true});
  const EigenErrors worst = check(c, run, {0}, true, "largest");
  const auto values = run_gpu(exec, c.a, n, 1, {.uplo = Uplo::lower, .vectors = false});
  check(c, values, {0}, false, "largest, values-only");
  std::printf("[ errors   ] n=%d random: values %.2f, residual %.2f, orthogonality %.2f (units of n·ε)\n", n, worst.values,
              worst.residual, worst.orthogonality);
}

TYPED_TEST(HeevGpu, NonFiniteMatrixIsIsolated) {
  using T = TypeParam;
  using R = real_t<T>;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("heev gpu nan"));
  for (int n : {8, 64, 128, 300}) {
    const EigenCase<T> c = test::make_eigen_case<T>(SpectrumKind::random, n, 5, rng);
    std::vector<T> bad = c.a;
    bad[1 * n * n + (n - 1) + 0 * n] = T(std::numeric_limits<R>::quiet_NaN());      // matrix 1: NaN, lower triangle
    bad[3 * n * n + n / 2 + (n / 2) * n] = T(std::numeric_limits<R>::infinity());   // matrix 3: Inf on the diagonal
    bad[4 * n * n + 0 + (n - 1) * n] = T(std::numeric_limits<R>::quiet_NaN());      // matrix 4: NaN, upper only
    for (bool vectors : {true, false}) {
      const auto run = run_gpu(exec, bad, n, 5, {.uplo = Uplo::lower, .vectors = vectors});
      for (int b : {1, 3}) {
        EXPECT_EQ(run.info[b], status::non_finite_input) << "n=" << n << " matrix " << b;
        for (int k = 0; k < n; ++k) EXPECT_TRUE(std::isnan(run.values[std::size_t(b) * n + k]));
        if (vectors) {
          for (int i = 0; i < n * n; ++i) ASSERT_TRUE(std::isnan(std::real(run.vectors[std::size_t(b) * n * n + i])));
        }
      }
      check(c, run, {0, 2, 4}, vectors, "neighbours of NaN");  // 4's NaN is in the unread triangle
    }
  }
}

TEST(HeevGpuWorkspace, ReservedOnceNeverGrowsAndStaysUnderTwiceTheInput) {
  COVFLOW_SKIP_WITHOUT_DEVICE();
  Exec exec = Exec::cuda();
  std::mt19937_64 rng(test::fresh_seed("heev gpu workspace"));
  for (int n : {64, 128, 256}) {
    const int count = 180;
    const std::size_t bytes = heev_workspace<cf64>(exec, n, count, {});
    const std::size_t input = sizeof(cf64) * std::size_t(n) * n * count;
    EXPECT_LE(bytes, 2 * input) << "n=" << n << ": workspace " << bytes << " bytes for an input of " << input;
    exec.workspace().reserve(bytes);
    const std::size_t growth = exec.workspace().growth_count();
    const EigenCase<cf64> c = test::make_eigen_case<cf64>(SpectrumKind::radar, n, count, rng);
    run_gpu(exec, c.a, n, count, {});
    run_gpu(exec, c.a, n, count, {.uplo = Uplo::lower, .vectors = false});
    EXPECT_EQ(exec.workspace().growth_count(), growth) << "n=" << n;
  }
}

}  // namespace
}  // namespace covflow::linalg

// gesvj on the CUDA backend, through the public API, against double-precision LAPACK
// (lowrank_cases.hpp): ‖A − UΣVᴴ‖_F/‖A‖_F, ‖UᴴU − I‖_F, ‖VᴴV − I‖_F and max|σ̂_i − σ_i|/σ₁ each
// ≤ 10·n·ε (n = max(m, n)), and for graded matrices the relative accuracy |σ̂_i − σ_i|/σ_i ≤
// 10·n·ε·κ(B) — on every variant of the CUDA path: the register variant on A itself (m, n ≤ 32),
// and after the QR preprocessing the register variant (n ≤ 32: 2048 × 64 … 16384 × 32, 300 × 17),
// the shared-memory variant (33 … 100, 128 of some types) and block Jacobi (128 … 512, 4096 × 512)
// on Rᴴ; wide matrices (m < n, through Aᴴ); batches of 1, 7 and 1000; ?latms modes 1–5 over the
// condition numbers each precision can resolve, rank-deficient matrices (U must stay orthonormal),
// graded matrices, radar snapshots; values-only and one-sided runs; a NaN or an Inf in one matrix
// flags that matrix and leaves the others bit for bit as in a clean run; strided batches; the
// workspace never grows; the off-diagonal tiles of kernel covariance matrices, most of whose
// columns are rounding noise (GesvjGpuKernelTiles). Every output is poisoned (NaN, info 0x7f bytes)
// before a run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/svd.hpp"
#include "lowrank_cases.hpp"
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

using test::LowrankCase;
using test::LowrankSpec;
using test::SvdErrors;

std::string shape_name(int m, int n) { return std::to_string(m) + "×" + std::to_string(n); }

std::vector<int> all_indices(int count) {
  std::vector<int> out(count);
  for (int b = 0; b < count; ++b) out[b] = b;
  return out;
}

// At most `limit` matrices of a batch: the first, the last and evenly spaced others.
std::vector<int> sampled_indices(int count, int limit) {
  if (count <= limit) return all_indices(count);
  std::vector<int> out;
  for (int i = 0; i < limit; ++i) out.push_back(static_cast<int>(static_cast<long long>(i) * (count - 1) / (limit - 1)));
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Batches by size: 7 small matrices, fewer large ones (the references and long-double checks on the
// host are O(m·n²) per matrix).
int batch_for(int m, int n) {
  const long long elements = static_cast<long long>(m) * n;
  return elements <= 64 * 64 ? 7 : elements <= 256 * 256 ? 2 : 1;
}

template <class T>
struct GpuRun {
  std::vector<real_t<T>> s;
  std::vector<T> u, v;  // packed, count·m·k and count·n·k; empty when not asked for
  std::vector<SvdInfo> info;
};

// Runs gesvj on the device on a copy of `a` (count packed m×n matrices). s, U and V are NaN and
// info is 0x7f bytes until gesvj writes them; the workspace is reserved first.
template <class T>
GpuRun<T> run_gpu(Exec& exec, const std::vector<T>& a, int m, int n, int count, const SvdOptions& options) {
  using R = real_t<T>;
  const int k = std::min(m, n);
  cudaStream_t stream = exec.cuda_context().stream();
  cuda::DeviceBuffer<T> da(a.size());
  cuda::DeviceBuffer<T> du(options.u ? std::size_t(count) * m * k : 0), dv(options.v ? std::size_t(count) * n * k : 0);
  cuda::DeviceBuffer<R> ds(std::size_t(count) * k);
  cuda::DeviceBuffer<SvdInfo> dinfo(static_cast<std::size_t>(count));
  da.upload(a, stream);
  ds.fill_bytes(0xFF, stream);
  du.fill_bytes(0xFF, stream);
  dv.fill_bytes(0xFF, stream);
  dinfo.fill_bytes(0x7F, stream);
  exec.workspace().reserve(gesvj_workspace<T>(exec, m, n, count, options));
  gesvj<T>(exec, Batch<T>::packed(da.data(), m, n, count), {ds.data(), ds.size()},
           options.u ? Batch<T>::packed(du.data(), m, k, count) : Batch<T>{},
           options.v ? Batch<T>::packed(dv.data(), n, k, count) : Batch<T>{}, {dinfo.data(), dinfo.size()}, options);
  GpuRun<T> out;
  out.s.resize(ds.size());
  out.u.resize(du.size());
  out.v.resize(dv.size());
  out.info.resize(dinfo.size());
  ds.download(out.s, stream);
  if (options.u) du.download(out.u, stream);
  if (options.v) dv.download(out.v, stream);
  dinfo.download(out.info, stream);
  exec.synchronize();
  return out;
}

// expect_gesvj_results on the matrices `which`, spread over the host's threads (the reference SVDs
// and the long-double checks are the slow part; GoogleTest's assertions are thread-safe).
template <class T>
SvdErrors check(const LowrankCase<T>& c, const GpuRun<T>& run, const std::vector<int>& which,
                const std::string& context) {
  const unsigned workers = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), which.size()));
  std::vector<SvdErrors> worst(workers);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < workers; ++t)
    threads.emplace_back([&, t] {
      std::vector<int> mine;
      for (std::size_t i = t; i < which.size(); i += workers) mine.push_back(which[i]);
      worst[t] = test::expect_gesvj_results<T>(c, run.s.data(), run.u.empty() ? nullptr : run.u.data(),
                                              run.v.empty() ? nullptr : run.v.data(), run.info.data(), mine, context);
    });
  for (auto& th : threads) th.join();
  SvdErrors all;
  for (const SvdErrors& e : worst) all = test::max_errors(all, e);
  if (!run.u.empty() && !(all.u_orthogonality <= test::lowrank_tolerance))
    for (int b : which) explain_u(c, run, b);
  return all;
}

// On a failure of U's orthogonality: the worst entry of UᴴU − I of matrix b, with the two σ, and
// the matrix's sweeps and final off-diagonal measure (what a reader of the failure needs first).
template <class T>
void explain_u(const LowrankCase<T>& c, const GpuRun<T>& run, int b) {
  const int m = c.m(), k = c.k();
  const T* u = run.u.data() + std::size_t(b) * m * k;
  const real_t<T>* s = run.s.data() + std::size_t(b) * k;
  double worst = -1;
  int wi = 0, wj = 0;
  for (int i = 0; i < k; ++i)
    for (int j = 0; j <= i; ++j) {
      std::complex<double> dot = 0;
      for (int r = 0; r < m; ++r)
        dot += std::conj(std::complex<double>(u[r + std::size_t(i) * m])) * std::complex<double>(u[r + std::size_t(j) * m]);
      if (i == j) dot -= 1.0;
      if (std::abs(dot) > worst) {
        worst = std::abs(dot);
        wi = i;
        wj = j;
      }
    }
  std::printf("[ explain  ] %s b=%d: sweeps %d, off %.3g; worst |(UᴴU − I)_%d,%d| = %.3g (σ %.6g, %.6g); σ_min %.3g\n",
              c.label().c_str(), b, run.info[b].sweeps, run.info[b].off, wi, wj, worst, double(s[wi]), double(s[wj]),
              double(s[k - 1]));
}

void print_errors(const std::string& what, const SvdErrors& e) {
  std::printf("[ errors   ] %-44s residual %.2f, ‖UᴴU−I‖ %.2f, ‖VᴴV−I‖ %.2f, σ %.2f, σ relative %.2f (n·ε)\n", what.c_str(),
              e.residual, e.u_orthogonality, e.v_orthogonality, e.values, e.relative_values);
}

template <class T>
SvdErrors run_and_check(Exec& exec, const LowrankSpec& spec, std::mt19937_64& rng, int check_limit,
                        const SvdOptions& options = {}) {
  const LowrankCase<T> c = test::make_lowrank_case<T>(spec, rng);
  const auto run = run_gpu(exec, c.a, c.m(), c.n(), c.count(), options);
  return check(c, run, sampled_indices(c.count(), check_limit), "gpu");
}

// Condition numbers a precision resolves: up to 1e7 in float, 1e12 in double.
template <class T>
std::vector<double> conditions() {
  if constexpr (std::is_same_v<real_t<T>, float>) return {10.0, 1e3, 1e5, 1e7};
  else return {10.0, 1e4, 1e8, 1e12};
}

template <class T>
class GesvjGpu : public test::GpuTest {};
using Types = ::testing::Types<cf64, cf32, f64, f32>;
TYPED_TEST_SUITE(GesvjGpu, Types);

TYPED_TEST(GesvjGpu, SquareSizesMatchLapack) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("gesvj gpu square"));
  for (int n : {1, 2, 17, 31, 32, 33, 64, 100, 128, 256, 512}) {
    const int count = batch_for(n, n);
    SvdErrors worst;
    worst = test::max_errors(worst, run_and_check<T>(exec, test::random_spec(n, n, count), rng, 7));
    worst = test::max_errors(worst, run_and_check<T>(exec, test::latms_spec(n, n, count, 3, conditions<T>()[2]), rng, 7));
    print_errors("square " + shape_name(n, n), worst);
  }
}

TYPED_TEST(GesvjGpu, WideAndTallShapes) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("gesvj gpu rectangular"));
  const std::vector<std::pair<int, int>> shapes = {{1, 5},     {5, 1},      {5, 20},    {20, 5},     {31, 64},
                                                   {64, 31},   {33, 100},   {100, 33},  {17, 300},   {300, 17},
                                                   {2048, 64}, {4096, 64},  {64, 4096}, {16384, 32}, {4096, 512}};
  for (const auto& [m, n] : shapes) {
    const int count = batch_for(m, n);
    const SvdErrors e = run_and_check<T>(exec, test::latms_spec(m, n, count, 5, conditions<T>()[1]), rng, 7);
    print_errors("latms mode 5 " + shape_name(m, n), e);
  }
}

TYPED_TEST(GesvjGpu, BatchOf1000) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("gesvj gpu batch 1000"));
  for (int n : {8, 32, 64}) {
    const SvdErrors e = run_and_check<T>(exec, test::latms_spec(n, n, 1000, 5, conditions<T>()[1]), rng, 16);
    print_errors("batch 1000 " + shape_name(n, n), e);
  }
}

// ?latms modes 1–5 over the conditions of the precision, on the register, shared-memory and block
// Jacobi variants.
TYPED_TEST(GesvjGpu, LatmsModesAndConditions) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("gesvj gpu latms"));
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{32, 32}, {64, 48}, {40, 64}, {128, 128}}) {
    SvdErrors worst;
    for (int mode = 1; mode <= 5; ++mode)
      for (double cond : conditions<T>())
        worst = test::max_errors(worst, run_and_check<T>(exec, test::latms_spec(m, n, m * n > 64 * 64 ? 2 : 7, mode, cond),
                                                         rng, 7));
    print_errors("latms modes 1–5 " + shape_name(m, n), worst);
  }
}

// Exact rank r < min(m, n): the zero singular values' U columns must still be orthonormal.
TYPED_TEST(GesvjGpu, RankDeficient) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("gesvj gpu rank-deficient"));
  struct Case {
    int m, n, rank;
  };
  for (const Case& c : std::vector<Case>{{8, 8, 0},     {32, 32, 0},   {32, 32, 1},    {32, 32, 16},   {20, 9, 3},
                                         {9, 20, 3},    {64, 64, 31},  {100, 100, 50}, {40, 17, 0},    {128, 128, 64},
                                         {4096, 64, 8}, {256, 256, 7}}) {
    const SvdErrors e = run_and_check<T>(exec, test::rank_deficient_spec(c.m, c.n, batch_for(c.m, c.n), c.rank), rng, 7);
    print_errors("rank " + std::to_string(c.rank) + " " + shape_name(c.m, c.n), e);
  }
}

// Singular values that fall through ε·σ₁ and far below it (?latms, geometric and log-uniform to
// κ = 1e30, or 1e15 in float): most columns are rounding noise. These converge within the sweep
// limit with every check met (the kernel tiles below are the harder case).
TYPED_TEST(GesvjGpu, SpectraDecayingFarBelowEpsilon) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("gesvj gpu decaying spectra"));
  const double cond = std::is_same_v<real_t<T>, float> ? 1e15 : 1e30;
  for (int mode : {3, 5})
    for (int n : {32, 64, 100, 128, 256, 512}) {
      const SvdErrors e = run_and_check<T>(exec, test::latms_spec(n, n, batch_for(n, n) * 4, mode, cond), rng, 8);
      print_errors("mode " + std::to_string(mode) + " κ=1e" + std::to_string(int(std::log10(cond))) + " " + shape_name(n, n), e);
    }
}

// A = B·D: the small singular values to relative accuracy ~ε·κ(B), Jacobi's selling point.
TYPED_TEST(GesvjGpu, GradedRelativeAccuracy) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("gesvj gpu graded"));
  const double spread = std::is_same_v<real_t<T>, float> ? 1e7 : 1e12;
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{
           {8, 8}, {32, 32}, {32, 20}, {20, 32}, {64, 64}, {100, 60}, {128, 128}, {2048, 64}, {256, 256}}) {
    const SvdErrors e = run_and_check<T>(exec, test::graded_spec(m, n, batch_for(m, n), spread), rng, 7);
    print_errors("graded " + shape_name(m, n), e);
  }
}

TYPED_TEST(GesvjGpu, RadarSnapshots) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("gesvj gpu radar"));
  for (const auto& [elements, snapshots] :
       std::vector<std::pair<int, int>>{{16, 64}, {32, 32}, {16, 16}, {64, 200}, {100, 40}, {32, 4096}}) {
    const SvdErrors e =
        run_and_check<T>(exec, test::radar_spec(elements, snapshots, batch_for(elements, snapshots)), rng, 7);
    print_errors("radar " + shape_name(elements, snapshots), e);
  }
}

// Values only, U only, V only: the same checks on what was asked for, and σ as in the run with both.
TYPED_TEST(GesvjGpu, ValuesOnlyAndOneSided) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("gesvj gpu values-only"));
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{17, 17}, {32, 20}, {20, 32}, {64, 64}, {100, 100},
                                                             {256, 256}, {4096, 64}}) {
    const LowrankCase<T> c = test::make_lowrank_case<T>(test::latms_spec(m, n, batch_for(m, n), 4, 1e3), rng);
    const auto both = run_gpu(exec, c.a, m, n, c.count(), {.u = true, .v = true});
    for (const SvdOptions options : {SvdOptions{.u = false, .v = false}, SvdOptions{.u = true, .v = false},
                                     SvdOptions{.u = false, .v = true}}) {
      const auto run = run_gpu(exec, c.a, m, n, c.count(), options);
      const std::string what = std::string(options.u ? "U" : "") + (options.v ? "V" : "") + (options.u || options.v ? "" : "values");
      check(c, run, all_indices(c.count()), what);
      // The same σ as with U and V, to rounding: where V does not fit shared memory but X alone
      // does, the two runs take different variants, so bit equality is not promised.
      double worst = 0;
      for (std::size_t i = 0; i < run.s.size(); ++i) {
        const std::size_t first = i / std::size_t(std::min(m, n)) * std::size_t(std::min(m, n));
        worst = std::max(worst, std::abs(double(run.s[i]) - double(both.s[i])) / double(both.s[first]));
      }
      EXPECT_LE(worst / (std::max(m, n) * test::eps<T>()), 2 * test::lowrank_tolerance)
          << shape_name(m, n) << " " << what << ": σ differ from the run with U and V";
    }
  }
}

// A NaN or an Inf in one matrix: that matrix is flagged with NaN outputs, every other matrix is bit
// for bit what a clean run gives.
TYPED_TEST(GesvjGpu, NonFiniteMatrixIsIsolated) {
  using T = TypeParam;
  using R = real_t<T>;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("gesvj gpu nan"));
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{8, 8}, {32, 17}, {17, 32}, {64, 64}, {100, 100},
                                                             {200, 200}, {4096, 64}}) {
    const LowrankCase<T> c = test::make_lowrank_case<T>(test::random_spec(m, n, 5), rng);
    const std::size_t mn = std::size_t(m) * n;
    std::vector<T> bad = c.a;
    bad[1 * mn + (m - 1) + std::size_t(n / 2) * m] = T(std::numeric_limits<R>::quiet_NaN());
    bad[3 * mn + 0] = T(std::numeric_limits<R>::infinity());
    const int k = std::min(m, n);
    for (const SvdOptions options : {SvdOptions{}, SvdOptions{.u = false, .v = false}}) {
      const auto clean = run_gpu(exec, c.a, m, n, 5, options);
      const auto run = run_gpu(exec, bad, m, n, 5, options);
      for (int b : {1, 3}) {
        EXPECT_EQ(run.info[b].status, status::non_finite_input) << shape_name(m, n) << " matrix " << b;
        for (int i = 0; i < k; ++i) ASSERT_TRUE(std::isnan(run.s[std::size_t(b) * k + i])) << shape_name(m, n);
        if (options.u) {
          for (std::size_t i = 0; i < std::size_t(m) * k; ++i)
            ASSERT_TRUE(std::isnan(std::real(run.u[b * std::size_t(m) * k + i]))) << shape_name(m, n) << " U";
        }
        if (options.v) {
          for (std::size_t i = 0; i < std::size_t(n) * k; ++i)
            ASSERT_TRUE(std::isnan(std::real(run.v[b * std::size_t(n) * k + i]))) << shape_name(m, n) << " V";
        }
      }
      for (int b : {0, 2, 4}) {
        const std::string at = shape_name(m, n) + " matrix " + std::to_string(b) + " beside a non-finite one";
        EXPECT_EQ(0, std::memcmp(&run.info[b], &clean.info[b], sizeof(SvdInfo))) << at << ": info";
        EXPECT_EQ(0, std::memcmp(run.s.data() + std::size_t(b) * k, clean.s.data() + std::size_t(b) * k,
                                 sizeof(R) * k))
            << at << ": σ";
        if (options.u) {
          EXPECT_EQ(0, std::memcmp(run.u.data() + std::size_t(b) * m * k, clean.u.data() + std::size_t(b) * m * k,
                                   sizeof(T) * m * k))
              << at << ": U";
        }
        if (options.v) {
          EXPECT_EQ(0, std::memcmp(run.v.data() + std::size_t(b) * n * k, clean.v.data() + std::size_t(b) * n * k,
                                   sizeof(T) * n * k))
              << at << ": V";
        }
      }
      check(c, clean, {0, 2, 4}, "clean neighbours");
    }
  }
}

// Leading dimensions and strides larger than the matrices: results as packed, padding untouched.
TYPED_TEST(GesvjGpu, StridedBatches) {
  using T = TypeParam;
  using R = real_t<T>;
  Exec& exec = test::GpuTest::gpu();
  cudaStream_t stream = exec.cuda_context().stream();
  std::mt19937_64 rng(test::fresh_seed("gesvj gpu strided"));
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{20, 12}, {12, 20}, {64, 40}, {200, 150}, {4096, 64}}) {
    const int count = 3, k = std::min(m, n);
    const LowrankCase<T> c = test::make_lowrank_case<T>(test::random_spec(m, n, count), rng);
    const int lda = m + 3, ldu = m + 5, ldv = n + 2;
    const long long sa = static_cast<long long>(lda) * n + 7, su = static_cast<long long>(ldu) * k + 1,
                    sv = static_cast<long long>(ldv) * k + 9;
    std::vector<T> a(static_cast<std::size_t>(sa * count), T(R(1234)));
    for (int b = 0; b < count; ++b)
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) a[b * sa + i + std::size_t(j) * lda] = c.matrix(b)[i + std::size_t(j) * m];
    const T sentinel = T(R(-777));
    std::vector<T> u(static_cast<std::size_t>(su * count), sentinel), v(static_cast<std::size_t>(sv * count), sentinel);
    cuda::DeviceBuffer<T> da(a.size()), du(u.size()), dv(v.size());
    cuda::DeviceBuffer<R> ds(std::size_t(count) * k);
    cuda::DeviceBuffer<SvdInfo> dinfo(static_cast<std::size_t>(count));
    da.upload(a, stream);
    du.upload(u, stream);
    dv.upload(v, stream);
    ds.fill_bytes(0xFF, stream);
    dinfo.fill_bytes(0x7F, stream);
    gesvj<T>(exec, Batch<T>{da.data(), m, n, lda, sa, count}, {ds.data(), ds.size()}, Batch<T>{du.data(), m, k, ldu, su, count},
             Batch<T>{dv.data(), n, k, ldv, sv, count}, {dinfo.data(), dinfo.size()});
    GpuRun<T> run;
    run.s.resize(ds.size());
    run.info.resize(count);
    ds.download(run.s, stream);
    du.download(u, stream);
    dv.download(v, stream);
    dinfo.download(run.info, stream);
    exec.synchronize();
    run.u.resize(std::size_t(count) * m * k);
    run.v.resize(std::size_t(count) * n * k);
    for (int b = 0; b < count; ++b)
      for (long long e = 0; e < su; ++e) {
        const long long i = e % ldu, j = e / ldu;
        if (i < m && j < k) {
          run.u[b * std::size_t(m) * k + i + j * m] = u[b * su + e];
        } else {
          EXPECT_EQ(u[b * su + e], sentinel) << shape_name(m, n) << ": U padding written at " << e;
        }
      }
    for (int b = 0; b < count; ++b)
      for (long long e = 0; e < sv; ++e) {
        const long long i = e % ldv, j = e / ldv;
        if (i < n && j < k) {
          run.v[b * std::size_t(n) * k + i + j * n] = v[b * sv + e];
        } else {
          EXPECT_EQ(v[b * sv + e], sentinel) << shape_name(m, n) << ": V padding written at " << e;
        }
      }
    check(c, run, all_indices(count), "strided");
  }
}

// The off-diagonal tiles of kernel covariance matrices (exponential exp(−d/ℓ) and Matérn ν = 3/2 on
// random 2-D points): singular values decaying far below ε·σ₁, so that most columns are rounding
// noise whose directions no rotation settles. gesvj judges convergence on the columns above
// max(m, n)·ε·(largest column norm) (svd.hpp) and completes U over the others: every tile converges
// within the sweep limit, off ≤ tol = √n·ε, with residual, orthogonality of U and V and σ against
// LAPACK's each ≤ 10·n·ε. 256² tiles run block Jacobi on Rᴴ (the shared-memory pair step), 64²
// the shared-memory variant on Rᴴ, 32² the register variant on A itself.
template <class T>
class GesvjGpuKernelTiles : public test::GpuTest {};
using DoubleTypes = ::testing::Types<f64, cf64>;
TYPED_TEST_SUITE(GesvjGpuKernelTiles, DoubleTypes);

template <class T>
void expect_kernel_tiles_converge(Exec& exec, const LowrankSpec& spec, std::mt19937_64& rng) {
  const LowrankCase<T> c = test::make_lowrank_case<T>(spec, rng);
  const auto run = run_gpu(exec, c.a, c.m(), c.n(), c.count(), {});
  const double tol = std::sqrt(double(std::max(c.m(), c.n()))) * test::eps<T>();
  int most_sweeps = 0;
  double largest_off = 0;
  for (int b = 0; b < c.count(); ++b) {
    const SvdInfo& info = run.info[b];
    EXPECT_LT(info.sweeps, 30) << c.label() << " b=" << b << ": status " << info.status << ", off " << info.off;
    EXPECT_LE(info.off, tol) << c.label() << " b=" << b << ": sweeps " << info.sweeps;
    most_sweeps = std::max(most_sweeps, info.sweeps);
    largest_off = std::max(largest_off, info.off);
  }
  const SvdErrors e = check(c, run, all_indices(c.count()), "kernel tiles");
  print_errors(test::describe(spec), e);
  std::printf("[ sweeps   ] %-44s at most %d, off at most %.3g (tol %.3g)\n", test::describe(spec).c_str(), most_sweeps,
              largest_off, tol);
}

TYPED_TEST(GesvjGpuKernelTiles, ExponentialTiles256BlockJacobi) {
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("gesvj gpu kernel tiles 256"));
  expect_kernel_tiles_converge<TypeParam>(exec, test::kernel_tiles_spec(256, 2048, 0.1), rng);
}

TYPED_TEST(GesvjGpuKernelTiles, KernelTiles64SharedMemory) {
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("gesvj gpu kernel tiles 64"));
  expect_kernel_tiles_converge<TypeParam>(exec, test::kernel_tiles_spec(64, 512, 0.1), rng);
  expect_kernel_tiles_converge<TypeParam>(exec, test::kernel_tiles_spec(64, 512, 0.1, true), rng);
}

TYPED_TEST(GesvjGpuKernelTiles, KernelTiles32Warp) {
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("gesvj gpu kernel tiles 32"));
  expect_kernel_tiles_converge<TypeParam>(exec, test::kernel_tiles_spec(32, 256, 0.1), rng);
  expect_kernel_tiles_converge<TypeParam>(exec, test::kernel_tiles_spec(32, 256, 0.1, true), rng);
  expect_kernel_tiles_converge<TypeParam>(exec, test::kernel_tiles_spec(32, 512, 0.3, true), rng);
  // ℓ = 0.01: the entries of a tile span up to a hundred orders of magnitude (graded rows and
  // columns), singular values to 1e−30·σ₁ and below.
  expect_kernel_tiles_converge<TypeParam>(exec, test::kernel_tiles_spec(32, 256, 0.01, true), rng);
}

TEST(GesvjGpuWorkspace, ReservedOnceNeverGrows) {
  COVFLOW_SKIP_WITHOUT_DEVICE();
  Exec exec = Exec::cuda();
  std::mt19937_64 rng(test::fresh_seed("gesvj gpu workspace"));
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{32, 32}, {64, 64}, {4096, 64}, {256, 256}}) {
    const int count = 4;
    const LowrankCase<cf64> c = test::make_lowrank_case<cf64>(test::random_spec(m, n, count), rng);
    exec.workspace().reserve(gesvj_workspace<cf64>(exec, m, n, count));
    const std::size_t before = exec.workspace().growth_count();
    const auto run = run_gpu(exec, c.a, m, n, count, {});
    EXPECT_EQ(exec.workspace().growth_count(), before) << shape_name(m, n) << ": the workspace grew inside gesvj";
    check(c, run, all_indices(count), "workspace");
  }
}

}  // namespace
}  // namespace covflow::linalg

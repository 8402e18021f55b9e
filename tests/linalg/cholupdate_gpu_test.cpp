// cholupdate on the CUDA backend: the checks of the CPU suite (cholupdate_test.cpp) on the GPU's
// organisations — one block per matrix (n ≤ 256, with and without the shared-memory copy of the
// triangle), the row-block pipeline (n > 256) and, for n > 256 updates with k ≤ 16 and n ≥ 16k, the
// product form in front of it — with every output poisoned first and the strict upper triangle of
// every input NaN (it must never be read, and must come back bit for bit). Which matrices the
// product form committed is read through a test hook (cholupdate_cuda_product_committed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../../linalg/cholupdate/cholupdate_impl.hpp"
#include "cholupdate_cases.hpp"
#include "covflow/linalg/cholupdate.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/error.hpp"
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

using test::CholCase;
using test::FactorKind;

template <class T>
struct GpuRun {
  std::vector<T> l;
  std::vector<int> info;
};

// cholupdate on the device on copies of the case's L and V; info poisoned with a value it never
// takes. Also checks that V came back unchanged (cholupdate preserves it).
template <class T>
GpuRun<T> run_gpu(Exec& exec, const CholCase<T>& c, Sign sign) {
  cudaStream_t stream = exec.cuda_context().stream();
  cuda::DeviceBuffer<T> dl(c.l.size()), dv(std::max<std::size_t>(c.v.size(), 1));
  cuda::DeviceBuffer<int> dinfo(static_cast<std::size_t>(c.count));
  dl.upload(c.l, stream);
  if (!c.v.empty()) dv.upload(c.v, stream);
  dinfo.fill_bytes(0x7F, stream);
  cholupdate<T>(exec, Batch<T>::packed(dl.data(), c.n, c.n, c.count),
                Batch<const T>::packed(dv.data(), c.n, c.k, c.count), sign, {dinfo.data(), dinfo.size()});
  GpuRun<T> out{std::vector<T>(c.l.size()), std::vector<int>(static_cast<std::size_t>(c.count))};
  std::vector<T> v_after(c.v.size());
  dl.download(out.l, stream);
  dinfo.download(out.info, stream);
  if (!c.v.empty()) dv.download(v_after, stream);
  exec.synchronize();
  EXPECT_TRUE(std::memcmp(v_after.data(), c.v.data(), sizeof(T) * c.v.size()) == 0) << "V was modified";
  return out;
}

std::string where(const std::string& what, int n, int k, int b, std::uint64_t seed) {
  return what + " n=" + std::to_string(n) + " k=" + std::to_string(k) + " matrix " + std::to_string(b) +
         " (case seed " + std::to_string(seed) + ")";
}

template <class T>
bool factor_unchanged(const std::vector<T>& input, const std::vector<T>& output, int n, int b) {
  return std::memcmp(input.data() + std::size_t(b) * n * n, output.data() + std::size_t(b) * n * n,
                     sizeof(T) * std::size_t(n) * n) == 0;
}

// Reconstruction errors of the matrices `which`, measured in parallel on the host (O(n³) each
// for n ≤ 256, probed above).
template <class T>
std::vector<double> errors_of(const CholCase<T>& c, const std::vector<T>& result, const std::vector<int>& which) {
  std::vector<double> errors(which.size());
  std::vector<std::thread> threads;
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned t = 0; t < workers; ++t)
    threads.emplace_back([&, t] {
      for (std::size_t e = t; e < which.size(); e += workers)
        errors[e] = test::reconstruction_error(c, which[e], result.data() + std::size_t(which[e]) * c.n * c.n);
    });
  for (auto& th : threads) th.join();
  return errors;
}

int batch_for(int n) { return n <= 64 ? 7 : n <= 256 ? 3 : n <= 1000 ? 2 : 1; }

template <class T>
class CholupdateGpu : public test::GpuTest {};
using Types = ::testing::Types<cf64, f64, cf32, f32>;
TYPED_TEST_SUITE(CholupdateGpu, Types);

TYPED_TEST(CholupdateGpu, UpdateAndDowndateReconstructOnTheSizeGrid) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("cholupdate gpu grid"));
  for (int n : {1, 2, 17, 64, 100, 200, 256, 257, 1000, 5000})
    for (int k : {1, 2, 16, 64})
      for (Sign sign : {Sign::update, Sign::downdate})
        for (FactorKind kind : {FactorKind::random, FactorKind::graded, FactorKind::tiny_pivot}) {
          if (sign == Sign::downdate && kind != FactorKind::random) continue;  // downdates: well-conditioned results
          std::vector<T> base;
          const CholCase<T> c = sign == Sign::update ? test::make_update_case<T>(kind, n, k, batch_for(n), rng)
                                                     : test::make_downdate_case<T>(n, k, batch_for(n), rng, &base);
          const GpuRun<T> out = run_gpu(exec, c, sign);
          std::vector<int> all(c.count);
          for (int b = 0; b < c.count; ++b) all[b] = b;
          const std::vector<double> errors = errors_of(c, out.l, all);
          double worst = 0;
          const std::string what = std::string(sign == Sign::update ? "update " : "downdate ") + test::name(kind);
          for (int b = 0; b < c.count; ++b) {
            ASSERT_EQ(out.info[b], 0) << where(what, n, k, b, c.seed);
            EXPECT_LE(errors[b], test::chol_tolerance) << where(what, n, k, b, c.seed);
            EXPECT_TRUE(test::upper_untouched(c.factor(b), out.l.data() + std::size_t(b) * n * n, n))
                << where(what + " upper triangle", n, k, b, c.seed);
            worst = std::max(worst, errors[b]);
          }
          if (sign == Sign::downdate) {
            // Update (reference, double) then downdate returns B = L_B·L_Bᴴ: 2·10·n·ε.
            CholCase<T> original = c;
            original.l = base;
            original.k = 0;
            original.v.clear();
            const std::vector<double> roundtrip = errors_of(original, out.l, all);
            for (int b = 0; b < c.count; ++b)
              EXPECT_LE(roundtrip[b], 2 * test::chol_tolerance) << where("update+downdate vs B", n, k, b, c.seed);
          }
          std::printf("[ errors   ] %-15s n=%-4d k=%-2d reconstruction %.3f n·ε%s\n", what.c_str(), n, k, worst,
                      n > test::kExactLimit ? " (probed)" : "");
        }
}

TYPED_TEST(CholupdateGpu, MatchesLapackPotrfAndTheCpuPath) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  Exec cpu = Exec::cpu();
  std::mt19937_64 rng(test::fresh_seed("cholupdate gpu potrf"));
  for (int n : {5, 64, 160, 256})
    for (int k : {1, 4, 16, 64})
      for (Sign sign : {Sign::update, Sign::downdate}) {
        const CholCase<T> c = sign == Sign::update ? test::make_update_case<T>(FactorKind::random, n, k, 2, rng)
                                                   : test::make_downdate_case<T>(n, k, 2, rng);
        const GpuRun<T> out = run_gpu(exec, c, sign);
        std::vector<T> host = c.l;
        std::vector<int> host_info(c.count, -1);
        cholupdate<T>(cpu, Batch<T>::packed(host.data(), n, n, c.count), Batch<const T>::packed(c.v.data(), n, k, c.count),
                      sign, host_info);
        for (int b = 0; b < c.count; ++b) {
          const auto reference = test::potrf_reference(c, b);
          ASSERT_EQ(reference.info, 0);
          ASSERT_EQ(out.info[b], 0) << where("gpu", n, k, b, c.seed);
          const T* gpu = out.l.data() + std::size_t(b) * n * n;
          EXPECT_LE(test::factor_difference(gpu, reference.factor.data(), n), 2 * test::chol_tolerance * reference.condition)
              << where("gpu vs potrf", n, k, b, c.seed) << " κ₂ = " << reference.condition;
          // Same algorithm, same order: the backends differ only by fused multiply-adds.
          EXPECT_LE(test::factor_difference(gpu, host.data() + std::size_t(b) * n * n, n),
                    2 * test::chol_tolerance * reference.condition)
              << where("gpu vs cpu", n, k, b, c.seed);
        }
      }
}

// The failing downdate of the CPU suite, on both organisations (n ≤ 256 staged and two-pass,
// n > 256 pipeline): info names the column, that factor is bit for bit unchanged, the others are
// downdated.
TYPED_TEST(CholupdateGpu, FailingDowndateNamesTheColumnAndLeavesTheFactor) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("cholupdate gpu failing downdate"));
  for (int n : {1, 40, 200, 256, 600, 2000}) {
    for (int k : {1, 3, 16}) {
      CholCase<T> c = test::make_downdate_case<T>(n, k, 4, rng);
      const int fail_column = n == 1 ? 0 : std::uniform_int_distribution<int>(0, n - 1)(rng);
      test::make_downdate_fail_at(c, 1, fail_column);  // one somewhere
      test::make_downdate_fail_at(c, 3, n - 1);        // one at the very last column
      const GpuRun<T> out = run_gpu(exec, c, Sign::downdate);
      EXPECT_EQ(out.info[1], fail_column + 1) << where("failing downdate", n, k, 1, c.seed);
      EXPECT_EQ(out.info[3], n) << where("failing downdate (last column)", n, k, 3, c.seed);
      for (int b : {1, 3}) EXPECT_TRUE(factor_unchanged(c.l, out.l, n, b)) << where("failed factor modified", n, k, b, c.seed);
      const std::vector<double> errors = errors_of(c, out.l, {0, 2});
      for (int e = 0; e < 2; ++e) {
        ASSERT_EQ(out.info[2 * e], 0) << where("neighbour of a failure", n, k, 2 * e, c.seed);
        EXPECT_LE(errors[e], test::chol_tolerance) << where("neighbour of a failure", n, k, 2 * e, c.seed);
      }
    }
  }
}

TYPED_TEST(CholupdateGpu, NonFiniteInputIsReportedAndIsolated) {
  using T = TypeParam;
  using R = real_t<T>;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("cholupdate gpu non-finite"));
  const R nan = std::numeric_limits<R>::quiet_NaN(), inf = std::numeric_limits<R>::infinity();
  for (int n : {1, 8, 200, 700}) {
    for (Sign sign : {Sign::update, Sign::downdate}) {
      CholCase<T> c = sign == Sign::update ? test::make_update_case<T>(FactorKind::random, n, 4, 6, rng)
                                           : test::make_downdate_case<T>(n, 4, 6, rng);
      auto at = [&](int b, int i, int j) -> T& { return c.l[std::size_t(b) * n * n + i + std::size_t(j) * n]; };
      at(1, n - 1, 0) = T(nan);
      c.v[std::size_t(2) * n * 4 + (n - 1) + std::size_t(3) * n] = T(inf);
      at(3, n / 2, n / 2) = T(inf);
      at(4, 0, 0) = T(0);
      const GpuRun<T> out = run_gpu(exec, c, sign);
      const std::string s = sign == Sign::update ? "update" : "downdate";
      EXPECT_EQ(out.info[1], status::non_finite_input) << where(s + " NaN in L", n, 4, 1, c.seed);
      EXPECT_EQ(out.info[2], status::non_finite_input) << where(s + " Inf in V", n, 4, 2, c.seed);
      EXPECT_EQ(out.info[3], status::non_finite_input) << where(s + " Inf on the diagonal", n, 4, 3, c.seed);
      EXPECT_EQ(out.info[4], 1) << where(s + " zero diagonal", n, 4, 4, c.seed);
      for (int b : {1, 2, 3, 4}) EXPECT_TRUE(factor_unchanged(c.l, out.l, n, b)) << where(s + " bad factor modified", n, 4, b, c.seed);
      const std::vector<double> errors = errors_of(c, out.l, {0, 5});
      for (int e = 0; e < 2; ++e) {
        const int b = e == 0 ? 0 : 5;
        ASSERT_EQ(out.info[b], 0) << where(s + " neighbour of bad input", n, 4, b, c.seed);
        EXPECT_LE(errors[e], test::chol_tolerance) << where(s + " neighbour of bad input", n, 4, b, c.seed);
      }
    }
  }
}

// ---- the product form (n > 256 updates, k ≤ 16, n ≥ 16k) ------------------------------------

std::vector<int> product_committed(Exec& exec, int count) {
  return detail::cholupdate_cuda_product_committed(exec.cuda_context(), count);
}

// κ₂ of a random case after the update: the factor is κ₂(LLᴴ) ≲ 20 (cholupdate_cases.hpp), and
// VVᴴ, of norm comparable to A's, at most doubles the largest eigenvalue. The forward error of a
// Cholesky factor is ≲ κ₂·n·ε times the backward error's constant.
constexpr double kRandomUpdateCondition = 40;

// Two routes to the same factor: a well-conditioned update goes through the product form, one
// whose W is huge by construction (V scaled by 10/√ε, so τ = 1 + ‖W‖²_F ≈ 100‖L⁻¹V₀‖²/ε, some 10⁴
// times the guard's 0.01/ε) is refused by the guard and goes through the rotations. Both must
// reconstruct, and the product form must agree with the CPU backend's rotations to the
// forward-error bound. (Not a tiny diagonal instead: in a numpy model of the rotations' mixed form
// a diagonal entry of 1e-8 already costs ~40 n·ε in double, so that input would test the
// rotations, not the guard. Scaling V costs them nothing.)
TYPED_TEST(CholupdateGpu, ProductFormAgreesWithTheRotationsAndLeavesHugeWToThem) {
  using T = TypeParam;
  using R = real_t<T>;
  Exec& exec = test::GpuTest::gpu();
  Exec cpu = Exec::cpu();
  std::mt19937_64 rng(test::fresh_seed("cholupdate gpu product vs rotations"));
  const R scale = R(10 / std::sqrt(double(std::numeric_limits<R>::epsilon())));
  for (int n : {300, 1000})
    for (int k : {1, 3, 16}) {
      CholCase<T> c = test::make_update_case<T>(FactorKind::random, n, k, 3, rng);
      for (std::size_t e = 0; e < std::size_t(n) * k; ++e) c.v[std::size_t(n) * k + e] *= scale;  // matrix 1
      const GpuRun<T> out = run_gpu(exec, c, Sign::update);
      const std::vector<int> path = product_committed(exec, c.count);
      const std::string what = "product vs rotations (matrix 1: V·10/√ε)";
      EXPECT_EQ(path, (std::vector<int>{1, 0, 1})) << where(what + ": committed", n, k, 1, c.seed);
      std::vector<T> host = c.l;
      std::vector<int> host_info(c.count, -1);
      cholupdate<T>(cpu, Batch<T>::packed(host.data(), n, n, c.count), Batch<const T>::packed(c.v.data(), n, k, c.count),
                    Sign::update, host_info);
      const std::vector<double> errors = errors_of(c, out.l, {0, 1, 2});
      for (int b = 0; b < c.count; ++b) {
        ASSERT_EQ(out.info[b], 0) << where(what, n, k, b, c.seed);
        ASSERT_EQ(host_info[b], 0) << where(what + " (cpu)", n, k, b, c.seed);
        EXPECT_LE(errors[b], test::chol_tolerance) << where(what, n, k, b, c.seed);
        EXPECT_TRUE(test::upper_untouched(c.factor(b), out.l.data() + std::size_t(b) * n * n, n))
            << where(what + " upper triangle", n, k, b, c.seed);
      }
      for (int b : {0, 2})
        EXPECT_LE(test::factor_difference(out.l.data() + std::size_t(b) * n * n, host.data() + std::size_t(b) * n * n, n),
                  2 * test::chol_tolerance * kRandomUpdateCondition)
            << where(what + ": gpu product form vs cpu rotations", n, k, b, c.seed);
      std::printf("[ product  ] n=%-4d k=%-2d reconstruction %.3f / %.3f (rotations) / %.3f n·ε\n", n, k, errors[0],
                  errors[1], errors[2]);
    }
}

// The ρ guard: one diagonal entry of 1e-9 under normal-sized entries (double precision) makes
// s(r) = Σ_i |L(r, i)|·‖w_i‖₁ about 1e6 times the row, while τ = 1 + ‖W‖²_F can stay under the τ
// guard's 0.01/ε (about 4e14 here); without the ρ guard the product form loses 48 to 4e6 n·ε on
// them. It must refuse every such matrix, and the rotations must reconstruct them.
TYPED_TEST(CholupdateGpu, ProductFormRefusesATinyPivot) {
  using T = TypeParam;
  if constexpr (std::is_same_v<real_t<T>, float>) {
    GTEST_SKIP() << "float's tiny pivot (1e-4) is within reach of the product form's accuracy";
  } else {
    Exec& exec = test::GpuTest::gpu();
    std::mt19937_64 rng(test::fresh_seed("cholupdate gpu product tiny pivot"));
    for (int n : {300, 1000})
      for (int k : {1, 2, 16}) {
        const CholCase<T> c = test::make_update_case<T>(FactorKind::tiny_pivot, n, k, 4, rng);
        const GpuRun<T> out = run_gpu(exec, c, Sign::update);
        EXPECT_EQ(product_committed(exec, c.count), std::vector<int>(c.count, 0))
            << where("tiny pivot: committed by the product form", n, k, 0, c.seed);
        const std::vector<double> errors = errors_of(c, out.l, {0, 1, 2, 3});
        for (int b = 0; b < c.count; ++b) {
          ASSERT_EQ(out.info[b], 0) << where("tiny pivot", n, k, b, c.seed);
          EXPECT_LE(errors[b], test::chol_tolerance) << where("tiny pivot", n, k, b, c.seed);
        }
      }
  }
}

// The dispatch table: which shapes the product form takes (updates, n > 256, k ≤ 16 — for which
// n ≥ 16k holds by itself) and which it leaves to the pipeline alone; every one reconstructs.
TYPED_TEST(CholupdateGpu, ProductFormTakesOnlyItsDomain) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("cholupdate gpu product domain"));
  struct Shape {
    int n, k;
    Sign sign;
    bool product;
  };
  for (const Shape& s : {Shape{257, 16, Sign::update, true}, Shape{257, 1, Sign::update, true},
                         Shape{600, 2, Sign::update, true}, Shape{320, 20, Sign::update, false},
                         Shape{300, 32, Sign::update, false}, Shape{300, 4, Sign::downdate, false}}) {
    const CholCase<T> c = s.sign == Sign::update ? test::make_update_case<T>(FactorKind::random, s.n, s.k, 2, rng)
                                                 : test::make_downdate_case<T>(s.n, s.k, 2, rng);
    const GpuRun<T> out = run_gpu(exec, c, s.sign);
    const std::vector<int> path = product_committed(exec, c.count);
    const std::string what = std::string(s.sign == Sign::update ? "update" : "downdate") + " domain";
    const std::vector<double> errors = errors_of(c, out.l, {0, 1});
    for (int b = 0; b < c.count; ++b) {
      EXPECT_EQ(path[b], s.product ? 1 : 0) << where(what + ": committed by the product form", s.n, s.k, b, c.seed);
      ASSERT_EQ(out.info[b], 0) << where(what, s.n, s.k, b, c.seed);
      EXPECT_LE(errors[b], test::chol_tolerance) << where(what, s.n, s.k, b, c.seed);
    }
  }
}

// Bad input inside a batch the product form takes: the guard refuses exactly those matrices, the
// rotation pipeline reports them as it always has (info, L bit for bit), the good one is updated
// by the product form.
TYPED_TEST(CholupdateGpu, ProductFormRefusesBadInputAndThePipelineReportsIt) {
  using T = TypeParam;
  using R = real_t<T>;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("cholupdate gpu product bad input"));
  const R nan = std::numeric_limits<R>::quiet_NaN(), inf = std::numeric_limits<R>::infinity();
  for (int n : {300, 1000})
    for (int k : {1, 16}) {
      CholCase<T> c = test::make_update_case<T>(FactorKind::random, n, k, 7, rng);
      auto at = [&](int b, int i, int j) -> T& { return c.l[std::size_t(b) * n * n + i + std::size_t(j) * n]; };
      const int zero_column = std::uniform_int_distribution<int>(0, n - 1)(rng);
      const int negative_column = std::uniform_int_distribution<int>(0, n - 1)(rng);
      at(1, n - 1, 0) = T(nan);                               // far below the diagonal
      c.v[std::size_t(2) * n * k + std::size_t(k - 1) * n] = T(nan);  // V(0, k−1)
      at(3, n / 2, n / 2) = T(inf);                           // W stays finite here: 1/Inf = 0
      at(4, zero_column, zero_column) = T(0);
      at(5, negative_column, negative_column) = -at(5, negative_column, negative_column);
      // Complex: a NaN imaginary part — the diagonal is used as its real part, but NaN input is NaN input.
      if constexpr (is_complex_v<T>) at(6, n / 3, n / 3) = T(std::real(at(6, n / 3, n / 3)), nan);
      else at(6, n / 3, n / 3) = T(nan);
      const GpuRun<T> out = run_gpu(exec, c, Sign::update);
      const std::vector<int> path = product_committed(exec, c.count);
      EXPECT_EQ(path, (std::vector<int>{1, 0, 0, 0, 0, 0, 0})) << where("bad input: committed", n, k, 0, c.seed);
      EXPECT_EQ(out.info[1], status::non_finite_input) << where("NaN in L", n, k, 1, c.seed);
      EXPECT_EQ(out.info[2], status::non_finite_input) << where("NaN in V", n, k, 2, c.seed);
      EXPECT_EQ(out.info[3], status::non_finite_input) << where("Inf on the diagonal", n, k, 3, c.seed);
      EXPECT_EQ(out.info[4], zero_column + 1) << where("zero diagonal", n, k, 4, c.seed);
      EXPECT_EQ(out.info[5], negative_column + 1) << where("negative diagonal", n, k, 5, c.seed);
      EXPECT_EQ(out.info[6], status::non_finite_input) << where("NaN in a diagonal element", n, k, 6, c.seed);
      for (int b = 1; b < c.count; ++b)
        EXPECT_TRUE(factor_unchanged(c.l, out.l, n, b)) << where("bad factor modified", n, k, b, c.seed);
      ASSERT_EQ(out.info[0], 0) << where("neighbour of bad input", n, k, 0, c.seed);
      EXPECT_LE(errors_of(c, out.l, {0})[0], test::chol_tolerance) << where("neighbour of bad input", n, k, 0, c.seed);
    }
}

// The largest single factor required: n = 20000, double, k = 16 — the tensor-core product path with
// a solve grid (313 row blocks and the column workers) that does not fit on the GPU at once, so
// the apply that runs under it starts only once every solve block has begun. Reconstruction by
// probes, 10·n·ε; the strict upper triangle untouched.
TEST(CholupdateGpuLarge, TwentyThousandUpdateOnTheTensorCorePath) {
  COVFLOW_SKIP_WITHOUT_DEVICE();
  Exec exec = Exec::cuda();
  std::mt19937_64 rng(test::fresh_seed("cholupdate gpu n=20000"));
  const int n = 20000, k = 16;
  const CholCase<f64> c = test::make_update_case<f64>(FactorKind::random, n, k, 1, rng);
  const GpuRun<f64> out = run_gpu(exec, c, Sign::update);
  ASSERT_EQ(out.info[0], 0) << where("n=20000 update", n, k, 0, c.seed);
  EXPECT_EQ(product_committed(exec, 1), std::vector<int>{1}) << where("n=20000 update: committed", n, k, 0, c.seed);
  const double error = errors_of(c, out.l, {0})[0];
  EXPECT_LE(error, test::chol_tolerance) << where("n=20000 update", n, k, 0, c.seed);
  EXPECT_TRUE(test::upper_untouched(c.factor(0), out.l.data(), n)) << where("n=20000 upper triangle", n, k, 0, c.seed);
  std::printf("[ errors   ] update random n=%d k=%d reconstruction %.3f n·ε (probed)\n", n, k, error);
}

// The adaptive-filter shape of the benchmark: 4096 cells of 64×64 complex double, k = 4; a sample
// of cells checked.
TEST(CholupdateGpuBatch, FourThousandCellsUpdateThenDowndate) {
  COVFLOW_SKIP_WITHOUT_DEVICE();
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("cholupdate gpu 4096 cells"));
  const CholCase<cf64> c = test::make_downdate_case<cf64>(64, 4, 4096, rng);
  const GpuRun<cf64> out = run_gpu(exec, c, Sign::downdate);
  std::vector<int> sample = {0, 4095};
  for (int s = 0; s < 30; ++s) sample.push_back(std::uniform_int_distribution<int>(1, 4094)(rng));
  const std::vector<double> errors = errors_of(c, out.l, sample);
  for (std::size_t e = 0; e < sample.size(); ++e) {
    ASSERT_EQ(out.info[sample[e]], 0) << "cell " << sample[e];
    EXPECT_LE(errors[e], test::chol_tolerance) << "cell " << sample[e] << " (case seed " << c.seed << ")";
  }
  EXPECT_TRUE(std::all_of(out.info.begin(), out.info.end(), [](int i) { return i == 0; }));
}

// Real double with 4 < k ≤ 16 (the tensor-core product path) also keeps every lower 64×64 tile of
// the factor as found, so that its apply can run under the solve and a matrix the guard refuses is
// put back bit for bit. Per matrix, b = ⌈n/64⌉ row blocks: O(n·k), the segment sums (k·64 elements
// per row block and segment of 8 tiles), one 64² M_J per row block and the b(b+1)/2 tiles.
TEST(CholupdateGpuWorkspace, RealDoubleTensorCorePathAddsOneCopyOfTheLowerTiles) {
  COVFLOW_SKIP_WITHOUT_DEVICE();
  Exec exec = Exec::cuda();
  std::mt19937_64 rng(test::fresh_seed("cholupdate gpu workspace tc"));
  for (int n : {300, 2000}) {
    const std::size_t b = (std::size_t(n) + 63) / 64, tiles = b * (b + 1) / 2;
    const std::size_t bytes = cholupdate_workspace<f64>(exec, n, 16, 2);
    const std::size_t per_matrix =
        3 * std::size_t(n) * 16 + (b + 1) * 16 * 16 + b * ((b + 7) / 8) * 16 * 64 + b * 64 * 64 + 64 * 16 * 64;
    const std::size_t backup = tiles * 64 * 64;
    EXPECT_LE(bytes, 2 * sizeof(double) * (per_matrix + backup + 4096)) << "n=" << n;
    EXPECT_GE(bytes, 2 * sizeof(double) * backup) << "n=" << n;
    // Rank 4 takes the SIMT product path: no backup.
    EXPECT_LT(cholupdate_workspace<f64>(exec, n, 4, 2), 2 * sizeof(double) * backup / 4) << "n=" << n;
    exec.workspace().reserve(bytes);
    const std::size_t growth = exec.workspace().growth_count();
    const CholCase<f64> c = test::make_update_case<f64>(FactorKind::random, n, 16, 2, rng);
    const GpuRun<f64> out = run_gpu(exec, c, Sign::update);
    EXPECT_EQ(product_committed(exec, c.count), (std::vector<int>{1, 1})) << "n=" << n;
    EXPECT_EQ(out.info, (std::vector<int>{0, 0})) << "n=" << n;
    EXPECT_EQ(exec.workspace().growth_count(), growth) << "n=" << n;
  }
}

TEST(CholupdateGpuWorkspace, ReservedOnceNeverGrowsAndIsNeverACopyOfTheFactor) {
  COVFLOW_SKIP_WITHOUT_DEVICE();
  Exec exec = Exec::cuda();
  std::mt19937_64 rng(test::fresh_seed("cholupdate gpu workspace"));
  for (int n : {64, 300, 2000}) {
    const std::size_t bytes = cholupdate_workspace<cf64>(exec, n, 16, 2);
    // Per matrix: O(n·k) (W, z and the rotations' parameters), plus the product form's segment
    // sums — k·64 elements per 64 × 1024 block of the factor, n²k/64² in all — plus one such
    // block row of rounding. Never a copy of the factor: at n = 2000 under a sixteenth of it.
    const std::size_t per_matrix = 3 * std::size_t(n) * 16 + std::size_t(n) * n * 16 / 4096 + 64 * 16 * 64;
    EXPECT_LE(bytes, 2 * (sizeof(cf64) * per_matrix + 4096)) << "n=" << n;
    if (n >= 2000) {
      EXPECT_LT(bytes, 2 * sizeof(cf64) * std::size_t(n) * n / 16) << "n=" << n;
    }
    exec.workspace().reserve(bytes);
    const std::size_t growth = exec.workspace().growth_count();
    const CholCase<cf64> c = test::make_update_case<cf64>(FactorKind::random, n, 16, 2, rng);
    run_gpu(exec, c, Sign::update);
    run_gpu(exec, c, Sign::downdate);
    EXPECT_EQ(exec.workspace().growth_count(), growth) << "n=" << n;
  }
}

// The kernels' progress waits are bounded: a counter that is never published (its publisher faulted,
// or never ran) ends the kernel with a sticky launch error — which the daemon answers by stopping
// with its device-error exit code — instead of holding the GPU forever. The error leaves the
// process's CUDA context unusable, so the waiter runs in a child process (a death test re-executes
// this binary for the one test), with the bound lowered to 10 ms. Without the bound the child would
// spin until the alarm kills it, and the expectation fails.
[[noreturn]] void run_unpublished_wait() {
  alarm(120);
  Exec exec = Exec::cuda();
  const cudaError_t launch = detail::cholupdate_cuda_launch_unpublished_wait(exec.cuda_context(), 10'000'000ull);
  const cudaError_t sync = cudaStreamSynchronize(exec.cuda_context().stream());
  void* probe = nullptr;
  const cudaError_t later = cudaMalloc(&probe, 256);
  std::fprintf(stderr, "launch %s, synchronize %s, a later cudaMalloc %s\n", cudaGetErrorName(launch),
               cudaGetErrorName(sync), cudaGetErrorName(later));
  const bool sticky = sync == cudaErrorLaunchFailure || sync == cudaErrorIllegalInstruction;
  if (launch == cudaSuccess && sticky && later == sync) {
    std::fprintf(stderr, "the wait ended with a sticky error\n");
    std::_Exit(0);
  }
  std::_Exit(1);
}

TEST(CholupdateGpuSpinWait, AnUnpublishedCounterEndsTheKernelWithAStickyError) {
  COVFLOW_SKIP_WITHOUT_DEVICE();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(run_unpublished_wait(), ::testing::ExitedWithCode(0), "the wait ended with a sticky error");
}

}  // namespace
}  // namespace covflow::linalg

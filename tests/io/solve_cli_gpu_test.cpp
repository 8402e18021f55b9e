// `covflow linalg lu | cholesky | solve --device cuda`: the device paths of the commands (upload,
// getrf / potrf / gesv / posv on the GPU, download, NaN for failed matrices) against the
// definitions on the same NumPy files the CPU tests use. The sizes reach both CUDA organisations:
// the fused register-resident kernels (n ≤ 32: 5 and 32) and cuBLAS / cuSOLVER's batched routines
// (n = 33 and 100). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/exit_codes.hpp"
#include "covflow/io/npy.hpp"
#include "solve_cli_checks.hpp"

namespace covflow::test {
namespace {

using namespace solve_cli;
using Shape = std::vector<std::uint64_t>;

template <class T>
class SolveCliGpu : public GpuTest {};
using ElementTypes = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(SolveCliGpu, ElementTypes);

constexpr std::size_t kSizes[] = {5, 32, 33, 100};

bool on_cuda(const CommandRun& run) { return run.out.find("on cuda") != std::string::npos; }

// LU on the device, C and Fortran order: P·A = L·U to 10·n·ε of ‖|L|·|U|‖, |L| ≤ 1, pivots in
// range; a zero column in matrix 1 (singular, factors as computed) and a NaN in matrix 2 (NaN,
// P = 0, 1, …) named, the others factored.
TYPED_TEST(SolveCliGpu, LuOnCudaFollowsScipyAndNamesBadMatrices) {
  using T = TypeParam;
  using R = linalg::real_t<T>;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("SolveCliGpu.LuOnCuda"));
  const std::size_t count = 6;
  for (std::size_t n : kSizes)
    for (bool fortran : {false, true}) {
      SCOPED_TRACE("n " + std::to_string(n) + (fortran ? " Fortran" : " C"));
      std::vector<T> a = general_matrices<T>(count, n, rng);
      for (std::size_t i = 0; i < n; ++i) a[1 * n * n + i * n + 2] = T(0);
      a[2 * n * n + (n - 1) * n] = T(std::numeric_limits<R>::quiet_NaN());
      io::write_npy(dir / "a.npy", numpy_file(a, {count, n, n}, fortran));
      const CommandRun run = lu(dir, cli::DeviceChoice::cuda);
      ASSERT_EQ(run.code, exit_code::numerical) << run.err;
      EXPECT_TRUE(on_cuda(run)) << run.out;
      EXPECT_NE(run.err.find(": matrix 1: singular: U[2, 2] is exactly zero"), std::string::npos) << run.err;
      EXPECT_NE(run.err.find(": matrix 2: NaN or Inf in the matrix"), std::string::npos) << run.err;
      const std::vector<T> factors = values_of<T>(io::read_npy(dir / "lu.npy"));
      const std::vector<std::int32_t> pivots = read_int32(dir / "p.npy", {count, n});
      for (std::size_t b = 0; b < count; ++b) {
        if (b == 2) {
          for (std::size_t e = 0; e < n * n; ++e) EXPECT_TRUE(std::isnan(std::abs(factors[2 * n * n + e])));
          for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(pivots[2 * n + i], std::int32_t(i));
          continue;
        }
        const LuQuality q = lu_quality(a, factors, pivots, b, n);
        EXPECT_TRUE(q.pivots_in_range) << "matrix " << b;
        EXPECT_LE(q.backward, 10.0 * double(n) * eps<T>()) << "matrix " << b;
        EXPECT_LE(q.largest_l, largest_multiplier<T>()) << "matrix " << b;
      }
    }
}

// Cholesky on the device, lower and upper: A = L·Lᴴ (Uᴴ·U) to 10·n·ε from the named triangle only,
// the other triangle zero; an indefinite matrix named with its column, NaN in L.npy.
TYPED_TEST(SolveCliGpu, CholeskyOnCudaFollowsNumpyAndNamesAnIndefiniteMatrix) {
  using T = TypeParam;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("SolveCliGpu.CholeskyOnCuda"));
  const std::size_t count = 4;
  for (std::size_t n : kSizes)
    for (bool upper : {false, true}) {
      SCOPED_TRACE("n " + std::to_string(n) + (upper ? " upper" : " lower"));
      std::vector<Z> effective;
      std::vector<T> a = positive_matrices<T>(count, n, upper ? 'U' : 'L', rng, effective);
      a[3 * n * n + 3 * n + 3] = T(-1);  // matrix 3: indefinite at column 3
      io::write_npy(dir / "a.npy", numpy_file(a, {count, n, n}, upper));
      const CommandRun run = cholesky(dir, upper, cli::DeviceChoice::cuda);
      ASSERT_EQ(run.code, exit_code::numerical) << run.err;
      EXPECT_TRUE(on_cuda(run)) << run.out;
      EXPECT_NE(run.err.find(": matrix 3: not positive definite at column 3, counted from 0"), std::string::npos)
          << run.err;
      const std::vector<T> factor = values_of<T>(io::read_npy(dir / "l.npy"));
      for (std::size_t e = 0; e < n * n; ++e) EXPECT_TRUE(std::isnan(std::abs(factor[3 * n * n + e])));
      for (std::size_t b = 0; b < 3; ++b) {
        const CholeskyQuality q = cholesky_quality(effective, factor, b, n, upper);
        EXPECT_LE(q.reconstruction, 10.0 * double(n) * eps<T>()) << "matrix " << b;
        EXPECT_TRUE(q.other_triangle_zero) << "matrix " << b;
        EXPECT_TRUE(q.real_positive_diagonal) << "matrix " << b;
      }
    }
}

// solve on the device, general and positive, a batch against a batch and one matrix against many
// right-hand sides: every block's ‖A·X − B‖ within 10·n·ε of ‖A‖·‖X‖ + ‖B‖; a singular matrix's
// block NaN and named.
TYPED_TEST(SolveCliGpu, SolveOnCudaSolvesEveryBlock) {
  using T = TypeParam;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("SolveCliGpu.SolveOnCuda"));
  const std::size_t count = 5, k = 3;
  for (std::size_t n : kSizes)
    for (cli::Assume assume : {cli::Assume::general, cli::Assume::positive})
      for (bool one_matrix : {false, true}) {
        SCOPED_TRACE("n " + std::to_string(n) + (assume == cli::Assume::positive ? " positive" : " general") +
                     (one_matrix ? " one A" : " batch of A"));
        const std::size_t a_count = one_matrix ? 1 : count;
        std::vector<Z> effective;
        std::vector<T> a = assume == cli::Assume::positive ? positive_matrices<T>(a_count, n, 'L', rng, effective)
                                                            : general_matrices<T>(a_count, n, rng);
        const std::size_t bad = one_matrix ? count : 1;  // one A: no failed block
        if (!one_matrix)
          for (std::size_t i = 0; i < n; ++i) a[bad * n * n + i * n + 2] = T(0);  // singular; not positive definite
        if (assume == cli::Assume::general) effective = matrix_of(a, 0, a_count * n, n);
        const std::vector<T> b = random_normal<T>(count * n * k, rng);
        io::write_npy(dir / "a.npy", one_matrix ? make_array(a, {n, n}) : make_array(a, {count, n, n}));
        io::write_npy(dir / "b.npy", make_array(b, {count, n, k}));
        const CommandRun run = solve(dir, assume, cli::DeviceChoice::cuda);
        ASSERT_EQ(run.code, one_matrix ? exit_code::ok : exit_code::numerical) << run.err;
        EXPECT_TRUE(on_cuda(run)) << run.out;
        if (!one_matrix) {
          EXPECT_NE(run.err.find(": matrix 1: "), std::string::npos) << run.err;
        }
        const io::NpyArray file = io::read_npy(dir / "x.npy");
        ASSERT_EQ(file.shape, (Shape{count, n, k}));
        const std::vector<T> x = values_of<T>(file);
        for (std::size_t c = 0; c < count; ++c) {
          if (c == bad) {
            for (std::size_t e = 0; e < n * k; ++e) EXPECT_TRUE(std::isnan(std::abs(x[c * n * k + e])));
            continue;
          }
          const std::size_t ai = one_matrix ? 0 : c;
          const std::vector<Z> a_c(effective.begin() + ai * n * n, effective.begin() + (ai + 1) * n * n);
          EXPECT_LE(solve_residual(a_c, matrix_of(x, c, n, k), matrix_of(b, c, n, k), n, k), 10.0 * double(n) * eps<T>())
              << "block " << c;
        }
      }
}

}  // namespace
}  // namespace covflow::test

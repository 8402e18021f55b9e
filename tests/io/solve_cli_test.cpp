// `covflow linalg lu`, `cholesky` and `solve` through their library functions: scipy.linalg.lu_factor's,
// numpy.linalg.cholesky's and numpy 2's numpy.linalg.solve's conventions (shapes, dtypes, the
// matrix as numpy indexes the row-major array, 0-based pivots, the triangle read), checked against
// the definitions — P·A = L·U, A = L·Lᴴ, A·X = B — to multiples of n·ε; singular, indefinite and
// NaN matrices named with exit code 7; shapes that do not fit refused with exit code 4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/exit_codes.hpp"
#include "common/linalg_cli.hpp"
#include "covflow/io/npy.hpp"
#include "npy_test_support.hpp"
#include "solve_cli_checks.hpp"
#include "test_support.hpp"

namespace covflow::test {
namespace {

using namespace solve_cli;
using cli::Assume;
using Shape = std::vector<std::uint64_t>;

template <class T>
class SolveCli : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(SolveCli, ElementTypes);

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---- lu ----------------------------------------------------------------------------------------

// Batches and single matrices, C and Fortran order: LU has A's shape and dtype, P is int32 (…, n)
// with i ≤ P[i] < n, P·A = L·U to 10·n·ε of ‖|L|·|U|‖ (the growth partial pivoting allows), and
// the multipliers partial pivoting bounds (largest_multiplier). A is not symmetric, so factoring the transpose (the C-order bytes read as column-major)
// would fail the check.
TYPED_TEST(SolveCli, LuFollowsScipyLuFactor) {
  using T = TypeParam;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("SolveCli.LuFollowsScipyLuFactor"));
  for (std::size_t n : {1u, 2u, 7u, 33u})
    for (bool batched : {true, false})
      for (bool fortran : {false, true}) {
        SCOPED_TRACE("n " + std::to_string(n) + (batched ? " batched" : " single") + (fortran ? " Fortran" : " C"));
        const std::size_t count = batched ? 5 : 1;
        const std::vector<T> a = general_matrices<T>(count, n, rng);
        const Shape shape = batched ? Shape{count, n, n} : Shape{n, n};
        io::write_npy(dir / "a.npy", numpy_file(a, shape, fortran));
        const CommandRun run = lu(dir);
        ASSERT_EQ(run.code, exit_code::ok) << run.err;
        EXPECT_TRUE(contains(run.out, batched ? "lu: 5 matrices " : "lu: one matrix ")) << run.out;
        const io::NpyArray lu_file = io::read_npy(dir / "lu.npy");
        EXPECT_EQ(lu_file.dtype, dtype_of<T>());
        EXPECT_EQ(lu_file.shape, shape);
        EXPECT_FALSE(lu_file.fortran_order);
        const std::vector<T> factors = values_of<T>(lu_file);
        const std::vector<std::int32_t> pivots = read_int32(dir / "p.npy", batched ? Shape{count, n} : Shape{n});
        for (std::size_t b = 0; b < count; ++b) {
          const LuQuality q = lu_quality(a, factors, pivots, b, n);
          EXPECT_TRUE(q.pivots_in_range) << "matrix " << b;
          EXPECT_LE(q.backward, 10.0 * double(n) * eps<T>()) << "matrix " << b;
          EXPECT_LE(q.largest_l, largest_multiplier<T>()) << "matrix " << b;
        }
      }
}

// Matrix 1 of 3 has a zero column 2: U[2, 2] is exactly zero. Its factorisation is complete and
// written as computed (P·A = L·U still holds), it is named with numpy's index, and the exit code
// is 7. Matrix 2 holds a NaN: NaN in LU, P = 0, 1, …, n − 1. Matrix 0 is factored as usual.
TEST(SolveCliLu, SingularAndNaNMatricesAreNamedAndExitSeven) {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("SolveCliLu.SingularAndNaN"));
  const std::size_t count = 3, n = 5;
  std::vector<double> a = random_normal<double>(count * n * n, rng);
  for (std::size_t i = 0; i < n; ++i) a[1 * n * n + i * n + 2] = 0.0;
  a[2 * n * n + 3 * n + 4] = std::nan("");
  io::write_npy(dir / "a.npy", make_array(a, {count, n, n}));
  const CommandRun run = lu(dir);
  EXPECT_EQ(run.code, exit_code::numerical) << run.err;
  const std::string lu_path = (dir / "lu.npy").string(), a_path = (dir / "a.npy").string();
  EXPECT_TRUE(contains(run.err, "covflow linalg lu: " + a_path +
                                    ": matrix 1: singular: U[2, 2] is exactly zero (counted from 0); its factors are "
                                    "complete, written as computed\n"))
      << run.err;
  EXPECT_TRUE(contains(run.err, "covflow linalg lu: " + a_path + ": matrix 2: NaN or Inf in the matrix; written as NaN in " +
                                    lu_path + "\n"))
      << run.err;
  EXPECT_FALSE(contains(run.err, "matrix 0")) << run.err;
  const std::vector<double> factors = values_of<double>(io::read_npy(dir / "lu.npy"));
  const std::vector<std::int32_t> pivots = read_int32(dir / "p.npy", {count, n});
  for (std::size_t b : {0u, 1u}) {
    const LuQuality q = lu_quality(a, factors, pivots, b, n);
    EXPECT_TRUE(q.pivots_in_range) << "matrix " << b;
    EXPECT_LE(q.backward, 10.0 * n * eps<double>()) << "matrix " << b;
  }
  EXPECT_EQ(factors[1 * n * n + 2 * n + 2], 0.0);
  for (std::size_t e = 0; e < n * n; ++e) EXPECT_TRUE(std::isnan(factors[2 * n * n + e])) << e;
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(pivots[2 * n + i], std::int32_t(i));
}

TEST(SolveCliLu, ASingleSingularMatrixIsTheMatrix) {
  ScratchDir dir;
  io::write_npy(dir / "a.npy", make_array(std::vector<float>{1, 2, 2, 4}, {2, 2}));
  const CommandRun run = lu(dir);
  EXPECT_EQ(run.code, exit_code::numerical);
  EXPECT_TRUE(contains(run.err, ": the matrix: singular: U[1, 1] is exactly zero (counted from 0)")) << run.err;
  // [[1, 2], [2, 4]]: rows swapped, L = [[1, 0], [0.5, 1]], U = [[2, 4], [0, 0]].
  EXPECT_EQ(values_of<float>(io::read_npy(dir / "lu.npy")), (std::vector<float>{2, 4, 0.5f, 0}));
  EXPECT_EQ(read_int32(dir / "p.npy", {2}), (std::vector<std::int32_t>{1, 1}));
}

// Many failures: one line each for the first 32, then one line counting the rest.
TEST(SolveCliLu, ManyFailuresAreCounted) {
  ScratchDir dir;
  const std::size_t count = 40, n = 3;
  io::write_npy(dir / "a.npy", make_array(std::vector<double>(count * n * n, 0.0), {count, n, n}));
  const CommandRun run = lu(dir);
  EXPECT_EQ(run.code, exit_code::numerical);
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 33) << run.err;
  EXPECT_TRUE(contains(run.err, ": matrix 31: singular: U[0, 0] is exactly zero")) << run.err;
  EXPECT_FALSE(contains(run.err, ": matrix 32:")) << run.err;
  EXPECT_TRUE(contains(run.err, ": 8 more matrices failed (40 of 40)\n")) << run.err;
}

TEST(SolveCliLu, EmptyMatricesGiveEmptyOutputs) {
  ScratchDir dir;
  for (const Shape& shape : {Shape{0, 3, 3}, Shape{2, 0, 0}, Shape{0, 0}}) {
    SCOPED_TRACE(io::format_shape(shape));
    io::write_npy(dir / "a.npy", make_array(std::vector<double>{}, shape));
    const CommandRun run = lu(dir);
    ASSERT_EQ(run.code, exit_code::ok) << run.err;
    EXPECT_EQ(io::read_npy(dir / "lu.npy").shape, shape);
    EXPECT_TRUE(read_int32(dir / "p.npy", Shape(shape.begin(), shape.end() - 1)).empty());
  }
}

// ---- cholesky ----------------------------------------------------------------------------------

// Lower (numpy.linalg.cholesky) and upper (numpy ≥ 2's upper=True), batches and single matrices,
// C and Fortran order: only the named triangle is read (the other holds noise, the diagonal an
// imaginary part), A = L·Lᴴ or Uᴴ·U to 10·n·ε, the other triangle exactly zero, the diagonal real
// and positive. Graded matrices are in every batch.
TYPED_TEST(SolveCli, CholeskyFollowsNumpyCholesky) {
  using T = TypeParam;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("SolveCli.CholeskyFollowsNumpyCholesky"));
  for (std::size_t n : {1u, 4u, 33u})
    for (bool upper : {false, true})
      for (bool batched : {true, false})
        for (bool fortran : {false, true}) {
          SCOPED_TRACE("n " + std::to_string(n) + (upper ? " upper" : " lower") + (batched ? " batched" : " single") +
                       (fortran ? " Fortran" : " C"));
          const std::size_t count = batched ? 4 : 1;
          std::vector<Z> effective;
          const std::vector<T> a = positive_matrices<T>(count, n, upper ? 'U' : 'L', rng, effective);
          const Shape shape = batched ? Shape{count, n, n} : Shape{n, n};
          io::write_npy(dir / "a.npy", numpy_file(a, shape, fortran));
          const CommandRun run = cholesky(dir, upper);
          ASSERT_EQ(run.code, exit_code::ok) << run.err;
          EXPECT_TRUE(contains(run.out, upper ? ", upper: wrote" : ", lower: wrote")) << run.out;
          const io::NpyArray file = io::read_npy(dir / "l.npy");
          EXPECT_EQ(file.dtype, dtype_of<T>());
          EXPECT_EQ(file.shape, shape);
          const std::vector<T> factor = values_of<T>(file);
          for (std::size_t b = 0; b < count; ++b) {
            const CholeskyQuality q = cholesky_quality(effective, factor, b, n, upper);
            EXPECT_LE(q.reconstruction, 10.0 * double(n) * eps<T>()) << "matrix " << b;
            EXPECT_TRUE(q.other_triangle_zero) << "matrix " << b;
            EXPECT_TRUE(q.real_positive_diagonal) << "matrix " << b;
          }
        }
}

// diag(1, 2, −1, 4) in matrix 1 fails at column 2 (numpy's index), a NaN in the read triangle of
// matrix 2: both NaN in L.npy and named; a NaN in the triangle not read is no failure.
TEST(SolveCliCholesky, IndefiniteAndNaNMatricesAreNamedAndExitSeven) {
  ScratchDir dir;
  const std::size_t count = 4, n = 4;
  std::vector<std::complex<double>> a(count * n * n, 0.0);
  for (std::size_t b = 0; b < count; ++b)
    for (std::size_t i = 0; i < n; ++i) a[b * n * n + i * n + i] = double(i + 1);
  a[1 * n * n + 2 * n + 2] = -1.0;
  a[2 * n * n + 3 * n + 1] = std::complex<double>(std::nan(""), 0.0);  // lower triangle
  a[3 * n * n + 1 * n + 3] = std::complex<double>(std::nan(""), 0.0);  // upper triangle: not read
  io::write_npy(dir / "a.npy", make_array(a, {count, n, n}));
  const CommandRun run = cholesky(dir, false);
  EXPECT_EQ(run.code, exit_code::numerical) << run.err;
  const std::string l_path = (dir / "l.npy").string(), a_path = (dir / "a.npy").string();
  EXPECT_TRUE(contains(run.err, "covflow linalg cholesky: " + a_path +
                                    ": matrix 1: not positive definite at column 2, counted from 0; written as NaN in " +
                                    l_path + "\n"))
      << run.err;
  EXPECT_TRUE(contains(run.err, "covflow linalg cholesky: " + a_path +
                                    ": matrix 2: NaN or Inf in the lower triangle; written as NaN in " + l_path + "\n"))
      << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 2) << run.err;
  const std::vector<std::complex<double>> l = values_of<std::complex<double>>(io::read_npy(dir / "l.npy"));
  for (std::size_t b = 0; b < count; ++b)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        const std::complex<double> v = l[b * n * n + i * n + j];
        if (b == 1 || b == 2) EXPECT_TRUE(std::isnan(v.real())) << b << " " << i << " " << j;
        else EXPECT_EQ(v, i == j ? std::sqrt(double(i + 1)) : 0.0) << b << " " << i << " " << j;
      }
}

// ---- solve -------------------------------------------------------------------------------------

struct SolveShapes {
  const char* name;
  Shape a, b, x;
};

// numpy 2's shapes for A (…, n, n) and B (n,) or (…, n, k), k = 3, with n = 5 and batches 4 and 1.
std::vector<SolveShapes> solve_shapes(std::uint64_t n) {
  const std::uint64_t k = 3;
  return {
      {"single, one vector", {n, n}, {n}, {n}},
      {"single, one matrix", {n, n}, {n, k}, {n, k}},
      {"batch, batch", {4, n, n}, {4, n, k}, {4, n, k}},
      {"batch, one vector for all", {4, n, n}, {n}, {4, n}},
      {"batch, one matrix for all", {4, n, n}, {n, k}, {4, n, k}},
      {"batch, batch of one broadcast", {4, n, n}, {1, n, k}, {4, n, k}},
      {"single against a batch", {n, n}, {4, n, k}, {4, n, k}},
      {"batch of one against a batch", {1, n, n}, {4, n, k}, {4, n, k}},
      {"batch of one, one vector", {1, n, n}, {n}, {1, n}},
  };
}

std::uint64_t elements(const Shape& shape) {
  std::uint64_t count = 1;
  for (std::uint64_t s : shape) count *= s;
  return count;
}

// Every shape numpy 2 takes, general and positive definite, A and B each in C or Fortran order:
// X has numpy's shape and A's dtype, and every block solves its system, ‖A·X − B‖ to 10·n·ε of
// ‖A‖·‖X‖ + ‖B‖. The general matrices include graded and near-singular ones; the positive ones
// hold noise above the diagonal, which posv (lower) must not read.
TYPED_TEST(SolveCli, SolveFollowsNumpySolveForEveryShape) {
  using T = TypeParam;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("SolveCli.SolveFollowsNumpySolveForEveryShape"));
  for (std::uint64_t n : {1u, 5u, 33u})
    for (const SolveShapes& s : solve_shapes(n))
      for (Assume assume : {Assume::general, Assume::positive})
        for (int order = 0; order < 4; ++order) {
          const bool a_fortran = order & 1, b_fortran = order & 2;
          SCOPED_TRACE(std::string(s.name) + " n " + std::to_string(n) +
                       (assume == Assume::positive ? " positive" : " general") + (a_fortran ? " A Fortran" : " A C") +
                       (b_fortran ? " B Fortran" : " B C"));
          const std::size_t a_count = s.a.size() == 3 ? s.a[0] : 1;
          const std::size_t b_count = s.b.size() == 3 ? s.b[0] : 1;
          const std::size_t k = s.b.size() == 1 ? 1 : s.b.back();
          std::vector<Z> effective;
          const std::vector<T> a = assume == Assume::positive ? positive_matrices<T>(a_count, n, 'L', rng, effective)
                                                               : general_matrices<T>(a_count, n, rng);
          if (assume == Assume::general) effective = matrix_of(a, 0, a_count * n, n);
          const std::vector<T> b = random_normal<T>(elements(s.b), rng);
          io::write_npy(dir / "a.npy", numpy_file(a, s.a, a_fortran));
          io::write_npy(dir / "b.npy", numpy_file(b, s.b, b_fortran));
          const CommandRun run = solve(dir, assume);
          ASSERT_EQ(run.code, exit_code::ok) << run.err;
          EXPECT_TRUE(contains(run.out, assume == Assume::positive ? "positive definite (posv)" : "general (gesv)"))
              << run.out;
          const io::NpyArray file = io::read_npy(dir / "x.npy");
          EXPECT_EQ(file.dtype, dtype_of<T>());
          ASSERT_EQ(file.shape, s.x);
          const std::vector<T> x = values_of<T>(file);
          const std::size_t x_count = std::max(a_count, b_count);
          for (std::size_t c = 0; c < x_count; ++c) {
            const std::size_t ai = a_count == 1 ? 0 : c, bi = b_count == 1 ? 0 : c;
            const std::vector<Z> a_c(effective.begin() + ai * n * n, effective.begin() + (ai + 1) * n * n);
            const double residual = solve_residual(a_c, matrix_of(x, c, n, k), matrix_of(b, bi, n, k), n, k);
            EXPECT_LE(residual, 10.0 * double(n) * eps<T>()) << "block " << c;
          }
        }
}

// A zero column in matrix 1 (singular: U[2, 2] exactly zero), a NaN in matrix 2, an indefinite
// matrix 3 for --assume positive: their X is NaN and each is named; the others are solved.
TEST(SolveCliSolve, SingularIndefiniteAndNaNMatricesAreNamedAndExitSeven) {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("SolveCliSolve.Failures"));
  const std::size_t count = 4, n = 5, k = 2;
  std::vector<Z> effective;
  std::vector<double> a = positive_matrices<double>(count, n, 'L', rng, effective);
  for (std::size_t i = 0; i < n; ++i) a[1 * n * n + i * n + 2] = 0.0;  // singular; for posv: A[2, 2] = 0, indefinite
  a[2 * n * n + 4 * n + 0] = std::nan("");
  a[3 * n * n + 3 * n + 3] = -1.0;  // indefinite (positive); not singular (general)
  const std::vector<double> b = random_normal<double>(count * n * k, rng);
  io::write_npy(dir / "a.npy", make_array(a, {count, n, n}));
  io::write_npy(dir / "b.npy", make_array(b, {count, n, k}));
  const std::string a_path = (dir / "a.npy").string(), x_path = (dir / "x.npy").string();
  const std::string nan_out = "; no solution, written as NaN in " + x_path + "\n";

  const CommandRun general = solve(dir, Assume::general);
  EXPECT_EQ(general.code, exit_code::numerical) << general.err;
  EXPECT_TRUE(contains(general.err, "covflow linalg solve: " + a_path +
                                        ": matrix 1: singular: U[2, 2] is exactly zero (counted from 0)" + nan_out))
      << general.err;
  EXPECT_TRUE(contains(general.err, "covflow linalg solve: " + a_path + ": matrix 2: NaN or Inf in the matrix" + nan_out))
      << general.err;
  EXPECT_EQ(std::count(general.err.begin(), general.err.end(), '\n'), 2) << general.err;
  std::vector<double> x = values_of<double>(io::read_npy(dir / "x.npy"));
  for (std::size_t c = 0; c < count; ++c) {
    if (c == 1 || c == 2) {
      for (std::size_t e = 0; e < n * k; ++e) EXPECT_TRUE(std::isnan(x[c * n * k + e])) << c;
      continue;
    }
    EXPECT_LE(solve_residual(matrix_of(a, c, n, n), matrix_of(x, c, n, k), matrix_of(b, c, n, k), n, k),
              10.0 * n * eps<double>())
        << c;
  }

  const CommandRun positive = solve(dir, Assume::positive);
  EXPECT_EQ(positive.code, exit_code::numerical) << positive.err;
  EXPECT_TRUE(contains(positive.err, ": matrix 1: not positive definite at column 2, counted from 0" + nan_out))
      << positive.err;
  EXPECT_TRUE(contains(positive.err, ": matrix 2: NaN or Inf in the lower triangle" + nan_out)) << positive.err;
  EXPECT_TRUE(contains(positive.err, ": matrix 3: not positive definite at column 3, counted from 0" + nan_out))
      << positive.err;
  x = values_of<double>(io::read_npy(dir / "x.npy"));
  for (std::size_t e = 0; e < n * k; ++e) EXPECT_TRUE(std::isnan(x[3 * n * k + e]));
  const std::vector<Z> a0(effective.begin(), effective.begin() + n * n);
  EXPECT_LE(solve_residual(a0, matrix_of(x, 0, n, k), matrix_of(b, 0, n, k), n, k), 10.0 * n * eps<double>());
}

// One singular matrix against a batch of right-hand sides: every block of X is NaN, one line.
TEST(SolveCliSolve, OneSingularMatrixAgainstABatchFailsEveryBlock) {
  ScratchDir dir;
  io::write_npy(dir / "a.npy", make_array(std::vector<double>{1, 2, 2, 4}, {2, 2}));
  io::write_npy(dir / "b.npy", make_array(std::vector<double>(3 * 2 * 1, 1.0), {3, 2, 1}));
  const CommandRun run = solve(dir, Assume::general);
  EXPECT_EQ(run.code, exit_code::numerical);
  EXPECT_TRUE(contains(run.err, ": the matrix: singular: U[1, 1] is exactly zero (counted from 0); no solution")) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  const io::NpyArray x = io::read_npy(dir / "x.npy");
  EXPECT_EQ(x.shape, (Shape{3, 2, 1}));
  for (double v : values_of<double>(x)) EXPECT_TRUE(std::isnan(v));
}

// No right-hand side (k = 0) still factors A, as numpy does: X is empty and a singular A is named.
TEST(SolveCliSolve, EmptyShapesFollowNumpy) {
  ScratchDir dir;
  struct Case {
    Shape a, b, x;
  };
  for (const Case& c : {Case{{3, 3}, {3, 0}, {3, 0}}, Case{{0, 4, 4}, {4}, {0, 4}}, Case{{2, 0, 0}, {0, 2}, {2, 0, 2}},
                        Case{{4, 4}, {0, 4, 2}, {0, 4, 2}}}) {
    SCOPED_TRACE(io::format_shape(c.a) + " " + io::format_shape(c.b));
    std::vector<double> a(elements(c.a), 0.0);
    for (std::size_t e = 0; c.a.back() > 0 && e < a.size(); e += c.a.back() + 1) a[e] = 2.0;
    io::write_npy(dir / "a.npy", make_array(a, c.a));
    io::write_npy(dir / "b.npy", make_array(std::vector<double>(elements(c.b), 1.0), c.b));
    const CommandRun run = solve(dir, Assume::general);
    ASSERT_EQ(run.code, exit_code::ok) << run.err;
    EXPECT_EQ(io::read_npy(dir / "x.npy").shape, c.x);
  }
  io::write_npy(dir / "a.npy", make_array(std::vector<double>(9, 0.0), {3, 3}));
  io::write_npy(dir / "b.npy", make_array(std::vector<double>{}, {3, 0}));
  const CommandRun run = solve(dir, Assume::general);
  EXPECT_EQ(run.code, exit_code::numerical);
  EXPECT_TRUE(contains(run.err, "the matrix: singular: U[0, 0] is exactly zero")) << run.err;
}

// ---- errors ------------------------------------------------------------------------------------

struct ShapeError {
  const char* name;
  io::NpyArray a, b;  // b unused for lu and cholesky
  std::string file;   // "a" or "b": the file the message names
  std::string says;
};

// Shapes that do not fit are exit code 4, one line naming the command and the file, and no output.
TEST(SolveCliErrors, BadShapesAreRefusedWithAClearMessage) {
  ScratchDir dir;
  const auto doubles = [](const Shape& shape) { return make_array(std::vector<double>(elements(shape)), shape); };
  const io::NpyArray a = doubles({5, 4, 4});
  const std::vector<ShapeError> solve_cases = {
      {"not square", doubles({5, 4, 3}), doubles({5, 4, 1}), "a", "matrices must be square, got shape (5, 4, 3) float64: 4×3"},
      {"A of rank 1", doubles({4}), doubles({4}), "a", "expected (batch, n, n) or (n, n) matrices, got shape (4,) float64 (1 dimensions)"},
      {"A of rank 4", doubles({2, 1, 2, 2}), doubles({2}), "a", "(4 dimensions)"},
      {"B rows", a, doubles({5, 3, 1}), "b", "does not fit A (5, 4, 4) float64 from " + (dir / "a.npy").string() +
                                                ": B's matrices need n = 4 rows"},
      {"numpy 1 vectors", a, doubles({5, 4}), "b",
       "B's matrices need n = 4 rows (a 2-D B is one n × k matrix, as in numpy 2; for one vector per matrix of A give "
       "B the shape (5, 4, 1))"},
      {"vector length", a, doubles({3}), "b", "a 1-D B needs n = 4 elements"},
      {"batches", a, doubles({3, 4, 1}), "b", "batches of 5 and 3 do not broadcast (numpy's rule: equal, or one of them 1)"},
      {"B of rank 4", a, doubles({5, 1, 4, 1}), "b",
       "expected (n,), (n, k) or (batch, n, k) right-hand sides, got shape (5, 1, 4, 1) float64 (4 dimensions)"},
      {"B of rank 0", a, doubles({}), "b", "got shape () float64 (0 dimensions)"},
      {"dtype", a, make_array(std::vector<float>(20), {5, 4, 1}), "b", "dtype float32 differs from A's float64"},
  };
  for (const ShapeError& c : solve_cases) {
    SCOPED_TRACE(c.name);
    io::write_npy(dir / "a.npy", c.a);
    io::write_npy(dir / "b.npy", c.b);
    const CommandRun run = solve(dir, Assume::general);
    EXPECT_EQ(run.code, exit_code::input_damaged) << run.err;
    EXPECT_TRUE(run.err.starts_with("covflow linalg solve: error: " + (dir / (c.file + ".npy")).string() + ": "))
        << run.err;
    EXPECT_TRUE(contains(run.err, c.says)) << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "x.npy"));
  }
  for (const ShapeError& c : {ShapeError{"not square", doubles({2, 3}), {}, "a", "matrices must be square, got shape (2, 3) float64: 2×3"},
                              ShapeError{"rank 1", doubles({4}), {}, "a", "got shape (4,) float64 (1 dimensions)"}}) {
    SCOPED_TRACE(c.name);
    io::write_npy(dir / "a.npy", c.a);
    const CommandRun lu_run = lu(dir);
    EXPECT_EQ(lu_run.code, exit_code::input_damaged);
    EXPECT_TRUE(lu_run.err.starts_with("covflow linalg lu: error: " + (dir / "a.npy").string() + ": ")) << lu_run.err;
    EXPECT_TRUE(contains(lu_run.err, c.says)) << lu_run.err;
    const CommandRun cholesky_run = cholesky(dir, false);
    EXPECT_EQ(cholesky_run.code, exit_code::input_damaged);
    EXPECT_TRUE(cholesky_run.err.starts_with("covflow linalg cholesky: error: " + (dir / "a.npy").string() + ": "))
        << cholesky_run.err;
    EXPECT_TRUE(contains(cholesky_run.err, c.says)) << cholesky_run.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "lu.npy"));
    EXPECT_FALSE(std::filesystem::exists(dir / "p.npy"));
    EXPECT_FALSE(std::filesystem::exists(dir / "l.npy"));
  }
}

TEST(SolveCliErrors, UsageAndFileErrorsHaveTheirExitCodes) {
  ScratchDir dir;
  io::write_npy(dir / "a.npy", make_array(std::vector<double>{2, 0, 0, 1}, {2, 2}));
  cli::LuRequest same;
  same.input = dir / "a.npy";
  same.lu = same.pivots = dir / "out.npy";
  CommandRun run = run_command(cli::run_lu, same);
  EXPECT_EQ(run.code, exit_code::usage);
  EXPECT_TRUE(contains(run.err, "covflow linalg lu: error: --lu and --piv name the same file")) << run.err;

  run = solve(dir, Assume::general);  // no b.npy
  EXPECT_EQ(run.code, exit_code::io);
  EXPECT_TRUE(run.err.starts_with("covflow linalg solve: error: " + (dir / "b.npy").string())) << run.err;

  cli::CholeskyRequest unwritable;
  unwritable.input = dir / "a.npy";
  unwritable.output = dir / "missing-dir" / "l.npy";
  unwritable.device = cli::DeviceChoice::cpu;
  run = run_command(cli::run_cholesky, unwritable);
  EXPECT_EQ(run.code, exit_code::io);
  EXPECT_TRUE(contains(run.err, "missing-dir/l.npy: cannot create")) << run.err;

  cli::LuRequest unwritable_pivots;
  unwritable_pivots.input = dir / "a.npy";
  unwritable_pivots.lu = dir / "lu.npy";
  unwritable_pivots.pivots = dir / "missing-dir" / "p.npy";
  unwritable_pivots.device = cli::DeviceChoice::cpu;
  run = run_command(cli::run_lu, unwritable_pivots);
  EXPECT_EQ(run.code, exit_code::io);
  EXPECT_TRUE(contains(run.err, "missing-dir/p.npy: cannot create")) << run.err;
}

TEST(SolveCliDevice, CudaWithoutADeviceOrPathIsDeviceUnavailable) {
  ScratchDir dir;
  io::write_npy(dir / "a.npy", make_array(std::vector<double>{2, 0, 0, 1}, {2, 2}));
  const CommandRun run = lu(dir, cli::DeviceChoice::cuda);
  if (linalg::cuda_compiled() && device_probe().available() && run.code == exit_code::ok)
    GTEST_SKIP() << "this host runs lu on CUDA; the unavailable case cannot be shown here";
  EXPECT_EQ(run.code, exit_code::device_unavailable) << run.err;
  EXPECT_TRUE(contains(run.err, "--device cuda")) << run.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "lu.npy"));
}

// ---- the CLI11 wiring ----------------------------------------------------------------------------

void parse(CLI::App& app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());  // CLI11's parse(vector) takes the arguments last first
  app.parse(args);
}

TEST(SolveCliCommands, ParsesLuCholeskyAndSolveArguments) {
  ScratchDir dir;
  // [[4, 2], [2, 3]]: positive definite, L = [[2, 0], [1, √2]].
  io::write_npy(dir / "a.npy", make_array(std::vector<double>{4, 2, 2, 3}, {2, 2}));
  io::write_npy(dir / "b.npy", make_array(std::vector<double>{6, 5}, {2}));
  const auto run = [](std::vector<std::string> args) {
    CLI::App app;
    cli::LinalgCommands commands(app);
    parse(app, std::move(args));
    EXPECT_TRUE(commands.parsed());
    std::ostringstream out, err;
    const int code = commands.run(out, err);
    EXPECT_EQ(code, exit_code::ok) << err.str();
    return out.str();
  };
  const std::string a = (dir / "a.npy").string();
  EXPECT_TRUE(contains(run({"linalg", "lu", a, "--lu", (dir / "lu.npy").string(), "--piv", (dir / "p.npy").string(),
                            "--device", "cpu"}),
                       "lu: one matrix 2×2 float64 on cpu"));
  EXPECT_EQ(read_int32(dir / "p.npy", {2}), (std::vector<std::int32_t>{0, 1}));
  EXPECT_TRUE(contains(run({"linalg", "cholesky", a, "--out", (dir / "u.npy").string(), "--upper", "--device", "cpu"}),
                       ", upper: wrote"));
  const std::vector<double> u = values_of<double>(io::read_npy(dir / "u.npy"));
  EXPECT_EQ(u[0], 2.0);
  EXPECT_EQ(u[1], 1.0);
  EXPECT_EQ(u[2], 0.0);
  EXPECT_NEAR(u[3], std::sqrt(2.0), 1e-15);
  for (const char* assume : {"pos", "positive", "gen", "general"}) {
    SCOPED_TRACE(assume);
    EXPECT_TRUE(contains(run({"linalg", "solve", a, (dir / "b.npy").string(), "--out", (dir / "x.npy").string(),
                              "--assume", assume, "--device", "cpu"}),
                         std::string(assume).starts_with("pos") ? "(posv)" : "(gesv)"));
    const std::vector<double> x = values_of<double>(io::read_npy(dir / "x.npy"));  // [1, 1]
    ASSERT_EQ(x.size(), 2u);
    EXPECT_NEAR(x[0], 1.0, 1e-15);
    EXPECT_NEAR(x[1], 1.0, 1e-15);
  }
  for (const std::vector<std::string>& args : {
           std::vector<std::string>{"linalg", "lu", "a", "--lu", "lu"},
           std::vector<std::string>{"linalg", "lu", "a", "--piv", "p"},
           std::vector<std::string>{"linalg", "cholesky", "a"},
           std::vector<std::string>{"linalg", "cholesky", "a", "--out", "l", "--device", "gpu"},
           std::vector<std::string>{"linalg", "solve", "a", "--out", "x"},
           std::vector<std::string>{"linalg", "solve", "a", "b", "--out", "x", "--assume", "symmetric"},
       }) {
    CLI::App app;
    cli::LinalgCommands commands(app);
    EXPECT_THROW(parse(app, args), CLI::ParseError) << args.back();
  }
}

}  // namespace
}  // namespace covflow::test

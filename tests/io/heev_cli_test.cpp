// `covflow linalg heev` and `cholupdate` through their library functions: numpy.linalg.eigh's
// conventions (shapes, dtypes, UPLO as numpy indexes the row-major array, V[..., :, k] ↔ W[..., k]),
// per-matrix failures, and the error classes with their exit codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/exit_codes.hpp"
#include "common/linalg_cli.hpp"
#include "covflow/io/npy.hpp"
#include "covflow/linalg/device.hpp"
#include "cholupdate_cli_checks.hpp"
#include "heev_cli_checks.hpp"
#include "npy_test_support.hpp"
#include "test_support.hpp"

namespace covflow::test {
namespace {

using cli::DeviceChoice;
using cli::HeevRequest;

template <class T>
class HeevCli : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(HeevCli, ElementTypes);

TYPED_TEST(HeevCli, FollowsNumpyEighForBothTriangles) {
  using T = TypeParam;
  using R = linalg::real_t<T>;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("HeevCli.FollowsNumpyEighForBothTriangles"));
  const std::size_t count = 5;
  for (std::size_t n : {1u, 2u, 5u, 17u}) {
    const std::vector<T> m = unsymmetric_batch<T>(count, n, rng);
    for (bool fortran : {false, true}) {
      // The file holds the same numpy array in either element order.
      std::vector<T> stored(m.size());
      for (std::size_t b = 0; b < count; ++b)
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < n; ++j)
            stored[fortran ? b + i * count + j * count * n : b * n * n + i * n + j] = m[b * n * n + i * n + j];
      io::write_npy(dir / "in.npy", make_array(stored, {count, n, n}, fortran));
      for (char uplo : {'L', 'U'}) {
        SCOPED_TRACE("n " + std::to_string(n) + " uplo " + uplo + (fortran ? " Fortran order" : " C order"));
        const CliRun run = heev(request_for(dir, uplo));
        ASSERT_EQ(run.code, exit_code::ok) << run.err;
        const io::NpyArray w_file = io::read_npy(dir / "w.npy");
        const io::NpyArray v_file = io::read_npy(dir / "v.npy");
        EXPECT_EQ(w_file.dtype, dtype_of<R>());
        EXPECT_EQ(w_file.shape, (std::vector<std::uint64_t>{count, n}));
        EXPECT_EQ(v_file.dtype, dtype_of<T>());
        EXPECT_EQ(v_file.shape, (std::vector<std::uint64_t>{count, n, n}));
        EXPECT_FALSE(v_file.fortran_order);
        const auto w = values_of<R>(w_file);
        const auto v = values_of<T>(v_file);
        const double tol = 10.0 * static_cast<double>(n) * eps<T>();
        for (std::size_t b = 0; b < count; ++b) {
          const auto a = effective_matrix(m, b * n * n, n, uplo);
          const Quality q = quality(a, w, b * n, v, b * n * n, n);
          EXPECT_LE(q.residual, tol) << "matrix " << b;
          EXPECT_LE(q.orthogonality, tol) << "matrix " << b;
          EXPECT_TRUE(q.ascending) << "matrix " << b;
          if (n > 1) {
            // The test can fail: the other triangle's matrix is not what was decomposed.
            const auto other = effective_matrix(m, b * n * n, n, uplo == 'L' ? 'U' : 'L');
            EXPECT_GT(quality(other, w, b * n, v, b * n * n, n).residual, 100 * tol) << "matrix " << b;
          }
        }
      }
    }
  }
}

TYPED_TEST(HeevCli, TwoDimensionalInputGivesNumpysShapes) {
  using T = TypeParam;
  using R = linalg::real_t<T>;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("HeevCli.TwoDimensionalInputGivesNumpysShapes"));
  const std::size_t n = 6;
  const std::vector<T> m = unsymmetric_batch<T>(1, n, rng);
  io::write_npy(dir / "in.npy", make_array(m, {n, n}));
  const CliRun run = heev(request_for(dir));
  ASSERT_EQ(run.code, exit_code::ok) << run.err;
  const io::NpyArray w_file = io::read_npy(dir / "w.npy");
  const io::NpyArray v_file = io::read_npy(dir / "v.npy");
  EXPECT_EQ(w_file.shape, (std::vector<std::uint64_t>{n}));
  EXPECT_EQ(v_file.shape, (std::vector<std::uint64_t>{n, n}));
  const Quality q = quality(effective_matrix(m, 0, n, 'L'), values_of<R>(w_file), 0, values_of<T>(v_file), 0, n);
  EXPECT_LE(q.residual, 10.0 * n * eps<T>());
  EXPECT_LE(q.orthogonality, 10.0 * n * eps<T>());
  EXPECT_NE(run.out.find("one matrix 6×6"), std::string::npos) << run.out;
}

TYPED_TEST(HeevCli, ValuesOnlyWritesNoVectorsAndTheSameSpectrum) {
  using T = TypeParam;
  using R = linalg::real_t<T>;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("HeevCli.ValuesOnly"));
  const std::size_t count = 3, n = 9;
  io::write_npy(dir / "in.npy", make_array(unsymmetric_batch<T>(count, n, rng), {count, n, n}));
  ASSERT_EQ(heev(request_for(dir, 'L', true)).code, exit_code::ok);
  const auto with_vectors = values_of<R>(io::read_npy(dir / "w.npy"));
  std::filesystem::remove(dir / "v.npy");
  const CliRun run = heev(request_for(dir, 'L', false));
  ASSERT_EQ(run.code, exit_code::ok) << run.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "v.npy"));
  const auto values_only = values_of<R>(io::read_npy(dir / "w.npy"));
  ASSERT_EQ(values_only.size(), with_vectors.size());
  double norm = 0;
  for (R x : with_vectors) norm = std::max(norm, std::abs(static_cast<double>(x)));
  for (std::size_t i = 0; i < values_only.size(); ++i)
    EXPECT_NEAR(values_only[i], with_vectors[i], 10.0 * n * eps<T>() * norm) << i;
}

TEST(HeevCliInfo, NonFiniteMatrixIsNamedAndNaNTheRestIsComputed) {
  using T = std::complex<double>;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("HeevCliInfo.NonFinite"));
  const std::size_t count = 6, n = 4;
  std::vector<T> m = unsymmetric_batch<T>(count, n, rng);
  m[2 * n * n + 3 * n + 1] = T(std::nan(""), 0.0);       // matrix 2, lower triangle: read by L
  m[4 * n * n + 0 * n + 2] = T(INFINITY, 0.0);           // matrix 4, upper triangle: read by U only
  io::write_npy(dir / "in.npy", make_array(m, {count, n, n}));

  for (char uplo : {'L', 'U'}) {
    SCOPED_TRACE(std::string("uplo ") + uplo);
    const std::size_t bad = uplo == 'L' ? 2 : 4;
    const CliRun run = heev(request_for(dir, uplo));
    EXPECT_EQ(run.code, exit_code::numerical);
    EXPECT_NE(run.err.find("1 of 6 matrices failed"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("matrix " + std::to_string(bad) + " (NaN or Inf in the " + (uplo == 'L' ? "lower" : "upper") +
                           " triangle)"),
              std::string::npos)
        << run.err;
    const auto w = values_of<double>(io::read_npy(dir / "w.npy"));
    const auto v = values_of<T>(io::read_npy(dir / "v.npy"));
    for (std::size_t b = 0; b < count; ++b) {
      for (std::size_t k = 0; k < n; ++k) EXPECT_EQ(std::isnan(w[b * n + k]), b == bad) << b << "," << k;
      for (std::size_t e = 0; e < n * n; ++e) EXPECT_EQ(std::isnan(v[b * n * n + e].real()), b == bad) << b << "," << e;
      if (b != bad) {
        const Quality q = quality(effective_matrix(m, b * n * n, n, uplo), w, b * n, v, b * n * n, n);
        EXPECT_LE(q.residual, 10.0 * n * eps<T>()) << b;
      }
    }
  }
}

TEST(HeevCliInfo, SingleMatrixFailureSaysSo) {
  ScratchDir dir;
  io::write_npy(dir / "in.npy", make_array(std::vector<double>{1.0, 0.0, NAN, 2.0}, {2, 2}));
  const CliRun run = heev(request_for(dir));
  EXPECT_EQ(run.code, exit_code::numerical);
  EXPECT_NE(run.err.find("the matrix failed (NaN or Inf in the lower triangle)"), std::string::npos) << run.err;
}

TEST(HeevCliShapes, EmptyBatchesAndMatricesFollowNumpy) {
  ScratchDir dir;
  for (const auto& shape : {std::vector<std::uint64_t>{0, 3, 3}, std::vector<std::uint64_t>{2, 0, 0},
                            std::vector<std::uint64_t>{0, 0}}) {
    SCOPED_TRACE(io::format_shape(shape));
    io::write_npy(dir / "in.npy", make_array(std::vector<float>{}, shape));
    const CliRun run = heev(request_for(dir));
    ASSERT_EQ(run.code, exit_code::ok) << run.err;
    const io::NpyArray w = io::read_npy(dir / "w.npy");
    const io::NpyArray v = io::read_npy(dir / "v.npy");
    EXPECT_EQ(w.dtype, io::NpyDtype::float32);
    EXPECT_EQ(w.shape, std::vector<std::uint64_t>(shape.begin(), shape.end() - 1));
    EXPECT_EQ(v.shape, shape);
  }
}

// The largest batch, of empty matrices: nothing to compute, and nothing allocated or looped over
// per matrix (2^31 − 1 info entries alone would be 8 GiB).
TEST(HeevCliShapes, LargestBatchOfEmptyMatricesCostsNothingPerMatrix) {
  ScratchDir dir;
  const std::uint64_t count = std::numeric_limits<std::int32_t>::max();
  io::write_npy(dir / "in.npy", make_array(std::vector<double>{}, {count, 0, 0}));
  const CliRun run = heev(request_for(dir));
  ASSERT_EQ(run.code, exit_code::ok) << run.err;
  const io::NpyArray w = io::read_npy(dir / "w.npy");
  const io::NpyArray v = io::read_npy(dir / "v.npy");
  EXPECT_EQ(w.shape, (std::vector<std::uint64_t>{count, 0}));
  EXPECT_EQ(v.shape, (std::vector<std::uint64_t>{count, 0, 0}));
  EXPECT_NE(run.out.find("2147483647 matrices 0×0"), std::string::npos) << run.out;
}

struct ErrorCase {
  const char* name;
  std::string contents;  // raw file bytes; empty: no file at all
  int code;
  std::string says;
};

TEST(HeevCliErrors, EachClassHasItsExitCodeAndMessage) {
  ScratchDir dir;
  const auto file_of = [](const io::NpyArray& a) {
    ScratchDir tmp;
    io::write_npy(tmp / "x.npy", a);
    return read_bytes(tmp / "x.npy");
  };
  std::string int_file = file_of(make_array(std::vector<double>(4), {2, 2}));
  int_file.replace(int_file.find("<f8"), 3, "<i8");
  const std::string good = file_of(make_array(std::vector<double>(18), {2, 3, 3}));
  const std::vector<ErrorCase> cases = {
      {"non_square", file_of(make_array(std::vector<double>(24), {2, 3, 4})), exit_code::input_damaged,
       "matrices must be square, got shape (2, 3, 4) float64: 3×4"},
      {"rank_1", file_of(make_array(std::vector<double>(4), {4})), exit_code::input_damaged,
       "expected (batch, n, n) or (n, n) Hermitian matrices, got shape (4,) float64 (1 dimensions)"},
      {"rank_4", file_of(make_array(std::vector<float>(8), {2, 1, 2, 2})), exit_code::input_damaged, "(4 dimensions)"},
      {"int64", int_file, exit_code::input_damaged, "unsupported dtype '<i8' (int64)"},
      {"truncated", good.substr(0, good.size() - 5), exit_code::input_damaged,
       "header says shape (2, 3, 3) float64 = 144 bytes but only 139 bytes follow the header"},
      {"missing", "", exit_code::io, "cannot open"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.name);
    const auto input = dir / (std::string(c.name) + ".npy");
    if (!c.contents.empty()) write_bytes(input, c.contents);
    HeevRequest r = request_for(dir);
    r.input = input;
    const CliRun run = heev(r);
    EXPECT_EQ(run.code, c.code) << run.err;
    EXPECT_TRUE(run.err.starts_with("covflow linalg heev: error: " + input.string() + ": ")) << run.err;
    EXPECT_NE(run.err.find(c.says), std::string::npos) << run.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "w.npy"));
  }
}

// An NPY file of a few hundred bytes at most, raw: the header says `shape`, `data_bytes` zero
// bytes follow, whether or not that is what the shape needs.
std::string npy_file(io::NpyDtype dtype, const std::vector<std::uint64_t>& shape, std::size_t data_bytes) {
  return io::npy_header(dtype, shape, false) + std::string(data_bytes, '\0');
}

constexpr std::uint64_t kTwoTo40 = std::uint64_t(1) << 40;

// Shapes that claim more matrices than a batch may hold: 2^40 or more empty matrices (no data at
// all, so the file's size bounds nothing), or 2^40 matrices of one element in a file that holds
// two. Each is refused as damaged, naming the file and the shape, before anything is allocated or
// looped over per matrix.
TEST(HeevCliErrors, BatchCountsBeyondTheFileOrTheLimitAreRefused) {
  ScratchDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {npy_file(io::NpyDtype::float64, {kTwoTo40, 0, 0}, 0),
       "shape (1099511627776, 0, 0) float64 holds 1099511627776 matrices, more than the 2147483647 a batch may hold"},
      {npy_file(io::NpyDtype::complex64, {std::uint64_t(1) << 31, 0, 0}, 0),
       "shape (2147483648, 0, 0) complex64 holds 2147483648 matrices, more than the 2147483647 a batch may hold"},
      {npy_file(io::NpyDtype::float32, {~std::uint64_t(0), 0, 0}, 0),
       "shape (18446744073709551615, 0, 0) float32 holds 18446744073709551615 matrices"},
      {npy_file(io::NpyDtype::float64, {kTwoTo40, 1, 1}, 16),
       "header says shape (1099511627776, 1, 1) float64 = 8796093022208 bytes but only 16 bytes follow the header"},
  };
  int i = 0;
  for (const auto& [contents, says] : cases) {
    SCOPED_TRACE(says);
    const auto input = dir / ("crafted-" + std::to_string(i++) + ".npy");
    write_bytes(input, contents);
    HeevRequest r = request_for(dir);
    r.input = input;
    const CliRun run = heev(r);
    EXPECT_EQ(run.code, exit_code::input_damaged) << run.err;
    EXPECT_TRUE(run.err.starts_with("covflow linalg heev: error: " + input.string() + ": ")) << run.err;
    EXPECT_NE(run.err.find(says), std::string::npos) << run.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "w.npy"));
  }
}

TEST(HeevCliErrors, UnwritableOutputIsAnIoError) {
  ScratchDir dir;
  io::write_npy(dir / "in.npy", make_array(std::vector<double>{2.0, 0.0, 0.0, 1.0}, {2, 2}));
  HeevRequest r = request_for(dir);
  r.values = dir / "missing-dir" / "w.npy";
  const CliRun run = heev(r);
  EXPECT_EQ(run.code, exit_code::io);
  EXPECT_NE(run.err.find("missing-dir/w.npy: cannot create"), std::string::npos) << run.err;
}

TEST(HeevCliDevice, CudaWithoutADeviceOrPathIsDeviceUnavailable) {
  ScratchDir dir;
  io::write_npy(dir / "in.npy", make_array(std::vector<double>{2.0, 0.0, 0.0, 1.0}, {2, 2}));
  HeevRequest r = request_for(dir);
  r.device = DeviceChoice::cuda;
  const CliRun run = heev(r);
  if (linalg::cuda_compiled() && device_probe().available() && run.code == exit_code::ok)
    GTEST_SKIP() << "this host runs heev on CUDA; the unavailable case cannot be shown here";
  EXPECT_EQ(run.code, exit_code::device_unavailable) << run.err;
  EXPECT_NE(run.err.find("--device cuda"), std::string::npos) << run.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "w.npy"));
}

TEST(HeevCliDevice, AutoAlwaysProducesAResult) {
  ScratchDir dir;
  io::write_npy(dir / "in.npy", make_array(std::vector<double>{2.0, 0.0, 0.0, 1.0}, {2, 2}));
  HeevRequest r = request_for(dir);
  r.device = DeviceChoice::automatic;
  const CliRun run = heev(r);
  ASSERT_EQ(run.code, exit_code::ok) << run.err;
  EXPECT_EQ(values_of<double>(io::read_npy(dir / "w.npy")), (std::vector<double>{1.0, 2.0}));
}

// ---- cholupdate -------------------------------------------------------------------------------

template <class T>
class CholupdateCli : public ::testing::Test {};
TYPED_TEST_SUITE(CholupdateCli, ElementTypes);

// numpy's layout end to end: C- and Fortran-order files, batched and single, update then
// downdate; the output has L's shape and dtype, zeros above the diagonal as numpy's factors have,
// and reconstructs L·Lᴴ ± V·Vᴴ to 10·n·ε.
TYPED_TEST(CholupdateCli, UpdateThenDowndateFollowNumpysLayout) {
  using T = TypeParam;
  using R = linalg::real_t<T>;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("CholupdateCli.UpdateThenDowndateFollowNumpysLayout"));
  const std::size_t count = 3;
  for (std::size_t n : {1u, 4u, 19u})
    for (std::size_t k : {1u, 3u})
      for (bool batched : {true, false})
        for (bool fortran : {false, true}) {
          SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k) + (batched ? " batched" : " single") +
                       (fortran ? " Fortran order" : " C order"));
          const std::size_t c = batched ? count : 1;
          const std::vector<T> l = numpy_factors<T>(c, n, rng);
          const std::vector<T> v = numpy_updates<T>(c, n, k, rng);
          auto stored = [&](const std::vector<T>& m, std::size_t rows, std::size_t cols) {
            const std::vector<std::uint64_t> shape =
                batched ? std::vector<std::uint64_t>{c, rows, cols} : std::vector<std::uint64_t>{rows, cols};
            if (!fortran) return make_array(m, shape);
            std::vector<T> f(m.size());
            for (std::size_t b = 0; b < c; ++b)
              for (std::size_t i = 0; i < rows; ++i)
                for (std::size_t j = 0; j < cols; ++j) f[b + i * c + j * c * rows] = m[b * rows * cols + i * cols + j];
            return make_array(f, shape, true);
          };
          const CholRun up = cholupdate(dir, stored(l, n, n), stored(v, n, k), '+');
          ASSERT_EQ(up.code, exit_code::ok) << up.err;
          const io::NpyArray updated = io::read_npy(dir / "l2.npy");
          EXPECT_EQ(updated.dtype, dtype_of<T>());
          EXPECT_EQ(updated.shape, batched ? (std::vector<std::uint64_t>{c, n, n}) : (std::vector<std::uint64_t>{n, n}));
          EXPECT_FALSE(updated.fortran_order);
          const std::vector<T> l2 = values_of<T>(updated);
          const double tolerance = 10.0 * double(n) * std::numeric_limits<R>::epsilon();
          for (std::size_t b = 0; b < c; ++b) {
            EXPECT_LE(reconstruction(l2, l, v, b, n, k, +1.0), tolerance) << "update, matrix " << b;
            for (std::size_t i = 0; i < n; ++i)
              for (std::size_t j = i + 1; j < n; ++j) ASSERT_EQ(l2[b * n * n + i * n + j], T(0)) << "above the diagonal";
          }
          const CholRun down = cholupdate(dir, updated, stored(v, n, k), '-');
          ASSERT_EQ(down.code, exit_code::ok) << down.err;
          const std::vector<T> l3 = values_of<T>(io::read_npy(dir / "l2.npy"));
          for (std::size_t b = 0; b < c; ++b)
            EXPECT_LE(reconstruction(l3, l2, v, b, n, k, -1.0), tolerance) << "downdate, matrix " << b;
        }
}

// A downdate that loses positive definiteness in one matrix: exit code 7, that matrix NaN in the
// output and named (with numpy's column index), the others written as computed.
TEST(CholupdateCli, FailingDowndateIsNumericalAndNamesTheMatrix) {
  ScratchDir dir;
  const std::size_t n = 5;
  std::vector<double> l(3 * n * n, 0.0), v(3 * n * 1, 0.0);
  for (std::size_t b = 0; b < 3; ++b)
    for (std::size_t i = 0; i < n; ++i) l[b * n * n + i * n + i] = 2.0;
  for (std::size_t b = 0; b < 3; ++b) v[b * n + 4] = 1.0;
  v[1 * n + 2] = 3.0;  // matrix 1: 4 − 9 < 0 at column 2
  const CholRun run = cholupdate(dir, make_array(l, {3, n, n}), make_array(v, {3, n, 1}), '-');
  EXPECT_EQ(run.code, exit_code::numerical) << run.err;
  EXPECT_NE(run.err.find("1 of 3 factors failed"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("matrix 1 (not positive definite at column 2"), std::string::npos) << run.err;
  const std::vector<double> out = values_of<double>(io::read_npy(dir / "l2.npy"));
  for (std::size_t e = 0; e < n * n; ++e) EXPECT_TRUE(std::isnan(out[1 * n * n + e]));
  for (std::size_t b : {0u, 2u}) {
    EXPECT_DOUBLE_EQ(out[b * n * n + 4 * n + 4], std::sqrt(3.0)) << "matrix " << b;
    EXPECT_DOUBLE_EQ(out[b * n * n + 0], 2.0) << "matrix " << b;
  }
}

TEST(CholupdateCli, NaNInputIsNamed) {
  ScratchDir dir;
  std::vector<std::complex<double>> l(2 * 3 * 3, 0.0), v(2 * 3 * 2, 0.5);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t i = 0; i < 3; ++i) l[b * 9 + i * 3 + i] = 1.0;
  l[1 * 9 + 2 * 3 + 0] = std::complex<double>(std::nan(""), 0.0);
  const CholRun run = cholupdate(dir, make_array(l, {2, 3, 3}), make_array(v, {2, 3, 2}), '+');
  EXPECT_EQ(run.code, exit_code::numerical) << run.err;
  EXPECT_NE(run.err.find("matrix 1 (NaN or Inf"), std::string::npos) << run.err;
}

TEST(CholupdateCli, ShapeAndTypeMismatchesAreInputErrors) {
  ScratchDir dir;
  const auto l = make_array(std::vector<double>(2 * 4 * 4), {2, 4, 4});
  struct Case {
    io::NpyArray l, v;
    std::string says;
  };
  const std::vector<Case> cases = {
      {l, make_array(std::vector<double>(3 * 4 * 1), {3, 4, 1}), "does not fit factors (2, 4, 4) float64"},
      {l, make_array(std::vector<double>(2 * 5 * 1), {2, 5, 1}), "expected (2, 4, k)"},
      {l, make_array(std::vector<float>(2 * 4 * 1), {2, 4, 1}), "dtype float32 differs from the factors' float64"},
      {make_array(std::vector<double>(2 * 4 * 3), {2, 4, 3}), make_array(std::vector<double>(8), {2, 4, 1}),
       "Cholesky factors must be square"},
      {l, make_array(std::vector<double>(8), {8}), "got shape (8,) float64"},
  };
  for (const Case& c : cases) {
    const CholRun run = cholupdate(dir, c.l, c.v);
    EXPECT_EQ(run.code, exit_code::input_damaged) << run.err;
    EXPECT_NE(run.err.find(c.says), std::string::npos) << run.err;
  }
}

// cholupdate's two files, each checked on its own: a factor or an update whose shape claims more
// matrices than a batch may hold, or than the file holds, is refused as damaged and named.
TEST(CholupdateCli, BatchCountsBeyondTheFileOrTheLimitAreRefused) {
  ScratchDir dir;
  const std::string two_1x1 = npy_file(io::NpyDtype::float64, {2, 1, 1}, 16);  // good as factors or updates
  struct Case {
    std::string factors, updates;
    bool factors_named;  // else the update file is
    std::string says;
  };
  const std::vector<Case> cases = {
      {npy_file(io::NpyDtype::float64, {kTwoTo40, 0, 0}, 0), npy_file(io::NpyDtype::float64, {kTwoTo40, 0, 1}, 0), true,
       "shape (1099511627776, 0, 0) float64 holds 1099511627776 matrices, more than the 2147483647 a batch may hold"},
      {npy_file(io::NpyDtype::float64, {2, 3, 3}, 144), npy_file(io::NpyDtype::float64, {kTwoTo40, 3, 0}, 0), false,
       "shape (1099511627776, 3, 0) float64 holds 1099511627776 matrices, more than the 2147483647 a batch may hold"},
      {npy_file(io::NpyDtype::float64, {kTwoTo40, 1, 1}, 16), two_1x1, true,
       "header says shape (1099511627776, 1, 1) float64 = 8796093022208 bytes but only 16 bytes follow the header"},
      {two_1x1, npy_file(io::NpyDtype::float64, {kTwoTo40, 1, 1}, 16), false,
       "header says shape (1099511627776, 1, 1) float64 = 8796093022208 bytes but only 16 bytes follow the header"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    cli::CholupdateRequest r;
    r.factor = dir / "l.npy";
    r.update = dir / "v.npy";
    r.output = dir / "l2.npy";
    r.sign = '+';
    r.device = DeviceChoice::cpu;
    write_bytes(r.factor, c.factors);
    write_bytes(r.update, c.updates);
    std::ostringstream out, err;
    const int code = cli::run_cholupdate(r, out, err);
    EXPECT_EQ(code, exit_code::input_damaged) << err.str();
    const std::string named = (c.factors_named ? r.factor : r.update).string();
    EXPECT_TRUE(err.str().starts_with("covflow linalg cholupdate: error: " + named + ": ")) << err.str();
    EXPECT_NE(err.str().find(c.says), std::string::npos) << err.str();
    EXPECT_FALSE(std::filesystem::exists(r.output));
  }
}

// The largest batch of empty factors with a rank-3 update: nothing to compute, and nothing
// allocated or looped over per matrix.
TEST(CholupdateCli, LargestBatchOfEmptyFactorsCostsNothingPerMatrix) {
  ScratchDir dir;
  const std::uint64_t count = std::numeric_limits<std::int32_t>::max();
  const CholRun run =
      cholupdate(dir, make_array(std::vector<float>{}, {count, 0, 0}), make_array(std::vector<float>{}, {count, 0, 3}));
  ASSERT_EQ(run.code, exit_code::ok) << run.err;
  const io::NpyArray l2 = io::read_npy(dir / "l2.npy");
  EXPECT_EQ(l2.dtype, io::NpyDtype::float32);
  EXPECT_EQ(l2.shape, (std::vector<std::uint64_t>{count, 0, 0}));
}

// ---- the CLI11 wiring ----------------------------------------------------------------------------

// CLI11's parse(vector) takes the arguments last first.
void parse(CLI::App& app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());
  app.parse(args);
}

TEST(LinalgCommands, ParsesHeevAndCholupdateArguments) {
  ScratchDir dir;
  io::write_npy(dir / "in.npy", make_array(std::vector<double>{2.0, 5.0, 0.0, 1.0}, {2, 2}));
  {
    CLI::App app;
    cli::LinalgCommands commands(app);
    parse(app, {"linalg", "heev", (dir / "in.npy").string(), "--values", (dir / "w.npy").string(), "--uplo", "u",
                "--device", "cpu"});
    ASSERT_TRUE(commands.parsed());
    std::ostringstream out, err;
    ASSERT_EQ(commands.run(out, err), exit_code::ok) << err.str();
    EXPECT_NE(out.str().find("uplo U"), std::string::npos) << out.str();
    // Upper triangle of [[2, 5], [0, 1]] as numpy indexes it: [[2, 5], [5, 1]], eigenvalues 1.5 ± √25.25.
    const auto w = values_of<double>(io::read_npy(dir / "w.npy"));
    ASSERT_EQ(w.size(), 2u);
    EXPECT_NEAR(w[0], 1.5 - std::sqrt(25.25), 1e-14);
    EXPECT_NEAR(w[1], 1.5 + std::sqrt(25.25), 1e-14);
  }
  {
    CLI::App app;
    cli::LinalgCommands commands(app);
    EXPECT_NO_THROW(parse(app, {"linalg", "cholupdate", "l.npy", "v.npy", "--sign", "-", "--out", "x.npy"}));
    EXPECT_TRUE(commands.parsed());
  }
  for (const std::vector<std::string>& args : {
           std::vector<std::string>{"linalg", "heev", "in", "--values", "w", "--device", "gpu"},
           std::vector<std::string>{"linalg", "heev", "in", "--values", "w", "--uplo", "X"},
           std::vector<std::string>{"linalg", "heev", "in"},
           std::vector<std::string>{"linalg"},
           std::vector<std::string>{"linalg", "cholupdate", "l", "v", "--sign", "*", "--out", "o"},
           std::vector<std::string>{"linalg", "cholupdate", "l", "v", "--out", "o"},
       }) {
    CLI::App app;
    cli::LinalgCommands commands(app);
    EXPECT_THROW(parse(app, args), CLI::ParseError) << args.back();
  }
}

}  // namespace
}  // namespace covflow::test

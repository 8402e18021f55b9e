// `covflow linalg qr|svd --device cuda`: the device paths of the commands (upload, geqrf/ungqr or
// gesvj on the GPU, download, NaN for failed matrices) against numpy's conventions and against the
// CPU device on the same files. The shapes reach the CUDA variants: one warp per matrix (5 × 3,
// 3 × 5 through the transpose, 32 × 32), QR then the warp (40 × 20), QR then shared memory
// (100 × 70) and QR then block Jacobi (300 × 260 complex double, 180 × 180 otherwise: above the
// shared-memory variant). Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/exit_codes.hpp"
#include "common/linalg_cli.hpp"
#include "covflow/io/npy.hpp"
#include "npy_test_support.hpp"
#include "test_support.hpp"

namespace covflow::test {
namespace {

template <class T>
class QrSvdCliGpu : public GpuTest {};
using ElementTypes = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(QrSvdCliGpu, ElementTypes);

struct Run {
  int code = -1;
  std::string out, err;
};

Run qr(const ScratchDir& dir, cli::DeviceChoice device) {
  cli::QrRequest request;
  request.input = dir / "a.npy";
  request.q = dir / "q.npy";
  request.r = dir / "r.npy";
  request.device = device;
  std::ostringstream out, err;
  Run run;
  run.code = cli::run_qr(request, out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

Run svd(const ScratchDir& dir, cli::DeviceChoice device) {
  cli::SvdRequest request;
  request.input = dir / "a.npy";
  request.values = dir / "s.npy";
  request.u = dir / "u.npy";
  request.vh = dir / "vh.npy";
  request.device = device;
  std::ostringstream out, err;
  Run run;
  run.code = cli::run_svd(request, out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

using Z = std::complex<double>;

// Row-major element (i, j) of matrix b of a (batch, rows, cols) array, in double.
template <class T>
Z at(const std::vector<T>& a, std::size_t b, std::size_t rows, std::size_t cols, std::size_t i, std::size_t j) {
  return Z(a[b * rows * cols + i * cols + j]);
}

// ‖A − B·C‖_F/‖A‖_F for A m × n, B m × k, C k × n (row-major, matrix b of each), and ‖BᴴB − I‖_F.
template <class T>
std::pair<double, double> product_quality(const std::vector<T>& a, const std::vector<T>& b_, const std::vector<T>& c,
                                          std::size_t b, std::size_t m, std::size_t n, std::size_t k,
                                          const std::vector<double>* scale = nullptr) {
  double diff = 0, norm = 0, orth = 0;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      Z sum = 0;
      for (std::size_t l = 0; l < k; ++l)
        sum += at(b_, b, m, k, i, l) * (scale != nullptr ? (*scale)[l] : 1.0) * at(c, b, k, n, l, j);
      diff += std::norm(at(a, b, m, n, i, j) - sum);
      norm += std::norm(at(a, b, m, n, i, j));
    }
  for (std::size_t p = 0; p < k; ++p)
    for (std::size_t q = 0; q < k; ++q) {
      Z dot = 0;
      for (std::size_t i = 0; i < m; ++i) dot += std::conj(at(b_, b, m, k, i, p)) * at(b_, b, m, k, i, q);
      orth += std::norm(dot - (p == q ? 1.0 : 0.0));
    }
  return {std::sqrt(diff / std::max(norm, 1e-300)), std::sqrt(orth)};
}

struct Shape {
  std::size_t m, n;
};

template <class T>
std::vector<Shape> shapes() {
  const std::size_t big = std::is_same_v<T, std::complex<double>> ? 300 : 180;
  return {{5, 3}, {3, 5}, {32, 32}, {40, 20}, {100, 70}, {big, big - 40}};
}

// QR on the device: exit code 0 on a clean batch, "on cuda", A = QR and QᴴQ = I to 10·n·ε, R upper
// triangular, |diag R| equal to the CPU device's; a NaN in matrix 1 of 3 is named, written as NaN,
// and leaves the others as computed.
TYPED_TEST(QrSvdCliGpu, QrOnCudaFollowsNumpyAndNamesAFailedMatrix) {
  using T = TypeParam;
  using R = linalg::real_t<T>;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("QrSvdCliGpu.QrOnCuda"));
  const std::size_t count = 3;
  for (const Shape s : shapes<T>()) {
    const std::size_t m = s.m, n = s.n, k = std::min(m, n);
    SCOPED_TRACE("m " + std::to_string(m) + " n " + std::to_string(n));
    std::vector<T> a = random_normal<T>(count * m * n, rng);
    io::write_npy(dir / "a.npy", make_array(a, {count, m, n}));
    const Run cpu = qr(dir, cli::DeviceChoice::cpu);
    ASSERT_EQ(cpu.code, exit_code::ok) << cpu.err;
    const std::vector<T> r_cpu = values_of<T>(io::read_npy(dir / "r.npy"));
    const Run run = qr(dir, cli::DeviceChoice::cuda);
    ASSERT_EQ(run.code, exit_code::ok) << run.err;
    EXPECT_NE(run.out.find("on cuda"), std::string::npos) << run.out;
    const io::NpyArray q_file = io::read_npy(dir / "q.npy"), r_file = io::read_npy(dir / "r.npy");
    ASSERT_EQ(q_file.shape, (std::vector<std::size_t>{count, m, k}));
    ASSERT_EQ(r_file.shape, (std::vector<std::size_t>{count, k, n}));
    const std::vector<T> q = values_of<T>(q_file), r = values_of<T>(r_file);
    const double eps = std::numeric_limits<R>::epsilon(), tolerance = 10.0 * double(std::max(m, n)) * eps;
    for (std::size_t b = 0; b < count; ++b) {
      const auto [residual, orthogonality] = product_quality(a, q, r, b, m, n, k);
      EXPECT_LE(residual, tolerance) << "matrix " << b;
      EXPECT_LE(orthogonality, tolerance) << "matrix " << b;
      double norm = 0;
      for (std::size_t e = 0; e < m * n; ++e) norm += std::norm(Z(a[b * m * n + e]));
      norm = std::sqrt(norm);
      for (std::size_t i = 0; i < k; ++i) {
        for (std::size_t j = 0; j < i; ++j) EXPECT_EQ(at(r, b, k, n, i, j), Z(0)) << "matrix " << b;
        EXPECT_NEAR(std::abs(at(r, b, k, n, i, i)), std::abs(at(r_cpu, b, k, n, i, i)), tolerance * norm)
            << "matrix " << b << " row " << i;
      }
    }
    a[m * n + (m - 1) * n] = T(std::numeric_limits<R>::quiet_NaN());  // matrix 1, last row, first column
    io::write_npy(dir / "a.npy", make_array(a, {count, m, n}));
    const Run bad = qr(dir, cli::DeviceChoice::cuda);  // matrix 1 fails; 0 and 2 as before
    ASSERT_EQ(bad.code, exit_code::numerical) << bad.err;
    EXPECT_NE(bad.err.find("1 of 3 matrices failed"), std::string::npos) << bad.err;
    const std::vector<T> q_bad = values_of<T>(io::read_npy(dir / "q.npy")), r_bad = values_of<T>(io::read_npy(dir / "r.npy"));
    for (std::size_t e = 0; e < m * k; ++e) {
      EXPECT_TRUE(std::isnan(std::abs(q_bad[m * k + e]))) << "element " << e;
      EXPECT_EQ(q_bad[e], q[e]);
      EXPECT_EQ(q_bad[2 * m * k + e], q[2 * m * k + e]);
    }
    for (std::size_t e = 0; e < k * n; ++e) EXPECT_TRUE(std::isnan(std::abs(r_bad[k * n + e]))) << "element " << e;
  }
}

// SVD on the device: exit code 0, "on cuda", σ descending and equal to the CPU device's within
// 10·n·ε·σ₁, A = U·diag(σ)·Vh, UᴴU = I and Vh·Vhᴴ = I to 10·n·ε; a NaN in matrix 1 of 3 is named,
// written as NaN, and leaves the others bit-identical.
TYPED_TEST(QrSvdCliGpu, SvdOnCudaFollowsNumpyAndNamesAFailedMatrix) {
  using T = TypeParam;
  using R = linalg::real_t<T>;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("QrSvdCliGpu.SvdOnCuda"));
  const std::size_t count = 3;
  for (const Shape s : shapes<T>()) {
    const std::size_t m = s.m, n = s.n, k = std::min(m, n);
    SCOPED_TRACE("m " + std::to_string(m) + " n " + std::to_string(n));
    std::vector<T> a = random_normal<T>(count * m * n, rng);
    io::write_npy(dir / "a.npy", make_array(a, {count, m, n}));
    const Run cpu = svd(dir, cli::DeviceChoice::cpu);
    ASSERT_EQ(cpu.code, exit_code::ok) << cpu.err;
    const std::vector<R> s_cpu = values_of<R>(io::read_npy(dir / "s.npy"));
    const Run run = svd(dir, cli::DeviceChoice::cuda);
    ASSERT_EQ(run.code, exit_code::ok) << run.err;
    EXPECT_NE(run.out.find("on cuda"), std::string::npos) << run.out;
    const io::NpyArray s_file = io::read_npy(dir / "s.npy"), u_file = io::read_npy(dir / "u.npy"),
                       vh_file = io::read_npy(dir / "vh.npy");
    ASSERT_EQ(s_file.shape, (std::vector<std::size_t>{count, k}));
    ASSERT_EQ(u_file.shape, (std::vector<std::size_t>{count, m, k}));
    ASSERT_EQ(vh_file.shape, (std::vector<std::size_t>{count, k, n}));
    const std::vector<R> sigma = values_of<R>(s_file);
    const std::vector<T> u = values_of<T>(u_file), vh = values_of<T>(vh_file);
    const double eps = std::numeric_limits<R>::epsilon(), tolerance = 10.0 * double(std::max(m, n)) * eps;
    for (std::size_t b = 0; b < count; ++b) {
      std::vector<double> sb(k);
      for (std::size_t i = 0; i < k; ++i) {
        sb[i] = double(sigma[b * k + i]);
        if (i > 0) {
          EXPECT_LE(sb[i], sb[i - 1]) << "matrix " << b;
        }
        EXPECT_NEAR(sb[i], double(s_cpu[b * k + i]), tolerance * double(s_cpu[b * k])) << "matrix " << b << " σ" << i;
      }
      const auto [residual, u_orthogonality] = product_quality(a, u, vh, b, m, n, k, &sb);
      EXPECT_LE(residual, tolerance) << "matrix " << b;
      EXPECT_LE(u_orthogonality, tolerance) << "matrix " << b;
      double v_orthogonality = 0;
      for (std::size_t p = 0; p < k; ++p)
        for (std::size_t q = 0; q < k; ++q) {
          Z dot = 0;
          for (std::size_t j = 0; j < n; ++j) dot += at(vh, b, k, n, p, j) * std::conj(at(vh, b, k, n, q, j));
          v_orthogonality += std::norm(dot - (p == q ? 1.0 : 0.0));
        }
      EXPECT_LE(std::sqrt(v_orthogonality), tolerance) << "matrix " << b;
    }
    a[m * n + (m - 1) * n] = T(std::numeric_limits<R>::quiet_NaN());
    io::write_npy(dir / "a.npy", make_array(a, {count, m, n}));
    const Run bad = svd(dir, cli::DeviceChoice::cuda);
    ASSERT_EQ(bad.code, exit_code::numerical) << bad.err;
    EXPECT_NE(bad.err.find("1 of 3 matrices failed"), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find("matrix 1"), std::string::npos) << bad.err;
    const std::vector<R> s_bad = values_of<R>(io::read_npy(dir / "s.npy"));
    const std::vector<T> u_bad = values_of<T>(io::read_npy(dir / "u.npy"));
    for (std::size_t i = 0; i < k; ++i) {
      EXPECT_TRUE(std::isnan(s_bad[k + i]));
      EXPECT_EQ(s_bad[i], sigma[i]);
      EXPECT_EQ(s_bad[2 * k + i], sigma[2 * k + i]);
    }
    for (std::size_t e = 0; e < m * k; ++e) {
      EXPECT_EQ(u_bad[e], u[e]);
      EXPECT_EQ(u_bad[2 * m * k + e], u[2 * m * k + e]);
    }
  }
}

}  // namespace
}  // namespace covflow::test

// `covflow linalg cholupdate --device cuda`: the device path of the command (upload, cholupdate on
// the GPU, download, NaN for failed factors) against its CPU path on the same NumPy files. The
// shapes reach every CUDA organisation: one warp per matrix (n = 19), the rotation pipeline
// (n = 300, k = 32: outside the product form's domain) and the product form, on the FP64 tensor
// cores for float64 with k = 16 (whose apply runs under the solve). Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cholupdate_cli_checks.hpp"
#include "common/exit_codes.hpp"
#include "covflow/io/npy.hpp"

namespace covflow::test {
namespace {

template <class T>
class CholupdateCliGpu : public GpuTest {};
using ElementTypes = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(CholupdateCliGpu, ElementTypes);

// Update then downdate on the device: exit code 0, "on cuda", the result reconstructs
// L·Lᴴ ± V·Vᴴ to 10·n·ε and agrees with the CPU device's file; one factor with a NaN in a batch of
// three is named, written as NaN, and leaves the other two as computed.
TYPED_TEST(CholupdateCliGpu, CudaMatchesTheCpuDeviceAndNamesABadFactor) {
  using T = TypeParam;
  using R = linalg::real_t<T>;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("CholupdateCliGpu.CudaMatchesTheCpuDevice"));
  const std::size_t count = 3;
  struct Shape {
    std::size_t n, k;
  };
  for (const Shape s : {Shape{19, 3}, Shape{300, 16}, Shape{300, 32}}) {
    const std::size_t n = s.n, k = s.k;
    SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k));
    std::vector<T> l = numpy_factors<T>(count, n, rng);
    const std::vector<T> v = numpy_updates<T>(count, n, k, rng);
    l[2 * n * n + (n - 1) * n + 1] = T(std::numeric_limits<R>::quiet_NaN());  // matrix 2, row n−1, column 1
    const auto factors = make_array(l, {count, n, n});
    const auto updates = make_array(v, {count, n, k});
    const double tolerance = 10.0 * double(n) * std::numeric_limits<R>::epsilon();

    const CholRun cpu = cholupdate(dir, factors, updates, '+', cli::DeviceChoice::cpu);
    ASSERT_EQ(cpu.code, exit_code::numerical) << cpu.err;
    const std::vector<T> on_cpu = values_of<T>(io::read_npy(dir / "l2.npy"));
    const CholRun up = cholupdate(dir, factors, updates, '+', cli::DeviceChoice::cuda);
    ASSERT_EQ(up.code, exit_code::numerical) << up.err;
    EXPECT_NE(up.out.find("on cuda"), std::string::npos) << up.out;
    EXPECT_NE(up.err.find("1 of 3 factors failed"), std::string::npos) << up.err;
    EXPECT_NE(up.err.find("matrix 2 (NaN or Inf"), std::string::npos) << up.err;
    const io::NpyArray updated = io::read_npy(dir / "l2.npy");
    const std::vector<T> l2 = values_of<T>(updated);
    for (std::size_t e = 0; e < n * n; ++e) ASSERT_TRUE(std::isnan(std::abs(l2[2 * n * n + e]))) << "matrix 2, element " << e;
    for (std::size_t b = 0; b < 2; ++b) {
      EXPECT_LE(reconstruction(l2, l, v, b, n, k, +1.0), tolerance) << "update, matrix " << b;
      double difference = 0, size = 0;
      for (std::size_t e = b * n * n; e < (b + 1) * n * n; ++e) {
        difference = std::max(difference, double(std::abs(l2[e] - on_cpu[e])));
        size = std::max(size, double(std::abs(on_cpu[e])));
      }
      EXPECT_LE(difference / size, tolerance) << "cuda against cpu, matrix " << b;
    }

    // Back down with the good factors only (the NaN factor would be refused again).
    const std::vector<T> good(l2.begin(), l2.begin() + 2 * n * n), good_v(v.begin(), v.begin() + 2 * n * k);
    const CholRun down = cholupdate(dir, make_array(good, {2, n, n}), make_array(good_v, {2, n, k}), '-',
                                    cli::DeviceChoice::cuda);
    ASSERT_EQ(down.code, exit_code::ok) << down.err;
    const std::vector<T> l3 = values_of<T>(io::read_npy(dir / "l2.npy"));
    for (std::size_t b = 0; b < 2; ++b)
      EXPECT_LE(reconstruction(l3, good, good_v, b, n, k, -1.0), tolerance) << "downdate, matrix " << b;
  }
}

}  // namespace
}  // namespace covflow::test

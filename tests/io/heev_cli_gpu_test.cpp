// `covflow linalg heev --device cuda`: the device path of the command (upload, heev on the GPU,
// download, NaN for failed matrices) gives numpy's conventions like the CPU path. Skips without a
// GPU, and — with the reason — while heev has no CUDA path in this build.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <string>
#include <vector>

#include "common/exit_codes.hpp"
#include "covflow/io/npy.hpp"
#include "heev_cli_checks.hpp"
#include "npy_test_support.hpp"
#include "test_support.hpp"

namespace covflow::test {
namespace {

template <class T>
class HeevCliGpu : public GpuTest {};
using ElementTypes = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(HeevCliGpu, ElementTypes);

TYPED_TEST(HeevCliGpu, CudaFollowsNumpyEighAndNamesFailedMatrices) {
  using T = TypeParam;
  using R = linalg::real_t<T>;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("HeevCliGpu.CudaFollowsNumpyEigh"));
  const std::size_t count = 7;
  for (std::size_t n : {1u, 3u, 32u, 33u, 128u}) {
    std::vector<T> m = random_normal<T>(count * n * n, rng);
    const std::size_t bad = 4;
    m[bad * n * n + (n - 1) * n] = T(std::nan(""));  // last row, first column: lower triangle
    io::write_npy(dir / "in.npy", make_array(m, {count, n, n}));
    for (char uplo : {'L', 'U'}) {
      SCOPED_TRACE("n " + std::to_string(n) + " uplo " + uplo);
      cli::HeevRequest request = request_for(dir, uplo);
      request.device = cli::DeviceChoice::cuda;
      const CliRun run = heev(request);
      if (run.code == exit_code::device_unavailable && run.err.find("not built yet") != std::string::npos) {
        COVFLOW_SKIP_GPU_TEST("heev has no CUDA path in this build: " + run.err);
      }
      const bool expect_failure = uplo == 'L' || n == 1;  // the NaN sits on the diagonal when n is 1
      ASSERT_EQ(run.code, expect_failure ? exit_code::numerical : exit_code::ok) << run.err;
      EXPECT_NE(run.out.find("on cuda"), std::string::npos) << run.out;
      if (expect_failure) {
        EXPECT_NE(run.err.find("matrix 4 (NaN or Inf"), std::string::npos) << run.err;
      }
      const auto w = values_of<R>(io::read_npy(dir / "w.npy"));
      const auto v = values_of<T>(io::read_npy(dir / "v.npy"));
      const double tol = 10.0 * static_cast<double>(n) * eps<T>();
      for (std::size_t b = 0; b < count; ++b) {
        if (b == bad && expect_failure) {
          EXPECT_TRUE(std::isnan(w[b * n])) << "matrix " << b;
          continue;
        }
        const Quality q = quality(effective_matrix(m, b * n * n, n, uplo), w, b * n, v, b * n * n, n);
        EXPECT_LE(q.residual, tol) << "matrix " << b;
        EXPECT_LE(q.orthogonality, tol) << "matrix " << b;
        EXPECT_TRUE(q.ascending) << "matrix " << b;
      }
    }
  }
}

}  // namespace
}  // namespace covflow::test

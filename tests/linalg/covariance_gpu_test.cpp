// sample_covariance on the CUDA backend against the naive triple loop, with poisoned outputs.
#include <gtest/gtest.h>

#include "covariance_reference.hpp"
#include "covflow/linalg/covariance.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"

namespace covflow::linalg {
namespace {

using test::CovarianceCase;

template <class T>
class CovarianceGpu : public test::GpuTest {};
using ComplexTypes = ::testing::Types<cf32, cf64>;
TYPED_TEST_SUITE(CovarianceGpu, ComplexTypes);

TYPED_TEST(CovarianceGpu, MatchesNaiveLoopAcrossShapes) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  cudaStream_t stream = exec.cuda_context().stream();
  std::mt19937_64 rng(test::fresh_seed("covariance gpu"));
  for (const CovarianceCase& c : test::covariance_cases())
    for (bool graded : {false, true}) {
      const double loading = graded ? 0.0 : 0.5;
      const auto x_elems = test::allocation(test::x_layout<T>(c, nullptr));
      const auto r_elems = test::allocation(test::r_layout<T>(c, nullptr));
      std::vector<T> x = test::snapshot_data<T>(c, x_elems, rng, graded);
      std::vector<T> r(r_elems);
      cuda::DeviceBuffer<T> dx(x_elems), dr(r_elems);
      dx.upload(x, stream);
      dr.fill_bytes(0xFF, stream);  // NaN everywhere: an element the kernel skips fails the check
      sample_covariance<T>(exec, test::x_layout(c, dx.data()), test::r_layout(c, dr.data()),
                           {.diagonal_loading = loading});
      dr.download(r, stream);
      exec.synchronize();
      auto rb = test::r_layout(c, r.data());
      test::expect_covariance<T>(test::x_layout(c, x.data()), rb, loading,
                                 test::describe(c) + (graded ? " graded" : " white"));
      for (std::int64_t b = 0; b < c.count; ++b)
        for (std::int64_t j = 0; j < c.channels; ++j)
          for (std::int64_t i = c.channels; i < rb.ld; ++i)
            ASSERT_TRUE(std::isnan(rb.at(b, i, j).real())) << "padding written at " << test::describe(c);
    }
}

TYPED_TEST(CovarianceGpu, AgreesWithCpuBackend) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  Exec cpu = Exec::cpu(2);
  cudaStream_t stream = exec.cuda_context().stream();
  std::mt19937_64 rng(test::fresh_seed("covariance gpu vs cpu"));
  const CovarianceCase c{128, 256, 20};
  const auto x_elems = static_cast<std::size_t>(c.channels) * c.snapshots * c.count;
  const auto r_elems = static_cast<std::size_t>(c.channels) * c.channels * c.count;
  std::vector<T> x = test::random_normal<T>(x_elems, rng), r_gpu(r_elems), r_cpu(r_elems);
  cuda::DeviceBuffer<T> dx(x_elems), dr(r_elems);
  dx.upload(x, stream);
  dr.fill_bytes(0xFF, stream);
  sample_covariance<T>(exec, Batch<T>::packed(dx.data(), c.channels, c.snapshots, c.count),
                       Batch<T>::packed(dr.data(), c.channels, c.channels, c.count), {.diagonal_loading = 0.1});
  dr.download(r_gpu, stream);
  exec.synchronize();
  sample_covariance<T>(cpu, Batch<T>::packed(x.data(), c.channels, c.snapshots, c.count),
                       Batch<T>::packed(r_cpu.data(), c.channels, c.channels, c.count), {.diagonal_loading = 0.1});
  // Each backend is within 4 (K+2) ε ‖|X||X|ᴴ‖_F / K of the exact result (see
  // expect_covariance), so they differ by at most twice that.
  for (int b = 0; b < c.count; ++b) {
    double diff2 = 0, bound2 = 0;
    const std::size_t xo = std::size_t(b) * c.channels * c.snapshots, ro = std::size_t(b) * c.channels * c.channels;
    for (int j = 0; j < c.channels; ++j)
      for (int i = 0; i < c.channels; ++i) {
        double abs_sum = 0;
        for (int s = 0; s < c.snapshots; ++s)
          abs_sum += std::abs(x[xo + i + std::size_t(s) * c.channels]) * std::abs(x[xo + j + std::size_t(s) * c.channels]);
        bound2 += (abs_sum / c.snapshots) * (abs_sum / c.snapshots);
        const std::size_t e = ro + i + std::size_t(j) * c.channels;
        diff2 += std::norm(std::complex<double>(r_gpu[e]) - std::complex<double>(r_cpu[e]));
      }
    EXPECT_LE(std::sqrt(diff2), 2 * 4.0 * (c.snapshots + 2) * test::eps<T>() * std::sqrt(bound2)) << "matrix " << b;
  }
}

TEST(CovarianceGpuErrors, WrongMemorySpaceIsNamed) {
  COVFLOW_SKIP_WITHOUT_DEVICE();
  Exec& exec = test::GpuTest::gpu();
  std::vector<cf64> host_x(4 * 8), host_r(16);
  try {
    sample_covariance<cf64>(exec, Batch<cf64>::packed(host_x.data(), 4, 8, 1), Batch<cf64>::packed(host_r.data(), 4, 4, 1));
    FAIL() << "host memory accepted by the CUDA backend";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("snapshots is host memory but the execution context is cuda"), std::string::npos)
        << e.what();
  }
  cuda::DeviceBuffer<cf64> dx(32), dr(16);
  Exec cpu = Exec::cpu(1);
  try {
    sample_covariance<cf64>(cpu, Batch<cf64>::packed(dx.data(), 4, 8, 1), Batch<cf64>::packed(dr.data(), 4, 4, 1));
    FAIL() << "device memory accepted by the CPU backend";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("is device memory but the execution context is cpu"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace covflow::linalg

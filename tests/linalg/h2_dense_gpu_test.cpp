// h2_from_dense_device against the CPU h2_from_dense (h2_dense_test checks that one against the
// guarantee): the same ranks (within one per level where a singular value sits at the threshold;
// printed), the expanded matrices equal up to rounding, the error measured densely against tol and
// the reported bound, orthonormal bases, the device matvec against the CPU one; and the argument
// errors. Inputs: a sample covariance of a planar array (its real part for real types) and a
// Matérn / clutter kernel matrix.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <iostream>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/error.hpp"
#include "covflow/linalg/h2.hpp"
#include "h2_test_support.hpp"
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

using namespace h2_test;
using test::eps;

template <class T>
class H2DenseGpu : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    rng_.seed(test::fresh_seed(std::string("H2DenseGpu.") + std::string(name(element_type_of<T>()))));
  }

  // CPU and GPU constructions of `reference` at each tolerance, compared.
  void compare(const std::string& what, const std::vector<double>& points, const std::vector<cd>& reference,
               const H2Options& options) {
    Exec& gpu = test::GpuTest::gpu();
    const std::int64_t n = static_cast<std::int64_t>(points.size()) / 2;
    std::vector<T> a(reference.size());
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = from_cd<T>(reference[i]);
    const double anorm = norm(a);
    cuda::DeviceBuffer<T> ad(a.size());
    ad.upload(a, gpu.cuda_context().stream());
    const std::vector<double> tols = std::is_same_v<real_t<T>, double> ? std::vector<double>{1e-2, 1e-5, 1e-8}
                                                                        : std::vector<double>{1e-2, 1e-4};
    for (double tol : tols) {
      SCOPED_TRACE(what + " tol " + std::to_string(tol));
      H2CompressReport rc, rg;
      const H2<T> hc = h2_from_dense<T>(cpu_, Batch<const T>::packed(a.data(), n, n, 1), points, 2, tol, options, &rc);
      const H2Device<T> device =
          h2_from_dense_device<T>(gpu, Batch<const T>::packed(ad.data(), n, n, 1), points, 2, tol, options, &rg);
      const H2<T> hg = h2_download(gpu, device);
      const std::vector<T> ec = expand(cpu_, hc), eg = expand(cpu_, hg);
      const double measured = diff_norm(eg, a) / anorm, between = diff_norm(eg, ec) / anorm;
      std::string ranks;
      for (std::size_t l = 0; l < hc.rank.size(); ++l) ranks += std::to_string(hc.rank[l]) + "/" + std::to_string(hg.rank[l]) + " ";
      std::cout << "[ h2_dense_gpu ] " << what << " " << name(element_type_of<T>()) << " n=" << n << " tol=" << tol
                << " gpu error=" << measured << " bound cpu/gpu=" << rc.error_bound << "/" << rg.error_bound
                << " |gpu-cpu|=" << between << " ranks cpu/gpu " << ranks << "\n";
      ASSERT_EQ(hc.rank.size(), hg.rank.size());
      for (std::size_t l = 0; l < hc.rank.size(); ++l) EXPECT_LE(std::abs(hc.rank[l] - hg.rank[l]), 1) << "level " << l;
      EXPECT_LE(rg.error_bound, tol);
      EXPECT_LE(measured, rg.error_bound + 10 * std::sqrt(double(n)) * eps<T>());
      EXPECT_LE(measured, tol);
      EXPECT_NEAR(rg.norm, rc.norm, 1e-5 * rc.norm);
      EXPECT_NEAR(rg.node_threshold, rc.node_threshold, 1e-5 * rc.node_threshold);
      EXPECT_EQ(rg.ranks_after, hg.rank);
      EXPECT_EQ(rg.bytes_after, h2_bytes(hg));
      EXPECT_TRUE(hg.orthogonal);
      // Both are within tol of A, so within 2·tol of each other. With equal level ranks they keep
      // the same subspaces up to rounding, except where a node's own rank differs by a vector at
      // the threshold, which moves A_H by at most √2·τ ≤ tol·‖A‖/√N (N ≥ 16 nodes here): 0.25·tol.
      EXPECT_LE(between, 2 * tol);
      if (hc.rank == hg.rank) {
        EXPECT_LE(between, 0.25 * tol + 100 * std::sqrt(double(n)) * eps<T>());
      }
      EXPECT_EQ(hg.dense, hc.dense);  // copied entries, bit for bit

      // The device matvec against the CPU one on the same vectors.
      const std::int64_t nvec = 2;
      const std::vector<T> x = test::random_normal<T>(static_cast<std::size_t>(n * nvec), rng_);
      std::vector<T> yc(x.size()), yg(x.size());
      h2_gemv(cpu_, T(1), hg, Batch<const T>::packed(x.data(), n, nvec, 1), T(0), Batch<T>::packed(yc.data(), n, nvec, 1));
      cuda::DeviceBuffer<T> xd(x.size()), yd(x.size());
      xd.upload(x, gpu.cuda_context().stream());
      h2_gemv(gpu, T(1), device, Batch<const T>::packed(xd.data(), n, nvec, 1), T(0), Batch<T>::packed(yd.data(), n, nvec, 1));
      yd.download(yg, gpu.cuda_context().stream());
      gpu.synchronize();
      EXPECT_LE(diff_norm(yg, yc) / norm(yc), 0.1 * double(n) * eps<T>());
    }
  }

  Exec cpu_ = Exec::cpu(2);
  std::mt19937_64 rng_;
};
TYPED_TEST_SUITE(H2DenseGpu, ElementTypes, ElementName);

TYPED_TEST(H2DenseGpu, SampleCovarianceMatchesCpu) {
  using T = TypeParam;
  const std::vector<double> p = planar_array(24, this->rng_);
  std::vector<cd> a = sample_covariance(p, 1152, {10.0, 2.0}, 30, this->rng_);
  if constexpr (!is_complex_v<T>)
    for (auto& v : a) v = v.real();
  this->compare("sample covariance", p, a, H2Options{32, 1.0});
}

TYPED_TEST(H2DenseGpu, KernelMatrixMatchesCpu) {
  using T = TypeParam;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> p(2 * 800);
  for (auto& v : p) v = u(this->rng_);
  H2KernelSpec spec{H2Kernel::matern, 1.0, 0.2, 1.5};
  if constexpr (is_complex_v<T>) spec = H2KernelSpec{H2Kernel::clutter, 1.0, 0.1, 0.5, 0.25, 0.3, 0.8};
  const H2Options options{32, 1.0, 6, 0.0};
  const H2<T> built = h2_build<T>(this->cpu_, p, 2, spec, options);
  const std::vector<T> dense = expand(this->cpu_, built);
  this->compare("kernel", p, std::vector<cd>(dense.begin(), dense.end()), options);
}

TEST(H2DenseGpuErrors, NameTheArgument) {
  COVFLOW_SKIP_WITHOUT_DEVICE();
  Exec& gpu = test::GpuTest::gpu();
  Exec cpu = Exec::cpu(1);
  const std::int64_t n = 64;
  std::vector<double> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = double(i);
  std::vector<f64> host(static_cast<std::size_t>(n * n), 0.0);
  cuda::DeviceBuffer<f64> a(host.size());
  a.upload(host, gpu.cuda_context().stream());
  const Batch<const f64> good = Batch<const f64>::packed(a.data(), n, n, 1);
  EXPECT_NO_THROW(h2_from_dense_device<f64>(gpu, good, p, 1, 1e-3));
  test::expect_invalid_argument([&] { h2_from_dense_device<f64>(cpu, good, p, 1, 1e-3); },
                                "h2_from_dense_device: exec must be a CUDA Exec");
  test::expect_invalid_argument([&] { h2_from_dense_device<f64>(gpu, Batch<const f64>::packed(host.data(), n, n, 1), p, 1, 1e-3); },
                                "h2_from_dense_device: a");
  test::expect_invalid_argument([&] { h2_from_dense_device<f64>(gpu, good, p, 1, 0.0); }, "h2_from_dense_device: tol 0");
  test::expect_invalid_argument([&] { h2_from_dense_device<f64>(gpu, good, std::span<const double>(p).first(63), 1, 1e-3); },
                                "h2_from_dense_device: a is 64×64 but the points give n = 63");
  host[5 + 7 * n] = std::numeric_limits<double>::quiet_NaN();
  a.upload(host, gpu.cuda_context().stream());
  gpu.synchronize();
  test::expect_invalid_argument([&] { h2_from_dense_device<f64>(gpu, good, p, 1, 1e-3); },
                                "h2_from_dense_device: a: holds a non-finite entry");
}

}  // namespace
}  // namespace covflow::linalg

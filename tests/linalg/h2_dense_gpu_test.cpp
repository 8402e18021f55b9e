// h2_from_dense_device against the CPU h2_from_dense (h2_dense_test checks that one against the
// guarantee): the same ranks (within one per level where a singular value sits at the threshold;
// printed), the expanded matrices equal up to rounding, the error measured densely against tol and
// the reported bound, orthonormal bases, the device matvec against the CPU one; and the argument
// errors; and H2DensePlan, the batched construction for the frame loop, likewise per matrix of a
// batch. Inputs: a sample covariance of a planar array (its real part for real types) and a
// Matérn / clutter kernel matrix.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <iostream>
#include <limits>
#include <span>
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

// H2DensePlan: a batch of three matrices on the same points — two sample covariances and one with
// a NaN — built at once, each matrix against the CPU h2_from_dense as above (ranks within one per
// level, error within tol and the reported bound, the compact download's dense blocks bit for bit,
// report = the CPU's formula on the download); the batch's expansion (outputs poisoned first)
// against the CPU expansion of each download to 100·n·ε·‖A‖; the NaN matrix flagged and built as
// zero without touching the others; a second build of the same batch neither grows the workspace
// nor changes a bit of the results.
TYPED_TEST(H2DenseGpu, PlanBuildsABatchAsTheCpuDoesEachMatrix) {
  using T = TypeParam;
  Exec& gpu = test::GpuTest::gpu();
  const cudaStream_t stream = gpu.cuda_context().stream();
  const std::vector<double> p = planar_array(16, this->rng_);
  const std::int64_t n = static_cast<std::int64_t>(p.size()) / 2, count = 3;
  const H2Options options{16, 1.0};
  const double tol = std::is_same_v<real_t<T>, double> ? 1e-6 : 1e-3;
  std::vector<T> batch(static_cast<std::size_t>(count * n * n));
  for (std::int64_t c = 0; c < count; ++c) {
    std::vector<cd> a = sample_covariance(p, 512, {10.0, 2.0 + double(c)}, 30, this->rng_);
    for (std::size_t i = 0; i < a.size(); ++i)
      batch[static_cast<std::size_t>(c * n * n) + i] = from_cd<T>(is_complex_v<T> ? a[i] : cd(a[i].real()));
  }
  batch[static_cast<std::size_t>(2 * n * n + 5 + 7 * n)] = from_cd<T>(cd(std::numeric_limits<double>::quiet_NaN()));
  cuda::DeviceBuffer<T> ad(batch.size()), out(batch.size());
  ad.upload(batch, stream);

  H2DensePlan<T> plan(gpu, p, 2, options, 4);
  EXPECT_EQ(plan.n(), n);
  EXPECT_GE(gpu.workspace().capacity(), plan.workspace_bytes());
  const std::size_t growths = gpu.workspace().growth_count(), bytes = plan.device_bytes();
  plan.build(gpu, Batch<const T>::packed(ad.data(), n, n, count), tol);
  out.fill_bytes(0xFF, stream);  // NaN: an element the expansion does not write fails below
  plan.expand(gpu, Batch<T>::packed(out.data(), n, n, count));
  std::vector<T> expanded(batch.size());
  out.download(expanded, stream);
  const std::size_t levels = plan.shape().rank.size();
  std::vector<int> level_rank(static_cast<std::size_t>(count) * levels), flags(static_cast<std::size_t>(count));
  std::vector<double> norm2(static_cast<std::size_t>(count)), dropped(static_cast<std::size_t>(count));
  const H2DenseCells cells = plan.cells();
  auto back = [&](auto& host, const auto* device) {
    ASSERT_EQ(cudaMemcpyAsync(host.data(), device, host.size() * sizeof(host[0]), cudaMemcpyDeviceToHost, stream),
              cudaSuccess);
  };
  back(level_rank, cells.level_rank);
  back(flags, cells.status);
  back(norm2, cells.norm2);
  back(dropped, cells.dropped);
  gpu.synchronize();
  EXPECT_EQ(gpu.workspace().growth_count(), growths) << "a build or expansion grew the workspace";
  EXPECT_EQ(plan.device_bytes(), bytes);

  std::vector<H2<T>> first;
  for (std::int64_t c = 0; c < 2; ++c) {
    SCOPED_TRACE("matrix " + std::to_string(c));
    const std::vector<T> a(batch.begin() + c * n * n, batch.begin() + (c + 1) * n * n);
    const double anorm = norm(a);
    EXPECT_EQ(flags[static_cast<std::size_t>(c)], 0);
    H2CompressReport rc;
    const H2<T> hc = h2_from_dense<T>(this->cpu_, Batch<const T>::packed(a.data(), n, n, 1), p, 2, tol, options, &rc);
    const H2<T> hg = plan.download(gpu, c);
    const std::span<const int> ranks(level_rank.data() + c * static_cast<std::int64_t>(levels), levels);
    const H2CompressReport rg = plan.report(ranks, norm2[static_cast<std::size_t>(c)], dropped[static_cast<std::size_t>(c)], tol);
    const std::vector<T> ec = expand(this->cpu_, hc), eg = expand(this->cpu_, hg);
    const double measured = diff_norm(eg, a) / anorm;
    ASSERT_EQ(hc.rank.size(), hg.rank.size());
    for (std::size_t l = 0; l < hc.rank.size(); ++l) EXPECT_LE(std::abs(hc.rank[l] - hg.rank[l]), 1) << "level " << l;
    EXPECT_EQ(rg.ranks_after, hg.rank);
    EXPECT_EQ(rg.bytes_after, h2_bytes(hg));
    EXPECT_NEAR(rg.norm, rc.norm, 1e-5 * rc.norm);
    EXPECT_LE(rg.error_bound, tol);
    EXPECT_LE(measured, rg.error_bound + 10 * std::sqrt(double(n)) * eps<T>());
    EXPECT_LE(measured, tol);
    if (hc.rank == hg.rank) {
      EXPECT_EQ(rg.bytes_after, rc.bytes_after);
      EXPECT_LE(diff_norm(eg, ec) / anorm, 0.25 * tol + 100 * std::sqrt(double(n)) * eps<T>());
    }
    EXPECT_EQ(hg.dense, hc.dense);  // copied entries, bit for bit
    const std::vector<T> batch_expanded(expanded.begin() + c * n * n, expanded.begin() + (c + 1) * n * n);
    EXPECT_LE(diff_norm(batch_expanded, eg) / anorm, 100 * double(n) * eps<T>());
    first.push_back(hg);
  }
  // The NaN matrix: flagged, built as zero.
  EXPECT_EQ(flags[2], status::non_finite_input);
  EXPECT_FALSE(std::isfinite(norm2[2]));
  const std::vector<T> zero_expanded(expanded.begin() + 2 * n * n, expanded.end());
  EXPECT_EQ(norm(zero_expanded), 0.0);

  // Again: nothing grows, nothing changes.
  plan.build(gpu, Batch<const T>::packed(ad.data(), n, n, count), tol);
  for (std::int64_t c = 0; c < 2; ++c) {
    const H2<T> again = plan.download(gpu, c);
    EXPECT_EQ(again.rank, first[static_cast<std::size_t>(c)].rank);
    EXPECT_EQ(again.leaf_basis, first[static_cast<std::size_t>(c)].leaf_basis);
    EXPECT_EQ(again.transfer, first[static_cast<std::size_t>(c)].transfer);
    EXPECT_EQ(again.coupling, first[static_cast<std::size_t>(c)].coupling);
  }
  EXPECT_EQ(gpu.workspace().growth_count(), growths);
}

TEST(H2DenseGpuErrors, PlanNamesTheArgument) {
  COVFLOW_SKIP_WITHOUT_DEVICE();
  Exec& gpu = test::GpuTest::gpu();
  Exec cpu = Exec::cpu(1);
  const std::int64_t n = 64;
  std::vector<double> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = double(i);
  test::expect_invalid_argument([&] { (void)H2DensePlan<f64>(cpu, p, 1, {}, 1); }, "H2DensePlan: exec must be a CUDA Exec");
  test::expect_invalid_argument([&] { (void)H2DensePlan<f64>(gpu, p, 1, {}, 0); }, "H2DensePlan: max_count 0");
  H2DensePlan<f64> plan(gpu, p, 1, H2Options{8, 1.0}, 2);
  cuda::DeviceBuffer<f64> a(static_cast<std::size_t>(3 * n * n));
  a.fill_bytes(0, gpu.cuda_context().stream());
  test::expect_invalid_argument([&] { plan.expand(gpu, Batch<f64>::packed(a.data(), n, n, 1)); },
                                "H2DensePlan: expand: out holds 1 matrices; the last build made 0");
  test::expect_invalid_argument([&] { plan.build(gpu, Batch<const f64>::packed(a.data(), n, n, 3), 1e-3); },
                                "H2DensePlan: build: a holds 3 matrices");
  test::expect_invalid_argument([&] { plan.build(gpu, Batch<const f64>::packed(a.data(), n - 1, n - 1, 1), 1e-3); },
                                "H2DensePlan: build: a is 63×63");
  test::expect_invalid_argument([&] { plan.build(gpu, Batch<const f64>::packed(a.data(), n, n, 1), 0.0); },
                                "H2DensePlan: build: tol");
  EXPECT_NO_THROW(plan.build(gpu, Batch<const f64>::packed(a.data(), n, n, 2), 1e-3));
  gpu.synchronize();
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

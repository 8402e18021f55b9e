// H² matrices on the CUDA backend: h2_upload / h2_download, h2_gemv and h2_expand on the device,
// checked against the CPU h2_gemv and h2_expand of the same H2 (the reference backend, itself
// checked against the expanded and the kernel matrices in h2_test). Every element type; real types
// with the Matérn 3/2 and exponential kernels, complex ones with the radar clutter kernel, all with
// a nugget; nvec 1, 3 and 16; α/β with β = 0 on a NaN-poisoned Y; after h2_compress (ranks differ
// per level); on trees with empty nodes (coincident points); the round trip bit for bit; the
// argument errors. The expansion also on 1-D and 3-D points, a single leaf (no couplings), a leaf
// smaller than the rank, and an H2Device built and compressed on the device.
//
// Tolerance: the GPU and the CPU sum the same products in other orders (and the GPU with fused
// multiply-adds), so they differ by rounding: ‖Y_gpu − Y_cpu‖_F ≤ c·n·ε·(|α|·‖A·X‖_F + |β|·‖Y₀‖_F)
// with c = 0.1 (kRoundingFactor): on an H100 the worst seen was 0.003 (n = 3500) and 0.0006
// (n = 20000), so a wrong or missing block (an O(1) or O(1/√blocks) change) cannot hide in it.
// The expansions likewise: ‖E_gpu − E_cpu‖_F ≤ c·n·ε·‖E_cpu‖_F, every element of E_gpu written
// (the output NaN-poisoned first) and nothing between n and ld.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <type_traits>
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

constexpr double kRoundingFactor = 0.1;

template <class T>
double fro(const std::vector<T>& a, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  double sum = 0;
  for (std::int64_t j = 0; j < cols; ++j)
    for (std::int64_t i = 0; i < rows; ++i) sum += std::norm(cd(a[static_cast<std::size_t>(i + j * ld)]));
  return std::sqrt(sum);
}

template <class T>
T scalar(double re, double im) {
  if constexpr (is_complex_v<T>) return T(static_cast<real_t<T>>(re), static_cast<real_t<T>>(im));
  else return static_cast<T>(re);
}

// The kernels of each element type: Matérn 3/2 (or exponential) on [0, 1]² for real types, the
// clutter of a planar array 4 wavelengths across for complex ones; a nugget for both.
template <class T>
struct Problem {
  H2KernelSpec spec;
  H2Options options;
  double extent = 1.0;
};
template <class T>
Problem<T> problem(bool exponential = false) {
  if constexpr (is_complex_v<T>)
    return {H2KernelSpec{H2Kernel::clutter, 1.0, 0.1, 0.5, 1.0, -0.2, 0.7}, H2Options{64, 1.0, 7, 0.3}, 4.0};
  else if (exponential)
    return {H2KernelSpec{H2Kernel::exponential, 1.0, 0.1}, H2Options{64, 0.7, 6, 0.1}, 1.0};
  else
    return {H2KernelSpec{H2Kernel::matern, 1.0, 0.2, 1.5}, H2Options{64, 1.0, 6, 0.3}, 1.0};
}

template <class T>
class H2Gpu : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    rng_.seed(test::fresh_seed(std::string("H2Gpu.") + std::string(name(element_type_of<T>()))));
  }
  Exec& gpu() { return test::GpuTest::gpu(); }

  H2<T> build(const std::vector<double>& points, bool exponential = false) {
    const Problem<T> pr = problem<T>(exponential);
    return h2_build<T>(cpu_, points, 2, pr.spec, pr.options);
  }

  // Y = α·A·X + β·Y₀ on the GPU (X and Y with ld = n + 7, the padding rows poisoned and checked
  // unwritten) and on the CPU; the relative difference in units of n·ε, and whether Y came back
  // finite and its padding untouched.
  double compare(const H2<T>& a, const H2Device<T>& device, std::int64_t nvec, T alpha, T beta, const char* what) {
    const std::int64_t n = a.tree.n, ld = n + 7;
    const std::vector<T> x = test::random_normal<T>(static_cast<std::size_t>(n * nvec), rng_);
    const bool beta_zero = beta == T(0);
    std::vector<T> y0 = beta_zero ? std::vector<T>(static_cast<std::size_t>(n * nvec), test::poison<T>())
                                  : test::random_normal<T>(static_cast<std::size_t>(n * nvec), rng_);
    // CPU reference, and A·X alone for the scale.
    std::vector<T> y_cpu = y0, ax(static_cast<std::size_t>(n * nvec));
    h2_gemv<T>(cpu_, alpha, a, Batch<const T>::packed(x.data(), n, nvec, 1), beta, Batch<T>::packed(y_cpu.data(), n, nvec, 1));
    h2_gemv<T>(cpu_, T(1), a, Batch<const T>::packed(x.data(), n, nvec, 1), T(0), Batch<T>::packed(ax.data(), n, nvec, 1));

    std::vector<T> xl(static_cast<std::size_t>(ld * nvec), test::poison<T>()), yl(xl.size(), test::poison<T>());
    for (std::int64_t j = 0; j < nvec; ++j)
      for (std::int64_t i = 0; i < n; ++i) {
        xl[static_cast<std::size_t>(i + j * ld)] = x[static_cast<std::size_t>(i + j * n)];
        yl[static_cast<std::size_t>(i + j * ld)] = y0[static_cast<std::size_t>(i + j * n)];
      }
    const cudaStream_t stream = gpu().cuda_context().stream();
    cuda::DeviceBuffer<T> xd(xl.size()), yd(yl.size());
    xd.upload(xl, stream);
    yd.upload(yl, stream);
    const std::size_t growths = gpu().workspace().growth_count();
    gpu().workspace().reserve(h2_gemv_workspace<T>(gpu(), device, nvec));
    h2_gemv<T>(gpu(), alpha, device, Batch<const T>{xd.data(), n, nvec, ld, ld * nvec, 1}, beta,
               Batch<T>{yd.data(), n, nvec, ld, ld * nvec, 1});
    EXPECT_EQ(gpu().workspace().growth_count(), growths) << what << ": h2_gemv grew a reserved workspace";
    std::vector<T> y_gpu(yl.size());
    yd.download(y_gpu, stream);
    gpu().synchronize();

    bool finite = true, padding = true;
    double diff = 0;
    for (std::int64_t j = 0; j < nvec; ++j) {
      for (std::int64_t i = 0; i < n; ++i) {
        const cd g(y_gpu[static_cast<std::size_t>(i + j * ld)]);
        finite = finite && std::isfinite(g.real()) && std::isfinite(g.imag());
        diff += std::norm(g - cd(y_cpu[static_cast<std::size_t>(i + j * n)]));
      }
      for (std::int64_t i = n; i < ld; ++i) padding = padding && std::isnan(std::real(cd(y_gpu[static_cast<std::size_t>(i + j * ld)])));
    }
    EXPECT_TRUE(finite) << what << ": non-finite output (β = 0 must not read the NaN-poisoned Y)";
    EXPECT_TRUE(padding) << what << ": rows between n and ld of Y were written";
    const double scale = std::abs(cd(alpha)) * fro(ax, n, nvec, n) + (beta_zero ? 0.0 : std::abs(cd(beta)) * fro(y0, n, nvec, n));
    const double relative = std::sqrt(diff) / scale / (static_cast<double>(n) * eps<T>());
    EXPECT_LE(relative, kRoundingFactor) << what << ", nvec " << nvec << ": ‖Y_gpu − Y_cpu‖ in n·ε of the scale";
    return relative;
  }

  void compare_all(const H2<T>& a, const char* what) {
    const H2Device<T> device = h2_upload(gpu(), a);
    double worst = 0;
    for (const std::int64_t nvec : {1, 3, 16}) {
      worst = worse(worst, compare(a, device, nvec, T(1), T(0), what));
      worst = worse(worst, compare(a, device, nvec, scalar<T>(-0.75, 0.5), T(0), what));
      worst = worse(worst, compare(a, device, nvec, scalar<T>(0.5, -0.25), scalar<T>(-1.25, 0.75), what));
    }
    std::cout << "  " << what << ": n " << a.tree.n << ", depth " << a.tree.depth << ", ranks";
    for (int k : a.rank) std::cout << " " << k;
    std::cout << ", worst ‖Y_gpu − Y_cpu‖ " << worst << " n·ε (bound " << kRoundingFactor << ")\n";
  }

  // h2_expand of `device` on the GPU (ld = n + 5, the whole array NaN-poisoned first, the
  // workspace reserved beforehand and checked not to grow) against h2_expand of `a` on the CPU;
  // ‖E_gpu − E_cpu‖_F/‖E_cpu‖_F in units of n·ε.
  double compare_expansion(const H2<T>& a, const H2Device<T>& device, const std::string& what) {
    const std::int64_t n = a.tree.n, ld = n + 5;
    const std::vector<T> e_cpu = expand(cpu_, a);
    const cudaStream_t stream = gpu().cuda_context().stream();
    const std::vector<T> poisoned(static_cast<std::size_t>(ld * n), test::poison<T>());
    cuda::DeviceBuffer<T> out(poisoned.size());
    out.upload(poisoned, stream);
    gpu().workspace().reserve(h2_expand_workspace<T>(gpu(), device));
    const std::size_t growths = gpu().workspace().growth_count();
    h2_expand<T>(gpu(), device, Batch<T>{out.data(), n, n, ld, ld * n, 1});
    EXPECT_EQ(gpu().workspace().growth_count(), growths) << what << ": h2_expand grew a reserved workspace";
    std::vector<T> got(out.size());
    out.download(got, stream);
    gpu().synchronize();

    std::int64_t unwritten = 0, padding_written = 0;
    double diff = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int64_t i = 0; i < n; ++i) {
        const cd g(got[static_cast<std::size_t>(i + j * ld)]);
        unwritten += !(std::isfinite(g.real()) && std::isfinite(g.imag()));
        diff += std::norm(g - cd(e_cpu[static_cast<std::size_t>(i + j * n)]));
      }
      for (std::int64_t i = n; i < ld; ++i) padding_written += !std::isnan(std::real(cd(got[static_cast<std::size_t>(i + j * ld)])));
    }
    EXPECT_EQ(unwritten, 0) << what << ": elements of the n × n left unwritten (NaN) or non-finite";
    EXPECT_EQ(padding_written, 0) << what << ": rows between n and ld written";
    const double relative = std::sqrt(diff) / norm(e_cpu) / (static_cast<double>(n) * eps<T>());
    EXPECT_LE(relative, kRoundingFactor) << what << ": ‖E_gpu − E_cpu‖_F/‖E_cpu‖_F in n·ε";
    std::cout << "  expand, " << what << ": n " << n << ", depth " << a.tree.depth << ", ranks";
    for (int k : a.rank) std::cout << " " << k;
    std::cout << "; ‖E_gpu − E_cpu‖_F/‖E_cpu‖_F " << relative << " n·ε (bound " << kRoundingFactor << ")\n";
    return relative;
  }

  Exec cpu_ = Exec::cpu(0);
  std::mt19937_64 rng_;
};
TYPED_TEST_SUITE(H2Gpu, ElementTypes, ElementName);

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}
void expect_same_pairs(const H2Pairs& a, const H2Pairs& b, const char* what) {
  EXPECT_TRUE(same_bits(a.level_ptr, b.level_ptr) && same_bits(a.row, b.row) && same_bits(a.col, b.col) &&
              same_bits(a.row_ptr, b.row_ptr) && same_bits(a.col_ptr, b.col_ptr) && same_bits(a.col_pairs, b.col_pairs))
      << what;
}
template <class T>
void expect_same_h2(const H2<T>& a, const H2<T>& b) {
  EXPECT_EQ(a.tree.n, b.tree.n);
  EXPECT_EQ(a.tree.dim, b.tree.dim);
  EXPECT_EQ(a.tree.depth, b.tree.depth);
  EXPECT_EQ(a.tree.leaf_capacity, b.tree.leaf_capacity);
  EXPECT_TRUE(same_bits(a.tree.permutation, b.tree.permutation)) << "permutation";
  EXPECT_TRUE(same_bits(a.tree.node_begin, b.tree.node_begin) && same_bits(a.tree.node_end, b.tree.node_end)) << "nodes";
  EXPECT_TRUE(same_bits(a.tree.box, b.tree.box)) << "boxes";
  expect_same_pairs(a.couplings, b.couplings, "coupling pairs");
  expect_same_pairs(a.dense_pairs, b.dense_pairs, "dense pairs");
  EXPECT_TRUE(same_bits(a.rank, b.rank)) << "ranks";
  EXPECT_TRUE(same_bits(a.transfer_offset, b.transfer_offset) && same_bits(a.coupling_offset, b.coupling_offset)) << "offsets";
  EXPECT_TRUE(same_bits(a.leaf_basis, b.leaf_basis)) << "leaf bases";
  EXPECT_TRUE(same_bits(a.transfer, b.transfer)) << "transfers";
  EXPECT_TRUE(same_bits(a.coupling, b.coupling)) << "couplings";
  EXPECT_TRUE(same_bits(a.dense, b.dense)) << "dense blocks";
  EXPECT_EQ(a.orthogonal, b.orthogonal);
}

// n = 20000 points (the CPU reference is O(n) per vector, so this stays a few seconds).
TYPED_TEST(H2Gpu, GemvMatchesCpuAtScale) {
  using T = TypeParam;
  const H2<T> a = this->build(uniform_points(20000, 2, problem<T>().extent, this->rng_));
  this->compare_all(a, "built, n = 20000");
}

TYPED_TEST(H2Gpu, GemvMatchesCpuAfterCompression) {
  using T = TypeParam;
  H2<T> a = this->build(uniform_points(6000, 2, problem<T>().extent, this->rng_), !is_complex_v<T>);
  const H2CompressReport report = h2_compress(this->cpu_, a, std::is_same_v<real_t<T>, float> ? 1e-3 : 1e-6);
  int distinct = 0;
  for (std::size_t l = 1; l < report.ranks_after.size(); ++l) distinct += report.ranks_after[l] != report.ranks_after[l - 1];
  EXPECT_GT(distinct, 0) << "compression left one rank on every level: the case tests nothing new";
  this->compare_all(a, "compressed");
}

// Coincident points leave nodes (and leaves) empty: they hold nothing and take part in no block.
TYPED_TEST(H2Gpu, GemvMatchesCpuWithEmptyNodes) {
  using T = TypeParam;
  const double extent = problem<T>().extent;
  std::vector<double> p = uniform_points(3000, 2, extent, this->rng_);
  for (std::size_t i = 0; i < 1500; ++i) p[2 * i] = 0.1 * extent, p[2 * i + 1] = 0.2 * extent;  // half on one point
  const std::vector<double> copies(2 * 500, 0.3 * extent);  // and 500 more on another
  p.insert(p.end(), copies.begin(), copies.end());
  const H2<T> a = this->build(p);
  int empty = 0;
  for (std::size_t i = 0; i < a.tree.node_begin.size(); ++i) empty += a.tree.node_begin[i] == a.tree.node_end[i];
  std::cout << "  " << empty << " empty nodes\n";
  EXPECT_GT(empty, 0) << "no empty node: the case tests nothing new";
  this->compare_all(a, "coincident points");
}

TYPED_TEST(H2Gpu, DownloadOfUploadIsBitIdentical) {
  using T = TypeParam;
  H2<T> a = this->build(uniform_points(3000, 2, problem<T>().extent, this->rng_));
  for (int stage = 0; stage < 2; ++stage) {
    if (stage == 1) h2_compress(this->cpu_, a, 1e-3);
    const H2Device<T> device = h2_upload(this->gpu(), a);
    EXPECT_FALSE(device.empty());
    EXPECT_EQ(device.device(), this->gpu().cuda_context().device());
    EXPECT_GE(device.device_bytes(), h2_bytes(a));
    expect_same_h2(h2_download(this->gpu(), device), a);
  }
}

// X and Y the same array, and nvec = 0 a no-op.
TYPED_TEST(H2Gpu, InPlaceAndEmpty) {
  using T = TypeParam;
  const H2<T> a = this->build(uniform_points(2500, 2, problem<T>().extent, this->rng_));
  const std::int64_t n = a.tree.n, nvec = 3;
  const H2Device<T> device = h2_upload(this->gpu(), a);
  const std::vector<T> x = test::random_normal<T>(static_cast<std::size_t>(n * nvec), this->rng_);
  const T alpha = scalar<T>(0.5, 0.5), beta = scalar<T>(2.0, -1.0);
  std::vector<T> expected = x, got(x.size());
  h2_gemv<T>(this->cpu_, alpha, a, Batch<const T>::packed(x.data(), n, nvec, 1), beta, Batch<T>::packed(expected.data(), n, nvec, 1));
  const cudaStream_t stream = this->gpu().cuda_context().stream();
  cuda::DeviceBuffer<T> xy(x.size());
  xy.upload(x, stream);
  h2_gemv<T>(this->gpu(), alpha, device, Batch<const T>::packed(xy.data(), n, nvec, 1), beta, Batch<T>::packed(xy.data(), n, nvec, 1));
  h2_gemv<T>(this->gpu(), alpha, device, Batch<const T>{xy.data(), n, 0, n, 0, 1}, beta, Batch<T>{xy.data(), n, 0, n, 0, 1});
  xy.download(got, stream);
  this->gpu().synchronize();
  double diff = 0;
  for (std::size_t i = 0; i < got.size(); ++i) diff += std::norm(cd(got[i]) - cd(expected[i]));
  EXPECT_LE(std::sqrt(diff) / fro(expected, n, nvec, n), kRoundingFactor * static_cast<double>(n) * eps<T>());
}

// ---- h2_expand on the device --------------------------------------------------------------------

// Uploaded CPU builds: 2-D as built and after compression (ranks differ per level; tol 100 lets
// every node drop its whole weight, τ² ≥ ‖A‖_F², so every rank is 0 and the couplings stand for
// zero blocks), coincident points (empty nodes), 1-D and
// 3-D points, a leaf smaller than the rank (leaf bases wider than tall), and a single leaf (depth 0:
// one dense block, no couplings).
TYPED_TEST(H2Gpu, ExpandMatchesCpu) {
  using T = TypeParam;
  const Problem<T> pr = problem<T>();
  const double extent = pr.extent;
  struct Case {
    std::string what;
    std::vector<double> points;
    int dim;
    H2Options options;
    double tol;  // h2_compress after the build when > 0
  };
  std::vector<double> coincident = uniform_points(2000, 2, extent, this->rng_);
  for (std::size_t i = 0; i < 800; ++i) coincident[2 * i] = 0.1 * extent, coincident[2 * i + 1] = 0.2 * extent;
  const double tol = std::is_same_v<real_t<T>, float> ? 1e-3 : 1e-6;
  const std::vector<Case> cases = {
      {"2-D", uniform_points(2500, 2, extent, this->rng_), 2, pr.options, 0},
      {"2-D compressed", uniform_points(3000, 2, extent, this->rng_), 2, pr.options, tol},
      {"2-D compressed to 0.3", uniform_points(2000, 2, extent, this->rng_), 2, pr.options, 0.3},
      {"2-D compressed to rank 0", uniform_points(2000, 2, extent, this->rng_), 2, pr.options, 100.0},
      {"coincident points", coincident, 2, pr.options, 0},
      {"1-D", uniform_points(1500, 1, 2 * extent, this->rng_), 1, H2Options{32, 1.0, 8, 0.3}, 0},
      {"3-D", uniform_points(2000, 3, extent, this->rng_), 3, H2Options{64, 1.0, 3, 0.3}, 0},
      {"leaf 16 < rank 49", uniform_points(1200, 2, extent, this->rng_), 2, H2Options{16, 1.0, 7, 0.3}, 0},
      {"one leaf", uniform_points(50, 2, extent, this->rng_), 2, pr.options, 0},
  };
  double worst = 0;
  for (const Case& c : cases) {
    H2<T> a = h2_build<T>(this->cpu_, c.points, c.dim, pr.spec, c.options);
    if (c.tol > 0) h2_compress(this->cpu_, a, c.tol);
    if (c.what == "one leaf") {
      EXPECT_EQ(a.tree.depth, 0) << "the case tests nothing new";
    }
    if (c.tol > 1) {
      EXPECT_EQ(*std::max_element(a.rank.begin(), a.rank.end()), 0) << "the case tests nothing new";
    }
    const H2Device<T> device = h2_upload(this->gpu(), a);
    worst = worse(worst, this->compare_expansion(a, device, c.what));
  }
  std::cout << "  worst ‖E_gpu − E_cpu‖_F/‖E_cpu‖_F " << worst << " n·ε\n";
}

// An H2Device that never was an H2 on the host: built and compressed on the device, expanded there,
// against the CPU's expansion of its download.
TYPED_TEST(H2Gpu, ExpandOfDeviceBuiltAndCompressedMatchesCpu) {
  using T = TypeParam;
  const Problem<T> pr = problem<T>();
  const std::vector<double> points = uniform_points(3000, 2, pr.extent, this->rng_);
  H2Device<T> device = h2_build_device<T>(this->gpu(), points, 2, pr.spec, pr.options);
  this->compare_expansion(h2_download(this->gpu(), device), device, "built on the device");
  h2_compress(this->gpu(), device, std::is_same_v<real_t<T>, float> ? 1e-3 : 1e-6);
  this->compare_expansion(h2_download(this->gpu(), device), device, "compressed on the device");
}

TEST(H2GpuErrors, BadArgumentsThrowInvalidArgumentNamingThem) {
  COVFLOW_SKIP_WITHOUT_DEVICE();
  Exec& gpu = test::GpuTest::gpu();
  Exec cpu = Exec::cpu(2);
  std::mt19937_64 rng(1);
  const std::vector<double> p = uniform_points(400, 2, 1.0, rng);
  const H2<f64> a = h2_build<f64>(cpu, p, 2, H2KernelSpec{H2Kernel::exponential, 1.0, 0.2}, H2Options{32, 1.0, 4});
  test::expect_invalid_argument([&] { h2_upload(cpu, a); }, "h2_upload: exec must be a CUDA Exec");
  test::expect_invalid_argument([&] { h2_upload(gpu, H2<f64>{}); }, "h2_upload: A: not an H² matrix");
  H2<f64> broken = a;
  broken.couplings.col_pairs.assign(broken.couplings.col_pairs.size(), -1);
  if (!broken.couplings.col_pairs.empty())
    test::expect_invalid_argument([&] { h2_upload(gpu, broken); }, "h2_upload: A: couplings: pair");

  const H2Device<f64> device = h2_upload(gpu, a);
  cuda::DeviceBuffer<f64> x(400 * 2), y(400 * 2);
  std::vector<f64> host(400 * 2);
  test::expect_invalid_argument(
      [&] { h2_gemv<f64>(gpu, 1.0, device, Batch<const f64>::packed(host.data(), 400, 2, 1), 0.0, Batch<f64>::packed(y.data(), 400, 2, 1)); },
      "h2_gemv: X");
  test::expect_invalid_argument(
      [&] { h2_gemv<f64>(gpu, 1.0, device, Batch<const f64>::packed(x.data(), 399, 2, 1), 0.0, Batch<f64>::packed(y.data(), 400, 2, 1)); },
      "h2_gemv: X is 399×2 but A is 400×400");
  test::expect_invalid_argument(
      [&] { h2_gemv<f64>(gpu, 1.0, device, Batch<const f64>::packed(x.data(), 400, 2, 1), 0.0, Batch<f64>::packed(y.data(), 400, 1, 1)); },
      "h2_gemv: Y is 400×1 but A is 400×400: Y needs 400 rows and 2 columns");
  test::expect_invalid_argument(
      [&] { h2_gemv<f64>(gpu, 1.0, device, Batch<const f64>{x.data(), 400, 2, 300, 800, 1}, 0.0, Batch<f64>::packed(y.data(), 400, 2, 1)); },
      "h2_gemv: X: leading dimension 300 < rows 400");
  test::expect_invalid_argument(
      [&] { h2_gemv<f64>(cpu, 1.0, device, Batch<const f64>::packed(x.data(), 400, 2, 1), 0.0, Batch<f64>::packed(y.data(), 400, 2, 1)); },
      "h2_gemv: exec must be a CUDA Exec");
  const H2Device<f64> none;
  test::expect_invalid_argument(
      [&] { h2_gemv<f64>(gpu, 1.0, none, Batch<const f64>::packed(x.data(), 400, 2, 1), 0.0, Batch<f64>::packed(y.data(), 400, 2, 1)); },
      "h2_gemv: A is an empty H2Device");
  test::expect_invalid_argument([&] { h2_download(gpu, none); }, "h2_download: A is an empty H2Device");
  test::expect_invalid_argument([&] { h2_gemv_workspace<f64>(gpu, device, -1); }, "h2_gemv_workspace: nvec -1");

  cuda::DeviceBuffer<f64> dense(400 * 400);
  std::vector<f64> dense_host(400 * 400);
  test::expect_invalid_argument([&] { h2_expand<f64>(cpu, device, Batch<f64>::packed(dense.data(), 400, 400, 1)); },
                                "h2_expand: exec must be a CUDA Exec");
  test::expect_invalid_argument([&] { h2_expand<f64>(gpu, none, Batch<f64>::packed(dense.data(), 400, 400, 1)); },
                                "h2_expand: A is an empty H2Device");
  test::expect_invalid_argument([&] { h2_expand<f64>(gpu, device, Batch<f64>::packed(dense.data(), 400, 399, 1)); },
                                "h2_expand: out is 400×399 but A is 400×400");
  test::expect_invalid_argument([&] { h2_expand<f64>(gpu, device, Batch<f64>::packed(dense_host.data(), 400, 400, 1)); },
                                "h2_expand: out");
  test::expect_invalid_argument([&] { h2_expand_workspace<f64>(gpu, none); }, "h2_expand_workspace: A is an empty H2Device");
  gpu.synchronize();
}

}  // namespace
}  // namespace covflow::linalg

// h2_build_device against the CPU h2_build: the same matrix. For every element type (the clutter
// kernel on the complex ones only), 1-D, 2-D and 3-D points and every kernel (exponential,
// gaussian, Matérn ν = 1/2, 3/2, 5/2, clutter), with a nugget: h2_download(h2_build_device(…))
// has h2_build's tree, boxes, pair lists, ranks and offsets exactly and its values elementwise
// within the tolerance below; the device-built H2Device's h2_gemv matches the CPU h2_gemv of the
// CPU-built H2, and (small n) the expanded matrices agree. Edge cases: one leaf (no couplings,
// rank 0), coincident points (empty nodes, whose transfers and padding must be zeros), points on
// a line in 2-D (flat boxes), a leaf size that is not a multiple of 32, cheb_order 1. Bad
// arguments: InvalidArgument naming them under h2_build_device, and a CPU Exec refused.
//
// Tolerance (elementwise, per value array): |gpu − cpu| ≤ kUlps·ε·max|cpu value of the array|,
// kUlps = 10. Why that is the right scale: both builds evaluate the same formulas (h2_kernel.hpp)
// in double in the same order, on the same Chebyshev node table, and the device code fuses no
// multiply-add, so the Lagrange polynomials (leaf bases, transfers) agree bit for bit; the kernel
// values differ only through CUDA's exp, sin and cos against the C library's (≤ 2 ulp of a double
// each), which after σ²·(…) leaves a few ulp of a double, and for the clutter kernel the sum of N
// quadrature terms whose weights add up to σ² adds about √N ulp of σ² (N ≈ 30 here). Rounded to T
// once, that is at most one ulp of T apart (f32, cf32) or a few ulp of a double (f64, cf64) —
// far below 10·ε of the largest value, while any indexing error (a wrong point, node, pair, or
// an unwritten element) is an O(1) difference. The printed "bit-different" counts show how many
// elements were not bit-identical (expected 0 for the bases).
// Matvec: the device-built matrix's h2_gemv against the CPU h2_gemv of the CPU-built one,
// ‖Y_gpu − Y_cpu‖_F ≤ 0.1·max(n, 1000)·ε·‖A·X‖_F: h2_gpu_test's bound (the value differences above
// add a few ε to the GPU/CPU summation-order difference it covers), with a floor of 100·ε for the
// small cases, where a sum of n terms in another order still differs by about √n·ε. The expanded
// matrices (both expanded by the CPU) are held to the same bound.
// Poisoning: the H2Device's memory comes from cudaMalloc inside h2_build_device, out of the test's
// reach; the test builds once, frees that block after filling a block of the same size with NaN,
// and builds again, so that (as cudaMalloc hands a freed block back) an element the kernels leave
// unset shows as NaN. A check that the download holds no NaN backs the elementwise comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
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

constexpr double kUlps = 10;             // elementwise, in ε of the array's largest value
constexpr double kRoundingFactor = 0.1;  // matvec and expansion, in max(n, 1000)·ε

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

void expect_same_pairs(const H2Pairs& a, const H2Pairs& b, const std::string& what) {
  EXPECT_TRUE(same_bits(a.level_ptr, b.level_ptr)) << what << ": level_ptr";
  EXPECT_TRUE(same_bits(a.row, b.row) && same_bits(a.col, b.col)) << what << ": row/col";
  EXPECT_TRUE(same_bits(a.row_ptr, b.row_ptr) && same_bits(a.col_ptr, b.col_ptr) && same_bits(a.col_pairs, b.col_pairs))
      << what << ": block-row/column index";
}

// Elementwise: the largest |gpu − cpu| in units of ε·max|cpu|, NaN (an unset or non-finite
// element) counted as failure; the number of elements not bit-identical.
struct ValueDiff {
  double worst = 0;  // in ε·max|cpu value|
  std::size_t bit_different = 0;
  bool finite = true;
};
template <class T>
ValueDiff value_diff(const std::vector<T>& gpu, const std::vector<T>& cpu) {
  ValueDiff out;
  if (gpu.size() != cpu.size()) {
    out.worst = std::numeric_limits<double>::infinity();
    return out;
  }
  double scale = 0;
  for (const T& v : cpu) scale = std::max(scale, std::abs(cd(v)));
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const cd g(gpu[i]), c(cpu[i]);
    if (!std::isfinite(g.real()) || !std::isfinite(g.imag())) out.finite = false;
    if (std::memcmp(&gpu[i], &cpu[i], sizeof(T)) != 0) ++out.bit_different;
    const double d = std::abs(g - c) / (eps<T>() * std::max(scale, 1e-300));
    out.worst = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(out.worst, d);
  }
  return out;
}

template <class T>
double fro(const std::vector<T>& a) {
  double sum = 0;
  for (const T& v : a) sum += std::norm(cd(v));
  return std::sqrt(sum);
}

const char* kernel_name(const H2KernelSpec& spec) {
  switch (spec.kind) {
    case H2Kernel::exponential: return "exponential";
    case H2Kernel::gaussian: return "gaussian";
    case H2Kernel::matern: return spec.nu == 0.5 ? "matern 1/2" : spec.nu == 1.5 ? "matern 3/2" : "matern 5/2";
    default: return "clutter";
  }
}

// The kernels a type is tested with: every real kernel, and clutter for complex types (a planar
// or line array 4 wavelengths across: extent 4 at λ = 1).
template <class T>
std::vector<H2KernelSpec> kernels() {
  std::vector<H2KernelSpec> out = {
      H2KernelSpec{H2Kernel::exponential, 1.3, 0.15},      H2KernelSpec{H2Kernel::gaussian, 0.8, 0.2},
      H2KernelSpec{H2Kernel::matern, 1.0, 0.2, 0.5},       H2KernelSpec{H2Kernel::matern, 2.0, 0.25, 1.5},
      H2KernelSpec{H2Kernel::matern, 1.0, 0.3, 2.5}};
  if constexpr (is_complex_v<T>) out.push_back(H2KernelSpec{H2Kernel::clutter, 1.5, 0.1, 0.5, 1.0, -0.2, 0.7});
  return out;
}

template <class T>
class H2BuildGpu : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    rng_.seed(test::fresh_seed(std::string("H2BuildGpu.") + std::string(name(element_type_of<T>()))));
  }
  Exec& gpu() { return test::GpuTest::gpu(); }

  // Builds on the device (into memory poisoned as the header says) and on the CPU and compares
  // everything; returns the worst elementwise difference in ε.
  double compare(const std::vector<double>& points, int dim, const H2KernelSpec& spec, const H2Options& options,
                 const std::string& what, bool expand = false) {
    const H2<T> cpu = h2_build<T>(cpu_, points, dim, spec, options);
    std::size_t bytes = 0;
    {
      const H2Device<T> first = h2_build_device<T>(gpu(), points, dim, spec, options);
      bytes = first.device_bytes();
      gpu().synchronize();
    }
    {
      cuda::DeviceBuffer<std::byte> poison(bytes);
      poison.fill_bytes(0xFF, gpu().cuda_context().stream());
      gpu().synchronize();
    }
    const H2Device<T> device = h2_build_device<T>(gpu(), points, dim, spec, options);
    EXPECT_FALSE(device.empty()) << what;
    EXPECT_EQ(device.device(), gpu().cuda_context().device()) << what;
    EXPECT_FALSE(device.shape().orthogonal) << what;
    const H2<T> got = h2_download(gpu(), device);

    // The skeleton: exactly the CPU's.
    EXPECT_EQ(got.tree.n, cpu.tree.n) << what;
    EXPECT_EQ(got.tree.dim, cpu.tree.dim) << what;
    EXPECT_EQ(got.tree.depth, cpu.tree.depth) << what;
    EXPECT_EQ(got.tree.leaf_capacity, cpu.tree.leaf_capacity) << what;
    EXPECT_TRUE(same_bits(got.tree.permutation, cpu.tree.permutation)) << what << ": permutation";
    EXPECT_TRUE(same_bits(got.tree.node_begin, cpu.tree.node_begin) && same_bits(got.tree.node_end, cpu.tree.node_end))
        << what << ": node ranges";
    EXPECT_TRUE(same_bits(got.tree.box, cpu.tree.box)) << what << ": boxes";
    expect_same_pairs(got.couplings, cpu.couplings, what + ": coupling pairs");
    expect_same_pairs(got.dense_pairs, cpu.dense_pairs, what + ": dense pairs");
    EXPECT_TRUE(same_bits(got.rank, cpu.rank)) << what << ": ranks";
    EXPECT_TRUE(same_bits(got.transfer_offset, cpu.transfer_offset)) << what << ": transfer offsets";
    EXPECT_TRUE(same_bits(got.coupling_offset, cpu.coupling_offset)) << what << ": coupling offsets";
    EXPECT_EQ(got.orthogonal, cpu.orthogonal) << what;

    // The values, elementwise.
    const ValueDiff diffs[4] = {value_diff(got.leaf_basis, cpu.leaf_basis), value_diff(got.transfer, cpu.transfer),
                                value_diff(got.coupling, cpu.coupling), value_diff(got.dense, cpu.dense)};
    const char* names[4] = {"leaf bases", "transfers", "couplings", "dense blocks"};
    double worst = 0;
    std::cout << "  " << what << ": n " << cpu.tree.n << ", depth " << cpu.tree.depth << ", rank "
              << cpu.rank.back() << ", pairs " << cpu.couplings.count() << " + " << cpu.dense_pairs.count() << " dense;";
    for (int i = 0; i < 4; ++i) {
      EXPECT_TRUE(diffs[i].finite) << what << ": " << names[i] << ": a NaN or infinity (an element left unset?)";
      EXPECT_LE(diffs[i].worst, kUlps) << what << ": " << names[i] << ": |gpu − cpu| in ε·max|value|";
      worst = worse(worst, diffs[i].worst);
      std::cout << " " << names[i] << " " << diffs[i].worst << "ε (" << diffs[i].bit_different << " bit-different)";
    }
    std::cout << "\n";

    // The matvec of the device-built matrix against the CPU's of the CPU-built one.
    const std::int64_t n = cpu.tree.n, nvec = 2;
    const std::vector<T> x = test::random_normal<T>(static_cast<std::size_t>(n * nvec), rng_);
    std::vector<T> y_cpu(x.size()), y_gpu(x.size());
    h2_gemv<T>(cpu_, T(1), cpu, Batch<const T>::packed(x.data(), n, nvec, 1), T(0), Batch<T>::packed(y_cpu.data(), n, nvec, 1));
    const cudaStream_t stream = gpu().cuda_context().stream();
    cuda::DeviceBuffer<T> xd(x.size()), yd(x.size());
    xd.upload(x, stream);
    yd.fill_bytes(0xFF, stream);
    h2_gemv<T>(gpu(), T(1), device, Batch<const T>::packed(xd.data(), n, nvec, 1), T(0), Batch<T>::packed(yd.data(), n, nvec, 1));
    yd.download(y_gpu, stream);
    gpu().synchronize();
    double diff = 0;
    for (std::size_t i = 0; i < x.size(); ++i) diff += std::norm(cd(y_gpu[i]) - cd(y_cpu[i]));
    const double scale = static_cast<double>(std::max<std::int64_t>(n, 1000)) * eps<T>();
    const double relative = std::sqrt(diff) / fro(y_cpu) / scale;
    EXPECT_LE(relative, kRoundingFactor) << what << ": matvec ‖Y_gpu − Y_cpu‖/‖Y_cpu‖ in max(n, 1000)·ε";
    EXPECT_FALSE(std::isnan(relative)) << what << ": matvec";

    // The expanded matrices (both expanded on the CPU), for small n.
    if (expand) {
      std::vector<T> e_cpu(static_cast<std::size_t>(n * n)), e_gpu(e_cpu.size());
      h2_expand<T>(cpu_, cpu, Batch<T>::packed(e_cpu.data(), n, n, 1));
      h2_expand<T>(cpu_, got, Batch<T>::packed(e_gpu.data(), n, n, 1));
      double sum = 0;
      for (std::size_t i = 0; i < e_cpu.size(); ++i) sum += std::norm(cd(e_gpu[i]) - cd(e_cpu[i]));
      EXPECT_LE(std::sqrt(sum) / fro(e_cpu), kRoundingFactor * scale)
          << what << ": ‖A_gpu − A_cpu‖_F/‖A_cpu‖_F of the expanded matrices";
    }
    return worst;
  }

  Exec cpu_ = Exec::cpu(0);
  std::mt19937_64 rng_;
};
TYPED_TEST_SUITE(H2BuildGpu, ElementTypes, ElementName);

// Every kernel of the type in 1-D, 2-D and 3-D: the orders give ranks 8, 36 and 64 (3-D at p = 4)
// with leaf sizes 40, 64 and 50, so that neither m nor k is a multiple of a warp.
TYPED_TEST(H2BuildGpu, MatchesCpuForEveryKernelAndDimension) {
  using T = TypeParam;
  struct Geometry {
    int dim;
    std::int64_t n;
    H2Options options;
  };
  const Geometry geometries[] = {{1, 1500, H2Options{40, 0.8, 8, 0.05}},
                                 {2, 2500, H2Options{64, 1.0, 6, 0.2}},
                                 {3, 3000, H2Options{50, 1.0, 4, 0.1}}};
  for (const H2KernelSpec& spec : kernels<T>()) {
    for (const Geometry& g : geometries) {
      const double extent = spec.kind == H2Kernel::clutter ? 4.0 : 1.0;
      const std::vector<double> p = uniform_points(g.n, g.dim, extent, this->rng_);
      this->compare(p, g.dim, spec, g.options, std::string(kernel_name(spec)) + ", " + std::to_string(g.dim) + "-D");
    }
  }
}

// Small n, where the expanded n × n matrices are compared too; cheb_order 1 (rank 1) and a large p.
TYPED_TEST(H2BuildGpu, ExpandedMatrixMatchesCpu) {
  using T = TypeParam;
  const H2KernelSpec spec = is_complex_v<T> ? H2KernelSpec{H2Kernel::clutter, 1.0, 0.1, 0.5, 1.0, 0.3, 1.2}
                                            : H2KernelSpec{H2Kernel::matern, 1.0, 0.2, 2.5};
  const double extent = is_complex_v<T> ? 3.0 : 1.0;
  for (int dim = 1; dim <= 3; ++dim) {
    const std::vector<double> p = uniform_points(900, dim, extent, this->rng_);
    this->compare(p, dim, spec, H2Options{32, 1.0, dim == 3 ? 3 : 5, 0.4}, "expanded, " + std::to_string(dim) + "-D", true);
    this->compare(p, dim, spec, H2Options{24, 1.5, 1, 0.0}, "cheb_order 1, " + std::to_string(dim) + "-D", true);
  }
  const std::vector<double> p = uniform_points(700, 1, extent, this->rng_);
  this->compare(p, 1, spec, H2Options{48, 0.7, 20, 0.1}, "cheb_order 20, 1-D", true);
}

// One leaf (no couplings: every rank 0, no leaf basis), coincident points (empty nodes and
// leaves), points on a line in the plane (flat boxes, widened), all in 2-D.
TYPED_TEST(H2BuildGpu, MatchesCpuOnEdgeCases) {
  using T = TypeParam;
  const H2KernelSpec spec = is_complex_v<T> ? H2KernelSpec{H2Kernel::clutter, 1.0, 0.1, 0.5, 1.0, -0.2, 0.7}
                                            : H2KernelSpec{H2Kernel::gaussian, 1.0, 0.3};
  const double extent = is_complex_v<T> ? 4.0 : 1.0;
  const H2Options options{32, 1.0, 5, 0.1};

  this->compare(uniform_points(20, 2, extent, this->rng_), 2, spec, options, "one leaf", true);
  this->compare(std::vector<double>(2 * 200, 0.25 * extent), 2, spec, options, "200 copies of one point", true);

  std::vector<double> clumps = uniform_points(1200, 2, extent, this->rng_);
  for (std::size_t i = 0; i < 600; ++i) clumps[2 * i] = 0.1 * extent, clumps[2 * i + 1] = 0.2 * extent;
  const std::vector<double> copies(2 * 300, 0.3 * extent);
  clumps.insert(clumps.end(), copies.begin(), copies.end());
  {
    const H2<T> a = h2_build<T>(this->cpu_, clumps, 2, spec, options);
    int empty = 0;
    for (std::size_t i = 0; i < a.tree.node_begin.size(); ++i) empty += a.tree.node_begin[i] == a.tree.node_end[i];
    EXPECT_GT(empty, 0) << "no empty node: the case tests nothing new";
    std::cout << "  " << empty << " empty nodes\n";
  }
  this->compare(clumps, 2, spec, options, "coincident points", true);

  std::vector<double> line = uniform_points(1000, 2, extent, this->rng_);
  for (std::size_t i = 1; i < line.size(); i += 2) line[i] = 0.5 * extent;
  this->compare(line, 2, spec, options, "on a line in 2-D", true);
}

// At a size where every launch spans many blocks (n = 20000 in 2-D).
TYPED_TEST(H2BuildGpu, MatchesCpuAtScale) {
  using T = TypeParam;
  const H2KernelSpec spec = is_complex_v<T> ? H2KernelSpec{H2Kernel::clutter, 1.0, 0.1, 0.5, 1.0, -0.2, 0.7}
                                            : H2KernelSpec{H2Kernel::matern, 1.0, 0.2, 1.5};
  const std::vector<double> p = uniform_points(20000, 2, is_complex_v<T> ? 4.0 : 1.0, this->rng_);
  this->compare(p, 2, spec, H2Options{64, 1.0, 6, 0.3}, "n = 20000");
}

TEST(H2BuildGpuErrors, BadArgumentsThrowInvalidArgumentNamingThem) {
  COVFLOW_SKIP_WITHOUT_DEVICE();
  Exec& gpu = test::GpuTest::gpu();
  Exec cpu = Exec::cpu(1);
  std::mt19937_64 rng(1);
  const std::vector<double> p = uniform_points(100, 2, 1.0, rng);
  const H2KernelSpec spec{};
  test::expect_invalid_argument([&] { h2_build_device<f64>(cpu, p, 2, spec); }, "h2_build_device: exec must be a CUDA Exec");
  test::expect_invalid_argument([&] { h2_build_device<f64>(gpu, std::span<const double>{}, 2, spec); },
                                "h2_build_device: points: n = 0");
  test::expect_invalid_argument([&] { h2_build_device<f64>(gpu, p, 4, spec); }, "h2_build_device: dim 4 must be 1, 2 or 3");
  test::expect_invalid_argument([&] { h2_build_device<f64>(gpu, p, 0, spec); }, "h2_build_device: dim 0");
  test::expect_invalid_argument([&] { h2_build_device<f64>(gpu, std::span(p).first(7), 2, spec); },
                                "h2_build_device: points: 7 coordinates");
  test::expect_invalid_argument([&] { h2_build_device<f64>(gpu, p, 2, spec, H2Options{0}); },
                                "h2_build_device: leaf_size 0 must be at least 1");
  test::expect_invalid_argument([&] { h2_build_device<f64>(gpu, p, 2, spec, H2Options{16, 1.0, 0}); },
                                "h2_build_device: cheb_order 0");
  test::expect_invalid_argument([&] { h2_build_device<f64>(gpu, p, 2, spec, H2Options{16, 1.0, 33}); },
                                "h2_build_device: cheb_order 33");
  test::expect_invalid_argument([&] { h2_build_device<f64>(gpu, p, 2, spec, H2Options{16, 0.0, 4}); }, "h2_build_device: eta");
  test::expect_invalid_argument([&] { h2_build_device<f64>(gpu, p, 2, spec, H2Options{16, 1.0, 4, -1.0}); },
                                "h2_build_device: nugget");
  std::vector<double> bad = p;
  bad[7] = std::nan("");
  test::expect_invalid_argument([&] { h2_build_device<f64>(gpu, bad, 2, spec); },
                                "h2_build_device: points: coordinate 1 of point 3 is not finite");
  const H2KernelSpec clutter{H2Kernel::clutter};
  test::expect_invalid_argument([&] { h2_build_device<f64>(gpu, p, 2, clutter); }, "h2_build_device: kernel: clutter is a complex");
  test::expect_invalid_argument([&] { h2_build_device<f32>(gpu, p, 2, clutter); }, "element type f32 is real");
  test::expect_invalid_argument([&] { h2_build_device<cf64>(gpu, p, 2, H2KernelSpec{H2Kernel::clutter, 1.0, 0.1, 0.5, 0.0}); },
                                "h2_build_device: kernel: wavelength");
  test::expect_invalid_argument([&] { h2_build_device<cf64>(gpu, p, 2, H2KernelSpec{H2Kernel::clutter, 1.0, 0.1, 0.5, 1.0, 0.0, 7.0}); },
                                "h2_build_device: kernel: sector_width");
  test::expect_invalid_argument([&] { h2_build_device<cf64>(gpu, p, 2, H2KernelSpec{H2Kernel::matern, 1.0, 0.1, 1.0}); },
                                "h2_build_device: kernel: matern nu 1 must be 0.5, 1.5 or 2.5");
  test::expect_invalid_argument([&] { h2_build_device<f64>(gpu, p, 2, H2KernelSpec{H2Kernel::exponential, 1.0, 0.0}); },
                                "h2_build_device: kernel: length");
  test::expect_invalid_argument([&] { h2_build_device<f64>(gpu, p, 2, H2KernelSpec{H2Kernel::gaussian, -1.0, 0.1}); },
                                "h2_build_device: kernel: variance");
  // A CPU Exec is refused before the arguments are looked at.
  test::expect_invalid_argument([&] { h2_build_device<f64>(cpu, p, 4, spec); }, "h2_build_device: exec must be a CUDA Exec");
  gpu.synchronize();
}

}  // namespace
}  // namespace covflow::linalg

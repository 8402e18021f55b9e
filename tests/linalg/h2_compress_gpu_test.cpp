// H² orthogonalisation and compression on the CUDA backend, checked against the CPU's
// h2_orthogonalize and h2_compress of the same H2 (the reference backend, itself checked against
// the expanded matrix in h2_test). Every element type; exponential, Gaussian and Matérn kernels in
// 1-D and 2-D (real and complex types), the radar clutter kernel (complex types); a leaf capacity
// below the rank (the leaf QR is wide); coincident points (empty nodes); compression of an H2Device
// that is already orthogonal and of one that is not; the matvec on the compressed H2Device; the
// argument errors.
//
// Tolerances, in units of n·ε (ε of the element type):
//   orthogonalise  ‖E_gpu − E_cpu‖_F ≤ 10·n·ε·‖E_cpu‖_F (E the expansion: the same matrix, both
//                  rounded), and each basis orthonormal, ‖diag(I_r, 0) − UᴴU‖_F ≤ 10·k·ε (r the
//                  node's useful rank), as h2_test asks of the CPU.
//   compress       the same ranks as the CPU; the measured error ‖E_gpu − E_built‖_F/‖E_built‖_F ≤
//                  tol + 10·n·ε and ≤ report.error_bound + 10·n·ε; ‖E_gpu − E_cpu‖_F ≤ 10·n·ε·‖E_cpu‖_F
//                  (the kept singular subspaces agree up to rounding when no node's cut falls inside
//                  a cluster of near-equal σ; the inputs are random points, where that is rare);
//                  report.norm and node_threshold within 10·n·ε relatively, error_bound within 1% +
//                  n·ε; the device matvec against the CPU matvec of the downloaded result within
//                  0.1·n·ε (h2_gpu_test's bound); the bases orthonormal within 10·k₀·ε, k₀ the
//                  level's rank before compression.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <iostream>
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

// One test problem: the points, the dimension, the kernel and the options.
struct Case {
  std::string what;
  std::vector<double> points;
  int dim = 2;
  H2KernelSpec spec;
  H2Options options;
};

// The cases of an element type (n ≤ 3500): real kernels in 1-D and 2-D, a leaf capacity below the
// rank, coincident points; the clutter kernel for complex types.
template <class T>
std::vector<Case> cases(std::mt19937_64& rng) {
  std::vector<Case> out;
  out.push_back({"exponential 2-D", uniform_points(3000, 2, 1.0, rng), 2, H2KernelSpec{H2Kernel::exponential, 1.0, 0.1},
                 H2Options{64, 0.7, 6, 0.1}});
  out.push_back({"gaussian 1-D", uniform_points(2000, 1, 1.0, rng), 1, H2KernelSpec{H2Kernel::gaussian, 1.0, 0.05},
                 H2Options{32, 1.0, 10, 0.0}});
  out.push_back({"matern 5/2 2-D, leaf 16 < rank 36", uniform_points(1500, 2, 1.0, rng), 2,
                 H2KernelSpec{H2Kernel::matern, 1.0, 0.2, 2.5}, H2Options{16, 1.0, 6, 0.2}});
  std::vector<double> clumps = uniform_points(2500, 2, 1.0, rng);
  for (std::size_t i = 0; i < 1000; ++i) clumps[2 * i] = 0.1, clumps[2 * i + 1] = 0.2;  // 1000 on one point
  out.push_back({"matern 3/2 2-D, coincident points", clumps, 2, H2KernelSpec{H2Kernel::matern, 1.0, 0.2, 1.5},
                 H2Options{64, 1.0, 6, 0.3}});
  if constexpr (is_complex_v<T>) {
    out.push_back({"clutter 2-D", uniform_points(3000, 2, 4.0, rng), 2,
                   H2KernelSpec{H2Kernel::clutter, 1.0, 0.1, 0.5, 1.0, -0.2, 0.7}, H2Options{64, 1.0, 7, 0.3}});
    out.push_back({"clutter 1-D", uniform_points(2000, 1, 8.0, rng), 1,
                   H2KernelSpec{H2Kernel::clutter, 1.0, 0.1, 0.5, 1.0, 0.3, 0.5}, H2Options{32, 1.0, 12, 0.3}});
  }
  return out;
}

// ‖diag(I_r, 0) − UᴴU‖_F / (k·ε), worst over the nodes (inner bases through Σ_c E_cᴴE_c). After
// orthogonalisation r is the node's useful rank: a leaf's min(points, k_L), a parent's
// min(r_{2t} + r_{2t+1}, k_l). After compression (`before` the ranks before it) a node keeps as many
// columns as its own SVD gave it (at most the level's rank): there the diagonal of diag(I_r, 0) is
// UᴴU's rounded to 0 or 1, and the unit is k·ε with k the level's rank before compression — the new
// bases are products of the old orthonormal ones, whose rounding they inherit.
template <class T>
double worst_orthonormality(const H2<T>& a, const std::vector<int>* before = nullptr) {
  const bool compressed = before != nullptr;
  const H2Tree& tree = a.tree;
  const int depth = tree.depth;
  const std::int64_t m = tree.leaf_capacity;
  double worst = 0;
  auto check = [&](int level, std::int64_t useful, const std::function<cd(std::int64_t, std::int64_t)>& gram) {
    const std::int64_t k = a.rank[static_cast<std::size_t>(level)];
    const std::int64_t unit = std::max<std::int64_t>(
        {k, compressed ? std::int64_t{(*before)[static_cast<std::size_t>(level)]} : 0, 1});
    double sum = 0;
    for (std::int64_t j = 0; j < k; ++j)
      for (std::int64_t i = 0; i < k; ++i) {
        const cd g = gram(i, j);
        const bool one = i == j && (compressed ? std::abs(g) > 0.5 : i < useful);
        sum += std::norm(g - (one ? 1.0 : 0.0));
      }
    worst = worse(worst, std::sqrt(sum) / (static_cast<double>(unit) * eps<T>()));
  };
  std::vector<std::int64_t> useful(static_cast<std::size_t>(tree.nodes(depth)));
  const std::int64_t kl = a.rank[static_cast<std::size_t>(depth)];
  for (std::int64_t t = 0; t < tree.nodes(depth); ++t) {
    const T* u = a.leaf(t);
    useful[static_cast<std::size_t>(t)] = std::min<std::int64_t>(tree.size(depth, t), kl);
    check(depth, useful[static_cast<std::size_t>(t)], [&](std::int64_t i, std::int64_t j) {
      cd s = 0;
      for (std::int64_t r = 0; r < m; ++r) s += std::conj(cd(u[r + i * m])) * cd(u[r + j * m]);
      return s;
    });
  }
  for (int l = depth; l >= 1; --l) {
    const std::int64_t kc = a.rank[static_cast<std::size_t>(l)], kp = a.rank[static_cast<std::size_t>(l) - 1];
    std::vector<std::int64_t> parent(static_cast<std::size_t>(tree.nodes(l - 1)));
    for (std::int64_t t = 0; t < tree.nodes(l - 1); ++t) {
      parent[static_cast<std::size_t>(t)] =
          std::min(useful[static_cast<std::size_t>(2 * t)] + useful[static_cast<std::size_t>(2 * t + 1)], kp);
      check(l - 1, parent[static_cast<std::size_t>(t)], [&](std::int64_t i, std::int64_t j) {
        cd s = 0;
        for (int c = 0; c < 2; ++c) {
          const T* e = a.transfer_of(l, 2 * t + c);
          for (std::int64_t r = 0; r < kc; ++r) s += std::conj(cd(e[r + i * kc])) * cd(e[r + j * kc]);
        }
        return s;
      });
    }
    useful = std::move(parent);
  }
  return worst;
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (int k : ranks) {
    out += ' ';
    out += std::to_string(k);
  }
  return out;
}

template <class T>
class H2CompressGpu : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    rng_.seed(test::fresh_seed(std::string("H2CompressGpu.") + std::string(name(element_type_of<T>()))));
  }
  Exec& gpu() { return test::GpuTest::gpu(); }

  // The device matvec of `device` against the CPU matvec of `host` (the same H2, downloaded):
  // ‖Y_gpu − Y_cpu‖_F/‖Y_cpu‖_F in n·ε, for 3 vectors.
  double matvec_difference(const H2<T>& host, const H2Device<T>& device) {
    const std::int64_t n = host.tree.n, nvec = 3;
    const std::vector<T> x = test::random_normal<T>(static_cast<std::size_t>(n * nvec), rng_);
    std::vector<T> y_cpu(x.size(), test::poison<T>()), y_gpu(x.size());
    h2_gemv<T>(cpu_, T(1), host, Batch<const T>::packed(x.data(), n, nvec, 1), T(0), Batch<T>::packed(y_cpu.data(), n, nvec, 1));
    const cudaStream_t stream = gpu().cuda_context().stream();
    cuda::DeviceBuffer<T> xd(x.size()), yd(x.size());
    xd.upload(x, stream);
    yd.fill_bytes(0xFF, stream);
    h2_gemv<T>(gpu(), T(1), device, Batch<const T>::packed(xd.data(), n, nvec, 1), T(0), Batch<T>::packed(yd.data(), n, nvec, 1));
    yd.download(y_gpu, stream);
    gpu().synchronize();
    return diff_norm(y_gpu, y_cpu) / norm(y_cpu) / (static_cast<double>(n) * eps<T>());
  }

  Exec cpu_ = Exec::cpu(0);
  std::mt19937_64 rng_;
};
TYPED_TEST_SUITE(H2CompressGpu, ElementTypes, ElementName);

TYPED_TEST(H2CompressGpu, OrthogonalizeMatchesCpu) {
  using T = TypeParam;
  for (const Case& c : cases<T>(this->rng_)) {
    const H2<T> built = h2_build<T>(this->cpu_, c.points, c.dim, c.spec, c.options);
    const std::int64_t n = built.tree.n;
    H2<T> cpu = built;
    h2_orthogonalize(this->cpu_, cpu);
    H2Device<T> device = h2_upload(this->gpu(), built);
    h2_orthogonalize(this->gpu(), device);
    EXPECT_TRUE(device.shape().orthogonal) << c.what;
    const H2<T> gpu = h2_download(this->gpu(), device);
    ASSERT_EQ(gpu.rank, cpu.rank) << c.what << ": GPU ranks" << ranks_text(gpu.rank) << ", CPU" << ranks_text(cpu.rank);
    const std::vector<T> e_cpu = expand(this->cpu_, cpu), e_gpu = expand(this->cpu_, gpu), e_built = expand(this->cpu_, built);
    const double unit = static_cast<double>(n) * eps<T>();
    const double vs_cpu = diff_norm(e_gpu, e_cpu) / norm(e_cpu) / unit, vs_built = diff_norm(e_gpu, e_built) / norm(e_built) / unit;
    const double orthonormality = worst_orthonormality(gpu);
    std::cout << "  " << c.what << ": n " << n << ", ranks" << ranks_text(built.rank) << " →" << ranks_text(gpu.rank)
              << "; ‖E_gpu − E_cpu‖ " << vs_cpu << " n·ε, ‖E_gpu − E_built‖ " << vs_built << " n·ε, bases "
              << orthonormality << " k·ε\n";
    EXPECT_LE(vs_cpu, 10.0) << c.what;
    EXPECT_LE(vs_built, 10.0) << c.what;
    EXPECT_LE(orthonormality, 10.0) << c.what;
  }
}

TYPED_TEST(H2CompressGpu, CompressMatchesCpu) {
  using T = TypeParam;
  const std::vector<double> tolerances = std::is_same_v<real_t<T>, float> ? std::vector<double>{1e-2, 1e-3}
                                                                          : std::vector<double>{1e-2, 1e-5, 1e-8};
  for (const Case& c : cases<T>(this->rng_)) {
    const H2<T> built = h2_build<T>(this->cpu_, c.points, c.dim, c.spec, c.options);
    const std::int64_t n = built.tree.n;
    const double unit = static_cast<double>(n) * eps<T>();
    const std::vector<T> e_built = expand(this->cpu_, built);
    const double built_norm = norm(e_built);
    H2<T> orthogonal = built;
    h2_orthogonalize(this->cpu_, orthogonal);
    for (double tol : tolerances) {
      // Once from the built H2 (the GPU orthogonalises first), once from an orthogonal one.
      for (const bool from_orthogonal : {false, true}) {
        H2<T> cpu = from_orthogonal ? orthogonal : built;
        const H2CompressReport expected = h2_compress(this->cpu_, cpu, tol);
        H2Device<T> device = h2_upload(this->gpu(), from_orthogonal ? orthogonal : built);
        const H2CompressReport got = h2_compress(this->gpu(), device, tol);
        const std::string what = c.what + ", tol " + std::to_string(tol) + (from_orthogonal ? ", from orthogonal" : "");
        EXPECT_EQ(got.ranks_before, expected.ranks_before) << what;
        ASSERT_EQ(got.ranks_after, expected.ranks_after)
            << what << ": GPU ranks" << ranks_text(got.ranks_after) << ", CPU" << ranks_text(expected.ranks_after);
        EXPECT_EQ(device.shape().rank, got.ranks_after) << what;
        EXPECT_TRUE(device.shape().orthogonal) << what;
        EXPECT_EQ(got.bytes_before, expected.bytes_before) << what;
        EXPECT_EQ(got.bytes_after, expected.bytes_after) << what;
        EXPECT_EQ(got.tolerance, tol) << what;
        EXPECT_LE(std::abs(got.norm - expected.norm), 10 * unit * expected.norm) << what;
        EXPECT_LE(std::abs(got.node_threshold - expected.node_threshold), 10 * unit * expected.node_threshold) << what;
        EXPECT_LE(std::abs(got.error_bound - expected.error_bound), 0.01 * expected.error_bound + unit) << what;
        EXPECT_LE(got.error_bound, tol * (1 + 1e-12)) << what;

        const H2<T> gpu = h2_download(this->gpu(), device);
        EXPECT_EQ(h2_bytes(gpu), got.bytes_after) << what;
        const std::vector<T> e_gpu = expand(this->cpu_, gpu), e_cpu = expand(this->cpu_, cpu);
        const double error = diff_norm(e_gpu, e_built) / built_norm;
        const double vs_cpu = diff_norm(e_gpu, e_cpu) / norm(e_cpu) / unit;
        const double orthonormality = worst_orthonormality(gpu, &got.ranks_before);
        const double matvec = this->matvec_difference(gpu, device);
        std::cout << "  " << what << ": ranks" << ranks_text(got.ranks_before) << " →" << ranks_text(got.ranks_after)
                  << "; error " << error << " (bound " << got.error_bound << ", CPU " << expected.error_bound
                  << "), ‖E_gpu − E_cpu‖ " << vs_cpu << " n·ε, bases " << orthonormality << " k·ε, matvec " << matvec
                  << " n·ε\n";
        EXPECT_LE(error, tol + 10 * unit) << what;
        EXPECT_LE(error, got.error_bound + 10 * unit) << what;
        EXPECT_LE(vs_cpu, 10.0) << what;
        EXPECT_LE(orthonormality, 10.0) << what;
        EXPECT_LE(matvec, 0.1) << what;
      }
    }
  }
}

TEST(H2CompressGpuErrors, BadArgumentsThrowInvalidArgumentNamingThem) {
  COVFLOW_SKIP_WITHOUT_DEVICE();
  Exec& gpu = test::GpuTest::gpu();
  Exec cpu = Exec::cpu(2);
  std::mt19937_64 rng(1);
  const std::vector<double> p = uniform_points(400, 2, 1.0, rng);
  const H2<f64> a = h2_build<f64>(cpu, p, 2, H2KernelSpec{H2Kernel::exponential, 1.0, 0.2}, H2Options{32, 1.0, 4});
  H2Device<f64> device = h2_upload(gpu, a);
  test::expect_invalid_argument([&] { h2_compress(gpu, device, 0.0); }, "h2_compress: tol 0 must be positive and finite");
  test::expect_invalid_argument([&] { h2_compress(gpu, device, -1e-3); }, "h2_compress: tol -0.001");
  test::expect_invalid_argument([&] { h2_compress(gpu, device, std::nan("")); }, "h2_compress: tol nan");
  test::expect_invalid_argument([&] { h2_compress(gpu, device, INFINITY); }, "h2_compress: tol inf");
  test::expect_invalid_argument([&] { h2_compress(cpu, device, 1e-3); }, "h2_compress: exec must be a CUDA Exec");
  test::expect_invalid_argument([&] { h2_orthogonalize(cpu, device); }, "h2_orthogonalize: exec must be a CUDA Exec");
  H2Device<f64> none;
  test::expect_invalid_argument([&] { h2_compress(gpu, none, 1e-3); }, "h2_compress: A is an empty H2Device");
  test::expect_invalid_argument([&] { h2_orthogonalize(gpu, none); }, "h2_orthogonalize: A is an empty H2Device");
  // A failed call leaves the H2Device as it was.
  EXPECT_FALSE(device.empty());
  EXPECT_EQ(device.shape().rank, a.rank);
  gpu.synchronize();
}

}  // namespace
}  // namespace covflow::linalg

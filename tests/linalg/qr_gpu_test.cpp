// geqrf / ungqr / unmqr on the CUDA backend, through the public API, against double-precision
// LAPACK (lowrank_cases.hpp): ‖A − QR‖_F/‖A‖_F and ‖QᴴQ − I‖_F ≤ 10·n·ε (n = max(m, n)), |R_ii|
// against LAPACK's within 10·n·ε·‖A‖_F (times κ(A) for an ill-conditioned A) — on ?latms matrices,
// rank-deficient, graded and radar-snapshot matrices, on every organisation of the CUDA path: one
// block per matrix (n ≤ 32), panels of one block each (33 … 512, wide 33 × 64 … 64 × 300),
// tall-skinny panels split over a cluster of blocks (1000 × 100, 4096 × 64, 16384 × 32) and the
// global-memory fallback (20000 × 3); batches of 1, 7 and 1000. unmqr in its four
// side/op combinations against an explicit Q; a NaN or an Inf in one matrix flags that matrix and
// leaves the others bit for bit as in a clean run; strided batches; no call takes workspace.
// Every output is poisoned (NaN, info 0x7eadbeef) before a run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/qr.hpp"
#include "lowrank_cases.hpp"
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

using test::LowrankCase;
using test::LowrankKind;
using test::LowrankSpec;
using test::precise_t;
using test::QrErrors;

constexpr int info_poison = 0x7eadbeef;

std::string shape_name(int m, int n) { return std::to_string(m) + "×" + std::to_string(n); }

std::vector<int> all_indices(int count) {
  std::vector<int> out(count);
  for (int b = 0; b < count; ++b) out[b] = b;
  return out;
}

// Every `step`-th matrix, and the last.
std::vector<int> sampled_indices(int count, int step) {
  std::vector<int> out;
  for (int b = 0; b < count; b += step) out.push_back(b);
  if (out.back() != count - 1) out.push_back(count - 1);
  return out;
}

// Batches by size: 7 small matrices, fewer large ones (the host checks in long double are O(n³)).
int batch_for(int m, int n) {
  const long long elements = static_cast<long long>(m) * n;
  return elements <= 64 * 64 ? 7 : elements <= 256 * 256 ? 2 : 1;
}

// The shapes of the suite: square around the organisations' limits, wide (m < n), tall.
const std::vector<std::pair<int, int>>& square_shapes() {
  static const std::vector<std::pair<int, int>> shapes = {{1, 1},   {2, 2},     {17, 17},   {31, 31},
                                                           {32, 32}, {33, 33},   {64, 64},   {100, 100},
                                                           {128, 128}, {256, 256}, {512, 512}};
  return shapes;
}
const std::vector<std::pair<int, int>>& wide_shapes() {
  static const std::vector<std::pair<int, int>> shapes = {{1, 5}, {2, 17}, {17, 31}, {33, 64}, {32, 100}, {64, 300}};
  return shapes;
}
const std::vector<std::pair<int, int>>& tall_shapes() {
  static const std::vector<std::pair<int, int>> shapes = {{100, 17}, {512, 32}, {1000, 100}, {4096, 64}, {16384, 32},
                                                         {20000, 3}};
  return shapes;
}
// 512 × 512: the host's long-double checks take seconds per matrix there, so those shapes run one
// case per test rather than every kind.
bool heavy(int m, int n) { return double(m) * n * std::min(m, n) > 4e7; }

std::vector<std::pair<int, int>> every_shape() {
  std::vector<std::pair<int, int>> out = square_shapes();
  out.insert(out.end(), wide_shapes().begin(), wide_shapes().end());
  out.insert(out.end(), tall_shapes().begin(), tall_shapes().end());
  return out;
}

template <class T>
struct GeqrfRun {
  std::vector<T> a;  // R and the reflectors
  std::vector<T> tau;
  std::vector<int> info;
};

// geqrf on the device on a copy of `input` (count packed m×n matrices), tau and info poisoned.
template <class T>
GeqrfRun<T> run_geqrf(Exec& exec, const std::vector<T>& input, int m, int n, int count) {
  cudaStream_t stream = exec.cuda_context().stream();
  const int k = std::min(m, n);
  cuda::DeviceBuffer<T> a(input.size()), tau(std::size_t(count) * k);
  cuda::DeviceBuffer<int> info(count);
  a.upload(input, stream);
  tau.fill_bytes(0xFF, stream);
  std::vector<int> poisoned(count, info_poison);
  info.upload(poisoned, stream);
  geqrf<T>(exec, Batch<T>::packed(a.data(), m, n, count), {tau.data(), tau.size()}, {info.data(), info.size()});
  GeqrfRun<T> run{std::vector<T>(input.size()), std::vector<T>(tau.size()), std::vector<int>(count)};
  a.download(run.a, stream);
  tau.download(run.tau, stream);
  info.download(run.info, stream);
  exec.synchronize();
  return run;
}
template <class T>
GeqrfRun<T> run_geqrf(Exec& exec, const LowrankCase<T>& c) {
  return run_geqrf(exec, c.a, c.m(), c.n(), c.count());
}

// Worst errors per kind over a test, printed at its end.
class QrErrorTable {
 public:
  void add(LowrankKind kind, const QrErrors& e) { rows_[kind] = test::max_errors(rows_[kind], e); }
  void print(const std::string& title) const {
    std::printf("[ errors   ] %s — max in units of n·ε (tolerance %.0f; R diagonal also × κ)\n", title.c_str(),
                test::lowrank_tolerance);
    for (const auto& [kind, e] : rows_)
      std::printf("[ errors   ] %-15s residual %7.3f  orthogonality %7.3f  |R_ii| %9.3g\n", test::name(kind).c_str(),
                  e.residual, e.orthogonality, e.r_diagonal);
    std::fflush(stdout);
  }

 private:
  std::map<LowrankKind, QrErrors> rows_;
};

template <class T>
double big_condition() {
  return std::is_same_v<real_t<T>, float> ? 1e5 : 1e10;
}

template <class T>
class QrGpu : public test::GpuTest {};
struct ElementName {
  template <class T>
  static std::string GetName(int) {
    return std::string(name(element_type_of<T>()));
  }
};
using ElementTypes = ::testing::Types<cf64, f64, cf32, f32>;
TYPED_TEST_SUITE(QrGpu, ElementTypes, ElementName);

// ?latms matrices on every shape: mode 3 (geometric σ) at κ = 10 with |R_ii| compared to LAPACK's,
// and an ill-conditioned one (mode 5 at κ = 10⁵ / 10¹⁰, mode 1 at the same κ every other shape)
// with the |R_ii| bound scaled by κ.
TYPED_TEST(QrGpu, GeqrfLatmsOnEveryShape) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("geqrf gpu latms"));
  QrErrorTable table;
  int shape_index = 0;
  for (const auto& [m, n] : every_shape()) {
    const int count = batch_for(m, n);
    const int ill_mode = shape_index++ % 2 == 0 ? 5 : 1;
    for (const auto& [mode, cond] : std::vector<std::pair<int, double>>{{3, 10.0}, {ill_mode, big_condition<T>()}}) {
      if (heavy(m, n) && mode != 3) continue;
      const LowrankCase<T> c = test::make_lowrank_case<T>(test::latms_spec(m, n, count, mode, cond), rng);
      const GeqrfRun<T> run = run_geqrf(exec, c);
      table.add(c.spec.kind, test::expect_geqrf_results(c, run.a.data(), run.tau.data(), run.info.data(),
                                                         all_indices(count), "geqrf gpu " + shape_name(m, n), cond));
    }
  }
  table.print("geqrf gpu latms " + std::string(name(element_type_of<T>())));
}

// Rank-deficient (rank 0, 1, k/2), graded (column scales over 10⁶ / 10¹²) and radar snapshots on
// every shape: residual and orthogonality (R's trailing diagonal follows directions rounding picks).
TYPED_TEST(QrGpu, GeqrfRankDeficientGradedRadar) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("geqrf gpu kinds"));
  QrErrorTable table;
  const double spread = std::is_same_v<real_t<T>, float> ? 1e6 : 1e12;
  for (const auto& [m, n] : every_shape()) {
    const int k = std::min(m, n), count = batch_for(m, n);
    std::vector<LowrankSpec> specs;
    for (const int rank : {0, 1, k / 2})
      if ((rank < k || rank == 0) && (!heavy(m, n) || rank == k / 2))
        specs.push_back(test::rank_deficient_spec(m, n, count, rank));
    if (!heavy(m, n)) {
      specs.push_back(test::graded_spec(m, n, count, spread));
      specs.push_back(test::radar_spec(m, n, count));
    }
    for (const LowrankSpec& spec : specs) {
      const LowrankCase<T> c = test::make_lowrank_case<T>(spec, rng);
      const GeqrfRun<T> run = run_geqrf(exec, c);
      table.add(c.spec.kind, test::expect_geqrf_results(c, run.a.data(), run.tau.data(), run.info.data(),
                                                         all_indices(count), "geqrf gpu " + shape_name(m, n)));
    }
  }
  table.print("geqrf gpu " + std::string(name(element_type_of<T>())));
}

// Rank 1 with every row the same (the last two rows zero, as the zero padding of an H² leaf basis
// whose points coincide): each reflector leaves the trailing columns' tails equal again, about ε
// times smaller, so that after some 20 columns (5 in single precision) they are subnormal — where
// 1/‖x‖ and 1/(α − β) overflow unless the reflector is formed with care. Every output finite,
// info 0, residual and orthogonality as for any matrix; on each organisation.
TYPED_TEST(QrGpu, GeqrfRepeatedRowsStaysFinite) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("geqrf gpu repeated rows"));
  QrErrorTable table;
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{
           {64, 36}, {72, 36}, {32, 32}, {62, 20}, {200, 32}, {64, 64}, {1000, 100}, {20000, 3}}) {
    const int count = 3, k = std::min(m, n);
    LowrankCase<T> c = test::make_lowrank_case<T>(test::rank_deficient_spec(m, n, count, 1), rng);
    const std::vector<T> rows = test::make_lowrank_case<T>(test::random_spec(1, n, count), rng).a;
    for (int b = 0; b < count; ++b)
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i)
          c.a[std::size_t(b) * m * n + std::size_t(j) * m + i] = i < m - 2 || m <= 4 ? rows[std::size_t(b) * n + j] : T(0);
    const GeqrfRun<T> run = run_geqrf(exec, c);
    const std::string where = "geqrf gpu repeated rows " + shape_name(m, n);
    std::size_t not_finite = 0;
    for (const T& v : run.a) not_finite += std::isfinite(std::real(v)) && std::isfinite(std::imag(v)) ? 0 : 1;
    for (std::size_t e = 0; e < std::size_t(count) * k; ++e)
      not_finite += std::isfinite(std::real(run.tau[e])) && std::isfinite(std::imag(run.tau[e])) ? 0 : 1;
    EXPECT_EQ(not_finite, 0u) << where << ": elements of R, the reflectors or tau not finite";
    table.add(c.spec.kind, test::expect_geqrf_results(c, run.a.data(), run.tau.data(), run.info.data(),
                                                       all_indices(count), where));
  }
  table.print("geqrf gpu repeated rows " + std::string(name(element_type_of<T>())));
}

// Batches of 1000 (the benchmark's sizes): a sample of the matrices checked against LAPACK, |R_ii|
// included (κ = 10).
TYPED_TEST(QrGpu, GeqrfBatchOf1000) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("geqrf gpu batch 1000"));
  QrErrorTable table;
  for (const int n : {32, 64}) {
    const LowrankCase<T> c = test::make_lowrank_case<T>(test::latms_spec(n, n, 1000, 4, 10.0), rng);
    const GeqrfRun<T> run = run_geqrf(exec, c);
    for (int b = 0; b < c.count(); ++b) ASSERT_EQ(run.info[b], 0) << c.label() << " b=" << b;
    table.add(c.spec.kind, test::expect_geqrf_results(c, run.a.data(), run.tau.data(), run.info.data(),
                                                       sampled_indices(c.count(), 13), "geqrf gpu batch 1000", 10.0));
  }
  table.print("geqrf gpu batch 1000 " + std::string(name(element_type_of<T>())));
}

// A strided batch (ld > m, gaps between matrices) gives bit for bit the packed batch's result and
// leaves the padding alone, on each organisation.
TYPED_TEST(QrGpu, GeqrfStridedBatchMatchesPacked) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  cudaStream_t stream = exec.cuda_context().stream();
  std::mt19937_64 rng(test::fresh_seed("geqrf gpu strided"));
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{17, 17}, {33, 5}, {5, 33}, {200, 200}, {3000, 40}}) {
    const int count = 3, k = std::min(m, n);
    const LowrankCase<T> c = test::make_lowrank_case<T>(test::random_spec(m, n, count), rng);
    const GeqrfRun<T> packed = run_geqrf(exec, c);
    const std::int64_t ld = m + 3, stride = ld * n + 5;
    const T pad = T(12345);
    std::vector<T> host(std::size_t(stride) * count, pad);
    for (int b = 0; b < count; ++b)
      for (int j = 0; j < n; ++j) std::copy_n(c.matrix(b) + std::size_t(j) * m, m, host.data() + b * stride + j * ld);
    cuda::DeviceBuffer<T> a(host.size()), tau(std::size_t(count) * k);
    cuda::DeviceBuffer<int> info(count);
    a.upload(host, stream);
    tau.fill_bytes(0xFF, stream);
    info.fill_bytes(0x7E, stream);
    geqrf<T>(exec, Batch<T>{a.data(), m, n, ld, stride, count}, {tau.data(), tau.size()}, {info.data(), info.size()});
    std::vector<T> out(host.size()), out_tau(tau.size());
    std::vector<int> out_info(count);
    a.download(out, stream);
    tau.download(out_tau, stream);
    info.download(out_info, stream);
    exec.synchronize();
    const std::string where = shape_name(m, n) + " " + c.label();
    EXPECT_EQ(std::memcmp(out_tau.data(), packed.tau.data(), out_tau.size() * sizeof(T)), 0) << where << ": tau";
    EXPECT_EQ(out_info, packed.info) << where;
    for (int b = 0; b < count; ++b)
      for (int j = 0; j < n; ++j) {
        EXPECT_EQ(std::memcmp(out.data() + b * stride + j * ld,
                              packed.a.data() + std::size_t(b) * m * n + std::size_t(j) * m, m * sizeof(T)),
                  0)
            << where << ": b=" << b << " column " << j;
        for (std::int64_t i = m; i < ld && (j + 1 < n || b + 1 < count); ++i)
          EXPECT_EQ(out[b * stride + j * ld + i], pad) << where << ": padding written at b=" << b << " column " << j;
      }
  }
}

// A NaN in one matrix and an Inf in another: both flagged, their R, reflectors and tau NaN, every
// other matrix bit for bit as in a clean run — on each organisation.
TYPED_TEST(QrGpu, GeqrfNonFiniteInputFlagsOnlyThatMatrix) {
  using T = TypeParam;
  using R = real_t<T>;
  Exec& exec = test::GpuTest::gpu();
  std::mt19937_64 rng(test::fresh_seed("geqrf gpu non-finite"));
  for (const auto& [m, n] :
       std::vector<std::pair<int, int>>{{1, 1}, {17, 17}, {33, 8}, {8, 33}, {128, 128}, {300, 300}, {4096, 64}, {20000, 3}}) {
    const int count = 7, k = std::min(m, n), with_nan = 2, with_inf = 5;
    const LowrankCase<T> clean = test::make_lowrank_case<T>(test::random_spec(m, n, count), rng);
    std::vector<T> dirty = clean.a;
    const std::size_t mn = std::size_t(m) * n;
    dirty[with_nan * mn + mn / 2] = T(std::numeric_limits<R>::quiet_NaN());
    dirty[with_inf * mn + mn - 1] = T(-std::numeric_limits<R>::infinity());
    const GeqrfRun<T> reference = run_geqrf(exec, clean);
    const GeqrfRun<T> run = run_geqrf(exec, dirty, m, n, count);
    const std::string where = shape_name(m, n) + " " + clean.label();
    for (int b = 0; b < count; ++b) {
      if (b == with_nan || b == with_inf) {
        EXPECT_EQ(run.info[b], status::non_finite_input) << where << ": b=" << b;
        std::size_t not_nan = 0;
        for (std::size_t e = 0; e < mn; ++e) not_nan += std::isnan(std::real(run.a[b * mn + e])) ? 0 : 1;
        EXPECT_EQ(not_nan, 0u) << where << ": b=" << b << " has elements that are not NaN";
        for (int i = 0; i < k; ++i) EXPECT_TRUE(std::isnan(std::real(run.tau[b * k + i]))) << where << ": tau";
      } else {
        EXPECT_EQ(run.info[b], status::ok) << where << ": b=" << b;
        EXPECT_EQ(std::memcmp(run.a.data() + b * mn, reference.a.data() + b * mn, mn * sizeof(T)), 0)
            << where << ": b=" << b << " differs from the clean run";
        EXPECT_EQ(std::memcmp(run.tau.data() + b * k, reference.tau.data() + b * k, k * sizeof(T)), 0)
            << where << ": tau of b=" << b << " differs from the clean run";
      }
    }
  }
}

// ungqr forms the thin Q on the device: tall and square matrices from their n reflectors, wide ones
// from the leading m×m block of geqrf's output; Q (in T, as ungqr wrote it) times geqrf's R
// reproduces A and Q has orthonormal columns.
TYPED_TEST(QrGpu, UngqrFormsTheThinQ) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  cudaStream_t stream = exec.cuda_context().stream();
  std::mt19937_64 rng(test::fresh_seed("ungqr gpu"));
  QrErrorTable table;
  for (const auto& [m, n] : every_shape()) {
    const int k = std::min(m, n), count = batch_for(m, n);
    for (const LowrankSpec& spec : {test::latms_spec(m, n, count, 3, big_condition<T>()),
                                    test::rank_deficient_spec(m, n, count, k / 2)}) {
      if (heavy(m, n) && spec.kind != LowrankKind::latms) continue;
      const LowrankCase<T> c = test::make_lowrank_case<T>(spec, rng);
      const GeqrfRun<T> run = run_geqrf(exec, c);
      std::vector<T> r(std::size_t(count) * k * n, T(0));
      for (int b = 0; b < count; ++b)
        for (int j = 0; j < n; ++j)
          for (int i = 0; i <= std::min(j, k - 1); ++i)
            r[std::size_t(b) * k * n + i + std::size_t(j) * k] = run.a[std::size_t(b) * m * n + i + std::size_t(j) * m];
      // The leading m × k block (all of a tall A, the m × m block of a wide one; ld = m either way).
      std::vector<T> factored = run.a;
      cuda::DeviceBuffer<T> a(factored.size()), tau(run.tau.size());
      a.upload(factored, stream);
      tau.upload(run.tau, stream);
      ungqr<T>(exec, Batch<T>{a.data(), m, k, m, std::int64_t(m) * n, count}, {tau.data(), tau.size()});
      a.download(factored, stream);
      exec.synchronize();
      for (int b = 0; b < count; ++b) {
        const QrErrors e = test::qr_errors_explicit(c.matrix(b), m, n, factored.data() + std::size_t(b) * m * n,
                                                    r.data() + std::size_t(b) * k * n);
        const std::string where = "ungqr gpu [" + c.label() + " b=" + std::to_string(b) + "]";
        EXPECT_LE(e.residual, test::lowrank_tolerance) << where << ": ‖A − QR‖_F/‖A‖_F = " << e.residual << " n·ε";
        EXPECT_LE(e.orthogonality, test::lowrank_tolerance) << where << ": ‖QᴴQ − I‖_F = " << e.orthogonality << " n·ε";
        table.add(c.spec.kind, e);
      }
    }
  }
  table.print("ungqr gpu " + std::string(name(element_type_of<T>())));
}

// The full r×r Q = H₁…H_k of the k reflectors in v (r × k, leading dimension ld) and tau, formed in
// double from the stored reflectors.
template <class T>
std::vector<precise_t<T>> explicit_q(const T* v, std::int64_t ld, const T* tau, int r, int k) {
  using D = precise_t<T>;
  std::vector<D> q(std::size_t(r) * r, D(0));
  for (int i = 0; i < r; ++i) q[i + std::size_t(i) * r] = D(1);
  std::vector<D> reflector(r);
  for (int i = k - 1; i >= 0; --i) {
    std::fill(reflector.begin(), reflector.end(), D(0));
    reflector[i] = D(1);
    for (int row = i + 1; row < r; ++row) reflector[row] = D(v[row + i * ld]);
    const D t = D(tau[i]);
    for (int j = 0; j < r; ++j) {
      D dot = D(0);
      for (int row = i; row < r; ++row) {
        if constexpr (is_complex_v<D>) dot += std::conj(reflector[row]) * q[row + std::size_t(j) * r];
        else dot += reflector[row] * q[row + std::size_t(j) * r];
      }
      for (int row = i; row < r; ++row) q[row + std::size_t(j) * r] -= t * dot * reflector[row];
    }
  }
  return q;
}

// unmqr, Side::left and right × Op::none and conj_trans, against the product with the explicit Q
// in double: ‖C_out − op(Q)·C‖_F / ‖C‖_F (or C·op(Q)) ≤ 10·r·ε. A and C strided, C's padding
// poisoned and checked untouched.
TYPED_TEST(QrGpu, UnmqrMatchesTheExplicitQ) {
  using T = TypeParam;
  using D = precise_t<T>;
  Exec& exec = test::GpuTest::gpu();
  cudaStream_t stream = exec.cuda_context().stream();
  std::mt19937_64 rng(test::fresh_seed("unmqr gpu"));
  double worst = 0;
  for (const int r : {1, 2, 17, 33, 64, 128, 300})
    for (const int k : {1, std::max(1, r / 2), r}) {
      const int count = r <= 64 ? 7 : 2;
      const LowrankCase<T> reflectors = test::make_lowrank_case<T>(test::random_spec(r, k, count), rng);
      const GeqrfRun<T> qr = run_geqrf(exec, reflectors);
      const std::int64_t lda = r + 1, stride_a = lda * k;
      std::vector<T> a(std::size_t(stride_a) * count, test::poison<T>());
      std::vector<std::vector<D>> q(count);
      for (int b = 0; b < count; ++b) {
        for (int j = 0; j < k; ++j)
          std::copy_n(qr.a.data() + std::size_t(b) * r * k + std::size_t(j) * r, r, a.data() + b * stride_a + j * lda);
        q[b] = explicit_q(a.data() + b * stride_a, lda, qr.tau.data() + std::size_t(b) * k, r, k);
      }
      cuda::DeviceBuffer<T> da(a.size()), dtau(qr.tau.size());
      da.upload(a, stream);
      dtau.upload(qr.tau, stream);
      for (const int other : {1, 5, 40})
        for (const Side side : {Side::left, Side::right})
          for (const Op op : {Op::none, Op::conj_trans}) {
            const int m_c = side == Side::left ? r : other, n_c = side == Side::left ? other : r;
            const LowrankCase<T> c = test::make_lowrank_case<T>(test::random_spec(m_c, n_c, count), rng);
            const std::int64_t ldc = m_c + 2, stride_c = ldc * n_c + 3;
            std::vector<T> out(std::size_t(stride_c) * count, test::poison<T>());
            for (int b = 0; b < count; ++b)
              for (int j = 0; j < n_c; ++j)
                std::copy_n(c.matrix(b) + std::size_t(j) * m_c, m_c, out.data() + b * stride_c + j * ldc);
            cuda::DeviceBuffer<T> dc(out.size());
            dc.upload(out, stream);
            unmqr<T>(exec, side, op, Batch<const T>{da.data(), r, k, lda, stride_a, count}, {dtau.data(), dtau.size()},
                     Batch<T>{dc.data(), m_c, n_c, ldc, stride_c, count});
            dc.download(out, stream);
            exec.synchronize();
            for (int b = 0; b < count; ++b) {
              auto op_q = [&](int i, int j) {
                if (op == Op::none) return q[b][i + std::size_t(j) * r];
                if constexpr (is_complex_v<D>) return std::conj(q[b][j + std::size_t(i) * r]);
                else return q[b][j + std::size_t(i) * r];
              };
              const T* input = c.matrix(b);
              double error2 = 0, norm2 = 0;
              for (int j = 0; j < n_c; ++j)
                for (int i = 0; i < m_c; ++i) {
                  D expected = D(0);
                  if (side == Side::left)
                    for (int l = 0; l < r; ++l) expected += op_q(i, l) * D(input[l + std::size_t(j) * m_c]);
                  else
                    for (int l = 0; l < r; ++l) expected += D(input[i + std::size_t(l) * m_c]) * op_q(l, j);
                  error2 += std::norm(D(out[b * stride_c + j * ldc + i]) - expected);
                  norm2 += std::norm(D(input[i + std::size_t(j) * m_c]));
                }
              const double error = std::sqrt(error2) / std::sqrt(norm2) / (r * test::eps<T>());
              worst = std::max(worst, std::isnan(error) ? std::numeric_limits<double>::infinity() : error);
              EXPECT_LE(error, test::lowrank_tolerance)
                  << "unmqr gpu side=" << static_cast<char>(side) << " op=" << static_cast<char>(op) << " r=" << r
                  << " k=" << k << " C " << shape_name(m_c, n_c) << " b=" << b << " [" << reflectors.label() << "; "
                  << c.label() << "]: ‖C − op(Q)C‖_F/‖C‖_F = " << error << " r·ε";
              bool padding = true;
              for (int j = 0; j < n_c; ++j)
                for (std::int64_t i = m_c; i < ldc; ++i) padding = padding && std::isnan(std::real(out[b * stride_c + j * ldc + i]));
              EXPECT_TRUE(padding) << "unmqr gpu wrote C's padding (r=" << r << " k=" << k << ")";
            }
          }
    }
  std::printf("[ errors   ] unmqr gpu %s — max ‖C − op(Q)·C‖_F/‖C‖_F %.3f r·ε (tolerance %.0f)\n",
              std::string(name(element_type_of<T>())).c_str(), worst, test::lowrank_tolerance);
}

// Tall reflectors (4096 × 64, rows split over a cluster; 20000 × 3, the global-memory path), where
// an explicit 4096² Q is too large to check against: unmqr(left, none) of [I; 0] equals ungqr's
// thin Q, Qᴴ(Q·C) returns C, and C·Q·Qᴴ returns C (right side), each within 10·r·ε.
TYPED_TEST(QrGpu, UnmqrTallRoundTrips) {
  using T = TypeParam;
  using D = precise_t<T>;
  Exec& exec = test::GpuTest::gpu();
  cudaStream_t stream = exec.cuda_context().stream();
  std::mt19937_64 rng(test::fresh_seed("unmqr gpu tall"));
  for (const auto& [r, k] : std::vector<std::pair<int, int>>{{4096, 64}, {20000, 3}}) {
    const int count = 2;
    const LowrankCase<T> reflectors = test::make_lowrank_case<T>(test::random_spec(r, k, count), rng);
    const GeqrfRun<T> qr = run_geqrf(exec, reflectors);
    cuda::DeviceBuffer<T> da(qr.a.size()), dtau(qr.tau.size()), dq(qr.a.size());
    da.upload(qr.a, stream);
    dtau.upload(qr.tau, stream);
    dq.upload(qr.a, stream);
    ungqr<T>(exec, Batch<T>::packed(dq.data(), r, k, count), {dtau.data(), dtau.size()});
    const Batch<const T> v = Batch<const T>::packed(da.data(), r, k, count);
    // [I; 0] through unmqr(left, none).
    std::vector<T> identity(std::size_t(r) * k * count, T(0));
    for (int b = 0; b < count; ++b)
      for (int j = 0; j < k; ++j) identity[std::size_t(b) * r * k + j + std::size_t(j) * r] = T(1);
    cuda::DeviceBuffer<T> di(identity.size());
    di.upload(identity, stream);
    unmqr<T>(exec, Side::left, Op::none, v, {dtau.data(), dtau.size()}, Batch<T>::packed(di.data(), r, k, count));
    // Q·C then Qᴴ·(Q·C), C r × 5; and C·Q then (C·Q)·Qᴴ, C 3 × r.
    const LowrankCase<T> left = test::make_lowrank_case<T>(test::random_spec(r, 5, count), rng);
    const LowrankCase<T> right = test::make_lowrank_case<T>(test::random_spec(3, r, count), rng);
    cuda::DeviceBuffer<T> dl(left.a.size()), dr(right.a.size());
    dl.upload(left.a, stream);
    dr.upload(right.a, stream);
    unmqr<T>(exec, Side::left, Op::none, v, {dtau.data(), dtau.size()}, Batch<T>::packed(dl.data(), r, 5, count));
    unmqr<T>(exec, Side::left, Op::conj_trans, v, {dtau.data(), dtau.size()}, Batch<T>::packed(dl.data(), r, 5, count));
    unmqr<T>(exec, Side::right, Op::none, v, {dtau.data(), dtau.size()}, Batch<T>::packed(dr.data(), 3, r, count));
    unmqr<T>(exec, Side::right, Op::conj_trans, v, {dtau.data(), dtau.size()}, Batch<T>::packed(dr.data(), 3, r, count));
    std::vector<T> q(qr.a.size()), formed(identity.size()), back_left(left.a.size()), back_right(right.a.size());
    dq.download(q, stream);
    di.download(formed, stream);
    dl.download(back_left, stream);
    dr.download(back_right, stream);
    exec.synchronize();
    const auto relative = [&](const std::vector<T>& x, const std::vector<T>& y) {
      double diff = 0, norm = 0;
      for (std::size_t e = 0; e < x.size(); ++e) {
        diff += std::norm(D(x[e]) - D(y[e]));
        norm += std::norm(D(y[e]));
      }
      return std::sqrt(diff / norm) / (r * test::eps<T>());
    };
    const std::string where = "unmqr gpu tall " + shape_name(r, k) + " [" + reflectors.label() + "]";
    EXPECT_LE(relative(formed, q), test::lowrank_tolerance) << where << ": unmqr(left, none)·[I; 0] vs ungqr";
    EXPECT_LE(relative(back_left, left.a), test::lowrank_tolerance) << where << ": Qᴴ(QC) vs C";
    EXPECT_LE(relative(back_right, right.a), test::lowrank_tolerance) << where << ": (CQ)Qᴴ vs C";
    EXPECT_LE(test::orthogonality_error(q.data(), r, r, k), test::lowrank_tolerance) << where << ": ungqr's Q";
  }
}

// The workspace queries are zero on the CUDA path and no call grows the arena; so geqrf runs on
// matrices that live in the Exec's workspace themselves (what a caller such as the block-Jacobi
// SVD does with its column-block pairs).
TYPED_TEST(QrGpu, NoCallTakesWorkspace) {
  using T = TypeParam;
  Exec& exec = test::GpuTest::gpu();
  cudaStream_t stream = exec.cuda_context().stream();
  std::mt19937_64 rng(test::fresh_seed("qr gpu workspace"));
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{32, 32}, {256, 256}, {4096, 64}, {17, 64}}) {
    const int count = 3, k = std::min(m, n);
    EXPECT_EQ(geqrf_workspace<T>(exec, m, n, count), 0u);
    EXPECT_EQ(ungqr_workspace<T>(exec, m, k, count), 0u);
    EXPECT_EQ(unmqr_workspace<T>(exec, Side::left, m, 7, k, count), 0u);
    EXPECT_EQ(unmqr_workspace<T>(exec, Side::right, 7, m, k, count), 0u);
    const LowrankCase<T> c = test::make_lowrank_case<T>(test::random_spec(m, n, count), rng);
    const GeqrfRun<T> reference = run_geqrf(exec, c);
    // A, tau and info carved out of the workspace.
    const std::size_t a_bytes = (sizeof(T) * c.a.size() + 255) / 256 * 256;
    const std::size_t tau_bytes = (sizeof(T) * std::size_t(count) * k + 255) / 256 * 256;
    auto* base = static_cast<unsigned char*>(exec.workspace().acquire(a_bytes + tau_bytes + sizeof(int) * count));
    const std::size_t growth = exec.workspace().growth_count();
    T* a = reinterpret_cast<T*>(base);
    T* tau = reinterpret_cast<T*>(base + a_bytes);
    int* info = reinterpret_cast<int*>(base + a_bytes + tau_bytes);
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(a, c.a.data(), sizeof(T) * c.a.size(), cudaMemcpyHostToDevice, stream));
    geqrf<T>(exec, Batch<T>::packed(a, m, n, count), {tau, std::size_t(count) * k}, {info, std::size_t(count)});
    std::vector<T> out(c.a.size()), out_tau(std::size_t(count) * k);
    std::vector<int> out_info(count);
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(out.data(), a, sizeof(T) * out.size(), cudaMemcpyDeviceToHost, stream));
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(out_tau.data(), tau, sizeof(T) * out_tau.size(), cudaMemcpyDeviceToHost, stream));
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(out_info.data(), info, sizeof(int) * count, cudaMemcpyDeviceToHost, stream));
    exec.synchronize();
    EXPECT_EQ(exec.workspace().growth_count(), growth) << shape_name(m, n) << ": geqrf grew the workspace";
    EXPECT_EQ(std::memcmp(out.data(), reference.a.data(), sizeof(T) * out.size()), 0) << shape_name(m, n);
    EXPECT_EQ(std::memcmp(out_tau.data(), reference.tau.data(), sizeof(T) * out_tau.size()), 0) << shape_name(m, n);
    EXPECT_EQ(out_info, reference.info) << shape_name(m, n);
  }
}

}  // namespace
}  // namespace covflow::linalg

// covflow-bench tlr: tile low-rank matrices against dense cuBLAS / cuSOLVER in the same run.
//   gemm rows      C = A·B with A and B compressed to TLR (tlr_compress, timed apart):
//                  covflow-lld   tlr_gemm into a dense C
//                  covflow-lll   tlr_gemm into a TLR C, recompressed to the same tolerance
//                  gemm          cuBLAS dense GEMM of the dense A and B (the vendor)
//   potrf rows     A = L·Lᴴ and A·X = B (16 right-hand sides):
//                  covflow       tlr_compress is not timed; tlr_potrf + tlr_potrs are
//                  potrf+potrs   cusolverDnXpotrf + cusolverDnXpotrs on the dense A
// Inputs, built on the device: "exp" — the exponential covariance exp(−r/ℓ) on n random points of
// the unit square (ℓ = 0.1; B: ℓ = 0.05 on other points), made complex Hermitian by a plane-wave
// phase; "radar" — the covariance of a horizontal planar array of half-wavelength spacing (n
// elements, 128 per row) with diffuse clutter over a 60° sector, two jammers and unit noise. Points
// and elements are put in the order of a k-d tree (mean splits down to one tile), so each tile is a
// cluster — the ordering any TLR user must choose.
// Ranks: each matrix is compressed first with full capacity (max_rank = tile) to learn its ranks,
// outside the timing; the timed TLR then has max_rank = the largest rank found, rounded up to 8 (the
// capacity a user who knows the data would configure; the products pad every tile to it). LLL's C
// gets twice the larger operand's capacity (at most the tile).
// Checks, outside the timing: gemm — ‖C − A·B‖_F/(‖A‖_F·‖B‖_F) against the dense product of the
// original matrices, ≤ 4·tol (LLD: the compressions' error; LLL: plus nt recompressions); potrf —
// ‖A·X − B‖_F/(‖A‖_F·‖X‖_F) ≤ 10·tol. A row that fails them, or any status ≠ ok, fails the run.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "covflow/linalg/tlr.hpp"
#include "tlr_bench.hpp"
#if COVFLOW_HAS_CUDA
#include <cublas_v2.h>
#include <cusolverDn.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "cublas_types.hpp"
#endif

namespace covflow::bench {
namespace {

using namespace covflow::linalg;

struct Case {
  std::string op;     // "gemm" | "potrf"
  std::string input;  // "exp" | "radar"
  std::int64_t n = 0, tile = 0;
  double tol = 0;
};

constexpr double kBudgetMs = 4000;
constexpr int kRhs = 16;

#if COVFLOW_HAS_CUDA

// Row order of a k-d tree on 2-D points (column-major n × 2): split at the mean of the wider
// coordinate until a part fits one tile, so that consecutive tiles are spatial clusters.
std::vector<double> cluster_order(std::vector<double> p, std::int64_t n, std::int64_t tile) {
  std::vector<std::int64_t> index(static_cast<std::size_t>(n));
  std::iota(index.begin(), index.end(), 0);
  auto split = [&](auto&& self, std::int64_t lo, std::int64_t hi) -> void {
    if (hi - lo <= tile) return;
    double min[2] = {1e300, 1e300}, max[2] = {-1e300, -1e300}, mean[2] = {0, 0};
    for (std::int64_t k = lo; k < hi; ++k)
      for (int d = 0; d < 2; ++d) {
        const double x = p[index[k] + d * n];
        min[d] = std::min(min[d], x);
        max[d] = std::max(max[d], x);
        mean[d] += x / double(hi - lo);
      }
    const int d = max[0] - min[0] >= max[1] - min[1] ? 0 : 1;
    auto mid = std::partition(index.begin() + lo, index.begin() + hi, [&](std::int64_t e) { return p[e + d * n] < mean[d]; });
    std::int64_t at = mid - index.begin();
    if (at == lo || at == hi) at = lo + (hi - lo) / 2;  // equal coordinates: any halving will do
    self(self, lo, at);
    self(self, at, hi);
  };
  split(split, 0, n);
  std::vector<double> out(p.size());
  for (std::int64_t k = 0; k < n; ++k)
    for (int d = 0; d < 2; ++d) out[k + d * n] = p[index[k] + d * n];
  return out;
}

template <class T>
void dense_gemm(CudaContext& context, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, const T* b, T beta,
                T* c) {
  const T one(1);
  COVFLOW_CUBLAS_TRY(cublasGemmEx(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, int(m), int(n), int(k), &one, a,
                                  Cu<T>::data, int(m), b, Cu<T>::data, int(k), &beta, c, Cu<T>::data, int(m),
                                  Cu<T>::compute, CUBLAS_GEMM_DEFAULT));
}

// ‖x‖_F of `elements` contiguous values (host result; synchronises).
template <class T>
double fro(CudaContext& context, const T* x, std::size_t elements) {
  double result = 0;
  real_t<T> partial = 0;
  COVFLOW_CUBLAS_TRY(cublasSetPointerMode(context.cublas(), CUBLAS_POINTER_MODE_HOST));
  // nrm2 takes an int count: long vectors in pieces.
  constexpr std::size_t kPiece = std::size_t(1) << 30;
  for (std::size_t at = 0; at < elements; at += kPiece) {
    const int len = int(std::min(kPiece, elements - at));
    constexpr cudaDataType real = std::is_same_v<real_t<T>, double> ? CUDA_R_64F : CUDA_R_32F;
    COVFLOW_CUBLAS_TRY(cublasNrm2Ex(context.cublas(), len, x + at, Cu<T>::data, 1, &partial, real, real));
    result += double(partial) * double(partial);
  }
  return std::sqrt(result);
}

// y ← y − x, elements long.
template <class T>
void subtract(CudaContext& context, const T* x, T* y, std::size_t elements) {
  const T minus(-1);
  constexpr std::size_t kPiece = std::size_t(1) << 30;
  for (std::size_t at = 0; at < elements; at += kPiece) {
    const int len = int(std::min(kPiece, elements - at));
    COVFLOW_CUBLAS_TRY(cublasAxpyEx(context.cublas(), len, &minus, Cu<T>::data, x + at, Cu<T>::data, 1, y + at,
                                    Cu<T>::data, 1, Cu<T>::data));
  }
}

// A dense n × n input on the device (see the top of the file). `variant` 0 is A, 1 is B.
template <class T>
void make_input(Exec& gpu, const Case& c, int variant, T* a, std::mt19937_64& rng) {
  const std::int64_t n = c.n;
  std::vector<double> p(static_cast<std::size_t>(2 * n));
  if (c.input == "exp") {
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (double& x : p) x = unit(rng);
  } else {
    for (std::int64_t e = 0; e < n; ++e) {
      p[e] = 0.5 * double(e % 128);
      p[e + n] = 0.5 * double(e / 128);
    }
  }
  p = cluster_order(std::move(p), n, c.tile);
  cuda::DeviceBuffer<double> points(p.size());
  cudaStream_t stream = gpu.cuda_context().stream();
  points.upload(p, stream);
  if (c.input == "exp")
    exponential_matrix<T>(a, points.data(), n, variant == 0 ? 0.1 : 0.05, variant == 0 ? 3.0 : -2.0,
                          variant == 0 ? 1.0 : 4.0, stream);
  else
    clutter_matrix<T>(a, points.data(), n, variant == 0 ? 1000.0 : 300.0, variant == 0 ? 0.0 : 20.0, 60.0, 32, 1e4,
                      variant == 0 ? 40.0 : 55.0, stream);
  gpu.synchronize();
}

// A TLR matrix with its storage, info and ranks on the device.
template <class T>
struct DeviceTlr {
  TlrShape shape;
  cuda::DeviceBuffer<std::byte> storage;
  Tlr<T> view;
  cuda::DeviceBuffer<TlrInfo> info;

  explicit DeviceTlr(const TlrShape& s)
      : shape(s), storage(tlr_bytes(element_type_of<T>(), s)), view(tlr_view<T>(s, {storage.data(), storage.size()})),
        info(static_cast<std::size_t>(std::max<std::int64_t>(s.count, 1))) {}

  std::vector<int> ranks(Exec& gpu) const {
    std::vector<int> host(static_cast<std::size_t>(shape.count * shape.slots()));
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(host.data(), view.rank, host.size() * sizeof(int), cudaMemcpyDeviceToHost,
                                     gpu.cuda_context().stream()));
    gpu.synchronize();
    return host;
  }
  std::vector<TlrInfo> infos(Exec& gpu) const {
    std::vector<TlrInfo> host(info.size());
    info.download(host, gpu.cuda_context().stream());
    gpu.synchronize();
    return host;
  }
};

std::string failures(const std::vector<TlrInfo>& infos, const char* what) {
  std::string out;
  for (std::size_t b = 0; b < infos.size(); ++b)
    if (infos[b].status != tlr_status::ok)
      out += fmt::format("{}{}: status {} ({} tiles capped)", out.empty() ? "" : "; ", what, infos[b].status,
                         infos[b].capped_tiles);
  return out;
}

// Compresses `dense` to the tolerance: first with full capacity to learn the ranks, then into a TLR
// of max_rank = the largest rank, rounded up to 8 (see the top of the file). Times the second.
template <class T>
std::unique_ptr<DeviceTlr<T>> compress(Exec& gpu, const Case& c, bool hermitian, const T* dense, Row& row,
                                       const Settings& settings, const std::string& label) {
  TlrShape probe{c.n, c.tile, c.tile, 1, hermitian};
  TlrOptions options;
  options.tolerance = c.tol;
  const Batch<const T> a{dense, c.n, c.n, c.n, c.n * c.n, 1};
  std::int64_t rank = 1;
  {
    DeviceTlr<T> first(probe);
    cuda::DeviceBuffer<std::byte> workspace(std::max<std::size_t>(tlr_compress_workspace<T>(gpu, probe), 1));
    tlr_compress<T>(gpu, a, first.view, {first.info.data(), first.info.size()}, {workspace.data(), workspace.size()},
                    options);
    for (int k : first.ranks(gpu)) rank = std::max<std::int64_t>(rank, k);
  }
  TlrShape shape = probe;
  shape.max_rank = std::min<std::int64_t>((rank + 7) / 8 * 8, c.tile);
  auto tlr = std::make_unique<DeviceTlr<T>>(shape);
  cuda::DeviceBuffer<std::byte> workspace(std::max<std::size_t>(tlr_compress_workspace<T>(gpu, shape), 1));
  row.times["compress " + label] = time_adaptive(
      gpu.cuda_context().stream(),
      [&](int) {
        tlr_compress<T>(gpu, a, tlr->view, {tlr->info.data(), tlr->info.size()}, {workspace.data(), workspace.size()},
                        options);
      },
      {}, settings, kBudgetMs);
  const TlrStats stats = tlr_stats(element_type_of<T>(), shape, tlr->ranks(gpu));
  row.notes["ranks " + label] = fmt::format("{}–{} (mean {:.1f}, max_rank {})", stats.min_rank, stats.max_rank,
                                            stats.mean_rank, shape.max_rank);
  row.notes["memory " + label] = fmt::format("{:.1f}% of dense stored, {:.1f}% compact",
                                             100.0 * double(stats.stored_bytes) / double(stats.dense_bytes),
                                             100.0 * double(stats.compact_bytes) / double(stats.dense_bytes));
  const std::string bad = failures(tlr->infos(gpu), ("compress " + label).c_str());
  if (!bad.empty()) row.fail(bad);
  return tlr;
}

template <class T>
Row bench_gemm(const Case& c, const Settings& settings, Exec& gpu, std::mt19937_64& rng) {
  Row row;
  row.op = "tlr-gemm";
  row.dtype = std::string(name(element_type_of<T>()));
  row.input = c.input;
  row.shape = fmt::format("n={} tile={} tol={:g}", c.n, c.tile, c.tol);
  row.flops = (is_complex_v<T> ? 8.0 : 2.0) * double(c.n) * double(c.n) * double(c.n);
  row.vendors = {"gemm"};
  CudaContext& context = gpu.cuda_context();
  cudaStream_t stream = context.stream();
  const std::size_t elements = static_cast<std::size_t>(c.n * c.n);
  cuda::DeviceBuffer<T> a(elements), b(elements), reference(elements), out(elements);
  make_input<T>(gpu, c, 0, a.data(), rng);
  make_input<T>(gpu, c, 1, b.data(), rng);
  const double norm_ab = fro(context, a.data(), elements) * fro(context, b.data(), elements);

  row.times["gemm"] = time_adaptive(stream, [&](int) { dense_gemm<T>(context, c.n, c.n, c.n, a.data(), b.data(), T(0), reference.data()); },
                                    {}, settings, kBudgetMs);
  auto ta = compress<T>(gpu, c, false, a.data(), row, settings, "A");
  auto tb = compress<T>(gpu, c, false, b.data(), row, settings, "B");
  const Batch<T> dense_out{out.data(), c.n, c.n, c.n, c.n * c.n, 1};

  // LLD
  cuda::DeviceBuffer<std::byte> lld_work(std::max<std::size_t>(tlr_gemm_lld_workspace<T>(gpu, ta->shape, tb->shape), 1));
  row.times["covflow-lld"] = time_adaptive(
      stream,
      [&](int) {
        tlr_gemm<T>(gpu, Op::none, Op::none, T(1), ta->view, tb->view, T(0), dense_out, {lld_work.data(), lld_work.size()});
      },
      {}, settings, kBudgetMs);
  subtract(context, reference.data(), out.data(), elements);
  const double lld_error = fro(context, out.data(), elements) / norm_ab;
  row.notes["error lld"] = fmt::format("{:.2e}", lld_error);
  if (!(lld_error <= 4 * c.tol)) row.fail(fmt::format("LLD error {:.2e} > 4·tol", lld_error));

  // LLL (an operation a backend does not have yet is noted, not failed)
  try {
    const std::int64_t capacity = std::min<std::int64_t>(2 * std::max(ta->shape.max_rank, tb->shape.max_rank), c.tile);
    DeviceTlr<T> tc(TlrShape{c.n, c.tile, capacity, 1, false});
    TlrOptions options;
    options.tolerance = c.tol;
    cuda::DeviceBuffer<std::byte> lll_work(
        std::max<std::size_t>(tlr_gemm_lll_workspace<T>(gpu, ta->shape, tb->shape, tc.shape), 1));
    row.times["covflow-lll"] = time_adaptive(
        stream,
        [&](int) {
          tlr_gemm<T>(gpu, Op::none, Op::none, T(1), ta->view, tb->view, T(0), tc.view, {tc.info.data(), tc.info.size()},
                      {lll_work.data(), lll_work.size()}, options);
        },
        {}, settings, kBudgetMs);
    tlr_expand<T>(gpu, tc.view, dense_out);
    subtract(context, reference.data(), out.data(), elements);
    const double lll_error = fro(context, out.data(), elements) / norm_ab;
    const TlrStats stats = tlr_stats(element_type_of<T>(), tc.shape, tc.ranks(gpu));
    row.notes["error lll"] = fmt::format("{:.2e}", lll_error);
    row.notes["ranks C"] = fmt::format("{}–{} (mean {:.1f})", stats.min_rank, stats.max_rank, stats.mean_rank);
    if (!(lll_error <= 4 * c.tol)) row.fail(fmt::format("LLL error {:.2e} > 4·tol", lll_error));
    const std::string bad = failures(tc.infos(gpu), "lll");
    if (!bad.empty()) row.fail(bad);
  } catch (const Unavailable& e) {
    row.notes["covflow-lll"] = fmt::format("not run: {}", e.what());
  }
  const double dense_ms = row.times["gemm"].median_ms;
  std::string ratios;
  for (const char* who : {"covflow-lld", "covflow-lll"})
    if (row.times.count(who))
      ratios += fmt::format("{}{} {:.1f}×", ratios.empty() ? "" : ", ", who, dense_ms / row.times[who].median_ms);
  row.notes["speed-up over gemm"] = ratios;
  return row;
}

template <class T>
Row bench_potrf(const Case& c, const Settings& settings, Exec& gpu, std::mt19937_64& rng) {
  Row row;
  row.op = "tlr-potrf";
  row.dtype = std::string(name(element_type_of<T>()));
  row.input = c.input;
  row.shape = fmt::format("n={} tile={} tol={:g} nrhs={}", c.n, c.tile, c.tol, kRhs);
  row.flops = (is_complex_v<T> ? 4.0 : 1.0) * double(c.n) * double(c.n) * double(c.n) / 3.0;
  row.vendors = {"potrf+potrs"};
  CudaContext& context = gpu.cuda_context();
  cudaStream_t stream = context.stream();
  const std::size_t elements = static_cast<std::size_t>(c.n * c.n);
  const std::size_t rhs = static_cast<std::size_t>(c.n * kRhs);
  cuda::DeviceBuffer<T> a(elements), work(elements), b(rhs), x(rhs), r(rhs);
  make_input<T>(gpu, c, 0, a.data(), rng);
  fill_gaussian(b.data(), rhs, rng(), stream);
  const double norm_a = fro(context, a.data(), elements);
  auto residual = [&](const T* solution) {  // ‖A·X − B‖_F/(‖A‖_F·‖X‖_F)
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(r.data(), b.data(), rhs * sizeof(T), cudaMemcpyDeviceToDevice, stream));
    const T minus(-1), one(1);
    COVFLOW_CUBLAS_TRY(cublasGemmEx(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, int(c.n), kRhs, int(c.n), &one, a.data(),
                                    Cu<T>::data, int(c.n), solution, Cu<T>::data, int(c.n), &minus, r.data(),
                                    Cu<T>::data, int(c.n), Cu<T>::compute, CUBLAS_GEMM_DEFAULT));
    return fro(context, r.data(), rhs) / (norm_a * fro(context, solution, rhs));
  };

  // cuSOLVER on the dense matrix
  {
    cusolverDnParams_t params = nullptr;
    COVFLOW_CUSOLVER_TRY(cusolverDnCreateParams(&params));
    std::size_t device_bytes = 0, host_bytes = 0;
    COVFLOW_CUSOLVER_TRY(cusolverDnXpotrf_bufferSize(context.cusolver(), params, CUBLAS_FILL_MODE_LOWER, c.n, Cu<T>::data,
                                                     work.data(), c.n, Cu<T>::data, &device_bytes, &host_bytes));
    cuda::DeviceBuffer<std::byte> dwork(std::max<std::size_t>(device_bytes, 1));
    std::vector<std::byte> hwork(std::max<std::size_t>(host_bytes, 1));
    cuda::DeviceBuffer<int> info(1);
    row.times["potrf+potrs"] = time_adaptive(
        stream,
        [&](int) {
          COVFLOW_CUSOLVER_TRY(cusolverDnXpotrf(context.cusolver(), params, CUBLAS_FILL_MODE_LOWER, c.n, Cu<T>::data,
                                                work.data(), c.n, Cu<T>::data, dwork.data(), device_bytes, hwork.data(),
                                                host_bytes, info.data()));
          COVFLOW_CUSOLVER_TRY(cusolverDnXpotrs(context.cusolver(), params, CUBLAS_FILL_MODE_LOWER, c.n, kRhs,
                                                Cu<T>::data, work.data(), c.n, Cu<T>::data, x.data(), c.n, info.data()));
        },
        [&](int) {
          COVFLOW_CUDA_TRY(cudaMemcpyAsync(work.data(), a.data(), elements * sizeof(T), cudaMemcpyDeviceToDevice, stream));
          COVFLOW_CUDA_TRY(cudaMemcpyAsync(x.data(), b.data(), rhs * sizeof(T), cudaMemcpyDeviceToDevice, stream));
        },
        settings, kBudgetMs);
    cusolverDnDestroyParams(params);
    row.notes["residual potrf+potrs"] = fmt::format("{:.2e}", residual(x.data()));
  }

  // covflow: compress (not timed), then tlr_potrf + tlr_potrs from a pristine copy each time
  try {
    auto compressed = compress<T>(gpu, c, true, a.data(), row, settings, "A");
    DeviceTlr<T> factor(compressed->shape);
    TlrOptions options;
    options.tolerance = c.tol;
    cuda::DeviceBuffer<std::byte> workspace(std::max(
        {tlr_potrf_workspace<T>(gpu, factor.shape), tlr_potrs_workspace<T>(gpu, factor.shape, kRhs), std::size_t(1)}));
    const Batch<T> xb{x.data(), c.n, kRhs, c.n, c.n * kRhs, 1};
    row.times["covflow"] = time_adaptive(
        stream,
        [&](int) {
          tlr_potrf<T>(gpu, factor.view, {factor.info.data(), factor.info.size()}, {workspace.data(), workspace.size()},
                       options);
          tlr_potrs<T>(gpu, factor.view, xb, {factor.info.data(), factor.info.size()}, {workspace.data(), workspace.size()});
        },
        [&](int) {
          COVFLOW_CUDA_TRY(cudaMemcpyAsync(factor.storage.data(), compressed->storage.data(), factor.storage.size(),
                                           cudaMemcpyDeviceToDevice, stream));
          COVFLOW_CUDA_TRY(cudaMemcpyAsync(x.data(), b.data(), rhs * sizeof(T), cudaMemcpyDeviceToDevice, stream));
        },
        settings, kBudgetMs);
    const double error = residual(x.data());
    row.notes["residual covflow"] = fmt::format("{:.2e}", error);
    if (!(error <= 10 * c.tol)) row.fail(fmt::format("covflow's residual {:.2e} > 10·tol", error));
    const std::string bad = failures(factor.infos(gpu), "potrf");
    if (!bad.empty()) row.fail(bad);
    const TlrStats stats = tlr_stats(element_type_of<T>(), factor.shape, factor.ranks(gpu));
    row.notes["ranks L"] = fmt::format("{}–{} (mean {:.1f})", stats.min_rank, stats.max_rank, stats.mean_rank);
    row.notes["memory L"] = fmt::format("{:.1f}% of dense stored", 100.0 * double(stats.stored_bytes) / double(stats.dense_bytes));
    row.notes["speed-up over potrf+potrs"] =
        fmt::format("{:.1f}×", row.times["potrf+potrs"].median_ms / row.times["covflow"].median_ms);
  } catch (const Unavailable& e) {
    row.notes["covflow"] = fmt::format("not run: {}", e.what());
  }
  return row;
}
#endif

}  // namespace

nlohmann::json run_tlr_bench(const Settings& settings, Exec* gpu) {
  std::mt19937_64 rng(2026);
  std::vector<Case> cases;
  for (double tol : {1e-4, 1e-6, 1e-8}) cases.push_back({"gemm", "exp", 16384, 1024, tol});
  for (std::int64_t tile : {256, 512, 1024}) cases.push_back({"gemm", "exp", 8192, tile, 1e-6});
  cases.push_back({"gemm", "radar", 16384, 1024, 1e-6});
  for (std::int64_t n : {16384, 32768}) cases.push_back({"potrf", "exp", n, 1024, 1e-6});
  if (settings.quick) cases = {{"gemm", "exp", 2048, 256, 1e-6}, {"potrf", "exp", 2048, 256, 1e-6}};
  if (!settings.shapes.empty()) {
    cases.clear();
    for (const std::string& text : settings.shapes) {
      char op[16] = {}, input[16] = {};
      Case c;
      long long n = 0, tile = 0;
      if (std::sscanf(text.c_str(), "%15[a-z]/%15[a-z]/%lld/%lld/%lf", op, input, &n, &tile, &c.tol) != 5 || n < 1 ||
          tile < 1 || !(c.tol > 0) || (std::string(op) != "gemm" && std::string(op) != "potrf") ||
          (std::string(input) != "exp" && std::string(input) != "radar"))
        throw std::invalid_argument("--shape expects OP/INPUT/N/TILE/TOL with OP gemm|potrf and INPUT exp|radar, e.g. "
                                    "gemm/exp/16384/1024/1e-6; got '" + text + "'");
      c.op = op;
      c.input = input;
      c.n = n;
      c.tile = tile;
      cases.push_back(c);
    }
  }
  Report report("tlr: tile low-rank GEMM (LLD, LLL) and Cholesky + solve vs dense cuBLAS GEMM and cuSOLVER Xpotrf + Xpotrs");
  if (gpu == nullptr) {
    fmt::print("tlr: no GPU — the benchmark times the CUDA backend against cuBLAS and cuSOLVER only\n");
    return report.to_json();
  }
#if COVFLOW_HAS_CUDA
  auto add = [&](Row row) {
    std::string times, notes;
    for (const auto& [who, t] : row.times) times += fmt::format("  {} {:.3f} ms", who, t.median_ms);
    for (const auto& [what, text] : row.notes) notes += fmt::format("; {}: {}", what, text);
    fmt::print("{} {} {} {}:{}{}\n    {}\n", row.op, row.dtype, row.input, row.shape, times,
               row.failed.empty() ? "" : "  FAILED: " + row.failed, notes.empty() ? "" : notes.substr(2));
    std::fflush(stdout);
    report.add(std::move(row));
  };
  for (const Case& c : cases) {
    auto one = [&]<class T>() {
      if (c.op == "gemm") add(bench_gemm<T>(c, settings, *gpu, rng));
      else add(bench_potrf<T>(c, settings, *gpu, rng));
    };
    if (settings.dtype.empty() || settings.dtype == "cf64") one.template operator()<cf64>();
    if (settings.dtype == "cf32") one.template operator()<cf32>();
    if (settings.dtype == "f64") one.template operator()<f64>();
  }
#endif
  report.print();
  return report.to_json();
}

}  // namespace covflow::bench

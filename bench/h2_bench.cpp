// covflow-bench h2: H² covariance matrices (linalg/h2.hpp) — construction and compression on the
// CPU and on the GPU (h2_build, h2_build_device; h2_compress on an H2 and on an H2Device), memory against dense, and the matvec on the
// GPU (h2_gemv) for 1 and 16 vectors against the dense matrix times the same vectors with cuBLAS
// (Zhemv / Dsymv for one vector, GemmEx for 16) where the dense matrix fits (n ≤ 32768), with
// where the matvec's time goes (h2_gemv_phases); then, for a tolerance run at three or more sizes,
// the slope of each step's time against n (time per point from 16k to 256k points).
//
// Input: the experiment of Boukaram et al., "Batched QR and SVD algorithms on GPUs with
// applications in hierarchical matrix compression" (Parallel Computing 2018, §8.3): n points on a
// randomly perturbed regular grid in [0, 1]², the exponential kernel exp(−r/ℓ) with ℓ = 0.1; leaf
// 64, η 0.7, Chebyshev order 7 (rank 49; 3.6e-8 construction error at n = 2025 in h2_test), then
// h2_compress to the row's tolerance.
//
// Checks (a failed check fails the row and the run): the H² matvec against the dense product
// (n ≤ 32768; relative Frobenius error ≤ 10·tol + 1e-6, construction and compression together) and
// against the CPU h2_gemv of the same H² (every row; ≤ 1e-10 in double, 1e-3 in float); the
// device's construction against the CPU's by one matvec of each (≤ 1e-12 in double, 1e-4 in float).
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "covflow/linalg/h2.hpp"
#include "h2_bench.hpp"

#if COVFLOW_HAS_CUDA
#include <cublas_v2.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "cublas_types.hpp"
#include "tlr_bench.hpp"
#endif

namespace covflow::bench {

#if !COVFLOW_HAS_CUDA
nlohmann::json run_h2_bench(const Settings&, linalg::Exec*) {
  fmt::print("h2 needs a CUDA build (the matvec is timed on the GPU)\n");
  return Report("h2").to_json();
}
#else
namespace {

using namespace covflow::linalg;

struct Case {
  std::int64_t n = 0;
  double tol = 0;
};

Case parse_case(const std::string& text) {
  const auto slash = text.find('/');
  if (slash == std::string::npos) throw std::invalid_argument("--shape expects N/TOL, e.g. 32768/1e-6; got '" + text + "'");
  return {std::stoll(text.substr(0, slash)), std::stod(text.substr(slash + 1))};
}

// n points on a perturbed grid in [0, 1]² (side ⌈√n⌉, each point moved by up to a quarter of the
// spacing), point i's coordinates at 2i, 2i + 1.
std::vector<double> perturbed_grid(std::int64_t n, std::mt19937_64& rng) {
  const auto side = static_cast<std::int64_t>(std::ceil(std::sqrt(double(n))));
  const double h = 1.0 / double(side);
  std::uniform_real_distribution<double> jitter(-0.25 * h, 0.25 * h);
  std::vector<double> p(static_cast<std::size_t>(2 * n));
  for (std::int64_t i = 0; i < n; ++i) {
    p[2 * i] = (double(i % side) + 0.5) * h + jitter(rng);
    p[2 * i + 1] = (double(i / side) + 0.5) * h + jitter(rng);
  }
  return p;
}

// y = A·x for one vector with the Hermitian (symmetric) dense A, lower triangle.
template <class T>
void dense_hemv(CudaContext& context, std::int64_t n, const T* a, const T* x, T* y) {
  const T one(1), zero(0);
  const int in = static_cast<int>(n);
  if constexpr (std::is_same_v<T, cf64>)
    COVFLOW_CUBLAS_TRY(cublasZhemv(context.cublas(), CUBLAS_FILL_MODE_LOWER, in, reinterpret_cast<const cuDoubleComplex*>(&one),
                                   reinterpret_cast<const cuDoubleComplex*>(a), in, reinterpret_cast<const cuDoubleComplex*>(x), 1,
                                   reinterpret_cast<const cuDoubleComplex*>(&zero), reinterpret_cast<cuDoubleComplex*>(y), 1));
  else if constexpr (std::is_same_v<T, cf32>)
    COVFLOW_CUBLAS_TRY(cublasChemv(context.cublas(), CUBLAS_FILL_MODE_LOWER, in, reinterpret_cast<const cuComplex*>(&one),
                                   reinterpret_cast<const cuComplex*>(a), in, reinterpret_cast<const cuComplex*>(x), 1,
                                   reinterpret_cast<const cuComplex*>(&zero), reinterpret_cast<cuComplex*>(y), 1));
  else if constexpr (std::is_same_v<T, f64>)
    COVFLOW_CUBLAS_TRY(cublasDsymv(context.cublas(), CUBLAS_FILL_MODE_LOWER, in, &one, a, in, x, 1, &zero, y, 1));
  else
    COVFLOW_CUBLAS_TRY(cublasSsymv(context.cublas(), CUBLAS_FILL_MODE_LOWER, in, &one, a, in, x, 1, &zero, y, 1));
}

template <class T>
void dense_gemm(CudaContext& context, std::int64_t n, std::int64_t nvec, const T* a, const T* x, T* y) {
  const T one(1), zero(0);
  COVFLOW_CUBLAS_TRY(cublasGemmEx(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(nvec), int(n), &one, a,
                                  Cu<T>::data, int(n), x, Cu<T>::data, int(n), &zero, y, Cu<T>::data, int(n),
                                  Cu<T>::compute, CUBLAS_GEMM_DEFAULT));
}

template <class T>
double relative_difference(const std::vector<T>& got, const std::vector<T>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff += std::norm(std::complex<double>(got[i]) - std::complex<double>(want[i]));
    norm += std::norm(std::complex<double>(want[i]));
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// Multiply-adds of one matvec per vector, from the stored blocks: every basis, transfer and
// coupling element used twice (up and down; a coupling for its block and its mirror), every
// dense element twice (its block and its mirror; the diagonal blocks' count is an upper bound).
double gemv_flops(const H2Stats& s, std::size_t element_bytes, bool complex, std::int64_t nvec) {
  const double elements = 2.0 * double(s.basis_bytes + s.coupling_bytes + s.dense_bytes) / double(element_bytes);
  return elements * (complex ? 8.0 : 2.0) * double(nvec);
}

template <class T>
Row bench_case(const Case& c, const Settings& settings, Exec& gpu, std::mt19937_64& rng) {
  Row row;
  row.op = "h2";
  row.dtype = std::string(name(element_type_of<T>()));
  row.shape = fmt::format("n={} exp 2-D leaf 64 order 7 tol {:g}", c.n, c.tol);
  row.vendors = {"dense-cublas"};
  const std::int64_t n = c.n;
  const std::vector<double> points = perturbed_grid(n, rng);
  Exec cpu = Exec::cpu();
  H2KernelSpec kernel;
  kernel.kind = H2Kernel::exponential;
  kernel.length = 0.1;
  H2Options options;
  options.leaf_size = 64;
  options.eta = 0.7;
  options.cheb_order = 7;

  H2<T> a;
  row.times["build (CPU)"] = time_host([&] { a = h2_build<T>(cpu, points, 2, kernel, options); }, 0, 1);
  // The construction on the device, from the points on the host to the H2Device (warm-up once:
  // the first call grows the Exec's workspace and loads the kernels).
  H2Device<T> built_on_device;
  row.times["build (GPU)"] = time_host(
      [&] {
        built_on_device = h2_build_device<T>(gpu, points, 2, kernel, options);
        gpu.synchronize();
      },
      1, 3);
  const H2Stats built = h2_stats(a);
  {
    // The device's construction is the CPU's matrix: one matvec of each against the other.
    const H2Device<T> uploaded = h2_upload<T>(gpu, a);
    std::vector<T> xs(static_cast<std::size_t>(n));
    std::normal_distribution<double> normal;
    for (T& v : xs) v = T(normal(rng));
    cuda::DeviceBuffer<T> xd(xs.size()), y1(xs.size()), y2(xs.size());
    xd.upload(xs, gpu.cuda_context().stream());
    gpu.workspace().reserve(h2_gemv_workspace<T>(gpu, uploaded, 1));
    h2_gemv<T>(gpu, T(1), uploaded, Batch<const T>::packed(xd.data(), n, 1, 1), T(0), Batch<T>::packed(y1.data(), n, 1, 1));
    h2_gemv<T>(gpu, T(1), built_on_device, Batch<const T>::packed(xd.data(), n, 1, 1), T(0),
               Batch<T>::packed(y2.data(), n, 1, 1));
    std::vector<T> h1(xs.size()), h2v(xs.size());
    y1.download(h1, gpu.cuda_context().stream());
    y2.download(h2v, gpu.cuda_context().stream());
    gpu.synchronize();
    const double d = relative_difference(h2v, h1);
    row.notes["GPU build vs CPU build"] = fmt::format("{:.1e} (one matvec each)", d);
    if (!(d <= (sizeof(real_t<T>) == 8 ? 1e-12 : 1e-4)))
      row.fail(fmt::format("the device construction differs from the CPU's by {:.2e}", d));
  }
  H2CompressReport report;
  row.times["compress (CPU)"] = time_host([&] { report = h2_compress<T>(cpu, a, c.tol); }, 0, 1);
  const H2Stats stats = h2_stats(a);
  auto ranks = [](const std::vector<int>& r) {
    std::string out;
    for (int k : r) {
      if (!out.empty()) out += '/';
      out += std::to_string(k);
    }
    return out;
  };
  row.notes["memory"] = fmt::format("built {:.2f}% of dense, compressed {:.2f}% ({:.1f} MB; dense {:.1f} MB)",
                                    100.0 * double(built.total_bytes) / double(built.dense_matrix_bytes),
                                    100.0 * double(stats.total_bytes) / double(stats.dense_matrix_bytes),
                                    double(stats.total_bytes) / 1e6, double(stats.dense_matrix_bytes) / 1e6);
  row.notes["ranks"] = fmt::format("built {}, compressed {}; bound {:.2e}", ranks(built.ranks), ranks(stats.ranks),
                                   report.error_bound);

  CudaContext& context = gpu.cuda_context();
  cudaStream_t stream = context.stream();
  H2Device<T> device;
  row.times["upload"] = time_host([&] { device = h2_upload<T>(gpu, a); gpu.synchronize(); }, 0, 1);
  // The compression on the device, of the matrix h2_build_device made (one call: it replaces its
  // argument), against the CPU's: the same ranks, and the same matrix within the two bounds.
  H2CompressReport gpu_report;
  row.times["compress (GPU)"] = time_host(
      [&] {
        gpu_report = h2_compress<T>(gpu, built_on_device, c.tol);
        gpu.synchronize();
      },
      0, 1);
  row.notes["build + compress (GPU)"] =
      fmt::format("{:.3f} s", (row.times["build (GPU)"].median_ms + row.times["compress (GPU)"].median_ms) / 1e3);
  {
    const bool same_ranks = built_on_device.shape().rank == a.rank;
    std::vector<T> xs(static_cast<std::size_t>(n));
    std::normal_distribution<double> normal;
    for (T& v : xs) v = T(normal(rng));
    cuda::DeviceBuffer<T> xd(xs.size()), y1(xs.size()), y2(xs.size());
    xd.upload(xs, stream);
    gpu.workspace().reserve(std::max(h2_gemv_workspace<T>(gpu, device, 1), h2_gemv_workspace<T>(gpu, built_on_device, 1)));
    h2_gemv<T>(gpu, T(1), device, Batch<const T>::packed(xd.data(), n, 1, 1), T(0), Batch<T>::packed(y1.data(), n, 1, 1));
    h2_gemv<T>(gpu, T(1), built_on_device, Batch<const T>::packed(xd.data(), n, 1, 1), T(0),
               Batch<T>::packed(y2.data(), n, 1, 1));
    std::vector<T> h1(xs.size()), h2v(xs.size());
    y1.download(h1, stream);
    y2.download(h2v, stream);
    gpu.synchronize();
    const double d = relative_difference(h2v, h1);
    row.notes["GPU compress vs CPU compress"] =
        fmt::format("{:.1e} (one matvec each; ranks {}; bound {:.2e} vs {:.2e})", d, same_ranks ? "equal" : "differ",
                    gpu_report.error_bound, report.error_bound);
    if (!(d <= 2 * c.tol)) row.fail(fmt::format("the device compression differs from the CPU's by {:.2e}", d));
  }
  constexpr std::int64_t kVectors = 16;
  gpu.workspace().reserve(h2_gemv_workspace<T>(gpu, device, kVectors));
  cuda::DeviceBuffer<T> x(static_cast<std::size_t>(n * kVectors)), y(static_cast<std::size_t>(n * kVectors));
  fill_gaussian(x.data(), x.size(), 7, stream);
  const bool complex = is_complex_v<T>;
  for (const std::int64_t nvec : {std::int64_t{1}, kVectors}) {
    const std::string v = fmt::format(" ×{}", nvec);
    const Batch<const T> xb{x.data(), n, nvec, n, n * nvec, 1};
    const Batch<T> yb{y.data(), n, nvec, n, n * nvec, 1};
    row.times["covflow" + v] = time_device(
        stream, [&](int) { h2_gemv<T>(gpu, T(1), device, xb, T(0), yb); }, settings.warmup, settings.reps);
    // Where the time goes: one more call with an event after each phase.
    std::string phases;
    for (const H2PhaseTime& t : h2_gemv_phases<T>(gpu, T(1), device, xb, T(0), yb))
      phases += fmt::format("{}{} {:.3f}", phases.empty() ? "" : "; ", t.phase, t.ms);
    row.notes["phases ms" + v] = phases;
    const double flops = gemv_flops(stats, sizeof(T), complex, nvec);
    row.notes["GFLOP/s" + v] = fmt::format("{:.0f} (counted from the stored ranks)",
                                           flops / row.times["covflow" + v].median_ms / 1e6);
    // Against the CPU h2_gemv of the same H² (the same arithmetic, another order of sums).
    std::vector<T> xh(static_cast<std::size_t>(n * nvec)), yh(xh.size()), ycpu(xh.size());
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(xh.data(), x.data(), xh.size() * sizeof(T), cudaMemcpyDeviceToHost, stream));
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(yh.data(), y.data(), yh.size() * sizeof(T), cudaMemcpyDeviceToHost, stream));
    gpu.synchronize();
    h2_gemv<T>(cpu, T(1), a, Batch<const T>{xh.data(), n, nvec, n, n * nvec, 1}, T(0),
               Batch<T>{ycpu.data(), n, nvec, n, n * nvec, 1});
    const double against_cpu = relative_difference(yh, ycpu);
    row.notes["vs CPU h2_gemv" + v] = fmt::format("{:.1e}", against_cpu);
    if (!(against_cpu <= (sizeof(real_t<T>) == 8 ? 1e-10 : 1e-3)))
      row.fail(fmt::format("GPU h2_gemv{} differs from the CPU one by {:.2e}", v, against_cpu));
    if (n <= 32768) {
      // The dense kernel matrix, in the caller's point order (x coordinates, then y).
      std::vector<double> columns(static_cast<std::size_t>(2 * n));
      for (std::int64_t i = 0; i < n; ++i) {
        columns[i] = points[2 * i];
        columns[i + n] = points[2 * i + 1];
      }
      cuda::DeviceBuffer<double> p(columns.size());
      p.upload(columns, stream);
      cuda::DeviceBuffer<T> dense(static_cast<std::size_t>(n * n)), yd(static_cast<std::size_t>(n * nvec));
      exponential_matrix<T>(dense.data(), p.data(), n, 0.1, 0.0, 0.0, stream);
      row.times["dense-cublas" + v] = time_device(
          stream,
          [&](int) {
            if (nvec == 1) dense_hemv<T>(context, n, dense.data(), x.data(), yd.data());
            else dense_gemm<T>(context, n, nvec, dense.data(), x.data(), yd.data());
          },
          settings.warmup, settings.reps);
      std::vector<T> ydh(static_cast<std::size_t>(n * nvec));
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(ydh.data(), yd.data(), ydh.size() * sizeof(T), cudaMemcpyDeviceToHost, stream));
      gpu.synchronize();
      const double against_dense = relative_difference(yh, ydh);
      row.notes["vs dense" + v] = fmt::format("{:.1e}", against_dense);
      if (!(against_dense <= 10 * c.tol + 1e-6))
        row.fail(fmt::format("H² matvec{} differs from the dense product by {:.2e}", v, against_dense));
      row.notes["speed-up" + v] = fmt::format("{:.1f}× dense", row.times["dense-cublas" + v].median_ms /
                                                               row.times["covflow" + v].median_ms);
    }
  }
  return row;
}

// Time per point across sizes: the least-squares slope of log(time) against log(n) of each timed
// step over the rows of one tolerance (1: linear in n, constant time per point), for the rows
// whose n are at least two apart.
Row scaling_row(const std::vector<Row>& rows, const std::vector<Case>& cases, double tol) {
  Row out;
  out.op = "h2-scaling";
  out.dtype = rows.empty() ? "" : rows.front().dtype;
  std::vector<std::size_t> picked;
  for (std::size_t i = 0; i < rows.size() && i < cases.size(); ++i)
    if (cases[i].tol == tol) picked.push_back(i);
  std::int64_t lo = 0, hi = 0;
  for (std::size_t i : picked) {
    lo = lo == 0 ? cases[i].n : std::min(lo, cases[i].n);
    hi = std::max(hi, cases[i].n);
  }
  out.shape = fmt::format("n={}…{} tol {:g}: slope of log(time) on log(n)", lo, hi, tol);
  for (const char* step : {"build (CPU)", "build (GPU)", "compress (CPU)", "compress (GPU)", "covflow ×1", "covflow ×16"}) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int count = 0;
    std::string per_point;
    for (std::size_t i : picked) {
      const auto it = rows[i].times.find(step);
      if (it == rows[i].times.end() || !(it->second.median_ms > 0)) continue;
      const double x = std::log(double(cases[i].n)), y = std::log(it->second.median_ms);
      sx += x;
      sy += y;
      sxx += x * x;
      sxy += x * y;
      ++count;
      per_point += fmt::format("{}{:.3g}", per_point.empty() ? "" : "/", 1e6 * it->second.median_ms / double(cases[i].n));
    }
    if (count < 2) continue;
    const double slope = (count * sxy - sx * sy) / (count * sxx - sx * sx);
    out.notes[step] = fmt::format("n^{:.2f}; ns per point {}", slope, per_point);
  }
  return out;
}

}  // namespace

nlohmann::json run_h2_bench(const Settings& settings, linalg::Exec* gpu) {
  Report report("h2");
  if (gpu == nullptr) {
    fmt::print("h2: no GPU, nothing timed (the matvec is timed on the GPU)\n");
    return report.to_json();
  }
  std::vector<Case> cases;
  for (const std::string& text : settings.shapes) cases.push_back(parse_case(text));
  if (cases.empty()) {
    cases = {{16384, 1e-6}, {32768, 1e-6}, {65536, 1e-6}, {131072, 1e-6}, {262144, 1e-6}, {32768, 1e-4}, {32768, 1e-8}};
    if (settings.quick) cases = {{16384, 1e-6}};
  }
  std::mt19937_64 rng(20261127);
  for (const Case& c : cases) {
    fmt::print("h2: n = {}, tol {:g} …\n", c.n, c.tol);
    std::fflush(stdout);
    if (settings.dtype.empty() || settings.dtype == "cf64") report.add(bench_case<cf64>(c, settings, *gpu, rng));
    if (settings.dtype == "f64") report.add(bench_case<f64>(c, settings, *gpu, rng));
  }
  // Time per point from 16k to 256k points: the rows of each tolerance that was run at three or
  // more sizes.
  std::vector<double> tolerances;
  for (const Case& c : cases)
    if (std::count_if(cases.begin(), cases.end(), [&](const Case& d) { return d.tol == c.tol; }) >= 3 &&
        std::find(tolerances.begin(), tolerances.end(), c.tol) == tolerances.end())
      tolerances.push_back(c.tol);
  const std::vector<Row> rows = report.rows();
  for (double tol : tolerances) report.add(scaling_row(rows, cases, tol));
  report.print();
  return report.to_json();
}
#endif

}  // namespace covflow::bench

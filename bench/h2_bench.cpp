// covflow-bench h2: H² covariance matrices (linalg/h2.hpp) — construction and compression on the
// CPU and on the GPU, memory against dense, and the matvec on the GPU (h2_gemv) for 1 and 16
// vectors against the dense matrix times the same vectors with cuBLAS (Zhemv / Dsymv for one
// vector, GemmEx for 16) where the dense matrix fits (n ≤ 32768), with where the matvec's time goes
// (h2_gemv_phases); then, for each kernel and tolerance run at three or more sizes, the slope of
// each step's time against n (time per point).
//
// Rows: --shape [KERNEL/]N/TOL, KERNEL exp (the default) or clutter; the row's JSON names the
// kernel ("input"), the geometry and the tolerance ("shape"), and the whole input (notes "input").
//   exp      The experiment of Boukaram et al., "Batched QR and SVD algorithms on GPUs with
//            applications in hierarchical matrix compression" (Parallel Computing 2018, §8.3): n
//            points on a randomly perturbed regular grid in [0, 1]², the exponential kernel
//            exp(−r/ℓ) with ℓ = 0.1; leaf 64, η 0.7, Chebyshev order 7 (rank 49; construction
//            error 3.3e-8 at n = 2025 in h2_test), or order 9 (rank 81; 7.9e-10 on a 64 × 64 grid)
//            for a tolerance below 1e-7, so that the construction's error stays under the
//            tolerance. Built on the CPU and on the GPU (h2_build, h2_build_device), then
//            compressed to the tolerance on each (h2_compress on the H2 and on the H2Device).
//   clutter  The radar clutter kernel (h2.hpp) on the element positions of a planar array at half a
//            wavelength — rows × cols elements, cols the smallest divisor of n from √n up when one
//            is at most 2√n (64 × 64, 64 × 128, 128 × 128 for 4096, 8192, 16384), else ⌈√n⌉ with
//            the last row part filled — λ = 0.03 m (X band: elements 1.5 cm apart), clutter
//            uniform over the azimuth sector 0.2 ± 0.3 rad, σ² = 1, nugget 0.01 (noise 20 dB
//            under the clutter); leaf 64, η 0.7. Built from the dense matrix to the tolerance on
//            the CPU and on the GPU (h2_from_dense, h2_from_dense_device): an array many
//            wavelengths across is beyond h2_build's interpolation at any useful order (a cluster
//            spans a phase of 2π·its size in wavelengths; on a 32 × 32 array the construction error
//            is 0.51 at order 7 and 2.9e-6 only at order 22, with 7.6 times the dense matrix's
//            memory), while the matrix itself compresses to ranks 11–18 from 1e-4 to 1e-8. The dense
//            matrix is made on the GPU from the library's kernel formulas (h2_build_device with one
//            leaf holding every point, then h2_expand on the device) and read back for the CPU.
//            At most 16384 points: h2_from_dense_device takes a node's far columns (up to n) as
//            the rows of one batched QR, documented up to 16384, and holds the n × n matrix and a
//            leaf batch as large beside it.
//
// Checks (a failed check fails the row and the run): the H² matvec against the dense product
// (n ≤ 32768; relative Frobenius error ≤ 10·tol plus the construction's error before compression:
// 1e-6 at order 7, 1e-8 at order 9, 1e-12 — rounding — from the dense matrix) and against the CPU
// h2_gemv of the same H² (every row; ≤ 1e-10 in double, 1e-3 in float); the device's construction
// against the CPU's by one matvec of each (h2_build_device ≤ 1e-12 in double, 1e-4 in float; the
// device's compression, and its construction from the dense matrix, ≤ 2·tol: each is within tol of
// the same matrix).
#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
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

// The most points of a clutter row (see the clutter input above).
constexpr std::int64_t kClutterMaxPoints = 16384;
// The largest n whose dense matrix is formed for the comparisons with cuBLAS.
constexpr std::int64_t kDenseMaxPoints = 32768;

struct Case {
  H2Kernel kernel = H2Kernel::exponential;  // exponential or clutter
  std::int64_t n = 0;
  double tol = 0;
};

const char* label(H2Kernel kernel) { return kernel == H2Kernel::clutter ? "clutter" : "exp"; }

Case parse_case(const std::string& text) {
  const std::invalid_argument usage("--shape expects [KERNEL/]N/TOL, KERNEL exp (the default) or clutter, e.g. "
                                    "32768/1e-6 or clutter/16384/1e-6; got '" + text + "'");
  std::vector<std::string> parts;
  for (std::size_t begin = 0;;) {
    const std::size_t slash = text.find('/', begin);
    parts.push_back(text.substr(begin, slash == std::string::npos ? std::string::npos : slash - begin));
    if (slash == std::string::npos) break;
    begin = slash + 1;
  }
  if (parts.size() != 2 && parts.size() != 3) throw usage;
  Case c;
  if (parts.size() == 3) {
    if (parts[0] == "clutter") c.kernel = H2Kernel::clutter;
    else if (parts[0] != "exp") throw usage;
  }
  try {
    c.n = std::stoll(parts[parts.size() - 2]);
    c.tol = std::stod(parts.back());
  } catch (const std::exception&) {
    throw usage;
  }
  if (c.n < 1 || !(c.tol > 0) || !std::isfinite(c.tol)) throw usage;
  if (c.kernel == H2Kernel::clutter && c.n > kClutterMaxPoints)
    throw std::invalid_argument(fmt::format("--shape {}: a clutter row takes at most {} points (it is built from the "
                                            "dense matrix: h2_from_dense_device's limit)",
                                            text, kClutterMaxPoints));
  return c;
}

// What one row is built on: the points (2-D, point i at 2i, 2i + 1), the kernel, the options, and
// how the row names them.
struct Input {
  std::vector<double> points;
  H2KernelSpec kernel;
  H2Options options;
  std::string geometry;           // short, in the row's shape
  std::string description;        // the whole input, in the row's notes
  double construction_error = 0;  // ‖A − A_H‖_F/‖A‖_F before compression is at most this
};

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

Input exponential_input(const Case& c, std::mt19937_64& rng) {
  Input in;
  in.points = perturbed_grid(c.n, rng);
  in.kernel.kind = H2Kernel::exponential;
  in.kernel.length = 0.1;
  const int order = c.tol < 1e-7 ? 9 : 7;
  in.options = H2Options{64, 0.7, order, 0.0};
  in.construction_error = order == 9 ? 1e-8 : 1e-6;
  const auto side = static_cast<std::int64_t>(std::ceil(std::sqrt(double(c.n))));
  in.geometry = fmt::format("perturbed grid, order {}", order);
  in.description = fmt::format("exponential exp(−r/ℓ), ℓ 0.1, on a {}×{} grid of [0, 1]² (each point moved by up to a "
                               "quarter of the spacing); h2_build order {} (rank {}), leaf 64, η 0.7, then h2_compress",
                               side, (c.n + side - 1) / side, order, order * order);
  return in;
}

// rows × cols of a clutter row's array (see the clutter input above).
std::pair<std::int64_t, std::int64_t> array_shape(std::int64_t n) {
  const auto root = static_cast<std::int64_t>(std::ceil(std::sqrt(double(n))));
  for (std::int64_t cols = root; cols <= 2 * root; ++cols)
    if (n % cols == 0) return {n / cols, cols};
  return {(n + root - 1) / root, root};
}

Input clutter_input(const Case& c) {
  constexpr double wavelength = 0.03, center = 0.2, width = 0.6, nugget = 0.01;
  Input in;
  const auto [rows, cols] = array_shape(c.n);
  in.points.resize(static_cast<std::size_t>(2 * c.n));
  for (std::int64_t i = 0; i < c.n; ++i) {
    in.points[2 * i] = double(i % cols) * wavelength / 2;
    in.points[2 * i + 1] = double(i / cols) * wavelength / 2;
  }
  in.kernel = H2KernelSpec{H2Kernel::clutter, 1.0, 0.1, 0.5, wavelength, center, width};
  in.options = H2Options{64, 0.7, 1, nugget};  // h2_from_dense takes the leaf and η; the nugget is in the matrix
  in.construction_error = 1e-12;
  in.geometry = fmt::format("{}×{} λ/2 array", rows, cols);
  in.description = fmt::format("clutter over azimuth {} ± {} rad, λ {} m, σ² 1, nugget {}, on a {}×{} planar array at "
                               "λ/2{}; h2_from_dense, leaf 64, η 0.7",
                               center, width / 2, wavelength, nugget, rows, cols,
                               rows * cols == c.n ? "" : fmt::format(" (its first {} elements)", c.n));
  return in;
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

// ‖A₁·x − A₀·x‖/‖A₀·x‖ for one Gaussian vector x: two H² matrices on the device, one matvec each.
template <class T>
double matvec_difference(Exec& gpu, const H2Device<T>& a1, const H2Device<T>& a0, std::mt19937_64& rng) {
  const std::int64_t n = a0.shape().n;
  const cudaStream_t stream = gpu.cuda_context().stream();
  std::vector<T> xs(static_cast<std::size_t>(n));
  std::normal_distribution<double> normal;
  for (T& v : xs) v = T(normal(rng));
  cuda::DeviceBuffer<T> xd(xs.size()), y0(xs.size()), y1(xs.size());
  xd.upload(xs, stream);
  gpu.workspace().reserve(std::max(h2_gemv_workspace<T>(gpu, a0, 1), h2_gemv_workspace<T>(gpu, a1, 1)));
  h2_gemv<T>(gpu, T(1), a0, Batch<const T>::packed(xd.data(), n, 1, 1), T(0), Batch<T>::packed(y0.data(), n, 1, 1));
  h2_gemv<T>(gpu, T(1), a1, Batch<const T>::packed(xd.data(), n, 1, 1), T(0), Batch<T>::packed(y1.data(), n, 1, 1));
  std::vector<T> h0(xs.size()), h1(xs.size());
  y0.download(h0, stream);
  y1.download(h1, stream);
  gpu.synchronize();
  return relative_difference(h1, h0);
}

std::string ranks_of(const std::vector<int>& ranks) {
  std::string out;
  for (int k : ranks) out += fmt::format("{}{}", out.empty() ? "" : "/", k);
  return out;
}

// exp rows: h2_build and h2_compress on the CPU (into `a`) and on the GPU (into `on_device`),
// timed and checked against each other.
// A matrix made on the device against the CPU's `a` (uploaded), one matvec each: noted as `label`
// with whether the ranks agree and the two error bounds; the row fails past 2·tol, naming `what`.
template <class T>
void note_against_cpu(Row& row, Exec& gpu, const H2Device<T>& on_device, const H2<T>& a, const H2CompressReport& gpu_report,
                      const H2CompressReport& report, double tol, std::mt19937_64& rng, const std::string& label,
                      const std::string& what) {
  const H2Device<T> uploaded = h2_upload<T>(gpu, a);
  const double d = matvec_difference<T>(gpu, on_device, uploaded, rng);
  row.notes[label] = fmt::format("{:.1e} (one matvec each; ranks {}; bound {:.2e} vs {:.2e})", d,
                                 on_device.shape().rank == a.rank ? "equal" : "differ", gpu_report.error_bound,
                                 report.error_bound);
  if (!(d <= 2 * tol)) row.fail(fmt::format("{} differs from the CPU's by {:.2e}", what, d));
}

template <class T>
void construct_from_kernel(Row& row, const Case& c, const Input& in, Exec& cpu, Exec& gpu, std::mt19937_64& rng, H2<T>& a,
                           H2Device<T>& on_device) {
  row.times["build (CPU)"] = time_host([&] { a = h2_build<T>(cpu, in.points, 2, in.kernel, in.options); }, 0, 1);
  // The construction on the device, from the points on the host to the H2Device (warm-up once:
  // the first call grows the Exec's workspace and loads the kernels).
  row.times["build (GPU)"] = time_host(
      [&] {
        on_device = h2_build_device<T>(gpu, in.points, 2, in.kernel, in.options);
        gpu.synchronize();
      },
      1, 3);
  const H2Stats built = h2_stats(a);
  {
    // The device's construction is the CPU's matrix: one matvec of each against the other.
    const H2Device<T> uploaded = h2_upload<T>(gpu, a);
    const double d = matvec_difference<T>(gpu, on_device, uploaded, rng);
    row.notes["GPU build vs CPU build"] = fmt::format("{:.1e} (one matvec each)", d);
    if (!(d <= (sizeof(real_t<T>) == 8 ? 1e-12 : 1e-4)))
      row.fail(fmt::format("the device construction differs from the CPU's by {:.2e}", d));
  }
  H2CompressReport report;
  row.times["compress (CPU)"] = time_host([&] { report = h2_compress<T>(cpu, a, c.tol); }, 0, 1);
  const H2Stats stats = h2_stats(a);
  row.notes["memory"] = fmt::format("built {:.2f}% of dense, compressed {:.2f}% ({:.1f} MB; dense {:.1f} MB)",
                                    100.0 * double(built.total_bytes) / double(built.dense_matrix_bytes),
                                    100.0 * double(stats.total_bytes) / double(stats.dense_matrix_bytes),
                                    double(stats.total_bytes) / 1e6, double(stats.dense_matrix_bytes) / 1e6);
  row.notes["ranks"] = fmt::format("built {}, compressed {}; bound {:.2e}", ranks_of(built.ranks), ranks_of(stats.ranks),
                                   report.error_bound);
  // The compression on the device, of the matrix h2_build_device made (one call: it replaces its
  // argument), against the CPU's: the same ranks, and the same matrix within the two bounds.
  H2CompressReport gpu_report;
  row.times["compress (GPU)"] = time_host(
      [&] {
        gpu_report = h2_compress<T>(gpu, on_device, c.tol);
        gpu.synchronize();
      },
      0, 1);
  row.notes["build + compress (GPU)"] =
      fmt::format("{:.3f} s", (row.times["build (GPU)"].median_ms + row.times["compress (GPU)"].median_ms) / 1e3);
  note_against_cpu(row, gpu, on_device, a, gpu_report, report, c.tol, rng, "GPU compress vs CPU compress",
                   "the device compression");
}

// clutter rows: the dense matrix on the GPU (into `dense`, the caller's order), then h2_from_dense
// on the CPU (into `a`) and h2_from_dense_device (into `on_device`), timed and checked against
// each other.
template <class T>
void construct_from_dense(Row& row, const Case& c, const Input& in, Exec& cpu, Exec& gpu, std::mt19937_64& rng, H2<T>& a,
                          H2Device<T>& on_device, cuda::DeviceBuffer<T>& dense) {
  const std::int64_t n = c.n;
  const cudaStream_t stream = gpu.cuda_context().stream();
  dense = cuda::DeviceBuffer<T>(static_cast<std::size_t>(n * n));
  const Timing made = time_host(
      [&] {
        H2Options one_leaf = in.options;
        one_leaf.leaf_size = n;
        const H2Device<T> whole = h2_build_device<T>(gpu, in.points, 2, in.kernel, one_leaf);
        h2_expand<T>(gpu, whole, Batch<T>::packed(dense.data(), n, n, 1));
        gpu.synchronize();  // before `whole` is freed
      },
      0, 1);
  std::vector<T> host(static_cast<std::size_t>(n * n));
  dense.download(host, stream);
  gpu.synchronize();
  row.notes["dense matrix"] = fmt::format("{:.1f} ms on the GPU (h2_build_device with one leaf, h2_expand), {:.1f} MB",
                                          made.median_ms, double(host.size() * sizeof(T)) / 1e6);

  H2CompressReport report;
  row.times["from dense (CPU)"] = time_host(
      [&] { a = h2_from_dense<T>(cpu, Batch<const T>::packed(host.data(), n, n, 1), in.points, 2, c.tol, in.options, &report); },
      0, 1);
  host = {};
  const H2Stats stats = h2_stats(a);
  row.notes["memory"] = fmt::format("{:.2f}% of dense ({:.1f} MB; dense {:.1f} MB)",
                                    100.0 * double(stats.total_bytes) / double(stats.dense_matrix_bytes),
                                    double(stats.total_bytes) / 1e6, double(stats.dense_matrix_bytes) / 1e6);
  row.notes["ranks"] = fmt::format("{}; bound {:.2e}", ranks_of(stats.ranks), report.error_bound);
  // The same construction on the device (warm-up once, as the build of the exp rows).
  H2CompressReport gpu_report;
  row.times["from dense (GPU)"] = time_host(
      [&] {
        on_device = h2_from_dense_device<T>(gpu, Batch<const T>::packed(dense.data(), n, n, 1), in.points, 2, c.tol,
                                            in.options, &gpu_report);
        gpu.synchronize();
      },
      1, 3);
  note_against_cpu(row, gpu, on_device, a, gpu_report, report, c.tol, rng, "GPU from dense vs CPU from dense",
                   "the device's construction from the dense matrix");
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
  const bool clutter = c.kernel == H2Kernel::clutter;
  const Input in = clutter ? clutter_input(c) : exponential_input(c, rng);
  Row row;
  row.op = "h2";
  row.dtype = std::string(name(element_type_of<T>()));
  row.input = label(c.kernel);
  row.shape = fmt::format("n={} tol {:g} {}", c.n, c.tol, in.geometry);
  row.vendors = {"dense-cublas"};
  row.notes["input"] = in.description;
  const std::int64_t n = c.n;
  Exec cpu = Exec::cpu();
  CudaContext& context = gpu.cuda_context();
  const cudaStream_t stream = context.stream();

  H2<T> a;                       // the CPU's H², compressed: timed on the GPU after an upload
  H2Device<T> on_device;         // the GPU's own, compared with the CPU's
  cuda::DeviceBuffer<T> dense;   // the dense matrix (n ≤ 32768), the caller's order
  if (clutter) construct_from_dense<T>(row, c, in, cpu, gpu, rng, a, on_device, dense);
  else construct_from_kernel<T>(row, c, in, cpu, gpu, rng, a, on_device);
  on_device = {};
  const H2Stats stats = h2_stats(a);

  H2Device<T> device;
  row.times["upload"] = time_host([&] { device = h2_upload<T>(gpu, a); gpu.synchronize(); }, 0, 1);
  if (!clutter && n <= kDenseMaxPoints) {
    // The dense kernel matrix, in the caller's point order (x coordinates, then y).
    std::vector<double> columns(static_cast<std::size_t>(2 * n));
    for (std::int64_t i = 0; i < n; ++i) {
      columns[i] = in.points[2 * i];
      columns[i + n] = in.points[2 * i + 1];
    }
    cuda::DeviceBuffer<double> p(columns.size());
    p.upload(columns, stream);
    dense = cuda::DeviceBuffer<T>(static_cast<std::size_t>(n * n));
    exponential_matrix<T>(dense.data(), p.data(), n, in.kernel.length, 0.0, 0.0, stream);
    gpu.synchronize();  // before `columns` and `p` are freed
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
    if (dense.size() == 0) continue;
    cuda::DeviceBuffer<T> yd(static_cast<std::size_t>(n * nvec));
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
    const double bound = 10 * c.tol + in.construction_error;
    row.notes["vs dense" + v] = fmt::format("{:.1e} (bound {:.1e})", against_dense, bound);
    if (!(against_dense <= bound))
      row.fail(fmt::format("H² matvec{} differs from the dense product by {:.2e} (bound {:.1e})", v, against_dense, bound));
    row.notes["speed-up" + v] = fmt::format("{:.1f}× dense", row.times["dense-cublas" + v].median_ms /
                                                             row.times["covflow" + v].median_ms);
  }
  return row;
}

// Time per point across sizes: the least-squares slope of log(time) against log(n) of each timed
// step over the rows of one kernel and tolerance (1: linear in n, constant time per point).
Row scaling_row(const std::vector<Row>& rows, const std::vector<Case>& cases, H2Kernel kernel, double tol) {
  Row out;
  out.op = "h2-scaling";
  out.dtype = rows.empty() ? "" : rows.front().dtype;
  out.input = label(kernel);
  std::vector<std::size_t> picked;
  for (std::size_t i = 0; i < rows.size() && i < cases.size(); ++i)
    if (cases[i].kernel == kernel && cases[i].tol == tol) picked.push_back(i);
  std::int64_t lo = 0, hi = 0;
  for (std::size_t i : picked) {
    lo = lo == 0 ? cases[i].n : std::min(lo, cases[i].n);
    hi = std::max(hi, cases[i].n);
  }
  out.shape = fmt::format("n={}…{} tol {:g}: slope of log(time) on log(n)", lo, hi, tol);
  for (const char* step : {"build (CPU)", "build (GPU)", "compress (CPU)", "compress (GPU)", "from dense (CPU)",
                           "from dense (GPU)", "covflow ×1", "covflow ×16"}) {
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
  std::vector<Case> cases;  // parsed first: a bad --shape is an error with or without a GPU
  for (const std::string& text : settings.shapes) cases.push_back(parse_case(text));
  if (gpu == nullptr) {
    fmt::print("h2: no GPU, nothing timed (the matvec is timed on the GPU)\n");
    return report.to_json();
  }
  if (cases.empty()) {
    constexpr H2Kernel exponential = H2Kernel::exponential, clutter = H2Kernel::clutter;
    cases = {{exponential, 16384, 1e-6}, {exponential, 32768, 1e-6},  {exponential, 65536, 1e-6},
             {exponential, 131072, 1e-6}, {exponential, 262144, 1e-6}, {exponential, 32768, 1e-4},
             {exponential, 32768, 1e-8}, {exponential, 65536, 1e-8},  {clutter, 4096, 1e-6},
             {clutter, 8192, 1e-6},      {clutter, 16384, 1e-6},      {clutter, 16384, 1e-8}};
    if (settings.quick) cases = {{exponential, 16384, 1e-6}, {clutter, 4096, 1e-6}};
  }
  // The rows run, and the case of each (the clutter kernel is complex: no f64 rows).
  std::vector<Case> ran;
  std::mt19937_64 rng(20261127);
  for (const Case& c : cases) {
    fmt::print("h2: {}, n = {}, tol {:g} …\n", label(c.kernel), c.n, c.tol);
    std::fflush(stdout);
    if (settings.dtype.empty() || settings.dtype == "cf64") {
      report.add(bench_case<cf64>(c, settings, *gpu, rng));
      ran.push_back(c);
    } else if (settings.dtype == "f64") {
      if (c.kernel == H2Kernel::clutter) {
        fmt::print("h2: the clutter kernel is complex: no f64 row\n");
        continue;
      }
      report.add(bench_case<f64>(c, settings, *gpu, rng));
      ran.push_back(c);
    }
  }
  // Time per point across sizes: each kernel and tolerance that was run at three or more sizes.
  std::vector<std::pair<H2Kernel, double>> groups;
  for (const Case& c : ran) {
    const auto same = [&](const Case& d) { return d.kernel == c.kernel && d.tol == c.tol; };
    const std::pair<H2Kernel, double> group{c.kernel, c.tol};
    if (std::count_if(ran.begin(), ran.end(), same) >= 3 && std::find(groups.begin(), groups.end(), group) == groups.end())
      groups.push_back(group);
  }
  const std::vector<Row> rows = report.rows();
  for (const auto& [kernel, tol] : groups) report.add(scaling_row(rows, ran, kernel, tol));
  report.print();
  return report.to_json();
}
#endif

}  // namespace covflow::bench

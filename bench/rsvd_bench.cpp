// covflow-bench rsvd: batched randomized SVD.
//   covflow          linalg::rsvd on the CUDA backend (fixed rank: k + 10 samples, one power
//                    iteration — the defaults; the fixed-accuracy row: tolerance and max rank below)
//   gesvda-strided   cusolverDn<t>gesvdaStridedBatched with rank k (approximate, on the Gram matrix)
//   gesvdr-streams   cusolverDnXgesvdr (k, p = 10, one iteration) on each matrix, over 20 streams with
//                    a handle, params and workspaces each
//   gesvj-truncated  linalg::gesvj (the full Jacobi SVD) cut to rank k; only up to 512² (above, one
//                    full SVD per matrix is what a randomized SVD is for)
// Rows: 200 × 512² rank 64 (the paper's §7 workload), 180 × 1024² rank 32, 16 × 4096² rank 32, and
// fixed accuracy (10⁻⁶; 10⁻² in complex float, whose ε cannot confirm 10⁻⁶) on 200 × 512²;
// complex double, complex float, double.
// Inputs: A = X·diag(σ)·Yᴴ + ν·G, X and Y orthonormal (m × 128, n × 128: QR of Gaussian matrices),
// σ_i = e^(−i/8) (σ_64 ≈ 3e-4, σ_128 ≈ 1e-7), G Gaussian scaled so that ‖νG‖_F = 1e-9·‖A‖_F — a fast
// decay over a floor, the shape the H² and TLR compression sees.
// Each contender's achieved ‖A − UΣVᴴ‖_F/‖A‖_F is measured on the device for two matrices of the
// batch (cuBLAS: U scaled by σ, A − (UΣ)Vᴴ, its norm), outside the timed region, and reported; a
// row fails when covflow's info is not ok or its error is more than twice the best vendor's (the
// target compares at equal or smaller error).
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "rsvd_bench.hpp"
#include "covflow/linalg/qr.hpp"
#include "covflow/linalg/rsvd.hpp"
#include "covflow/linalg/svd.hpp"
#if COVFLOW_HAS_CUDA
#include <cublas_v2.h>
#include <curand.h>
#include <cusolverDn.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/cuda/stream.hpp"
#endif

namespace covflow::bench {
namespace {

using namespace covflow::linalg;

struct Shape {
  int m, n;
  long long count;
  int rank;            // fixed rank k; 0: the fixed-accuracy row
};

constexpr int kStreams = 20;
constexpr int kOversampling = 10;
constexpr int kBasis = 128;          // columns of X and Y
constexpr int kSampled = 2;          // matrices whose error is measured
constexpr double kBudgetMs = 1500;

#if COVFLOW_HAS_CUDA
template <class T> struct Cu;
template <> struct Cu<f32> { using type = float; static constexpr cudaDataType data = CUDA_R_32F, real = CUDA_R_32F; };
template <> struct Cu<f64> { using type = double; static constexpr cudaDataType data = CUDA_R_64F, real = CUDA_R_64F; };
template <> struct Cu<cf32> { using type = cuComplex; static constexpr cudaDataType data = CUDA_C_32F, real = CUDA_R_32F; };
template <> struct Cu<cf64> { using type = cuDoubleComplex; static constexpr cudaDataType data = CUDA_C_64F, real = CUDA_R_64F; };
template <class T> using cu_t = typename Cu<T>::type;
template <class T> cu_t<T>* cu(T* p) { return reinterpret_cast<cu_t<T>*>(p); }
template <class T> const cu_t<T>* cu(const T* p) { return reinterpret_cast<const cu_t<T>*>(p); }

#define COVFLOW_RSVD_VENDOR(T, P)                                                                                      \
  cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, T alpha,       \
                      const T* a, int lda, long long sa, const T* b, int ldb, long long sb, T beta, T* c, int ldc,      \
                      long long sc, int count) {                                                                       \
    return cublas##P##gemmStridedBatched(h, ta, tb, m, n, k, cu(&alpha), cu(a), lda, sa, cu(b), ldb, sb, cu(&beta),     \
                                         cu(c), ldc, sc, count);                                                       \
  }                                                                                                                    \
  cusolverStatus_t gesvda_buffer(cusolverDnHandle_t h, int k, int m, int n, T* a, real_t<T>* s, T* u, T* v,          \
                                 int* lwork, int batch) {                                                              \
    return cusolverDn##P##gesvdaStridedBatched_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, k, m, n, cu(a), m,              \
                                                          (long long)m * n, s, k, cu(u), m, (long long)m * k, cu(v),   \
                                                          n, (long long)n * k, lwork, batch);                          \
  }                                                                                                                    \
  cusolverStatus_t gesvda(cusolverDnHandle_t h, int k, int m, int n, T* a, real_t<T>* s, T* u, T* v, T* work,         \
                          int lwork, int* info, double* residuals, int batch) {                                        \
    return cusolverDn##P##gesvdaStridedBatched(h, CUSOLVER_EIG_MODE_VECTOR, k, m, n, cu(a), m, (long long)m * n, s, k, \
                                               cu(u), m, (long long)m * k, cu(v), n, (long long)n * k, cu(work),       \
                                               lwork, info, residuals, batch);                                         \
  }
COVFLOW_RSVD_VENDOR(f32, S)
COVFLOW_RSVD_VENDOR(f64, D)
COVFLOW_RSVD_VENDOR(cf32, C)
COVFLOW_RSVD_VENDOR(cf64, Z)
#undef COVFLOW_RSVD_VENDOR



// The batch of inputs (see the top of the file), on the device.
template <class T>
void make_inputs(Exec& gpu, T* a, int m, int n, long long count, std::mt19937_64& rng) {
  CudaContext& context = gpu.cuda_context();
  cudaStream_t stream = context.stream();
  const int basis = std::min({kBasis, m, n});
  cuda::DeviceBuffer<T> x(static_cast<std::size_t>(count) * m * basis), y(static_cast<std::size_t>(count) * n * basis);
  cuda::DeviceBuffer<T> tau(static_cast<std::size_t>(count) * basis);
  cuda::DeviceBuffer<int> info(static_cast<std::size_t>(count));
  fill_gaussian(x.data(), x.size(), rng(), stream);
  fill_gaussian(y.data(), y.size(), rng(), stream);
  gpu.workspace().reserve(std::max(geqrf_workspace<T>(gpu, m, basis, count), geqrf_workspace<T>(gpu, n, basis, count)));
  for (auto [buffer, rows] : {std::pair{&x, m}, std::pair{&y, n}}) {
    const Batch<T> b = Batch<T>::packed(buffer->data(), rows, basis, count);
    geqrf<T>(gpu, b, {tau.data(), tau.size()}, {info.data(), info.size()});
    ungqr<T>(gpu, b, {tau.data(), tau.size()});
  }
  // X·diag(σ): σ_i = e^(−i/8), by scaling X's columns on the host side of a small upload.
  std::vector<T> sigma(static_cast<std::size_t>(basis) * basis, T(0));
  double norm2 = 0;
  for (int i = 0; i < basis; ++i) {
    sigma[static_cast<std::size_t>(i) * basis + i] = T(real_t<T>(std::exp(-i / 8.0)));
    norm2 += std::exp(-i / 4.0);
  }
  cuda::DeviceBuffer<T> d(sigma.size()), xs(x.size());
  d.upload(sigma, stream);
  const T one(1), zero(0);
  const cublasOperation_t adjoint = is_complex_v<T> ? CUBLAS_OP_C : CUBLAS_OP_T;
  COVFLOW_CUBLAS_TRY(gemm(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, m, basis, basis, one, x.data(), m,
                          (long long)m * basis, d.data(), basis, 0, zero, xs.data(), m, (long long)m * basis, int(count)));
  // A = ν·G + XΣ·Yᴴ, ‖νG‖_F = 1e-9·‖A‖_F (‖G‖_F ≈ √(m·n)).
  fill_gaussian(a, static_cast<std::size_t>(count) * m * n, rng(), stream);
  const T nu(real_t<T>(1e-9 * std::sqrt(norm2) / std::sqrt(double(m) * n)));
  COVFLOW_CUBLAS_TRY(gemm(context.cublas(), CUBLAS_OP_N, adjoint, m, n, basis, one, xs.data(), m, (long long)m * basis,
                          y.data(), n, (long long)n * basis, nu, a, m, (long long)m * n, int(count)));
  gpu.synchronize();
}

// ‖A_b − U·diag(s)·Vᴴ‖_F/‖A_b‖_F for b < kSampled (U m × ldk… column-major with the given strides).
template <class T>
double achieved_error(Exec& gpu, const T* a, int m, int n, long long count, const real_t<T>* s, long long s_stride,
                      const T* u, long long u_stride, const T* v, long long v_stride, int k) {
  CudaContext& context = gpu.cuda_context();
  cudaStream_t stream = context.stream();
  const int sampled = static_cast<int>(std::min<long long>(count, kSampled));
  std::vector<real_t<T>> hs(static_cast<std::size_t>(k));
  cuda::DeviceBuffer<T> us(static_cast<std::size_t>(m) * k), r(static_cast<std::size_t>(m) * n);
  double worst = 0;
  for (int b = 0; b < sampled; ++b) {
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(hs.data(), s + b * s_stride, sizeof(real_t<T>) * k, cudaMemcpyDeviceToHost, stream));
    gpu.synchronize();
    std::vector<T> diag(static_cast<std::size_t>(k) * k, T(0));
    for (int i = 0; i < k; ++i) diag[static_cast<std::size_t>(i) * k + i] = T(hs[i]);
    cuda::DeviceBuffer<T> d(diag.size());
    d.upload(diag, stream);
    const T one(1), zero(0), minus(-1);
    const cublasOperation_t adjoint = is_complex_v<T> ? CUBLAS_OP_C : CUBLAS_OP_T;
    COVFLOW_CUBLAS_TRY(gemm(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, m, k, k, one, u + b * u_stride, m, 0, d.data(), k,
                            0, zero, us.data(), m, 0, 1));
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(r.data(), a + b * static_cast<long long>(m) * n, sizeof(T) * r.size(),
                                     cudaMemcpyDeviceToDevice, stream));
    COVFLOW_CUBLAS_TRY(gemm(context.cublas(), CUBLAS_OP_N, adjoint, m, n, k, minus, us.data(), m, 0, v + b * v_stride, n, 0,
                            one, r.data(), m, 0, 1));
    std::vector<T> hr(r.size()), ha(r.size());
    r.download(hr, stream);
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(ha.data(), a + b * static_cast<long long>(m) * n, sizeof(T) * ha.size(),
                                     cudaMemcpyDeviceToHost, stream));
    gpu.synchronize();
    double dr = 0, da = 0;
    for (std::size_t e = 0; e < hr.size(); ++e) {
      dr += std::norm(std::complex<double>(hr[e]));
      da += std::norm(std::complex<double>(ha[e]));
    }
    worst = std::max(worst, std::sqrt(dr / da));
  }
  return worst;
}
#endif

template <class T>
Row bench_one(const Shape& shape, const Settings& settings, Exec* gpu, std::mt19937_64& rng) {
  using R = real_t<T>;
  const int m = shape.m, n = shape.n;
  const long long count = shape.count;
  const bool fixed_rank = shape.rank > 0;
  Row row;
  row.op = fixed_rank ? "rsvd" : "rsvd-accuracy";
  row.dtype = std::string(name(element_type_of<T>()));
  RsvdOptions options;
  double tolerance = 0;
  if (fixed_rank) {
    options.rank = shape.rank;
    row.shape = fmt::format("{}×{} batch={} rank {}", m, n, count, shape.rank);
  } else {
    tolerance = std::is_same_v<R, float> ? 1e-2 : 1e-6;
    options.tolerance = tolerance;
    options.max_rank = 192;
    row.shape = fmt::format("{}×{} batch={} tol {:g} (max rank {})", m, n, count, tolerance, options.max_rank);
  }
  const int k = rsvd_output_rank(m, n, options);
#if COVFLOW_HAS_CUDA
  if (gpu == nullptr) return row;
  CudaContext& context = gpu->cuda_context();
  cudaStream_t stream = context.stream();
  const std::size_t elements = static_cast<std::size_t>(count) * m * n;
  cuda::DeviceBuffer<T> pristine(elements), work(elements);
  make_inputs<T>(*gpu, pristine.data(), m, n, count, rng);
  auto restore = [&](int) {
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(work.data(), pristine.data(), elements * sizeof(T), cudaMemcpyDeviceToDevice, stream));
  };
  cuda::DeviceBuffer<R> s(static_cast<std::size_t>(count) * std::max(k + kOversampling, std::min(m, n)));
  cuda::DeviceBuffer<T> u(static_cast<std::size_t>(count) * m * std::max(k + kOversampling, k));
  cuda::DeviceBuffer<T> v(static_cast<std::size_t>(count) * n * std::max(k + kOversampling, k));
  cuda::DeviceBuffer<int> info(static_cast<std::size_t>(count));

  // covflow
  cuda::DeviceBuffer<RsvdInfo> rinfo(static_cast<std::size_t>(count));
  cuda::DeviceBuffer<std::byte> workspace(std::max<std::size_t>(rsvd_workspace<T>(*gpu, m, n, count, options), 1));
  row.notes["covflow workspace"] = fmt::format("{:.1f} MiB", workspace.size() / 1048576.0);
  row.times["covflow"] = time_adaptive(
      stream,
      [&](int) {
        rsvd<T>(*gpu, Batch<const T>::packed(pristine.data(), m, n, count), {s.data(), s.size()},
                Batch<T>::packed(u.data(), m, k, count), Batch<T>::packed(v.data(), n, k, count),
                {rinfo.data(), rinfo.size()}, {workspace.data(), workspace.size()}, options);
      },
      {}, settings, kBudgetMs);
  double covflow_error = 0;
  {
    std::vector<RsvdInfo> host(static_cast<std::size_t>(count));
    rinfo.download(host, stream);
    gpu->synchronize();
    int low = k, high = 0, bad = 0;
    for (const RsvdInfo& i : host) {
      low = std::min(low, int(i.rank));
      high = std::max(high, int(i.rank));
      bad += i.status != rsvd_status::ok ? 1 : 0;
    }
    if (bad > 0) {
      std::map<int, int> by_status;
      for (const RsvdInfo& i : host) by_status[i.status] += 1;
      std::string list;
      for (const auto& [status, n] : by_status) list += fmt::format("{}status {}: {}", list.empty() ? "" : ", ", status, n);
      row.fail(fmt::format("covflow: {} matrices with status ≠ ok ({})", bad, list));
    }
    if (!fixed_rank) row.notes["covflow ranks"] = fmt::format("{}–{}", low, high);
    covflow_error = achieved_error<T>(*gpu, pristine.data(), m, n, count, s.data(), k, u.data(), (long long)m * k,
                                      v.data(), (long long)n * k, k);
    row.notes["error covflow"] = fmt::format("{:.2e}", covflow_error);
  }
  double best_vendor_error = std::numeric_limits<double>::infinity();
  cusolverDnHandle_t handle = context.cusolver();
  const int kv = fixed_rank ? k : 0;  // vendors: fixed rank only (their rank k is given)

  // gesvdaStridedBatched, rank k (m ≥ n)
  int gesvda_lwork = 0;
  const cusolverStatus_t gesvda_query =
      fixed_rank && m >= n ? gesvda_buffer(handle, kv, m, n, work.data(), s.data(), u.data(), v.data(), &gesvda_lwork,
                                           int(count))
                           : CUSOLVER_STATUS_NOT_SUPPORTED;
  if (fixed_rank && m >= n && gesvda_query != CUSOLVER_STATUS_SUCCESS)
    row.notes["gesvda-strided"] = fmt::format("not run: its workspace query returned status {} for this batch",
                                              int(gesvda_query));
  if (fixed_rank && m >= n && gesvda_query == CUSOLVER_STATUS_SUCCESS) {
    row.vendors.push_back("gesvda-strided");
    const int lwork = gesvda_lwork;
    cuda::DeviceBuffer<T> vendor_work(static_cast<std::size_t>(std::max(lwork, 1)));
    std::vector<double> residuals(static_cast<std::size_t>(count));
    row.times["gesvda-strided"] = time_adaptive(
        stream,
        [&](int) {
          COVFLOW_CUSOLVER_TRY(gesvda(handle, kv, m, n, work.data(), s.data(), u.data(), v.data(), vendor_work.data(),
                                      lwork, info.data(), residuals.data(), int(count)));
        },
        restore, settings, kBudgetMs);
    const double error = achieved_error<T>(*gpu, pristine.data(), m, n, count, s.data(), kv, u.data(),
                                           (long long)m * kv, v.data(), (long long)n * kv, kv);
    row.notes["error gesvda-strided"] = fmt::format("{:.2e}", error);
    best_vendor_error = std::min(best_vendor_error, error);
  }

  // cusolverDnXgesvdr over 20 streams
  if (fixed_rank) {
    row.vendors.push_back("gesvdr-streams");
    const int p = std::min(kOversampling, std::min(m, n) - kv);
    std::vector<cuda::Stream> streams(kStreams);
    std::vector<cusolverDnHandle_t> handles(kStreams, nullptr);
    std::vector<cusolverDnParams_t> params(kStreams, nullptr);
    std::vector<cuda::Event> forks, joins;
    forks.emplace_back(cudaEventDisableTiming);
    for (int i = 0; i < kStreams; ++i) {
      joins.emplace_back(cudaEventDisableTiming);
      COVFLOW_CUSOLVER_TRY(cusolverDnCreate(&handles[i]));
      COVFLOW_CUSOLVER_TRY(cusolverDnSetStream(handles[i], streams[i]));
      COVFLOW_CUSOLVER_TRY(cusolverDnCreateParams(&params[i]));
    }
    const long long ku = kv + p;
    cuda::DeviceBuffer<T> gu(static_cast<std::size_t>(count) * m * ku), gv(static_cast<std::size_t>(count) * n * ku);
    cuda::DeviceBuffer<R> gs(static_cast<std::size_t>(count) * std::min(m, n));
    std::size_t device_bytes = 0, host_bytes = 0;
    COVFLOW_CUSOLVER_TRY(cusolverDnXgesvdr_bufferSize(handles[0], params[0], 'S', 'S', m, n, kv, p, 1, Cu<T>::data,
                                                      work.data(), m, Cu<T>::real, gs.data(), Cu<T>::data, gu.data(), m,
                                                      Cu<T>::data, gv.data(), n, Cu<T>::data, &device_bytes, &host_bytes));
    cuda::DeviceBuffer<std::byte> dwork(std::max<std::size_t>(device_bytes, 1) * kStreams);
    std::vector<std::vector<std::byte>> hwork(kStreams, std::vector<std::byte>(std::max<std::size_t>(host_bytes, 1)));
    row.times["gesvdr-streams"] = time_adaptive(
        stream,
        [&](int) {
          forks[0].record(stream);
          for (int i = 0; i < kStreams; ++i) COVFLOW_CUDA_TRY(cudaStreamWaitEvent(streams[i], forks[0].get(), 0));
          for (long long j = 0; j < count; ++j) {
            const int i = static_cast<int>(j % kStreams);
            COVFLOW_CUSOLVER_TRY(cusolverDnXgesvdr(
                handles[i], params[i], 'S', 'S', m, n, kv, p, 1, Cu<T>::data, work.data() + j * m * n, m, Cu<T>::real,
                gs.data() + j * std::min(m, n), Cu<T>::data, gu.data() + j * m * ku, m, Cu<T>::data, gv.data() + j * n * ku,
                n, Cu<T>::data, dwork.data() + std::size_t(i) * std::max<std::size_t>(device_bytes, 1), device_bytes,
                hwork[i].data(), host_bytes, info.data() + j));
          }
          for (int i = 0; i < kStreams; ++i) {
            joins[i].record(streams[i]);
            COVFLOW_CUDA_TRY(cudaStreamWaitEvent(stream, joins[i].get(), 0));
          }
        },
        restore, settings, kBudgetMs);
    for (int i = 0; i < kStreams; ++i) {
      cusolverDnDestroyParams(params[i]);
      cusolverDnDestroy(handles[i]);
    }
    const double error = achieved_error<T>(*gpu, pristine.data(), m, n, count, gs.data(), std::min(m, n), gu.data(),
                                           (long long)m * ku, gv.data(), (long long)n * ku, kv);
    row.notes["error gesvdr-streams"] = fmt::format("{:.2e}", error);
    best_vendor_error = std::min(best_vendor_error, error);
  }

  // gesvj, cut to rank k (≤ 512²)
  if (fixed_rank && static_cast<long long>(m) * n <= 512LL * 512) {
    row.vendors.push_back("gesvj-truncated");
    const int full = std::min(m, n);
    cuda::DeviceBuffer<T> ju(static_cast<std::size_t>(count) * m * full), jv(static_cast<std::size_t>(count) * n * full);
    cuda::DeviceBuffer<R> js(static_cast<std::size_t>(count) * full);
    cuda::DeviceBuffer<SvdInfo> jinfo(static_cast<std::size_t>(count));
    gpu->workspace().reserve(gesvj_workspace<T>(*gpu, m, n, count));
    row.times["gesvj-truncated"] = time_adaptive(
        stream,
        [&](int) {
          gesvj<T>(*gpu, Batch<T>::packed(work.data(), m, n, count), {js.data(), js.size()},
                   Batch<T>::packed(ju.data(), m, full, count), Batch<T>::packed(jv.data(), n, full, count),
                   {jinfo.data(), jinfo.size()});
        },
        restore, settings, kBudgetMs);
    row.notes["error gesvj-truncated"] = fmt::format(
        "{:.2e}", achieved_error<T>(*gpu, pristine.data(), m, n, count, js.data(), full, ju.data(), (long long)m * full,
                                    jv.data(), (long long)n * full, kv));
  }

  if (fixed_rank && std::isfinite(best_vendor_error) && covflow_error > 2 * best_vendor_error + 1e-12)
    row.fail(fmt::format("covflow's error {:.2e} is above twice the best vendor's {:.2e}", covflow_error, best_vendor_error));
  const auto covflow_time = row.times["covflow"].median_ms;
  std::string ratios;
  for (const std::string& vendor : row.vendors)
    if (row.times.count(vendor) && covflow_time > 0)
      ratios += fmt::format("{}{} {:.1f}×", ratios.empty() ? "" : ", ", vendor, row.times[vendor].median_ms / covflow_time);
  row.notes["speed-up over"] = ratios;
#else
  (void)settings;
  (void)gpu;
  (void)rng;
  (void)k;
  (void)tolerance;
#endif
  return row;
}

}  // namespace

nlohmann::json run_rsvd_bench(const Settings& settings, Exec* gpu) {
  std::mt19937_64 rng(2026);
  std::vector<Shape> shapes = {{512, 512, 200, 64}, {1024, 1024, 180, 32}, {4096, 4096, 16, 32}, {512, 512, 200, 0}};
  if (settings.quick) shapes = {{512, 512, 20, 64}, {512, 512, 20, 0}};
  if (!settings.shapes.empty()) {
    shapes.clear();
    for (const std::string& text : settings.shapes) {
      Shape s{};
      if (std::sscanf(text.c_str(), "%dx%dx%lldr%d", &s.m, &s.n, &s.count, &s.rank) != 4 || s.m < 1 || s.n < 1 ||
          s.count < 1 || s.rank < 0)
        throw std::invalid_argument("--shape expects MxNxBATCHrRANK (rank 0: fixed accuracy), e.g. 512x512x200r64; got '" +
                                    text + "'");
      shapes.push_back(s);
    }
  }
  Report report("rsvd: batched randomized SVD vs cuSOLVER gesvdaStridedBatched, Xgesvdr and our gesvj");
  if (gpu == nullptr) {
    fmt::print("rsvd: no GPU — the benchmark times the CUDA backend against cuSOLVER only\n");
    return report.to_json();
  }
  auto add = [&](Row row) {
    std::string times, notes;
    for (const auto& [who, t] : row.times) times += fmt::format("  {} {:.3f} ms", who, t.median_ms);
    for (const auto& [what, text] : row.notes) notes += fmt::format("; {}: {}", what, text);
    fmt::print("rsvd {} {}:{}{}\n    {}\n", row.dtype, row.shape, times, row.failed.empty() ? "" : "  FAILED: " + row.failed,
               notes.empty() ? "" : notes.substr(2));
    std::fflush(stdout);
    report.add(std::move(row));
  };
  for (const Shape& s : shapes) {
    if (settings.dtype.empty() || settings.dtype == "f64") add(bench_one<f64>(s, settings, gpu, rng));
    if (settings.dtype.empty() || settings.dtype == "cf64") add(bench_one<cf64>(s, settings, gpu, rng));
    if (settings.dtype.empty() || settings.dtype == "cf32") add(bench_one<cf32>(s, settings, gpu, rng));
  }
  report.print();
  return report.to_json();
}

}  // namespace covflow::bench

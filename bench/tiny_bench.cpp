// covflow-bench tiny: batched factorizations and solves of tiny matrices (n ≤ 32), covflow's CUDA
// backend against cuBLAS/cuSOLVER's batched routines in the same run.
//   getrf   linalg::getrf                 vs  cublas<t>getrfBatched
//   getrs   linalg::getrs (Op::none)      vs  cublas<t>getrsBatched (nrhs natively)
//   potrf   linalg::potrf (Uplo::lower)   vs  cusolverDn<t>potrfBatched (lower)
//   potrs   linalg::potrs (Uplo::lower)   vs  cusolverDn<t>potrsBatched, which takes nrhs = 1 only:
//           for nrhs > 1 it is called once per right-hand side (16 calls for nrhs 16, call j on
//           column j of every B), which is what a user of the vendor library has to write
//   geqrf   linalg::geqrf (square n × n)  vs  cublas<t>geqrfBatched
// Each contender solves with its own factors (covflow's getrs/potrs with covflow's getrf/potrf
// output, the vendor's with the vendor's). The vendor's pointer arrays (one per matrix, into the
// same packed buffers covflow works on) are built and copied to the device before its timing.
// Defaults: 1 048 576 matrices (--count), n ∈ {4, 8, 16, 32}, f32/f64/cf32/cf64, nrhs ∈ {1, 16}.
//
// Inputs (cuRAND, seeded from --seed, printed): A = G + D, G Gaussian (complex: each part of
// variance ½), D diagonal with N(3n, 1) entries, the diagonal's imaginary part zero. Each diagonal
// entry exceeds the sum of the other magnitudes in its row and column by more than 5 standard
// deviations (n = 4; far more for larger n), so A is diagonally dominant: nonsingular, partial
// pivoting finds every pivot on the diagonal (the search still runs; no row is interchanged), and
// the Hermitian matrix of its lower triangle — all potrf and potrs read — is positive definite. B is
// Gaussian. Every factorization overwrites A and every solve overwrites B, so each timed call
// starts from a fresh copy of A (device-to-device, from a pristine buffer) or a freshly drawn B
// (same seed), issued before the call's start event. Reps adapt to a time budget per contender and
// row (time_adaptive).
// Memory: three A-sized buffers (pristine, work, covflow's factors for the solves) and one B, shared
// by both contenders — 56 GiB for 2²⁰ complex-double 32 × 32 matrices with nrhs 16.
//
// Floor: the bytes a routine must move at least — A read and written once (factorizations; plus the
// ipiv, tau and info it writes), or the factor read once and B read and written once (solves; plus
// ipiv for getrs) — at the device-to-device copy bandwidth measured at the start of the run (a
// large cudaMemcpyAsync, counted as 2 × its size). potrf and potrs need only one triangle of the
// factor, so for them the floor counts more than they must move and covflow/floor may go below 1.
//
// After timing, outside the timed region, for both contenders: every info is read (covflow's and
// cuBLAS getrfBatched's / cuSOLVER potrfBatched's per matrix must all be 0; the argument-check
// infos too); on 64 matrices spread over the batch, copied to the host, the backward error in
// long double — ‖PA − LU‖_F/‖A‖_F, ‖A − LLᴴ‖_F/‖A‖_F, ‖A − QR‖_F/‖A‖_F and ‖QᴴQ − I‖_F (Q formed
// from the reflectors and τ), and for the solves max over columns of ‖Ax − b‖/(‖A‖_F‖x‖ + ‖b‖)
// (the normwise backward error, N. J. Higham, "Accuracy and Stability of Numerical Algorithms",
// 2nd ed., 2002, Thm 7.1) — must be ≤ 10 n·ε. A row whose check fails is marked failed, shows no
// speed-up, and fails the run.
#include "tiny_bench.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <complex>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "covflow/linalg/qr.hpp"
#include "covflow/linalg/solve.hpp"
#if COVFLOW_HAS_CUDA
#include <cublas_v2.h>
#include <curand.h>
#include <cusolverDn.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::bench {
namespace {

using namespace covflow::linalg;

constexpr long long kDefaultCount = 1 << 20;
constexpr long long kQuickCount = 1 << 14;

#if COVFLOW_HAS_CUDA
constexpr double kTolerance = 10;   // every backward error, in units of n·ε
constexpr int kSampled = 64;        // matrices per row whose results are checked on the host
constexpr double kBudgetMs = 1000;  // timed milliseconds one contender of one row may take
// Device memory left free beyond the benchmark's own buffers (cuBLAS/cuSOLVER scratch, the
// context's workspace).
constexpr std::size_t kHeadroomBytes = std::size_t(1) << 30;

// One printed and written row, with what the shared table needs beside the Row.
struct TinyRow {
  Row row;
  std::string vendor;  // the vendor contender's key in row.times
  int n = 0, nrhs = 0;
  long long count = 0;
  double floor_bytes = 0, floor_ms = 0;
};

// ---- what a row costs at least ------------------------------------------------------------------

// Bytes one matrix's routine must move at least (see the file comment).
double floor_bytes(const std::string& routine, int n, int nrhs, std::size_t element) {
  const double a = double(n) * n * element, b = double(n) * nrhs * element;
  const double ipiv = double(n) * sizeof(int), info = sizeof(int);
  if (routine == "getrf") return 2 * a + ipiv + info;
  if (routine == "potrf") return 2 * a + info;
  if (routine == "geqrf") return 2 * a + double(n) * element + info;
  if (routine == "getrs") return a + ipiv + 2 * b;
  return a + 2 * b;  // potrs
}

// LAPACK's operation counts for one matrix (×4 for complex, as the other benchmarks count).
double flops(const std::string& routine, int n, int nrhs, bool complex) {
  const double nd = n, scale = complex ? 4.0 : 1.0;
  if (routine == "getrf") return scale * 2 * nd * nd * nd / 3;
  if (routine == "potrf") return scale * nd * nd * nd / 3;
  if (routine == "geqrf") return scale * 4 * nd * nd * nd / 3;
  return scale * 2 * nd * nd * nrhs;  // getrs, potrs
}

// ---- host checks, in long double -----------------------------------------------------------------

template <class T>
using wide = std::conditional_t<is_complex_v<T>, std::complex<long double>, long double>;

template <class W>
W conj_of(W v) {
  if constexpr (std::is_same_v<W, long double>) return v;
  else return std::conj(v);
}

template <class T>
double eps() {
  return std::numeric_limits<real_t<T>>::epsilon();
}

// sqrt(diff2 / norm2) in units of n·ε; NaN (an unwritten or poisoned output) reads as +∞.
template <class T>
double relative(long double diff2, long double norm2, int n) {
  const double e = double(std::sqrt(diff2 / norm2)) / (n * eps<T>());
  return std::isnan(e) ? std::numeric_limits<double>::infinity() : e;
}

template <class T>
std::vector<wide<T>> widen(const T* a, int n) {
  std::vector<wide<T>> out(std::size_t(n) * n);
  for (std::size_t e = 0; e < out.size(); ++e) out[e] = wide<T>(a[e]);
  return out;
}

// The Hermitian matrix potrf reads: a's lower triangle, the diagonal's real part.
template <class T>
std::vector<wide<T>> hermitian_of_lower(const T* a, int n) {
  std::vector<wide<T>> out(std::size_t(n) * n);
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i) {
      const wide<T> v(a[i + std::size_t(j) * n]);
      out[i + std::size_t(j) * n] = i == j ? wide<T>(std::real(v)) : v;
      out[j + std::size_t(i) * n] = i == j ? wide<T>(std::real(v)) : conj_of(v);
    }
  return out;
}

// ‖PA − LU‖_F/‖A‖_F in n·ε; ipiv in LAPACK's 1-based sequential-swap form. A pivot out of
// [i + 1, n] reads as +∞.
template <class T>
double lu_error(const T* a, const T* lu, const int* ipiv, int n) {
  std::vector<wide<T>> pa = widen(a, n);
  for (int i = 0; i < n; ++i) {
    const int p = ipiv[i] - 1;
    if (p < i || p >= n) return std::numeric_limits<double>::infinity();
    for (int j = 0; j < n; ++j) std::swap(pa[i + std::size_t(j) * n], pa[p + std::size_t(j) * n]);
  }
  long double diff2 = 0, norm2 = 0;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      wide<T> sum = 0;
      for (int l = 0; l <= std::min(i, j); ++l) {
        const wide<T> lil = l == i ? wide<T>(1) : wide<T>(lu[i + std::size_t(l) * n]);
        sum += lil * wide<T>(lu[l + std::size_t(j) * n]);
      }
      diff2 += std::norm(pa[i + std::size_t(j) * n] - sum);
      norm2 += std::norm(pa[i + std::size_t(j) * n]);
    }
  return relative<T>(diff2, norm2, n);
}

// ‖A − LLᴴ‖_F/‖A‖_F in n·ε, A the Hermitian matrix of a's lower triangle, L the lower triangle of
// the factor (its diagonal as written).
template <class T>
double cholesky_error(const T* a, const T* factor, int n) {
  const std::vector<wide<T>> h = hermitian_of_lower(a, n);
  long double diff2 = 0, norm2 = 0;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      wide<T> sum = 0;
      for (int l = 0; l <= std::min(i, j); ++l)
        sum += wide<T>(factor[i + std::size_t(l) * n]) * conj_of(wide<T>(factor[j + std::size_t(l) * n]));
      diff2 += std::norm(h[i + std::size_t(j) * n] - sum);
      norm2 += std::norm(h[i + std::size_t(j) * n]);
    }
  return relative<T>(diff2, norm2, n);
}

struct QrErrors {
  double residual = 0, orthogonality = 0;
};

// ‖A − QR‖_F/‖A‖_F and ‖QᴴQ − I‖_F in n·ε: Q = H₀H₁…H_{n−1} formed from geqrf's reflectors
// (H_k = I − τ_k v vᴴ, v_k = 1, v below it in column k), R its upper triangle.
template <class T>
QrErrors qr_errors(const T* a, const T* factored, const T* tau, int n) {
  using W = wide<T>;
  std::vector<W> q(std::size_t(n) * n, W(0)), v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) q[i + std::size_t(i) * n] = W(1);
  for (int k = n - 1; k >= 0; --k) {  // Q ← H_k·Q, from the last reflector back
    for (int i = 0; i < n; ++i) v[i] = i < k ? W(0) : i == k ? W(1) : W(factored[i + std::size_t(k) * n]);
    const W t(tau[k]);
    for (int j = 0; j < n; ++j) {
      W dot = 0;
      for (int i = k; i < n; ++i) dot += conj_of(v[i]) * q[i + std::size_t(j) * n];
      for (int i = k; i < n; ++i) q[i + std::size_t(j) * n] -= t * v[i] * dot;
    }
  }
  long double residual2 = 0, norm2 = 0, orthogonality2 = 0;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      W qr = 0, gram = 0;
      for (int l = 0; l <= j; ++l) qr += q[i + std::size_t(l) * n] * W(factored[l + std::size_t(j) * n]);
      for (int l = 0; l < n; ++l) gram += conj_of(q[l + std::size_t(i) * n]) * q[l + std::size_t(j) * n];
      residual2 += std::norm(W(a[i + std::size_t(j) * n]) - qr);
      norm2 += std::norm(W(a[i + std::size_t(j) * n]));
      orthogonality2 += std::norm(gram - W(i == j ? 1 : 0));
    }
  return {relative<T>(residual2, norm2, n), relative<T>(orthogonality2, 1, n)};
}

// max over the k columns of ‖Ax − b‖₂/(‖A‖_F‖x‖₂ + ‖b‖₂), in n·ε.
template <class T>
double solve_error(const std::vector<wide<T>>& a, const T* b, const T* x, int n, int k) {
  long double a2 = 0;
  for (const auto& e : a) a2 += std::norm(e);
  double worst = 0;
  for (int c = 0; c < k; ++c) {
    long double r2 = 0, x2 = 0, b2 = 0;
    for (int i = 0; i < n; ++i) {
      wide<T> ax = 0;
      for (int j = 0; j < n; ++j) ax += a[i + std::size_t(j) * n] * wide<T>(x[j + std::size_t(c) * n]);
      const wide<T> bi(b[i + std::size_t(c) * n]);
      r2 += std::norm(ax - bi);
      x2 += std::norm(wide<T>(x[i + std::size_t(c) * n]));
      b2 += std::norm(bi);
    }
    const long double denominator = std::sqrt(a2) * std::sqrt(x2) + std::sqrt(b2);
    worst = std::max(worst, relative<T>(r2, denominator * denominator, n));
  }
  return worst;
}

// Fails `row` unless `error` (n·ε) is within the tolerance; notes it either way.
void check_error(Row& row, const std::string& who, const std::string& what, double error, std::size_t matrices) {
  row.notes[who + " " + what] =
      fmt::format("{:.3f} n·ε, worst of {} matrices (tolerance {:.0f})", error, matrices, kTolerance);
  if (!(error <= kTolerance)) row.fail(fmt::format("{}: {} {:.3g} n·ε > {:.0f}", who, what, error, kTolerance));
}

// Fails `row` when any info is nonzero.
void check_info(Row& row, const std::string& who, const std::vector<int>& info) {
  const auto first = std::find_if(info.begin(), info.end(), [](int v) { return v != 0; });
  if (first == info.end()) return;
  const auto bad = std::count_if(info.begin(), info.end(), [](int v) { return v != 0; });
  row.fail(fmt::format("{}: {} matrices with info != 0 (first: matrix {}, info {})", who, bad, first - info.begin(),
                       *first));
}

// ---- the vendor calls per element type -----------------------------------------------------------

template <class T> struct Cu;
template <> struct Cu<f32> { using type = float; };
template <> struct Cu<f64> { using type = double; };
template <> struct Cu<cf32> { using type = cuComplex; };
template <> struct Cu<cf64> { using type = cuDoubleComplex; };
template <class T> using cu_t = typename Cu<T>::type;

#define COVFLOW_TINY_VENDOR(T, P)                                                                                      \
  cublasStatus_t getrf_batched(cublasHandle_t h, int n, T* const a[], int* ipiv, int* info, int batch) {              \
    return cublas##P##getrfBatched(h, n, reinterpret_cast<cu_t<T>* const*>(a), n, ipiv, info, batch);                   \
  }                                                                                                                    \
  cublasStatus_t getrs_batched(cublasHandle_t h, int n, int nrhs, T* const a[], const int* ipiv, T* const b[],        \
                               int* info, int batch) {                                                                 \
    return cublas##P##getrsBatched(h, CUBLAS_OP_N, n, nrhs, reinterpret_cast<const cu_t<T>* const*>(a), n, ipiv,       \
                                   reinterpret_cast<cu_t<T>* const*>(b), n, info, batch);                              \
  }                                                                                                                    \
  cublasStatus_t geqrf_batched(cublasHandle_t h, int n, T* const a[], T* const tau[], int* info, int batch) {         \
    return cublas##P##geqrfBatched(h, n, n, reinterpret_cast<cu_t<T>* const*>(a), n,                                   \
                                   reinterpret_cast<cu_t<T>* const*>(tau), info, batch);                               \
  }                                                                                                                    \
  cusolverStatus_t potrf_batched(cusolverDnHandle_t h, int n, T* a[], int* info, int batch) {                          \
    return cusolverDn##P##potrfBatched(h, CUBLAS_FILL_MODE_LOWER, n, reinterpret_cast<cu_t<T>**>(a), n, info, batch);  \
  }                                                                                                                    \
  cusolverStatus_t potrs_batched(cusolverDnHandle_t h, int n, T* a[], T* b[], int* info, int batch) {                  \
    return cusolverDn##P##potrsBatched(h, CUBLAS_FILL_MODE_LOWER, n, 1, reinterpret_cast<cu_t<T>**>(a), n,             \
                                       reinterpret_cast<cu_t<T>**>(b), n, info, batch);                                \
  }
COVFLOW_TINY_VENDOR(f32, S)
COVFLOW_TINY_VENDOR(f64, D)
COVFLOW_TINY_VENDOR(cf32, C)
COVFLOW_TINY_VENDOR(cf64, Z)
#undef COVFLOW_TINY_VENDOR

cublasStatus_t axpy(cublasHandle_t h, int n, const float* alpha, const float* x, float* y, int incy) {
  return cublasSaxpy(h, n, alpha, x, 1, y, incy);
}
cublasStatus_t axpy(cublasHandle_t h, int n, const double* alpha, const double* x, double* y, int incy) {
  return cublasDaxpy(h, n, alpha, x, 1, y, incy);
}
cublasStatus_t scal(cublasHandle_t h, int n, const float* alpha, float* x, int incx) {
  return cublasSscal(h, n, alpha, x, incx);
}
cublasStatus_t scal(cublasHandle_t h, int n, const double* alpha, double* x, int incx) {
  return cublasDscal(h, n, alpha, x, incx);
}

// ---- device data ----------------------------------------------------------------------------------

// cuRAND's Philox generator on a stream, owned. The same seed gives the same numbers.
class Normal {
 public:
  explicit Normal(cudaStream_t stream) {
    COVFLOW_CURAND_TRY(curandCreateGenerator(&generator_, CURAND_RNG_PSEUDO_PHILOX4_32_10));
    COVFLOW_CURAND_TRY(curandSetStream(generator_, stream));
  }
  ~Normal() { curandDestroyGenerator(generator_); }
  Normal(const Normal&) = delete;
  Normal& operator=(const Normal&) = delete;

  // `count` values drawn from N(mean, stddev²) into `out`. cuRAND draws normals in pairs: for an
  // odd count one more value is written, so `out` must have room for it.
  template <class R>
  void fill(R* out, std::size_t count, R mean, R stddev, unsigned long long seed) {
    COVFLOW_CURAND_TRY(curandSetPseudoRandomGeneratorSeed(generator_, seed));
    COVFLOW_CURAND_TRY(curandSetGeneratorOffset(generator_, 0));
    const std::size_t even = count + count % 2;
    if constexpr (std::is_same_v<R, float>) COVFLOW_CURAND_TRY(curandGenerateNormal(generator_, out, even, mean, stddev));
    else COVFLOW_CURAND_TRY(curandGenerateNormalDouble(generator_, out, even, mean, stddev));
  }

 private:
  curandGenerator_t generator_ = nullptr;
};

// Gaussian entries with E|x|² = 1 (complex: each part of variance ½) into `elements` values of T;
// room for one more T is needed (Normal::fill).
template <class T>
void fill_gaussian_entries(Normal& normal, T* data, std::size_t elements, unsigned long long seed) {
  using R = real_t<T>;
  const std::size_t parts = is_complex_v<T> ? 2 : 1;
  normal.fill(reinterpret_cast<R*>(data), elements * parts, R(0), R(is_complex_v<T> ? std::sqrt(0.5) : 1.0), seed);
}

// A = G + D (see the file comment) into `a`, count packed n × n matrices (room for one more
// element): G by cuRAND, then per diagonal position i one strided cuBLAS axpy of count N(3n, 1)
// values into the real parts and, for complex T, one strided scal by 0 of the imaginary parts.
template <class T>
void make_inputs(CudaContext& context, Normal& normal, T* a, int n, long long count, unsigned long long seed) {
  using R = real_t<T>;
  constexpr int parts = is_complex_v<T> ? 2 : 1;
  fill_gaussian_entries(normal, a, std::size_t(count) * n * n, seed);
  cuda::DeviceBuffer<R> diagonal(std::size_t(count) * n + 1);
  normal.fill(diagonal.data(), std::size_t(count) * n, R(3 * n), R(1), seed + 1);
  R* reals = reinterpret_cast<R*>(a);
  const R one = 1, zero = 0;
  const int stride = parts * n * n;  // between one matrix's (i, i) and the next one's
  for (int i = 0; i < n; ++i) {
    R* entry = reals + std::size_t(parts) * i * (n + 1);
    COVFLOW_CUBLAS_TRY(axpy(context.cublas(), static_cast<int>(count), &one, diagonal.data() + std::size_t(i) * count,
                            entry, stride));
    if constexpr (is_complex_v<T>)
      COVFLOW_CUBLAS_TRY(scal(context.cublas(), static_cast<int>(count), &zero, entry + 1, stride));
  }
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(context.stream()));  // before `diagonal` is freed
}

// `columns` arrays of count device pointers, array j holding base + b·stride + j·column_stride for
// b = 0, 1, …; built on the host and copied to the device, before anything is timed.
template <class T>
cuda::DeviceBuffer<T*> pointer_array(T* base, long long count, std::size_t stride, cudaStream_t stream, int columns = 1,
                                     std::size_t column_stride = 0) {
  std::vector<T*> host(static_cast<std::size_t>(count) * columns);
  for (int j = 0; j < columns; ++j)
    for (long long b = 0; b < count; ++b)
      host[std::size_t(j) * count + b] = base + std::size_t(b) * stride + std::size_t(j) * column_stride;
  cuda::DeviceBuffer<T*> device(host.size());
  device.upload(host, stream);
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));  // before `host` is freed
  return device;
}

// The sampled matrices: up to kSampled, spread evenly over the batch, the first and last included.
std::vector<long long> sample_indices(long long count) {
  const long long k = std::min<long long>(count, kSampled);
  std::vector<long long> which;
  for (long long s = 0; s < k; ++s) which.push_back(k == 1 ? 0 : s * (count - 1) / (k - 1));
  return which;
}

// The sampled matrices' `per_matrix` elements each, copied to the host (synchronises the stream).
template <class U>
std::vector<U> gather(const U* device, std::size_t per_matrix, const std::vector<long long>& which, cudaStream_t stream) {
  std::vector<U> host(which.size() * per_matrix);
  for (std::size_t s = 0; s < which.size(); ++s)
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(host.data() + s * per_matrix, device + std::size_t(which[s]) * per_matrix,
                                     per_matrix * sizeof(U), cudaMemcpyDeviceToHost, stream));
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));
  return host;
}

std::vector<int> read_all(const cuda::DeviceBuffer<int>& device, cudaStream_t stream) {
  std::vector<int> host(device.size());
  device.download(host, stream);
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));
  return host;
}

// Device-to-device copy bandwidth in bytes/s: a large cudaMemcpyAsync, which reads and writes its
// size, so 2 × size bytes per copy.
double copy_bandwidth(cudaStream_t stream, const Settings& settings, std::size_t* copied) {
  std::size_t free_bytes = 0, total_bytes = 0;
  COVFLOW_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::size_t size = std::min<std::size_t>(std::size_t(2) << 30, free_bytes / 4) & ~std::size_t(4095);
  cuda::DeviceBuffer<std::byte> from(size), to(size);
  from.fill_bytes(0, stream);
  to.fill_bytes(0, stream);
  const Timing t = time_device(
      stream,
      [&](int) { COVFLOW_CUDA_TRY(cudaMemcpyAsync(to.data(), from.data(), size, cudaMemcpyDeviceToDevice, stream)); },
      std::max(settings.warmup, 1), std::max(settings.reps, 5));
  *copied = size;
  return 2.0 * double(size) / (t.median_ms * 1e-3);
}

// ---- one (element type, n) ------------------------------------------------------------------------

// Which buffers the requested rows need.
struct Needs {
  bool lu = false, cholesky = false, qr = false, solves = false;
  int max_nrhs = 0;

  // Device bytes the buffers below take for count n × n matrices of `element` bytes.
  std::size_t device_bytes(int n, long long count, std::size_t element, std::size_t real) const {
    const std::size_t matrices = std::size_t(n) * n * std::size_t(count) + 1;
    const std::size_t c = static_cast<std::size_t>(count);
    return ((solves ? 3 : 2) * matrices + (solves ? std::size_t(n) * max_nrhs * c + 1 : 0) + (qr ? c * n : 0)) * element +
           ((lu ? 2 * std::size_t(n) : 0) + 3) * c * sizeof(int) +
           (1 + (qr ? 1 : 0) + std::size_t(max_nrhs)) * c * sizeof(void*) +  // pointer arrays
           c * n * real;                                                     // the diagonal, while drawing A
  }
};

// The device buffers of one (element type, n), shared by covflow and the vendor, and the inputs.
template <class T>
struct Bench {
  Bench(Exec& exec, const Settings& bench_settings, int order, long long matrices, const Needs& needs,
        unsigned long long seed)
      : gpu(exec),
        context(exec.cuda_context()),
        stream(context.stream()),
        settings(bench_settings),
        n(order),
        count(matrices),
        batch(static_cast<int>(matrices)),
        square(std::size_t(order) * order),
        elements(square * std::size_t(matrices)),
        pristine(elements + 1),
        work(elements + 1),
        factors(needs.solves ? elements : 0),
        rhs(needs.solves ? std::size_t(order) * needs.max_nrhs * std::size_t(matrices) + 1 : 0),
        tau(needs.qr ? std::size_t(matrices) * order : 0),
        ipiv(needs.lu ? std::size_t(matrices) * order : 0),
        vendor_ipiv(needs.lu ? std::size_t(matrices) * order : 0),
        info(static_cast<std::size_t>(matrices)),
        vendor_info(static_cast<std::size_t>(matrices)),
        potrs_info(static_cast<std::size_t>(matrices)),
        normal(stream),
        rhs_seed(seed + 2) {
    make_inputs<T>(context, normal, pristine.data(), n, count, seed);
    which = sample_indices(count);
    a_sample = gather(pristine.data(), square, which, stream);
    a_array = pointer_array(work.data(), count, square, stream);
  }

  Batch<T> a() const { return Batch<T>::packed(work.data(), n, n, count); }
  Batch<T> b(int nrhs) const { return Batch<T>::packed(rhs.data(), n, nrhs, count); }
  std::span<int> info_span() const { return {info.data(), info.size()}; }
  // work ← pristine: a factorization's input, restored before each call.
  void restore() const {
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(work.data(), pristine.data(), elements * sizeof(T), cudaMemcpyDeviceToDevice, stream));
  }
  // factors ← work: covflow's factors, kept for its solves while the vendor factors in work.
  void keep_factors() const {
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(factors.data(), work.data(), elements * sizeof(T), cudaMemcpyDeviceToDevice, stream));
  }
  // B (nrhs columns per matrix) drawn afresh: the same B every time.
  void fresh_rhs(int nrhs) { fill_gaussian_entries(normal, rhs.data(), std::size_t(n) * nrhs * std::size_t(count), rhs_seed); }

  // Times `call` as `who` in row `r`, `prepare` issued before each call's start event. Without a
  // row (a factorization the solves need but nobody asked to time), runs it once.
  void time(TinyRow* r, const std::string& who, const std::function<void(int)>& call,
            const std::function<void(int)>& prepare) {
    if (r == nullptr) {
      prepare(0);
      call(0);
      return;
    }
    const std::size_t growth = gpu.workspace().growth_count();
    r->row.times[who] = time_adaptive(stream, call, prepare, settings, kBudgetMs);
    if (who == "covflow" && gpu.workspace().growth_count() != growth)
      r->row.notes["warning"] = "covflow's workspace grew while timed";
  }

  Exec& gpu;
  CudaContext& context;
  cudaStream_t stream;
  const Settings& settings;
  int n;
  long long count;
  int batch;
  std::size_t square, elements;
  // pristine: the inputs. work: what each factorization overwrites; the vendor's factors stay
  // there for its solves. factors: covflow's factors, for its solves. rhs: B, then X.
  cuda::DeviceBuffer<T> pristine, work, factors, rhs, tau;
  cuda::DeviceBuffer<int> ipiv, vendor_ipiv, info, vendor_info, potrs_info;
  Normal normal;
  unsigned long long rhs_seed;
  std::vector<long long> which;  // the sampled matrices
  std::vector<T> a_sample;       // their inputs
  cuda::DeviceBuffer<T*> a_array;  // the vendor's pointers into work
};

// Both contenders' solve residuals on the sampled matrices; `matrix_of(s)` is sample s's A.
template <class T>
void check_solves(Row& row, const std::string& vendor, const Bench<T>& bench, int nrhs, const std::vector<T>& b,
                  const std::vector<T>& covflow_x, const std::vector<T>& vendor_x,
                  const std::function<std::vector<wide<T>>(std::size_t)>& matrix_of) {
  const std::size_t per = std::size_t(bench.n) * nrhs;
  double covflow_error = 0, vendor_error = 0;
  for (std::size_t s = 0; s < bench.which.size(); ++s) {
    const std::vector<wide<T>> a = matrix_of(s);
    covflow_error = std::max(covflow_error, solve_error<T>(a, &b[s * per], &covflow_x[s * per], bench.n, nrhs));
    vendor_error = std::max(vendor_error, solve_error<T>(a, &b[s * per], &vendor_x[s * per], bench.n, nrhs));
  }
  check_error(row, "covflow", "backward error", covflow_error, bench.which.size());
  check_error(row, vendor, "backward error", vendor_error, bench.which.size());
}

// getrf: covflow's factors to bench.factors when `keep`, the vendor's left in bench.work.
template <class T>
void lu_factor(Bench<T>& bench, TinyRow* r, bool keep) {
  const int n = bench.n;
  const auto restore = [&](int) { bench.restore(); };
  bench.ipiv.fill_bytes(0xFF, bench.stream);
  bench.info.fill_bytes(0xFF, bench.stream);
  bench.time(r, "covflow",
             [&](int) { getrf<T>(bench.gpu, bench.a(), {bench.ipiv.data(), bench.ipiv.size()}, bench.info_span()); },
             restore);
  if (keep) bench.keep_factors();
  std::vector<T> covflow_lu;
  std::vector<int> covflow_pivots;
  if (r != nullptr) {
    covflow_lu = gather(bench.work.data(), bench.square, bench.which, bench.stream);
    covflow_pivots = gather(bench.ipiv.data(), std::size_t(n), bench.which, bench.stream);
    check_info(r->row, "covflow", read_all(bench.info, bench.stream));
  }
  bench.vendor_ipiv.fill_bytes(0xFF, bench.stream);
  bench.vendor_info.fill_bytes(0xFF, bench.stream);
  bench.time(r, "getrf-batched",
             [&](int) {
               COVFLOW_CUBLAS_TRY(getrf_batched(bench.context.cublas(), n, bench.a_array.data(), bench.vendor_ipiv.data(),
                                                bench.vendor_info.data(), bench.batch));
             },
             restore);
  if (r == nullptr) return;
  check_info(r->row, "getrf-batched", read_all(bench.vendor_info, bench.stream));
  const std::vector<T> vendor_lu = gather(bench.work.data(), bench.square, bench.which, bench.stream);
  const std::vector<int> vendor_pivots = gather(bench.vendor_ipiv.data(), std::size_t(n), bench.which, bench.stream);
  double covflow_error = 0, vendor_error = 0;
  for (std::size_t s = 0; s < bench.which.size(); ++s) {
    const T* a = &bench.a_sample[s * bench.square];
    covflow_error = std::max(covflow_error, lu_error(a, &covflow_lu[s * bench.square], &covflow_pivots[s * n], n));
    vendor_error = std::max(vendor_error, lu_error(a, &vendor_lu[s * bench.square], &vendor_pivots[s * n], n));
  }
  check_error(r->row, "covflow", "‖PA − LU‖_F/‖A‖_F", covflow_error, bench.which.size());
  check_error(r->row, "getrf-batched", "‖PA − LU‖_F/‖A‖_F", vendor_error, bench.which.size());
}

// getrs with each contender's getrf factors.
template <class T>
void lu_solve(Bench<T>& bench, TinyRow& r, int nrhs) {
  const int n = bench.n;
  const std::size_t per = std::size_t(n) * nrhs;
  const auto fresh = [&](int) { bench.fresh_rhs(nrhs); };
  fresh(0);
  const std::vector<T> b = gather(bench.rhs.data(), per, bench.which, bench.stream);
  bench.time(&r, "covflow",
             [&](int) {
               getrs<T>(bench.gpu, Op::none, Batch<const T>::packed(bench.factors.data(), n, n, bench.count),
                        std::span<const int>(bench.ipiv.data(), bench.ipiv.size()), bench.b(nrhs));
             },
             fresh);
  const std::vector<T> covflow_x = gather(bench.rhs.data(), per, bench.which, bench.stream);
  const cuda::DeviceBuffer<T*> b_array = pointer_array(bench.rhs.data(), bench.count, per, bench.stream);
  int argument_info = 0;
  bench.time(&r, r.vendor,
             [&](int) {
               COVFLOW_CUBLAS_TRY(getrs_batched(bench.context.cublas(), n, nrhs, bench.a_array.data(),
                                                bench.vendor_ipiv.data(), b_array.data(), &argument_info, bench.batch));
             },
             fresh);
  if (argument_info != 0) r.row.fail(fmt::format("{}: argument {} refused", r.vendor, -argument_info));
  const std::vector<T> vendor_x = gather(bench.rhs.data(), per, bench.which, bench.stream);
  check_solves<T>(r.row, r.vendor, bench, nrhs, b, covflow_x, vendor_x,
                  [&](std::size_t s) { return widen(&bench.a_sample[s * bench.square], n); });
}

// potrf (lower): covflow's factor to bench.factors when `keep`, the vendor's left in bench.work.
template <class T>
void cholesky_factor(Bench<T>& bench, TinyRow* r, bool keep) {
  const int n = bench.n;
  const auto restore = [&](int) { bench.restore(); };
  bench.info.fill_bytes(0xFF, bench.stream);
  bench.time(r, "covflow", [&](int) { potrf<T>(bench.gpu, Uplo::lower, bench.a(), bench.info_span()); }, restore);
  if (keep) bench.keep_factors();
  std::vector<T> covflow_factor;
  if (r != nullptr) {
    covflow_factor = gather(bench.work.data(), bench.square, bench.which, bench.stream);
    check_info(r->row, "covflow", read_all(bench.info, bench.stream));
  }
  bench.vendor_info.fill_bytes(0xFF, bench.stream);
  bench.time(r, "potrf-batched",
             [&](int) {
               COVFLOW_CUSOLVER_TRY(potrf_batched(bench.context.cusolver(), n, bench.a_array.data(), bench.vendor_info.data(),
                                                  bench.batch));
             },
             restore);
  if (r == nullptr) return;
  check_info(r->row, "potrf-batched", read_all(bench.vendor_info, bench.stream));
  const std::vector<T> vendor_factor = gather(bench.work.data(), bench.square, bench.which, bench.stream);
  double covflow_error = 0, vendor_error = 0;
  for (std::size_t s = 0; s < bench.which.size(); ++s) {
    const T* a = &bench.a_sample[s * bench.square];
    covflow_error = std::max(covflow_error, cholesky_error(a, &covflow_factor[s * bench.square], n));
    vendor_error = std::max(vendor_error, cholesky_error(a, &vendor_factor[s * bench.square], n));
  }
  check_error(r->row, "covflow", "‖A − LLᴴ‖_F/‖A‖_F", covflow_error, bench.which.size());
  check_error(r->row, "potrf-batched", "‖A − LLᴴ‖_F/‖A‖_F", vendor_error, bench.which.size());
}

// potrs (lower) with each contender's potrf factor. cuSOLVER's potrsBatched takes one right-hand
// side: for nrhs > 1 it is called once per column, each call with its own pointer array.
template <class T>
void cholesky_solve(Bench<T>& bench, TinyRow& r, int nrhs) {
  const int n = bench.n;
  const std::size_t per = std::size_t(n) * nrhs;
  const auto fresh = [&](int) { bench.fresh_rhs(nrhs); };
  fresh(0);
  const std::vector<T> b = gather(bench.rhs.data(), per, bench.which, bench.stream);
  bench.time(&r, "covflow",
             [&](int) {
               potrs<T>(bench.gpu, Uplo::lower, Batch<const T>::packed(bench.factors.data(), n, n, bench.count), bench.b(nrhs));
             },
             fresh);
  const std::vector<T> covflow_x = gather(bench.rhs.data(), per, bench.which, bench.stream);
  const cuda::DeviceBuffer<T*> columns = pointer_array(bench.rhs.data(), bench.count, per, bench.stream, nrhs, std::size_t(n));
  // d_info: cuSOLVER documents it for argument errors only (−i), so it is zeroed rather than
  // poisoned, and given one entry per matrix, more than the one it documents.
  bench.potrs_info.fill_bytes(0, bench.stream);
  bench.time(&r, r.vendor,
             [&](int) {
               for (int j = 0; j < nrhs; ++j)
                 COVFLOW_CUSOLVER_TRY(potrs_batched(bench.context.cusolver(), n, bench.a_array.data(),
                                                    columns.data() + std::size_t(j) * bench.count,
                                                    bench.potrs_info.data(), bench.batch));
             },
             fresh);
  if (nrhs > 1)
    r.row.notes[r.vendor] = fmt::format("{} calls per repetition, one per right-hand side (cusolverDn<t>potrsBatched "
                                        "takes nrhs = 1 only)", nrhs);
  check_info(r.row, r.vendor, read_all(bench.potrs_info, bench.stream));
  const std::vector<T> vendor_x = gather(bench.rhs.data(), per, bench.which, bench.stream);
  check_solves<T>(r.row, r.vendor, bench, nrhs, b, covflow_x, vendor_x,
                  [&](std::size_t s) { return hermitian_of_lower(&bench.a_sample[s * bench.square], n); });
}

// geqrf of the square matrices.
template <class T>
void qr_factor(Bench<T>& bench, TinyRow& r) {
  const int n = bench.n;
  const auto restore = [&](int) { bench.restore(); };
  bench.tau.fill_bytes(0xFF, bench.stream);
  bench.info.fill_bytes(0xFF, bench.stream);
  bench.time(&r, "covflow",
             [&](int) { geqrf<T>(bench.gpu, bench.a(), {bench.tau.data(), bench.tau.size()}, bench.info_span()); }, restore);
  const std::vector<T> covflow_qr = gather(bench.work.data(), bench.square, bench.which, bench.stream);
  const std::vector<T> covflow_tau = gather(bench.tau.data(), std::size_t(n), bench.which, bench.stream);
  check_info(r.row, "covflow", read_all(bench.info, bench.stream));
  const cuda::DeviceBuffer<T*> tau_array = pointer_array(bench.tau.data(), bench.count, std::size_t(n), bench.stream);
  bench.tau.fill_bytes(0xFF, bench.stream);
  int argument_info = 0;
  bench.time(&r, r.vendor,
             [&](int) {
               COVFLOW_CUBLAS_TRY(geqrf_batched(bench.context.cublas(), n, bench.a_array.data(), tau_array.data(),
                                                &argument_info, bench.batch));
             },
             restore);
  if (argument_info != 0) r.row.fail(fmt::format("{}: argument {} refused", r.vendor, -argument_info));
  const std::vector<T> vendor_qr = gather(bench.work.data(), bench.square, bench.which, bench.stream);
  const std::vector<T> vendor_tau = gather(bench.tau.data(), std::size_t(n), bench.which, bench.stream);
  QrErrors covflow_error, vendor_error;
  for (std::size_t s = 0; s < bench.which.size(); ++s) {
    const T* a = &bench.a_sample[s * bench.square];
    const QrErrors c = qr_errors(a, &covflow_qr[s * bench.square], &covflow_tau[s * n], n);
    const QrErrors v = qr_errors(a, &vendor_qr[s * bench.square], &vendor_tau[s * n], n);
    covflow_error = {std::max(covflow_error.residual, c.residual), std::max(covflow_error.orthogonality, c.orthogonality)};
    vendor_error = {std::max(vendor_error.residual, v.residual), std::max(vendor_error.orthogonality, v.orthogonality)};
  }
  check_error(r.row, "covflow", "‖A − QR‖_F/‖A‖_F", covflow_error.residual, bench.which.size());
  check_error(r.row, "covflow", "‖QᴴQ − I‖_F", covflow_error.orthogonality, bench.which.size());
  check_error(r.row, r.vendor, "‖A − QR‖_F/‖A‖_F", vendor_error.residual, bench.which.size());
  check_error(r.row, r.vendor, "‖QᴴQ − I‖_F", vendor_error.orthogonality, bench.which.size());
}

// Every requested row of one (element type, n), appended to `out` (and printed) as each is done.
template <class T>
void bench_size(std::vector<TinyRow>& out, int n, long long count, const TinyBenchOptions& options,
                const Settings& settings, Exec& gpu, double bandwidth, unsigned long long seed) {
  const auto wants = [&](const char* routine) {
    return std::find(options.routines.begin(), options.routines.end(), routine) != options.routines.end();
  };
  Needs needs;
  needs.lu = wants("getrf") || wants("getrs");
  needs.cholesky = wants("potrf") || wants("potrs");
  needs.qr = wants("geqrf");
  needs.solves = wants("getrs") || wants("potrs");
  needs.max_nrhs = needs.solves ? *std::max_element(options.nrhs.begin(), options.nrhs.end()) : 0;

  struct Planned {
    std::string routine, vendor;
    int nrhs;
  };
  std::vector<Planned> planned;  // in the order they run
  if (wants("getrf")) planned.push_back({"getrf", "getrf-batched", 0});
  if (wants("getrs"))
    for (int k : options.nrhs) planned.push_back({"getrs", "getrs-batched", k});
  if (wants("potrf")) planned.push_back({"potrf", "potrf-batched", 0});
  if (wants("potrs"))
    for (int k : options.nrhs) planned.push_back({"potrs", "potrs-batched", k});
  if (wants("geqrf")) planned.push_back({"geqrf", "geqrf-batched", 0});
  std::size_t next = 0;  // the first planned row not yet done

  const auto make_row = [&](const Planned& p) {
    TinyRow r;
    r.row.op = p.routine;
    r.row.dtype = std::string(name(element_type_of<T>()));
    r.row.shape = p.nrhs > 0 ? fmt::format("{} × {}×{}, nrhs {}", count, n, n, p.nrhs) : fmt::format("{} × {}×{}", count, n, n);
    r.row.flops = flops(p.routine, n, p.nrhs, is_complex_v<T>) * double(count);
    r.row.vendors = {p.vendor};
    r.vendor = p.vendor;
    r.n = n;
    r.nrhs = p.nrhs;
    r.count = count;
    r.floor_bytes = floor_bytes(p.routine, n, p.nrhs, sizeof(T)) * double(count);
    r.floor_ms = r.floor_bytes / bandwidth * 1e3;
    return r;
  };
  const auto finish = [&](TinyRow r) {
    const auto ms = [&](const std::string& who) {
      const auto it = r.row.times.find(who);
      return it == r.row.times.end() ? std::string("—") : fmt::format("{:.4f} ms", it->second.median_ms);
    };
    fmt::print("tiny {} {} n={}{}: covflow {}, {} {}, floor {:.4f} ms{}\n", r.row.op, r.row.dtype, r.n,
               r.nrhs > 0 ? fmt::format(" nrhs={}", r.nrhs) : "", ms("covflow"), r.vendor, ms(r.vendor), r.floor_ms,
               r.row.failed.empty() ? "" : "  FAILED: " + r.row.failed);
    std::fflush(stdout);
    out.push_back(std::move(r));
    ++next;
  };
  // The next planned row when it is `routine` (with `nrhs`), else null: a factorization that only
  // the solves need.
  const auto row_for = [&](const std::string& routine, int nrhs) -> std::unique_ptr<TinyRow> {
    if (next < planned.size() && planned[next].routine == routine && planned[next].nrhs == nrhs)
      return std::make_unique<TinyRow>(make_row(planned[next]));
    return nullptr;
  };
  // Runs a row's body; an exception (a CUDA error, a refused argument) fails that row and the run
  // goes on. Without a row, an exception ends this (element type, n): the solves need that work.
  const auto attempt = [&](std::unique_ptr<TinyRow>& r, const std::function<void()>& body) {
    if (r == nullptr) return body();
    try {
      body();
    } catch (const std::exception& e) {
      r->row.fail(std::string("threw: ") + e.what());
    }
    finish(std::move(*r));
  };

  try {
    std::size_t free_bytes = 0, total_bytes = 0;
    COVFLOW_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
    const std::size_t needed = needs.device_bytes(n, count, sizeof(T), sizeof(real_t<T>)) + kHeadroomBytes;
    if (needed > free_bytes)
      throw std::runtime_error(fmt::format("not run: needs {:.1f} GiB of device memory, {:.1f} GiB free (lower --count)",
                                           double(needed) / (1 << 30), double(free_bytes) / (1 << 30)));
    Bench<T> bench(gpu, settings, n, count, needs, seed);
    std::size_t workspace = std::max({getrf_workspace<T>(gpu, n, count), potrf_workspace<T>(gpu, n, count),
                                      geqrf_workspace<T>(gpu, n, n, count)});
    for (int k : options.nrhs)
      workspace = std::max({workspace, getrs_workspace<T>(gpu, n, k, count), potrs_workspace<T>(gpu, n, k, count)});
    gpu.workspace().reserve(workspace);

    if (needs.lu) {
      std::unique_ptr<TinyRow> r = row_for("getrf", 0);
      attempt(r, [&] { lu_factor(bench, r.get(), wants("getrs")); });
      if (wants("getrs"))
        for (int k : options.nrhs) {
          std::unique_ptr<TinyRow> s = row_for("getrs", k);
          attempt(s, [&] { lu_solve(bench, *s, k); });
        }
    }
    if (needs.cholesky) {
      std::unique_ptr<TinyRow> r = row_for("potrf", 0);
      attempt(r, [&] { cholesky_factor(bench, r.get(), wants("potrs")); });
      if (wants("potrs"))
        for (int k : options.nrhs) {
          std::unique_ptr<TinyRow> s = row_for("potrs", k);
          attempt(s, [&] { cholesky_solve(bench, *s, k); });
        }
    }
    if (needs.qr) {
      std::unique_ptr<TinyRow> r = row_for("geqrf", 0);
      attempt(r, [&] { qr_factor(bench, *r); });
    }
  } catch (const std::exception& e) {
    while (next < planned.size()) {  // finish() advances `next`
      TinyRow r = make_row(planned[next]);
      r.row.fail(e.what());
      finish(std::move(r));
    }
  }
}

// The table the issue asks for: one line per row, the speed-up only where the row passed.
void print_table(const std::string& title, const std::vector<TinyRow>& rows, double bandwidth) {
  fmt::print("\n== {} ==\n", title);
  fmt::print("vendor: cublas<t>getrfBatched / getrsBatched / geqrfBatched, cusolverDn<t>potrfBatched / potrsBatched "
             "(nrhs > 1: one call per right-hand side)\n");
  fmt::print("floor: the bytes each routine must move, at the measured copy bandwidth {:.0f} GB/s\n", bandwidth / 1e9);
  fmt::print("{:<7} {:<5} {:>3} {:>5} {:>11} {:>11} {:>8} {:>10} {:>13}\n", "routine", "dtype", "n", "nrhs", "covflow ms",
             "vendor ms", "speedup", "floor ms", "covflow/floor");
  std::size_t failed = 0;
  for (const TinyRow& r : rows) {
    const auto time = [&](const std::string& who) -> double {
      const auto it = r.row.times.find(who);
      return it == r.row.times.end() || it->second.reps == 0 ? 0.0 : it->second.median_ms;
    };
    const double covflow = time("covflow"), vendor = time(r.vendor);
    const auto cell = [](double ms) { return ms > 0 ? fmt::format("{:.4f}", ms) : std::string("—"); };
    std::string speedup = r.row.failed.empty() ? (covflow > 0 && vendor > 0 ? fmt::format("{:.2f}×", vendor / covflow) : "—")
                                               : "FAILED";
    fmt::print("{:<7} {:<5} {:>3} {:>5} {:>11} {:>11} {:>8} {:>10.4f} {:>13}\n", r.row.op, r.row.dtype, r.n,
               r.nrhs > 0 ? std::to_string(r.nrhs) : "—", cell(covflow), cell(vendor), speedup, r.floor_ms,
               covflow > 0 ? fmt::format("{:.2f}", covflow / r.floor_ms) : "—");
    if (!r.row.failed.empty()) ++failed;
  }
  if (failed == 0) return;
  fmt::print("{} of {} rows FAILED:\n", failed, rows.size());
  for (const TinyRow& r : rows)
    if (!r.row.failed.empty()) fmt::print("  {} {} {}: {}\n", r.row.op, r.row.dtype, r.row.shape, r.row.failed);
}
#endif

}  // namespace

nlohmann::json run_tiny_bench(const Settings& settings, const TinyBenchOptions& options, Exec* gpu) {
  const long long count = options.count > 0 ? options.count : settings.quick ? kQuickCount : kDefaultCount;
  if (count > std::numeric_limits<int>::max())
    throw std::invalid_argument(fmt::format("tiny: --count {}: the vendor's batch count is an int", count));
  if (options.sizes.empty() || options.dtypes.empty() || options.routines.empty() || options.nrhs.empty())
    throw std::invalid_argument("tiny: --n, --dtype, --routine and --nrhs each need at least one value");
  for (int n : options.sizes)
    if (n < 1 || n > 32) throw std::invalid_argument(fmt::format("tiny: --n {}: tiny means 1 ≤ n ≤ 32", n));
  for (int k : options.nrhs)
    if (k < 1) throw std::invalid_argument(fmt::format("tiny: --nrhs {}: at least 1", k));
  const std::string title =
      fmt::format("tiny: batched getrf/getrs/potrf/potrs/geqrf, {} matrices, vs cuBLAS/cuSOLVER (seed {})", count, options.seed);
  Report report(title);
  nlohmann::json extra = {{"count", count}, {"seed", options.seed}};
#if COVFLOW_HAS_CUDA
  if (gpu == nullptr) {
    fmt::print("\ntiny: no GPU, nothing timed (covflow's CUDA backend against cuBLAS/cuSOLVER)\n");
    nlohmann::json result = report.to_json();
    result.update(extra);
    return result;
  }
  cudaStream_t stream = gpu->cuda_context().stream();
  std::size_t copied = 0;
  const double bandwidth = copy_bandwidth(stream, settings, &copied);
  fmt::print("\ntiny: {} matrices, seed {}; device copy bandwidth {:.0f} GB/s (cudaMemcpyAsync of {:.1f} GiB "
             "device to device, read + write)\n",
             count, options.seed, bandwidth / 1e9, double(copied) / (1 << 30));
  std::mt19937_64 rng(options.seed);
  std::vector<TinyRow> rows;
  for (const std::string& dtype : options.dtypes)
    for (int n : options.sizes) {
      const unsigned long long seed = rng();
      if (dtype == "f32") bench_size<f32>(rows, n, count, options, settings, *gpu, bandwidth, seed);
      else if (dtype == "f64") bench_size<f64>(rows, n, count, options, settings, *gpu, bandwidth, seed);
      else if (dtype == "cf32") bench_size<cf32>(rows, n, count, options, settings, *gpu, bandwidth, seed);
      else if (dtype == "cf64") bench_size<cf64>(rows, n, count, options, settings, *gpu, bandwidth, seed);
      else throw std::invalid_argument("tiny: --dtype " + dtype + ": expected f32, f64, cf32 or cf64");
    }
  print_table(title, rows, bandwidth);
  for (const TinyRow& r : rows) report.add(r.row);
  nlohmann::json result = report.to_json();
  // The table's columns beside each row; a failed row keeps its times but no speed-up.
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const TinyRow& r = rows[i];
    nlohmann::json& entry = result["rows"][i];
    entry["n"] = r.n;
    entry["nrhs"] = r.nrhs;
    entry["count"] = r.count;
    entry["vendor"] = r.vendor;
    entry["floor_bytes"] = r.floor_bytes;
    entry["floor_ms"] = r.floor_ms;
    const auto covflow = r.row.times.find("covflow"), vendor = r.row.times.find(r.vendor);
    const bool timed = covflow != r.row.times.end() && covflow->second.median_ms > 0;
    if (timed) entry["covflow_over_floor"] = covflow->second.median_ms / r.floor_ms;
    if (!r.row.failed.empty()) {
      entry.erase("best_vendor");
      entry.erase("ratio_covflow_over_best_vendor");
    } else if (timed && vendor != r.row.times.end()) {
      entry["speedup"] = vendor->second.median_ms / covflow->second.median_ms;
    }
  }
  extra["copy_bandwidth_GBps"] = bandwidth / 1e9;
  extra["copy_bytes"] = copied;
  extra["tolerance_n_eps"] = kTolerance;
  extra["sampled_matrices"] = kSampled;
  result.update(extra);
#else
  (void)gpu;
  fmt::print("\ntiny: a build without CUDA, nothing timed (covflow's CUDA backend against cuBLAS/cuSOLVER)\n");
  nlohmann::json result = report.to_json();
  result.update(extra);
#endif
  return result;
}

}  // namespace covflow::bench

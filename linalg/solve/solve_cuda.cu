// getrf / getrs / gesv / potrf / potrs / posv / gels on the GPU: which path runs for which n.
//
//   n ≤ 32  one fused kernel per call (solve_tiny.cuh): getrf and gesv in lu_kernel, getrs in
//           getrs_kernel, potrf / potrs / posv in chol_kernel. No workspace.
//   n > 32  getrf and potrf: getf2_kernel and potf2_kernel, LAPACK's unblocked right-looking LU
//           and Cholesky in global memory, a block per matrix — the vendor's batched routines do
//           not keep this API's promises (cublas<t>getrfBatched divides by an exactly zero pivot;
//           cusolverDn<t>potrfBatched is not held to one triangle). The solves through cuBLAS on
//           pointer arrays that a kernel builds in the workspace: cublas<t>getrsBatched, and two
//           cublas<t>trsmBatched for potrs (cusolverDn<t>potrsBatched takes one right-hand side
//           only). A screening kernel flags matrices holding a NaN or an Inf first, and a fix-up
//           kernel gives them this API's result (NaN, no interchange,
//           status::non_finite_input). For gesv / posv, matrices whose factorization failed have
//           their solve pointed at a scratch identity system in the workspace, so their B is left
//           untouched without a host round trip.
//   gels    geqrf (the QR module) into a workspace tau, then gels_kernel: one thread per
//           (matrix, right-hand side) applies Qᴴ and solves with R, after checking R's diagonal for
//           an exact zero (info = its index; B untouched).
// No call synchronises the host; per-matrix status goes to info on the device.
#include <algorithm>
#include <complex>
#include <string>
#include <type_traits>

#include "../common/device_scalar.cuh"
#include "../qr/qr_impl.hpp"
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "solve_impl.hpp"
#include "solve_tiny.cuh"

namespace covflow::linalg::detail {
namespace {

using tiny::Args;

constexpr std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// The largest batch one vendor call takes (its batchSize is an int).
constexpr std::int64_t kVendorChunk = std::int64_t(1) << 30;

template <class T>
Args<device_t<std::remove_const_t<T>>> tiny_args(Batch<T> a, int mode) {
  using U = std::remove_const_t<T>;
  Args<device_t<U>> args;
  args.a = reinterpret_cast<device_t<U>*>(const_cast<U*>(a.data));
  args.lda = a.ld;
  args.stride_a = a.stride;
  args.n = static_cast<int>(a.cols);
  args.count = a.count;
  args.mode = mode;
  return args;
}
template <class T, class U>
void attach_b(Args<device_t<T>>& args, Batch<U> b) {
  args.b = reinterpret_cast<device_t<T>*>(b.data);
  args.ldb = b.ld;
  args.stride_b = b.stride;
  args.nrhs = static_cast<int>(b.cols);
}

// ---- device helpers for the vendor path -----------------------------------------------------------

template <class D>
__global__ void pointers_kernel(D** out, D* base, std::int64_t stride, std::int64_t count) {
  for (std::int64_t b = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; b < count;
       b += std::int64_t(gridDim.x) * blockDim.x)
    out[b] = base + b * stride;
}

// Pointers to each matrix's system, or to the scratch system where its factorization failed.
template <class D>
__global__ void redirect_kernel(D** a_out, D* a, std::int64_t stride_a, D** b_out, D* b, std::int64_t stride_b,
                                const int* info, D* scratch_a, D* scratch_b, std::int64_t count) {
  for (std::int64_t k = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; k < count;
       k += std::int64_t(gridDim.x) * blockDim.x) {
    const bool ok = info[k] == 0;
    a_out[k] = ok ? a + k * stride_a : scratch_a;
    b_out[k] = ok ? b + k * stride_b : scratch_b;
  }
}

// The scratch system: an identity of ld × n and a zero right-hand side.
template <class D>
__global__ void scratch_kernel(D* scratch_a, std::int64_t ld, int n, D* scratch_b, std::int64_t b_elements) {
  const std::int64_t total = ld * n;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < total + b_elements;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    if (e < total) {
      const std::int64_t i = e % ld, j = e / ld;
      scratch_a[e] = from_real<D>(sreal_t<D>(i == j ? 1 : 0));
    } else {
      scratch_b[e - total] = from_real<D>(sreal_t<D>(0));
    }
  }
}

// flags[b] = 1 where matrix b holds a NaN or an Inf in the part that is read: everything
// (uplo 0), the lower or the upper triangle ('L' / 'U', the diagonal's real part only).
template <class D>
__global__ void screen_kernel(const D* a, std::int64_t ld, std::int64_t stride, int n, int uplo, int* flags,
                              std::int64_t count) {
  for (std::int64_t b = blockIdx.x; b < count; b += gridDim.x) {
    const D* m = a + b * stride;
    bool bad = false;
    for (std::int64_t e = threadIdx.x; e < std::int64_t(n) * n; e += blockDim.x) {
      const int i = static_cast<int>(e % n), j = static_cast<int>(e / n);
      if ((uplo == 'L' && i < j) || (uplo == 'U' && i > j)) continue;
      const D v = m[i + j * ld];
      bad = bad || (i == j && uplo != 0 ? !isfinite(real_part(v)) : !is_finite(v));
    }
    bad = __syncthreads_or(bad);
    if (threadIdx.x == 0) flags[b] = bad ? 1 : 0;
  }
}

// For flagged matrices: NaN over the part read, ipiv 1…n (LU), info = non_finite_input. For the
// others with uplo ≠ 0 (Cholesky): the diagonal's imaginary parts zeroed where the factor was
// written (info ≥ 0 … the vendor may leave rounding there).
template <class D>
__global__ void fixup_kernel(D* a, std::int64_t ld, std::int64_t stride, int n, int uplo, const int* flags, int* ipiv,
                             int* info, std::int64_t count) {
  for (std::int64_t b = blockIdx.x; b < count; b += gridDim.x) {
    D* m = a + b * stride;
    if (flags[b] != 0) {
      for (std::int64_t e = threadIdx.x; e < std::int64_t(n) * n; e += blockDim.x) {
        const int i = static_cast<int>(e % n), j = static_cast<int>(e / n);
        if ((uplo == 'L' && i < j) || (uplo == 'U' && i > j)) continue;
        if constexpr (is_cx<D>) m[i + j * ld] = D{sreal_t<D>(NAN), sreal_t<D>(NAN)};
        else m[i + j * ld] = D(NAN);
      }
      if (ipiv != nullptr)
        for (int i = threadIdx.x; i < n; i += blockDim.x) ipiv[b * n + i] = i + 1;
      if (threadIdx.x == 0) info[b] = status::non_finite_input;
    } else if (uplo != 0) {
      for (int i = threadIdx.x; i < n; i += blockDim.x) m[i + std::int64_t(i) * ld] = from_real<D>(real_part(m[i + std::int64_t(i) * ld]));
    }
  }
}

// getrf for n > 32, unblocked and right-looking in global memory (LAPACK's ?getf2), one block per
// matrix: per column, the pivot search (first largest |x|, or |Re| + |Im| for complex, as i?amax),
// the row interchange, the scaling by the pivot's reciprocal and the rank-1 update of the
// trailing matrix, three barriers each. Used instead of cublas<t>getrfBatched, which divides by an
// exactly zero pivot (Inf and NaN in L) where LAPACK leaves the column as it is and goes on; this
// API promises LAPACK's behaviour. Flagged (non-finite) matrices are skipped (fixup_kernel writes
// their result).
constexpr int kGetf2Threads = 256;

template <class D>
__global__ void __launch_bounds__(kGetf2Threads) getf2_kernel(D* a, std::int64_t ld, std::int64_t stride, int n,
                                                              const int* flags, int* ipiv, int* info,
                                                              std::int64_t count) {
  using R = sreal_t<D>;
  __shared__ R best_value[kGetf2Threads / 32];
  __shared__ int best_row[kGetf2Threads / 32];
  __shared__ int pivot_row;
  __shared__ R pivot_abs;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (std::int64_t b = blockIdx.x; b < count; b += gridDim.x) {
    if (flags[b] != 0) continue;  // uniform
    D* m = a + b * stride;
    int first_zero = 0;
    for (int j = 0; j < n; ++j) {
      R value = R(-1);
      int row = n;
      for (int i = j + tid; i < n; i += blockDim.x) {
        const R v = tiny::abs1(m[i + j * ld]);
        if (v > value) {  // strided rows ascend per thread: the first largest is kept
          value = v;
          row = i;
        }
      }
      for (int offset = 16; offset > 0; offset >>= 1) {
        const R other = __shfl_xor_sync(0xffffffffu, value, offset);
        const int other_row = __shfl_xor_sync(0xffffffffu, row, offset);
        if (other > value || (other == value && other_row < row)) {
          value = other;
          row = other_row;
        }
      }
      if (lane == 0) {
        best_value[warp] = value;
        best_row[warp] = row;
      }
      __syncthreads();
      if (tid == 0) {
        R v = best_value[0];
        int r = best_row[0];
        for (int w = 1; w < kGetf2Threads / 32; ++w)
          if (best_value[w] > v || (best_value[w] == v && best_row[w] < r)) {
            v = best_value[w];
            r = best_row[w];
          }
        pivot_row = r;
        pivot_abs = v;
        ipiv[b * n + j] = r + 1;
      }
      __syncthreads();
      const int p = pivot_row;
      if (pivot_abs == R(0)) {  // uniform: U(j, j) = 0, nothing to scale or eliminate
        if (first_zero == 0) first_zero = j + 1;
        continue;
      }
      if (p != j)
        for (int k = tid; k < n; k += blockDim.x) {
          const D t = m[j + k * ld];
          m[j + k * ld] = m[p + k * ld];
          m[p + k * ld] = t;
        }
      __syncthreads();
      // As ?getrf2: multiply by the reciprocal unless the pivot is below the safe minimum; the
      // arithmetic rounds step by step as reference LAPACK does (solve_tiny.cuh).
      const D pivot = m[j + j * ld];
      const bool small = tiny::abs1(pivot) < tiny::sfmin<R>();
      const D inverse = tiny::divide(from_real<D>(R(1)), pivot);
      for (int i = j + 1 + tid; i < n; i += blockDim.x) {
        D& x = m[i + j * ld];
        x = small ? tiny::divide(x, pivot) : tiny::mul_exact(x, inverse);
      }
      __syncthreads();
      const int rest = n - j - 1;
      for (std::int64_t e = tid; e < std::int64_t(rest) * rest; e += blockDim.x) {
        const int i = j + 1 + static_cast<int>(e % rest), k = j + 1 + static_cast<int>(e / rest);
        m[i + k * ld] = tiny::sub_product(m[i + k * ld], m[i + j * ld], m[j + k * ld]);
      }
      __syncthreads();
    }
    if (tid == 0) info[b] = first_zero;
    __syncthreads();
  }
}

// potrf for n > 32, unblocked and right-looking in global memory (LAPACK's ?potf2 order of
// failure), one block per matrix, only the `uplo` triangle read and written: per column j the
// pivot's square root (failing, info = j + 1, at a pivot that is not positive — the value left on
// the diagonal), the column (lower) or row (upper) scaled by its reciprocal, and the Hermitian
// rank-1 update of the trailing triangle. Used instead of cusolverDn<t>potrfBatched so that the
// other triangle is never written and a failure leaves the partial factor as this API says.
// Flagged (non-finite) matrices are skipped.
template <class D>
__global__ void __launch_bounds__(kGetf2Threads) potf2_kernel(D* a, std::int64_t ld, std::int64_t stride, int n,
                                                              int upper, const int* flags, int* info,
                                                              std::int64_t count) {
  using R = sreal_t<D>;
  __shared__ int failed;
  const int tid = threadIdx.x;
  for (std::int64_t b = blockIdx.x; b < count; b += gridDim.x) {
    if (flags[b] != 0) continue;  // uniform
    D* m = a + b * stride;
    // Element (i, k), i ≥ k, of the lower factor L = Uᴴ: stored at (i, k) (lower) or conjugated
    // at (k, i) (upper).
    auto at = [&](int i, int k) -> D& { return upper ? m[k + std::int64_t(i) * ld] : m[i + std::int64_t(k) * ld]; };
    if (tid == 0) failed = 0;
    __syncthreads();
    for (int j = 0; j < n; ++j) {
      const R d2 = real_part(at(j, j));
      if (!(d2 > R(0))) {  // uniform: every thread read the same value
        if (tid == 0) {
          at(j, j) = from_real<D>(d2);
          failed = j + 1;
        }
        break;
      }
      const R d = sqrt(d2);
      const R inverse = R(1) / d;
      __syncthreads();  // every thread has read the pivot
      if (tid == 0) at(j, j) = from_real<D>(d);
      for (int i = j + 1 + tid; i < n; i += blockDim.x) at(i, j) = at(i, j) * inverse;
      __syncthreads();
      const int rest = n - j - 1;
      for (std::int64_t e = tid; e < std::int64_t(rest) * rest; e += blockDim.x) {
        const int i = j + 1 + static_cast<int>(e % rest), k = j + 1 + static_cast<int>(e / rest);
        if (k > i) continue;
        // L(i, k) −= L(i, j)·conj(L(k, j)); stored conjugated for upper.
        const D lij = upper ? conj_of(at(i, j)) : at(i, j);
        const D lkj = upper ? conj_of(at(k, j)) : at(k, j);
        const D updated = fma_(upper ? conj_of(at(i, k)) : at(i, k), -lij, conj_of(lkj));
        at(i, k) = upper ? conj_of(updated) : updated;
      }
      __syncthreads();
    }
    __syncthreads();
    if (tid == 0) info[b] = failed;
    // The diagonal is real: its imaginary parts (never read) are written as zero, up to the
    // failing pivot.
    const int done = failed == 0 ? n : failed - 1;
    for (int i = tid; i < done; i += blockDim.x) at(i, i) = from_real<D>(real_part(at(i, i)));
    __syncthreads();
  }
}

unsigned grid_of(std::int64_t items, int threads) {
  return static_cast<unsigned>(std::clamp<std::int64_t>((items + threads - 1) / threads, 1, 65535));
}
unsigned blocks_of(std::int64_t count) { return static_cast<unsigned>(std::clamp<std::int64_t>(count, 1, 65535)); }

// ---- vendor wrappers ---------------------------------------------------------------------------

inline cublasStatus_t getrs_batched(cublasHandle_t h, cublasOperation_t t, int n, int nrhs, float** a, int lda,
                                    const int* p, float** b, int ldb, int* info, int count) {
  return cublasSgetrsBatched(h, t, n, nrhs, a, lda, p, b, ldb, info, count);
}
inline cublasStatus_t getrs_batched(cublasHandle_t h, cublasOperation_t t, int n, int nrhs, double** a, int lda,
                                    const int* p, double** b, int ldb, int* info, int count) {
  return cublasDgetrsBatched(h, t, n, nrhs, a, lda, p, b, ldb, info, count);
}
inline cublasStatus_t getrs_batched(cublasHandle_t h, cublasOperation_t t, int n, int nrhs, Cx<float>** a, int lda,
                                    const int* p, Cx<float>** b, int ldb, int* info, int count) {
  return cublasCgetrsBatched(h, t, n, nrhs, reinterpret_cast<cuComplex**>(a), lda, p,
                             reinterpret_cast<cuComplex**>(b), ldb, info, count);
}
inline cublasStatus_t getrs_batched(cublasHandle_t h, cublasOperation_t t, int n, int nrhs, Cx<double>** a, int lda,
                                    const int* p, Cx<double>** b, int ldb, int* info, int count) {
  return cublasZgetrsBatched(h, t, n, nrhs, reinterpret_cast<cuDoubleComplex**>(a), lda, p,
                             reinterpret_cast<cuDoubleComplex**>(b), ldb, info, count);
}

// B ← op(A)⁻¹·B, A triangular, non-unit, from the left.
inline cublasStatus_t trsm_batched(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, int n, int nrhs,
                                   float** a, int lda, float** b, int ldb, int count) {
  const float one = 1;
  return cublasStrsmBatched(h, CUBLAS_SIDE_LEFT, u, t, CUBLAS_DIAG_NON_UNIT, n, nrhs, &one, a, lda, b, ldb, count);
}
inline cublasStatus_t trsm_batched(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, int n, int nrhs,
                                   double** a, int lda, double** b, int ldb, int count) {
  const double one = 1;
  return cublasDtrsmBatched(h, CUBLAS_SIDE_LEFT, u, t, CUBLAS_DIAG_NON_UNIT, n, nrhs, &one, a, lda, b, ldb, count);
}
inline cublasStatus_t trsm_batched(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, int n, int nrhs,
                                   Cx<float>** a, int lda, Cx<float>** b, int ldb, int count) {
  const cuComplex one{1, 0};
  return cublasCtrsmBatched(h, CUBLAS_SIDE_LEFT, u, t, CUBLAS_DIAG_NON_UNIT, n, nrhs, &one,
                            reinterpret_cast<cuComplex**>(a), lda, reinterpret_cast<cuComplex**>(b), ldb, count);
}
inline cublasStatus_t trsm_batched(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, int n, int nrhs,
                                   Cx<double>** a, int lda, Cx<double>** b, int ldb, int count) {
  const cuDoubleComplex one{1, 0};
  return cublasZtrsmBatched(h, CUBLAS_SIDE_LEFT, u, t, CUBLAS_DIAG_NON_UNIT, n, nrhs, &one,
                            reinterpret_cast<cuDoubleComplex**>(a), lda, reinterpret_cast<cuDoubleComplex**>(b), ldb,
                            count);
}

// ---- workspace layouts of the vendor path --------------------------------------------------------

// [A pointers][B pointers][flags][scratch identity ld × n][scratch B ldb × nrhs]
struct VendorLayout {
  std::size_t a_pointers = 0, b_pointers = 0, flags = 0, scratch_a = 0, scratch_b = 0, bytes = 0;
};
template <class T>
VendorLayout vendor_layout(std::int64_t count, bool b_pointers, bool flags, std::int64_t scratch_a_elements,
                           std::int64_t scratch_b_elements) {
  VendorLayout l;
  std::size_t at = 0;
  l.a_pointers = at;
  at += align256(sizeof(void*) * std::size_t(count));
  l.b_pointers = at;
  if (b_pointers) at += align256(sizeof(void*) * std::size_t(count));
  l.flags = at;
  if (flags) at += align256(sizeof(int) * std::size_t(count));
  l.scratch_a = at;
  at += align256(sizeof(T) * std::size_t(scratch_a_elements));
  l.scratch_b = at;
  at += align256(sizeof(T) * std::size_t(scratch_b_elements));
  l.bytes = at;
  return l;
}

template <class D>
void build_pointers(cudaStream_t stream, D** out, D* base, std::int64_t stride, std::int64_t count) {
  pointers_kernel<<<grid_of(count, 256), 256, 0, stream>>>(out, base, stride, count);
  COVFLOW_CHECK_LAUNCH();
}

template <class D>
D* as_device(auto* p) {
  return reinterpret_cast<D*>(const_cast<std::remove_const_t<std::remove_pointer_t<decltype(p)>>*>(p));
}

// getrf for n > 32 (getf2_kernel), with the non-finite screen; `base` is a workspace laid out by
// vendor_layout<T>(count, …, flags = true, …).
template <class T>
void getrf_vendor(CudaContext& context, Batch<T> a, std::span<int> ipiv, std::span<int> info, std::byte* base,
                  const VendorLayout& layout) {
  using D = device_t<T>;
  const cudaStream_t stream = context.stream();
  const int n = static_cast<int>(a.cols);
  auto* flags = reinterpret_cast<int*>(base + layout.flags);
  D* data = as_device<D>(a.data);
  screen_kernel<<<blocks_of(a.count), 256, 0, stream>>>(data, a.ld, a.stride, n, 0, flags, a.count);
  COVFLOW_CHECK_LAUNCH();
  getf2_kernel<<<blocks_of(a.count), kGetf2Threads, 0, stream>>>(data, a.ld, a.stride, n, flags, ipiv.data(),
                                                                 info.data(), a.count);
  COVFLOW_CHECK_LAUNCH();
  fixup_kernel<<<blocks_of(a.count), 256, 0, stream>>>(data, a.ld, a.stride, n, 0, flags, ipiv.data(), info.data(),
                                                        a.count);
  COVFLOW_CHECK_LAUNCH();
}

template <class T>
void potrf_vendor(CudaContext& context, Uplo uplo, Batch<T> a, std::span<int> info, std::byte* base,
                  const VendorLayout& layout) {
  using D = device_t<T>;
  const cudaStream_t stream = context.stream();
  const int n = static_cast<int>(a.cols);
  const int which = static_cast<char>(uplo);
  auto* flags = reinterpret_cast<int*>(base + layout.flags);
  D* data = as_device<D>(a.data);
  screen_kernel<<<blocks_of(a.count), 256, 0, stream>>>(data, a.ld, a.stride, n, which, flags, a.count);
  COVFLOW_CHECK_LAUNCH();
  potf2_kernel<<<blocks_of(a.count), kGetf2Threads, 0, stream>>>(data, a.ld, a.stride, n, uplo == Uplo::upper ? 1 : 0,
                                                                 flags, info.data(), a.count);
  COVFLOW_CHECK_LAUNCH();
  fixup_kernel<<<blocks_of(a.count), 256, 0, stream>>>(data, a.ld, a.stride, n, which, flags, nullptr, info.data(),
                                                        a.count);
  COVFLOW_CHECK_LAUNCH();
}

// The two triangular solves of potrs through cuBLAS on the pointer arrays given.
template <class D>
void potrs_vendor(CudaContext& context, Uplo uplo, int n, int nrhs, D** a, std::int64_t lda, D** b, std::int64_t ldb,
                  std::int64_t count) {
  const cublasOperation_t adjoint = is_cx<D> ? CUBLAS_OP_C : CUBLAS_OP_T;
  const cublasFillMode_t fill = uplo == Uplo::lower ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
  // Lower: L·Y = B, Lᴴ·X = Y. Upper: Uᴴ·Y = B, U·X = Y.
  const cublasOperation_t first_op = uplo == Uplo::lower ? CUBLAS_OP_N : adjoint;
  const cublasOperation_t second_op = uplo == Uplo::lower ? adjoint : CUBLAS_OP_N;
  for (std::int64_t first = 0; first < count; first += kVendorChunk) {
    const int chunk = static_cast<int>(std::min(kVendorChunk, count - first));
    for (const cublasOperation_t op : {first_op, second_op})
      COVFLOW_CUBLAS_TRY(trsm_batched(context.cublas(), fill, op, n, nrhs, a + first, static_cast<int>(lda), b + first,
                                      static_cast<int>(ldb), chunk));
  }
}

// Pointer arrays for a solve after a factorization, failed matrices sent to the scratch system.
template <class D>
void redirect(cudaStream_t stream, D** a_out, D* a, std::int64_t stride_a, std::int64_t lda, int n, D** b_out, D* b,
              std::int64_t stride_b, std::int64_t ldb, int nrhs, const int* info, std::byte* base,
              const VendorLayout& layout, std::int64_t count) {
  auto* scratch_a = reinterpret_cast<D*>(base + layout.scratch_a);
  auto* scratch_b = reinterpret_cast<D*>(base + layout.scratch_b);
  const std::int64_t b_elements = ldb * nrhs;
  scratch_kernel<<<grid_of(lda * n + b_elements, 256), 256, 0, stream>>>(scratch_a, lda, n, scratch_b, b_elements);
  COVFLOW_CHECK_LAUNCH();
  redirect_kernel<<<grid_of(count, 256), 256, 0, stream>>>(a_out, a, stride_a, b_out, b, stride_b, info, scratch_a,
                                                           scratch_b, count);
  COVFLOW_CHECK_LAUNCH();
}

// ---- gels ---------------------------------------------------------------------------------------

// One thread per (matrix, right-hand side): B ← Qᴴ·B with geqrf's reflectors, then R·X = B(0:n).
// Matrices with info ≠ 0 (non-finite input, or rank_kernel's zero on R's diagonal) are skipped.
template <class D>
__global__ void gels_kernel(const D* a, std::int64_t lda, std::int64_t stride_a, const D* tau, int m, int n, D* b,
                            std::int64_t ldb, std::int64_t stride_b, int nrhs, int* info, std::int64_t count) {
  const int columns = nrhs;
  const std::int64_t total = count * columns;
  for (std::int64_t t = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; t < total;
       t += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t k = t / columns;
    const int c = static_cast<int>(t % columns);
    if (info[k] != 0) continue;  // geqrf flagged it
    const D* r = a + k * stride_a;
    const D* tk = tau + k * n;
    D* x = b + k * stride_b + c * ldb;
    for (int j = 0; j < n; ++j) {
      // x ← (I − conj(τ_j)·v·vᴴ)·x, v = [0…0, 1, A(j+1:m, j)].
      D w = x[j];
      for (int i = j + 1; i < m; ++i) w = fma_conj(w, r[i + j * lda], x[i]);
      const D s = conj_of(tk[j]) * w;
      x[j] = x[j] - s;
      for (int i = j + 1; i < m; ++i) x[i] = fma_(x[i], -s, r[i + j * lda]);
    }
    for (int j = n - 1; j >= 0; --j) {
      D v = x[j];
      for (int i = j + 1; i < n; ++i) v = fma_(v, -r[j + i * lda], x[i]);
      const D d = r[j + j * lda];
      if constexpr (is_cx<D>) {
        const sreal_t<D> den = abs2(d);
        x[j] = (v * conj_of(d)) * (sreal_t<D>(1) / den);
      } else {
        x[j] = v / d;
      }
    }
  }
}

// info = index of the first exact zero on R's diagonal, for matrices geqrf left at 0.
template <class D>
__global__ void rank_kernel(const D* a, std::int64_t lda, std::int64_t stride_a, int n, int* info, std::int64_t count) {
  for (std::int64_t k = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; k < count;
       k += std::int64_t(gridDim.x) * blockDim.x) {
    if (info[k] != 0) continue;
    const D* r = a + k * stride_a;
    for (int i = 0; i < n; ++i)
      if (abs2(r[i + i * lda]) == sreal_t<D>(0)) {
        info[k] = i + 1;
        break;
      }
  }
}

}  // namespace

// ---- workspace queries --------------------------------------------------------------------------

template <class T>
std::size_t getrf_cuda_workspace(std::int64_t n, std::int64_t count) {
  if (n <= tiny_max_n) return 0;
  return vendor_layout<T>(count, false, true, 0, 0).bytes;
}
template <class T>
std::size_t getrs_cuda_workspace(std::int64_t n, std::int64_t /*nrhs*/, std::int64_t count) {
  if (n <= tiny_max_n) return 0;
  return vendor_layout<T>(count, true, false, 0, 0).bytes;
}
template <class T>
std::size_t gesv_cuda_workspace(std::int64_t n, std::int64_t nrhs, std::int64_t count) {
  if (n <= tiny_max_n) return 0;
  // Sized for packed A and B (ld = n); a call with larger leading dimensions takes ld·n and
  // ld_b·nrhs of scratch, which the arena grows to (and counts) on first use.
  return vendor_layout<T>(count, true, true, n * n, n * std::max<std::int64_t>(nrhs, 1)).bytes;
}
template <class T>
std::size_t potrf_cuda_workspace(std::int64_t n, std::int64_t count) {
  return getrf_cuda_workspace<T>(n, count);
}
template <class T>
std::size_t potrs_cuda_workspace(std::int64_t n, std::int64_t nrhs, std::int64_t count) {
  return getrs_cuda_workspace<T>(n, nrhs, count);
}
template <class T>
std::size_t posv_cuda_workspace(std::int64_t n, std::int64_t nrhs, std::int64_t count) {
  return gesv_cuda_workspace<T>(n, nrhs, count);
}
template <class T>
std::size_t gels_cuda_workspace(std::int64_t m, std::int64_t n, std::int64_t /*nrhs*/, std::int64_t count) {
  return align256(sizeof(T) * std::size_t(count * std::min(m, n))) + geqrf_cuda_workspace<T>(m, n, count);
}

// ---- LU -----------------------------------------------------------------------------------------

template <class T>
void getrf_cuda(CudaContext& context, Batch<T> a, std::span<int> ipiv, std::span<int> info) {
  context.make_current();
  if (a.cols <= tiny_max_n) {
    auto args = tiny_args(a, tiny::factor);
    args.ipiv = ipiv.data();
    args.info = info.data();
    tiny::launch_lu(context.stream(), args);
    return;
  }
  const auto layout = vendor_layout<T>(a.count, false, true, 0, 0);
  auto* base = static_cast<std::byte*>(context.workspace().acquire(layout.bytes));
  getrf_vendor(context, a, ipiv, info, base, layout);
}

template <class T>
void getrs_cuda(CudaContext& context, Op op, Batch<const T> lu, std::span<const int> ipiv, Batch<T> b) {
  using D = device_t<T>;
  context.make_current();
  if (lu.cols <= tiny_max_n) {
    auto args = tiny_args(lu, tiny::solve);
    attach_b<T>(args, b);
    args.ipiv = const_cast<int*>(ipiv.data());
    args.op = static_cast<char>(op);
    tiny::launch_getrs(context.stream(), args);
    return;
  }
  const auto layout = vendor_layout<T>(lu.count, true, false, 0, 0);
  auto* base = static_cast<std::byte*>(context.workspace().acquire(layout.bytes));
  auto** a_pointers = reinterpret_cast<D**>(base + layout.a_pointers);
  auto** b_pointers = reinterpret_cast<D**>(base + layout.b_pointers);
  build_pointers(context.stream(), a_pointers, as_device<D>(lu.data), lu.stride, lu.count);
  build_pointers(context.stream(), b_pointers, as_device<D>(b.data), b.stride, b.count);
  const cublasOperation_t t = op == Op::none ? CUBLAS_OP_N : op == Op::trans ? CUBLAS_OP_T : CUBLAS_OP_C;
  const int n = static_cast<int>(lu.cols);
  for (std::int64_t first = 0; first < lu.count; first += kVendorChunk) {
    const int chunk = static_cast<int>(std::min(kVendorChunk, lu.count - first));
    int argument_info = 0;
    COVFLOW_CUBLAS_TRY(getrs_batched(context.cublas(), t, n, static_cast<int>(b.cols), a_pointers + first,
                                     static_cast<int>(lu.ld), ipiv.data() + first * n, b_pointers + first,
                                     static_cast<int>(b.ld), &argument_info, chunk));
    if (argument_info != 0)
      throw Error("getrs: cublasgetrsBatched rejected argument " + std::to_string(-argument_info));
  }
}

template <class T>
void gesv_cuda(CudaContext& context, Batch<T> a, std::span<int> ipiv, Batch<T> b, std::span<int> info) {
  using D = device_t<T>;
  context.make_current();
  if (a.cols <= tiny_max_n) {
    auto args = tiny_args(a, tiny::factor | tiny::solve);
    attach_b<T>(args, b);
    args.ipiv = ipiv.data();
    args.info = info.data();
    tiny::launch_lu(context.stream(), args);
    return;
  }
  const int n = static_cast<int>(a.cols), nrhs = static_cast<int>(b.cols);
  const auto layout = vendor_layout<T>(a.count, true, true, a.ld * n, b.ld * std::max(nrhs, 1));
  auto* base = static_cast<std::byte*>(context.workspace().acquire(layout.bytes));
  getrf_vendor(context, a, ipiv, info, base, layout);
  if (nrhs == 0) return;
  auto** a_pointers = reinterpret_cast<D**>(base + layout.a_pointers);
  auto** b_pointers = reinterpret_cast<D**>(base + layout.b_pointers);
  redirect(context.stream(), a_pointers, as_device<D>(a.data), a.stride, a.ld, n, b_pointers, as_device<D>(b.data),
           b.stride, b.ld, nrhs, info.data(), base, layout, a.count);
  for (std::int64_t first = 0; first < a.count; first += kVendorChunk) {
    const int chunk = static_cast<int>(std::min(kVendorChunk, a.count - first));
    int argument_info = 0;
    COVFLOW_CUBLAS_TRY(getrs_batched(context.cublas(), CUBLAS_OP_N, n, nrhs, a_pointers + first, static_cast<int>(a.ld),
                                     ipiv.data() + first * n, b_pointers + first, static_cast<int>(b.ld),
                                     &argument_info, chunk));
    if (argument_info != 0)
      throw Error("gesv: cublasgetrsBatched rejected argument " + std::to_string(-argument_info));
  }
}

// ---- Cholesky -----------------------------------------------------------------------------------

template <class T>
void potrf_cuda(CudaContext& context, Uplo uplo, Batch<T> a, std::span<int> info) {
  context.make_current();
  if (a.cols <= tiny_max_n) {
    auto args = tiny_args(a, tiny::factor);
    args.info = info.data();
    tiny::launch_chol(context.stream(), args, uplo == Uplo::upper);
    return;
  }
  const auto layout = vendor_layout<T>(a.count, false, true, 0, 0);
  auto* base = static_cast<std::byte*>(context.workspace().acquire(layout.bytes));
  potrf_vendor(context, uplo, a, info, base, layout);
}

template <class T>
void potrs_cuda(CudaContext& context, Uplo uplo, Batch<const T> factor, Batch<T> b) {
  using D = device_t<T>;
  context.make_current();
  if (factor.cols <= tiny_max_n) {
    auto args = tiny_args(factor, tiny::solve);
    attach_b<T>(args, b);
    tiny::launch_chol(context.stream(), args, uplo == Uplo::upper);
    return;
  }
  const auto layout = vendor_layout<T>(factor.count, true, false, 0, 0);
  auto* base = static_cast<std::byte*>(context.workspace().acquire(layout.bytes));
  auto** a_pointers = reinterpret_cast<D**>(base + layout.a_pointers);
  auto** b_pointers = reinterpret_cast<D**>(base + layout.b_pointers);
  build_pointers(context.stream(), a_pointers, as_device<D>(factor.data), factor.stride, factor.count);
  build_pointers(context.stream(), b_pointers, as_device<D>(b.data), b.stride, b.count);
  potrs_vendor(context, uplo, static_cast<int>(factor.cols), static_cast<int>(b.cols), a_pointers, factor.ld,
               b_pointers, b.ld, factor.count);
}

template <class T>
void posv_cuda(CudaContext& context, Uplo uplo, Batch<T> a, Batch<T> b, std::span<int> info) {
  using D = device_t<T>;
  context.make_current();
  if (a.cols <= tiny_max_n) {
    auto args = tiny_args(a, tiny::factor | tiny::solve);
    attach_b<T>(args, b);
    args.info = info.data();
    tiny::launch_chol(context.stream(), args, uplo == Uplo::upper);
    return;
  }
  const int n = static_cast<int>(a.cols), nrhs = static_cast<int>(b.cols);
  const auto layout = vendor_layout<T>(a.count, true, true, a.ld * n, b.ld * std::max(nrhs, 1));
  auto* base = static_cast<std::byte*>(context.workspace().acquire(layout.bytes));
  potrf_vendor(context, uplo, a, info, base, layout);
  if (nrhs == 0) return;
  auto** a_pointers = reinterpret_cast<D**>(base + layout.a_pointers);
  auto** b_pointers = reinterpret_cast<D**>(base + layout.b_pointers);
  redirect(context.stream(), a_pointers, as_device<D>(a.data), a.stride, a.ld, n, b_pointers, as_device<D>(b.data),
           b.stride, b.ld, nrhs, info.data(), base, layout, a.count);
  potrs_vendor(context, uplo, n, nrhs, a_pointers, a.ld, b_pointers, b.ld, a.count);
}

// ---- least squares ------------------------------------------------------------------------------

template <class T>
void gels_cuda(CudaContext& context, Batch<T> a, Batch<T> b, std::span<int> info) {
  using D = device_t<T>;
  context.make_current();
  const std::int64_t n = a.cols;
  const std::size_t tau_bytes = align256(sizeof(T) * std::size_t(a.count * n));
  // geqrf takes no workspace (qr_cuda.cu), so tau may sit in the arena.
  auto* tau = static_cast<T*>(context.workspace().acquire(tau_bytes));
  geqrf_cuda(context, a, std::span<T>(tau, std::size_t(a.count * n)), info);
  const cudaStream_t stream = context.stream();
  rank_kernel<<<grid_of(a.count, 256), 256, 0, stream>>>(as_device<D>(a.data), a.ld, a.stride, static_cast<int>(n),
                                                         info.data(), a.count);
  COVFLOW_CHECK_LAUNCH();
  if (b.cols == 0) return;
  gels_kernel<<<grid_of(a.count * b.cols, 128), 128, 0, stream>>>(
      as_device<D>(a.data), a.ld, a.stride, reinterpret_cast<const D*>(tau), static_cast<int>(a.rows),
      static_cast<int>(n), as_device<D>(b.data), b.ld, b.stride, static_cast<int>(b.cols), info.data(), a.count);
  COVFLOW_CHECK_LAUNCH();
}

#define COVFLOW_SOLVE_CUDA(T)                                                                           \
  template std::size_t getrf_cuda_workspace<T>(std::int64_t, std::int64_t);                           \
  template std::size_t getrs_cuda_workspace<T>(std::int64_t, std::int64_t, std::int64_t);             \
  template std::size_t gesv_cuda_workspace<T>(std::int64_t, std::int64_t, std::int64_t);              \
  template std::size_t potrf_cuda_workspace<T>(std::int64_t, std::int64_t);                           \
  template std::size_t potrs_cuda_workspace<T>(std::int64_t, std::int64_t, std::int64_t);             \
  template std::size_t posv_cuda_workspace<T>(std::int64_t, std::int64_t, std::int64_t);              \
  template std::size_t gels_cuda_workspace<T>(std::int64_t, std::int64_t, std::int64_t, std::int64_t); \
  template void getrf_cuda<T>(CudaContext&, Batch<T>, std::span<int>, std::span<int>);                \
  template void getrs_cuda<T>(CudaContext&, Op, Batch<const T>, std::span<const int>, Batch<T>);      \
  template void gesv_cuda<T>(CudaContext&, Batch<T>, std::span<int>, Batch<T>, std::span<int>);       \
  template void potrf_cuda<T>(CudaContext&, Uplo, Batch<T>, std::span<int>);                          \
  template void potrs_cuda<T>(CudaContext&, Uplo, Batch<const T>, Batch<T>);                          \
  template void posv_cuda<T>(CudaContext&, Uplo, Batch<T>, Batch<T>, std::span<int>);                 \
  template void gels_cuda<T>(CudaContext&, Batch<T>, Batch<T>, std::span<int>);
COVFLOW_SOLVE_CUDA(f32)
COVFLOW_SOLVE_CUDA(f64)
COVFLOW_SOLVE_CUDA(cf32)
COVFLOW_SOLVE_CUDA(cf64)
#undef COVFLOW_SOLVE_CUDA

}  // namespace covflow::linalg::detail

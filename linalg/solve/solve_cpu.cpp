// getrf / getrs / gesv, potrf / potrs / posv and gels on the CPU: LAPACK per matrix across the
// thread pool (?getrf, ?getrs, ?potrf, ?potrs; gels as ?geqrf, ?unmqr, ?trtrs). Only gels needs
// scratch (tau and LAPACK's work array), one slice of the Exec's host workspace per worker.
//
// Every matrix is checked for NaN and Inf before LAPACK sees it: LAPACK would otherwise return
// garbage pivots or a meaningless info, and the API promises status::non_finite_input with A set
// to NaN and B untouched.
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <string>

#include "../common/blas.hpp"
#include "../common/cpu_helpers.hpp"
#include "covflow/linalg/error.hpp"
#include "solve_impl.hpp"

namespace covflow::linalg::detail {
namespace {

template <class T>
T quiet_nan() {
  return T(std::numeric_limits<real_t<T>>::quiet_NaN());
}

// LAPACK's info < 0 names an argument of ours that solve.cpp should have refused.
void require_lapack_ok(int info, const char* routine) {
  if (info < 0)
    throw Error(std::string(routine) + ": LAPACK rejected argument " + std::to_string(-info) +
                " (an argument check is missing)");
}

// ---- LU -----------------------------------------------------------------------------------------

// One matrix: LAPACK's ?getrf on finite input; otherwise A ← NaN, ipiv ← 1 … n. Returns info.
template <class T>
int factor_lu(T* a, std::int64_t ld, int n, int* pivots) {
  if (!matrix_is_finite(a, ld, n, n)) {
    for (int j = 0; j < n; ++j) std::fill_n(a + j * ld, n, quiet_nan<T>());
    for (int i = 0; i < n; ++i) pivots[i] = i + 1;
    return status::non_finite_input;
  }
  int info = 0;
  blas::getrf(n, n, a, static_cast<int>(ld), pivots, &info);
  require_lapack_ok(info, "getrf");
  return info;
}

template <class T>
void solve_lu(Op op, const T* lu, std::int64_t ld_lu, int n, const int* pivots, T* b, std::int64_t ld_b, int nrhs) {
  int info = 0;
  blas::getrs(static_cast<char>(op), n, nrhs, lu, static_cast<int>(ld_lu), pivots, b, static_cast<int>(ld_b), &info);
  require_lapack_ok(info, "getrs");
}

// ---- Cholesky -----------------------------------------------------------------------------------

// Whether the `uplo` triangle of the n×n matrix a is finite. The diagonal's imaginary parts are
// not part of the input (potrf takes them as zero), so a NaN there is no reason to refuse A.
template <class T>
bool triangle_is_finite(const T* a, std::int64_t ld, int n, Uplo uplo) {
  for (int j = 0; j < n; ++j) {
    const T* column = a + j * ld;
    const int first = uplo == Uplo::lower ? j + 1 : 0, last = uplo == Uplo::lower ? n : j;
    if (!std::isfinite(std::real(column[j]))) return false;
    for (int i = first; i < last; ++i)
      if (!is_finite(column[i])) return false;
  }
  return true;
}

// One matrix: LAPACK's ?potrf on a finite triangle; otherwise that triangle ← NaN. Returns info.
template <class T>
int factor_cholesky(Uplo uplo, T* a, std::int64_t ld, int n) {
  if (!triangle_is_finite(a, ld, n, uplo)) {
    for (int j = 0; j < n; ++j) {
      const int first = uplo == Uplo::lower ? j : 0, last = uplo == Uplo::lower ? n : j + 1;
      std::fill(a + j * ld + first, a + j * ld + last, quiet_nan<T>());
    }
    return status::non_finite_input;
  }
  // ?potrf reads only the real part of the diagonal and sets the imaginary part to zero where it
  // factors; zeroing it first keeps that promise also past a failing minor, where LAPACK stops.
  if constexpr (is_complex_v<T>)
    for (int j = 0; j < n; ++j) a[j + j * ld].imag(0);
  int info = 0;
  blas::potrf(static_cast<char>(uplo), n, a, static_cast<int>(ld), &info);
  require_lapack_ok(info, "potrf");
  return info;
}

template <class T>
void solve_cholesky(Uplo uplo, const T* factor, std::int64_t ld_factor, int n, T* b, std::int64_t ld_b, int nrhs) {
  int info = 0;
  blas::potrs(static_cast<char>(uplo), n, nrhs, factor, static_cast<int>(ld_factor), b, static_cast<int>(ld_b), &info);
  require_lapack_ok(info, "potrs");
}

// ---- least squares ------------------------------------------------------------------------------

// LAPACK's optimal lwork from a workspace query's work[0] (at least 1).
template <class T>
int lwork_from(const T& query) {
  return std::max(1, static_cast<int>(std::real(query)));
}

// One work array serves ?geqrf and then ?unmqr (Qᴴ·B), so it takes the larger optimum of the two.
template <class T>
int gels_lwork(int m, int n, int nrhs) {
  T geqrf_query{}, unmqr_query{};
  int info = 0;
  blas::geqrf(m, n, static_cast<T*>(nullptr), std::max(1, m), static_cast<T*>(nullptr), &geqrf_query, -1, &info);
  blas::unmqr('L', 'C', m, std::max(1, nrhs), n, static_cast<const T*>(nullptr), std::max(1, m),
              static_cast<const T*>(nullptr), static_cast<T*>(nullptr), std::max(1, m), &unmqr_query, -1, &info);
  return std::max(lwork_from(geqrf_query), lwork_from(unmqr_query));
}

// A worker's slice: LAPACK's work array (lwork elements), then tau.
struct GelsSlice {
  int lwork = 0;
  std::size_t work_bytes = 0, per_worker = 0;
};

template <class T>
GelsSlice gels_slice(int m, int n, int nrhs) {
  GelsSlice slice;
  slice.lwork = gels_lwork<T>(m, n, nrhs);
  slice.work_bytes = align_up(sizeof(T) * std::size_t(slice.lwork));
  slice.per_worker = slice.work_bytes + align_up(sizeof(T) * std::size_t(n));
  return slice;
}

}  // namespace

// ---- LU -----------------------------------------------------------------------------------------

// ?getrf works in place: no scratch.
template <class T>
std::size_t getrf_cpu_workspace(unsigned, std::int64_t) {
  return 0;
}

template <class T>
void getrf_cpu(ThreadPool& pool, Workspace&, Batch<T> a, std::span<int> ipiv, std::span<int> info) {
  const int n = static_cast<int>(a.rows);
  pool.parallel_for(static_cast<std::size_t>(a.count), [&](std::size_t index, unsigned) {
    const auto b = static_cast<std::int64_t>(index);
    info[index] = factor_lu(a.matrix(b), a.ld, n, ipiv.data() + b * n);
  });
}

template <class T>
void getrs_cpu(ThreadPool& pool, Op op, Batch<const T> lu, std::span<const int> ipiv, Batch<T> b) {
  const int n = static_cast<int>(lu.rows), nrhs = static_cast<int>(b.cols);
  // ipiv is the caller's: a row outside 1 … n would send ?laswp outside the matrix. Checked for the
  // whole batch first, so that a bad entry leaves every B as it was.
  const std::size_t entries = static_cast<std::size_t>(lu.count) * n;
  for (std::size_t e = 0; e < entries; ++e)
    if (ipiv[e] < 1 || ipiv[e] > n)
      throw InvalidArgument("getrs: ipiv[" + std::to_string(e) + "] = " + std::to_string(ipiv[e]) +
                            " is not a row of an " + std::to_string(n) + "×" + std::to_string(n) +
                            " matrix (getrf's pivots are 1 … n)");
  pool.parallel_for(static_cast<std::size_t>(lu.count), [&](std::size_t index, unsigned) {
    const auto m = static_cast<std::int64_t>(index);
    solve_lu(op, lu.matrix(m), lu.ld, n, ipiv.data() + m * n, b.matrix(m), b.ld, nrhs);
  });
}

template <class T>
void gesv_cpu(ThreadPool& pool, Workspace&, Batch<T> a, std::span<int> ipiv, Batch<T> b, std::span<int> info) {
  const int n = static_cast<int>(a.rows), nrhs = static_cast<int>(b.cols);
  pool.parallel_for(static_cast<std::size_t>(a.count), [&](std::size_t index, unsigned) {
    const auto m = static_cast<std::int64_t>(index);
    int* pivots = ipiv.data() + m * n;
    const int status = factor_lu(a.matrix(m), a.ld, n, pivots);
    info[index] = status;
    if (status == 0 && nrhs > 0) solve_lu(Op::none, a.matrix(m), a.ld, n, pivots, b.matrix(m), b.ld, nrhs);
  });
}

// ---- Cholesky -----------------------------------------------------------------------------------

template <class T>
void potrf_cpu(ThreadPool& pool, Uplo uplo, Batch<T> a, std::span<int> info) {
  const int n = static_cast<int>(a.rows);
  pool.parallel_for(static_cast<std::size_t>(a.count), [&](std::size_t index, unsigned) {
    info[index] = factor_cholesky(uplo, a.matrix(static_cast<std::int64_t>(index)), a.ld, n);
  });
}

template <class T>
void potrs_cpu(ThreadPool& pool, Uplo uplo, Batch<const T> factor, Batch<T> b) {
  const int n = static_cast<int>(factor.rows), nrhs = static_cast<int>(b.cols);
  pool.parallel_for(static_cast<std::size_t>(factor.count), [&](std::size_t index, unsigned) {
    const auto m = static_cast<std::int64_t>(index);
    solve_cholesky(uplo, factor.matrix(m), factor.ld, n, b.matrix(m), b.ld, nrhs);
  });
}

template <class T>
void posv_cpu(ThreadPool& pool, Uplo uplo, Batch<T> a, Batch<T> b, std::span<int> info) {
  const int n = static_cast<int>(a.rows), nrhs = static_cast<int>(b.cols);
  pool.parallel_for(static_cast<std::size_t>(a.count), [&](std::size_t index, unsigned) {
    const auto m = static_cast<std::int64_t>(index);
    const int status = factor_cholesky(uplo, a.matrix(m), a.ld, n);
    info[index] = status;
    if (status == 0 && nrhs > 0) solve_cholesky(uplo, a.matrix(m), a.ld, n, b.matrix(m), b.ld, nrhs);
  });
}

// ---- least squares ------------------------------------------------------------------------------

template <class T>
std::size_t gels_cpu_workspace(unsigned workers, std::int64_t m, std::int64_t n, std::int64_t nrhs) {
  return gels_slice<T>(static_cast<int>(m), static_cast<int>(n), static_cast<int>(nrhs)).per_worker * workers;
}

// Not LAPACK's ?gels: that one overwrites B before it finds a zero on R's diagonal, and the API
// leaves B untouched for a rank-deficient A. So: ?geqrf, the exact-zero test, then Qᴴ·B by ?unmqr
// and R·X = (Qᴴ·B)(0:n) by ?trtrs.
template <class T>
void gels_cpu(ThreadPool& pool, Workspace& workspace, Batch<T> a, Batch<T> b, std::span<int> info) {
  const int m = static_cast<int>(a.rows), n = static_cast<int>(a.cols), nrhs = static_cast<int>(b.cols);
  const int lda = static_cast<int>(a.ld);
  const GelsSlice slice = gels_slice<T>(m, n, nrhs);
  const int lwork = slice.lwork;
  auto* scratch = static_cast<std::byte*>(workspace.acquire(slice.per_worker * pool.size()));

  pool.parallel_for(static_cast<std::size_t>(a.count), [&](std::size_t index, unsigned worker) {
    const auto batch_index = static_cast<std::int64_t>(index);
    T* matrix = a.matrix(batch_index);
    if (!matrix_is_finite(matrix, a.ld, m, n)) {
      for (int j = 0; j < n; ++j) std::fill_n(matrix + j * a.ld, m, quiet_nan<T>());
      info[index] = status::non_finite_input;
      return;
    }
    std::byte* base = scratch + slice.per_worker * worker;
    auto* work = reinterpret_cast<T*>(base);
    auto* tau = reinterpret_cast<T*>(base + slice.work_bytes);
    int lapack_info = 0;
    blas::geqrf(m, n, matrix, lda, tau, work, lwork, &lapack_info);
    require_lapack_ok(lapack_info, "geqrf");
    for (int i = 0; i < n; ++i)
      if (matrix[i + i * a.ld] == T(0)) {
        info[index] = i + 1;
        return;
      }
    info[index] = 0;
    if (nrhs == 0) return;
    T* rhs = b.matrix(batch_index);
    const int ldb = static_cast<int>(b.ld);
    // ?unm2r stores 1 on each reflector's diagonal while applying it and puts R(i, i) back; A is
    // this call's own matrix, so unlike unmqr_cpu no copy is needed.
    blas::unmqr('L', 'C', m, nrhs, n, matrix, lda, tau, rhs, ldb, work, lwork, &lapack_info);
    require_lapack_ok(lapack_info, "unmqr");
    blas::trtrs('U', 'N', 'N', n, nrhs, matrix, lda, rhs, ldb, &lapack_info);
    require_lapack_ok(lapack_info, "trtrs");
  });
}

#define COVFLOW_SOLVE_CPU(T)                                                                                   \
  template std::size_t getrf_cpu_workspace<T>(unsigned, std::int64_t);                                        \
  template void getrf_cpu<T>(ThreadPool&, Workspace&, Batch<T>, std::span<int>, std::span<int>);              \
  template void getrs_cpu<T>(ThreadPool&, Op, Batch<const T>, std::span<const int>, Batch<T>);                \
  template void gesv_cpu<T>(ThreadPool&, Workspace&, Batch<T>, std::span<int>, Batch<T>, std::span<int>);     \
  template void potrf_cpu<T>(ThreadPool&, Uplo, Batch<T>, std::span<int>);                                    \
  template void potrs_cpu<T>(ThreadPool&, Uplo, Batch<const T>, Batch<T>);                                    \
  template void posv_cpu<T>(ThreadPool&, Uplo, Batch<T>, Batch<T>, std::span<int>);                           \
  template std::size_t gels_cpu_workspace<T>(unsigned, std::int64_t, std::int64_t, std::int64_t);             \
  template void gels_cpu<T>(ThreadPool&, Workspace&, Batch<T>, Batch<T>, std::span<int>);
COVFLOW_SOLVE_CPU(f32)
COVFLOW_SOLVE_CPU(f64)
COVFLOW_SOLVE_CPU(cf32)
COVFLOW_SOLVE_CPU(cf64)
#undef COVFLOW_SOLVE_CPU

}  // namespace covflow::linalg::detail

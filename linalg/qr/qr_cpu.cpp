// geqrf / ungqr / unmqr on the CPU: LAPACK ?geqrf, ?ungqr (?orgqr) and ?unmqr (?ormqr) per matrix
// across the thread pool, each worker with its own slice of the Exec's host workspace.
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <string>

#include "../common/blas.hpp"
#include "../common/cpu_helpers.hpp"
#include "qr_impl.hpp"

namespace covflow::linalg::detail {
namespace {

// LAPACK's optimal lwork from a workspace query's work[0] (at least 1).
template <class T>
int lwork_from(const T& query) {
  return std::max(1, static_cast<int>(std::real(query)));
}

template <class T>
int geqrf_lwork(int m, int n) {
  T query{};
  int info = 0;
  blas::geqrf(m, n, static_cast<T*>(nullptr), std::max(1, m), static_cast<T*>(nullptr), &query, -1, &info);
  return lwork_from(query);
}

template <class T>
int ungqr_lwork(int m, int n) {
  T query{};
  int info = 0;
  blas::ungqr(m, n, n, static_cast<T*>(nullptr), std::max(1, m), static_cast<const T*>(nullptr), &query, -1, &info);
  return lwork_from(query);
}

template <class T>
int unmqr_lwork(Side side, int m_c, int n_c, int k) {
  T query{};
  int info = 0;
  const int r = side == Side::left ? m_c : n_c;
  blas::unmqr(static_cast<char>(side), 'N', m_c, n_c, k, static_cast<const T*>(nullptr), std::max(1, r),
              static_cast<const T*>(nullptr), static_cast<T*>(nullptr), std::max(1, m_c), &query, -1, &info);
  return lwork_from(query);
}

// LAPACK's info < 0 names an argument of ours that qr.cpp should have refused.
void require_lapack_ok(int info, const char* routine) {
  if (info != 0)
    throw Error(std::string(routine) + ": LAPACK rejected argument " + std::to_string(-info) +
                " (an argument check is missing)");
}

}  // namespace

template <class T>
std::size_t geqrf_cpu_workspace(unsigned workers, std::int64_t m, std::int64_t n) {
  const int lwork = geqrf_lwork<T>(static_cast<int>(m), static_cast<int>(n));
  return align_up(sizeof(T) * std::size_t(lwork)) * workers;
}

template <class T>
void geqrf_cpu(ThreadPool& pool, Workspace& workspace, Batch<T> a, std::span<T> tau, std::span<int> info) {
  using R = real_t<T>;
  const int m = static_cast<int>(a.rows), n = static_cast<int>(a.cols), k = std::min(m, n);
  const int lwork = geqrf_lwork<T>(m, n);
  const std::size_t per_worker = align_up(sizeof(T) * std::size_t(lwork));
  auto* scratch = static_cast<std::byte*>(workspace.acquire(per_worker * pool.size()));

  pool.parallel_for(static_cast<std::size_t>(a.count), [&](std::size_t index, unsigned worker) {
    const auto b = static_cast<std::int64_t>(index);
    T* matrix = a.matrix(b);
    T* scalars = tau.data() + b * k;
    if (!matrix_is_finite(matrix, a.ld, m, n)) {
      const T nan = T(std::numeric_limits<R>::quiet_NaN());
      for (int j = 0; j < n; ++j) std::fill_n(matrix + j * a.ld, m, nan);
      std::fill_n(scalars, k, nan);
      info[index] = status::non_finite_input;
      return;
    }
    auto* work = reinterpret_cast<T*>(scratch + per_worker * worker);
    int lapack_info = 0;
    blas::geqrf(m, n, matrix, static_cast<int>(a.ld), scalars, work, lwork, &lapack_info);
    // ?geqrf has no failure of its own: info < 0 would be an argument error of ours.
    info[index] = lapack_info;
  });
}

template <class T>
std::size_t ungqr_cpu_workspace(unsigned workers, std::int64_t m, std::int64_t n) {
  const int lwork = ungqr_lwork<T>(static_cast<int>(m), static_cast<int>(n));
  return align_up(sizeof(T) * std::size_t(lwork)) * workers;
}

template <class T>
void ungqr_cpu(ThreadPool& pool, Workspace& workspace, Batch<T> a, std::span<const T> tau) {
  const int m = static_cast<int>(a.rows), n = static_cast<int>(a.cols);
  const int lwork = ungqr_lwork<T>(m, n);
  const std::size_t per_worker = align_up(sizeof(T) * std::size_t(lwork));
  auto* scratch = static_cast<std::byte*>(workspace.acquire(per_worker * pool.size()));

  pool.parallel_for(static_cast<std::size_t>(a.count), [&](std::size_t index, unsigned worker) {
    const auto b = static_cast<std::int64_t>(index);
    auto* work = reinterpret_cast<T*>(scratch + per_worker * worker);
    int lapack_info = 0;
    blas::ungqr(m, n, n, a.matrix(b), static_cast<int>(a.ld), tau.data() + b * n, work, lwork, &lapack_info);
    require_lapack_ok(lapack_info, "ungqr");
  });
}

template <class T>
std::size_t unmqr_cpu_workspace(unsigned workers, Side side, std::int64_t m_c, std::int64_t n_c, std::int64_t k) {
  const std::int64_t r = side == Side::left ? m_c : n_c;
  const int lwork = unmqr_lwork<T>(side, static_cast<int>(m_c), static_cast<int>(n_c), static_cast<int>(k));
  return (align_up(sizeof(T) * std::size_t(lwork)) + align_up(sizeof(T) * std::size_t(r * k))) * workers;
}

template <class T>
void unmqr_cpu(ThreadPool& pool, Workspace& workspace, Side side, Op op, Batch<const T> a, std::span<const T> tau,
               Batch<T> c) {
  const int m_c = static_cast<int>(c.rows), n_c = static_cast<int>(c.cols), k = static_cast<int>(a.cols);
  const int r = static_cast<int>(a.rows);
  const int lwork = unmqr_lwork<T>(side, m_c, n_c, k);
  const std::size_t work_bytes = align_up(sizeof(T) * std::size_t(lwork));
  const std::size_t per_worker = work_bytes + align_up(sizeof(T) * std::size_t(r) * k);
  auto* scratch = static_cast<std::byte*>(workspace.acquire(per_worker * pool.size()));

  pool.parallel_for(static_cast<std::size_t>(c.count), [&](std::size_t index, unsigned worker) {
    const auto b = static_cast<std::int64_t>(index);
    std::byte* base = scratch + per_worker * worker;
    auto* work = reinterpret_cast<T*>(base);
    // ?unm2r stores 1 on each reflector's diagonal while applying it (and puts the element back);
    // A is the caller's const data, possibly read by other threads, so LAPACK gets a copy.
    auto* reflectors = reinterpret_cast<T*>(base + work_bytes);
    const T* source = a.matrix(b);
    for (int j = 0; j < k; ++j) std::copy_n(source + j * a.ld, r, reflectors + std::size_t(j) * r);
    int lapack_info = 0;
    blas::unmqr(static_cast<char>(side), static_cast<char>(op), m_c, n_c, k, reflectors, r, tau.data() + b * k,
                c.matrix(b), static_cast<int>(c.ld), work, lwork, &lapack_info);
    require_lapack_ok(lapack_info, "unmqr");
  });
}

#define COVFLOW_QR_CPU(T)                                                                                       \
  template std::size_t geqrf_cpu_workspace<T>(unsigned, std::int64_t, std::int64_t);                           \
  template void geqrf_cpu<T>(ThreadPool&, Workspace&, Batch<T>, std::span<T>, std::span<int>);                 \
  template std::size_t ungqr_cpu_workspace<T>(unsigned, std::int64_t, std::int64_t);                           \
  template void ungqr_cpu<T>(ThreadPool&, Workspace&, Batch<T>, std::span<const T>);                           \
  template std::size_t unmqr_cpu_workspace<T>(unsigned, Side, std::int64_t, std::int64_t, std::int64_t);       \
  template void unmqr_cpu<T>(ThreadPool&, Workspace&, Side, Op, Batch<const T>, std::span<const T>, Batch<T>);
COVFLOW_QR_CPU(f32)
COVFLOW_QR_CPU(f64)
COVFLOW_QR_CPU(cf32)
COVFLOW_QR_CPU(cf64)
#undef COVFLOW_QR_CPU

}  // namespace covflow::linalg::detail

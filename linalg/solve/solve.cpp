// getrf / getrs / gesv / potrf / potrs / posv / gels: argument checks, workspace queries and
// backend dispatch.
#include <algorithm>
#include <string>

#include "../common/checks.hpp"
#include "solve_impl.hpp"

namespace covflow::linalg {
namespace {

using detail::shape;

template <class T>
void require_dims(const Batch<T>& x, const char* op, const char* what) {
  detail::require_dims(x, op, what, "rows", "cols");
}

template <class T>
void require_square(const Batch<T>& a, const char* op) {
  require_dims(a, op, "A");
  if (a.rows != a.cols)
    throw InvalidArgument(std::string(op) + ": A is " + shape(a.rows, a.cols) + ": it must be square");
}

void require_ints(std::size_t have, std::int64_t need, const char* op, const char* what, const char* formula) {
  if (have < static_cast<std::size_t>(need))
    throw InvalidArgument(std::string(op) + ": " + what + " holds " + std::to_string(have) + " entries, " +
                          std::to_string(need) + " needed (" + formula + ")");
}

// B must hold one right-hand-side block per matrix of A, with A's rows (n for the square solves,
// m for gels).
template <class T, class U>
void require_rhs(const Batch<T>& a, const Batch<U>& b, const char* op) {
  require_dims(b, op, "B");
  if (b.count != a.count)
    throw InvalidArgument(std::string(op) + ": A holds " + std::to_string(a.count) + " matrices and B " +
                          std::to_string(b.count));
  if (b.rows != a.rows)
    throw InvalidArgument(std::string(op) + ": B is " + shape(b.rows, b.cols) + " but A is " + shape(a.rows, a.cols) +
                          ": B needs " + std::to_string(a.rows) + " rows");
}

void require_uplo(Uplo uplo, const char* op) {
  if (uplo != Uplo::lower && uplo != Uplo::upper) throw InvalidArgument(std::string(op) + ": uplo must be lower or upper");
}

bool nothing(std::int64_t n, std::int64_t count) { return n <= 0 || count <= 0; }

}  // namespace

// ---- workspace queries --------------------------------------------------------------------------

template <class T>
std::size_t getrf_workspace(const Exec& exec, std::int64_t n, std::int64_t count) {
  if (nothing(n, count)) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::getrf_cuda_workspace<T>(n, count);
#endif
  return detail::getrf_cpu_workspace<T>(exec.pool().size(), n);
}

template <class T>
std::size_t getrs_workspace(const Exec& exec, std::int64_t n, std::int64_t nrhs, std::int64_t count) {
  if (nothing(n, count) || nrhs <= 0) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::getrs_cuda_workspace<T>(n, nrhs, count);
#else
  (void)exec;
#endif
  return 0;
}

template <class T>
std::size_t gesv_workspace(const Exec& exec, std::int64_t n, std::int64_t nrhs, std::int64_t count) {
  if (nothing(n, count)) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::gesv_cuda_workspace<T>(n, std::max<std::int64_t>(nrhs, 0), count);
#endif
  return detail::getrf_cpu_workspace<T>(exec.pool().size(), n);
}

template <class T>
std::size_t potrf_workspace(const Exec& exec, std::int64_t n, std::int64_t count) {
  if (nothing(n, count)) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::potrf_cuda_workspace<T>(n, count);
#else
  (void)exec;
#endif
  return 0;
}

template <class T>
std::size_t potrs_workspace(const Exec& exec, std::int64_t n, std::int64_t nrhs, std::int64_t count) {
  if (nothing(n, count) || nrhs <= 0) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::potrs_cuda_workspace<T>(n, nrhs, count);
#else
  (void)exec;
#endif
  return 0;
}

template <class T>
std::size_t posv_workspace(const Exec& exec, std::int64_t n, std::int64_t nrhs, std::int64_t count) {
  if (nothing(n, count)) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::posv_cuda_workspace<T>(n, std::max<std::int64_t>(nrhs, 0), count);
#else
  (void)exec;
#endif
  return 0;
}

template <class T>
std::size_t gels_workspace(const Exec& exec, std::int64_t m, std::int64_t n, std::int64_t nrhs, std::int64_t count) {
  if (nothing(n, count) || m <= 0) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::gels_cuda_workspace<T>(m, n, std::max<std::int64_t>(nrhs, 0), count);
#endif
  return detail::gels_cpu_workspace<T>(exec.pool().size(), m, n, std::max<std::int64_t>(nrhs, 0));
}

// ---- LU -----------------------------------------------------------------------------------------

template <class T>
void getrf(Exec& exec, Batch<T> a, std::span<int> ipiv, std::span<int> info) {
  constexpr const char* op = "getrf";
  require_square(a, op);
  if (a.count == 0 || a.rows == 0) return;
  require_ints(ipiv.size(), a.count * a.rows, op, "ipiv", "count × n");
  require_ints(info.size(), a.count, op, "info", "one per matrix");
  detail::require_accessible(exec, a, op, "A");
  detail::require_memory_space(exec, ipiv.data(), op, "ipiv");
  detail::require_memory_space(exec, info.data(), op, "info");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::getrf_cuda(exec.cuda_context(), a, ipiv, info);
#endif
  detail::getrf_cpu(exec.pool(), exec.workspace(), a, ipiv, info);
}

template <class T>
void getrs(Exec& exec, Op op_a, Batch<const T> lu, std::span<const int> ipiv, Batch<T> b) {
  constexpr const char* op = "getrs";
  if (op_a != Op::none && op_a != Op::trans && op_a != Op::conj_trans)
    throw InvalidArgument(std::string(op) + ": op must be none, trans or conj_trans");
  require_square(lu, op);
  require_rhs(lu, b, op);
  if (lu.count == 0 || lu.rows == 0 || b.cols == 0) return;
  require_ints(ipiv.size(), lu.count * lu.rows, op, "ipiv", "count × n");
  detail::require_accessible(exec, lu, op, "LU");
  detail::require_accessible(exec, b, op, "B");
  detail::require_memory_space(exec, ipiv.data(), op, "ipiv");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::getrs_cuda(exec.cuda_context(), op_a, lu, ipiv, b);
#endif
  detail::getrs_cpu(exec.pool(), op_a, lu, ipiv, b);
}

template <class T>
void gesv(Exec& exec, Batch<T> a, std::span<int> ipiv, Batch<T> b, std::span<int> info) {
  constexpr const char* op = "gesv";
  require_square(a, op);
  require_rhs(a, b, op);
  if (a.count == 0 || a.rows == 0) return;
  require_ints(ipiv.size(), a.count * a.rows, op, "ipiv", "count × n");
  require_ints(info.size(), a.count, op, "info", "one per matrix");
  detail::require_accessible(exec, a, op, "A");
  detail::require_accessible(exec, b, op, "B");
  detail::require_memory_space(exec, ipiv.data(), op, "ipiv");
  detail::require_memory_space(exec, info.data(), op, "info");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::gesv_cuda(exec.cuda_context(), a, ipiv, b, info);
#endif
  detail::gesv_cpu(exec.pool(), exec.workspace(), a, ipiv, b, info);
}

// ---- Cholesky -----------------------------------------------------------------------------------

template <class T>
void potrf(Exec& exec, Uplo uplo, Batch<T> a, std::span<int> info) {
  constexpr const char* op = "potrf";
  require_uplo(uplo, op);
  require_square(a, op);
  if (a.count == 0 || a.rows == 0) return;
  require_ints(info.size(), a.count, op, "info", "one per matrix");
  detail::require_accessible(exec, a, op, "A");
  detail::require_memory_space(exec, info.data(), op, "info");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::potrf_cuda(exec.cuda_context(), uplo, a, info);
#endif
  detail::potrf_cpu(exec.pool(), uplo, a, info);
}

template <class T>
void potrs(Exec& exec, Uplo uplo, Batch<const T> factor, Batch<T> b) {
  constexpr const char* op = "potrs";
  require_uplo(uplo, op);
  require_square(factor, op);
  require_rhs(factor, b, op);
  if (factor.count == 0 || factor.rows == 0 || b.cols == 0) return;
  detail::require_accessible(exec, factor, op, "factor");
  detail::require_accessible(exec, b, op, "B");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::potrs_cuda(exec.cuda_context(), uplo, factor, b);
#endif
  detail::potrs_cpu(exec.pool(), uplo, factor, b);
}

template <class T>
void posv(Exec& exec, Uplo uplo, Batch<T> a, Batch<T> b, std::span<int> info) {
  constexpr const char* op = "posv";
  require_uplo(uplo, op);
  require_square(a, op);
  require_rhs(a, b, op);
  if (a.count == 0 || a.rows == 0) return;
  require_ints(info.size(), a.count, op, "info", "one per matrix");
  detail::require_accessible(exec, a, op, "A");
  detail::require_accessible(exec, b, op, "B");
  detail::require_memory_space(exec, info.data(), op, "info");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::posv_cuda(exec.cuda_context(), uplo, a, b, info);
#endif
  detail::posv_cpu(exec.pool(), uplo, a, b, info);
}

// ---- least squares ------------------------------------------------------------------------------

template <class T>
void gels(Exec& exec, Batch<T> a, Batch<T> b, std::span<int> info) {
  constexpr const char* op = "gels";
  require_dims(a, op, "A");
  require_rhs(a, b, op);
  if (a.count == 0 || a.cols == 0) return;
  if (a.rows < a.cols)
    throw InvalidArgument(std::string(op) + ": A is " + shape(a.rows, a.cols) +
                          ": least squares needs m ≥ n (an underdetermined system has no unique solution here)");
  require_ints(info.size(), a.count, op, "info", "one per matrix");
  detail::require_accessible(exec, a, op, "A");
  detail::require_accessible(exec, b, op, "B");
  detail::require_memory_space(exec, info.data(), op, "info");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::gels_cuda(exec.cuda_context(), a, b, info);
#endif
  detail::gels_cpu(exec.pool(), exec.workspace(), a, b, info);
}

#define COVFLOW_SOLVE(T)                                                                                        \
  template std::size_t getrf_workspace<T>(const Exec&, std::int64_t, std::int64_t);                           \
  template std::size_t getrs_workspace<T>(const Exec&, std::int64_t, std::int64_t, std::int64_t);             \
  template std::size_t gesv_workspace<T>(const Exec&, std::int64_t, std::int64_t, std::int64_t);              \
  template std::size_t potrf_workspace<T>(const Exec&, std::int64_t, std::int64_t);                           \
  template std::size_t potrs_workspace<T>(const Exec&, std::int64_t, std::int64_t, std::int64_t);             \
  template std::size_t posv_workspace<T>(const Exec&, std::int64_t, std::int64_t, std::int64_t);              \
  template std::size_t gels_workspace<T>(const Exec&, std::int64_t, std::int64_t, std::int64_t, std::int64_t); \
  template void getrf<T>(Exec&, Batch<T>, std::span<int>, std::span<int>);                                    \
  template void getrs<T>(Exec&, Op, Batch<const T>, std::span<const int>, Batch<T>);                          \
  template void gesv<T>(Exec&, Batch<T>, std::span<int>, Batch<T>, std::span<int>);                           \
  template void potrf<T>(Exec&, Uplo, Batch<T>, std::span<int>);                                              \
  template void potrs<T>(Exec&, Uplo, Batch<const T>, Batch<T>);                                              \
  template void posv<T>(Exec&, Uplo, Batch<T>, Batch<T>, std::span<int>);                                     \
  template void gels<T>(Exec&, Batch<T>, Batch<T>, std::span<int>);
COVFLOW_SOLVE(f32)
COVFLOW_SOLVE(f64)
COVFLOW_SOLVE(cf32)
COVFLOW_SOLVE(cf64)
#undef COVFLOW_SOLVE

}  // namespace covflow::linalg

// geqrf / ungqr / unmqr: argument checks, workspace queries and backend dispatch.
#include <algorithm>
#include <string>

#include "../common/checks.hpp"
#include "qr_impl.hpp"

namespace covflow::linalg {
namespace {

using detail::shape;

template <class T>
void require_dims(const Batch<T>& x, const char* op, const char* what) {
  detail::require_dims(x, op, what, "m", "n");
}

void require_tau(std::size_t have, std::int64_t count, std::int64_t k, const char* op) {
  const auto need = static_cast<std::size_t>(count * k);
  if (have < need)
    throw InvalidArgument(std::string(op) + ": tau holds " + std::to_string(have) + " scalars, " +
                          std::to_string(need) + " needed (count × " + std::to_string(k) + ")");
}

}  // namespace

template <class T>
std::size_t geqrf_workspace(const Exec& exec, std::int64_t m, std::int64_t n, std::int64_t count) {
  if (m <= 0 || n <= 0 || count <= 0) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::geqrf_cuda_workspace<T>(m, n, count);
#endif
  return detail::geqrf_cpu_workspace<T>(exec.pool().size(), m, n);
}

template <class T>
std::size_t ungqr_workspace(const Exec& exec, std::int64_t m, std::int64_t n, std::int64_t count) {
  if (m <= 0 || n <= 0 || count <= 0) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::ungqr_cuda_workspace<T>(m, n, count);
#endif
  return detail::ungqr_cpu_workspace<T>(exec.pool().size(), m, n);
}

template <class T>
std::size_t unmqr_workspace(const Exec& exec, Side side, std::int64_t m_c, std::int64_t n_c, std::int64_t k,
                            std::int64_t count) {
  if (m_c <= 0 || n_c <= 0 || k <= 0 || count <= 0) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::unmqr_cuda_workspace<T>(side, m_c, n_c, k, count);
#endif
  return detail::unmqr_cpu_workspace<T>(exec.pool().size(), side, m_c, n_c, k);
}

template <class T>
void geqrf(Exec& exec, Batch<T> a, std::span<T> tau, std::span<int> info) {
  constexpr const char* op = "geqrf";
  require_dims(a, op, "A");
  if (a.count == 0) return;
  if (a.rows == 0 || a.cols == 0)
    throw InvalidArgument(std::string(op) + ": A is " + shape(a.rows, a.cols) + ": both dimensions must be ≥ 1");
  require_tau(tau.size(), a.count, std::min(a.rows, a.cols), op);
  if (info.size() < static_cast<std::size_t>(a.count))
    throw InvalidArgument(std::string(op) + ": info holds " + std::to_string(info.size()) + " entries, " +
                          std::to_string(a.count) + " needed (one per matrix)");
  detail::require_accessible(exec, a, op, "A");
  detail::require_memory_space(exec, tau.data(), op, "tau");
  detail::require_memory_space(exec, info.data(), op, "info");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) {
    detail::geqrf_cuda(exec.cuda_context(), a, tau, info);
    return;
  }
#endif
  detail::geqrf_cpu(exec.pool(), exec.workspace(), a, tau, info);
}

template <class T>
void ungqr(Exec& exec, Batch<T> a, std::span<const T> tau) {
  constexpr const char* op = "ungqr";
  require_dims(a, op, "A");
  if (a.count == 0) return;
  if (a.rows == 0 || a.cols == 0)
    throw InvalidArgument(std::string(op) + ": A is " + shape(a.rows, a.cols) + ": both dimensions must be ≥ 1");
  if (a.rows < a.cols)
    throw InvalidArgument(std::string(op) + ": A is " + shape(a.rows, a.cols) +
                          ": the thin Q needs m ≥ n (for a geqrf of a wide matrix pass its leading m×m block)");
  require_tau(tau.size(), a.count, a.cols, op);
  detail::require_accessible(exec, a, op, "A");
  detail::require_memory_space(exec, tau.data(), op, "tau");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) {
    detail::ungqr_cuda(exec.cuda_context(), a, tau);
    return;
  }
#endif
  detail::ungqr_cpu(exec.pool(), exec.workspace(), a, tau);
}

template <class T>
void unmqr(Exec& exec, Side side, Op op_q, Batch<const T> a, std::span<const T> tau, Batch<T> c) {
  constexpr const char* op = "unmqr";
  if (side != Side::left && side != Side::right) throw InvalidArgument(std::string(op) + ": side must be left or right");
  if (op_q != Op::none && op_q != Op::conj_trans)
    throw InvalidArgument(std::string(op) + ": op must be none or conj_trans");
  require_dims(a, op, "A");
  require_dims(c, op, "C");
  if (a.count != c.count)
    throw InvalidArgument(std::string(op) + ": A holds " + std::to_string(a.count) + " matrices and C " +
                          std::to_string(c.count));
  if (c.count == 0 || c.rows == 0 || c.cols == 0 || a.cols == 0) return;
  const std::int64_t r = side == Side::left ? c.rows : c.cols;
  if (a.rows != r)
    throw InvalidArgument(std::string(op) + ": the reflectors have " + std::to_string(a.rows) + " rows; applied from the " +
                          (side == Side::left ? "left to C (" : "right to C (") + shape(c.rows, c.cols) + ") they need " +
                          std::to_string(r));
  if (a.cols > a.rows)
    throw InvalidArgument(std::string(op) + ": A (" + shape(a.rows, a.cols) + ") holds more reflectors than rows");
  require_tau(tau.size(), a.count, a.cols, op);
  detail::require_accessible(exec, a, op, "A");
  detail::require_accessible(exec, c, op, "C");
  detail::require_memory_space(exec, tau.data(), op, "tau");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) {
    detail::unmqr_cuda(exec.cuda_context(), side, op_q, a, tau, c);
    return;
  }
#endif
  detail::unmqr_cpu(exec.pool(), exec.workspace(), side, op_q, a, tau, c);
}

#define COVFLOW_QR(T)                                                                                         \
  template std::size_t geqrf_workspace<T>(const Exec&, std::int64_t, std::int64_t, std::int64_t);           \
  template std::size_t ungqr_workspace<T>(const Exec&, std::int64_t, std::int64_t, std::int64_t);           \
  template std::size_t unmqr_workspace<T>(const Exec&, Side, std::int64_t, std::int64_t, std::int64_t,      \
                                          std::int64_t);                                                    \
  template void geqrf<T>(Exec&, Batch<T>, std::span<T>, std::span<int>);                                    \
  template void ungqr<T>(Exec&, Batch<T>, std::span<const T>);                                              \
  template void unmqr<T>(Exec&, Side, Op, Batch<const T>, std::span<const T>, Batch<T>);
COVFLOW_QR(f32)
COVFLOW_QR(f64)
COVFLOW_QR(cf32)
COVFLOW_QR(cf64)
#undef COVFLOW_QR

}  // namespace covflow::linalg

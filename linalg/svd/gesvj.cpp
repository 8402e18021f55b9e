// gesvj: argument checks, workspace query and backend dispatch.
#include <algorithm>
#include <string>

#include "../common/checks.hpp"
#include "gesvj_impl.hpp"

namespace covflow::linalg {
namespace {

constexpr const char* op = "gesvj";

std::string shape(std::int64_t rows, std::int64_t cols) { return std::to_string(rows) + "×" + std::to_string(cols); }

template <class T>
void require_shape(const Batch<T>& x, std::int64_t rows, std::int64_t cols, std::int64_t count, const char* what) {
  validate(x, op, what);
  if (x.rows != rows || x.cols != cols || x.count != count)
    throw InvalidArgument(std::string(op) + ": " + what + " must be " + std::to_string(count) + " × " +
                          shape(rows, cols) + ", got " + std::to_string(x.count) + " × " + shape(x.rows, x.cols));
}

}  // namespace

template <class T>
std::size_t gesvj_workspace(const Exec& exec, std::int64_t m, std::int64_t n, std::int64_t count,
                            const SvdOptions& options) {
  if (m <= 0 || n <= 0 || count <= 0) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::gesvj_cuda_workspace<T>(m, n, count, options);
#endif
  return detail::gesvj_cpu_workspace<T>(exec.pool().size(), m, n, options);
}

template <class T>
void gesvj(Exec& exec, Batch<T> a, std::span<real_t<T>> s, Batch<T> u, Batch<T> v, std::span<SvdInfo> info,
           const SvdOptions& options) {
  validate(a, op, "A");
  detail::require_int32(a.rows, op, "m");
  detail::require_int32(a.cols, op, "n");
  detail::require_int32(a.ld, op, "ld");
  if (options.max_sweeps < 0)
    throw InvalidArgument(std::string(op) + ": max_sweeps must be ≥ 0 (0: the default), got " +
                          std::to_string(options.max_sweeps));
  if (a.count == 0) return;
  if (a.rows == 0 || a.cols == 0)
    throw InvalidArgument(std::string(op) + ": A is " + shape(a.rows, a.cols) + ": both dimensions must be ≥ 1");
  const std::int64_t k = std::min(a.rows, a.cols);
  if (options.u) require_shape(u, a.rows, k, a.count, "U");
  else u = Batch<T>{};
  if (options.v) require_shape(v, a.cols, k, a.count, "V");
  else v = Batch<T>{};
  if (options.u) detail::require_int32(u.ld, op, "U's ld");
  if (options.v) detail::require_int32(v.ld, op, "V's ld");
  const auto need_s = static_cast<std::size_t>(a.count * k);
  if (s.size() < need_s)
    throw InvalidArgument(std::string(op) + ": s holds " + std::to_string(s.size()) + " values, " +
                          std::to_string(need_s) + " needed (count × min(m, n))");
  if (info.size() < static_cast<std::size_t>(a.count))
    throw InvalidArgument(std::string(op) + ": info holds " + std::to_string(info.size()) + " entries, " +
                          std::to_string(a.count) + " needed (one per matrix)");
  detail::require_accessible(exec, a, op, "A");
  detail::require_accessible(exec, u, op, "U");
  detail::require_accessible(exec, v, op, "V");
  detail::require_memory_space(exec, s.data(), op, "s");
  detail::require_memory_space(exec, info.data(), op, "info");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) {
    detail::gesvj_cuda(exec.cuda_context(), a, s, u, v, info, options);
    return;
  }
#endif
  detail::gesvj_cpu(exec.pool(), exec.workspace(), a, s, u, v, info, options);
}

#define COVFLOW_GESVJ(T)                                                                                  \
  template std::size_t gesvj_workspace<T>(const Exec&, std::int64_t, std::int64_t, std::int64_t,         \
                                          const SvdOptions&);                                             \
  template void gesvj<T>(Exec&, Batch<T>, std::span<real_t<T>>, Batch<T>, Batch<T>, std::span<SvdInfo>, \
                         const SvdOptions&);
COVFLOW_GESVJ(f32)
COVFLOW_GESVJ(f64)
COVFLOW_GESVJ(cf32)
COVFLOW_GESVJ(cf64)
#undef COVFLOW_GESVJ

}  // namespace covflow::linalg

// heev: argument checks, workspace query and backend dispatch.
#include "covflow/linalg/heev.hpp"

#include <string>

#include "../common/checks.hpp"
#include "heev_impl.hpp"

namespace covflow::linalg {

template <class T>
std::size_t heev_workspace(const Exec& exec, std::int64_t n, std::int64_t count, const HeevOptions& options) {
  if (n <= 0 || count <= 0) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::heev_cuda_workspace<T>(n, count, options);
#endif
  return detail::heev_cpu_workspace<T>(exec.pool().size(), n, options);
}

template <class T>
void heev(Exec& exec, Batch<T> a, std::span<real_t<T>> w, std::span<int> info, const HeevOptions& options) {
  constexpr const char* op = "heev";
  validate(a, op, "A");
  if (!a.is_square())
    throw InvalidArgument(std::string(op) + ": A must be square, got " + std::to_string(a.rows) + "×" +
                          std::to_string(a.cols));
  if (options.uplo != Uplo::lower && options.uplo != Uplo::upper)
    throw InvalidArgument(std::string(op) + ": uplo must be lower or upper");
  detail::require_int32(a.rows, op, "n");
  detail::require_int32(a.ld, op, "ld");
  if (a.count == 0 || a.rows == 0) return;
  const auto need_w = static_cast<std::size_t>(a.count * a.rows);
  if (w.size() < need_w)
    throw InvalidArgument(std::string(op) + ": w holds " + std::to_string(w.size()) + " values, " +
                          std::to_string(need_w) + " needed (count × n)");
  if (info.size() < static_cast<std::size_t>(a.count))
    throw InvalidArgument(std::string(op) + ": info holds " + std::to_string(info.size()) + " entries, " +
                          std::to_string(a.count) + " needed (one per matrix)");
  detail::require_accessible(exec, a, op, "A");
  detail::require_memory_space(exec, w.data(), op, "w");
  detail::require_memory_space(exec, info.data(), op, "info");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) {
    detail::heev_cuda(exec.cuda_context(), a, w, info, options);
    return;
  }
#endif
  detail::heev_cpu(exec.pool(), exec.workspace(), a, w, info, options);
}

#define COVFLOW_HEEV(T)                                                                                 \
  template std::size_t heev_workspace<T>(const Exec&, std::int64_t, std::int64_t, const HeevOptions&); \
  template void heev<T>(Exec&, Batch<T>, std::span<real_t<T>>, std::span<int>, const HeevOptions&);
COVFLOW_HEEV(f32)
COVFLOW_HEEV(f64)
COVFLOW_HEEV(cf32)
COVFLOW_HEEV(cf64)
#undef COVFLOW_HEEV

}  // namespace covflow::linalg

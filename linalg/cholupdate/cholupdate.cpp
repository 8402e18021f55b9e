// cholupdate: argument checks, workspace query and backend dispatch.
#include "covflow/linalg/cholupdate.hpp"

#include <string>

#include "../common/checks.hpp"
#include "cholupdate_impl.hpp"

namespace covflow::linalg {

template <class T>
std::size_t cholupdate_workspace(const Exec& exec, std::int64_t n, std::int64_t k, std::int64_t count) {
  if (n <= 0 || k <= 0 || count <= 0) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::cholupdate_cuda_workspace<T>(n, k, count);
#endif
  return detail::cholupdate_cpu_workspace<T>(exec.pool().size(), n, k, count);
}

template <class T>
void cholupdate(Exec& exec, Batch<T> l, Batch<const T> v, Sign sign, std::span<int> info) {
  constexpr const char* op = "cholupdate";
  validate(l, op, "L");
  validate(v, op, "V");
  if (!l.is_square())
    throw InvalidArgument(std::string(op) + ": L must be square, got " + std::to_string(l.rows) + "×" +
                          std::to_string(l.cols));
  if (sign != Sign::update && sign != Sign::downdate)
    throw InvalidArgument(std::string(op) + ": sign must be update (+1) or downdate (−1)");
  if (v.count != l.count)
    throw InvalidArgument(std::string(op) + ": V holds " + std::to_string(v.count) + " matrices, L " +
                          std::to_string(l.count));
  if (v.rows != l.rows)
    throw InvalidArgument(std::string(op) + ": V has " + std::to_string(v.rows) + " rows, L is " +
                          std::to_string(l.rows) + "×" + std::to_string(l.rows) + " (V must be n×k)");
  detail::require_int32(l.rows, op, "n");
  detail::require_int32(v.cols, op, "k");
  detail::require_int32(l.ld, op, "ld of L");
  detail::require_int32(v.ld, op, "ld of V");
  if (l.count == 0) return;
  if (info.size() < static_cast<std::size_t>(l.count))
    throw InvalidArgument(std::string(op) + ": info holds " + std::to_string(info.size()) + " entries, " +
                          std::to_string(l.count) + " needed (one per matrix)");
  detail::require_memory_space(exec, info.data(), op, "info");
  detail::require_accessible(exec, l, op, "L");
  detail::require_accessible(exec, v, op, "V");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) {
    if (v.cols > kCudaMaxRank)
      throw InvalidArgument(std::string(op) + ": the CUDA path takes k ≤ " + std::to_string(kCudaMaxRank) +
                            " columns of V per call, got " + std::to_string(v.cols) +
                            " (split V into several calls)");
    detail::cholupdate_cuda(exec.cuda_context(), l, v, sign, info);
    return;
  }
#endif
  detail::cholupdate_cpu(exec.pool(), exec.workspace(), l, v, sign, info);
}

#define COVFLOW_CHOLUPDATE(T)                                                                        \
  template std::size_t cholupdate_workspace<T>(const Exec&, std::int64_t, std::int64_t, std::int64_t); \
  template void cholupdate<T>(Exec&, Batch<T>, Batch<const T>, Sign, std::span<int>);
COVFLOW_CHOLUPDATE(f32)
COVFLOW_CHOLUPDATE(f64)
COVFLOW_CHOLUPDATE(cf32)
COVFLOW_CHOLUPDATE(cf64)
#undef COVFLOW_CHOLUPDATE

}  // namespace covflow::linalg

// sample_covariance: argument checks and backend dispatch.
#include "covflow/linalg/covariance.hpp"

#include <cmath>
#include <string>

#include "../common/checks.hpp"
#include "covariance_impl.hpp"

namespace covflow::linalg {

template <class T>
void sample_covariance(Exec& exec, Batch<const T> x, Batch<T> r, const CovarianceOptions& options) {
  static_assert(is_complex_v<T>, "sample_covariance takes complex snapshots (cf32 or cf64)");
  constexpr const char* op = "sample_covariance";
  validate(x, op, "snapshots");
  validate(r, op, "covariance");
  if (x.count != r.count)
    throw InvalidArgument(std::string(op) + ": " + std::to_string(x.count) + " snapshot matrices but " +
                          std::to_string(r.count) + " covariance matrices");
  if (r.rows != x.rows || r.cols != x.rows)
    throw InvalidArgument(std::string(op) + ": covariance must be " + std::to_string(x.rows) + "×" +
                          std::to_string(x.rows) + " for " + std::to_string(x.rows) +
                          " channels, got " + std::to_string(r.rows) + "×" + std::to_string(r.cols));
  if (x.cols < 1 && x.rows > 0 && x.count > 0)
    throw InvalidArgument(std::string(op) + ": at least one snapshot is needed (K = 0)");
  if (!std::isfinite(options.diagonal_loading))
    throw InvalidArgument(std::string(op) + ": diagonal loading must be finite");
  for (auto [value, what] : {std::pair{x.rows, "channels"}, {x.cols, "snapshots"}, {x.ld, "snapshot ld"},
                             {r.ld, "covariance ld"}})
    detail::require_int32(value, op, what);
  if (r.empty()) return;
  detail::require_accessible(exec, x, op, "snapshots");
  detail::require_accessible(exec, r, op, "covariance");

#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) {
    detail::sample_covariance_cuda(exec.cuda_context(), x, r, options.diagonal_loading);
    return;
  }
#endif
  detail::sample_covariance_cpu(exec.pool(), x, r, options.diagonal_loading);
}

template void sample_covariance<cf32>(Exec&, Batch<const cf32>, Batch<cf32>, const CovarianceOptions&);
template void sample_covariance<cf64>(Exec&, Batch<const cf64>, Batch<cf64>, const CovarianceOptions&);

}  // namespace covflow::linalg

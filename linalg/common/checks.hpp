// Internal: argument checks shared by the host APIs of the operations.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "covflow/linalg/batch.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::linalg::detail {

// Throws InvalidArgument unless `pointer` lives where `exec` runs (host for CPU, device or
// managed for CUDA).
void require_memory_space(Exec& exec, const void* pointer, std::string_view op, std::string_view what);

template <class T>
void require_accessible(Exec& exec, const Batch<T>& batch, std::string_view op, std::string_view what) {
  if (!batch.empty()) require_memory_space(exec, batch.data, op, what);
}

// BLAS/LAPACK and cuBLAS take 32-bit dimensions.
inline void require_int32(std::int64_t value, std::string_view op, std::string_view what) {
  if (value > std::numeric_limits<int>::max())
    throw InvalidArgument(std::string(op) + ": " + std::string(what) + " = " +
                          std::to_string(value) + " exceeds the 32-bit limit of BLAS/LAPACK");
}

// "rows×cols", for messages.
inline std::string shape(std::int64_t rows, std::int64_t cols) {
  return std::to_string(rows) + "×" + std::to_string(cols);
}

// validate() plus the 32-bit limits of BLAS/LAPACK on the dimensions (named rows_name and
// cols_name in the message) and the leading dimension.
template <class T>
void require_dims(const Batch<T>& x, std::string_view op, std::string_view what, std::string_view rows_name,
                  std::string_view cols_name) {
  validate(x, op, what);
  require_int32(x.rows, op, rows_name);
  require_int32(x.cols, op, cols_name);
  require_int32(x.ld, op, "ld");
}

}  // namespace covflow::linalg::detail

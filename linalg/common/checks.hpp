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

}  // namespace covflow::linalg::detail

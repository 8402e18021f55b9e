// Internal: small helpers shared by the CPU backends (LAPACK across the thread pool).
#pragma once

#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>

#include "covflow/linalg/types.hpp"

namespace covflow::linalg::detail {

// Worker slices of the host workspace start on 256-byte boundaries.
constexpr std::size_t align_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

template <class T>
bool is_finite(const T& v) {
  if constexpr (is_complex_v<T>) return std::isfinite(v.real()) && std::isfinite(v.imag());
  else return std::isfinite(v);
}

// Whether every element of the m×n column-major matrix a (leading dimension ld) is finite.
template <class T>
bool matrix_is_finite(const T* a, std::int64_t ld, int m, int n) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i)
      if (!is_finite(a[i + j * ld])) return false;
  return true;
}

// Σ|a|² over the rows × cols column-major matrix a (leading dimension ld), in double.
template <class T>
double norm2(const T* a, std::int64_t ld, std::int64_t rows, std::int64_t cols) {
  double sum = 0;
  for (std::int64_t j = 0; j < cols; ++j)
    for (std::int64_t i = 0; i < rows; ++i) sum += std::norm(std::complex<double>(a[i + j * ld]));
  return sum;
}

}  // namespace covflow::linalg::detail

// Batch<T>: a strided, column-major view of `count` matrices (LAPACK convention).
// Matrix b starts at data + b * stride; element (i, j) of it is at + i + j * ld.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "covflow/linalg/error.hpp"
#include "covflow/linalg/types.hpp"

namespace covflow::linalg {

template <class T>
struct Batch {
  T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;      // leading dimension, >= rows
  std::int64_t stride = 0;  // elements between consecutive matrices, >= ld * cols when count > 1
  std::int64_t count = 0;

  // The densest layout: ld = rows, stride = rows * cols.
  static Batch packed(T* data, std::int64_t rows, std::int64_t cols, std::int64_t count) {
    return Batch{data, rows, cols, rows, rows * cols, count};
  }

  // A Batch<T> converts to a Batch<const T>.
  template <class U = T>
    requires(!std::is_const_v<U>)
  operator Batch<const U>() const {
    return Batch<const U>{data, rows, cols, ld, stride, count};
  }

  T* matrix(std::int64_t b) const { return data + b * stride; }
  T& at(std::int64_t b, std::int64_t i, std::int64_t j) const { return data[b * stride + i + j * ld]; }

  bool empty() const { return count == 0 || rows == 0 || cols == 0; }
  // Elements from data to one past the last element of the last matrix.
  std::int64_t span_elements() const {
    return empty() ? 0 : (count - 1) * stride + (cols - 1) * ld + rows;
  }
  bool is_square() const { return rows == cols; }
};

// Throws InvalidArgument naming `op` and `what` unless the view is well formed.
template <class T>
void validate(const Batch<T>& batch, std::string_view op, std::string_view what) {
  auto fail = [&](const std::string& why) {
    throw InvalidArgument(std::string(op) + ": " + std::string(what) + ": " + why);
  };
  if (batch.rows < 0 || batch.cols < 0 || batch.count < 0)
    fail("negative dimension (rows " + std::to_string(batch.rows) + ", cols " +
         std::to_string(batch.cols) + ", count " + std::to_string(batch.count) + ")");
  if (batch.empty()) return;
  if (batch.data == nullptr) fail("null data pointer for a non-empty batch");
  if (batch.ld < batch.rows || batch.ld < 1)
    fail("leading dimension " + std::to_string(batch.ld) + " < rows " + std::to_string(batch.rows));
  if (batch.count > 1 && batch.stride < batch.ld * batch.cols)
    fail("stride " + std::to_string(batch.stride) + " < ld * cols = " +
         std::to_string(batch.ld * batch.cols) + ": matrices would overlap");
}

}  // namespace covflow::linalg

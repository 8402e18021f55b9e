// Element types, triangle selectors and the per-matrix status codes shared by every operation.
#pragma once

#include <complex>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace covflow::linalg {

using f32 = float;
using f64 = double;
using cf32 = std::complex<float>;   // layout-compatible with cuComplex
using cf64 = std::complex<double>;  // layout-compatible with cuDoubleComplex

template <class T> struct real_of { using type = T; };
template <class T> struct real_of<std::complex<T>> { using type = T; };
template <class T> using real_t = typename real_of<std::remove_const_t<T>>::type;

template <class T> inline constexpr bool is_complex_v = false;
template <class T> inline constexpr bool is_complex_v<std::complex<T>> = true;

template <class T>
inline constexpr bool is_element_v = std::is_same_v<T, f32> || std::is_same_v<T, f64> ||
                                     std::is_same_v<T, cf32> || std::is_same_v<T, cf64>;

enum class ElementType : std::uint8_t { f32 = 1, f64 = 2, cf32 = 3, cf64 = 4 };

template <class T> constexpr ElementType element_type_of() {
  using U = std::remove_const_t<T>;
  static_assert(is_element_v<U>, "covflow element types are float, double and their complexes");
  if constexpr (std::is_same_v<U, f32>) return ElementType::f32;
  else if constexpr (std::is_same_v<U, f64>) return ElementType::f64;
  else if constexpr (std::is_same_v<U, cf32>) return ElementType::cf32;
  else return ElementType::cf64;
}

constexpr std::string_view name(ElementType type) {
  switch (type) {
    case ElementType::f32: return "f32";
    case ElementType::f64: return "f64";
    case ElementType::cf32: return "cf32";
    case ElementType::cf64: return "cf64";
  }
  return "unknown";
}

constexpr std::size_t size_of(ElementType type) {
  switch (type) {
    case ElementType::f32: return 4;
    case ElementType::f64: return 8;
    case ElementType::cf32: return 8;
    case ElementType::cf64: return 16;
  }
  return 0;
}

// Which triangle of a Hermitian/symmetric matrix an operation reads or writes.
enum class Uplo : char { lower = 'L', upper = 'U' };

// Which side of another matrix a factor multiplies, and how it is applied: as is, transposed, or
// conjugate-transposed (LAPACK's 'N', 'T', 'C'; for real T, trans and conj_trans agree).
enum class Side : char { left = 'L', right = 'R' };
enum class Op : char { none = 'N', trans = 'T', conj_trans = 'C' };

// Per-matrix status written by batched operations (LAPACK's `info` convention extended):
// 0 success; > 0 an operation-specific index (failing column, unconverged count);
// negative values are the codes below.
namespace status {
inline constexpr int ok = 0;
inline constexpr int non_finite_input = -1001;  // the matrix held a NaN or an Inf
inline constexpr int no_convergence = -1002;    // an iteration hit its limit
}  // namespace status

}  // namespace covflow::linalg

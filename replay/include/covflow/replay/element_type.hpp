// The element types a frame payload can hold. The numeric values are the on-disk codes of the
// frame file format and mirror covflow::linalg::ElementType (replay does not depend on linalg).
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace covflow::replay {

enum class ElementType : std::uint8_t {
  f32 = 1,   // IEEE-754 binary32
  f64 = 2,   // IEEE-754 binary64
  cf32 = 3,  // two binary32: real, imaginary
  cf64 = 4,  // two binary64: real, imaginary
};

std::string_view name(ElementType type);
std::optional<ElementType> parse_element_type(std::string_view text);
// Bytes per element; 0 for a value that is not one of the enumerators.
std::size_t size_of(ElementType type);
bool is_known(ElementType type);

template <class T> constexpr ElementType element_type_of() {
  if constexpr (std::is_same_v<T, float>) return ElementType::f32;
  else if constexpr (std::is_same_v<T, double>) return ElementType::f64;
  else if constexpr (std::is_same_v<T, std::complex<float>>) return ElementType::cf32;
  else {
    static_assert(std::is_same_v<T, std::complex<double>>, "frame elements are float, double or their complexes");
    return ElementType::cf64;
  }
}

}  // namespace covflow::replay

#include "covflow/replay/element_type.hpp"

namespace covflow::replay {

std::string_view name(ElementType type) {
  switch (type) {
    case ElementType::f32: return "f32";
    case ElementType::f64: return "f64";
    case ElementType::cf32: return "cf32";
    case ElementType::cf64: return "cf64";
  }
  return "unknown";
}

std::optional<ElementType> parse_element_type(std::string_view text) {
  for (ElementType t : {ElementType::f32, ElementType::f64, ElementType::cf32, ElementType::cf64})
    if (text == name(t)) return t;
  return std::nullopt;
}

std::size_t size_of(ElementType type) {
  switch (type) {
    case ElementType::f32: return 4;
    case ElementType::f64: return 8;
    case ElementType::cf32: return 8;
    case ElementType::cf64: return 16;
  }
  return 0;
}

bool is_known(ElementType type) { return size_of(type) != 0; }

}  // namespace covflow::replay

// Little-endian loads and stores, byte by byte, so the encoding does not depend on the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <array>
#include <span>

namespace covflow::replay::bytes {

template <class U>
void store(std::byte* out, U value) {
  for (std::size_t i = 0; i < sizeof(U); ++i) out[i] = std::byte((std::uint64_t(value) >> (8 * i)) & 0xFF);
}

template <class U>
U load(const std::byte* in) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) value |= std::uint64_t(std::to_integer<std::uint8_t>(in[i])) << (8 * i);
  return static_cast<U>(value);
}

template <std::size_t N>
bool equal(const std::byte* in, const std::array<std::uint8_t, N>& expected) {
  for (std::size_t i = 0; i < N; ++i)
    if (std::to_integer<std::uint8_t>(in[i]) != expected[i]) return false;
  return true;
}

}  // namespace covflow::replay::bytes

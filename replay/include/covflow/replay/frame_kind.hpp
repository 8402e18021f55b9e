// The payload kinds a frame carries.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace covflow::replay {

enum class PayloadKind : std::uint8_t {
  covariance = 1,  // batch of N×N Hermitian matrices, one per range/Doppler cell
  snapshots = 2,   // channels × snapshots × cells IQ samples
};

std::string_view name(PayloadKind kind);
std::optional<PayloadKind> parse_payload_kind(std::string_view text);

}  // namespace covflow::replay

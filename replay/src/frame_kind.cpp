#include "covflow/replay/frame_kind.hpp"

namespace covflow::replay {

std::string_view name(PayloadKind kind) {
  switch (kind) {
    case PayloadKind::covariance: return "covariance";
    case PayloadKind::snapshots: return "snapshots";
  }
  return "unknown";
}

std::optional<PayloadKind> parse_payload_kind(std::string_view text) {
  if (text == "covariance") return PayloadKind::covariance;
  if (text == "snapshots") return PayloadKind::snapshots;
  return std::nullopt;
}

}  // namespace covflow::replay

#include "covflow/replay/frame.hpp"

#include <limits>
#include <optional>

#include <fmt/format.h>

namespace covflow::replay {
namespace {

std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::nullopt;
  return a * b;
}

// rows·cols·count·element size, or nothing when the product does not fit 64 bits. Two 32-bit
// dimensions cannot overflow, but the element size and the count can take the product past 2^64,
// where it would wrap around to a size a small (or empty) payload matches.
std::optional<std::uint64_t> checked_payload_bytes(const FrameHeader& h) {
  std::optional<std::uint64_t> bytes = size_of(h.element_type);
  for (std::uint64_t factor : {std::uint64_t(h.rows), std::uint64_t(h.cols), std::uint64_t(h.count)})
    if (bytes) bytes = checked_mul(*bytes, factor);
  return bytes;
}

}  // namespace

std::string shape_problem(const FrameHeader& h) {
  if (h.kind != PayloadKind::covariance && h.kind != PayloadKind::snapshots)
    return fmt::format("unknown payload kind {}", int(h.kind));
  if (!is_known(h.element_type)) return fmt::format("unknown element type {}", int(h.element_type));
  if (h.rows == 0 || h.cols == 0 || h.count == 0)
    return fmt::format("impossible dimensions {}×{}×{} (each must be at least 1)", h.rows, h.cols, h.count);
  if (h.kind == PayloadKind::covariance && h.rows != h.cols)
    return fmt::format("impossible dimensions: covariance matrices must be square, not {}×{}", h.rows, h.cols);
  // Past this check payload_bytes() is exact: callers compare it with a stored length.
  if (const auto bytes = checked_payload_bytes(h); !bytes || *bytes > max_payload_bytes)
    return fmt::format("impossible dimensions {}×{}×{} {}: the payload would exceed the {} byte limit", h.rows,
                       h.cols, h.count, name(h.element_type), max_payload_bytes);
  return {};
}

}  // namespace covflow::replay

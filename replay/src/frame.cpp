#include "covflow/replay/frame.hpp"

#include <fmt/format.h>

namespace covflow::replay {

std::string shape_problem(const FrameHeader& h) {
  if (h.kind != PayloadKind::covariance && h.kind != PayloadKind::snapshots)
    return fmt::format("unknown payload kind {}", int(h.kind));
  if (!is_known(h.element_type)) return fmt::format("unknown element type {}", int(h.element_type));
  if (h.rows == 0 || h.cols == 0 || h.count == 0)
    return fmt::format("impossible dimensions {}×{}×{} (each must be at least 1)", h.rows, h.cols, h.count);
  if (h.kind == PayloadKind::covariance && h.rows != h.cols)
    return fmt::format("impossible dimensions: covariance matrices must be square, not {}×{}", h.rows, h.cols);
  // rows·cols < 2^64; the product with count and the element size is checked without overflow.
  const std::uint64_t per_matrix = std::uint64_t(h.rows) * h.cols * size_of(h.element_type);
  if (per_matrix > max_payload_bytes / h.count)
    return fmt::format("impossible dimensions {}×{}×{} {}: the payload would exceed the {} byte limit", h.rows,
                       h.cols, h.count, name(h.element_type), max_payload_bytes);
  return {};
}

}  // namespace covflow::replay

// One frame as it is recorded: sequence number, capture time, and a payload of `count` matrices
// of rows × cols elements, each column-major, matrices one after another (linalg's packed
// Batch layout).
//   covariance: rows = cols = N (array elements), count = cells; R_c(i, j) at c·N·N + i + j·N.
//   snapshots:  rows = channels, cols = snapshots, count = cells; x_c(m, k) at c·M·K + m + k·M.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "covflow/replay/element_type.hpp"
#include "covflow/replay/frame_kind.hpp"

namespace covflow::replay {

struct FrameHeader {
  std::uint64_t sequence = 0;
  std::int64_t capture_time_ns = 0;  // when the CPI was captured, on the recorder's clock
  PayloadKind kind = PayloadKind::snapshots;
  ElementType element_type = ElementType::cf64;
  std::uint32_t rows = 0;
  std::uint32_t cols = 0;
  std::uint32_t count = 0;

  std::uint64_t element_count() const { return std::uint64_t(rows) * cols * count; }
  // Payload size the dimensions imply; callers check dimensions first (see shape_problem).
  std::uint64_t payload_bytes() const { return element_count() * size_of(element_type); }

  bool operator==(const FrameHeader&) const = default;
};

struct Frame {
  FrameHeader header;
  std::vector<std::byte> payload;  // element_count() elements, little-endian

  bool operator==(const Frame&) const = default;
};

// Why a header's kind, element type and dimensions cannot describe a frame ("" when they can):
// an unknown kind or element type, a zero dimension, a non-square covariance, or a payload larger
// than max_payload_bytes.
std::string shape_problem(const FrameHeader& header);

// Largest payload covflow reads or writes in one record (4 GiB).
inline constexpr std::uint64_t max_payload_bytes = std::uint64_t(1) << 32;

// A frame whose payload is a copy of `values` (values.size() must equal rows·cols·count).
template <class T>
Frame make_frame(FrameHeader header, std::span<const T> values) {
  header.element_type = element_type_of<T>();
  if (values.size() != header.element_count())
    throw std::invalid_argument("make_frame: " + std::to_string(values.size()) + " values for " +
                                std::to_string(header.rows) + "×" + std::to_string(header.cols) + "×" +
                                std::to_string(header.count) + " elements");
  Frame frame{header, std::vector<std::byte>(values.size_bytes())};
  if (!values.empty()) std::memcpy(frame.payload.data(), values.data(), values.size_bytes());
  return frame;
}

// The payload as T; throws std::invalid_argument when T is not the frame's element type. The view
// aliases frame.payload (operator new storage, aligned for every element type).
template <class T>
std::span<const T> payload_as(const Frame& frame) {
  if (frame.header.element_type != element_type_of<T>())
    throw std::invalid_argument("payload_as: the frame holds " + std::string(name(frame.header.element_type)) +
                                ", not " + std::string(name(element_type_of<T>())));
  return {reinterpret_cast<const T*>(frame.payload.data()), frame.payload.size() / sizeof(T)};
}
template <class T>
std::span<T> payload_as(Frame& frame) {
  auto view = payload_as<T>(static_cast<const Frame&>(frame));
  return {const_cast<T*>(view.data()), view.size()};
}

}  // namespace covflow::replay

// Internal: checks of a frame against the shape a stage was prepared for, shared by the stages.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "covflow/pipeline/stage.hpp"
#include "covflow/replay/frame.hpp"

namespace covflow::stages::detail {

inline pipeline::FrameError shape_error(std::string_view stage, const pipeline::FrameSlot& frame, const std::string& why) {
  return pipeline::FrameError("shape", std::string(stage) + ": frame " + std::to_string(frame.sequence) + " (" +
                                           std::string(replay::name(frame.header.kind)) + " " +
                                           std::to_string(frame.header.rows) + "×" + std::to_string(frame.header.cols) +
                                           "×" + std::to_string(frame.header.count) + " " +
                                           std::string(replay::name(frame.header.element_type)) + "): " + why);
}

// The frame's element type and dimensions against the prepared shape; the dimension checks common
// to both kinds (N channels, 1 … cells cells).
inline void require_fits(std::string_view stage, const pipeline::FrameSlot& frame, const pipeline::FrameShape& shape) {
  const auto& h = frame.header;
  if (h.element_type != shape.element_type)
    throw shape_error(stage, frame, "the pipeline is prepared for " + std::string(replay::name(shape.element_type)));
  if (h.rows != shape.channels)
    throw shape_error(stage, frame, "expected " + std::to_string(shape.channels) + " channels (array elements)");
  if (h.count == 0 || h.count > shape.cells)
    throw shape_error(stage, frame, "expected 1 to " + std::to_string(shape.cells) + " cells");
  if (h.kind == replay::PayloadKind::covariance && h.cols != h.rows)
    throw shape_error(stage, frame, "a covariance frame holds square matrices");
  if (h.kind == replay::PayloadKind::snapshots && h.cols == 0)
    throw shape_error(stage, frame, "a snapshot frame needs at least one snapshot");
  if (h.kind != replay::PayloadKind::covariance && h.kind != replay::PayloadKind::snapshots)
    throw shape_error(stage, frame, "unknown payload kind");
  if (h.payload_bytes() > shape.max_payload_bytes())
    throw shape_error(stage, frame, "payload larger than the slot (" + std::to_string(shape.max_payload_bytes()) + " bytes)");
}

// A host array of the slot as T, checked to hold `elements` (a runner bug otherwise, not the frame's).
template <class T>
T* host_array(std::span<std::byte> bytes, std::size_t elements, std::string_view stage, std::string_view what) {
  if (bytes.size() < elements * sizeof(T))
    throw std::logic_error(std::string(stage) + ": the slot's host " + std::string(what) + " array holds " +
                           std::to_string(bytes.size()) + " bytes, " + std::to_string(elements * sizeof(T)) +
                           " needed");
  return reinterpret_cast<T*>(bytes.data());
}

template <class T>
T* device_array(void* pointer, std::string_view stage, std::string_view what) {
  if (pointer == nullptr)
    throw std::logic_error(std::string(stage) + ": the slot has no device " + std::string(what) + " array on a CUDA lane");
  return static_cast<T*>(pointer);
}

}  // namespace covflow::stages::detail

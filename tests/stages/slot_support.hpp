// A frame slot allocated as a runner would (host arrays on a CPU lane; device arrays, pinned
// payload and pinned host scratch on a CUDA lane), poisoned before every frame, and a runner in
// miniature that pushes one frame through a chain of stages and brings the working arrays back to
// the host for the checks. Shared by stages_test and stages_gpu_test.
#pragma once

#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "covflow/linalg/exec.hpp"
#include "covflow/pipeline/frame.hpp"
#include "covflow/pipeline/stage.hpp"
#include "covflow/replay/frame.hpp"

#if COVFLOW_HAS_CUDA
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::test {

class TestSlot {
 public:
  TestSlot(const pipeline::FrameShape& shape, linalg::Exec& exec, std::span<pipeline::Stage* const> stages)
      : shape_(shape), exec_(exec), cuda_(exec.is_cuda()) {
    const std::size_t e = shape.element_bytes();
    const std::size_t n = shape.channels, cells = shape.cells;
    pipeline::SlotNeeds needs;
    for (auto* stage : stages) {
      const auto own = stage->slot_needs(shape);
      needs.host_scratch_bytes = std::max(needs.host_scratch_bytes, own.host_scratch_bytes);
      needs.device_scratch_bytes = std::max(needs.device_scratch_bytes, own.device_scratch_bytes);
    }
    covariance_.resize(n * n * cells * e);
    eigenvalues_.resize(n * cells * e / 2);
    eigenvectors_.resize(n * n * cells * e);
    info_.resize(cells);
    if (!cuda_) {
      payload_.resize(shape.max_payload_bytes());
      scratch_.resize(needs.host_scratch_bytes);
      slot.host = {payload_, covariance_, eigenvalues_, eigenvectors_, info_, scratch_};
    } else {
#if COVFLOW_HAS_CUDA
      pinned_payload_ = linalg::cuda::PinnedBuffer<std::byte>(shape.max_payload_bytes());
      pinned_scratch_ = linalg::cuda::PinnedBuffer<std::byte>(std::max<std::size_t>(needs.host_scratch_bytes, 1));
      d_payload_ = linalg::cuda::DeviceBuffer<std::byte>(shape.max_payload_bytes());
      d_covariance_ = linalg::cuda::DeviceBuffer<std::byte>(covariance_.size());
      d_eigenvalues_ = linalg::cuda::DeviceBuffer<std::byte>(eigenvalues_.size());
      d_eigenvectors_ = linalg::cuda::DeviceBuffer<std::byte>(eigenvectors_.size());
      d_info_ = linalg::cuda::DeviceBuffer<int>(cells);
      slot.host.payload = pinned_payload_.span();
      slot.host.scratch = std::span<std::byte>(pinned_scratch_.data(), needs.host_scratch_bytes);
      slot.device = {d_payload_.data(), d_covariance_.data(), d_eigenvalues_.data(), d_eigenvectors_.data(),
                     d_info_.data(), nullptr, 0};
#endif
    }
    slot.results.reserve(shape);
    slot.stages.resize(stages.size());
  }

  // Header and payload of `frame` into the slot (and onto the device); every working array and
  // result poisoned (NaN bytes, source counts −1, statuses 12345).
  void load(const replay::Frame& frame) {
    slot.sequence = frame.header.sequence;
    slot.header = frame.header;
    slot.results.clear();
    std::fill(slot.results.cell_status.begin(), slot.results.cell_status.end(), 12345);
    for (auto* bytes : {&covariance_, &eigenvalues_, &eigenvectors_})
      std::fill(bytes->begin(), bytes->end(), std::byte{0xFF});
    std::fill(info_.begin(), info_.end(), 12345);
    if (frame.payload.size() > slot.host.payload.size()) throw std::invalid_argument("test frame larger than the slot");
    std::memcpy(slot.host.payload.data(), frame.payload.data(), frame.payload.size());
#if COVFLOW_HAS_CUDA
    if (cuda_) {
      const cudaStream_t stream = exec_.cuda_context().stream();
      for (auto* buffer : {&d_covariance_, &d_eigenvalues_, &d_eigenvectors_}) buffer->fill_bytes(0xFF, stream);
      d_info_.fill_bytes(0x7F, stream);
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(d_payload_.data(), slot.host.payload.data(), frame.payload.size(),
                                       cudaMemcpyHostToDevice, stream));
    }
#endif
  }

  // A header alone (the payload is left as it is), for frames the stages must refuse.
  void load_header(const replay::FrameHeader& header) {
    slot.sequence = header.sequence;
    slot.header = header;
  }

  // Runs the stages in order (FrameError propagates), waits as the runner does before publishing,
  // lets them collect their results, and mirrors the device arrays into covariance() … info().
  void run(std::span<pipeline::Stage* const> stages) {
    for (auto* stage : stages) stage->run(slot, exec_);
    finish(stages);
  }

  void finish(std::span<pipeline::Stage* const> collecting = {}) {
    exec_.synchronize();
    for (auto* stage : collecting) stage->collect(slot, exec_);
#if COVFLOW_HAS_CUDA
    if (cuda_) {
      const cudaStream_t stream = exec_.cuda_context().stream();
      d_covariance_.download(covariance_, stream);
      d_eigenvalues_.download(eigenvalues_, stream);
      d_eigenvectors_.download(eigenvectors_, stream);
      d_info_.download(info_, stream);
      exec_.synchronize();
    }
#endif
  }

  template <class T> std::span<const T> covariance() const { return as<T>(covariance_); }
  template <class T> std::span<const T> eigenvalues() const { return as<T>(eigenvalues_); }
  template <class T> std::span<const T> eigenvectors() const { return as<T>(eigenvectors_); }
  std::span<const int> info() const { return info_; }

  pipeline::FrameSlot slot;

 private:
  template <class T> static std::span<const T> as(const std::vector<std::byte>& bytes) {
    return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
  }
  pipeline::FrameShape shape_;
  linalg::Exec& exec_;
  bool cuda_;
  std::vector<std::byte> payload_, covariance_, eigenvalues_, eigenvectors_, scratch_;
  std::vector<int> info_;
#if COVFLOW_HAS_CUDA
  linalg::cuda::PinnedBuffer<std::byte> pinned_payload_, pinned_scratch_;
  linalg::cuda::DeviceBuffer<std::byte> d_payload_, d_covariance_, d_eigenvalues_, d_eigenvectors_;
  linalg::cuda::DeviceBuffer<int> d_info_;
#endif
};

}  // namespace covflow::test

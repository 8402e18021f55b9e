// Move-only CUDA streams and events.
#pragma once

#include <utility>

#include <cuda_runtime.h>

#include "covflow/linalg/cuda/check.hpp"

namespace covflow::linalg::cuda {

class Stream {
 public:
  // A non-blocking stream: it does not synchronise with the legacy default stream.
  Stream() { COVFLOW_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept {
    if (this != &other) {
      release();
      stream_ = std::exchange(other.stream_, nullptr);
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { release(); }

  cudaStream_t get() const noexcept { return stream_; }
  operator cudaStream_t() const noexcept { return stream_; }
  void synchronize() const { COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream_)); }

 private:
  void release() noexcept {
    if (stream_ != nullptr) COVFLOW_CUDA_TRY_NO_THROW(cudaStreamDestroy(stream_));
    stream_ = nullptr;
  }
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  // Timing events by default; pass cudaEventDisableTiming for pure synchronisation.
  explicit Event(unsigned flags = cudaEventDefault) {
    COVFLOW_CUDA_TRY(cudaEventCreateWithFlags(&event_, flags));
  }
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&& other) noexcept {
    if (this != &other) {
      release();
      event_ = std::exchange(other.event_, nullptr);
    }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { release(); }

  cudaEvent_t get() const noexcept { return event_; }
  void record(cudaStream_t stream) { COVFLOW_CUDA_TRY(cudaEventRecord(event_, stream)); }
  void synchronize() const { COVFLOW_CUDA_TRY(cudaEventSynchronize(event_)); }
  bool ready() const {
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaErrorNotReady) return false;
    COVFLOW_CUDA_TRY(status);
    return true;
  }
  // Milliseconds from `start` to this event; both must have completed.
  float elapsed_since(const Event& start) const {
    float ms = 0.f;
    COVFLOW_CUDA_TRY(cudaEventElapsedTime(&ms, start.event_, event_));
    return ms;
  }

 private:
  void release() noexcept {
    if (event_ != nullptr) COVFLOW_CUDA_TRY_NO_THROW(cudaEventDestroy(event_));
    event_ = nullptr;
  }
  cudaEvent_t event_ = nullptr;
};

}  // namespace covflow::linalg::cuda

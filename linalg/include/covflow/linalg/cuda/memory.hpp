// Owning, move-only CUDA memory: DeviceBuffer<T> (cudaMalloc) and PinnedBuffer<T>
// (cudaMallocHost, page-locked host memory for asynchronous copies). Algorithms never call
// cudaFree themselves.
#pragma once

#include <cstddef>
#include <span>
#include <utility>

#include <cuda_runtime.h>

#include "covflow/linalg/cuda/check.hpp"

namespace covflow::linalg::cuda {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    if (count_ > 0) COVFLOW_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()));
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }

  // Host -> device and back on `stream`; the host side must stay alive until the copy is done.
  void upload(std::span<const T> host, cudaStream_t stream, std::size_t offset = 0) {
    if (offset + host.size() > count_) throw InvalidArgument("DeviceBuffer::upload: past the end");
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(data_ + offset, host.data(), host.size_bytes(),
                                     cudaMemcpyHostToDevice, stream));
  }
  void download(std::span<T> host, cudaStream_t stream, std::size_t offset = 0) const {
    if (offset + host.size() > count_) throw InvalidArgument("DeviceBuffer::download: past the end");
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(host.data(), data_ + offset, host.size_bytes(),
                                     cudaMemcpyDeviceToHost, stream));
  }
  // Fills every byte with `byte` (0xFF poisons floating point data with NaNs).
  void fill_bytes(int byte, cudaStream_t stream) {
    if (count_ > 0) COVFLOW_CUDA_TRY(cudaMemsetAsync(data_, byte, bytes(), stream));
  }

 private:
  void release() noexcept {
    if (data_ != nullptr) COVFLOW_CUDA_TRY_NO_THROW(cudaFree(data_));
    data_ = nullptr;
    count_ = 0;
  }
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t count) : count_(count) {
    if (count_ > 0) COVFLOW_CUDA_TRY(cudaMallocHost(reinterpret_cast<void**>(&data_), count_ * sizeof(T)));
  }
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { release(); }

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }
  std::span<T> span() const noexcept { return {data_, count_}; }
  T& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  void release() noexcept {
    if (data_ != nullptr) COVFLOW_CUDA_TRY_NO_THROW(cudaFreeHost(data_));
    data_ = nullptr;
    count_ = 0;
  }
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace covflow::linalg::cuda

// Internal: what an Exec holds. Shared by exec.cpp and the CUDA context's source.
#pragma once

#include <cstddef>
#include <memory>

#include "covflow/linalg/exec.hpp"

namespace covflow::linalg {

// Host scratch for the CPU backend: one 256-byte aligned block, grown on demand (and counted).
class HostWorkspace final : public Workspace {
 public:
  void* acquire(std::size_t bytes) override;
  void reserve(std::size_t bytes) override;
  std::size_t capacity() const override { return capacity_; }
  std::size_t growth_count() const override { return growths_; }

 private:
  struct Free {
    void operator()(std::byte* p) const noexcept;
  };
  std::unique_ptr<std::byte, Free> data_;
  std::size_t capacity_ = 0;
  std::size_t growths_ = 0;
};

struct Exec::State {
  explicit State(Backend b, unsigned threads) : backend(b), pool(threads) {}
  Backend backend;
  ThreadPool pool;
  HostWorkspace host_workspace;
  std::unique_ptr<CudaContext, void (*)(CudaContext*)> cuda{nullptr, nullptr};
};

}  // namespace covflow::linalg

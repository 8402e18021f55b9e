// The CUDA side of an Exec: device, stream, library handles and the device workspace arena.
// Reach it with exec.cuda_context(); every operation issues its work on stream() and never synchronises
// the host.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <memory>

#include "covflow/linalg/device.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::linalg {

class CudaContext {
 public:
  explicit CudaContext(const CudaOptions& options);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const noexcept { return info_.index; }
  const DeviceInfo& info() const noexcept { return info_; }
  cudaStream_t stream() const noexcept;
  // A second stream on which an operation may run independent parts of its work alongside
  // stream(). An operation that uses it orders it after stream() on entry and joins it back
  // before returning (events, no host synchronisation), so callers only ever see stream().
  cudaStream_t side_stream() const noexcept;
  // Synchronisation-only events owned by the context (k < kEvents), for those forks and joins.
  static constexpr int kEvents = 8;
  cudaEvent_t event(int k) const noexcept;
  cublasHandle_t cublas() const noexcept;
  cusolverDnHandle_t cusolver() const noexcept;
  Workspace& workspace() noexcept;

  // Makes this context's device current on the calling thread (operations do it themselves).
  void make_current() const;

 private:
  struct Impl;
  DeviceInfo info_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace covflow::linalg

// The CUDA execution context: device, stream, cuBLAS/cuSOLVER handles, device workspace arena.
#include "covflow/linalg/cuda/context.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/cuda/stream.hpp"
#include "exec_state.hpp"

namespace covflow::linalg {
namespace {

class CublasHandle {
 public:
  CublasHandle() { COVFLOW_CUBLAS_TRY(cublasCreate(&handle_)); }
  ~CublasHandle() {
    if (handle_ != nullptr) cublasDestroy(handle_);
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const noexcept { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

class CusolverHandle {
 public:
  CusolverHandle() { COVFLOW_CUSOLVER_TRY(cusolverDnCreate(&handle_)); }
  ~CusolverHandle() {
    if (handle_ != nullptr) cusolverDnDestroy(handle_);
  }
  CusolverHandle(const CusolverHandle&) = delete;
  CusolverHandle& operator=(const CusolverHandle&) = delete;
  cusolverDnHandle_t get() const noexcept { return handle_; }

 private:
  cusolverDnHandle_t handle_ = nullptr;
};

// Device scratch. Growing it frees the old block, which must not be in use by queued work: the
// stream is drained first. That stall is why growth is counted and reserve() belongs at start-up.
class DeviceWorkspace final : public Workspace {
 public:
  explicit DeviceWorkspace(cudaStream_t stream) : stream_(stream) {}
  void* acquire(std::size_t bytes) override {
    if (bytes > buffer_.size()) {
      reserve(bytes);
      ++growths_;
    }
    return buffer_.data();
  }
  void reserve(std::size_t bytes) override {
    if (bytes <= buffer_.size()) return;
    COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream_));
    buffer_ = cuda::DeviceBuffer<std::byte>();
    buffer_ = cuda::DeviceBuffer<std::byte>(bytes);
  }
  std::size_t capacity() const override { return buffer_.size(); }
  std::size_t growth_count() const override { return growths_; }

 private:
  cudaStream_t stream_;
  cuda::DeviceBuffer<std::byte> buffer_;
  std::size_t growths_ = 0;
};

}  // namespace

struct CudaContext::Impl {
  cuda::Stream stream;
  cuda::Stream side;
  std::vector<cuda::Event> events;
  CublasHandle cublas;
  CusolverHandle cusolver;
  DeviceWorkspace workspace{stream.get()};
};

CudaContext::CudaContext(const CudaOptions& options) {
  const DeviceProbe probe = probe_devices();
  if (!probe.available()) throw Unavailable("the CUDA backend is not available: " + probe.reason);
  if (options.device < 0 || options.device >= static_cast<int>(probe.devices.size()))
    throw Unavailable("CUDA device " + std::to_string(options.device) + " does not exist (" +
                      std::to_string(probe.devices.size()) + " present)");
  info_ = probe.devices[static_cast<std::size_t>(options.device)];
  COVFLOW_CUDA_TRY(cudaSetDevice(info_.index));
  impl_ = std::make_unique<Impl>();
  for (int k = 0; k < kEvents; ++k) impl_->events.emplace_back(cudaEventDisableTiming);
  COVFLOW_CUBLAS_TRY(cublasSetStream(impl_->cublas.get(), impl_->stream.get()));
  COVFLOW_CUSOLVER_TRY(cusolverDnSetStream(impl_->cusolver.get(), impl_->stream.get()));
  if (options.workspace_bytes > 0) impl_->workspace.reserve(options.workspace_bytes);
}

CudaContext::~CudaContext() {
  if (impl_) {
    COVFLOW_CUDA_TRY_NO_THROW(cudaStreamSynchronize(impl_->stream.get()));
    COVFLOW_CUDA_TRY_NO_THROW(cudaStreamSynchronize(impl_->side.get()));
  }
}

cudaStream_t CudaContext::stream() const noexcept { return impl_->stream.get(); }
cudaStream_t CudaContext::side_stream() const noexcept { return impl_->side.get(); }
cudaEvent_t CudaContext::event(int k) const noexcept { return impl_->events[static_cast<std::size_t>(k)].get(); }
cublasHandle_t CudaContext::cublas() const noexcept { return impl_->cublas.get(); }
cusolverDnHandle_t CudaContext::cusolver() const noexcept { return impl_->cusolver.get(); }
Workspace& CudaContext::workspace() noexcept { return impl_->workspace; }

void CudaContext::make_current() const { COVFLOW_CUDA_TRY(cudaSetDevice(info_.index)); }

Exec Exec::cuda(const CudaOptions& options) {
  auto state = std::make_unique<State>(Backend::cuda, 0);
  state->cuda = {new CudaContext(options), [](CudaContext* c) { delete c; }};
  return Exec(std::move(state));
}

Workspace& Exec::workspace() {
  return state_->cuda ? state_->cuda->workspace() : static_cast<Workspace&>(state_->host_workspace);
}

void Exec::synchronize() {
  if (state_->cuda) COVFLOW_CUDA_TRY(cudaStreamSynchronize(state_->cuda->stream()));
}

}  // namespace covflow::linalg

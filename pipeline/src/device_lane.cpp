#include "device_lane.hpp"

#if COVFLOW_HAS_CUDA
#include <vector>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/stream.hpp"
#endif

namespace covflow::pipeline::detail {

#if COVFLOW_HAS_CUDA
namespace {

// The upload goes on a stream the lane owns rather than the context's side_stream: operations
// such as heev fork onto side_stream and join it back into stream(), so an upload queued there
// would be waited for inside the previous frame's stage (and inflate its timing events).
class CudaLane final : public DeviceLane {
 public:
  // The stream and events belong to the device that is current when they are made: context_ is
  // initialised first and makes its device current.
  CudaLane(linalg::Exec& exec, std::size_t stage_count) : context_(current(exec.cuda_context())) {
    ends_.reserve(stage_count);
    for (std::size_t i = 0; i < stage_count; ++i) ends_.emplace_back();
  }
  static linalg::CudaContext& current(linalg::CudaContext& context) {
    context.make_current();
    return context;
  }
  int device() const override { return context_.device(); }
  void make_current() override { context_.make_current(); }
  void upload(FrameSlot& slot, std::size_t bytes, int parity) override {
    if (slot.payload_on_device)
      COVFLOW_CUDA_TRY(cudaStreamWaitEvent(copy_, static_cast<cudaEvent_t>(slot.device.upload_event), 0));
    else if (bytes > 0)
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(slot.device.payload, slot.host.payload.data(), bytes, cudaMemcpyHostToDevice, copy_));
    uploaded_[parity & 1].record(copy_);
  }
  void begin(int parity) override {
    COVFLOW_CUDA_TRY(cudaStreamWaitEvent(context_.stream(), uploaded_[parity & 1].get(), 0));
    start_.record(context_.stream());
  }
  void stage_end(std::size_t stage) override { ends_.at(stage).record(context_.stream()); }
  bool stage_complete(std::size_t stage) override { return ends_.at(stage).ready(); }
  void synchronize() override { COVFLOW_CUDA_TRY(cudaStreamSynchronize(context_.stream())); }
  bool computing() override {
    const cudaError_t status = cudaStreamQuery(context_.stream());
    if (status == cudaErrorNotReady) return true;
    COVFLOW_CUDA_TRY(status);
    return false;
  }
  void wait_uploads() override { copy_.synchronize(); }
  std::string lost() override {
    const cudaError_t status = cudaDeviceSynchronize();
    if (status == cudaSuccess) return {};
    return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
  }
  double elapsed_ms(std::size_t from, std::size_t to) override {
    const linalg::cuda::Event& a = from == kStart ? start_ : ends_.at(from);
    return double(ends_.at(to).elapsed_since(a));
  }

 private:
  linalg::CudaContext& context_;
  linalg::cuda::Stream copy_{};
  linalg::cuda::Event uploaded_[2]{linalg::cuda::Event(cudaEventDisableTiming), linalg::cuda::Event(cudaEventDisableTiming)};
  linalg::cuda::Event start_{};
  std::vector<linalg::cuda::Event> ends_;
};

class CudaIngestUploader final : public IngestUploader {
 public:
  explicit CudaIngestUploader(linalg::Exec& exec) : context_(CudaLane::current(exec.cuda_context())) {}
  void make_current() override { context_.make_current(); }
  void copy(FrameSlot& slot, std::size_t begin, std::size_t end) override {
    if (end > begin)
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(static_cast<std::byte*>(slot.device.payload) + begin, slot.host.payload.data() + begin,
                                       end - begin, cudaMemcpyHostToDevice, stream_));
  }
  void finish(FrameSlot& slot) override {
    COVFLOW_CUDA_TRY(cudaEventRecord(static_cast<cudaEvent_t>(slot.device.upload_event), stream_));
  }
  void wait() override { stream_.synchronize(); }

 private:
  linalg::CudaContext& context_;
  linalg::cuda::Stream stream_{};
};

}  // namespace
#endif

std::unique_ptr<IngestUploader> IngestUploader::make(linalg::Exec& exec) {
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return std::make_unique<CudaIngestUploader>(exec);
#endif
  (void)exec;
  return nullptr;
}

std::unique_ptr<DeviceLane> DeviceLane::make(linalg::Exec& exec, std::size_t stage_count) {
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return std::make_unique<CudaLane>(exec, stage_count);
#endif
  return nullptr;
}

}  // namespace covflow::pipeline::detail

// The CUDA execution context on a real device.
#include <gtest/gtest.h>

#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/cuda/stream.hpp"
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

class ExecGpu : public test::GpuTest {};

TEST_F(ExecGpu, ContextHasStreamHandlesAndDevice) {
  Exec& exec = gpu();
  ASSERT_TRUE(exec.is_cuda());
  CudaContext& context = exec.cuda_context();
  EXPECT_NE(context.stream(), nullptr);
  EXPECT_NE(context.cublas(), nullptr);
  EXPECT_NE(context.cusolver(), nullptr);
  EXPECT_GT(context.info().multiprocessors, 0);
  std::printf("[ device   ] %s, sm_%d%d, %d SMs, %.1f GiB\n", context.info().name.c_str(), context.info().cc_major,
              context.info().cc_minor, context.info().multiprocessors,
              static_cast<double>(context.info().global_memory) / (1 << 30));
}

TEST_F(ExecGpu, DeviceWorkspaceReservesAndCountsGrowth) {
  Exec exec = Exec::cuda({.device = 0, .workspace_bytes = 1 << 20});
  Workspace& ws = exec.workspace();
  EXPECT_GE(ws.capacity(), std::size_t(1) << 20);
  void* p = ws.acquire(1000);
  EXPECT_EQ(memory_space(p), MemorySpace::device);
  EXPECT_EQ(ws.growth_count(), 0u);
  ws.acquire(std::size_t(4) << 20);
  EXPECT_EQ(ws.growth_count(), 1u);
}

TEST_F(ExecGpu, BuffersRoundTripAndEventsTime) {
  Exec& exec = gpu();
  cudaStream_t stream = exec.cuda_context().stream();
  std::vector<double> host(1000), back(1000, -1.0);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = 0.5 * static_cast<double>(i);
  cuda::DeviceBuffer<double> device(host.size());
  EXPECT_EQ(memory_space(device.data()), MemorySpace::device);
  cuda::Event start, stop;
  start.record(stream);
  device.upload(host, stream);
  device.download(back, stream);
  stop.record(stream);
  stop.synchronize();
  EXPECT_EQ(host, back);
  EXPECT_GE(stop.elapsed_since(start), 0.f);
  cuda::PinnedBuffer<float> pinned(16);
  EXPECT_EQ(memory_space(pinned.data()), MemorySpace::host);
}

TEST_F(ExecGpu, ErrorsNameCallFileAndLine) {
  try {
    COVFLOW_CUDA_TRY(cudaSetDevice(9999));
    FAIL() << "cudaSetDevice(9999) succeeded";
  } catch (const CudaError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaSetDevice(9999)"), std::string::npos) << what;
    EXPECT_NE(what.find("exec_gpu_test.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaErrorInvalidDevice"), std::string::npos) << what;
  }
  // The thrown error does not linger: the next launch check is clean.
  EXPECT_NO_THROW(COVFLOW_CHECK_LAUNCH());
  gpu().cuda_context().make_current();
}

}  // namespace
}  // namespace covflow::linalg

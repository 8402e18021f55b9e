#include <gtest/gtest.h>

#include <string>

#include "covflow/linalg/device.hpp"
#include "covflow/linalg/error.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::linalg {
namespace {

TEST(Exec, CpuBackendBasics) {
  Exec exec = Exec::cpu(3);
  EXPECT_EQ(exec.backend(), Backend::cpu);
  EXPECT_FALSE(exec.is_cuda());
  EXPECT_EQ(exec.pool().size(), 3u);
  EXPECT_THROW(exec.cuda_context(), InvalidArgument);
  EXPECT_NO_THROW(exec.synchronize());
}

TEST(Exec, HostWorkspaceGrowsOnceAndCounts) {
  Exec exec = Exec::cpu(1);
  Workspace& ws = exec.workspace();
  ws.reserve(1024);
  EXPECT_EQ(ws.growth_count(), 0u);
  void* first = ws.acquire(512);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % 256, 0u);
  EXPECT_EQ(ws.acquire(1024), first);  // fits: same block, no growth
  EXPECT_EQ(ws.growth_count(), 0u);
  ws.acquire(4096);
  EXPECT_EQ(ws.growth_count(), 1u);
  EXPECT_GE(ws.capacity(), 4096u);
}

TEST(Exec, ProbeExplainsAbsentDevices) {
  const DeviceProbe probe = probe_devices();
  if (probe.available()) {
    EXPECT_TRUE(cuda_compiled());
    EXPECT_FALSE(probe.devices.front().name.empty());
  } else {
    EXPECT_FALSE(probe.reason.empty());
    // Without a device, asking for the CUDA backend is a clear error, not a crash.
    try {
      Exec::cuda();
      ADD_FAILURE() << "Exec::cuda() succeeded without a device";
    } catch (const Unavailable& e) {
      EXPECT_NE(std::string(e.what()).find("not available"), std::string::npos) << e.what();
    }
  }
}

TEST(Exec, HostPointersAreHostMemory) {
  int local = 0;
  EXPECT_EQ(memory_space(&local), MemorySpace::host);
}

}  // namespace
}  // namespace covflow::linalg

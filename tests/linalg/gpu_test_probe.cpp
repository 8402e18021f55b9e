// A GpuTest with nothing else in it, which require_gpu_test.cpp runs in a child process: it passes
// on a host with a CUDA device, skips without one, and fails without one under
// COVFLOW_REQUIRE_GPU. The second test takes the inline form that tests outside the fixture use.
#include "test_support.hpp"

namespace covflow::test {
namespace {

class GpuTestProbe : public GpuTest {};

TEST_F(GpuTestProbe, BodyRunsOnlyWithADevice) { EXPECT_TRUE(device_probe().available()); }

TEST(GpuTestProbeInline, BodyRunsOnlyWithADevice) {
  COVFLOW_SKIP_WITHOUT_DEVICE();
  EXPECT_TRUE(device_probe().available());
}

}  // namespace
}  // namespace covflow::test

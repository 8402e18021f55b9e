// Device probing in a build without CUDA: there is never a device.
#include "covflow/linalg/device.hpp"

namespace covflow::linalg {

bool cuda_compiled() noexcept { return false; }

DeviceProbe probe_devices() {
  DeviceProbe probe;
  probe.reason = "covflow was built without CUDA (COVFLOW_CUDA=OFF)";
  return probe;
}

MemorySpace memory_space(const void*) { return MemorySpace::host; }

}  // namespace covflow::linalg

// Device probing and pointer classification through the CUDA runtime (CUDA builds only).
#include <cuda_runtime.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/device.hpp"

namespace covflow::linalg {

bool cuda_compiled() noexcept { return true; }

DeviceProbe probe_devices() {
  DeviceProbe probe;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  // 35: this host has no (or too old a) driver; 100: a driver but no device. Both mean "no GPU
  // here", which tests turn into a skip; anything else is a real failure.
  if (status == cudaErrorInsufficientDriver || status == cudaErrorNoDevice) {
    probe.reason = std::string("no CUDA device: ") + cudaGetErrorName(status) + " (" +
                   std::to_string(static_cast<int>(status)) + "): " + cudaGetErrorString(status);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return probe;
  }
  COVFLOW_CUDA_TRY(status);
  if (count == 0) {
    probe.reason = "no CUDA device: cudaGetDeviceCount reports 0 devices";
    return probe;
  }
  for (int index = 0; index < count; ++index) {
    cudaDeviceProp props{};
    COVFLOW_CUDA_TRY(cudaGetDeviceProperties(&props, index));
    DeviceInfo info;
    info.index = index;
    info.name = props.name;
    info.cc_major = props.major;
    info.cc_minor = props.minor;
    info.multiprocessors = props.multiProcessorCount;
    info.global_memory = props.totalGlobalMem;
    info.shared_memory_per_block = props.sharedMemPerBlockOptin;
    info.l2_cache = static_cast<std::size_t>(props.l2CacheSize);
    probe.devices.push_back(std::move(info));
  }
  return probe;
}

MemorySpace memory_space(const void* pointer) {
  cudaPointerAttributes attributes{};
  const cudaError_t status = cudaPointerGetAttributes(&attributes, pointer);
  if (status != cudaSuccess) {
    // No driver or no device: nothing can be device memory.
    cudaGetLastError();
    return MemorySpace::host;
  }
  switch (attributes.type) {
    case cudaMemoryTypeDevice: return MemorySpace::device;
    case cudaMemoryTypeManaged: return MemorySpace::managed;
    default: return MemorySpace::host;
  }
}

}  // namespace covflow::linalg

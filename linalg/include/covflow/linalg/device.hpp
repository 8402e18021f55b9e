// What this build and this host can run: CUDA compiled in or not, the GPUs present, and where a
// pointer lives. Nothing here needs the CUDA headers.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace covflow::linalg {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int multiprocessors = 0;
  std::size_t global_memory = 0;           // bytes
  std::size_t shared_memory_per_block = 0; // bytes a block may opt in to
  std::size_t l2_cache = 0;                // bytes
};

struct DeviceProbe {
  std::vector<DeviceInfo> devices;
  std::string reason;  // why there are none, when there are none
  bool available() const { return !devices.empty(); }
};

// True when covflow was built with its CUDA backend.
bool cuda_compiled() noexcept;

// Lists the CUDA devices. "No driver" (error 35) and "no device" (error 100) are not errors: they
// give an empty list with the reason. Any other CUDA failure throws CudaError.
DeviceProbe probe_devices();

enum class MemorySpace { host, device, managed };

// Where `pointer` lives; host memory (pageable or pinned) is `host`. Always `host` without CUDA.
MemorySpace memory_space(const void* pointer);

}  // namespace covflow::linalg

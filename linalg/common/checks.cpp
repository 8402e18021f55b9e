#include "checks.hpp"

#include "covflow/linalg/device.hpp"

namespace covflow::linalg::detail {

void require_memory_space(Exec& exec, const void* pointer, std::string_view op, std::string_view what) {
  const MemorySpace space = memory_space(pointer);
  const bool ok = exec.is_cuda() ? space != MemorySpace::host : space != MemorySpace::device;
  if (!ok)
    throw InvalidArgument(std::string(op) + ": " + std::string(what) + " is " +
                          (space == MemorySpace::host ? "host" : "device") +
                          " memory but the execution context is " + name(exec.backend()) +
                          (exec.is_cuda() ? " (copy it to the device first)" : " (copy it to the host first)"));
}

}  // namespace covflow::linalg::detail

// What this build of covflow is: version, build type, CUDA architectures compiled in.
#pragma once

#include <string>

namespace covflow::config {

struct BuildInfo {
  std::string version;
  std::string build_type;
  std::string cuda_architectures;  // "none" in a CPU-only build
};

const BuildInfo& build_info();

}  // namespace covflow::config

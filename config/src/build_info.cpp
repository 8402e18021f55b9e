#include "covflow/config/build_info.hpp"

namespace covflow::config {

const BuildInfo& build_info() {
  static const BuildInfo info{COVFLOW_VERSION, COVFLOW_BUILD_TYPE, COVFLOW_CUDA_ARCHS};
  return info;
}

}  // namespace covflow::config

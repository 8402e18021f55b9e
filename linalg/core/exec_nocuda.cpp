// Exec's CUDA entry points in a build without CUDA.
#include "covflow/linalg/error.hpp"
#include "exec_state.hpp"

namespace covflow::linalg {

Exec Exec::cuda(const CudaOptions&) {
  throw Unavailable("the CUDA backend is not available: covflow was built without CUDA "
                    "(configure with nvcc present and COVFLOW_CUDA=ON)");
}

Workspace& Exec::workspace() { return state_->host_workspace; }

void Exec::synchronize() {}

}  // namespace covflow::linalg

// covflowd end to end on the CUDA backend: the same checks as daemon_e2e_test (daemon_e2e.hpp).
#include "daemon_e2e.hpp"

namespace covflow::test {
namespace {

class DaemonEndToEndGpu : public GpuTest {};

TEST_F(DaemonEndToEndGpu, FramesOverZeroMqResultsReportsReloadAndSigtermOnCuda) {
  run_daemon_end_to_end(COVFLOWD, COVFLOW_SOURCE_DIR "/examples/latency_client.py", "cuda", /*python_required=*/false);
}

}  // namespace
}  // namespace covflow::test

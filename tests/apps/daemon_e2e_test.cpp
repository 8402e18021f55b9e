// covflowd end to end on the CPU backend (daemon_e2e.hpp has the checks).
#include "daemon_e2e.hpp"

namespace covflow::test {
namespace {

TEST(DaemonEndToEnd, FramesOverZeroMqResultsReportsReloadAndSigtermOnCpu) {
  run_daemon_end_to_end(COVFLOWD, COVFLOW_SOURCE_DIR "/examples/latency_client.py", "cpu", /*python_required=*/true);
}

}  // namespace
}  // namespace covflow::test

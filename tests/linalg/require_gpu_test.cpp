// COVFLOW_REQUIRE_GPU turns a GPU test that cannot run from a skip into a failure with the same
// reason. gpu_test_probe (two GPU tests and nothing else) runs in a child process with and without
// the variable; on a host without a device the outcome must differ, on a host with one both pass.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "test_support.hpp"

namespace covflow::test {
namespace {

struct ProbeRun {
  int code = -1;
  std::string output;  // stdout and stderr together
};

// Runs gpu_test_probe with COVFLOW_REQUIRE_GPU set to `require`, or unset when it is null. The
// GoogleTest variables this run may have been given (a filter, XML output, brief mode) would
// otherwise apply to the child too.
ProbeRun run_probe(const char* require) {
  const std::string variable = require == nullptr ? "-u COVFLOW_REQUIRE_GPU" : std::string("COVFLOW_REQUIRE_GPU=") + require;
  const std::string command =
      "env -u GTEST_FILTER -u GTEST_OUTPUT -u GTEST_BRIEF " + variable + " '" GPU_TEST_PROBE "' 2>&1";
  ProbeRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) run.output.append(buffer, got);
  const int status = pclose(pipe);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(RequireGpu, NoDeviceSkipsWithoutTheVariableAndFailsWithIt) {
  const ProbeRun plain = run_probe(nullptr), zero = run_probe("0"), required = run_probe("1");
  if (device_probe().available()) {
    // The probe's tests run and pass either way: the variable changes nothing where a device is.
    for (const ProbeRun* run : {&plain, &zero, &required}) {
      EXPECT_EQ(run->code, 0) << run->output;
      EXPECT_TRUE(contains(run->output, "[  PASSED  ] 2 tests")) << run->output;
    }
    return;
  }
  const std::string& reason = device_probe().reason;
  for (const ProbeRun* run : {&plain, &zero}) {
    EXPECT_EQ(run->code, 0) << run->output;
    EXPECT_TRUE(contains(run->output, "[  SKIPPED ] 2 tests")) << run->output;
    EXPECT_TRUE(contains(run->output, reason)) << "the skip names why: " << run->output;
    EXPECT_FALSE(contains(run->output, "FAILED")) << run->output;
  }
  EXPECT_NE(required.code, 0) << required.output;
  EXPECT_TRUE(contains(required.output, "[  FAILED  ] 2 tests")) << required.output;
  EXPECT_TRUE(contains(required.output, gpu_required_message(reason))) << required.output;
  EXPECT_FALSE(contains(required.output, "SKIPPED")) << required.output;
}

TEST(RequireGpu, ValuesThatRequireADevice) {
  const char* saved = std::getenv("COVFLOW_REQUIRE_GPU");
  const std::string saved_value = saved == nullptr ? "" : saved;
  unsetenv("COVFLOW_REQUIRE_GPU");
  EXPECT_FALSE(gpu_required());
  for (const char* value : {"", "0"}) {
    setenv("COVFLOW_REQUIRE_GPU", value, 1);
    EXPECT_FALSE(gpu_required()) << "'" << value << "'";
  }
  for (const char* value : {"1", "yes"}) {
    setenv("COVFLOW_REQUIRE_GPU", value, 1);
    EXPECT_TRUE(gpu_required()) << "'" << value << "'";
  }
  if (saved == nullptr) unsetenv("COVFLOW_REQUIRE_GPU");
  else setenv("COVFLOW_REQUIRE_GPU", saved_value.c_str(), 1);
}

}  // namespace
}  // namespace covflow::test

#include "test_support.hpp"

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string_view>

#include "covflow/linalg/error.hpp"

namespace covflow::test {

std::uint64_t fresh_seed(const std::string& what) {
  std::uint64_t seed;
  if (const char* fixed = std::getenv("COVFLOW_TEST_SEED"); fixed != nullptr && *fixed != '\0') {
    seed = std::strtoull(fixed, nullptr, 10);
  } else {
    std::random_device device;
    seed = (std::uint64_t(device()) << 32) ^ device();
  }
  std::cout << "[ seed     ] " << what << ": " << seed << " (replay with COVFLOW_TEST_SEED=" << seed << ")\n";
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

const linalg::DeviceProbe& device_probe() {
  static const linalg::DeviceProbe probe = linalg::probe_devices();
  return probe;
}

bool gpu_required() {
  const char* value = std::getenv("COVFLOW_REQUIRE_GPU");
  return value != nullptr && *value != '\0' && std::string_view(value) != "0";
}

std::string gpu_required_message(const std::string& reason) {
  return reason + " (COVFLOW_REQUIRE_GPU is set: a GPU test that cannot run fails instead of skipping)";
}

void GpuTest::SetUp() { COVFLOW_SKIP_WITHOUT_DEVICE(); }

linalg::Exec& GpuTest::gpu() {
  static std::unique_ptr<linalg::Exec> shared;
  if (!shared) shared = std::make_unique<linalg::Exec>(linalg::Exec::cuda());
  return *shared;
}

void expect_invalid_argument(const std::function<void()>& call, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "no error; expected " << fragment;
  } catch (const linalg::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

}  // namespace covflow::test

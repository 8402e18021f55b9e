#include "test_support.hpp"

#include <cstdlib>
#include <iostream>
#include <memory>

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

void GpuTest::SetUp() {
  if (!device_probe().available()) GTEST_SKIP() << device_probe().reason;
}

linalg::Exec& GpuTest::gpu() {
  static std::unique_ptr<linalg::Exec> shared;
  if (!shared) shared = std::make_unique<linalg::Exec>(linalg::Exec::cuda());
  return *shared;
}

}  // namespace covflow::test

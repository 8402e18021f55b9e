// Shared test helpers: printed seeds, random inputs, norms, and the fixture that skips GPU tests
// (with the reason) on a host without a CUDA device.
#pragma once

#include <gtest/gtest.h>

#include <complex>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "covflow/linalg/device.hpp"
#include "covflow/linalg/exec.hpp"
#include "covflow/linalg/types.hpp"

namespace covflow::test {

// A fresh seed per call, printed so a failure can be replayed; COVFLOW_TEST_SEED=N fixes it.
std::uint64_t fresh_seed(const std::string& what);

template <class T> constexpr double eps() { return std::numeric_limits<linalg::real_t<T>>::epsilon(); }

// Standard complex normal entries (E|z|² = 1) or standard normal for real T.
template <class T>
std::vector<T> random_normal(std::size_t count, std::mt19937_64& rng) {
  std::vector<T> out(count);
  if constexpr (linalg::is_complex_v<T>) {
    using R = linalg::real_t<T>;
    std::normal_distribution<double> normal(0.0, std::sqrt(0.5));
    for (auto& v : out) v = T(static_cast<R>(normal(rng)), static_cast<R>(normal(rng)));
  } else {
    std::normal_distribution<double> normal(0.0, 1.0);
    for (auto& v : out) v = static_cast<T>(normal(rng));
  }
  return out;
}

// A quiet NaN in every component: what outputs are poisoned with before a run.
template <class T> T poison() {
  using R = linalg::real_t<T>;
  if constexpr (linalg::is_complex_v<T>) return T(std::numeric_limits<R>::quiet_NaN(), std::numeric_limits<R>::quiet_NaN());
  else return std::numeric_limits<R>::quiet_NaN();
}

// The device probe, taken once per process.
const linalg::DeviceProbe& device_probe();

// Base fixture for *_gpu_test binaries: skips with the probe's reason when no CUDA device exists,
// and otherwise offers one CUDA Exec shared by the whole binary.
class GpuTest : public ::testing::Test {
 public:
  // The shared CUDA Exec; call only after SetUp decided not to skip.
  static linalg::Exec& gpu();

 protected:
  void SetUp() override;
};

}  // namespace covflow::test

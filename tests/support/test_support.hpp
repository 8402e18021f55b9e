// Shared test helpers: printed seeds, random inputs, norms, and the fixture that skips GPU tests
// (with the reason) on a host without a CUDA device — or fails them, where COVFLOW_REQUIRE_GPU
// says a device must be there.
#pragma once

#include <gtest/gtest.h>

#include <complex>
#include <functional>
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

// True when the environment variable COVFLOW_REQUIRE_GPU is set to anything but "" or "0". The GPU
// host's runs set it: there a GPU test that finds no device has not tested anything, and must not
// pass as skipped.
bool gpu_required();

// The failure message for a GPU test that cannot run, under gpu_required(): `reason`, and why
// that is a failure rather than a skip.
std::string gpu_required_message(const std::string& reason);

// Ends the calling test body (or fixture SetUp) of a GPU test that cannot run for `reason`: a skip
// with that reason, or, under COVFLOW_REQUIRE_GPU, a fatal failure with the same reason. The
// switch keeps a caller's `else` from binding to the macro's own `if` (GoogleTest's own guard).
#define COVFLOW_SKIP_GPU_TEST(reason)                                                             \
  switch (0)                                                                                      \
  case 0:                                                                                         \
  default:                                                                                        \
    if (::covflow::test::gpu_required()) GTEST_FAIL() << ::covflow::test::gpu_required_message(reason); \
    else GTEST_SKIP() << (reason)

// COVFLOW_SKIP_GPU_TEST with the probe's reason when this host has no CUDA device; nothing when it
// has one. For GPU tests that do not derive from GpuTest.
#define COVFLOW_SKIP_WITHOUT_DEVICE()                          \
  if (::covflow::test::device_probe().available()) {          \
  } else                                                       \
    COVFLOW_SKIP_GPU_TEST(::covflow::test::device_probe().reason)

// Runs `call`, which must throw linalg::InvalidArgument with `fragment` in its message; a
// GoogleTest failure naming what was expected otherwise (no error, or another message).
void expect_invalid_argument(const std::function<void()>& call, const std::string& fragment);

// Base fixture for *_gpu_test binaries: skips with the probe's reason when no CUDA device exists
// (fails instead under COVFLOW_REQUIRE_GPU), and otherwise offers one CUDA Exec shared by the
// whole binary.
class GpuTest : public ::testing::Test {
 public:
  // The shared CUDA Exec; call only after SetUp decided not to skip.
  static linalg::Exec& gpu();

 protected:
  void SetUp() override;
};

}  // namespace covflow::test

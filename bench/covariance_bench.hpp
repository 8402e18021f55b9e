#pragma once

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::bench {

// gpu is null when there is no device (or --no-gpu): only the CPU backend is timed.
nlohmann::json run_covariance_bench(const Settings& settings, linalg::Exec* gpu, linalg::Exec& cpu);

}  // namespace covflow::bench

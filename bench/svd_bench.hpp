#pragma once

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::bench {

nlohmann::json run_svd_bench(const Settings& settings, linalg::Exec* gpu, linalg::Exec& cpu);

}  // namespace covflow::bench

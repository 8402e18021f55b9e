#pragma once

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::bench {

nlohmann::json run_rsvd_bench(const Settings& settings, linalg::Exec* gpu);

}  // namespace covflow::bench

#pragma once

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::bench {

// H² build and compression (CPU), memory against dense, and the GPU matvec for 1 and 16 vectors
// against the dense cuBLAS product (h2_bench.cpp). Rows: --shape N/TOL; --dtype cf64 (default) or f64.
nlohmann::json run_h2_bench(const Settings& settings, linalg::Exec* gpu);

}  // namespace covflow::bench

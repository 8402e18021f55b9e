#pragma once

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::bench {

// H² construction and compression on the CPU and the GPU, memory against dense, and the GPU matvec
// for 1 and 16 vectors against the dense cuBLAS product (h2_bench.cpp), for the exponential kernel
// on a perturbed grid and the clutter kernel on a planar array. Rows: --shape [exp|clutter/]N/TOL;
// --dtype cf64 (default) or f64 (exponential rows only).
nlohmann::json run_h2_bench(const Settings& settings, linalg::Exec* gpu);

}  // namespace covflow::bench

#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::bench {

struct TinyBenchOptions {
  long long count = 0;  // matrices per batch; 0: 1 048 576, or 16 384 under --quick
  std::vector<int> sizes = {4, 8, 16, 32};
  std::vector<std::string> dtypes = {"f32", "f64", "cf32", "cf64"};
  std::vector<std::string> routines = {"getrf", "getrs", "potrf", "potrs", "geqrf"};
  std::vector<int> nrhs = {1, 16};  // right-hand sides of the getrs and potrs rows
  unsigned long long seed = 2026;
};

// `gpu`: the CUDA context, or null (nothing is timed then: every row is covflow's CUDA backend
// against cuBLAS/cuSOLVER).
nlohmann::json run_tiny_bench(const Settings& settings, const TinyBenchOptions& options, linalg::Exec* gpu);

}  // namespace covflow::bench

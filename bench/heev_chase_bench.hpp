#pragma once

#include <cuda_runtime.h>

#include "bench_common.hpp"

namespace covflow::bench {

// Times the QR iteration of Cosnuau 2014, §3, alone for each arithmetic policy (CUDA builds only):
// the diagnostic that chooses the policy heev uses, so the choice can be re-measured on other GPUs.
void run_heev_chase_bench(const Settings& settings);

// heev_chase_kernels.cu
const char* chase_policy_name(int policy);  // null past the last policy
void launch_chase_only(int policy, int n, int count, const double* d, const double* e, long long* rotations,
                       cudaStream_t stream);

}  // namespace covflow::bench

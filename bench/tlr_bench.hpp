#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::bench {

nlohmann::json run_tlr_bench(const Settings& settings, linalg::Exec* gpu);

#if COVFLOW_HAS_CUDA
// The benchmark's matrices, column-major n × n, written on `stream` (tlr_bench_kernels.cu).
// Exponential covariance on 2-D points p (n × 2, device, in the cluster order the tiles follow),
// made complex Hermitian by a plane-wave phase: A_ij = exp(−‖p_i − p_j‖/ℓ)·e^{j·2π·k·(p_i − p_j)}
// (k = (k_x, k_y)); the phase is a diagonal unitary similarity, so ranks are the real kernel's.
template <class T>
void exponential_matrix(T* a, const double* points, std::int64_t n, double length, double kx, double ky,
                        cudaStream_t stream);
// Spatial covariance of a planar array (element positions p in wavelengths, n × 2, device):
// diffuse clutter of total power `clutter` spread uniformly in azimuth over
// [centre − width/2, centre + width/2] (degrees, elevation 0, `steps` quadrature points), two
// jammers of power `jammer` at ±jammer_deg, and unit noise: R = Σ p·a·aᴴ + I.
template <class T>
void clutter_matrix(T* a, const double* positions, std::int64_t n, double clutter, double centre_deg, double width_deg,
                    int steps, double jammer, double jammer_deg, cudaStream_t stream);
#endif

}  // namespace covflow::bench

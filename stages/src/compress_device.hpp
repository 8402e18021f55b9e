// Internal: what the compress stage's two lanes share — the layout of the per-cell numbers a frame
// leaves behind (written by the linalg calls and the stage's own reductions; on a CUDA lane in a
// device buffer copied back at once into pinned memory, on a CPU lane in host memory) — and the
// CUDA side of the stage's own reductions, behind an interface without CUDA headers
// (compress_stage.cpp builds in CPU-only builds too). compress_cuda.cu implements it; the CPU
// lane's loops in compress_stage.cpp compute the same sums.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>

#include "covflow/linalg/tlr.hpp"
#include "covflow/replay/frame.hpp"

namespace covflow::linalg {
class CudaContext;
}

namespace covflow::stages::detail {

// Byte offsets (256-byte aligned) of one frame's numbers for `cells` cells of n elements, `slots`
// stored tiles per cell, `looks` looks and `h2_levels` levels of the H² tree (0: no H² form on
// the device):
//   ranks        int32[cells × slots]     every stored tile's rank (tlr_compress)
//   h2_ranks     int32[cells × h2_levels] each level's rank of the cell's H² form (H2DensePlan)
//   h2_status    int32[cells]             0, or why the cell's H² form was not made
//   tlr_info     TlrInfo[cells]           tlr_compress's status per cell
//   factor_info  TlrInfo[cells]           tlr_potrf's status per cell
//   eigenvalues  double[cells × n]        heev's, ascending
//   heev_info    int32[cells]
//   potrf_info   int32[cells]             the dense factor's
//   err2, norm2  double[cells]            ‖R − R̃_tlr‖_F² and ‖R‖_F²
//   g_dense      complex double[cells × looks]   aᴴz with z = R⁻¹a (dense factor)
//   g_tlr        complex double[cells × looks]   aᴴz with z = R̃⁻¹a (TLR factor)
//   q_tlr        double[cells × looks]           zᴴRz with the TLR solution z
//   h2_err2      double[cells]            ‖R − R̃_h2‖_F² (and h2_norm2, ‖R‖_F² again, which the
//   h2_norm2     double[cells]            reduction writes beside it)
// On a CUDA lane, ranks, h2_ranks and h2_status come back by copies of their own (from the TLR
// storage and the H² plan); the rest, from tlr_info on, is one copy of the device numbers.
struct CompressLayout {
  std::size_t ranks = 0, h2_ranks = 0, h2_status = 0, tlr_info = 0, factor_info = 0, eigenvalues = 0, heev_info = 0,
              potrf_info = 0, err2 = 0, norm2 = 0, g_dense = 0, g_tlr = 0, q_tlr = 0, h2_err2 = 0, h2_norm2 = 0, bytes = 0;
  static CompressLayout of(std::size_t cells, std::size_t slots, std::size_t n, std::size_t looks,
                           std::size_t h2_levels = 0) {
    auto up = [](std::size_t b) { return (b + 255) / 256 * 256; };
    CompressLayout l;
    l.h2_ranks = up(4 * cells * slots);
    l.h2_status = up(l.h2_ranks + 4 * cells * h2_levels);
    l.tlr_info = up(l.h2_status + 4 * cells);
    l.factor_info = up(l.tlr_info + sizeof(linalg::TlrInfo) * cells);
    l.eigenvalues = up(l.factor_info + sizeof(linalg::TlrInfo) * cells);
    l.heev_info = up(l.eigenvalues + 8 * cells * n);
    l.potrf_info = up(l.heev_info + 4 * cells);
    l.err2 = up(l.potrf_info + 4 * cells);
    l.norm2 = up(l.err2 + 8 * cells);
    l.g_dense = up(l.norm2 + 8 * cells);
    l.g_tlr = up(l.g_dense + 16 * cells * looks);
    l.q_tlr = up(l.g_tlr + 16 * cells * looks);
    l.h2_err2 = up(l.q_tlr + 8 * cells * looks);
    l.h2_norm2 = up(l.h2_err2 + 8 * cells);
    l.bytes = up(l.h2_norm2 + 8 * cells);
    return l;
  }
};

#if COVFLOW_HAS_CUDA

using cf64 = std::complex<double>;

// Every call is issued on the context's stream; none synchronises or allocates.
// `elements` values of the frames' type (cf32 or cf64) into complex double.
void compress_widen(linalg::CudaContext& context, const void* in, replay::ElementType type, std::size_t elements,
                    cf64* out);
// Per cell (n × n each): norm2 = ‖R‖_F², and err2 = ‖R − A‖_F² when `approx` is not null.
void compress_frobenius(linalg::CudaContext& context, const cf64* r, const cf64* approx, int cells, int n,
                        double* err2, double* norm2);
// Every cell's n × looks right-hand sides: the looks' steering vectors (`steering`: looks × n).
void compress_load_steering(linalg::CudaContext& context, const cf64* steering, int cells, int n, int looks,
                            cf64* rhs);
// Per cell and look: g_dense = aᴴz_d, g_tlr = aᴴz_t, q_tlr = z_tᴴ·R·z_t.
void compress_beam_sums(linalg::CudaContext& context, const cf64* r, const cf64* steering, const cf64* z_dense,
                        const cf64* z_tlr, int cells, int n, int looks, cf64* g_dense, cf64* g_tlr, double* q_tlr);

#endif

}  // namespace covflow::stages::detail

// Internal: the CUDA side of the adaptive stage, behind an interface that needs no CUDA headers
// (adaptive_stage.cpp compiles in CPU-only builds too). adaptive_cuda.cu implements it.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "covflow/replay/element_type.hpp"

namespace covflow::linalg {
class CudaContext;
}

namespace covflow::stages::detail {

// Byte offsets of the packed adaptive results of `cells` cells, as the device writes them and the
// host unpacks them: cell status int32[cells], failure counts int32[2] (cells refactored after a
// failed update/downdate; cells whose factor could not be formed), weights float[cells × looks ×
// N × 2], SINR float[cells × looks], null depth float[cells × looks]. 256-byte aligned arrays.
struct AdaptiveLayout {
  std::size_t status = 0, counts = 0, weights = 0, sinr = 0, null_depth = 0, bytes = 0;
  static AdaptiveLayout of(std::size_t cells, std::size_t looks, std::size_t channels) {
    auto up = [](std::size_t b) { return (b + 255) / 256 * 256; };
    AdaptiveLayout l;
    l.counts = up(4 * cells);
    l.weights = up(l.counts + 8);
    l.sinr = up(l.weights + 8 * cells * looks * channels);
    l.null_depth = up(l.sinr + 4 * cells * looks);
    l.bytes = up(l.null_depth + 4 * cells * looks);
    return l;
  }
};

// What the beams need of the look directions and of the scenario's model (host copies).
struct BeamSetup {
  int looks = 0;
  std::vector<std::complex<double>> look_steering;  // [looks × N]
  bool has_model = false;
  std::vector<std::complex<double>> emitter_steering;  // [emitters × N]
  std::vector<double> emitter_power;                   // [emitters]
  std::vector<int> emitter_jammer;                     // [emitters]
  std::vector<int> look_emitter;                       // [looks]: emitter at the look, −1: none
  std::vector<double> look_power;                      // [looks]
};

#if COVFLOW_HAS_CUDA

struct AdaptiveDeviceParams {
  replay::ElementType type = replay::ElementType::cf64;
  int channels = 0;
  int max_cells = 0;
  int ring_columns = 0;  // per cell
  int max_chunks = 0;    // cholupdate calls per frame, at most (one info array each)
  double loading = 0.0;  // δ
  BeamSetup beams;
};

// One lane's device state and kernels; every call is issued on the context's stream.
class AdaptiveDeviceLane {
 public:
  virtual ~AdaptiveDeviceLane() = default;
  virtual void* ring() = 0;       // [max_cells × ring_columns × N], column (cell, p) at (cell·ring_columns + p)·N
  virtual void* factors() = 0;    // [max_cells × N × N]
  virtual int* chunk_info(int chunk) = 0;  // [max_cells] per cholupdate call of a frame
  // Clears this frame's failure flags and counts.
  virtual void begin_frame(int cells) = 0;
  // Snapshots first … first+count−1 of each cell of the payload (N × K per cell), times `scale`,
  // into ring columns position, position+1, … (mod ring_columns).
  virtual void write_snapshots(const void* payload, int cells, int snapshots, int first, int count, int position,
                               double scale) = 0;
  // Flags the cells whose info in the first `chunks` chunk arrays is nonzero.
  virtual void collect_failures(int chunks, int cells) = 0;

  // A frame's refactor and solve, around the linalg calls that adaptive_stage.cpp issues on the
  // same stream:
  //   form_covariance  for every cell to refactor (all, or flagged or pending), the window's
  //                    R = Σ v·vᴴ + δI over ring columns start … start+length−1 (mod ring_columns)
  //                    in double into its slot of refactor_matrices(), lower triangle; the other
  //                    cells' slots hold the identity;
  //   (linalg::potrf<cf64>, lower, on refactor_matrices() with refactor_info(), every cell)
  //   store_factors    for the same cells: potrf's info becomes the cell's status and counts, a
  //                    formed factor is rounded into factors(); the slot goes back to the identity;
  //   load_steering    every look's steering vector into each cell's columns of solutions();
  //   (linalg::potrs<T>, lower, factors() against solutions(): z = R⁻¹a per cell and look)
  //   beamform         the weights from z.
  virtual void* refactor_matrices() = 0;  // [max_cells × N × N] complex double
  virtual int* refactor_info() = 0;       // [max_cells]
  virtual void* solutions() = 0;          // [max_cells × N × looks] of the frames' type
  virtual void form_covariance(int cells, bool all, int start, int length) = 0;
  virtual void store_factors(int cells, bool all) = 0;
  virtual void load_steering(int cells) = 0;
  // Weights, SINR and null depth of every cell and look, packed as `layout` says and copied
  // asynchronously into `host_staging` (pinned, layout.bytes). The weights come from solutions().
  virtual void beamform(int cells, const AdaptiveLayout& layout, void* host_staging) = 0;
  // Marks every cell as needing a refactor (a fresh window) and its status unknown.
  virtual void reset() = 0;
  virtual void scale_cell(int cell, double factor) = 0;
};

std::unique_ptr<AdaptiveDeviceLane> make_adaptive_device_lane(linalg::CudaContext& context,
                                                              const AdaptiveDeviceParams& params);

#endif

}  // namespace covflow::stages::detail

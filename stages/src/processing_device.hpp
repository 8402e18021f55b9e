// Internal: the CUDA side of the covariance and subspace stages, behind an interface that needs
// no CUDA headers (the stage sources compile in CPU-only builds too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "covflow/replay/element_type.hpp"
#include "covflow/stages/music_math.hpp"

namespace covflow::linalg {
class CudaContext;
}

namespace covflow::stages::detail {

// Byte offsets of the packed results of `cells` cells, as the device writes them and the host
// function unpacks them: source_count int32[cells], cell_status int32[cells],
// doa float[cells × max_sources], eigenvalues float[cells × N], spectrum float[cells × points]
// (points = 0 when no spectrum is kept). Each array starts on a 256-byte boundary.
struct ResultLayout {
  std::size_t source_count = 0, cell_status = 0, doa = 0, eigenvalues = 0, spectrum = 0, bytes = 0;
  static ResultLayout of(std::size_t cells, std::size_t channels, std::size_t max_sources, std::size_t points) {
    auto up = [](std::size_t b) { return (b + 255) / 256 * 256; };
    ResultLayout l;
    l.source_count = 0;
    l.cell_status = up(l.source_count + 4 * cells);
    l.doa = up(l.cell_status + 4 * cells);
    l.eigenvalues = up(l.doa + 4 * cells * max_sources);
    l.spectrum = up(l.eigenvalues + 4 * cells * channels);
    l.bytes = up(l.spectrum + 4 * cells * points);
    return l;
  }
};

#if COVFLOW_HAS_CUDA

// R = Σ_{i<entries} w_i·ring[(head − i) mod window] + δI with w_i = λ^i / Σ_j λ^j, for the
// first `elements` elements of each entry (cells × N × N); entries are `entry_elements` apart.
// One thread per output element, on the context's stream.
void window_combine(linalg::CudaContext& context, replay::ElementType type, const void* ring,
                    std::int64_t entry_elements, int window, int head, int entries, double forgetting,
                    std::int64_t elements, int n, double loading, void* out);

// What the subspace stage does on the device after heev, for one lane.
class SubspaceDeviceLane {
 public:
  virtual ~SubspaceDeviceLane() = default;
  // From heev's eigenvalues, eigenvectors (columns, ascending) and info of `cells` cells: the
  // source counts, the MUSIC spectrum, the refined DOAs, packed as ResultLayout says into a
  // device buffer of the lane, and copied asynchronously into `host_staging` (pinned, at least
  // layout.bytes). Everything is issued on the context's stream.
  virtual void run(const void* eigenvalues, const void* eigenvectors, const int* info, int cells, double snapshots,
                   const ResultLayout& layout, void* host_staging) = 0;
};

struct SubspaceDeviceParams {
  replay::ElementType type = replay::ElementType::cf64;
  int channels = 0;
  int max_cells = 0;
  int max_sources = 0;
  bool keep_spectrum = false;
  music::Criterion criterion = music::Criterion::mdl;
  double spacing_wavelengths = 0.5;
  std::vector<double> grid_u;  // spatial frequency of every grid point, ascending
};

std::unique_ptr<SubspaceDeviceLane> make_subspace_device_lane(linalg::CudaContext& context,
                                                              const SubspaceDeviceParams& params);

#endif

}  // namespace covflow::stages::detail

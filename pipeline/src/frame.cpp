#include "covflow/pipeline/frame.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace covflow::pipeline {

std::size_t FrameShape::max_payload_bytes() const {
  const std::size_t n = channels, k = snapshots, c = cells;
  return std::max(n * k * c, n * n * c) * element_bytes();
}

void FrameResults::reserve(const FrameShape& shape) {
  source_count.assign(shape.cells, -1);
  doa_deg.assign(std::size_t(shape.cells) * shape.max_sources, std::numeric_limits<float>::quiet_NaN());
  spectrum_db.assign(std::size_t(shape.cells) * shape.spectrum_points, std::numeric_limits<float>::quiet_NaN());
  eigenvalues.assign(std::size_t(shape.cells) * shape.channels, std::numeric_limits<float>::quiet_NaN());
  cell_status.assign(shape.cells, 0);
  const std::size_t beams = std::size_t(shape.cells) * shape.looks;
  weights.assign(beams * shape.channels, std::complex<float>(std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::quiet_NaN()));
  sinr_db.assign(beams, std::numeric_limits<float>::quiet_NaN());
  null_depth_db.assign(beams, std::numeric_limits<float>::quiet_NaN());
  beam_pattern_db.assign(beams * shape.beam_pattern_points, std::numeric_limits<float>::quiet_NaN());
  const std::size_t compressed = shape.compress ? shape.cells : 0;
  compress.format.assign(compressed, Compressed::not_computed);
  compress.rank_min.assign(compressed, 0);
  compress.rank_max.assign(compressed, 0);
  compress.rank_sum.assign(compressed, 0);
  compress.rank_count.assign(compressed, 0);
  compress.bytes.assign(compressed, 0);
  compress.dense_bytes = 0;
  compress.error.assign(compressed, std::numeric_limits<float>::quiet_NaN());
  compress.sinr_loss_db.assign(compressed * shape.compress_looks, std::numeric_limits<float>::quiet_NaN());
  cells = 0;
}

void FrameResults::clear() {
  cells = 0;
  std::fill(source_count.begin(), source_count.end(), -1);
  std::fill(doa_deg.begin(), doa_deg.end(), std::numeric_limits<float>::quiet_NaN());
  std::fill(spectrum_db.begin(), spectrum_db.end(), std::numeric_limits<float>::quiet_NaN());
  std::fill(eigenvalues.begin(), eigenvalues.end(), std::numeric_limits<float>::quiet_NaN());
  std::fill(cell_status.begin(), cell_status.end(), 0);
  std::fill(weights.begin(), weights.end(),
            std::complex<float>(std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::quiet_NaN()));
  std::fill(sinr_db.begin(), sinr_db.end(), std::numeric_limits<float>::quiet_NaN());
  std::fill(null_depth_db.begin(), null_depth_db.end(), std::numeric_limits<float>::quiet_NaN());
  std::fill(beam_pattern_db.begin(), beam_pattern_db.end(), std::numeric_limits<float>::quiet_NaN());
  std::fill(compress.format.begin(), compress.format.end(), Compressed::not_computed);
  std::fill(compress.error.begin(), compress.error.end(), std::numeric_limits<float>::quiet_NaN());
  std::fill(compress.sinr_loss_db.begin(), compress.sinr_loss_db.end(), std::numeric_limits<float>::quiet_NaN());
}

}  // namespace covflow::pipeline

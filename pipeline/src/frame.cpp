#include "covflow/pipeline/frame.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

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

namespace {

// Copies cells [0, count) of `part` (per-cell rows of `part`'s width) to cells [first, first +
// count) of `whole`: both are sized for their shape's cells, with the same width per cell.
template <class T>
void place_rows(std::vector<T>& whole, std::size_t whole_cells, const std::vector<T>& part, std::size_t part_cells,
                std::uint32_t first, std::uint32_t count, const char* what) {
  if (part.empty() && whole.empty()) return;
  const std::size_t width = part_cells == 0 ? 0 : part.size() / part_cells;
  if (part_cells == 0 || whole_cells == 0 || width * part_cells != part.size() || width * whole_cells != whole.size() ||
      count > part_cells || std::size_t(first) + count > whole_cells)
    throw std::logic_error(std::string("FrameResults::place_cells: ") + what + " of " + std::to_string(part.size()) +
                           " for " + std::to_string(part_cells) + " cells does not go to cells " + std::to_string(first) +
                           "+" + std::to_string(count) + " of " + std::to_string(whole.size()) + " for " +
                           std::to_string(whole_cells));
  std::copy_n(part.begin(), width * count, whole.begin() + std::ptrdiff_t(width * first));
}

}  // namespace

void FrameResults::place_cells(const FrameResults& part, std::uint32_t first, std::uint32_t count) {
  const std::size_t whole_cells = source_count.size(), part_cells = part.source_count.size();
  place_rows(source_count, whole_cells, part.source_count, part_cells, first, count, "source_count");
  place_rows(doa_deg, whole_cells, part.doa_deg, part_cells, first, count, "doa_deg");
  place_rows(spectrum_db, whole_cells, part.spectrum_db, part_cells, first, count, "spectrum_db");
  place_rows(eigenvalues, whole_cells, part.eigenvalues, part_cells, first, count, "eigenvalues");
  place_rows(cell_status, whole_cells, part.cell_status, part_cells, first, count, "cell_status");
  place_rows(weights, whole_cells, part.weights, part_cells, first, count, "weights");
  place_rows(sinr_db, whole_cells, part.sinr_db, part_cells, first, count, "sinr_db");
  place_rows(null_depth_db, whole_cells, part.null_depth_db, part_cells, first, count, "null_depth_db");
  place_rows(beam_pattern_db, whole_cells, part.beam_pattern_db, part_cells, first, count, "beam_pattern_db");
  const std::size_t whole_compressed = compress.format.size(), part_compressed = part.compress.format.size();
  if (whole_compressed > 0 || part_compressed > 0) {
    place_rows(compress.format, whole_compressed, part.compress.format, part_compressed, first, count, "compress.format");
    place_rows(compress.rank_min, whole_compressed, part.compress.rank_min, part_compressed, first, count, "compress.rank_min");
    place_rows(compress.rank_max, whole_compressed, part.compress.rank_max, part_compressed, first, count, "compress.rank_max");
    place_rows(compress.rank_sum, whole_compressed, part.compress.rank_sum, part_compressed, first, count, "compress.rank_sum");
    place_rows(compress.rank_count, whole_compressed, part.compress.rank_count, part_compressed, first, count, "compress.rank_count");
    place_rows(compress.bytes, whole_compressed, part.compress.bytes, part_compressed, first, count, "compress.bytes");
    place_rows(compress.error, whole_compressed, part.compress.error, part_compressed, first, count, "compress.error");
    place_rows(compress.sinr_loss_db, whole_compressed, part.compress.sinr_loss_db, part_compressed, first, count,
               "compress.sinr_loss_db");
    compress.dense_bytes = std::max(compress.dense_bytes, part.compress.dense_bytes);
  }
  if (part.cells > 0) cells = std::max(cells, first + std::min(part.cells, count));
}

}  // namespace covflow::pipeline

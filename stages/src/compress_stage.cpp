// The compress stage (docs/stages.md, "compress"; the forms and formulas are in
// compress_stage.hpp). This file issues the linalg calls of both lanes — tlr_compress / tlr_expand
// (A. Charara, D. Keyes, H. Ltaief, "Tile Low-Rank GEMM Using Batched Operations on GPUs",
// Euro-Par 2018, §4's format), heev, potrf / potrs, tlr_potrf / tlr_potrs, and h2_from_dense /
// h2_expand (CPU lane) or H2DensePlan (CUDA lane) — and the CPU lane's
// reductions; compress_cuda.cu holds the CUDA lane's. Both lanes leave a frame's numbers in the
// same layout (compress_device.hpp), from which finish() makes the results on the host: the
// lowrank form's rank from the eigenvalues, the choice of form, bytes and SINR loss.
#include "covflow/stages/compress_stage.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "compress_device.hpp"
#include "covflow/linalg/h2.hpp"
#include "covflow/linalg/heev.hpp"
#include "covflow/linalg/solve.hpp"
#include "covflow/linalg/tlr.hpp"
#include "covflow/pipeline/logging.hpp"
#include "covflow/stages/scenario.hpp"
#include "frame_checks.hpp"

#if COVFLOW_HAS_CUDA
#include <cuda_runtime.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::stages {

using linalg::cf64;

namespace {

constexpr std::size_t kDescriptorBytes = 256;

// Descriptor at the start of a CUDA lane's staging buffer, written by run() and read by collect().
struct NumbersCopy {
  const pipeline::FrameSlot* frame;
  std::uint64_t sequence;
  std::uint32_t cells;
};
static_assert(sizeof(NumbersCopy) <= kDescriptorBytes);

// One cell's H² form: built or not, its measured error², bytes and level ranks (a CPU lane fills
// it in run(), a CUDA lane in finish() from the numbers copied back).
struct H2Cell {
  bool built = false;
  double err2 = 0.0;
  std::uint64_t bytes = 0;
  std::int32_t rank_min = 0, rank_max = 0;
  std::int64_t rank_sum = 0, rank_count = 0;
};

}  // namespace

struct CompressStage::Lane {
  pipeline::FrameShape shape;
  bool cuda = false;
  int n = 0;
  int looks = 0;
  bool tlr = false, lowrank = false, h2 = false;
  linalg::TlrShape tlr_shape;  // for shape.cells matrices
  detail::CompressLayout layout;  // for shape.cells
  std::vector<cf64> steering;  // [looks × n]
  std::size_t tlr_bytes = 0, tlr_workspace_bytes = 0;

  // H²: the elements' positions (point i's h2_dim coordinates at i·h2_dim), the construction's
  // options, one cell's expansion (CPU lane), and each cell's outcome.
  std::vector<double> h2_points;
  int h2_dim = 1;
  linalg::H2Options h2_options;
  std::vector<cf64> h2_expanded;  // n × n
  std::vector<H2Cell> h2_cells;   // [cells]

  // CPU lane.
  std::vector<cf64> r, dense, z_dense, z_tlr;  // [cells × n × n], [cells × n × n], [cells × n × looks] × 2
  std::vector<std::byte> tlr_storage, tlr_workspace;
  std::vector<std::byte> numbers;  // layout.bytes

#if COVFLOW_HAS_CUDA
  linalg::cuda::DeviceBuffer<cf64> device_r, device_dense, device_z_dense, device_z_tlr, device_steering;
  linalg::cuda::DeviceBuffer<std::byte> device_tlr, device_tlr_workspace, device_numbers;
  linalg::cuda::PinnedBuffer<std::byte> staging;  // a descriptor, then layout.bytes
  // H² on the device: the trees, index lists, result storage and scratch for shape.cells cells,
  // made once in prepare().
  linalg::H2DensePlan<cf64> h2_plan;
#endif
};

namespace {

// ---- the CPU lane's reductions (compress_cuda.cu computes the same on the device) -------------

void frobenius_cpu(linalg::ThreadPool& pool, const cf64* r, const cf64* approx, int cells, int n, double* err2,
                   double* norm2) {
  const std::size_t nn = std::size_t(n) * n;
  pool.parallel_for(std::size_t(cells), [&](std::size_t c, unsigned) {
    double norm = 0.0, err = 0.0;
    for (std::size_t i = 0; i < nn; ++i) {
      norm += std::norm(r[c * nn + i]);
      if (approx != nullptr) err += std::norm(r[c * nn + i] - approx[c * nn + i]);
    }
    norm2[c] = norm;
    if (approx != nullptr) err2[c] = err;
  });
}

void load_steering_cpu(const std::vector<cf64>& steering, int cells, cf64* rhs) {
  for (int c = 0; c < cells; ++c) std::copy(steering.begin(), steering.end(), rhs + std::size_t(c) * steering.size());
}

void beam_sums_cpu(linalg::ThreadPool& pool, const cf64* r, const std::vector<cf64>& steering, const cf64* z_dense,
                   const cf64* z_tlr, int cells, int n, int looks, cf64* g_dense, cf64* g_tlr, double* q_tlr) {
  const std::size_t nn = std::size_t(n) * n;
  pool.parallel_for(std::size_t(cells) * looks, [&](std::size_t beam, unsigned) {
    const std::size_t cell = beam / looks, look = beam % looks;
    const cf64* a = steering.data() + look * n;
    const cf64* zd = z_dense + beam * n;
    const cf64* zt = z_tlr + beam * n;
    const cf64* rc = r + cell * nn;
    cf64 gd = 0.0, gt = 0.0;
    double q = 0.0;
    for (int i = 0; i < n; ++i) {
      gd += std::conj(a[i]) * zd[i];
      gt += std::conj(a[i]) * zt[i];
    }
    for (int j = 0; j < n; ++j) {
      cf64 rz = 0.0;  // (R·z)_j = Σ_i R(j, i)·z_i = Σ_i conj(R(i, j))·z_i (Hermitian), reading column j
      for (int i = 0; i < n; ++i) rz += std::conj(rc[i + std::size_t(j) * n]) * zt[i];
      q += (std::conj(zt[j]) * rz).real();
    }
    g_dense[beam] = gd;
    g_tlr[beam] = gt;
    q_tlr[beam] = q;
  });
}

// ---- the lowrank form from the eigenvalues -----------------------------------------------------

// R̃ = σ²I + Σ_{i<r} (λ_i − σ²)·u_i·u_iᴴ over the r largest eigenvalues, σ² the mean of the other
// n − r: its error² is the spread Σ (λ_i − σ²)² of those n − r, which grows as r falls. Welford's
// running mean and sum of squared deviations, adding the eigenvalues from the smallest up, give it
// for every r without cancellation; r is the least whose error² ≤ (τ·‖R‖_F)².
struct LowRank {
  int rank = 0;
  double error2 = 0.0;
};
LowRank lowrank_of(const double* ascending, int n, double allowed2) {
  LowRank best{n, 0.0};
  double mean = 0.0, spread = 0.0;
  for (int m = 1; m <= n; ++m) {  // the m smallest are the noise part
    const double x = ascending[m - 1];
    const double delta = x - mean;
    mean += delta / m;
    spread += delta * (x - mean);
    if (!(spread <= allowed2)) break;
    best = {n - m, spread};
  }
  return best;
}

// Bytes of the lowrank form in complex double: U (n × r), d (r reals), σ².
std::uint64_t lowrank_bytes(int n, int rank) { return std::uint64_t(n) * rank * 16 + std::uint64_t(rank) * 8 + 8; }

// Bytes the TLR form of one cell takes at its ranks (tlr.hpp's compact formula, Hermitian: the
// tiles below the diagonal only), with the range and sum of those ranks.
struct TlrCell {
  std::uint64_t bytes = 0;
  std::int32_t rank_min = 0, rank_max = 0;
  std::int64_t rank_sum = 0, rank_count = 0;
};
TlrCell tlr_cell(const linalg::TlrShape& shape, const std::int32_t* ranks) {
  TlrCell out;
  const std::int64_t nt = shape.tiles();
  for (std::int64_t i = 0; i < nt; ++i) out.bytes += std::uint64_t(shape.rows(i) * shape.rows(i)) * 16;
  for (std::int64_t i = 1; i < nt; ++i)
    for (std::int64_t j = 0; j < i; ++j) {
      const std::int32_t k = ranks[shape.slot(i, j)];
      out.bytes += std::uint64_t((shape.rows(i) + shape.rows(j)) * k) * 16;
      out.rank_min = out.rank_count == 0 ? k : std::min(out.rank_min, k);
      out.rank_max = out.rank_count == 0 ? k : std::max(out.rank_max, k);
      out.rank_sum += k;
      ++out.rank_count;
    }
  return out;
}

}  // namespace

CompressStage::CompressStage(const CompressSettings& settings) : settings_(settings) {
  const auto& c = settings_.config;
  if (!(c.tolerance > 0.0 && c.tolerance < 1.0)) throw std::invalid_argument("compress stage: the tolerance lies in (0, 1)");
  if (c.tile < 1) throw std::invalid_argument("compress stage: the tile size must be at least 1");
  if (c.max_rank < 0 || c.max_rank > c.tile)
    throw std::invalid_argument("compress stage: max_rank lies in [0, tile] (0: tile / 2)");
  for (double look : c.looks_deg)
    if (!(look >= -90.0 && look <= 90.0)) throw std::invalid_argument("compress stage: look directions lie in [-90, 90] degrees");
  if ((c.format == config::CompressFormat::lowrank || c.format == config::CompressFormat::h2) && !c.looks_deg.empty())
    throw std::invalid_argument("compress stage: the MVDR looks need the TLR factor, which format " +
                                std::string(config::name(c.format)) + " does not make");
  if (c.leaf_size < 1) throw std::invalid_argument("compress stage: the H² leaf size must be at least 1");
  if (!(c.eta > 0.0) || !std::isfinite(c.eta)) throw std::invalid_argument("compress stage: the H² η must be positive");
  if (!(settings_.spacing_wavelengths > 0.0) || !std::isfinite(settings_.spacing_wavelengths))
    throw std::invalid_argument("compress stage: the element spacing must be positive");
}

CompressStage::~CompressStage() = default;

CompressStage::Lane& CompressStage::lane(const linalg::Exec& exec) const { return lanes_.get(exec, "compress stage"); }

CompressCounters CompressStage::counters() const {
  return {frames_.load(),         cells_.load(),           tlr_cells_.load(),    lowrank_cells_.load(),
          h2_cells_.load(),       over_tolerance_.load(), non_finite_cells_.load(), mvdr_failures_.load()};
}

void CompressStage::reset(linalg::Exec&) {
  // Nothing carries from frame to frame; the warm-up's frames are not the radar's.
  for (auto* counter : {&frames_, &cells_, &tlr_cells_, &lowrank_cells_, &h2_cells_, &over_tolerance_,
                        &non_finite_cells_, &mvdr_failures_, &problem_frames_})
    counter->store(0);
}

void CompressStage::prepare(const pipeline::FrameShape& shape, linalg::Exec& exec) {
  const auto& c = settings_.config;
  if (shape.element_type != replay::ElementType::cf32 && shape.element_type != replay::ElementType::cf64)
    throw std::invalid_argument("compress stage: frames must hold cf32 or cf64 samples");
  if (shape.channels < 1) throw std::invalid_argument("compress stage: the array needs at least one element");
  if (!shape.compress || shape.compress_looks != c.looks_deg.size())
    throw std::invalid_argument("compress stage: the frame shape does not keep the stage's results (" +
                                std::to_string(c.looks_deg.size()) + " looks)");
  const auto& positions = settings_.element_positions;
  if (!positions.empty() && positions.size() != shape.channels)
    throw std::invalid_argument("compress stage: the array has " + std::to_string(positions.size()) +
                                " elements, the frames " + std::to_string(shape.channels));
  auto state = std::make_unique<Lane>();
  state->shape = shape;
  state->cuda = exec.is_cuda();
  state->n = static_cast<int>(shape.channels);
  state->looks = static_cast<int>(c.looks_deg.size());
  using config::CompressFormat;
  const bool automatic = c.format == CompressFormat::automatic;
  state->tlr = automatic || c.format == CompressFormat::tlr;
  state->lowrank = automatic || c.format == CompressFormat::lowrank;
  state->h2 = automatic || c.format == CompressFormat::h2;
  if (state->h2) {
    if (positions.empty()) {
      for (std::int64_t i = 0; i < std::int64_t(shape.channels); ++i)
        state->h2_points.push_back(double(i) * settings_.spacing_wavelengths);
      state->h2_dim = 1;
    } else {
      // The coordinates that vary over the array (a planar array in the y–z plane gives 2-D points
      // (y, z)): a constant coordinate would only widen every cluster's box in the tree.
      std::vector<double config::ElementPosition::*> axes;
      for (auto axis : {&config::ElementPosition::x, &config::ElementPosition::y, &config::ElementPosition::z})
        if (std::any_of(positions.begin(), positions.end(), [&](const auto& p) { return p.*axis != positions[0].*axis; }))
          axes.push_back(axis);
      if (axes.empty()) axes.push_back(&config::ElementPosition::x);
      state->h2_dim = static_cast<int>(axes.size());
      for (const auto& p : positions)
        for (auto axis : axes) state->h2_points.push_back(p.*axis);
    }
    state->h2_options.leaf_size = c.leaf_size;
    state->h2_options.eta = c.eta;
    if (!state->cuda) state->h2_expanded.assign(std::size_t(shape.channels) * shape.channels, cf64(0.0));
    state->h2_cells.assign(std::size_t(shape.cells), H2Cell{});
  }
#if COVFLOW_HAS_CUDA
  // The H² plan: the trees and index lists of the element positions, and every buffer of the
  // construction for shape.cells cells (it reserves the workspace its QR, SVD and expansion take).
  if (state->h2 && state->cuda)
    state->h2_plan = linalg::H2DensePlan<cf64>(exec, state->h2_points, state->h2_dim, state->h2_options,
                                               std::int64_t(shape.cells));
  const std::size_t h2_levels = state->h2 && state->cuda ? state->h2_plan.shape().rank.size() : 0;
#else
  const std::size_t h2_levels = 0;
#endif
  const std::int64_t n = shape.channels, cells = shape.cells;
  const std::int64_t tile = std::min<std::int64_t>(c.tile, n);
  const std::int64_t max_rank = c.max_rank == 0 ? std::max<std::int64_t>(1, tile / 2) : std::min<std::int64_t>(c.max_rank, tile);
  state->tlr_shape = linalg::TlrShape{n, tile, max_rank, cells, /*hermitian=*/true};
  state->layout = detail::CompressLayout::of(cells, state->tlr ? state->tlr_shape.slots() : 0, n, state->looks, h2_levels);
  for (double look : c.looks_deg) {
    const auto a = positions.empty() ? steering_vector(n, settings_.spacing_wavelengths, look, 0.0)
                                     : steering_vector(std::span(positions), look, 0.0);
    state->steering.insert(state->steering.end(), a.begin(), a.end());
  }

  const std::size_t matrices = std::size_t(cells) * n * n, rhs = std::size_t(cells) * n * state->looks;
  // The CUDA lane expands the H² forms into the dense buffer too (the CPU lane, one cell at a time,
  // into h2_expanded).
  const bool dense_work = state->tlr || state->lowrank || state->looks > 0 || (state->h2 && state->cuda);
  if (state->tlr) {
    state->tlr_bytes = linalg::tlr_bytes(linalg::ElementType::cf64, state->tlr_shape);
    std::size_t ws = linalg::tlr_compress_workspace<cf64>(exec, state->tlr_shape);
    if (state->looks > 0) {
      ws = std::max(ws, linalg::tlr_potrf_workspace<cf64>(exec, state->tlr_shape));
      ws = std::max(ws, linalg::tlr_potrs_workspace<cf64>(exec, state->tlr_shape, state->looks));
    }
    state->tlr_workspace_bytes = ws;
  }
  std::size_t workspace = 0;
  if (state->lowrank) workspace = std::max(workspace, linalg::heev_workspace<cf64>(exec, n, cells));
  if (state->looks > 0) {
    workspace = std::max(workspace, linalg::potrf_workspace<cf64>(exec, n, cells));
    workspace = std::max(workspace, linalg::potrs_workspace<cf64>(exec, n, state->looks, cells));
  }
  exec.workspace().reserve(workspace);
  if (state->cuda) {
#if COVFLOW_HAS_CUDA
    using linalg::cuda::DeviceBuffer;
    state->device_r = DeviceBuffer<cf64>(matrices);
    if (dense_work) state->device_dense = DeviceBuffer<cf64>(matrices);
    state->device_z_dense = DeviceBuffer<cf64>(rhs);
    state->device_z_tlr = DeviceBuffer<cf64>(rhs);
    state->device_steering = DeviceBuffer<cf64>(state->steering.size());
    state->device_steering.upload(state->steering, exec.cuda_context().stream());
    // The TLR storage's parts are 256-byte aligned within it; cudaMalloc's alignment is larger.
    state->device_tlr = DeviceBuffer<std::byte>(state->tlr_bytes);
    state->device_tlr_workspace = DeviceBuffer<std::byte>(state->tlr_workspace_bytes);
    state->device_numbers = DeviceBuffer<std::byte>(state->layout.bytes);
    state->device_numbers.fill_bytes(0, exec.cuda_context().stream());
    state->staging = linalg::cuda::PinnedBuffer<std::byte>(kDescriptorBytes + state->layout.bytes);
    new (state->staging.data()) NumbersCopy{};  // no frame yet: collect() finds nothing to unpack
    COVFLOW_CUDA_TRY(cudaStreamSynchronize(exec.cuda_context().stream()));  // the upload, before `steering` may go
#endif
  } else {
    state->r.assign(matrices, cf64(0.0));
    if (dense_work) state->dense.assign(matrices, cf64(0.0));
    state->z_dense.assign(rhs, cf64(0.0));
    state->z_tlr.assign(rhs, cf64(0.0));
    // std::vector<std::byte>'s storage is aligned for any fundamental type: enough for tlr_view's
    // parts, which it places at multiples of 256 bytes from the start.
    state->tlr_storage.assign(state->tlr_bytes, std::byte{0});
    state->tlr_workspace.assign(state->tlr_workspace_bytes, std::byte{0});
    state->numbers.assign(state->layout.bytes, std::byte{0});
  }
  lanes_.set(exec, std::move(state));
}

void CompressStage::run(pipeline::FrameSlot& frame, linalg::Exec& exec) {
  constexpr std::string_view stage = "compress";
  Lane& state = lane(exec);
  const pipeline::FrameShape& shape = state.shape;
  detail::require_fits(stage, frame, shape);
  if (settings_.covariance_from_payload && frame.header.kind != replay::PayloadKind::covariance)
    throw detail::shape_error(stage, frame, "snapshot frame, but no covariance stage runs before this stage");
  auto& results = frame.results;
  const int n = state.n, cells = static_cast<int>(frame.header.count), looks = state.looks;
  if (results.compress.format.size() < std::size_t(cells) || results.cell_status.size() < std::size_t(cells) ||
      results.compress.sinr_loss_db.size() < std::size_t(cells) * looks)
    throw std::logic_error("compress stage: the slot's results are not reserved for the frame shape");
  const std::size_t nn = std::size_t(n) * n, elements = nn * cells;
  const std::size_t element_bytes = shape.element_bytes();

  // Every pointer below lives where the Exec runs.
  const void* covariance = nullptr;
  cf64 *r = nullptr, *dense = nullptr, *z_dense = nullptr, *z_tlr = nullptr;
  std::byte *tlr_storage = nullptr, *tlr_workspace = nullptr, *numbers = nullptr;
  if (state.cuda) {
    covariance = detail::device_array<std::byte>(
        settings_.covariance_from_payload ? frame.device.payload : frame.device.covariance, stage,
        settings_.covariance_from_payload ? "payload" : "covariance");
#if COVFLOW_HAS_CUDA
    r = state.device_r.data();
    dense = state.device_dense.data();
    z_dense = state.device_z_dense.data();
    z_tlr = state.device_z_tlr.data();
    tlr_storage = state.device_tlr.data();
    tlr_workspace = state.device_tlr_workspace.data();
    numbers = state.device_numbers.data();
#endif
  } else {
    covariance = detail::host_array<std::byte>(
        settings_.covariance_from_payload ? frame.host.payload : frame.host.covariance, elements * element_bytes, stage,
        settings_.covariance_from_payload ? "payload" : "covariance");
    r = state.r.data();
    dense = state.dense.data();
    z_dense = state.z_dense.data();
    z_tlr = state.z_tlr.data();
    tlr_storage = state.tlr_storage.data();
    tlr_workspace = state.tlr_workspace.data();
    numbers = state.numbers.data();
  }
  // The layout is prepared for the shape's cells; a frame of fewer fills the front of each array.
  const detail::CompressLayout& at = state.layout;
  auto* tlr_info = reinterpret_cast<linalg::TlrInfo*>(numbers + at.tlr_info);
  auto* factor_info = reinterpret_cast<linalg::TlrInfo*>(numbers + at.factor_info);
  auto* eigenvalues = reinterpret_cast<double*>(numbers + at.eigenvalues);
  auto* heev_info = reinterpret_cast<int*>(numbers + at.heev_info);
  auto* potrf_info = reinterpret_cast<int*>(numbers + at.potrf_info);
  auto* err2 = reinterpret_cast<double*>(numbers + at.err2);
  auto* norm2 = reinterpret_cast<double*>(numbers + at.norm2);
  auto* g_dense = reinterpret_cast<cf64*>(numbers + at.g_dense);
  auto* g_tlr = reinterpret_cast<cf64*>(numbers + at.g_tlr);
  auto* q_tlr = reinterpret_cast<double*>(numbers + at.q_tlr);

  auto copy_matrices = [&](cf64* to, const cf64* from) {
    if (state.cuda) {
#if COVFLOW_HAS_CUDA
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(to, from, elements * sizeof(cf64), cudaMemcpyDeviceToDevice,
                                       exec.cuda_context().stream()));
#endif
    } else {
      std::copy(from, from + elements, to);
    }
  };

  // R in complex double.
  if (state.cuda) {
#if COVFLOW_HAS_CUDA
    detail::compress_widen(exec.cuda_context(), covariance, shape.element_type, elements, r);
#endif
  } else if (shape.element_type == replay::ElementType::cf64) {
    std::memcpy(r, covariance, elements * sizeof(cf64));
  } else {
    const auto* in = static_cast<const std::complex<float>*>(covariance);
    exec.pool().parallel_for(std::size_t(cells), [&](std::size_t c, unsigned) {
      for (std::size_t i = c * nn; i < (c + 1) * nn; ++i) r[i] = cf64(in[i].real(), in[i].imag());
    });
  }
  const auto r_batch = linalg::Batch<const cf64>::packed(r, n, n, cells);
  const auto dense_batch = linalg::Batch<cf64>::packed(dense, n, n, cells);

  // tlr: compress, expand, and measure ‖R − R̃‖_F against R.
  linalg::TlrShape tlr_shape = state.tlr_shape;
  tlr_shape.count = cells;
  linalg::Tlr<cf64> tlr;
  const linalg::TlrOptions options{settings_.config.tolerance, linalg::TlrScope::matrix};
  if (state.tlr) {
    tlr = linalg::tlr_view<cf64>(tlr_shape, std::span(tlr_storage, state.tlr_bytes));
    const std::span workspace(tlr_workspace, state.tlr_workspace_bytes);
    linalg::tlr_compress<cf64>(exec, r_batch, tlr, std::span(tlr_info, cells), workspace, options);
    linalg::tlr_expand<cf64>(exec, tlr, dense_batch);
  }
  if (state.cuda) {
#if COVFLOW_HAS_CUDA
    detail::compress_frobenius(exec.cuda_context(), r, state.tlr ? dense : nullptr, cells, n, err2, norm2);
#endif
  } else {
    frobenius_cpu(exec.pool(), r, state.tlr ? dense : nullptr, cells, n, err2, norm2);
  }
  // lowrank: the eigenvalues (and vectors, U) of R.
  if (state.lowrank) {
    copy_matrices(dense, r);
    linalg::heev<cf64>(exec, dense_batch, std::span(eigenvalues, std::size_t(cells) * n), std::span(heev_info, cells));
  }
  // h2: per cell, the construction from R, then ‖R − R̃‖_F measured on its expansion. A CUDA lane
  // builds and expands every cell of the frame at once (linalg::H2DensePlan, no allocation, no
  // synchronisation); a cell with a NaN or Inf is built as zero there and reported from its norm.
  if (state.h2 && state.cuda) {
#if COVFLOW_HAS_CUDA
    state.h2_plan.build(exec, r_batch, settings_.config.tolerance);
    state.h2_plan.expand(exec, dense_batch);
    detail::compress_frobenius(exec.cuda_context(), r, dense, cells, n, reinterpret_cast<double*>(numbers + at.h2_err2),
                               reinterpret_cast<double*>(numbers + at.h2_norm2));
#endif
  } else if (state.h2) {
    for (int c = 0; c < cells; ++c) {
      H2Cell& out = state.h2_cells[std::size_t(c)];
      out = H2Cell{};
      const cf64* rc = r + std::size_t(c) * nn;
      if (!std::all_of(rc, rc + nn, [](const cf64& v) { return std::isfinite(v.real()) && std::isfinite(v.imag()); }))
        continue;  // finish() reports the cell from its norm
      linalg::H2<cf64> h;
      try {
        h = linalg::h2_from_dense<cf64>(exec, linalg::Batch<const cf64>::packed(rc, n, n, 1), state.h2_points,
                                        state.h2_dim, settings_.config.tolerance, state.h2_options);
      } catch (const linalg::InvalidArgument&) {
        throw;  // the stage's own arguments: a bug, not the cell's data
      } catch (const linalg::Error&) {
        continue;  // a node's SVD did not converge: the cell has no H² form (finish() says so)
      }
      linalg::h2_expand<cf64>(exec, h, linalg::Batch<cf64>::packed(state.h2_expanded.data(), n, n, 1));
      double err2 = 0.0;
      for (std::size_t i = 0; i < nn; ++i) err2 += std::norm(rc[i] - state.h2_expanded[i]);
      const linalg::H2Stats stats = linalg::h2_stats(h);
      out.built = true;
      out.err2 = err2;
      out.bytes = stats.total_bytes;
      for (std::size_t l = 0; l < stats.ranks.size(); ++l) {
        if (stats.coupling_blocks[l] == 0) continue;  // the levels whose bases some block uses
        const std::int32_t k = stats.ranks[l];
        out.rank_min = out.rank_count == 0 ? k : std::min(out.rank_min, k);
        out.rank_max = out.rank_count == 0 ? k : std::max(out.rank_max, k);
        out.rank_sum += k;
        ++out.rank_count;
      }
    }
  }
  // MVDR through the TLR factor, against the dense one.
  if (looks > 0) {
    copy_matrices(dense, r);
    const auto zd = linalg::Batch<cf64>::packed(z_dense, n, looks, cells);
    const auto zt = linalg::Batch<cf64>::packed(z_tlr, n, looks, cells);
    const std::span workspace(tlr_workspace, state.tlr_workspace_bytes);
    if (state.cuda) {
#if COVFLOW_HAS_CUDA
      detail::compress_load_steering(exec.cuda_context(), state.device_steering.data(), cells, n, looks, z_dense);
      detail::compress_load_steering(exec.cuda_context(), state.device_steering.data(), cells, n, looks, z_tlr);
#endif
    } else {
      load_steering_cpu(state.steering, cells, z_dense);
      load_steering_cpu(state.steering, cells, z_tlr);
    }
    linalg::potrf<cf64>(exec, linalg::Uplo::lower, dense_batch, std::span(potrf_info, cells));
    linalg::potrs<cf64>(exec, linalg::Uplo::lower, dense_batch, zd);
    linalg::tlr_potrf<cf64>(exec, tlr, std::span(factor_info, cells), workspace, options);
    linalg::tlr_potrs<cf64>(exec, tlr, zt, std::span<const linalg::TlrInfo>(factor_info, cells), workspace);
    if (state.cuda) {
#if COVFLOW_HAS_CUDA
      detail::compress_beam_sums(exec.cuda_context(), r, state.device_steering.data(), z_dense, z_tlr, cells, n, looks,
                                 g_dense, g_tlr, q_tlr);
#endif
    } else {
      beam_sums_cpu(exec.pool(), r, state.steering, z_dense, z_tlr, cells, n, looks, g_dense, g_tlr, q_tlr);
    }
  }
  const std::size_t rank_bytes = state.tlr ? std::size_t(cells) * tlr_shape.slots() * sizeof(int) : 0;
  if (state.cuda) {
#if COVFLOW_HAS_CUDA
    const cudaStream_t stream = exec.cuda_context().stream();
    std::byte* staging = state.staging.data() + kDescriptorBytes;
    if (rank_bytes > 0)
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(staging + at.ranks, tlr.rank, rank_bytes, cudaMemcpyDeviceToHost, stream));
    if (state.h2) {
      const linalg::H2DenseCells h2 = state.h2_plan.cells();
      const std::size_t levels = state.h2_plan.shape().rank.size();
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(staging + at.h2_ranks, h2.level_rank, std::size_t(cells) * levels * sizeof(int),
                                       cudaMemcpyDeviceToHost, stream));
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(staging + at.h2_status, h2.status, std::size_t(cells) * sizeof(int),
                                       cudaMemcpyDeviceToHost, stream));
    }
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(staging + at.tlr_info, numbers + at.tlr_info, at.bytes - at.tlr_info,
                                     cudaMemcpyDeviceToHost, stream));
    new (state.staging.data()) NumbersCopy{&frame, frame.sequence, static_cast<std::uint32_t>(cells)};
#endif
  } else {
    if (rank_bytes > 0) std::memcpy(numbers + at.ranks, tlr.rank, rank_bytes);
    finish(state, frame);
  }
}

#if COVFLOW_HAS_CUDA
// A CUDA lane's H² outcome per cell from the numbers copied back: built unless the plan flagged
// the cell (a NaN or Inf, or a node's SVD that did not converge); the error from the expansion's
// reduction; bytes and ranks by h2_bytes' formula at the cell's own level ranks (what h2_stats
// gives for the CPU lane's H2<cf64>), over the levels that hold coupling blocks.
void CompressStage::h2_cells_from_device(Lane& state, const std::byte* numbers, int cells) const {
  const detail::CompressLayout& at = state.layout;
  const linalg::H2DeviceShape& shape = state.h2_plan.shape();
  const std::size_t levels = shape.rank.size();
  const auto* ranks = reinterpret_cast<const std::int32_t*>(numbers + at.h2_ranks);
  const auto* status = reinterpret_cast<const std::int32_t*>(numbers + at.h2_status);
  const auto* err2 = reinterpret_cast<const double*>(numbers + at.h2_err2);
  const auto* norm2 = reinterpret_cast<const double*>(numbers + at.h2_norm2);
  for (int c = 0; c < cells; ++c) {
    H2Cell& out = state.h2_cells[std::size_t(c)];
    out = H2Cell{};
    if (status[c] != 0) continue;
    const std::span<const int> level_rank(ranks + std::size_t(c) * levels, levels);
    out.built = true;
    out.err2 = err2[c];
    out.bytes = state.h2_plan.report(level_rank, norm2[c], 0.0, settings_.config.tolerance).bytes_after;
    for (std::size_t l = 0; l < levels; ++l) {
      if (shape.coupling_count(static_cast<int>(l)) == 0) continue;
      const std::int32_t k = level_rank[l];
      out.rank_min = out.rank_count == 0 ? k : std::min(out.rank_min, k);
      out.rank_max = out.rank_count == 0 ? k : std::max(out.rank_max, k);
      out.rank_sum += k;
      ++out.rank_count;
    }
  }
}
#endif

void CompressStage::collect(pipeline::FrameSlot& frame, linalg::Exec& exec) {
#if COVFLOW_HAS_CUDA
  Lane& state = lane(exec);
  if (!state.cuda) return;
  auto* copy = reinterpret_cast<NumbersCopy*>(state.staging.data());
  if (copy->frame != &frame || copy->sequence != frame.sequence) return;  // run() issued nothing for this frame
  copy->frame = nullptr;  // unpacked once
  finish(state, frame);
#else
  (void)frame;
  (void)exec;
#endif
}

// The results of a frame from its numbers (host memory: the CPU lane's, or the CUDA lane's
// staging once the stream is through).
void CompressStage::finish(Lane& state, pipeline::FrameSlot& frame) {
  const std::byte* numbers = nullptr;
#if COVFLOW_HAS_CUDA
  if (state.cuda) numbers = state.staging.data() + kDescriptorBytes;
#endif
  if (!state.cuda) numbers = state.numbers.data();
  const detail::CompressLayout& at = state.layout;
  const auto* ranks = reinterpret_cast<const std::int32_t*>(numbers + at.ranks);
  const auto* tlr_info = reinterpret_cast<const linalg::TlrInfo*>(numbers + at.tlr_info);
  const auto* factor_info = reinterpret_cast<const linalg::TlrInfo*>(numbers + at.factor_info);
  const auto* eigenvalues = reinterpret_cast<const double*>(numbers + at.eigenvalues);
  const auto* heev_info = reinterpret_cast<const int*>(numbers + at.heev_info);
  const auto* potrf_info = reinterpret_cast<const int*>(numbers + at.potrf_info);
  const auto* err2 = reinterpret_cast<const double*>(numbers + at.err2);
  const auto* norm2 = reinterpret_cast<const double*>(numbers + at.norm2);
  const auto* g_dense = reinterpret_cast<const cf64*>(numbers + at.g_dense);
  const auto* g_tlr = reinterpret_cast<const cf64*>(numbers + at.g_tlr);
  const auto* q_tlr = reinterpret_cast<const double*>(numbers + at.q_tlr);
#if COVFLOW_HAS_CUDA
  if (state.cuda && state.h2) h2_cells_from_device(state, numbers, static_cast<int>(frame.header.count));
#endif

  using Compressed = pipeline::FrameResults::Compressed;
  auto& results = frame.results;
  auto& out = results.compress;
  const int cells = static_cast<int>(frame.header.count), n = state.n, looks = state.looks;
  const double tolerance = settings_.config.tolerance;
  const std::int64_t slots = state.tlr_shape.slots();
  out.dense_bytes = std::uint64_t(n) * n * 16;
  std::uint64_t tlr_cells = 0, lowrank_cells = 0, h2_cells = 0, over = 0, non_finite = 0, mvdr_failed = 0, unconverged = 0;
  for (int c = 0; c < cells; ++c) {
    out.format[c] = Compressed::not_computed;
    for (int l = 0; l < looks; ++l) out.sinr_loss_db[std::size_t(c) * looks + l] = std::numeric_limits<float>::quiet_NaN();
    if (!std::isfinite(norm2[c])) {
      ++non_finite;
      if (results.cell_status[c] == 0) results.cell_status[c] = linalg::status::non_finite_input;
      continue;
    }
    const double norm = std::sqrt(norm2[c]);
    // The candidates: the TLR form measured, the lowrank form from the eigenvalues.
    bool tlr_ok = false, lowrank_ok = false;
    TlrCell tlr;
    double tlr_error = 0.0;
    if (state.tlr) {
      tlr = tlr_cell(state.tlr_shape, ranks + std::size_t(c) * slots);
      tlr_error = norm > 0.0 ? std::sqrt(err2[c]) / norm : 0.0;
      tlr_ok = tlr_info[c].status == linalg::tlr_status::ok || tlr_info[c].status == linalg::tlr_status::max_rank_reached;
    }
    LowRank low;
    double low_error = 0.0;
    if (state.lowrank && heev_info[c] == 0) {
      low = lowrank_of(eigenvalues + std::size_t(c) * n, n, tolerance * tolerance * norm2[c]);
      low_error = norm > 0.0 ? std::sqrt(low.error2) / norm : 0.0;
      lowrank_ok = true;
    }
    bool h2_ok = false;
    double h2_error = 0.0;
    const H2Cell* h2 = state.h2 ? &state.h2_cells[std::size_t(c)] : nullptr;
    if (h2 != nullptr && h2->built) {
      h2_ok = true;
      h2_error = norm > 0.0 ? std::sqrt(h2->err2) / norm : 0.0;
    }
    // The form stored: the fewest bytes among the forms that meet τ (the lowrank form always does, at
    // worst rank n − 1; a tie keeps the earlier of lowrank, tlr, h2); when none does, the TLR form
    // cut at max_rank, counted over the tolerance.
    std::int8_t form = Compressed::not_computed;
    std::uint64_t fewest = std::numeric_limits<std::uint64_t>::max();
    if (lowrank_ok) {
      form = Compressed::lowrank;
      fewest = lowrank_bytes(n, low.rank);
    }
    if (tlr_ok && tlr_error <= tolerance && tlr.bytes < fewest) {
      form = Compressed::tlr;
      fewest = tlr.bytes;
    }
    if (h2_ok && h2_error <= tolerance && h2->bytes < fewest) form = Compressed::h2;
    if (form == Compressed::not_computed && tlr_ok) form = Compressed::tlr;
    if (form == Compressed::not_computed && h2_ok) form = Compressed::h2;
    if (form == Compressed::h2) {
      out.format[c] = Compressed::h2;
      out.rank_min[c] = h2->rank_min;
      out.rank_max[c] = h2->rank_max;
      out.rank_sum[c] = h2->rank_sum;
      out.rank_count[c] = h2->rank_count;
      out.bytes[c] = h2->bytes;
      out.error[c] = static_cast<float>(h2_error);
      ++h2_cells;
      if (h2_error > tolerance) ++over;
    } else if (form == Compressed::tlr) {
      out.format[c] = Compressed::tlr;
      out.rank_min[c] = tlr.rank_min;
      out.rank_max[c] = tlr.rank_max;
      out.rank_sum[c] = tlr.rank_sum;
      out.rank_count[c] = tlr.rank_count;
      out.bytes[c] = tlr.bytes;
      out.error[c] = static_cast<float>(tlr_error);
      ++tlr_cells;
      if (tlr_error > tolerance) ++over;
    } else if (form == Compressed::lowrank) {
      out.format[c] = Compressed::lowrank;
      out.rank_min[c] = out.rank_max[c] = low.rank;
      out.rank_sum[c] = low.rank;
      out.rank_count[c] = 1;
      out.bytes[c] = lowrank_bytes(n, low.rank);
      out.error[c] = static_cast<float>(low_error);
      ++lowrank_cells;
    } else {
      // No form could be made (a decomposition that failed to converge): reported, not stored.
      if (results.cell_status[c] == 0) results.cell_status[c] = linalg::status::no_convergence;
      ++unconverged;
      continue;
    }
    // SINR loss of the TLR beams: with g = aᴴz, w = z/g has wᴴa = 1 and wᴴRw = zᴴRz/|g|²; the dense
    // beam's is 1/Re(aᴴR⁻¹a).
    if (looks > 0) {
      const bool formed = potrf_info[c] == 0 && (factor_info[c].status == linalg::tlr_status::ok ||
                                                 factor_info[c].status == linalg::tlr_status::max_rank_reached);
      if (!formed) {
        ++mvdr_failed;
        continue;
      }
      for (int l = 0; l < looks; ++l) {
        const std::size_t beam = std::size_t(c) * looks + l;
        const double ratio = q_tlr[beam] * g_dense[beam].real() / std::norm(g_tlr[beam]);
        out.sinr_loss_db[beam] = static_cast<float>(10.0 * std::log10(ratio));
      }
    }
  }
  results.cells = std::max<std::uint32_t>(results.cells, static_cast<std::uint32_t>(cells));
  ++frames_;
  cells_ += tlr_cells + lowrank_cells + h2_cells;
  tlr_cells_ += tlr_cells;
  lowrank_cells_ += lowrank_cells;
  h2_cells_ += h2_cells;
  over_tolerance_ += over;
  mvdr_failures_ += mvdr_failed;
  non_finite_cells_ += non_finite;
  if (non_finite + over + mvdr_failed + unconverged > 0) {
    // The first frames with a problem, then one line each time their count passes a power of two.
    const std::uint64_t before = problem_frames_.fetch_add(1);
    if (before < 16 || std::has_single_bit(before + 1)) {
      std::string what;
      auto add = [&](std::uint64_t count, const std::string& text) {
        if (count == 0) return;
        what += (what.empty() ? "" : ", ") + std::to_string(count) + (count == 1 ? " cell " : " cells ") + text;
      };
      add(non_finite, "with a NaN or Inf, left uncompressed");
      add(unconverged, "whose decomposition did not converge, left uncompressed");
      add(over, "over the tolerance " + fmt::format("{}", tolerance) + " (a tile capped at max_rank " +
                    std::to_string(state.tlr_shape.max_rank) + ")");
      add(mvdr_failed, "without MVDR weights (a factor not positive definite)");
      pipeline::logger("stages")->warn("compress: frame {}: {}; {} frames with such cells so far", frame.sequence,
                                       what, before + 1);
    }
  }
}

}  // namespace covflow::stages

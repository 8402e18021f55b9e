// H2DensePlan (h2.hpp): the construction from dense matrices of h2_from_dense_device, for a batch
// of matrices on fixed points, with everything sized once so that a batch neither allocates nor
// reads anything back. The kernels are h2_cuda_dense_kernels.cuh's (blockIdx.y the matrix), the
// QR and SVD linalg::geqrf and linalg::gesvj over every node of every matrix of a level at once
// (Boukaram, Turkiyyah & Keyes, ACM TOMS 45(1) 2019, the batched level-by-level pattern), the
// truncation Börm's (EMS 2010) as on the CPU.
//
// Padded ranks. The one-matrix construction reads each level's rank back to size what follows;
// here level l is laid out at K_l, a bound from the tree alone (K_L = min(F_L, m), K_l =
// min(F_l, 2·K_{l+1}); F_l the level's largest |F*_t|): rank_kernel keeps at most q = min(F, w)
// ≤ K_l vectors per node, and the kernels zero every column past a node's own rank, so the
// padded H² matrix equals the compact one. Each matrix's level ranks k_l = max_t r_t, its drops
// and norm are reduced on the device (level_kernel, one thread per matrix, node order: the sums
// are deterministic).
//
// Memory. One allocation for the level index arrays, one for the tree and pair lists (an
// H2Device holding no values), one for the values of max_count matrices (each array of H2Device's
// layout repeated max_count times: ValueStrides), one for the scratch (the largest level's
// gathered M_tᴴ, R, Rᴴ, σ, U and infos; the expanded bases of two levels; the coupling products;
// per-level node ranks and drops; the per-matrix results). exec.workspace() serves geqrf, gesvj
// and the expansion and is reserved by the constructor.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "../common/checks.hpp"
#include "../common/device_scalar.cuh"
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/qr.hpp"
#include "covflow/linalg/svd.hpp"
#include "h2_cuda.cuh"
#include "h2_cuda_dense_kernels.cuh"
#include "h2_impl.hpp"

namespace covflow::linalg {
namespace {

using std::int64_t;
using namespace detail::h2_cuda::dense;
using detail::h2_cuda::blocks_for;
using detail::h2_cuda::kThreads;
using detail::h2_cuda::Carve;
using detail::dev;

[[noreturn]] void fail(const std::string& why) { throw InvalidArgument("H2DensePlan: " + why); }

// Per matrix, after level `level`'s node ranks: the level's rank (the most any node keeps), the
// level's drops added to the matrix's total in node order, and no_convergence when one of the
// level's node SVDs did not converge (info null: the level had no SVD). One thread per matrix.
__global__ void level_kernel(long long cells, long long count, int level, int levels, const int* rank, const double* dropped,
                             const SvdInfo* info, int no_convergence, int* level_rank, double* dropped_total, int* status) {
  for (long long cell = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; cell < cells;
       cell += static_cast<long long>(gridDim.x) * blockDim.x) {
    int k = 0;
    double sum = dropped_total[cell];
    bool converged = true;
    for (long long t = cell * count; t < (cell + 1) * count; ++t) {
      k = max(k, rank[t]);
      sum += dropped[t];
      if (info != nullptr && info[t].status != 0) converged = false;
    }
    level_rank[cell * levels + level] = k;
    dropped_total[cell] = sum;
    if (!converged && status[cell] == 0) status[cell] = no_convergence;
  }
}

// The level arrays on the host, before the upload.
struct HostLevel {
  std::vector<int> begin, size, far_ptr, far_cols, node_of;
  int f_max = 0;
  int cap = 0;  // the most points a node of the level holds
};

HostLevel host_level(const H2Tree& tree, int l, const std::vector<std::vector<int>>& far) {
  HostLevel out;
  const auto count = static_cast<std::size_t>(tree.nodes(l));
  out.begin.resize(count);
  out.size.resize(count);
  out.far_ptr.assign(count + 1, 0);
  out.node_of.resize(static_cast<std::size_t>(tree.n));
  for (std::size_t t = 0; t < count; ++t) {
    out.begin[t] = tree.begin(l, static_cast<int64_t>(t));
    out.size[t] = tree.size(l, static_cast<int64_t>(t));
    out.cap = std::max(out.cap, out.size[t]);
    for (int i = 0; i < out.size[t]; ++i) out.node_of[static_cast<std::size_t>(out.begin[t] + i)] = static_cast<int>(t);
    for (int c : far[t]) out.far_cols.push_back(tree.permutation[static_cast<std::size_t>(c)]);
    out.far_ptr[t + 1] = static_cast<int>(out.far_cols.size());
    out.f_max = std::max(out.f_max, static_cast<int>(far[t].size()));
  }
  return out;
}

}  // namespace

template <class T>
struct H2DensePlan<T>::State {
  using D = detail::device_t<T>;
  using R = real_t<T>;

  // One level of the tree as the build uses it.
  struct Level {
    detail::h2_cuda::dense::LevelNodes nodes;
    const int* node_of = nullptr;
    int64_t count = 0;  // nodes
    int f = 0;          // the largest |F*_t|
    int cap = 0;        // the most points a node holds
    int w = 0;          // columns of M_tᴴ: m at the leaves, 2·K_{l+1} above
    int q = 0;          // min(f, w): singular values per node; K_l = q
    int* rank = nullptr;         // [max_count × count]
    double* dropped = nullptr;   // [max_count × count]
  };

  int device = -1;
  int64_t n = 0, m = 0, max_count = 0, nodes_with_far = 0;
  int depth = 0;
  H2<T> skeleton;                // the tree and pair lists (no values), for download
  H2DeviceShape shape;           // at the padded ranks
  H2Device<T> structure;         // the tree and pair lists on the device (its value arrays unused)
  H2DeviceArrays<T> arrays;      // structure's index arrays, the values in `values`
  detail::h2_cuda::ValueStrides stride;
  std::vector<Level> levels;
  cuda::DeviceBuffer<int> index;                 // the levels' arrays
  cuda::DeviceBuffer<std::byte> values, scratch;
  // Carved from scratch (largest level × max_count).
  D *mh = nullptr, *tau = nullptr, *rh = nullptr, *vectors = nullptr, *basis[2] = {nullptr, nullptr}, *tmp = nullptr;
  R* sigma = nullptr;
  int* qr_info = nullptr;
  SvdInfo* svd_info = nullptr;
  int *level_rank = nullptr, *status = nullptr, *skip = nullptr;
  double *norm2 = nullptr, *dropped_total = nullptr;
  std::size_t workspace = 0;
  int64_t built = 0;  // the last build's count
};

template <class T>
H2DensePlan<T>::H2DensePlan() = default;
template <class T>
H2DensePlan<T>::H2DensePlan(H2DensePlan&&) noexcept = default;
template <class T>
H2DensePlan<T>& H2DensePlan<T>::operator=(H2DensePlan&&) noexcept = default;
template <class T>
H2DensePlan<T>::~H2DensePlan() = default;

template <class T>
H2DensePlan<T>::H2DensePlan(Exec& cuda_exec, std::span<const double> points, int dim, const H2Options& options,
                            std::int64_t max_count) {
  constexpr const char* op = "H2DensePlan";
  detail::h2_cuda::require_cuda(cuda_exec, op);
  detail::h2::require_points(points, dim, options, op);
  if (max_count < 1 || max_count > 65535) fail("max_count " + std::to_string(max_count) + " lies outside [1, 65535]");
  using D = detail::device_t<T>;
  using R = real_t<T>;
  auto state = std::make_unique<State>();
  State& s = *state;
  CudaContext& context = cuda_exec.cuda_context();
  context.make_current();
  const cudaStream_t stream = context.stream();
  s.device = context.device();
  s.max_count = max_count;

  // The host skeleton, as h2_from_dense builds it.
  H2<T>& h = s.skeleton;
  h.tree = detail::h2::build_tree(points, dim, options.leaf_size);
  detail::h2::build_block_tree(h.tree, options.eta, h.couplings, h.dense_pairs);
  const H2Tree& tree = h.tree;
  s.depth = tree.depth;
  s.n = tree.n;
  s.m = tree.leaf_capacity;
  const int depth = s.depth;
  const auto far = detail::h2::far_columns(tree, h.couplings, s.nodes_with_far);

  // The level arrays and the padded ranks K_l, from the leaves up.
  std::vector<HostLevel> host(static_cast<std::size_t>(depth) + 1);
  s.levels.resize(static_cast<std::size_t>(depth) + 1);
  std::vector<int> padded(static_cast<std::size_t>(depth) + 1, 0);
  for (int l = depth; l >= 0; --l) {
    const auto i = static_cast<std::size_t>(l);
    host[i] = host_level(tree, l, far[i]);
    typename State::Level& level = s.levels[i];
    level.count = tree.nodes(l);
    level.f = host[i].f_max;
    level.cap = host[i].cap;
    level.w = l == depth ? static_cast<int>(s.m) : 2 * padded[i + 1];
    level.q = std::min(level.f, level.w);
    padded[i] = level.q;
  }
  h.rank = padded;
  h.transfer_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
  h.coupling_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
  auto k = [&](int l) { return static_cast<int64_t>(padded[static_cast<std::size_t>(l)]); };
  for (int l = 0; l <= depth; ++l) {
    const auto i = static_cast<std::size_t>(l);
    h.transfer_offset[i + 1] = h.transfer_offset[i] + (l == 0 ? 0 : tree.nodes(l) * k(l) * k(l - 1));
    h.coupling_offset[i + 1] = h.coupling_offset[i] + h.couplings.count(l) * k(l) * k(l);
  }
  h.orthogonal = true;

  // The tree and pair lists on the device: an H2Device of the skeleton at rank 0 (its value arrays
  // are then only the dense blocks of one matrix, unused).
  {
    H2<T> bare;
    bare.tree = h.tree;
    bare.couplings = h.couplings;
    bare.dense_pairs = h.dense_pairs;
    bare.rank.assign(static_cast<std::size_t>(depth) + 1, 0);
    bare.transfer_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
    bare.coupling_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
    s.structure = detail::h2_cuda::allocate(cuda_exec, bare);
    COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));  // the uploads read `bare`
  }
  s.shape.n = s.n;
  s.shape.dim = tree.dim;
  s.shape.depth = depth;
  s.shape.leaf_capacity = s.m;
  s.shape.rank = h.rank;
  s.shape.transfer_offset = h.transfer_offset;
  s.shape.coupling_offset = h.coupling_offset;
  s.shape.coupling_level_ptr = h.couplings.level_ptr;
  s.shape.dense_level_ptr = h.dense_pairs.level_ptr;
  s.shape.box = tree.box;
  s.shape.orthogonal = true;

  // The level arrays in one upload.
  std::vector<int> flat;
  std::vector<std::array<std::size_t, 5>> at(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    const std::vector<int>* parts[5] = {&host[i].begin, &host[i].size, &host[i].far_ptr, &host[i].far_cols, &host[i].node_of};
    for (int p = 0; p < 5; ++p) {
      at[i][static_cast<std::size_t>(p)] = flat.size();
      flat.insert(flat.end(), parts[p]->begin(), parts[p]->end());
    }
  }
  s.index = cuda::DeviceBuffer<int>(std::max<std::size_t>(flat.size(), 1));
  s.index.upload(flat, stream);
  for (std::size_t i = 0; i < host.size(); ++i) {
    const int* base = s.index.data();
    s.levels[i].nodes = {base + at[i][0], base + at[i][1], base + at[i][2], base + at[i][3]};
    s.levels[i].node_of = base + at[i][4];
  }

  // The values of max_count matrices, array by array.
  const int64_t dense_pairs = h.dense_pairs.count();
  s.stride.leaf_basis = tree.nodes(depth) * s.m * k(depth);
  s.stride.transfer = h.transfer_offset.back();
  s.stride.coupling = h.coupling_offset.back();
  s.stride.dense = dense_pairs * s.m * s.m;
  auto carve_values = [&](std::byte* base) {
    Carve carve(base);
    const T* leaf = carve.take<T>(max_count * s.stride.leaf_basis);
    const T* transfer = carve.take<T>(max_count * s.stride.transfer);
    const T* coupling = carve.take<T>(max_count * s.stride.coupling);
    const T* dense = carve.take<T>(max_count * s.stride.dense);
    s.arrays = s.structure.arrays();
    s.arrays.leaf_basis = leaf;
    s.arrays.transfer = transfer;
    s.arrays.coupling = coupling;
    s.arrays.dense = dense;
    return carve.bytes();
  };
  s.values = cuda::DeviceBuffer<std::byte>(carve_values(nullptr));
  carve_values(s.values.data());

  // The scratch, sized by the largest level.
  int64_t mh = 0, tau = 0, vec = 0, infos = 0, tmp = 0, k_max = 0, ranks = 0;
  std::size_t workspace = detail::h2_cuda::expand_workspace<T>(s.shape, max_count);
  for (int l = 0; l <= depth; ++l) {
    const typename State::Level& level = s.levels[static_cast<std::size_t>(l)];
    ranks += level.count;
    k_max = std::max(k_max, k(l));
    tmp = std::max(tmp, int64_t{h.couplings.count(l)} * level.cap * k(l));
    if (level.q == 0) continue;
    mh = std::max(mh, level.count * level.f * level.w);
    tau = std::max(tau, level.count * level.q);
    vec = std::max(vec, level.count * level.w * level.q);
    infos = std::max(infos, level.count);
    const int64_t batch = max_count * level.count;
    workspace = std::max(workspace, geqrf_workspace<T>(cuda_exec, level.f, level.w, batch));
    workspace = std::max(workspace, gesvj_workspace<T>(cuda_exec, level.w, level.q, batch, SvdOptions{.u = true, .v = false}));
  }
  s.workspace = workspace;
  std::vector<std::size_t> rank_at(static_cast<std::size_t>(depth) + 1);
  auto carve_scratch = [&](std::byte* base) {
    Carve carve(base);
    s.mh = carve.take<D>(max_count * mh);
    s.tau = carve.take<D>(max_count * tau);
    s.rh = carve.take<D>(max_count * vec);
    s.vectors = carve.take<D>(max_count * vec);
    s.sigma = carve.take<R>(max_count * tau);
    s.qr_info = carve.take<int>(max_count * infos);
    s.svd_info = carve.take<SvdInfo>(max_count * infos);
    s.basis[0] = carve.take<D>(max_count * s.n * k_max);
    s.basis[1] = carve.take<D>(max_count * s.n * k_max);
    s.tmp = carve.take<D>(max_count * tmp);
    for (auto& level : s.levels) {
      level.rank = carve.take<int>(max_count * level.count);
      level.dropped = carve.take<double>(max_count * level.count);
    }
    s.level_rank = carve.take<int>(max_count * (depth + 1));
    s.status = carve.take<int>(max_count);
    s.skip = carve.take<int>(max_count);
    s.norm2 = carve.take<double>(max_count);
    s.dropped_total = carve.take<double>(max_count);
    return carve.bytes();
  };
  s.scratch = cuda::DeviceBuffer<std::byte>(carve_scratch(nullptr));
  carve_scratch(s.scratch.data());
  s.scratch.fill_bytes(0, stream);
  cuda_exec.workspace().reserve(workspace);
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));  // the uploads read host vectors that die here
  state_ = std::move(state);
}

template <class T>
std::int64_t H2DensePlan<T>::n() const {
  return state_ ? state_->n : 0;
}
template <class T>
std::int64_t H2DensePlan<T>::max_count() const {
  return state_ ? state_->max_count : 0;
}
template <class T>
const H2DeviceShape& H2DensePlan<T>::shape() const {
  if (!state_) fail("empty plan (default-constructed or moved from)");
  return state_->shape;
}
template <class T>
std::size_t H2DensePlan<T>::workspace_bytes() const {
  return state_ ? state_->workspace : 0;
}
template <class T>
std::size_t H2DensePlan<T>::device_bytes() const {
  return state_ ? state_->index.bytes() + state_->structure.device_bytes() + state_->values.bytes() + state_->scratch.bytes()
                : 0;
}
template <class T>
H2DenseCells H2DensePlan<T>::cells() const {
  if (!state_) fail("empty plan (default-constructed or moved from)");
  return {state_->level_rank, state_->norm2, state_->dropped_total, state_->status};
}

template <class T>
void H2DensePlan<T>::build(Exec& cuda_exec, Batch<const T> a, double tol) {
  constexpr const char* op = "H2DensePlan::build";
  detail::h2_cuda::require_cuda(cuda_exec, op);
  if (!state_) fail("build: empty plan (default-constructed or moved from)");
  State& s = *state_;
  CudaContext& context = cuda_exec.cuda_context();
  if (context.device() != s.device)
    fail("build: the plan lives on device " + std::to_string(s.device) + " but exec runs on device " +
         std::to_string(context.device()));
  detail::require_dims(a, op, "a", "rows", "cols");
  if (a.rows != s.n || a.cols != s.n)
    fail("build: a is " + detail::shape(a.rows, a.cols) + " but the plan's points give n = " + std::to_string(s.n));
  if (a.count < 1 || a.count > s.max_count)
    fail("build: a holds " + std::to_string(a.count) + " matrices; the plan takes 1 to " + std::to_string(s.max_count));
  if (!(tol > 0) || !std::isfinite(tol)) fail("build: tol must be positive and finite");
  detail::require_accessible(cuda_exec, a, op, "a");
  using D = detail::device_t<T>;
  using R = real_t<T>;
  context.make_current();
  const cudaStream_t stream = context.stream();
  const int depth = s.depth;
  const int64_t cells = a.count, n = s.n, m = s.m;
  const D* in = dev(a.data);
  const long long lda = a.ld, a_stride = a.stride;
  const H2Pairs& cp = s.skeleton.couplings;
  const double nodes_with_far = static_cast<double>(s.nodes_with_far);
  auto k = [&](int l) { return s.shape.rank[static_cast<std::size_t>(l)]; };

  cell_norm2_kernel<D><<<static_cast<unsigned>(cells), kThreads, 0, stream>>>(in, lda, a_stride, n, status::non_finite_input,
                                                                              s.norm2, s.status, s.skip);
  COVFLOW_CHECK_LAUNCH();
  COVFLOW_CUDA_TRY(cudaMemsetAsync(s.dropped_total, 0, static_cast<std::size_t>(cells) * sizeof(double), stream));
  const unsigned per_cell_blocks = blocks_for(cells);
  for (int l = depth; l >= 0; --l) {
    const typename State::Level& level = s.levels[static_cast<std::size_t>(l)];
    const int64_t count = level.count, batch = cells * count;
    const int f = level.f, w = level.w, q = level.q;
    if (q > 0) {
      if (l == depth) {
        gather_leaf_kernel<D><<<grid_for(count * f * w, cells), kThreads, 0, stream>>>(
            level.nodes, s.arrays.permutation, in, lda, a_stride, s.skip, count, f, w, s.mh);
      } else {
        const typename State::Level& children = s.levels[static_cast<std::size_t>(l) + 1];
        project_kernel<D><<<grid_for(count * f * w, cells), kThreads, 0, stream>>>(
            level.nodes, children.nodes, s.arrays.permutation, in, lda, a_stride, s.skip, count, f, k(l + 1),
            s.basis[(l + 1) % 2], n, s.mh);
      }
      COVFLOW_CHECK_LAUNCH();
      geqrf<T>(cuda_exec, Batch<T>{reinterpret_cast<T*>(s.mh), f, w, f, static_cast<int64_t>(f) * w, batch},
               {reinterpret_cast<T*>(s.tau), static_cast<std::size_t>(batch * q)}, {s.qr_info, static_cast<std::size_t>(batch)});
      rh_kernel<D><<<blocks_for(batch * w * q), kThreads, 0, stream>>>(s.mh, batch, f, w, q, s.rh);
      COVFLOW_CHECK_LAUNCH();
      gesvj<T>(cuda_exec, Batch<T>{reinterpret_cast<T*>(s.rh), w, q, w, static_cast<int64_t>(w) * q, batch},
               {s.sigma, static_cast<std::size_t>(batch * q)},
               Batch<T>{reinterpret_cast<T*>(s.vectors), w, q, w, static_cast<int64_t>(w) * q, batch}, Batch<T>{},
               {s.svd_info, static_cast<std::size_t>(batch)}, SvdOptions{.u = true, .v = false});
      rank_kernel<R><<<grid_for(count, cells), kThreads, 0, stream>>>(level.nodes, count, s.sigma, q, s.norm2, tol,
                                                                     nodes_with_far, level.rank, level.dropped);
      COVFLOW_CHECK_LAUNCH();
    } else {
      COVFLOW_CUDA_TRY(cudaMemsetAsync(level.rank, 0, static_cast<std::size_t>(batch) * sizeof(int), stream));
      COVFLOW_CUDA_TRY(cudaMemsetAsync(level.dropped, 0, static_cast<std::size_t>(batch) * sizeof(double), stream));
    }
    level_kernel<<<per_cell_blocks, kThreads, 0, stream>>>(cells, count, l, depth + 1, level.rank, level.dropped,
                                                           q > 0 ? s.svd_info : nullptr, status::no_convergence, s.level_rank,
                                                           s.dropped_total, s.status);
    COVFLOW_CHECK_LAUNCH();

    // The bases of the level at the padded rank (zero past each node's own rank).
    const int kl = k(l);
    D* basis = s.basis[l % 2];
    if (l == depth) {
      if (kl > 0) {
        basis_kernel<D><<<grid_for(count * m * kl, cells), kThreads, 0, stream>>>(
            level.nodes, count, s.vectors, static_cast<int>(m), q, level.rank, kl, dev(detail::h2_cuda::writable(s.arrays.leaf_basis)),
            s.stride.leaf_basis, basis, n);
        COVFLOW_CHECK_LAUNCH();
      }
    } else {
      const typename State::Level& children = s.levels[static_cast<std::size_t>(l) + 1];
      const int kc = k(l + 1);
      D* transfer = dev(detail::h2_cuda::writable(s.arrays.transfer)) + s.shape.transfer_offset[static_cast<std::size_t>(l) + 1];
      if (kc > 0 && kl > 0) {
        transfer_kernel<D><<<grid_for(children.count * kc * kl, cells), kThreads, 0, stream>>>(
            children.count, s.vectors, kc, q, level.rank, children.rank, kl, transfer, s.stride.transfer);
        COVFLOW_CHECK_LAUNCH();
        expand_kernel<D><<<grid_for(n * kl, cells), kThreads, 0, stream>>>(n, children.node_of, s.basis[(l + 1) % 2], kc,
                                                                          transfer, s.stride.transfer, kl, basis);
        COVFLOW_CHECK_LAUNCH();
      }
    }

    // The level's couplings.
    const int64_t pairs = cp.count(l);
    if (pairs > 0 && kl > 0) {
      const int first = cp.level_ptr[static_cast<std::size_t>(l)];
      const int* rows = s.arrays.couplings.row + first;
      const int* cols = s.arrays.couplings.col + first;
      coupling_right_kernel<D><<<grid_for(pairs * level.cap * kl, cells), kThreads, 0, stream>>>(
          level.nodes, rows, cols, pairs, level.cap, s.arrays.permutation, in, lda, a_stride, s.skip, basis, n, kl, s.tmp);
      COVFLOW_CHECK_LAUNCH();
      coupling_left_kernel<D><<<grid_for(pairs * kl * kl, cells), kThreads, 0, stream>>>(
          level.nodes, rows, pairs, level.cap, basis, n, kl, s.tmp,
          dev(detail::h2_cuda::writable(s.arrays.coupling)) + s.shape.coupling_offset[static_cast<std::size_t>(l)],
          s.stride.coupling);
      COVFLOW_CHECK_LAUNCH();
    }
  }
  if (const int64_t pairs = s.skeleton.dense_pairs.count(); pairs > 0) {
    const typename State::Level& leaves = s.levels[static_cast<std::size_t>(depth)];
    dense_kernel<D><<<grid_for(pairs * m * m, cells), kThreads, 0, stream>>>(
        leaves.nodes, s.arrays.dense_pairs.row, s.arrays.dense_pairs.col, pairs, static_cast<int>(m), s.arrays.permutation,
        in, lda, a_stride, s.skip, dev(detail::h2_cuda::writable(s.arrays.dense)), s.stride.dense);
    COVFLOW_CHECK_LAUNCH();
  }
  s.built = cells;
}

template <class T>
void H2DensePlan<T>::expand(Exec& cuda_exec, Batch<T> out) const {
  constexpr const char* op = "H2DensePlan::expand";
  detail::h2_cuda::require_cuda(cuda_exec, op);
  if (!state_) fail("expand: empty plan (default-constructed or moved from)");
  const State& s = *state_;
  CudaContext& context = cuda_exec.cuda_context();
  if (context.device() != s.device)
    fail("expand: the plan lives on device " + std::to_string(s.device) + " but exec runs on device " +
         std::to_string(context.device()));
  detail::require_dims(out, op, "out", "rows", "cols");
  if (out.rows != s.n || out.cols != s.n)
    fail("expand: out is " + detail::shape(out.rows, out.cols) + " but the plan's matrices are " + detail::shape(s.n, s.n));
  if (out.count < 1 || out.count > s.built)
    fail("expand: out holds " + std::to_string(out.count) + " matrices; the last build made " + std::to_string(s.built));
  detail::require_accessible(cuda_exec, out, op, "out");
  context.make_current();
  auto* workspace =
      static_cast<std::byte*>(context.workspace().acquire(detail::h2_cuda::expand_workspace<T>(s.shape, out.count)));
  detail::h2_cuda::expand<T>(context, s.shape, s.arrays, s.stride, out, workspace);
}

template <class T>
H2CompressReport H2DensePlan<T>::report(std::span<const int> level_rank, double norm2, double dropped, double tol) const {
  if (!state_) fail("report: empty plan (default-constructed or moved from)");
  const State& s = *state_;
  if (level_rank.size() != static_cast<std::size_t>(s.depth) + 1)
    fail("report: level_rank holds " + std::to_string(level_rank.size()) + " ranks, the tree has " +
         std::to_string(s.depth + 1) + " levels");
  const H2DeviceShape& shape = s.shape;
  auto k = [&](int l) { return static_cast<int64_t>(level_rank[static_cast<std::size_t>(l)]); };
  H2CompressReport r;
  r.tolerance = tol;
  r.norm = std::sqrt(norm2);
  const double tau2 = s.nodes_with_far > 0 ? tol * tol * norm2 / (2.0 * static_cast<double>(s.nodes_with_far)) : 0.0;
  r.node_threshold = std::sqrt(tau2);
  r.error_bound = norm2 > 0 ? std::sqrt(2 * dropped / norm2) : 0.0;
  r.ranks_after.assign(level_rank.begin(), level_rank.end());
  // h2_bytes's formula (h2.hpp, Memory) at the compact ranks.
  int64_t elements = shape.dense_count() * s.m * s.m + shape.nodes(s.depth) * s.m * k(s.depth);
  for (int l = 0; l <= s.depth; ++l)
    elements += int64_t{shape.coupling_count(l)} * k(l) * k(l) + (l == 0 ? 0 : shape.nodes(l) * k(l) * k(l - 1));
  r.bytes_after = static_cast<std::size_t>(elements) * sizeof(T);
  return r;
}

template <class T>
H2<T> H2DensePlan<T>::download(Exec& cuda_exec, std::int64_t index) const {
  constexpr const char* op = "H2DensePlan::download";
  detail::h2_cuda::require_cuda(cuda_exec, op);
  if (!state_) fail("download: empty plan (default-constructed or moved from)");
  const State& s = *state_;
  if (index < 0 || index >= s.built)
    fail("download: matrix " + std::to_string(index) + " is not among the last build's " + std::to_string(s.built));
  CudaContext& context = cuda_exec.cuda_context();
  context.make_current();
  const cudaStream_t stream = context.stream();
  const int depth = s.depth;
  const int64_t m = s.m;
  std::vector<int> rank;
  detail::h2_cuda::to_host(rank, s.level_rank + index * (depth + 1), static_cast<std::size_t>(depth) + 1, stream);
  std::vector<T> leaf, transfer, coupling, dense;
  detail::h2_cuda::to_host(leaf, s.arrays.leaf_basis + index * s.stride.leaf_basis, static_cast<std::size_t>(s.stride.leaf_basis), stream);
  detail::h2_cuda::to_host(transfer, s.arrays.transfer + index * s.stride.transfer, static_cast<std::size_t>(s.stride.transfer), stream);
  detail::h2_cuda::to_host(coupling, s.arrays.coupling + index * s.stride.coupling, static_cast<std::size_t>(s.stride.coupling), stream);
  detail::h2_cuda::to_host(dense, s.arrays.dense + index * s.stride.dense, static_cast<std::size_t>(s.stride.dense), stream);
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));

  // The top-left k_l × k_{l'} parts of the padded blocks: every column (and transfer row) past a
  // matrix's own level rank is zero.
  H2<T> out;
  out.tree = s.skeleton.tree;
  out.couplings = s.skeleton.couplings;
  out.dense_pairs = s.skeleton.dense_pairs;
  out.rank = rank;
  out.orthogonal = true;
  const H2DeviceShape& padded = s.shape;
  auto kp = [&](int l) { return static_cast<int64_t>(padded.rank[static_cast<std::size_t>(l)]); };
  auto k = [&](int l) { return static_cast<int64_t>(rank[static_cast<std::size_t>(l)]); };
  auto block = [](const T* from, int64_t ld_from, T* to, int64_t rows, int64_t cols) {
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t i = 0; i < rows; ++i) to[i + j * rows] = from[i + j * ld_from];
  };
  const int64_t leaves = out.tree.nodes(depth);
  out.leaf_basis.assign(static_cast<std::size_t>(leaves * m * k(depth)), T(0));
  for (int64_t t = 0; t < leaves; ++t) block(leaf.data() + t * m * kp(depth), m, out.leaf_basis.data() + t * m * k(depth), m, k(depth));
  out.transfer_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
  out.coupling_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
  for (int l = 0; l <= depth; ++l) {
    const auto i = static_cast<std::size_t>(l);
    out.transfer_offset[i + 1] = out.transfer_offset[i] + (l == 0 ? 0 : out.tree.nodes(l) * k(l) * k(l - 1));
    out.coupling_offset[i + 1] = out.coupling_offset[i] + out.couplings.count(l) * k(l) * k(l);
  }
  out.transfer.assign(static_cast<std::size_t>(out.transfer_offset.back()), T(0));
  out.coupling.assign(static_cast<std::size_t>(out.coupling_offset.back()), T(0));
  for (int l = 0; l <= depth; ++l) {
    const auto i = static_cast<std::size_t>(l);
    if (l > 0)
      for (int64_t c = 0; c < out.tree.nodes(l); ++c)
        block(transfer.data() + padded.transfer_offset[i] + c * kp(l) * kp(l - 1), kp(l),
              out.transfer.data() + out.transfer_offset[i] + c * k(l) * k(l - 1), k(l), k(l - 1));
    for (int64_t p = 0; p < out.couplings.count(l); ++p)
      block(coupling.data() + padded.coupling_offset[i] + p * kp(l) * kp(l), kp(l),
            out.coupling.data() + out.coupling_offset[i] + p * k(l) * k(l), k(l), k(l));
  }
  out.dense = std::move(dense);
  return out;
}

#define COVFLOW_H2_DENSE_PLAN(T) template class H2DensePlan<T>;
COVFLOW_H2_DENSE_PLAN(f32)
COVFLOW_H2_DENSE_PLAN(f64)
COVFLOW_H2_DENSE_PLAN(cf32)
COVFLOW_H2_DENSE_PLAN(cf64)
#undef COVFLOW_H2_DENSE_PLAN

}  // namespace covflow::linalg

// h2_build_device: an H² matrix built from geometry on the CUDA backend, the same matrix as the
// CPU h2_build (h2.hpp, Construction). The interpolation follows S. Börm, J. Garcke,
// "Approximating Gaussian processes with H²-matrices", ECML 2007, and its GPU form W. Boukaram,
// G. Turkiyyah, H. Ltaief, D. Keyes, "Batched QR and SVD algorithms on GPUs with applications in
// hierarchical matrix compression", Parallel Computing 2018, §8.3: leaf bases are the tensor
// Lagrange polynomials of a leaf's Chebyshev nodes at its points, transfers the parent's
// polynomials at the child's nodes (exact), couplings the kernel at node pairs, dense blocks the
// kernel at point pairs.
//   host     the tree, block tree, ranks and offsets (build_skeleton, shared with the CPU build:
//            O(n log n) integer work), the Chebyshev nodes of every box (ChebGrid) and the clutter
//            quadrature (clutter_rule); allocate() copies the tree and pair lists to the device
//   uploads  the points in tree order, the nodes and the quadrature into exec.workspace()
//   values   one launch per array (per level for transfers and couplings), one thread per
//            element, every element written (padding rows and columns, empty nodes: zeros)
// The formulas are h2_kernel.hpp's, shared with the CPU build. This file is compiled with
// --fmad=false (linalg/CMakeLists.txt) so that no multiply-add is fused: with the nodes read from
// the same host table, the polynomials are then bit for bit the CPU's, and the kernel values
// differ from it only through CUDA's exp, sin and cos. No host synchronisation.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "../common/device_scalar.cuh"
#include "covflow/linalg/cuda/check.hpp"
#include "h2_cuda.cuh"
#include "h2_impl.hpp"
#include "h2_kernel.hpp"

namespace covflow::linalg {
namespace {

using detail::h2::KernelEval;
using detail::h2::KernelValue;

constexpr int kThreads = 256;

unsigned blocks_for(long long total) {
  return static_cast<unsigned>(std::clamp((total + kThreads - 1) / kThreads, 1LL, 1LL << 20));
}

__device__ inline long long heap_of(int level, long long t) { return (1LL << level) - 1 + t; }

template <class D>
__device__ inline D element_of(KernelValue v) {
  using R = detail::sreal_t<D>;
  if constexpr (detail::is_cx<D>) return D{static_cast<R>(v.re), static_cast<R>(v.im)};
  else return static_cast<D>(v.re);
}

// What every value kernel reads: the points in tree order (point at tree position i at
// points[i·dim]) and the Chebyshev nodes of every tree node (ChebGrid's layout: heap node h's
// dim × p table at grid[h·dim·p]).
struct Geometry {
  const double* points = nullptr;
  const double* grid = nullptr;
  int dim = 1, p = 1;
  __device__ const double* nodes_of(long long heap) const { return grid + heap * dim * p; }
};

// The kernels below share one shape. Ownership: a 1-D grid-strided launch of 256-thread blocks,
// one thread per element of the array it fills, in the array's own (column-major, block after
// block) order, so that the writes coalesce; a thread derives its block, row and column from the
// flat index, computes the element in registers from global reads of the geometry (a few dozen
// doubles, shared by neighbouring threads through L1) and writes it once. Budget (sm_90, ptxas):
// 40–56 registers, no shared memory, 88 bytes of stack (the two points' coordinates and the slow
// path of the double sin/cos argument reduction), so at least 4 blocks (50% occupancy) per SM;
// the work is compute-bound (dim·p divisions per polynomial, one exp or N sin/cos pairs per kernel
// value), so nothing is staged in shared memory.

// Leaf bases, 2^L blocks of m × k: element (i, c) of leaf t is L^t_c(x_{begin_t + i}) for i below
// the leaf's size, 0 past it.
template <class D>
__global__ void leaf_basis_kernel(Geometry g, const int* node_begin, const int* node_end, int depth, long long leaves,
                                  long long m, int k, D* out) {
  const long long per_leaf = m * k;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < leaves * per_leaf;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long t = e / per_leaf, within = e % per_leaf, row = within % m;
    const int col = static_cast<int>(within / m);
    const long long heap = heap_of(depth, t);
    const int begin = node_begin[heap], size = node_end[heap] - begin;
    double value = 0;
    if (row < size)
      value = detail::h2::lagrange(g.nodes_of(heap), g.dim, g.p, col, g.points + (begin + row) * g.dim);
    out[e] = element_of<D>(KernelValue{value, 0});
  }
}

// Transfers of level l ≥ 1, 2^l blocks of k_c × k_p: element (a, b) of child c is the parent's
// polynomial b at the child's Chebyshev node a; 0 for an empty child (its box is inverted).
template <class D>
__global__ void transfer_kernel(Geometry g, const int* node_begin, const int* node_end, int level, long long nodes,
                                int kc, int kp, D* out) {
  const long long per_node = static_cast<long long>(kc) * kp;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < nodes * per_node;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long c = e / per_node, within = e % per_node;
    const int row = static_cast<int>(within % kc), col = static_cast<int>(within / kc);
    const long long heap = heap_of(level, c);
    double value = 0;
    if (node_end[heap] > node_begin[heap]) {
      double xi[3];
      detail::h2::cheb_point(g.nodes_of(heap), g.dim, g.p, row, xi);
      value = detail::h2::lagrange(g.nodes_of(heap_of(level - 1, c / 2)), g.dim, g.p, col, xi);
    }
    out[e] = element_of<D>(KernelValue{value, 0});
  }
}

// Couplings of one level, `count` blocks of k × k from pair `first` on: element (a, b) of pair
// (t, s) is K(ξ^t_a, ξ^s_b). Both nodes of a coupling pair are non-empty (admissibility).
template <class D>
__global__ void coupling_kernel(Geometry g, KernelEval kernel, const int* pair_row, const int* pair_col, int first,
                                long long count, int level, int k, D* out) {
  const long long per_pair = static_cast<long long>(k) * k;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < count * per_pair;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long q = first + e / per_pair, within = e % per_pair;
    const int row = static_cast<int>(within % k), col = static_cast<int>(within / k);
    double xt[3], xs[3];
    detail::h2::cheb_point(g.nodes_of(heap_of(level, pair_row[q])), g.dim, g.p, row, xt);
    detail::h2::cheb_point(g.nodes_of(heap_of(level, pair_col[q])), g.dim, g.p, col, xs);
    out[e] = element_of<D>(kernel(xt, xs));
  }
}

// Dense blocks, `count` of m × m (all at the leaf level): element (i, j) of pair (t, s) is
// K(x_{begin_t + i}, x_{begin_s + j}), plus the nugget where t = s and i = j; 0 past either
// leaf's size.
template <class D>
__global__ void dense_kernel(Geometry g, KernelEval kernel, const int* pair_row, const int* pair_col,
                             const int* node_begin, const int* node_end, int depth, long long count, long long m,
                             double nugget, D* out) {
  const long long per_pair = m * m;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < count * per_pair;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long q = e / per_pair, within = e % per_pair, i = within % m, j = within / m;
    const int t = pair_row[q], s = pair_col[q];
    const long long heap_t = heap_of(depth, t), heap_s = heap_of(depth, s);
    const int bt = node_begin[heap_t], nt = node_end[heap_t] - bt, bs = node_begin[heap_s], ns = node_end[heap_s] - bs;
    KernelValue value{0, 0};
    if (i < nt && j < ns) {
      value = kernel(g.points + (bt + i) * g.dim, g.points + (bs + j) * g.dim);
      if (t == s && i == j) value.re += nugget;
    }
    out[e] = element_of<D>(value);
  }
}

template <class X>
void upload(X* device, const std::vector<X>& host, cudaStream_t stream) {
  if (!host.empty())
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(X), cudaMemcpyHostToDevice, stream));
}

}  // namespace

template <class T>
H2Device<T> h2_build_device(Exec& cuda_exec, std::span<const double> points, int dim, const H2KernelSpec& kernel,
                            const H2Options& options) {
  constexpr const char* op = "h2_build_device";
  detail::h2_cuda::require_cuda(cuda_exec, op);
  detail::h2::require_build_args<T>(points, dim, kernel, options, op);
  using D = detail::device_t<T>;

  // Host: the skeleton, exactly as h2_build makes it, then the device copy of its tree and pairs.
  detail::h2::ChebGrid grid;
  const H2<T> skeleton = detail::h2::build_skeleton<T>(points, dim, options, grid);
  const detail::h2::ClutterRule rule = detail::h2::clutter_rule(kernel, grid.span);
  CudaContext& context = cuda_exec.cuda_context();
  context.make_current();
  // The host vectors copied here and below are pageable: cudaMemcpyAsync has staged them when it
  // returns, so they may go out of scope before the stream runs the copies.
  H2Device<T> out = detail::h2_cuda::allocate(cuda_exec, skeleton);
  const cudaStream_t stream = context.stream();
  const H2Tree& tree = skeleton.tree;
  const int depth = tree.depth, p = options.cheb_order;
  const std::int64_t m = tree.leaf_capacity;

  std::vector<double> tree_points(points.size());
  for (std::int64_t i = 0; i < tree.n; ++i)
    std::copy_n(&points[static_cast<std::size_t>(tree.permutation[static_cast<std::size_t>(i)]) * dim], dim,
                &tree_points[static_cast<std::size_t>(i * dim)]);
  const auto quadrature = static_cast<std::int64_t>(rule.weight.size());
  auto carve = [&](std::byte* base, double** at) {
    detail::h2_cuda::Carve c(base);
    at[0] = c.take<double>(static_cast<std::int64_t>(tree_points.size()));
    at[1] = c.take<double>(static_cast<std::int64_t>(grid.nodes.size()));
    at[2] = c.take<double>(quadrature);
    at[3] = c.take<double>(quadrature);
    at[4] = c.take<double>(quadrature);
    return c.bytes();
  };
  double* at[5];
  const std::size_t bytes = carve(nullptr, at);
  carve(static_cast<std::byte*>(context.workspace().acquire(bytes)), at);
  upload(at[0], tree_points, stream);
  upload(at[1], grid.nodes, stream);
  upload(at[2], rule.ux, stream);
  upload(at[3], rule.uy, stream);
  upload(at[4], rule.weight, stream);

  const Geometry geometry{at[0], at[1], dim, p};
  const KernelEval kernel_eval{kernel.kind, dim, kernel.variance, kernel.length, kernel.nu,
                               static_cast<int>(quadrature), at[2], at[3], at[4]};
  const H2DeviceArrays<T>& d = out.arrays();
  const H2DeviceShape& s = out.shape();

  // Leaf bases.
  const int k_leaf = s.rank[static_cast<std::size_t>(depth)];
  if (const long long total = s.nodes(depth) * m * k_leaf; total > 0) {
    leaf_basis_kernel<D><<<blocks_for(total), kThreads, 0, stream>>>(
        geometry, d.node_begin, d.node_end, depth, s.nodes(depth), m, k_leaf,
        detail::dev(detail::h2_cuda::writable(d.leaf_basis)));
    COVFLOW_CHECK_LAUNCH();
  }
  // Transfers, level by level (a level whose rank or whose parent's is 0 holds nothing).
  for (int l = 1; l <= depth; ++l) {
    const int kc = s.rank[static_cast<std::size_t>(l)], kp = s.rank[static_cast<std::size_t>(l) - 1];
    const long long total = s.nodes(l) * kc * kp;
    if (total == 0) continue;
    transfer_kernel<D><<<blocks_for(total), kThreads, 0, stream>>>(
        geometry, d.node_begin, d.node_end, l, s.nodes(l), kc, kp,
        detail::dev(detail::h2_cuda::writable(d.transfer + s.transfer_offset[static_cast<std::size_t>(l)])));
    COVFLOW_CHECK_LAUNCH();
  }
  // Couplings, level by level.
  for (int l = 0; l <= depth; ++l) {
    const int k = s.rank[static_cast<std::size_t>(l)];
    const long long count = s.coupling_count(l), total = count * k * k;
    if (total == 0) continue;
    coupling_kernel<D><<<blocks_for(total), kThreads, 0, stream>>>(
        geometry, kernel_eval, d.couplings.row, d.couplings.col, s.coupling_level_ptr[static_cast<std::size_t>(l)],
        count, l, k, detail::dev(detail::h2_cuda::writable(d.coupling + s.coupling_offset[static_cast<std::size_t>(l)])));
    COVFLOW_CHECK_LAUNCH();
  }
  // Dense blocks.
  if (const long long total = static_cast<long long>(s.dense_count()) * m * m; total > 0) {
    dense_kernel<D><<<blocks_for(total), kThreads, 0, stream>>>(
        geometry, kernel_eval, d.dense_pairs.row, d.dense_pairs.col, d.node_begin, d.node_end, depth,
        s.dense_count(), m, options.nugget, detail::dev(detail::h2_cuda::writable(d.dense)));
    COVFLOW_CHECK_LAUNCH();
  }
  return out;
}

#define COVFLOW_H2_BUILD_DEVICE(T)                                                                       \
  template H2Device<T> h2_build_device<T>(Exec&, std::span<const double>, int, const H2KernelSpec&, \
                                          const H2Options&);
COVFLOW_H2_BUILD_DEVICE(f32)
COVFLOW_H2_BUILD_DEVICE(f64)
COVFLOW_H2_BUILD_DEVICE(cf32)
COVFLOW_H2_BUILD_DEVICE(cf64)
#undef COVFLOW_H2_BUILD_DEVICE

}  // namespace covflow::linalg

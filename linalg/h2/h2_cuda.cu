// H² matrices on the CUDA backend: the device mirror (h2_upload, h2_download) and its dense form
// (h2_expand on an H2Device, with its kernels below), the argument checks and the workspace of
// h2_gemv, and the dispatch to the kernels (h2_cuda_gemv.cu: the matvec; h2_cuda_orthog.cu,
// h2_cuda_compress.cu: orthogonalisation and compression). The layouts are H2<T>'s, copied as they
// are (h2.hpp, Format).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>

#include "../common/checks.hpp"
#include "../common/device_scalar.cuh"
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/cuda/stream.hpp"
#include "covflow/linalg/error.hpp"
#include "h2_cuda.cuh"
#include "h2_impl.hpp"

namespace covflow::linalg {
namespace {

[[noreturn]] void fail(const char* op, const std::string& why) { throw InvalidArgument(std::string(op) + ": " + why); }

using detail::h2_cuda::require_cuda;
using detail::h2_cuda::to_host;

// As an ostream writes it (-1, 1e-06, nan), as the CPU operations' messages do.
std::string number(double v) {
  std::ostringstream text;
  text << v;
  return text.str();
}


// The checks of the CPU operations (storage sizes agree with the tree, ranks and pair counts) and
// the index ranges of the pair lists, which the kernels follow without checking.
template <class T>
void require_h2(const H2<T>& a, const char* op) {
  detail::h2::require_sizes(a, op);
  const H2Tree& tree = a.tree;
  auto bad = [&](const std::string& why) { fail(op, "A: " + why); };
  detail::require_int32(tree.n, op, "n");
  detail::require_int32(tree.leaf_capacity, op, "leaf capacity");
  const auto nodes = static_cast<std::size_t>((std::int64_t{2} << tree.depth) - 1);
  const std::int64_t m = tree.leaf_capacity;
  for (int l = 0; l <= tree.depth; ++l) {
    const std::int64_t k = a.rank[static_cast<std::size_t>(l)];
    if (k < 0) bad("negative rank at level " + std::to_string(l));
    if (l > 0 && a.transfer_offset[static_cast<std::size_t>(l) + 1] - a.transfer_offset[static_cast<std::size_t>(l)] !=
                     tree.nodes(l) * k * a.rank[static_cast<std::size_t>(l) - 1])
      bad("transfer offsets disagree with the ranks at level " + std::to_string(l));
    if (a.coupling_offset[static_cast<std::size_t>(l) + 1] - a.coupling_offset[static_cast<std::size_t>(l)] !=
        std::int64_t{a.couplings.count(l)} * k * k)
      bad("coupling offsets disagree with the ranks at level " + std::to_string(l));
  }
  for (std::size_t i = 0; i < nodes; ++i)
    if (tree.node_begin[i] < 0 || tree.node_end[i] < tree.node_begin[i] || tree.node_end[i] > tree.n)
      bad("node " + std::to_string(i) + " has a bad point range");
  const std::int64_t leaf0 = H2Tree::heap(tree.depth, 0);
  for (std::int64_t t = 0; t < tree.nodes(tree.depth); ++t)
    if (tree.node_end[leaf0 + t] - tree.node_begin[leaf0 + t] > m) bad("a leaf holds more than leaf_capacity points");
  for (int p : tree.permutation)
    if (p < 0 || p >= tree.n) bad("permutation entry out of range");
  auto pairs = [&](const H2Pairs& p, const char* what) {
    const std::size_t count = static_cast<std::size_t>(p.count());
    const auto ptrs = static_cast<std::size_t>(H2Pairs::ptr_offset(tree.depth + 1));
    if (p.row.size() != count || p.col.size() != count || p.col_pairs.size() != count || p.row_ptr.size() != ptrs ||
        p.col_ptr.size() != ptrs)
      bad(std::string(what) + ": index arrays disagree in size");
    for (int l = 0; l <= tree.depth; ++l) {
      const int first = p.level_ptr[static_cast<std::size_t>(l)], last = p.level_ptr[static_cast<std::size_t>(l) + 1];
      if (first < 0 || last < first || last > static_cast<int>(count)) bad(std::string(what) + ": bad level_ptr");
      for (int q = first; q < last; ++q)
        if (p.row[q] < 0 || p.row[q] >= tree.nodes(l) || p.col[q] < 0 || p.col[q] >= tree.nodes(l) ||
            p.col_pairs[q] < first || p.col_pairs[q] >= last)
          bad(std::string(what) + ": pair " + std::to_string(q) + " out of its level's range");
      const std::int64_t base = H2Pairs::ptr_offset(l);
      for (std::int64_t t = 0; t <= tree.nodes(l); ++t) {
        const int r = p.row_ptr[base + t], c = p.col_ptr[base + t];
        if (r < first || r > last || c < first || c > last || (t > 0 && (r < p.row_ptr[base + t - 1] || c < p.col_ptr[base + t - 1])))
          bad(std::string(what) + ": row_ptr/col_ptr out of order at level " + std::to_string(l));
      }
    }
  };
  pairs(a.couplings, "couplings");
  pairs(a.dense_pairs, "dense pairs");
  for (int l = 0; l < tree.depth; ++l)
    if (a.dense_pairs.count(l) != 0) bad("dense pairs above the leaf level");
}

template <class T>
void require_device_h2(Exec& exec, const H2Device<T>& a, const char* op) {
  if (a.empty()) fail(op, "A is an empty H2Device (default-constructed or moved from)");
  const int device = exec.cuda_context().device();
  if (a.device() != device)
    fail(op, "A lives on device " + std::to_string(a.device()) + " but exec runs on device " + std::to_string(device));
}

template <class T>
void require_vectors(Exec& exec, const Batch<T>& v, std::int64_t n, std::int64_t cols, const char* op, const char* what) {
  detail::require_dims(v, op, what, "rows", "nvec");
  if (v.count != 1) fail(op, std::string(what) + " must be one matrix (count 1), not " + std::to_string(v.count));
  if (v.rows != n || (cols >= 0 && v.cols != cols))
    fail(op, std::string(what) + " is " + detail::shape(v.rows, v.cols) + " but A is " + detail::shape(n, n) + ": " +
                 what + " needs " + std::to_string(n) + " rows" +
                 (cols >= 0 ? " and " + std::to_string(cols) + " columns" : std::string()));
  detail::require_accessible(exec, v, op, what);
}

// The one allocation of an H2Device, owned through H2Device's type-erased pointer.
using Allocation = cuda::DeviceBuffer<std::byte>;
void free_allocation(void* p) noexcept { delete static_cast<Allocation*>(p); }

// Element counts of the arrays of an H2Device's allocation.
struct Sizes {
  std::int64_t n = 0, nodes = 0, pairs[2] = {0, 0}, ptrs = 0;
  std::int64_t leaf_basis = 0, transfer = 0, coupling = 0, dense = 0;
};

// From the shape alone (the value arrays as the ranks and offsets size them).
Sizes sizes_of(const H2DeviceShape& s) {
  Sizes z;
  z.n = s.n;
  z.nodes = (std::int64_t{2} << s.depth) - 1;
  z.pairs[0] = s.coupling_level_ptr.empty() ? 0 : s.coupling_level_ptr.back();
  z.pairs[1] = s.dense_count();
  z.ptrs = H2Pairs::ptr_offset(s.depth + 1);
  z.leaf_basis = s.nodes(s.depth) * s.leaf_capacity * s.rank.back();
  z.transfer = s.transfer_offset.back();
  z.coupling = s.coupling_offset.back();
  z.dense = z.pairs[1] * s.leaf_capacity * s.leaf_capacity;
  return z;
}

// Where each array lives in the allocation (with a null base: only the size).
template <class T>
struct Layout {
  int* permutation;
  int* node_begin;
  int* node_end;
  int* pair_index[2][5];  // couplings, dense: row, col, row_ptr, col_ptr, col_pairs
  T* leaf_basis;
  T* transfer;
  T* coupling;
  T* dense;
  std::size_t bytes;

  Layout(const Sizes& z, std::byte* base) {
    detail::h2_cuda::Carve carve(base);
    permutation = carve.take<int>(z.n);
    node_begin = carve.take<int>(z.nodes);
    node_end = carve.take<int>(z.nodes);
    for (int i = 0; i < 2; ++i) {
      pair_index[i][0] = carve.take<int>(z.pairs[i]);
      pair_index[i][1] = carve.take<int>(z.pairs[i]);
      pair_index[i][2] = carve.take<int>(z.ptrs);
      pair_index[i][3] = carve.take<int>(z.ptrs);
      pair_index[i][4] = carve.take<int>(z.pairs[i]);
    }
    leaf_basis = carve.take<T>(z.leaf_basis);
    transfer = carve.take<T>(z.transfer);
    coupling = carve.take<T>(z.coupling);
    dense = carve.take<T>(z.dense);
    bytes = carve.bytes();
  }
};

const std::vector<int>& index_array(const H2Pairs& p, int which) {
  switch (which) {
    case 0: return p.row;
    case 1: return p.col;
    case 2: return p.row_ptr;
    case 3: return p.col_ptr;
    default: return p.col_pairs;
  }
}

template <class X>
void upload_array(X* device, const std::vector<X>& host, cudaStream_t stream) {
  if (!host.empty())
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(X), cudaMemcpyHostToDevice, stream));
}

// The host shape of an H2<T> (what H2Device keeps on the host).
template <class T>
H2DeviceShape shape_of(const H2<T>& a) {
  H2DeviceShape s;
  s.n = a.tree.n;
  s.dim = a.tree.dim;
  s.depth = a.tree.depth;
  s.leaf_capacity = a.tree.leaf_capacity;
  s.rank = a.rank;
  s.transfer_offset = a.transfer_offset;
  s.coupling_offset = a.coupling_offset;
  s.coupling_level_ptr = a.couplings.level_ptr;
  s.dense_level_ptr = a.dense_pairs.level_ptr;
  s.box = a.tree.box;
  s.orthogonal = a.orthogonal;
  return s;
}

}  // namespace

namespace detail::h2_cuda {

template <class T>
H2Device<T> DeviceAccess::make(Exec& cuda_exec, H2DeviceShape shape) {
  CudaContext& context = cuda_exec.cuda_context();
  context.make_current();
  const Layout<T> size(sizes_of(shape), nullptr);
  auto allocation = std::make_unique<Allocation>(size.bytes);
  const Layout<T> at(sizes_of(shape), allocation->data());
  H2Device<T> out;
  out.shape_ = std::move(shape);
  H2DeviceArrays<T>& d = out.arrays_;
  d.permutation = at.permutation;
  d.node_begin = at.node_begin;
  d.node_end = at.node_end;
  H2DevicePairs* device_lists[2] = {&d.couplings, &d.dense_pairs};
  for (int i = 0; i < 2; ++i) {
    device_lists[i]->row = at.pair_index[i][0];
    device_lists[i]->col = at.pair_index[i][1];
    device_lists[i]->row_ptr = at.pair_index[i][2];
    device_lists[i]->col_ptr = at.pair_index[i][3];
    device_lists[i]->col_pairs = at.pair_index[i][4];
  }
  d.leaf_basis = at.leaf_basis;
  d.transfer = at.transfer;
  d.coupling = at.coupling;
  d.dense = at.dense;
  out.device_ = context.device();
  out.bytes_ = size.bytes;
  out.memory_ = typename H2Device<T>::Owner(allocation.release(), &free_allocation);
  return out;
}

template <class T>
H2Device<T> allocate(Exec& cuda_exec, const H2<T>& skeleton) {
  H2Device<T> out = DeviceAccess::make<T>(cuda_exec, shape_of(skeleton));
  const cudaStream_t stream = cuda_exec.cuda_context().stream();
  const H2DeviceArrays<T>& d = out.arrays();
  upload_array(const_cast<int*>(d.permutation), skeleton.tree.permutation, stream);
  upload_array(const_cast<int*>(d.node_begin), skeleton.tree.node_begin, stream);
  upload_array(const_cast<int*>(d.node_end), skeleton.tree.node_end, stream);
  const H2Pairs* lists[2] = {&skeleton.couplings, &skeleton.dense_pairs};
  const H2DevicePairs* device_lists[2] = {&d.couplings, &d.dense_pairs};
  for (int i = 0; i < 2; ++i) {
    const int* targets[5] = {device_lists[i]->row, device_lists[i]->col, device_lists[i]->row_ptr,
                             device_lists[i]->col_ptr, device_lists[i]->col_pairs};
    for (int w = 0; w < 5; ++w) upload_array(const_cast<int*>(targets[w]), index_array(*lists[i], w), stream);
  }
  return out;
}

template <class T>
H2Device<T> resized(Exec& cuda_exec, const H2Device<T>& from, const std::vector<int>& rank) {
  H2DeviceShape shape = from.shape();
  shape.rank = rank;
  const int depth = shape.depth;
  shape.transfer_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
  shape.coupling_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
  for (int l = 0; l <= depth; ++l) {
    const auto i = static_cast<std::size_t>(l);
    shape.transfer_offset[i + 1] = shape.transfer_offset[i] + (l == 0 ? 0 : shape.nodes(l) * rank[i] * rank[i - 1]);
    shape.coupling_offset[i + 1] = shape.coupling_offset[i] + std::int64_t{shape.coupling_count(l)} * rank[i] * rank[i];
  }
  H2Device<T> out = DeviceAccess::make<T>(cuda_exec, std::move(shape));
  const cudaStream_t stream = cuda_exec.cuda_context().stream();
  // The integer arrays sit first in the allocation, in the same order and sizes in both (they do
  // not depend on the ranks), and the dense blocks do not either: two copies.
  const auto* old_base = reinterpret_cast<const std::byte*>(from.arrays().permutation);
  auto* new_base = reinterpret_cast<std::byte*>(const_cast<int*>(out.arrays().permutation));
  const auto index_bytes = static_cast<std::size_t>(reinterpret_cast<const std::byte*>(from.arrays().leaf_basis) - old_base);
  COVFLOW_CUDA_TRY(cudaMemcpyAsync(new_base, old_base, index_bytes, cudaMemcpyDeviceToDevice, stream));
  // The bases and couplings start as zeros: the padding and the blocks of empty nodes, which no
  // operation writes, must read as the CPU's (zero), not as whatever the allocation held.
  const auto* values = reinterpret_cast<const std::byte*>(out.arrays().leaf_basis);
  const auto value_bytes = static_cast<std::size_t>(reinterpret_cast<const std::byte*>(out.arrays().dense) - values);
  if (value_bytes > 0)
    COVFLOW_CUDA_TRY(cudaMemsetAsync(const_cast<std::byte*>(values), 0, value_bytes, stream));
  const std::size_t dense_bytes = static_cast<std::size_t>(sizes_of(from.shape()).dense) * sizeof(T);
  if (dense_bytes > 0)
    COVFLOW_CUDA_TRY(cudaMemcpyAsync(const_cast<T*>(out.arrays().dense), from.arrays().dense, dense_bytes,
                                     cudaMemcpyDeviceToDevice, stream));
  return out;
}

// ---- the expansion into a dense matrix (h2_expand on an H2Device) ----------------------------
//
// What the CPU's h2_expand does (h2_cpu.cpp), one batched launch per step and level, bottom-up:
//   leaf_rows_kernel      U_L, the leaves' bases as one n × k_L matrix in tree order (ld n: node
//                         t's rows are [begin_t, end_t));
//   basis_up_kernel       U_l from U_{l+1}: the rows of child c are U_{l+1}(c)·E_c (the nested
//                         bases, Boukaram, Turkiyyah & Keyes 2019, the representation section);
//   coupling_left_kernel  W_q = U_t·S_ts for each coupling pair q = (t, s) of the level;
//   coupling_block_kernel A(t, s) = W_q·U_sᴴ into its place in the caller's order, and its
//                         conjugate transpose into the mirrored place;
//   dense_block_kernel    each dense block into its place, and (off the diagonal) its mirror.
// Every kernel is one thread per output element, grid-strided, no shared memory: thread (r, p)
// of a node owns row r of the node's output (its sum over k terms in registers); consecutive
// threads take consecutive rows, so the reads of U and W are coalesced and S and the other side's
// basis row are broadcast; the writes to the caller's order go through the permutation
// (scattered). A test and diagnostics helper: O(n²·k) work, bound by those scattered writes.
// Each element of A belongs to exactly one stored block or its mirror, so no two threads write
// the same element, and every element of the n × n is written.
// The host knows no node's size (the tree lives on the device), so a level's kernels run over a
// bound: a node of level l holds at most cap_l = min(n, m·2^{L−l}) points (2^{L−l} leaves of at
// most m), and threads past a node's size do nothing.
namespace {

using std::int64_t;
constexpr int kExpandThreads = 256;

unsigned expand_blocks(long long total) {
  return static_cast<unsigned>(std::clamp((total + kExpandThreads - 1) / kExpandThreads, 1LL, 1LL << 20));
}

#define COVFLOW_H2_EXPAND_STRIDE(e, total)                                                          \
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < (total); \
       e += static_cast<long long>(gridDim.x) * blockDim.x)

__host__ __device__ inline long long heap_index(int level, long long t) { return (1LL << level) - 1 + t; }

// The most points a node of `level` holds (the bound above).
int64_t node_cap(const H2DeviceShape& s, int level) {
  int64_t cap = s.leaf_capacity;
  for (int l = s.depth; l > level && cap < s.n; --l) cap *= 2;
  return std::min(cap, s.n);
}

// U_L[begin_t + r, p] = leaf_basis of leaf t [r, p], r < the leaf's size.
template <class D>
__global__ void leaf_rows_kernel(const int* node_begin, const int* node_end, int depth, long long leaves, long long m, int k,
                                 const D* leaf_basis, long long leaf_stride, long long n, D* u, long long u_stride) {
  const long long per_leaf = m * k;
  leaf_basis += blockIdx.y * leaf_stride;
  u += blockIdx.y * u_stride;
  COVFLOW_H2_EXPAND_STRIDE(e, leaves * per_leaf) {
    const long long t = e / per_leaf, within = e % per_leaf, r = within % m, p = within / m;
    const long long heap = heap_index(depth, t);
    const int begin = node_begin[heap];
    if (r < node_end[heap] - begin) u[begin + r + p * n] = leaf_basis[e];
  }
}

// U_l[begin_c + r, p] = Σ_q U_{l+1}[begin_c + r, q]·E_c[q, p] for child c of `child_level` (its
// transfer kc × kp at transfer + c·kc·kp); zero when kc = 0.
template <class D>
__global__ void basis_up_kernel(const int* node_begin, const int* node_end, int child_level, long long children, long long cap,
                                int kc, int kp, const D* transfer, long long transfer_stride, const D* child_u, long long n, D* u,
                                long long u_stride) {
  const long long per_child = cap * kp;
  transfer += blockIdx.y * transfer_stride;
  child_u += blockIdx.y * u_stride;
  u += blockIdx.y * u_stride;
  COVFLOW_H2_EXPAND_STRIDE(e, children * per_child) {
    const long long c = e / per_child, within = e % per_child, r = within % cap, p = within / cap;
    const long long heap = heap_index(child_level, c);
    const int begin = node_begin[heap];
    if (r >= node_end[heap] - begin) continue;
    const D* ec = transfer + c * kc * kp;
    D sum = from_real<D>(sreal_t<D>(0));
    for (int q = 0; q < kc; ++q) sum = fma_(sum, child_u[begin + r + q * n], ec[q + static_cast<long long>(p) * kc]);
    u[begin + r + p * n] = sum;
  }
}

// W_q[r, b] = Σ_a U_l[begin_t + r, a]·S_q[a, b], cap × k per pair (ld cap), r < t's size; pair q
// is the level's (first + q)-th, its S at coupling + q·k².
template <class D>
__global__ void coupling_left_kernel(const int* node_begin, const int* node_end, int level, const int* pair_row, int first,
                                     long long pairs, long long cap, int k, const D* coupling, long long coupling_stride,
                                     const D* u, long long n, long long u_stride, D* w, long long w_stride) {
  const long long per_pair = cap * k;
  coupling += blockIdx.y * coupling_stride;
  u += blockIdx.y * u_stride;
  w += blockIdx.y * w_stride;
  COVFLOW_H2_EXPAND_STRIDE(e, pairs * per_pair) {
    const long long q = e / per_pair, within = e % per_pair, r = within % cap, b = within / cap;
    const long long heap = heap_index(level, pair_row[first + q]);
    const int begin = node_begin[heap];
    if (r >= node_end[heap] - begin) continue;
    const D* s = coupling + q * k * k;
    D sum = from_real<D>(sreal_t<D>(0));
    for (int a = 0; a < k; ++a) sum = fma_(sum, u[begin + r + static_cast<long long>(a) * n], s[a + b * k]);
    w[e] = sum;
  }
}

// A(perm[begin_t + r], perm[begin_s + c]) = Σ_b W_q[r, b]·conj(U_l[begin_s + c, b]) and its
// mirror the conjugate; zero when k = 0 (a coupling of a rank-0 level stands for a zero block).
template <class D>
__global__ void coupling_block_kernel(const int* node_begin, const int* node_end, int level, const int* pair_row,
                                      const int* pair_col, int first, long long pairs, long long cap, int k, const D* w,
                                      long long w_stride, const D* u, long long n, long long u_stride, const int* permutation,
                                      D* out, long long ld, long long out_stride) {
  const long long per_pair = cap * cap;
  w += blockIdx.y * w_stride;
  u += blockIdx.y * u_stride;
  out += blockIdx.y * out_stride;
  COVFLOW_H2_EXPAND_STRIDE(e, pairs * per_pair) {
    const long long q = e / per_pair, within = e % per_pair, r = within % cap, c = within / cap;
    const long long heap_t = heap_index(level, pair_row[first + q]), heap_s = heap_index(level, pair_col[first + q]);
    const int begin_t = node_begin[heap_t], begin_s = node_begin[heap_s];
    if (r >= node_end[heap_t] - begin_t || c >= node_end[heap_s] - begin_s) continue;
    const D* wq = w + q * cap * k;
    D sum = from_real<D>(sreal_t<D>(0));
    for (int b = 0; b < k; ++b) sum = fma_conj(sum, u[begin_s + c + static_cast<long long>(b) * n], wq[r + b * cap]);
    const long long i = permutation[begin_t + r], j = permutation[begin_s + c];
    out[i + j * ld] = sum;
    out[j + i * ld] = conj_of(sum);
  }
}

// The dense blocks (level L, m × m each, ld m) into their places; off the diagonal also the
// mirror. A diagonal block is stored whole and written once.
template <class D>
__global__ void dense_block_kernel(const int* node_begin, const int* node_end, int depth, const int* pair_row,
                                   const int* pair_col, int first, long long pairs, long long m, const D* dense,
                                   long long dense_stride, const int* permutation, D* out, long long ld,
                                   long long out_stride) {
  const long long per_pair = m * m;
  dense += blockIdx.y * dense_stride;
  out += blockIdx.y * out_stride;
  COVFLOW_H2_EXPAND_STRIDE(e, pairs * per_pair) {
    const long long q = e / per_pair, within = e % per_pair, r = within % m, c = within / m;
    const int t = pair_row[first + q], s = pair_col[first + q];
    const long long heap_t = heap_index(depth, t), heap_s = heap_index(depth, s);
    const int begin_t = node_begin[heap_t], begin_s = node_begin[heap_s];
    if (r >= node_end[heap_t] - begin_t || c >= node_end[heap_s] - begin_s) continue;
    const D v = dense[e];
    const long long i = permutation[begin_t + r], j = permutation[begin_s + c];
    out[i + j * ld] = v;
    if (t != s) out[j + i * ld] = conj_of(v);
  }
}

#undef COVFLOW_H2_EXPAND_STRIDE

// The first level with couplings: the expansion builds the bases from the leaves up to it (those
// above are not used); depth + 1 when there are none.
int top_level(const H2DeviceShape& s) {
  for (int l = 0; l <= s.depth; ++l)
    if (s.coupling_count(l) > 0) return l;
  return s.depth + 1;
}

}  // namespace

// The expansion's scratch, per matrix of the batch: U_l of two adjacent levels (n × max k_l each,
// tree order, ld n) and the W_q of one level's pairs (pairs_l × cap_l × k_l, the largest level);
// `count` matrices' worth, matrix c's parts at c·basis_stride and c·w_stride.
template <class T>
struct ExpandScratch {
  T* basis[2] = {nullptr, nullptr};
  T* w = nullptr;
  int64_t basis_stride = 0, w_stride = 0;
  std::size_t bytes = 0;

  ExpandScratch(const H2DeviceShape& s, int64_t count, std::byte* base) {
    Carve carve(base);
    const int top = top_level(s);
    int64_t k_max = 0, w_max = 0;
    for (int l = top; l <= s.depth; ++l) {
      const int64_t k = s.rank[static_cast<std::size_t>(l)];
      k_max = std::max(k_max, k);
      w_max = std::max(w_max, int64_t{s.coupling_count(l)} * node_cap(s, l) * k);
    }
    basis_stride = s.n * k_max;
    w_stride = w_max;
    basis[0] = carve.take<T>(count * basis_stride);
    basis[1] = carve.take<T>(count * basis_stride);
    w = carve.take<T>(count * w_stride);
    bytes = carve.bytes();
  }
};

template <class T>
std::size_t expand_workspace(const H2DeviceShape& shape, std::int64_t count) {
  return ExpandScratch<T>(shape, count, nullptr).bytes;
}

template <class T>
void expand(CudaContext& context, const H2DeviceShape& s, const H2DeviceArrays<T>& d, const ValueStrides& stride,
            Batch<T> out, std::byte* workspace) {
  using D = device_t<T>;
  const cudaStream_t stream = context.stream();
  const int64_t count = out.count;
  if (count == 0) return;
  const ExpandScratch<T> scratch(s, count, workspace);
  const int depth = s.depth, top = top_level(s);
  const int64_t n = s.n, m = s.leaf_capacity;
  D* target = dev(out.data);
  const long long ld = out.ld, out_stride = out.stride;
  const long long us = scratch.basis_stride, ws = scratch.w_stride;
  auto k = [&](int l) { return s.rank[static_cast<std::size_t>(l)]; };
  auto grid = [&](long long total) { return dim3(expand_blocks(total), static_cast<unsigned>(count)); };

  for (int l = depth; l >= top; --l) {
    D* u = dev(scratch.basis[l % 2]);
    const D* child_u = dev(scratch.basis[(l + 1) % 2]);
    if (l == depth) {
      if (const long long total = s.nodes(depth) * m * k(depth); total > 0) {
        leaf_rows_kernel<D><<<grid(total), kExpandThreads, 0, stream>>>(d.node_begin, d.node_end, depth, s.nodes(depth), m,
                                                                        k(depth), dev(d.leaf_basis), stride.leaf_basis, n, u, us);
        COVFLOW_CHECK_LAUNCH();
      }
    } else if (const long long cap = node_cap(s, l + 1), total = s.nodes(l + 1) * cap * k(l); total > 0) {
      basis_up_kernel<D><<<grid(total), kExpandThreads, 0, stream>>>(
          d.node_begin, d.node_end, l + 1, s.nodes(l + 1), cap, k(l + 1), k(l),
          dev(d.transfer) + s.transfer_offset[static_cast<std::size_t>(l) + 1], stride.transfer, child_u, n, u, us);
      COVFLOW_CHECK_LAUNCH();
    }
    const long long pairs = s.coupling_count(l), cap = node_cap(s, l);
    if (pairs == 0) continue;
    const int first = s.coupling_level_ptr[static_cast<std::size_t>(l)];
    D* w = dev(scratch.w);
    if (const long long total = pairs * cap * k(l); total > 0) {
      coupling_left_kernel<D><<<grid(total), kExpandThreads, 0, stream>>>(
          d.node_begin, d.node_end, l, d.couplings.row, first, pairs, cap, k(l),
          dev(d.coupling) + s.coupling_offset[static_cast<std::size_t>(l)], stride.coupling, u, n, us, w, ws);
      COVFLOW_CHECK_LAUNCH();
    }
    coupling_block_kernel<D><<<grid(pairs * cap * cap), kExpandThreads, 0, stream>>>(
        d.node_begin, d.node_end, l, d.couplings.row, d.couplings.col, first, pairs, cap, k(l), w, ws, u, n, us,
        d.permutation, target, ld, out_stride);
    COVFLOW_CHECK_LAUNCH();
  }
  if (const long long pairs = s.dense_count(); pairs > 0) {
    const int first = s.dense_level_ptr[static_cast<std::size_t>(depth)];
    dense_block_kernel<D><<<grid(pairs * m * m), kExpandThreads, 0, stream>>>(
        d.node_begin, d.node_end, depth, d.dense_pairs.row, d.dense_pairs.col, first, pairs, m, dev(d.dense), stride.dense,
        d.permutation, target, ld, out_stride);
    COVFLOW_CHECK_LAUNCH();
  }
}

}  // namespace detail::h2_cuda

template <class T>
H2Device<T> h2_upload(Exec& cuda_exec, const H2<T>& a) {
  constexpr const char* op = "h2_upload";
  require_cuda(cuda_exec, op);
  require_h2(a, op);
  H2Device<T> out = detail::h2_cuda::allocate(cuda_exec, a);
  const cudaStream_t stream = cuda_exec.cuda_context().stream();
  const H2DeviceArrays<T>& d = out.arrays();
  upload_array(const_cast<T*>(d.leaf_basis), a.leaf_basis, stream);
  upload_array(const_cast<T*>(d.transfer), a.transfer, stream);
  upload_array(const_cast<T*>(d.coupling), a.coupling, stream);
  upload_array(const_cast<T*>(d.dense), a.dense, stream);
  return out;
}

template <class T>
H2<T> h2_download(Exec& cuda_exec, const H2Device<T>& a) {
  constexpr const char* op = "h2_download";
  require_cuda(cuda_exec, op);
  require_device_h2(cuda_exec, a, op);
  CudaContext& context = cuda_exec.cuda_context();
  context.make_current();
  const cudaStream_t stream = context.stream();
  const H2DeviceShape& s = a.shape();
  const H2DeviceArrays<T>& d = a.arrays();

  H2<T> out;
  out.tree.n = s.n;
  out.tree.dim = s.dim;
  out.tree.depth = s.depth;
  out.tree.leaf_capacity = s.leaf_capacity;
  out.tree.box = s.box;
  out.rank = s.rank;
  out.transfer_offset = s.transfer_offset;
  out.coupling_offset = s.coupling_offset;
  out.orthogonal = s.orthogonal;
  out.couplings.level_ptr = s.coupling_level_ptr;
  out.dense_pairs.level_ptr = s.dense_level_ptr;
  const auto nodes = static_cast<std::size_t>((std::int64_t{2} << s.depth) - 1);
  to_host(out.tree.permutation, d.permutation, static_cast<std::size_t>(s.n), stream);
  to_host(out.tree.node_begin, d.node_begin, nodes, stream);
  to_host(out.tree.node_end, d.node_end, nodes, stream);
  const auto ptrs = static_cast<std::size_t>(H2Pairs::ptr_offset(s.depth + 1));
  H2Pairs* lists[2] = {&out.couplings, &out.dense_pairs};
  const H2DevicePairs* device_lists[2] = {&d.couplings, &d.dense_pairs};
  for (int i = 0; i < 2; ++i) {
    const auto count = static_cast<std::size_t>(lists[i]->count());
    to_host(lists[i]->row, device_lists[i]->row, count, stream);
    to_host(lists[i]->col, device_lists[i]->col, count, stream);
    to_host(lists[i]->row_ptr, device_lists[i]->row_ptr, ptrs, stream);
    to_host(lists[i]->col_ptr, device_lists[i]->col_ptr, ptrs, stream);
    to_host(lists[i]->col_pairs, device_lists[i]->col_pairs, count, stream);
  }
  const auto m = static_cast<std::size_t>(s.leaf_capacity);
  to_host(out.leaf_basis, d.leaf_basis, static_cast<std::size_t>(s.nodes(s.depth)) * m * static_cast<std::size_t>(s.rank.back()), stream);
  to_host(out.transfer, d.transfer, static_cast<std::size_t>(s.transfer_offset.back()), stream);
  to_host(out.coupling, d.coupling, static_cast<std::size_t>(s.coupling_offset.back()), stream);
  to_host(out.dense, d.dense, static_cast<std::size_t>(s.dense_count()) * m * m, stream);
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));
  return out;
}

template <class T>
std::size_t h2_expand_workspace(const Exec& cuda_exec, const H2Device<T>& a) {
  constexpr const char* op = "h2_expand_workspace";
  require_cuda(cuda_exec, op);
  if (a.empty()) fail(op, "A is an empty H2Device (default-constructed or moved from)");
  return detail::h2_cuda::expand_workspace<T>(a.shape(), 1);
}

template <class T>
void h2_expand(Exec& cuda_exec, const H2Device<T>& a, Batch<T> out) {
  constexpr const char* op = "h2_expand";
  require_cuda(cuda_exec, op);
  require_device_h2(cuda_exec, a, op);
  require_vectors(cuda_exec, out, a.shape().n, a.shape().n, op, "out");
  CudaContext& context = cuda_exec.cuda_context();
  context.make_current();
  auto* workspace = static_cast<std::byte*>(context.workspace().acquire(h2_expand_workspace<T>(cuda_exec, a)));
  detail::h2_cuda::expand<T>(context, a.shape(), a.arrays(), {}, out, workspace);
}

template <class T>
std::size_t h2_gemv_workspace(const Exec& cuda_exec, const H2Device<T>& a, std::int64_t nvec) {
  constexpr const char* op = "h2_gemv_workspace";
  require_cuda(cuda_exec, op);
  if (a.empty()) fail(op, "A is an empty H2Device (default-constructed or moved from)");
  if (nvec < 0) fail(op, "nvec " + std::to_string(nvec) + " must not be negative");
  if (nvec == 0) return 0;
  return detail::h2_cuda::GemvScratch<T>(a.shape(), nvec, nullptr).bytes;
}

template <class T>
void h2_gemv(Exec& cuda_exec, T alpha, const H2Device<T>& a, Batch<const T> x, T beta, Batch<T> y) {
  constexpr const char* op = "h2_gemv";
  require_cuda(cuda_exec, op);
  require_device_h2(cuda_exec, a, op);
  require_vectors(cuda_exec, x, a.shape().n, -1, op, "X");
  require_vectors(cuda_exec, y, a.shape().n, x.cols, op, "Y");
  if (x.cols == 0) return;
  CudaContext& context = cuda_exec.cuda_context();
  context.make_current();
  auto* workspace = static_cast<std::byte*>(context.workspace().acquire(h2_gemv_workspace<T>(cuda_exec, a, x.cols)));
  detail::h2_cuda::gemv<T>(context, alpha, a, x, beta, y, workspace);
}

template <class T>
std::vector<H2PhaseTime> h2_gemv_phases(Exec& cuda_exec, T alpha, const H2Device<T>& a, Batch<const T> x, T beta,
                                        Batch<T> y) {
  constexpr const char* op = "h2_gemv_phases";
  require_cuda(cuda_exec, op);
  require_device_h2(cuda_exec, a, op);
  require_vectors(cuda_exec, x, a.shape().n, -1, op, "X");
  require_vectors(cuda_exec, y, a.shape().n, x.cols, op, "Y");
  if (x.cols == 0) return {};
  CudaContext& context = cuda_exec.cuda_context();
  context.make_current();
  const cudaStream_t stream = context.stream();
  auto* workspace = static_cast<std::byte*>(context.workspace().acquire(h2_gemv_workspace<T>(cuda_exec, a, x.cols)));
  std::vector<std::string> names;
  std::vector<cuda::Event> events;
  events.emplace_back().record(stream);
  const detail::h2_cuda::PhaseMark mark = [&](const std::string& phase) {
    names.push_back(phase);
    events.emplace_back().record(stream);
  };
  detail::h2_cuda::gemv<T>(context, alpha, a, x, beta, y, workspace, &mark);
  events.back().synchronize();
  std::vector<H2PhaseTime> out;
  for (std::size_t i = 0; i < names.size(); ++i) out.push_back({names[i], events[i + 1].elapsed_since(events[i])});
  return out;
}

template <class T>
H2Device<T> h2_from_dense_device(Exec& cuda_exec, Batch<const T> a, std::span<const double> points, int dim, double tol,
                                 const H2Options& options, H2CompressReport* report) {
  constexpr const char* op = "h2_from_dense_device";
  require_cuda(cuda_exec, op);
  detail::h2::require_from_dense(cuda_exec, a, points, dim, tol, options, op);
  return detail::h2_cuda::from_dense<T>(cuda_exec, a, points, dim, tol, options, report);
}

template <class T>
void h2_orthogonalize(Exec& cuda_exec, H2Device<T>& a) {
  constexpr const char* op = "h2_orthogonalize";
  require_cuda(cuda_exec, op);
  require_device_h2(cuda_exec, a, op);
  // The new H2Device is complete and the stream synchronised when orthogonalized returns, so the
  // old allocation, freed by this assignment, is no longer read by queued work.
  a = detail::h2_cuda::orthogonalized(cuda_exec, a);
}

template <class T>
H2CompressReport h2_compress(Exec& cuda_exec, H2Device<T>& a, double tol) {
  constexpr const char* op = "h2_compress";
  require_cuda(cuda_exec, op);
  if (!(tol > 0) || !std::isfinite(tol)) fail(op, "tol " + number(tol) + " must be positive and finite");
  require_device_h2(cuda_exec, a, op);
  return detail::h2_cuda::compress(cuda_exec, a, tol);
}

#define COVFLOW_H2_CUDA_API(T)                                                                  \
  template H2Device<T> detail::h2_cuda::DeviceAccess::make<T>(Exec&, H2DeviceShape);            \
  template H2Device<T> detail::h2_cuda::allocate<T>(Exec&, const H2<T>&);                       \
  template H2Device<T> detail::h2_cuda::resized<T>(Exec&, const H2Device<T>&, const std::vector<int>&); \
  template std::size_t detail::h2_cuda::expand_workspace<T>(const H2DeviceShape&, std::int64_t);  \
  template void detail::h2_cuda::expand<T>(CudaContext&, const H2DeviceShape&, const H2DeviceArrays<T>&,     \
                                           const detail::h2_cuda::ValueStrides&, Batch<T>, std::byte*);       \
  template H2Device<T> h2_from_dense_device<T>(Exec&, Batch<const T>, std::span<const double>, int, double, const H2Options&, \
                                               H2CompressReport*);                                               \
  template H2Device<T> h2_upload<T>(Exec&, const H2<T>&);                                       \
  template H2<T> h2_download<T>(Exec&, const H2Device<T>&);                                     \
  template std::size_t h2_expand_workspace<T>(const Exec&, const H2Device<T>&);                 \
  template void h2_expand<T>(Exec&, const H2Device<T>&, Batch<T>);                              \
  template std::size_t h2_gemv_workspace<T>(const Exec&, const H2Device<T>&, std::int64_t);     \
  template void h2_gemv<T>(Exec&, T, const H2Device<T>&, Batch<const T>, T, Batch<T>);                  \
  template std::vector<H2PhaseTime> h2_gemv_phases<T>(Exec&, T, const H2Device<T>&, Batch<const T>, T, Batch<T>); \
  template void h2_orthogonalize<T>(Exec&, H2Device<T>&);                                       \
  template H2CompressReport h2_compress<T>(Exec&, H2Device<T>&, double);
COVFLOW_H2_CUDA_API(f32)
COVFLOW_H2_CUDA_API(f64)
COVFLOW_H2_CUDA_API(cf32)
COVFLOW_H2_CUDA_API(cf64)
#undef COVFLOW_H2_CUDA_API

}  // namespace covflow::linalg

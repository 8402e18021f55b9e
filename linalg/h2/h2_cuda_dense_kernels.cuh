// Internal: the kernels of the construction from a dense matrix on the device (h2.hpp,
// h2_from_dense_device and H2DensePlan), shared by the one-matrix construction (h2_cuda_dense.cu)
// and the batched plan (h2_cuda_dense_plan.cu). The algorithm is the CPU's h2_from_dense (Börm,
// "Efficient numerical methods for non-local operators", EMS 2010, H²-matrix approximation of
// dense matrices), batched per level as in Boukaram, Turkiyyah & Keyes, ACM TOMS 45(1) 2019.
//
// Every kernel is one thread per output element, grid-strided over blockIdx.x, and takes a batch
// of matrices ("cells") on the same tree along blockIdx.y: cell c reads its input and writes its
// outputs `stride` elements after cell 0's (a stride of 0 with one cell is the one-matrix call).
// Thread (row, column) of a node owns that output element, its sum over the node's points or
// ranks in registers; no shared memory. O(n²·k) work per level, as the CPU path.
//
// `skip` (may be null): per cell, nonzero when the cell's input is not to be read (a non-finite
// entry); such a cell's kernels read zeros instead of A, so its factorizations see a zero matrix,
// stay finite and converge, and no other cell is touched.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "../common/device_scalar.cuh"
#include "h2_cuda_launch.cuh"

namespace covflow::linalg::detail::h2_cuda::dense {
// Internal linkage: each .cu file that includes this header gets its own kernels (no device code
// crosses a translation unit in a build without relocatable device code).
namespace {

// The grid of a batched launch: `total` elements per cell along x, one y per cell.
inline dim3 grid_for(long long total, long long cells) { return dim3(blocks_for(total), static_cast<unsigned>(cells)); }

#define COVFLOW_GRID_STRIDE(e, total)                                                         \
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < (total); \
       e += static_cast<long long>(gridDim.x) * blockDim.x)

// The cell's element (row, col) of A, or zero when the cell is skipped.
template <class D>
__device__ inline D read_a(const D* a, long long lda, long long row, long long col, bool skipped) {
  return skipped ? zero_of<D>() : a[row + col * lda];
}

// ‖A‖_F² in double, one matrix (one atomic per thread block: the order of the blocks' sums varies).
template <class D>
__global__ void norm2_kernel(const D* a, long long ld, long long n, double* out) {
  __shared__ double part[kThreads];
  double sum = 0;
  COVFLOW_GRID_STRIDE(e, n * n) sum += static_cast<double>(abs2(a[e % n + (e / n) * ld]));
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, part[0]);
}

// ‖A_c‖_F² per cell in a fixed order (one block per cell: thread i sums elements i, i + kThreads,
// …, then a tree in shared memory), so that a cell's threshold does not depend on the launch; and
// the cell's status: 0, or `non_finite` when the sum is not finite (a NaN or Inf entry, or an
// overflow of double), and then skip = 1 (the later kernels read zeros for it).
template <class D>
__global__ void cell_norm2_kernel(const D* a, long long ld, long long stride, long long n, int non_finite, double* norm2,
                                  int* status, int* skip) {
  __shared__ double part[kThreads];
  const long long cell = blockIdx.x;
  a += cell * stride;
  double sum = 0;
  for (long long e = threadIdx.x; e < n * n; e += kThreads) sum += static_cast<double>(abs2(a[e % n + (e / n) * ld]));
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    norm2[cell] = part[0];
    const bool finite = isfinite(part[0]);
    status[cell] = finite ? 0 : non_finite;
    skip[cell] = finite ? 0 : 1;
  }
}

// The level's nodes as the kernels read them.
struct LevelNodes {
  const int* begin = nullptr;     // per node, tree position of its first point
  const int* size = nullptr;      // per node
  const int* far_ptr = nullptr;   // per node + 1: its F* in far_cols[far_ptr[t] … far_ptr[t+1])
  const int* far_cols = nullptr;  // caller's column indices (permutation applied)
};

// Leaves: M_tᴴ[j, i] = conj(A(perm[b_t + i], F_t[j])), F × m per leaf, zero outside. Per cell:
// A at cell·a_stride, the output at cell·count·F·m.
template <class D>
__global__ void gather_leaf_kernel(LevelNodes nodes, const int* perm, const D* a, long long lda, long long a_stride,
                                   const int* skip, long long count, int f_max, int m, D* out) {
  const long long per = static_cast<long long>(f_max) * m, cell = blockIdx.y;
  const bool skipped = skip != nullptr && skip[cell] != 0;
  a += cell * a_stride;
  out += cell * count * per;
  COVFLOW_GRID_STRIDE(e, count * per) {
    const long long t = e / per, within = e % per;
    const int j = static_cast<int>(within % f_max), i = static_cast<int>(within / f_max);
    const int f = nodes.far_ptr[t + 1] - nodes.far_ptr[t];
    D v = zero_of<D>();
    if (j < f && i < nodes.size[t])
      v = conj_of(read_a(a, lda, perm[nodes.begin[t] + i], nodes.far_cols[nodes.far_ptr[t] + j], skipped));
    out[e] = v;
  }
}

// Inner nodes: M_tᴴ[j, c·kc + p] = Σ_i conj(A(perm[b_c + i], F_t[j]))·U_c[i, p] (child c of t, its
// expanded basis in `basis`, n × kc in tree order, ld n). Per cell: A at cell·a_stride, the basis
// at cell·n·kc, the output at cell·count·F·2kc.
template <class D>
__global__ void project_kernel(LevelNodes parents, LevelNodes children, const int* perm, const D* a, long long lda,
                               long long a_stride, const int* skip, long long count, int f_max, int kc, const D* basis,
                               long long n, D* out) {
  const long long w = 2LL * kc, per = static_cast<long long>(f_max) * w, cell = blockIdx.y;
  const bool skipped = skip != nullptr && skip[cell] != 0;
  a += cell * a_stride;
  basis += cell * n * kc;
  out += cell * count * per;
  COVFLOW_GRID_STRIDE(e, count * per) {
    const long long t = e / per, within = e % per;
    const int j = static_cast<int>(within % f_max), col = static_cast<int>(within / f_max);
    const long long c = 2 * t + col / kc;
    const int p = col % kc;
    const int f = parents.far_ptr[t + 1] - parents.far_ptr[t];
    D sum = zero_of<D>();
    if (j < f && !skipped) {
      const long long column = parents.far_cols[parents.far_ptr[t] + j];
      const int b = children.begin[c], size = children.size[c];
      for (int i = 0; i < size; ++i) sum = fma_conj(sum, a[perm[b + i] + column * lda], basis[b + i + p * n]);
    }
    out[e] = sum;
  }
}

// Rᴴ (w × q, ld w) from geqrf's output (F × w, ld F; R its upper min(F, w) × w part); `count`
// matrices (all cells' nodes: the matrices are independent).
template <class D>
__global__ void rh_kernel(const D* qr, long long count, int f_max, int w, int q, D* rh) {
  const long long per = static_cast<long long>(w) * q;
  COVFLOW_GRID_STRIDE(e, count * per) {
    const long long t = e / per, within = e % per;
    const int i = static_cast<int>(within % w), j = static_cast<int>(within / w);
    rh[e] = j <= i ? conj_of(qr[t * static_cast<long long>(f_max) * w + j + static_cast<long long>(i) * f_max]) : zero_of<D>();
  }
}

// Per node: the fewest r with Σ_{i>r} σ_i² ≤ τ² (0 for an empty node or F*), and that tail;
// τ² = tol²·‖A_c‖_F²/(2·N) from the cell's norm2 (the expression the host evaluates on the CPU
// path, in the same order). A non-finite norm gives no threshold any tail passes: rank 0. Per
// cell: σ at cell·count·q, rank and dropped at cell·count.
template <class R>
__global__ void rank_kernel(LevelNodes nodes, long long count, const R* sigma, int q, const double* norm2, double tol,
                            double nodes_with_far, int* rank, double* dropped) {
  const long long cell = blockIdx.y;
  const double tau2 = nodes_with_far > 0 ? tol * tol * norm2[cell] / (2.0 * nodes_with_far) : 0.0;
  sigma += cell * count * q;
  rank += cell * count;
  dropped += cell * count;
  COVFLOW_GRID_STRIDE(t, count) {
    int r = 0;
    double tail = 0;
    if (nodes.size[t] > 0 && nodes.far_ptr[t + 1] > nodes.far_ptr[t]) {
      r = q;
      while (r > 0) {
        const double s = static_cast<double>(sigma[t * q + r - 1]);
        if (tail + s * s > tau2) break;
        tail += s * s;
        --r;
      }
    }
    rank[t] = r;
    dropped[t] = tail;
  }
}

// Leaves: leaf basis (m × k per leaf, rows past the leaf's size and columns past its rank zero) and
// the expanded basis (n × k, tree order) from gesvj's U (m × q per leaf, ld m). Per cell: U at
// cell·count·m·q, rank at cell·count, the leaf bases at cell·leaf_stride, the expanded basis at
// cell·n·k.
template <class D>
__global__ void basis_kernel(LevelNodes nodes, long long count, const D* u, int m, int q, const int* rank, int k,
                             D* leaf_basis, long long leaf_stride, D* expanded, long long n) {
  const long long per = static_cast<long long>(m) * k, cell = blockIdx.y;
  u += cell * count * m * q;
  rank += cell * count;
  leaf_basis += cell * leaf_stride;
  expanded += cell * n * k;
  COVFLOW_GRID_STRIDE(e, count * per) {
    const long long t = e / per, within = e % per;
    const int i = static_cast<int>(within % m), p = static_cast<int>(within / m);
    D v = zero_of<D>();
    if (i < nodes.size[t] && p < rank[t]) v = u[t * static_cast<long long>(m) * q + i + static_cast<long long>(p) * m];
    leaf_basis[e] = v;
    if (i < nodes.size[t]) expanded[nodes.begin[t] + i + static_cast<long long>(p) * n] = v;
  }
}

// Transfers of level l + 1 (child c: kc × kp, ld kc) from the parents' vectors (2·kc × q, ld 2·kc):
// E_c[row, col] = W_t[(c mod 2)·kc + row, col] for row < rank_c, col < rank_t; zero elsewhere.
// Per cell: the vectors at cell·(children/2)·2kc·q, the ranks at cell·(children/2) and
// cell·children, the transfers at cell·transfer_stride.
template <class D>
__global__ void transfer_kernel(long long children, const D* u, int kc, int q, const int* parent_rank, const int* child_rank,
                                int kp, D* transfer, long long transfer_stride) {
  const long long per = static_cast<long long>(kc) * kp, cell = blockIdx.y, parents = children / 2;
  u += cell * parents * 2 * kc * q;
  parent_rank += cell * parents;
  child_rank += cell * children;
  transfer += cell * transfer_stride;
  COVFLOW_GRID_STRIDE(e, children * per) {
    const long long c = e / per, within = e % per, t = c / 2;
    const int row = static_cast<int>(within % kc), col = static_cast<int>(within / kc);
    D v = zero_of<D>();
    if (row < child_rank[c] && col < parent_rank[t])
      v = u[t * 2LL * kc * q + (c % 2) * kc + row + static_cast<long long>(col) * 2 * kc];
    transfer[e] = v;
  }
}

// Expanded basis of level l (n × kp) from level l + 1's (n × kc) and the transfers:
// U_l[i, p] = Σ_q U_{l+1}[i, q]·E_{c(i)}[q, p], c(i) the level-(l+1) node of tree position i.
// Per cell: the child basis at cell·n·kc, the transfers at cell·transfer_stride, the output at
// cell·n·kp.
template <class D>
__global__ void expand_kernel(long long n, const int* node_of, const D* child_basis, int kc, const D* transfer,
                              long long transfer_stride, int kp, D* out) {
  const long long cell = blockIdx.y;
  child_basis += cell * n * kc;
  transfer += cell * transfer_stride;
  out += cell * n * kp;
  COVFLOW_GRID_STRIDE(e, n * kp) {
    const long long i = e % n, p = e / n;
    const D* ec = transfer + static_cast<long long>(node_of[i]) * kc * kp;
    D sum = zero_of<D>();
    for (int q = 0; q < kc; ++q) sum = fma_(sum, child_basis[i + q * n], ec[q + p * kc]);
    out[e] = sum;
  }
}

// Couplings, step 1: tmp_q[i, b] = Σ_j A(perm[b_t + i], perm[b_s + j])·U[b_s + j, b], cap × k per
// pair. Per cell: A at cell·a_stride, the basis at cell·n·k, tmp at cell·pairs·cap·k.
template <class D>
__global__ void coupling_right_kernel(LevelNodes nodes, const int* pair_row, const int* pair_col, long long pairs, int cap,
                                      const int* perm, const D* a, long long lda, long long a_stride, const int* skip,
                                      const D* basis, long long n, int k, D* tmp) {
  const long long per = static_cast<long long>(cap) * k, cell = blockIdx.y;
  const bool skipped = skip != nullptr && skip[cell] != 0;
  a += cell * a_stride;
  basis += cell * n * k;
  tmp += cell * pairs * per;
  COVFLOW_GRID_STRIDE(e, pairs * per) {
    const long long q = e / per, within = e % per;
    const int i = static_cast<int>(within % cap), b = static_cast<int>(within / cap);
    const int t = pair_row[q], s = pair_col[q];
    D sum = zero_of<D>();
    if (i < nodes.size[t] && !skipped) {
      const long long row = perm[nodes.begin[t] + i];
      const int bs = nodes.begin[s];
      for (int j = 0; j < nodes.size[s]; ++j)
        sum = fma_(sum, a[row + static_cast<long long>(perm[bs + j]) * lda], basis[bs + j + static_cast<long long>(b) * n]);
    }
    tmp[e] = sum;
  }
}

// Step 2: S_q[a, b] = Σ_i conj(U[b_t + i, a])·tmp_q[i, b], k × k per pair. Per cell: the basis at
// cell·n·k, tmp at cell·pairs·cap·k, S at cell·s_stride.
template <class D>
__global__ void coupling_left_kernel(LevelNodes nodes, const int* pair_row, long long pairs, int cap, const D* basis,
                                     long long n, int k, const D* tmp, D* s, long long s_stride) {
  const long long per = static_cast<long long>(k) * k, cell = blockIdx.y;
  basis += cell * n * k;
  tmp += cell * pairs * static_cast<long long>(cap) * k;
  s += cell * s_stride;
  COVFLOW_GRID_STRIDE(e, pairs * per) {
    const long long q = e / per, within = e % per;
    const int ra = static_cast<int>(within % k), cb = static_cast<int>(within / k);
    const int t = pair_row[q], bt = nodes.begin[t];
    D sum = zero_of<D>();
    for (int i = 0; i < nodes.size[t]; ++i)
      sum = fma_conj(sum, basis[bt + i + static_cast<long long>(ra) * n],
                     tmp[q * static_cast<long long>(cap) * k + i + static_cast<long long>(cb) * cap]);
    s[e] = sum;
  }
}

// Dense blocks: D_q[i, j] = A(perm[b_t + i], perm[b_s + j]), m × m, zero outside. Per cell: A at
// cell·a_stride, the blocks at cell·out_stride.
template <class D>
__global__ void dense_kernel(LevelNodes nodes, const int* pair_row, const int* pair_col, long long pairs, int m, const int* perm,
                             const D* a, long long lda, long long a_stride, const int* skip, D* out, long long out_stride) {
  const long long per = static_cast<long long>(m) * m, cell = blockIdx.y;
  const bool skipped = skip != nullptr && skip[cell] != 0;
  a += cell * a_stride;
  out += cell * out_stride;
  COVFLOW_GRID_STRIDE(e, pairs * per) {
    const long long q = e / per, within = e % per;
    const int i = static_cast<int>(within % m), j = static_cast<int>(within / m);
    const int t = pair_row[q], s = pair_col[q];
    D v = zero_of<D>();
    if (i < nodes.size[t] && j < nodes.size[s])
      v = read_a(a, lda, perm[nodes.begin[t] + i], perm[nodes.begin[s] + j], skipped);
    out[e] = v;
  }
}

#undef COVFLOW_GRID_STRIDE

}  // namespace
}  // namespace covflow::linalg::detail::h2_cuda::dense

// h2_gemv on the CUDA backend: Y = α·A·X + β·Y for an H² matrix on the device, in the phases of
// H2Opus's hgemv (Boukaram, Turkiyyah & Keyes, "Hierarchical matrix operations on GPUs:
// matrix-vector multiplication and compression", ACM TOMS 45(1), 2019, the matrix-vector
// section): every phase is one batched launch over a whole level, the launches sized from the
// ranks kept on the host, nothing read back.
//   gather      X → leaf blocks in tree order (gather_kernel)
//   upsweep     x̂_leaf = U_leafᴴ·X_leaf: one strided-batched GEMM over all leaves (leaf bases are
//               m × k_L with zero rows past the leaf's size, X's leaf blocks zero there too);
//               x̂_t = E_{2t}ᴴ·x̂_{2t} + E_{2t+1}ᴴ·x̂_{2t+1}: two strided-batched GEMMs per level,
//               stride 2 over the children, the second accumulating
//   couplings   ŷ_t = Σ_(t,s) S_ts·x̂_s + Σ_(u,t) S_utᴴ·x̂_u per level (block_rows_kernel; block_tile_kernel for 3+ vectors)
//   downsweep   ŷ_c += E_c·ŷ_parent: two strided-batched GEMMs per level (even, odd children)
//   leaves      y_t = U_t·ŷ_t + Σ D_ts·x_s + Σ D_utᴴ·x_u (u ≠ t), α, β and the scatter to the
//               caller's order fused (block_rows_kernel again)
// Levels above the first with couplings carry nothing and are skipped; a rank-0 level stops the
// sweeps there (its x̂ above is zero, its ŷ below gets nothing from above); no launch has an empty
// grid and no GEMM an empty dimension.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "covflow/linalg/cuda/check.hpp"
#include "h2_cuda_kernels.cuh"

namespace covflow::linalg::detail::h2_cuda {
namespace {

// block_rows_kernel's tiles: 32 output rows, each row's inner dimension split over 8 lanes of one
// warp, and 32 of the inner dimension at a time.
constexpr int kRowTile = 32, kSplit = 8, kInner = 32;
static_assert(kRowTile * kSplit == kThreads, "a row per 8 threads");

constexpr unsigned kMaxGridYZ = 65535;

template <class T>
using dev_t = device_t<T>;

template <class D>
__device__ inline bool is_zero(D value) {
  return real_part(value) == 0 && imag_part(value) == 0;
}

unsigned tiles_for(long long extent, int tile) {
  return static_cast<unsigned>(std::clamp<long long>((extent + tile - 1) / tile, 1, kMaxGridYZ));
}

// Gather: one thread per element of the leaf blocks (grid-stride), element (row, col) of leaf t's
// m × nvec block ← X[permutation[begin_t + row], col], zero past the leaf's size. Reads X scattered
// (the permutation), writes coalesced.
template <class D>
__global__ void gather_kernel(const int* permutation, const int* leaf_begin, const int* leaf_end, long long leaves,
                              long long m, int nvec, const D* x, long long ldx, D* x_leaves) {
  const long long per_leaf = m * nvec;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < leaves * per_leaf;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long t = e / per_leaf, within = e % per_leaf, row = within % m, col = within / m;
    const int begin = leaf_begin[t], size = leaf_end[t] - begin;
    x_leaves[e] = row < size ? x[permutation[begin + row] + col * ldx] : zero_of<D>();
  }
}

// One level's block rows as block_rows_kernel reads them. Node t's output (R × nvec) is the sum of
// its terms: the optional leading product lead_a[t]·lead_in[t], then op N of every stored pair
// (t, s) of its block row times in[s], then op C of every stored pair (u, t) of its block column
// times in[u] (the other triangle), skipping (t, t) when skip_self_mirror (a dense diagonal block
// is stored whole, once).
template <class D>
struct BlockRows {
  int rows = 0;                   // R: rows (and columns) of each pair's block and of each output
  int nvec = 0;
  const int* row_ptr = nullptr;   // the level's block-row index (H2Pairs::ptr_offset applied)
  const int* col_ptr = nullptr;
  const int* col_pairs = nullptr;
  const int* pair_row = nullptr;
  const int* pair_col = nullptr;
  const D* blocks = nullptr;      // pair q's R × R block at blocks + (q − first)·R², ld R
  int first = 0;
  bool skip_self_mirror = false;
  const D* in = nullptr;          // node s's R × nvec input at in + s·R·nvec, ld R
  const D* lead_a = nullptr;      // null: no leading term; else R × lead_inner at lead_a + t·R·lead_inner, ld R
  const D* lead_in = nullptr;     // lead_inner × nvec at lead_in + t·lead_inner·nvec, ld lead_inner
  int lead_inner = 0;
  // Output: with `out`, node t's block at out + t·R·nvec, ld R, overwritten. Without, scattered to
  // the caller's order: y[permutation[begin_t + i] + j·ldy] = α·sum + β·y (β = 0: y unread), rows
  // past the node's size dropped.
  D* out = nullptr;
  D* y = nullptr;
  long long ldy = 0;
  const int* permutation = nullptr;
  const int* node_begin = nullptr;  // the level's nodes
  const int* node_end = nullptr;
  // The blocks are leaf blocks whose rows and columns past their nodes' sizes are zero (dense
  // blocks, leaf bases' rows): those are not read, and a row tile past t's size is skipped.
  bool sized = false;
  D alpha{}, beta{};
};

// Sum over the 8 lanes of an aligned group (the inner-dimension split of block_rows_kernel) by
// butterfly shuffles: every lane of the group ends with the same total, summed in the same order.
template <class D>
__device__ inline D group_sum(D v) {
  for (int offset = kSplit / 2; offset > 0; offset >>= 1) {
    if constexpr (is_cx<D>) {
      v.x += __shfl_xor_sync(0xffffffffu, v.x, offset);
      v.y += __shfl_xor_sync(0xffffffffu, v.y, offset);
    } else {
      v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
  }
  return v;
}

// The block-row product of one level (couplings, or the leaves' dense blocks and bases).
// Ownership: one thread block per (node t, 32-row tile, NV-vector tile) of the output, the row and
// vector tiles grid-strided over blockIdx.y and blockIdx.z. Thread (r, g) = (tid / 8, tid % 8)
// owns row i0 + r and the inner indices c ≡ g (mod 8) of every 32-wide chunk, and keeps NV partial
// sums (one per vector of the tile) in registers over every term of t's whole block row and
// column; at the end the 8 lanes of a row, which share a warp, add their partials by shuffles and
// lane g writes the vectors v ≡ g (mod 8) — no two thread blocks write the same element, no
// atomics, and the order of every sum is fixed (deterministic). Each term's op(A) is staged
// 32 × 32 in shared memory (read coalesced along A's columns for op N and along its rows for op C,
// so the conjugate transposes are read as fast as the stored blocks), its input 32 × NV beside it;
// each staged element of A is read from shared memory once and used for NV multiply-adds (the
// matvec of one vector is bound by memory, not by the shared-memory traffic of a thread per output
// element). Budget: (32·33 + 32·NV) elements of shared memory (17 KB for complex double at NV = 1),
// 256 threads, NV accumulators per thread (48 registers for complex double at NV = 1). On the leaf level (`sized`) a block's
// rows and columns past its nodes' point counts are zero padding to the leaf capacity m: they are
// neither read nor multiplied, and a row tile wholly past t's points does nothing — a leaf holds
// about m/2 points on average (mean splits), so this skips up to three quarters of the dense
// blocks' bytes.
template <class D, int NV>
__global__ void __launch_bounds__(kThreads) block_rows_kernel(BlockRows<D> p) {
  __shared__ D a_tile[kInner][kRowTile + 1];  // a_tile[c][r] = op(A)[i0 + r, k0 + c]
  // b_tile[c][v] = B[k0 + c, j0 + v]; rows padded to NV + 1 elements so that the 8 lanes of a row,
  // which read rows c ≡ g (mod 8) of one column, fall in different banks.
  __shared__ D b_tile[kInner][NV + 1];
  const long long t = blockIdx.x;
  const int r = static_cast<int>(threadIdx.x) / kSplit, g = static_cast<int>(threadIdx.x) % kSplit;
  const long long R = p.rows;
  const int row_first = p.row_ptr[t], row_count = p.row_ptr[t + 1] - row_first;
  const int col_first = p.col_ptr[t], col_count = p.col_ptr[t + 1] - col_first;
  const int lead = p.lead_a != nullptr ? 1 : 0;
  const int terms = lead + row_count + col_count;
  auto size_of = [&](long long node) -> long long { return p.sized ? p.node_end[node] - p.node_begin[node] : R; };
  const long long rows = size_of(t);  // the rows of t's output that are not padding
  for (long long i0 = blockIdx.y * static_cast<long long>(kRowTile); i0 < rows; i0 += gridDim.y * static_cast<long long>(kRowTile))
    for (long long j0 = blockIdx.z * static_cast<long long>(NV); j0 < p.nvec; j0 += gridDim.z * static_cast<long long>(NV)) {
      D sum[NV];
#pragma unroll
      for (int v = 0; v < NV; ++v) sum[v] = zero_of<D>();
      for (int term = 0; term < terms; ++term) {
        // op(A) is R × ld_b (ld R as stored), B is ld_b × nvec (ld ld_b); only the first `inner`
        // of the inner dimension can be nonzero.
        const D* a;
        const D* b;
        long long ld_b = R, inner = R;
        bool adjoint = false;
        if (term < lead) {
          ld_b = inner = p.lead_inner;
          a = p.lead_a + t * R * ld_b;
          b = p.lead_in + t * ld_b * p.nvec;
        } else if (term < lead + row_count) {
          const int q = row_first + term - lead, s = p.pair_col[q];
          a = p.blocks + static_cast<long long>(q - p.first) * R * R;
          b = p.in + static_cast<long long>(s) * R * p.nvec;
          inner = size_of(s);
        } else {
          const int q = p.col_pairs[col_first + term - lead - row_count], u = p.pair_row[q];
          if (p.skip_self_mirror && u == t) continue;  // uniform over the block
          a = p.blocks + static_cast<long long>(q - p.first) * R * R;
          b = p.in + static_cast<long long>(u) * R * p.nvec;
          inner = size_of(u);
          adjoint = true;
        }
        for (long long k0 = 0; k0 < inner; k0 += kInner) {
          for (int e = threadIdx.x; e < kRowTile * kInner; e += kThreads) {
            int rr, cc;
            D v = zero_of<D>();
            if (!adjoint) {
              rr = e % kRowTile;
              cc = e / kRowTile;
              if (i0 + rr < rows && k0 + cc < inner) v = a[(i0 + rr) + (k0 + cc) * R];
            } else {
              cc = e % kInner;
              rr = e / kInner;
              if (i0 + rr < rows && k0 + cc < inner) v = conj_of(a[(k0 + cc) + (i0 + rr) * R]);
            }
            a_tile[cc][rr] = v;
          }
          for (int e = threadIdx.x; e < kInner * NV; e += kThreads) {
            const int cc = e % kInner, j = e / kInner;
            b_tile[cc][j] = k0 + cc < inner && j0 + j < p.nvec ? b[(k0 + cc) + (j0 + j) * ld_b] : zero_of<D>();
          }
          __syncthreads();
          const int depth = static_cast<int>(std::min<long long>(kInner, inner - k0));
          for (int c = g; c < depth; c += kSplit) {
            const D av = a_tile[c][r];
#pragma unroll
            for (int v = 0; v < NV; ++v) sum[v] = fma_(sum[v], av, b_tile[c][v]);
          }
          __syncthreads();
        }
      }
      const long long i = i0 + r;
#pragma unroll
      for (int v = 0; v < NV; ++v) {
        const D total = group_sum(sum[v]);
        const long long j = j0 + v;
        if (v % kSplit != g || i >= rows || j >= p.nvec) continue;
        if (p.out != nullptr) {
          p.out[t * R * p.nvec + i + j * R] = total;
        } else {
          const int begin = p.node_begin[t];
          if (i >= p.node_end[t] - begin) continue;
          D& out = p.y[p.permutation[begin + i] + j * p.ldy];
          out = is_zero(p.beta) ? p.alpha * total : p.alpha * total + p.beta * out;
        }
      }
    }
}

// The block-row product of one level for three or more vectors (block_rows_kernel's other form).
// Ownership: one thread block per (node t, ROWS-row tile, VECS-vector tile) of the output — 32 × 8
// up to 8 vectors, 16 × 16 past that, so that 16 vectors take one pass over A — the row and vector
// tiles grid-strided over blockIdx.y and blockIdx.z; thread (r, j) = (tid % ROWS, tid / ROWS) owns
// output element (i0 + r, j0 + j) and accumulates it in a register over every term of t's whole
// block row and column, then writes it once (no atomics, fixed order). Each term's op(A) is staged
// ROWS × 32 in shared memory as in block_rows_kernel, its input 32 × VECS beside it; the input
// tile is a broadcast and the A tile (padded by one) is read without bank conflicts. Budget:
// (32·(ROWS + 1) + 32·VECS) elements of shared memory (≤ 21 KB for complex double), 256 threads,
// 48 registers for complex double (ptxas, sm_90): more resident blocks than the NV-accumulator
// form reaches at 4 to 16 vectors, which is what made it the faster one there. The padding of
// leaf blocks (`sized`) is skipped as there.
template <class D, int ROWS, int VECS>
__global__ void __launch_bounds__(kThreads) block_tile_kernel(BlockRows<D> p) {
  static_assert(ROWS * VECS == kThreads, "one output element per thread");
  __shared__ D a_tile[kInner][ROWS + 1];  // a_tile[c][r] = op(A)[i0 + r, k0 + c]
  __shared__ D b_tile[kInner][VECS];      // b_tile[c][j] = B[k0 + c, j0 + j]
  const long long t = blockIdx.x;
  const int r = static_cast<int>(threadIdx.x) % ROWS, jj = static_cast<int>(threadIdx.x) / ROWS;
  const long long R = p.rows;
  const int row_first = p.row_ptr[t], row_count = p.row_ptr[t + 1] - row_first;
  const int col_first = p.col_ptr[t], col_count = p.col_ptr[t + 1] - col_first;
  const int lead = p.lead_a != nullptr ? 1 : 0;
  const int terms = lead + row_count + col_count;
  auto size_of = [&](long long node) -> long long { return p.sized ? p.node_end[node] - p.node_begin[node] : R; };
  const long long rows = size_of(t);  // the rows of t's output that are not padding
  for (long long i0 = blockIdx.y * static_cast<long long>(ROWS); i0 < rows; i0 += gridDim.y * static_cast<long long>(ROWS))
    for (long long j0 = blockIdx.z * static_cast<long long>(VECS); j0 < p.nvec;
         j0 += gridDim.z * static_cast<long long>(VECS)) {
      D sum = zero_of<D>();
      for (int term = 0; term < terms; ++term) {
        const D* a;
        const D* b;
        long long ld_b = R, inner = R;
        bool adjoint = false;
        if (term < lead) {
          ld_b = inner = p.lead_inner;
          a = p.lead_a + t * R * ld_b;
          b = p.lead_in + t * ld_b * p.nvec;
        } else if (term < lead + row_count) {
          const int q = row_first + term - lead, s = p.pair_col[q];
          a = p.blocks + static_cast<long long>(q - p.first) * R * R;
          b = p.in + static_cast<long long>(s) * R * p.nvec;
          inner = size_of(s);
        } else {
          const int q = p.col_pairs[col_first + term - lead - row_count], u = p.pair_row[q];
          if (p.skip_self_mirror && u == t) continue;  // uniform over the block
          a = p.blocks + static_cast<long long>(q - p.first) * R * R;
          b = p.in + static_cast<long long>(u) * R * p.nvec;
          inner = size_of(u);
          adjoint = true;
        }
        for (long long k0 = 0; k0 < inner; k0 += kInner) {
          for (int e = threadIdx.x; e < ROWS * kInner; e += kThreads) {
            int rr, cc;
            D v = zero_of<D>();
            if (!adjoint) {
              rr = e % ROWS;
              cc = e / ROWS;
              if (i0 + rr < rows && k0 + cc < inner) v = a[(i0 + rr) + (k0 + cc) * R];
            } else {
              cc = e % kInner;
              rr = e / kInner;
              if (i0 + rr < rows && k0 + cc < inner) v = conj_of(a[(k0 + cc) + (i0 + rr) * R]);
            }
            a_tile[cc][rr] = v;
          }
          for (int e = threadIdx.x; e < kInner * VECS; e += kThreads) {
            const int cc = e % kInner, j = e / kInner;
            b_tile[cc][j] = k0 + cc < inner && j0 + j < p.nvec ? b[(k0 + cc) + (j0 + j) * ld_b] : zero_of<D>();
          }
          __syncthreads();
          const int depth = static_cast<int>(std::min<long long>(kInner, inner - k0));
          for (int c = 0; c < depth; ++c) sum = fma_(sum, a_tile[c][r], b_tile[c][jj]);
          __syncthreads();
        }
      }
      const long long i = i0 + r, j = j0 + jj;
      if (i >= rows || j >= p.nvec) continue;
      if (p.out != nullptr) {
        p.out[t * R * p.nvec + i + j * R] = sum;
      } else {
        const int begin = p.node_begin[t];
        if (i >= p.node_end[t] - begin) continue;
        D& out = p.y[p.permutation[begin + i] + j * p.ldy];
        out = is_zero(p.beta) ? p.alpha * sum : p.alpha * sum + p.beta * out;
      }
    }
}

// One or two vectors: block_rows_kernel with NV = 1 or 2 (each staged element of A read from
// shared memory once). Three or more: block_tile_kernel. Measured on the leaves' phase at
// n = 65536 (2026-11-27): for one vector the first took 0.58 ms where the second took 1.03 ms
// (H200); for 16 vectors, the first with NV = 4, 8 and 16 took 3.4, 2.7 and 1.85 ms and the
// second 1.87 ms (H200), so the second, with fewer registers, stays the choice past two.
template <class D>
void launch_block_rows(const BlockRows<D>& p, long long nodes, cudaStream_t stream) {
  auto launch = [&](auto nv) {
    constexpr int NV = decltype(nv)::value;
    const dim3 grid(static_cast<unsigned>(nodes), tiles_for(p.rows, kRowTile), tiles_for(p.nvec, NV));
    block_rows_kernel<D, NV><<<grid, kThreads, 0, stream>>>(p);
  };
  if (p.nvec <= 1) {
    launch(std::integral_constant<int, 1>{});
  } else if (p.nvec <= 2) {
    launch(std::integral_constant<int, 2>{});
  } else if (p.nvec <= 8) {
    const dim3 grid(static_cast<unsigned>(nodes), tiles_for(p.rows, 32), tiles_for(p.nvec, 8));
    block_tile_kernel<D, 32, 8><<<grid, kThreads, 0, stream>>>(p);
  } else {
    const dim3 grid(static_cast<unsigned>(nodes), tiles_for(p.rows, 16), tiles_for(p.nvec, 16));
    block_tile_kernel<D, 16, 16><<<grid, kThreads, 0, stream>>>(p);
  }
  COVFLOW_CHECK_LAUNCH();
}

}  // namespace

template <class T>
void gemv(CudaContext& context, T alpha, const H2Device<T>& a, Batch<const T> x, T beta, Batch<T> y,
          std::byte* workspace, const PhaseMark* mark) {
  using D = dev_t<T>;
  using R = real_t<T>;
  const H2DeviceShape& s = a.shape();
  const H2DeviceArrays<T>& d = a.arrays();
  const int depth = s.depth;
  const long long m = s.leaf_capacity, nvec = x.cols, leaves = s.nodes(depth);
  const cudaStream_t stream = context.stream();
  const cublasHandle_t handle = context.cublas();
  const GemvScratch<T> w(s, nvec, workspace);
  auto k = [&](int l) { return static_cast<long long>(s.rank[static_cast<std::size_t>(l)]); };
  auto xhat = [&](int l) { return dev(w.xhat) + w.level[static_cast<std::size_t>(l)]; };
  auto yhat = [&](int l) { return dev(w.yhat) + w.level[static_cast<std::size_t>(l)]; };
  auto transfer = [&](int l) { return dev(d.transfer) + s.transfer_offset[static_cast<std::size_t>(l)]; };
  auto has_couplings = [&](int l) { return s.coupling_count(l) > 0 && k(l) > 0; };
  const D one = from_real<D>(R(1)), zero = from_real<D>(R(0));
  const cublasOperation_t adjoint = adjoint_op<D>();
  D* const x_leaves = dev(w.x_leaves);
  const std::int64_t leaf0 = H2Tree::heap(depth, 0);
  auto phase = [&](const std::string& name) {
    if (mark != nullptr) (*mark)(name);
  };

  gather_kernel<D><<<blocks_for(leaves * m * nvec), kThreads, 0, stream>>>(
      d.permutation, d.node_begin + leaf0, d.node_end + leaf0, leaves, m, static_cast<int>(nvec), dev(x.data), x.ld,
      x_leaves);
  COVFLOW_CHECK_LAUNCH();
  phase("gather");

  int top = depth + 1;  // the first level with couplings; x̂ and ŷ above it are never needed
  for (int l = 0; l <= depth && top > depth; ++l)
    if (has_couplings(l)) top = l;
  bool leaves_reached = false;  // ŷ_L holds something from the couplings
  if (top <= depth) {
    // Upsweep, leaves then level by level up to `top`.
    gemm_strided<D>(handle, adjoint, CUBLAS_OP_N, k(depth), nvec, m, one, dev(d.leaf_basis), m, m * k(depth), x_leaves, m,
                    m * nvec, zero, xhat(depth), std::max(k(depth), 1LL), k(depth) * nvec, leaves);
    for (int l = depth; l > top; --l) {
      const long long kc = k(l), kp = k(l - 1);
      if (kp == 0) continue;
      if (kc == 0) {  // nothing below: x̂ of the parents is zero
        COVFLOW_CUDA_TRY(cudaMemsetAsync(xhat(l - 1), 0, s.nodes(l - 1) * kp * nvec * sizeof(D), stream));
        continue;
      }
      for (int c = 0; c < 2; ++c)
        gemm_strided<D>(handle, adjoint, CUBLAS_OP_N, kp, nvec, kc, one, transfer(l) + c * kc * kp, kc, 2 * kc * kp,
                        xhat(l) + c * kc * nvec, kc, 2 * kc * nvec, c == 0 ? zero : one, xhat(l - 1), kp, kp * nvec,
                        s.nodes(l - 1));
    }
    phase("upsweep");

    // Couplings of each level, both triangles.
    for (int l = top; l <= depth; ++l) {
      if (!has_couplings(l)) continue;
      const std::int64_t base = H2Pairs::ptr_offset(l);
      BlockRows<D> p;
      p.rows = static_cast<int>(k(l));
      p.nvec = static_cast<int>(nvec);
      p.row_ptr = d.couplings.row_ptr + base;
      p.col_ptr = d.couplings.col_ptr + base;
      p.col_pairs = d.couplings.col_pairs;
      p.pair_row = d.couplings.row;
      p.pair_col = d.couplings.col;
      p.blocks = dev(d.coupling) + s.coupling_offset[static_cast<std::size_t>(l)];
      p.first = s.coupling_level_ptr[static_cast<std::size_t>(l)];
      p.in = xhat(l);
      p.out = yhat(l);
      launch_block_rows(p, s.nodes(l), stream);
      phase("couplings level " + std::to_string(l) + " (" + std::to_string(s.coupling_count(l)) + " blocks, rank " +
            std::to_string(k(l)) + ")");
    }

    // Downsweep from `top`: ŷ_c += E_c·ŷ_parent, or = when level c had no couplings of its own.
    bool live = true;  // ŷ of the level above holds something
    for (int l = top + 1; l <= depth; ++l) {
      const long long kc = k(l), kp = k(l - 1);
      if (kc == 0) {
        live = false;
        continue;
      }
      if (live && kp > 0) {
        for (int c = 0; c < 2; ++c)
          gemm_strided<D>(handle, CUBLAS_OP_N, CUBLAS_OP_N, kc, nvec, kp, one, transfer(l) + c * kc * kp, kc,
                          2 * kc * kp, yhat(l - 1), kp, kp * nvec, has_couplings(l) ? one : zero,
                          yhat(l) + c * kc * nvec, kc, 2 * kc * nvec, s.nodes(l - 1));
      } else {
        live = has_couplings(l);
      }
    }
    leaves_reached = live && k(depth) > 0;
    phase("downsweep");
  }

  // Leaves: U_t·ŷ_t and the dense blocks, scaled and scattered to the caller's order.
  const std::int64_t base = H2Pairs::ptr_offset(depth);
  BlockRows<D> p;
  p.rows = static_cast<int>(m);
  p.nvec = static_cast<int>(nvec);
  p.row_ptr = d.dense_pairs.row_ptr + base;
  p.col_ptr = d.dense_pairs.col_ptr + base;
  p.col_pairs = d.dense_pairs.col_pairs;
  p.pair_row = d.dense_pairs.row;
  p.pair_col = d.dense_pairs.col;
  p.blocks = dev(d.dense);
  p.first = 0;  // dense pair q at q·m², whatever its level
  p.skip_self_mirror = true;
  p.in = x_leaves;
  if (leaves_reached) {
    p.lead_a = dev(d.leaf_basis);
    p.lead_in = yhat(depth);
    p.lead_inner = static_cast<int>(k(depth));
  }
  p.y = dev(y.data);
  p.ldy = y.ld;
  p.permutation = d.permutation;
  p.node_begin = d.node_begin + leaf0;
  p.node_end = d.node_end + leaf0;
  p.sized = true;
  p.alpha = to_device(alpha);
  p.beta = to_device(beta);
  launch_block_rows(p, leaves, stream);
  phase("leaves (bases and " + std::to_string(s.dense_count()) + " dense blocks)");
}

#define COVFLOW_H2_CUDA_GEMV(T) \
  template void gemv<T>(CudaContext&, T, const H2Device<T>&, Batch<const T>, T, Batch<T>, std::byte*, const PhaseMark*);
COVFLOW_H2_CUDA_GEMV(f32)
COVFLOW_H2_CUDA_GEMV(f64)
COVFLOW_H2_CUDA_GEMV(cf32)
COVFLOW_H2_CUDA_GEMV(cf64)
#undef COVFLOW_H2_CUDA_GEMV

}  // namespace covflow::linalg::detail::h2_cuda

// gesvj's shared-memory variant: one thread block per matrix, X and V in shared memory — W.
// Boukaram, G. Turkiyyah, H. Ltaief, D. E. Keyes, "Batched QR and SVD Algorithms on GPUs with
// Applications in Hierarchical Matrix Compression" (Parallel Computing, 2018), §5.
//
// block_jacobi_kernel — ownership and budget:
//   One block per matrix. X (m × N, N = n rounded up to even; rows padded with zeros to a multiple
//   of G) and V (N × N) sit in shared memory, column-major. The block is P groups of G lanes
//   (G a power of two ≤ 32, aligned inside a warp): group g takes pairs g, g + P, … of each
//   round-robin step, lane l of the group rows l, l + G, … of the pair's two columns — §5's "several
//   rows per thread, serial partial sums, then warp shuffles", with G chosen from m so that a lane
//   has about 8 rows, the paper's §4.2 finding that the fewer lanes share a pair's redundant
//   rotation arithmetic the better. The group's sums are butterflies over its G lanes, so every
//   lane of the group computes the same rotation; each then rotates its own rows of X and V. One
//   __syncthreads per step (a column moves to another group at the next step).
//   Budget: shared memory (m·N + N·N)·sizeof(T) — up to the 227 KB an sm_90 block may opt in to
//   (complex double: n ≈ 85 square with V, 120 without; real float: 170 and 240); up to 1024
//   threads (P·G ≤ 1024), a few registers per thread (rows are streamed from shared memory).
//   Convergence is the block's decision: a sweep in which no counted pair's cosine exceeded tol
//   (gesvj_cuda.cuh: pairs of columns above the zero threshold; the others rotate but do not count).
//   At the end V is refined towards orthogonality (gesvj_cuda_warp.cu says why), E = VᴴV − I taking
//   X's place.
#include <algorithm>
#include <climits>

#include "covflow/linalg/cuda/check.hpp"
#include "gesvj_cuda.cuh"

namespace covflow::linalg::detail::svdj {
namespace {

constexpr int kMaxThreads = 1024;
constexpr int kRowsPerLane = 8;
constexpr int kPadRows = 32;  // rows padded to a multiple of this (≥ every G)

struct Geometry {
  int N;       // columns, n rounded up to even
  int rows;    // rows of X in shared memory (m padded to kPadRows)
  int v_rows;  // leading dimension of V in shared memory (N padded to kPadRows, plus one)
  int G;       // lanes per pair
  int groups;  // P
};

Geometry geometry_for(int m, int n) {
  Geometry g{};
  g.N = (n + 1) / 2 * 2;
  g.rows = (m + kPadRows - 1) / kPadRows * kPadRows;
  g.v_rows = (g.N + kPadRows - 1) / kPadRows * kPadRows + 1;  // odd: column walks across threads are conflict-free
  int G = 1;
  while (G < 32 && G * kRowsPerLane < m) G *= 2;
  g.G = G;
  g.groups = std::max(1, std::min(g.N / 2, kMaxThreads / G));
  // Whole warps: a group never straddles two.
  while ((g.groups * g.G) % 32 != 0) ++g.groups;
  return g;
}

// Trailing shared memory after X and V: σ (N reals), ranks (N ints), coefficients (N elements),
// flags.
template <class D>
std::size_t tail_bytes(int N) {
  return sizeof(sreal_t<D>) * N + sizeof(int) * N + sizeof(D) * N + 64;
}

template <class D>
std::size_t smem_for(const Geometry& g, bool with_v) {
  std::size_t bytes = sizeof(D) * std::size_t(g.rows) * g.N;
  if (with_v) bytes += sizeof(D) * std::size_t(g.v_rows) * g.N;
  return bytes + tail_bytes<D>(g.N);
}

__device__ inline unsigned lane_group_mask(int G) {
  const int lane = threadIdx.x & 31;
  return G >= 32 ? 0xffffffffu : ((1u << G) - 1u) << (lane & ~(G - 1));
}
template <class R>
__device__ inline R group_sum_runtime(R v, int G, unsigned mask) {
  for (int offset = G / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(mask, v, offset);
  return v;
}
template <class R>
__device__ inline Cx<R> group_sum_runtime(Cx<R> v, int G, unsigned mask) {
  return {group_sum_runtime(v.x, G, mask), group_sum_runtime(v.y, G, mask)};
}

// The row of least energy over the block (ties: lowest row); every thread gets it.
template <class R>
__device__ int block_argmin(R energy, int row, R* warp_best, int* warp_row) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const R other = __shfl_xor_sync(0xffffffffu, energy, offset);
    const int other_row = __shfl_xor_sync(0xffffffffu, row, offset);
    if (other < energy || (other == energy && other_row < row)) {
      energy = other;
      row = other_row;
    }
  }
  const int warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if ((threadIdx.x & 31) == 0) {
    warp_best[warp] = energy;
    warp_row[warp] = row;
  }
  __syncthreads();
  R best = warp_best[0];
  int best_row = warp_row[0];
  for (int w = 1; w < warps; ++w)
    if (warp_best[w] < best || (warp_best[w] == best && warp_row[w] < best_row)) {
      best = warp_best[w];
      best_row = warp_row[w];
    }
  __syncthreads();
  return best_row;
}

template <class D>
__global__ void __launch_bounds__(kMaxThreads) block_jacobi_kernel(Problem<D> pb, Geometry geo) {
  using R = sreal_t<D>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ int any_bad, any_rotated[2];
  __shared__ R block_max, sweep_max_shared[2], norm_shared, largest_shared;
  __shared__ R warp_best[kMaxThreads / 32];
  __shared__ int warp_row[kMaxThreads / 32];

  const long long b = blockIdx.x;
  if (pb.outer_active != nullptr && pb.outer_active[b / pb.pairs_per_matrix] == 0) return;
  const int tid = threadIdx.x, threads = blockDim.x;
  const int G = geo.G, N = geo.N, rows = geo.rows, v_rows = geo.v_rows;
  const int group = tid / G, gl = tid % G, groups = threads / G;
  const unsigned mask = lane_group_mask(G);
  const int m = pb.m, n = pb.n;
  const bool with_v = pb.v != nullptr || pb.pair_mode;
  const D zero = from_real<D>(R(0));

  D* X = reinterpret_cast<D*>(smem_raw);
  D* V = X + std::size_t(rows) * N;
  unsigned char* tail = smem_raw + sizeof(D) * std::size_t(rows) * N +
                        (with_v ? sizeof(D) * std::size_t(v_rows) * N : 0);
  R* sigma = reinterpret_cast<R*>(tail);
  D* coefficient = reinterpret_cast<D*>(tail + ((sizeof(R) * N + 15) / 16 * 16));
  int* rank = reinterpret_cast<int*>(reinterpret_cast<unsigned char*>(coefficient) + sizeof(D) * N);

  if (tid == 0) {
    any_bad = 0;
    block_max = R(0);
    largest_shared = R(0);
    sweep_max_shared[0] = sweep_max_shared[1] = R(0);
    any_rotated[0] = any_rotated[1] = 0;
  }
  __syncthreads();
  // Load X (coalesced along the source's contiguous index), check it, find its largest element.
  bool finite = true;
  R amax = R(0);
  const long long total = static_cast<long long>(rows) * N;
  for (long long e = tid; e < total; e += threads) {
    int i, j;
    if (pb.conj_transpose) {
      j = static_cast<int>(e % N);
      i = static_cast<int>(e / N);
    } else {
      i = static_cast<int>(e % rows);
      j = static_cast<int>(e / rows);
    }
    D value = zero;
    if (i < m && j < n) value = load_element(pb, b, i, j);
    finite = finite && is_finite(value);
    amax = fmax(amax, magnitude(value));
    X[i + std::size_t(j) * rows] = value;
  }
  if (!finite) any_bad = 1;
  if (finite) atomic_max_nonnegative(&block_max, amax);
  __syncthreads();
  if (any_bad != 0) {
    if (pb.pair_mode) return;
    if (pb.s != nullptr)
      for (int j = tid; j < n; j += threads) pb.s[b * n + j] = R(NAN);
    if (pb.u != nullptr)
      for (long long e = tid; e < static_cast<long long>(pb.u_rows) * n; e += threads)
        pb.u[b * pb.stride_u + e % pb.u_rows + (e / pb.u_rows) * pb.ldu] = nan_value<D>();
    if (pb.v != nullptr) {
      const int v_rows_out = max(pb.v_rows, n);
      for (long long e = tid; e < static_cast<long long>(v_rows_out) * n; e += threads)
        pb.v[b * pb.stride_v + e % v_rows_out + (e / v_rows_out) * pb.ldv] = nan_value<D>();
    }
    if (tid == 0 && pb.info != nullptr) pb.info[b] = SvdInfo{status::non_finite_input, 0, double(NAN)};
    return;
  }
  // Scaled by a power of two so that the largest element is in [1, 2) (see gesvj_cuda_warp.cu).
  const int exponent = block_max > R(0) ? ilogb(block_max) : 0;
  for (long long e = tid; e < total; e += threads) X[e] = scaled(X[e], -exponent);
  if (with_v)
    for (long long e = tid; e < static_cast<long long>(v_rows) * N; e += threads)
      V[e] = from_real<D>(R(e % v_rows == e / v_rows ? 1 : 0));
  __syncthreads();
  // The zero threshold (gesvj_cuda.cuh) in these scaled units, compared with the pairs' sums of
  // squares (+∞ when its square overflows, where nothing counts, as it should).
  R threshold;
  if (pb.pair_mode) {
    threshold = pb.outer_threshold != nullptr ? scaled(pb.outer_threshold[b / pb.pairs_per_matrix], -exponent) : R(0);
  } else {
    for (int j = group; j < N; j += groups) {
      R ss = R(0);
      for (int i = gl; i < m; i += G) ss += abs2(X[i + std::size_t(j) * rows]);
      ss = group_sum_runtime(ss, G, mask);
      if (gl == 0) atomic_max_nonnegative(&largest_shared, ss);
    }
    __syncthreads();
    threshold = pb.zero_level * sqrt(largest_shared);
  }
  const R threshold2 = threshold * threshold;

  int sweeps = 0;
  R off = R(0), first_off = R(0);
  bool converged = false;
  const int pairs = N / 2;
  while (sweeps < pb.max_sweeps) {
    R local_max = R(0);
    bool rotated = false;
    for (int step = 0; step < N - 1; ++step) {
      for (int k = group; k < pairs; k += groups) {
        int p, q;
        round_robin_pair(N, step, k, p, q);
        D* xp = X + std::size_t(p) * rows;
        D* xq = X + std::size_t(q) * rows;
        R app = R(0), aqq = R(0);
        D apq = zero;
        for (int i = gl; i < m; i += G) {
          const D a = xp[i], c = xq[i];
          app += abs2(a);
          aqq += abs2(c);
          apq = fma_conj(apq, a, c);
        }
        app = group_sum_runtime(app, G, mask);
        aqq = group_sum_runtime(aqq, G, mask);
        apq = group_sum_runtime(apq, G, mask);
        Rotation<D> rot;
        bool rotate;
        const R cosine = make_rotation(app, aqq, apq, pb.tol, rot, rotate);
        if (app > threshold2 && aqq > threshold2) {
          local_max = fmax(local_max, cosine);
          rotated = rotated || rotate;  // counted pairs only: what convergence is judged on
        }
        if (rotate) {
          for (int i = gl; i < m; i += G) {
            D a = xp[i], c = xq[i];
            rotate_pair(a, c, rot.c, rot.s);
            xp[i] = a;
            xq[i] = c;
          }
          if (with_v) {
            D* vp = V + std::size_t(p) * v_rows;
            D* vq = V + std::size_t(q) * v_rows;
            for (int i = gl; i < n; i += G) {
              D a = vp[i], c = vq[i];
              rotate_pair(a, c, rot.c, rot.s);
              vp[i] = a;
              vq[i] = c;
            }
          }
        }
      }
      __syncthreads();
    }
    // Sweep maximum and "anything rotated", block-wide.
    atomic_max_nonnegative(&sweep_max_shared[sweeps & 1], local_max);
    if (rotated) any_rotated[sweeps & 1] = 1;
    __syncthreads();
    const R sweep_max = sweep_max_shared[sweeps & 1];
    const bool none = any_rotated[sweeps & 1] == 0;
    // Reset the other sweep's slots: last read before the barriers of this sweep's steps.
    if (tid == 0) {
      sweep_max_shared[(sweeps + 1) & 1] = R(0);
      any_rotated[(sweeps + 1) & 1] = 0;
    }
    ++sweeps;
    if (sweeps == 1) first_off = sweep_max;
    off = sweep_max;
    if (none) {
      converged = true;
      break;
    }
  }

  // σ_j = ‖x_j‖, by the groups.
  for (int j = group; j < N; j += groups) {
    R ss = R(0);
    for (int i = gl; i < m; i += G) ss += abs2(X[i + std::size_t(j) * rows]);
    ss = group_sum_runtime(ss, G, mask);
    if (gl == 0) sigma[j] = sqrt(ss);
  }
  __syncthreads();
  for (int j = tid; j < n; j += threads) {
    int r = 0;
    for (int w = 0; w < n; ++w) r += (sigma[w] > sigma[j] || (sigma[w] == sigma[j] && w < j)) ? 1 : 0;
    rank[j] = pb.pair_mode ? j : r;  // pair mode: unsorted (gesvj_cuda_warp.cu says why)
  }

  if (pb.pair_mode) {
    if (tid == 0) atomic_max_nonnegative(pb.outer_off + b / pb.pairs_per_matrix, first_off);
    for (long long e = tid; e < total; e += threads) X[e] = scaled(X[e], exponent);
  } else {
    if (pb.s != nullptr)
      for (int j = tid; j < n; j += threads) pb.s[b * n + rank[j]] = scaled(sigma[j], exponent);
    if (tid == 0 && pb.info != nullptr)
      pb.info[b] = SvdInfo{converged ? status::ok : status::no_convergence, sweeps, double(off)};
    if (pb.u != nullptr) {
      for (long long e = tid; e < total; e += threads) {
        const int j = static_cast<int>(e / rows);
        X[e] = j < n && sigma[j] > R(0) ? divided(X[e], sigma[j]) : zero;
      }
      __syncthreads();
      // Columns at or below the zero threshold (numerically zero, or exactly zero): completed to an
      // orthonormal U as in gesvj_cuda_warp.cu — the column's own direction orthogonalised twice
      // against the basis found so far when at least half of it is left, else e_c for the row of
      // least energy in that basis, orthogonalised likewise. The basis: σ above the threshold, or
      // completed (σ set to +∞ then; s was written above, and σ is not read again).
      auto in_basis = [&](int w) { return sigma[w] > threshold; };
      auto orthogonalise = [&](int z) {
        for (int pass = 0; pass < 2; ++pass) {
          for (int w = group; w < n; w += groups) {
            D dot = zero;
            if (in_basis(w))
              for (int i = gl; i < m; i += G) dot = fma_conj(dot, X[i + std::size_t(w) * rows], X[i + std::size_t(z) * rows]);
            dot = group_sum_runtime(dot, G, mask);
            if (gl == 0) coefficient[w] = dot;
          }
          __syncthreads();
          for (int i = tid; i < m; i += threads) {
            D value = X[i + std::size_t(z) * rows];
            for (int w = 0; w < n; ++w)
              if (in_basis(w)) value = value - coefficient[w] * X[i + std::size_t(w) * rows];
            X[i + std::size_t(z) * rows] = value;
          }
          __syncthreads();
        }
      };
      auto column_norm = [&](int z) {
        if (group == 0) {
          R ss = R(0);
          for (int i = gl; i < m; i += G) ss += abs2(X[i + std::size_t(z) * rows]);
          ss = group_sum_runtime(ss, G, mask);
          if (gl == 0) norm_shared = sqrt(ss);
        }
        __syncthreads();
        const R norm = norm_shared;
        __syncthreads();  // norm_shared is written again for the next column
        return norm;
      };
      for (int z = 0; z < n; ++z) {
        if (in_basis(z)) continue;  // uniform: shared memory read after a barrier
        R norm = R(0);
        if (sigma[z] > R(0)) {
          orthogonalise(z);
          norm = column_norm(z);
        }
        if (!(norm >= R(0.5))) {
          // Row energies and their minimum (ties: lowest row), through one block-wide pass.
          R best = R(INFINITY);
          int best_row = INT_MAX;
          for (int i = tid; i < m; i += threads) {
            R energy = R(0);
            for (int w = 0; w < n; ++w)
              if (in_basis(w)) energy += abs2(X[i + std::size_t(w) * rows]);
            if (energy < best || (energy == best && i < best_row)) {
              best = energy;
              best_row = i;
            }
          }
          const int c = block_argmin(best, best_row, warp_best, warp_row);
          for (int i = tid; i < rows; i += threads) X[i + std::size_t(z) * rows] = from_real<D>(R(i == c ? 1 : 0));
          __syncthreads();
          orthogonalise(z);
          norm = column_norm(z);
        }
        for (int i = tid; i < m; i += threads) X[i + std::size_t(z) * rows] = divided(X[i + std::size_t(z) * rows], norm);
        if (tid == 0) sigma[z] = R(INFINITY);
        __syncthreads();
      }
    }
  }
  __syncthreads();

  if (pb.u != nullptr) {
    D* U = pb.u + b * pb.stride_u;
    const long long count = static_cast<long long>(pb.u_rows) * n;
    for (long long e = tid; e < count; e += threads) {
      const int i = static_cast<int>(e % pb.u_rows), j = static_cast<int>(e / pb.u_rows);
      const int row = pb.u_row_map != nullptr && i < n ? pb.u_row_map[b * n + i] : i;
      U[row + static_cast<long long>(rank[j]) * pb.ldu] = i < m ? X[i + std::size_t(j) * rows] : zero;
    }
  }
  if (pb.v != nullptr) {
    D* Vout = pb.v + b * pb.stride_v;
    const long long elements = static_cast<long long>(n) * n;
    const int v_rows_out = max(pb.v_rows, n);
    D* E = X;
    if (!pb.pair_mode) {
      // One step towards the nearest unitary matrix, V ← V − ½·V·E with E = VᴴV − I, as in
      // gesvj_cuda_warp.cu: the accumulated rotations leave V √(rotations)·ε from orthogonal. E (n × n)
      // goes where X was, now that U is written.
      __syncthreads();
      for (long long e = tid; e < elements; e += threads) {
        const int i = static_cast<int>(e % n), j = static_cast<int>(e / n);
        D acc = zero;
        for (int r = 0; r < n; ++r) acc = fma_conj(acc, V[r + std::size_t(i) * v_rows], V[r + std::size_t(j) * v_rows]);
        if (i == j) acc = acc - from_real<D>(R(1));
        E[e] = acc * R(0.5);
      }
      __syncthreads();
    }
    for (long long e = tid; e < static_cast<long long>(v_rows_out) * n; e += threads) {
      const int r = static_cast<int>(e % v_rows_out), j = static_cast<int>(e / v_rows_out);
      D value = zero;
      if (r < n) {
        value = V[r + std::size_t(j) * v_rows];
        if (!pb.pair_mode)
          for (int i = 0; i < n; ++i) value = value - V[r + std::size_t(i) * v_rows] * E[i + std::size_t(j) * n];
      }
      Vout[r + static_cast<long long>(rank[j]) * pb.ldv] = value;
    }
  }
}

}  // namespace

template <class D>
std::size_t block_smem_bytes(int m, int n, bool with_v) {
  return smem_for<D>(geometry_for(m, n), with_v);
}

template <class D>
bool block_fits(int m, int n, bool with_v, std::size_t smem_limit) {
  return block_smem_bytes<D>(m, n, with_v) <= smem_limit;
}

template <class D>
void launch_block(const Problem<D>& pb, cudaStream_t stream) {
  if (pb.count == 0) return;
  const Geometry geo = geometry_for(pb.m, pb.n);
  const std::size_t smem = smem_for<D>(geo, pb.v != nullptr || pb.pair_mode);
  COVFLOW_CUDA_TRY(cudaFuncSetAttribute(block_jacobi_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
  block_jacobi_kernel<D><<<static_cast<unsigned>(pb.count), geo.groups * geo.G, smem, stream>>>(pb, geo);
  COVFLOW_CHECK_LAUNCH();
}

#define COVFLOW_GESVJ_BLOCK(D)                                                   \
  template std::size_t block_smem_bytes<D>(int, int, bool);                      \
  template bool block_fits<D>(int, int, bool, std::size_t);                      \
  template void launch_block<D>(const Problem<D>&, cudaStream_t);
COVFLOW_GESVJ_BLOCK(float)
COVFLOW_GESVJ_BLOCK(double)
COVFLOW_GESVJ_BLOCK(Cx<float>)
COVFLOW_GESVJ_BLOCK(Cx<double>)
#undef COVFLOW_GESVJ_BLOCK

}  // namespace covflow::linalg::detail::svdj

// gesvj's register variant: one warp per matrix for m ≤ 32, n ≤ 32 — W. Boukaram, G. Turkiyyah,
// H. Ltaief, D. E. Keyes, "Batched QR and SVD Algorithms on GPUs with Applications in Hierarchical
// Matrix Compression" (Parallel Computing, 2018), §4, with §5's parallel pair order.
//
// warp_jacobi_kernel — ownership and budget:
//   Lane i owns row i of X in registers: N values (N = n rounded up to 2, 4, 8, 16 or 32; the
//   padding columns are zero and never rotate). §4 goes through the pairs one at a time and spends
//   most of each pair's ~2600 cycles on the rotation, computed redundantly by every lane (§4.2);
//   here a step handles all N/2 disjoint pairs of the round-robin order at once:
//     1. each lane forms, for every pair of the step, its row's share of ‖x_p‖², ‖x_q‖² and
//        x_pᴴx_q — 4 reals per pair, 2N per lane;
//     2. one transposing reduction sums the 2N reals over the warp while spreading them out: each
//        level halves the values a lane holds (it keeps one half, its partner the other, each adds
//        the partner's copy of its half), so that after log₂(N/2) levels a lane holds its pair's
//        four sums and a butterfly over the remaining lane bits finishes them — 2N + 4·(5 −
//        log₂(N/2)) shuffles for the whole step, not 5 per sum;
//     3. the 64/N lanes of each pair compute its rotation (identical in each: the butterfly adds in
//        the same order everywhere), and every lane takes all N/2 rotations by shuffles and
//        applies them to its row;
//     4. the columns move one position on the round-robin circle: a fixed permutation of the
//        register slots (register moves in unrolled code), which after N − 1 steps is the
//        identity, so that slot t always holds a known column at the start of a sweep.
//   V (N × N) lives in shared memory, lane i owning row i: its columns are addressed by the
//   step's column numbers, which registers cannot be. At the end V is refined towards orthogonality
//   (E = VᴴV − I, in a second N × N buffer). Budget: complex double, N = 32: 128 registers of X per
//   lane (ptxas spills some), 2 × 16.5 KB of shared memory per warp, 4 warps (matrices) per block.
//   Convergence is the warp's own decision: a sweep in which no counted pair's cosine exceeded tol
//   (gesvj_cuda.cuh: pairs of columns above the zero threshold; the others rotate but do not count).
#include <climits>

#include "covflow/linalg/cuda/check.hpp"
#include "gesvj_cuda.cuh"

namespace covflow::linalg::detail::svdj {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr unsigned kFull = 0xffffffffu;

constexpr int ilog2(int x) { return x <= 1 ? 0 : 1 + ilog2(x / 2); }

// Slot of circle position c (round_robin_pair in gesvj_cuda.cuh): pair k occupies slots 2k, 2k+1.
template <int N>
__host__ __device__ constexpr int slot_of_circle(int c) {
  return c == 0 ? 1 : (c < N / 2 ? 2 * c : 2 * (N - 1 - c) + 1);
}
// Column in slot t at the start of every sweep (step 0 of round_robin_pair).
template <int N>
__host__ __device__ constexpr int column_of_slot(int t) {
  return t <= 1 ? t : (t % 2 == 0 ? 1 + t / 2 : N - (t - 1) / 2);
}

template <class R>
__device__ inline R warp_max(R value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value = fmax(value, __shfl_xor_sync(kFull, value, offset));
  return value;
}
template <class R>
__device__ inline R shuffle(R value, int source) {
  return __shfl_sync(kFull, value, source);
}
template <class R>
__device__ inline Cx<R> shuffle(Cx<R> value, int source) {
  return {__shfl_sync(kFull, value.x, source), __shfl_sync(kFull, value.y, source)};
}

// Row shares of ‖x_p‖², ‖x_q‖², Re and Im x_pᴴx_q for the pair in slots (2k, 2k+1).
template <class D>
__device__ inline void pair_shares(D xp, D xq, sreal_t<D> (&out)[4]) {
  using R = sreal_t<D>;
  const D g = fma_conj(from_real<D>(R(0)), xp, xq);
  out[0] = abs2(xp);
  out[1] = abs2(xq);
  out[2] = real_part(g);
  out[3] = imag_part(g);
}

// One level of the transposing reduction on y[0, Count): lanes with bit Offset set keep the upper
// half; then the next level on the half that is kept, down to one pair's four sums.
template <int Count, int Offset, class R>
__device__ inline void transpose_levels(R* y, int lane) {
  if constexpr (Count > 4) {
    constexpr int kHalf = Count / 2;
    const bool upper = (lane & Offset) != 0;
#pragma unroll
    for (int j = 0; j < kHalf; ++j) {
      const R send = upper ? y[j] : y[j + kHalf];
      const R keep = upper ? y[j + kHalf] : y[j];
      y[j] = keep + __shfl_xor_sync(kFull, send, Offset);
    }
    transpose_levels<kHalf, Offset / 2>(y, lane);
  }
}

// Steps 1–2 of the header: the sums of this lane's pair (k = lane >> (5 − log₂(N/2))) over the warp.
template <class D, int N>
__device__ inline void reduce_pairs(const D (&x)[N], int lane, sreal_t<D> (&out)[4]) {
  using R = sreal_t<D>;
  constexpr int kPairs = N / 2;
  constexpr int kLevels = ilog2(kPairs);
  if constexpr (kLevels == 0) {
    pair_shares(x[0], x[1], out);
  } else {
    // Level 0 is fused with forming the shares, so that only N values are ever live: the lanes
    // with bit 16 set keep the upper half of the pairs.
    R y[4 * kPairs / 2];
    const bool upper0 = (lane & 16) != 0;
#pragma unroll
    for (int k = 0; k < kPairs / 2; ++k) {
      R lo[4], hi[4];
      pair_shares(x[2 * k], x[2 * k + 1], lo);
      pair_shares(x[2 * (k + kPairs / 2)], x[2 * (k + kPairs / 2) + 1], hi);
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const R send = upper0 ? lo[c] : hi[c];
        const R keep = upper0 ? hi[c] : lo[c];
        y[4 * k + c] = keep + __shfl_xor_sync(kFull, send, 16);
      }
    }
    transpose_levels<4 * kPairs / 2, 8>(y, lane);
#pragma unroll
    for (int c = 0; c < 4; ++c) out[c] = y[c];
  }
#pragma unroll
  for (int offset = 16 >> kLevels; offset > 0; offset >>= 1)
#pragma unroll
    for (int c = 0; c < 4; ++c) out[c] += __shfl_xor_sync(kFull, out[c], offset);
}

// Step 4: every column moves one position on the circle.
template <class D, int N>
__device__ inline void turn_circle(D (&x)[N]) {
  if constexpr (N > 2) {
    const D first = x[slot_of_circle<N>(0)];
#pragma unroll
    for (int c = 0; c + 2 < N; ++c) x[slot_of_circle<N>(c)] = x[slot_of_circle<N>(c + 1)];
    x[slot_of_circle<N>(N - 2)] = first;
  }
}

// x[t] for a t known only at run time, without indexing the register array (which would move it
// to local memory): an unrolled select, and its inverse.
template <int N, class V>
__device__ __forceinline__ V register_pick(const V (&x)[N], int t) {
  V value = x[0];
#pragma unroll
  for (int w = 1; w < N; ++w)
    if (w == t) value = x[w];
  return value;
}
template <int N, class V>
__device__ __forceinline__ void register_put(V (&x)[N], int t, V value) {
#pragma unroll
  for (int w = 0; w < N; ++w)
    if (w == t) x[w] = value;
}

// e ← e − Σ_w (x_wᴴe)·x_w over the columns w in `basis`, twice (classical Gram–Schmidt; the second
// pass makes e orthogonal to working accuracy whatever the first one cancelled). Columns unit-norm.
template <class D, int N>
__device__ __forceinline__ D orthogonalised(const D (&x)[N], unsigned basis, D e) {
  const D zero = from_real<D>(sreal_t<D>(0));
  for (int pass = 0; pass < 2; ++pass) {
#pragma unroll
    for (int w = 0; w < N; ++w) {
      if (!((basis >> w) & 1u)) continue;
      const D coefficient = warp_sum(fma_conj(zero, x[w], e));
      e = e - coefficient * x[w];
    }
  }
  return e;
}

template <class D>
__device__ void write_non_finite(const Problem<D>& pb, long long b, int lane) {
  using R = sreal_t<D>;
  const D nan = nan_value<D>();
  if (pb.s != nullptr)
    for (int j = lane; j < pb.n; j += 32) pb.s[b * pb.n + j] = R(NAN);
  if (pb.u != nullptr)
    for (int j = 0; j < pb.n; ++j)
      for (int i = lane; i < pb.u_rows; i += 32) pb.u[b * pb.stride_u + i + j * pb.ldu] = nan;
  if (pb.v != nullptr)
    for (int j = 0; j < pb.n; ++j)
      for (int i = lane; i < max(pb.v_rows, pb.n); i += 32) pb.v[b * pb.stride_v + i + j * pb.ldv] = nan;
  if (lane == 0 && pb.info != nullptr) pb.info[b] = SvdInfo{status::non_finite_input, 0, double(NAN)};
}

template <class D, int N>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) warp_jacobi_kernel(Problem<D> pb) {
  using R = sreal_t<D>;
  constexpr int kPairs = N / 2;
  constexpr int kLevels = ilog2(kPairs);
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long b = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + warp;
  if (b >= pb.count) return;
  if (pb.outer_active != nullptr && pb.outer_active[b / pb.pairs_per_matrix] == 0) return;
  constexpr int ldv = N + 1;  // padded: the row walks of the refinement below are conflict-free
  D* sv = reinterpret_cast<D*>(smem_raw) + static_cast<std::size_t>(warp) * 2 * N * ldv;
  D* se = sv + N * ldv;  // E = VᴴV − I, for the refinement of V
  const int m = pb.m, n = pb.n;
  const D zero = from_real<D>(R(0));

  D x[N];
  bool finite = true;
  R amax = R(0);
#pragma unroll
  for (int t = 0; t < N; ++t) {
    const int j = column_of_slot<N>(t);
    D value = zero;
    if (lane < m && j < n) value = load_element(pb, b, lane, j);
    finite = finite && is_finite(value);
    amax = fmax(amax, magnitude(value));
    x[t] = value;
  }
  if (!__all_sync(kFull, finite)) {
    if (!pb.pair_mode) write_non_finite(pb, b, lane);
    return;
  }
  // Scaled by a power of two so that the largest element is in [1, 2): the sums of squares below
  // can neither overflow nor lose a column of a graded matrix to underflow unless it is below
  // ~√(min normal) times the largest.
  amax = warp_max(amax);
  const int exponent = amax > R(0) ? ilogb(amax) : 0;
#pragma unroll
  for (int t = 0; t < N; ++t) x[t] = scaled(x[t], -exponent);
  // The zero threshold (gesvj_cuda.cuh), in these scaled units; its square is compared with the
  // pairs' sums of squares (+∞ when it overflows, where nothing counts, as it should).
  R threshold;
  if (pb.pair_mode) {
    threshold = pb.outer_threshold != nullptr ? scaled(pb.outer_threshold[b / pb.pairs_per_matrix], -exponent) : R(0);
  } else {
    R largest = R(0);
#pragma unroll
    for (int t = 0; t < N; ++t) largest = fmax(largest, warp_sum(abs2(x[t])));
    threshold = pb.zero_level * sqrt(largest);
  }
  const R threshold2 = threshold * threshold;
  const bool with_v = pb.v != nullptr;
  if (with_v && lane < N)
    for (int j = 0; j < N; ++j) sv[lane + j * ldv] = from_real<D>(R(lane == j ? 1 : 0));
  __syncwarp();

  int sweeps = 0;
  R off = R(0), first_off = R(0);
  bool converged = false;
  while (sweeps < pb.max_sweeps) {
    R sweep_max = R(0);
    bool counted_rotation = false;  // this lane's pair, at some step
    for (int step = 0; step < N - 1; ++step) {
      R sums[4];
      reduce_pairs<D, N>(x, lane, sums);
      D apq;
      if constexpr (is_cx<D>) apq = D{sums[2], sums[3]};
      else apq = sums[2];
      Rotation<D> rot;
      bool rotate;
      const R cosine = make_rotation(sums[0], sums[1], apq, pb.tol, rot, rotate);
      if (sums[0] > threshold2 && sums[1] > threshold2) {
        sweep_max = fmax(sweep_max, cosine);
        counted_rotation = counted_rotation || rotate;
      }
      if (__any_sync(kFull, rotate)) {
#pragma unroll
        for (int k = 0; k < kPairs; ++k) {
          const int source = k << (5 - kLevels);
          const R c = shuffle(rot.c, source);
          const D s = shuffle(rot.s, source);
          rotate_pair(x[2 * k], x[2 * k + 1], c, s);
          if (with_v && lane < N) {
            int p, q;
            round_robin_pair(N, step, k, p, q);
            D vp = sv[lane + p * ldv], vq = sv[lane + q * ldv];
            rotate_pair(vp, vq, c, s);
            sv[lane + p * ldv] = vp;
            sv[lane + q * ldv] = vq;
          }
        }
      }
      turn_circle<D, N>(x);
    }
    ++sweeps;
    sweep_max = warp_max(sweep_max);
    if (sweeps == 1) first_off = sweep_max;
    off = sweep_max;
    if (!__any_sync(kFull, counted_rotation)) {
      converged = true;
      break;
    }
  }
  __syncwarp();

  // σ_j = ‖x_j‖; rank_j = the place of column j in descending order (ties by column number).
  R sigma[N];
#pragma unroll
  for (int t = 0; t < N; ++t) sigma[t] = sqrt(warp_sum(abs2(x[t])));
  int rank[N];
#pragma unroll
  for (int t = 0; t < N; ++t) {
    const int jt = column_of_slot<N>(t);
    int r = 0;
#pragma unroll
    for (int w = 0; w < N; ++w) {
      const int jw = column_of_slot<N>(w);
      r += (jw < n && (sigma[w] > sigma[t] || (sigma[w] == sigma[t] && jw < jt))) ? 1 : 0;
    }
    // Pair mode keeps the column order: block Jacobi's round-robin pairs column blocks, and sorting
    // inside a pair would move columns between blocks so that some pairs of columns never meet.
    rank[t] = pb.pair_mode ? jt : r;
  }

  if (pb.pair_mode) {
    if (lane == 0) atomic_max_nonnegative(pb.outer_off + b / pb.pairs_per_matrix, first_off);
#pragma unroll
    for (int t = 0; t < N; ++t) x[t] = scaled(x[t], exponent);
  } else {
    if (pb.s != nullptr) {
#pragma unroll
      for (int t = 0; t < N; ++t)
        if (column_of_slot<N>(t) < n && lane == (t & 31)) pb.s[b * n + rank[t]] = scaled(sigma[t], exponent);
    }
    if (lane == 0 && pb.info != nullptr)
      pb.info[b] = SvdInfo{converged ? status::ok : status::no_convergence, sweeps, double(off)};
    if (pb.u != nullptr) {
      // U's columns: x_j/σ_j above the zero threshold. A column at or below it (numerically zero,
      // or exactly zero in a rank-deficient X) gets a unit vector orthogonal to all the others
      // instead, so that U has orthonormal columns whatever the rank: its own direction
      // orthogonalised against the columns found so far when at least half of it is left, else
      // e_c for the row c where those columns have least energy (so that at least 1/m of it is
      // outside their span), orthogonalised likewise.
      unsigned done = 0;
#pragma unroll
      for (int t = 0; t < N; ++t) {
        const bool real_column = column_of_slot<N>(t) < n;
        if (real_column && sigma[t] > threshold) done |= 1u << t;
        x[t] = real_column && sigma[t] > R(0) ? divided(x[t], sigma[t]) : zero;
      }
      // Not unrolled: a column at or below the threshold is rare, and unrolled this loop holds N
      // copies of two Gram–Schmidt passes over N columns — most of the kernel's code, spills and
      // compile time. x[t] and σ_t are picked out and put back by unrolled selects, so x stays in
      // registers.
#pragma unroll 1
      for (int t = 0; t < N; ++t) {
        if (column_of_slot<N>(t) >= n || ((done >> t) & 1u)) continue;
        const D column = register_pick<N>(x, t);
        const R sigma_t = register_pick<N>(sigma, t);
        // Attempt 0 starts from the column's own direction, attempt 1 from e_c (header above).
        D value = zero;
#pragma unroll 1
        for (int attempt = sigma_t > R(0) ? 0 : 1; attempt < 2; ++attempt) {
          D start = column;
          if (attempt == 1) {
            R energy = R(INFINITY);
            if (lane < m) {
              energy = R(0);
#pragma unroll
              for (int w = 0; w < N; ++w)
                if ((done >> w) & 1u) energy += abs2(x[w]);
            }
            int who = lane;
#pragma unroll
            for (int offset = 16; offset > 0; offset >>= 1) {
              const R other = __shfl_xor_sync(kFull, energy, offset);
              const int other_lane = __shfl_xor_sync(kFull, who, offset);
              if (other < energy || (other == energy && other_lane < who)) {
                energy = other;
                who = other_lane;
              }
            }
            start = lane == who ? from_real<D>(R(1)) : zero;
          }
          const D e = orthogonalised<D, N>(x, done, start);
          const R left = sqrt(warp_sum(abs2(e)));
          if (attempt == 1 || left >= R(0.5)) {
            value = divided(e, left);
            break;
          }
        }
        register_put<N>(x, t, value);
        done |= 1u << t;
      }
    }
  }

  if (pb.u != nullptr) {
    D* U = pb.u + b * pb.stride_u;
    for (int i = lane; i < pb.u_rows; i += 32) {
      const int row = pb.u_row_map != nullptr && i < n ? pb.u_row_map[b * n + i] : i;
#pragma unroll
      for (int t = 0; t < N; ++t)
        if (column_of_slot<N>(t) < n) U[row + static_cast<long long>(rank[t]) * pb.ldu] = i < m ? x[t] : zero;
    }
  }
  if (with_v) {
    // V accumulates ~n rotations per column and sweep, each rounding its two columns, so its
    // orthogonality decays like √(rotations)·ε — past 10·n·ε by n ≈ 64. One step towards the
    // nearest unitary matrix restores it: V ← V − ½·V·E, E = VᴴV − I (E is O(√(n·sweeps)·ε), so the
    // step leaves O(‖E‖²) + rounding, and it removes the symmetric part of V's error only, so
    // A·V ≈ UΣ is no worse). Lane j forms column j of E; lane i then writes row i of the result.
    // Not in pair mode: block Jacobi refines its own V once at the end.
    if (!pb.pair_mode) {
      if (lane < n)
        for (int i = 0; i < n; ++i) {
          D acc = zero;
          for (int r = 0; r < n; ++r) acc = fma_conj(acc, sv[r + i * ldv], sv[r + lane * ldv]);
          if (i == lane) acc = acc - from_real<D>(R(1));
          se[i + lane * ldv] = acc * R(0.5);
        }
      __syncwarp();
    }
    D* V = pb.v + b * pb.stride_v;
    for (int i = lane; i < max(pb.v_rows, n); i += 32) {
#pragma unroll
      for (int t = 0; t < N; ++t) {
        const int jt = column_of_slot<N>(t);
        if (jt >= n) continue;
        D value = zero;
        if (i < n) {
          value = sv[i + jt * ldv];
          if (!pb.pair_mode)
            for (int k = 0; k < n; ++k) value = value - sv[i + k * ldv] * se[k + jt * ldv];
        }
        V[i + static_cast<long long>(rank[t]) * pb.ldv] = value;
      }
    }
  }
}

template <class D, int N>
void launch(const Problem<D>& pb, cudaStream_t stream) {
  const std::size_t smem = pb.v != nullptr ? sizeof(D) * 2 * N * (N + 1) * kWarpsPerBlock : 0;
  if (smem > 48 * 1024)
    COVFLOW_CUDA_TRY(cudaFuncSetAttribute(warp_jacobi_kernel<D, N>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)));
  const auto blocks = static_cast<unsigned>((pb.count + kWarpsPerBlock - 1) / kWarpsPerBlock);
  warp_jacobi_kernel<D, N><<<blocks, kWarpsPerBlock * 32, smem, stream>>>(pb);
  COVFLOW_CHECK_LAUNCH();
}

}  // namespace

template <class D>
void launch_warp(const Problem<D>& pb, cudaStream_t stream) {
  if (pb.count == 0) return;
  if (pb.n <= 2) return launch<D, 2>(pb, stream);
  if (pb.n <= 4) return launch<D, 4>(pb, stream);
  if (pb.n <= 8) return launch<D, 8>(pb, stream);
  if (pb.n <= 16) return launch<D, 16>(pb, stream);
  return launch<D, 32>(pb, stream);
}

template void launch_warp<float>(const Problem<float>&, cudaStream_t);
template void launch_warp<double>(const Problem<double>&, cudaStream_t);
template void launch_warp<Cx<float>>(const Problem<Cx<float>>&, cudaStream_t);
template void launch_warp<Cx<double>>(const Problem<Cx<double>>&, cudaStream_t);

}  // namespace covflow::linalg::detail::svdj

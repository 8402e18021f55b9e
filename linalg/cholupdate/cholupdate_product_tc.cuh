// Internal to cholupdate_cuda.cu: the product path for real double with 4 < k ≤ 16 on the FP64
// tensor cores (mma.sync m16n8k4 .f64) — W = L⁻¹V with the column parameters m_j, z_j and M_J made
// by workers of the same grid, the apply L̃ = L·M running under that solve, and the finish that
// decides the guard (below, "L̃ = L·M on the tensor cores").
//
// Same mathematics as trsm_kernel + column_kernel (cholupdate_product.cuh); the workspace adds M_J
// per row block, the ready counts and a copy of the factor's lower tiles. Row blocks J of 64 rows
// taken by ticket, X = L_JJ⁻¹, Y = X·L_{J,J−1}, and the chain W_J = X·(V_J − Σ_{I<J} L_JI W_I).
// What differs is where the chain's time goes. The SIMT version spends about 5 µs per row block on
// an H100 (n = 5000, k = 16), most of it in the 64×64 by 64×16 product Y·W_{J−1} (every thread
// reading all of W_{J−1} from shared memory: bound by shared memory bandwidth) and, on the next
// block, in accumulating L_{J,J−2}W_{J−2} and forming X·R after W_{J−2} arrives. Here:
//   * every 64×64 by 64×16 product is 32 DMMAs per warp, each lane holding one element of A and
//     one of B per instruction (no lane reads all of W);
//   * one more block of lookahead: Z = X·L_{J,J−2} is formed at the start, so R = V_J −
//     Σ_{I≤J−3} L_JI W_I and T = X·R are complete two steps ahead, T −= Z·W_{J−2} one step ahead,
//     and the chain step after W_{J−1} is only W_J = T − Y·W_{J−1} with Y already in registers;
//   * each warp publishes its own part of W_J (a count of warps, release order), so no block
//     barrier sits between the product and the counter.
// Off the chain: the segment sums of L_RJ W_J for the apply kernel and the ρ guard's row sums
// (from the same fragments) and the gram prefix. The column parameters m_j, z_j (column_parameters;
// this saves the separate column kernel, 70 µs at n = 5000) and M_J are made by column workers,
// extra blocks of the same grid (column_worker), a quarter of a row block at a time, so that a row
// block's SM is free for the apply as soon as its own sums are done and M_J follows W_J closely.
//
// Fragments of mma.m16n8k4 with .f64 (PTX ISA, "Matrix Fragments for mma.m16n8k4"): g = lane/4,
// c = lane%4; A (16×4): A(g, c), A(g+8, c); B (4×8): B(c, g); C/D (16×8): C(g, 2c), C(g, 2c+1),
// C(g+8, 2c), C(g+8, 2c+1). Below, index mt ∈ {0, 1} is the row offset 8·mt.
// Warps: w = 0…7, mg = w%4 owns rows 16mg … 16mg+15 (two 8-row tiles); the second index w/4 is the
// k-half (32 columns of L) in the accumulation and the 8-column half of W in the chain.
#pragma once

#include "cholupdate_product.cuh"

namespace covflow::linalg::detail {
namespace {

constexpr int kTcLd = 68;      // column stride of a 64×64 tile in shared memory: conflict-free fragments
constexpr int kTcRhsLd = 20;   // row stride of R (64×16) in shared memory
constexpr int kTcThreads = 256;
// The column parameters and M_J of every row block are made by kColumnWorkers extra blocks of the
// same grid, each taking a quarter of a row block (16 columns: one round of its 16 half-warps) at a
// time. Done by the row block itself (64 columns, four rounds) they would take tens of µs after its
// W, holding both its SM and its M_J from the apply running under the solve. More workers than 32
// hold SMs the apply needs (the counts compared are in docs/performance-history.md).
constexpr int kColumnWorkers = 32;

constexpr std::size_t tc_shared_bytes() {
  return sizeof(double) * (5 * kTrsmBlock * kTcLd + kTrsmBlock * 16 + kTrsmBlock * kTcRhsLd + kTrsmBlock * 16 + 2 * kTrsmBlock);
}

// A 16×8 tile += (16×4)·(4×8): rows g (d0, a0) and g + 8 (d1, a1) of the layout above, i.e. a
// warp's two 8-row tiles in one instruction. m16n8k4 rather than m8n8k4: on the H100 the latter
// issues at half the rate (63 against 125 multiply-adds per clock per SM, measured).
__device__ inline void dmma(double (&d0)[2], double (&d1)[2], double a0, double a1, double b) {
  asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
               : "+d"(d0[0]), "+d"(d0[1]), "+d"(d1[0]), "+d"(d1[1])
               : "d"(a0), "d"(a1), "d"(b));
}

// Rows r0 … r0+63, columns c0 … c0+63 of L into `dst` (column-major, ld kTcLd): cp.async where two
// rows are inside, zeros outside the matrix and, when `lower`, above the diagonal (c > r).
__device__ inline void issue_tile(double* dst, const double* L, long long ldl, int r0, int c0, int n, bool lower,
                                  bool aligned) {
  for (int e = threadIdx.x; e < kTrsmBlock * kTrsmBlock / 2; e += blockDim.x) {
    const int c = e / (kTrsmBlock / 2), r = (e % (kTrsmBlock / 2)) * 2;
    double* d = dst + c * kTcLd + r;
    const double* src = L + (r0 + r) + static_cast<long long>(c0 + c) * ldl;
    const bool in0 = r0 + r < n && c0 + c < n && (!lower || c <= r);
    const bool in1 = r0 + r + 1 < n && c0 + c < n && (!lower || c <= r + 1);
    if (aligned && in0 && in1) {
      copy_async_16(d, src);
    } else {
      d[0] = in0 ? src[0] : 0.0;
      d[1] = in1 ? src[1] : 0.0;
    }
  }
}

// A 64×64 tile of L as loaded into shared memory (column-major, ld kTcLd) to the workspace's
// backup (64×64 column-major), by all threads of the block. Streaming stores: read back only for a
// refused matrix.
__device__ inline void save_tile(double* saved, const double* tile) {
  for (int e = threadIdx.x; e < kTrsmBlock * kTrsmBlock / 2; e += blockDim.x) {
    const int col = e / (kTrsmBlock / 2), r = (e % (kTrsmBlock / 2)) * 2;
    __stcs(reinterpret_cast<double2*>(saved + col * kTrsmBlock + r), *reinterpret_cast<const double2*>(tile + col * kTcLd + r));
  }
}

// out = sign · X·T for a 64×64 tile T (X lower triangular, both column-major ld kTcLd), warp
// (mg, column half nh): rows 16mg…, columns 32nh….
__device__ inline void form_product(double* out, const double* x, const double* tile, double sign, int warp, int lane) {
  const int mg = warp % 4, nh = warp / 4, g = lane / 4, c = lane % 4;
  double acc[2][4][2] = {};
  for (int ks = 0; ks < 4 * mg + 4; ++ks) {  // X(r, l) = 0 for l > r
    double a[2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) a[mt] = x[(4 * ks + c) * kTcLd + 16 * mg + 8 * mt + g];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const double b = tile[(32 * nh + 8 * nt + g) * kTcLd + 4 * ks + c];
      dmma(acc[0][nt], acc[1][nt], a[0], a[1], b);
    }
  }
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int i = 0; i < 2; ++i) out[(32 * nh + 8 * nt + 2 * c + i) * kTcLd + 16 * mg + 8 * mt + g] = sign * acc[mt][nt][i];
}

// The wait of one warp on the per-matrix count of published warps.
__device__ inline void warp_wait(int* counter, int target, int lane) {
  if (lane == 0) wait_at_least(counter, target);
  __syncwarp();
}

// Column j's m_j and z_j (see column_parameters in cholupdate_product.cuh: same formulas) by the
// 16 lanes of a half-warp, i = lane % 16 holding row i of G_j and then of its Cholesky factor C in
// registers: G_j = prefix + Σ_{l<c} w_lᵀ w_l, C by right-looking elimination with the pivot row
// shuffled to the lanes below, u = C⁻¹w_jᵀ, m_j² = 1 + ‖u‖², y = C⁻ᵀu (C's columns read back
// through `transpose`, 16×17 per half-warp), z_j = y/m_j. Both halves run the same shuffles;
// `store` = false for a half with no column. Returns true on a non-finite or non-positive pivot.
__device__ inline bool column_parameters_16(int j, int c, bool store, const double* prefix, const double* w_block,
                                            double* transpose, const ProductBuffers<double>& buf, int i) {
  constexpr unsigned kAll = 0xffffffffu;
  double g[16];
#pragma unroll
  for (int q = 0; q < 16; ++q) g[q] = prefix[i * 16 + q];
#pragma unroll 4
  for (int l = 0; l < c; ++l) {
    const double wi = w_block[l * 16 + i];
#pragma unroll
    for (int q = 0; q < 16; ++q) g[q] = fma(wi, w_block[l * 16 + q], g[q]);
  }
  bool bad = false;
  double inv[16];
#pragma unroll
  for (int p = 0; p < 16; ++p) {
    const double d2 = __shfl_sync(kAll, g[p], p, 16);
    const bool ok = d2 > 0.0 && isfinite(d2);
    if (!ok) bad = true;
    const double d = ok ? sqrt(d2) : 1.0;
    inv[p] = 1.0 / d;
    if (i > p) g[p] *= inv[p];
    else if (i == p) g[p] = d;
#pragma unroll
    for (int q = p + 1; q < 16; ++q) {
      const double cqp = __shfl_sync(kAll, g[p], q, 16);  // C(q, p)
      if (q <= i) g[q] = fma(-g[p], cqp, g[q]);
    }
  }
  double b = w_block[c * 16 + i];
#pragma unroll
  for (int p = 0; p < 16; ++p) {
    const double u = __shfl_sync(kAll, b, p, 16) * inv[p];
    if (i == p) b = u;
    else if (i > p) b = fma(-g[p], u, b);
  }
  double m2 = b * b;
#pragma unroll
  for (int o = 8; o > 0; o /= 2) m2 += __shfl_xor_sync(kAll, m2, o, 16);
  m2 += 1.0;
#pragma unroll
  for (int q = 0; q < 16; ++q) transpose[i * 17 + q] = g[q];
  __syncwarp();
  double ct[16];
#pragma unroll
  for (int p = 0; p < 16; ++p) ct[p] = transpose[p * 17 + i];  // C(p, i)
  __syncwarp();
#pragma unroll
  for (int p = 15; p >= 0; --p) {
    const double y = __shfl_sync(kAll, b, p, 16) * inv[p];
    if (i == p) b = y;
    else if (i < p) b = fma(-ct[p], y, b);
  }
  const double mj = sqrt(m2);
  const double zj = b * (1.0 / mj);
  if (!isfinite(mj) || !isfinite(zj)) bad = true;
  if (store) {
    buf.z[std::size_t(j) * 16 + i] = zj;
    if (i == 0) buf.m[j] = mj;
  }
  return store && bad;
}

// Columns first, first + stride, … of M_J = diag(m) + strict lower part of W_J Z_Jᵀ for
// apply_tc_kernel (zero outside the matrix), from W_J in shared memory ([row][16]) and those
// columns' z_j, m_j in the workspace (visible to the caller), staged through `stage` (64·17 doubles:
// read from the cache once, not once per row). Called by the whole block.
__device__ inline void form_mix(const ProductBuffers<double>& buf, int J, int rows, const double* w_own, double* stage,
                                int first, int stride) {
  constexpr int B = kTrsmBlock, K = 16;
  const int t = threadIdx.x, r0 = J * B, count = B / stride;
  double* z_s = stage;           // [s][16] for column first + stride·s
  double* m_s = stage + B * K;  // [s]
  for (int e = t; e < count * K; e += kTcThreads) {
    const int col = first + stride * (e / K);
    z_s[e] = col < rows ? __ldcg(buf.z + (std::size_t(r0) + col) * K + e % K) : 0.0;
  }
  if (t < count) m_s[t] = first + stride * t < rows ? __ldcg(buf.m + r0 + first + stride * t) : 0.0;
  __syncthreads();
  double* mix = buf.mix + std::size_t(J) * B * B;
  const int i = t % B;  // row; consecutive threads, consecutive rows
  double w[K];
#pragma unroll
  for (int p = 0; p < K; ++p) w[p] = w_own[i * K + p];
  for (int sc = t / B; sc < count; sc += kTcThreads / B) {  // a warp's lanes share sc: z_s reads are broadcasts
    const int j = first + stride * sc;
    double value = 0.0;
    if (i < rows && j < rows) {
      if (i == j) {
        value = m_s[sc];
      } else if (i > j) {
#pragma unroll
        for (int p = 0; p < K; ++p) value = fma(w[p], z_s[sc * K + p], value);
      }
    }
    mix[j * B + i] = value;
  }
}

// A column worker (trsm_tc_kernel's blocks past the row blocks): items are (row block J, quarter q)
// in order; for each, once W_J and the prefix I + Σ_{I<J} W_Iᵀ W_I are
// published, columns q, q + 4, …, q + 60 of block J (one per half-warp: each quarter gets a like
// share of the longer prefix sums) and then those columns of M_J. Workers wait only on row blocks
// (earlier tickets), never the reverse.
__device__ inline void column_worker(ProductStatus& status, const ProductBuffers<double>& buf, int* mix_ready, int n,
                                     double* w_block, double* prefix, double* transposes) {
  constexpr int B = kTrsmBlock, K = 16, kWarps = kTcThreads / 32;
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int blocks = ProductBuffers<double>::blocks(n);
  const int items = 4 * blocks;
  __shared__ int item_s;
  for (;;) {
    if (t == 0) item_s = atomicAdd(&status.column_ticket, 1);
    __syncthreads();
    const int item = item_s;
    if (item >= items) {
      if (t == 0) {
        atomicMax(&status.clock[kSolveEnd], clock_ns());
        release_add(&status.solve_exits, 1);  // after this block's guard writes (this thread's atomics)
      }
      return;
    }
    const int J = item / 4, q = item % 4;
    const int r0 = J * B, rows = n - r0 < B ? n - r0 : B;
    if (t == 0) {
      wait_at_least(&status.progress, kWarps * (J + 1));  // W_J
      if (J > 0) wait_at_least(&status.gram_progress, J);  // prefix J (written by block J − 1)
    }
    __syncthreads();
    for (int e = t; e < B * K; e += kTcThreads) w_block[e] = e / K < rows ? __ldcg(buf.w + std::size_t(r0) * K + e) : 0.0;
    prefix[t] = J > 0 ? __ldcg(buf.prefix + std::size_t(J) * K * K + t) : (t / K == t % K ? 1.0 : 0.0);
    __syncthreads();
    const int cl = 4 * (2 * warp + lane / 16) + q;  // this half-warp's column (0 < rows: a stand-in)
    double* transpose = transposes + warp * 2 * 16 * 17 + (lane / 16) * 16 * 17;
    const bool bad = column_parameters_16(r0 + cl, cl < rows ? cl : 0, cl < rows, prefix, w_block, transpose, buf, lane % 16);
    if (__syncthreads_or(bad) && t == 0) atomicOr(&status.reject, 1);
    form_mix(buf, J, rows, w_block, transposes, q, 4);  // the z_j and m_j of this block's stores above
    __syncthreads();  // w_block, prefix, the stage and item_s are refilled next
    if (t == 0) release_add(mix_ready + J, 1);  // a quarter of M_J (and its z_j, m_j): four make it whole
  }
}

template <int K>
__global__ void __launch_bounds__(kTcThreads) trsm_tc_kernel(const double* l_all, long long ldl, long long stride_l,
                                                             const double* v_all, long long ldv, long long stride_v,
                                                             int n, int k, bool aligned, ProductWork<double> work,
                                                             long long first_matrix) {
  static_assert(K == 16, "the tensor-core solve is written for k ≤ 16");
  using D = double;
  constexpr int B = kTrsmBlock;
  constexpr int kWarps = kTcThreads / 32;
  extern __shared__ __align__(16) unsigned char smem[];
  double* xs = reinterpret_cast<double*>(smem);  // X = L_JJ⁻¹ (column-major, ld kTcLd)
  double* zs = xs + B * kTcLd;                   // L_JJ for the inversion, then −Y, then −Z
  const auto tile = [&](int b) { return zs + (1 + b) * B * kTcLd; };  // three L tiles by cp.async; later the columns' scratch
  double* scratch = zs + 4 * B * kTcLd;          // [row][16]: the inversion's S, the k-halves' sums, ρ's row sums
  double* rhs = scratch + B * 16;                // R [row][kTcRhsLd]
  double* w_own = rhs + B * kTcRhsLd;            // W_J [row][16]
  double* reciprocal = w_own + B * 16;           // 1/L(i, i)
  double* v_norm2 = reciprocal + B;              // ‖v_i‖² (ρ's row size)
  __shared__ int taken;

  const long long m = first_matrix + blockIdx.y;
  ProductStatus& status = work.status[m];
  const ProductBuffers<D> buf = ProductBuffers<D>::carve(work.buffers + m * work.per_matrix, n, K);
  const D* L = l_all + m * stride_l;
  const D* V = v_all + m * stride_v;
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int mg = warp % 4, half = warp / 4, g = lane / 4, c = lane % 4;

  // apply_tc_kernel, launched next as a programmatic dependent, may start once every block here has
  // begun: its blocks take the SMs this grid leaves and those it frees, and wait on `ready`.
  allow_dependents();
  if (t == 0) {
    atomicMax(&status.clock[kSolveStart], ~clock_ns());
    taken = atomicAdd(&status.ticket, 1);
  }
  __syncthreads();
  const int blocks = ProductBuffers<D>::blocks(n);
  int* const row_ready = work.ready + m * 2 * blocks;
  int* const mix_ready = row_ready + blocks;
  if (taken >= blocks) {
    column_worker(status, buf, mix_ready, n, w_own, scratch, tile(0));
    return;
  }
  const int J = taken;
  const int r0 = J * B;
  const int rows = n - r0 < B ? n - r0 : B;
  const int segments = ProductBuffers<D>::segments(n, K);
  constexpr int S = ProductBuffers<D>::segment_tiles(K);
  bool bad = false;

  // 1. L_JJ (lower, zeros outside) into zs, L_{J,J−1} and L_{J,J−2} into the tile buffers.
  issue_tile(zs, L, ldl, r0, r0, n, true, aligned);
  if (J >= 1) issue_tile(tile(0), L, ldl, r0, r0 - B, n, false, aligned);
  if (J >= 2) issue_tile(tile(1), L, ldl, r0, r0 - 2 * B, n, false, aligned);
  commit_async();
  for (int e = t; e < B * kTcRhsLd; e += kTcThreads) {  // consecutive threads, consecutive rows of a column of V
    const int i = e % B, p = e / B;
    rhs[i * kTcRhsLd + p] = (i < rows && p < k) ? V[(r0 + i) + p * ldv] : 0.0;
  }
  wait_async<0>();
  __syncthreads();
  if (t < B) {
    double sum = 0.0;
#pragma unroll
    for (int p = 0; p < K; ++p) sum = fma(rhs[t * kTcRhsLd + p], rhs[t * kTcRhsLd + p], sum);
    v_norm2[t] = sum;
    if (t < rows) {
      const D d = zs[t * kTcLd + t];
      if (!(isfinite(d) && d > 0.0)) bad = true;
      reciprocal[t] = bad ? 1.0 : 1.0 / d;
    } else {
      reciprocal[t] = 1.0;  // the identity pads the last block
      zs[t * kTcLd + t] = 1.0;
    }
  }
  __syncthreads();

  // 2. X = L_JJ⁻¹ by 16×16 blocks. (a) The four diagonal blocks D_a = L_aa⁻¹ at once, right-looking:
  //    thread (block a, column j, q) keeps rows i ≡ q (mod 4) of column j of D_a in registers; once
  //    X(l, j) is known it is shuffled to the column's four threads, which subtract L(i, l)·X(l, j)
  //    from their rows below l. (b) Below them, block row by block row on the tensor cores:
  //    X_ab = −D_a·Σ_{c=b}^{a−1} L_ac X_cb (the blocks of X_cb are from earlier rows). A 64-step
  //    right-looking loop over the whole tile would cost one shared-memory load per multiply-add at
  //    the start of every row block.
  {
    const int a = t / 64, j = (t % 64) >> 2, q = t & 3, o = 16 * a;
    double x[4];
#pragma unroll
    for (int s4 = 0; s4 < 4; ++s4) x[s4] = 4 * s4 + q == j ? 1.0 : 0.0;
#pragma unroll
    for (int l = 0; l < 16; ++l) {
      double xl = x[l / 4] * reciprocal[o + l];  // X(l, j) on thread q = l % 4 (zero for l < j)
      xl = __shfl_sync(0xffffffffu, xl, (lane & ~3) | (l % 4));
      if (q == l % 4) x[l / 4] = xl;
#pragma unroll
      for (int s4 = l / 4; s4 < 4; ++s4)
        if (4 * s4 + q > l) x[s4] = fma(-zs[(o + l) * kTcLd + o + 4 * s4 + q], xl, x[s4]);
    }
#pragma unroll
    for (int s4 = 0; s4 < 4; ++s4) xs[(o + j) * kTcLd + o + 4 * s4 + q] = x[s4];
    for (int e = t; e < 6 * 256; e += kTcThreads) {  // the blocks above the diagonal are zero
      const int block = e / 256, r = (e % 256) / 16, col = e % 16;
      const int above = block < 3 ? 0 : block < 5 ? 1 : 2, right = block < 3 ? 1 + block : block < 5 ? block - 1 : 3;
      xs[(16 * right + col) * kTcLd + 16 * above + r] = 0.0;
    }
  }
  __syncthreads();
  static_assert(3 * 16 * kTcRhsLd <= kTrsmBlock * 16, "three warps' S fit in scratch");
  for (int a = 1; a < 4; ++a) {
    if (warp < a) {  // warp b makes X_ab
      const int b = warp;
      double* s_w = scratch + warp * 16 * kTcRhsLd;  // S = Σ L_ac X_cb, [row][kTcRhsLd]
      double acc[2][2][2] = {};                      // [column half nt][row half mt][i]
      for (int cb = b; cb < a; ++cb)
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          const double* l_col = zs + (16 * cb + 4 * ks + c) * kTcLd + 16 * a + g;  // L(16a + g…, 16cb + 4ks + c)
#pragma unroll
          for (int nt = 0; nt < 2; ++nt)
            dmma(acc[nt][0], acc[nt][1], l_col[0], l_col[8], xs[(16 * b + 8 * nt + g) * kTcLd + 16 * cb + 4 * ks + c]);
        }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int i = 0; i < 2; ++i) s_w[(8 * mt + g) * kTcRhsLd + 8 * nt + 2 * c + i] = acc[nt][mt][i];
      __syncwarp();
      double out[2][2][2] = {};
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        const double* d_col = xs + (16 * a + 4 * ks + c) * kTcLd + 16 * a + g;  // D_a(g…, 4ks + c)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) dmma(out[nt][0], out[nt][1], d_col[0], d_col[8], s_w[(4 * ks + c) * kTcRhsLd + 8 * nt + g]);
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int i = 0; i < 2; ++i) xs[(16 * b + 8 * nt + 2 * c + i) * kTcLd + 16 * a + 8 * mt + g] = -out[nt][mt][i];
    }
    __syncthreads();
  }

  // 3. −Y = −X·L_{J,J−1} into registers (the chain's A fragments), then −Z = −X·L_{J,J−2} into zs.
  double ya[2][16];
  if (J >= 1) {
    form_product(zs, xs, tile(0), -1.0, warp, lane);
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int ks = 0; ks < 16; ++ks) ya[mt][ks] = zs[(4 * ks + c) * kTcLd + 16 * mg + 8 * mt + g];
    __syncthreads();
  }
  if (J >= 2) {
    form_product(zs, xs, tile(1), -1.0, warp, lane);
  }
  __syncthreads();  // the tile buffers are free

  // 4. R = V_J − Σ_{I≤J−3} L_JI W_I as the W_I are published, one tile ahead by cp.async. Warp
  //    (mg, half) sums columns 32·half… of each tile into acc; flush() folds the halves into R and
  //    into this row block's sum for segment `open` of the apply (written at the segment's first
  //    flush, added to after). The ρ guard's sums come from the same fragments: s(r) = Σ_i
  //    |L(r, i)|·‖w_i‖₁ (‖w_i‖₁ reduced over the lanes holding row i of W_I) and ‖L(r, :)‖².
  double acc[2][2][2] = {};
  double s_row[2] = {0.0, 0.0}, l_row[2] = {0.0, 0.0};
  int open = 0;
  bool fresh = true;
  const auto flush = [&]() {
    if (half == 1)
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 2; ++i) scratch[(16 * mg + 8 * mt + g) * 16 + 8 * nt + 2 * c + i] = acc[mt][nt][i];
    __syncthreads();
    if (half == 0) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int row = 16 * mg + 8 * mt + g, p = 8 * nt + 2 * c + i;
            const double sum = acc[mt][nt][i] + scratch[row * 16 + p];
            rhs[row * kTcRhsLd + p] -= sum;
            double& slot = buf.partial[((std::size_t(J) * segments + open) * K + p) * B + row];
            slot = fresh ? sum : slot + sum;
          }
    }
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = 0.0;
    fresh = false;
    __syncthreads();
  };
  const auto reopen = [&](int I) {
    if (I / S != open) {
      flush();
      open = I / S;
      fresh = true;
    }
  };
  const auto accumulate = [&](const double* tile, int I) {
    const double* w = buf.w + (std::size_t(I) * B + 32 * half) * K;
    const int w_rows = n - (I * B + 32 * half);  // rows of W_I past n are zero (not in the workspace)
    double b[8][2], norm[8];
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) b[ks][nt] = 4 * ks + c < w_rows ? __ldcg(w + (4 * ks + c) * K + 8 * nt + g) : 0.0;
      norm[ks] = fabs(b[ks][0]) + fabs(b[ks][1]);
    }
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      norm[ks] += __shfl_xor_sync(0xffffffffu, norm[ks], 4);
      norm[ks] += __shfl_xor_sync(0xffffffffu, norm[ks], 8);
      norm[ks] += __shfl_xor_sync(0xffffffffu, norm[ks], 16);
    }
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      double a[2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        a[mt] = tile[(32 * half + 4 * ks + c) * kTcLd + 16 * mg + 8 * mt + g];
        s_row[mt] = fma(fabs(a[mt]), norm[ks], s_row[mt]);
        l_row[mt] = fma(a[mt], a[mt], l_row[mt]);
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) dmma(acc[0][nt], acc[1][nt], a[0], a[1], b[ks][nt]);
    }
  };
  const int last = J - 3;  // tiles 0 … last go into R
  if (last >= 0) issue_tile(tile(0), L, ldl, r0, 0, n, false, aligned);
  commit_async();
  if (last >= 1) issue_tile(tile(1), L, ldl, r0, B, n, false, aligned);
  commit_async();
  for (int I = 0; I <= last; ++I) {
    // One thread per block waits here (the chain's waits below are per warp): every block but the
    // chain's next few spins on the newest W, and 8 spinners per block slow the counter's writers.
    if (t == 0) wait_at_least(&status.progress, kWarps * (I + 1));
    wait_async<1>();
    __syncthreads();
    reopen(I);
    accumulate(tile(I & 1), I);
    __syncthreads();
    if (I + 2 <= last) issue_tile(tile(I & 1), L, ldl, r0, (I + 2) * B, n, false, aligned);
    commit_async();
  }
  wait_async<0>();
  flush();

  // 5. T = X·R, in the chain's layout: warp (mg, half) owns rows 16mg…, columns 8·half… of W_J.
  //    Eight independent sums, added at the end: T and Z·W_{J−2} into four of them, the chain step
  //    into all eight, so that the chain's 16 products are two deep, not eight (a DMMA's result
  //    is ready only a few hundred cycles later). Every index into tc is a constant — the loop
  //    over X's nonzero k-steps is unrolled with a test rather than bounded by 4mg + 4 — or ptxas
  //    puts tc in local memory (a stack frame), which slows the solve.
  double tc[8][2][2] = {};
#pragma unroll
  for (int ks = 0; ks < 16; ++ks) {
    if (ks < 4 * mg + 4) {  // X(r, l) = 0 for l > r
      const double b = rhs[(4 * ks + c) * kTcRhsLd + 8 * half + g];
      const double* x = xs + (4 * ks + c) * kTcLd + 16 * mg + g;
      dmma(tc[ks & 3][0], tc[ks & 3][1], x[0], x[8], b);
    }
  }
  const auto load_w = [&](int I, double (&b)[16]) {  // B fragments of W_I: rows 4ks + c, column 8·half + g
    const double* w = buf.w + std::size_t(I) * B * K + 8 * half + g;
#pragma unroll
    for (int ks = 0; ks < 16; ++ks) b[ks] = __ldcg(w + (4 * ks + c) * K);
  };
  if (J >= 2) {  // T −= Z·W_{J−2}
    warp_wait(&status.progress, kWarps * (J - 1), lane);
    double b[16];
    load_w(J - 2, b);
#pragma unroll
    for (int ks = 0; ks < 16; ++ks) {
      const double* z = zs + (4 * ks + c) * kTcLd + 16 * mg + g;
      dmma(tc[ks & 3][0], tc[ks & 3][1], z[0], z[8], b[ks]);
    }
  }
  if (J >= 1) {  // the chain step: W_J = T − Y·W_{J−1}
    warp_wait(&status.progress, kWarps * J, lane);
    double b[16];
    load_w(J - 1, b);
#pragma unroll
    for (int ks = 0; ks < 16; ++ks) dmma(tc[ks & 7][0], tc[ks & 7][1], ya[0][ks], ya[1][ks], b[ks]);
  }
  // W_J: to the workspace (rows < n) and to w_own; then this warp's part is published.
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    const int row = 16 * mg + 8 * mt + g, p = 8 * half + 2 * c;
    double sum[2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
      sum[i] = ((tc[0][mt][i] + tc[4][mt][i]) + (tc[2][mt][i] + tc[6][mt][i])) +
               ((tc[1][mt][i] + tc[5][mt][i]) + (tc[3][mt][i] + tc[7][mt][i]));
    double2 value{sum[0], sum[1]};
    if (!(isfinite(value.x) && isfinite(value.y))) bad = true;
    if (row >= rows) value = double2{0.0, 0.0};
    *reinterpret_cast<double2*>(w_own + row * 16 + p) = value;
    if (row < rows) *reinterpret_cast<double2*>(buf.w + (std::size_t(r0) + row) * K + p) = value;
  }
  __syncwarp();
  if (lane == 0) {
    ::cuda::atomic_ref<int, ::cuda::thread_scope_device> progress(status.progress);
    progress.fetch_add(1, ::cuda::memory_order_release);
    if (J == blocks - 1) atomicMax(&status.clock[kLastW], clock_ns());
  }
  // The tiles step 7 needs (J−2, J−1 and the diagonal), loading during the gram step: issued
  // before the chain step, they would delay the accumulation the chain waits on.
  for (int I = J - 2 > 0 ? J - 2 : 0; I <= J; ++I) issue_tile(tile(I - J + 2), L, ldl, r0, I * B, n, I == J, aligned);
  commit_async();
  __syncthreads();  // w_own complete

  // 6. P_J = W_Jᵀ W_J into ‖W‖²_F and into the prefix I + Σ_{I≤J} P_I, after block J−1's.
  {
    D gram = 0.0;
    const int p = t / K, q = t % K;
    for (int i = 0; i < B; ++i) gram = fma(w_own[i * K + p], w_own[i * K + q], gram);
    if (p == q) atomicAdd(&status.norm2, gram);
    if (t == 0 && J > 0) wait_at_least(&status.gram_progress, J);
    __syncthreads();
    const D before = J == 0 ? D(p == q ? 1 : 0) : buf.prefix[std::size_t(J) * K * K + t];
    if (J == 0) buf.prefix[t] = before;
    buf.prefix[std::size_t(J + 1) * K * K + t] = before + gram;
    __syncthreads();
    if (t == 0) release_store(&status.gram_progress, J + 1);
  }

  // 7. The apply's segment sums and ρ's row sums, completed with tiles J−2, J−1 and the diagonal
  //    tile J (its lower triangle; W_J is in the workspace, visible to this block after the barrier).
  wait_async<0>();
  __syncthreads();
  for (int I = J - 2 > 0 ? J - 2 : 0; I <= J; ++I) {
    reopen(I);
    accumulate(tile(I - J + 2), I);
  }
  flush();  // ends with a barrier: every segment sum is written, and this block reads no more of L
  if (t == 0) release_store(row_ready + J, 1);

  // 8. ρ over this block's rows: s(r) / (‖L(r, :)‖² + ‖v_r‖²)^½.
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    s_row[mt] += __shfl_xor_sync(0xffffffffu, s_row[mt], 1);
    s_row[mt] += __shfl_xor_sync(0xffffffffu, s_row[mt], 2);
    l_row[mt] += __shfl_xor_sync(0xffffffffu, l_row[mt], 1);
    l_row[mt] += __shfl_xor_sync(0xffffffffu, l_row[mt], 2);
    if (c == 0) {
      const int row = 16 * mg + 8 * mt + g;
      scratch[half * B + row] = s_row[mt];
      scratch[2 * B + half * B + row] = l_row[mt];
    }
  }
  __syncthreads();
  if (t < rows) {
    const double s_sum = scratch[t] + scratch[B + t];
    const double size2 = scratch[2 * B + t] + scratch[3 * B + t] + v_norm2[t];
    const double rho = s_sum / sqrt(size2);  // NaN or Inf: refused below
    atomicMax(&status.rho_bits, static_cast<unsigned long long>(__double_as_longlong(rho != rho ? HUGE_VAL : rho)));
  }

  // 9. The guard's verdict on this block's W, then the block's end (its columns are the workers').
  if (__syncthreads_or(bad) && t == 0) atomicOr(&status.reject, 1);
  if (t == 0) {
    atomicMax(&status.clock[kSolveEnd], clock_ns());
    release_add(&status.solve_exits, 1);  // ρ's atomics above were before the barrier
  }
}

// ---- L̃ = L·M on the tensor cores -------------------------------------------------------------------

// Per tile (row block R, column block J), with carry(r) = Σ_{i right of tile J, i ≤ r} L(r, i) w_i:
//   L̃_RJ = L_RJ·M_J + carry·Z_Jᵀ,   then carry += L_RJ·W_J,
// the semiseparable sweep of apply_kernel written as three products (M_J from trsm_tc_kernel).
// One block per (row block, segment of kSegmentTilesTc column blocks), tiles right to left. A stage
// holds a tile of L, M_J, W_J and Z_J (rows past n zero), filled by cp.async while the previous
// stage is multiplied. 16 warps: warp (mg, nq) makes rows 16mg…, output columns 16nq…, and warps
// nq = 0, 1 carry columns 8nq… of the carry; it goes through shared memory once per tile to become
// an A operand. 16 warps rather than 8 (each making 32 output columns): a tile's products are
// latency-bound with two warps per scheduler.
//
// Under the solve: the kernel is a programmatic dependent of trsm_tc_kernel, so its blocks start on
// the SMs the solve leaves free and on those its row blocks free as the chain passes. A block waits
// only for what its segment reads — row block R's segment sums (ready[R], which also says the
// solve has read R's rows of L for the last time) and M_J for its column blocks (ready[blocks + J])
// — and blocks are numbered in row-block order, the order in which the chain makes them ready. The
// guard is known only when the solve ends, so each tile is first copied as found to the workspace's
// backup; finish_tc_kernel then either commits the matrix or puts every tile back.
constexpr int kApplyTcThreads = 512;
constexpr int kTcStage = 2 * kTrsmBlock * kTcLd + 2 * kTrsmBlock * kTcRhsLd;  // doubles per stage

constexpr std::size_t apply_tc_shared_bytes() { return sizeof(double) * (2 * kTcStage + kTrsmBlock * kTcRhsLd); }

// Rows `first` … of a [row][16] array into [row][kTcRhsLd], zeros past row `limit`.
__device__ inline void issue_rows(double* dst, const double* src, int first, int limit) {
  for (int e = threadIdx.x; e < kTrsmBlock * 8; e += blockDim.x) {  // 8 pieces of 16 bytes per row
    const int r = e / 8, piece = e % 8;
    double* d = dst + r * kTcRhsLd + 2 * piece;
    if (first + r < limit) {
      copy_async_16(d, src + (std::size_t(first) + r) * 16 + 2 * piece);
    } else {
      d[0] = 0.0;
      d[1] = 0.0;
    }
  }
}

// Apply items in row-block order: row block R has R/S + 1 segments (the last one ends at the
// diagonal). The grid has exactly apply_tc_items blocks; `empty` marks any past the last item.
__host__ __device__ inline int apply_tc_items(int blocks, int S) {
  int items = 0;
  for (int R = 0; R < blocks; ++R) items += R / S + 1;
  return items;
}
__device__ inline ApplyTiles apply_tiles_in_row_order(int blocks, int S) {
  int k = static_cast<int>(blockIdx.x);
  for (int R = 0; R < blocks; ++R) {
    const int segments = R / S + 1;
    if (k < segments) {
      const int top = S * k + S - 1 < R ? S * k + S - 1 : R;
      return ApplyTiles{R, k, top, S * k, false};
    }
    k -= segments;
  }
  return ApplyTiles{0, 0, -1, 0, true};
}

__global__ void __launch_bounds__(kApplyTcThreads, 1)
    apply_tc_kernel(double* l_all, long long ldl, long long stride_l, int n, bool aligned, ProductWork<double> work,
                    long long first_matrix) {
  constexpr int B = kTrsmBlock;
  constexpr int K = 16;
  constexpr int S = ProductBuffers<double>::segment_tiles(K);
  extern __shared__ __align__(16) unsigned char smem[];
  double* stages = reinterpret_cast<double*>(smem);
  double* carry_s = stages + 2 * kTcStage;  // [row][kTcRhsLd]

  allow_dependents();  // finish_tc_kernel's launch; it waits for this grid to end before reading
  const int blocks = ProductBuffers<double>::blocks(n);
  const long long m = first_matrix + blockIdx.y;
  const ApplyJob<double, K> job{true, ProductBuffers<double>::carve(work.buffers + m * work.per_matrix, n, K),
                                l_all + m * stride_l, ProductBuffers<double>::segments(n, K),
                                apply_tiles_in_row_order(blocks, S)};
  if (job.tiles.empty) return;
  const ProductBuffers<double>& buf = job.buf;
  double* L = job.L;
  const int row_block = job.tiles.row_block, top = job.tiles.top, bottom = job.tiles.bottom;
  const int r0 = row_block * B;
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int mg = warp % 4, nq = warp / 4, g = lane / 4, c = lane % 4;
  const bool carries = nq < 2;  // warps nq = 0, 1 carry columns 8nq … of S
  if (t == 0) {
    int* const ready = work.ready + m * 2 * blocks;
    atomicMax(&work.status[m].clock[kApplyStart], ~clock_ns());
    wait_at_least(ready + row_block, 1);
    for (int J = bottom; J <= top; ++J) wait_at_least(ready + blocks + J, 4);
    atomicMax(&work.status[m].clock[kApplyFirstTile], ~clock_ns());
  }
  __syncthreads();  // what the solve published is read below through L2 (cp.async.cg, __ldcg)
  // Stage b: the L tile, M_J (both column-major, ld kTcLd), W_J and Z_J ([row][kTcRhsLd]).
  const auto l_tile = [&](int b) { return stages + b * kTcStage; };
  const auto m_tile = [&](int b) { return stages + b * kTcStage + B * kTcLd; };
  const auto w_rows = [&](int b) { return stages + b * kTcStage + 2 * B * kTcLd; };
  const auto z_rows = [&](int b) { return stages + b * kTcStage + 2 * B * kTcLd + B * kTcRhsLd; };
  const auto issue = [&](int J, int b) {
    issue_tile(l_tile(b), L, ldl, r0, J * B, n, J == row_block, aligned);
    const double* mix = buf.mix + std::size_t(J) * B * B;
    double* dst = m_tile(b);
    for (int e = t; e < B * B / 2; e += kApplyTcThreads) {
      const int col = e / (B / 2), r = (e % (B / 2)) * 2;
      copy_async_16(dst + col * kTcLd + r, mix + col * B + r);
    }
    issue_rows(w_rows(b), buf.w, J * B, n);
    issue_rows(z_rows(b), buf.z, J * B, n);
    commit_async();
  };

  // The carry at the segment's right edge: the trsm's sums of the segments to the right.
  double carry[2][2] = {};
  if (carries)
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int i = 0; i < 2; ++i)
        carry[mt][i] = job.carry_from_right<true>(8 * nq + 2 * c + i, 16 * mg + 8 * mt + g);

  issue(top, 0);
  for (int J = top, b = 0; J >= bottom; --J, b ^= 1) {
    if (J > bottom) issue(J - 1, b ^ 1);
    else commit_async();
    if (carries)
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
        *reinterpret_cast<double2*>(carry_s + (16 * mg + 8 * mt + g) * kTcRhsLd + 8 * nq + 2 * c) =
            double2{carry[mt][0], carry[mt][1]};
    wait_async<1>();
    __syncthreads();
    const double* a_tile = l_tile(b);
    save_tile(buf.backup + (std::size_t(row_block) * (row_block + 1) / 2 + J) * B * B, a_tile);
    const double* mix = m_tile(b) + (16 * nq + g) * kTcLd + c;
    const double* w = w_rows(b) + c * kTcRhsLd + 8 * (nq & 1) + g;
    const double* z = z_rows(b) + (16 * nq + g) * kTcRhsLd + c;
    // Two sums of the output (even and odd k-steps) and four of this tile's part of the carry, so
    // that no chain of dependent DMMAs is longer than ten; and M_J is lower triangular, so warp nq
    // skips the k-steps above its columns (4nq of 16).
    double out[2][2][2][2] = {};  // [k-step parity][row half][column half][i]
    double carry_add[4][2][2] = {};
#pragma unroll
    for (int ks = 0; ks < 16; ++ks) {
      double a[2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) a[mt] = a_tile[(4 * ks + c) * kTcLd + 16 * mg + 8 * mt + g];
      if (ks >= 4 * nq) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const double bm = mix[nt * 8 * kTcLd + 4 * ks];
          dmma(out[ks & 1][0][nt], out[ks & 1][1][nt], a[0], a[1], bm);
        }
      }
      if (carries) dmma(carry_add[ks & 3][0], carry_add[ks & 3][1], a[0], a[1], w[4 * ks * kTcRhsLd]);
    }
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {  // + carry·Z_Jᵀ, the carry from before this tile
      double a[2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) a[mt] = carry_s[(16 * mg + 8 * mt + g) * kTcRhsLd + 4 * ks + c];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const double bz = z[nt * 8 * kTcRhsLd + 4 * ks];
        dmma(out[ks & 1][0][nt], out[ks & 1][1][nt], a[0], a[1], bz);
      }
    }
    if (carries)
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int i = 0; i < 2; ++i)
          carry[mt][i] += (carry_add[0][mt][i] + carry_add[2][mt][i]) + (carry_add[1][mt][i] + carry_add[3][mt][i]);
    // L̃ straight from the fragments: two columns of one row per lane; 8 rows of a column per store.
    const bool diagonal = J == row_block;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      const int row = 16 * mg + 8 * mt + g;
      if (r0 + row >= n) continue;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int col = 16 * nq + 8 * nt + 2 * c + i;
          if (J * B + col < n && (!diagonal || col <= row))
            L[(r0 + row) + std::size_t(J * B + col) * ldl] = out[0][mt][nt][i] + out[1][mt][nt][i];
        }
    }
    __syncthreads();  // the stage and carry_s are refilled next
  }
  wait_async<0>();
  if (t == 0) atomicMax(&work.status[m].clock[kApplyEnd], clock_ns());
}

// After apply_tc_kernel (a programmatic dependent of it, as the rotation pipeline's launches are of
// this): once every solve block has ended, the guard (product_commits) either commits the matrix —
// info = 0, done for the pipeline — or every tile the apply overwrote is put back from the backup,
// bit for bit, and the pipeline then runs on the matrix as it was.
constexpr int kFinishThreads = 256;
constexpr unsigned kFinishBlocks = 128;  // the restore's grid; on a commit each block returns at once

__global__ void __launch_bounds__(kFinishThreads) finish_tc_kernel(double* l_all, long long ldl, long long stride_l, int n,
                                                                   ProductWork<double> work, long long first_matrix,
                                                                   double tau_limit, int* info) {
  constexpr int B = kTrsmBlock, K = 16;
  __shared__ int commits;
  wait_for_predecessor();  // the apply has ended: L̃ and the backup are written
  allow_dependents();
  const long long m = first_matrix + blockIdx.y;
  ProductStatus& status = work.status[m];
  const int blocks = ProductBuffers<double>::blocks(n);
  if (threadIdx.x == 0) {
    if (blockIdx.x == 0) status.clock[kFinish] = clock_ns();
    wait_at_least(&status.solve_exits, blocks + kColumnWorkers);  // the guard's inputs are final
    commits = product_commits(status, n, tau_limit, info, m) ? 1 : 0;
  }
  __syncthreads();
  if (commits != 0) return;
  const ProductBuffers<double> buf = ProductBuffers<double>::carve(work.buffers + m * work.per_matrix, n, K);
  double* L = l_all + m * stride_l;
  const std::size_t tiles = ProductBuffers<double>::tiles(n);
  for (std::size_t q = blockIdx.x; q < tiles; q += gridDim.x) {
    int R = static_cast<int>((sqrt(8.0 * double(q) + 1.0) - 1.0) / 2.0);  // q = R(R+1)/2 + J, J ≤ R
    while (std::size_t(R + 1) * (R + 2) / 2 <= q) ++R;
    while (std::size_t(R) * (R + 1) / 2 > q) --R;
    const int J = static_cast<int>(q - std::size_t(R) * (R + 1) / 2);
    const double* saved = buf.backup + q * B * B;
    for (int e = threadIdx.x; e < B * B; e += kFinishThreads) {
      const int row = R * B + e % B, col = J * B + e / B;
      if (row < n && col <= row) L[row + std::size_t(col) * ldl] = __ldcs(saved + e);
    }
  }
}

}  // namespace
}  // namespace covflow::linalg::detail

// Internal to cholupdate_cuda.cu: the product form of a rank-k UPDATE for n > 256.
//
// A + VVᴴ = L (I + WWᴴ) Lᴴ with W = L⁻¹V (n×k), so L̃ = L·M where M is the lower Cholesky factor
// of I + WWᴴ. That factor has a closed form — P. E. Gill, G. H. Golub, W. Murray & M. A. Saunders,
// "Methods for modifying matrix factorizations" (Math. Comp. 28, 1974), method C1, generalised here
// from a rank-one to a rank-k modification (it is not in Walder 2010, whose rotations the rest of
// cholupdate follows). With w_i the i-th row of W (1×k):
//   G_j = I_k + Σ_{i<j} w_iᴴ w_i,   y_j = G_j⁻¹ w_jᴴ,   m_j = sqrt(1 + w_j y_j),   z_j = y_j / m_j,
//   M(j, j) = m_j,   M(i, j) = w_i z_j  (i > j),
// and since M is diagonal plus semiseparable,
//   L̃(r, j) = m_j L(r, j) + S_j(r) z_j,   S_j(r) = Σ_{i=j+1}^{r} L(r, i) w_i   (a suffix sum along row r).
// Only W = L⁻¹V is a chain from column to column; everything else is parallel over columns or rows,
// which is why this beats the rotations' n·k sequential steps (§3/§4 of the paper's pipeline) for
// large n. It is used only where it is accurate: updates (no hyperbolic rotations to keep stable:
// downdates stay on §2's algorithm), k ≤ 16 and n ≥ 16k (with k ≈ n the closed form loses ~1e6 n·ε
// on graded factors), and — checked on the device, per matrix — only when W, every m_j and z_j are
// finite, the diagonal is finite and positive, and τ = 1 + ‖W‖²_F ≤ 0.01/ε (a bound on κ(G_j)). A
// matrix that fails the guard is not written; the rotation pipeline then runs on it unchanged and
// reports what it finds (NaN, a bad diagonal).
//
// The factor is cut into 64×64 tiles: row block R, column block J ≤ R. Three kernels, one matrix
// per grid.y:
//   trsm_kernel     W = L⁻¹V by row blocks of 64 rows, 256 threads, a per-matrix ticket and progress
//                   counter as in pipeline_kernel (no deadlock without a cooperative launch: a block
//                   only waits on row blocks taken before its own). Off the critical path (before the
//                   block waits on anything) it inverts its diagonal block, X = L_JJ⁻¹, and forms
//                   Y = X·L_{J,J−1}; as the W_I (I < J−1) are published it accumulates
//                   R = V_J − Σ L_JI W_I (each thread a quarter of a tile's columns for all k, the
//                   next tile's L already loading into registers while it waits), then T = X·R; the
//                   chain step itself is only W_J = T − Y·W_{J−1}, a 64×64 by 64×k product, then the
//                   publish. Afterwards, off the chain: the tiles' products L_RJ W_J summed per
//                   segment of column blocks (the apply kernel's carries, below), and
//                   the prefix I + Σ_{I≤J} W_Iᴴ W_I for column_kernel (a short chain of its own,
//                   block J after block J−1), and ‖W‖²_F.
//                   Shared: X (later W_J), Y, one tile buffer (L_JJ, L_{J,J−1}, then the quarters'
//                   sums), R, one published W_I and its rows' ‖w_i‖₁: 3·64² + 2·64·k elements — 225 KB for complex
//                   double with k = 16, so one block per SM, ≤ 79 blocks per matrix at n = 5000.
//   column_kernel   per column j, one warp: G_j = prefix_J + Σ_{i∈J, i<j} w_iᴴ w_i, its Cholesky
//                   factor, y_j, m_j, z_j. Columns are independent given the prefix: 8 per block.
//   apply_kernel    L̃ = L·M in place, lower triangle only. One block per (row block R, segment s of
//                   segment_tiles column blocks): it starts from the carry Σ_{i right of s} L(r, i) w_i
//                   (the trsm's segment sums to the right), and sweeps its tiles right to left; each
//                   tile (with its rows of W, z and m) comes into shared memory by cp.async while the
//                   one before is computed, thread (row, quarter of k) carries its part of S_j(r) from
//                   column to column, the quarters' S_j(r)·z_j are summed by shuffles, and the new tile
//                   is written back whole (coalesced). Segments are handed out longest first
//                   (the tensor-core apply instead takes them in row-block order, under the solve).
// The tile products are computed twice (the trsm's accumulation and the apply's sweep), which keeps
// the workspace at O(n²k/64²) per matrix for the segment sums: 6.5 MB for n = 5000, k = 16, double
// (segments of 8 tiles on the tensor-core path, whose workspace also holds M_J and the backup of
// the factor's tiles, cholupdate_product_tc.cuh).
#pragma once

#include <cuda/atomic>

#include <cstdint>
#include <type_traits>

#include "../common/async_copy.cuh"
#include "../common/device_scalar.cuh"

namespace covflow::linalg::detail {
namespace {

constexpr int kTrsmBlock = 64;     // rows per row block, and the side of a tile
constexpr int kTrsmThreads = 256;  // trsm: 64 rows × 4 groups
constexpr int kTileQuarter = kTrsmBlock / 4;  // trsm accumulation: columns of a tile per thread
constexpr int kColumnWarps = 8;    // column_kernel: columns per block, one warp each
// Apply: column blocks one block sweeps (ProductBuffers::segment_tiles). The tensor-core path's
// apply runs under the solve (cholupdate_product_tc.cuh), and what is left when the chain ends is
// the last row blocks' segments, each a sequence of tiles on one SM, so shorter segments finish
// sooner; 8 tiles is the fastest of the lengths compared in docs/performance-history.md. The other paths
// keep 16, which the workspace bound of the tests assumes.
constexpr int kSegmentTiles = 16;
constexpr int kSegmentTilesTc = 8;

// The tensor-core path's timeline (ProductStatus::clock): the first solve block's start (kept
// complemented), the last W published, the last solve block's end, the first apply block's start and
// its first tile (both complemented), the last apply block's end, the finish's start.
enum Clock : int { kSolveStart, kLastW, kSolveEnd, kApplyStart, kApplyFirstTile, kApplyEnd, kFinish, kClockCount };

__device__ inline unsigned long long clock_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Per matrix, zeroed before every call.
struct ProductStatus {
  int ticket;         // next trsm row block to hand out
  int progress;       // trsm row blocks whose W is published
  int gram_progress;  // trsm row blocks whose gram prefix is published
  int reject;         // the guard failed: a non-finite W, m or z, or a diagonal that is not finite and > 0
  int done;           // apply_kernel or finish_tc_kernel committed L̃ (and wrote info = 0): the rotation pipeline skips it
  double norm2;       // ‖W‖²_F, summed over row blocks
  unsigned long long rho_bits;  // ρ = max_r s(r)/‖L̃(r, :)‖ (a non-negative double's bits: they order as it does)
  int column_ticket;  // tensor-core path: next item of the column workers (cholupdate_product_tc.cuh)
  int solve_exits;    // tensor-core path: trsm_tc_kernel blocks that are done (their guard writes included)
  // Tensor-core path: when its phases began and ended (%globaltimer, ns), for the benchmark's
  // breakdown (cholupdate_cuda_product_timeline). An earliest time is kept as its complement's maximum.
  unsigned long long clock[kClockCount];
};

// The guard on ρ. Both sources of error in L̃(r, :) — the triangular solve's backward error in W
// (it updates by V − δL·W instead of V, |δL| ≤ nε|L|) and the cancellation in S_j(r)·z_j — are
// bounded by ε times s(r) = Σ_i |L(r, i)|·‖w_i‖₁, against a row of size ‖L̃(r, :)‖ =
// (A(r, r) + ‖v_r‖²)^½. In a numpy model of this path the reconstruction error is about 0.4·ρ·ε:
// ρ ≈ 0.1–0.6 on random factors and 4–10 on graded ones (κ up to 1e12), but 1e6 with one diagonal
// entry of 1e-9 above normal-sized entries — 2000 n·ε and worse, though τ = 1 + ‖W‖²_F is only
// 4e14 there, near the τ guard. The product form commits only where ρ ≤ n, i.e. an error ≲ 0.4 n·ε.
constexpr double kRhoLimitPerN = 1.0;

constexpr bool product_rank(int K) { return K == 1 || K == 4 || K == 16; }

constexpr std::size_t align256_(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Per-matrix buffers of the product path (rows of W and z are K apart, K the template rank; the
// entries p ≥ k are zero).
template <class D>
struct ProductBuffers {
  using R = sreal_t<D>;
  D* w;        // n × K, row-major: w_i contiguous
  D* z;        // n × K, row-major
  R* m;        // n
  D* prefix;   // (blocks + 1) × K × K: I + Σ_{I<J} W_Iᴴ W_I, row-major
  D* partial;  // blocks × segments × K × 64: Σ_{J∈s} L_RJ W_J, as [R][s][p][row]
  D* mix;      // tensor-core path only (real double, K = 16): per column block J the 64×64
               // M_J = diag(m) + strict lower part of W_J Z_Jᵀ, column-major (cholupdate_product_tc.cuh)
  D* backup;   // tensor-core path only: every lower tile (R, J ≤ R) of L as apply_tc_kernel found it,
               // 64×64 column-major, tile R(R+1)/2 + J — the apply writes L̃ while the solve still
               // runs, before the guard is known, and finish_tc_kernel puts a refused matrix back

  __host__ __device__ static int blocks(int n) { return (n + kTrsmBlock - 1) / kTrsmBlock; }
  __host__ __device__ static constexpr int segment_tiles(int K) { return has_mix(K) ? kSegmentTilesTc : kSegmentTiles; }
  __host__ __device__ static int segments(int n, int K) { return (blocks(n) + segment_tiles(K) - 1) / segment_tiles(K); }
  __host__ __device__ static std::size_t bytes(int n, int K) {
    const std::size_t b = std::size_t(blocks(n)), s = std::size_t(segments(n, K));
    return 2 * align256_(sizeof(D) * std::size_t(n) * K) + align256_(sizeof(R) * std::size_t(n)) +
           align256_(sizeof(D) * (b + 1) * K * K) + align256_(sizeof(D) * b * s * K * kTrsmBlock) +
           (has_mix(K) ? align256_(sizeof(D) * b * kTrsmBlock * kTrsmBlock) + align256_(sizeof(D) * tiles(n) * kTrsmBlock * kTrsmBlock) : 0);
  }
  __host__ __device__ static std::size_t tiles(int n) { return std::size_t(blocks(n)) * (blocks(n) + 1) / 2; }
  __host__ __device__ static constexpr bool has_mix(int K) { return std::is_same_v<D, double> && K == 16; }
  __host__ __device__ static ProductBuffers carve(unsigned char* base, int n, int K) {
    const std::size_t b = std::size_t(blocks(n)), s = std::size_t(segments(n, K));
    ProductBuffers out;
    out.w = reinterpret_cast<D*>(base);
    base += align256_(sizeof(D) * std::size_t(n) * K);
    out.z = reinterpret_cast<D*>(base);
    base += align256_(sizeof(D) * std::size_t(n) * K);
    out.m = reinterpret_cast<R*>(base);
    base += align256_(sizeof(R) * std::size_t(n));
    out.prefix = reinterpret_cast<D*>(base);
    base += align256_(sizeof(D) * (b + 1) * K * K);
    out.partial = reinterpret_cast<D*>(base);
    base += align256_(sizeof(D) * b * s * K * kTrsmBlock);
    out.mix = has_mix(K) ? reinterpret_cast<D*>(base) : nullptr;
    out.backup = nullptr;
    if (has_mix(K)) {
      base += align256_(sizeof(D) * b * kTrsmBlock * kTrsmBlock);
      out.backup = reinterpret_cast<D*>(base);
    }
    return out;
  }
};

template <class D>
struct ProductWork {
  ProductStatus* status;  // count entries
  unsigned char* buffers; // count × per_matrix bytes (shared with the pipeline's parameters: the
  std::size_t per_matrix; // pipeline only runs, after these kernels, on matrices they did not commit)
  int* ready;             // tensor-core path: count × 2·blocks(n) counters, zeroed before every call —
                          // [0, blocks) row block R's segment sums written and its rows of L read for
                          // the last time (1), [blocks, 2·blocks) M_J formed (4 when complete)
};

// ---- small device helpers ----------------------------------------------------------------------

template <class R> __device__ inline R shfl(R v, int lane) { return __shfl_sync(0xffffffffu, v, lane); }
template <class R> __device__ inline Cx<R> shfl(Cx<R> v, int lane) { return {shfl(v.x, lane), shfl(v.y, lane)}; }
template <class R> __device__ inline R shfl_xor(R v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
template <class R> __device__ inline Cx<R> shfl_xor(Cx<R> v, int mask) { return {shfl_xor(v.x, mask), shfl_xor(v.y, mask)}; }
template <class R> __device__ inline R shfl_down(R v, int delta) { return __shfl_down_sync(0xffffffffu, v, delta); }
template <class R> __device__ inline Cx<R> shfl_down(Cx<R> v, int delta) { return {shfl_down(v.x, delta), shfl_down(v.y, delta)}; }
// |x| for reals, |re| + |im| for complex numbers (within √2 of the modulus, no square root).
template <class R> __device__ inline R abs1(R v) { return fabs(v); }
template <class R> __device__ inline R abs1(Cx<R> v) { return fabs(v.x) + fabs(v.y); }

// out = row[0..K) by 16-byte loads where the row allows it (rows are K·sizeof(D) apart from a
// 256-byte aligned base, in global or shared memory). No memcpy: it would put `out` in local memory.
template <class D, int K>
__device__ inline void load_vector(const D* row, D (&out)[K]) {
  if constexpr (std::is_same_v<D, Cx<double>>) {
#pragma unroll
    for (int p = 0; p < K; ++p) {
      const double2 v = reinterpret_cast<const double2*>(row)[p];
      out[p] = {v.x, v.y};
    }
  } else if constexpr (std::is_same_v<D, double> && K % 2 == 0) {
#pragma unroll
    for (int p = 0; p < K; p += 2) {
      const double2 v = reinterpret_cast<const double2*>(row)[p / 2];
      out[p] = v.x;
      out[p + 1] = v.y;
    }
  } else if constexpr (std::is_same_v<D, Cx<float>> && K % 2 == 0) {
#pragma unroll
    for (int p = 0; p < K; p += 2) {
      const float4 v = reinterpret_cast<const float4*>(row)[p / 2];
      out[p] = {v.x, v.y};
      out[p + 1] = {v.z, v.w};
    }
  } else if constexpr (std::is_same_v<D, float> && K % 4 == 0) {
#pragma unroll
    for (int p = 0; p < K; p += 4) {
      const float4 v = reinterpret_cast<const float4*>(row)[p / 4];
      out[p] = v.x;
      out[p + 1] = v.y;
      out[p + 2] = v.z;
      out[p + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int p = 0; p < K; ++p) out[p] = row[p];
  }
}

// An element of the lower triangle as the algorithm reads it: the diagonal as its real part.
template <class D>
__device__ inline D lower_element(const D* L, long long ldl, int r, int c) {
  const D v = L[r + c * ldl];
  return r == c ? from_real<D>(real_part(v)) : v;
}

// The per-matrix progress counters (here and in cholupdate_cuda.cu's rotation pipeline): one thread
// spins with acquire loads; one thread publishes with a release store.
//
// A wait is bounded. The publisher is a block of the same grid (or of the kernel before it) that
// started before the waiter, so in a healthy run a wait lasts microseconds to milliseconds. A wait
// still unanswered after kSpinWaitBoundNs of the GPU's global timer means the publisher will never
// come (a fault in it, memory overwritten by someone else): the waiter traps, which ends the whole
// grid with cudaErrorLaunchFailure — a sticky error that the next check of the stream reports and
// that the daemon answers by stopping with its device-error exit code — instead of holding the GPU
// forever. The timer is read only every 1024 loads (the first reading starts the clock), so a wait
// shorter than that costs what it did without the bound.
inline constexpr unsigned long long kSpinWaitBoundNs = 2'000'000'000ull;  // 2 s

__device__ inline void wait_at_least(int* counter, int target, unsigned long long bound_ns = kSpinWaitBoundNs) {
  ::cuda::atomic_ref<int, ::cuda::thread_scope_device> ref(*counter);
  unsigned long long start = 0;
  for (unsigned spins = 1; ref.load(::cuda::memory_order_acquire) < target; ++spins) {
    if ((spins & 1023u) != 0) continue;
    const unsigned long long now = clock_ns();
    if (start == 0) start = now;
    else if (now - start > bound_ns) __trap();
  }
}

// Programmatic dependent launch (sm_90). A kernel lets the kernel launched after it with the
// programmatic-serialization attribute start once every one of its blocks has begun: the rotation
// pipeline's launches overlap the apply's last blocks (and the finish's), and the tensor-core apply
// runs under the solve. A dependent that calls wait_for_predecessor before reading anything sees the
// whole predecessor finished and its writes visible; the tensor-core apply instead waits on the
// solve's ready counts. Both are no-ops without the attribute.
__device__ inline void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ inline void wait_for_predecessor() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ inline void release_store(int* counter, int value) {
  ::cuda::atomic_ref<int, ::cuda::thread_scope_device> ref(*counter);
  ref.store(value, ::cuda::memory_order_release);
}
__device__ inline void release_add(int* counter, int value) {
  ::cuda::atomic_ref<int, ::cuda::thread_scope_device> ref(*counter);
  ref.fetch_add(value, ::cuda::memory_order_release);
}

// ---- W = L⁻¹V ------------------------------------------------------------------------------------

template <int K>
struct TrsmShape {
  static constexpr int p_groups = K >= 4 ? 4 : 1;      // groups splitting the k columns of W
  static constexpr int l_groups = 4 / p_groups;        // groups splitting a tile's 64 columns
  static constexpr int per_thread = K / p_groups;      // entries of W per thread
};

template <class D, int K>
constexpr std::size_t trsm_shared_bytes() {
  return sizeof(D) * (3 * kTrsmBlock * kTrsmBlock + 2 * kTrsmBlock * K) + 2 * sizeof(sreal_t<D>) * kTrsmBlock;
}

template <class D, int K>
__global__ void __launch_bounds__(kTrsmThreads) trsm_kernel(const D* l_all, long long ldl, long long stride_l,
                                                            const D* v_all, long long ldv, long long stride_v, int n,
                                                            int k, ProductWork<D> work, long long first_matrix) {
  using R = sreal_t<D>;
  using Shape = TrsmShape<K>;
  constexpr int B = kTrsmBlock;
  constexpr int PPT = Shape::per_thread;
  constexpr int Q = kTileQuarter;
  static_assert(4 * B * K <= B * B, "the quarters' sums share the tile buffer");
  extern __shared__ __align__(16) unsigned char smem[];
  D* X = reinterpret_cast<D*>(smem);  // L_JJ⁻¹, column-major; after step 5 ...
  D* w_own = X;                       // ... this block's W_J [row][K]
  D* Y = X + B * B;                   // X·L_{J,J−1}, column-major
  D* buffer = Y + B * B;              // the L tile (row-major L_JJ, then column-major L_{J,J−1}) ...
  D* parts = buffer;                  // ... then the quarters' sums [quarter][row][K]
  D* rhs = buffer + B * B;            // R = V_J − Σ L_JI W_I [row][K]
  D* w_tile = rhs + B * K;            // a published W_I [row][K]
  R* reciprocal = reinterpret_cast<R*>(w_tile + B * K);  // 1/L(i, i)
  R* w_norms = reciprocal + B;                           // ‖w_i‖₁ of the rows being accumulated
  __shared__ int taken;

  const long long m = first_matrix + blockIdx.y;
  ProductStatus& status = work.status[m];
  const ProductBuffers<D> buf = ProductBuffers<D>::carve(work.buffers + m * work.per_matrix, n, K);
  const D* L = l_all + m * stride_l;
  const D* V = v_all + m * stride_v;
  const int t = threadIdx.x;
  const D zero = from_real<D>(R(0));

  if (t == 0) taken = atomicAdd(&status.ticket, 1);
  __syncthreads();
  const int J = taken;
  const int r0 = J * B;
  const int rows = n - r0 < B ? n - r0 : B;
  const int segments = ProductBuffers<D>::segments(n, K);
  constexpr int S = ProductBuffers<D>::segment_tiles(K);
  bool bad = false;

  // 1. L_JJ, row-major, padded with the identity; the diagonal checked as the rotations would.
  for (int e = t; e < B * B; e += kTrsmThreads) {
    const int r = e % B, c = e / B;  // consecutive threads, consecutive rows: coalesced
    D value = from_real<D>(R(r == c ? 1 : 0));
    if (r < rows && c < rows && c <= r) value = lower_element(L, ldl, r0 + r, r0 + c);
    buffer[r * B + c] = value;
    X[e] = zero;
  }
  if (t < rows) {
    const D diagonal = L[(r0 + t) + (r0 + t) * ldl];
    const R d = real_part(diagonal);
    if (!(is_finite(diagonal) && d > R(0))) bad = true;
    reciprocal[t] = bad ? R(1) : R(1) / d;
  } else if (t < B) {
    reciprocal[t] = R(1);
  }
  __syncthreads();

  // 2. X = L_JJ⁻¹ by rows: X(i, j) = −(Σ_{j≤l<i} L(i, l) X(l, j)) / L(i, i); four threads per column,
  //    in one warp, so the columns advance independently (no block barrier per row).
  {
    const int j = t >> 2, q = t & 3;
    for (int i = 0; i < B; ++i) {
      D partial = zero;
      if (j < i)
        for (int l = j + q; l < i; l += 4) partial = fma_(partial, buffer[i * B + l], X[j * B + l]);
      partial += shfl_xor(partial, 1);
      partial += shfl_xor(partial, 2);
      if (q == 0) {
        if (j < i) X[j * B + i] = partial * (-reciprocal[i]);
        else if (j == i) X[j * B + i] = from_real<D>(reciprocal[i]);
      }
      __syncwarp();  // column j is read and written by its own four threads only (one warp)
    }
  }
  __syncthreads();

  // 3. Y = X·L_{J,J−1} (X lower: the upper zeros are summed too, uniformly).
  if (J > 0) {
    for (int e = t; e < B * B; e += kTrsmThreads) {
      const int r = e % B, c = e / B;
      buffer[c * B + r] = r < rows ? L[(r0 + r) + (r0 - B + c) * ldl] : zero;
    }
    __syncthreads();
    const int r = t % B, group = t / B;
    D acc[B / 4];
#pragma unroll
    for (int e = 0; e < B / 4; ++e) acc[e] = zero;
    for (int l = 0; l < B; ++l) {
      const D x = X[l * B + r];
#pragma unroll
      for (int e = 0; e < B / 4; ++e) acc[e] = fma_(acc[e], x, buffer[(group + 4 * e) * B + l]);
    }
#pragma unroll
    for (int e = 0; e < B / 4; ++e) Y[(group + 4 * e) * B + r] = acc[e];
  }
  for (int e = t; e < B * K; e += kTrsmThreads) {
    const int i = e / K, p = e % K;
    rhs[e] = (i < rows && p < k) ? V[(r0 + i) + p * ldv] : zero;
  }
  __syncthreads();  // the buffer is free again

  // 4. R = V_J − Σ_{I<J−1} L_JI W_I, tile by tile as the W_I are published. Thread (ra, quarter)
  //    sums a quarter of the tile's columns for every p; close() folds the quarters into R and into
  //    this row block's sum for segment `open` of the apply (written at the segment's first close,
  //    added to after).
  const int ra = t % B, quarter = t / B;
  const bool row_a = ra < rows;
  D acc[K];
#pragma unroll
  for (int p = 0; p < K; ++p) acc[p] = zero;
  int open = 0;
  bool fresh = true;
  const auto close = [&]() {
#pragma unroll
    for (int p = 0; p < K; ++p) {
      parts[(quarter * B + ra) * K + p] = acc[p];
      acc[p] = zero;
    }
    __syncthreads();
    for (int e = t; e < B * K; e += kTrsmThreads) {
      const D sum = (parts[e] + parts[B * K + e]) + (parts[2 * B * K + e] + parts[3 * B * K + e]);
      rhs[e] -= sum;
      D& slot = buf.partial[((std::size_t(J) * segments + open) * K + e % K) * B + e / K];
      slot = fresh ? sum : slot + sum;
    }
    fresh = false;
    __syncthreads();
  };
  const auto reopen = [&](int I) {  // tile I is next: close the open segment if I lies beyond it
    if (I / S != open) {
      close();
      open = I / S;
      fresh = true;
    }
  };
  D lq[Q];  // this thread's quarter of the next tile of L
  const auto load_quarter = [&](int I) {
    const D* src = L + (r0 + ra) + (std::size_t(I) * B + quarter * Q) * ldl;
#pragma unroll
    for (int u = 0; u < Q; ++u) lq[u] = row_a ? src[u * ldl] : zero;
  };
  R s_row = R(0), l_row = R(0);  // this thread's parts of s(r) and of ‖L(r, :)‖² (the ρ guard)
  // ‖w_i‖₁ of a 64-row block of W in shared memory, once per tile (not once per thread and row).
  // Callers put a barrier between the rows' stores and this, and between this and its readers.
  const auto norms_of = [&](const D* w_rows) {
    if (t < B) {
      R sum = R(0);
#pragma unroll
      for (int p = 0; p < K; ++p) sum += abs1(w_rows[t * K + p]);
      w_norms[t] = sum;
    }
  };
  const auto accumulate = [&](const D (&l)[Q], const D* w_rows) {
#pragma unroll
    for (int u = 0; u < Q; ++u) {
      D w[K];
      load_vector<D, K>(w_rows + (quarter * Q + u) * K, w);
#pragma unroll
      for (int p = 0; p < K; ++p) acc[p] = fma_(acc[p], l[u], w[p]);
      s_row = fma(abs1(l[u]), w_norms[quarter * Q + u], s_row);
      l_row += abs2(l[u]);
    }
  };
  if (J >= 2) load_quarter(0);
  for (int I = 0; I + 1 < J; ++I) {
    D current[Q];
#pragma unroll
    for (int u = 0; u < Q; ++u) current[u] = lq[u];
    if (I + 2 < J) load_quarter(I + 1);  // in flight while this block waits for W_I
    reopen(I);
    if (t == 0) wait_at_least(&status.progress, I + 1);
    __syncthreads();
    for (int e = t; e < B * K; e += kTrsmThreads) w_tile[e] = buf.w[std::size_t(I) * B * K + e];
    __syncthreads();
    norms_of(w_tile);
    __syncthreads();
    accumulate(current, w_tile);
  }
  close();

  // 5. T = X·R, then the chain step W_J = T − Y·W_{J−1}.
  const int r = t % B, group = t / B;
  const int pg = group % Shape::p_groups, lg = group / Shape::p_groups;
  const int p0 = pg * PPT;
  const bool row = r < rows;
  D out[PPT];
#pragma unroll
  for (int e = 0; e < PPT; ++e) out[e] = zero;
  if (lg == 0) {
    for (int l = 0; l <= r; ++l) {
      const D x = X[l * B + r];
#pragma unroll
      for (int e = 0; e < PPT; ++e) out[e] = fma_(out[e], x, rhs[l * K + p0 + e]);
    }
  }
  if (J > 0) {
    if (t == 0) wait_at_least(&status.progress, J);
    __syncthreads();
    for (int e = t; e < B * K; e += kTrsmThreads) w_tile[e] = buf.w[std::size_t(J - 1) * B * K + e];
    __syncthreads();
    if (lg == 0) {
      // The chain's own arithmetic: four independent sums over l, so no FMA waits on the last.
      D chains[4][PPT];
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int e = 0; e < PPT; ++e) chains[u][e] = zero;
#pragma unroll 4
      for (int l = 0; l < B; l += 4)
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const D neg = -Y[(l + u) * B + r];
#pragma unroll
          for (int e = 0; e < PPT; ++e) chains[u][e] = fma_(chains[u][e], neg, w_tile[(l + u) * K + p0 + e]);
        }
#pragma unroll
      for (int e = 0; e < PPT; ++e) out[e] += (chains[0][e] + chains[1][e]) + (chains[2][e] + chains[3][e]);
    }
  }
  __syncthreads();  // every read of X is done: W_J goes where X was
  if (lg == 0) {
#pragma unroll
    for (int e = 0; e < PPT; ++e) {
      if (!is_finite(out[e])) bad = true;
      const D value = row ? out[e] : zero;
      w_own[r * K + p0 + e] = value;
      if (row) buf.w[std::size_t(r0 + r) * K + p0 + e] = value;
    }
  }
  // Every thread's W stores, then the counter: the barrier orders them before thread 0, whose
  // release store (a gpu-scope fence, then the store) makes them visible with it.
  __syncthreads();
  if (t == 0) release_store(&status.progress, J + 1);

  // 6. P_J = W_Jᴴ W_J into ‖W‖²_F and into the prefix I + Σ_{I≤J} P_I, after block J−1's.
  D gram = zero;
  if (t < K * K) {
    const int p = t / K, q = t % K;
    for (int i = 0; i < B; ++i) gram = fma_conj(gram, w_own[i * K + p], w_own[i * K + q]);
    if (p == q) atomicAdd(&status.norm2, double(real_part(gram)));
  }
  if (t == 0 && J > 0) wait_at_least(&status.gram_progress, J);
  __syncthreads();
  if (t < K * K) {
    const D before = J == 0 ? from_real<D>(R(t / K == t % K ? 1 : 0)) : buf.prefix[std::size_t(J) * K * K + t];
    if (J == 0) buf.prefix[t] = before;
    buf.prefix[std::size_t(J + 1) * K * K + t] = before + gram;
  }
  __syncthreads();
  if (t == 0) release_store(&status.gram_progress, J + 1);

  // 7. The apply's segment sums, completed with tiles J−1 (W_{J−1} is still in w_tile) and J
  //    (the diagonal tile: columns c ≤ row, the diagonal as its real part).
  if (J >= 1) {
    reopen(J - 1);
    load_quarter(J - 1);
    __syncthreads();
    norms_of(w_tile);
    __syncthreads();
    accumulate(lq, w_tile);
  }
  reopen(J);
#pragma unroll
  for (int u = 0; u < Q; ++u) {
    const int c = quarter * Q + u;
    lq[u] = row_a && c <= ra ? lower_element(L, ldl, r0 + ra, r0 + c) : zero;
  }
  __syncthreads();
  norms_of(w_own);
  __syncthreads();
  accumulate(lq, w_own);
  close();

  // 8. ρ over this block's rows: s(r) / (‖L(r, :)‖² + ‖v_r‖²)^½, the quarters summed in the buffer.
  R* sums = reinterpret_cast<R*>(parts);
  sums[quarter * B + ra] = s_row;
  sums[4 * B + quarter * B + ra] = l_row;
  __syncthreads();
  if (t < rows) {
    R s_sum = R(0), size2 = R(0);
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      s_sum += sums[g * B + t];
      size2 += sums[4 * B + g * B + t];
    }
    for (int p = 0; p < k; ++p) size2 += abs2(V[(r0 + t) + p * ldv]);
    const double rho = double(s_sum) / sqrt(double(size2));  // NaN or Inf: refused below
    atomicMax(&status.rho_bits, static_cast<unsigned long long>(__double_as_longlong(rho != rho ? HUGE_VAL : rho)));
  }
  if (__syncthreads_or(bad) && t == 0) atomicOr(&status.reject, 1);
}

// ---- column parameters m_j, z_j ------------------------------------------------------------------

template <class D, int K>
constexpr std::size_t column_shared_bytes() {
  return sizeof(D) * (kTrsmBlock * K + kColumnWarps * K * K) + sizeof(sreal_t<D>) * kColumnWarps * K;
}

// Column j's m_j and z_j, by one warp: G_j = prefix + Σ_{i<c} w_iᴴ w_i (prefix = I + Σ_{I<J} W_Iᴴ W_I,
// w_i the rows of j's row block in `w_block`, c = j's place in it), its Cholesky factor in `chol`
// (K×K, this warp's), u = C⁻¹ w_jᴴ, m_j² = 1 + ‖u‖², y = C⁻ᴴ u, z_j = y/m_j. Returns true when
// something was not finite or G_j not positive definite (the guard then refuses the matrix).
template <class D, int K>
__device__ bool column_parameters(int j, int c, const D* prefix, const D* w_block, D* chol, sreal_t<D>* reciprocal,
                                  const ProductBuffers<D>& buf, int lane) {
  using R = sreal_t<D>;
  const D zero = from_real<D>(R(0));
  for (int e = lane; e < K * K; e += 32) {
    const int p = e / K, q = e % K;
    D sum = prefix[e];
    for (int i = 0; i < c; ++i) sum = fma_conj(sum, w_block[i * K + p], w_block[i * K + q]);
    chol[e] = sum;
  }
  __syncwarp();
  bool bad = false;
  // Cholesky of G_j (lower, right-looking), in place in `chol`.
#pragma unroll 1
  for (int p = 0; p < K; ++p) {
    const R d2 = real_part(chol[p * K + p]);
    const bool ok = d2 > R(0) && isfinite(d2);
    if (!ok) bad = true;
    const R d = ok ? sqrt(d2) : R(1);
    const R inv = R(1) / d;
    if (lane == 0) reciprocal[p] = inv;
    if (lane > p && lane < K) chol[lane * K + p] = chol[lane * K + p] * inv;
    __syncwarp();
    for (int e = lane; e < K * K; e += 32) {
      const int i = e / K, q = e % K;
      if (q > p && q <= i) chol[e] = chol[e] - chol[i * K + p] * conj_of(chol[q * K + p]);
    }
    __syncwarp();
  }
  // u = C⁻¹ w_jᴴ (lane i holds entry i), m_j² = 1 + ‖u‖², then y = C⁻ᴴ u, z = y / m_j.
  D b = lane < K ? conj_of(w_block[c * K + lane]) : zero;
#pragma unroll 1
  for (int p = 0; p < K; ++p) {
    const D u = shfl(b, p) * reciprocal[p];
    if (lane == p) b = u;
    else if (lane > p && lane < K) b = b - chol[lane * K + p] * u;
  }
  const R m2 = R(1) + warp_sum(lane < K ? abs2(b) : R(0));
#pragma unroll 1
  for (int p = K - 1; p >= 0; --p) {
    const D y = shfl(b, p) * reciprocal[p];
    if (lane == p) b = y;
    else if (lane < p) b = b - conj_of(chol[p * K + lane]) * y;
  }
  const R mj = sqrt(m2);
  const D zj = b * (R(1) / mj);
  if (!isfinite(mj) || (lane < K && !is_finite(zj))) bad = true;
  if (lane < K) buf.z[std::size_t(j) * K + lane] = zj;
  if (lane == 0) buf.m[j] = mj;
  __syncwarp();  // `chol` and `reciprocal` are reused for the warp's next column
  return __any_sync(0xffffffffu, bad);
}

template <class D, int K>
__global__ void __launch_bounds__(kColumnWarps * 32) column_kernel(int n, ProductWork<D> work, long long first_matrix) {
  using R = sreal_t<D>;
  constexpr int B = kTrsmBlock;
  extern __shared__ __align__(16) unsigned char smem[];
  D* w_block = reinterpret_cast<D*>(smem);  // rows r0 … of W [row][K]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  D* chol = w_block + B * K + warp * K * K;  // this warp's G_j, then its Cholesky factor in place
  R* reciprocal = reinterpret_cast<R*>(w_block + B * K + kColumnWarps * K * K) + warp * K;

  const long long m = first_matrix + blockIdx.y;
  ProductStatus& status = work.status[m];
  if (status.reject != 0) return;  // uniform: written by the previous kernel
  const ProductBuffers<D> buf = ProductBuffers<D>::carve(work.buffers + m * work.per_matrix, n, K);
  const int c0 = blockIdx.x * kColumnWarps;
  const int J = c0 / B;
  const int r0 = J * B;
  const int last = n < c0 + kColumnWarps ? n : c0 + kColumnWarps;  // rows r0 … last − 1 are read

  for (int e = threadIdx.x; e < (last - r0) * K; e += blockDim.x) w_block[e] = buf.w[std::size_t(r0) * K + e];
  __syncthreads();

  const int j = c0 + warp;
  if (j >= n) return;  // no barrier below
  const bool bad = column_parameters<D, K>(j, j - r0, buf.prefix + std::size_t(J) * K * K, w_block, chol, reciprocal,
                                           buf, lane);
  if (bad && lane == 0) atomicOr(&status.reject, 1);
}

// ---- L̃ = L·M --------------------------------------------------------------------------------------

// The guard, uniform over the matrix (apply_kernel: its inputs were written by the previous kernels;
// finish_tc_kernel: read after every solve block has ended): true when the product form commits,
// the first block then writing info = 0 and marking the matrix done for the rotation pipeline.
__device__ inline bool product_commits(ProductStatus& status, int n, double tau_limit, int* info, long long m) {
  if (status.reject != 0 || !(1.0 + status.norm2 <= tau_limit) ||
      !(__longlong_as_double(static_cast<long long>(status.rho_bits)) <= kRhoLimitPerN * n))
    return false;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    info[m] = 0;
    status.done = 1;
  }
  return true;
}

// The tiles of apply_kernel's block blockIdx.x: column blocks top … bottom of segment `segment` (S
// column blocks) of its row block, none when `empty` (past the last segment). Blocks are numbered
// longest first, so the hardware, starting blocks in that order as SMs free up, schedules the
// longest job first: all full segments (by segment, row blocks from the last), then the partial
// ones, S − 1 tiles down to 1. (The tensor-core apply runs under the solve and takes its segments
// in row-block order instead.)
struct ApplyTiles {
  int row_block, segment, top, bottom;
  bool empty;
};
__device__ inline ApplyTiles apply_tiles(int blocks, int S) {
  ApplyTiles a{0, 0, -1, 0, true};
  int k = static_cast<int>(blockIdx.x);
  for (int s = 0; S * s + S - 1 < blocks; ++s) {  // row blocks S·s + S − 1 … blocks − 1 fill segment s
    const int full = blocks - (S * s + S - 1);
    if (k < full) {
      a = ApplyTiles{blocks - 1 - k, s, S * s + S - 1, S * s, false};
      return a;
    }
    k -= full;
  }
  for (int length = S - 1; length >= 1; --length) {  // row blocks R ≡ length − 1 (mod S) end in one
    const int count = blocks >= length ? (blocks - length + S) / S : 0;
    if (k < count) {
      const int row_block = S * (count - 1 - k) + length - 1;
      a = ApplyTiles{row_block, row_block / S, row_block, S * (row_block / S), false};
      return a;
    }
    k -= count;
  }
  return a;  // past the last segment: the grid is blocks × segments, more than there are
}

// An apply block's job: the matrix's buffers and factor and the block's tiles. apply_job makes
// apply_kernel's (nothing to do, `run` false, when the guard refused the matrix or the block has no
// tiles); apply_tc_kernel makes its own, before the guard is known (see finish_tc_kernel).
template <class D, int K>
struct ApplyJob {
  bool run;
  ProductBuffers<D> buf;
  D* L;
  int segments;
  ApplyTiles tiles;
  // Entry p of the carry for row `row` of the row block at the block's right edge: the trsm's sums
  // of the segments to the right. kThroughL2: read past the L1 (__ldcg), for a kernel that runs
  // while the solve still writes other rows' sums (apply_tc_kernel; real types only).
  template <bool kThroughL2 = false>
  __device__ D carry_from_right(int p, int row) const {
    D sum{};
    for (int s = tiles.segment + 1; s <= tiles.row_block / ProductBuffers<D>::segment_tiles(K); ++s) {
      const D* at = buf.partial + ((std::size_t(tiles.row_block) * segments + s) * K + p) * kTrsmBlock + row;
      if constexpr (kThroughL2) sum += __ldcg(at);
      else sum += *at;
    }
    return sum;
  }
};
template <class D, int K>
__device__ inline ApplyJob<D, K> apply_job(D* l_all, long long stride_l, int n, const ProductWork<D>& work,
                                           long long first_matrix, double tau_limit, int* info) {
  allow_dependents();  // the rotation pipeline's launches (cholupdate_cuda.cu)
  ApplyJob<D, K> job{};
  const long long m = first_matrix + blockIdx.y;
  if (!product_commits(work.status[m], n, tau_limit, info, m)) return job;
  job.segments = ProductBuffers<D>::segments(n, K);
  job.tiles = apply_tiles(ProductBuffers<D>::blocks(n), ProductBuffers<D>::segment_tiles(K));
  if (job.tiles.empty) return job;
  job.run = true;
  job.buf = ProductBuffers<D>::carve(work.buffers + m * work.per_matrix, n, K);
  job.L = l_all + m * stride_l;
  return job;
}

// Four threads per row of a tile, splitting either the tile's 64 columns (each thread carries all
// k entries of S_j(r) through 16 columns, after a suffix exchange of the quarters' sums through
// shared memory; the quarters are in different warps, so a warp's 32 rows read and write 32
// consecutive elements of a column and one row of w and z by broadcast) or,
// where k entries do not fit in registers next to the rest (complex double, k = 16), the k entries
// (each thread carries k/4 of them through all 64 columns, two shuffles per column for S_j(r)·z_j).
// The column split has no shuffle in its per-column step and k independent multiply-adds.
template <class D, int K>
constexpr bool apply_column_split() {
  return sizeof(D) * K <= 128;
}
constexpr int kApplyThreads = 4 * kTrsmBlock;

template <class D, int K>
constexpr std::size_t apply_stage_bytes() {
  return sizeof(D) * (kTrsmBlock * kTrsmBlock + 2 * kTrsmBlock * K) + sizeof(sreal_t<D>) * kTrsmBlock;
}

constexpr int exchange_chunk(int K) { return K < 4 ? K : 4; }  // entries exchanged per round

template <class D, int K>
constexpr std::size_t apply_shared_bytes() {
  return 2 * apply_stage_bytes<D, K>() +
         (apply_column_split<D, K>() ? sizeof(D) * 4 * kTrsmBlock * exchange_chunk(K) : 0);
}

template <class D, int K>
__global__ void __launch_bounds__(kApplyThreads)
    apply_kernel(D* l_all, long long ldl, long long stride_l, int n, ProductWork<D> work, long long first_matrix,
                 double tau_limit, int* info) {
  using R = sreal_t<D>;
  constexpr int B = kTrsmBlock;
  constexpr bool kSplitColumns = apply_column_split<D, K>();
  constexpr int Quarters = 4;
  constexpr int PQ = kSplitColumns ? K : K / Quarters;  // entries of S_j(r) per thread
  constexpr int kThreads = kApplyThreads;
  constexpr int kQuarterColumns = B / Quarters;
  extern __shared__ __align__(16) unsigned char smem[];

  const ApplyJob<D, K> job = apply_job<D, K>(l_all, stride_l, n, work, first_matrix, tau_limit, info);
  if (!job.run) return;
  const ProductBuffers<D>& buf = job.buf;
  D* L = job.L;
  const int row_block = job.tiles.row_block, top = job.tiles.top, bottom = job.tiles.bottom;
  const int r0 = row_block * B;

  struct Stage {
    D* tile;  // column-major, 64 × 64
    D* w;     // [column][K]
    D* z;     // [column][K]
    R* m;
  };
  const auto stage = [&](int b) {
    unsigned char* base = smem + b * apply_stage_bytes<D, K>();
    Stage s;
    s.tile = reinterpret_cast<D*>(base);
    s.w = s.tile + B * B;
    s.z = s.w + B * K;
    s.m = reinterpret_cast<R*>(s.z + B * K);
    return s;
  };
  // Element (row, column) of tile J that the update reads and writes: inside the matrix and, on the
  // diagonal tile, on or below the diagonal.
  const auto inside = [&](int J, int rr, int c) {
    return r0 + rr < n && J * B + c < n && (J < row_block || c <= rr);
  };
  // 16-byte pieces of a tile's columns where the layout allows (each column's 64 rows start
  // 16-byte aligned); a piece reaching past row n or above the diagonal goes element by element.
  constexpr int kPer = 16 / sizeof(D) > 0 ? 16 / sizeof(D) : 1;
  const bool pieces = (ldl * static_cast<long long>(sizeof(D))) % 16 == 0 && reinterpret_cast<std::uintptr_t>(L) % 16 == 0;
  const auto whole = [&](int J, int rr, int c) {  // elements rr … rr + kPer − 1 of column c all inside
    return r0 + rr + kPer - 1 < n && J * B + c < n && (J < row_block || c <= rr);
  };
  const auto issue = [&](int J, int b) {
    const Stage s = stage(b);
    const int c0 = J * B;
    if (pieces) {
      for (int e = threadIdx.x * kPer; e < B * B; e += kThreads * kPer) {
        const int c = e / B, rr = e % B;
        const D* src = L + (r0 + rr) + std::size_t(c0 + c) * ldl;
        if (whole(J, rr, c)) {
          copy_async_16(s.tile + e, src);
        } else {
          for (int x = 0; x < kPer; ++x)
            if (inside(J, rr + x, c)) copy_async(s.tile + e + x, src + x);
        }
      }
    } else {
      for (int e = threadIdx.x; e < B * B; e += kThreads) {
        const int c = e / B, rr = e % B;
        if (inside(J, rr, c)) copy_async(s.tile + e, L + (r0 + rr) + std::size_t(c0 + c) * ldl);
      }
    }
    const int columns = n - c0 < B ? n - c0 : B;
    copy_range_async(s.w, buf.w + std::size_t(c0) * K, columns * K, threadIdx.x, kThreads);
    copy_range_async(s.z, buf.z + std::size_t(c0) * K, columns * K, threadIdx.x, kThreads);
    copy_range_async(s.m, buf.m + c0, columns, threadIdx.x, kThreads);
    commit_async();
  };

  // Thread (r, q): row r of the block; columns q·16 … (column split) or entries q·PQ … of S_j(r).
  // The carry (S at the right edge of the tile): the segments to the right to begin with.
  const int r = kSplitColumns ? threadIdx.x % B : threadIdx.x / Quarters;
  const int q = kSplitColumns ? threadIdx.x / B : threadIdx.x % Quarters;
  const int p_first = kSplitColumns ? 0 : q * PQ;
  D* exchange = reinterpret_cast<D*>(smem + 2 * apply_stage_bytes<D, K>());  // [quarter][row][chunk]
  const bool row_ok = r0 + r < n;
  const D zero = from_real<D>(R(0));
  D carry[PQ];
#pragma unroll
  for (int e = 0; e < PQ; ++e) carry[e] = job.carry_from_right(p_first + e, r);

  issue(top, 0);
  int b = 0;
  for (int J = top; J >= bottom; --J, b ^= 1) {
    if (J > bottom) {
      issue(J - 1, b ^ 1);
      wait_async<1>();
    } else {
      wait_async<0>();
    }
    __syncthreads();
    const Stage s = stage(b);
    const bool diagonal = J == row_block;
    const int c0 = J * B;
    const auto active = [&](int j) { return row_ok && c0 + j < n && (!diagonal || j <= r); };
    const auto element = [&](int j) {  // L(r, j) as the update reads it; zero where it does not
      D l = active(j) ? s.tile[j * B + r] : zero;
      if (diagonal && j == r) l = from_real<D>(real_part(l));
      return l;
    };
    if constexpr (kSplitColumns) {
      // Pass 1: this quarter's Σ L(r, i) w_i. Then the 4-lane suffix over the quarters: S starts
      // at the carry plus the quarters to the right; the carry moves past the whole tile.
      const int first = q * kQuarterColumns;
      D sum[K];
#pragma unroll
      for (int p = 0; p < K; ++p) sum[p] = zero;
#pragma unroll 4
      for (int u = 0; u < kQuarterColumns; ++u) {
        const int j = first + u;
        if (!active(j)) continue;
        const D l = element(j);
        D w[K];
        load_vector<D, K>(s.w + j * K, w);
#pragma unroll
        for (int p = 0; p < K; ++p) sum[p] = fma_(sum[p], l, w[p]);
      }
      constexpr int C = exchange_chunk(K);
#pragma unroll
      for (int p0 = 0; p0 < K; p0 += C) {
#pragma unroll
        for (int e = 0; e < C; ++e) exchange[(q * B + r) * C + e] = sum[p0 + e];
        __syncthreads();
#pragma unroll
        for (int e = 0; e < C; ++e) {
          D right = zero, whole = exchange[r * C + e];
#pragma unroll
          for (int g = 1; g < Quarters; ++g) {
            const D x = exchange[(g * B + r) * C + e];
            whole += x;
            if (g > q) right += x;
          }
          sum[p0 + e] = carry[p0 + e] + right;
          carry[p0 + e] += whole;
        }
        __syncthreads();
      }
      // Pass 2: this quarter's columns right to left.
#pragma unroll 2
      for (int u = kQuarterColumns - 1; u >= 0; --u) {
        const int j = first + u;
        if (!active(j)) continue;
        const D l = element(j);
        D z[K], w[K];
        load_vector<D, K>(s.z + j * K, z);
        load_vector<D, K>(s.w + j * K, w);
        D part[2] = {zero, zero};  // S_j(r)·z_j in two independent sums
#pragma unroll
        for (int p = 0; p < K; ++p) part[p & 1] = fma_(part[p & 1], sum[p], z[p]);
        s.tile[j * B + r] = l * s.m[j] + (part[0] + part[1]);
#pragma unroll
        for (int p = 0; p < K; ++p) sum[p] = fma_(sum[p], l, w[p]);
      }
    } else {
#pragma unroll 2
      for (int j = B - 1; j >= 0; --j) {
        const bool on = active(j);
        const D l = element(j);
        D part = zero;  // S_j(r)·z_j: zero on the diagonal (nothing right of it in this row)
#pragma unroll
        for (int e = 0; e < PQ; ++e) part = fma_(part, carry[e], s.z[j * K + q * PQ + e]);
        part += shfl_xor(part, 1);
        part += shfl_xor(part, 2);
        if (on) {
          if (q == 0) s.tile[j * B + r] = l * s.m[j] + part;
#pragma unroll
          for (int e = 0; e < PQ; ++e) carry[e] = fma_(carry[e], l, s.w[j * K + q * PQ + e]);
        }
      }
    }
    __syncthreads();
    if (pieces) {
      for (int e = threadIdx.x * kPer; e < B * B; e += kThreads * kPer) {
        const int c = e / B, rr = e % B;
        D* dst = L + (r0 + rr) + std::size_t(c0 + c) * ldl;
        if (whole(J, rr, c)) {
          *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(s.tile + e);
        } else {
          for (int x = 0; x < kPer; ++x)
            if (inside(J, rr + x, c)) dst[x] = s.tile[e + x];
        }
      }
    } else {
      for (int e = threadIdx.x; e < B * B; e += kThreads) {
        const int c = e / B, rr = e % B;
        if (inside(J, rr, c)) L[(r0 + rr) + std::size_t(c0 + c) * ldl] = s.tile[e];
      }
    }
    __syncthreads();  // the stage is refilled two tiles on
  }
}

}  // namespace
}  // namespace covflow::linalg::detail

// Internal to cholupdate_cuda.cu: the product form of a rank-k UPDATE for n > 256 (issue 6).
//
// A + VVᴴ = L (I + WWᴴ) Lᴴ with W = L⁻¹V (n×k), so L̃ = L·M where M is the lower Cholesky factor
// of I + WWᴴ. That factor has a closed form — Gill, Golub, Murray & Saunders (1974), method C1,
// generalised from a rank-one to a rank-k modification; written here from the lead's derivation
// (notes/chol-structured.md), not from the paper of rank-k-cholesky-update-gpu.txt. With w_i the
// i-th row of W (1×k):
//   G_j = I_k + Σ_{i<j} w_iᴴ w_i,   y_j = G_j⁻¹ w_jᴴ,   m_j = sqrt(1 + w_j y_j),   z_j = y_j / m_j,
//   M(j, j) = m_j,   M(i, j) = w_i z_j  (i > j),
// and since M is diagonal plus semiseparable,
//   L̃(r, j) = m_j L(r, j) + S_j(r) z_j,   S_j(r) = Σ_{i=j+1}^{r} L(r, i) w_i   (a suffix sum along row r).
// Only W = L⁻¹V is a chain from column to column; everything else is parallel over columns or rows,
// which is why this beats the rotations' n·k sequential steps (§3/§4 of the paper's pipeline) for
// large n. It is used only where it is accurate: updates (no hyperbolic rotations to keep stable:
// downdates stay on §2's algorithm), k ≤ 16 and n ≥ 16k (with k ≈ n the closed form loses ~1e6 n·ε
// on graded factors, numpy study in notes/st.py), and — checked on the device, per matrix — only
// when W, every m_j and z_j are finite, the diagonal is finite and positive, and
// τ = 1 + ‖W‖²_F ≤ 0.01/ε (a bound on κ(G_j)). A matrix that fails the guard is not written; the
// rotation pipeline then runs on it as before and reports what it finds (NaN, a bad diagonal).
//
// Three kernels, one matrix per grid.y:
//   trsm_kernel     W = L⁻¹V, row blocks of kTrsmBlock = 64 rows, 256 threads, a per-matrix ticket
//                   and progress counter as in pipeline_kernel (no deadlock without a cooperative
//                   launch: a block only waits on row blocks taken before its own). Off the critical
//                   path (before the block waits on anything) it inverts its diagonal block,
//                   X = L_JJ⁻¹, and forms Y = X·L_{J,J−1}; as the W_I (I < J−1) are published it
//                   accumulates R = V_J − Σ L_JI W_I and then T = X·R; the chain step itself is only
//                   W_J = T − Y·W_{J−1}, a 64×64 by 64×k product, then the publish. It also stores
//                   P_J = W_Jᴴ W_J (k×k) and adds tr P_J to ‖W‖²_F.
//                   Threads: thread t owns row t mod 64 and a quarter of the k columns of W (k ≥ 4)
//                   or of the tile's columns (k = 1). Shared memory: X, Y and one 64×64 buffer (the
//                   L tile, later R's parts and two 64×k row blocks of W): 3·64²·sizeof(T) —
//                   192 KB for complex double, one block per SM, ≤ 79 blocks per matrix at n = 5000.
//   column_kernel   per column j: G_j = I + Σ_{I<J} P_I + Σ_{i∈J, i<j} w_iᴴ w_i, its Cholesky
//                   factor, y_j, m_j, z_j. One block per row block J, one warp per 8 columns (the
//                   warp's G is carried from column to column); the k×k factor in shared memory.
//   apply_kernel    L̃ = L·M in place, lower triangle only. One block per 32 rows (lane = row, so
//                   every read of L is a coalesced column segment), the row's columns split into
//                   kApplySegments segments, one warp each. Pass 1 reads each segment's partial
//                   Σ L(r, i) w_i; a suffix scan over the segments in shared memory gives each its
//                   carry; pass 2 sweeps its segment right to left, reading L(r, j) before writing
//                   L̃(r, j) (no element is read after another thread wrote it). Row blocks are
//                   handed out longest first. Shared: segments × 32 rows × k partials (64 KB).
//                   16 segments (512 threads, ≤ 128 registers); 8 for complex double, whose
//                   S, w and z rows would not fit in 128 registers.
// ptxas, sm_90: trsm_kernel 48–152 registers, column_kernel 32–39, apply_kernel 32–128 (double,
// k = 16: 20 bytes spilled); no other spills.
#pragma once

#include <cuda/atomic>

#include <cstring>

#include "../common/device_scalar.cuh"

namespace covflow::linalg::detail {
namespace {

constexpr int kTrsmBlock = 64;     // rows per trsm block (and columns per column_kernel block)
constexpr int kTrsmThreads = 256;  // 64 rows × 4 groups
constexpr int kColumnWarps = 8;    // column_kernel: 8 warps × 8 columns = one trsm block
constexpr int kApplyRows = 32;     // apply_kernel: rows per block (one per lane)

// Per matrix, zeroed before every call.
struct ProductStatus {
  int ticket;    // next trsm row block to hand out
  int progress;  // trsm row blocks whose W is published
  int reject;    // the guard failed: a non-finite W, m or z, or a diagonal that is not finite and > 0
  int done;      // apply_kernel committed L̃ (and wrote info = 0): the rotation pipeline skips it
  double norm2;  // ‖W‖²_F, summed over row blocks
};

constexpr bool product_rank(int K) { return K == 1 || K == 4 || K == 16; }

template <class D>
constexpr int apply_segments() {
  return sizeof(D) >= 16 ? 8 : 16;  // complex double: half the warps, so S, w and z stay in registers
}

constexpr std::size_t align256_(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Per-matrix buffers of the product path (rows of W and z are K apart, K the template rank; the
// entries p ≥ k are zero).
template <class D>
struct ProductBuffers {
  using R = sreal_t<D>;
  D* w;     // n × K, row-major: w_i contiguous
  D* z;     // n × K, row-major
  R* m;     // n
  D* gram;  // row blocks × K × K: P_J = W_Jᴴ W_J, row-major

  __host__ __device__ static std::size_t bytes(int n, int K) {
    const std::size_t blocks = std::size_t(n + kTrsmBlock - 1) / kTrsmBlock;
    return 2 * align256_(sizeof(D) * std::size_t(n) * K) + align256_(sizeof(R) * std::size_t(n)) +
           align256_(sizeof(D) * blocks * K * K);
  }
  __host__ __device__ static ProductBuffers carve(unsigned char* base, int n, int K) {
    ProductBuffers b;
    b.w = reinterpret_cast<D*>(base);
    base += align256_(sizeof(D) * std::size_t(n) * K);
    b.z = reinterpret_cast<D*>(base);
    base += align256_(sizeof(D) * std::size_t(n) * K);
    b.m = reinterpret_cast<R*>(base);
    base += align256_(sizeof(R) * std::size_t(n));
    b.gram = reinterpret_cast<D*>(base);
    return b;
  }
};

template <class D>
struct ProductWork {
  ProductStatus* status;  // count entries
  unsigned char* buffers; // count × per_matrix bytes (shared with the pipeline's parameters: the
  std::size_t per_matrix; // pipeline only runs, after these kernels, on matrices they did not commit)
};

// ---- small device helpers ----------------------------------------------------------------------

template <class R> __device__ inline R shfl(R v, int lane) { return __shfl_sync(0xffffffffu, v, lane); }
template <class R> __device__ inline Cx<R> shfl(Cx<R> v, int lane) { return {shfl(v.x, lane), shfl(v.y, lane)}; }
template <class R> __device__ inline R shfl_xor(R v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
template <class R> __device__ inline Cx<R> shfl_xor(Cx<R> v, int mask) { return {shfl_xor(v.x, mask), shfl_xor(v.y, mask)}; }

// out = row[0..K): one 16-byte load per 16 bytes where the row allows it (rows are K·sizeof(D)
// apart from a 256-byte aligned base).
template <class D, int K>
__device__ inline void load_vector(const D* row, D (&out)[K]) {
  constexpr std::size_t bytes = sizeof(D) * K;
  if constexpr (bytes % 16 == 0) {
    float4 raw[bytes / 16];
    const float4* src = reinterpret_cast<const float4*>(row);
#pragma unroll
    for (std::size_t e = 0; e < bytes / 16; ++e) raw[e] = src[e];
    memcpy(out, raw, bytes);
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

__device__ inline void wait_at_least(int* counter, int target) {
  cuda::atomic_ref<int, cuda::thread_scope_device> ref(*counter);
  while (ref.load(cuda::memory_order_acquire) < target) {
  }
}

// ---- W = L⁻¹V ------------------------------------------------------------------------------------

template <int K>
struct TrsmShape {
  static constexpr int p_groups = K >= 4 ? 4 : 1;      // groups splitting the k columns of W
  static constexpr int l_groups = 4 / p_groups;        // groups splitting a tile's 64 columns
  static constexpr int per_thread = K / p_groups;      // entries of W per thread
};

template <class D>
constexpr std::size_t trsm_shared_bytes() {
  return 3 * sizeof(D) * kTrsmBlock * kTrsmBlock + sizeof(sreal_t<D>) * kTrsmBlock;
}

template <class D, int K>
__global__ void __launch_bounds__(kTrsmThreads) trsm_kernel(const D* l_all, long long ldl, long long stride_l,
                                                            const D* v_all, long long ldv, long long stride_v, int n,
                                                            int k, ProductWork<D> work, long long first_matrix) {
  using R = sreal_t<D>;
  using Shape = TrsmShape<K>;
  constexpr int B = kTrsmBlock;
  constexpr int PPT = Shape::per_thread;
  extern __shared__ __align__(16) unsigned char smem[];
  D* X = reinterpret_cast<D*>(smem);  // L_JJ⁻¹, column-major
  D* Y = X + B * B;                   // X·L_{J,J−1}, column-major
  D* buffer = Y + B * B;              // the L tile (row-major L_JJ, then column-major L_{J,J−1}) ...
  D* parts = buffer;                  // ... then R's parts [l_group][row][K],
  D* w_tile = parts + Shape::l_groups * B * K;  // W_I or W_{J−1} [row][K],
  D* w_own = w_tile + B * K;                    // and this block's W_J [row][K]
  R* reciprocal = reinterpret_cast<R*>(buffer + B * B);  // 1/L(i, i)
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

  // 2. X = L_JJ⁻¹ by rows: X(i, j) = −(Σ_{j≤l<i} L(i, l) X(l, j)) / L(i, i); four threads per column.
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
      __syncthreads();
    }
  }

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
  __syncthreads();  // the buffer is free again

  // 4. R = V_J − Σ_{I<J−1} L_JI W_I, tile by tile as the W_I are published.
  const int r = t % B, group = t / B;
  const int pg = group % Shape::p_groups, lg = group / Shape::p_groups;
  const int p0 = pg * PPT;
  const bool row = r < rows;
  D acc[PPT];
#pragma unroll
  for (int e = 0; e < PPT; ++e) acc[e] = (lg == 0 && row && p0 + e < k) ? V[(r0 + r) + (p0 + e) * ldv] : zero;
  for (int I = 0; I + 1 < J; ++I) {
    if (t == 0) wait_at_least(&status.progress, I + 1);
    __syncthreads();
    for (int e = t; e < B * K; e += kTrsmThreads) w_tile[e] = buf.w[std::size_t(I) * B * K + e];
    __syncthreads();
    if (row) {
      const D* lrow = L + (r0 + r) + std::size_t(I) * B * ldl;
      for (int l = lg; l < B; l += Shape::l_groups) {
        const D neg = -lrow[l * ldl];
#pragma unroll
        for (int e = 0; e < PPT; ++e) acc[e] = fma_(acc[e], neg, w_tile[l * K + p0 + e]);
      }
    }
    __syncthreads();  // w_tile is overwritten next
  }
#pragma unroll
  for (int e = 0; e < PPT; ++e) parts[(lg * B + r) * K + p0 + e] = acc[e];
  __syncthreads();

  // 5. T = X·R (the l groups' parts summed), then the chain step W_J = T − Y·W_{J−1}.
  D out[PPT];
#pragma unroll
  for (int e = 0; e < PPT; ++e) out[e] = zero;
  if (lg == 0) {
    for (int l = 0; l <= r; ++l) {
      const D x = X[l * B + r];
#pragma unroll
      for (int e = 0; e < PPT; ++e) {
        D rl = parts[l * K + p0 + e];
#pragma unroll
        for (int g = 1; g < Shape::l_groups; ++g) rl += parts[(g * B + l) * K + p0 + e];
        out[e] = fma_(out[e], x, rl);
      }
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
  if (lg == 0) {
#pragma unroll
    for (int e = 0; e < PPT; ++e) {
      if (!is_finite(out[e])) bad = true;
      const D value = row ? out[e] : zero;
      w_own[r * K + p0 + e] = value;
      if (row) buf.w[std::size_t(r0 + r) * K + p0 + e] = value;
    }
  }
  __threadfence();  // every thread's W stores, before the counter moves
  __syncthreads();
  if (t == 0) {
    cuda::atomic_ref<int, cuda::thread_scope_device> progress(status.progress);
    progress.store(J + 1, cuda::memory_order_release);
  }

  // 6. P_J = W_Jᴴ W_J for column_kernel, tr P_J into ‖W‖²_F, and the guard's flags.
  for (int e = t; e < K * K; e += kTrsmThreads) {
    const int p = e / K, q = e % K;
    D sum = zero;
    for (int i = 0; i < B; ++i) sum = fma_conj(sum, w_own[i * K + p], w_own[i * K + q]);
    buf.gram[std::size_t(J) * K * K + e] = sum;
    if (p == q) atomicAdd(&status.norm2, double(real_part(sum)));
  }
  if (__syncthreads_or(bad) && t == 0) atomicOr(&status.reject, 1);
}

// ---- column parameters m_j, z_j ------------------------------------------------------------------

template <class D, int K>
constexpr std::size_t column_shared_bytes() {
  return sizeof(D) * (K * K + kTrsmBlock * K + kColumnWarps * 2 * K * K) + sizeof(sreal_t<D>) * kColumnWarps * K;
}

template <class D, int K>
__global__ void __launch_bounds__(kColumnWarps * 32) column_kernel(int n, ProductWork<D> work, long long first_matrix) {
  using R = sreal_t<D>;
  constexpr int B = kTrsmBlock;
  constexpr int kPerWarp = B / kColumnWarps;
  extern __shared__ __align__(16) unsigned char smem[];
  D* base = reinterpret_cast<D*>(smem);  // I + Σ_{I<J} P_I, row-major
  D* w_block = base + K * K;             // W_J [row][K]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  D* gram = w_block + B * K + warp * 2 * K * K;  // this warp's G_j
  D* chol = gram + K * K;                        // and its Cholesky factor
  R* reciprocal = reinterpret_cast<R*>(w_block + B * K + kColumnWarps * 2 * K * K) + warp * K;

  const long long m = first_matrix + blockIdx.y;
  ProductStatus& status = work.status[m];
  if (status.reject != 0) return;  // uniform: written by the previous kernel
  const ProductBuffers<D> buf = ProductBuffers<D>::carve(work.buffers + m * work.per_matrix, n, K);
  const int J = blockIdx.x;
  const int r0 = J * B;
  const int rows = n - r0 < B ? n - r0 : B;
  const D zero = from_real<D>(R(0));

  for (int e = threadIdx.x; e < K * K; e += blockDim.x) {
    D sum = from_real<D>(R(e / K == e % K ? 1 : 0));
    for (int I = 0; I < J; ++I) sum += buf.gram[std::size_t(I) * K * K + e];
    base[e] = sum;
  }
  for (int e = threadIdx.x; e < B * K; e += blockDim.x)
    w_block[e] = e / K < rows ? buf.w[std::size_t(r0) * K + e] : zero;
  __syncthreads();

  const int c0 = warp * kPerWarp;
  if (c0 >= rows) return;  // no barrier below
  // G for the warp's first column: the base plus the rows of the block above it.
  for (int e = lane; e < K * K; e += 32) {
    const int p = e / K, q = e % K;
    D sum = base[e];
    for (int i = 0; i < c0; ++i) sum = fma_conj(sum, w_block[i * K + p], w_block[i * K + q]);
    gram[e] = sum;
  }
  __syncwarp();
  bool bad = false;
  for (int c = c0; c < c0 + kPerWarp && c < rows; ++c) {
    // Cholesky of G_j (lower, right-looking), in place in `chol`.
    for (int e = lane; e < K * K; e += 32) chol[e] = gram[e];
    __syncwarp();
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
    const int j = r0 + c;
    if (lane < K) buf.z[std::size_t(j) * K + lane] = zj;
    if (lane == 0) buf.m[j] = mj;
    // G_{j+1} = G_j + w_jᴴ w_j.
    for (int e = lane; e < K * K; e += 32) {
      const int p = e / K, q = e % K;
      gram[e] = fma_conj(gram[e], w_block[c * K + p], w_block[c * K + q]);
    }
    __syncwarp();
  }
  if (__any_sync(0xffffffffu, bad) && lane == 0) atomicOr(&status.reject, 1);
}

// ---- L̃ = L·M --------------------------------------------------------------------------------------

template <class D, int K>
constexpr std::size_t apply_shared_bytes() {
  return sizeof(D) * apply_segments<D>() * K * kApplyRows;
}

template <class D, int K>
__global__ void __launch_bounds__(apply_segments<D>() * 32) apply_kernel(D* l_all, long long ldl, long long stride_l,
                                                                         int n, ProductWork<D> work,
                                                                         long long first_matrix, double tau_limit,
                                                                         int* info) {
  using R = sreal_t<D>;
  constexpr int S = apply_segments<D>();
  extern __shared__ __align__(16) unsigned char smem[];
  D* partial = reinterpret_cast<D*>(smem);  // [segment][p][lane]

  const long long m = first_matrix + blockIdx.y;
  ProductStatus& status = work.status[m];
  // The guard: uniform over the matrix (its inputs were written by the previous kernels).
  if (status.reject != 0 || !(1.0 + status.norm2 <= tau_limit)) return;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    info[m] = 0;
    status.done = 1;
  }
  const ProductBuffers<D> buf = ProductBuffers<D>::carve(work.buffers + m * work.per_matrix, n, K);
  D* L = l_all + m * stride_l;
  const int lane = threadIdx.x % 32, segment = threadIdx.x / 32;
  const int row_blocks = (n + kApplyRows - 1) / kApplyRows;
  const int r0 = (row_blocks - 1 - static_cast<int>(blockIdx.x)) * kApplyRows;  // longest rows first
  const int r = r0 + lane;
  const int columns = n < r0 + kApplyRows ? n : r0 + kApplyRows;
  const int begin = static_cast<int>(static_cast<long long>(segment) * columns / S);
  const int end = static_cast<int>(static_cast<long long>(segment + 1) * columns / S);
  const int last = r < n ? (end - 1 < r ? end - 1 : r) : begin - 1;  // the row's last column here
  const D zero = from_real<D>(R(0));

  // Pass 1: this segment's Σ L(r, i) w_i.
  D sum[K];
#pragma unroll
  for (int p = 0; p < K; ++p) sum[p] = zero;
  for (int j = begin; j <= last; ++j) {
    const D l = lower_element(L, ldl, r, j);
    D w[K];
    load_vector<D, K>(buf.w + std::size_t(j) * K, w);
#pragma unroll
    for (int p = 0; p < K; ++p) sum[p] = fma_(sum[p], l, w[p]);
  }
#pragma unroll
  for (int p = 0; p < K; ++p) partial[(segment * K + p) * kApplyRows + lane] = sum[p];
  __syncthreads();
  // Suffix scan over the segments: each gets the sum of those to its right (exclusive).
  for (int e = threadIdx.x; e < K * kApplyRows; e += blockDim.x) {
    D running = zero;
    for (int s = S - 1; s >= 0; --s) {
      const D here = partial[s * K * kApplyRows + e];
      partial[s * K * kApplyRows + e] = running;
      running += here;
    }
  }
  __syncthreads();

  // Pass 2: right to left, S_j(r) = carry + Σ_{j<i≤last} L(r, i) w_i.
#pragma unroll
  for (int p = 0; p < K; ++p) sum[p] = partial[(segment * K + p) * kApplyRows + lane];
  for (int j = last; j >= begin; --j) {
    const D l = lower_element(L, ldl, r, j);
    D w[K], z[K];
    load_vector<D, K>(buf.w + std::size_t(j) * K, w);
    load_vector<D, K>(buf.z + std::size_t(j) * K, z);
    D value = l * buf.m[j];
#pragma unroll
    for (int p = 0; p < K; ++p) value = fma_(value, sum[p], z[p]);  // zero for j = r: nothing right of it
#pragma unroll
    for (int p = 0; p < K; ++p) sum[p] = fma_(sum[p], l, w[p]);
    L[r + j * ldl] = value;
  }
}

}  // namespace
}  // namespace covflow::linalg::detail

// heev on the GPU, after A. Cosnuau, "Computation on GPU of Eigenvalues and Eigenvectors of a Large
// Number of Small Hermitian Matrices" (Procedia Computer Science, 2014):
//   §2.2          Householder reduction to Hermitian tridiagonal form with Hermitian reflectors
//                 H = I − α w wᴴ (α real, w = x + e^{iθ}‖x‖e₁), one matrix-vector product per column
//                 (p = αAw, K = (α/2)wᴴp, q = p − Kw, A ← A − wqᴴ − qwᴴ);
//   end of §2.2   the diagonal unitary S that turns it into a real symmetric tridiagonal;
//   §3            implicit Wilkinson-shifted QR/QL with deflation (tridiagonal_qr.hpp, the code the
//                 CPU tests check against LAPACK), its plane rotations accumulated into Z — for
//                 n > 32 on the leaves of a divide and conquer (tridiagonal_dc.hpp, Cuppen's method
//                 as LAPACK's ?stedc does it), which shortens §3's chain for the eigenvectors;
//   then          V = Q·S·Z, the eigenvectors of A.
//
// Two organisations, by size:
//
// n ≤ 32  small_heev_kernel — one warp per matrix does everything in shared memory. Lane i owns
//         row i during the reduction and the QR iteration; all 32 lanes run the (sequential)
//         iteration in lockstep, so each lane applies every rotation to its own row of Z the moment
//         it is made, at no extra latency; lane c owns column c of V in the back-transform. One
//         shift per sweep: blocks this short gain less from groups of shifts than the corner
//         eigenvalues and the rotation broadcasts cost (docs/performance-history.md).
//         Budget (complex double, n = 32): A, Z and V with a padded leading dimension of 33,
//         ≈ 46 KB per warp, 4 warps per block.
//
// n > 32  kernels by stage:
//   1. tridiagonalize_kernel — one thread-block cluster per matrix (sm_90 distributed shared
//      memory). The packed lower triangle is spread over the C blocks of the cluster by columns,
//      cyclically (column j in block j mod C), so every block keeps an equal share of the shrinking
//      trailing matrix; C = 1 … 16 is the smallest that fits in shared memory, grown while that
//      puts more of the batch on the GPU at once. Per column: the owner block forms w; every block
//      forms its partial of p from its own columns; partials are summed across the cluster through
//      DSMEM; every block updates its own columns. Two cluster barriers per column.
//      Beyond what 16 blocks hold (complex double n ≳ 700), and for batches of a quarter of the
//      SM count or more whose triangles need more than one block (n ≥ 256 at complex double:
//      clusters of 4 and 16 blocks keep only a few matrices in flight, each column waiting on two
//      cluster barriers), the reduction streams A through global memory instead, one block per
//      matrix, the rank-2 update fused into the next column's product
//      (tridiagonalize_global_kernel).
//   2. divide and conquer on the real tridiagonal (tridiagonal_dc.hpp), for eigenvalues alone as
//      for eigenvectors. §3's full QR chain — ~n² dependent rotations per matrix, one latency-bound
//      warp each — would be the whole heev's critical path (more than half its time at n = 128,
//      complex double: docs/performance-history.md); here §3's QR runs only on leaves of ≤ 16 rows
//      (dc_leaf_kernel, a warp per leaf, each lane applying the rotations to its row of Z), then
//      the tree is merged level by level (dc_merge_kernel, a block per node: deflation, secular
//      roots, Gu–Eisenstat vectors, the product with the children's eigenvectors), Z in place.
//   3. finalize_kernel (sort, phases of S); with eigenvectors back_transform_registers_kernel
//      (n ≤ 512: columns of V in registers, reflectors 4 at a time in compact WY form) or
//      back_transform_kernel (above: 4 columns of V per warp in shared memory) — V = Q·S·Z·P into A.
//
// No host synchronisation anywhere: per-matrix status goes to `info` on the device. A matrix
// holding a NaN or an Inf is flagged by the first kernel; later kernels write NaN for it alone.
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "../common/device_scalar.cuh"
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "heev_impl.hpp"
#include "tridiagonal_dc.hpp"
#include "tridiagonal_qr.hpp"

namespace covflow::linalg::detail {
namespace {

namespace cg = cooperative_groups;

constexpr int kSmallMax = 32;                     // n handled by one warp
constexpr int kSmallWarps = 4;                    // matrices per block in the small kernel
constexpr int kTridiagThreads = 256;              // threads per block of the reduction
constexpr int kStreamThreads = 256;               // threads per block of the global-memory reduction
constexpr int kStreamChunk = 8;                   // rows a lane loads at once in that reduction's sweep
constexpr int kMaxCluster = 16;                   // blocks per cluster, at most (non-portable above 8)
constexpr int kMaxBackWarps = 8;                  // warps per back-transform block, at most
constexpr int kColsPerWarp = 4;                   // columns of V per warp (8 lanes each)
constexpr std::size_t kSmemBudget = 200 * 1024;   // shared memory a block plans for (sm_90: 227 KB)

// Offset of reflector k (length n−1−k) in the reflector store.
__host__ __device__ inline long long reflector_offset(int n, int k) {
  return static_cast<long long>(k) * (n - 1) - static_cast<long long>(k) * (k - 1) / 2;
}

// ---- cyclic column distribution of the packed lower triangle over a cluster -----------------
// Block q owns columns q, q + C, q + 2C, …; its t-th column (j = q + tC, rows j..n−1) starts at
// local offset t·n − t·q − C·t(t−1)/2.
__host__ __device__ inline int owned_columns(int n, int C, int q) { return q < n ? (n - q + C - 1) / C : 0; }
__host__ __device__ inline long long owned_offset(int n, int C, int q, int t) {
  return static_cast<long long>(t) * n - static_cast<long long>(t) * q - static_cast<long long>(C) * t * (t - 1) / 2;
}
__host__ __device__ inline long long owned_size(int n, int C, int q) {
  return owned_offset(n, C, q, owned_columns(n, C, q));
}

// Shared memory of the global-memory reduction: the warps' shares of p, w, q, the pending pair
// and b (T), α and 32 partial sums (R).
template <class T>
std::size_t stream_smem(int n) {
  return sizeof(T) * (kStreamThreads / 32 + 5) * std::size_t(n) + sizeof(sreal_t<T>) * (std::size_t(n) + 32);
}

template <class T>
std::size_t cluster_smem(int n, int C) {
  // own columns + w, p partial, q, b (T) + 8 T scalars + α (R) + 32 partial sums + 8 R scalars
  // + the owned columns' offsets (int)
  return sizeof(T) * (static_cast<std::size_t>(owned_size(n, C, 0)) + 4 * std::size_t(n) + 8) +
         sizeof(sreal_t<T>) * (std::size_t(n) + 40) + sizeof(int) * std::size_t(n);
}


// ---- workspace ----------------------------------------------------------------------------

// Per-matrix state the reduction leaves for the later kernels.
struct MatrixState {
  int status;  // 0 to solve; 3 skipped (non-finite input: its outputs are NaN)
};

template <class T>
struct Layout {
  using R = sreal_t<T>;
  int n = 0;
  long long count = 0;
  bool vectors = false;
  std::size_t off_exponent = 0, off_state = 0, off_d = 0, off_e = 0, off_alpha = 0, off_b = 0, off_phase = 0,
              off_perm = 0, off_reflectors = 0, off_z = 0, bytes = 0;

  Layout(int n_, long long count_, bool vectors_) : n(n_), count(count_), vectors(vectors_) {
    std::size_t at = 0;
    auto take = [&](std::size_t bytes_) {
      const std::size_t start = at;
      at += (bytes_ + 255) / 256 * 256;
      return start;
    };
    const auto cn = static_cast<std::size_t>(count) * static_cast<std::size_t>(n);
    off_exponent = take(sizeof(int) * count);
    off_state = take(sizeof(MatrixState) * count);
    off_d = take(sizeof(R) * cn);
    off_e = take(sizeof(R) * cn);
    off_alpha = take(sizeof(R) * cn);
    off_b = take(sizeof(T) * cn);
    off_perm = take(sizeof(int) * cn);
    off_z = take(sizeof(R) * cn * std::size_t(n));  // the tridiagonal's eigenvectors (its merges need them)
    if (vectors) {
      off_phase = take(sizeof(T) * cn);
      off_reflectors = take(sizeof(T) * static_cast<std::size_t>(count) * std::size_t(n) * std::size_t(n - 1) / 2);
    }
    bytes = at;
  }
};

template <class T>
struct Work {
  using R = sreal_t<T>;
  int* exponent = nullptr;
  MatrixState* state = nullptr;
  R* d = nullptr;
  R* e = nullptr;
  R* alpha = nullptr;
  T* b = nullptr;
  T* phase = nullptr;
  int* perm = nullptr;
  T* reflectors = nullptr;
  R* z = nullptr;
};

template <class T>
Work<T> bind(const Layout<T>& layout, std::byte* base) {
  using R = sreal_t<T>;
  Work<T> w;
  w.exponent = reinterpret_cast<int*>(base + layout.off_exponent);
  w.state = reinterpret_cast<MatrixState*>(base + layout.off_state);
  w.d = reinterpret_cast<R*>(base + layout.off_d);
  w.e = reinterpret_cast<R*>(base + layout.off_e);
  w.alpha = reinterpret_cast<R*>(base + layout.off_alpha);
  w.b = reinterpret_cast<T*>(base + layout.off_b);
  w.perm = reinterpret_cast<int*>(base + layout.off_perm);
  w.z = reinterpret_cast<R*>(base + layout.off_z);
  if (layout.vectors) {
    w.phase = reinterpret_cast<T*>(base + layout.off_phase);
    w.reflectors = reinterpret_cast<T*>(base + layout.off_reflectors);
  }
  return w;
}

// ---- block-wide helpers -------------------------------------------------------------------

// Sum over the block; every thread gets the result. `scratch` holds one value per warp.
template <class V>
__device__ V block_sum(V value, V* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  value = warp_sum(value);
  __syncthreads();  // scratch may still be read from the previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  V total = scratch[0];
  for (int w = 1; w < warps; ++w) total += scratch[w];
  return total;
}
template <class R>
__device__ R warp_max(R value) {
  for (int offset = 16; offset > 0; offset >>= 1) value = fmax(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// The Householder scalars of §2.2 for x = (x1, …) with ‖x‖² = sigma2: b = −e^{iθ}‖x‖ (the new
// sub-diagonal), the first entry of w = x + e^{iθ}‖x‖e₁, and α = 1/(‖x‖(‖x‖ + |x1|)). α = 0 means
// there is nothing to annihilate (H = I, b = x1).
template <class T>
__device__ inline void householder(T x1, sreal_t<T> sigma2, bool last, T& b, T& w1, sreal_t<T>& alpha) {
  using R = sreal_t<T>;
  const R ax1 = sqrt(abs2(x1));
  const T phase = ax1 > R(0) ? x1 * (R(1) / ax1) : from_real<T>(R(1));
  const R sigma = sqrt(sigma2);
  if (last || sigma == R(0)) {
    b = x1;
    w1 = x1;
    alpha = R(0);
  } else {
    b = -(phase * sigma);
    w1 = x1 + phase * sigma;
    alpha = R(1) / (sigma * (sigma + ax1));
  }
}

// ============================================================================================
// n ≤ 32: one warp per matrix
// ============================================================================================

// Rotations go straight into the lane's row of Z (every lane calls this with the same rotation).
template <class R>
struct RowSink {
  R* z;  // Z(row, j) at z[j * ld]
  int ld;
  __device__ bool reserve(int) { return true; }
  __device__ void operator()(int j, R c, R s) {
    const R t = z[(j + 1) * ld];
    const R u = z[j * ld];
    z[(j + 1) * ld] = c * t - s * u;
    z[j * ld] = s * t + c * u;
  }
  // A time step of pipelined sweeps: each lane brings its own rotation (if `on`); every lane
  // applies all of them to its row (they lie on disjoint planes, so in any order).
  __device__ void step(int plane, R c, R s, bool on) {
    unsigned pending = __ballot_sync(0xffffffffu, on);
    while (pending) {
      const int src = __ffs(pending) - 1;
      pending &= pending - 1;
      (*this)(__shfl_sync(0xffffffffu, plane, src), __shfl_sync(0xffffffffu, c, src),
              __shfl_sync(0xffffffffu, s, src));
    }
  }
};
template <class R>
struct NullSink {
  __device__ bool reserve(int) { return true; }
  __device__ void operator()(int, R, R) {}
  __device__ void step(int, R, R, bool) {}
};

template <class T, int N>
struct SmallShared {
  using R = sreal_t<T>;
  static constexpr int ld = N + 1;  // padded: row and column walks are both conflict-free
  T a[N * ld];
  T v[N * ld];
  R z[N * ld];
  T w[N], q[N], b[N], phase[N];
  R d[N], e[N], alpha[N];
  int perm[N];
};

template <class T, int N>
__global__ void __launch_bounds__(kSmallWarps * 32) small_heev_kernel(T* a_all, long long lda, long long stride, int n,
                                                                     long long count, bool upper, bool vectors,
                                                                     sreal_t<T>* w_out, int* info) {
  using R = sreal_t<T>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long b = static_cast<long long>(blockIdx.x) * kSmallWarps + warp;
  if (b >= count) return;
  auto& sh = reinterpret_cast<SmallShared<T, N>*>(smem_raw)[warp];
  constexpr int ld = SmallShared<T, N>::ld;
  T* A = a_all + b * stride;
  R* w = w_out + b * n;
  const bool in = lane < n;

  // Load the read triangle into a full Hermitian matrix; lane i takes row i.
  bool finite = true;
  R amax = 0;
  for (int j = 0; j < n; ++j) {
    if (in && lane >= j) {
      T v = upper ? conj_of(A[j + lane * lda]) : A[lane + j * lda];
      if (lane == j) v = from_real<T>(real_part(v));
      finite = finite && is_finite(v);
      amax = fmax(amax, sqrt(abs2(v)));
      sh.a[lane + j * ld] = v;
      sh.a[j + lane * ld] = conj_of(v);
    }
  }
  if (!__all_sync(0xffffffffu, finite)) {
    if (lane == 0) info[b] = status::non_finite_input;
    for (int k = lane; k < n; k += 32) w[k] = R(NAN);
    if (vectors)
      for (int c = 0; c < n; ++c)
        if (in) A[lane + c * lda] = from_real<T>(R(NAN));
    return;
  }
  amax = warp_max(amax);
  const int exponent = amax > R(0) ? ilogb(amax) : 0;
  const R scale = scalbn(R(1), -exponent);
  __syncwarp();
  if (in)
    for (int j = 0; j < n; ++j) sh.a[lane + j * ld] = sh.a[lane + j * ld] * scale;
  __syncwarp();

  // §2.2: reduction to tridiagonal form; the reflector w_k is left in column k below the diagonal.
  for (int k = 0; k + 1 < n; ++k) {
    const T xi = (in && lane > k) ? sh.a[lane + k * ld] : from_real<T>(R(0));
    const R sigma2 = warp_sum(abs2(xi));
    T x1;
    if constexpr (is_cx<T>) x1 = T{__shfl_sync(0xffffffffu, xi.x, k + 1), __shfl_sync(0xffffffffu, xi.y, k + 1)};
    else x1 = __shfl_sync(0xffffffffu, xi, k + 1);
    T bk, w1;
    R alpha;
    householder(x1, sigma2, k + 2 == n, bk, w1, alpha);
    if (lane == 0) {
      sh.b[k] = bk;
      sh.alpha[k] = alpha;
      sh.d[k] = real_part(sh.a[k + k * ld]);
    }
    if (alpha == R(0)) continue;  // the same decision in every lane
    const T wi = lane == k + 1 ? w1 : xi;
    if (in && lane > k) sh.a[lane + k * ld] = wi;
    if (lane < N) sh.w[lane] = wi;
    __syncwarp();
    T acc = from_real<T>(R(0));
    if (in && lane > k)
      for (int j = k + 1; j < n; ++j) acc = fma_(acc, sh.a[lane + j * ld], sh.w[j]);
    const T pi = alpha * acc;
    const R K = alpha / R(2) * warp_sum(real_part(fma_conj(from_real<T>(R(0)), wi, pi)));
    const T qi = pi - K * wi;
    if (lane < N) sh.q[lane] = qi;
    __syncwarp();
    if (in && lane > k)
      for (int j = k + 1; j < n; ++j)
        sh.a[lane + j * ld] = sh.a[lane + j * ld] - (wi * conj_of(sh.q[j]) + qi * conj_of(sh.w[j]));
    __syncwarp();
  }
  if (lane == 0) {
    sh.d[n - 1] = real_part(sh.a[(n - 1) + (n - 1) * ld]);
    // End of §2.2: s₀ = 1, s_{k+1} = s_k·b_k/|b_k|; the real tridiagonal has off-diagonals |b_k|.
    T s = from_real<T>(R(1));
    sh.phase[0] = s;
    for (int k = 0; k + 1 < n; ++k) {
      const R mag = sqrt(abs2(sh.b[k]));
      sh.e[k] = mag;
      if (mag > R(0)) s = s * (sh.b[k] * (R(1) / mag));
      sh.phase[k + 1] = s;
    }
  }
  if (vectors && in)
    for (int j = 0; j < n; ++j) sh.z[lane + j * ld] = lane == j ? R(1) : R(0);
  __syncwarp();

  // §3: every lane runs the iteration; each applies the rotations to its own row of Z.
  QrState state;
  QrResult result;
  if (vectors) {
    // Lanes past n take part in the shared scans and apply the rotations to the padding row N,
    // which nothing reads.
    RowSink<R> sink{sh.z + (in ? lane : N), ld};
    result = tridiagonal_qr<R, true, DefaultSweep, 1>(n, sh.d, sh.e, sink, state, 30L * n);
  } else {
    NullSink<R> sink;
    result = tridiagonal_qr<R, true, DefaultSweep, 1>(n, sh.d, sh.e, sink, state, 30L * n);
  }
  __syncwarp();
  if (lane == 0) info[b] = result == QrResult::done ? status::ok : status::no_convergence;

  // Sort: rank of each eigenvalue (ties by index).
  if (in) {
    const R v = sh.d[lane];
    int rank = 0;
    for (int j = 0; j < n; ++j) rank += (sh.d[j] < v) || (sh.d[j] == v && j < lane);
    w[rank] = scalbn(v, exponent);
    sh.perm[rank] = lane;
  }
  if (!vectors) return;
  __syncwarp();

  // V = Q·S·Z·P: lane c owns column c.
  if (in) {
    const int src = sh.perm[lane];
    for (int i = 0; i < n; ++i) sh.v[i + lane * ld] = sh.phase[i] * sh.z[i + src * ld];
    T* vc = sh.v + lane * ld;
    for (int k = n - 3; k >= 0; --k) {
      const R alpha = sh.alpha[k];
      if (alpha == R(0)) continue;
      const T* wk = sh.a + k * ld;  // w_k in rows k+1..n−1 of column k
      T dot = from_real<T>(R(0));
      for (int i = k + 1; i < n; ++i) dot = fma_conj(dot, wk[i], vc[i]);
      const T coef = alpha * dot;
      for (int i = k + 1; i < n; ++i) vc[i] = vc[i] - wk[i] * coef;
    }
  }
  __syncwarp();
  if (in)
    for (int c = 0; c < n; ++c) A[lane + c * lda] = sh.v[lane + c * ld];
}

// ============================================================================================
// n > 32, kernel 1: reduction to tridiagonal form by a thread-block cluster
// ============================================================================================

template <class T>
__global__ void __launch_bounds__(kTridiagThreads) tridiagonalize_kernel(T* a_all, long long lda, long long stride,
                                                                         int n, bool upper, Work<T> work, int* info) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // clusters need sm_90; the host picks the global-memory kernel on older devices
#else
  using R = sreal_t<T>;
  cg::cluster_group cluster = cg::this_cluster();
  const int C = static_cast<int>(cluster.num_blocks());
  const int q = static_cast<int>(cluster.block_rank());
  const long long b = blockIdx.x / C;
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5, warps = nt >> 5;
  T* A = a_all + b * stride;

  // Every block lays its shared memory out identically (own columns sized for block 0, the
  // largest share), so that map_shared_rank() finds a buffer at the same offset in each.
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* own = reinterpret_cast<T*>(smem_raw);
  T* wv = own + owned_size(n, C, 0);  // w of the current column (every block holds a copy)
  T* part = wv + n;                   // this block's partial of A₂₂w
  T* pv = part + n;                   // p, then q
  T* bsh = pv + n;                    // b_k of the columns this block owns
  T* scal = bsh + n;
  R* alpha_sh = reinterpret_cast<R*>(scal + 8);
  R* rsum = alpha_sh + n;
  R* rscal = rsum + 32;  // [0] α, [1] local max, [2] local finite, [3] ‖x‖² of the next column
  int* coff = reinterpret_cast<int*>(rscal + 8);  // offset of the t-th owned column
  const int owned = owned_columns(n, C, q);
  for (int t = tid; t < owned; t += nt) coff[t] = static_cast<int>(owned_offset(n, C, q, t));
  __syncthreads();
  // Element (i, j) of an owned column j = q + tC, i ≥ j.
  auto at = [&](int i, int t, int j) -> T& { return own[coff[t] + (i - j)]; };

  // Load this block's columns of the read triangle; the cluster agrees on finiteness and the scale.
  bool finite = true;
  R amax = 0;
  for (int t = 0; t < owned; ++t) {
    const int j = q + t * C;
    for (int i = j + tid; i < n; i += nt) {
      T v = upper ? conj_of(A[j + i * lda]) : A[i + j * lda];
      if (i == j) v = from_real<T>(real_part(v));
      finite = finite && is_finite(v);
      amax = fmax(amax, sqrt(abs2(v)));
      at(i, t, j) = v;
    }
  }
  finite = __syncthreads_and(finite);
  amax = warp_max(amax);
  if (lane == 0) rsum[warp] = amax;
  __syncthreads();
  if (tid == 0) {
    R m = 0;
    for (int w = 0; w < warps; ++w) m = fmax(m, rsum[w]);
    rscal[1] = m;
    rscal[2] = finite ? R(1) : R(0);
  }
  cluster.sync();
  R global_max = 0;
  bool all_finite = true;
  for (int r = 0; r < C; ++r) {
    const R* remote = cluster.map_shared_rank(rscal, r);
    global_max = fmax(global_max, remote[1]);
    all_finite = all_finite && remote[2] != R(0);
  }
  if (!all_finite) {
    if (q == 0 && tid == 0) {
      info[b] = status::non_finite_input;
      work.state[b].status = 3;
    }
    cluster.sync();  // nobody leaves while another block may still read its shared memory
    return;
  }
  // Scale by a power of two so that max |a_ij| is about 1: exact, keeps the chase's squares in range.
  const int exponent = global_max > R(0) ? ilogb(global_max) : 0;
  if (exponent != 0) {
    const R scale = scalbn(R(1), -exponent);
    for (long long x = tid; x < owned_size(n, C, q); x += nt) own[x] = own[x] * scale;
  }
  __syncthreads();
  // ‖x‖² of column 0 below the diagonal (later columns get theirs from the rank-2 update).
  if (q == 0) {
    R part_norm = 0;
    for (int i = 1 + tid; i < n; i += nt) part_norm += abs2(at(i, 0, 0));
    const R sigma2 = block_sum(part_norm, rsum);
    if (tid == 0) rscal[3] = sigma2;
  }

  T* reflectors = work.reflectors != nullptr ? work.reflectors + b * (static_cast<long long>(n) * (n - 1) / 2) : nullptr;
  for (int k = 0; k + 1 < n; ++k) {
    const int m = n - k - 1;
    const int owner = k % C;
    // Owned columns after k: j0 = q + t0·C is the first.
    const int j0 = k + 1 + ((q - (k + 1)) % C + C) % C;
    const int t0 = (j0 - q) / C;
    if (q == owner) {
      const int tk = (k - q) / C;
      if (tid == 0) {
        T bk, w1;
        R alpha;
        householder(at(k + 1, tk, k), rscal[3], k + 2 == n, bk, w1, alpha);
        bsh[k] = bk;
        alpha_sh[k] = alpha;
        rscal[0] = alpha;
        at(k + 1, tk, k) = w1;
      }
      __syncthreads();
      if (rscal[0] != R(0))
        for (int i = tid; i < m; i += nt) {
          const T wi = at(k + 1 + i, tk, k);
          wv[i] = wi;
          if (reflectors != nullptr) reflectors[reflector_offset(n, k) + i] = wi;
        }
    }
    cluster.sync();  // S1: the owner's w and α are ready
    const R alpha = q == owner ? rscal[0] : cluster.map_shared_rank(rscal, owner)[0];
    if (alpha == R(0)) {
      // Nothing to annihilate; the next column's norm still has to be measured.
      if (owned > 0 && k + 1 < n - 1 && (k + 1) % C == q) {
        R part_norm = 0;
        for (int i = k + 2 + tid; i < n; i += nt) part_norm += abs2(at(i, (k + 1 - q) / C, k + 1));
        const R sigma2 = block_sum(part_norm, rsum);
        if (tid == 0) rscal[3] = sigma2;
      }
      cluster.sync();  // keep the step's barrier count the same in every block
      continue;
    }
    if (q != owner) {
      const T* remote_w = cluster.map_shared_rank(wv, owner);
      for (int i = tid; i < m; i += nt) wv[i] = remote_w[i];
      __syncthreads();
    }
    // Partial p = A₂₂w. Row part: a thread per row i walks the owned columns j ≤ i (the lanes of a
    // warp read consecutive rows of one column: no bank conflicts). With C = 1 the same thread
    // also walks its own column below the diagonal — the row has i−k elements to the left and
    // n−1−i below, m in all, the same for every thread.
    for (int i = k + 1 + tid; i < n; i += nt) {
      T acc0 = from_real<T>(R(0)), acc1 = from_real<T>(R(0));
      int t = t0, j = j0;
      for (; j + C <= i; j += 2 * C, t += 2) {
        acc0 = fma_(acc0, at(i, t, j), wv[j - k - 1]);
        acc1 = fma_(acc1, at(i, t + 1, j + C), wv[j + C - k - 1]);
      }
      if (j <= i) acc0 = fma_(acc0, at(i, t, j), wv[j - k - 1]);
      if (C == 1) {
        const T* col = own + coff[i] - i;  // (jj, i) at col[jj]
        int jj = i + 1;
        for (; jj + 1 < n; jj += 2) {
          acc0 = fma_conj(acc0, col[jj], wv[jj - k - 1]);
          acc1 = fma_conj(acc1, col[jj + 1], wv[jj + 1 - k - 1]);
        }
        if (jj < n) acc0 = fma_conj(acc0, col[jj], wv[jj - k - 1]);
      }
      part[i - k - 1] = acc0 + acc1;
    }
    if (C > 1) {
      __syncthreads();
      // Column part, C > 1: Σ_{j>i} conj(A(j,i)) w_j for each owned column i > k, by a group of G
      // lanes (G·columns ≤ threads), reduced with log₂G shuffles.
      const int columns = owned - t0;
      int G = 32;
      while (G > 1 && G * columns > nt) G >>= 1;
      const int lg = __ffs(G) - 1;
      for (int base = warp * 32; base < columns * G; base += nt) {
        const int idx = base + lane;
        const int cl = idx >> lg, seg = idx & (G - 1);
        T acc = from_real<T>(R(0));
        int i = -1;
        if (cl < columns) {
          const int t = t0 + cl;
          i = q + t * C;
          const T* col = own + coff[t] - i;
          for (int jj = i + 1 + seg; jj < n; jj += G) acc = fma_conj(acc, col[jj], wv[jj - k - 1]);
        }
        for (int offset = G >> 1; offset > 0; offset >>= 1) {
          if constexpr (is_cx<T>) {
            acc.x += __shfl_xor_sync(0xffffffffu, acc.x, offset);
            acc.y += __shfl_xor_sync(0xffffffffu, acc.y, offset);
          } else {
            acc += __shfl_xor_sync(0xffffffffu, acc, offset);
          }
        }
        if (i >= 0 && seg == 0) part[i - k - 1] += acc;
      }
    }
    cluster.sync();  // S2: every block's partial is complete
    R dot = 0;
    for (int i = tid; i < m; i += nt) {
      T p = part[i];
      for (int r = 1; r < C; ++r) p += cluster.map_shared_rank(part, (q + r) % C)[i];
      p = alpha * p;
      pv[i] = p;
      dot += real_part(fma_conj(from_real<T>(R(0)), wv[i], p));
    }
    const R K = alpha / R(2) * block_sum(dot, rsum);
    for (int i = tid; i < m; i += nt) pv[i] = pv[i] - K * wv[i];
    __syncthreads();
    // A₂₂ −= w qᴴ + q wᴴ on the owned columns: a warp per column, lanes down the rows. The warp
    // that updates column k+1 also measures it below the diagonal, for the next step's reflector.
    for (int t = t0 + warp; t < owned; t += warps) {
      const int j = q + t * C;
      const T wj = wv[j - k - 1], qj = pv[j - k - 1];
      T* col = own + coff[t] - j;  // (i, j) at col[i]
      R norm = 0;
      for (int i = j + lane; i < n; i += 32) {
        const T wi = wv[i - k - 1], qi = pv[i - k - 1];
        const T v = col[i] - (wi * conj_of(qj) + qi * conj_of(wj));
        col[i] = v;
        if (i > j) norm += abs2(v);
      }
      if (j == k + 1) {
        norm = warp_sum(norm);
        if (lane == 0) rscal[3] = norm;
      }
    }
    __syncthreads();
  }
  // Diagonal, sub-diagonal and α of the owned columns.
  R* d = work.d + b * n;
  R* e = work.e + b * n;
  R* alpha_out = work.alpha + b * n;
  T* b_out = work.b + b * n;
  for (int t = tid; t < owned; t += nt) {
    const int k = q + t * C;
    d[k] = real_part(at(k, t, k));
    if (k + 1 < n) {
      e[k] = sqrt(abs2(bsh[k]));
      alpha_out[k] = alpha_sh[k];
      b_out[k] = bsh[k];
    }
  }
  if (q == 0 && tid == 0) {
    work.exponent[b] = exponent;
    info[b] = status::ok;
    MatrixState& st = work.state[b];
    st.status = 0;
  }
  cluster.sync();  // no block leaves while others may still read its shared memory
#endif
}

// The same reduction, one block per matrix, streaming A's lower triangle through global memory
// (L2/HBM) instead of holding it on chip: for n too large for a cluster's shared memory, and for
// large batches whose triangles need a cluster of several blocks (choose_cluster; measured in
// docs/performance-history.md).
//
// One pass over the trailing matrix per column, §2.2's update fused with the next column's
// product: step k first finishes column k (the rank-2 update of step k−1, (w, q) kept in shared
// memory, rows ≥ k) and forms its reflector w_k; then one sweep over the trailing triangle applies
// step k−1's update to every element, writes it back, and accumulates p = A₂₂w_k from the updated
// element — A(i, j)·w_j into p_i and, below the diagonal, conj(A(i, j))·w_i into p_j. The triangle
// is read and written once per column (the unfused order read it twice and wrote it once). A warp
// takes columns j = k+1+warp, +warps, …, its lanes down the rows (coalesced); the row sums go into
// the warp's own copy of p in shared memory, the column sums through a shuffle, and the copies are
// added once per step.
template <class T>
__global__ void __launch_bounds__(kStreamThreads) tridiagonalize_global_kernel(T* a_all, long long lda,
                                                                               long long stride, int n, bool upper,
                                                                               Work<T> work, int* info) {
  using R = sreal_t<T>;
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5, warps = nt >> 5;
  const long long b = blockIdx.x;
  T* A = a_all + b * stride;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* partial = reinterpret_cast<T*>(smem_raw);  // warps × n: each warp's share of p
  T* wv = partial + static_cast<long long>(warps) * n;  // w_k (rows k+1 …)
  T* qv = wv + n;                                       // q_k (rows k+1 …)
  T* wp = qv + n;                                       // the pending w_{k−1} (rows k …)
  T* qp = wp + n;                                       // the pending q_{k−1}
  T* bsh = qp + n;
  R* alpha_sh = reinterpret_cast<R*>(bsh + n);
  R* rsum = alpha_sh + n;
  __shared__ R alpha_now;

  bool finite = true;
  R amax = 0;
  for (int j = 0; j < n; ++j)
    for (int i = j + tid; i < n; i += nt) {
      T v = upper ? conj_of(A[j + i * lda]) : A[i + j * lda];
      if (i == j) v = from_real<T>(real_part(v));
      finite = finite && is_finite(v);
      amax = fmax(amax, sqrt(abs2(v)));
      A[i + j * lda] = v;  // reads the upper triangle, writes the lower: no element another thread reads
    }
  if (!__syncthreads_and(finite)) {
    if (tid == 0) {
      info[b] = status::non_finite_input;
      work.state[b].status = 3;
    }
    return;
  }
  amax = warp_max(amax);
  if (lane == 0) rsum[warp] = amax;
  __syncthreads();
  R m_all = 0;
  for (int w = 0; w < warps; ++w) m_all = fmax(m_all, rsum[w]);
  const int exponent = m_all > R(0) ? ilogb(m_all) : 0;
  if (exponent != 0) {
    const R scale = scalbn(R(1), -exponent);
    for (int j = 0; j < n; ++j)
      for (int i = j + tid; i < n; i += nt) A[i + j * lda] = A[i + j * lda] * scale;
  }
  for (long long x = tid; x < static_cast<long long>(warps) * n; x += nt) partial[x] = from_real<T>(R(0));
  __syncthreads();

  // Step k−1's update on element (i, j), i ≥ j ≥ k (the pending vectors start at row k).
  const auto updated = [&](T a, int i, int j, int k) {
    const T wi = wp[i - k], qi = qp[i - k], wj = wp[j - k], qj = qp[j - k];
    return a - (wi * conj_of(qj) + qi * conj_of(wj));
  };
  T* reflectors = work.reflectors != nullptr ? work.reflectors + b * (static_cast<long long>(n) * (n - 1) / 2) : nullptr;
  bool pending = false;
  T* my_p = partial + static_cast<long long>(warp) * n;
  for (int k = 0; k + 1 < n; ++k) {
    const int m = n - k - 1;
    // Column k, finished: the pending update, then ‖x‖² of x = A(k+1:, k).
    R part_norm = 0;
    for (int i = k + tid; i < n; i += nt) {
      T v = A[i + k * lda];
      if (pending) {
        v = updated(v, i, k, k);
        if (i == k) v = from_real<T>(real_part(v));
        A[i + k * lda] = v;
      }
      if (i > k) part_norm += abs2(v);
    }
    const R sigma2 = block_sum(part_norm, rsum);  // its barriers order the writes above before the reads below
    if (tid == 0) {
      T bk, w1;
      R alpha;
      householder(A[(k + 1) + k * lda], sigma2, k + 2 == n, bk, w1, alpha);
      bsh[k] = bk;
      alpha_sh[k] = alpha;
      alpha_now = alpha;
      A[(k + 1) + k * lda] = w1;
    }
    __syncthreads();
    const R alpha = alpha_now;
    if (alpha != R(0))
      for (int i = tid; i < m; i += nt) {
        const T wi = A[(k + 1 + i) + k * lda];
        wv[i] = wi;
        if (reflectors != nullptr) reflectors[reflector_offset(n, k) + i] = wi;
      }
    __syncthreads();
    if (!pending && alpha == R(0)) continue;  // nothing to apply, nothing to multiply

    // The sweep over the trailing triangle (rows and columns ≥ k+1); with α = 0 it only applies
    // the pending update (wv was not loaded).
    const bool multiply = alpha != R(0);
    for (int j = k + 1 + warp; j < n; j += warps) {
      const T wj = multiply ? wv[j - k - 1] : from_real<T>(R(0));
      T column = from_real<T>(R(0));
      // The lane's rows in chunks of kStreamChunk, all loads of a chunk issued before any is used:
      // the sweep is bound by memory latency, and each block has only 8 warps to hide it with.
      for (int base = j + lane; base < n; base += 32 * kStreamChunk) {
        T a[kStreamChunk];
#pragma unroll
        for (int c = 0; c < kStreamChunk; ++c) {
          const int i = base + 32 * c;
          a[c] = i < n ? A[i + j * lda] : from_real<T>(R(0));
        }
#pragma unroll
        for (int c = 0; c < kStreamChunk; ++c) {
          const int i = base + 32 * c;
          if (i >= n) break;
          if (pending) {
            a[c] = updated(a[c], i, j, k);
            if (i == j) a[c] = from_real<T>(real_part(a[c]));
            A[i + j * lda] = a[c];
          }
          if (multiply) {
            my_p[i - k - 1] = fma_(my_p[i - k - 1], a[c], wj);
            if (i > j) column = fma_conj(column, a[c], wv[i - k - 1]);
          }
        }
      }
      if (multiply) {
        column = warp_sum(column);
        __syncwarp();  // the lanes' row sums of this column are in before lane 0 adds the column sum
        if (lane == 0) my_p[j - k - 1] = my_p[j - k - 1] + column;
        __syncwarp();
      }
    }
    __syncthreads();
    if (alpha == R(0)) {  // the update was applied; step k has none of its own
      pending = false;
      continue;
    }
    // p = α·Σ (warp shares), K = (α/2)·wᴴp, q = p − K·w; the shares are cleared for the next step.
    R dot = 0;
    for (int i = tid; i < m; i += nt) {
      T p = from_real<T>(R(0));
      for (int w = 0; w < warps; ++w) {
        p = p + partial[static_cast<long long>(w) * n + i];
        partial[static_cast<long long>(w) * n + i] = from_real<T>(R(0));
      }
      p = alpha * p;
      qv[i] = p;
      dot += real_part(fma_conj(from_real<T>(R(0)), wv[i], p));
    }
    const R K = alpha / R(2) * block_sum(dot, rsum);
    for (int i = tid; i < m; i += nt) {
      qp[i] = qv[i] - K * wv[i];  // the next step's pending pair, indexed from its row k+1
      wp[i] = wv[i];
    }
    pending = true;
    __syncthreads();
  }
  // Nothing is pending here: the last step (k = n−2) has no reflector of its own (householder's
  // `last`), and its sweep applied step n−3's update to A(n−1, n−1).
  for (int k = tid; k < n; k += nt) {
    work.d[b * n + k] = real_part(A[k + k * lda]);
    if (k + 1 < n) {
      work.e[b * n + k] = sqrt(abs2(bsh[k]));
      work.alpha[b * n + k] = alpha_sh[k];
      work.b[b * n + k] = bsh[k];
    }
  }
  if (tid == 0) {
    work.exponent[b] = exponent;
    info[b] = status::ok;
    MatrixState& st = work.state[b];
    st.status = 0;
  }
}

// ============================================================================================
// n > 32, kernels 2 and 3: divide and conquer on the real tridiagonal
// (tridiagonal_dc.hpp), §3's QR at the leaves
// ============================================================================================

constexpr int kLeafMax = 16;   // rows per leaf at most (COVFLOW_HEEV_LEAF=2…32 overrides, for measurements)
constexpr int kLeafWarps = 4;  // leaves per block

template <class R>
struct LeafShared {
  static constexpr int ld = 33;
  R z[32 * ld];
  R d[32], e[32];
};

// One warp per leaf, as the small kernel runs §3: the torn leaf's QR iteration in every lane, each
// lane applying the rotations to its own row of Z. The leaf's eigenvalues replace its part of d;
// its eigenvectors fill its diagonal block of Z (nothing else of Z is read before it is written).
template <class R>
__global__ void __launch_bounds__(kLeafWarps * 32) dc_leaf_kernel(int n, long long count, int levels,
                                                                  const MatrixState* states, R* d_all, const R* e_all,
                                                                  R* z_all, int* info) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long id = static_cast<long long>(blockIdx.x) * kLeafWarps + warp;
  const long long b = id >> levels;
  if (b >= count || states[b].status == 3) return;
  const int leaf = static_cast<int>(id & ((1LL << levels) - 1));
  auto& sh = reinterpret_cast<LeafShared<R>*>(smem_raw)[warp];
  constexpr int ld = LeafShared<R>::ld;
  const int first = dc_begin(n, levels, leaf), m = dc_begin(n, levels, leaf + 1) - first;
  R* d = d_all + b * n;
  const R* e = e_all + b * n;
  if (lane < m) {
    sh.d[lane] = d[first + lane];
    sh.e[lane] = lane + 1 < m ? e[first + lane] : R(0);
  }
  // Lanes past m own rows of the block that are not the leaf's; nothing reads them.
  for (int j = 0; j < m; ++j) sh.z[lane + j * ld] = lane == j ? R(1) : R(0);
  __syncwarp();
  if (lane == 0) dc_tear_leaf(n, first, m, sh.d, e);
  __syncwarp();
  RowSink<R> sink{sh.z + lane, ld};
  QrState state;
  const QrResult result = tridiagonal_qr<R, true, DefaultSweep, 1>(m, sh.d, sh.e, sink, state, 30L * m);
  __syncwarp();
  if (lane == 0 && result != QrResult::done) info[b] = status::no_convergence;
  if (lane < m) {
    d[first + lane] = sh.d[lane];
    R* z = z_all + b * static_cast<long long>(n) * n;
    for (int j = 0; j < m; ++j) z[(first + lane) + static_cast<long long>(first + j) * n] = sh.z[lane + j * ld];
  }
}

// Shared memory of a merge of m rows: a panel of kRows rows of Q (column c at panel[c·kRows]),
// twelve real and six integer arrays of m entries.
template <class R>
std::size_t merge_smem(int m, int rows) {
  return sizeof(R) * (std::size_t(rows) + 12) * m + sizeof(int) * 6 * std::size_t(m);
}

template <class R> struct vec2_of;
template <> struct vec2_of<float> { using type = float2; };
template <> struct vec2_of<double> { using type = double2; };
template <class R> using vec2_t = typename vec2_of<R>::type;

// Sum or product over the kGroup consecutive threads that share an item, identical in each of them
// (a butterfly: every partial combination is commutative, so the rounding is the same everywhere).
// The groups of a warp run different items and may diverge from each other (a root may take more
// steps than its neighbour's), so each shuffles under its own mask (group_mask, device_scalar.cuh).
template <int kGroup>
struct GroupSum {
  template <class V> __device__ V operator()(V v) const { return group_sum<kGroup>(v); }
};
template <int kGroup>
struct GroupProduct {
  template <class V> __device__ V operator()(V v) const {
    const unsigned mask = group_mask<kGroup>();
#pragma unroll
    for (int offset = kGroup / 2; offset > 0; offset >>= 1) v *= __shfl_xor_sync(mask, v, offset);
    return v;
  }
};

// One block per (matrix, node of `level`): merges the node's two children (tridiagonal_dc.hpp
// steps 1–4). Deflation is one thread's sequential scan. Every other step works on items (a root,
// an entry of ẑ, a column of the product) shared by kGroup consecutive threads — the top merges
// are one block per matrix, so the parallelism has to come from inside the node: roots, ẑ and
// norms split their sums over the group; the product Q·U goes by panels of kRows rows of Q, loaded
// into shared memory with the deflation's rotations applied, each thread forming kRows/kGroup
// rows of two columns (its entries of U computed on the fly; a thread's rows are pairs spread so
// that the group reads a contiguous run of the panel, two rows per load — the shared-memory
// traffic per multiply-add is this kernel's bound). A panel is stored over the rows it was loaded
// from, so the node's block of Z is updated in place.
template <class R, int kRows, int kGroup, int kThreads>
__global__ void __launch_bounds__(kThreads) dc_merge_kernel(int n, long long count, int level,
                                                            const MatrixState* states, R* d_all, const R* e_all,
                                                            R* z_all, int* info) {
  constexpr int kPairs = kRows / kGroup / 2;  // pairs of rows of a panel per thread
  using V2 = vec2_t<R>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ DcCounts counts;
  __shared__ int failed;
  const long long b = static_cast<long long>(blockIdx.x) >> level;
  const int node = static_cast<int>(blockIdx.x & ((1u << level) - 1));
  if (b >= count || states[b].status == 3) return;
  const int tid = threadIdx.x, nt = blockDim.x;
  const int part = tid % kGroup, items = nt / kGroup;
  const int first = dc_begin(n, level, node), m = dc_begin(n, level, node + 1) - first;
  const int m1 = dc_begin(n, level + 1, 2 * node + 1) - first;

  R* panel = reinterpret_cast<R*>(smem_raw);
  V2* zd = reinterpret_cast<V2*>(panel + static_cast<std::size_t>(kRows) * m);  // (ẑ_i, d_i), for the product
  R* lam = reinterpret_cast<R*>(zd + m);
  R* zv = lam + m;
  R* kept_d = zv + m;
  R* kept_z = kept_d + m;
  R* gone_d = kept_z + m;
  R* rot_c = gone_d + m;
  R* rot_s = rot_c + m;
  R* tau = rot_s + m;
  R* zhat = tau + m;
  R* scale = zhat + m;
  int* order = reinterpret_cast<int*>(scale + m);
  int* kept_col = order + m;
  int* gone_col = kept_col + m;
  int* rot_p = gone_col + m;
  int* rot_q = rot_p + m;
  int* origin = rot_q + m;

  R* d = d_all + b * n + first;
  R* z = z_all + b * static_cast<long long>(n) * n;
  auto Z = [&](int r, int c) -> R& { return z[(first + r) + static_cast<long long>(first + c) * n]; };
  const R beta = e_all[b * n + first + m1 - 1];
  const R rho = R(2) * fabs(beta);
  const R inv_sqrt2 = R(0.707106781186547524400844362104849039);
  for (int k = tid; k < m; k += nt) {
    lam[k] = d[k];
    // z = (last row of Q₁, sign(β)·first row of Q₂)/√2
    zv[k] = (k < m1 ? Z(m1 - 1, k) : (beta < R(0) ? -Z(m1, k) : Z(m1, k))) * inv_sqrt2;
  }
  if (tid == 0) failed = 0;
  __syncthreads();
  for (int k = tid; k < m; k += nt) {
    const R v = lam[k];
    int rank = 0;
    for (int j = 0; j < m; ++j) rank += (lam[j] < v) || (lam[j] == v && j < k);
    order[rank] = k;
  }
  __syncthreads();
  if (tid == 0)
    counts = dc_deflate(m, lam, zv, rho, order,
                        DcLists<R>{kept_col, kept_d, kept_z, gone_col, gone_d, rot_p, rot_q, rot_c, rot_s});
  __syncthreads();
  const int K = counts.kept, gone = counts.gone, rotations = counts.rotations;
  // Items are walked in rounds every thread of the block takes part in (the group's shuffles need
  // all of its members, also past the last item).
  const int rounds = (K + items - 1) / items;
  for (int round = 0; round < rounds; ++round) {
    const int j = round * items + tid / kGroup;
    const DcRoot<R> root = dc_secular_root<R, MathApprox>(min(j, K - 1), K, kept_d, kept_z, rho, part, kGroup,
                                                          GroupSum<kGroup>{});
    if (j < K && part == 0) {
      origin[j] = root.origin;
      tau[j] = root.tau;
      if (!root.converged) failed = 1;
    }
  }
  __syncthreads();
  for (int round = 0; round < rounds; ++round) {
    const int i = round * items + tid / kGroup;
    const int ii = min(i, K - 1);
    const R value = dc_lowner_z<R, MathApprox>(ii, K, kept_d, origin, tau, kept_z[ii], part, kGroup,
                                               GroupProduct<kGroup>{});
    if (i < K && part == 0) {
      zhat[i] = value;
      zd[i] = V2{value, kept_d[i]};
    }
  }
  __syncthreads();
  for (int round = 0; round < rounds; ++round) {
    const int j = round * items + tid / kGroup;
    const int jj = min(j, K - 1);
    const R value = dc_inverse_norm<R, MathApprox>(jj, K, kept_d, zhat, origin[jj], tau[jj], part, kGroup,
                                                   GroupSum<kGroup>{});
    if (j < K && part == 0) {
      scale[j] = value;
      d[j] = kept_d[origin[j]] + tau[j];
    }
  }
  for (int t = tid; t < gone; t += nt) d[K + t] = gone_d[t];
  if (tid == 0 && failed) info[b] = status::no_convergence;

  for (int r0 = 0; r0 < m; r0 += kRows) {
    const int rows = min(kRows, m - r0);
    __syncthreads();  // the previous panel is consumed (the first time: scale is complete)
    for (int at = tid; at < kRows * m; at += nt) {
      const int c = at / kRows, r = at % kRows;
      // Q = diag(Q₁, Q₂): outside the two diagonal blocks Z holds nothing of this node's.
      panel[at] = (r < rows && ((r0 + r < m1) == (c < m1))) ? Z(r0 + r, c) : R(0);
    }
    __syncthreads();
    if (tid < kRows)
      for (int t = 0; t < rotations; ++t) {
        R& x = panel[rot_p[t] * kRows + tid];
        R& y = panel[rot_q[t] * kRows + tid];
        const R c = rot_c[t], s = rot_s[t];
        const R nx = c * x + s * y, ny = c * y - s * x;
        x = nx;
        y = ny;
      }
    __syncthreads();
    // Columns j and j + items; pair q of this thread: rows 2·(part + kGroup·q) and the next.
    for (int j = tid / kGroup; j < K; j += 2 * items) {
      const int j2 = j + items < K ? j + items : j;
      R acc[2][2 * kPairs];
#pragma unroll
      for (int r = 0; r < 2 * kPairs; ++r) acc[0][r] = acc[1][r] = R(0);
      const R d1 = kept_d[origin[j]], t1 = tau[j], s1 = scale[j];
      const R d2 = kept_d[origin[j2]], t2 = tau[j2], s2 = j + items < K ? scale[j2] : R(0);
      for (int i = 0; i < K; ++i) {
        const V2 zdi = zd[i];
        const R u1 = zdi.x * MathApprox::rcp((zdi.y - d1) - t1) * s1;
        const R u2 = zdi.x * MathApprox::rcp((zdi.y - d2) - t2) * s2;
        const V2* col = reinterpret_cast<const V2*>(panel + kept_col[i] * kRows) + part;
#pragma unroll
        for (int q = 0; q < kPairs; ++q) {
          const V2 x = col[kGroup * q];
          acc[0][2 * q] = fma(x.x, u1, acc[0][2 * q]);
          acc[0][2 * q + 1] = fma(x.y, u1, acc[0][2 * q + 1]);
          acc[1][2 * q] = fma(x.x, u2, acc[1][2 * q]);
          acc[1][2 * q + 1] = fma(x.y, u2, acc[1][2 * q + 1]);
        }
      }
#pragma unroll
      for (int q = 0; q < kPairs; ++q)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = 2 * (part + kGroup * q) + h;
          if (r < rows) {
            Z(r0 + r, j) = acc[0][2 * q + h];
            if (j + items < K) Z(r0 + r, j2) = acc[1][2 * q + h];
          }
        }
    }
    for (int t = tid; t < gone; t += nt) {
      const R* col = panel + gone_col[t] * kRows;
      for (int r = 0; r < rows; ++r) Z(r0 + r, K + t) = col[r];
    }
  }
}

// After the last merge (vectors): sort the eigenvalues, write them unscaled, record the column
// permutation, and form the phases of S. One warp per matrix.
template <class T>
__global__ void finalize_kernel(int n, long long count, Work<T> work, sreal_t<T>* w_out, const int* info) {
  using R = sreal_t<T>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  const long long b = static_cast<long long>(blockIdx.x) * warps + warp;
  if (b >= count) return;
  R* w = w_out + b * n;
  if (info[b] == status::non_finite_input) {
    for (int k = lane; k < n; k += 32) w[k] = R(NAN);
    return;
  }
  const R* d = work.d + b * n;
  const int exponent = work.exponent[b];
  int* perm = work.perm + b * n;
  for (int i = lane; i < n; i += 32) {
    const R v = d[i];
    int rank = 0;
    for (int j = 0; j < n; ++j) rank += (d[j] < v) || (d[j] == v && j < i);
    w[rank] = scalbn(v, exponent);
    perm[rank] = i;
  }
  if (work.phase == nullptr) return;  // eigenvalues only
  // s₀ = 1, s_{k+1} = s_k·b_k/|b_k| (end of §2.2), as a prefix product over the warp: lane ℓ takes
  // a run of consecutive k, multiplies within it, then scales by the product of the runs before.
  T* phase = work.phase + b * n;
  const T* bk = work.b + b * n;
  const T one = from_real<T>(R(1));
  const int per = (n - 1 + 31) / 32, k0 = lane * per, k1 = min(n - 1, k0 + per);
  T run = one;
  for (int k = k0; k < k1; ++k) {
    const R mag = sqrt(abs2(bk[k]));
    if (mag > R(0)) run = run * (bk[k] * (R(1) / mag));
    phase[k + 1] = run;
  }
  T before = run;  // inclusive scan of the runs' products, then shifted by one lane
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    T other;
    if constexpr (is_cx<T>) other = T{__shfl_up_sync(0xffffffffu, before.x, offset), __shfl_up_sync(0xffffffffu, before.y, offset)};
    else other = __shfl_up_sync(0xffffffffu, before, offset);
    if (lane >= offset) before = other * before;
  }
  if constexpr (is_cx<T>) before = T{__shfl_up_sync(0xffffffffu, before.x, 1), __shfl_up_sync(0xffffffffu, before.y, 1)};
  else before = __shfl_up_sync(0xffffffffu, before, 1);
  if (lane == 0) {
    before = one;
    phase[0] = one;
  }
  __syncwarp();
  for (int k = k0; k < k1; ++k) phase[k + 1] = before * phase[k + 1];
}

// V = Q·S·Z·P into A. Block = up to 8 warps over 4 consecutive columns each; 8 lanes per column.
// W = S·Z·P for those columns lives in shared memory (n × 4·warps). Reflectors are brought in
// kReflectorChunk at a time by the whole block (coalesced), then each 8-lane group applies
// H_k = I − α_k w_k w_kᴴ, k = n−3 … 0, to its column: a dot product over rows k+1..n−1 (two
// accumulators, 8-lane reduction), then an axpy. Columns are independent: the only barriers are
// around the chunk loads.
constexpr int kReflectorChunk = 8;

template <class T>
__global__ void __launch_bounds__(kMaxBackWarps * 32) back_transform_kernel(T* a_all, long long lda, long long stride,
                                                                           int n, int panels, Work<T> work,
                                                                           const int* info) {
  using R = sreal_t<T>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int cols = (blockDim.x >> 5) * kColsPerWarp;
  T* W = reinterpret_cast<T*>(smem_raw);
  T* stage = W + static_cast<std::size_t>(n) * cols;  // kReflectorChunk reflectors, n each
  __shared__ R stage_alpha[kReflectorChunk];
  const long long b = blockIdx.x / panels;
  const int c0 = (blockIdx.x % panels) * cols;
  T* A = a_all + b * stride;
  const int tid = threadIdx.x;
  if (info[b] == status::non_finite_input) {
    for (int c = 0; c < cols && c0 + c < n; ++c)
      for (int i = tid; i < n; i += blockDim.x) A[i + (c0 + c) * lda] = from_real<T>(R(NAN));
    return;
  }
  const R* z = work.z + b * static_cast<long long>(n) * n;
  const T* phase = work.phase + b * n;
  const int* perm = work.perm + b * n;
  for (int c = 0; c < cols; ++c) {
    const long long src = c0 + c < n ? perm[c0 + c] : 0;
    for (int i = tid; i < n; i += blockDim.x)
      W[i + c * n] = c0 + c < n ? phase[i] * z[i + src * n] : from_real<T>(R(0));
  }
  const int warp = tid >> 5, lane = tid & 31;
  const int col = warp * kColsPerWarp + (lane >> 3);
  const int sub = lane & 7;
  T* wc = W + col * n;
  const R* alpha = work.alpha + b * n;
  const T* reflectors = work.reflectors + b * (static_cast<long long>(n) * (n - 1) / 2);
  for (int top = n - 3; top >= 0; top -= kReflectorChunk) {
    const int bottom = max(0, top - kReflectorChunk + 1);
    __syncthreads();  // the previous chunk is done (and, the first time, W is loaded)
    for (int k = top; k >= bottom; --k) {
      const int m = n - k - 1;
      const T* src = reflectors + reflector_offset(n, k);
      T* dst = stage + (top - k) * n;
      for (int i = tid; i < m; i += blockDim.x) dst[i] = src[i];
      if (tid == 0) stage_alpha[top - k] = alpha[k];
    }
    __syncthreads();
    for (int k = top; k >= bottom; --k) {
      const R alpha_k = stage_alpha[top - k];
      if (alpha_k == R(0)) continue;
      const int m = n - k - 1;
      const T* w = stage + (top - k) * n;
      T* v = wc + k + 1;
      T dot0 = from_real<T>(R(0)), dot1 = from_real<T>(R(0));
      int i = sub;
      for (; i + 8 < m; i += 16) {
        dot0 = fma_conj(dot0, w[i], v[i]);
        dot1 = fma_conj(dot1, w[i + 8], v[i + 8]);
      }
      if (i < m) dot0 = fma_conj(dot0, w[i], v[i]);
      const T dot = group_sum<8>(dot0 + dot1);
      const T coef = alpha_k * dot;
      for (int r = sub; r < m; r += 8) v[r] = v[r] - w[r] * coef;
    }
  }
  __syncthreads();
  for (int c = 0; c < cols && c0 + c < n; ++c)
    for (int i = tid; i < n; i += blockDim.x) A[i + (c0 + c) * lda] = W[i + c * n];
}

// The same product for n ≤ 512 with each column of V in registers: kLanes lanes per column, lane
// `sub` holding rows sub, sub + kLanes, … (kPerLane of them). Reflectors are staged kBackChunk at a
// time at full height (zeros outside rows k+1..n−1), so every lane runs the same unrolled loops
// with no bounds to test; shared memory carries only the reflectors, read as broadcasts (the
// kernel above keeps V in shared memory too, and its loads and stores of V are its bound).
// Reflectors are applied kGroupWY at a time in compact WY form (LAPACK's ?larft, forward,
// columnwise): H_k H_{k+1} ⋯ H_{k+3} = I − W·T·Wᴴ with T upper triangular, T(a,a) = α_a and
// T(0:a, a) = −α_a·T(0:a, 0:a)·W(:, 0:a)ᴴ w_a. A group costs one pass of four independent dot
// products, one reduction of four values and one pass of updates, where one reflector at a time
// is a chain of dot, reduction and update per reflector (the kernel's latency-bound critical path).
constexpr int kBackThreads = 256;
constexpr int kBackChunk = 16;
constexpr int kGroupWY = 4;

template <class T, int kLanes, int kPerLane>
__global__ void __launch_bounds__(kBackThreads, 2) back_transform_registers_kernel(T* a_all, long long lda,
                                                                                long long stride, int n, int panels,
                                                                                Work<T> work, const int* info) {
  using R = sreal_t<T>;
  constexpr int ld = kLanes * kPerLane;  // ≥ n
  constexpr int cols = kBackThreads / kLanes;
  constexpr int groups = kBackChunk / kGroupWY;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* stage = reinterpret_cast<T*>(smem_raw);  // kBackChunk reflectors, ld each; reflector j is H_{top−j}
  __shared__ R stage_alpha[kBackChunk];
  __shared__ T gram[groups][kGroupWY][kGroupWY];
  __shared__ T tmat[groups][kGroupWY][kGroupWY];
  const long long b = blockIdx.x / panels;
  const int tid = threadIdx.x, sub = tid % kLanes;
  const int col = (blockIdx.x % panels) * cols + tid / kLanes;
  T* A = a_all + b * stride;
  if (info[b] == status::non_finite_input) {
    if (col < n)
      for (int i = sub; i < n; i += kLanes) A[i + col * lda] = from_real<T>(R(NAN));
    return;
  }
  const T zero = from_real<T>(R(0));
  T v[kPerLane];
  {
    const R* z = work.z + b * static_cast<long long>(n) * n;
    const T* phase = work.phase + b * n;
    const long long src = col < n ? work.perm[b * n + col] : 0;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int i = sub + kLanes * t;
      v[t] = (i < n && col < n) ? phase[i] * z[i + src * n] : zero;
    }
  }
  const R* alpha = work.alpha + b * n;
  const T* reflectors = work.reflectors + b * (static_cast<long long>(n) * (n - 1) / 2);
  const int warp = tid >> 5, lane = tid & 31;
  // In group g, W's column a is reflector j = g·kGroupWY + kGroupWY−1−a (a = 0 is applied last).
  auto wy_row = [](int g, int a) { return g * kGroupWY + kGroupWY - 1 - a; };
  for (int top = n - 3; top >= 0; top -= kBackChunk) {
    const int used = min(kBackChunk, top + 1);  // reflectors in this chunk; the rest are H = I
    __syncthreads();  // the previous chunk is applied
    for (int at = tid; at < kBackChunk * ld; at += kBackThreads) {
      const int j = at / ld, i = at % ld, k = top - j;
      stage[at] = (j < used && i > k && i < n) ? reflectors[reflector_offset(n, k) + (i - k - 1)] : zero;
    }
    if (tid < kBackChunk) stage_alpha[tid] = tid < used ? alpha[top - tid] : R(0);
    __syncthreads();
    // Gram entries W(:,a)ᴴ W(:,c), a < c: six per group, one warp each (lanes over rows).
    constexpr int pairs = kGroupWY * (kGroupWY - 1) / 2;
    for (int task = warp; task < groups * pairs; task += kBackThreads / 32) {
      const int g = task / pairs;
      int p = task % pairs, a = 0;
      while (p >= kGroupWY - 1 - a) p -= kGroupWY - 1 - a, ++a;
      const int c = a + 1 + p;
      const T* wa = stage + wy_row(g, a) * ld;
      const T* wc = stage + wy_row(g, c) * ld;
      T dot = zero;
      for (int i = lane; i < ld; i += 32) dot = fma_conj(dot, wa[i], wc[i]);
      dot = warp_sum(dot);
      if (lane == 0) gram[g][a][c] = dot;
    }
    __syncthreads();
    if (tid < groups) {
      const int g = tid;
      for (int c = 0; c < kGroupWY; ++c) {
        const R alpha_c = stage_alpha[wy_row(g, c)];
        for (int a = 0; a < kGroupWY; ++a) tmat[g][a][c] = zero;
        tmat[g][c][c] = from_real<T>(alpha_c);
        for (int a = 0; a < c; ++a) {
          T sum = zero;
          for (int e = a; e < c; ++e) sum = fma_(sum, tmat[g][a][e], gram[g][e][c]);
          tmat[g][a][c] = -alpha_c * sum;
        }
      }
    }
    __syncthreads();
    for (int g = 0; g < groups; ++g) {
      if (g * kGroupWY >= used) break;
      const T* w[kGroupWY];
#pragma unroll
      for (int a = 0; a < kGroupWY; ++a) w[a] = stage + wy_row(g, a) * ld + sub;
      T x[kGroupWY];
#pragma unroll
      for (int a = 0; a < kGroupWY; ++a) x[a] = zero;
#pragma unroll
      for (int t = 0; t < kPerLane; ++t)
#pragma unroll
        for (int a = 0; a < kGroupWY; ++a) x[a] = fma_conj(x[a], w[a][kLanes * t], v[t]);
#pragma unroll
      for (int a = 0; a < kGroupWY; ++a) x[a] = group_sum<kLanes>(x[a]);
      // Keeps the compiler from holding the dot pass's loads of W for the update pass (4·kPerLane
      // values: enough to make the kernel spill) — the update reloads them, as broadcasts.
      __syncwarp();
      T y[kGroupWY];  // T·x
#pragma unroll
      for (int a = 0; a < kGroupWY; ++a) {
        y[a] = zero;
#pragma unroll
        for (int c = a; c < kGroupWY; ++c) y[a] = fma_(y[a], tmat[g][a][c], x[c]);
      }
#pragma unroll
      for (int t = 0; t < kPerLane; ++t)
#pragma unroll
        for (int a = 0; a < kGroupWY; ++a) v[t] = v[t] - w[a][kLanes * t] * y[a];
    }
  }
  if (col < n) {
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int i = sub + kLanes * t;
      if (i < n) A[i + col * lda] = v[t];
    }
  }
}

// ============================================================================================
// host side
// ============================================================================================

template <class K>
void allow_shared(K kernel, std::size_t bytes) {
  COVFLOW_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

template <class T> constexpr int back_warps(int n) {
  const std::size_t stage = sizeof(T) * kReflectorChunk * std::size_t(n);
  const auto fit = static_cast<int>((kSmemBudget - stage) / (sizeof(T) * kColsPerWarp * std::size_t(n)));
  return fit < 1 ? 1 : (fit > kMaxBackWarps ? kMaxBackWarps : fit);
}

// Cluster size for the reduction: the smallest power of two whose share of the triangle fits in
// shared memory; then, while the batch does not fit on the GPU in one wave, doubled as long as the
// doubled grid does (a batch of 180 on 132 SMs: two waves of one block per matrix become one wave
// of two). A saturated GPU gains nothing from more blocks per matrix, only barrier traffic.
// COVFLOW_HEEV_CLUSTER=c forces c (for measurements).
template <class T>
int choose_cluster(int n, long long count, const DeviceInfo& device) {
  int C = 1;
  while (C <= kMaxCluster && cluster_smem<T>(n, C) > kSmemBudget) C *= 2;
  if (C > kMaxCluster || device.cc_major < 9) return 0;  // global-memory reduction
  static const int reduction = [] {  // COVFLOW_HEEV_REDUCTION=stream|cluster forces one (for measurements)
    const char* text = std::getenv("COVFLOW_HEEV_REDUCTION");
    const std::string choice = text != nullptr ? text : "";
    return choice == "stream" ? 1 : choice == "cluster" ? 2 : 0;
  }();
  if (reduction == 1) return 0;
  // A triangle that needs more than one block's shared memory streams instead, a block per matrix,
  // once the batch is large enough to fill the GPU with such blocks: smaller batches, and triangles
  // one block holds, are faster on a cluster (the crossover is measured in docs/performance-history.md).
  if (reduction == 0 && C >= 2 && count >= std::max(1, device.multiprocessors / 4)) return 0;
  static const int forced = [] {
    const char* text = std::getenv("COVFLOW_HEEV_CLUSTER");
    return text != nullptr ? std::atoi(text) : 0;
  }();
  if (forced > 0 && (forced & (forced - 1)) == 0 && forced <= kMaxCluster && forced >= C) return forced;
  const std::size_t smem_per_sm = device.shared_memory_per_block + 1024;
  auto resident = [&](int c) {
    const long long per_sm = std::max<long long>(1, static_cast<long long>(smem_per_sm / (cluster_smem<T>(n, c) + 1024)));
    return static_cast<long long>(device.multiprocessors) * std::min<long long>(per_sm, kTridiagThreads == 256 ? 8 : 4);
  };
  while (C < 8 && count * C > resident(C) && count * 2 * C <= resident(2 * C)) C *= 2;
  return C;
}

// Rows per leaf of the divide and conquer: kLeafMax, or COVFLOW_HEEV_LEAF=2…32 (for measurements).
int leaf_max() {
  static const int value = [] {
    const char* text = std::getenv("COVFLOW_HEEV_LEAF");
    const int forced = text != nullptr ? std::atoi(text) : 0;
    return forced >= 2 && forced <= 32 ? forced : kLeafMax;
  }();
  return value;
}

}  // namespace

template <class T>
std::size_t heev_cuda_workspace(std::int64_t n, std::int64_t count, const HeevOptions& options) {
  if (n <= kSmallMax) return 0;
  return Layout<device_t<T>>(static_cast<int>(n), count, options.vectors).bytes;
}

template <class T>
void heev_cuda(CudaContext& context, Batch<T> a, std::span<real_t<T>> w, std::span<int> info, const HeevOptions& options) {
  using D = device_t<T>;
  using R = real_t<T>;
  context.make_current();
  const int n = static_cast<int>(a.rows);
  if (n > 1024) throw InvalidArgument("heev: the CUDA path handles n ≤ 1024 (got " + std::to_string(n) + ")");
  cudaStream_t stream = context.stream();
  auto* A = reinterpret_cast<D*>(a.data);
  const bool upper = options.uplo == Uplo::upper;
  const long long count = a.count;

  if (n <= kSmallMax) {
    const auto blocks = static_cast<unsigned>((count + kSmallWarps - 1) / kSmallWarps);
    if (n <= 16) {
      const std::size_t smem = sizeof(SmallShared<D, 16>) * kSmallWarps;
      allow_shared(small_heev_kernel<D, 16>, smem);
      small_heev_kernel<D, 16><<<blocks, kSmallWarps * 32, smem, stream>>>(A, a.ld, a.stride, n, count, upper,
                                                                          options.vectors, w.data(), info.data());
    } else {
      const std::size_t smem = sizeof(SmallShared<D, 32>) * kSmallWarps;
      allow_shared(small_heev_kernel<D, 32>, smem);
      small_heev_kernel<D, 32><<<blocks, kSmallWarps * 32, smem, stream>>>(A, a.ld, a.stride, n, count, upper,
                                                                          options.vectors, w.data(), info.data());
    }
    COVFLOW_CHECK_LAUNCH();
    return;
  }

  const Layout<D> layout(n, count, options.vectors);
  auto* base = static_cast<std::byte*>(context.workspace().acquire(layout.bytes));
  const Work<D> work = bind(layout, base);

  // 1. reduction to tridiagonal form
  const int C = choose_cluster<D>(n, count, context.info());
  if (C > 0) {
    const std::size_t smem = cluster_smem<D>(n, C);
    allow_shared(tridiagonalize_kernel<D>, smem);
    if (C > 8)
      COVFLOW_CUDA_TRY(cudaFuncSetAttribute(tridiagonalize_kernel<D>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>(count * C));
    config.blockDim = dim3(kTridiagThreads);
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = static_cast<unsigned>(C);
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    int clusters = 0;
    COVFLOW_CUDA_TRY(cudaOccupancyMaxActiveClusters(&clusters, tridiagonalize_kernel<D>, &config));
    if (clusters < 1)
      throw Unavailable("heev: the device cannot schedule a cluster of " + std::to_string(C) + " blocks with " +
                        std::to_string(smem >> 10) + " KiB of shared memory each");
    COVFLOW_CUDA_TRY(cudaLaunchKernelEx(&config, tridiagonalize_kernel<D>, A, a.ld, a.stride, n, upper, work, info.data()));
  } else {
    const std::size_t smem = stream_smem<D>(n);
    allow_shared(tridiagonalize_global_kernel<D>, smem);
    tridiagonalize_global_kernel<D><<<static_cast<unsigned>(count), kStreamThreads, smem, stream>>>(
        A, a.ld, a.stride, n, upper, work, info.data());
  }
  COVFLOW_CHECK_LAUNCH();

  // 2./3. divide and conquer — the leaves, then one launch per level of merges.
  const int levels = dc_levels(n, leaf_max());
  {
    const long long leaves = count << levels;
    const std::size_t smem = sizeof(LeafShared<R>) * kLeafWarps;
    allow_shared(dc_leaf_kernel<R>, smem);
    dc_leaf_kernel<R><<<static_cast<unsigned>((leaves + kLeafWarps - 1) / kLeafWarps), kLeafWarps * 32, smem, stream>>>(
        n, count, levels, work.state, work.d, work.e, work.z, info.data());
    COVFLOW_CHECK_LAUNCH();
  }
  for (int level = levels - 1; level >= 0; --level) {
    const int m = (n + (1 << level) - 1) >> level;  // the level's largest node
    const auto blocks = static_cast<unsigned>(count << level);
    auto merge = [&](auto kernel, int rows, int group) {
      const int threads = ((m + 1) / 2 * group + 31) / 32 * 32;  // two columns of the product each
      const std::size_t smem = merge_smem<R>(m, rows);
      allow_shared(kernel, smem);
      kernel<<<blocks, threads, smem, stream>>>(n, count, level, work.state, work.d, work.e, work.z, info.data());
      COVFLOW_CHECK_LAUNCH();
    };
    // Threads per item: 4 up to m = 128, 2 up to 256, 1 above (at most 256 threads up to 256, so
    // that two blocks fit on an SM; 512 above).
    if (m <= 128) merge(dc_merge_kernel<R, 32, 4, 256>, 32, 4);
    else if (m <= 256) merge(dc_merge_kernel<R, 32, 2, 256>, 32, 2);
    else merge(dc_merge_kernel<R, 8, 1, 512>, 8, 1);
  }
  finalize_kernel<D><<<static_cast<unsigned>(count), 32, 0, stream>>>(n, count, work, w.data(), info.data());
  COVFLOW_CHECK_LAUNCH();
  if (!options.vectors) return;

  // 4. back-transform into A
  auto back_registers = [&](auto kernel, int lanes, int per_lane) {
    const int cols = kBackThreads / lanes;
    const int panels = (n + cols - 1) / cols;
    const std::size_t smem = sizeof(D) * kBackChunk * std::size_t(lanes) * per_lane;
    allow_shared(kernel, smem);
    kernel<<<static_cast<unsigned>(count * panels), kBackThreads, smem, stream>>>(A, a.ld, a.stride, n, panels, work,
                                                                                 info.data());
    COVFLOW_CHECK_LAUNCH();
  };
  if (n <= 64) return back_registers(back_transform_registers_kernel<D, 8, 8>, 8, 8);
  if (n <= 128) return back_registers(back_transform_registers_kernel<D, 8, 16>, 8, 16);
  if (n <= 256) return back_registers(back_transform_registers_kernel<D, 16, 16>, 16, 16);
  if (n <= 512) return back_registers(back_transform_registers_kernel<D, 32, 16>, 32, 16);
  const int warps = back_warps<D>(n);
  const int cols = warps * kColsPerWarp;
  const int panels = (n + cols - 1) / cols;
  const std::size_t back_smem = sizeof(D) * std::size_t(n) * (cols + kReflectorChunk);
  allow_shared(back_transform_kernel<D>, back_smem);
  back_transform_kernel<D><<<static_cast<unsigned>(count * panels), warps * 32, back_smem, stream>>>(
      A, a.ld, a.stride, n, panels, work, info.data());
  COVFLOW_CHECK_LAUNCH();
}

#define COVFLOW_HEEV_CUDA(T)                                                                     \
  template std::size_t heev_cuda_workspace<T>(std::int64_t, std::int64_t, const HeevOptions&); \
  template void heev_cuda<T>(CudaContext&, Batch<T>, std::span<real_t<T>>, std::span<int>, const HeevOptions&);
COVFLOW_HEEV_CUDA(f32)
COVFLOW_HEEV_CUDA(f64)
COVFLOW_HEEV_CUDA(cf32)
COVFLOW_HEEV_CUDA(cf64)
#undef COVFLOW_HEEV_CUDA

}  // namespace covflow::linalg::detail

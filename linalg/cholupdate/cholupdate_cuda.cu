// cholupdate on the GPU, after C. Walder, "Rank k Cholesky Up/Down-dating on the GPU: gpucholmodV0.2"
// (2010).
//
// The arithmetic is the CPU path's (cholupdate_cpu.cpp): column j's k rotations generated together
// from prefix sums of the diagonal, α₋₁ = L(j, j), α_p² = α_{p−1}² + σ|w_jp|². Downdates use
// Algorithm 1 of §2 in its hyperbolic form, c_p = α_p/α_{p−1}, applied to row i in the mixed form
// with t = α_p·L(i, j):
//   t ← α₋₁·L(i, j);  for p: t ← t − w̄_jp w_ip;  w_ip ← c_p w_ip − (w_jp/(α_{p−1}α_p))·t;
//   L̃(i, j) = t/α_{k−1}.
// Updates use unitary plane rotations, c_p = α_{p−1}/α_p, s_p = w_jp/α_p:
//   t ← L(i, j);  for p: (t, w_ip) ← (c_p t + s̄_p w_ip, c_p w_ip − s_p t);  L̃(i, j) = t
// (the hyperbolic form cancels terms of size 1/L(j, j) in an update when L(j, j) is tiny; see
// cholupdate_cpu.cpp). Both are stored in the same fields: c, bneg (−w_jp/(α_{p−1}α_p) or −s_p),
// g (−w̄_jp or s̄_p), and scal = {α₋₁, 1/α_{k−1}, α_{k−1}} (updates: {1, 1, α_{k−1}}).
// Each thread owns one row i and holds its k entries of W = V (transformed as the columns go by)
// in registers: the paper's ElementsPerThread (§4.1) is k, rounded up to a template size
// K ∈ {1, 4, 16, 32, 64} (k ≤ 64; the p < k guards cost predicated-off instructions only).
// Per column, the rotation parameters are made by the thread (or warp) owning row j and read by
// every thread below it.
//
// Four organisations:
//
// updates, n ≤ 128, K·⌈n/32⌉ ≤ 16  warp_update_kernel — one warp per matrix (below).
//
// n ≤ 256  small_kernel — one thread block per matrix (the adaptive-filter batch: one factor
//          per range/Doppler cell), thread i = row i, the columns swept left to right with one
//          __syncthreads per column (rotation parameters double-buffered in shared memory, so the
//          owner of column j+1 can write its parameters while the others still read column j's).
//          Every element of L is read once (column j by 32 consecutive rows per warp: coalesced)
//          and its new value goes to a copy of the lower triangle in shared memory, packed by
//          columns; only when the matrix succeeded is the copy written back, so a failed
//          downdate or a NaN leaves L untouched. Budget: the packed triangle, n(n+1)/2 elements
//          (64×64 complex double: 33 KB, six blocks per SM). When it does not fit (complex double
//          n ≳ 160) the block sweeps twice instead: a probe that stores nothing, then — only if
//          the probe succeeded — the same sweep storing into L (identical arithmetic). Updates
//          skip both: the inputs that can make an update fail are checked first and one sweep
//          writes L in place (no shared copy: more blocks per SM).
//
// n > 256  the whole factor on the GPU in two kernels, no launch per column and no host panels
//          (the paper's CPU/GPU split of §4 is replaced by a device-side dependency counter):
//   pipeline_kernel<Commit = false> — one warp per block of 32 rows (§3's CholeskyModifyA
//          order: each row block applies the columns left of it, then sweeps its own 32×32
//          diagonal block). Blocks take row blocks from a per-matrix ticket counter, so a block
//          only ever waits on row blocks already taken by running blocks (no deadlock without a
//          cooperative launch). The owner of a diagonal block publishes the rotation parameters of
//          its columns to the workspace and advances a per-matrix progress counter every
//          kPublish columns (fence, then a release store); row blocks below wait on the counter
//          (one lane spins with acquire loads) and apply the published columns tile by tile
//          while the diagonal moves on, so the critical path is the diagonal sweep itself. This
//          pass stores no L: it finds every rotation, the first failing column and any NaN.
//   pipeline_kernel<Commit = true> — if the matrix succeeded, every row block (all at once: the
//          rotations are known) replays its rows with the stored parameters and writes L̃.
//          Two passes instead of a copy of L: the workspace is O(n·k) per matrix, not O(n²).
//          Budget per block (one warp): the row's k entries of W in registers (complex double
//          k = 64 spills to local memory), kPublish columns of parameters in shared memory.
//
// n > 256, updates with k ≤ 16 and n ≥ 16k: first the product form (cholupdate_product.cuh):
//          L̃ = L·M with M the closed-form Cholesky factor of I + WWᴴ, W = L⁻¹V (Gill, Golub,
//          Murray & Saunders' method C1 generalised to rank k; not in the paper). Its only chain is
//          the triangular solve for W, one step per 64 rows instead of one per column and rotation;
//          the rest is parallel over columns and rows. Three kernels (trsm_kernel, column_kernel,
//          apply_kernel, on 64×64 tiles); a guard decided per matrix on the device (W, m_j, z_j
//          finite, diagonal positive, 1 + ‖W‖²_F ≤ 0.01/ε, and ρ = max_r Σ_i |L(r, i)|‖w_i‖₁ /
//          ‖L̃(r, :)‖ ≤ n) lets apply_kernel write L̃ and mark the matrix done, or write nothing.
//          Both pipeline_kernel launches follow unchanged and return at once for matrices that are
//          done, so the rejected ones (NaN, a bad diagonal, an ill-conditioned W) get the rotations
//          and their diagnostics exactly as if the product form had not run. Downdates, k > 16 and
//          n < 16k take the pipeline alone. The product path's buffers share the per-matrix
//          workspace with the pipeline's parameters (stream order: the pipeline only writes there
//          after the product kernels are done): O(n·k) per matrix plus the apply's segment sums,
//          k·64 elements per 64 × 1024 block of the factor (n = 5000, k = 16, double: 3.2 MB).
//          Real double with 4 < k ≤ 16 runs the same mathematics on the FP64 tensor cores instead
//          (cholupdate_product_tc.cuh): trsm_tc_kernel (the solve with one more block of lookahead,
//          its column workers making the column parameters and M_J = diag(m) + strict lower part of
//          W_J Z_Jᵀ), apply_tc_kernel (L̃_RJ = L_RJ·M_J + carry·Z_Jᵀ), launched as a programmatic
//          dependent so that it runs under the solve, row block by row block as the chain makes
//          them ready, first copying each tile it overwrites, and finish_tc_kernel, which decides
//          the guard once the solve has ended: commit, or put the copied tiles back. Its workspace
//          adds M_J (64² per row block) and that copy of the lower tiles (≈ 4n² bytes).
//
// No host synchronisation: status goes to `info` on the device.
#include <cuda/atomic>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/async_copy.cuh"
#include "../common/device_scalar.cuh"
#include "cholupdate_impl.hpp"
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "cholupdate_product.cuh"
#include "cholupdate_product_tc.cuh"

namespace covflow::linalg::detail {
namespace {

constexpr int kSmallMaxN = 256;                 // n handled by one thread block per matrix
constexpr int kRowBlock = 32;                   // rows per block (one warp) in the pipeline
constexpr int kPublish = 8;                     // columns per progress step and per parameter tile
constexpr std::size_t kSmemBudget = 200 * 1024; // shared memory a block plans for (sm_90: 227 KB)
constexpr long long kMaxGridY = 65535;

constexpr std::size_t align16(std::size_t bytes) { return (bytes + 15) / 16 * 16; }
constexpr std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Rotation parameters of a run of columns: column j's are scal[3j..3j+2] = {α₋₁, 1/α_{k−1},
// α_{k−1}} and c / bneg / g[j·stride + p] for p < k.
template <class D>
struct Params {
  using R = sreal_t<D>;
  R* scal;
  R* c;
  D* bneg;
  D* g;
  int stride;

  __device__ Params column(int j) const {
    return Params{scal + 3 * j, c + j * stride, bneg + j * stride, g + j * stride, stride};
  }
  // Bytes of `columns` columns with room for `stride` rotations each, 16-byte aligned parts.
  __host__ __device__ static constexpr std::size_t bytes(int columns, int stride) {
    return align16(sizeof(R) * 3 * columns) + align16(sizeof(R) * columns * stride) +
           2 * align16(sizeof(D) * columns * stride);
  }
  __host__ __device__ static Params carve(unsigned char* base, int columns, int stride) {
    Params p;
    p.scal = reinterpret_cast<R*>(base);
    base += align16(sizeof(R) * 3 * columns);
    p.c = reinterpret_cast<R*>(base);
    base += align16(sizeof(R) * columns * stride);
    p.bneg = reinterpret_cast<D*>(base);
    base += align16(sizeof(D) * columns * stride);
    p.g = reinterpret_cast<D*>(base);
    p.stride = stride;
    return p;
  }
};

// Copies column `from` of `src` to column `to` of `dst` (k rotations), lanes `lane` of `lanes`.
template <class D>
__device__ void copy_column(const Params<D>& dst, int to, const Params<D>& src, int from, int k, int lane, int lanes) {
  for (int e = lane; e < 3; e += lanes) dst.scal[3 * to + e] = src.scal[3 * from + e];
  for (int p = lane; p < k; p += lanes) {
    dst.c[to * dst.stride + p] = src.c[from * src.stride + p];
    dst.bneg[to * dst.stride + p] = src.bneg[from * src.stride + p];
    dst.g[to * dst.stride + p] = src.g[from * src.stride + p];
  }
}

// The rotations of one column from α = Re L(j, j) and the row's w (its owner's registers), into
// column 0 of `out`. False when α ≤ 0 (not a factor) or some α_p² ≤ 0 (the downdate loses
// positive definiteness) or the arithmetic overflowed; the failed rotations are then replaced by
// the identity so that the sweep goes on with finite numbers (its results are never stored).
template <class D, int K>
__device__ bool make_rotations(const D (&w)[K], int k, sreal_t<D> alpha, sreal_t<D> sigma, const Params<D>& out) {
  using R = sreal_t<D>;
  bool ok = alpha > R(0) && isfinite(alpha);
  if (!ok) alpha = R(1);
  R square = alpha * alpha;
  R previous = alpha;
#pragma unroll
  for (int p = 0; p < K; ++p) {
    if (p < k) {
      const R next = fma(sigma, abs2(w[p]), square);
      if (next > R(0) && isfinite(next)) {
        const R current = sqrt(next);
        if (sigma > R(0)) {  // unitary
          const R inverse = R(1) / current;
          out.c[p] = previous * inverse;
          out.bneg[p] = w[p] * (-inverse);
          out.g[p] = conj_of(w[p]) * inverse;
        } else {
          out.c[p] = current / previous;
          out.bneg[p] = w[p] * (R(-1) / (previous * current));
          out.g[p] = conj_of(w[p]) * sigma;
        }
        square = next;
        previous = current;
      } else {
        ok = false;
        out.c[p] = R(1);
        out.bneg[p] = from_real<D>(R(0));
        out.g[p] = from_real<D>(R(0));
      }
    }
  }
  const bool unitary = sigma > R(0);
  out.scal[0] = unitary ? R(1) : alpha;
  out.scal[1] = unitary ? R(1) : R(1) / previous;
  out.scal[2] = previous;
  return ok;
}

// Column `column` of `params` applied to one row: returns L̃(i, j), updates w. `unitary`: the
// parameters are an update's plane rotations (see the top of the file), else a downdate's.
template <class D, int K>
__device__ D apply_column(D lij, D (&w)[K], int k, const Params<D>& params, int column, bool unitary) {
  using R = sreal_t<D>;
  const R* scal = params.scal + 3 * column;
  const R* c = params.c + column * params.stride;
  const D* bneg = params.bneg + column * params.stride;
  const D* g = params.g + column * params.stride;
  if (unitary) {
    D t = lij;
#pragma unroll
    for (int p = 0; p < K; ++p) {
      if (p < k) {
        const D old = t;
        t = fma_(old * c[p], g[p], w[p]);
        w[p] = fma_(w[p] * c[p], bneg[p], old);
      }
    }
    return t;
  }
  D t = lij * scal[0];
#pragma unroll
  for (int p = 0; p < K; ++p) {
    if (p < k) {
      t = fma_(t, g[p], w[p]);
      w[p] = fma_(w[p] * c[p], bneg[p], t);
    }
  }
  return t * scal[1];
}

template <class D, int K>
__device__ bool load_row(D (&w)[K], const D* v, long long ldv, int i, int k) {
  bool finite = true;
#pragma unroll
  for (int p = 0; p < K; ++p) {
    w[p] = from_real<D>(sreal_t<D>(0));
    if (p < k) {
      w[p] = v[i + p * ldv];
      finite = finite && is_finite(w[p]);
    }
  }
  return finite;
}

// ---- n ≤ 256: one block per matrix ---------------------------------------------------------

__device__ inline int packed_offset(int n, int i, int j) { return j * n - j * (j - 1) / 2 + (i - j); }

template <class D, int K>
__global__ void __launch_bounds__(kSmallMaxN) small_kernel(D* l_all, long long ldl, long long stride_l, const D* v_all,
                                                          long long ldv, long long stride_v, int n, int k,
                                                          sreal_t<D> sigma, bool staged, bool direct, int* info) {
  extern __shared__ __align__(16) unsigned char smem[];
  const Params<D> slots = Params<D>::carve(smem, 2, K);
  D* stage = reinterpret_cast<D*>(smem + Params<D>::bytes(2, K));
  __shared__ int bad, fail;

  const long long m = blockIdx.x;
  D* L = l_all + m * stride_l;
  const D* V = v_all + m * stride_v;
  const int i = threadIdx.x;
  const bool row = i < n;
  if (i == 0) {
    bad = 0;
    fail = n;
  }
  __syncthreads();
  D w[K];
  if (row && !load_row(w, V, ldv, i, k)) atomicOr(&bad, 1);

  // direct (updates): every input that could make the sweep fail — a NaN or Inf in L's lower
  // triangle, a diagonal that is not positive (V was checked by load_row) — is checked first,
  // and then one sweep writes L̃ in place. An update of finite input with a positive diagonal
  // only fails by overflow (the header's one exception to "left as it was"). No shared copy, so
  // about five times as many blocks fit on an SM as when staged.
  if (direct && row) {
    bool finite = true;
    for (int j = 0; j <= i; ++j) finite = finite && is_finite(L[i + j * ldl]);
    if (!finite) atomicOr(&bad, 1);
    else if (!(real_part(L[i + i * ldl]) > sreal_t<D>(0))) atomicMin(&fail, i);
  }
  // staged: one sweep into the shared copy. direct: one sweep into L after the check above.
  // Otherwise pass 0 probes and pass 1 stores into L.
  for (int pass = staged || direct ? 1 : 0; pass < 2; ++pass) {
    const bool store = pass == 1;
    if (store && !staged) {
      __syncthreads();
      if (bad != 0 || fail < n) break;  // uniform: read after a barrier
      if (row && !direct) load_row(w, V, ldv, i, k);  // the probe consumed w
    }
    // Software pipelining: thread i loads L(i, j + 1) while column j is processed, so neither the
    // diagonal owner nor the rows below wait a global-memory latency on every column (64 such
    // waits of ~1 µs each would dominate the 64×64 batch).
    D next = from_real<D>(sreal_t<D>(0));
    if (row) next = L[i];  // L(i, 0)
    for (int j = 0; j < n; ++j) {
      const Params<D> slot = slots.column(j & 1);
      const D current = next;  // L(i, j) for i ≥ j
      if (row && j + 1 <= i) next = L[i + (j + 1) * ldl];
      if (i == j) {
        const D ljj = current;
        if (!is_finite(ljj)) atomicOr(&bad, 1);
        if (!make_rotations(w, k, real_part(ljj), sigma, slot)) atomicMin(&fail, j);
        if (store) {
          const D diagonal = from_real<D>(slot.scal[2]);
          if (staged) stage[packed_offset(n, j, j)] = diagonal;
          else L[j + j * ldl] = diagonal;
        }
      }
      __syncthreads();
      if (row && i > j) {
        const D lij = current;
        if (!is_finite(lij)) atomicOr(&bad, 1);
        const D updated = apply_column(lij, w, k, slot, 0, sigma > sreal_t<D>(0));
        if (store) {
          if (staged) stage[packed_offset(n, i, j)] = updated;
          else L[i + j * ldl] = updated;
        }
      }
    }
  }
  __syncthreads();
  const int status = bad != 0 ? status::non_finite_input : fail < n ? fail + 1 : 0;
  if (staged && status == 0 && row)
    for (int j = 0; j <= i; ++j) L[i + j * ldl] = stage[packed_offset(n, i, j)];
  if (i == 0) info[m] = status;
}

// ---- updates, n ≤ 128 and k small: one warp per matrix ---------------------------------------

constexpr int kWarpMatrices = 4;  // matrices (warps) per block
// Columns of L staged ahead in shared memory per warp: a load issued only one column ahead would
// still wait on memory every column (the whole batch is in flight: 4096 × 33 KB of triangles, 2.7×
// the L2). 4 × 64 rows of complex double is 4 KB per warp.
template <int S> constexpr int warp_ring() { return S <= 2 ? 4 : 2; }

// Whether an element is finite, from the 32-bit words that hold its exponents (a complex double
// is read as one 16-byte load: its two exponent words are not adjacent, and two 4-byte loads cost
// the batch more issue slots than the two registers they save).
template <class D>
__device__ inline bool exponents_finite(const D* element) {
  const auto* words = reinterpret_cast<const unsigned*>(element);
  if constexpr (std::is_same_v<D, double>) {
    return (words[1] & 0x7ff00000u) != 0x7ff00000u;
  } else if constexpr (std::is_same_v<D, Cx<double>>) {
    const uint4 all = *reinterpret_cast<const uint4*>(element);  // one load instruction, not two
    return (all.y & 0x7ff00000u) != 0x7ff00000u && (all.w & 0x7ff00000u) != 0x7ff00000u;
  } else if constexpr (std::is_same_v<D, float>) {
    return (words[0] & 0x7f800000u) != 0x7f800000u;
  } else {
    return (words[0] & 0x7f800000u) != 0x7f800000u && (words[1] & 0x7f800000u) != 0x7f800000u;
  }
}

__device__ inline double shfl_idx(double x, int lane) { return __shfl_sync(0xffffffffu, x, lane); }
__device__ inline float shfl_idx(float x, int lane) { return __shfl_sync(0xffffffffu, x, lane); }
template <class R> __device__ inline Cx<R> shfl_idx(Cx<R> x, int lane) { return {shfl_idx(x.x, lane), shfl_idx(x.y, lane)}; }

// Column j's rotations (an update's unitary ones) made by the whole warp, lane p making rotation p
// (the make_rotations arithmetic, spread out): the owner's row of W and its diagonal are
// broadcast, the prefix sums α_p² = α² + Σ_{q≤p} |w_jq|² come from a shuffle scan over lanes
// 0 … K−1, and with ρ_p = 1/α_p (one reciprocal square root per lane, ρ₋₁ = 1/α)
// c_p = α_{p−1}/α_p = α_{p−1}²·ρ_{p−1}·ρ_p and s_p = w_jp·ρ_p — no division. Made by one lane, the
// k rotations (k dependent square roots and 2k divisions, issued for the whole warp with one lane
// active) would be the larger part of the batch's time. Lane k−1 writes the new diagonal α_{k−1}
// to `diagonal`.
// `column` is column j in the warp's ring (the lane's row s at column[s·32 + lane]).
// Returns false (on every lane) when some α_p² is not a positive finite number: inputs are
// checked before the sweep, so only an overflow gets here; the failed rotations become the
// identity so that the sweep goes on with finite numbers.
template <class D, int K, int S>
__device__ bool warp_rotations(const D (&w)[S][K], const D* column, int j, int k, const Params<D>& out,
                               D* diagonal, int lane) {
  using R = sreal_t<D>;
  const int owner = j % 32;
  const int owner_slot = j / 32;
  R alpha = R(0);
  D mine = from_real<D>(R(0));
#pragma unroll
  for (int s = 0; s < S; ++s) {
    if (s == owner_slot) {
      alpha = shfl_idx(real_part(column[s * 32 + lane]), owner);
#pragma unroll
      for (int p = 0; p < K; ++p) {
        const D x = shfl_idx(w[s][p], owner);
        if (lane == p) mine = x;
      }
    }
  }
  R prefix = lane < k ? abs2(mine) : R(0);
#pragma unroll
  for (int d = 1; d < K; d *= 2) {
    const R below = __shfl_up_sync(0xffffffffu, prefix, d);
    if (lane >= d) prefix += below;
  }
  const R square = alpha * alpha;
  const R next = square + prefix;
  R previous_square = __shfl_up_sync(0xffffffffu, next, 1);
  if (lane == 0) previous_square = square;
  const bool ok = lane >= k || (next > R(0) && isfinite(next) && previous_square > R(0));
  if (lane < k) {
    if (ok) {
      const R rho = rsqrt(next);
      const R rho_previous = rsqrt(previous_square);
      const R current_alpha = next * rho;
      out.c[lane] = (previous_square * rho_previous) * rho;  // α_{p−1}/α_p
      out.bneg[lane] = mine * (-rho);                       // −s_p
      out.g[lane] = conj_of(mine) * rho;                    // s̄_p
      if (lane == k - 1) {
        out.scal[1] = R(1);
        out.scal[2] = current_alpha;
        *diagonal = from_real<D>(current_alpha);
      }
    } else {
      out.c[lane] = R(1);
      out.bneg[lane] = from_real<D>(R(0));
      out.g[lane] = from_real<D>(R(0));
      if (lane == k - 1) {
        out.scal[1] = R(1);
        out.scal[2] = R(1);
        *diagonal = from_real<D>(R(1));
      }
    }
  }
  if (lane == 0) out.scal[0] = R(1);
  return __all_sync(0xffffffffu, ok);
}

// The adaptive-filter batch (4096 cells of 64×64, k = 4) as updates: one warp per matrix, lane l
// owning rows l, l + 32, … (S rows, n ≤ 32·S), W's rows in registers. Per column the warp makes
// the rotations (warp_rotations) into its parameter slot (double-buffered in shared memory), one
// __syncwarp, and every lane applies them to its rows and writes L̃(i, j) in place; the columns
// come through a cp.async ring. Against small_kernel (a block of n threads, one __syncthreads
// per column, at most 32 resident blocks per SM): no block barrier, and the whole batch of 4096
// in flight at once (64 registers, 8 blocks of 4 warps per SM). Inputs are checked first (as
// small_kernel's direct mode), so L is untouched when one is not finite or a diagonal is not
// positive. Its timings against small_kernel are in docs/performance-history.md.
template <class D, int K, int S>
__global__ void __launch_bounds__(kWarpMatrices * 32, 8) warp_update_kernel(D* l_all, long long ldl, long long stride_l,
                                                                        const D* v_all, long long ldv,
                                                                        long long stride_v, int n, int k,
                                                                        long long count, int* info) {
  using R = sreal_t<D>;
  constexpr int Ring = warp_ring<S>();
  constexpr std::size_t kSlotBytes = Params<D>::bytes(2, K);
  __shared__ __align__(16) unsigned char smem[kWarpMatrices][kSlotBytes];
  __shared__ __align__(16) unsigned char rings[kWarpMatrices][sizeof(D) * Ring * S * 32];
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const long long m = static_cast<long long>(blockIdx.x) * kWarpMatrices + warp;
  if (m >= count) return;  // the whole warp: no block-wide barrier in this kernel
  const Params<D> slots = Params<D>::carve(smem[warp], 2, K);
  D* L = l_all + m * stride_l;
  const D* V = v_all + m * stride_v;

  bool finite = true;
  int fail = n;
  // The check, column by column (coalesced), four columns of loads in flight (eight make the kernel
  // spill). The diagonal is read whole.
#pragma unroll
  for (int s = 0; s < S; ++s) {
    const int i = lane + 32 * s;
    if (i < n && !(real_part(L[i + i * ldl]) > R(0))) fail = min(fail, i);
  }
#pragma unroll 4
  for (int j = 0; j < n; ++j) {
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const int i = lane + 32 * s;
      if (i >= j && i < n) finite = exponents_finite(L + i + j * ldl) && finite;
    }
  }
  // W after the check, so that its registers are not live during the check's loads.
  D w[S][K];
#pragma unroll
  for (int s = 0; s < S; ++s) {
    const int i = lane + 32 * s;
    if (i < n) finite = load_row(w[s], V, ldv, i, k) && finite;
    else
#pragma unroll
      for (int p = 0; p < K; ++p) w[s][p] = from_real<D>(R(0));
  }
  finite = __all_sync(0xffffffffu, finite);
  fail = __reduce_min_sync(0xffffffffu, fail);
  if (!finite || fail < n) {
    if (lane == 0) info[m] = !finite ? status::non_finite_input : fail + 1;
    return;
  }

  // The sweep. Column j + Ring − 1 is copied into the warp's ring (cp.async, no registers) while
  // column j is processed; each lane reads back only the elements it copied itself.
  D* ring = reinterpret_cast<D*>(rings[warp]);
  const auto stage = [&](int column) {
    if (column < n) {
#pragma unroll
      for (int s = 0; s < S; ++s) {
        const int i = lane + 32 * s;
        if (i >= column && i < n) copy_async(ring + ((column % Ring) * S + s) * 32 + lane, L + i + column * ldl);
      }
    }
    commit_async();
  };
#pragma unroll
  for (int c = 0; c < Ring - 1; ++c) stage(c);
  for (int j = 0; j < n; ++j) {
    const Params<D> slot = slots.column(j & 1);
    stage(j + Ring - 1);
    wait_async<Ring - 1>();
    // Column j in the ring, read where it is used rather than held in registers across the
    // rotations (W takes half of the 64 registers a thread may have at this occupancy).
    const D* column = ring + (j % Ring) * S * 32;
    if (!warp_rotations<D, K, S>(w, column, j, k, slot, L + j + j * ldl, lane)) fail = min(fail, j);
    __syncwarp();
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const int i = lane + 32 * s;
      if (i > j && i < n) L[i + j * ldl] = apply_column(column[s * 32 + lane], w[s], k, slot, 0, true);
    }
  }
  wait_async<0>();
  // Finite input with a positive diagonal fails only by overflow (cholupdate.hpp's one exception
  // to "left as it was").
  fail = __reduce_min_sync(0xffffffffu, fail);
  if (lane == 0) info[m] = fail < n ? fail + 1 : 0;
}

// ---- n > 256: the row-block pipeline -------------------------------------------------------

struct Control {
  int ticket;    // next row block to hand out (pass 1)
  int progress;  // columns whose parameters are published
  int bad;       // a NaN or Inf was read
  int fail;      // 0, or INT_MAX − (first failing column): atomicMax keeps the first
};

template <class D>
struct PipelineWork {
  Control* control;        // count entries
  unsigned char* params;   // count × per_matrix bytes
  std::size_t per_matrix;
};

template <class D>
std::size_t per_matrix_bytes(int n, int k) {
  return align256(Params<D>::bytes(n, k));
}

template <class D, int K, bool Commit>
__global__ void __launch_bounds__(kRowBlock) pipeline_kernel(D* l_all, long long ldl, long long stride_l, const D* v_all,
                                                            long long ldv, long long stride_v, int n, int k,
                                                            sreal_t<D> sigma, PipelineWork<D> work, long long first_matrix,
                                                            const ProductStatus* product, int* info) {
  extern __shared__ __align__(16) unsigned char smem[];
  const Params<D> tile = Params<D>::carve(smem, kPublish, K);
  const Params<D> slots = Params<D>::carve(smem + Params<D>::bytes(kPublish, K), 2, K);
  __shared__ int taken;

  // Launched as a programmatic dependent (launch_pipeline): nothing before this line reads memory.
  wait_for_predecessor();
  if constexpr (!Commit) allow_dependents();  // the Commit launch waits in its own wait_for_predecessor
  const long long m = first_matrix + blockIdx.y;
  // Committed by the product path (which wrote info): nothing to do. Uniform over the block.
  if (product != nullptr && product[m].done != 0) return;
  Control& control = work.control[m];
  const Params<D> global = Params<D>::carve(work.params + m * work.per_matrix, n, k);
  D* L = l_all + m * stride_l;
  const D* V = v_all + m * stride_v;
  const int lane = threadIdx.x;

  int block;
  if constexpr (Commit) {
    const int status = control.bad != 0 ? status::non_finite_input : control.fail != 0 ? INT_MAX - control.fail + 1 : 0;
    if (blockIdx.x == 0 && lane == 0) info[m] = status;
    if (status != 0) return;
    block = blockIdx.x;
  } else {
    if (lane == 0) taken = atomicAdd(&control.ticket, 1);
    __syncwarp();
    block = taken;
  }
  const int r0 = block * kRowBlock;
  const int i = r0 + lane;
  const bool row = i < n;
  D w[K];
  bool finite = row ? load_row(w, V, ldv, i, k) : true;

  // Columns left of the diagonal block (and, when committing, the diagonal block too), kPublish
  // at a time: wait for them (pass 1), stage their parameters, apply them to this warp's rows.
  const int tiled_end = Commit ? (r0 + kRowBlock < n ? r0 + kRowBlock : n) : r0;
  for (int j0 = 0; j0 < tiled_end; j0 += kPublish) {
    const int columns = tiled_end - j0 < kPublish ? tiled_end - j0 : kPublish;
    if constexpr (!Commit) {
      if (lane == 0) wait_at_least(&control.progress, j0 + columns);
      __syncwarp();
    }
    for (int c = 0; c < columns; ++c) copy_column(tile, c, global, j0 + c, k, lane, kRowBlock);
    __syncwarp();
    for (int c = 0; c < columns; ++c) {
      const int j = j0 + c;
      if (row && i > j) {
        const D lij = L[i + j * ldl];
        finite = finite && is_finite(lij);
        const D updated = apply_column(lij, w, k, tile, c, sigma > sreal_t<D>(0));
        if constexpr (Commit) L[i + j * ldl] = updated;
      } else if (Commit && i == j) {
        L[j + j * ldl] = from_real<D>(tile.scal[3 * c + 2]);
      }
    }
    __syncwarp();
  }

  if constexpr (!Commit) {
    // The diagonal block: lane jl makes column r0 + jl's rotations, the lanes below apply them.
    for (int jl = 0; jl < kRowBlock && r0 + jl < n; ++jl) {
      const int j = r0 + jl;
      const Params<D> slot = slots.column(jl & 1);
      if (lane == jl) {
        const D ljj = L[j + j * ldl];
        finite = finite && is_finite(ljj);
        // Columns fail in increasing order, so atomicMax keeps the first.
        if (!make_rotations(w, k, real_part(ljj), sigma, slot)) atomicMax(&control.fail, INT_MAX - j);
      }
      __syncwarp();
      copy_column(global, j, slot, 0, k, lane, kRowBlock);
      if (row && lane > jl) {
        const D lij = L[i + j * ldl];
        finite = finite && is_finite(lij);
        apply_column(lij, w, k, slot, 0, sigma > sreal_t<D>(0));
      }
      if ((jl + 1) % kPublish == 0 || jl + 1 == kRowBlock || j + 1 == n) {
        __threadfence();  // every lane's parameter stores, before the counter moves
        __syncwarp();
        if (lane == 0) release_store(&control.progress, j + 1);
      }
    }
    if (!finite) atomicOr(&control.bad, 1);
  }
}

// ---- host side --------------------------------------------------------------------------------

template <class K>
void allow_shared(K kernel, std::size_t bytes) {
  COVFLOW_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

int template_rank(int k) {
  for (int size : {1, 4, 16, 32, 64})
    if (k <= size) return size;
  return 0;
}

template <class F>
void with_rank(int k, F&& body) {
  switch (template_rank(k)) {
    case 1: body(std::integral_constant<int, 1>{}); break;
    case 4: body(std::integral_constant<int, 4>{}); break;
    case 16: body(std::integral_constant<int, 16>{}); break;
    case 32: body(std::integral_constant<int, 32>{}); break;
    case 64: body(std::integral_constant<int, 64>{}); break;
    default: throw InvalidArgument("cholupdate: k = " + std::to_string(k) + " exceeds the CUDA path's limit");
  }
}

// A rotation pipeline launch. After the product path (`dependent`), as a programmatic dependent of
// the kernel before it: where the product path committed the matrix both launches return at once,
// and this way their launch overlaps the apply's last blocks instead of following its end
// (pipeline_kernel waits for its predecessor before it reads anything), a few µs of the n = 5000,
// k = 16 update. Elsewhere (downdates: the pipeline does the work) a plain launch, so that the
// Commit launch's blocks do not sit on SMs while the first pass runs.
template <class Kernel, class... Args>
void launch_dependent(Kernel kernel, dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream, bool dependent,
                      Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = dependent ? 1 : 0;
  COVFLOW_CUDA_TRY(cudaLaunchKernelEx(&config, kernel, args...));
}
template <class Kernel, class... Args>
void launch_pipeline(Kernel kernel, dim3 grid, std::size_t smem, cudaStream_t stream, bool dependent, Args... args) {
  launch_dependent(kernel, grid, dim3(kRowBlock), smem, stream, dependent, args...);
}

// The tensor-core product path (cholupdate_product_tc.cuh) for one slice of matrices.
template <class D, int K>
void launch_tensor_cores(D* L, long long ldl, long long stride_l, const D* V, long long ldv, long long stride_v, int n,
                         int k, bool aligned, ProductWork<D> work, long long first, unsigned matrices, double tau_limit,
                         int* info, cudaStream_t stream) {
  if constexpr (std::is_same_v<D, double> && K == 16) {
    const unsigned row_blocks = static_cast<unsigned>(ProductBuffers<D>::blocks(n));
    trsm_tc_kernel<K><<<dim3(row_blocks + kColumnWorkers, matrices), kTcThreads, tc_shared_bytes(), stream>>>(
        L, ldl, stride_l, V, ldv, stride_v, n, k, aligned, work, first);
    COVFLOW_CHECK_LAUNCH();
    // The apply runs under the solve (programmatic dependent; it waits on the solve's ready counts),
    // and the finish after both decides the guard: commit, or restore from the backup.
    const unsigned items = static_cast<unsigned>(apply_tc_items(static_cast<int>(row_blocks), ProductBuffers<D>::segment_tiles(K)));
    launch_dependent(apply_tc_kernel, dim3(items, matrices), dim3(kApplyTcThreads), apply_tc_shared_bytes(), stream, true, L,
                     ldl, stride_l, n, aligned, work, first);
    launch_dependent(finish_tc_kernel, dim3(kFinishBlocks, matrices), dim3(kFinishThreads), 0, stream, true, L, ldl, stride_l,
                     n, work, first, tau_limit, info);
  } else {
    throw std::logic_error("cholupdate: the tensor-core path is for real double with k ≤ 16");
  }
}

// The product path's domain (cholupdate_product.cuh): where its accuracy was established.
bool product_eligible(int n, int k) { return n > kSmallMaxN && product_rank(template_rank(k)) && n >= 16 * k; }

// Layout: Control × count | ProductStatus × count | per matrix × count.
template <class D>
std::size_t matrix_bytes(int n, int k) {
  std::size_t bytes = per_matrix_bytes<D>(n, k);
  if (product_eligible(n, k)) bytes = std::max(bytes, align256(ProductBuffers<D>::bytes(n, template_rank(k))));
  return bytes;
}

std::size_t control_bytes(long long count) {
  return align256(sizeof(Control) * std::size_t(count)) + align256(sizeof(ProductStatus) * std::size_t(count));
}

// The tensor-core path's ready counts (ProductWork::ready), zeroed with the control block.
std::size_t ready_bytes(int n, long long count) {
  return align256(sizeof(int) * 2 * std::size_t(ProductBuffers<double>::blocks(n)) * std::size_t(count));
}

}  // namespace

template <class T>
std::size_t cholupdate_cuda_workspace(std::int64_t n, std::int64_t k, std::int64_t count) {
  using D = device_t<T>;
  if (n <= kSmallMaxN || k <= 0) return 0;
  return control_bytes(count) + ready_bytes(static_cast<int>(n), count) +
         matrix_bytes<D>(static_cast<int>(n), static_cast<int>(k)) * std::size_t(count);
}

template <class T>
void cholupdate_cuda(CudaContext& context, Batch<T> l, Batch<const T> v, Sign sign, std::span<int> info) {
  using D = device_t<T>;
  using R = real_t<T>;
  context.make_current();
  cudaStream_t stream = context.stream();
  const int n = static_cast<int>(l.rows);
  const int k = static_cast<int>(v.cols);
  const long long count = l.count;
  if (n == 0 || k == 0) {
    COVFLOW_CUDA_TRY(cudaMemsetAsync(info.data(), 0, sizeof(int) * std::size_t(count), stream));
    return;
  }
  const R sigma = sign == Sign::update ? R(1) : R(-1);
  auto* L = reinterpret_cast<D*>(l.data);
  const auto* V = reinterpret_cast<const D*>(v.data);

  if (sign == Sign::update && n <= 128 && template_rank(k) * ((n + 31) / 32) <= 16) {
    // One warp per matrix; S = rows per lane ∈ {1, 2, 4}, K·S ≤ 16 keeps W in registers.
    const unsigned blocks = static_cast<unsigned>((count + kWarpMatrices - 1) / kWarpMatrices);
    const auto launch = [&](auto rank, auto rows) {
      constexpr int K = decltype(rank)::value;
      constexpr int S = decltype(rows)::value;
      if constexpr (K * S <= 16) {
        warp_update_kernel<D, K, S><<<blocks, kWarpMatrices * 32, 0, stream>>>(L, l.ld, l.stride, V, v.ld, v.stride, n,
                                                                              k, count, info.data());
        COVFLOW_CHECK_LAUNCH();
      } else {
        throw std::logic_error("cholupdate: warp kernel chosen for K·S > 16");
      }
    };
    with_rank(k, [&](auto rank) {
      if (n <= 32) launch(rank, std::integral_constant<int, 1>{});
      else if (n <= 64) launch(rank, std::integral_constant<int, 2>{});
      else launch(rank, std::integral_constant<int, 4>{});
    });
    return;
  }

  if (n <= kSmallMaxN) {
    with_rank(k, [&](auto rank) {
      constexpr int K = decltype(rank)::value;
      const std::size_t slots = Params<D>::bytes(2, K);
      const std::size_t stage = sizeof(D) * std::size_t(n) * (n + 1) / 2;
      // Updates: check, then sweep in place (direct). Downdates can fail on valid input: staged
      // when the triangle fits in shared memory, probe-then-commit otherwise.
      const bool direct = sign == Sign::update;
      const bool staged = !direct && slots + stage <= kSmemBudget;
      const std::size_t smem = slots + (staged ? stage : 0);
      allow_shared(small_kernel<D, K>, smem);
      const unsigned threads = static_cast<unsigned>((n + 31) / 32 * 32);
      small_kernel<D, K><<<static_cast<unsigned>(count), threads, smem, stream>>>(L, l.ld, l.stride, V, v.ld, v.stride, n,
                                                                                 k, sigma, staged, direct, info.data());
      COVFLOW_CHECK_LAUNCH();
    });
    return;
  }

  auto* base = static_cast<unsigned char*>(context.workspace().acquire(cholupdate_cuda_workspace<T>(n, k, count)));
  auto* status = reinterpret_cast<ProductStatus*>(base + align256(sizeof(Control) * std::size_t(count)));
  const std::size_t per_matrix = matrix_bytes<D>(n, k);
  auto* ready = reinterpret_cast<int*>(base + control_bytes(count));
  unsigned char* matrices = base + control_bytes(count) + ready_bytes(n, count);
  PipelineWork<D> work{reinterpret_cast<Control*>(base), matrices, per_matrix};
  // Control, ProductStatus and the ready counts
  COVFLOW_CUDA_TRY(cudaMemsetAsync(base, 0, control_bytes(count) + ready_bytes(n, count), stream));
  const bool product = sign == Sign::update && product_eligible(n, k);
  const ProductWork<D> product_work{status, matrices, per_matrix, ready};
  const double tau_limit = 0.01 / static_cast<double>(std::numeric_limits<R>::epsilon());
  const unsigned blocks = static_cast<unsigned>((n + kRowBlock - 1) / kRowBlock);
  with_rank(k, [&](auto rank) {
    constexpr int K = decltype(rank)::value;
    const std::size_t smem = Params<D>::bytes(kPublish, K) + Params<D>::bytes(2, K);
    allow_shared(pipeline_kernel<D, K, false>, smem);
    allow_shared(pipeline_kernel<D, K, true>, smem);
    constexpr bool has_product = product_rank(K);
    // Real double with k ≤ 16: the tensor-core solve (columns folded in) and apply.
    constexpr bool tensor_cores = std::is_same_v<D, double> && K == 16;
    [[maybe_unused]] const bool aligned = reinterpret_cast<std::uintptr_t>(L) % 16 == 0 && l.ld % 2 == 0;
    if constexpr (tensor_cores) {
      if (product) {
        allow_shared(trsm_tc_kernel<16>, tc_shared_bytes());
        allow_shared(apply_tc_kernel, apply_tc_shared_bytes());
      }
    } else if constexpr (has_product) {
      if (product) {
        allow_shared(trsm_kernel<D, K>, trsm_shared_bytes<D, K>());
        allow_shared(column_kernel<D, K>, column_shared_bytes<D, K>());
        allow_shared(apply_kernel<D, K>, apply_shared_bytes<D, K>());
      }
    }
    for (long long first = 0; first < count; first += kMaxGridY) {
      const unsigned matrices_here = static_cast<unsigned>(std::min(kMaxGridY, count - first));
      if constexpr (tensor_cores) {
        if (product)
          launch_tensor_cores<D, K>(L, l.ld, l.stride, V, v.ld, v.stride, n, k, aligned, product_work, first,
                                    matrices_here, tau_limit, info.data(), stream);
      } else if constexpr (has_product) {
        if (product) {
          const unsigned trsm_blocks = static_cast<unsigned>(ProductBuffers<D>::blocks(n));
          trsm_kernel<D, K><<<dim3(trsm_blocks, matrices_here), kTrsmThreads, trsm_shared_bytes<D, K>(), stream>>>(
              L, l.ld, l.stride, V, v.ld, v.stride, n, k, product_work, first);
          COVFLOW_CHECK_LAUNCH();
          const unsigned column_blocks = static_cast<unsigned>((n + kColumnWarps - 1) / kColumnWarps);
          column_kernel<D, K><<<dim3(column_blocks, matrices_here), kColumnWarps * 32, column_shared_bytes<D, K>(),
                                stream>>>(n, product_work, first);
          COVFLOW_CHECK_LAUNCH();
          const unsigned apply_blocks =
              static_cast<unsigned>(ProductBuffers<D>::blocks(n) * ProductBuffers<D>::segments(n, K));
          apply_kernel<D, K><<<dim3(apply_blocks, matrices_here), kApplyThreads,
                               apply_shared_bytes<D, K>(), stream>>>(L, l.ld, l.stride, n, product_work, first,
                                                                     tau_limit, info.data());
          COVFLOW_CHECK_LAUNCH();
        }
      }
      const ProductStatus* committed = product ? status : nullptr;
      const dim3 grid(blocks, matrices_here);
      launch_pipeline(pipeline_kernel<D, K, false>, grid, smem, stream, product, L, l.ld, l.stride, V, v.ld, v.stride, n, k,
                      sigma, work, first, committed, info.data());
      launch_pipeline(pipeline_kernel<D, K, true>, grid, smem, stream, product, L, l.ld, l.stride, V, v.ld, v.stride, n, k, sigma,
                      work, first, committed, info.data());
    }
  });
}

std::vector<int> cholupdate_cuda_product_committed(CudaContext& context, std::int64_t count) {
  context.make_current();
  auto* base = static_cast<unsigned char*>(context.workspace().acquire(control_bytes(count)));
  std::vector<ProductStatus> status(static_cast<std::size_t>(count));
  COVFLOW_CUDA_TRY(cudaMemcpyAsync(status.data(), base + align256(sizeof(Control) * std::size_t(count)),
                                   sizeof(ProductStatus) * status.size(), cudaMemcpyDeviceToHost, context.stream()));
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(context.stream()));
  std::vector<int> committed(status.size());
  for (std::size_t m = 0; m < status.size(); ++m) committed[m] = status[m].done != 0 ? 1 : 0;
  return committed;
}

std::vector<double> cholupdate_cuda_product_timeline(CudaContext& context, std::int64_t count) {
  context.make_current();
  auto* base = static_cast<unsigned char*>(context.workspace().acquire(control_bytes(count)));
  ProductStatus status{};
  COVFLOW_CUDA_TRY(cudaMemcpyAsync(&status, base + align256(sizeof(Control) * std::size_t(count)), sizeof(ProductStatus),
                                   cudaMemcpyDeviceToHost, context.stream()));
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(context.stream()));
  const unsigned long long start = ~status.clock[kSolveStart];
  if (status.clock[kSolveStart] == 0 || status.clock[kFinish] == 0) return {};
  const auto at = [&](unsigned long long t) { return 1e-3 * static_cast<double>(static_cast<long long>(t - start)); };
  return {at(status.clock[kLastW]),           at(status.clock[kSolveEnd]), at(~status.clock[kApplyStart]),
          at(~status.clock[kApplyFirstTile]), at(status.clock[kApplyEnd]), at(status.clock[kFinish])};
}

namespace {
__global__ void unpublished_wait_kernel(int* counter, unsigned long long bound_ns) {
  wait_at_least(counter, 1, bound_ns);
}
}  // namespace

cudaError_t cholupdate_cuda_launch_unpublished_wait(CudaContext& context, unsigned long long bound_ns) {
  context.make_current();
  auto* counter = static_cast<int*>(context.workspace().acquire(sizeof(int)));
  COVFLOW_CUDA_TRY(cudaMemsetAsync(counter, 0, sizeof(int), context.stream()));
  unpublished_wait_kernel<<<1, 1, 0, context.stream()>>>(counter, bound_ns);
  return cudaGetLastError();
}

#define COVFLOW_CHOLUPDATE_CUDA(T)                                                               \
  template std::size_t cholupdate_cuda_workspace<T>(std::int64_t, std::int64_t, std::int64_t); \
  template void cholupdate_cuda<T>(CudaContext&, Batch<T>, Batch<const T>, Sign, std::span<int>);
COVFLOW_CHOLUPDATE_CUDA(f32)
COVFLOW_CHOLUPDATE_CUDA(f64)
COVFLOW_CHOLUPDATE_CUDA(cf32)
COVFLOW_CHOLUPDATE_CUDA(cf64)
#undef COVFLOW_CHOLUPDATE_CUDA

}  // namespace covflow::linalg::detail

// gesvj's block Jacobi in global memory, direct (QR) form — W. Boukaram, G. Turkiyyah, H. Ltaief,
// D. E. Keyes, "Batched QR and SVD Algorithms on GPUs with Applications in Hierarchical Matrix
// Compression" (Parallel Computing, 2018), §6.2 and Algorithm 3 — for matrices whose V (or X)
// does not fit one block's shared memory.
//
// It runs on Rᴴ, R the n × n triangle of X·P = Q·R (gesvj_cuda.cu factors X first and says why Rᴴ
// and the presorting P), copied to Y (n × n_p, n_p = n rounded up to the pair width 2b: pairs of 16
// columns, or 8 where 16 do not fit shared memory — pair_width). A sweep is nb − 1 steps of the
// round-robin order over the nb = n_p/b blocks; in a step every matrix has nb/2 disjoint block
// pairs, and all pairs of all matrices are one batch (P = count·nb/2 problems). Each step is three
// launches with the pair in shared memory (gesvj_cuda_pairs.cu: the pair's QR; the warp Jacobi on
// R_k, one sweep; Q_k's first columns times R'_k into Y, and V's columns rotated). Where not even
// 8 columns fit (n above about 1800 in complex double), the same step in global memory with pairs
// of 32 columns:
//   gather_kernel        W_k = [Y_i Y_j]                      (n × 2b each)
//   geqrf                W_k = Q_k·R_k                        (linalg/qr's batched geqrf)
//   warp_jacobi_kernel   R_k·V_k = R'_k, pair mode             (gesvj_cuda_warp.cu: one warp per
//                        R_k; C_k = [R'_k; 0]; the largest     R, one sweep (inner_sweeps says
//                        cosine of its first sweep → the       why); R'_k's columns stay in
//                        matrix's sweep maximum                their order — sorted, they would
//                                                              drift between blocks and some
//                                                              pairs would never meet)
//   unmqr                C_k = Q_k·[R'_k; 0] = [Y_i Y_j]·V_k  (orthogonal columns)
//   apply_kernel         [Y_i Y_j] ← C_k; [V_i V_j] ← [V_i V_j]·V_k
// and a one-block sweep_end_kernel decides, per matrix, converged (the largest cosine any R_k of
// the sweep showed between two columns above the zero threshold ≤ tol = √n·ε: §6.2's scaled
// off-diagonal of R, on the numerically nonzero columns as gesvj_cuda.cuh says), out of sweeps, or
// on. The threshold is init_kernel's, in Y's units; each inner solve compares it in its own scaling
// (R_k's columns have the norms of the Y columns they come from). The new
// columns are Q·(U_R·Σ_R), not [Y_i Y_j]·V_R: applying orthogonal reflectors keeps every column's
// rounding relative to that column's own norm, as a plane rotation does (a GEMM by V_R would mix
// the large columns' rounding into the small ones), and Y's rows, graded in decreasing order by the
// presorting, keep the QRs of the pairs row-wise accurate (Cox and Higham, "Stability of Householder
// QR factorization for weighted least squares problems", 1998) — so the small singular values of a
// graded matrix keep their relative accuracy. §6.1's Gram form is not used: it squares the
// condition number (§6.3: no convergence in single precision at κ = 1e7).
//
// Per-matrix convergence without a host read-back: the sweep is captured once into the body of a
// CUDA graph conditional "while" node, which sweep_end_kernel keeps running while any matrix is
// active; converged matrices' apply steps return at once (their gathers and QRs still run, on
// unchanged data). COVFLOW_GESVJ_GRAPH=0 runs max_sweeps sweeps from the host instead (for
// measurements; the results are identical).
//
// final_kernel (a block per matrix): σ_j = ‖y_j‖ over all n_p columns, the n largest in descending
// order, Y's U = y_j/σ_j (columns at or below the zero threshold completed to an orthonormal basis,
// as in the other variants),
// V_y sorted; then V_y ← V_y − ½·V_y·(V_yᴴV_y − I) by two batched GEMMs (cuBLAS), which takes V_y
// from √(rotations)·ε off orthogonal back to ε (gesvj_cuda_warp.cu says why).
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "../common/cublas_gemm.cuh"
#include "../qr/qr_impl.hpp"
#include "covflow/linalg/cuda/check.hpp"
#include "gesvj_cuda.cuh"

namespace covflow::linalg::detail::svdj {
namespace {

constexpr int kBlock = 16;           // columns per block
constexpr int kPair = 2 * kBlock;    // columns per block pair: one warp's 32 × 32 R
constexpr int kThreads = 256;

__host__ __device__ constexpr std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

int padded_columns(int n, int width) { return (n + width - 1) / width * width; }

// COVFLOW_GESVJ_PAIRS=0 keeps the global-memory step where the shared-memory one fits (for
// measurements; the results agree to rounding).
bool use_pair_step() {
  static const bool value = [] {
    const char* text = std::getenv("COVFLOW_GESVJ_PAIRS");
    return !(text != nullptr && std::string_view(text) == "0");
  }();
  return value;
}

// Sweeps of each pair's inner Jacobi solve: one. The pair need not be orthogonal after its step —
// the outer sweeps repeat until no pair's first inner sweep finds a cosine above tol, so the result
// is the same — and a solve to convergence cost the step a quarter more time for no fewer outer
// sweeps (H100, 200 × 256² and 512² complex double: 10 and 11 sweeps either way).
// COVFLOW_GESVJ_INNER_SWEEPS overrides it (for measurements).
int inner_sweeps() {
  static const int value = [] {
    const char* text = std::getenv("COVFLOW_GESVJ_INNER_SWEEPS");
    const int parsed = text != nullptr ? std::atoi(text) : 0;
    return parsed > 0 ? parsed : 1;
  }();
  return value;
}

// Columns per pair with the step in shared memory: 16 where it fits (n ≤ 800 complex double), else
// 8; else 32 with the global-memory step. Measured on an H100 (200 matrices, values only): 256²
// complex double 0.53 s at 16 against 0.63 s at 8 and about 0.54–0.96 s at 32 (one block per SM);
// 512² double 1.50 s at 16, 1.98 s at 32, 2.57 s at 8; 512² complex double 3.8–4.0 s at 8 or 16.
// COVFLOW_GESVJ_PAIR_WIDTH=8|16|32 forces a width that fits (for measurements).
template <class D>
int pair_width(int n) {
  static const int forced = [] {
    const char* text = std::getenv("COVFLOW_GESVJ_PAIR_WIDTH");
    return text != nullptr ? std::atoi(text) : 0;
  }();
  if (use_pair_step()) {
    if ((forced == 8 || forced == 16 || forced == 32) && pair_step_fits<D>(n, forced)) return forced;
    if (pair_step_fits<D>(n, 16)) return 16;
    if (pair_step_fits<D>(n, 8)) return 8;
  }
  return kPair;
}

// The workspace's parts, in one place for the size query and for the call.
template <class D>
struct Parts {
  using R = sreal_t<D>;
  D* y = nullptr;     // count × n × n_p
  D* vy = nullptr;    // count × n_p × n_p (with V)
  D* w = nullptr;     // P × n × 2b: the pairs, then their QRs; at the end T (count × n × n)
  D* c = nullptr;     // P × n × 2b: [R'; 0], then Q·[R'; 0]; at the end G (count × n × n)
  D* tau = nullptr;   // P × 2b
  int* qr_info = nullptr;  // P
  D* vr = nullptr;    // P × 2b × 2b
  int* active = nullptr;   // count: still sweeping
  int* status = nullptr;   // count
  int* sweeps = nullptr;   // count
  int* exponent = nullptr; // count
  R* sweep_off = nullptr;  // count: largest cosine of this sweep (atomic maximum)
  R* last_off = nullptr;   // count: that of the last sweep done
  R* threshold = nullptr;  // count: the zero threshold, in Y's units (init_kernel)
  std::size_t bytes = 0;

  Parts(int n, int width, long long count, bool with_u, bool with_v, unsigned char* base) {
    (void)with_u;
    const int n_p = padded_columns(n, width);
    const long long pairs = count * (n_p / width);
    std::size_t at = 0;
    auto take = [&](std::size_t size) {
      unsigned char* p = base == nullptr ? nullptr : base + at;
      at += align256(size);
      return p;
    };
    const std::size_t mat = sizeof(D) * std::size_t(count) * n * n_p;
    y = reinterpret_cast<D*>(take(mat));
    if (with_v) vy = reinterpret_cast<D*>(take(sizeof(D) * std::size_t(count) * n_p * n_p));
    w = reinterpret_cast<D*>(take(mat));
    c = reinterpret_cast<D*>(take(mat));
    tau = reinterpret_cast<D*>(take(sizeof(D) * std::size_t(pairs) * width));
    qr_info = reinterpret_cast<int*>(take(sizeof(int) * std::size_t(pairs)));
    vr = reinterpret_cast<D*>(take(sizeof(D) * std::size_t(pairs) * width * width));
    active = reinterpret_cast<int*>(take(sizeof(int) * std::size_t(count)));
    status = reinterpret_cast<int*>(take(sizeof(int) * std::size_t(count)));
    sweeps = reinterpret_cast<int*>(take(sizeof(int) * std::size_t(count)));
    exponent = reinterpret_cast<int*>(take(sizeof(int) * std::size_t(count)));
    sweep_off = reinterpret_cast<R*>(take(sizeof(R) * std::size_t(count)));
    last_off = reinterpret_cast<R*>(take(sizeof(R) * std::size_t(count)));
    threshold = reinterpret_cast<R*>(take(sizeof(R) * std::size_t(count)));
    bytes = at;
  }
};

template <class R>
__device__ R block_max_nonnegative(R value, R* slot) {
  if (threadIdx.x == 0) *slot = R(0);
  __syncthreads();
  atomic_max_nonnegative(slot, value);
  __syncthreads();
  const R result = *slot;
  __syncthreads();
  return result;
}

// ---- init: Y = 2^−e·Rᴴ with zero padding columns, V_y = I, per-matrix state ------------------------
// A block per matrix; threads stride over the elements; then a warp per row of R for Y's column
// norms, whose largest sets the zero threshold (gesvj_cuda.cuh).
template <class D>
__global__ void __launch_bounds__(kThreads) init_kernel(BlockJacobiArgs<D> args, Parts<D> w, int n_p) {
  using R = sreal_t<D>;
  __shared__ R shared_max;
  __shared__ int any_bad;
  const long long b = blockIdx.x;
  const int n = args.n;
  const D* r = args.r + b * args.stride_r;
  if (threadIdx.x == 0) any_bad = 0;
  __syncthreads();
  bool finite = true;
  R amax = R(0);
  for (long long e = threadIdx.x; e < static_cast<long long>(n) * n; e += blockDim.x) {
    const int i = static_cast<int>(e % n), j = static_cast<int>(e / n);
    if (i > j) continue;
    const D x = r[i + static_cast<long long>(j) * args.ldr];
    finite = finite && is_finite(x);
    amax = fmax(amax, magnitude(x));
  }
  if (!finite) any_bad = 1;
  amax = block_max_nonnegative(finite ? amax : R(0), &shared_max);
  const bool ok = any_bad == 0;
  const int exponent = amax > R(0) ? ilogb(amax) : 0;
  D* y = w.y + b * static_cast<long long>(n) * n_p;
  for (long long e = threadIdx.x; e < static_cast<long long>(n) * n_p; e += blockDim.x) {
    const int i = static_cast<int>(e % n), j = static_cast<int>(e / n);
    D x = from_real<D>(R(0));  // Y(i, j) = conj(R(j, i)): lower triangular
    if (j < n && j <= i) x = ok ? conj_of(scaled(r[j + static_cast<long long>(i) * args.ldr], -exponent)) : nan_value<D>();
    y[e] = x;
  }
  if (w.vy != nullptr) {
    D* vy = w.vy + b * static_cast<long long>(n_p) * n_p;
    for (long long e = threadIdx.x; e < static_cast<long long>(n_p) * n_p; e += blockDim.x)
      vy[e] = from_real<D>(R(e % n_p == e / n_p ? 1 : 0));
  }
  // Y's column j is R's row j, conjugated: its norm from R, scaled as Y is.
  R largest = R(0);
  if (ok) {
    const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    for (int j = threadIdx.x >> 5; j < n; j += warps) {
      R ss = R(0);
      for (int i = j + lane; i < n; i += 32) ss += abs2(scaled(r[j + static_cast<long long>(i) * args.ldr], -exponent));
      largest = fmax(largest, warp_sum(ss));
    }
  }
  largest = block_max_nonnegative(largest, &shared_max);
  if (threadIdx.x == 0) {
    w.threshold[b] = args.zero_level * sqrt(largest);
    w.active[b] = ok ? 1 : 0;
    w.status[b] = ok ? status::no_convergence : status::non_finite_input;
    w.sweeps[b] = 0;
    w.exponent[b] = exponent;
    w.sweep_off[b] = R(0);
    w.last_off[b] = R(0);
  }
}

// ---- one step ----------------------------------------------------------------------------------------

// W_k = [Y_i Y_j] for pair k of matrix b (block per pair; every matrix, active or not: W is never
// left uninitialised for geqrf).
template <class D>
__global__ void __launch_bounds__(kThreads) gather_kernel(const D* y, D* pairs, int n, int n_p, int step) {
  const int nb = n_p / kBlock, per_matrix = nb / 2;
  const long long pp = blockIdx.x;
  const long long b = pp / per_matrix;
  const int k = static_cast<int>(pp % per_matrix);
  int p, q;
  round_robin_pair(nb, step, k, p, q);
  const D* src = y + b * static_cast<long long>(n) * n_p;
  D* dst = pairs + pp * static_cast<long long>(n) * kPair;
  for (int e = threadIdx.x; e < n * kPair; e += blockDim.x) {
    const int i = e % n, c = e / n;
    const int column = c < kBlock ? p * kBlock + c : q * kBlock + (c - kBlock);
    dst[e] = src[i + static_cast<long long>(column) * n];
  }
}

// [Y_i Y_j] ← C_k and [V_i V_j] ← [V_i V_j]·V_k for the active matrices. A block per pair: V_k in
// shared memory; thread r owns row r of [V_i V_j] (2b = 32 elements in registers, read all before
// any is written, so the update is in place).
template <class D>
__global__ void __launch_bounds__(kThreads) apply_kernel(Parts<D> w, int n, int n_p, int step) {
  using R = sreal_t<D>;
  __shared__ D rotation[kPair * kPair];
  const int nb = n_p / kBlock, per_matrix = nb / 2;
  const long long pp = blockIdx.x;
  const long long b = pp / per_matrix;
  if (w.active[b] == 0) return;
  const int k = static_cast<int>(pp % per_matrix);
  int p, q;
  round_robin_pair(nb, step, k, p, q);
  auto column = [&](int c) { return c < kBlock ? p * kBlock + c : q * kBlock + (c - kBlock); };
  D* y = w.y + b * static_cast<long long>(n) * n_p;
  const D* c_pair = w.c + pp * static_cast<long long>(n) * kPair;
  for (int e = threadIdx.x; e < n * kPair; e += blockDim.x) {
    const int i = e % n, c = e / n;
    y[i + static_cast<long long>(column(c)) * n] = c_pair[e];
  }
  if (w.vy == nullptr) return;
  for (int e = threadIdx.x; e < kPair * kPair; e += blockDim.x) rotation[e] = w.vr[pp * kPair * kPair + e];
  __syncthreads();
  D* v = w.vy + b * static_cast<long long>(n_p) * n_p;
  for (int row = threadIdx.x; row < n_p; row += blockDim.x) {
    D old[kPair];
#pragma unroll
    for (int c = 0; c < kPair; ++c) old[c] = v[row + static_cast<long long>(column(c)) * n_p];
#pragma unroll 4
    for (int c = 0; c < kPair; ++c) {
      D acc = from_real<D>(R(0));
#pragma unroll
      for (int i = 0; i < kPair; ++i) acc = fma_(acc, old[i], rotation[i + c * kPair]);
      v[row + static_cast<long long>(column(c)) * n_p] = acc;
    }
  }
}

// Per matrix, after a sweep: converged when no R_k of the sweep showed a cosine above tol between
// two columns above the zero threshold (the inner solves send only those to sweep_off); out of
// sweeps at max_sweeps. One block; thread 0 tells the graph whether to run another sweep.
template <class R>
__global__ void __launch_bounds__(1024) sweep_end_kernel(int* active, int* state, int* sweeps, R* sweep_off,
                                                         R* last_off, long long count, R tol, int max_sweeps,
                                                         cudaGraphConditionalHandle handle, bool use_handle) {
  int any = 0;
  for (long long b = threadIdx.x; b < count; b += blockDim.x) {
    if (active[b] == 0) continue;
    const int done = ++sweeps[b];
    const R off = sweep_off[b];
    last_off[b] = off;
    sweep_off[b] = R(0);
    if (off <= tol) {
      active[b] = 0;
      state[b] = status::ok;
    } else if (done >= max_sweeps) {
      active[b] = 0;
      state[b] = status::no_convergence;
    } else {
      any = 1;
    }
  }
  any = __syncthreads_or(any);
  if (threadIdx.x == 0 && use_handle) cudaGraphSetConditional(handle, any ? 1u : 0u);
}

// ---- final: σ, Y's U and V_y sorted, info ---------------------------------------------------------------
// A block per matrix. σ of all n_p columns (zero padding columns sort last), ranks by a scan of
// σ (O(n_p²) comparisons over the block), y_j/σ_j into u (zeros below row n, to u_rows), V_y's
// columns into v (zeros below row n, to v_rows) and into the workspace T for the refinement.
template <class D>
__global__ void __launch_bounds__(kThreads) final_kernel(BlockJacobiArgs<D> args, Parts<D> w, int n_p) {
  using R = sreal_t<D>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  R* sigma = reinterpret_cast<R*>(smem_raw);
  int* rank = reinterpret_cast<int*>(smem_raw + align256(sizeof(R) * n_p));
  D* coefficient = reinterpret_cast<D*>(smem_raw + align256(sizeof(R) * n_p) + align256(sizeof(int) * n_p));
  __shared__ R warp_best[kThreads / 32];
  __shared__ int warp_row[kThreads / 32];
  __shared__ R norm_shared;
  const long long b = blockIdx.x;
  const int n = args.n, tid = threadIdx.x, threads = blockDim.x;
  const int warp = tid >> 5, lane = tid & 31, warps = threads >> 5;
  const D zero = from_real<D>(R(0));
  const int state = w.status[b];
  D* U = args.u != nullptr ? args.u + b * args.stride_u : nullptr;
  D* V = args.v != nullptr ? args.v + b * args.stride_v : nullptr;
  D* T = w.w + b * static_cast<long long>(n) * n;
  if (state == status::non_finite_input) {
    for (int j = tid; j < n; j += threads) args.s[b * n + j] = R(NAN);
    if (U != nullptr)
      for (long long e = tid; e < static_cast<long long>(args.u_rows) * n; e += threads)
        U[e % args.u_rows + (e / args.u_rows) * args.ldu] = nan_value<D>();
    if (V != nullptr) {
      const int v_rows = max(args.v_rows, n);
      for (long long e = tid; e < static_cast<long long>(v_rows) * n; e += threads)
        V[e % v_rows + (e / v_rows) * args.ldv] = nan_value<D>();
      for (long long e = tid; e < static_cast<long long>(n) * n; e += threads) T[e] = nan_value<D>();
    }
    if (tid == 0) args.info[b] = SvdInfo{status::non_finite_input, 0, double(NAN)};
    return;
  }
  const D* y = w.y + b * static_cast<long long>(n) * n_p;
  for (int j = warp; j < n_p; j += warps) {
    R ss = R(0);
    for (int i = lane; i < n; i += 32) ss += abs2(y[i + static_cast<long long>(j) * n]);
    ss = warp_sum(ss);
    if (lane == 0) sigma[j] = sqrt(ss);
  }
  __syncthreads();
  for (int j = tid; j < n_p; j += threads) {
    int r = 0;
    for (int t = 0; t < n_p; ++t) r += (sigma[t] > sigma[j] || (sigma[t] == sigma[j] && t < j)) ? 1 : 0;
    rank[j] = r;
  }
  __syncthreads();
  const int exponent = w.exponent[b];
  for (int j = tid; j < n_p; j += threads)
    if (rank[j] < n) args.s[b * n + rank[j]] = scaled(sigma[j], exponent);
  if (tid == 0) args.info[b] = SvdInfo{w.status[b], w.sweeps[b], double(w.last_off[b])};
  if (U != nullptr) {
    for (int j = 0; j < n_p; ++j) {
      if (rank[j] >= n) continue;
      D* column = U + static_cast<long long>(rank[j]) * args.ldu;
      const R s = sigma[j];
      for (int i = tid; i < args.u_rows; i += threads) {
        const int row = args.u_row_map != nullptr && i < n ? args.u_row_map[b * n + i] : i;
        column[row] = i < n && s > R(0) ? divided(y[i + static_cast<long long>(j) * n], s) : zero;
      }
    }
    __syncthreads();
    // Columns at or below the zero threshold (numerically zero, or exactly zero in a rank-deficient
    // R), completed as in gesvj_cuda_block.cu: the column's own direction orthogonalised twice
    // against the columns of lower rank when at least half of it is left, else e_c for the row of
    // least energy in those, orthogonalised likewise. By rank: the columns of lower rank are done
    // (σ descending: those below the threshold are the last ranks).
    const R threshold = w.threshold[b];
    auto orthogonalise = [&](D* x, int z) {
      for (int pass = 0; pass < 2; ++pass) {
        for (int d = warp; d < z; d += warps) {
          D dot = zero;
          for (int i = lane; i < n; i += 32) dot = fma_conj(dot, U[i + static_cast<long long>(d) * args.ldu], x[i]);
          dot = warp_sum(dot);
          if (lane == 0) coefficient[d] = dot;
        }
        __syncthreads();
        for (int i = tid; i < n; i += threads) {
          D value = x[i];
          for (int d = 0; d < z; ++d) value = value - coefficient[d] * U[i + static_cast<long long>(d) * args.ldu];
          x[i] = value;
        }
        __syncthreads();
      }
    };
    auto column_norm = [&](const D* x) {
      if (warp == 0) {
        R ss = R(0);
        for (int i = lane; i < n; i += 32) ss += abs2(x[i]);
        ss = warp_sum(ss);
        if (lane == 0) norm_shared = sqrt(ss);
      }
      __syncthreads();
      const R norm = norm_shared;
      __syncthreads();  // norm_shared is written again for the next column
      return norm;
    };
    for (int z = 0; z < n; ++z) {
      bool noise = false, nonzero = false;
      for (int j = 0; j < n_p; ++j)
        if (rank[j] == z) {
          noise = !(sigma[j] > threshold);
          nonzero = sigma[j] > R(0);
        }
      if (!noise) continue;
      D* x = U + static_cast<long long>(z) * args.ldu;  // y_j/σ_j already (rows permuted as all columns)
      R norm = R(0);
      if (nonzero) {
        orthogonalise(x, z);
        norm = column_norm(x);
      }
      if (!(norm >= R(0.5))) {
        R best = R(INFINITY);
        int best_row = INT_MAX;
        for (int i = tid; i < n; i += threads) {
          R energy = R(0);
          for (int d = 0; d < z; ++d) energy += abs2(U[i + static_cast<long long>(d) * args.ldu]);
          if (energy < best || (energy == best && i < best_row)) {
            best = energy;
            best_row = i;
          }
        }
        for (int offset = 16; offset > 0; offset >>= 1) {
          const R other = __shfl_xor_sync(0xffffffffu, best, offset);
          const int other_row = __shfl_xor_sync(0xffffffffu, best_row, offset);
          if (other < best || (other == best && other_row < best_row)) {
            best = other;
            best_row = other_row;
          }
        }
        if (lane == 0) {
          warp_best[warp] = best;
          warp_row[warp] = best_row;
        }
        __syncthreads();
        int c = warp_row[0];
        R c_best = warp_best[0];
        for (int v = 1; v < warps; ++v)
          if (warp_best[v] < c_best || (warp_best[v] == c_best && warp_row[v] < c)) {
            c_best = warp_best[v];
            c = warp_row[v];
          }
        for (int i = tid; i < n; i += threads) x[i] = from_real<D>(R(i == c ? 1 : 0));
        __syncthreads();
        orthogonalise(x, z);
        norm = column_norm(x);
      }
      for (int i = tid; i < n; i += threads) x[i] = divided(x[i], norm);
      __syncthreads();
    }
  }
  if (V != nullptr) {
    const D* vy = w.vy + b * static_cast<long long>(n_p) * n_p;
    const int v_rows = max(args.v_rows, n);
    for (int j = 0; j < n_p; ++j) {
      if (rank[j] >= n) continue;
      for (int i = tid; i < v_rows; i += threads) {
        const D value = i < n ? vy[i + static_cast<long long>(j) * n_p] : zero;
        V[i + static_cast<long long>(rank[j]) * args.ldv] = value;
        if (i < n) T[i + static_cast<long long>(rank[j]) * n] = value;
      }
    }
  }
}

// G ← ½·(G − I), count n × n matrices.
template <class D>
__global__ void __launch_bounds__(kThreads) half_minus_identity_kernel(D* g, int n) {
  using R = sreal_t<D>;
  D* m = g + static_cast<long long>(blockIdx.x) * n * n;
  for (long long e = threadIdx.x; e < static_cast<long long>(n) * n; e += blockDim.x) {
    D x = m[e];
    if (e % n == e / n) x = x - from_real<D>(R(1));
    m[e] = x * R(0.5);
  }
}

bool use_graph() {
  static const bool value = [] {
    const char* text = std::getenv("COVFLOW_GESVJ_GRAPH");
    return !(text != nullptr && std::string_view(text) == "0");
  }();
  return value;
}

}  // namespace

template <class T>
std::size_t block_jacobi_workspace(int n, long long count, bool with_u, bool with_v) {
  using D = device_t<T>;
  return Parts<D>(n, pair_width<D>(n), count, with_u, with_v, nullptr).bytes;
}

template <class T>
void block_jacobi(CudaContext& context, const BlockJacobiArgs<device_t<T>>& args, void* workspace) {
  using D = device_t<T>;
  using R = sreal_t<D>;
  cudaStream_t stream = context.stream();
  const int n = args.n, width = pair_width<D>(n), n_p = padded_columns(n, width);
  const bool shared_step = width != kPair || (use_pair_step() && pair_step_fits<D>(n, width));
  const int nb = n_p / (width / 2), per_matrix = nb / 2;
  const long long count = args.count, pairs = count * per_matrix;
  const bool with_v = args.v != nullptr;
  const Parts<D> w(n, width, count, args.u != nullptr, with_v, static_cast<unsigned char*>(workspace));
  if (shared_step) configure_pair_step<D>(width);

  init_kernel<D><<<static_cast<unsigned>(count), kThreads, 0, stream>>>(args, w, n_p);
  COVFLOW_CHECK_LAUNCH();

  // The pair problems: W_k (n × 2b, its R on top after geqrf) and C_k.
  const Batch<T> w_batch{reinterpret_cast<T*>(w.w), n, kPair, n, static_cast<std::int64_t>(n) * kPair, pairs};
  const Batch<T> c_batch{reinterpret_cast<T*>(w.c), n, kPair, n, static_cast<std::int64_t>(n) * kPair, pairs};
  // The pairs' inner solves: R (width × width, upper, from W) → R' = R·V_R and V_R. R' goes to C
  // as the pair's top width rows with zeros below for unmqr, or alone (width × width) for the
  // shared-memory step.
  Problem<D> inner;
  inner.count = pairs;
  inner.m = width;
  inner.n = width;
  inner.a = w.w;
  inner.lda = n;
  inner.stride_a = static_cast<long long>(n) * width;
  inner.upper = true;
  inner.u = w.c;
  inner.ldu = shared_step ? width : n;
  inner.stride_u = shared_step ? static_cast<long long>(width) * width : static_cast<long long>(n) * width;
  inner.u_rows = shared_step ? width : n;
  inner.v = w.vr;
  inner.ldv = width;
  inner.stride_v = static_cast<long long>(width) * width;
  inner.max_sweeps = inner_sweeps();
  inner.tol = static_cast<R>(std::sqrt(double(width))) * std::numeric_limits<R>::epsilon();
  inner.pair_mode = true;
  inner.pairs_per_matrix = per_matrix;
  inner.outer_active = w.active;
  inner.outer_off = w.sweep_off;
  inner.outer_threshold = w.threshold;

  auto sweep = [&](cudaGraphConditionalHandle handle, bool use_handle) {
    for (int step = 0; step < nb - 1; ++step) {
      if (shared_step) {
        PairStep<D> ps;
        ps.pairs = pairs;
        ps.per_matrix = per_matrix;
        ps.n = n;
        ps.n_p = n_p;
        ps.width = width;
        ps.step = step;
        ps.y = w.y;
        ps.vy = w.vy;
        ps.w = w.w;
        ps.tau = w.tau;
        ps.rprime = w.c;
        ps.vr = w.vr;
        ps.active = w.active;
        ps.phase = PairPhase::factor;
        launch_pair_step(ps, stream);
        launch_warp(inner, stream);
        ps.phase = PairPhase::update;
        launch_pair_step(ps, stream);
        continue;
      }
      gather_kernel<D><<<static_cast<unsigned>(pairs), kThreads, 0, stream>>>(w.y, w.w, n, n_p, step);
      COVFLOW_CHECK_LAUNCH();
      geqrf_cuda<T>(context, w_batch, {reinterpret_cast<T*>(w.tau), static_cast<std::size_t>(pairs) * kPair},
                    {w.qr_info, static_cast<std::size_t>(pairs)});
      launch_warp(inner, stream);
      unmqr_cuda<T>(context, Side::left, Op::none, Batch<const T>(w_batch),
                    {reinterpret_cast<const T*>(w.tau), static_cast<std::size_t>(pairs) * kPair}, c_batch);
      apply_kernel<D><<<static_cast<unsigned>(pairs), kThreads, 0, stream>>>(w, n, n_p, step);
      COVFLOW_CHECK_LAUNCH();
    }
    sweep_end_kernel<R><<<1, 1024, 0, stream>>>(w.active, w.status, w.sweeps, w.sweep_off, w.last_off, count, args.tol,
                                               args.max_sweeps, handle, use_handle);
    COVFLOW_CHECK_LAUNCH();
  };

  bool done = false;
  if (use_graph()) {
    // One sweep captured as the body of a "while" node; sweep_end_kernel sets its condition.
    cudaGraph_t graph = nullptr;
    COVFLOW_CUDA_TRY(cudaGraphCreate(&graph, 0));
    cudaGraphConditionalHandle handle{};
    COVFLOW_CUDA_TRY(cudaGraphConditionalHandleCreate(&handle, graph, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = handle;
    params.conditional.type = cudaGraphCondTypeWhile;
    params.conditional.size = 1;
    cudaGraphNode_t node = nullptr;
    COVFLOW_CUDA_TRY(cudaGraphAddNode(&node, graph, nullptr, nullptr, 0, &params));
    cudaGraph_t body = params.conditional.phGraph_out[0];
    COVFLOW_CUDA_TRY(cudaStreamBeginCaptureToGraph(stream, body, nullptr, nullptr, 0, cudaStreamCaptureModeRelaxed));
    try {
      sweep(handle, true);
    } catch (...) {
      cudaGraph_t discarded = nullptr;
      cudaStreamEndCapture(stream, &discarded);
      cudaGraphDestroy(graph);
      throw;
    }
    cudaGraph_t captured = nullptr;
    COVFLOW_CUDA_TRY(cudaStreamEndCapture(stream, &captured));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
    if (instantiated == cudaSuccess) {
      const cudaError_t launched = cudaGraphLaunch(exec, stream);
      COVFLOW_CUDA_TRY_NO_THROW(cudaGraphExecDestroy(exec));  // freed once the launch completes
      COVFLOW_CUDA_TRY_NO_THROW(cudaGraphDestroy(graph));
      COVFLOW_CUDA_TRY(launched);
      done = true;
    } else {
      (void)cudaGetLastError();
      COVFLOW_CUDA_TRY_NO_THROW(cudaGraphDestroy(graph));
    }
  }
  if (!done)
    for (int s = 0; s < args.max_sweeps; ++s) sweep(cudaGraphConditionalHandle{}, false);

  const std::size_t smem = align256(sizeof(R) * n_p) + align256(sizeof(int) * n_p) + sizeof(D) * n;
  if (smem > 48 * 1024)
    COVFLOW_CUDA_TRY(cudaFuncSetAttribute(final_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  final_kernel<D><<<static_cast<unsigned>(count), kThreads, smem, stream>>>(args, w, n_p);
  COVFLOW_CHECK_LAUNCH();

  if (with_v) {
    // V ← V − ½·V·(VᴴV − I): G = TᴴT (T: V's copy in W), G ← ½(G − I), V ← V − T·G.
    const long long nn = static_cast<long long>(n) * n;
    const D one = from_real<D>(R(1)), zero = from_real<D>(R(0)), minus_one = from_real<D>(R(-1));
    const cublasOperation_t adjoint = is_cx<D> ? CUBLAS_OP_C : CUBLAS_OP_T;
    COVFLOW_CUBLAS_TRY(gemm_batched(context.cublas(), adjoint, CUBLAS_OP_N, n, n, n, one, w.w, n, nn, w.w, n, nn, zero, w.c, n, nn,
                            static_cast<int>(count)));
    half_minus_identity_kernel<D><<<static_cast<unsigned>(count), kThreads, 0, stream>>>(w.c, n);
    COVFLOW_CHECK_LAUNCH();
    COVFLOW_CUBLAS_TRY(gemm_batched(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, minus_one, w.w, n, nn, w.c, n, nn, one, args.v,
                            static_cast<int>(args.ldv), args.stride_v, static_cast<int>(count)));
  }
}

#define COVFLOW_GESVJ_BLOCK_JACOBI(T)                                                      \
  template std::size_t block_jacobi_workspace<T>(int, long long, bool, bool);              \
  template void block_jacobi<T>(CudaContext&, const BlockJacobiArgs<device_t<T>>&, void*);
COVFLOW_GESVJ_BLOCK_JACOBI(f32)
COVFLOW_GESVJ_BLOCK_JACOBI(f64)
COVFLOW_GESVJ_BLOCK_JACOBI(cf32)
COVFLOW_GESVJ_BLOCK_JACOBI(cf64)
#undef COVFLOW_GESVJ_BLOCK_JACOBI

}  // namespace covflow::linalg::detail::svdj

// Internal: the n ≤ 32 kernels of getrf / getrs / gesv / potrf / potrs / posv, after A. Abdelfattah,
// A. Haidar, S. Tomov, J. Dongarra, "Batched one-sided factorizations of tiny matrices using GPUs:
// challenges and countermeasures", J. Comput. Sci. 26 (2018):
//   - §6–§7: one group of kNp threads per matrix (kNp the power of two ≥ n), each thread holding one
//     row in registers, every loop unrolled on kNp (n itself is a run-time bound, so six sizes of
//     code serve all 32 values of n); the matrix is read once and written once;
//   - §8: registers for storage, shared memory for communication — one broadcast vector per step,
//     double-buffered so a step costs one __syncwarp of the matrix's lanes;
//   - §9: several matrices per thread block (kThreads / kNp);
//   - §10: LU with lazy row swaps: no row moves during the factorization, each thread tracks the
//     position its row has reached, and rows are written to their final positions once.
// Extended here to complex types, to upper Cholesky, and to solves with any number of right-hand
// sides: a chunk of kRhs columns of B at a time in registers, the factor staying in registers, so
// posv / gesv read A and B once and write them once.
//
// Pivoting matches LAPACK's ?getrf: the pivot of column j is the row of largest |x| (real) or
// |Re x| + |Im x| (complex, as i?amax), ties going to the row that comes first in the current
// (interchanged) order; a zero pivot is recorded in info and leaves the column unscaled.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../common/device_scalar.cuh"
#include "solve_tiny_launch.hpp"

namespace covflow::linalg::detail::tiny {

inline constexpr int kThreads = 128;  // threads per block: kThreads / kNp matrices
inline constexpr int kRhs = 4;        // right-hand sides in registers at a time

template <class T> __device__ inline sreal_t<T> abs1(T v) {
  if constexpr (is_cx<T>) return fabs(v.x) + fabs(v.y);
  else return fabs(v);
}
template <class T> __device__ inline T zero_of() { return from_real<T>(sreal_t<T>(0)); }
template <class T> __device__ inline T nan_of() {
  using R = sreal_t<T>;
  const R nan = R(NAN);
  if constexpr (is_cx<T>) return T{nan, nan};
  else return nan;
}
// Arithmetic rounded step by step, never contracted into fused multiply-adds: LU's elimination is
// written with these so that it rounds as reference LAPACK/BLAS compiled for baseline x86-64 (no
// FMA) does — every update a − l·u with the product rounded, then the difference, in the same
// order of l — and so picks the same pivots even where two candidates differ only in rounding.
template <class R> __device__ inline R mul_rn(R a, R b) {
  if constexpr (sizeof(R) == 4) return __fmul_rn(a, b);
  else return __dmul_rn(a, b);
}
template <class R> __device__ inline R add_rn(R a, R b) {
  if constexpr (sizeof(R) == 4) return __fadd_rn(a, b);
  else return __dadd_rn(a, b);
}
template <class R> __device__ inline R sub_rn(R a, R b) {
  if constexpr (sizeof(R) == 4) return __fsub_rn(a, b);
  else return __dsub_rn(a, b);
}
template <class R> __device__ inline R div_rn(R a, R b) {
  if constexpr (sizeof(R) == 4) return __fdiv_rn(a, b);
  else return __ddiv_rn(a, b);
}
// a·b, complex as Fortran forms it: (ar·br − ai·bi) + i(ar·bi + ai·br).
template <class T> __device__ inline T mul_exact(T a, T b) {
  if constexpr (is_cx<T>) return T{sub_rn(mul_rn(a.x, b.x), mul_rn(a.y, b.y)), add_rn(mul_rn(a.x, b.y), mul_rn(a.y, b.x))};
  else return mul_rn(a, b);
}
// a − b·c.
template <class T> __device__ inline T sub_product(T a, T b, T c) {
  const T p = mul_exact(b, c);
  if constexpr (is_cx<T>) return T{sub_rn(a.x, p.x), sub_rn(a.y, p.y)};
  else return sub_rn(a, p);
}
// a / b, complex by Smith's algorithm as Fortran's complex division does it (no overflow where it
// can be avoided).
template <class T> __device__ inline T divide(T a, T b) {
  if constexpr (is_cx<T>) {
    using R = sreal_t<T>;
    if (fabs(b.x) >= fabs(b.y)) {
      const R r = div_rn(b.y, b.x), d = add_rn(mul_rn(b.y, r), b.x);
      return T{div_rn(add_rn(mul_rn(a.y, r), a.x), d), div_rn(sub_rn(a.y, mul_rn(a.x, r)), d)};
    }
    const R r = div_rn(b.x, b.y), d = add_rn(mul_rn(b.x, r), b.y);
    return T{div_rn(add_rn(mul_rn(a.x, r), a.y), d), div_rn(sub_rn(mul_rn(a.y, r), a.x), d)};
  } else {
    return div_rn(a, b);
  }
}
// LAPACK's safe minimum: the smallest normal number (1/huge is smaller for IEEE types).
template <class R> __device__ inline R sfmin() {
  if constexpr (sizeof(R) == 4) return 1.17549435e-38f;
  else return 2.2250738585072014e-308;
}
template <class T> __device__ inline T one_of() { return from_real<T>(sreal_t<T>(1)); }
template <class T> __device__ inline T maybe_conj(T v, bool conjugate) { return conjugate ? conj_of(v) : v; }

template <class T> __device__ inline T shfl(unsigned mask, T v, int src, int width) {
  if constexpr (is_cx<T>) return T{__shfl_sync(mask, v.x, src, width), __shfl_sync(mask, v.y, src, width)};
  else return __shfl_sync(mask, v, src, width);
}

// The matrix a thread group works on, and the thread's row in it.
struct Place {
  std::int64_t matrix;
  int lane;   // 0 … kNp − 1
  int group;  // matrix slot within the block
};
template <int kNp> __device__ inline Place place_of(std::int64_t block) {
  const int group = static_cast<int>(threadIdx.x) / kNp;
  return Place{block * (kThreads / kNp) + group, static_cast<int>(threadIdx.x) % kNp, group};
}

// ---- B in registers, kRhs columns at a time -------------------------------------------------------

template <class T>
struct Rhs {
  T v[kRhs];
};
template <class T>
__device__ inline void load_rhs(Rhs<T>& x, const T* b, std::int64_t ldb, int row, int c0, int nrhs, bool active) {
#pragma unroll
  for (int c = 0; c < kRhs; ++c)
    x.v[c] = active && c0 + c < nrhs ? b[row + (c0 + c) * ldb] : zero_of<T>();
}
template <class T>
__device__ inline void store_rhs(const Rhs<T>& x, T* b, std::int64_t ldb, int row, int c0, int nrhs, bool active) {
#pragma unroll
  for (int c = 0; c < kRhs; ++c)
    if (active && c0 + c < nrhs) b[row + (c0 + c) * ldb] = x.v[c];
}

// The pivot of a column among the group's candidate lanes: the largest `value` (≥ 0), ties to the
// smallest `key` (position << 5 | lane, unique). Returns the winner's key, with the sign bit set
// when the largest value is zero. Three warp reductions (redux.sync) instead of a butterfly of
// shuffles: the value's bits as unsigned integers order as the value does (it is not negative),
// so the maximum is found 32 bits at a time, then the smallest key among the lanes holding it.
template <class R>
__device__ inline int pivot_search(unsigned mask, bool candidate, R value, int key) {
  constexpr unsigned kCandidate = 0x80000000u;  // above every non-negative value's top bits
  unsigned top, low = 0;
  if constexpr (sizeof(R) == 8) {
    const unsigned long long bits = __double_as_longlong(value);
    top = candidate ? kCandidate | static_cast<unsigned>(bits >> 32) : 0u;
    low = static_cast<unsigned>(bits);
  } else {
    top = candidate ? kCandidate | __float_as_uint(value) : 0u;
  }
  const unsigned best_top = __reduce_max_sync(mask, top);
  bool holds = top == best_top;
  unsigned best_low = 0;
  if constexpr (sizeof(R) == 8) {
    best_low = __reduce_max_sync(mask, holds ? low : 0u);
    holds = holds && low == best_low;
  }
  const unsigned winner = __reduce_min_sync(mask, holds ? static_cast<unsigned>(key) : 0xffffffffu);
  const bool zero = best_top == kCandidate && best_low == 0;
  return static_cast<int>(winner) | (zero ? static_cast<int>(0x80000000u) : 0);
}

// ---- LU: getrf / gesv ---------------------------------------------------------------------------

// Complex double at n = 32 holds 64 doubles of row per lane and would take all 255 registers at
// one block per SM (12.5 % occupancy, latency-bound under ncu); asking for four blocks caps it at
// 128 registers with some spilling: 2²⁰ getrf went from 99.9 to 71.8 ms on the H100 (three blocks:
// 75.5 ms). Cholesky's factor kernel has as many registers there, but the same cap made potrf
// slower (27.5 → 39.3 ms on the H100, both binaries in one run), so it keeps one block.
template <class T, int kNp>
inline constexpr int kLuMinBlocks = sizeof(T) == 16 && kNp == 32 ? 4 : 1;

// One group per matrix; lane i loads row i. Factors with lazy swaps, then (kSolve, gesv) solves
// A·X = B for every chunk of B, then writes LU rows to their final positions. getrf is compiled
// without the solve, which leaves its registers to the factorization.
template <class T, int kNp, bool kSolve>
__global__ void __launch_bounds__(kThreads, (kLuMinBlocks<T, kNp>)) lu_kernel(Args<T> args) {
  constexpr int kGroups = kThreads / kNp;
  __shared__ T buffer[kGroups][2][kNp > kRhs ? kNp : kRhs];
  const unsigned mask = cuda::group_mask<kNp>();
  const int n = args.n;
  for (std::int64_t block = blockIdx.x;; block += gridDim.x) {
    const Place at = place_of<kNp>(block);
    if (block * kGroups >= args.count) return;
    if (at.matrix >= args.count) return;  // whole groups only: a group's lanes leave together
    T* a = args.a + at.matrix * args.stride_a;
    const bool row_ok = at.lane < n;
    T r[kNp];
    bool finite = true;
#pragma unroll
    for (int k = 0; k < kNp; ++k) {
      r[k] = row_ok && k < n ? a[at.lane + k * args.lda] : zero_of<T>();
      finite = finite && is_finite(r[k]);
    }
    if (!__all_sync(mask, finite)) {
#pragma unroll
      for (int k = 0; k < kNp; ++k)
        if (row_ok && k < n) a[at.lane + k * args.lda] = nan_of<T>();
      if (row_ok) args.ipiv[at.matrix * n + at.lane] = at.lane + 1;
      if (at.lane == 0) args.info[at.matrix] = status::non_finite_input;
      continue;
    }
    // pos: the position row `lane` has reached; rows ≥ n sit past the end and never pivot.
    int pos = at.lane;
    int my_pivot = at.lane + 1;
    T my_inverse = zero_of<T>();  // 1 / U(j, j) in the lane that became position j (the solve's)
    int info = 0;
    using R = sreal_t<T>;
#pragma unroll
    for (int j = 0; j < kNp; ++j) {
      if (j < n) {
        // Pivot search over the rows not yet pivoted: largest abs1, ties to the lowest position.
        const bool candidate = row_ok && pos >= j;
        const int key = pivot_search(mask, candidate, abs1(r[j]), (pos << 5) | at.lane);
        const bool zero_pivot = key < 0;
        const int pivot_pos = (key & 0x7fffffff) >> 5, pivot_lane = key & 31;
        if (at.lane == j) my_pivot = pivot_pos + 1;
        if (pos == j) pos = pivot_pos;
        if (at.lane == pivot_lane) pos = j;
        T* row = buffer[at.group][j & 1];
        if (at.lane == pivot_lane) {
#pragma unroll
          for (int k = j; k < kNp; ++k) row[k] = r[k];
        }
        __syncwarp(mask);  // every step, so the double buffer is never overwritten while read
        if (zero_pivot) {
          if (info == 0) info = j + 1;  // U(j, j) = 0: nothing to scale or eliminate
        } else {
          const T pivot = row[j];
          const T inverse = divide(one_of<T>(), pivot);
          if (at.lane == pivot_lane) my_inverse = inverse;
          if (pos > j) {
            // As ?getrf2: multiply by the reciprocal unless the pivot is below the safe minimum.
            const T l = abs1(pivot) >= sfmin<R>() ? mul_exact(r[j], inverse) : divide(r[j], pivot);
            r[j] = l;
#pragma unroll
            for (int k = j + 1; k < kNp; ++k) r[k] = sub_product(r[k], l, row[k]);
          }
        }
      }
    }
    __syncwarp(mask);  // the solve's first step reuses buffer 0
    if (kSolve && info == 0 && args.nrhs > 0) {
      T* const b = args.b + at.matrix * args.stride_b;
      // The row a thread holds is row `pos` of Pᵀ·A, original row `lane` of A, whose right-hand
      // side is row `lane` of B: Pᵀ·B needs no data movement.
      for (int c0 = 0; c0 < args.nrhs; c0 += kRhs) {
        Rhs<T> x;
        load_rhs(x, b, args.ldb, at.lane, c0, args.nrhs, row_ok);
        int parity = 0;
        // L·Y = P·B, L unit lower: the row at position j broadcasts y_j.
#pragma unroll
        for (int j = 0; j < kNp; ++j) {
          if (j < n) {
            T* y = buffer[at.group][parity];
            parity ^= 1;
            if (pos == j) {
#pragma unroll
              for (int c = 0; c < kRhs; ++c) y[c] = x.v[c];
            }
            __syncwarp(mask);
            if (row_ok && pos > j) {
#pragma unroll
              for (int c = 0; c < kRhs; ++c) x.v[c] = fma_(x.v[c], -r[j], y[c]);
            }
          }
        }
        // U·X = Y: the row at position j divides by U(j, j) and broadcasts x_j.
#pragma unroll
        for (int j = kNp - 1; j >= 0; --j) {
          if (j < n) {
            T* y = buffer[at.group][parity];
            parity ^= 1;
            if (pos == j) {
#pragma unroll
              for (int c = 0; c < kRhs; ++c) y[c] = x.v[c] = x.v[c] * my_inverse;
            }
            __syncwarp(mask);
            if (row_ok && pos < j) {
#pragma unroll
              for (int c = 0; c < kRhs; ++c) x.v[c] = fma_(x.v[c], -r[j], y[c]);
            }
          }
        }
        store_rhs(x, b, args.ldb, pos, c0, args.nrhs, row_ok);
        __syncwarp(mask);  // the next chunk reuses the buffers
      }
    }
#pragma unroll
    for (int k = 0; k < kNp; ++k)
      if (row_ok && k < n) a[pos + k * args.lda] = r[k];
    if (row_ok) args.ipiv[at.matrix * n + at.lane] = my_pivot;
    if (at.lane == 0) args.info[at.matrix] = info;
    __syncwarp(mask);
  }
}

// ---- solves with a given factor: getrs, potrs ------------------------------------------------------

// A triangular sweep over the kRhs columns a lane holds: for j in order (forward) or reversed, the
// lane at position j finishes x_j (dividing by the diagonal `diag(j)` unless unit) and broadcasts
// it; every lane for which `below(j)` holds subtracts coefficient(j)·x_j. kDiagonal: unit (diag
// not read), general (x_j · 1/diag(j)), real (x_j · 1/Re diag(j), for Cholesky factors); each lane
// forms the reciprocal of its own diagonal element before the sweep. The factor is read from
// global memory as each step needs it (coefficient and diag load their element), not held in
// registers: a solve reads each factor element once, so registers would only cost occupancy —
// the loads have no dependence on the sweep and are issued ahead of it.
enum DiagonalKind { unit_diagonal, general_diagonal, real_diagonal };

template <class T, int kNp, bool kForward, int kDiagonal, class Diag, class Below, class Coefficient>
__device__ inline void sweep(Rhs<T>& x, T (*buffer)[kNp + kRhs], int& parity, unsigned mask, int n, int lane,
                             bool row_ok, Diag diag, Below below, Coefficient coefficient) {
  // Each lane's own diagonal reciprocal, before the sweep: off its critical path.
  T inverse = one_of<T>();
  if constexpr (kDiagonal == general_diagonal) {
    if (row_ok) inverse = divide(one_of<T>(), diag(lane));
  } else if constexpr (kDiagonal == real_diagonal) {
    if (row_ok) inverse = from_real<T>(sreal_t<T>(1) / real_part(diag(lane)));
  }
#pragma unroll
  for (int step = 0; step < kNp; ++step) {
    const int j = kForward ? step : kNp - 1 - step;
    if (j < n) {
      T* y = buffer[parity];
      parity ^= 1;
      const bool mine = below(j);
      const T c = row_ok && mine ? coefficient(j) : zero_of<T>();
      if (lane == j) {
        if constexpr (kDiagonal == general_diagonal) {
#pragma unroll
          for (int r = 0; r < kRhs; ++r) x.v[r] = x.v[r] * inverse;
        } else if constexpr (kDiagonal == real_diagonal) {
#pragma unroll
          for (int r = 0; r < kRhs; ++r) x.v[r] = x.v[r] * real_part(inverse);
        }
#pragma unroll
        for (int r = 0; r < kRhs; ++r) y[r] = x.v[r];
      }
      __syncwarp(mask);
      if (row_ok && mine) {
#pragma unroll
        for (int r = 0; r < kRhs; ++r) x.v[r] = fma_(x.v[r], -c, y[r]);
      }
    }
  }
}

// getrs: lane i is position i. op none: X = U⁻¹·L⁻¹·(P·B) — B's row perm[i] loaded into position i;
// op T / C: X = P·L⁻ᵀ·U⁻ᵀ·B (conjugated for C) — written back through perm.
template <class T, int kNp, bool kTrans>
__global__ void __launch_bounds__(kThreads) getrs_kernel(Args<T> args) {
  constexpr int kGroups = kThreads / kNp;
  __shared__ T buffer[kGroups][2][kNp + kRhs];
  const unsigned mask = cuda::group_mask<kNp>();
  const int n = args.n;
  const bool conjugate = args.op == 'C';
  for (std::int64_t block = blockIdx.x;; block += gridDim.x) {
    const Place at = place_of<kNp>(block);
    if (block * kGroups >= args.count) return;
    if (at.matrix >= args.count) return;
    const T* lu = args.a + at.matrix * args.stride_a;
    const std::int64_t ld = args.lda;
    T* const b = args.b + at.matrix * args.stride_b;
    const int i = at.lane;
    const bool row_ok = i < n;
    // source: the row of B that the interchanges bring to this lane's position, the swaps
    // replayed in order by every lane together (ipiv entries outside j…n−1 are ignored).
    const int my_ipiv = row_ok ? args.ipiv[at.matrix * n + i] - 1 : 0;
    int source = i;
    for (int j = 0; j < n; ++j) {
      const int p = __shfl_sync(mask, my_ipiv, j, kNp);
      const bool swap = p > j && p < n;
      const int at_j = __shfl_sync(mask, source, j, kNp);
      const int at_p = __shfl_sync(mask, source, swap ? p : j, kNp);
      if (swap && i == j) source = at_p;
      if (swap && i == p) source = at_j;
    }
    auto element = [&](int r, int c) { return lu[r + c * ld]; };
    auto op_of = [&](T v) { return maybe_conj(v, conjugate); };
    for (int c0 = 0; c0 < args.nrhs; c0 += kRhs) {
      Rhs<T> x;
      int parity = 0;
      if constexpr (!kTrans) {
        load_rhs(x, b, args.ldb, source, c0, args.nrhs, row_ok);
        // L·Y = P·B, L unit lower: lane i > j subtracts L(i, j)·y_j (its own row, coalesced).
        sweep<T, kNp, true, unit_diagonal>(
            x, buffer[at.group], parity, mask, n, i, row_ok, [&](int) { return one_of<T>(); },
            [&](int j) { return i > j; }, [&](int j) { return element(i, j); });
        // U·X = Y: lane i < j subtracts U(i, j)·x_j.
        sweep<T, kNp, false, general_diagonal>(
            x, buffer[at.group], parity, mask, n, i, row_ok, [&](int j) { return element(j, j); },
            [&](int j) { return i < j; }, [&](int j) { return element(i, j); });
        store_rhs(x, b, args.ldb, i, c0, args.nrhs, row_ok);
      } else {
        load_rhs(x, b, args.ldb, i, c0, args.nrhs, row_ok);
        // op(U)·Z = B, op(U) lower: lane i > j subtracts op(U(j, i))·z_j (row j of U).
        sweep<T, kNp, true, general_diagonal>(
            x, buffer[at.group], parity, mask, n, i, row_ok, [&](int j) { return op_of(element(j, j)); },
            [&](int j) { return i > j; }, [&](int j) { return op_of(element(j, i)); });
        // op(L)·W = Z, op(L) unit upper: lane i < j subtracts op(L(j, i))·w_j.
        sweep<T, kNp, false, unit_diagonal>(
            x, buffer[at.group], parity, mask, n, i, row_ok, [&](int) { return one_of<T>(); },
            [&](int j) { return i < j; }, [&](int j) { return op_of(element(j, i)); });
        // X = P·W: position i goes back to row perm[i].
        store_rhs(x, b, args.ldb, source, c0, args.nrhs, row_ok);
      }
      __syncwarp(mask);
    }
    __syncwarp(mask);
  }
}

// potrs: A = L·Lᴴ (lower) or Uᴴ·U (upper) from potrf's triangle; lane i is row i.
template <class T, int kNp, bool kUpper>
__global__ void __launch_bounds__(kThreads) potrs_kernel(Args<T> args) {
  constexpr int kGroups = kThreads / kNp;
  __shared__ T buffer[kGroups][2][kNp + kRhs];
  const unsigned mask = cuda::group_mask<kNp>();
  const int n = args.n;
  for (std::int64_t block = blockIdx.x;; block += gridDim.x) {
    const Place at = place_of<kNp>(block);
    if (block * kGroups >= args.count) return;
    if (at.matrix >= args.count) return;
    const T* f = args.a + at.matrix * args.stride_a;
    const std::int64_t ld = args.lda;
    T* const b = args.b + at.matrix * args.stride_b;
    const int i = at.lane;
    const bool row_ok = i < n;
    // L(r, c) for r ≥ c, from whichever triangle holds the factor.
    auto lower = [&](int r, int c) { return kUpper ? conj_of(f[c + r * ld]) : f[r + c * ld]; };
    auto diag = [&](int j) { return f[j + j * ld]; };
    for (int c0 = 0; c0 < args.nrhs; c0 += kRhs) {
      Rhs<T> x;
      int parity = 0;
      load_rhs(x, b, args.ldb, i, c0, args.nrhs, row_ok);
      // L·Y = B: lane i > j subtracts L(i, j)·y_j.
      sweep<T, kNp, true, real_diagonal>(
          x, buffer[at.group], parity, mask, n, i, row_ok, diag, [&](int j) { return i > j; },
          [&](int j) { return lower(i, j); });
      // Lᴴ·X = Y: lane i < j subtracts conj(L(j, i))·x_j.
      sweep<T, kNp, false, real_diagonal>(
          x, buffer[at.group], parity, mask, n, i, row_ok, diag, [&](int j) { return i < j; },
          [&](int j) { return conj_of(lower(j, i)); });
      store_rhs(x, b, args.ldb, i, c0, args.nrhs, row_ok);
      __syncwarp(mask);
    }
    __syncwarp(mask);
  }
}

// ---- Cholesky: potrf / potrs / posv -------------------------------------------------------------

// Lower: lane i holds row i of the lower triangle, A(i, 0…i) — coalesced loads, column j broadcast
// at step j. Upper: lane i holds row i of the upper triangle, A(i, i…n−1) — coalesced likewise,
// row j broadcast at step j. mode & factor: factor A (failing at the first non-positive pivot:
// info = j + 1 and the partial factor written back); mode & solve: solve with B (on success).
// kMode: factor, solve or both (posv), compiled apart so that potrf and potrs carry no code and
// no registers of the other.
template <class T, int kNp, bool kUpper, int kMode>
__global__ void __launch_bounds__(kThreads) chol_kernel(Args<T> args) {
  constexpr int kGroups = kThreads / kNp;
  __shared__ T buffer[kGroups][2][kNp + kRhs];
  const unsigned mask = cuda::group_mask<kNp>();
  const int n = args.n;
  using R = sreal_t<T>;
  for (std::int64_t block = blockIdx.x;; block += gridDim.x) {
    const Place at = place_of<kNp>(block);
    if (block * kGroups >= args.count) return;
    if (at.matrix >= args.count) return;
    T* a = args.a + at.matrix * args.stride_a;
    const int i = at.lane;
    const bool row_ok = i < n;
    T r[kNp];
    bool finite = true;
#pragma unroll
    for (int k = 0; k < kNp; ++k) {
      const bool stored = row_ok && k < n && (kUpper ? k >= i : k <= i);
      r[k] = stored ? a[i + k * args.lda] : zero_of<T>();
      if (k == i) r[k] = from_real<T>(real_part(r[k]));  // the diagonal is real
      finite = finite && is_finite(r[k]);
    }
    int info = 0;
    R my_inverse = R(0);  // 1 / L(i, i), kept for the solve
    if constexpr ((kMode & factor) != 0) {
      if (!__all_sync(mask, finite)) {
#pragma unroll
        for (int k = 0; k < kNp; ++k)
          if (row_ok && k < n && (kUpper ? k >= i : k <= i)) a[i + k * args.lda] = nan_of<T>();
        if (i == 0) args.info[at.matrix] = status::non_finite_input;
        continue;
      }
#pragma unroll
      for (int j = 0; j < kNp; ++j) {
        if (j < n && info == 0) {
          const R d2 = __shfl_sync(mask, real_part(r[j]), j, kNp);
          if (!(d2 > R(0))) {  // not positive, or NaN: LAPACK's test
            info = j + 1;
            if (i == j) r[j] = from_real<T>(d2);  // as ?potf2, the failing pivot stays on the diagonal
          } else {
            const R d = sqrt(d2);
            const R inv = R(1) / d;
            if (i == j) my_inverse = inv;
            T* v = buffer[at.group][j & 1];
            if constexpr (!kUpper) {
              // Column j: l_ij = a_ij / d for i > j, broadcast; a_ik −= l_ij·conj(l_kj).
              if (i == j) r[j] = from_real<T>(d);
              if (i > j) {
                r[j] = r[j] * inv;
                v[i] = r[j];
              }
              __syncwarp(mask);
              if (i > j) {
                const T l = r[j];
#pragma unroll
                for (int k = j + 1; k < kNp; ++k) r[k] = fma_(r[k], -l, conj_of(v[k]));
              }
            } else {
              // Row j: u_jk = a_jk / d for k > j, broadcast; a_ik −= conj(u_ji)·u_jk.
              if (i == j) {
                r[j] = from_real<T>(d);
#pragma unroll
                for (int k = j + 1; k < kNp; ++k) {
                  r[k] = r[k] * inv;
                  v[k] = r[k];
                }
              }
              __syncwarp(mask);
              if (i > j) {
                const T u = conj_of(v[i]);
#pragma unroll
                for (int k = j + 1; k < kNp; ++k) r[k] = fma_(r[k], -u, v[k]);
              }
            }
          }
        }
      }
#pragma unroll
      for (int k = 0; k < kNp; ++k)
        if (row_ok && k < n && (kUpper ? k >= i : k <= i)) a[i + k * args.lda] = r[k];
      if (i == 0) args.info[at.matrix] = info;
      __syncwarp(mask);  // the solve's first step reuses buffer 0
    }
    if ((kMode & solve) != 0 && info == 0 && args.nrhs > 0) {
      T* const b = args.b + at.matrix * args.stride_b;
      for (int c0 = 0; c0 < args.nrhs; c0 += kRhs) {
        Rhs<T> x;
        load_rhs(x, b, args.ldb, i, c0, args.nrhs, row_ok);
        int parity = 0;
        // Forward: L·Y = B (lower: own column j; upper: Uᴴ, row j of U broadcast).
#pragma unroll
        for (int j = 0; j < kNp; ++j) {
          if (j < n) {
            T* y = buffer[at.group][parity];
            parity ^= 1;
            if (i == j) {
#pragma unroll
              for (int c = 0; c < kRhs; ++c) y[c] = x.v[c] = x.v[c] * my_inverse;
              if constexpr (kUpper) {
#pragma unroll
                for (int k = j + 1; k < kNp; ++k) y[kRhs + k] = r[k];
              }
            }
            __syncwarp(mask);
            if (row_ok && i > j) {
              const T l = kUpper ? conj_of(y[kRhs + i]) : r[j];
#pragma unroll
              for (int c = 0; c < kRhs; ++c) x.v[c] = fma_(x.v[c], -l, y[c]);
            }
          }
        }
        // Backward: Lᴴ·X = Y (lower: row j of L broadcast; upper: own column j of U).
#pragma unroll
        for (int j = kNp - 1; j >= 0; --j) {
          if (j < n) {
            T* y = buffer[at.group][parity];
            parity ^= 1;
            if (i == j) {
#pragma unroll
              for (int c = 0; c < kRhs; ++c) y[c] = x.v[c] = x.v[c] * my_inverse;
              if constexpr (!kUpper) {
#pragma unroll
                for (int k = 0; k < j; ++k) y[kRhs + k] = r[k];
              }
            }
            __syncwarp(mask);
            if (row_ok && i < j) {
              const T u = kUpper ? r[j] : conj_of(y[kRhs + i]);
#pragma unroll
              for (int c = 0; c < kRhs; ++c) x.v[c] = fma_(x.v[c], -u, y[c]);
            }
          }
        }
        store_rhs(x, b, args.ldb, i, c0, args.nrhs, row_ok);
        __syncwarp(mask);
      }
    }
    __syncwarp(mask);
  }
}

}  // namespace covflow::linalg::detail::tiny

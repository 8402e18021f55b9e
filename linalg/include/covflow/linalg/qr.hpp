// Batched Householder QR with LAPACK's conventions: geqrf factors, ungqr forms the thin Q, unmqr
// applies Q or Qᴴ to another matrix.
//
// A = Q·R with Q = H₁·H₂·…·H_k (k = min(m, n)), each reflector H_i = I − τ_i·v_i·v_iᴴ with v_i(i) = 1,
// v_i(0..i−1) = 0 and v_i(i+1..m−1) stored below R's diagonal in column i of A — as LAPACK's
// ?geqrf stores them (complex reflectors as ?larfg makes them: β = −sign(Re α)·‖x‖ is real, τ is
// complex with 1 ≤ Re τ ≤ 2 and |τ − 1| ≤ 1; a column already in the form has τ = 0).
//
// The CUDA path follows W. Boukaram, G. Turkiyyah, H. Ltaief, D. E. Keyes, "Batched QR and SVD
// Algorithms on GPUs with Applications in Hierarchical Matrix Compression" (Parallel Computing,
// 2018), §3: matrices that fit one thread block are factored there (the panel in registers, the
// trailing update separate, §3.1); tall-skinny matrices go through a tiled path (§3.1, last
// paragraph). No host synchronisation inside a call. The CPU path is LAPACK (?geqrf, ?ungqr /
// ?orgqr, ?unmqr / ?ormqr) across the thread pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "covflow/linalg/batch.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::linalg {

// Side and Op (types.hpp): which side of C the orthogonal factor multiplies, and whether it is
// conjugate-transposed (transposed for real T); unmqr takes Op::none and Op::conj_trans.

// a:    count × (m × n), any m and n. Overwritten with R (upper triangle, min(m, n) × n) and the
//       reflectors below the diagonal.
// tau:  count × min(m, n) scalars, tau[b * min(m, n) + i].
// info: count entries: 0 success; status::non_finite_input when A held a NaN or an Inf (that
//       matrix's R, reflectors and tau are then NaN; the other matrices are unaffected, bit for bit
//       as in a run without it).
// On the CUDA backend info is written on the device, stream-ordered, without a host sync. All of
// a, tau and info must live where the Exec runs.
template <class T>
void geqrf(Exec& exec, Batch<T> a, std::span<T> tau, std::span<int> info);

// The thin Q of a geqrf: a is count × (m × n) with m ≥ n holding n reflectors in its columns (the
// first n columns of geqrf's output, for m ≥ n; the leading m × m block, for m < n), tau
// count × n. a is overwritten with Q's first n columns (m × n, orthonormal columns).
template <class T>
void ungqr(Exec& exec, Batch<T> a, std::span<const T> tau);

// C ← op(Q)·C (Side::left) or C·op(Q) (Side::right), Q = H₁…H_k the product of the k = a.cols
// reflectors held in a (count × (r × k), r = C's rows for left, C's columns for right, r ≥ k) with
// tau count × k. c is count × (m_c × n_c).
template <class T>
void unmqr(Exec& exec, Side side, Op op, Batch<const T> a, std::span<const T> tau, Batch<T> c);

// Bytes of scratch each operation takes from exec.workspace() for this shape. Reserve them once at
// start-up (exec.workspace().reserve(...)) and the calls never allocate.
template <class T>
std::size_t geqrf_workspace(const Exec& exec, std::int64_t m, std::int64_t n, std::int64_t count);
template <class T>
std::size_t ungqr_workspace(const Exec& exec, std::int64_t m, std::int64_t n, std::int64_t count);
template <class T>
std::size_t unmqr_workspace(const Exec& exec, Side side, std::int64_t m_c, std::int64_t n_c, std::int64_t k,
                            std::int64_t count);

}  // namespace covflow::linalg

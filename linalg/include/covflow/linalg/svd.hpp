// gesvj: the thin singular value decomposition A = U·Σ·Vᴴ of a batch of m × n matrices by one-sided
// Jacobi — Hestenes' method: plane rotations applied to pairs of columns of A (and of V) until every
// pair is orthogonal; the column norms are then the singular values. Jacobi computes the small
// singular values of a graded matrix (A = B·D, D diagonal) to high relative accuracy, which
// bidiagonalisation-based SVDs do not.
//
// Conventions (numpy.linalg.svd(A, full_matrices=False), LAPACK's ?gesvj): k = min(m, n) singular
// values, non-negative and descending; U is m × k and V is n × k with orthonormal columns. m < n is
// handled through the transpose (Aᴴ = V·Σ·Uᴴ).
//
// The CUDA path follows W. Boukaram, G. Turkiyyah, H. Ltaief, D. E. Keyes, "Batched QR and SVD
// Algorithms on GPUs with Applications in Hierarchical Matrix Compression" (Parallel Computing,
// 2018), §4–§6. Matrices of at most 32 × 32: one warp per matrix, in registers. Larger ones are
// first reduced by a QR factorisation of A with its columns sorted by decreasing norm (after
// Z. Drmač and K. Veselić, "New fast and accurate Jacobi SVD algorithm I", SIAM J. Matrix Anal.
// Appl. 2008), and Jacobi runs on Rᴴ: a warp per matrix when it is at most 32 × 32, a thread block
// with the matrix in shared memory and round-robin pair ordering (§5) while it fits the H100's
// 227 KB, and above that block Jacobi (§6) in its direct form — each pair of column blocks is
// orthogonalised through the QR of the pair and the SVD of its R factor. U is Q times the left
// vectors of Rᴴ's Jacobi. Convergence is decided on the device per matrix (the block Jacobi sweeps
// run in a CUDA graph's conditional loop); nothing is read back to the host.
// The CPU path is LAPACK's ?gesvj across the thread pool; ?gesvj has a fixed limit of 30 sweeps and
// no argument for another, so there max_sweeps is a check after the fact: a matrix that needed more
// sweeps than max_sweeps is reported no_convergence (its outputs are those of the sweeps LAPACK did
// run), and a max_sweeps above 30 acts as 30.
//
// Numerically zero columns. A singular value at or below the zero threshold max(m, n)·ε·c (c ≈ σ₁,
// below) is at the level of A's own rounding; its column's direction is noise that no rotation
// settles, so both backends judge convergence on the other columns only, and U's columns for these
// complete the rest to an orthonormal set (σ is still reported: it is accurate to O(n·ε·σ₁) in the
// absolute sense, as every σ of a backward-stable SVD). The backends differ in detail:
//   CUDA  c is the largest column norm of the matrix the sweeps work on (A, Aᴴ, or Rᴴ after the QR
//         preprocessing) before the first sweep, σ₁/√min(m, n) ≤ c ≤ σ₁; a pair of columns counts
//         when both norms are above the threshold as the pair is met; converged after a sweep in
//         which no counted pair's cosine exceeded tol = √n_w·ε (n_w the rows of that matrix: max(m, n),
//         or min(m, n) after the QR); off is the largest counted cosine of the last sweep.
//   CPU   c = σ₁ as ?gesvj returns it; ?gesvj itself rotates every pair, and off is measured on its
//         final columns afterwards; converged when ?gesvj says so, or when it ran out of its 30
//         sweeps with off ≤ max(m, n)·ε (then U is completed below the threshold; when ?gesvj
//         converged on its own every column is orthogonal and U is its own).
// A graded matrix's small singular values may lie below the threshold while being accurate to
// their own size: those columns keep being rotated, and their σ keep that accuracy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "covflow/linalg/batch.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::linalg {

struct SvdOptions {
  bool u = true;        // compute U (m × k)
  bool v = true;        // compute V (n × k)
  int max_sweeps = 0;   // 0: the default (30, as LAPACK's ?gesvj)
};

// Per-matrix result of gesvj, written on the device on the CUDA backend.
struct SvdInfo {
  std::int32_t status = 0;  // 0 converged; status::non_finite_input; status::no_convergence
  std::int32_t sweeps = 0;  // sweeps performed
  double off = 0;           // final max over column pairs of |a_iᴴa_j| / (‖a_i‖·‖a_j‖), over the
                            // columns above the zero threshold max(m, n)·ε·c, c ≈ σ₁ (below that a
                            // column is numerically zero: its direction is rounding noise, and U
                            // gets an orthonormal completion there; see above)
};

// a:    count × (m × n), overwritten (scratch; unspecified on return).
// s:    count × k singular values, descending: s[b * k + i].
// u:    count × (m × k) when options.u, else ignored (pass Batch<T>{}).
// v:    count × (n × k) when options.v, else ignored. V, not Vᴴ.
// info: count entries. A matrix with a NaN or an Inf gets status::non_finite_input and NaN
//       outputs; the other matrices are unaffected, bit for bit as in a run without it.
// All of a, s, u, v and info must live where the Exec runs.
template <class T>
void gesvj(Exec& exec, Batch<T> a, std::span<real_t<T>> s, Batch<T> u, Batch<T> v, std::span<SvdInfo> info,
           const SvdOptions& options = {});

// Bytes of scratch gesvj takes from exec.workspace() for this shape.
template <class T>
std::size_t gesvj_workspace(const Exec& exec, std::int64_t m, std::int64_t n, std::int64_t count,
                            const SvdOptions& options = {});

}  // namespace covflow::linalg

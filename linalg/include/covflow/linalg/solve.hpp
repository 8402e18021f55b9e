// Batched LU, Cholesky and least-squares factorizations and their solves, with LAPACK's
// conventions: getrf / getrs / gesv (partial pivoting), potrf / potrs / posv (Hermitian positive
// definite, lower or upper), gels (least squares through geqrf, qr.hpp).
//
// Every entry point takes any n; the caller never needs to know a size rule. On the CUDA backend
// n ≤ 32 runs in one fused kernel per call, register resident with several matrices per thread
// block and LU's row interchanges applied once at the end ("lazy swap") — A. Abdelfattah,
// A. Haidar, S. Tomov, J. Dongarra, "Batched one-sided factorizations of tiny matrices using GPUs:
// challenges and countermeasures", J. Comput. Sci. 26 (2018), §6–§10 — extended to complex, to
// upper Cholesky and to many right-hand sides. Larger n goes to cuBLAS / cuSOLVER's batched
// routines (pointer arrays built on the device, in the workspace). The CPU path is LAPACK per
// matrix across the thread pool, so its pivots are LAPACK's; the CUDA path picks the same pivots
// (the first largest |Re| + |Im| of the column, as i?amax).
//
// Shapes: A is count × (n × n) (gels: m × n, m ≥ n); B is count × (n × nrhs) (gels: m × nrhs),
// any ld ≥ rows and stride. ipiv is count × n ints, ipiv[b * n + i], 1-based, in LAPACK's
// sequential-swap form: row i was interchanged with row ipiv[i] − 1, for i = 0, 1, …
// info is count ints:
//   0                         success;
//   i > 0                     getrf / gesv: U(i, i) (1-based) is exactly zero — the factorization
//                             is complete (no NaN or Inf written), the solve of gesv is skipped;
//                             potrf / posv: the leading minor of order i is not positive definite
//                             — A holds a partial factor, the solve of posv is skipped;
//                             gels: R(i, i) is exactly zero — A is rank deficient, B untouched;
//   status::non_finite_input  A held a NaN or an Inf (potrf: in the triangle it reads, the
//                             diagonal's real part): that part of A is set to NaN (complex: a NaN
//                             real part; the imaginary part may be NaN or 0), ipiv to 1, 2, …, n
//                             (no interchange), B is left untouched.
// A bad matrix never changes another matrix's results. On the CUDA backend info is written on the
// device, stream-ordered, without a host synchronisation; all arrays must live where the Exec runs.
// Batches of any count (past 65 535 and past 2²⁰) are one call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "covflow/linalg/batch.hpp"
#include "covflow/linalg/exec.hpp"
#include "covflow/linalg/types.hpp"

namespace covflow::linalg {

// A = P·L·U, L unit lower (below the diagonal), U upper (on and above it), overwriting A.
template <class T>
void getrf(Exec& exec, Batch<T> a, std::span<int> ipiv, std::span<int> info);

// Solves op(A)·X = B with getrf's factors, op ∈ {none, trans, conj_trans}; B is overwritten by X.
// No info: a singular factor gives Inf/NaN in X, as LAPACK's ?getrs. ipiv must be as getrf wrote
// it (1…n): the CPU path refuses other entries (InvalidArgument, B untouched); the CUDA path, which
// cannot check them without a host round trip, does not (n ≤ 32 ignores such an entry, larger n
// passes it to cuBLAS).
template <class T>
void getrs(Exec& exec, Op op, Batch<const T> lu, std::span<const int> ipiv, Batch<T> b);

// getrf then getrs (op none) in one call; B is solved only where info is 0.
template <class T>
void gesv(Exec& exec, Batch<T> a, std::span<int> ipiv, Batch<T> b, std::span<int> info);

// A = L·Lᴴ (Uplo::lower, L in the lower triangle) or A = Uᴴ·U (Uplo::upper, U in the upper
// triangle). Only that triangle is read and written; the other one is left as it was. The
// diagonal's imaginary parts are not read (taken as zero) and are written as zero.
template <class T>
void potrf(Exec& exec, Uplo uplo, Batch<T> a, std::span<int> info);

// Solves A·X = B with potrf's factor (its triangle only is read); B is overwritten by X.
template <class T>
void potrs(Exec& exec, Uplo uplo, Batch<const T> factor, Batch<T> b);

// potrf then potrs in one call; B is solved only where info is 0.
template <class T>
void posv(Exec& exec, Uplo uplo, Batch<T> a, Batch<T> b, std::span<int> info);

// Least squares min ‖A·X − B‖₂ for m ≥ n of full rank, through A = Q·R (geqrf): A is overwritten
// by geqrf's output, B (m × nrhs) by Qᴴ·B with X in its first n rows — LAPACK ?gels, trans 'N'.
template <class T>
void gels(Exec& exec, Batch<T> a, Batch<T> b, std::span<int> info);

// Bytes of scratch each operation takes from exec.workspace() for this shape. Reserve them once
// at start-up (exec.workspace().reserve(...)) and the calls never allocate. 0 for n ≤ 32 on CUDA.
template <class T>
std::size_t getrf_workspace(const Exec& exec, std::int64_t n, std::int64_t count);
template <class T>
std::size_t getrs_workspace(const Exec& exec, std::int64_t n, std::int64_t nrhs, std::int64_t count);
template <class T>
std::size_t gesv_workspace(const Exec& exec, std::int64_t n, std::int64_t nrhs, std::int64_t count);
template <class T>
std::size_t potrf_workspace(const Exec& exec, std::int64_t n, std::int64_t count);
template <class T>
std::size_t potrs_workspace(const Exec& exec, std::int64_t n, std::int64_t nrhs, std::int64_t count);
template <class T>
std::size_t posv_workspace(const Exec& exec, std::int64_t n, std::int64_t nrhs, std::int64_t count);
template <class T>
std::size_t gels_workspace(const Exec& exec, std::int64_t m, std::int64_t n, std::int64_t nrhs, std::int64_t count);

}  // namespace covflow::linalg

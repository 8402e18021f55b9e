// rsvd: batched randomized SVD — a low-rank A ≈ U·Σ·Vᴴ of each m × n matrix of a batch from random
// samples of its range (N. Halko, P.-G. Martinsson, J. A. Tropp, "Finding structure with
// randomness", SIAM Review 2011: §4.1 with §4.5's power iterations, and §4.4's adaptive range
// finder; W. Boukaram et al., "Batched QR and SVD Algorithms on GPUs…", Parallel Computing 2018, §7).
//
// Three modes:
//   fixed rank       options.rank = k > 0: l = k + oversampling Gaussian samples Y = A·Ω, q power
//                    iterations Y ← A·orth(Aᴴ·orth(Y)), Q = orth(Y), B = QᴴA, the Jacobi SVD of B
//                    (gesvj), U = Q·U_B; the k leading triplets are returned.
//   fixed accuracy   options.rank = 0, options.tolerance > 0: samples in blocks of options.block,
//                    each projected against the basis so far and orthonormalised (the adaptive range
//                    finder), until ‖A − QQᴴA‖_F ≤ tol (relative to ‖A‖_F unless options.absolute)
//                    or options.max_rank columns; then the SVD of B, and each matrix's rank is the
//                    smallest r with ‖A − U_rΣ_rV_rᴴ‖_F within the tolerance. The error is exact, not
//                    estimated: for orthonormal Q, ‖A − QQᴴA‖_F² = ‖A‖_F² − ‖QᴴA‖_F², accumulated
//                    in double — so the tolerance must be above the working precision's reach
//                    (tolerance ≥ 10·√ε: 3.5e-3 in float, 1.5e-7 in double; smaller is refused).
//                    Every matrix ends at its own rank (info[b].rank); the outputs are padded with
//                    zeros beyond it.
//   Hermitian        options.hermitian: A (n × n) Hermitian positive semi-definite, A ≈ U·Λ·Uᴴ with
//                    Λ descending in s. Fixed rank: the stabilised Nyström approximation from the one
//                    sketch Y = A·Ω (J. A. Tropp, A. Yurtsever, M. Udell, V. Cevher, "Fixed-rank
//                    approximation of a positive-semidefinite matrix from streaming data", NeurIPS
//                    2017, Algorithm 3, with the core's inverse square root from its
//                    eigendecomposition): one product with A where the general form takes two.
//                    Fixed accuracy: the range finder as above (A = Aᴴ), then the eigen form
//                    Qᴴ·A·Q (one more product): ‖A − QQᴴAQQᴴ‖_F² = ‖A‖_F² − ‖QᴴAQ‖_F².
//
// The matrix is given either densely (a Batch) or as a Sampler: Y = A·X and Z = Aᴴ·X on whole
// batches, on the Exec's backend — for the H² and TLR code, where A is not stored.
//
// Reproducible: the samples are a counter-based function of (seed, matrix index, sample index,
// row), the same whatever the thread count or batch position of other matrices; a matrix gives
// the same factors with the same seed.
//
// Workspace: rsvd_workspace() bytes, passed by the caller (memory where the Exec runs); the QR,
// SVD and eigen steps also take exec.workspace() as they always do. No allocation otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "covflow/linalg/batch.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::linalg {

struct RsvdOptions {
  int rank = 0;               // fixed rank k (> 0); 0 selects fixed accuracy
  int oversampling = 10;      // fixed rank: extra samples p (l = min(k + p, m, n))
  int power_iterations = 1;   // q
  double tolerance = 0;       // fixed accuracy: > 0
  bool absolute = false;      // the tolerance is absolute (default: relative to ‖A‖_F)
  int block = 16;             // fixed accuracy: samples per block
  int max_rank = 0;           // fixed accuracy: the most columns of Q (0: min(m, n))
  bool hermitian = false;     // A Hermitian positive semi-definite: A ≈ U·Λ·Uᴴ
  std::uint64_t seed = 0;
  bool u = true;              // compute U (m × r)
  bool v = true;              // compute V (n × r); ignored when hermitian
};

namespace rsvd_status {
inline constexpr std::int32_t ok = 0;
inline constexpr std::int32_t non_finite_input = 1;  // a NaN or an Inf: outputs NaN, rank 0
inline constexpr std::int32_t max_rank_reached = 2;  // fixed accuracy: stopped at max_rank first
inline constexpr std::int32_t svd_failed = 3;        // the small SVD or eigenproblem did not converge
}  // namespace rsvd_status

// Per matrix, written where the Exec runs.
struct RsvdInfo {
  std::int32_t status = 0;
  std::int32_t rank = 0;    // columns of U, V (and values in s) that are set; the rest are zero
  double error = 0;         // ‖A − U·Σ·Vᴴ‖_F of the returned rank (Hermitian: ‖A − U·Λ·Uᴴ‖_F),
                            // from ‖A‖_F² − Σσᵢ²: exact for the computed basis but for the rounding
                            // of the sums, about (m + n)·ε·‖A‖_F² in the square; NaN for a sampler
                            // without norms and for the Hermitian fixed-rank (Nyström) form
};

// A matrix the algorithm may only multiply: apply(X, Y) sets Y = A·X (X: n × l, Y: m × l),
// apply_adjoint(X, Z) sets Z = Aᴴ·X (X: m × l, Z: n × l), every matrix of the batch at once, with
// the Exec's backend (the CUDA one on its stream, without synchronising). apply_adjoint is not used
// in the Hermitian mode. norms: ‖A_b‖_F per matrix (host memory) — needed for fixed accuracy and for
// RsvdInfo::error; may be empty for fixed rank (the error is then NaN).
template <class T>
struct Sampler {
  std::int64_t m = 0, n = 0, count = 0;
  std::function<void(Batch<const T> x, Batch<T> y)> apply;
  std::function<void(Batch<const T> x, Batch<T> z)> apply_adjoint;
  std::span<const real_t<T>> norms;
};

// r = options.rank (fixed rank) or the max_rank in effect (fixed accuracy).
// a:    count × (m × n), not modified.
// s:    count × r: σ descending (Hermitian: λ, descending, ≥ 0), zeros beyond each matrix's rank.
// u:    count × (m × r) when options.u; v: count × (n × r) when options.v and not hermitian.
// info: count entries.
// workspace: at least rsvd_workspace(...) bytes, where the Exec runs.
template <class T>
void rsvd(Exec& exec, Batch<const T> a, std::span<real_t<T>> s, Batch<T> u, Batch<T> v, std::span<RsvdInfo> info,
          std::span<std::byte> workspace, const RsvdOptions& options);
template <class T>
void rsvd(Exec& exec, const Sampler<T>& a, std::span<real_t<T>> s, Batch<T> u, Batch<T> v, std::span<RsvdInfo> info,
          std::span<std::byte> workspace, const RsvdOptions& options);

// The r above: the number of columns of U and V (values per matrix in s) for this shape.
int rsvd_output_rank(std::int64_t m, std::int64_t n, const RsvdOptions& options);

// Bytes of the workspace argument.
template <class T>
std::size_t rsvd_workspace(const Exec& exec, std::int64_t m, std::int64_t n, std::int64_t count,
                           const RsvdOptions& options);

}  // namespace covflow::linalg

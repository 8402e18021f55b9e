// cholupdate: rank-k update or downdate of lower Cholesky factors. Given L with A = L·Lᴴ (lower
// triangular, real positive diagonal, as ?potrf and numpy.linalg.cholesky return it) and V (n×k),
// L is overwritten with the lower factor L̃ of
//   A + V·Vᴴ   (Sign::update)     or     A − V·Vᴴ   (Sign::downdate),
// in O(k·n²) operations instead of the O(n³) of refactoring.
//
// The algorithm is C. Walder, "Rank k Cholesky Up/Down-dating on the GPU: gpucholmodV0.2" (2010),
// Algorithm 1 (§2): column j of L is combined with each of the k columns of V by a unitary plane
// rotation (update, LINPACK dchud's) or a hyperbolic rotation (downdate, in the paper's "mixed"
// form — the new L enters the update of V — that keeps downdates stable) that zeroes V's row j.
// (The paper uses the hyperbolic form for updates too; it loses accuracy when a diagonal entry of
// L is tiny.) The k rotations of a column are generated together (their diagonals are prefix sums,
// so no rotation waits on the previous one's square root) and applied to each row as one pass over
// the k columns of V held per thread — the paper's ElementsPerThread panels (§4.1) with
// ElementsPerThread = k.
//
// CPU: column sweep per matrix (LINPACK dchud order, the inner loop vectorised along the column);
// matrices across the thread pool. CUDA: see cholupdate_cuda.cu — batched kernels for n ≤ 256
// (updates with n ≤ 128 and small k: one warp per matrix; otherwise one thread block per matrix)
// and, above that, a row-block pipeline in which the whole factor is updated on the GPU by one
// kernel without a launch per column (§3's CholeskyModifyA order); large updates with k ≤ 16 go
// first through a product form L̃ = L·M (M the closed-form Cholesky factor of I + WWᴴ,
// W = L⁻¹V), whose only sequential part is a blocked triangular solve.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "covflow/linalg/batch.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::linalg {

enum class Sign : std::int8_t {
  update = 1,     // A + V·Vᴴ
  downdate = -1,  // A − V·Vᴴ
};

// Failure safety: a matrix that fails is left bit for bit as it was. CPU: downdates run a probe
// sweep that stores nothing, then the same sweep storing L̃ (updates, which cannot fail once the
// input is checked, run once — the one exception: an update whose α² + Σ|v|² overflows to Inf
// mid-sweep, inputs near √(max of T), reports that column after storing the columns before it).
// CUDA, n ≤ 256: updates likewise (input checked, then one sweep in place, same exception);
// downdates work on a shared-memory copy of the triangle written back on success (or
// probe-then-commit when it does not fit). CUDA, n > 256: the product form writes only after its
// guard has passed on the device (otherwise nothing) — except on its tensor-core path (real double,
// 4 < k ≤ 16), which writes L̃ while the triangular solve still runs and, when the guard then refuses
// the matrix, puts every tile back from a copy in the workspace; the rotation pipeline always
// probes, then commits.
//
// l:    count × (n × n) lower factors. Only the lower triangle is read and written; the strict
//       upper triangle is never referenced. The diagonal is read as its real part (a factor's
//       diagonal is real and positive) and written real.
// v:    count × (n × k), read only: V is preserved. k = 0 is a no-op (info 0).
// info: count entries, one per matrix:
//         0                          success, L overwritten with L̃;
//         j > 0 (1-based, LAPACK's)  column j failed: a downdate that would leave A − V·Vᴴ not
//                                    positive definite at its j-th leading minor, or a diagonal
//                                    L(j, j) that is not positive (L is then not a Cholesky factor);
//         status::non_finite_input   a NaN or an Inf in L's lower triangle or in V.
//       Whenever info ≠ 0 that matrix's L is left exactly as it was (bit for bit), and the other
//       matrices are unaffected.
// On the CUDA backend info is written on the device, stream-ordered, without a host sync. All of
// l, v and info must live where the Exec runs. On CUDA k is limited to kCudaMaxRank (split a
// larger V into several calls).
template <class T>
void cholupdate(Exec& exec, Batch<T> l, Batch<const T> v, Sign sign, std::span<int> info);

inline constexpr std::int64_t kCudaMaxRank = 64;

// Bytes of scratch cholupdate takes from exec.workspace() for this shape: O(n·k) per matrix in
// flight (CPU: a copy of V per worker; CUDA: the rotation parameters of every column for n > 256,
// nothing for n ≤ 256), plus on CUDA, for updates with n > 256, the product form's sums over
// segments of the factor's 64×64 tiles, O(n²k/64²). Real double with n > 256 and 4 < k ≤ 16 (the
// tensor-core path) also takes one copy of the factor's lower 64×64 tiles and a 64×64 block per row
// block — about 4.5·n² bytes per matrix (113 MB at n = 5000, 1.7 GB at n = 20000) — so that
// its apply can run under the solve and a refused matrix is put back bit for bit. No other shape
// takes a copy of L. Reserve them once at start-up and cholupdate never allocates.
template <class T>
std::size_t cholupdate_workspace(const Exec& exec, std::int64_t n, std::int64_t k, std::int64_t count);

}  // namespace covflow::linalg

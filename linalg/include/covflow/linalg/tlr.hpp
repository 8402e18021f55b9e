// Tile low-rank (TLR) matrices: each n × n matrix of a batch cut into tiles of b × b, the diagonal
// tiles kept dense and every off-diagonal tile kept as a product U·Vᴴ of rank k ≤ max_rank, the
// rank chosen per tile to a tolerance. A. Charara, D. Keyes, H. Ltaief, "Tile Low-Rank GEMM Using
// Batched Operations on GPUs", Euro-Par 2018, §4 (the format, the GEMM variants and the driver as
// a sequence of outer products) and §5 (LLD as three small products; LLL's recompression by QR of
// the stacked factors and an SVD of the small core). Beyond the paper: complex elements, op T and
// C on each operand, ranks chosen per tile to an accuracy, a ragged last tile, a Hermitian form
// that stores the lower tiles only, and a tile Cholesky factorization and solve built on the same
// low-rank updates.
//
// Layout (one Tlr view; every array lives where the Exec runs — host memory for the CPU backend,
// device memory for CUDA):
//   nt = ⌈n / b⌉ tile rows and columns; tile row i has rows(i) = min(b, n − i·b) rows.
//   diag   count × nt tiles of b × b, column-major, ld b: tile i of matrix c at
//          diag + (c·nt + i)·b². The last tile, when ragged, is padded to b × b: the padding holds
//          the identity (ones on its diagonal, zeros elsewhere), so a factorization of the padded
//          tile leaves the matrix's own part untouched.
//   u, v   count × slots slabs of b × max_rank, ld b: the tile in slot s of matrix c is
//          U·Vᴴ with U at u + (c·slots + s)·b·max_rank (rows(i) × k used) and V likewise (rows(j)
//          × k). Columns past the tile's rank and rows past rows(i) / rows(j) are zero, so every
//          slab may be used whole as a b × max_rank factor.
//   rank   count × slots ints: k of each tile (0 ≤ k ≤ max_rank).
//   Slots: general — every off-diagonal tile (i, j), i ≠ j, slot i·(nt − 1) + j − (j > i);
//          Hermitian — the tiles below the diagonal only, i > j, slot i·(i − 1)/2 + j; the tile
//          (j, i) above is the conjugate transpose, V·Uᴴ.
//
// Memory (bytes, per matrix; tlr_bytes): nt·b²·sizeof(T) + slots·2·b·max_rank·sizeof(T) +
// slots·sizeof(int). What the ranks actually need (TlrStats::compact_bytes), the figure to
// compare with dense n²·sizeof(T): Σᵢ rows(i)²·sizeof(T) + Σ over stored tiles of
// (rows(i) + rows(j))·k_ij·sizeof(T).
//
// Accuracy. tlr_compress truncates each tile's SVD at the smallest rank whose discarded singular
// values σ satisfy Σσ² ≤ τ², with τ from TlrOptions:
//   scope matrix (default): τ² = tol²·‖A‖_F² / (stored off-diagonal tiles), so that the whole
//                           matrix's error ‖A − Ã‖_F ≤ tol·‖A‖_F (Hermitian: counting each stored
//                           tile twice, as it stands for two);
//   scope tile:             τ = tol·‖A_ij‖_F for each tile on its own.
// A tile that needs more than max_rank is cut at max_rank and counted (TlrInfo::capped_tiles, and
// the status max_rank_reached); the error reported is then the true one, above the tolerance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "covflow/linalg/batch.hpp"
#include "covflow/linalg/exec.hpp"
#include "covflow/linalg/types.hpp"

namespace covflow::linalg {

struct TlrShape {
  std::int64_t n = 0;         // order of each matrix
  std::int64_t tile = 0;      // b ≥ 1
  std::int64_t max_rank = 0;  // capacity of each off-diagonal tile, 1 ≤ max_rank ≤ b
  std::int64_t count = 0;     // matrices in the batch
  bool hermitian = false;     // lower tiles only

  std::int64_t tiles() const { return tile > 0 ? (n + tile - 1) / tile : 0; }  // nt
  std::int64_t rows(std::int64_t i) const { return i + 1 < tiles() ? tile : n - (tiles() - 1) * tile; }
  std::int64_t slots() const {
    const std::int64_t nt = tiles();
    return hermitian ? nt * (nt - 1) / 2 : nt * (nt - 1);
  }
  // The slot of the stored tile (i, j): i ≠ j, and i > j when hermitian.
  std::int64_t slot(std::int64_t i, std::int64_t j) const {
    return hermitian ? i * (i - 1) / 2 + j : i * (tiles() - 1) + j - (j > i ? 1 : 0);
  }
  std::int64_t diag_elements() const { return tiles() * tile * tile; }      // per matrix
  std::int64_t factor_elements() const { return slots() * tile * max_rank; }  // per matrix, U (or V)
  bool operator==(const TlrShape&) const = default;
};

template <class T>
struct Tlr {
  TlrShape shape;
  T* diag = nullptr;
  T* u = nullptr;
  T* v = nullptr;
  std::conditional_t<std::is_const_v<T>, const int, int>* rank = nullptr;

  template <class U = T>
    requires(!std::is_const_v<U>)
  operator Tlr<const U>() const {
    return Tlr<const U>{shape, diag, u, v, rank};
  }

  T* diag_tile(std::int64_t c, std::int64_t i) const { return diag + (c * shape.tiles() + i) * shape.tile * shape.tile; }
  T* u_tile(std::int64_t c, std::int64_t s) const { return u + (c * shape.slots() + s) * shape.tile * shape.max_rank; }
  T* v_tile(std::int64_t c, std::int64_t s) const { return v + (c * shape.slots() + s) * shape.tile * shape.max_rank; }
};

// Bytes of storage a Tlr of this shape takes (all matrices): the memory formula above times count,
// each of the four parts rounded up to 256 bytes (tlr_view's alignment).
std::size_t tlr_bytes(ElementType type, const TlrShape& shape);

// A Tlr<T> over caller-provided storage of at least tlr_bytes(...) bytes (256-byte aligned parts:
// diag, u, v, rank, in that order, each at a multiple of 256 bytes from storage's start, which must be
// aligned for T). Throws InvalidArgument on a bad shape, too little or misaligned storage.
template <class T>
Tlr<T> tlr_view(const TlrShape& shape, std::span<std::byte> storage);

// Throws InvalidArgument naming `op` and `what` unless the shape is well formed: n ≥ 0, b ≥ 1,
// 1 ≤ max_rank ≤ b, count ≥ 0, and n within BLAS/LAPACK's 32-bit limit.
void validate(const TlrShape& shape, const char* op, const char* what);
// The shape as above, and the pointers set that a non-empty batch needs (u, v and rank when it has
// off-diagonal tiles).
template <class T>
void validate(const Tlr<T>& tlr, const char* op, const char* what);

enum class TlrScope { matrix, tile };

struct TlrOptions {
  double tolerance = 1e-6;             // > 0, relative (see Accuracy above)
  TlrScope scope = TlrScope::matrix;
};

namespace tlr_status {
inline constexpr std::int32_t ok = 0;
inline constexpr std::int32_t non_finite_input = 1;     // a NaN or an Inf: the outputs are NaN (a TLR
                                                        // output: every element of diag, u and v,
                                                        // ranks max_rank, so that any use propagates)
inline constexpr std::int32_t max_rank_reached = 2;     // some tile needed more than max_rank
inline constexpr std::int32_t svd_failed = 3;           // a tile's SVD failed (docs/tlr.md: a Jacobi SVD
                                                        // out of sweeps still truncates exactly, and is not)
inline constexpr std::int32_t not_positive_definite = 4;  // tlr_potrf: see TlrInfo::column
}  // namespace tlr_status

// Per matrix, written where the Exec runs.
struct TlrInfo {
  std::int32_t status = 0;
  std::int32_t capped_tiles = 0;  // tiles cut at max_rank
  std::int32_t column = 0;        // tlr_potrf: the 1-based column whose pivot was not positive
  std::int32_t reserved = 0;
  double error = 0;               // compress: ‖A − Ã‖_F from the discarded σ; gemm LLL and potrf:
                                  // the root of the sum of squares of everything truncated in the
                                  // call (Hermitian: each stored tile counted twice) — the error
                                  // the truncations add, up to how a tile's truncations at
                                  // successive steps combine
  double norm = 0;                // compress: ‖A‖_F; LLL: ‖C‖_F after the update; potrf: ‖A‖_F
};

// Ranks and bytes of a batch, from its rank array copied to the host (helper for reports and tests).
struct TlrStats {
  std::int64_t min_rank = 0, max_rank = 0;
  double mean_rank = 0;
  std::size_t stored_bytes = 0;   // tlr_bytes
  std::size_t compact_bytes = 0;  // what the ranks need (formula above), all matrices
  std::size_t dense_bytes = 0;    // count·n²·sizeof(T)
};
TlrStats tlr_stats(ElementType type, const TlrShape& shape, std::span<const int> host_ranks);

// ---- operations ---------------------------------------------------------------------------------
// Every call takes workspace of at least the matching *_workspace(...) bytes, where the Exec runs,
// and allocates nothing. On the CUDA backend nothing is read back: ranks and info are written on
// the device, stream-ordered.

// Dense → TLR. a: count × (n × n); Hermitian shapes read the tiles on and below the diagonal (the
// diagonal tiles whole). out's storage is overwritten.
template <class T>
void tlr_compress(Exec& exec, Batch<const T> a, Tlr<T> out, std::span<TlrInfo> info, std::span<std::byte> workspace,
                  const TlrOptions& options = {});
template <class T>
std::size_t tlr_compress_workspace(const Exec& exec, const TlrShape& shape);

// TLR → dense, count × (n × n) (Hermitian: both triangles).
template <class T>
void tlr_expand(Exec& exec, Tlr<const T> a, Batch<T> out);

// Y = α·op(A)·X + β·Y, X: count × (n × nrhs), Y likewise.
template <class T>
void tlr_gemv(Exec& exec, Op op, T alpha, Tlr<const T> a, Batch<const T> x, T beta, Batch<T> y,
              std::span<std::byte> workspace);
template <class T>
std::size_t tlr_gemv_workspace(const Exec& exec, const TlrShape& shape, std::int64_t nrhs);

// LLD: C = α·op(A)·op(B) + β·C with A and B in TLR (the same n and b) and C dense.
template <class T>
void tlr_gemm(Exec& exec, Op op_a, Op op_b, T alpha, Tlr<const T> a, Tlr<const T> b, T beta, Batch<T> c,
              std::span<std::byte> workspace);
template <class T>
std::size_t tlr_gemm_lld_workspace(const Exec& exec, const TlrShape& a, const TlrShape& b);

// LLL: C = α·op(A)·op(B) + β·C with C in TLR too, each updated tile recompressed to the options'
// tolerance (scope matrix: relative to ‖C‖_F after each outer product of the driver, the rank-b
// update by one tile column of op(A) and tile row of op(B)). A Hermitian C has its lower tiles
// updated only: the caller asserts that the product is Hermitian. C shares no storage with A or B;
// β = 0 does not read C.
template <class T>
void tlr_gemm(Exec& exec, Op op_a, Op op_b, T alpha, Tlr<const T> a, Tlr<const T> b, T beta, Tlr<T> c,
              std::span<TlrInfo> info, std::span<std::byte> workspace, const TlrOptions& options = {});
template <class T>
std::size_t tlr_gemm_lll_workspace(const Exec& exec, const TlrShape& a, const TlrShape& b, const TlrShape& c);

// A = L·Lᴴ for a Hermitian TLR A (lower tiles), in place: the diagonal tiles hold L's diagonal
// blocks in their lower triangles, the off-diagonal tiles L's. Right-looking by tile columns; the
// trailing updates are LLL products recompressed to the options' tolerance (scope matrix: relative
// to the input's ‖A‖_F). A matrix whose pivot at global column p (1-based) is not positive gets
// status not_positive_definite, column p, and is left partially factored.
template <class T>
void tlr_potrf(Exec& exec, Tlr<T> a, std::span<TlrInfo> info, std::span<std::byte> workspace,
               const TlrOptions& options = {});
template <class T>
std::size_t tlr_potrf_workspace(const Exec& exec, const TlrShape& shape);

// Solves A·X = B with tlr_potrf's factor; B (count × (n × nrhs)) is overwritten by X. Matrices
// whose factorization failed (info status other than ok and max_rank_reached, passed here) are
// left untouched.
template <class T>
void tlr_potrs(Exec& exec, Tlr<const T> l, Batch<T> b, std::span<const TlrInfo> info, std::span<std::byte> workspace);
template <class T>
std::size_t tlr_potrs_workspace(const Exec& exec, const TlrShape& shape, std::int64_t nrhs);

}  // namespace covflow::linalg

// H² matrices: a Hermitian n × n covariance matrix A(x_i, x_j) on n points, held as a cluster
// tree with nested bases, coupling matrices for the admissible (far-field) blocks and dense blocks
// for the near field — O(n) memory and matvec instead of O(n²). The construction, the compression
// by a batched SVD per level and the representation follow W. Boukaram, G. Turkiyyah, H. Ltaief,
// D. Keyes, "Batched QR and SVD algorithms on GPUs with applications in hierarchical matrix
// compression", Parallel Computing 2018, §8.1–§8.3; the matvec, the orthogonalisation and the
// truncation weighted by the couplings follow W. Boukaram, G. Turkiyyah, D. Keyes, "Hierarchical
// matrix operations on GPUs: matrix-vector multiplication and compression", ACM TOMS 45(1), 2019
// (the hgemv, horthog and hcompress of H2Opus); the interpolation follows S. Börm, J. Garcke,
// "Approximating Gaussian processes with H²-matrices", ECML 2007, and the error bound of the
// truncation S. Börm, "Efficient numerical methods for non-local operators", EMS 2010 (the
// chapter on compression of nested bases).
// Beyond those: complex elements, the Hermitian (not only real symmetric) form and a radar
// clutter kernel. The operations of this first part run on the CPU backend (on a CUDA Exec they throw
// Unavailable naming themselves); the device mirror H2Device<T>, holding the same flat arrays, and
// its construction (from geometry and from a dense matrix), orthogonalisation, compression,
// matvec and expansion are declared at the end (CUDA builds).
//
// Format (Hermitian: one basis tree, U = V, and S_st = S_tsᴴ):
//   Cluster tree. A binary tree with every leaf at one depth L, built level by level: every node
//   of a level is split in two at the mean of its points' coordinate along the widest side of
//   its bounding box (points ≤ mean to the first child), until every node of the last level
//   holds at most leaf_size points. When a node of more than leaf_size points would leave a side
//   empty (its points coincide, or rounding puts the mean on an end) it is split by count
//   instead, at the median along that side; so are all nodes from depth ⌈log₂⌈n/leaf⌉⌉ + 4 on,
//   so that the depth stays O(log n) on any point set. Nodes of at most leaf_size points still
//   split at the mean, and may leave a side empty: empty nodes hold nothing and take part in no
//   block. Node t of level l (0 ≤ t < 2^l) has children 2t and 2t + 1 and holds the points
//   [begin, end) of the tree order; `permutation` maps tree position → caller's point index.
//   Every input and output of the API is in the caller's point order.
//   Block tree. A dual traversal from (root, root) keeps the pairs (t, s) with t ≥ s in node
//   order (the other triangle is their conjugate transpose). A pair of non-empty nodes is
//   admissible when
//       max(diam t, diam s) ≤ η · dist(t, s),  dist > 0,
//   with diam the diagonal of the node's bounding box and dist the distance between the boxes.
//   An admissible pair is a coupling block A_ts ≈ U_t·S_ts·U_sᴴ; an inadmissible pair splits
//   into its children pairs, and at level L becomes a dense block.
//   Ranks. One rank k_l per level; a node's basis may have fewer useful columns (padding columns
//   are zero). Levels above the first level with couplings have rank 0.
//   Flat storage, level by level (what a batched GPU kernel takes, strided, column-major):
//     leaf_basis  2^L matrices of m × k_L, ld m (m = leaf capacity = leaf_size), leaf i at
//                 i·m·k_L; rows past the leaf's size are zero.
//     transfer    per level l = 1 … L: 2^l matrices of k_l × k_{l−1} (child × parent), ld k_l,
//                 node c of level l at transfer_offset[l] + c·k_l·k_{l−1}; the parent's basis is
//                 U_t = [U_{2t}·E_{2t}; U_{2t+1}·E_{2t+1}].
//     coupling    per level l: the pairs [couplings.level_ptr[l], couplings.level_ptr[l+1]), each
//                 a k_l × k_l matrix, ld k_l, pair p at coupling_offset[l] + (p − level_ptr[l])·k_l².
//     dense       the dense pairs (all at level L) of m × m, ld m, pair p at p·m²; rows and
//                 columns past a leaf's size are zero. The nugget is on the diagonal blocks.
//   Pair lists (H2Pairs, plain int arrays): row/col per pair (level-local node numbers, row ≥ col),
//   sorted by (row, col); a block-row index (BSR) row_ptr and, for the conjugate transposes, a
//   block-column index col_ptr/col_pairs, so that every node's whole block row is reachable
//   without a write conflict between nodes.
//
// Memory (bytes, h2_stats/h2_bytes; s = sizeof(T), D dense pairs, C_l coupling pairs at level l):
//   dense      D·m²·s
//   bases      (2^L·m·k_L + Σ_{l=1..L} 2^l·k_l·k_{l−1})·s     (leaf bases + transfers)
//   couplings  Σ_l C_l·k_l²·s
//   total      dense + bases + couplings; the int index arrays are reported apart (index_bytes).
//   Compare with the dense matrix, n²·s.
//
// Kernels (r = ‖x − y‖₂, σ² = variance, ℓ = length; points are d = 1, 2 or 3 coordinates):
//   exponential  σ²·exp(−r/ℓ)                                   (Matérn ν = 1/2)
//   gaussian     σ²·exp(−r²/(2ℓ²))
//   matern       ν = 1/2: σ²·exp(−r/ℓ);  ν = 3/2: σ²·(1 + √3·r/ℓ)·exp(−√3·r/ℓ);
//                ν = 5/2: σ²·(1 + √5·r/ℓ + 5r²/(3ℓ²))·exp(−√5·r/ℓ)
//   clutter      (complex element types only) the spatial covariance of diffuse clutter spread
//                uniformly in azimuth over [θ₀ − Δ/2, θ₀ + Δ/2] at wavelength λ, on an array in
//                the x–y plane (positions in metres), θ measured from the y axis towards x:
//                  R(x, y) = σ²·(1/Δ)·∫ exp(j·(2π/λ)·(x − y)·u(θ)) dθ,  u(θ) = (sin θ, cos θ),
//                (d = 1: a line array along x, u = sin θ; d = 3: z is ignored, the clutter
//                lies in the horizontal plane). R(y, x) = conj R(x, y). Evaluated by
//                Gauss–Legendre quadrature on N nodes with ω = (2π/λ)·D·Δ/2 the largest phase
//                rate over the sector in the quadrature variable (D the diagonal of the points'
//                bounding box, the largest |x − y|):  N = ⌈ω/2 + 4·ω^(1/3)⌉ + 12. A rule of
//                N nodes is exact for polynomials of degree 2N − 1, and the Chebyshev
//                coefficients of exp(jωt) on [−1, 1] (Bessel J_k(ω)) fall super-exponentially
//                past k ≈ ω + c·ω^(1/3); the margin keeps the quadrature error near rounding.
//   nugget       σ_n² added to the diagonal (H2Options::nugget ≥ 0), as measurement noise.
//
// Construction (h2_build): the bases of node t are the tensor Lagrange polynomials on the p^d
// Chebyshev nodes ξ_a = c + h·cos((2a + 1)π/(2p)) of t's bounding box (sides below 10⁻⁶ of the
// root's diagonal are widened to that, so that a flat box still has distinct nodes); the
// transfers E_c[a, b] = L^t_b(ξ^c_a) are exact (a parent's polynomials of degree p − 1 are
// reproduced by the child's interpolation); S_ts = K(ξ^t_a, ξ^s_b); dense blocks K(x_i, x_j).
// Rank k = p^d at every level below the first with couplings.
//
// Accuracy.
//   h2_build: the interpolation error of an asymptotically smooth kernel falls like
//     (c·η/(1 + η))^p per block (Börm & Garcke 2007); the tests measure ‖A − A_H‖_F/‖A‖_F
//     densely. The clutter kernel is analytic but oscillatory: its error falls once p exceeds the
//     phase a cluster spans, ~ (2π/λ)·diam t.
//   h2_orthogonalize: the represented matrix is unchanged up to rounding; every basis becomes
//     orthonormal (U_tᴴU_t = diag(I_r, 0) with r = min(points of t, k_l)).
//   h2_compress(tol): ‖A_H − Ã_H‖_F ≤ tol·‖A_H‖_F for the matrix before the call (an upper bound:
//     the true error is usually well below). See h2_compress below for the thresholds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "covflow/linalg/batch.hpp"
#include "covflow/linalg/exec.hpp"
#include "covflow/linalg/types.hpp"

namespace covflow::linalg {

enum class H2Kernel : std::uint8_t { exponential, gaussian, matern, clutter };

struct H2KernelSpec {
  H2Kernel kind = H2Kernel::exponential;
  double variance = 1.0;       // σ² > 0
  double length = 0.1;         // ℓ > 0 (exponential, gaussian, matern)
  double nu = 0.5;             // matern: 0.5, 1.5 or 2.5
  double wavelength = 1.0;     // clutter: λ > 0, metres
  double sector_center = 0.0;  // clutter: θ₀, radians from the y axis
  double sector_width = 0.5;   // clutter: Δ, radians, 0 < Δ ≤ 2π
};

struct H2Options {
  std::int64_t leaf_size = 64;  // m ≥ 1: the most points a leaf holds, and the leaf capacity
  double eta = 0.7;             // η > 0 of the admissibility above
  int cheb_order = 6;           // p, 1 ≤ p ≤ 32, Chebyshev nodes per dimension: rank p^d
  double nugget = 0.0;          // σ_n² ≥ 0 on the diagonal
};

// The cluster tree (independent of the element type).
struct H2Tree {
  std::int64_t n = 0;
  int dim = 0;
  int depth = 0;                       // L: leaves at level L, 2^L of them
  std::int64_t leaf_capacity = 0;      // m
  std::vector<int> permutation;        // tree position → caller's point index
  std::vector<int> node_begin, node_end;  // heap order: node t of level l at (2^l − 1) + t
  std::vector<double> box;             // heap order, 6 per node: lo[3], hi[3] (lo > hi when empty)

  static std::int64_t heap(int level, std::int64_t t) { return (std::int64_t{1} << level) - 1 + t; }
  std::int64_t nodes(int level) const { return std::int64_t{1} << level; }
  int begin(int level, std::int64_t t) const { return node_begin[heap(level, t)]; }
  int size(int level, std::int64_t t) const { return node_end[heap(level, t)] - node_begin[heap(level, t)]; }
};

// Block pairs level by level (see Format above).
struct H2Pairs {
  std::vector<int> level_ptr;  // L + 2: level l's pairs are [level_ptr[l], level_ptr[l + 1])
  std::vector<int> row, col;   // per pair, level-local nodes, row ≥ col, sorted by (row, col)
  std::vector<int> row_ptr;    // per level 2^l + 1 entries at (2^l − 1 + l): pairs of block row t
  std::vector<int> col_ptr;    // likewise for block columns,
  std::vector<int> col_pairs;  // the pairs sorted by (col, row)

  static std::int64_t ptr_offset(int level) { return (std::int64_t{1} << level) - 1 + level; }
  int count() const { return level_ptr.empty() ? 0 : level_ptr.back(); }
  int count(int level) const { return level_ptr[level + 1] - level_ptr[level]; }
};

template <class T>
struct H2 {
  H2Tree tree;
  H2Pairs couplings;          // admissible pairs
  H2Pairs dense_pairs;        // inadmissible leaf pairs (level L only)
  std::vector<int> rank;      // k_l, l = 0 … L
  std::vector<T> leaf_basis;  // 2^L × (m × k_L)
  std::vector<T> transfer;    // level l at transfer_offset[l] (l ≥ 1)
  std::vector<std::int64_t> transfer_offset;  // L + 2
  std::vector<T> coupling;    // level l at coupling_offset[l]
  std::vector<std::int64_t> coupling_offset;  // L + 2
  std::vector<T> dense;       // D × (m × m)
  bool orthogonal = false;    // set by h2_orthogonalize and h2_compress

  const T* leaf(std::int64_t i) const { return leaf_basis.data() + i * tree.leaf_capacity * rank[tree.depth]; }
  const T* transfer_of(int level, std::int64_t c) const {
    return transfer.data() + transfer_offset[level] + c * rank[level] * rank[level - 1];
  }
  const T* coupling_of(int level, int pair) const {
    return coupling.data() + coupling_offset[level] +
           std::int64_t{pair - couplings.level_ptr[level]} * rank[level] * rank[level];
  }
  const T* dense_of(int pair) const { return dense.data() + std::int64_t{pair} * tree.leaf_capacity * tree.leaf_capacity; }
};

struct H2Stats {
  std::int64_t n = 0;
  int depth = 0;
  std::int64_t leaf_capacity = 0;
  std::vector<int> ranks;                      // k_l
  std::vector<std::int64_t> coupling_blocks;   // C_l
  std::int64_t dense_blocks = 0;               // D
  std::size_t dense_bytes = 0;                 // D·m²·s
  std::size_t leaf_basis_bytes = 0;            // 2^L·m·k_L·s
  std::size_t transfer_bytes = 0;              // Σ 2^l·k_l·k_{l−1}·s
  std::size_t basis_bytes = 0;                 // leaf bases + transfers
  std::size_t coupling_bytes = 0;              // Σ C_l·k_l²·s
  std::size_t total_bytes = 0;                 // dense + bases + couplings
  std::size_t index_bytes = 0;                 // the int arrays of the tree and the pair lists
  std::size_t dense_matrix_bytes = 0;          // n²·s
};

template <class T>
H2Stats h2_stats(const H2<T>& a);
template <class T>
std::size_t h2_bytes(const H2<T>& a);  // h2_stats(a).total_bytes

// Builds A(x_i, x_j) (+ nugget on the diagonal) from n points, point i's d coordinates at
// points[i·dim … i·dim + dim). Throws InvalidArgument naming the argument: n = 0, dim ∉ {1, 2, 3},
// points.size() ≠ n·dim, a non-finite coordinate, leaf_size < 1, cheb_order < 1, η ≤ 0, a bad
// kernel parameter, nugget < 0, or the clutter kernel for a real element type.
template <class T>
H2<T> h2_build(Exec& exec, std::span<const double> points, int dim, const H2KernelSpec& kernel,
               const H2Options& options = {});

// Y = α·A·X + β·Y; X and Y one matrix each (count 1) of n × nvec, column-major, ld ≥ n, in the
// caller's point order. β = 0 does not read Y. Phases as H2Opus's hgemv: upsweep
// (x̂ = U_tᴴ·x at the leaves, then E_cᴴ up), the couplings of each level (both triangles),
// downsweep (E_c down, then U_t at the leaves), the dense blocks; each a loop over one level's
// strided arrays, across the Exec's thread pool.
template <class T>
void h2_gemv(Exec& exec, T alpha, const H2<T>& a, Batch<const T> x, T beta, Batch<T> y);

// The dense n × n matrix A_H (both triangles) in the caller's point order; out is one matrix
// (count 1), every element written. For tests and small n. (On an H2Device: the overload at the end.)
template <class T>
void h2_expand(Exec& exec, const H2<T>& a, Batch<T> out);

// Makes every basis orthonormal without changing A_H (up to rounding): a QR of each leaf basis,
// U_t = Q_t·R_t, then level by level upward a QR of the stacked [R_{c1}·E_{c1}; R_{c2}·E_{c2}]
// whose Q gives the new transfers and whose R the parent's R_t; couplings S_ts ← R_t·S_ts·R_sᴴ.
// Ranks become k'_L = min(m, k_L), k'_{l−1} = min(2k'_l, k_{l−1}).
template <class T>
void h2_orthogonalize(Exec& exec, H2<T>& a);

struct H2CompressReport {
  std::vector<int> ranks_before, ranks_after;
  std::size_t bytes_before = 0, bytes_after = 0;  // h2_bytes
  double tolerance = 0;       // requested, relative
  double norm = 0;            // ‖A_H‖_F before, exact from the couplings and dense blocks
  double node_threshold = 0;  // τ: each node drops Σσ² ≤ τ² of its weighted basis
  double error_bound = 0;     // √(2·Σ_t dropped_t)/‖A_H‖_F ≤ tolerance: the guarantee achieved
};

// Recompresses A_H so that ‖A_H − Ã_H‖_F ≤ tol·‖A_H‖_F (Boukaram, Turkiyyah & Keyes 2019, the
// compression section; H2Opus hcompress). Orthogonalises first when needed. Then a downsweep forms each node's weight
// Z_t, the R factor of the stacked [Z_parent·E_tᴴ; S_ts1ᴴ; S_ts2ᴴ; …] over t's whole block row
// (both triangles), so that Z_tᴴZ_t is the Gram matrix of everything U_t multiplies; an upsweep
// truncates each node's weighted basis by an SVD (leaves: Z_tᴴ; inner nodes: the projected
// stacked transfers times Z_tᴴ), the new level rank the maximum over the level's nodes; the
// couplings are projected, S ← T_t·S_ts·T_sᴴ. Thresholds: with orthonormal nested bases the error
// is at most √(2·Σ_t δ_t²), δ_t² what node t drops (Börm 2010, compression chapter: the row and
// column projections are orthogonal parts; each node's weight covers both triangles, so the Hermitian
// mirror blocks are counted), and each of the N nodes with a nonzero rank gets
// τ² = tol²·‖A_H‖_F²/(2N). Throws InvalidArgument unless tol > 0 and finite.
template <class T>
H2CompressReport h2_compress(Exec& exec, H2<T>& a, double tol);

// An H² approximation of a given dense Hermitian matrix — a sample covariance has no kernel to
// interpolate (S. Börm, "Efficient numerical methods for non-local operators", EMS 2010, the chapter
// on H²-matrix approximation of dense matrices; the truncation as in the compression of nested
// bases there). `a` is one n × n matrix (count 1) in the caller's point order, assumed Hermitian
// (not checked: the result is built from both triangles' far-field columns and keeps the lower
// blocks, so it is Hermitian by construction); points, dim, options.leaf_size and options.eta
// define the cluster and block trees exactly as in h2_build (cheb_order and nugget are ignored).
// Guarantee: ‖A − A_H‖_F ≤ tol·‖A‖_F; the result has orthonormal nested bases (orthogonal = true).
//   Algorithm. Work on A permuted to tree order. far(t): the column nodes s of t's admissible
//   blocks in both triangles ((t, s) and the mirrored (s, t)); F*_t = far(t) ∪ F*_parent, the
//   columns of the admissible blocks of t and all its ancestors. Bottom-up, each node t with a
//   non-empty F*_t takes the left singular vectors of M_t — at a leaf A(t, F*_t), at an inner node
//   [U_c1ᴴ·A(c1, F*_t); U_c2ᴴ·A(c2, F*_t)] with the children's expanded bases — and keeps the
//   fewest r_t with δ_t² = Σ_{i>r_t} σ_i² ≤ τ², τ² = tol²·‖A‖_F²/(2N), N the nodes with a
//   non-empty F*; at a leaf U_t is those vectors, at an inner node they are the stacked transfers
//   [E_c1; E_c2] (r_c1 + r_c2 × r_t). The level rank is the most a node keeps (zero columns pad
//   the others); S_ts = U_tᴴ·A(t, s)·U_s; dense blocks are copied.
//   Bound. With nested orthonormal bases, I − P_t on t's rows is the orthogonal sum of the drops
//   of t's subtree (I − P_t = (I − P_c) + (P_c − P_t), P_c the children's, P_t ≤ P_c), and each node's M_t holds
//   every column its ancestors' admissible blocks use; the far sets of a chain of ancestors are
//   disjoint (each entry lies in one block), so Σ over the blocks of both triangles of
//   ‖(I − P_t)·A_ts‖_F² ≤ Σ_d δ_d². ‖A_ts − P_t·A_ts·P_s‖² = ‖(I − P_t)·A_ts‖² + ‖P_t·A_ts·(I − P_s)‖²,
//   the second term the first of the mirrored block, so ‖A − A_H‖_F² ≤ 2·Σ_d δ_d² ≤ tol²·‖A‖_F².
//   Cost O(n²·k) flops per level (the projections of every node's F* columns), O(n·k) memory for
//   the expanded bases of two levels besides A; the CPU path uses LAPACK's ?gesvd per node.
// Report: ranks_after, bytes_after (h2_bytes), tolerance, norm = ‖A‖_F, node_threshold = τ,
// error_bound = √(2·Σ_t δ_t²)/‖A‖_F ≤ tol (ranks_before and bytes_before stay empty / 0).
// Throws InvalidArgument naming the argument: the points as h2_build, leaf_size < 1, η ≤ 0,
// a not one matrix of n × n, a non-finite entry of a, tol not positive and finite.
template <class T>
H2<T> h2_from_dense(Exec& exec, Batch<const T> a, std::span<const double> points, int dim, double tol,
                    const H2Options& options = {}, H2CompressReport* report = nullptr);

}  // namespace covflow::linalg

// =================================================================================================
// H² matrices on a CUDA device
// =================================================================================================
//
// CUDA. What exists on the GPU now: h2_build_device (the construction from geometry, the same
// matrix as h2_build), h2_from_dense_device (the construction from a dense matrix), h2_upload (an
// H2<T> built on the CPU → an H2Device<T>), h2_download (back, for tests and checks), and h2_gemv,
// h2_orthogonalize, h2_compress and h2_expand (the dense matrix, for tests) on an H2Device<T>;
// and H2DensePlan, the construction from dense matrices for the frame loop (batched, no allocation,
// no synchronisation). Declared only in a CUDA build (COVFLOW_HAS_CUDA = 1).
//
// The construction on the device (h2_build_device): the tree, the block tree, the ranks, the
// offsets and the Chebyshev nodes of every box are built on the host exactly as h2_build builds
// them (O(n log n) integer and O(nodes·d·p) scalar work); the values — leaf bases, transfers,
// couplings and dense blocks, every element of every array including the padding — are computed
// by one launch per array (per level for the transfers and couplings), one thread per element,
// in double and rounded to T once, by the same formulas as the CPU (Börm & Garcke 2007; Boukaram
// et al. 2018, §8.3). The result equals h2_build's: the same tree, pairs and ranks, the bases bit
// for bit in practice, and the kernel values to the last bits of a double (CUDA's exp, sin and cos
// against the C library's) before rounding to T.
//
// Storage. H2Device<T> holds the flat arrays and pair lists of H2<T> unchanged (same layouts, see
// Format above) in one device allocation: the tree's permutation, node_begin and node_end, both pair
// lists' row, col, row_ptr, col_ptr and col_pairs, and leaf_basis, transfer, coupling and dense.
// On the host it keeps what launches are sized from (H2DeviceShape: n, depth, m, the ranks, the
// storage offsets and the pairs' level_ptr) and the tree's boxes, which no GPU operation reads.
//
// The matvec on the device (Boukaram, Turkiyyah & Keyes 2019, the hgemv of H2Opus), each phase one
// batched launch per level: X gathered into tree order, one m × nvec block per leaf; upsweep
// (x̂_leaf = U_leafᴴ·X_leaf, one strided-batched GEMM over all leaves; then x̂_parent =
// E_{2t}ᴴ·x̂_{2t} + E_{2t+1}ᴴ·x̂_{2t+1}, two strided-batched GEMMs per level, even then odd children);
// couplings (one thread block per node and output tile sums the node's whole block row, the
// stored pairs through row_ptr and the conjugate transposes through col_ptr/col_pairs, so that no
// two blocks write the same output); downsweep (ŷ_c += E_c·ŷ_parent, two strided-batched GEMMs per
// level); leaves (U_t·ŷ_t plus the dense blocks of both triangles, by the same block-row kernel,
// which also applies α and β and scatters to the caller's order). No host synchronisation.
//
// Workspace (bytes, taken from exec.workspace(); s = sizeof(T), each part rounded up to 256):
//   h2_gemv_workspace = s·nvec·(2^L·m + 2·Σ_l 2^l·k_l)   (X in leaf blocks, x̂ and ŷ of every level)
// Reserve it once (exec.workspace().reserve) and h2_gemv never allocates.
//
// The expansion on the device (h2_expand on an H2Device; for tests and diagnostics: the n × n
// matrix is O(n²)): the CPU h2_expand's steps, one launch per step and level — the leaves' bases
// as one n × k_L matrix in tree order, then level by level upward the nested bases
// U_t = [U_{2t}·E_{2t}; U_{2t+1}·E_{2t+1}] (n × k_l, from the level below), and at each level with
// couplings W = U_t·S_ts per pair and the block W·U_sᴴ with its conjugate transpose scattered to
// the caller's order; then the dense blocks and their mirrors. One thread per output element;
// O(n²·k) work. Workspace (bytes, from exec.workspace(); c_l = min(n, m·2^{L−l}), the most points a
// node of level l can hold, C_l its coupling pairs; over the levels from the leaves up to the first
// with couplings, each part rounded up to 256):
//   h2_expand_workspace = s·(2·n·max_l k_l + max_l C_l·c_l·k_l)
//
// Orthogonalisation and compression on the device (Boukaram, Turkiyyah & Keyes 2019, H2Opus's
// horthog and hcompress): the CPU's algorithms (h2_orthogonalize, h2_compress above), each per-node
// QR, SVD or product of a level done for the whole level by one batched call (geqrf/ungqr of
// qr.hpp, gesvj of svd.hpp, cuBLAS strided-batched GEMM); same ranks and, up to rounding, the same
// represented matrix as the CPU. They are construction-time operations, not for the frame loop:
// each allocates the new H2Device (the ranks change) and its scratch with cudaMalloc, the batched
// QR and SVD also take exec.workspace(), and each synchronises the stream before it returns (the
// old allocation and the scratch are freed only after the stream has passed the work reading them).
// h2_compress also reads back, once, the tree's node ranges, the coupling block-row index and the
// blocks' norms (for τ and the stack heights), and, once per level, the singular values (the level's
// rank is the maximum over its nodes, decided on the host as on the CPU).
#if COVFLOW_HAS_CUDA

#include <memory>
#include <string>
#include <utility>

namespace covflow::linalg {

namespace detail::h2_cuda {
struct DeviceAccess;  // the library's own code that allocates and fills an H2Device
}

// Launch-relevant numbers of an H2Device, on the host (copies of its H2<T>'s).
struct H2DeviceShape {
  std::int64_t n = 0;
  int dim = 0;
  int depth = 0;                                // L
  std::int64_t leaf_capacity = 0;               // m
  std::vector<int> rank;                        // k_l, l = 0 … L
  std::vector<std::int64_t> transfer_offset;    // as H2<T>::transfer_offset
  std::vector<std::int64_t> coupling_offset;    // as H2<T>::coupling_offset
  std::vector<int> coupling_level_ptr;          // H2<T>::couplings.level_ptr
  std::vector<int> dense_level_ptr;             // H2<T>::dense_pairs.level_ptr
  std::vector<double> box;                      // H2Tree::box (host only: no GPU operation reads it)
  bool orthogonal = false;

  std::int64_t nodes(int level) const { return std::int64_t{1} << level; }
  int coupling_count(int level) const { return coupling_level_ptr[level + 1] - coupling_level_ptr[level]; }
  int dense_count() const { return dense_level_ptr.empty() ? 0 : dense_level_ptr.back(); }
};

// One pair list in device memory (H2Pairs without level_ptr, which stays on the host).
struct H2DevicePairs {
  const int* row = nullptr;
  const int* col = nullptr;
  const int* row_ptr = nullptr;    // H2Pairs::ptr_offset(l) + t as on the host
  const int* col_ptr = nullptr;
  const int* col_pairs = nullptr;
};

// Device pointers into an H2Device's allocation, valid while it lives; layouts as in H2<T>.
template <class T>
struct H2DeviceArrays {
  const int* permutation = nullptr;  // n
  const int* node_begin = nullptr;   // heap order, 2^{L+1} − 1
  const int* node_end = nullptr;
  H2DevicePairs couplings, dense_pairs;
  const T* leaf_basis = nullptr;
  const T* transfer = nullptr;
  const T* coupling = nullptr;
  const T* dense = nullptr;
};

// An H2<T> in device memory: owning and move-only (RAII: the allocation is freed with it; a
// moved-from or default-constructed H2Device is empty). Lifetime: it must outlive every operation
// queued on it — destroy it only after the stream has passed the last h2_gemv that reads it (e.g.
// exec.synchronize()). It lives on the device of the Exec that uploaded it and is used with an
// Exec of that device.
template <class T>
class H2Device {
 public:
  H2Device() = default;
  H2Device(H2Device&& other) noexcept
      : shape_(std::move(other.shape_)), arrays_(std::exchange(other.arrays_, {})),
        device_(std::exchange(other.device_, -1)), bytes_(std::exchange(other.bytes_, 0)),
        memory_(std::move(other.memory_)) {}
  H2Device& operator=(H2Device&& other) noexcept {
    if (this != &other) {
      memory_ = std::move(other.memory_);
      shape_ = std::move(other.shape_);
      arrays_ = std::exchange(other.arrays_, {});
      device_ = std::exchange(other.device_, -1);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  H2Device(const H2Device&) = delete;
  H2Device& operator=(const H2Device&) = delete;
  ~H2Device() = default;

  bool empty() const noexcept { return memory_ == nullptr; }
  const H2DeviceShape& shape() const noexcept { return shape_; }
  const H2DeviceArrays<T>& arrays() const noexcept { return arrays_; }
  int device() const noexcept { return device_; }        // CUDA device index; −1 when empty
  std::size_t device_bytes() const noexcept { return bytes_; }  // the one allocation

 private:
  friend struct detail::h2_cuda::DeviceAccess;
  // The allocation behind the type-erased owner: the deleter (set by h2_upload) frees it without
  // throwing, so this header needs no CUDA headers.
  using Owner = std::unique_ptr<void, void (*)(void*) noexcept>;

  H2DeviceShape shape_;
  H2DeviceArrays<T> arrays_;
  int device_ = -1;
  std::size_t bytes_ = 0;
  Owner memory_{nullptr, nullptr};
};

// Copies `a` to cuda_exec's device: one allocation (cudaMalloc, so not for the frame loop), then
// asynchronous copies on the Exec's stream. `a` must stay alive and unchanged until the stream has
// passed them (exec.synchronize(), or an event); the H2Device may be used by later work on the
// same stream at once. Throws InvalidArgument for a CPU Exec or a malformed `a` (the checks of
// the CPU operations, plus index ranges of the pair lists, which kernels trust).
template <class T>
H2Device<T> h2_upload(Exec& cuda_exec, const H2<T>& a);

// Builds A(x_i, x_j) (+ nugget) from n points on cuda_exec's device: the matrix h2_build(points,
// dim, kernel, options) builds on the CPU (see the construction on the device above). One
// allocation for the H2Device (cudaMalloc, so not for the frame loop), the points in tree order,
// the Chebyshev nodes and the clutter quadrature in exec.workspace() (8·(n·d + nodes·d·p + 3N)
// bytes plus rounding, N the quadrature nodes; it grows the workspace when smaller), then the
// copies and launches queued on the Exec's stream; no host synchronisation beyond those
// allocations. `points` may be freed on return (host-to-device copies from pageable memory are
// staged before cudaMemcpyAsync returns). Throws InvalidArgument for a CPU Exec and for every
// argument h2_build refuses, with the same messages under the name h2_build_device.
template <class T>
H2Device<T> h2_build_device(Exec& cuda_exec, std::span<const double> points, int dim, const H2KernelSpec& kernel,
                            const H2Options& options = {});

// The H2<T> held by `a`, bit for bit what was uploaded. Synchronises cuda_exec's stream (a test and
// diagnostics helper, not for the frame loop).
template <class T>
H2<T> h2_download(Exec& cuda_exec, const H2Device<T>& a);

// Bytes of scratch h2_gemv takes from exec.workspace() for `nvec` vectors (formula above).
template <class T>
std::size_t h2_gemv_workspace(const Exec& cuda_exec, const H2Device<T>& a, std::int64_t nvec);

// Y = α·A·X + β·Y on the device, the CPU h2_gemv's semantics: X and Y one matrix each (count 1) of
// n × nvec in device memory, column-major, ld ≥ n, in the caller's point order; β = 0 does not
// read Y; X may be Y. Queued on the Exec's stream; no host synchronisation. `a` and X must stay
// alive, and X unchanged, until the stream has passed the call.
template <class T>
void h2_gemv(Exec& cuda_exec, T alpha, const H2Device<T>& a, Batch<const T> x, T beta, Batch<T> y);

// Bytes of scratch h2_expand takes from exec.workspace() (formula above).
template <class T>
std::size_t h2_expand_workspace(const Exec& cuda_exec, const H2Device<T>& a);

// The dense n × n matrix A_H held by `a` (both triangles) in the caller's point order, on the
// device: what the CPU h2_expand gives for h2_download(a), up to rounding (the bases' products
// summed in another order). `out` is one matrix (count 1) of n × n in device memory, ld ≥ n; every
// element of the n × n is written, nothing between n and ld. Queued on the Exec's stream, scratch
// from exec.workspace() (h2_expand_workspace; it grows when smaller); no host synchronisation.
// `a` must stay alive until the stream has passed the call. Throws InvalidArgument for a CPU Exec,
// an empty H2Device (or one of another device), or `out` not n × n in device memory.
template <class T>
void h2_expand(Exec& cuda_exec, const H2Device<T>& a, Batch<T> out);

// Diagnostics for performance work: h2_gemv once, with a CUDA event after each of its phases
// (gather, upsweep, the couplings of each level, downsweep, leaves), then a synchronisation; the
// milliseconds of each phase in order. The same arguments and checks as h2_gemv. Not for the frame
// loop (it synchronises and creates events).
struct H2PhaseTime {
  std::string phase;
  double ms = 0;
};
template <class T>
std::vector<H2PhaseTime> h2_gemv_phases(Exec& cuda_exec, T alpha, const H2Device<T>& a, Batch<const T> x, T beta,
                                        Batch<T> y);

// h2_from_dense on the device: `a` one n × n Hermitian matrix (count 1) in device memory, the
// caller's point order; the same algorithm, bound, ranks and report as the CPU h2_from_dense
// (results equal up to rounding), batched per level: each node's M_tᴴ gathered into a zero-padded
// strided batch, linalg::geqrf (tall QR) and linalg::gesvj (on Rᴴ), the truncation ranks by a
// kernel, the couplings and dense blocks by kernels. (Named apart from the CPU overload: the two
// take the same arguments.) The trees and F* index lists are built on the host; construction
// synchronises the stream — once for ‖a‖_F, once per level to read the level's ranks (which size
// the next launches) — and before it returns; temporaries are cudaMalloc'ed (not for the frame
// loop; H2DensePlan below is the form for it). Limits of the batched QR: the leaf capacity and
// 2·k_l at most 256 columns, max |F*_t| of a level at most 16384 rows. Throws InvalidArgument as
// h2_from_dense (a non-finite entry is found through ‖a‖_F), and for a CPU Exec.
template <class T>
H2Device<T> h2_from_dense_device(Exec& cuda_exec, Batch<const T> a, std::span<const double> points, int dim, double tol,
                                 const H2Options& options = {}, H2CompressReport* report = nullptr);

// h2_from_dense_device for the frame loop: a plan made once for fixed points and options, then
// used for any number of batches of up to max_count n × n Hermitian matrices, each built, and
// expanded, without allocating and without synchronising the stream.
//
//   Once (the constructor; cudaMalloc and a synchronisation, so at start-up): the cluster tree,
//   the block tree and every node's F*_t on the host, as h2_from_dense builds them; the level
//   arrays (node ranges, F* columns, the point → node maps) uploaded; the result storage and the
//   scratch of every level allocated for max_count matrices at the padded ranks below; and
//   exec.workspace() reserved for the batched QR, SVD and expansion (workspace_bytes()).
//   Per batch (build): the algorithm of h2_from_dense_device — per level, every node of every
//   matrix in one strided batch: M_tᴴ gathered or projected, linalg::geqrf, linalg::gesvj, the
//   truncation rank by a kernel — with nothing read back. What the one-matrix construction reads
//   back is each level's rank (the most any node keeps), which sizes the next level's launches
//   and the result's layout; the plan sizes them instead by a bound known from the tree alone,
//   the padded rank K_l: K_L = min(F_L, m) at the leaves and K_l = min(F_l, 2·K_{l+1}) above (F_l
//   the level's largest |F*_t|; a node keeps at most min(|F*_t|, width) singular vectors). A node
//   keeping r_t < K_l vectors has zero columns from r_t on (the padding h2.hpp's Format allows), so
//   each matrix of the batch is stored as an H² matrix of ranks K_l holding exactly what the
//   compact one of ranks k_l = max_t r_t holds; the ranks k_l, the norm and the drops are written
//   on the device per matrix (cells()), for the caller to copy back when it chooses. The price is
//   work: the QR, SVD and products run at the padded widths (at most 2× the compact ones per
//   level when the ranks fill the bound, more when they are far below it), and the batched QR's
//   limits above apply to the padded widths 2·K_l.
//   Results equal h2_from_dense's up to rounding: the same thresholds (τ from each matrix's own
//   ‖A‖_F, summed in a fixed order), the same ranks k_l except where a singular value lies within
//   rounding of τ, the same represented matrix up to rounding (the zero padding adds zero rows to
//   the factorised matrices: the same singular values and kept subspaces).
//   A matrix with a non-finite entry (its ‖A‖_F² is not finite) is not read: it is built as the
//   zero matrix, its status set to status::non_finite_input, and no other matrix is affected. A
//   matrix one of whose node SVDs did not converge gets status::no_convergence (its result is what
//   the sweeps left). No exception is thrown for the values of a matrix.
//
// Thread safety: one plan serves one stream at a time (its scratch is shared by its batches);
// batches queued on that stream one after another are ordered by it. The plan must outlive the
// work queued with it.
struct H2DenseCells {
  const int* level_rank = nullptr;  // matrix c, level l at c·(depth + 1) + l: k_l, the most any node keeps
  const double* norm2 = nullptr;    // matrix c: ‖A_c‖_F² (fixed order of summation)
  const double* dropped = nullptr;  // matrix c: Σ_t δ_t², what its nodes dropped
  const int* status = nullptr;      // matrix c: 0, status::non_finite_input or status::no_convergence
};

template <class T>
class H2DensePlan {
 public:
  H2DensePlan();
  // Throws InvalidArgument for a CPU Exec, the points and options h2_from_dense refuses (named
  // H2DensePlan), or max_count outside [1, 65535].
  H2DensePlan(Exec& cuda_exec, std::span<const double> points, int dim, const H2Options& options, std::int64_t max_count);
  H2DensePlan(H2DensePlan&&) noexcept;
  H2DensePlan& operator=(H2DensePlan&&) noexcept;
  H2DensePlan(const H2DensePlan&) = delete;
  H2DensePlan& operator=(const H2DensePlan&) = delete;
  ~H2DensePlan();

  bool empty() const noexcept { return state_ == nullptr; }
  std::int64_t n() const;
  std::int64_t max_count() const;
  // The shared shape of the batch's matrices: the tree, pair counts and offsets at the padded
  // ranks K_l (each matrix's own ranks are in cells().level_rank).
  const H2DeviceShape& shape() const;
  // Bytes build and expand take from exec.workspace() (reserved by the constructor).
  std::size_t workspace_bytes() const;
  // Bytes of the plan's own device memory (index arrays, result storage, scratch).
  std::size_t device_bytes() const;
  // Device arrays of the last build's per-matrix numbers (max_count entries each; the first
  // a.count are the last build's). Valid while the plan lives; overwritten by the next build.
  H2DenseCells cells() const;

  // Builds the H² form of each matrix of `a` (a.count ≤ max_count matrices of n × n in device
  // memory, the caller's point order, ld ≥ n, `a.stride` apart) to ‖A_c − A_H,c‖_F ≤ tol·‖A_c‖_F,
  // on the Exec's stream: no allocation (the workspace was reserved), no host synchronisation.
  // `a` must stay alive and unchanged until the stream has passed the call. Throws
  // InvalidArgument for a bad shape or count, tol not positive and finite, or `a` not on the
  // plan's device (nothing about the values: see above).
  void build(Exec& cuda_exec, Batch<const T> a, double tol);
  // The dense matrices A_H,c (both triangles, caller's order) of the last build's first out.count
  // matrices into `out` (out.count ≤ the last build's count, n × n each in device memory, ld ≥ n),
  // every element of each n × n written; one launch per step and level for the whole batch, no
  // allocation, no synchronisation (h2_expand's kernels).
  void expand(Exec& cuda_exec, Batch<T> out) const;

  // The report h2_from_dense would give for a matrix, from its numbers copied back from cells()
  // (host values): tolerance, norm, node_threshold, error_bound, ranks_after = level_rank and
  // bytes_after = h2_bytes at those (compact) ranks.
  H2CompressReport report(std::span<const int> level_rank, double norm2, double dropped, double tol) const;
  // Matrix `index` of the last build as a compact H2<T> (ranks k_l, the padding dropped): what
  // h2_from_dense gives on the CPU, up to rounding. Synchronises the stream (tests, diagnostics).
  H2<T> download(Exec& cuda_exec, std::int64_t index) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// h2_orthogonalize on the device: `a` is replaced by an H2Device holding the same matrix (up to
// rounding) with orthonormal bases and the ranks of the CPU's h2_orthogonalize (min(m, k_L), then
// min(2k'_l, k_{l−1}) upward). Allocates and synchronises the stream (above). Throws
// InvalidArgument for a CPU Exec or an empty H2Device (or one of another device).
template <class T>
void h2_orthogonalize(Exec& cuda_exec, H2Device<T>& a);

// h2_compress on the device: ‖A_H − Ã_H‖_F ≤ tol·‖A_H‖_F, `a` replaced by the compressed
// H2Device; the same thresholds, ranks and report as the CPU's h2_compress (orthogonalises first
// unless a.shape().orthogonal). Allocates, reads back once per level and synchronises (above).
// Throws InvalidArgument unless tol > 0 and finite, for a CPU Exec or an empty H2Device; Error if
// a node's SVD did not converge.
template <class T>
H2CompressReport h2_compress(Exec& cuda_exec, H2Device<T>& a, double tol);

}  // namespace covflow::linalg

#endif  // COVFLOW_HAS_CUDA

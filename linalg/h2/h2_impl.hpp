// Internal: what the H² files share — the tree and block-tree builders (h2_tree.cpp), the
// Chebyshev construction (h2_build.cpp), the construction from a dense matrix (h2_dense.cpp), the CPU operations (h2_cpu.cpp: gemv, expand;
// h2_compress.cpp: orthogonalise, compress), and small BLAS/LAPACK helpers that accept empty
// dimensions (a rank-0 level, an empty node), which the Fortran routines reject or skip unevenly.
// h2.cpp checks the arguments and calls these on a CPU Exec; they trust what was checked.
#pragma once

#include <algorithm>
#include <complex>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../common/blas.hpp"
#include "../common/cpu_helpers.hpp"
#include "covflow/linalg/error.hpp"
#include "covflow/linalg/exec.hpp"
#include "covflow/linalg/h2.hpp"

namespace covflow::linalg::detail::h2 {

// ---- checks (h2.cpp) ----------------------------------------------------------------------------

// The arrays of `a` agree in size with its tree, ranks and pair lists (what h2_build leaves and the
// operations keep): InvalidArgument naming `op` otherwise. Indices are not checked here.
template <class T>
void require_sizes(const H2<T>& a, const char* op);

// The points and tree options (leaf_size, eta) of every construction: InvalidArgument naming `op`
// and the argument otherwise.
void require_points(std::span<const double> points, int dim, const H2Options& options, const char* op);
// The arguments of a construction from geometry (h2_build, h2_build_device): require_points, then
// the order, nugget and kernel (see h2_build in h2.hpp for the list).
template <class T>
void require_build_args(std::span<const double> points, int dim, const H2KernelSpec& kernel, const H2Options& options,
                        const char* op);
// All of h2_from_dense's argument checks (the entries' finiteness on a CPU Exec only).
template <class T>
void require_from_dense(Exec& exec, Batch<const T> a, std::span<const double> points, int dim, double tol,
                        const H2Options& options, const char* op);

// ---- trees (h2_tree.cpp) ---------------------------------------------------------------------------

H2Tree build_tree(std::span<const double> points, int dim, std::int64_t leaf_size);
// Dual traversal from (root, root); fills both pair lists (indices included).
void build_block_tree(const H2Tree& tree, double eta, H2Pairs& couplings, H2Pairs& dense_pairs);
// Sorts each level's pairs (row, col) and builds row_ptr, col_ptr and col_pairs.
void index_pairs(const H2Tree& tree, std::vector<std::vector<std::pair<int, int>>>& per_level, H2Pairs& out);

// ---- construction (h2_build.cpp) ---------------------------------------------------------------

// The interpolation geometry of a build: the p one-dimensional Chebyshev nodes of every tree
// node's interpolation box along each dimension, ξ_j = c + h·cos((2j + 1)π/(2p)), with c the box's
// centre and 2h its side widened to at least 10⁻⁶ of the root's diagonal (h2.hpp, Construction).
// One table that the CPU and the GPU builds both read, so that their nodes agree bit for bit.
struct ChebGrid {
  int dim = 0, order = 0;       // d, p
  double span = 0;              // the root box's diagonal: the largest |x − y| (the clutter rule's)
  std::vector<double> nodes;    // heap node h, dimension e, node j at (h·d + e)·p + j
  const double* of(std::int64_t heap_node) const { return nodes.data() + heap_node * dim * order; }
};

// What both builds compute on the host, O(n log n) integer work: the tree, both pair lists, the
// ranks (p^d from the first level with couplings down, 0 above), the transfer and coupling
// offsets, and the interpolation grid. The value vectors are left empty.
template <class T>
H2<T> build_skeleton(std::span<const double> points, int dim, const H2Options& options, ChebGrid& grid);

// The clutter kernel's Gauss–Legendre rule for pairs at most `span` apart (h2.hpp, Kernels):
// directions scaled by the wavenumber and weights σ²·w_q/2. Empty for the other kernels.
struct ClutterRule {
  std::vector<double> ux, uy, weight;
};
ClutterRule clutter_rule(const H2KernelSpec& spec, double span);

template <class T>
H2<T> build(Exec& exec, std::span<const double> points, int dim, const H2KernelSpec& kernel, const H2Options& options);

// ---- from a dense matrix (h2_dense.cpp) ---------------------------------------------------------

// F*_t per level and node: the tree positions of the columns of the admissible blocks of t and of
// its ancestors, both triangles (parents' first); nodes_with_far counts the non-empty nodes with a
// non-empty F*. Shared by the CPU and CUDA constructions.
std::vector<std::vector<std::vector<int>>> far_columns(const H2Tree& tree, const H2Pairs& couplings,
                                                       std::int64_t& nodes_with_far);
template <class T>
H2<T> from_dense(Exec& exec, Batch<const T> a, std::span<const double> points, int dim, double tol, const H2Options& options,
                 H2CompressReport* report);

// ---- operations (h2_cpu.cpp, h2_compress.cpp) --------------------------------------------------

template <class T>
void gemv(Exec& exec, T alpha, const H2<T>& a, Batch<const T> x, T beta, Batch<T> y);
template <class T>
void expand(Exec& exec, const H2<T>& a, Batch<T> out);
template <class T>
void orthogonalize(Exec& exec, H2<T>& a);
template <class T>
H2CompressReport compress(Exec& exec, H2<T>& a, double tol);

// ---- helpers ----------------------------------------------------------------------------------

template <class T>
T conj_of(const T& v) {
  if constexpr (is_complex_v<T>) return std::conj(v);
  else return v;
}

// C := α·op(A)·op(B) + β·C for any dimensions ≥ 0: nothing when C is empty, C := β·C when the inner
// dimension is 0 (β = 0 writes zeros), BLAS otherwise.
template <class T>
void gemm(char ta, char tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
          const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < m; ++i) c[i + j * ldc] = beta == T(0) ? T(0) : beta * c[i + j * ldc];
    return;
  }
  blas::gemm(ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
             static_cast<int>(std::max<std::int64_t>(lda, 1)), b, static_cast<int>(std::max<std::int64_t>(ldb, 1)), beta,
             c, static_cast<int>(std::max<std::int64_t>(ldc, 1)));
}

// Thin QR of the rows × cols matrix a (ld lda): on return a holds Q (rows × r, r = min(rows, cols))
// and r_out (ld ldr) the r × cols upper-trapezoidal R.
template <class T>
void qr(std::int64_t rows, std::int64_t cols, T* a, std::int64_t lda, T* r_out, std::int64_t ldr) {
  const std::int64_t r = std::min(rows, cols);
  if (r == 0) return;
  const int m = static_cast<int>(rows), n = static_cast<int>(cols), k = static_cast<int>(r),
            ld = static_cast<int>(lda);
  std::vector<T> tau(static_cast<std::size_t>(r));
  T query{};
  int info = 0;
  blas::geqrf(m, n, a, ld, tau.data(), &query, -1, &info);
  int lwork = std::max(1, static_cast<int>(std::real(query)));
  blas::ungqr(m, k, k, a, ld, tau.data(), &query, -1, &info);
  lwork = std::max(lwork, static_cast<int>(std::real(query)));
  std::vector<T> work(static_cast<std::size_t>(lwork));
  blas::geqrf(m, n, a, ld, tau.data(), work.data(), lwork, &info);
  for (std::int64_t j = 0; j < cols; ++j)
    for (std::int64_t i = 0; i < r; ++i) r_out[i + j * ldr] = i <= j ? a[i + j * lda] : T(0);
  blas::ungqr(m, k, k, a, ld, tau.data(), work.data(), lwork, &info);
}

// Thin SVD of the rows × cols matrix a (destroyed): u (rows × min, ld rows) and σ descending.
template <class T>
void svd_left(std::int64_t rows, std::int64_t cols, T* a, std::int64_t lda, T* u, std::vector<real_t<T>>& sigma) {
  const std::int64_t r = std::min(rows, cols);
  sigma.assign(static_cast<std::size_t>(r), real_t<T>(0));
  if (r == 0) return;
  const int m = static_cast<int>(rows), n = static_cast<int>(cols), ld = static_cast<int>(lda);
  T query{}, vt_dummy{};
  int info = 0;
  std::vector<real_t<T>> rwork(static_cast<std::size_t>(5 * r));
  blas::gesvd('S', 'N', m, n, a, ld, sigma.data(), u, m, &vt_dummy, 1, &query, -1, rwork.data(), &info);
  const int lwork = std::max(1, static_cast<int>(std::real(query)));
  std::vector<T> work(static_cast<std::size_t>(lwork));
  blas::gesvd('S', 'N', m, n, a, ld, sigma.data(), u, m, &vt_dummy, 1, work.data(), lwork, rwork.data(), &info);
  if (info != 0) throw Error("h2: ?gesvd did not converge (info " + std::to_string(info) + ")");
}

}  // namespace covflow::linalg::detail::h2

// TLR GEMM-LLL on the CPU, as the driver of Charara et al. 2018 §4–§5: nt outer products, the k-th
// adding op(A)(:, k)·op(B)(k, :) to every tile of C. Each low-rank tile of C gets the product as
// more columns of its factors, [U | X] and [V | Y], and is recompressed at once (QR of both, SVD of
// the small core, truncation: tlr_cpu_parts.hpp); the diagonal tiles are dense and take the product
// densely. A step runs in two passes over the tiles with a barrier between them, because the
// matrix-scope tolerance is relative to ‖C‖_F after the step, which is known only once every tile
// has been updated: the first pass updates and factors every tile (keeping each factored stack in
// the workspace), the second truncates them to τ.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "covflow/linalg/exec.hpp"
#include "tlr_cpu.hpp"
#include "tlr_cpu_parts.hpp"

namespace covflow::linalg::detail::tlr_cpu {
namespace {

using std::int64_t;

// Columns a stack of C's tile may need: C's own rank and what one outer product appends, at most
// the larger of A's and B's max_rank (a product of two low-rank tiles has the smaller rank of the
// two; a dense tile times a low-rank one the low-rank one's).
int64_t stack_capacity(const TlrShape& a, const TlrShape& b, const TlrShape& c) {
  return c.max_rank + std::max(a.max_rank, b.max_rank);
}

// The workspace of LLL: a factored stack per off-diagonal tile of C, per tile its truncated Σσ²,
// whether max_rank cut it and whether its SVD failed, per diagonal tile its Σ|c|², per matrix
// ‖C‖_F² and whether an input was not finite; per worker the product and core scratch.
template <class T>
struct LllLayout {
  Stack<T>* stacks;
  double *dropped2, *diag_norm2, *matrix_norm2;
  int *capped, *svd_failed, *bad;
  ProductScratch<T>* products;
  CoreScratch<T>* cores;

  LllLayout(Carver& carver, const TlrShape& a, const TlrShape& b, const TlrShape& c, unsigned workers) {
    const int64_t tiles = c.count * c.slots(), capacity = stack_capacity(a, b, c);
    stacks = carver.take_objects<Stack<T>>(tiles);
    for (int64_t t = 0; t < tiles; ++t) {
      const Stack<T> one = carve_stack<T>(carver, c.tile, capacity);
      if (stacks) stacks[t] = one;
    }
    dropped2 = carver.take<double>(tiles);
    capped = carver.take<int>(tiles);
    svd_failed = carver.take<int>(tiles);
    diag_norm2 = carver.take<double>(c.count * c.tiles());
    matrix_norm2 = carver.take<double>(c.count);
    bad = carver.take<int>(c.count);
    products = carver.take_objects<ProductScratch<T>>(workers);
    cores = carver.take_objects<CoreScratch<T>>(workers);
    for (unsigned w = 0; w < workers; ++w) {
      const ProductScratch<T> product = carve_products<T>(carver, c.tile, a.max_rank, b.max_rank);
      const CoreScratch<T> core = carve_core<T>(carver, c.tile, capacity, c.max_rank);
      if (products) products[w] = product;
      if (cores) cores[w] = core;
    }
  }
};

}  // namespace

template <class T>
std::size_t gemm_lll_workspace(const Exec& exec, const TlrShape& a, const TlrShape& b, const TlrShape& c) {
  Carver carver;
  LllLayout<T>(carver, a, b, c, exec.pool().size());
  return carver.used();
}

template <class T>
void gemm_lll(Exec& exec, Op op_a, Op op_b, T alpha, Tlr<const T> a, Tlr<const T> b, T beta, Tlr<T> c,
              std::span<TlrInfo> info, std::span<std::byte> workspace, const TlrOptions& options) {
  const TlrShape& s = c.shape;
  const int64_t nt = s.tiles(), slots = s.slots(), tile = s.tile;
  const double twice = s.hermitian ? 2 : 1;  // a Hermitian C's stored tile stands for two
  const double tol2 = options.tolerance * options.tolerance;
  Carver carver(workspace.data());
  LllLayout<T> w(carver, a.shape, b.shape, s, exec.pool().size());
  const Tlr<const T> c_in = c;

  // Inputs checked (C only when β ≠ 0: β = 0 does not read it); C ← β·C (β = 0: zero ranks).
  each_tile(exec, s.count, 1, [&](int64_t m, int64_t, unsigned) {
    w.bad[m] =
        !tlr_is_finite(a, m, false) || !tlr_is_finite(b, m, false) || (beta != T(0) && !tlr_is_finite(c_in, m, false));
    std::fill_n(w.dropped2 + m * slots, slots, 0.0);
    std::fill_n(w.capped + m * slots, slots, 0);
    std::fill_n(w.svd_failed + m * slots, slots, 0);
    if (w.bad[m]) return;
    for (int64_t i = 0; i < nt; ++i) {
      T* d = c.diag_tile(m, i);
      const int64_t rows = s.rows(i);
      for (int64_t col = 0; col < rows; ++col)
        for (int64_t row = 0; row < rows; ++row) d[row + col * tile] = beta == T(0) ? T(0) : beta * d[row + col * tile];
    }
    for (int64_t slot = 0; slot < slots; ++slot) {
      int& rank = c.rank[m * slots + slot];
      if (beta == T(0)) rank = 0;
      T* u = c.u_tile(m, slot);
      for (int64_t e = 0; e < tile * s.max_rank; ++e) u[e] = beta == T(0) ? T(0) : beta * u[e];
      if (beta == T(0)) std::fill_n(c.v_tile(m, slot), tile * s.max_rank, T(0));
    }
  });

  for (int64_t k = 0; k < nt; ++k) {
    const int inner = static_cast<int>(s.rows(k));
    // Pass 1: every tile updated; the low-rank ones stacked and factored.
    each_tile(exec, s.count, nt + slots, [&](int64_t m, int64_t t, unsigned worker) {
      if (w.bad[m]) return;
      if (t < nt) {
        const int rows = static_cast<int>(s.rows(t));
        T* d = c.diag_tile(m, t);
        add_product(d, tile, rows, rows, inner, alpha, op_tile(a, m, op_a, t, k), op_tile(b, m, op_b, k, t), tile,
                    w.products[worker]);
        w.diag_norm2[m * nt + t] = norm2(d, tile, rows, rows);
        return;
      }
      const int64_t slot = t - nt;
      const auto [i, j] = slot_tile(s, slot);
      const int rows = static_cast<int>(s.rows(i)), cols = static_cast<int>(s.rows(j));
      Stack<T>& st = w.stacks[m * slots + slot];
      stack_tile(st, c.u_tile(m, slot), c.v_tile(m, slot), rows, cols, c.rank[m * slots + slot], tile);
      st.width += append_product(st.u + st.width * tile, st.v + st.width * tile, rows, cols, inner, alpha,
                                 op_tile(a, m, op_a, i, k), op_tile(b, m, op_b, k, j), tile, w.products[worker]);
      factor(st, rows, cols, tile, w.cores[worker]);
    });
    // ‖C‖_F² after this outer product, from the dense tiles and the cores' singular values.
    each_tile(exec, s.count, 1, [&](int64_t m, int64_t, unsigned) {
      if (w.bad[m]) return;
      double sum = std::accumulate(w.diag_norm2 + m * nt, w.diag_norm2 + (m + 1) * nt, 0.0);
      for (int64_t slot = 0; slot < slots; ++slot) sum += twice * w.stacks[m * slots + slot].norm2;
      w.matrix_norm2[m] = sum;
    });
    // Pass 2: every low-rank tile truncated to τ (tlr.hpp, Accuracy: the budget shared evenly by
    // the off-diagonal tiles, or relative to the tile).
    each_tile(exec, s.count, slots, [&](int64_t m, int64_t slot, unsigned worker) {
      if (w.bad[m]) return;
      const auto [i, j] = slot_tile(s, slot);
      const int64_t index = m * slots + slot;
      const Stack<T>& st = w.stacks[index];
      const double tau2 = options.scope == TlrScope::tile
                              ? tol2 * st.norm2
                              : tol2 * w.matrix_norm2[m] / (twice * static_cast<double>(slots));
      const Cut cut =
          truncate(st, static_cast<int>(s.rows(i)), static_cast<int>(s.rows(j)), tile, static_cast<int>(s.max_rank),
                   tau2, c.u_tile(m, slot), c.v_tile(m, slot), w.cores[worker]);
      c.rank[index] = cut.rank;
      w.dropped2[index] += cut.discarded2;
      w.capped[index] |= cut.capped ? 1 : 0;
      w.svd_failed[index] |= st.info > 0 ? 1 : 0;
    });
  }

  each_tile(exec, s.count, 1, [&](int64_t m, int64_t, unsigned) {
    TlrInfo result;
    if (w.bad[m]) {
      fill_nan(c, m);
      result.status = tlr_status::non_finite_input;
      result.error = result.norm = std::numeric_limits<double>::quiet_NaN();
      info[m] = result;
      return;
    }
    const TileTotals totals = tile_totals(w.dropped2, w.capped, w.svd_failed, m, slots);
    result.capped_tiles = totals.capped;
    result.error = std::sqrt(twice * totals.dropped2);
    result.norm = std::sqrt(w.matrix_norm2[m]);
    result.status = totals.status();
    info[m] = result;
  });
}

#define COVFLOW_TLR_LLL(T)                                                                                    \
  template std::size_t gemm_lll_workspace<T>(const Exec&, const TlrShape&, const TlrShape&, const TlrShape&); \
  template void gemm_lll<T>(Exec&, Op, Op, T, Tlr<const T>, Tlr<const T>, T, Tlr<T>, std::span<TlrInfo>,      \
                            std::span<std::byte>, const TlrOptions&);
COVFLOW_TLR_LLL(f32)
COVFLOW_TLR_LLL(f64)
COVFLOW_TLR_LLL(cf32)
COVFLOW_TLR_LLL(cf64)
#undef COVFLOW_TLR_LLL

}  // namespace covflow::linalg::detail::tlr_cpu

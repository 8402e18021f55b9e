// TLR Cholesky factorization and solve on the CPU. potrf is right-looking by tile columns: the
// dense ?potrf of D_kk; the panel L_ik = A_ik·L_kk⁻ᴴ = U_ik·(L_kk⁻¹·V_ik)ᴴ, one triangular solve on
// V_ik; then the trailing update, dense on the diagonal tiles (D_ii −= L_ik·L_ikᴴ) and low rank
// below them (A_ij −= L_ik·L_jkᴴ, appended to A_ij's factors and recompressed as LLL does:
// tlr_cpu_parts.hpp). Each of the three phases of a step is one pass over the batch's tiles across
// the pool. The tolerance's ‖A‖_F is the input's, so unlike LLL a tile is truncated as soon as it
// is updated. potrs is forward and backward substitution by tiles, a task per matrix and block
// of right-hand sides.
#include <algorithm>
#include <cmath>
#include <limits>

#include "covflow/linalg/exec.hpp"
#include "tlr_cpu.hpp"
#include "tlr_cpu_parts.hpp"

namespace covflow::linalg::detail::tlr_cpu {
namespace {

using std::int64_t;

// Right-hand sides per potrs task.
constexpr int64_t rhs_block = 32;

// potrf's workspace: per tile what its truncations dropped, whether max_rank cut it and whether an
// SVD failed; per matrix ‖A‖_F², the status and the failing column; per worker a stack (A_ij's
// rank plus what L_ik·L_jkᴴ appends), the product and the core scratch.
template <class T>
struct PotrfLayout {
  double *dropped2, *norm2;
  int *capped, *svd_failed, *status, *column;
  Stack<T>* stacks;
  ProductScratch<T>* products;
  CoreScratch<T>* cores;

  PotrfLayout(Carver& carver, const TlrShape& s, unsigned workers) {
    const int64_t tiles = s.count * s.slots(), capacity = 2 * s.max_rank;
    dropped2 = carver.take<double>(tiles);
    capped = carver.take<int>(tiles);
    svd_failed = carver.take<int>(tiles);
    norm2 = carver.take<double>(s.count);
    status = carver.take<int>(s.count);
    column = carver.take<int>(s.count);
    stacks = carver.take_objects<Stack<T>>(workers);
    products = carver.take_objects<ProductScratch<T>>(workers);
    cores = carver.take_objects<CoreScratch<T>>(workers);
    for (unsigned w = 0; w < workers; ++w) {
      const Stack<T> stack = carve_stack<T>(carver, s.tile, capacity);
      const ProductScratch<T> product = carve_products<T>(carver, s.tile, s.max_rank, s.max_rank);
      const CoreScratch<T> core = carve_core<T>(carver, s.tile, capacity, s.max_rank);
      if (stacks) stacks[w] = stack;
      if (products) products[w] = product;
      if (cores) cores[w] = core;
    }
  }
};

// ‖U·Vᴴ‖_F² = trace(UᴴU·VᴴV), from the two k × k Gram matrices (in g and h).
template <class T>
double lowrank_norm2(const T* u, const T* v, int m, int n, int k, int64_t ld, T* g, T* h) {
  if (k == 0) return 0;
  const int ldi = static_cast<int>(ld);
  blas::gemm('C', 'N', k, k, m, T(1), u, ldi, u, ldi, T(0), g, k);
  blas::gemm('C', 'N', k, k, n, T(1), v, ldi, v, ldi, T(0), h, k);
  double sum = 0;
  for (int x = 0; x < k; ++x)
    for (int y = 0; y < k; ++y)
      sum += std::real(std::complex<double>(g[x + y * k]) * std::complex<double>(h[y + x * k]));
  return sum;
}

}  // namespace

template <class T>
std::size_t potrf_workspace(const Exec& exec, const TlrShape& shape) {
  Carver carver;
  PotrfLayout<T>(carver, shape, exec.pool().size());
  return carver.used();
}

template <class T>
void potrf(Exec& exec, Tlr<T> a, std::span<TlrInfo> info, std::span<std::byte> workspace, const TlrOptions& options) {
  const TlrShape& s = a.shape;
  const int64_t nt = s.tiles(), slots = s.slots(), tile = s.tile;
  const int ld = static_cast<int>(tile);
  const double tol2 = options.tolerance * options.tolerance;
  Carver carver(workspace.data());
  PotrfLayout<T> w(carver, s, exec.pool().size());
  const Tlr<const T> in = a;

  // Inputs checked (the diagonal tiles' lower triangles, as ?potrf reads them) and ‖A‖_F².
  each_tile(exec, s.count, 1, [&](int64_t m, int64_t, unsigned worker) {
    std::fill_n(w.dropped2 + m * slots, slots, 0.0);
    std::fill_n(w.capped + m * slots, slots, 0);
    std::fill_n(w.svd_failed + m * slots, slots, 0);
    w.column[m] = 0;
    if (!tlr_is_finite(in, m, true)) {
      w.status[m] = tlr_status::non_finite_input;
      return;
    }
    w.status[m] = tlr_status::ok;
    double sum = 0;
    for (int64_t i = 0; i < nt; ++i) {
      T* d = a.diag_tile(m, i);
      const int64_t rows = s.rows(i);
      // ?potrf takes the diagonal's imaginary parts as zero; so does the norm.
      if constexpr (is_complex_v<T>)
        for (int64_t e = 0; e < rows; ++e) d[e + e * tile].imag(0);
      for (int64_t col = 0; col < rows; ++col) {
        sum += std::norm(std::complex<double>(d[col + col * tile]));
        for (int64_t row = col + 1; row < rows; ++row) sum += 2 * std::norm(std::complex<double>(d[row + col * tile]));
      }
    }
    const ProductScratch<T>& scratch = w.products[worker];
    for (int64_t slot = 0; slot < slots; ++slot) {
      const auto [i, j] = slot_tile(s, slot);
      sum += 2 * lowrank_norm2(a.u_tile(m, slot), a.v_tile(m, slot), static_cast<int>(s.rows(i)),
                               static_cast<int>(s.rows(j)), a.rank[m * slots + slot], tile, scratch.w, scratch.w2);
    }
    w.norm2[m] = sum;
  });

  for (int64_t k = 0; k < nt; ++k) {
    const int inner = static_cast<int>(s.rows(k));
    // D_kk = L_kk·L_kkᴴ.
    each_tile(exec, s.count, 1, [&](int64_t m, int64_t, unsigned) {
      if (w.status[m] != tlr_status::ok) return;
      int result = 0;
      blas::potrf('L', inner, a.diag_tile(m, k), ld, &result);
      require_lapack_ok(result, "potrf");
      if (result > 0) {
        w.status[m] = tlr_status::not_positive_definite;
        w.column[m] = static_cast<int>(k * tile + result);
      }
    });
    // Panel: V_ik ← L_kk⁻¹·V_ik, and D_ii −= L_ik·L_ikᴴ = U_ik·(V_ikᴴ·V_ik)·U_ikᴴ.
    each_tile(exec, s.count, nt - k - 1, [&](int64_t m, int64_t below, unsigned worker) {
      if (w.status[m] != tlr_status::ok) return;
      const int64_t i = k + 1 + below, slot = s.slot(i, k);
      const int rank = a.rank[m * slots + slot], rows = static_cast<int>(s.rows(i));
      if (rank == 0) return;
      T* u = a.u_tile(m, slot);
      T* v = a.v_tile(m, slot);
      int result = 0;
      blas::trtrs('L', 'N', 'N', inner, rank, a.diag_tile(m, k), ld, v, ld, &result);
      require_lapack_ok(result, "trtrs");
      const ProductScratch<T>& scratch = w.products[worker];
      blas::gemm('C', 'N', rank, rank, inner, T(1), v, ld, v, ld, T(0), scratch.w, rank);
      blas::gemm('N', 'N', rows, rank, rank, T(1), u, ld, scratch.w, rank, T(0), scratch.w2, rows);
      blas::gemm('N', 'C', rows, rows, rank, T(-1), scratch.w2, rows, u, ld, T(1), a.diag_tile(m, i), ld);
    });
    // Trailing low-rank tiles: A_ij −= L_ik·L_jkᴴ for i > j > k, recompressed.
    const int64_t left = nt - k - 1;
    each_tile(exec, s.count, left * (left - 1) / 2, [&](int64_t m, int64_t pair, unsigned worker) {
      if (w.status[m] != tlr_status::ok) return;
      const auto [below_i, below_j] = lower_pair(pair);
      const int64_t i = k + 1 + below_i, j = k + 1 + below_j;
      const int64_t slot = s.slot(i, j), slot_i = s.slot(i, k), slot_j = s.slot(j, k);
      const int rows = static_cast<int>(s.rows(i)), cols = static_cast<int>(s.rows(j));
      Operand<T> l_ik, l_jk_h;  // L_ik = U_ik·V_ikᴴ and L_jkᴴ = V_jk·U_jkᴴ
      l_ik.p = a.u_tile(m, slot_i);
      l_ik.q = a.v_tile(m, slot_i);
      l_ik.k = a.rank[m * slots + slot_i];
      l_jk_h.p = a.v_tile(m, slot_j);
      l_jk_h.q = a.u_tile(m, slot_j);
      l_jk_h.k = a.rank[m * slots + slot_j];
      if (l_ik.k == 0 || l_jk_h.k == 0) return;
      Stack<T>& st = w.stacks[worker];
      const CoreScratch<T>& core = w.cores[worker];
      stack_tile(st, a.u_tile(m, slot), a.v_tile(m, slot), rows, cols, a.rank[m * slots + slot], tile);
      st.width += append_product(st.u + st.width * tile, st.v + st.width * tile, rows, cols, inner, T(-1), l_ik, l_jk_h,
                                 tile, w.products[worker]);
      factor(st, rows, cols, tile, core);
      // τ as compress's (tlr.hpp, Accuracy), ‖A‖_F being the input's.
      const double tau2 =
          options.scope == TlrScope::tile ? tol2 * st.norm2 : tol2 * w.norm2[m] / (2 * static_cast<double>(slots));
      const Cut cut = truncate(st, rows, cols, tile, static_cast<int>(s.max_rank), tau2, a.u_tile(m, slot),
                               a.v_tile(m, slot), core);
      const int64_t index = m * slots + slot;
      a.rank[index] = cut.rank;
      w.dropped2[index] += cut.discarded2;
      w.capped[index] |= cut.capped ? 1 : 0;
      w.svd_failed[index] |= st.info > 0 ? 1 : 0;
    });
  }

  each_tile(exec, s.count, 1, [&](int64_t m, int64_t, unsigned) {
    TlrInfo result;
    result.status = w.status[m];
    result.column = w.column[m];
    if (result.status == tlr_status::non_finite_input) {
      fill_nan(a, m);
      result.error = result.norm = std::numeric_limits<double>::quiet_NaN();
      info[m] = result;
      return;
    }
    const TileTotals totals = tile_totals(w.dropped2, w.capped, w.svd_failed, m, slots);
    result.capped_tiles = totals.capped;
    result.error = std::sqrt(2 * totals.dropped2);
    result.norm = std::sqrt(w.norm2[m]);
    if (result.status == tlr_status::ok) result.status = totals.status();
    info[m] = result;
  });
}

// ---- potrs ---------------------------------------------------------------------------------------------

namespace {

// potrs's workspace: per worker Qᴴ·B_j for one block of right-hand sides (max_rank × block).
template <class T>
std::size_t potrs_slice(const TlrShape& shape, std::int64_t nrhs) {
  return align_up(sizeof(T) * static_cast<std::size_t>(shape.max_rank * std::min(nrhs, rhs_block)));
}

}  // namespace

template <class T>
std::size_t potrs_workspace(const Exec& exec, const TlrShape& shape, std::int64_t nrhs) {
  return exec.pool().size() * potrs_slice<T>(shape, nrhs);
}

// L·Lᴴ·X = B: B_i ← L_ii⁻¹·(B_i − Σ_{j<i} L_ij·B_j) for i = 0 … nt − 1, then
// B_i ← L_iiᴴ⁻¹·(B_i − Σ_{j>i} L_jiᴴ·B_j) for i = nt − 1 … 0.
template <class T>
void potrs(Exec& exec, Tlr<const T> l, Batch<T> b, std::span<const TlrInfo> info, std::span<std::byte> workspace) {
  const TlrShape& s = l.shape;
  const int64_t nt = s.tiles(), slots = s.slots(), tile = s.tile;
  const int ld = static_cast<int>(tile), ldb = static_cast<int>(b.ld);
  const int64_t width = std::min<int64_t>(b.cols, rhs_block), blocks = (b.cols + width - 1) / width;
  each_tile(exec, s.count, blocks, [&](int64_t m, int64_t block, unsigned worker) {
    const std::int32_t status = info[m].status;
    if (status != tlr_status::ok && status != tlr_status::max_rank_reached) return;
    T* w = reinterpret_cast<T*>(workspace.data() + worker * potrs_slice<T>(s, b.cols));
    const int nrhs = static_cast<int>(std::min(width, b.cols - block * width));
    T* x = b.matrix(m) + block * width * b.ld;
    auto part = [&](int64_t i) { return x + i * tile; };
    // B_i −= P·(Qᴴ·B_j) for the tile P·Qᴴ of rank k.
    auto subtract = [&](T* bi, int rows, const T* p, const T* q, int k, const T* bj, int cols) {
      if (k == 0) return;
      blas::gemm('C', 'N', k, nrhs, cols, T(1), q, ld, bj, ldb, T(0), w, k);
      blas::gemm('N', 'N', rows, nrhs, k, T(-1), p, ld, w, k, T(1), bi, ldb);
    };
    int result = 0;
    for (int64_t i = 0; i < nt; ++i) {
      const int rows = static_cast<int>(s.rows(i));
      for (int64_t j = 0; j < i; ++j) {
        const int64_t slot = s.slot(i, j);
        subtract(part(i), rows, l.u_tile(m, slot), l.v_tile(m, slot), l.rank[m * slots + slot], part(j),
                 static_cast<int>(s.rows(j)));
      }
      blas::trtrs('L', 'N', 'N', rows, nrhs, l.diag_tile(m, i), ld, part(i), ldb, &result);
      require_lapack_ok(result, "trtrs");
    }
    for (int64_t i = nt - 1; i >= 0; --i) {
      const int rows = static_cast<int>(s.rows(i));
      for (int64_t j = i + 1; j < nt; ++j) {
        const int64_t slot = s.slot(j, i);
        subtract(part(i), rows, l.v_tile(m, slot), l.u_tile(m, slot), l.rank[m * slots + slot], part(j),
                 static_cast<int>(s.rows(j)));
      }
      blas::trtrs('L', 'C', 'N', rows, nrhs, l.diag_tile(m, i), ld, part(i), ldb, &result);
      require_lapack_ok(result, "trtrs");
    }
  });
}

#define COVFLOW_TLR_POTRF(T)                                                                          \
  template std::size_t potrf_workspace<T>(const Exec&, const TlrShape&);                              \
  template void potrf<T>(Exec&, Tlr<T>, std::span<TlrInfo>, std::span<std::byte>, const TlrOptions&); \
  template std::size_t potrs_workspace<T>(const Exec&, const TlrShape&, std::int64_t);                \
  template void potrs<T>(Exec&, Tlr<const T>, Batch<T>, std::span<const TlrInfo>, std::span<std::byte>);
COVFLOW_TLR_POTRF(f32)
COVFLOW_TLR_POTRF(f64)
COVFLOW_TLR_POTRF(cf32)
COVFLOW_TLR_POTRF(cf64)
#undef COVFLOW_TLR_POTRF

}  // namespace covflow::linalg::detail::tlr_cpu

// Internal: what the CPU TLR operations share — the workspace carver, tile coordinates, the tiles
// of op(A) as BLAS operands, the product of two tiles added to a dense tile or appended to a
// low-rank one, and the recompression of a stacked low-rank tile.
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "../common/blas.hpp"
#include "../common/cpu_helpers.hpp"
#include "covflow/linalg/error.hpp"
#include "covflow/linalg/exec.hpp"
#include "covflow/linalg/tlr.hpp"

namespace covflow::linalg::detail::tlr_cpu {

// Consecutive slices of a workspace, each 256-byte aligned. With a null base it only counts the
// bytes, so that one layout function both sizes a workspace (the *_workspace query) and carves it
// (the call).
class Carver {
 public:
  explicit Carver(std::byte* base = nullptr) : base_(base) {}
  // Elements LAPACK and BLAS write before they read.
  template <class U>
  U* take(std::size_t count) {
    U* at = base_ ? reinterpret_cast<U*>(base_ + used_) : nullptr;
    used_ += align_up(sizeof(U) * count);
    return at;
  }
  // Objects, default-constructed.
  template <class U>
  U* take_objects(std::size_t count) {
    U* at = take<U>(count);
    if (at) std::uninitialized_default_construct_n(at, count);
    return at;
  }
  std::size_t used() const { return used_; }

 private:
  std::byte* base_;
  std::size_t used_ = 0;
};

// Runs body(matrix, index, worker) for every matrix of the batch and index < per_matrix, across the
// Exec's pool.
template <class Body>
void each_tile(Exec& exec, std::int64_t count, std::int64_t per_matrix, const Body& body) {
  if (per_matrix <= 0 || count <= 0) return;
  exec.pool().parallel_for(static_cast<std::size_t>(count * per_matrix), [&](std::size_t index, unsigned worker) {
    const auto at = static_cast<std::int64_t>(index);
    body(at / per_matrix, at % per_matrix, worker);
  });
}

template <class T>
T quiet_nan() {
  return T(std::numeric_limits<real_t<T>>::quiet_NaN());
}

template <class T>
T conj_of(T v) {
  if constexpr (is_complex_v<T>)
    return std::conj(v);
  else
    return v;
}

// LAPACK's info < 0 names an argument of ours that tlr.cpp should have refused.
inline void require_lapack_ok(int info, const char* routine) {
  if (info < 0)
    throw Error(std::string(routine) + ": LAPACK rejected argument " + std::to_string(-info) +
                " (an argument check is missing)");
}

// LAPACK's optimal lwork from a workspace query's work[0] (at least 1).
template <class T>
int lwork_from(const T& query) {
  return std::max(1, static_cast<int>(std::real(query)));
}

// The pair (i, j), i > j ≥ 0, numbered p = i·(i − 1)/2 + j: the Hermitian slots, and the trailing
// tile pairs of a Cholesky step.
inline std::pair<std::int64_t, std::int64_t> lower_pair(std::int64_t p) {
  auto i = static_cast<std::int64_t>((1 + std::sqrt(1.0 + 8.0 * static_cast<double>(p))) / 2);
  while (i * (i - 1) / 2 > p) --i;
  while (i * (i + 1) / 2 <= p) ++i;
  return {i, p - i * (i - 1) / 2};
}

// The tile (i, j) in slot s: the inverse of TlrShape::slot.
inline std::pair<std::int64_t, std::int64_t> slot_tile(const TlrShape& shape, std::int64_t s) {
  if (shape.hermitian) return lower_pair(s);
  const std::int64_t others = shape.tiles() - 1, i = s / others, j = s % others;
  return {i, j + (j >= i ? 1 : 0)};
}

// Every element of matrix c's diagonal tiles and factors NaN, its ranks max_rank: what a matrix with
// a non-finite input becomes, so that any later use of it propagates NaN.
template <class T>
void fill_nan(const Tlr<T>& a, std::int64_t c) {
  const TlrShape& s = a.shape;
  std::fill_n(a.diag_tile(c, 0), s.diag_elements(), quiet_nan<T>());
  if (s.slots() == 0) return;
  std::fill_n(a.u_tile(c, 0), s.factor_elements(), quiet_nan<T>());
  std::fill_n(a.v_tile(c, 0), s.factor_elements(), quiet_nan<T>());
  std::fill_n(a.rank + c * s.slots(), s.slots(), static_cast<int>(s.max_rank));
}

// Whether matrix c's stored parts are finite: the diagonal tiles' own rows × cols (whole, or their
// lower triangle with a real diagonal when `lower_only`), and each factor's used columns.
template <class T>
bool tlr_is_finite(const Tlr<const T>& a, std::int64_t c, bool lower_only) {
  const TlrShape& s = a.shape;
  const std::int64_t b = s.tile;
  for (std::int64_t i = 0; i < s.tiles(); ++i) {
    const T* d = a.diag_tile(c, i);
    const std::int64_t m = s.rows(i);
    for (std::int64_t col = 0; col < m; ++col) {
      if (!std::isfinite(std::real(d[col + col * b]))) return false;
      for (std::int64_t row = lower_only ? col + 1 : 0; row < m; ++row)
        if (row != col && !is_finite(d[row + col * b])) return false;
    }
  }
  for (std::int64_t slot = 0; slot < s.slots(); ++slot) {
    const auto [i, j] = slot_tile(s, slot);
    const int k = a.rank[c * s.slots() + slot];
    if (!matrix_is_finite(a.u_tile(c, slot), b, static_cast<int>(s.rows(i)), k) ||
        !matrix_is_finite(a.v_tile(c, slot), b, static_cast<int>(s.rows(j)), k))
      return false;
  }
  return true;
}

// ---- tiles of op(A) as BLAS operands ---------------------------------------------------------------

// Tile (i, j) of op(A). Dense (a diagonal tile): op(D), D at d with ld b. Low rank: P·Qᴴ with P
// rows(i) × k and Q rows(j) × k, ld b — or conj(P)·conj(Q)ᴴ when conj is set, which op T of a
// complex low-rank tile gives: (X·Yᴴ)ᵀ = conj(Y)·conj(X)ᴴ, and BLAS has no "conjugate only".
template <class T>
struct Operand {
  bool dense = false;
  const T* d = nullptr;
  char op = 'N';
  const T* p = nullptr;
  const T* q = nullptr;
  int k = 0;
  bool conj = false;
};

template <class T>
Operand<T> op_tile(const Tlr<const T>& a, std::int64_t c, Op op, std::int64_t i, std::int64_t j) {
  Operand<T> t;
  if (i == j) {
    t.dense = true;
    t.d = a.diag_tile(c, i);
    t.op = static_cast<char>(op);
    return t;
  }
  // op(A)_ij is A_ij, or A_jiᵀ / A_jiᴴ: the tile (r, s) of A, stored as x·yᴴ — in its own slot, or
  // for a Hermitian A above the diagonal as the conjugate transpose of the slot (s, r).
  const std::int64_t r = op == Op::none ? i : j, s = op == Op::none ? j : i;
  const bool upper = a.shape.hermitian && r < s;
  const std::int64_t slot = upper ? a.shape.slot(s, r) : a.shape.slot(r, s);
  const T* x = upper ? a.v_tile(c, slot) : a.u_tile(c, slot);
  const T* y = upper ? a.u_tile(c, slot) : a.v_tile(c, slot);
  t.k = a.rank[c * a.shape.slots() + slot];
  if (op == Op::none) {
    t.p = x;
    t.q = y;
  } else {
    t.p = y;
    t.q = x;
    t.conj = op == Op::trans && is_complex_v<T>;
  }
  return t;
}

// Per-worker scratch of the tile products: conjugated copies of the factors of both operands
// (b × max_rank each) and the small intermediate products.
template <class T>
struct ProductScratch {
  T *pa = nullptr, *qa = nullptr, *pb = nullptr, *qb = nullptr, *w = nullptr, *w2 = nullptr;
};

template <class T>
ProductScratch<T> carve_products(Carver& carver, std::int64_t b, std::int64_t rank_a, std::int64_t rank_b) {
  ProductScratch<T> s;
  s.pa = carver.take<T>(b * rank_a);
  s.qa = carver.take<T>(b * rank_a);
  s.pb = carver.take<T>(b * rank_b);
  s.qb = carver.take<T>(b * rank_b);
  s.w = carver.take<T>(b * std::max(rank_a, rank_b));
  s.w2 = carver.take<T>(b * std::max(rank_a, rank_b));
  return s;
}

// The operand with conj resolved into the copies p_copy and q_copy (ld b).
template <class T>
Operand<T> plain(Operand<T> t, std::int64_t b, std::int64_t p_rows, std::int64_t q_rows, T* p_copy, T* q_copy) {
  if (t.dense || !t.conj) return t;
  for (std::int64_t col = 0; col < t.k; ++col) {
    for (std::int64_t row = 0; row < p_rows; ++row) p_copy[row + col * b] = conj_of(t.p[row + col * b]);
    for (std::int64_t row = 0; row < q_rows; ++row) q_copy[row + col * b] = conj_of(t.q[row + col * b]);
  }
  t.p = p_copy;
  t.q = q_copy;
  t.conj = false;
  return t;
}

// C += α·a·b for tiles a (m × kk) and b (kk × n) of op(A) and op(B), C dense (m × n, ld ldc), as
// the three small products of Charara et al. 2018 §5 when both are low rank, two when one is
// dense, one when both are.
template <class T>
void add_product(T* c, std::int64_t ldc, int m, int n, int kk, T alpha, Operand<T> a, Operand<T> b, std::int64_t ld,
                 const ProductScratch<T>& s) {
  const int ldi = static_cast<int>(ld), ldc_i = static_cast<int>(ldc);
  a = plain(a, ld, m, kk, s.pa, s.qa);
  b = plain(b, ld, kk, n, s.pb, s.qb);
  if (a.dense && b.dense) {
    blas::gemm(a.op, b.op, m, n, kk, alpha, a.d, ldi, b.d, ldi, T(1), c, ldc_i);
  } else if (a.dense) {
    if (b.k == 0) return;
    blas::gemm(a.op, 'N', m, b.k, kk, T(1), a.d, ldi, b.p, ldi, T(0), s.w, m);  // op(D)·P_b
    blas::gemm('N', 'C', m, n, b.k, alpha, s.w, m, b.q, ldi, T(1), c, ldc_i);
  } else if (b.dense) {
    if (a.k == 0) return;
    blas::gemm('C', b.op, a.k, n, kk, T(1), a.q, ldi, b.d, ldi, T(0), s.w, a.k);  // Q_aᴴ·op(D)
    blas::gemm('N', 'N', m, n, a.k, alpha, a.p, ldi, s.w, a.k, T(1), c, ldc_i);
  } else {
    if (a.k == 0 || b.k == 0) return;
    blas::gemm('C', 'N', a.k, b.k, kk, T(1), a.q, ldi, b.p, ldi, T(0), s.w, a.k);  // Q_aᴴ·P_b
    blas::gemm('N', 'C', a.k, n, b.k, T(1), s.w, a.k, b.q, ldi, T(0), s.w2, a.k);  // ·Q_bᴴ
    blas::gemm('N', 'N', m, n, a.k, alpha, a.p, ldi, s.w2, a.k, T(1), c, ldc_i);   // α·P_a·
  }
}

// α·a·b as a low-rank X·Yᴴ written to x (m × added) and y (n × added), both ld `ld`, for tiles
// a and b of which at most one is dense; returns `added`, the smaller rank the product allows.
template <class T>
int append_product(T* x, T* y, int m, int n, int kk, T alpha, Operand<T> a, Operand<T> b, std::int64_t ld,
                   const ProductScratch<T>& s) {
  const int ldi = static_cast<int>(ld);
  a = plain(a, ld, m, kk, s.pa, s.qa);
  b = plain(b, ld, kk, n, s.pb, s.qb);
  auto copy = [&](T* to, const T* from, int rows, int cols, T scale) {
    for (int col = 0; col < cols; ++col)
      for (int row = 0; row < rows; ++row) to[row + col * ld] = scale * from[row + col * ld];
  };
  if (a.dense) {  // X = α·op(D)·P_b, Y = Q_b
    if (b.k == 0) return 0;
    blas::gemm(a.op, 'N', m, b.k, kk, alpha, a.d, ldi, b.p, ldi, T(0), x, ldi);
    copy(y, b.q, n, b.k, T(1));
    return b.k;
  }
  if (a.k == 0) return 0;
  if (b.dense) {  // X = α·P_a, Y = (Q_aᴴ·op(D))ᴴ
    blas::gemm('C', b.op, a.k, n, kk, T(1), a.q, ldi, b.d, ldi, T(0), s.w, a.k);
    copy(x, a.p, m, a.k, alpha);
    for (int col = 0; col < a.k; ++col)
      for (int row = 0; row < n; ++row) y[row + col * ld] = conj_of(s.w[col + row * a.k]);
    return a.k;
  }
  if (b.k == 0) return 0;
  blas::gemm('C', 'N', a.k, b.k, kk, T(1), a.q, ldi, b.p, ldi, T(0), s.w, a.k);  // W = Q_aᴴ·P_b
  if (a.k <= b.k) {                                                              // X = α·P_a, Y = Q_b·Wᴴ
    copy(x, a.p, m, a.k, alpha);
    blas::gemm('N', 'C', n, a.k, b.k, T(1), b.q, ldi, s.w, a.k, T(0), y, ldi);
    return a.k;
  }
  blas::gemm('N', 'N', m, b.k, a.k, alpha, a.p, ldi, s.w, a.k, T(0), x, ldi);  // X = α·P_a·W, Y = Q_b
  copy(y, b.q, n, b.k, T(1));
  return b.k;
}

// ---- recompression -----------------------------------------------------------------------------------

// The smallest rank k whose discarded values σ_k, σ_{k+1}, … (descending) have Σσ² ≤ τ².
template <class R>
int rank_for(const R* sigma, int count, double tau2) {
  double tail = 0;
  int k = count;
  while (k > 0 && tail + double(sigma[k - 1]) * double(sigma[k - 1]) <= tau2) {
    tail += double(sigma[k - 1]) * double(sigma[k - 1]);
    --k;
  }
  return k;
}

template <class R>
double tail2(const R* sigma, int from, int count) {
  double sum = 0;
  for (int l = from; l < count; ++l) sum += double(sigma[l]) * double(sigma[l]);
  return sum;
}

// A low-rank tile being recompressed, after Charara et al. 2018 §5: its factors stacked with what an
// update appends, [U | X] (m × width) and [V | Y] (n × width); then the QR of both (in place,
// reflectors kept), the SVD of the small core R_u·R_vᴴ = U_s·Σ·V_sᴴ, and the truncation
// U = Q_u·U_s·Σ, V = Q_v·V_s to the rank the tolerance allows.
template <class T>
struct Stack {
  T *u = nullptr, *v = nullptr;          // b × capacity each, ld b
  T *tau_u = nullptr, *tau_v = nullptr;  // capacity each
  T *left = nullptr, *right = nullptr;   // U_s (qu × s, ld qu) and V_sᴴ (s × qv, ld s)
  real_t<T>* sigma = nullptr;            // s
  int width = 0, qu = 0, qv = 0, s = 0, info = 0;
  double norm2 = 0;  // ‖[U | X]·[V | Y]ᴴ‖_F² = Σσ²
};

template <class T>
Stack<T> carve_stack(Carver& carver, std::int64_t b, std::int64_t capacity) {
  Stack<T> st;
  st.u = carver.take<T>(b * capacity);
  st.v = carver.take<T>(b * capacity);
  st.tau_u = carver.take<T>(capacity);
  st.tau_v = carver.take<T>(capacity);
  st.left = carver.take<T>(capacity * capacity);
  st.right = carver.take<T>(capacity * capacity);
  st.sigma = carver.take<real_t<T>>(capacity);
  return st;
}

// Per-worker scratch of factor() and truncate(): the two R factors and the core, LAPACK's work.
template <class T>
struct CoreScratch {
  T *ru = nullptr, *rv = nullptr, *core = nullptr, *work = nullptr;
  real_t<T>* rwork = nullptr;
  int lwork = 1;
};

// One work array serves ?geqrf of the stacked factors (b × capacity), ?gesvd of the core (at most
// capacity × capacity) and ?unmqr forming the new factors (b × max_rank): LAPACK's optimum for the
// largest shapes, which is at least its minimum for every smaller one.
template <class T>
int core_lwork(std::int64_t b, std::int64_t capacity, std::int64_t max_rank) {
  const int m = static_cast<int>(b), w = static_cast<int>(capacity), q = static_cast<int>(std::min(b, capacity));
  T geqrf_query{}, gesvd_query{}, unmqr_query{};
  int info = 0;
  blas::geqrf(m, w, static_cast<T*>(nullptr), m, static_cast<T*>(nullptr), &geqrf_query, -1, &info);
  blas::gesvd('S', 'S', q, q, static_cast<T*>(nullptr), q, static_cast<real_t<T>*>(nullptr), static_cast<T*>(nullptr),
              q, static_cast<T*>(nullptr), q, &gesvd_query, -1, static_cast<real_t<T>*>(nullptr), &info);
  blas::unmqr('L', 'N', m, static_cast<int>(max_rank), q, static_cast<const T*>(nullptr), m,
              static_cast<const T*>(nullptr), static_cast<T*>(nullptr), m, &unmqr_query, -1, &info);
  return std::max({lwork_from(geqrf_query), lwork_from(gesvd_query), lwork_from(unmqr_query)});
}

template <class T>
CoreScratch<T> carve_core(Carver& carver, std::int64_t b, std::int64_t capacity, std::int64_t max_rank) {
  CoreScratch<T> s;
  s.lwork = core_lwork<T>(b, capacity, max_rank);
  s.ru = carver.take<T>(capacity * capacity);
  s.rv = carver.take<T>(capacity * capacity);
  s.core = carver.take<T>(capacity * capacity);
  s.work = carver.take<T>(static_cast<std::size_t>(s.lwork));
  s.rwork = carver.take<real_t<T>>(5 * capacity);
  return s;
}

// QR of the stacked factors (m × width and n × width, ld b) and the SVD of the core: st.sigma,
// st.left, st.right, st.norm2; st.info > 0 when the SVD did not converge.
template <class T>
void factor(Stack<T>& st, int m, int n, std::int64_t b, const CoreScratch<T>& cs) {
  const int ld = static_cast<int>(b), w = st.width;
  st.qu = std::min(m, w);
  st.qv = std::min(n, w);
  st.s = std::min(st.qu, st.qv);
  st.norm2 = 0;
  st.info = 0;
  if (w == 0) return;
  int info = 0;
  blas::geqrf(m, w, st.u, ld, st.tau_u, cs.work, cs.lwork, &info);
  require_lapack_ok(info, "geqrf");
  blas::geqrf(n, w, st.v, ld, st.tau_v, cs.work, cs.lwork, &info);
  require_lapack_ok(info, "geqrf");
  auto upper = [&](T* to, const T* from, int rows) {  // R: rows × w, upper trapezoidal, ld rows
    for (int col = 0; col < w; ++col)
      for (int row = 0; row < rows; ++row) to[row + col * rows] = row <= col ? from[row + col * b] : T(0);
  };
  upper(cs.ru, st.u, st.qu);
  upper(cs.rv, st.v, st.qv);
  blas::gemm('N', 'C', st.qu, st.qv, w, T(1), cs.ru, st.qu, cs.rv, st.qv, T(0), cs.core, st.qu);
  blas::gesvd('S', 'S', st.qu, st.qv, cs.core, st.qu, st.sigma, st.left, st.qu, st.right, st.s, cs.work, cs.lwork,
              cs.rwork, &info);
  require_lapack_ok(info, "gesvd");
  st.info = info;
  st.norm2 = tail2(st.sigma, 0, st.s);
}

// What a truncation kept and discarded.
struct Cut {
  int rank = 0;
  double discarded2 = 0;  // Σσ² of the values dropped
  bool capped = false;    // the tolerance needed more than max_rank
};

// The factored stack truncated at the smallest rank whose dropped Σσ² ≤ tau2 (at most max_rank),
// written as U (m × rank) and V (n × rank) into the slabs out_u and out_v (b × max_rank, ld b),
// zero past the rank and the rows.
template <class T>
Cut truncate(const Stack<T>& st, int m, int n, std::int64_t b, int max_rank, double tau2, T* out_u, T* out_v,
             const CoreScratch<T>& cs) {
  Cut cut;
  cut.rank = rank_for(st.sigma, st.s, tau2);
  if (cut.rank > max_rank) {
    cut.rank = max_rank;
    cut.capped = true;
  }
  cut.discarded2 = tail2(st.sigma, cut.rank, st.s);
  std::fill_n(out_u, b * max_rank, T(0));
  std::fill_n(out_v, b * max_rank, T(0));
  const int k = cut.rank;
  if (k == 0) return cut;
  for (int l = 0; l < k; ++l) {
    const real_t<T> sigma = st.sigma[l];
    for (int row = 0; row < st.qu; ++row) out_u[row + l * b] = st.left[row + l * st.qu] * sigma;
    for (int row = 0; row < st.qv; ++row) out_v[row + l * b] = conj_of(st.right[l + row * st.s]);
  }
  const int ld = static_cast<int>(b);
  int info = 0;
  blas::unmqr('L', 'N', m, k, st.qu, st.u, ld, st.tau_u, out_u, ld, cs.work, cs.lwork, &info);
  require_lapack_ok(info, "unmqr");
  blas::unmqr('L', 'N', n, k, st.qv, st.v, ld, st.tau_v, out_v, ld, cs.work, cs.lwork, &info);
  require_lapack_ok(info, "unmqr");
  return cut;
}

// Copies the used columns of a tile's factors (m × k and n × k, ld b) to the front of a stack.
template <class T>
void stack_tile(Stack<T>& st, const T* u, const T* v, int m, int n, int k, std::int64_t b) {
  for (int col = 0; col < k; ++col) {
    std::copy_n(u + col * b, m, st.u + col * b);
    std::copy_n(v + col * b, n, st.v + col * b);
  }
  st.width = k;
}

// One matrix's sums over its slots after a pass of truncations (LLL, potrf): the squared norm
// dropped, the tiles cut at max_rank, and whether any tile's SVD failed; and the status they give
// a matrix that did not fail otherwise.
struct TileTotals {
  double dropped2 = 0;
  std::int32_t capped = 0;
  bool failed = false;

  std::int32_t status() const {
    return failed ? tlr_status::svd_failed : capped > 0 ? tlr_status::max_rank_reached : tlr_status::ok;
  }
};
inline TileTotals tile_totals(const double* dropped2, const int* capped, const int* failed, std::int64_t m,
                              std::int64_t slots) {
  TileTotals t;
  for (std::int64_t slot = m * slots; slot < (m + 1) * slots; ++slot) {
    t.dropped2 += dropped2[slot];
    t.capped += capped[slot];
    t.failed = t.failed || failed[slot] != 0;
  }
  return t;
}

}  // namespace covflow::linalg::detail::tlr_cpu

// TLR compress, expand, gemv and GEMM-LLD on the CPU: BLAS/LAPACK per tile, the tiles of the batch
// spread over the Exec's thread pool, every worker on its own slice of the caller's workspace.
// Compression is an SVD per off-diagonal tile (?gesvd) truncated as tlr.hpp's Accuracy rules say;
// LLD adds to each tile of C the products of Charara et al. 2018 §5 over the whole k-loop. The
// paper's driver runs one outer product (one k) over every tile at a time because a batched GEMM is
// a single launch; on the CPU a task per C tile that walks k in the same order does the same
// arithmetic in the same order without nt barriers.
#include "tlr_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

#include "covflow/linalg/exec.hpp"
#include "tlr_cpu_parts.hpp"

namespace covflow::linalg::detail::tlr_cpu {
namespace {

using std::int64_t;

// C ← β·C on a rows × cols block; β = 0 writes zeros (whatever C held, NaN included), as BLAS does.
template <class T>
void scale(T* c, int64_t ld, int64_t rows, int64_t cols, T beta) {
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < rows; ++i) c[i + j * ld] = beta == T(0) ? T(0) : beta * c[i + j * ld];
}

// ---- compress ----------------------------------------------------------------------------------------

// The workspace of tlr_compress: per tile of the batch (nt diagonal, then the slots) its Σ|a|²
// and whether it is finite; per slot what its truncation dropped and whether max_rank cut it;
// per matrix ‖A‖_F² and whether any tile was not finite; per worker a tile, its SVD and LAPACK's
// work.
template <class T>
struct CompressLayout {
  double *tile_norm2, *discarded2, *matrix_norm2;
  int *tile_bad, *capped, *svd_failed, *matrix_bad;
  struct Worker {
    T *tile, *left, *right, *work;
    real_t<T>*sigma, *rwork;
  };
  Worker* workers;
  int lwork;

  CompressLayout(Carver& carver, const TlrShape& s, unsigned worker_count) {
    const int64_t b = s.tile, per_matrix = s.tiles() + s.slots();
    const int bi = static_cast<int>(b);
    T query{};
    int info = 0;
    blas::gesvd('S', 'S', bi, bi, static_cast<T*>(nullptr), bi, static_cast<real_t<T>*>(nullptr),
                static_cast<T*>(nullptr), bi, static_cast<T*>(nullptr), bi, &query, -1,
                static_cast<real_t<T>*>(nullptr), &info);
    lwork = lwork_from(query);
    tile_norm2 = carver.take<double>(s.count * per_matrix);
    tile_bad = carver.take<int>(s.count * per_matrix);
    discarded2 = carver.take<double>(s.count * s.slots());
    capped = carver.take<int>(s.count * s.slots());
    svd_failed = carver.take<int>(s.count * s.slots());
    matrix_norm2 = carver.take<double>(s.count);
    matrix_bad = carver.take<int>(s.count);
    workers = carver.take_objects<Worker>(worker_count);
    for (unsigned w = 0; w < worker_count; ++w) {
      Worker one{carver.take<T>(b * b),     carver.take<T>(b * b),
                 carver.take<T>(b * b),     carver.take<T>(static_cast<std::size_t>(lwork)),
                 carver.take<real_t<T>>(b), carver.take<real_t<T>>(5 * b)};
      if (workers) workers[w] = one;
    }
  }
};

// The SVD of off-diagonal tile `slot` of matrix c (m × n, in a at ld), truncated: U·Σ and V into
// out's slabs, the rank, and what was dropped.
template <class T>
void compress_tile(const T* a, int64_t ld, int m, int n, Tlr<T> out, int64_t c, int64_t slot, double tau2_matrix,
                   const TlrOptions& options, CompressLayout<T>& w_all, const typename CompressLayout<T>::Worker& w) {
  const TlrShape& s = out.shape;
  const int64_t b = s.tile, index = c * s.slots() + slot;
  for (int col = 0; col < n; ++col) std::copy_n(a + col * ld, m, w.tile + col * m);
  const int q = std::min(m, n);
  int info = 0;
  blas::gesvd('S', 'S', m, n, w.tile, m, w.sigma, w.left, m, w.right, q, w.work, w_all.lwork, w.rwork, &info);
  require_lapack_ok(info, "gesvd");
  w_all.svd_failed[index] = info > 0;
  const double tau2 =
      options.scope == TlrScope::tile ? options.tolerance * options.tolerance * tail2(w.sigma, 0, q) : tau2_matrix;
  int k = rank_for(w.sigma, q, tau2);
  w_all.capped[index] = k > s.max_rank;
  k = std::min<int>(k, static_cast<int>(s.max_rank));
  w_all.discarded2[index] = tail2(w.sigma, k, q);
  T* u = out.u_tile(c, slot);
  T* v = out.v_tile(c, slot);
  std::fill_n(u, b * s.max_rank, T(0));
  std::fill_n(v, b * s.max_rank, T(0));
  for (int l = 0; l < k; ++l) {
    for (int row = 0; row < m; ++row) u[row + l * b] = w.left[row + l * m] * w.sigma[l];
    for (int row = 0; row < n; ++row) v[row + l * b] = conj_of(w.right[l + row * q]);
  }
  out.rank[index] = k;
}

}  // namespace

template <class T>
std::size_t compress_workspace(const Exec& exec, const TlrShape& shape) {
  Carver carver;
  CompressLayout<T>(carver, shape, exec.pool().size());
  return carver.used();
}

template <class T>
void compress(Exec& exec, Batch<const T> a, Tlr<T> out, std::span<TlrInfo> info, std::span<std::byte> workspace,
              const TlrOptions& options) {
  const TlrShape& s = out.shape;
  const int64_t nt = s.tiles(), slots = s.slots(), per_matrix = nt + slots, b = s.tile;
  Carver carver(workspace.data());
  CompressLayout<T> w(carver, s, exec.pool().size());
  // Tile t < nt is the diagonal tile t, tile nt + slot the stored off-diagonal one: its block of A.
  auto block = [&](int64_t c, int64_t t) {
    const auto [i, j] = t < nt ? std::pair{t, t} : slot_tile(s, t - nt);
    return std::tuple{a.matrix(c) + i * b + j * b * a.ld, static_cast<int>(s.rows(i)), static_cast<int>(s.rows(j))};
  };

  // ‖A‖_F from the tiles (a Hermitian A's stored tiles count twice), and whether A is finite.
  each_tile(exec, s.count, per_matrix, [&](int64_t c, int64_t t, unsigned) {
    const auto [at, m, n] = block(c, t);
    const bool finite = matrix_is_finite(at, a.ld, m, n);
    w.tile_bad[c * per_matrix + t] = !finite;
    w.tile_norm2[c * per_matrix + t] = finite ? norm2(at, a.ld, m, n) * (t >= nt && s.hermitian ? 2 : 1) : 0;
  });
  each_tile(exec, s.count, 1, [&](int64_t c, int64_t, unsigned) {
    const double* norms = w.tile_norm2 + c * per_matrix;
    const int* bad = w.tile_bad + c * per_matrix;
    w.matrix_norm2[c] = std::accumulate(norms, norms + per_matrix, 0.0);
    w.matrix_bad[c] = std::any_of(bad, bad + per_matrix, [](int x) { return x != 0; });
  });

  // The error budget tol²·‖A‖_F² shared evenly by the off-diagonal tiles (tlr.hpp, Accuracy).
  const double tiles_counted = static_cast<double>(slots) * (s.hermitian ? 2 : 1);
  each_tile(exec, s.count, per_matrix, [&](int64_t c, int64_t t, unsigned worker) {
    if (w.matrix_bad[c]) return;
    const auto [at, m, n] = block(c, t);
    if (t < nt) {  // dense, the padding of a ragged last tile the identity
      T* d = out.diag_tile(c, t);
      for (int64_t col = 0; col < b; ++col)
        for (int64_t row = 0; row < b; ++row)
          d[row + col * b] = row < m && col < m ? at[row + col * a.ld] : T(row == col ? 1 : 0);
      return;
    }
    const double tau2 = options.tolerance * options.tolerance * w.matrix_norm2[c] / tiles_counted;
    compress_tile(at, a.ld, m, n, out, c, t - nt, tau2, options, w, w.workers[worker]);
  });

  each_tile(exec, s.count, 1, [&](int64_t c, int64_t, unsigned) {
    TlrInfo result;
    if (w.matrix_bad[c]) {
      fill_nan(out, c);
      result.status = tlr_status::non_finite_input;
      result.error = result.norm = std::numeric_limits<double>::quiet_NaN();
      info[c] = result;
      return;
    }
    double dropped = 0;
    bool failed = false;
    for (int64_t slot = 0; slot < slots; ++slot) {
      dropped += w.discarded2[c * slots + slot];
      result.capped_tiles += w.capped[c * slots + slot];
      failed = failed || w.svd_failed[c * slots + slot];
    }
    result.error = std::sqrt(dropped * (s.hermitian ? 2 : 1));
    result.norm = std::sqrt(w.matrix_norm2[c]);
    result.status = failed                    ? tlr_status::svd_failed
                    : result.capped_tiles > 0 ? tlr_status::max_rank_reached
                                              : tlr_status::ok;
    info[c] = result;
  });
}

// ---- expand --------------------------------------------------------------------------------------

template <class T>
void expand(Exec& exec, Tlr<const T> a, Batch<T> out) {
  const TlrShape& s = a.shape;
  const int64_t nt = s.tiles(), b = s.tile;
  each_tile(exec, s.count, nt, [&](int64_t c, int64_t j, unsigned) {
    const int n = static_cast<int>(s.rows(j));
    for (int64_t i = 0; i < nt; ++i) {
      const int m = static_cast<int>(s.rows(i));
      T* to = out.matrix(c) + i * b + j * b * out.ld;
      const Operand<T> t = op_tile(a, c, Op::none, i, j);
      if (t.dense) {
        for (int col = 0; col < n; ++col) std::copy_n(t.d + col * b, m, to + col * out.ld);
      } else if (t.k == 0) {
        scale(to, out.ld, m, n, T(0));
      } else {
        blas::gemm('N', 'C', m, n, t.k, T(1), t.p, static_cast<int>(b), t.q, static_cast<int>(b), T(0), to,
                   static_cast<int>(out.ld));
      }
    }
  });
}

// ---- gemv ---------------------------------------------------------------------------------------------

namespace {

// Per worker: conjugated copies of a tile's factors (op T of complex A) and Qᴴ·X (max_rank × nrhs).
template <class T>
struct GemvLayout {
  struct Worker {
    T *p, *q, *w;
  };
  Worker* workers;
  GemvLayout(Carver& carver, const TlrShape& s, int64_t nrhs, unsigned worker_count) {
    workers = carver.take_objects<Worker>(worker_count);
    for (unsigned w = 0; w < worker_count; ++w) {
      Worker one{carver.take<T>(s.tile * s.max_rank), carver.take<T>(s.tile * s.max_rank),
                 carver.take<T>(s.max_rank * std::max<int64_t>(nrhs, 1))};
      if (workers) workers[w] = one;
    }
  }
};

}  // namespace

template <class T>
std::size_t gemv_workspace(const Exec& exec, const TlrShape& shape, std::int64_t nrhs) {
  Carver carver;
  GemvLayout<T>(carver, shape, nrhs, exec.pool().size());
  return carver.used();
}

// Y_i = β·Y_i + α·Σ_j op(A)_ij·X_j, one task per tile row of Y.
template <class T>
void gemv(Exec& exec, Op op, T alpha, Tlr<const T> a, Batch<const T> x, T beta, Batch<T> y,
          std::span<std::byte> workspace) {
  const TlrShape& s = a.shape;
  const int64_t nt = s.tiles(), b = s.tile;
  const int nrhs = static_cast<int>(x.cols), ldb = static_cast<int>(b);
  const int ldx = static_cast<int>(x.ld), ldy = static_cast<int>(y.ld);
  Carver carver(workspace.data());
  GemvLayout<T> layout(carver, s, nrhs, exec.pool().size());
  each_tile(exec, s.count, nt, [&](int64_t c, int64_t i, unsigned worker) {
    const auto& w = layout.workers[worker];
    const int m = static_cast<int>(s.rows(i));
    T* yi = y.matrix(c) + i * b;
    scale(yi, y.ld, m, nrhs, beta);
    for (int64_t j = 0; j < nt; ++j) {
      const int n = static_cast<int>(s.rows(j));
      const T* xj = x.matrix(c) + j * b;
      const Operand<T> t = plain(op_tile(a, c, op, i, j), b, m, n, w.p, w.q);
      if (t.dense) {
        blas::gemm(t.op, 'N', m, nrhs, n, alpha, t.d, ldb, xj, ldx, T(1), yi, ldy);
      } else if (t.k > 0) {
        blas::gemm('C', 'N', t.k, nrhs, n, T(1), t.q, ldb, xj, ldx, T(0), w.w, t.k);
        blas::gemm('N', 'N', m, nrhs, t.k, alpha, t.p, ldb, w.w, t.k, T(1), yi, ldy);
      }
    }
  });
}

// ---- GEMM-LLD -------------------------------------------------------------------------------------------

namespace {

template <class T>
struct LldLayout {
  ProductScratch<T>* workers;
  LldLayout(Carver& carver, const TlrShape& a, const TlrShape& b, unsigned worker_count) {
    workers = carver.take_objects<ProductScratch<T>>(worker_count);
    for (unsigned w = 0; w < worker_count; ++w) {
      const ProductScratch<T> one = carve_products<T>(carver, a.tile, a.max_rank, b.max_rank);
      if (workers) workers[w] = one;
    }
  }
};

}  // namespace

template <class T>
std::size_t gemm_lld_workspace(const Exec& exec, const TlrShape& a, const TlrShape& b) {
  Carver carver;
  LldLayout<T>(carver, a, b, exec.pool().size());
  return carver.used();
}

// One task per tile (i, j) of C: C_ij ← β·C_ij, then C_ij += α·op(A)_ik·op(B)_kj for k = 0 … nt − 1.
template <class T>
void gemm_lld(Exec& exec, Op op_a, Op op_b, T alpha, Tlr<const T> a, Tlr<const T> b, T beta, Batch<T> c,
              std::span<std::byte> workspace) {
  const TlrShape& s = a.shape;
  const int64_t nt = s.tiles(), tile = s.tile;
  Carver carver(workspace.data());
  LldLayout<T> layout(carver, a.shape, b.shape, exec.pool().size());
  each_tile(exec, s.count, nt * nt, [&](int64_t matrix, int64_t ij, unsigned worker) {
    const int64_t i = ij % nt, j = ij / nt;
    const int m = static_cast<int>(s.rows(i)), n = static_cast<int>(s.rows(j));
    T* cij = c.matrix(matrix) + i * tile + j * tile * c.ld;
    scale(cij, c.ld, m, n, beta);
    for (int64_t k = 0; k < nt; ++k)
      add_product(cij, c.ld, m, n, static_cast<int>(s.rows(k)), alpha, op_tile(a, matrix, op_a, i, k),
                  op_tile(b, matrix, op_b, k, j), tile, layout.workers[worker]);
  });
}

#define COVFLOW_TLR_CPU(T)                                                                              \
  template std::size_t compress_workspace<T>(const Exec&, const TlrShape&);                             \
  template void compress<T>(Exec&, Batch<const T>, Tlr<T>, std::span<TlrInfo>, std::span<std::byte>,    \
                            const TlrOptions&);                                                         \
  template void expand<T>(Exec&, Tlr<const T>, Batch<T>);                                               \
  template std::size_t gemv_workspace<T>(const Exec&, const TlrShape&, std::int64_t);                   \
  template void gemv<T>(Exec&, Op, T, Tlr<const T>, Batch<const T>, T, Batch<T>, std::span<std::byte>); \
  template std::size_t gemm_lld_workspace<T>(const Exec&, const TlrShape&, const TlrShape&);            \
  template void gemm_lld<T>(Exec&, Op, Op, T, Tlr<const T>, Tlr<const T>, T, Batch<T>, std::span<std::byte>);
COVFLOW_TLR_CPU(f32)
COVFLOW_TLR_CPU(f64)
COVFLOW_TLR_CPU(cf32)
COVFLOW_TLR_CPU(cf64)
#undef COVFLOW_TLR_CPU

}  // namespace covflow::linalg::detail::tlr_cpu

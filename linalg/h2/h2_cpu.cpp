// H² matvec and expansion on the CPU. The matvec runs H2Opus's hgemv phases (Boukaram, Turkiyyah &
// Keyes 2019, the matrix-vector section): upsweep, coupling products per level, downsweep, dense blocks. Each phase is a
// loop over one level's strided arrays — what a batched kernel does in one launch — spread over the
// Exec's thread pool by node, and each node gathers its whole block row (the stored pairs through
// row_ptr, the conjugate transposes of the other triangle through col_ptr), so no two tasks write
// the same output.
#include <algorithm>

#include "h2_impl.hpp"

namespace covflow::linalg::detail::h2 {

template <class T>
void gemv(Exec& exec, T alpha, const H2<T>& a, Batch<const T> x, T beta, Batch<T> y) {
  const H2Tree& tree = a.tree;
  const int depth = tree.depth;
  const std::int64_t n = tree.n, m = tree.leaf_capacity, nvec = x.cols;
  ThreadPool& pool = exec.pool();
  auto k = [&](int l) { return static_cast<std::int64_t>(a.rank[static_cast<std::size_t>(l)]); };

  // X into tree order.
  std::vector<T> xp(static_cast<std::size_t>(n * nvec)), yp(static_cast<std::size_t>(n * nvec));
  for (std::int64_t j = 0; j < nvec; ++j)
    for (std::int64_t i = 0; i < n; ++i) xp[i + j * n] = x.at(0, tree.permutation[static_cast<std::size_t>(i)], j);

  // x̂ and ŷ: per level, node t's k_l × nvec block at offset[l] + t·k_l·nvec.
  std::vector<std::int64_t> offset(static_cast<std::size_t>(depth) + 2, 0);
  for (int l = 0; l <= depth; ++l) offset[static_cast<std::size_t>(l) + 1] = offset[static_cast<std::size_t>(l)] + tree.nodes(l) * k(l) * nvec;
  std::vector<T> xhat(static_cast<std::size_t>(offset.back())), yhat(static_cast<std::size_t>(offset.back()), T(0));
  auto xh = [&](int l, std::int64_t t) { return xhat.data() + offset[static_cast<std::size_t>(l)] + t * k(l) * nvec; };
  auto yh = [&](int l, std::int64_t t) { return yhat.data() + offset[static_cast<std::size_t>(l)] + t * k(l) * nvec; };

  // Upsweep: x̂_t = U_tᴴ·x_t at the leaves, x̂_t = Σ_c E_cᴴ·x̂_c above.
  pool.parallel_for(static_cast<std::size_t>(tree.nodes(depth)), [&](std::size_t i, unsigned) {
    const auto t = static_cast<std::int64_t>(i);
    gemm('C', 'N', k(depth), nvec, tree.size(depth, t), T(1), a.leaf(t), m, xp.data() + tree.begin(depth, t), n, T(0),
         xh(depth, t), k(depth));
  });
  for (int l = depth; l >= 1; --l) {
    if (k(l - 1) == 0) continue;
    pool.parallel_for(static_cast<std::size_t>(tree.nodes(l - 1)), [&](std::size_t i, unsigned) {
      const auto t = static_cast<std::int64_t>(i);
      for (int c = 0; c < 2; ++c)
        gemm('C', 'N', k(l - 1), nvec, k(l), T(1), a.transfer_of(l, 2 * t + c), k(l), xh(l, 2 * t + c), k(l),
             c == 0 ? T(0) : T(1), xh(l - 1, t), k(l - 1));
    });
  }

  // Couplings: ŷ_t = Σ S_ts·x̂_s over the stored pairs (t, s) + Σ S_utᴴ·x̂_u over the stored (u, t).
  const H2Pairs& cp = a.couplings;
  for (int l = 0; l <= depth; ++l) {
    if (cp.count(l) == 0) continue;
    const std::int64_t base = H2Pairs::ptr_offset(l), kl = k(l);
    pool.parallel_for(static_cast<std::size_t>(tree.nodes(l)), [&](std::size_t i, unsigned) {
      const auto t = static_cast<std::int64_t>(i);
      for (int q = cp.row_ptr[base + t]; q < cp.row_ptr[base + t + 1]; ++q)
        gemm('N', 'N', kl, nvec, kl, T(1), a.coupling_of(l, q), kl, xh(l, cp.col[q]), kl, T(1), yh(l, t), kl);
      for (int c = cp.col_ptr[base + t]; c < cp.col_ptr[base + t + 1]; ++c) {
        const int q = cp.col_pairs[c];
        gemm('C', 'N', kl, nvec, kl, T(1), a.coupling_of(l, q), kl, xh(l, cp.row[q]), kl, T(1), yh(l, t), kl);
      }
    });
  }

  // Downsweep: ŷ_c += E_c·ŷ_parent.
  for (int l = 1; l <= depth; ++l) {
    if (k(l - 1) == 0) continue;
    pool.parallel_for(static_cast<std::size_t>(tree.nodes(l)), [&](std::size_t i, unsigned) {
      const auto c = static_cast<std::int64_t>(i);
      gemm('N', 'N', k(l), nvec, k(l - 1), T(1), a.transfer_of(l, c), k(l), yh(l - 1, c / 2), k(l - 1), T(1), yh(l, c),
           k(l));
    });
  }

  // Leaves: y_t = U_t·ŷ_t + Σ D_ts·x_s + Σ D_utᴴ·x_u (u ≠ t).
  const H2Pairs& dp = a.dense_pairs;
  const std::int64_t base = H2Pairs::ptr_offset(depth);
  pool.parallel_for(static_cast<std::size_t>(tree.nodes(depth)), [&](std::size_t i, unsigned) {
    const auto t = static_cast<std::int64_t>(i);
    const std::int64_t bt = tree.begin(depth, t), nt = tree.size(depth, t);
    gemm('N', 'N', nt, nvec, k(depth), T(1), a.leaf(t), m, yh(depth, t), k(depth), T(0), yp.data() + bt, n);
    for (int q = dp.row_ptr[base + t]; q < dp.row_ptr[base + t + 1]; ++q) {
      const int s = dp.col[q];
      gemm('N', 'N', nt, nvec, tree.size(depth, s), T(1), a.dense_of(q), m, xp.data() + tree.begin(depth, s), n, T(1),
           yp.data() + bt, n);
    }
    for (int c = dp.col_ptr[base + t]; c < dp.col_ptr[base + t + 1]; ++c) {
      const int q = dp.col_pairs[c], u = dp.row[q];
      if (u == t) continue;
      gemm('C', 'N', nt, nvec, tree.size(depth, u), T(1), a.dense_of(q), m, xp.data() + tree.begin(depth, u), n, T(1),
           yp.data() + bt, n);
    }
  });

  // Back to the caller's order: Y = α·A·X + β·Y, Y unread when β = 0.
  for (std::int64_t j = 0; j < nvec; ++j)
    for (std::int64_t i = 0; i < n; ++i) {
      T& out = y.at(0, tree.permutation[static_cast<std::size_t>(i)], j);
      out = beta == T(0) ? alpha * yp[i + j * n] : alpha * yp[i + j * n] + beta * out;
    }
}

template <class T>
void expand(Exec& exec, const H2<T>& a, Batch<T> out) {
  const H2Tree& tree = a.tree;
  const int depth = tree.depth;
  const std::int64_t n = tree.n, m = tree.leaf_capacity;
  ThreadPool& pool = exec.pool();
  auto k = [&](int l) { return static_cast<std::int64_t>(a.rank[static_cast<std::size_t>(l)]); };

  // Explicit bases per level as n × k_l matrices in tree order: node t's rows are its basis.
  std::vector<std::vector<T>> basis(static_cast<std::size_t>(depth) + 1);
  for (int l = depth; l >= 0; --l) {
    basis[static_cast<std::size_t>(l)].assign(static_cast<std::size_t>(n * k(l)), T(0));
    if (k(l) == 0) continue;
    T* b = basis[static_cast<std::size_t>(l)].data();
    for (std::int64_t t = 0; t < tree.nodes(l); ++t) {
      const std::int64_t begin = tree.begin(l, t), size = tree.size(l, t);
      if (l == depth) {
        for (std::int64_t c = 0; c < k(l); ++c)
          for (std::int64_t i = 0; i < size; ++i) b[begin + i + c * n] = a.leaf(t)[i + c * m];
        continue;
      }
      const T* child = basis[static_cast<std::size_t>(l) + 1].data();
      for (int c = 0; c < 2; ++c) {
        const std::int64_t node = 2 * t + c;
        gemm('N', 'N', std::int64_t{tree.size(l + 1, node)}, k(l), k(l + 1), T(1), child + tree.begin(l + 1, node), n,
             a.transfer_of(l + 1, node), k(l + 1), T(0), b + tree.begin(l + 1, node), n);
      }
    }
  }

  // One task per block: the block in tree order, scattered to the caller's order with its mirror.
  auto scatter = [&](const T* block, std::int64_t ld, std::int64_t bt, std::int64_t nt, std::int64_t bs, std::int64_t ns,
                     bool mirror) {
    for (std::int64_t j = 0; j < ns; ++j)
      for (std::int64_t i = 0; i < nt; ++i) {
        const int r = tree.permutation[static_cast<std::size_t>(bt + i)], c = tree.permutation[static_cast<std::size_t>(bs + j)];
        out.at(0, r, c) = block[i + j * ld];
        if (mirror) out.at(0, c, r) = conj_of(block[i + j * ld]);
      }
  };
  for (int l = 0; l <= depth; ++l) {
    const int first = a.couplings.level_ptr[static_cast<std::size_t>(l)];
    const T* b = basis[static_cast<std::size_t>(l)].data();
    pool.parallel_for(static_cast<std::size_t>(a.couplings.count(l)), [&](std::size_t index, unsigned) {
      const int q = first + static_cast<int>(index), t = a.couplings.row[static_cast<std::size_t>(q)],
                s = a.couplings.col[static_cast<std::size_t>(q)];
      const std::int64_t bt = tree.begin(l, t), nt = tree.size(l, t), bs = tree.begin(l, s), ns = tree.size(l, s);
      std::vector<T> us(static_cast<std::size_t>(nt * k(l))), block(static_cast<std::size_t>(nt * ns));
      gemm('N', 'N', nt, k(l), k(l), T(1), b + bt, n, a.coupling_of(l, q), k(l), T(0), us.data(), nt);
      gemm('N', 'C', nt, ns, k(l), T(1), us.data(), nt, b + bs, n, T(0), block.data(), nt);
      scatter(block.data(), nt, bt, nt, bs, ns, true);
    });
  }
  pool.parallel_for(static_cast<std::size_t>(a.dense_pairs.count()), [&](std::size_t q, unsigned) {
    const int t = a.dense_pairs.row[q], s = a.dense_pairs.col[q];
    scatter(a.dense_of(static_cast<int>(q)), m, tree.begin(depth, t), tree.size(depth, t), tree.begin(depth, s),
            tree.size(depth, s), t != s);
  });
}

#define COVFLOW_H2_CPU(T)                                                           \
  template void gemv<T>(Exec&, T, const H2<T>&, Batch<const T>, T, Batch<T>);     \
  template void expand<T>(Exec&, const H2<T>&, Batch<T>);
COVFLOW_H2_CPU(f32)
COVFLOW_H2_CPU(f64)
COVFLOW_H2_CPU(cf32)
COVFLOW_H2_CPU(cf64)
#undef COVFLOW_H2_CPU

}  // namespace covflow::linalg::detail::h2

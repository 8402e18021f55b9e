// H² orthogonalisation and coupling-weighted compression on the CPU (Boukaram, Turkiyyah & Keyes,
// "Hierarchical matrix operations on GPUs", ACM TOMS 2019, orthogonalisation and
// compression — H2Opus's horthog and hcompress). Every phase is one pass over a level's nodes (a QR, an SVD or a few small products
// per node, which a batched kernel does in one launch), spread over the Exec's thread pool.
//
// Effective ranks. A node with fewer points than its level's rank (or a parent of such nodes) has
// a basis of fewer independent columns than k_l. The QRs here run on the rows that are not zero
// by construction (a leaf's own points; the children's effective ranks), so that the useful
// columns come out exactly orthonormal and the rest exactly zero, rather than a Householder Q
// spending columns on structurally zero rows.
#include <algorithm>
#include <cmath>

#include "h2_impl.hpp"

namespace covflow::linalg::detail::h2 {
namespace {

using std::int64_t;

template <class T>
struct Level {
  std::vector<T> r;         // per node a k_new × k_old factor (orthogonalise: R; compress: T)
  std::vector<int> useful;  // per node the number of useful columns of its new basis
};

// S ← A_t·S·A_sᴴ for every coupling, A the per-node factors of `factors` (k_new × k_old each).
template <class T>
std::vector<T> project_couplings(ThreadPool& pool, const H2<T>& a, const std::vector<Level<T>>& factors,
                                 const std::vector<int>& new_rank, std::vector<int64_t>& new_offset) {
  const int depth = a.tree.depth;
  new_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
  for (int l = 0; l <= depth; ++l) {
    const int64_t k = new_rank[static_cast<std::size_t>(l)];
    new_offset[static_cast<std::size_t>(l) + 1] = new_offset[static_cast<std::size_t>(l)] + a.couplings.count(l) * k * k;
  }
  std::vector<T> out(static_cast<std::size_t>(new_offset.back()), T(0));
  for (int l = 0; l <= depth; ++l) {
    const int64_t ko = a.rank[static_cast<std::size_t>(l)], kn = new_rank[static_cast<std::size_t>(l)];
    const int first = a.couplings.level_ptr[static_cast<std::size_t>(l)];
    const std::vector<T>& f = factors[static_cast<std::size_t>(l)].r;
    pool.parallel_for(static_cast<std::size_t>(a.couplings.count(l)), [&](std::size_t index, unsigned) {
      const int q = first + static_cast<int>(index);
      const int64_t t = a.couplings.row[static_cast<std::size_t>(q)], s = a.couplings.col[static_cast<std::size_t>(q)];
      std::vector<T> tmp(static_cast<std::size_t>(kn * ko));
      gemm('N', 'N', kn, ko, ko, T(1), f.data() + t * kn * ko, kn, a.coupling_of(l, q), ko, T(0), tmp.data(), kn);
      gemm('N', 'C', kn, kn, ko, T(1), tmp.data(), kn, f.data() + s * kn * ko, kn, T(0),
           out.data() + new_offset[static_cast<std::size_t>(l)] + static_cast<int64_t>(index) * kn * kn, kn);
    });
  }
  return out;
}

template <class T>
std::vector<int64_t> transfer_offsets(const H2Tree& tree, const std::vector<int>& rank) {
  std::vector<int64_t> offset(static_cast<std::size_t>(tree.depth) + 2, 0);
  for (int l = 0; l <= tree.depth; ++l)
    offset[static_cast<std::size_t>(l) + 1] =
        offset[static_cast<std::size_t>(l)] +
        (l == 0 ? 0 : tree.nodes(l) * rank[static_cast<std::size_t>(l)] * rank[static_cast<std::size_t>(l) - 1]);
  return offset;
}

}  // namespace

template <class T>
void orthogonalize(Exec& exec, H2<T>& a) {
  const H2Tree& tree = a.tree;
  const int depth = tree.depth;
  const int64_t m = tree.leaf_capacity;
  ThreadPool& pool = exec.pool();
  auto k = [&](int l) { return static_cast<int64_t>(a.rank[static_cast<std::size_t>(l)]); };

  std::vector<int> kn(a.rank.size());
  kn[static_cast<std::size_t>(depth)] = static_cast<int>(std::min(m, k(depth)));
  for (int l = depth; l >= 1; --l)
    kn[static_cast<std::size_t>(l) - 1] = static_cast<int>(std::min<int64_t>(2 * kn[static_cast<std::size_t>(l)], k(l - 1)));
  auto knew = [&](int l) { return static_cast<int64_t>(kn[static_cast<std::size_t>(l)]); };

  std::vector<Level<T>> levels(static_cast<std::size_t>(depth) + 1);
  for (int l = 0; l <= depth; ++l) {
    levels[static_cast<std::size_t>(l)].r.assign(static_cast<std::size_t>(tree.nodes(l) * knew(l) * k(l)), T(0));
    levels[static_cast<std::size_t>(l)].useful.assign(static_cast<std::size_t>(tree.nodes(l)), 0);
  }

  // Leaves: U_t = Q_t·R_t on the leaf's own rows.
  std::vector<T> leaf_basis(static_cast<std::size_t>(tree.nodes(depth) * m * knew(depth)), T(0));
  {
    Level<T>& level = levels[static_cast<std::size_t>(depth)];
    pool.parallel_for(static_cast<std::size_t>(tree.nodes(depth)), [&](std::size_t i, unsigned) {
      const auto t = static_cast<int64_t>(i);
      const int64_t size = tree.size(depth, t), r = std::min(size, k(depth));
      if (r == 0) return;
      std::vector<T> work(static_cast<std::size_t>(size * k(depth)));
      for (int64_t c = 0; c < k(depth); ++c)
        for (int64_t row = 0; row < size; ++row) work[static_cast<std::size_t>(row + c * size)] = a.leaf(t)[row + c * m];
      qr(size, k(depth), work.data(), size, level.r.data() + t * knew(depth) * k(depth), knew(depth));
      T* u = leaf_basis.data() + t * m * knew(depth);
      for (int64_t c = 0; c < r; ++c)
        for (int64_t row = 0; row < size; ++row) u[row + c * m] = work[static_cast<std::size_t>(row + c * size)];
      level.useful[i] = static_cast<int>(r);
    });
  }

  // Upward: the parent's stacked [R_c1·E_c1; R_c2·E_c2] on the children's useful rows.
  const std::vector<int64_t> new_transfer_offset = transfer_offsets<T>(tree, kn);
  std::vector<T> transfer(static_cast<std::size_t>(new_transfer_offset.back()), T(0));
  for (int l = depth; l >= 1; --l) {
    if (k(l - 1) == 0) continue;
    const Level<T>& children = levels[static_cast<std::size_t>(l)];
    Level<T>& parents = levels[static_cast<std::size_t>(l) - 1];
    pool.parallel_for(static_cast<std::size_t>(tree.nodes(l - 1)), [&](std::size_t i, unsigned) {
      const auto t = static_cast<int64_t>(i);
      const int64_t r1 = children.useful[static_cast<std::size_t>(2 * t)], r2 = children.useful[static_cast<std::size_t>(2 * t + 1)];
      const int64_t rows = r1 + r2, r = std::min(rows, k(l - 1));
      if (r == 0) return;
      std::vector<T> stacked(static_cast<std::size_t>(rows * k(l - 1)));
      for (int c = 0; c < 2; ++c) {
        const int64_t node = 2 * t + c;
        gemm('N', 'N', c == 0 ? r1 : r2, k(l - 1), k(l), T(1), children.r.data() + node * knew(l) * k(l), knew(l),
             a.transfer_of(l, node), k(l), T(0), stacked.data() + (c == 0 ? 0 : r1), rows);
      }
      qr(rows, k(l - 1), stacked.data(), rows, parents.r.data() + t * knew(l - 1) * k(l - 1), knew(l - 1));
      for (int c = 0; c < 2; ++c) {
        const int64_t node = 2 * t + c, first = c == 0 ? 0 : r1, count = c == 0 ? r1 : r2;
        T* e = transfer.data() + new_transfer_offset[static_cast<std::size_t>(l)] + node * knew(l) * knew(l - 1);
        for (int64_t col = 0; col < r; ++col)
          for (int64_t row = 0; row < count; ++row) e[row + col * knew(l)] = stacked[static_cast<std::size_t>(first + row + col * rows)];
      }
      parents.useful[i] = static_cast<int>(r);
    });
  }

  std::vector<int64_t> coupling_offset;
  std::vector<T> coupling = project_couplings(pool, a, levels, kn, coupling_offset);
  a.leaf_basis = std::move(leaf_basis);
  a.transfer = std::move(transfer);
  a.transfer_offset = new_transfer_offset;
  a.coupling = std::move(coupling);
  a.coupling_offset = std::move(coupling_offset);
  a.rank = kn;
  a.orthogonal = true;
}

template <class T>
H2CompressReport compress(Exec& exec, H2<T>& a, double tol) {
  H2CompressReport report;
  report.tolerance = tol;
  report.ranks_before = a.rank;
  report.bytes_before = h2_bytes(a);
  if (!a.orthogonal) orthogonalize(exec, a);

  const H2Tree& tree = a.tree;
  const int depth = tree.depth;
  const int64_t m = tree.leaf_capacity;
  ThreadPool& pool = exec.pool();
  auto k = [&](int l) { return static_cast<int64_t>(a.rank[static_cast<std::size_t>(l)]); };

  // ‖A_H‖_F² exactly: with orthonormal bases ‖U_t·S·U_sᴴ‖_F = ‖S‖_F; the other triangle counts twice.
  double norm2_total = 0;
  for (int q = 0; q < a.dense_pairs.count(); ++q)
    norm2_total += (a.dense_pairs.row[static_cast<std::size_t>(q)] == a.dense_pairs.col[static_cast<std::size_t>(q)] ? 1 : 2) *
                   norm2(a.dense_of(q), m, m, m);
  for (int l = 0; l <= depth; ++l)
    for (int q = a.couplings.level_ptr[static_cast<std::size_t>(l)]; q < a.couplings.level_ptr[static_cast<std::size_t>(l) + 1]; ++q)
      norm2_total += 2 * norm2(a.coupling_of(l, q), k(l), k(l), k(l));
  report.norm = std::sqrt(norm2_total);

  int64_t truncated_nodes = 0;
  for (int l = 0; l <= depth; ++l)
    if (k(l) > 0)
      for (int64_t t = 0; t < tree.nodes(l); ++t) truncated_nodes += tree.size(l, t) > 0 ? 1 : 0;
  const double tau2 = truncated_nodes > 0 ? tol * tol * norm2_total / (2.0 * static_cast<double>(truncated_nodes)) : 0.0;
  report.node_threshold = std::sqrt(tau2);

  // Downsweep: the weight Z_t (z_t × k_l, ld k_l), the R factor of [Z_parent·E_tᴴ; S_tsᴴ …; S_ut …].
  std::vector<std::vector<T>> weight(static_cast<std::size_t>(depth) + 1);
  std::vector<std::vector<int>> weight_rows(static_cast<std::size_t>(depth) + 1);
  for (int l = 0; l <= depth; ++l) {
    const int64_t kl = k(l);
    weight[static_cast<std::size_t>(l)].assign(static_cast<std::size_t>(tree.nodes(l) * kl * kl), T(0));
    weight_rows[static_cast<std::size_t>(l)].assign(static_cast<std::size_t>(tree.nodes(l)), 0);
    if (kl == 0) continue;
    const int64_t base = H2Pairs::ptr_offset(l);
    const H2Pairs& cp = a.couplings;
    pool.parallel_for(static_cast<std::size_t>(tree.nodes(l)), [&](std::size_t i, unsigned) {
      const auto t = static_cast<int64_t>(i);
      const int64_t from_parent = l > 0 && k(l - 1) > 0 ? weight_rows[static_cast<std::size_t>(l) - 1][static_cast<std::size_t>(t / 2)] : 0;
      const int64_t pairs = (cp.row_ptr[base + t + 1] - cp.row_ptr[base + t]) + (cp.col_ptr[base + t + 1] - cp.col_ptr[base + t]);
      const int64_t rows = from_parent + pairs * kl;
      if (rows == 0) return;
      std::vector<T> stacked(static_cast<std::size_t>(rows * kl));
      if (from_parent > 0)
        gemm('N', 'C', from_parent, kl, k(l - 1), T(1), weight[static_cast<std::size_t>(l) - 1].data() + (t / 2) * k(l - 1) * k(l - 1),
             k(l - 1), a.transfer_of(l, t), kl, T(0), stacked.data(), rows);
      int64_t at = from_parent;
      for (int q = cp.row_ptr[base + t]; q < cp.row_ptr[base + t + 1]; ++q, at += kl) {
        const T* s = a.coupling_of(l, q);
        for (int64_t c = 0; c < kl; ++c)
          for (int64_t r = 0; r < kl; ++r) stacked[static_cast<std::size_t>(at + r + c * rows)] = conj_of(s[c + r * kl]);
      }
      for (int c2 = cp.col_ptr[base + t]; c2 < cp.col_ptr[base + t + 1]; ++c2, at += kl) {
        const T* s = a.coupling_of(l, cp.col_pairs[static_cast<std::size_t>(c2)]);
        for (int64_t c = 0; c < kl; ++c)
          for (int64_t r = 0; r < kl; ++r) stacked[static_cast<std::size_t>(at + r + c * rows)] = s[r + c * kl];
      }
      qr(rows, kl, stacked.data(), rows, weight[static_cast<std::size_t>(l)].data() + t * kl * kl, kl);
      weight_rows[static_cast<std::size_t>(l)][i] = static_cast<int>(std::min(rows, kl));
    });
  }

  // Upsweep: per node the left singular vectors of its weighted basis (leaves Z_tᴴ, inner nodes
  // TE_t·Z_tᴴ with TE_t = [T_c1·E_c1; T_c2·E_c2]); the level's rank is the most any node needs.
  std::vector<int> kn(a.rank.size(), 0);
  std::vector<Level<T>> projection(static_cast<std::size_t>(depth) + 1);  // T_t, kn_l × k_l
  std::vector<double> dropped(static_cast<std::size_t>(depth) + 1, 0.0);
  std::vector<T> leaf_basis;
  std::vector<int64_t> new_transfer_offset;
  std::vector<T> transfer;
  // Per level: node t's left singular vectors (rows × cols, ld rows) and σ, then the chosen rank.
  struct Svd {
    std::vector<T> q;
    std::vector<real_t<T>> sigma;
    int64_t rows = 0;
  };
  std::vector<std::vector<Svd>> svds(static_cast<std::size_t>(depth) + 1);
  std::vector<std::vector<T>> stacked_te(static_cast<std::size_t>(depth) + 1);  // TE_t per node, ld 2·kn_{l+1}
  for (int l = depth; l >= 0; --l) {
    const int64_t kl = k(l);
    auto& level_svds = svds[static_cast<std::size_t>(l)];
    level_svds.assign(static_cast<std::size_t>(tree.nodes(l)), Svd{});
    const int64_t te_rows = l == depth ? 0 : 2 * static_cast<int64_t>(kn[static_cast<std::size_t>(l) + 1]);
    if (kl > 0) {
      if (l < depth) stacked_te[static_cast<std::size_t>(l)].assign(static_cast<std::size_t>(tree.nodes(l) * te_rows * kl), T(0));
      pool.parallel_for(static_cast<std::size_t>(tree.nodes(l)), [&](std::size_t i, unsigned) {
        const auto t = static_cast<int64_t>(i);
        const int64_t z = weight_rows[static_cast<std::size_t>(l)][i];
        const T* zt = weight[static_cast<std::size_t>(l)].data() + t * kl * kl;
        Svd& out = level_svds[i];
        std::vector<T> w;
        if (l == depth) {
          out.rows = kl;
          w.assign(static_cast<std::size_t>(kl * z), T(0));
          for (int64_t c = 0; c < z; ++c)
            for (int64_t r = 0; r < kl; ++r) w[static_cast<std::size_t>(r + c * kl)] = conj_of(zt[c + r * kl]);
        } else {
          const int64_t kc = kn[static_cast<std::size_t>(l) + 1];
          out.rows = te_rows;
          T* te = stacked_te[static_cast<std::size_t>(l)].data() + t * te_rows * kl;
          for (int c = 0; c < 2; ++c) {
            const int64_t node = 2 * t + c;
            gemm('N', 'N', kc, kl, k(l + 1), T(1), projection[static_cast<std::size_t>(l) + 1].r.data() + node * kc * k(l + 1), kc,
                 a.transfer_of(l + 1, node), k(l + 1), T(0), te + c * kc, te_rows);
          }
          w.assign(static_cast<std::size_t>(te_rows * z), T(0));
          gemm('N', 'C', te_rows, z, kl, T(1), te, te_rows, zt, kl, T(0), w.data(), te_rows);
        }
        out.q.assign(static_cast<std::size_t>(out.rows * std::min(out.rows, z)), T(0));
        svd_left(out.rows, z, w.data(), std::max<int64_t>(out.rows, 1), out.q.data(), out.sigma);
      });
    }
    // The rank each node needs: the fewest leading σ whose tail Σσ² ≤ τ².
    int level_rank = 0;
    for (const Svd& s : level_svds) {
      double tail = 0;
      int r = static_cast<int>(s.sigma.size());
      while (r > 0 && tail + static_cast<double>(s.sigma[static_cast<std::size_t>(r) - 1]) * s.sigma[static_cast<std::size_t>(r) - 1] <= tau2) {
        tail += static_cast<double>(s.sigma[static_cast<std::size_t>(r) - 1]) * s.sigma[static_cast<std::size_t>(r) - 1];
        --r;
      }
      level_rank = std::max(level_rank, r);
    }
    kn[static_cast<std::size_t>(l)] = level_rank;
    const int64_t kr = level_rank;
    for (const Svd& s : level_svds)
      for (std::size_t j = static_cast<std::size_t>(kr); j < s.sigma.size(); ++j)
        dropped[static_cast<std::size_t>(l)] += static_cast<double>(s.sigma[j]) * s.sigma[j];

    // The projections T_t = Q̃ᴴ·(what Q̃ was computed from) and the new leaf bases.
    Level<T>& proj = projection[static_cast<std::size_t>(l)];
    proj.r.assign(static_cast<std::size_t>(tree.nodes(l) * kr * kl), T(0));
    if (l == depth) leaf_basis.assign(static_cast<std::size_t>(tree.nodes(depth) * m * kr), T(0));
    pool.parallel_for(static_cast<std::size_t>(kr > 0 ? tree.nodes(l) : 0), [&](std::size_t i, unsigned) {
      const auto t = static_cast<int64_t>(i);
      const Svd& s = level_svds[i];
      const int64_t cols = std::min<int64_t>(static_cast<int64_t>(s.sigma.size()), kr);
      if (cols == 0) return;
      T* tt = proj.r.data() + t * kr * kl;
      if (l == depth) {
        for (int64_t c = 0; c < kl; ++c)
          for (int64_t r = 0; r < cols; ++r) tt[r + c * kr] = conj_of(s.q[static_cast<std::size_t>(c + r * s.rows)]);
        gemm('N', 'N', std::int64_t{tree.size(depth, t)}, cols, kl, T(1), a.leaf(t), m, s.q.data(), s.rows, T(0),
             leaf_basis.data() + t * m * kr, m);
      } else {
        gemm('C', 'N', cols, kl, s.rows, T(1), s.q.data(), s.rows, stacked_te[static_cast<std::size_t>(l)].data() + t * s.rows * kl,
             s.rows, T(0), tt, kr);
      }
    });
  }
  // Transfers need every level's new rank: lay them out now and copy the Q̃ blocks.
  new_transfer_offset = transfer_offsets<T>(tree, kn);
  transfer.assign(static_cast<std::size_t>(new_transfer_offset.back()), T(0));
  for (int l = 1; l <= depth; ++l) {
    const int64_t kc = kn[static_cast<std::size_t>(l)], kp = kn[static_cast<std::size_t>(l) - 1];
    if (kc == 0 || kp == 0) continue;
    const auto& parent_svds = svds[static_cast<std::size_t>(l) - 1];
    pool.parallel_for(static_cast<std::size_t>(tree.nodes(l - 1)), [&](std::size_t i, unsigned) {
      const Svd& s = parent_svds[i];
      const int64_t cols = std::min<int64_t>(static_cast<int64_t>(s.sigma.size()), kp);
      for (int c = 0; c < 2; ++c) {
        T* e = transfer.data() + new_transfer_offset[static_cast<std::size_t>(l)] + (2 * static_cast<int64_t>(i) + c) * kc * kp;
        for (int64_t col = 0; col < cols; ++col)
          for (int64_t row = 0; row < kc; ++row) e[row + col * kc] = s.q[static_cast<std::size_t>(c * kc + row + col * s.rows)];
      }
    });
  }

  std::vector<int64_t> coupling_offset;
  std::vector<T> coupling = project_couplings(pool, a, projection, kn, coupling_offset);
  a.leaf_basis = std::move(leaf_basis);
  a.transfer = std::move(transfer);
  a.transfer_offset = std::move(new_transfer_offset);
  a.coupling = std::move(coupling);
  a.coupling_offset = std::move(coupling_offset);
  a.rank = kn;
  a.orthogonal = true;

  double dropped_total = 0;
  for (double d : dropped) dropped_total += d;
  report.error_bound = norm2_total > 0 ? std::sqrt(2 * dropped_total / norm2_total) : 0.0;
  report.ranks_after = a.rank;
  report.bytes_after = h2_bytes(a);
  return report;
}

#define COVFLOW_H2_COMPRESS(T)                              \
  template void orthogonalize<T>(Exec&, H2<T>&);           \
  template H2CompressReport compress<T>(Exec&, H2<T>&, double);
COVFLOW_H2_COMPRESS(f32)
COVFLOW_H2_COMPRESS(f64)
COVFLOW_H2_COMPRESS(cf32)
COVFLOW_H2_COMPRESS(cf64)
#undef COVFLOW_H2_COMPRESS

}  // namespace covflow::linalg::detail::h2

// H² approximation of a dense Hermitian matrix on the CPU (h2_from_dense in h2.hpp): per node the
// truncated left singular vectors of its far-field columns, bottom-up with nested bases (Börm,
// "Efficient numerical methods for non-local operators", EMS 2010, H²-matrix approximation of
// dense matrices). Every phase is one pass over a level's nodes across the Exec's thread pool;
// LAPACK's ?gesvd per node (the CUDA path does the same with a batched tall QR and SVD).
#include <algorithm>
#include <cmath>

#include "h2_impl.hpp"

namespace covflow::linalg::detail::h2 {
namespace {

using std::int64_t;

// One node's result of the upsweep.
template <class T>
struct Node {
  std::vector<T> basis;  // expanded basis U_t, |t| × rank, ld |t|
  std::vector<T> w;      // inner nodes: the stacked transfers [E_c1; E_c2], rows × rank, ld rows
  int64_t rows = 0;      // rows of w (r_c1 + r_c2)
  int rank = 0;
  double dropped = 0;    // δ_t²
};

}  // namespace

std::vector<std::vector<std::vector<int>>> far_columns(const H2Tree& tree, const H2Pairs& cp, int64_t& nodes_with_far) {
  const int depth = tree.depth;
  std::vector<std::vector<std::vector<int>>> far_cols(static_cast<std::size_t>(depth) + 1);
  nodes_with_far = 0;
  for (int l = 0; l <= depth; ++l) {
    auto& level = far_cols[static_cast<std::size_t>(l)];
    level.assign(static_cast<std::size_t>(tree.nodes(l)), {});
    const int64_t base = H2Pairs::ptr_offset(l);
    for (int64_t t = 0; t < tree.nodes(l); ++t) {
      std::vector<int>& cols = level[static_cast<std::size_t>(t)];
      if (l > 0) cols = far_cols[static_cast<std::size_t>(l) - 1][static_cast<std::size_t>(t / 2)];
      auto add = [&](int s) {
        for (int j = tree.begin(l, s); j < tree.begin(l, s) + tree.size(l, s); ++j) cols.push_back(j);
      };
      for (int q = cp.row_ptr[base + t]; q < cp.row_ptr[base + t + 1]; ++q) add(cp.col[static_cast<std::size_t>(q)]);
      for (int c = cp.col_ptr[base + t]; c < cp.col_ptr[base + t + 1]; ++c)
        add(cp.row[static_cast<std::size_t>(cp.col_pairs[static_cast<std::size_t>(c)])]);
      if (!cols.empty() && tree.size(l, t) > 0) ++nodes_with_far;
    }
  }
  return far_cols;
}

template <class T>
H2<T> from_dense(Exec& exec, Batch<const T> input, std::span<const double> points, int dim, double tol,
                 const H2Options& options, H2CompressReport* report) {
  H2<T> h;
  h.tree = build_tree(points, dim, options.leaf_size);
  const H2Tree& tree = h.tree;
  build_block_tree(tree, options.eta, h.couplings, h.dense_pairs);
  const int depth = tree.depth;
  const int64_t n = tree.n, m = tree.leaf_capacity;
  ThreadPool& pool = exec.pool();

  // A in tree order, n × n, ld n.
  std::vector<T> a(static_cast<std::size_t>(n * n));
  pool.parallel_for(static_cast<std::size_t>(n), [&](std::size_t j, unsigned) {
    const int64_t pj = tree.permutation[j];
    for (int64_t i = 0; i < n; ++i)
      a[static_cast<std::size_t>(i + static_cast<int64_t>(j) * n)] = input.data[tree.permutation[static_cast<std::size_t>(i)] + pj * input.ld];
  });
  auto at = [&](int64_t i, int64_t j) -> const T* { return a.data() + i + j * n; };
  const double norm2_total = norm2(a.data(), n, n, n);

  int64_t nodes_with_far = 0;
  const std::vector<std::vector<std::vector<int>>> far_cols = far_columns(tree, h.couplings, nodes_with_far);
  const double tau2 = nodes_with_far > 0 ? tol * tol * norm2_total / (2.0 * static_cast<double>(nodes_with_far)) : 0.0;

  // Upsweep: level l's nodes from level l + 1's expanded bases; couplings of level l at once.
  h.rank.assign(static_cast<std::size_t>(depth) + 1, 0);
  std::vector<std::vector<Node<T>>> nodes(static_cast<std::size_t>(depth) + 1);
  std::vector<std::vector<T>> coupling(static_cast<std::size_t>(depth) + 1);
  double dropped_total = 0;
  for (int l = depth; l >= 0; --l) {
    auto& level = nodes[static_cast<std::size_t>(l)];
    level.assign(static_cast<std::size_t>(tree.nodes(l)), Node<T>{});
    pool.parallel_for(static_cast<std::size_t>(tree.nodes(l)), [&](std::size_t i, unsigned) {
      const auto t = static_cast<int64_t>(i);
      const std::vector<int>& cols = far_cols[static_cast<std::size_t>(l)][i];
      const int64_t size = tree.size(l, t), begin = tree.begin(l, t), f = static_cast<int64_t>(cols.size());
      if (size == 0 || f == 0) return;
      Node<T>& node = level[i];
      std::vector<T> mt;  // M_t, rows × f, ld rows
      if (l == depth) {
        node.rows = size;
        mt.resize(static_cast<std::size_t>(size * f));
        for (int64_t j = 0; j < f; ++j)
          std::copy_n(at(begin, cols[static_cast<std::size_t>(j)]), size, mt.data() + j * size);
      } else {
        const Node<T>& c1 = nodes[static_cast<std::size_t>(l) + 1][static_cast<std::size_t>(2 * t)];
        const Node<T>& c2 = nodes[static_cast<std::size_t>(l) + 1][static_cast<std::size_t>(2 * t + 1)];
        node.rows = c1.rank + c2.rank;
        mt.assign(static_cast<std::size_t>(node.rows * f), T(0));
        std::vector<T> block;
        int64_t row0 = 0;
        for (int c = 0; c < 2; ++c) {
          const Node<T>& child = c == 0 ? c1 : c2;
          const int64_t cb = tree.begin(l + 1, 2 * t + c), cs = tree.size(l + 1, 2 * t + c);
          if (child.rank > 0) {
            block.resize(static_cast<std::size_t>(cs * f));
            for (int64_t j = 0; j < f; ++j) std::copy_n(at(cb, cols[static_cast<std::size_t>(j)]), cs, block.data() + j * cs);
            gemm('C', 'N', child.rank, f, cs, T(1), child.basis.data(), cs, block.data(), cs, T(0), mt.data() + row0, node.rows);
          }
          row0 += child.rank;
        }
      }
      if (node.rows == 0) return;
      std::vector<T> q(static_cast<std::size_t>(node.rows * std::min(node.rows, f)));
      std::vector<real_t<T>> sigma;
      svd_left(node.rows, f, mt.data(), node.rows, q.data(), sigma);
      int r = static_cast<int>(sigma.size());
      double tail = 0;
      while (r > 0) {
        const double s2 = static_cast<double>(sigma[static_cast<std::size_t>(r) - 1]) * sigma[static_cast<std::size_t>(r) - 1];
        if (tail + s2 > tau2) break;
        tail += s2;
        --r;
      }
      node.rank = r;
      node.dropped = tail;
      q.resize(static_cast<std::size_t>(node.rows * r));
      if (l == depth) {
        node.basis = std::move(q);
      } else {
        node.w = std::move(q);
        node.basis.assign(static_cast<std::size_t>(size * r), T(0));
        int64_t row0 = 0, at_row = 0;
        for (int c = 0; c < 2; ++c) {
          const Node<T>& child = nodes[static_cast<std::size_t>(l) + 1][static_cast<std::size_t>(2 * t + c)];
          const int64_t cs = tree.size(l + 1, 2 * t + c);
          gemm('N', 'N', cs, r, child.rank, T(1), child.basis.data(), cs, node.w.data() + row0, node.rows, T(0),
               node.basis.data() + at_row, size);
          row0 += child.rank;
          at_row += cs;
        }
      }
    });
    int k = 0;
    for (const Node<T>& node : level) {
      k = std::max(k, node.rank);
      dropped_total += node.dropped;
    }
    h.rank[static_cast<std::size_t>(l)] = k;

    // Couplings of this level: S_ts = U_tᴴ·A(t, s)·U_s, zero-padded to k × k.
    const int first = h.couplings.level_ptr[static_cast<std::size_t>(l)];
    coupling[static_cast<std::size_t>(l)].assign(static_cast<std::size_t>(h.couplings.count(l)) * k * k, T(0));
    pool.parallel_for(static_cast<std::size_t>(h.couplings.count(l)), [&](std::size_t index, unsigned) {
      const int q = first + static_cast<int>(index);
      const int t = h.couplings.row[static_cast<std::size_t>(q)], s = h.couplings.col[static_cast<std::size_t>(q)];
      const Node<T>& nt = level[static_cast<std::size_t>(t)];
      const Node<T>& ns = level[static_cast<std::size_t>(s)];
      const int64_t st = tree.size(l, t), ss = tree.size(l, s);
      if (nt.rank == 0 || ns.rank == 0) return;
      std::vector<T> tmp(static_cast<std::size_t>(nt.rank * ss));
      gemm('C', 'N', nt.rank, ss, st, T(1), nt.basis.data(), st, at(tree.begin(l, t), tree.begin(l, s)), n, T(0), tmp.data(),
           nt.rank);
      gemm('N', 'N', nt.rank, ns.rank, ss, T(1), tmp.data(), nt.rank, ns.basis.data(), ss, T(0),
           coupling[static_cast<std::size_t>(l)].data() + static_cast<int64_t>(index) * k * k, k);
    });
    // The children's expanded bases are no longer needed (their transfers come from this level's w),
    if (l + 1 < depth)  // (the leaves' are copied into the leaf bases below)
      for (Node<T>& child : nodes[static_cast<std::size_t>(l) + 1]) std::vector<T>().swap(child.basis);
  }

  // Flat storage.
  auto k = [&](int l) { return static_cast<int64_t>(h.rank[static_cast<std::size_t>(l)]); };
  h.leaf_basis.assign(static_cast<std::size_t>(tree.nodes(depth) * m * k(depth)), T(0));
  for (int64_t t = 0; t < tree.nodes(depth); ++t) {
    const Node<T>& node = nodes[static_cast<std::size_t>(depth)][static_cast<std::size_t>(t)];
    const int64_t size = tree.size(depth, t);
    for (int64_t c = 0; c < node.rank; ++c)
      std::copy_n(node.basis.data() + c * size, size, h.leaf_basis.data() + t * m * k(depth) + c * m);
  }
  h.transfer_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
  h.coupling_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
  for (int l = 0; l <= depth; ++l) {
    h.transfer_offset[static_cast<std::size_t>(l) + 1] = h.transfer_offset[static_cast<std::size_t>(l)] + (l == 0 ? 0 : tree.nodes(l) * k(l) * k(l - 1));
    h.coupling_offset[static_cast<std::size_t>(l) + 1] = h.coupling_offset[static_cast<std::size_t>(l)] + h.couplings.count(l) * k(l) * k(l);
  }
  h.transfer.assign(static_cast<std::size_t>(h.transfer_offset.back()), T(0));
  for (int l = 1; l <= depth; ++l)
    for (int64_t p = 0; p < tree.nodes(l - 1); ++p) {
      const Node<T>& parent = nodes[static_cast<std::size_t>(l) - 1][static_cast<std::size_t>(p)];
      int64_t row0 = 0;
      for (int c = 0; c < 2; ++c) {
        const int64_t child = 2 * p + c;
        const int rc = nodes[static_cast<std::size_t>(l)][static_cast<std::size_t>(child)].rank;
        T* e = h.transfer.data() + h.transfer_offset[static_cast<std::size_t>(l)] + child * k(l) * k(l - 1);
        for (int64_t col = 0; col < parent.rank; ++col)
          for (int64_t row = 0; row < rc; ++row) e[row + col * k(l)] = parent.w[static_cast<std::size_t>(row0 + row + col * parent.rows)];
        row0 += rc;
      }
    }
  h.coupling.clear();
  for (auto& level : coupling) h.coupling.insert(h.coupling.end(), level.begin(), level.end());
  h.dense.assign(static_cast<std::size_t>(h.dense_pairs.count() * m * m), T(0));
  pool.parallel_for(static_cast<std::size_t>(h.dense_pairs.count()), [&](std::size_t pair, unsigned) {
    const int t = h.dense_pairs.row[pair], s = h.dense_pairs.col[pair];
    const int64_t bt = tree.begin(depth, t), nt = tree.size(depth, t), bs = tree.begin(depth, s), ns = tree.size(depth, s);
    T* d = h.dense.data() + static_cast<int64_t>(pair) * m * m;
    for (int64_t j = 0; j < ns; ++j) std::copy_n(at(bt, bs + j), nt, d + j * m);
  });
  h.orthogonal = true;

  if (report != nullptr) {
    *report = H2CompressReport{};
    report->tolerance = tol;
    report->norm = std::sqrt(norm2_total);
    report->node_threshold = std::sqrt(tau2);
    report->error_bound = norm2_total > 0 ? std::sqrt(2 * dropped_total / norm2_total) : 0.0;
    report->ranks_after = h.rank;
    report->bytes_after = h2_bytes(h);
  }
  return h;
}

#define COVFLOW_H2_DENSE(T)                                                                                   \
  template H2<T> from_dense<T>(Exec&, Batch<const T>, std::span<const double>, int, double, const H2Options&, \
                               H2CompressReport*);
COVFLOW_H2_DENSE(f32)
COVFLOW_H2_DENSE(f64)
COVFLOW_H2_DENSE(cf32)
COVFLOW_H2_DENSE(cf64)
#undef COVFLOW_H2_DENSE

}  // namespace covflow::linalg::detail::h2

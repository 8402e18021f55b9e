// H² cluster tree (a KD-tree with every leaf at one depth) and block tree (dual traversal with
// the bounding-box admissibility), as h2.hpp's Format describes. Both are built once, on the host;
// the arrays they leave are what the batched phases index.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "h2_impl.hpp"

namespace covflow::linalg::detail::h2 {
namespace {

// The bounding box of points perm[begin, end): lo[0..2], hi[0..2]; lo > hi when empty. Unused
// dimensions (≥ dim) are [0, 0].
void bounding_box(std::span<const double> points, int dim, const std::vector<int>& perm, int begin, int end,
                  double* box) {
  for (int k = 0; k < 3; ++k) {
    box[k] = k < dim ? std::numeric_limits<double>::infinity() : 0.0;
    box[3 + k] = k < dim ? -std::numeric_limits<double>::infinity() : 0.0;
  }
  for (int i = begin; i < end; ++i)
    for (int k = 0; k < dim; ++k) {
      const double x = points[static_cast<std::size_t>(perm[i]) * dim + k];
      box[k] = std::min(box[k], x);
      box[3 + k] = std::max(box[3 + k], x);
    }
}

double diameter(const double* box) {
  if (box[0] > box[3]) return 0;
  double sum = 0;
  for (int k = 0; k < 3; ++k) sum += (box[3 + k] - box[k]) * (box[3 + k] - box[k]);
  return std::sqrt(sum);
}

double distance(const double* a, const double* b) {
  double sum = 0;
  for (int k = 0; k < 3; ++k) {
    const double gap = std::max({0.0, b[k] - a[3 + k], a[k] - b[3 + k]});
    sum += gap * gap;
  }
  return std::sqrt(sum);
}

}  // namespace

H2Tree build_tree(std::span<const double> points, int dim, std::int64_t leaf_size) {
  const auto n = static_cast<std::int64_t>(points.size()) / dim;
  H2Tree tree;
  tree.n = n;
  tree.dim = dim;
  tree.leaf_capacity = leaf_size;
  tree.permutation.resize(static_cast<std::size_t>(n));
  std::iota(tree.permutation.begin(), tree.permutation.end(), 0);
  std::vector<int>& perm = tree.permutation;

  // The depth a count split would need; from a few levels past it every split is by count, which
  // halves, so that clustered points (a geometric sequence, say) cannot make the tree deep.
  const std::int64_t leaves_needed = (n + leaf_size - 1) / leaf_size;
  int balanced_depth = 0;
  while ((std::int64_t{1} << balanced_depth) < leaves_needed) ++balanced_depth;
  const int count_split_from = balanced_depth + 4;

  // Level by level: `ranges` holds the current level's [begin, end) per node.
  std::vector<std::pair<int, int>> ranges{{0, static_cast<int>(n)}}, all{{0, static_cast<int>(n)}};
  int level = 0;
  auto too_big = [&](const std::pair<int, int>& r) { return r.second - r.first > leaf_size; };
  while (std::any_of(ranges.begin(), ranges.end(), too_big)) {
    std::vector<std::pair<int, int>> next;
    next.reserve(ranges.size() * 2);
    for (const auto& [begin, end] : ranges) {
      double box[6];
      bounding_box(points, dim, perm, begin, end, box);
      int widest = 0;
      for (int k = 1; k < dim; ++k)
        if (box[3 + k] - box[k] > box[3 + widest] - box[widest]) widest = k;
      auto coord = [&](int index) { return points[static_cast<std::size_t>(index) * dim + widest]; };
      int mid = begin;
      if (end > begin) {
        bool by_count = level >= count_split_from;
        if (!by_count) {
          double mean = 0;
          for (int i = begin; i < end; ++i) mean += coord(perm[i]);
          mean /= end - begin;
          mid = static_cast<int>(std::partition(perm.begin() + begin, perm.begin() + end,
                                                [&](int index) { return coord(index) <= mean; }) -
                                 perm.begin());
          by_count = (mid == begin || mid == end) && end - begin > leaf_size;
        }
        if (by_count) {
          mid = begin + (end - begin) / 2;
          std::nth_element(perm.begin() + begin, perm.begin() + mid, perm.begin() + end,
                           [&](int a, int b) { return coord(a) < coord(b); });
        }
      }
      next.emplace_back(begin, mid);
      next.emplace_back(mid, end);
    }
    ranges = std::move(next);
    all.insert(all.end(), ranges.begin(), ranges.end());
    ++level;
  }
  tree.depth = level;
  tree.node_begin.resize(all.size());
  tree.node_end.resize(all.size());
  tree.box.resize(all.size() * 6);
  for (std::size_t i = 0; i < all.size(); ++i) {
    tree.node_begin[i] = all[i].first;
    tree.node_end[i] = all[i].second;
    bounding_box(points, dim, perm, all[i].first, all[i].second, &tree.box[i * 6]);
  }
  return tree;
}

void index_pairs(const H2Tree& tree, std::vector<std::vector<std::pair<int, int>>>& per_level, H2Pairs& out) {
  const int levels = tree.depth + 1;
  out = H2Pairs{};
  out.level_ptr.assign(static_cast<std::size_t>(levels) + 1, 0);
  out.row_ptr.assign(static_cast<std::size_t>(H2Pairs::ptr_offset(levels)), 0);
  out.col_ptr.assign(out.row_ptr.size(), 0);
  for (int l = 0; l < levels; ++l) {
    auto& pairs = per_level[static_cast<std::size_t>(l)];
    std::sort(pairs.begin(), pairs.end());
    const int first = static_cast<int>(out.row.size());
    out.level_ptr[static_cast<std::size_t>(l)] = first;
    for (const auto& [r, c] : pairs) {
      out.row.push_back(r);
      out.col.push_back(c);
    }
    const std::int64_t nodes = tree.nodes(l), base = H2Pairs::ptr_offset(l);
    // Block rows: pairs are sorted by row, so row_ptr is a running count.
    std::vector<int> rows_count(static_cast<std::size_t>(nodes), 0), cols_count(static_cast<std::size_t>(nodes), 0);
    for (const auto& [r, c] : pairs) {
      ++rows_count[static_cast<std::size_t>(r)];
      ++cols_count[static_cast<std::size_t>(c)];
    }
    out.row_ptr[base] = first;
    out.col_ptr[base] = first;
    for (std::int64_t t = 0; t < nodes; ++t) {
      out.row_ptr[base + t + 1] = out.row_ptr[base + t] + rows_count[static_cast<std::size_t>(t)];
      out.col_ptr[base + t + 1] = out.col_ptr[base + t] + cols_count[static_cast<std::size_t>(t)];
    }
    std::vector<int> by_col(pairs.size());
    std::iota(by_col.begin(), by_col.end(), first);
    std::stable_sort(by_col.begin(), by_col.end(), [&](int a, int b) {
      return std::pair(out.col[a], out.row[a]) < std::pair(out.col[b], out.row[b]);
    });
    out.col_pairs.insert(out.col_pairs.end(), by_col.begin(), by_col.end());
  }
  out.level_ptr[static_cast<std::size_t>(levels)] = static_cast<int>(out.row.size());
}

void build_block_tree(const H2Tree& tree, double eta, H2Pairs& couplings, H2Pairs& dense_pairs) {
  const int levels = tree.depth + 1;
  std::vector<std::vector<std::pair<int, int>>> admissible(static_cast<std::size_t>(levels)),
      near(static_cast<std::size_t>(levels));
  // An explicit stack of (level, t, s), t ≥ s, rather than recursion: the depth is small but the
  // traversal is the same either way.
  struct Visit {
    int level;
    int t, s;
  };
  std::vector<Visit> stack{{0, 0, 0}};
  while (!stack.empty()) {
    const Visit v = stack.back();
    stack.pop_back();
    if (tree.size(v.level, v.t) == 0 || tree.size(v.level, v.s) == 0) continue;
    const double* bt = &tree.box[static_cast<std::size_t>(H2Tree::heap(v.level, v.t)) * 6];
    const double* bs = &tree.box[static_cast<std::size_t>(H2Tree::heap(v.level, v.s)) * 6];
    const double dist = distance(bt, bs);
    if (v.t != v.s && dist > 0 && std::max(diameter(bt), diameter(bs)) <= eta * dist) {
      admissible[static_cast<std::size_t>(v.level)].emplace_back(v.t, v.s);
      continue;
    }
    if (v.level == tree.depth) {
      near[static_cast<std::size_t>(v.level)].emplace_back(v.t, v.s);
      continue;
    }
    const int l = v.level + 1;
    if (v.t == v.s) {
      stack.push_back({l, 2 * v.t, 2 * v.s});
      stack.push_back({l, 2 * v.t + 1, 2 * v.s});
      stack.push_back({l, 2 * v.t + 1, 2 * v.s + 1});
    } else {
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) stack.push_back({l, 2 * v.t + a, 2 * v.s + b});
    }
  }
  index_pairs(tree, admissible, couplings);
  index_pairs(tree, near, dense_pairs);
}

}  // namespace covflow::linalg::detail::h2

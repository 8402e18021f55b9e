// H² construction from geometry: the kernels of h2.hpp, Chebyshev interpolation on each cluster's
// bounding box for the leaf bases and transfers (Börm & Garcke 2007; Boukaram et al. 2018,
// §8.3), couplings as the kernel at the interpolation-node pairs and dense blocks as the kernel at
// the point pairs. Everything is computed in double (complex<double>) and rounded to T once.
// build_skeleton (the tree, block tree, ranks, offsets and Chebyshev node table) and clutter_rule
// are the host part that the device construction (h2_cuda_build.cu) shares; the formulas are
// h2_kernel.hpp's, shared with it too, so that both build the same matrix.
#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>

#include "h2_impl.hpp"
#include "h2_kernel.hpp"

namespace covflow::linalg::detail::h2 {
namespace {

// P_N′(z) by the three-term recurrence for P_j; the value P_N(z) in `value`.
double legendre_derivative(int count, double z, double& value) {
  double p0 = 1, p1 = 0;
  for (int j = 0; j < count; ++j) {
    const double p2 = p1;
    p1 = p0;
    p0 = ((2.0 * j + 1) * z * p1 - j * p2) / (j + 1);
  }
  value = p0;
  return count * (z * p0 - p1) / (z * z - 1);
}

// Gauss–Legendre nodes and weights on [−1, 1]: Newton's method on P_N from the guess
// cos(π(i + 3/4)/(N + 1/2)) for the i-th root, weight 2/((1 − z²)·P_N′(z)²).
void gauss_legendre(int count, std::vector<double>& nodes, std::vector<double>& weights) {
  nodes.assign(static_cast<std::size_t>(count), 0);
  weights.assign(static_cast<std::size_t>(count), 0);
  for (int i = 0; i < (count + 1) / 2; ++i) {
    double z = std::cos(std::numbers::pi * (i + 0.75) / (count + 0.5)), value = 0;
    for (int iteration = 0; iteration < 100; ++iteration) {
      const double derivative = legendre_derivative(count, z, value);
      const double step = value / derivative;
      z -= step;
      if (std::abs(step) < 1e-15) break;
    }
    const double derivative = legendre_derivative(count, z, value);  // at the converged node
    nodes[static_cast<std::size_t>(i)] = -z;
    nodes[static_cast<std::size_t>(count - 1 - i)] = z;
    weights[static_cast<std::size_t>(i)] = weights[static_cast<std::size_t>(count - 1 - i)] =
        2 / ((1 - z * z) * derivative * derivative);
  }
}

template <class T>
T to_element(const KernelValue& v) {
  if constexpr (is_complex_v<T>) return T(static_cast<real_t<T>>(v.re), static_cast<real_t<T>>(v.im));
  else return static_cast<T>(v.re);
}

}  // namespace

ClutterRule clutter_rule(const H2KernelSpec& spec, double span) {
  ClutterRule rule;
  if (spec.kind != H2Kernel::clutter) return rule;
  const double wavenumber = 2 * std::numbers::pi / spec.wavelength;
  const double omega = wavenumber * span * spec.sector_width / 2;
  const int count = static_cast<int>(std::ceil(omega / 2 + 4 * std::cbrt(omega))) + 12;
  std::vector<double> t, w;
  gauss_legendre(count, t, w);
  for (int q = 0; q < count; ++q) {
    const double theta = spec.sector_center + spec.sector_width / 2 * t[static_cast<std::size_t>(q)];
    rule.ux.push_back(wavenumber * std::sin(theta));
    rule.uy.push_back(wavenumber * std::cos(theta));
    rule.weight.push_back(spec.variance * w[static_cast<std::size_t>(q)] / 2);  // (1/Δ)·(Δ/2)·w
  }
  return rule;
}

template <class T>
H2<T> build_skeleton(std::span<const double> points, int dim, const H2Options& options, ChebGrid& grid) {
  H2<T> a;
  a.tree = build_tree(points, dim, options.leaf_size);
  const H2Tree& tree = a.tree;
  build_block_tree(tree, options.eta, a.couplings, a.dense_pairs);
  const int depth = tree.depth, p = options.cheb_order;
  const int k_full = static_cast<int>(std::pow(p, dim));

  // Ranks: p^d from the first level with couplings down; 0 above it (no block uses those bases).
  int first = depth + 1;
  for (int l = 0; l <= depth; ++l)
    if (a.couplings.count(l) > 0) {
      first = l;
      break;
    }
  a.rank.assign(static_cast<std::size_t>(depth) + 1, 0);
  for (int l = first; l <= depth; ++l) a.rank[static_cast<std::size_t>(l)] = k_full;

  a.transfer_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
  a.coupling_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
  for (int l = 0; l <= depth; ++l) {
    const auto i = static_cast<std::size_t>(l);
    const std::int64_t k = a.rank[i];
    a.transfer_offset[i + 1] = a.transfer_offset[i] + (l == 0 ? 0 : tree.nodes(l) * k * a.rank[i - 1]);
    a.coupling_offset[i + 1] = a.coupling_offset[i] + a.couplings.count(l) * k * k;
  }

  // The interpolation grid of every node (empty nodes included: their boxes are inverted, and
  // their nodes are never read).
  grid.dim = dim;
  grid.order = p;
  grid.span = [&] {
    const double* box = &tree.box[0];
    double sum = 0;
    for (int k = 0; k < dim; ++k) sum += (box[3 + k] - box[k]) * (box[3 + k] - box[k]);
    return std::sqrt(sum);
  }();
  const double min_side = grid.span > 0 ? 1e-6 * grid.span : 1.0;
  std::vector<double> cosines(static_cast<std::size_t>(p));
  for (int j = 0; j < p; ++j) cosines[static_cast<std::size_t>(j)] = std::cos((2 * j + 1) * std::numbers::pi / (2 * p));
  const auto heap_nodes = static_cast<std::size_t>((std::int64_t{2} << depth) - 1);
  grid.nodes.assign(heap_nodes * static_cast<std::size_t>(dim * p), 0);
  for (std::size_t h = 0; h < heap_nodes; ++h) {
    const double* box = &tree.box[h * 6];
    for (int e = 0; e < dim; ++e) {
      const double centre = (box[e] + box[3 + e]) / 2, half = std::max(box[3 + e] - box[e], min_side) / 2;
      double* out = grid.nodes.data() + (h * static_cast<std::size_t>(dim) + static_cast<std::size_t>(e)) * static_cast<std::size_t>(p);
      for (int j = 0; j < p; ++j) out[j] = centre + half * cosines[static_cast<std::size_t>(j)];
    }
  }
  return a;
}

template <class T>
H2<T> build(Exec& exec, std::span<const double> points, int dim, const H2KernelSpec& spec, const H2Options& options) {
  ChebGrid grid;
  H2<T> a = build_skeleton<T>(points, dim, options, grid);
  const H2Tree& tree = a.tree;
  const int depth = tree.depth, p = options.cheb_order;
  const std::int64_t m = tree.leaf_capacity;
  ThreadPool& pool = exec.pool();
  const ClutterRule rule = clutter_rule(spec, grid.span);
  const KernelEval kernel{spec.kind, dim, spec.variance, spec.length, spec.nu, static_cast<int>(rule.weight.size()),
                          rule.ux.data(), rule.uy.data(), rule.weight.data()};
  auto point = [&](int tree_position) {
    return &points[static_cast<std::size_t>(tree.permutation[static_cast<std::size_t>(tree_position)]) * dim];
  };

  // Leaf bases: row i of leaf t is the Lagrange polynomials at its i-th point (each the product of
  // the 1-D factors in dimension order, as lagrange() in h2_kernel.hpp forms it).
  const int k_leaf = a.rank[static_cast<std::size_t>(depth)];
  a.leaf_basis.assign(static_cast<std::size_t>(tree.nodes(depth) * m * k_leaf), T(0));
  if (k_leaf > 0)
    pool.parallel_for(static_cast<std::size_t>(tree.nodes(depth)), [&](std::size_t t, unsigned) {
      const double* nodes = grid.of(H2Tree::heap(depth, static_cast<std::int64_t>(t)));
      double one_d[3][32];
      T* u = a.leaf_basis.data() + static_cast<std::int64_t>(t) * m * k_leaf;
      const int begin = tree.begin(depth, static_cast<std::int64_t>(t)), size = tree.size(depth, static_cast<std::int64_t>(t));
      for (int i = 0; i < size; ++i) {
        const double* x = point(begin + i);
        for (int d = 0; d < dim; ++d)
          for (int j = 0; j < p; ++j) one_d[d][j] = lagrange_1d(nodes + d * p, p, j, x[d]);
        for (int c = 0; c < k_leaf; ++c) {
          double value = 1;
          for (int d = 0; d < dim; ++d) value *= one_d[d][cheb_digit(c, p, d)];
          u[i + c * m] = static_cast<T>(value);
        }
      }
    });

  // Transfers: E_c[a, b] = L^parent_b(ξ^c_a), child c of level l.
  a.transfer.assign(static_cast<std::size_t>(a.transfer_offset.back()), T(0));
  for (int l = 1; l <= depth; ++l) {
    const int kc = a.rank[static_cast<std::size_t>(l)], kp = a.rank[static_cast<std::size_t>(l) - 1];
    if (kc == 0 || kp == 0) continue;
    pool.parallel_for(static_cast<std::size_t>(tree.nodes(l)), [&](std::size_t c, unsigned) {
      const std::int64_t child = static_cast<std::int64_t>(c);
      if (tree.size(l, child) == 0) return;
      const double* child_nodes = grid.of(H2Tree::heap(l, child));
      const double* parent_nodes = grid.of(H2Tree::heap(l - 1, child / 2));
      T* e = a.transfer.data() + a.transfer_offset[static_cast<std::size_t>(l)] + child * kc * kp;
      double xi[3];
      for (int row = 0; row < kc; ++row) {
        cheb_point(child_nodes, dim, p, row, xi);
        for (int col = 0; col < kp; ++col) e[row + col * kc] = static_cast<T>(lagrange(parent_nodes, dim, p, col, xi));
      }
    });
  }

  // Couplings: S_ts[a, b] = K(ξ^t_a, ξ^s_b).
  a.coupling.assign(static_cast<std::size_t>(a.coupling_offset.back()), T(0));
  for (int l = 0; l <= depth; ++l) {
    const int k = a.rank[static_cast<std::size_t>(l)], first_pair = a.couplings.level_ptr[static_cast<std::size_t>(l)];
    pool.parallel_for(static_cast<std::size_t>(a.couplings.count(l)), [&](std::size_t index, unsigned) {
      const int pair = first_pair + static_cast<int>(index);
      const double* nodes_t = grid.of(H2Tree::heap(l, a.couplings.row[static_cast<std::size_t>(pair)]));
      const double* nodes_s = grid.of(H2Tree::heap(l, a.couplings.col[static_cast<std::size_t>(pair)]));
      T* s = const_cast<T*>(a.coupling_of(l, pair));
      double xt[3], xs[3];
      for (int col = 0; col < k; ++col) {
        cheb_point(nodes_s, dim, p, col, xs);
        for (int row = 0; row < k; ++row) {
          cheb_point(nodes_t, dim, p, row, xt);
          s[row + col * k] = to_element<T>(kernel(xt, xs));
        }
      }
    });
  }

  // Dense blocks: the kernel at the point pairs, the nugget on the diagonal blocks' diagonal.
  a.dense.assign(static_cast<std::size_t>(a.dense_pairs.count() * m * m), T(0));
  pool.parallel_for(static_cast<std::size_t>(a.dense_pairs.count()), [&](std::size_t pair, unsigned) {
    const int t = a.dense_pairs.row[pair], s = a.dense_pairs.col[pair];
    const int bt = tree.begin(depth, t), nt = tree.size(depth, t), bs = tree.begin(depth, s), ns = tree.size(depth, s);
    T* d = a.dense.data() + static_cast<std::int64_t>(pair) * m * m;
    for (int j = 0; j < ns; ++j)
      for (int i = 0; i < nt; ++i) {
        KernelValue value = kernel(point(bt + i), point(bs + j));
        if (t == s && i == j) value.re += options.nugget;
        d[i + j * m] = to_element<T>(value);
      }
  });
  return a;
}

#define COVFLOW_H2_BUILD(T) \
  template H2<T> build<T>(Exec&, std::span<const double>, int, const H2KernelSpec&, const H2Options&); \
  template H2<T> build_skeleton<T>(std::span<const double>, int, const H2Options&, ChebGrid&);
COVFLOW_H2_BUILD(f32)
COVFLOW_H2_BUILD(f64)
COVFLOW_H2_BUILD(cf32)
COVFLOW_H2_BUILD(cf64)
#undef COVFLOW_H2_BUILD

}  // namespace covflow::linalg::detail::h2

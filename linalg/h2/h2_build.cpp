// H² construction from geometry: the kernels of h2.hpp, Chebyshev interpolation on each cluster's
// bounding box for the leaf bases and transfers (Börm & Garcke 2007; Boukaram et al. 2018,
// §8.3), couplings as the kernel at the interpolation-node pairs and dense blocks as the kernel at
// the point pairs. Everything is computed in double (complex<double>) and rounded to T once.
#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>

#include "h2_impl.hpp"

namespace covflow::linalg::detail::h2 {
namespace {

using cd = std::complex<double>;

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

// The kernel K(x, y) of h2.hpp for one spec; `span` is the largest |x − y| it will see (the
// clutter quadrature's rule depends on it).
class Kernel {
 public:
  Kernel(const H2KernelSpec& spec, int dim, double span) : spec_(spec), dim_(dim) {
    if (spec.kind != H2Kernel::clutter) return;
    const double wavenumber = 2 * std::numbers::pi / spec.wavelength;
    const double omega = wavenumber * span * spec.sector_width / 2;
    const int count = static_cast<int>(std::ceil(omega / 2 + 4 * std::cbrt(omega))) + 12;
    std::vector<double> t, w;
    gauss_legendre(count, t, w);
    for (int q = 0; q < count; ++q) {
      const double theta = spec.sector_center + spec.sector_width / 2 * t[static_cast<std::size_t>(q)];
      ux_.push_back(wavenumber * std::sin(theta));
      uy_.push_back(wavenumber * std::cos(theta));
      weight_.push_back(spec.variance * w[static_cast<std::size_t>(q)] / 2);  // (1/Δ)·(Δ/2)·w
    }
  }

  cd operator()(const double* x, const double* y) const {
    if (spec_.kind == H2Kernel::clutter) {
      const double dx = x[0] - y[0], dy = dim_ >= 2 ? x[1] - y[1] : 0.0;
      cd sum = 0;
      for (std::size_t q = 0; q < weight_.size(); ++q) sum += weight_[q] * std::polar(1.0, dx * ux_[q] + dy * uy_[q]);
      return sum;
    }
    double r2 = 0;
    for (int k = 0; k < dim_; ++k) r2 += (x[k] - y[k]) * (x[k] - y[k]);
    const double r = std::sqrt(r2) / spec_.length, s2 = spec_.variance;
    switch (spec_.kind) {
      case H2Kernel::gaussian: return s2 * std::exp(-r * r / 2);
      case H2Kernel::matern:
        if (spec_.nu == 1.5) return s2 * (1 + std::sqrt(3.0) * r) * std::exp(-std::sqrt(3.0) * r);
        if (spec_.nu == 2.5) return s2 * (1 + std::sqrt(5.0) * r + 5 * r * r / 3) * std::exp(-std::sqrt(5.0) * r);
        return s2 * std::exp(-r);
      default: return s2 * std::exp(-r);
    }
  }

 private:
  H2KernelSpec spec_;
  int dim_;
  std::vector<double> ux_, uy_, weight_;
};

// The interpolation box of a node: its bounding box with every side widened to at least
// `min_side` about its centre, so that a flat or single-point cluster still has p distinct nodes.
struct ChebBox {
  double centre[3], half[3];
};
ChebBox cheb_box(const double* box, int dim, double min_side) {
  ChebBox b{};
  for (int k = 0; k < dim; ++k) {
    b.centre[k] = (box[k] + box[3 + k]) / 2;
    b.half[k] = std::max(box[3 + k] - box[k], min_side) / 2;
  }
  return b;
}

// The p^d tensor Chebyshev nodes of a box, node a = a0 + p·a1 + p²·a2, coordinates interleaved.
std::vector<double> cheb_nodes(const ChebBox& b, int dim, int p) {
  const int k = static_cast<int>(std::pow(p, dim));
  std::vector<double> out(static_cast<std::size_t>(k) * dim);
  for (int a = 0; a < k; ++a) {
    int rest = a;
    for (int d = 0; d < dim; ++d) {
      const int index = rest % p;
      rest /= p;
      out[static_cast<std::size_t>(a) * dim + d] =
          b.centre[d] + b.half[d] * std::cos((2 * index + 1) * std::numbers::pi / (2 * p));
    }
  }
  return out;
}

// The p^d tensor Lagrange polynomials of box b at point x: out[a], a as in cheb_nodes.
void lagrange(const ChebBox& b, int dim, int p, const double* x, double* out) {
  double one_d[3][32];
  for (int d = 0; d < dim; ++d) {
    double nodes[32];
    for (int j = 0; j < p; ++j) nodes[j] = b.centre[d] + b.half[d] * std::cos((2 * j + 1) * std::numbers::pi / (2 * p));
    for (int j = 0; j < p; ++j) {
      double value = 1;
      for (int i = 0; i < p; ++i)
        if (i != j) value *= (x[d] - nodes[i]) / (nodes[j] - nodes[i]);
      one_d[d][j] = value;
    }
  }
  const int k = static_cast<int>(std::pow(p, dim));
  for (int a = 0; a < k; ++a) {
    int rest = a;
    double value = 1;
    for (int d = 0; d < dim; ++d) {
      value *= one_d[d][rest % p];
      rest /= p;
    }
    out[a] = value;
  }
}

template <class T>
T to_element(const cd& v) {
  if constexpr (is_complex_v<T>) return T(static_cast<real_t<T>>(v.real()), static_cast<real_t<T>>(v.imag()));
  else return static_cast<T>(v.real());
}

}  // namespace

template <class T>
H2<T> build(Exec& exec, std::span<const double> points, int dim, const H2KernelSpec& spec, const H2Options& options) {
  H2<T> a;
  a.tree = build_tree(points, dim, options.leaf_size);
  const H2Tree& tree = a.tree;
  build_block_tree(tree, options.eta, a.couplings, a.dense_pairs);
  const int depth = tree.depth, p = options.cheb_order;
  const std::int64_t m = tree.leaf_capacity;
  const int k_full = static_cast<int>(std::pow(p, dim));
  ThreadPool& pool = exec.pool();

  // Ranks: p^d from the first level with couplings down; 0 above it (no block uses those bases).
  int first = depth + 1;
  for (int l = 0; l <= depth; ++l)
    if (a.couplings.count(l) > 0) {
      first = l;
      break;
    }
  a.rank.assign(static_cast<std::size_t>(depth) + 1, 0);
  for (int l = first; l <= depth; ++l) a.rank[static_cast<std::size_t>(l)] = k_full;

  const double root_diameter = [&] {
    const double* box = &tree.box[0];
    double sum = 0;
    for (int k = 0; k < dim; ++k) sum += (box[3 + k] - box[k]) * (box[3 + k] - box[k]);
    return std::sqrt(sum);
  }();
  const double min_side = root_diameter > 0 ? 1e-6 * root_diameter : 1.0;
  const Kernel kernel(spec, dim, root_diameter);
  auto box_of = [&](int level, std::int64_t t) {
    return cheb_box(&tree.box[static_cast<std::size_t>(H2Tree::heap(level, t)) * 6], dim, min_side);
  };
  auto point = [&](int tree_position) {
    return &points[static_cast<std::size_t>(tree.permutation[static_cast<std::size_t>(tree_position)]) * dim];
  };

  // Leaf bases: row i of leaf t is the Lagrange polynomials at its i-th point.
  const int k_leaf = a.rank[static_cast<std::size_t>(depth)];
  a.leaf_basis.assign(static_cast<std::size_t>(tree.nodes(depth) * m * k_leaf), T(0));
  if (k_leaf > 0)
    pool.parallel_for(static_cast<std::size_t>(tree.nodes(depth)), [&](std::size_t t, unsigned) {
      const ChebBox b = box_of(depth, static_cast<std::int64_t>(t));
      std::vector<double> values(static_cast<std::size_t>(k_leaf));
      T* u = a.leaf_basis.data() + static_cast<std::int64_t>(t) * m * k_leaf;
      const int begin = tree.begin(depth, static_cast<std::int64_t>(t)), size = tree.size(depth, static_cast<std::int64_t>(t));
      for (int i = 0; i < size; ++i) {
        lagrange(b, dim, p, point(begin + i), values.data());
        for (int c = 0; c < k_leaf; ++c) u[i + c * m] = static_cast<T>(values[static_cast<std::size_t>(c)]);
      }
    });

  // Transfers: E_c[a, b] = L^parent_b(ξ^c_a), child c of level l.
  a.transfer_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
  for (int l = 0; l <= depth; ++l)
    a.transfer_offset[static_cast<std::size_t>(l) + 1] =
        a.transfer_offset[static_cast<std::size_t>(l)] +
        (l == 0 ? 0 : tree.nodes(l) * a.rank[static_cast<std::size_t>(l)] * a.rank[static_cast<std::size_t>(l) - 1]);
  a.transfer.assign(static_cast<std::size_t>(a.transfer_offset.back()), T(0));
  for (int l = 1; l <= depth; ++l) {
    const int kc = a.rank[static_cast<std::size_t>(l)], kp = a.rank[static_cast<std::size_t>(l) - 1];
    if (kc == 0 || kp == 0) continue;
    pool.parallel_for(static_cast<std::size_t>(tree.nodes(l)), [&](std::size_t c, unsigned) {
      const std::int64_t child = static_cast<std::int64_t>(c);
      if (tree.size(l, child) == 0) return;
      const std::vector<double> xi = cheb_nodes(box_of(l, child), dim, p);
      const ChebBox parent = box_of(l - 1, child / 2);
      std::vector<double> values(static_cast<std::size_t>(kp));
      T* e = a.transfer.data() + a.transfer_offset[static_cast<std::size_t>(l)] + child * kc * kp;
      for (int row = 0; row < kc; ++row) {
        lagrange(parent, dim, p, &xi[static_cast<std::size_t>(row) * dim], values.data());
        for (int col = 0; col < kp; ++col) e[row + col * kc] = static_cast<T>(values[static_cast<std::size_t>(col)]);
      }
    });
  }

  // Couplings: S_ts[a, b] = K(ξ^t_a, ξ^s_b).
  a.coupling_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
  for (int l = 0; l <= depth; ++l) {
    const std::int64_t k = a.rank[static_cast<std::size_t>(l)];
    a.coupling_offset[static_cast<std::size_t>(l) + 1] = a.coupling_offset[static_cast<std::size_t>(l)] + a.couplings.count(l) * k * k;
  }
  a.coupling.assign(static_cast<std::size_t>(a.coupling_offset.back()), T(0));
  for (int l = 0; l <= depth; ++l) {
    const int k = a.rank[static_cast<std::size_t>(l)], first_pair = a.couplings.level_ptr[static_cast<std::size_t>(l)];
    pool.parallel_for(static_cast<std::size_t>(a.couplings.count(l)), [&](std::size_t index, unsigned) {
      const int pair = first_pair + static_cast<int>(index);
      const std::vector<double> xt = cheb_nodes(box_of(l, a.couplings.row[static_cast<std::size_t>(pair)]), dim, p);
      const std::vector<double> xs = cheb_nodes(box_of(l, a.couplings.col[static_cast<std::size_t>(pair)]), dim, p);
      T* s = const_cast<T*>(a.coupling_of(l, pair));
      for (int col = 0; col < k; ++col)
        for (int row = 0; row < k; ++row)
          s[row + col * k] = to_element<T>(kernel(&xt[static_cast<std::size_t>(row) * dim], &xs[static_cast<std::size_t>(col) * dim]));
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
        cd value = kernel(point(bt + i), point(bs + j));
        if (t == s && i == j) value += options.nugget;
        d[i + j * m] = to_element<T>(value);
      }
  });
  return a;
}

#define COVFLOW_H2_BUILD(T) \
  template H2<T> build<T>(Exec&, std::span<const double>, int, const H2KernelSpec&, const H2Options&);
COVFLOW_H2_BUILD(f32)
COVFLOW_H2_BUILD(f64)
COVFLOW_H2_BUILD(cf32)
COVFLOW_H2_BUILD(cf64)
#undef COVFLOW_H2_BUILD

}  // namespace covflow::linalg::detail::h2

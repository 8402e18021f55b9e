// H² matrices: argument checks, the memory accounting (h2_stats, h2_bytes) and backend dispatch
// of the operations (h2.hpp). Only the CPU backend exists so far; a CUDA Exec is refused by name.
#include "covflow/linalg/h2.hpp"

#include <cmath>
#include <numbers>
#include <sstream>
#include <string>

#include "../common/checks.hpp"
#include "covflow/linalg/error.hpp"
#include "h2_impl.hpp"

namespace covflow::linalg {
namespace {

[[noreturn]] void fail(const char* op, const std::string& why) { throw InvalidArgument(std::string(op) + ": " + why); }

void require_cpu(const Exec& exec, const char* op) {
  if (exec.is_cuda())
    throw Unavailable(std::string(op) + ": not supported on the CUDA backend yet: H² matrices run on the CPU backend only");
}

// As an ostream writes it (-1, 1e-06, 0.1), not std::to_string's fixed six decimals.
std::string number(double v) {
  std::ostringstream text;
  text << v;
  return text.str();
}

template <class T>
void require_vectors(Exec& exec, const Batch<T>& v, std::int64_t n, std::int64_t cols, const char* op, const char* what) {
  detail::require_dims(v, op, what, "rows", "nvec");
  if (v.count != 1) fail(op, std::string(what) + " must be one matrix (count 1), not " + std::to_string(v.count));
  if (v.rows != n || (cols >= 0 && v.cols != cols))
    fail(op, std::string(what) + " is " + detail::shape(v.rows, v.cols) + " but A is " + detail::shape(n, n) + ": " +
                 what + " needs " + std::to_string(n) + " rows" +
                 (cols >= 0 ? " and " + std::to_string(cols) + " columns" : std::string()));
  detail::require_accessible(exec, v, op, what);
}

}  // namespace

template <class T>
H2Stats h2_stats(const H2<T>& a) {
  detail::h2::require_sizes(a, "h2_stats");
  const H2Tree& tree = a.tree;
  const std::size_t s = sizeof(T);
  const auto m = static_cast<std::size_t>(tree.leaf_capacity);
  H2Stats st;
  st.n = tree.n;
  st.depth = tree.depth;
  st.leaf_capacity = tree.leaf_capacity;
  st.ranks = a.rank;
  st.dense_blocks = a.dense_pairs.count();
  st.dense_bytes = static_cast<std::size_t>(st.dense_blocks) * m * m * s;
  st.leaf_basis_bytes = static_cast<std::size_t>(tree.nodes(tree.depth)) * m * static_cast<std::size_t>(a.rank.back()) * s;
  for (int l = 0; l <= tree.depth; ++l) {
    const auto k = static_cast<std::size_t>(a.rank[static_cast<std::size_t>(l)]);
    st.coupling_blocks.push_back(a.couplings.count(l));
    st.coupling_bytes += static_cast<std::size_t>(a.couplings.count(l)) * k * k * s;
    if (l > 0)
      st.transfer_bytes += static_cast<std::size_t>(tree.nodes(l)) * k * static_cast<std::size_t>(a.rank[static_cast<std::size_t>(l) - 1]) * s;
  }
  st.basis_bytes = st.leaf_basis_bytes + st.transfer_bytes;
  st.total_bytes = st.dense_bytes + st.basis_bytes + st.coupling_bytes;
  auto ints = [](const H2Pairs& p) {
    return p.level_ptr.size() + p.row.size() + p.col.size() + p.row_ptr.size() + p.col_ptr.size() + p.col_pairs.size();
  };
  st.index_bytes = (tree.permutation.size() + tree.node_begin.size() + tree.node_end.size() + a.rank.size() +
                    ints(a.couplings) + ints(a.dense_pairs)) * sizeof(int);
  st.dense_matrix_bytes = static_cast<std::size_t>(tree.n) * static_cast<std::size_t>(tree.n) * s;
  return st;
}

template <class T>
std::size_t h2_bytes(const H2<T>& a) {
  return h2_stats(a).total_bytes;
}

template <class T>
H2<T> h2_build(Exec& exec, std::span<const double> points, int dim, const H2KernelSpec& kernel, const H2Options& options) {
  constexpr const char* op = "h2_build";
  detail::h2::require_build_args<T>(points, dim, kernel, options, op);
  require_cpu(exec, op);
  return detail::h2::build<T>(exec, points, dim, kernel, options);
}

template <class T>
void h2_gemv(Exec& exec, T alpha, const H2<T>& a, Batch<const T> x, T beta, Batch<T> y) {
  constexpr const char* op = "h2_gemv";
  detail::h2::require_sizes(a, op);
  require_vectors(exec, x, a.tree.n, -1, op, "X");
  require_vectors(exec, y, a.tree.n, x.cols, op, "Y");
  require_cpu(exec, op);
  if (x.cols == 0) return;
  detail::h2::gemv<T>(exec, alpha, a, x, beta, y);
}

template <class T>
void h2_expand(Exec& exec, const H2<T>& a, Batch<T> out) {
  constexpr const char* op = "h2_expand";
  detail::h2::require_sizes(a, op);
  require_vectors(exec, out, a.tree.n, a.tree.n, op, "out");
  require_cpu(exec, op);
  detail::h2::expand<T>(exec, a, out);
}

template <class T>
void h2_orthogonalize(Exec& exec, H2<T>& a) {
  constexpr const char* op = "h2_orthogonalize";
  detail::h2::require_sizes(a, op);
  require_cpu(exec, op);
  detail::h2::orthogonalize<T>(exec, a);
}

template <class T>
H2CompressReport h2_compress(Exec& exec, H2<T>& a, double tol) {
  constexpr const char* op = "h2_compress";
  detail::h2::require_sizes(a, op);
  if (!(tol > 0) || !std::isfinite(tol)) fail(op, "tol " + number(tol) + " must be positive and finite");
  require_cpu(exec, op);
  return detail::h2::compress<T>(exec, a, tol);
}

template <class T>
H2<T> h2_from_dense(Exec& exec, Batch<const T> a, std::span<const double> points, int dim, double tol,
                    const H2Options& options, H2CompressReport* report) {
  constexpr const char* op = "h2_from_dense";
  detail::h2::require_from_dense(exec, a, points, dim, tol, options, op);
  require_cpu(exec, op);
  return detail::h2::from_dense<T>(exec, a, points, dim, tol, options, report);
}

#define COVFLOW_H2_API(T)                                                                                   \
  template H2Stats h2_stats<T>(const H2<T>&);                                                               \
  template std::size_t h2_bytes<T>(const H2<T>&);                                                           \
  template H2<T> h2_build<T>(Exec&, std::span<const double>, int, const H2KernelSpec&, const H2Options&);  \
  template void h2_gemv<T>(Exec&, T, const H2<T>&, Batch<const T>, T, Batch<T>);                            \
  template void h2_expand<T>(Exec&, const H2<T>&, Batch<T>);                                                \
  template void h2_orthogonalize<T>(Exec&, H2<T>&);                                                         \
  template H2CompressReport h2_compress<T>(Exec&, H2<T>&, double);                                         \
  template H2<T> h2_from_dense<T>(Exec&, Batch<const T>, std::span<const double>, int, double, const H2Options&, \
                                  H2CompressReport*);
COVFLOW_H2_API(f32)
COVFLOW_H2_API(f64)
COVFLOW_H2_API(cf32)
COVFLOW_H2_API(cf64)
#undef COVFLOW_H2_API

}  // namespace covflow::linalg

namespace covflow::linalg::detail::h2 {

template <class T>
void require_sizes(const H2<T>& a, const char* op) {
  const H2Tree& tree = a.tree;
  auto bad = [&](const std::string& why) { throw InvalidArgument(std::string(op) + ": A: " + why); };
  if (tree.n < 1 || tree.dim < 1 || tree.dim > 3 || tree.depth < 0 || tree.depth > 30 || tree.leaf_capacity < 1)
    bad("not an H² matrix from h2_build (empty or malformed tree)");
  const auto levels = static_cast<std::size_t>(tree.depth) + 1;
  const auto nodes = static_cast<std::size_t>((std::int64_t{2} << tree.depth) - 1);
  if (tree.permutation.size() != static_cast<std::size_t>(tree.n) || tree.node_begin.size() != nodes ||
      tree.node_end.size() != nodes || a.rank.size() != levels || a.transfer_offset.size() != levels + 1 ||
      a.coupling_offset.size() != levels + 1 || a.couplings.level_ptr.size() != levels + 1 ||
      a.dense_pairs.level_ptr.size() != levels + 1)
    bad("tree, ranks and pair lists disagree in size");
  const std::int64_t m = tree.leaf_capacity, kl = a.rank.back();
  if (a.leaf_basis.size() != static_cast<std::size_t>(tree.nodes(tree.depth) * m * kl) ||
      a.transfer.size() != static_cast<std::size_t>(a.transfer_offset.back()) ||
      a.coupling.size() != static_cast<std::size_t>(a.coupling_offset.back()) ||
      a.dense.size() != static_cast<std::size_t>(a.dense_pairs.count() * m * m))
    bad("storage sizes disagree with the ranks and pair counts");
}

template <class T>
void require_build_args(std::span<const double> points, int dim, const H2KernelSpec& kernel, const H2Options& options,
                        const char* op) {
  require_points(points, dim, options, op);
  if (options.cheb_order < 1 || options.cheb_order > 32)
    fail(op, "cheb_order " + std::to_string(options.cheb_order) + " must lie in 1 … 32");
  if (!(options.nugget >= 0) || !std::isfinite(options.nugget))
    fail(op, "nugget " + number(options.nugget) + " must be non-negative and finite");
  if (!(kernel.variance > 0) || !std::isfinite(kernel.variance))
    fail(op, "kernel: variance " + number(kernel.variance) + " must be positive and finite");
  switch (kernel.kind) {
    case H2Kernel::exponential:
    case H2Kernel::gaussian:
    case H2Kernel::matern:
      if (!(kernel.length > 0) || !std::isfinite(kernel.length))
        fail(op, "kernel: length " + number(kernel.length) + " must be positive and finite");
      if (kernel.kind == H2Kernel::matern && kernel.nu != 0.5 && kernel.nu != 1.5 && kernel.nu != 2.5)
        fail(op, "kernel: matern nu " + number(kernel.nu) + " must be 0.5, 1.5 or 2.5 (the closed forms)");
      break;
    case H2Kernel::clutter:
      if constexpr (!is_complex_v<T>)
        fail(op, std::string("kernel: clutter is a complex (Hermitian) covariance and element type ") +
                     std::string(name(element_type_of<T>())) + " is real: use cf32 or cf64");
      if (!(kernel.wavelength > 0) || !std::isfinite(kernel.wavelength))
        fail(op, "kernel: wavelength " + number(kernel.wavelength) + " must be positive and finite");
      if (!(kernel.sector_width > 0) || kernel.sector_width > 2 * std::numbers::pi + 1e-12)
        fail(op, "kernel: sector_width " + number(kernel.sector_width) + " must lie in (0, 2π]");
      if (!std::isfinite(kernel.sector_center)) fail(op, "kernel: sector_center must be finite");
      break;
    default: fail(op, "kernel: unknown kind " + std::to_string(static_cast<int>(kernel.kind)));
  }
}

template void require_sizes<f32>(const H2<f32>&, const char*);
template void require_sizes<f64>(const H2<f64>&, const char*);
template void require_sizes<cf32>(const H2<cf32>&, const char*);
template void require_sizes<cf64>(const H2<cf64>&, const char*);
#define COVFLOW_H2_BUILD_ARGS(T) \
  template void require_build_args<T>(std::span<const double>, int, const H2KernelSpec&, const H2Options&, const char*);
COVFLOW_H2_BUILD_ARGS(f32)
COVFLOW_H2_BUILD_ARGS(f64)
COVFLOW_H2_BUILD_ARGS(cf32)
COVFLOW_H2_BUILD_ARGS(cf64)
#undef COVFLOW_H2_BUILD_ARGS

// The points and tree options of h2_build and h2_from_dense.
void require_points(std::span<const double> points, int dim, const H2Options& options, const char* op) {
  if (dim < 1 || dim > 3) fail(op, "dim " + std::to_string(dim) + " must be 1, 2 or 3");
  if (points.empty()) fail(op, "points: n = 0: at least one point is needed");
  if (points.size() % static_cast<std::size_t>(dim) != 0)
    fail(op, "points: " + std::to_string(points.size()) + " coordinates are not a whole number of points of dim " +
                 std::to_string(dim));
  const auto n = static_cast<std::int64_t>(points.size()) / dim;
  detail::require_int32(n, op, "n");
  for (std::size_t i = 0; i < points.size(); ++i)
    if (!std::isfinite(points[i]))
      fail(op, "points: coordinate " + std::to_string(i % dim) + " of point " + std::to_string(i / dim) +
                   " is not finite");
  if (options.leaf_size < 1) fail(op, "leaf_size " + std::to_string(options.leaf_size) + " must be at least 1");
  detail::require_int32(options.leaf_size, op, "leaf_size");
  if (!(options.eta > 0) || !std::isfinite(options.eta)) fail(op, "eta " + number(options.eta) + " must be positive and finite");
}


template <class T>
void require_from_dense(Exec& exec, Batch<const T> a, std::span<const double> points, int dim, double tol,
                        const H2Options& options, const char* op) {
  require_points(points, dim, options, op);
  const auto n = static_cast<std::int64_t>(points.size()) / dim;
  detail::require_dims(a, op, "a", "rows", "cols");
  if (a.count != 1) fail(op, "a must be one matrix (count 1), not " + std::to_string(a.count));
  if (a.rows != n || a.cols != n)
    fail(op, "a is " + detail::shape(a.rows, a.cols) + " but the points give n = " + std::to_string(n) + ": a must be " +
                     detail::shape(n, n));
  if (!(tol > 0) || !std::isfinite(tol)) fail(op, "tol " + number(tol) + " must be positive and finite");
  detail::require_accessible(exec, a, op, "a");
  if (!exec.is_cuda())  // device entries are checked by the CUDA construction (through ‖a‖_F)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < n; ++i)
        if (!detail::is_finite(a.data[i + j * a.ld]))
          fail(op, "a: entry (" + std::to_string(i) + ", " + std::to_string(j) + ") is not finite");
}

#define COVFLOW_H2_FROM_DENSE_CHECK(T) \
  template void require_from_dense<T>(Exec&, Batch<const T>, std::span<const double>, int, double, const H2Options&, const char*);
COVFLOW_H2_FROM_DENSE_CHECK(f32)
COVFLOW_H2_FROM_DENSE_CHECK(f64)
COVFLOW_H2_FROM_DENSE_CHECK(cf32)
COVFLOW_H2_FROM_DENSE_CHECK(cf64)
#undef COVFLOW_H2_FROM_DENSE_CHECK

}  // namespace covflow::linalg::detail::h2

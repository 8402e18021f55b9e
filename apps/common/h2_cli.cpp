// `covflow linalg h2 build`, and `expand` and `apply` on an H² archive: H² matrices
// (covflow/linalg/h2.hpp) on NumPy files, the matrix in an .npz archive whose layout docs/cli.md
// documents for numpy users.
//
// The archive holds every flat array of linalg::H2<T> as it is, so that a reloaded H2 is
// bit-identical to the one written: the int arrays of the tree and the pair lists as int32 vectors,
// the leaf bases and dense blocks as stacks of the library's column-major blocks (in numpy's C order
// a column-major m × k block reads as its k × m transpose: numpy's leaf_basis[i].T is U_i), and the
// transfers and couplings, whose block sizes change from level to level, as flat vectors beside
// their offsets. Reading checks all of it — sizes against the tree, ranks and pair counts, every
// index in range, the permutation a permutation, the pair indices exactly those the pair lists
// imply, the padding zero — before the library sees it, so a damaged archive costs a message that
// names the archive and the member, never a read out of bounds.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/exit_codes.hpp"
#include "common/linalg_cli.hpp"
#include "common/linalg_cli_support.hpp"
#include "covflow/io/npy.hpp"
#include "covflow/io/npz.hpp"
#include "covflow/linalg/batch.hpp"
#include "covflow/linalg/error.hpp"
#include "covflow/linalg/exec.hpp"
#include "covflow/linalg/h2.hpp"
#include "covflow/linalg/types.hpp"

#if COVFLOW_HAS_CUDA
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::cli {

using namespace detail;

namespace {

constexpr std::int32_t kH2FormatVersion = 1;
constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();

std::string ranks_text(const std::vector<int>& ranks) {
  std::string text;
  for (std::size_t l = 0; l < ranks.size(); ++l) {
    if (l > 0) text += '/';
    text += std::to_string(ranks[l]);
  }
  return text;
}

// ---- points ------------------------------------------------------------------------------------

struct Points {
  std::vector<double> coordinates;  // point i's dim coordinates at i·dim
  int dim = 0;
  std::int64_t n = 0;
};

// P.npy: (n, d) with d = 1, 2 or 3, or (n,) for d = 1; float64 or float32, either element order;
// every coordinate finite.
Points load_points(const path& file) {
  io::NpyArray array;
  try {
    array = io::read_npy(file);
  } catch (const io::NpyError& e) {
    fail(e.kind() == io::NpyError::Kind::io ? exit_code::io : exit_code::input_damaged, e.what());
  }
  const std::string where = file.string();
  if (array.dtype != io::NpyDtype::float64 && array.dtype != io::NpyDtype::float32)
    fail(exit_code::input_damaged, where + ": points are " + describe(array) + ", expected float64 (or float32) coordinates");
  if (array.shape.empty() || array.shape.size() > 2 ||
      (array.shape.size() == 2 && (array.shape[1] < 1 || array.shape[1] > 3)))
    fail(exit_code::input_damaged, where + ": points are " + describe(array) +
                                       ", expected (n, d) with d = 1, 2 or 3 coordinates per point (or (n,) for d = 1)");
  Points p;
  p.dim = array.shape.size() == 2 ? static_cast<int>(array.shape[1]) : 1;
  if (array.shape[0] == 0) fail(exit_code::input_damaged, where + ": no points (shape " + describe(array) + ")");
  if (array.shape[0] > static_cast<std::uint64_t>(kInt32Max))
    fail(exit_code::input_damaged, where + ": " + std::to_string(array.shape[0]) + " points, more than 32 bits index");
  p.n = static_cast<std::int64_t>(array.shape[0]);
  p.coordinates.resize(static_cast<std::size_t>(p.n * p.dim));
  const std::size_t item = io::item_size(array.dtype);
  for (std::int64_t i = 0; i < p.n; ++i)
    for (int k = 0; k < p.dim; ++k) {
      const std::int64_t at = array.fortran_order ? i + k * p.n : i * p.dim + k;
      double value = 0;
      if (array.dtype == io::NpyDtype::float64) {
        std::memcpy(&value, array.bytes.data() + static_cast<std::size_t>(at) * item, item);
      } else {
        float single = 0;
        std::memcpy(&single, array.bytes.data() + static_cast<std::size_t>(at) * item, item);
        value = single;
      }
      if (!std::isfinite(value))
        fail(exit_code::input_damaged, where + ": point " + std::to_string(i) + " has coordinate " + std::to_string(k) +
                                           " = " + number_text(value) + ": every coordinate must be finite");
      p.coordinates[static_cast<std::size_t>(i * p.dim + k)] = value;
    }
  return p;
}

// ---- the archive: writing ---------------------------------------------------------------------

io::NpyArray int32_scalar(std::int32_t value) {
  io::NpyArray a{io::NpyDtype::int32, {}, false, std::vector<std::byte>(4)};
  std::memcpy(a.bytes.data(), &value, 4);
  return a;
}

io::NpyArray int32_vector(const std::vector<int>& values) {
  return {io::NpyDtype::int32, {values.size()}, false, raw_bytes(values)};
}

// The offsets are int64 in the library and int32 in the archive (the NPY reader's one integer
// type): an H² whose transfers or couplings pass 2^31 − 1 elements does not fit this format.
io::NpyArray offsets_vector(const std::vector<std::int64_t>& offsets, const char* name) {
  std::vector<std::int32_t> values;
  for (std::int64_t v : offsets) {
    if (v > kInt32Max)
      fail(exit_code::usage, std::string("the H² matrix's ") + name + " " + std::to_string(v) +
                                 " passes the archive's int32 offsets (at most 2^31 − 1 elements per array)");
    values.push_back(static_cast<std::int32_t>(v));
  }
  return {io::NpyDtype::int32, {values.size()}, false, raw_bytes(values)};
}

void add_pairs(std::vector<io::NpzMember>& members, const std::string& prefix, const la::H2Pairs& p) {
  members.push_back({prefix + "_level_ptr", int32_vector(p.level_ptr)});
  members.push_back({prefix + "_row", int32_vector(p.row)});
  members.push_back({prefix + "_col", int32_vector(p.col)});
  members.push_back({prefix + "_row_ptr", int32_vector(p.row_ptr)});
  members.push_back({prefix + "_col_ptr", int32_vector(p.col_ptr)});
  members.push_back({prefix + "_col_pairs", int32_vector(p.col_pairs)});
}

template <class T>
std::vector<io::NpzMember> h2_members(const la::H2<T>& a, io::NpyDtype dtype) {
  const la::H2Tree& tree = a.tree;
  const auto leaves = static_cast<std::uint64_t>(tree.nodes(tree.depth));
  const auto m = static_cast<std::uint64_t>(tree.leaf_capacity), kl = static_cast<std::uint64_t>(a.rank.back());
  std::vector<io::NpzMember> members;
  members.push_back({"format", int32_scalar(static_cast<std::int32_t>(ArchiveFormat::h2))});
  members.push_back({"format_version", int32_scalar(kH2FormatVersion)});
  members.push_back({"n", int32_scalar(static_cast<std::int32_t>(tree.n))});
  members.push_back({"dim", int32_scalar(tree.dim)});
  members.push_back({"depth", int32_scalar(tree.depth)});
  members.push_back({"leaf_capacity", int32_scalar(static_cast<std::int32_t>(tree.leaf_capacity))});
  members.push_back({"permutation", int32_vector(tree.permutation)});
  members.push_back({"node_begin", int32_vector(tree.node_begin)});
  members.push_back({"node_end", int32_vector(tree.node_end)});
  members.push_back({"box", {io::NpyDtype::float64, {tree.node_begin.size(), 6}, false, raw_bytes(tree.box)}});
  members.push_back({"rank", int32_vector(a.rank)});
  add_pairs(members, "coupling", a.couplings);
  add_pairs(members, "dense", a.dense_pairs);
  members.push_back({"leaf_basis", {dtype, {leaves, kl, m}, false, raw_bytes(a.leaf_basis)}});
  members.push_back({"transfer", {dtype, {a.transfer.size()}, false, raw_bytes(a.transfer)}});
  members.push_back({"transfer_offset", offsets_vector(a.transfer_offset, "transfer_offset")});
  members.push_back({"coupling", {dtype, {a.coupling.size()}, false, raw_bytes(a.coupling)}});
  members.push_back({"coupling_offset", offsets_vector(a.coupling_offset, "coupling_offset")});
  members.push_back({"dense", {dtype, {static_cast<std::uint64_t>(a.dense_pairs.count()), m, m}, false, raw_bytes(a.dense)}});
  members.push_back({"orthogonal", int32_scalar(a.orthogonal ? 1 : 0)});
  return members;
}

// ---- the archive: reading ---------------------------------------------------------------------

// Reads the members of an H² archive and checks them one by one; every failure names the archive
// and the member.
class H2Reader {
 public:
  H2Reader(const std::vector<io::NpzMember>& members, const path& file) : members_(members), where_(file.string()) {}

  [[noreturn]] void damaged(const std::string& what) const {
    fail(exit_code::input_damaged, where_ + ": not a valid covflow H² archive: " + what);
  }

  const io::NpyArray& member(const std::string& name) const {
    const io::NpzMember* m = io::find_member(members_, name);
    if (m == nullptr) damaged("no member '" + name + "' (covflow linalg h2 build writes it; docs/cli.md)");
    return m->array;
  }

  std::int64_t scalar(const std::string& name) const {
    const io::NpyArray& m = member(name);
    if (m.dtype != io::NpyDtype::int32 || !m.shape.empty())
      damaged("'" + name + "' is " + describe(m) + ", expected () int32");
    std::int32_t value = 0;
    std::memcpy(&value, m.bytes.data(), 4);
    return value;
  }

  // An int32 vector of `length` entries (shape checked before anything is copied).
  std::vector<int> ints(const std::string& name, std::int64_t length) const {
    const io::NpyArray& m = member(name);
    if (m.dtype != io::NpyDtype::int32 || m.shape != std::vector<std::uint64_t>{static_cast<std::uint64_t>(length)})
      damaged("'" + name + "' is " + describe(m) + ", expected (" + std::to_string(length) + ",) int32");
    std::vector<int> out(static_cast<std::size_t>(length));
    if (length > 0) std::memcpy(out.data(), m.bytes.data(), out.size() * sizeof(int));
    return out;
  }

  // An element array of `shape` and the archive's dtype, copied into the library's vector as is.
  template <class T>
  std::vector<T> elements(const std::string& name, const std::vector<std::uint64_t>& shape, io::NpyDtype dtype) const {
    const io::NpyArray& m = member(name);
    if (m.dtype != dtype || m.shape != shape || m.fortran_order)
      damaged("'" + name + "' is " + describe(m) + (m.fortran_order ? " in Fortran order" : "") + ", expected " +
              io::format_shape(shape) + " " + std::string(io::numpy_name(dtype)) + " in C order");
    std::vector<T> out(m.bytes.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), m.bytes.data(), m.bytes.size());
    return out;
  }

  const std::string& where() const { return where_; }

 private:
  const std::vector<io::NpzMember>& members_;
  std::string where_;
};

// One pair list, checked against the tree: level_ptr starts at 0 and never falls, the pairs of each
// level are level-local nodes with row ≥ col sorted strictly by (row, col), and row_ptr, col_ptr and
// col_pairs are exactly the indices those pairs imply (what the library builds from them).
la::H2Pairs read_pairs(const H2Reader& r, const std::string& prefix, const la::H2Tree& tree, bool leaf_level_only) {
  const int levels = tree.depth + 1;
  la::H2Pairs p;
  p.level_ptr = r.ints(prefix + "_level_ptr", levels + 1);
  if (p.level_ptr[0] != 0) r.damaged("'" + prefix + "_level_ptr' starts at " + std::to_string(p.level_ptr[0]) + ", not 0");
  for (int l = 0; l < levels; ++l) {
    if (p.level_ptr[static_cast<std::size_t>(l) + 1] < p.level_ptr[static_cast<std::size_t>(l)])
      r.damaged("'" + prefix + "_level_ptr' falls at level " + std::to_string(l));
    if (leaf_level_only && l < tree.depth && p.count(l) != 0)
      r.damaged("'" + prefix + "_level_ptr' puts " + std::to_string(p.count(l)) + " dense blocks at level " +
                std::to_string(l) + ": dense blocks are leaf pairs (level " + std::to_string(tree.depth) + ")");
  }
  const int count = p.level_ptr.back();
  p.row = r.ints(prefix + "_row", count);
  p.col = r.ints(prefix + "_col", count);
  p.col_pairs = r.ints(prefix + "_col_pairs", count);
  const std::int64_t ptr_length = la::H2Pairs::ptr_offset(levels);
  p.row_ptr = r.ints(prefix + "_row_ptr", ptr_length);
  p.col_ptr = r.ints(prefix + "_col_ptr", ptr_length);

  std::vector<int> row_ptr(static_cast<std::size_t>(ptr_length), 0), col_ptr(row_ptr.size(), 0), col_pairs;
  col_pairs.reserve(static_cast<std::size_t>(count));
  for (int l = 0; l < levels; ++l) {
    const int first = p.level_ptr[static_cast<std::size_t>(l)], last = p.level_ptr[static_cast<std::size_t>(l) + 1];
    const std::int64_t nodes = tree.nodes(l), base = la::H2Pairs::ptr_offset(l);
    std::vector<int> rows_count(static_cast<std::size_t>(nodes), 0), cols_count(static_cast<std::size_t>(nodes), 0);
    for (int q = first; q < last; ++q) {
      const int row = p.row[static_cast<std::size_t>(q)], col = p.col[static_cast<std::size_t>(q)];
      if (col < 0 || row < col || row >= nodes)
        r.damaged("'" + prefix + "_row'/'" + prefix + "_col' pair " + std::to_string(q) + " is (" + std::to_string(row) +
                  ", " + std::to_string(col) + "), outside 0 ≤ col ≤ row < " + std::to_string(nodes) + " of level " +
                  std::to_string(l));
      if (q > first && std::pair(row, col) <= std::pair(p.row[static_cast<std::size_t>(q) - 1], p.col[static_cast<std::size_t>(q) - 1]))
        r.damaged("'" + prefix + "_row'/'" + prefix + "_col' pair " + std::to_string(q) +
                  " is out of (row, col) order or repeated");
      ++rows_count[static_cast<std::size_t>(row)];
      ++cols_count[static_cast<std::size_t>(col)];
    }
    row_ptr[static_cast<std::size_t>(base)] = first;
    col_ptr[static_cast<std::size_t>(base)] = first;
    for (std::int64_t t = 0; t < nodes; ++t) {
      row_ptr[static_cast<std::size_t>(base + t + 1)] = row_ptr[static_cast<std::size_t>(base + t)] + rows_count[static_cast<std::size_t>(t)];
      col_ptr[static_cast<std::size_t>(base + t + 1)] = col_ptr[static_cast<std::size_t>(base + t)] + cols_count[static_cast<std::size_t>(t)];
    }
    std::vector<int> by_col(static_cast<std::size_t>(last - first));
    for (int q = first; q < last; ++q) by_col[static_cast<std::size_t>(q - first)] = q;
    std::stable_sort(by_col.begin(), by_col.end(), [&](int a, int b) {
      return std::pair(p.col[static_cast<std::size_t>(a)], p.row[static_cast<std::size_t>(a)]) <
             std::pair(p.col[static_cast<std::size_t>(b)], p.row[static_cast<std::size_t>(b)]);
    });
    col_pairs.insert(col_pairs.end(), by_col.begin(), by_col.end());
  }
  const auto mismatch = [](const std::vector<int>& got, const std::vector<int>& want) {
    return std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin();
  };
  for (const auto& [name, got, want] : {std::tuple{"_row_ptr", &p.row_ptr, &row_ptr}, std::tuple{"_col_ptr", &p.col_ptr, &col_ptr},
                                        std::tuple{"_col_pairs", &p.col_pairs, &col_pairs}})
    if (*got != *want) {
      const auto at = static_cast<std::size_t>(mismatch(*got, *want));
      r.damaged("'" + prefix + name + "' holds " + std::to_string((*got)[at]) + " at index " + std::to_string(at) + ", the pairs imply " +
                std::to_string((*want)[at]));
    }
  return p;
}

// The tree: a permutation of 0 … n − 1, node ranges that start from [0, n) at the root and split
// each node into its two children, leaves of at most leaf_capacity points, and a bounding box per
// node (finite, lo ≤ hi, for every node that holds points).
la::H2Tree read_tree(const H2Reader& r) {
  la::H2Tree tree;
  tree.n = r.scalar("n");
  tree.dim = static_cast<int>(r.scalar("dim"));
  const std::int64_t depth = r.scalar("depth");
  tree.leaf_capacity = r.scalar("leaf_capacity");
  if (tree.n < 1) r.damaged("n is " + std::to_string(tree.n) + ", expected at least 1");
  if (tree.dim < 1 || tree.dim > 3) r.damaged("dim is " + std::to_string(tree.dim) + ", expected 1, 2 or 3");
  if (depth < 0 || depth > 30) r.damaged("depth is " + std::to_string(depth) + ", expected 0 … 30");
  if (tree.leaf_capacity < 1) r.damaged("leaf_capacity is " + std::to_string(tree.leaf_capacity) + ", expected at least 1");
  tree.depth = static_cast<int>(depth);
  const std::int64_t nodes = (std::int64_t{2} << tree.depth) - 1;
  // The leaves must hold all n points: 2^depth leaves of at most leaf_capacity each.
  if (tree.nodes(tree.depth) * tree.leaf_capacity < tree.n)
    r.damaged("depth " + std::to_string(depth) + " and leaf_capacity " + std::to_string(tree.leaf_capacity) +
              " cannot hold n " + std::to_string(tree.n) + " points");
  tree.permutation = r.ints("permutation", tree.n);
  std::vector<char> seen(static_cast<std::size_t>(tree.n), 0);
  for (std::size_t i = 0; i < tree.permutation.size(); ++i) {
    const int p = tree.permutation[i];
    if (p < 0 || p >= tree.n || seen[static_cast<std::size_t>(p)])
      r.damaged("'permutation' is not a permutation of 0 … " + std::to_string(tree.n - 1) + ": entry " + std::to_string(i) +
                " is " + std::to_string(p) + (p >= 0 && p < tree.n ? ", already taken" : ""));
    seen[static_cast<std::size_t>(p)] = 1;
  }
  tree.node_begin = r.ints("node_begin", nodes);
  tree.node_end = r.ints("node_end", nodes);
  if (tree.node_begin[0] != 0 || tree.node_end[0] != tree.n)
    r.damaged("the root holds [" + std::to_string(tree.node_begin[0]) + ", " + std::to_string(tree.node_end[0]) +
              ") in 'node_begin'/'node_end', expected [0, " + std::to_string(tree.n) + ")");
  for (int l = 0; l < tree.depth; ++l)
    for (std::int64_t t = 0; t < tree.nodes(l); ++t) {
      const auto h = static_cast<std::size_t>(la::H2Tree::heap(l, t)), c0 = static_cast<std::size_t>(la::H2Tree::heap(l + 1, 2 * t)),
                 c1 = c0 + 1;
      const int begin = tree.node_begin[h], end = tree.node_end[h], mid = tree.node_end[c0];
      if (tree.node_begin[c0] != begin || tree.node_begin[c1] != mid || tree.node_end[c1] != end || mid < begin || mid > end)
        r.damaged("'node_begin'/'node_end': the children of node " + std::to_string(t) + " of level " + std::to_string(l) +
                  " do not split its points [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
    }
  for (std::int64_t t = 0; t < tree.nodes(tree.depth); ++t)
    if (tree.size(tree.depth, t) > tree.leaf_capacity)
      r.damaged("'node_begin'/'node_end': leaf " + std::to_string(t) + " holds " + std::to_string(tree.size(tree.depth, t)) +
                " points, more than leaf_capacity " + std::to_string(tree.leaf_capacity));
  tree.box = r.elements<double>("box", {static_cast<std::uint64_t>(nodes), 6}, io::NpyDtype::float64);
  for (std::int64_t h = 0; h < nodes; ++h) {
    if (tree.node_end[static_cast<std::size_t>(h)] == tree.node_begin[static_cast<std::size_t>(h)]) continue;
    const double* b = &tree.box[static_cast<std::size_t>(h) * 6];
    for (int k = 0; k < 3; ++k)
      if (!std::isfinite(b[k]) || !std::isfinite(b[3 + k]) || b[k] > b[3 + k])
        r.damaged("'box' of node " + std::to_string(h) + " (heap order) is not a finite box with lo ≤ hi");
  }
  return tree;
}

// No element past a leaf's points (in a leaf basis) or past either node's points (in a dense
// block): the library keeps them zero and its QR-based operations rely on it.
template <class T>
void require_zero_padding(const H2Reader& r, const la::H2<T>& a) {
  const la::H2Tree& tree = a.tree;
  const std::int64_t m = tree.leaf_capacity, kl = a.rank.back();
  for (std::int64_t t = 0; t < tree.nodes(tree.depth); ++t) {
    const std::int64_t size = tree.size(tree.depth, t);
    for (std::int64_t c = 0; c < kl; ++c)
      for (std::int64_t i = size; i < m; ++i)
        if (a.leaf(t)[i + c * m] != T(0))
          r.damaged("'leaf_basis' of leaf " + std::to_string(t) + " is not zero past its " + std::to_string(size) + " points");
  }
  for (int q = 0; q < a.dense_pairs.count(); ++q) {
    const std::int64_t rows = tree.size(tree.depth, a.dense_pairs.row[static_cast<std::size_t>(q)]),
                       cols = tree.size(tree.depth, a.dense_pairs.col[static_cast<std::size_t>(q)]);
    for (std::int64_t j = 0; j < m; ++j)
      for (std::int64_t i = 0; i < m; ++i)
        if ((i >= rows || j >= cols) && a.dense_of(q)[i + j * m] != T(0))
          r.damaged("'dense' block " + std::to_string(q) + " is not zero past its " + std::to_string(rows) + " × " +
                    std::to_string(cols) + " points");
  }
}

// The whole H² of an archive, checked; then the library's own check (h2_stats) as the last word.
template <class T>
la::H2<T> h2_from_members(const H2Reader& r, io::NpyDtype dtype) {
  la::H2<T> a;
  a.tree = read_tree(r);
  const la::H2Tree& tree = a.tree;
  const int levels = tree.depth + 1;
  a.rank = r.ints("rank", levels);
  // Ranks only fall after h2_build's p^d (p ≤ 32): a larger one is damage, and would size the
  // work arrays of a matvec with nothing in the archive to bound it.
  const std::int64_t largest = tree.dim == 1 ? 32 : tree.dim == 2 ? 32 * 32 : 32 * 32 * 32;
  for (int l = 0; l < levels; ++l)
    if (a.rank[static_cast<std::size_t>(l)] < 0 || a.rank[static_cast<std::size_t>(l)] > largest)
      r.damaged("'rank' of level " + std::to_string(l) + " is " + std::to_string(a.rank[static_cast<std::size_t>(l)]) +
                ", expected 0 … " + std::to_string(largest) + " (32^dim)");
  a.couplings = read_pairs(r, "coupling", tree, false);
  a.dense_pairs = read_pairs(r, "dense", tree, true);

  // Offsets as the library computes them from the ranks and pair counts; the archive's must agree.
  std::vector<std::int64_t> transfer_offset(static_cast<std::size_t>(levels) + 1, 0), coupling_offset(transfer_offset.size(), 0);
  for (int l = 0; l < levels; ++l) {
    const std::int64_t k = a.rank[static_cast<std::size_t>(l)];
    transfer_offset[static_cast<std::size_t>(l) + 1] =
        transfer_offset[static_cast<std::size_t>(l)] + (l == 0 ? 0 : tree.nodes(l) * k * a.rank[static_cast<std::size_t>(l) - 1]);
    coupling_offset[static_cast<std::size_t>(l) + 1] = coupling_offset[static_cast<std::size_t>(l)] + a.couplings.count(l) * k * k;
  }
  for (const auto& [name, want] : {std::pair{"transfer_offset", &transfer_offset}, std::pair{"coupling_offset", &coupling_offset}}) {
    const std::vector<int> got = r.ints(name, levels + 1);
    for (std::size_t i = 0; i < got.size(); ++i)
      if (got[i] != (*want)[i])
        r.damaged(std::string("'") + name + "' holds " + std::to_string(got[i]) + " at level " + std::to_string(i) +
                  ", the ranks and pair counts give " + std::to_string((*want)[i]));
  }
  a.transfer_offset = std::move(transfer_offset);
  a.coupling_offset = std::move(coupling_offset);
  const auto m = static_cast<std::uint64_t>(tree.leaf_capacity);
  a.leaf_basis = r.elements<T>("leaf_basis", {static_cast<std::uint64_t>(tree.nodes(tree.depth)),
                                              static_cast<std::uint64_t>(a.rank.back()), m}, dtype);
  a.transfer = r.elements<T>("transfer", {static_cast<std::uint64_t>(a.transfer_offset.back())}, dtype);
  a.coupling = r.elements<T>("coupling", {static_cast<std::uint64_t>(a.coupling_offset.back())}, dtype);
  a.dense = r.elements<T>("dense", {static_cast<std::uint64_t>(a.dense_pairs.count()), m, m}, dtype);
  const std::int64_t orthogonal = r.scalar("orthogonal");
  if (orthogonal != 0 && orthogonal != 1) r.damaged("orthogonal is " + std::to_string(orthogonal) + ", expected 0 or 1");
  a.orthogonal = orthogonal == 1;
  require_zero_padding(r, a);
  try {
    (void)la::h2_stats(a);
  } catch (const la::InvalidArgument& e) {
    r.damaged(e.what());
  }
  return a;
}

// The archive's element type (of leaf_basis, which every element array must share) after the
// format_version check.
io::NpyDtype h2_dtype(const H2Reader& r) {
  const std::int64_t version = r.scalar("format_version");
  if (version != kH2FormatVersion)
    fail(exit_code::input_damaged, r.where() + ": H² archive format_version " + std::to_string(version) +
                                       ", this covflow reads version " + std::to_string(kH2FormatVersion));
  const io::NpyArray& basis = r.member("leaf_basis");
  require_matrix_dtype(basis, r.where() + ": leaf_basis.npy");
  return basis.dtype;
}

// "H² n 500, 2-D, depth 3, float64"
template <class T>
std::string h2_describe(const la::H2<T>& a, io::NpyDtype dtype) {
  return "H² n " + std::to_string(a.tree.n) + ", " + std::to_string(a.tree.dim) + "-D, depth " +
         std::to_string(a.tree.depth) + ", " + std::string(io::numpy_name(dtype));
}

void store_archive(const path& file, const std::vector<io::NpzMember>& members) {
  try {
    io::write_npz(file, members);
  } catch (const io::NpyError& e) {
    fail(e.kind() == io::NpyError::Kind::io ? exit_code::io : exit_code::internal_error, e.what());
  }
}

// ---- build ---------------------------------------------------------------------------------------

struct Kernel {
  la::H2KernelSpec spec;
  std::string text;  // "exponential kernel σ² 1, ℓ 0.1"
};

Kernel parse_kernel(const H2BuildRequest& r) {
  Kernel k;
  const std::string& name = r.kernel;
  if (name == "exponential") k.spec.kind = la::H2Kernel::exponential;
  else if (name == "gaussian") k.spec.kind = la::H2Kernel::gaussian;
  else if (name == "matern") k.spec.kind = la::H2Kernel::matern;
  else if (name == "clutter") k.spec.kind = la::H2Kernel::clutter;
  else if (name.empty()) fail(exit_code::usage, "--kernel is required: exponential, gaussian, matern or clutter");
  else fail(exit_code::usage, "--kernel " + name + ": expected exponential, gaussian, matern or clutter");
  const bool clutter = k.spec.kind == la::H2Kernel::clutter;
  const auto refuse = [&](const std::optional<double>& given, const char* option, const char* takers) {
    if (given) fail(exit_code::usage, std::string(option) + " does not apply to --kernel " + name + " (only to " + takers + ")");
  };
  if (clutter) refuse(r.length, "--length", "exponential, gaussian and matern");
  else {
    refuse(r.wavelength, "--wavelength", "clutter");
    refuse(r.sector_center, "--sector-center", "clutter");
    refuse(r.sector_width, "--sector-width", "clutter");
  }
  if (k.spec.kind != la::H2Kernel::matern) refuse(r.nu, "--nu", "matern");
  k.spec.variance = r.variance.value_or(k.spec.variance);
  k.spec.length = r.length.value_or(k.spec.length);
  k.spec.nu = r.nu.value_or(k.spec.nu);
  k.spec.wavelength = r.wavelength.value_or(k.spec.wavelength);
  k.spec.sector_center = r.sector_center.value_or(k.spec.sector_center);
  k.spec.sector_width = r.sector_width.value_or(k.spec.sector_width);
  k.text = name + (k.spec.kind == la::H2Kernel::matern ? " ν " + number_text(k.spec.nu) : std::string()) +
           " kernel σ² " + number_text(k.spec.variance);
  if (clutter)
    k.text += ", λ " + number_text(k.spec.wavelength) + ", sector " + number_text(k.spec.sector_center) + " ± " +
              number_text(k.spec.sector_width / 2) + " rad";
  else
    k.text += ", ℓ " + number_text(k.spec.length);
  if (r.nugget > 0) k.text += ", nugget " + number_text(r.nugget);
  return k;
}

template <class T>
int build_typed(const H2BuildRequest& request, const Points& points, const Kernel& kernel, io::NpyDtype dtype,
                std::ostream& out, std::ostream& err) {
  const std::string command = "covflow linalg h2 build";
  la::H2Options options;
  options.leaf_size = request.leaf;
  options.eta = request.eta;
  options.cheb_order = request.order;
  options.nugget = request.nugget;
  la::H2<T> a;
  std::vector<int> built_ranks;
  std::optional<la::H2CompressReport> report;
  const la::Backend backend = on_backend(request.device, command, err, [&](la::Exec& exec) {
    try {
      if (!exec.is_cuda()) {
        a = la::h2_build<T>(exec, points.coordinates, points.dim, kernel.spec, options);
        built_ranks = a.rank;
        if (request.tolerance) {
          la::h2_orthogonalize<T>(exec, a);
          report = la::h2_compress<T>(exec, a, *request.tolerance);
        }
        return;
      }
#if COVFLOW_HAS_CUDA
      // The same steps on the device (h2_build_device, then h2_compress on the H2Device, which
      // orthogonalises first), and the result downloaded for the archive.
      la::H2Device<T> device = la::h2_build_device<T>(exec, points.coordinates, points.dim, kernel.spec, options);
      built_ranks = device.shape().rank;
      if (request.tolerance) report = la::h2_compress<T>(exec, device, *request.tolerance);
      a = la::h2_download<T>(exec, device);
#endif
    } catch (const la::InvalidArgument& e) {
      fail(exit_code::usage, request.points.string() + " " + kernel.text + ": " + e.what());
    }
  });
  store_archive(request.output, h2_members(a, dtype));

  const la::H2Stats stats = la::h2_stats(a);
  std::int64_t couplings = 0;
  for (std::int64_t c : stats.coupling_blocks) couplings += c;
  out << "h2 build: " << points.n << " points in " << points.dim << "-D, " << kernel.text << ", "
      << io::numpy_name(dtype) << " on " << device_name(backend) << ", leaf " << options.leaf_size << ", η "
      << number_text(options.eta) << ", order " << options.cheb_order;
  if (report) out << ", tol " << number_text(report->tolerance);
  out << ": depth " << stats.depth << ", ranks " << ranks_text(stats.ranks) << " by level";
  if (report) out << " (built " << ranks_text(built_ranks) << ")";
  out << ", " << couplings << " coupling and " << stats.dense_blocks << " dense blocks, " << stats.total_bytes << " of "
      << stats.dense_matrix_bytes << " dense bytes ("
      << percent_text(stats.dense_matrix_bytes ? 100.0 * double(stats.total_bytes) / double(stats.dense_matrix_bytes) : 0.0)
      << ") + " << stats.index_bytes << " index bytes";
  if (report) out << ", error ≤ " << number_text(report->error_bound) << " relative to the built matrix (bound)";
  out << ": wrote " << request.output.string() << "\n";
  return exit_code::ok;
}

template <class T>
struct Build {
  static int run(const H2BuildRequest& r, const Points& p, const Kernel& k, io::NpyDtype dtype, std::ostream& out,
                 std::ostream& err) {
    return build_typed<T>(r, p, k, dtype, out, err);
  }
};

// ---- compress --format h2: from a dense matrix ----------------------------------------------------

// ‖A − Aᴴ‖_F / ‖A‖_F of one column-major n × n matrix (0 for the zero matrix).
template <class T>
double asymmetry(const std::vector<T>& a, std::int64_t n) {
  double diff = 0, norm = 0;
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < n; ++i) {
      const T v = a[static_cast<std::size_t>(i + j * n)];
      norm += std::norm(std::complex<double>(v));
      diff += std::norm(std::complex<double>(v) - std::conj(std::complex<double>(a[static_cast<std::size_t>(j + i * n)])));
    }
  return norm > 0 ? std::sqrt(diff / norm) : 0.0;
}

template <class T>
struct FromDense {
  static int run(const CompressRequest& request, const io::NpyArray& input, const Stack& s, const Points& points,
                 std::ostream& out, std::ostream& err) {
    const std::string command = "covflow linalg compress";
    const io::NpyDtype dtype = input.dtype;
    const auto n = static_cast<std::int64_t>(s.rows);
    const std::vector<T> a = to_column_major<T>(input, s);
    for (const T& v : a)
      if (!std::isfinite(std::abs(std::complex<double>(v))))
        fail(exit_code::input_damaged, request.input.string() + ": the matrix holds a NaN or an Inf: nothing to compress");
    // The H² form is Hermitian (it stores one triangle of blocks); a matrix that is not, to within
    // the tolerance asked for, would come back as a different matrix.
    const double skew = asymmetry(a, n);
    if (skew > request.tolerance)
      fail(exit_code::input_damaged, request.input.string() + ": the matrix is not Hermitian: ‖A − Aᴴ‖_F/‖A‖_F = " +
                                         number_text(skew) + " > --tol " + number_text(request.tolerance) +
                                         " (the H² form stores a Hermitian matrix)");
    la::H2Options options;
    options.leaf_size = request.leaf.value_or(options.leaf_size);
    options.eta = request.eta.value_or(options.eta);
    la::H2<T> h;
    la::H2CompressReport report;
    const la::Backend backend = on_backend(request.device, command, err, [&](la::Exec& exec) {
      try {
        if (!exec.is_cuda()) {
          h = la::h2_from_dense<T>(exec, la::Batch<const T>::packed(a.data(), n, n, 1), points.coordinates, points.dim,
                                   request.tolerance, options, &report);
          return;
        }
#if COVFLOW_HAS_CUDA
        exec.cuda_context().make_current();
        la::cuda::DeviceBuffer<T> device_a(a.size());
        device_a.upload(std::span<const T>(a), exec.cuda_context().stream());
        const la::H2Device<T> device = la::h2_from_dense_device<T>(
            exec, la::Batch<const T>::packed(device_a.data(), n, n, 1), points.coordinates, points.dim,
            request.tolerance, options, &report);
        h = la::h2_download<T>(exec, device);
#endif
      } catch (const la::InvalidArgument& e) {
        fail(exit_code::usage, request.input.string() + " on " + request.points.string() + ": " + e.what());
      }
    });
    store_archive(request.output, h2_members(h, dtype));

    const la::H2Stats stats = la::h2_stats(h);
    std::int64_t couplings = 0;
    for (std::int64_t c : stats.coupling_blocks) couplings += c;
    out << "compress: " << request.input.string() << " " << describe(input) << " as H² on " << points.n << " points in "
        << points.dim << "-D, " << io::numpy_name(dtype) << " on " << device_name(backend) << ", leaf "
        << options.leaf_size << ", η " << number_text(options.eta) << ", tol " << number_text(request.tolerance)
        << ": depth " << stats.depth << ", ranks " << ranks_text(stats.ranks) << " by level, " << couplings
        << " coupling and " << stats.dense_blocks << " dense blocks, " << stats.total_bytes << " of "
        << stats.dense_matrix_bytes << " dense bytes ("
        << percent_text(stats.dense_matrix_bytes ? 100.0 * double(stats.total_bytes) / double(stats.dense_matrix_bytes) : 0.0)
        << ") + " << stats.index_bytes << " index bytes, error ≤ " << number_text(report.error_bound)
        << " (bound): wrote " << request.output.string() << "\n";
    return exit_code::ok;
  }
};

// ---- expand, apply -------------------------------------------------------------------------------

template <class T>
struct Expand {
  static int run(const ExpandRequest& request, const H2Reader& r, io::NpyDtype dtype, std::ostream& out,
                 std::ostream& err) {
    const la::H2<T> a = h2_from_members<T>(r, dtype);
    const std::int64_t n = a.tree.n;
    std::vector<T> dense(static_cast<std::size_t>(n * n), nan_of<T>());
    const la::Backend backend = on_backend(request.device, "covflow linalg expand", err, [&](la::Exec& exec) {
      la::h2_expand<T>(exec, a, la::Batch<T>::packed(dense.data(), n, n, 1));
    });
    const Stack s{1, static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(n), false};
    const io::NpyArray result{dtype, {s.rows, s.rows}, false, column_major_to_c_order(dense, s)};
    store(request.output, result);
    out << "expand: " << h2_describe(a, dtype) << " on " << device_name(backend) << ": wrote " << request.output.string()
        << " " << describe(result) << "\n";
    return exit_code::ok;
  }
};

template <class T>
struct Apply {
  static int run(const ApplyRequest& request, const H2Reader& r, io::NpyDtype dtype, const io::NpyArray& x,
                 std::ostream& out, std::ostream& err) {
    const la::H2<T> a = h2_from_members<T>(r, dtype);
    const auto n = static_cast<std::uint64_t>(a.tree.n);
    if (x.dtype != dtype)
      fail(exit_code::input_damaged, request.x.string() + ": dtype " + std::string(io::numpy_name(x.dtype)) +
                                         " differs from the archive's " + std::string(io::numpy_name(dtype)) + " in " +
                                         request.archive.string());
    // X's blocks side by side as one n × (blocks·k) matrix: (n,) one vector, (n, k), (batch, n, k).
    Stack s;
    io::NpyArray as_matrices = x;
    if (x.shape.size() == 1) {
      s = Stack{1, x.shape[0], 1, false};
      as_matrices.shape = {x.shape[0], 1};
    } else {
      s = stack_of(x, request.x, "(n,), (n, k) or (batch, n, k)");
    }
    if (s.rows != n)
      fail(exit_code::input_damaged, request.x.string() + ": shape " + describe(x) + " does not fit the " +
                                         h2_describe(a, dtype) + " of " + request.archive.string() +
                                         ": its matrix needs n = " + std::to_string(n) + " rows");
    const std::vector<T> xs = to_column_major<T>(as_matrices, s);
    std::vector<T> y(xs.size(), nan_of<T>());
    const auto nvec = static_cast<std::int64_t>(s.count * s.cols);
    const la::Backend backend = on_backend(request.device, "covflow linalg apply", err, [&](la::Exec& exec) {
      if (y.empty()) return;
      if (!exec.is_cuda()) {
        la::h2_gemv<T>(exec, T(1), a, la::Batch<const T>::packed(xs.data(), a.tree.n, nvec, 1), T(0),
                       la::Batch<T>::packed(y.data(), a.tree.n, nvec, 1));
        return;
      }
#if COVFLOW_HAS_CUDA
      // h2_upload, then h2_gemv on the device.
      exec.cuda_context().make_current();
      const cudaStream_t stream = exec.cuda_context().stream();
      const la::H2Device<T> device = la::h2_upload<T>(exec, a);
      la::cuda::DeviceBuffer<T> xd(xs.size()), yd(y.size());
      xd.upload(std::span<const T>(xs), stream);
      la::h2_gemv<T>(exec, T(1), device, la::Batch<const T>::packed(xd.data(), a.tree.n, nvec, 1), T(0),
                     la::Batch<T>::packed(yd.data(), a.tree.n, nvec, 1));
      yd.download(std::span<T>(y), stream);
      exec.synchronize();
#endif
    });
    const io::NpyArray result{dtype, x.shape, false, column_major_to_c_order(y, s)};
    store(request.output, result);
    out << "apply: " << h2_describe(a, dtype) << " times " << request.x.string() << " " << describe(x) << " on "
        << device_name(backend) << ": wrote " << request.output.string() << " " << describe(result) << "\n";
    return exit_code::ok;
  }
};

}  // namespace

namespace detail {

int h2_expand_archive(const ExpandRequest& request, const std::vector<io::NpzMember>& members, std::ostream& out,
                      std::ostream& err) {
  const H2Reader r(members, request.input);
  const io::NpyDtype dtype = h2_dtype(r);
  return by_dtype<Expand>(dtype, request, r, dtype, out, err);
}

int h2_compress_dense(const CompressRequest& request, std::ostream& out, std::ostream& err) {
  if (request.points.empty())
    fail(exit_code::usage, "--format h2 needs --points P.npy: the points of the matrix's rows and columns (n, d)");
  if (request.tile != 0 || request.max_rank || request.scope != la::TlrScope::matrix)
    fail(exit_code::usage, "--tile, --max-rank and --scope belong to --format tlr, not --format h2");
  if (request.output.empty()) fail(exit_code::usage, "--out is required");
  if (!(request.tolerance > 0) || !std::isfinite(request.tolerance))
    fail(exit_code::usage, "--tol must be a positive number, got " + number_text(request.tolerance));
  if (request.leaf && (*request.leaf < 1 || *request.leaf > kInt32Max))
    fail(exit_code::usage, "--leaf must be at least 1 (and fit 32 bits), got " + std::to_string(*request.leaf));
  if (request.eta && (!(*request.eta > 0) || !std::isfinite(*request.eta)))
    fail(exit_code::usage, "--eta must be a positive number, got " + number_text(*request.eta));
  if (request.input == request.output) fail(exit_code::usage, "--out names the same file as the input");
  if (request.points == request.output) fail(exit_code::usage, "--out names the same file as --points");
  const io::NpyArray input = load(request.input);
  const Stack s = stack_of(input, request.input, "(n, n) or (1, n, n): one matrix");
  if (s.rows != s.cols)
    fail(exit_code::input_damaged, request.input.string() + ": the matrix must be square, got shape " + describe(input));
  if (s.count != 1)
    fail(exit_code::usage, request.input.string() + ": shape " + describe(input) +
                               " holds " + std::to_string(s.count) + " matrices; an H² archive holds one (compress them one by one)");
  const Points points = load_points(request.points);
  if (static_cast<std::uint64_t>(points.n) != s.rows)
    fail(exit_code::input_damaged, request.points.string() + ": " + std::to_string(points.n) + " points, but the matrix of " +
                                       request.input.string() + " is " + std::to_string(s.rows) + " × " + std::to_string(s.rows));
  return by_dtype<FromDense>(input.dtype, request, input, s, points, out, err);
}

int h2_apply_archive(const ApplyRequest& request, const std::vector<io::NpzMember>& members, std::ostream& out,
                     std::ostream& err) {
  const H2Reader r(members, request.archive);
  const io::NpyDtype dtype = h2_dtype(r);
  const io::NpyArray x = load(request.x);
  return by_dtype<Apply>(dtype, request, r, dtype, x, out, err);
}

}  // namespace detail

int run_h2_build(const H2BuildRequest& request, std::ostream& out, std::ostream& err) {
  return guarded("covflow linalg h2 build", err, [&]() -> int {
    if (request.points.empty()) fail(exit_code::usage, "--points is required (P.npy: (n, d) coordinates, d = 1, 2 or 3)");
    if (request.output.empty()) fail(exit_code::usage, "--out is required");
    if (request.points == request.output) fail(exit_code::usage, "--out names the same file as --points");
    const Kernel kernel = parse_kernel(request);
    const bool clutter = kernel.spec.kind == la::H2Kernel::clutter;
    io::NpyDtype dtype = clutter ? io::NpyDtype::complex128 : io::NpyDtype::float64;
    if (request.dtype == "complex128") dtype = io::NpyDtype::complex128;
    else if (request.dtype == "complex64") dtype = io::NpyDtype::complex64;
    else if (request.dtype == "float64") dtype = io::NpyDtype::float64;
    else if (request.dtype == "float32") dtype = io::NpyDtype::float32;
    else if (!request.dtype.empty())
      fail(exit_code::usage, "--dtype " + request.dtype + ": expected complex128, complex64, float64 or float32");
    if (clutter && !io::is_complex(dtype))
      fail(exit_code::usage, "--kernel clutter is a complex (Hermitian) covariance and --dtype " + request.dtype +
                                 " is real: use complex128 or complex64");
    if (request.leaf < 1 || request.leaf > kInt32Max)
      fail(exit_code::usage, "--leaf must be at least 1 (and fit 32 bits), got " + std::to_string(request.leaf));
    if (!(request.eta > 0) || !std::isfinite(request.eta))
      fail(exit_code::usage, "--eta must be a positive number, got " + number_text(request.eta));
    if (request.order < 1 || request.order > 32)
      fail(exit_code::usage, "--order must lie in 1 … 32, got " + std::to_string(request.order));
    if (request.tolerance && (!(*request.tolerance > 0) || !std::isfinite(*request.tolerance)))
      fail(exit_code::usage, "--tol must be a positive number, got " + number_text(*request.tolerance));
    const Points points = load_points(request.points);
    return by_dtype<Build>(dtype, request, points, kernel, dtype, out, err);
  });
}

}  // namespace covflow::cli

// `covflow linalg compress`, `expand`, `apply`, and `solve` on a TLR archive: tile low-rank
// matrices (covflow/linalg/tlr.hpp) on NumPy files, the compressed form in an .npz archive whose
// layout docs/cli.md documents for numpy users.
//
// Orientation. Each matrix is copied from the file into a packed column-major batch
// (linalg_cli_support.hpp), so the library's A(i, j) is numpy's A[i, j]. The library keeps each
// tile column-major (ld b); the archive holds it as numpy indexes it, so every tile is transposed
// on the way out and back: diag[c, t][r, s] is the library's diagonal tile t at (r, s), and
// u[c, s][r, k] is column k of the tile's U at row r — then numpy's u[c, s] @ v[c, s].conj().T is
// the library's U·Vᴴ, the tile (tile_row[s], tile_col[s]) of A as numpy indexes it.
//
// An archive of one (n, n) matrix has no batch axis (diag (nt, b, b), ...), as the other commands
// write (n, ...) for one matrix; expand gives back an (n, n) array for it.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
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
#include "covflow/linalg/tlr.hpp"
#include "covflow/linalg/types.hpp"

#if COVFLOW_HAS_CUDA
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::cli {

using namespace detail;

namespace {

constexpr std::int32_t kFormatVersion = 1;

// A host array as the Exec sees it: the array itself on the CPU; on a CUDA Exec a device copy,
// uploaded when made (when `upload`) and downloaded by back(). The library's TLR storage is one
// block whose parts sit at offsets from its start (tlr_view), so a copy of the block is a copy
// of the matrices, wherever it lives.
template <class T>
class Where {
 public:
  Where(la::Exec& exec, std::span<T> host, bool upload) : host_(host) {
#if COVFLOW_HAS_CUDA
    if (exec.is_cuda()) {
      exec.cuda_context().make_current();
      device_ = la::cuda::DeviceBuffer<std::remove_const_t<T>>(host.size());
      if (upload) device_.upload(std::span<const std::remove_const_t<T>>(host), exec.cuda_context().stream());
      cuda_ = true;
    }
#else
    (void)exec;
    (void)upload;
#endif
  }
  T* data() const {
#if COVFLOW_HAS_CUDA
    if (cuda_) return device_.data();
#endif
    return host_.data();
  }
  std::span<T> span() const { return {data(), host_.size()}; }
  // The device copy back into the host array, and the wait for it (nothing on the CPU).
  void back(la::Exec& exec)
    requires(!std::is_const_v<T>)
  {
#if COVFLOW_HAS_CUDA
    if (cuda_) {
      device_.download(host_, exec.cuda_context().stream());
      exec.synchronize();
    }
#else
    (void)exec;
#endif
  }

 private:
  std::span<T> host_;
  bool cuda_ = false;
#if COVFLOW_HAS_CUDA
  la::cuda::DeviceBuffer<std::remove_const_t<T>> device_;
#endif
};


// A library call refusing what the command line chose (a tolerance the precision cannot reach, a
// tile too large) is a usage error, in the library's words after the input.
template <class Body>
void options_checked(const path& input, const std::string& described, Body&& body) {
  try {
    body();
  } catch (const la::InvalidArgument& e) {
    fail(exit_code::usage, input.string() + " " + described + ": " + e.what());
  }
}

// 256-byte aligned host storage for tlr_view (operator new's alignment is 16 bytes at most).
struct AlignedBytes {
  std::vector<std::byte> raw;
  std::span<std::byte> span;
  explicit AlignedBytes(std::size_t bytes) : raw(bytes + 256) {
    const auto address = reinterpret_cast<std::uintptr_t>(raw.data());
    const std::size_t skip = (256 - address % 256) % 256;
    span = std::span<std::byte>(raw.data() + skip, bytes);
  }
};

// ---- the archive -------------------------------------------------------------------------------

io::NpyArray int32_scalar(std::int32_t value) {
  io::NpyArray a{io::NpyDtype::int32, {}, false, std::vector<std::byte>(4)};
  std::memcpy(a.bytes.data(), &value, 4);
  return a;
}

std::vector<std::uint64_t> with_batch(bool batched, std::uint64_t count, std::vector<std::uint64_t> shape) {
  if (batched) shape.insert(shape.begin(), count);
  return shape;
}

// The tile (row, column) of each slot, in the library's slot order.
struct Tile {
  std::int64_t row = 0, col = 0;
};
std::vector<Tile> slot_tiles(const la::TlrShape& s) {
  std::vector<Tile> tiles(static_cast<std::size_t>(s.slots()));
  for (std::int64_t i = 0; i < s.tiles(); ++i)
    for (std::int64_t j = 0; j < s.tiles(); ++j)
      if (i != j && (!s.hermitian || i > j)) tiles[static_cast<std::size_t>(s.slot(i, j))] = {i, j};
  return tiles;
}

// The library's storage of `t` as the archive's members (transposing each tile).
template <class T>
std::vector<io::NpzMember> archive_members(const la::Tlr<const T>& t, bool batched, io::NpyDtype dtype,
                                           double tolerance) {
  const la::TlrShape& s = t.shape;
  const auto b = static_cast<std::uint64_t>(s.tile), k = static_cast<std::uint64_t>(s.max_rank);
  const auto nt = static_cast<std::uint64_t>(s.tiles()), slots = static_cast<std::uint64_t>(s.slots());
  const auto count = static_cast<std::uint64_t>(s.count);
  // Column-major rows × cols blocks → C order, block after block.
  auto transposed = [](const T* from, std::uint64_t blocks, std::uint64_t rows, std::uint64_t cols) {
    std::vector<std::byte> out(blocks * rows * cols * sizeof(T));
    for (std::uint64_t q = 0; q < blocks; ++q)
      for (std::uint64_t r = 0; r < rows; ++r)
        for (std::uint64_t c = 0; c < cols; ++c)
          std::memcpy(out.data() + ((q * rows + r) * cols + c) * sizeof(T), from + q * rows * cols + r + c * rows,
                      sizeof(T));
    return out;
  };
  std::vector<io::NpzMember> members;
  members.push_back({"diag", {dtype, with_batch(batched, count, {nt, b, b}), false, transposed(t.diag, count * nt, b, b)}});
  members.push_back({"u", {dtype, with_batch(batched, count, {slots, b, k}), false,
                           slots == 0 ? std::vector<std::byte>{} : transposed(t.u, count * slots, b, k)}});
  members.push_back({"v", {dtype, with_batch(batched, count, {slots, b, k}), false,
                           slots == 0 ? std::vector<std::byte>{} : transposed(t.v, count * slots, b, k)}});
  std::vector<std::int32_t> ranks(count * slots), rows, cols;
  if (!ranks.empty()) std::memcpy(ranks.data(), t.rank, ranks.size() * sizeof(std::int32_t));
  for (const Tile& tile : slot_tiles(s)) {
    rows.push_back(static_cast<std::int32_t>(tile.row));
    cols.push_back(static_cast<std::int32_t>(tile.col));
  }
  members.push_back({"rank", {io::NpyDtype::int32, with_batch(batched, count, {slots}), false, raw_bytes(ranks)}});
  members.push_back({"tile_row", {io::NpyDtype::int32, {slots}, false, raw_bytes(rows)}});
  members.push_back({"tile_col", {io::NpyDtype::int32, {slots}, false, raw_bytes(cols)}});
  members.push_back({"n", int32_scalar(static_cast<std::int32_t>(s.n))});
  members.push_back({"tile", int32_scalar(static_cast<std::int32_t>(s.tile))});
  members.push_back({"hermitian", int32_scalar(s.hermitian ? 1 : 0)});
  io::NpyArray tol{io::NpyDtype::float64, {}, false, std::vector<std::byte>(8)};
  std::memcpy(tol.bytes.data(), &tolerance, 8);
  members.push_back({"tolerance", tol});
  members.push_back({"format_version", int32_scalar(kFormatVersion)});
  return members;
}

void store_archive(const path& file, const std::vector<io::NpzMember>& members) {
  try {
    io::write_npz(file, members);
  } catch (const io::NpyError& e) {
    fail(e.kind() == io::NpyError::Kind::io ? exit_code::io : exit_code::internal_error, e.what());
  }
}

// An archive read and checked against the layout: every member there, of the documented dtype and
// a shape that agrees with n, tile and hermitian.
struct Archive {
  std::vector<io::NpzMember> members;
  la::TlrShape shape;
  io::NpyDtype dtype = io::NpyDtype::float64;
  bool batched = false;
  double tolerance = 0;  // compress's --tol; 0 when the archive does not say
  const io::NpyArray* diag = nullptr;
  const io::NpyArray* u = nullptr;
  const io::NpyArray* v = nullptr;
  const io::NpyArray* rank = nullptr;

  // "(2 matrices n 64, tile 16, Hermitian) complex128"
  std::string describe() const {
    return std::string("TLR ") + (batched ? std::to_string(shape.count) + " matrices" : std::string("one matrix")) +
           " n " + std::to_string(shape.n) + ", tile " + std::to_string(shape.tile) +
           (shape.hermitian ? ", Hermitian" : "") + ", " + std::string(io::numpy_name(dtype));
  }
};

Archive load_archive(const path& file, std::vector<io::NpzMember> members) {
  Archive a;
  a.members = std::move(members);
  const std::string where = file.string();
  auto damaged = [&](const std::string& what) {
    fail(exit_code::input_damaged, where + ": not a covflow TLR archive: " + what);
  };
  auto member = [&](const char* name) -> const io::NpyArray& {
    const io::NpzMember* m = io::find_member(a.members, name);
    if (m == nullptr) damaged(std::string("no member '") + name + "' (covflow linalg compress writes it; docs/cli.md)");
    return m->array;
  };
  auto scalar = [&](const char* name) -> std::int64_t {
    const io::NpyArray& m = member(name);
    if (m.dtype != io::NpyDtype::int32 || !m.shape.empty())
      damaged(std::string("'") + name + "' is " + describe(m) + ", expected () int32");
    std::int32_t value = 0;
    std::memcpy(&value, m.bytes.data(), 4);
    return value;
  };
  const std::int64_t version = scalar("format_version");
  if (version != kFormatVersion)
    fail(exit_code::input_damaged, where + ": TLR archive format_version " + std::to_string(version) +
                                       ", this covflow reads version " + std::to_string(kFormatVersion));
  a.shape.n = scalar("n");
  a.shape.tile = scalar("tile");
  const std::int64_t hermitian = scalar("hermitian");
  if (a.shape.n < 0) damaged("n is " + std::to_string(a.shape.n));
  if (a.shape.tile < 1) damaged("tile is " + std::to_string(a.shape.tile));
  if (hermitian != 0 && hermitian != 1) damaged("hermitian is " + std::to_string(hermitian) + ", expected 0 or 1");
  a.shape.hermitian = hermitian == 1;
  a.diag = &member("diag");
  a.u = &member("u");
  a.v = &member("v");
  a.rank = &member("rank");
  a.dtype = a.diag->dtype;
  require_matrix_dtype(*a.diag, where + ": diag.npy");
  a.batched = a.diag->shape.size() == 4;
  if (a.diag->shape.size() != 3 && a.diag->shape.size() != 4)
    damaged("'diag' is " + describe(*a.diag) + ", expected (batch, nt, b, b) or (nt, b, b)");
  const std::uint64_t count = a.batched ? a.diag->shape[0] : 1;
  if (count > kMaxBatchCount) damaged("'diag' holds " + std::to_string(count) + " matrices, more than a batch may hold");
  a.shape.count = static_cast<std::int64_t>(count);
  const auto b = static_cast<std::uint64_t>(a.shape.tile), nt = static_cast<std::uint64_t>(a.shape.tiles());
  const auto slots = static_cast<std::uint64_t>(a.shape.slots());
  const std::vector<std::uint64_t> diag_shape = with_batch(a.batched, count, {nt, b, b});
  if (a.diag->shape != diag_shape)
    damaged("'diag' is " + describe(*a.diag) + ", expected " + io::format_shape(diag_shape) + " for n " +
            std::to_string(a.shape.n) + " and tile " + std::to_string(a.shape.tile));
  if (a.u->shape.size() != diag_shape.size()) damaged("'u' is " + describe(*a.u) + ", expected (batch, slots, b, max_rank)");
  a.shape.max_rank = static_cast<std::int64_t>(a.u->shape.back());
  const std::vector<std::uint64_t> factor_shape = with_batch(a.batched, count, {slots, b, a.u->shape.back()});
  for (const auto& [name, m] : {std::pair{"u", a.u}, std::pair{"v", a.v}}) {
    if (m->dtype != a.dtype || m->shape != factor_shape)
      damaged(std::string("'") + name + "' is " + describe(*m) + ", expected " + io::format_shape(factor_shape) + " " +
              std::string(io::numpy_name(a.dtype)) + " (" + std::to_string(slots) + " slots of " +
              (a.shape.hermitian ? "a Hermitian" : "a general") + " matrix of " + std::to_string(nt) + " × " +
              std::to_string(nt) + " tiles)");
  }
  if (a.shape.max_rank < 1 || a.shape.max_rank > a.shape.tile)
    damaged("max_rank (the last axis of 'u') is " + std::to_string(a.shape.max_rank) + ", expected 1 … tile");
  const std::vector<std::uint64_t> rank_shape = with_batch(a.batched, count, {slots});
  if (a.rank->dtype != io::NpyDtype::int32 || a.rank->shape != rank_shape)
    damaged("'rank' is " + describe(*a.rank) + ", expected " + io::format_shape(rank_shape) + " int32");
  for (std::uint64_t i = 0; i < count * slots; ++i) {
    std::int32_t k = 0;
    std::memcpy(&k, a.rank->bytes.data() + i * 4, 4);
    if (k < 0 || k > a.shape.max_rank)
      damaged("rank " + std::to_string(k) + " at flat index " + std::to_string(i) + " is outside 0 … " +
              std::to_string(a.shape.max_rank));
  }
  // The slots must be in the library's order: tile_row and tile_col say which tile each is.
  for (const char* name : {"tile_row", "tile_col"}) {
    const io::NpyArray& m = member(name);
    if (m.dtype != io::NpyDtype::int32 || m.shape != std::vector<std::uint64_t>{slots})
      damaged(std::string("'") + name + "' is " + describe(m) + ", expected (" + std::to_string(slots) + ",) int32");
  }
  const io::NpyArray& rows = member("tile_row");
  const io::NpyArray& cols = member("tile_col");
  const std::vector<Tile> tiles = slot_tiles(a.shape);
  for (std::size_t s = 0; s < tiles.size(); ++s) {
    std::int32_t r = 0, c = 0;
    std::memcpy(&r, rows.bytes.data() + s * 4, 4);
    std::memcpy(&c, cols.bytes.data() + s * 4, 4);
    if (r != tiles[s].row || c != tiles[s].col)
      damaged("slot " + std::to_string(s) + " holds tile (" + std::to_string(r) + ", " + std::to_string(c) +
              "), covflow's slot order puts tile (" + std::to_string(tiles[s].row) + ", " +
              std::to_string(tiles[s].col) + ") there");
  }
  if (const io::NpzMember* tol = io::find_member(a.members, "tolerance")) {
    if (tol->array.dtype != io::NpyDtype::float64 || !tol->array.shape.empty())
      damaged("'tolerance' is " + describe(tol->array) + ", expected () float64");
    std::memcpy(&a.tolerance, tol->array.bytes.data(), 8);
    if (!(a.tolerance > 0) || !std::isfinite(a.tolerance)) damaged("tolerance is " + number_text(a.tolerance));
  }
  try {
    la::validate(a.shape, "TLR archive", "shape");
  } catch (const la::InvalidArgument& e) {
    damaged(e.what());
  }
  return a;
}

// A TLR archive, or a Failure naming the archive when it holds another compressed form.
Archive load_archive(const path& file, const char* command) {
  std::vector<io::NpzMember> members = read_archive(file);
  if (archive_format(members, file) != ArchiveFormat::tlr)
    fail(exit_code::input_damaged, file.string() + ": an H² archive (covflow linalg h2 build); " + command +
                                       " takes TLR archives (covflow linalg compress)");
  return load_archive(file, std::move(members));
}

// The archive's tiles in the library's storage: transposed back to column-major, the padding of
// a ragged last diagonal tile set to the identity and everything past a tile's rows and rank to
// zero, as the library keeps them.
template <class T>
la::Tlr<T> to_library(const Archive& a, AlignedBytes& storage) {
  la::Tlr<T> t = la::tlr_view<T>(a.shape, storage.span);
  const la::TlrShape& s = a.shape;
  const std::int64_t b = s.tile, k = s.max_rank, nt = s.tiles(), slots = s.slots();
  auto untransposed = [](const io::NpyArray& from, T* to, std::int64_t blocks, std::int64_t rows, std::int64_t cols) {
    for (std::int64_t q = 0; q < blocks; ++q)
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          std::memcpy(to + q * rows * cols + r + c * rows,
                      from.bytes.data() + static_cast<std::size_t>((q * rows + r) * cols + c) * sizeof(T), sizeof(T));
  };
  untransposed(*a.diag, t.diag, s.count * nt, b, b);
  if (slots > 0) {
    untransposed(*a.u, t.u, s.count * slots, b, k);
    untransposed(*a.v, t.v, s.count * slots, b, k);
    std::memcpy(t.rank, a.rank->bytes.data(), static_cast<std::size_t>(s.count * slots) * sizeof(int));
  }
  if (nt == 0) return t;
  const std::vector<Tile> tiles = slot_tiles(s);
  const std::int64_t used = s.rows(nt - 1);
  for (std::int64_t c = 0; c < s.count; ++c) {
    T* last = t.diag_tile(c, nt - 1);
    for (std::int64_t col = 0; col < b; ++col)
      for (std::int64_t row = 0; row < b; ++row)
        if (row >= used || col >= used) last[row + col * b] = row == col ? T(1) : T(0);
    for (std::int64_t slot = 0; slot < slots; ++slot) {
      const int rank = t.rank[c * slots + slot];
      const std::int64_t u_rows = s.rows(tiles[slot].row), v_rows = s.rows(tiles[slot].col);
      for (auto [factor, used_rows] : {std::pair{t.u_tile(c, slot), u_rows}, std::pair{t.v_tile(c, slot), v_rows}})
        for (std::int64_t col = 0; col < k; ++col)
          for (std::int64_t row = 0; row < b; ++row)
            if (row >= used_rows || col >= rank) factor[row + col * b] = T(0);
    }
  }
  return t;
}

// ---- right-hand sides ----------------------------------------------------------------------------

// How the archive's matrices meet X's (or B's) blocks: numpy's shapes, as linalg solve takes them
// (solve_cli.cpp): (n,) one vector for every matrix; (n, k) one block for every matrix; (batch', n, k)
// with the batches equal or one of them 1.
struct RhsPlan {
  std::uint64_t n = 0, k = 0, x_blocks = 1, y_count = 1;
  bool vector = false, x_batched = false;
  std::vector<std::uint64_t> y_shape;
};

RhsPlan plan_rhs(const Archive& a, const path& archive_file, const io::NpyArray& x, const path& x_file) {
  RhsPlan p;
  p.n = static_cast<std::uint64_t>(a.shape.n);
  if (x.dtype != a.dtype)
    fail(exit_code::input_damaged, x_file.string() + ": dtype " + std::string(io::numpy_name(x.dtype)) +
                                       " differs from the archive's " + std::string(io::numpy_name(a.dtype)) + " in " +
                                       archive_file.string());
  const auto misfit = [&](const std::string& why) {
    fail(exit_code::input_damaged, x_file.string() + ": shape " + describe(x) + " does not fit the " + a.describe() +
                                       " of " + archive_file.string() + ": " + why);
  };
  Stack s;
  if (x.shape.size() == 1) {
    p.vector = true;
    s = Stack{1, x.shape[0], 1, false};
  } else {
    s = stack_of(x, x_file, "(n,), (n, k) or (batch, n, k)");
  }
  if (s.rows != p.n) misfit("its matrices need n = " + std::to_string(p.n) + " rows");
  p.k = s.cols;
  p.x_blocks = s.count;
  p.x_batched = s.batched;
  const auto count = static_cast<std::uint64_t>(a.shape.count);
  if (count != p.x_blocks && count != 1 && p.x_blocks != 1)
    misfit("batches of " + std::to_string(count) + " and " + std::to_string(p.x_blocks) +
           " do not broadcast (numpy's rule: equal, or one of them 1)");
  p.y_count = count == 1 ? p.x_blocks : count;
  if (p.vector) p.y_shape = with_batch(a.batched, count, {p.n});
  else p.y_shape = with_batch(a.batched || p.x_batched, p.y_count, {p.n, p.k});
  return p;
}

// X's blocks as the library takes them beside `count` matrices: one n × (blocks·k) block when
// there is one matrix, else one n × k block per matrix (X's one block copied where it broadcasts).
template <class T>
std::vector<T> rhs_for_library(const io::NpyArray& x, const RhsPlan& p, std::int64_t count) {
  const Stack s{p.x_blocks, p.n, p.k, true};
  io::NpyArray as_matrices = x;
  if (p.vector) as_matrices.shape = {p.n, 1};
  std::vector<T> blocks = to_column_major<T>(as_matrices, s);
  if (count == 1 || p.x_blocks != 1) return blocks;
  std::vector<T> out(static_cast<std::size_t>(count) * blocks.size());
  for (std::int64_t c = 0; c < count; ++c) std::copy(blocks.begin(), blocks.end(), out.begin() + c * blocks.size());
  return out;
}

// The library's result back in numpy's shape.
template <class T>
io::NpyArray result_array(const std::vector<T>& y, const RhsPlan& p, io::NpyDtype dtype) {
  return {dtype, p.y_shape, false,
          y.empty() ? std::vector<std::byte>{} : column_major_to_c_order(y, Stack{p.y_count, p.n, p.k, true})};
}

// ---- compress ------------------------------------------------------------------------------------

std::string tlr_reason(const la::TlrInfo& info) {
  switch (info.status) {
    case la::tlr_status::non_finite_input: return "NaN or Inf in the matrix";
    case la::tlr_status::svd_failed: return "a tile's SVD did not converge";
    case la::tlr_status::not_positive_definite:
      return "not positive definite at column " + std::to_string(info.column - 1) + ", counted from 0";
    default: return "status " + std::to_string(info.status);
  }
}

bool tlr_failed(const la::TlrInfo& info) {
  return info.status != la::tlr_status::ok && info.status != la::tlr_status::max_rank_reached;
}

template <class T>
int compress_typed(const CompressRequest& request, const io::NpyArray& input, const Stack& s, std::ostream& out,
                   std::ostream& err) {
  const std::string command = "covflow linalg compress";
  la::TlrShape shape;
  shape.n = static_cast<std::int64_t>(s.rows);
  shape.tile = request.tile;
  shape.max_rank = request.max_rank.value_or(request.tile);
  shape.count = static_cast<std::int64_t>(s.count);
  shape.hermitian = request.hermitian;
  const la::TlrOptions options{request.tolerance, request.scope};

  const std::vector<T> a = to_column_major<T>(input, s);
  std::vector<la::TlrInfo> info(s.count);
  std::size_t bytes = 0;
  options_checked(request.input, describe(input), [&] { bytes = la::tlr_bytes(la::element_type_of<T>(), shape); });
  AlignedBytes storage(bytes);
  la::Tlr<T> tlr = la::tlr_view<T>(shape, storage.span);
  const la::Backend backend = on_backend(request.device, command, err, [&](la::Exec& exec) {
    Where<const T> dense(exec, std::span<const T>(a), true);
    Where<std::byte> tiles(exec, storage.span, false);
    Where<la::TlrInfo> infos(exec, std::span(info), false);
    std::vector<std::byte> workspace_host(la::tlr_compress_workspace<T>(exec, shape));
    Where<std::byte> workspace(exec, std::span(workspace_host), false);
    options_checked(request.input, describe(input), [&] {
      la::tlr_compress<T>(exec, la::Batch<const T>::packed(dense.data(), shape.n, shape.n, shape.count),
                          la::tlr_view<T>(shape, tiles.span()), infos.span(), workspace.span(), options);
    });
    tiles.back(exec);
    infos.back(exec);
  });

  const std::vector<io::NpzMember> members = archive_members<T>(tlr, s.batched, input.dtype, request.tolerance);
  store_archive(request.output, members);

  const std::vector<int> ranks(tlr.rank, tlr.rank + shape.count * shape.slots());
  const la::TlrStats stats = la::tlr_stats(la::element_type_of<T>(), shape, ranks);
  double error = 0, norm = 0;
  std::uint64_t capped = 0, capped_matrices = 0;
  for (const la::TlrInfo& i : info) {
    error = std::max(error, i.norm > 0 ? i.error / i.norm : i.error);
    norm = std::max(norm, i.norm);
    capped += static_cast<std::uint64_t>(i.capped_tiles);
    if (i.status == la::tlr_status::max_rank_reached) ++capped_matrices;
  }
  out << "compress: " << matrices_phrase(s) << " " << io::numpy_name(input.dtype) << " on " << device_name(backend)
      << ", tlr tile " << shape.tile << ", tol " << number_text(request.tolerance) << " ("
      << (request.scope == la::TlrScope::tile ? "per tile" : "whole matrix") << ")"
      << (shape.hermitian ? ", Hermitian" : "") << ": ranks " << stats.min_rank << "/" << number_text(stats.mean_rank)
      << "/" << stats.max_rank << " (min/mean/max of " << shape.max_rank << "), "
      << stats.compact_bytes << " of " << stats.dense_bytes << " dense bytes ("
      << percent_text(stats.dense_bytes ? 100.0 * double(stats.compact_bytes) / double(stats.dense_bytes) : 0.0)
      << "), error ≤ " << number_text(error) << " relative: wrote " << request.output.string() << "\n";
  if (capped_matrices > 0)
    out << "compress: note: " << capped << " tiles of " << capped_matrices
        << (capped_matrices == 1 ? " matrix" : " matrices") << " needed more than --max-rank " << shape.max_rank
        << " and were cut there: their error is above the tolerance\n";
  FailedMatrices failures;
  for (std::size_t c = 0; c < info.size(); ++c)
    if (tlr_failed(info[c])) failures.add(c, tlr_reason(info[c]));
  return failures.report(err, command, request.input, s, request.output.string());
}

// ---- expand, apply, solve ------------------------------------------------------------------------

template <class T>
int expand_typed(const ExpandRequest& request, const Archive& a, std::ostream& out, std::ostream& err) {
  AlignedBytes storage(la::tlr_bytes(la::element_type_of<T>(), a.shape));
  to_library<T>(a, storage);
  const Stack s{static_cast<std::uint64_t>(a.shape.count), static_cast<std::uint64_t>(a.shape.n),
                static_cast<std::uint64_t>(a.shape.n), a.batched};
  std::vector<T> dense(static_cast<std::size_t>(s.count * s.matrix_elements()), nan_of<T>());
  const la::Backend backend = on_backend(request.device, "covflow linalg expand", err, [&](la::Exec& exec) {
    Where<std::byte> tiles(exec, storage.span, true);
    Where<T> out(exec, std::span(dense), false);
    la::tlr_expand<T>(exec, la::Tlr<const T>(la::tlr_view<T>(a.shape, tiles.span())),
                      la::Batch<T>::packed(out.data(), a.shape.n, a.shape.n, a.shape.count));
    out.back(exec);
  });
  const io::NpyArray result{a.dtype, with_batch(a.batched, s.count, {s.rows, s.rows}), false,
                            column_major_to_c_order(dense, s)};
  store(request.output, result);
  out << "expand: " << a.describe() << " on " << device_name(backend) << ": wrote " << request.output.string() << " "
      << describe(result) << "\n";
  return exit_code::ok;
}

template <class T>
int apply_typed(const ApplyRequest& request, const Archive& a, const io::NpyArray& x, const RhsPlan& p,
                std::ostream& out, std::ostream& err) {
  AlignedBytes storage(la::tlr_bytes(la::element_type_of<T>(), a.shape));
  to_library<T>(a, storage);
  const std::int64_t count = a.shape.count, n = a.shape.n;
  const std::int64_t nrhs = static_cast<std::int64_t>(count == 1 ? p.y_count * p.k : p.k);
  const std::vector<T> xs = rhs_for_library<T>(x, p, count);
  std::vector<T> y(xs.size(), nan_of<T>());
  const la::Backend backend = on_backend(request.device, "covflow linalg apply", err, [&](la::Exec& exec) {
    if (y.empty()) return;
    Where<std::byte> tiles(exec, storage.span, true);
    Where<const T> x_at(exec, std::span<const T>(xs), true);
    Where<T> y_at(exec, std::span(y), false);
    std::vector<std::byte> workspace_host(la::tlr_gemv_workspace<T>(exec, a.shape, nrhs));
    Where<std::byte> workspace(exec, std::span(workspace_host), false);
    la::tlr_gemv<T>(exec, la::Op::none, T(1), la::Tlr<const T>(la::tlr_view<T>(a.shape, tiles.span())),
                    la::Batch<const T>::packed(x_at.data(), n, nrhs, count), T(0),
                    la::Batch<T>::packed(y_at.data(), n, nrhs, count), workspace.span());
    y_at.back(exec);
  });
  const io::NpyArray result = result_array(y, p, a.dtype);
  store(request.output, result);
  out << "apply: " << a.describe() << " times " << request.x.string() << " " << describe(x) << " on "
      << device_name(backend) << ": wrote " << request.output.string() << " " << describe(result) << "\n";
  return exit_code::ok;
}

template <class T>
int tlr_solve_typed(const SolveRequest& request, const Archive& a, const io::NpyArray& b_file, const RhsPlan& p,
                    std::ostream& out, std::ostream& err) {
  const std::string command = "covflow linalg solve";
  AlignedBytes storage(la::tlr_bytes(la::element_type_of<T>(), a.shape));
  to_library<T>(a, storage);
  const std::int64_t count = a.shape.count, n = a.shape.n;
  const std::int64_t nrhs = static_cast<std::int64_t>(count == 1 ? p.y_count * p.k : p.k);
  std::vector<T> x = rhs_for_library<T>(b_file, p, count);
  std::vector<la::TlrInfo> info(static_cast<std::size_t>(count));
  // The trailing updates are recompressed to the accuracy the archive was compressed to (or, for an
  // archive that does not say, near the precision's reach).
  la::TlrOptions options;
  options.tolerance = a.tolerance > 0 ? a.tolerance : (std::is_same_v<la::real_t<T>, float> ? 1e-6 : 1e-12);
  const la::Backend backend = on_backend(request.device, command, err, [&](la::Exec& exec) {
    Where<std::byte> tiles(exec, storage.span, true);
    Where<la::TlrInfo> infos(exec, std::span(info), false);
    const la::Tlr<T> factor = la::tlr_view<T>(a.shape, tiles.span());
    std::vector<std::byte> workspace_host(
        std::max(la::tlr_potrf_workspace<T>(exec, a.shape), la::tlr_potrs_workspace<T>(exec, a.shape, nrhs)));
    Where<std::byte> workspace(exec, std::span(workspace_host), false);
    la::tlr_potrf<T>(exec, factor, infos.span(), workspace.span(), options);
    if (!x.empty()) {
      Where<T> x_at(exec, std::span(x), true);
      la::tlr_potrs<T>(exec, factor, la::Batch<T>::packed(x_at.data(), n, nrhs, count), infos.span(), workspace.span());
      x_at.back(exec);
    }
    infos.back(exec);
  });
  const Stack s{static_cast<std::uint64_t>(count), static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(n),
                a.batched};
  FailedMatrices failures;
  for (std::int64_t c = 0; c < count; ++c) {
    if (!tlr_failed(info[c])) continue;
    failures.add(static_cast<std::uint64_t>(c), tlr_reason(info[c]));
    std::fill_n(x.begin() + c * n * nrhs, n * nrhs, nan_of<T>());
  }
  const io::NpyArray result = result_array(x, p, a.dtype);
  store(request.output, result);
  out << "solve: " << a.describe() << ", " << (count == 1 ? p.y_count * p.k : p.k)
      << (nrhs == 1 ? " right-hand side" : " right-hand sides") << (a.batched ? " each" : "")
      << ", TLR Cholesky (tlr_potrf + tlr_potrs) on " << device_name(backend) << ": wrote " << request.output.string()
      << " " << describe(result) << "\n";
  return failures.report(err, command, request.a, s, request.output.string());
}

template <class T>
struct Compress {
  static int run(const CompressRequest& r, const io::NpyArray& a, const Stack& s, std::ostream& out, std::ostream& err) {
    return compress_typed<T>(r, a, s, out, err);
  }
};
template <class T>
struct Expand {
  static int run(const ExpandRequest& r, const Archive& a, std::ostream& out, std::ostream& err) {
    return expand_typed<T>(r, a, out, err);
  }
};
template <class T>
struct Apply {
  static int run(const ApplyRequest& r, const Archive& a, const io::NpyArray& x, const RhsPlan& p, std::ostream& out,
                 std::ostream& err) {
    return apply_typed<T>(r, a, x, p, out, err);
  }
};
template <class T>
struct TlrSolve {
  static int run(const SolveRequest& r, const Archive& a, const io::NpyArray& b, const RhsPlan& p, std::ostream& out,
                 std::ostream& err) {
    return tlr_solve_typed<T>(r, a, b, p, out, err);
  }
};

void require_distinct(const path& input, const path& output, const char* input_name) {
  if (!input.empty() && input == output) fail(exit_code::usage, std::string("--out names the same file as ") + input_name);
}

}  // namespace

int run_compress(const CompressRequest& request, std::ostream& out, std::ostream& err) {
  return guarded("covflow linalg compress", err, [&]() -> int {
    if (request.format == "h2") return h2_compress_dense(request, out, err);
    if (request.format != "tlr")
      fail(exit_code::usage, "--format " + request.format +
                                 ": expected tlr (tile low-rank) or h2 (H², with --points)");
    if (!request.points.empty() || request.leaf || request.eta)
      fail(exit_code::usage, "--points, --leaf and --eta belong to --format h2, not --format tlr");
    if (request.output.empty()) fail(exit_code::usage, "--out is required");
    if (request.tile < 1) fail(exit_code::usage, "--tile must be at least 1, got " + std::to_string(request.tile));
    if (!(request.tolerance > 0) || !std::isfinite(request.tolerance))
      fail(exit_code::usage, "--tol must be a positive number, got " + number_text(request.tolerance));
    if (request.max_rank && (*request.max_rank < 1 || *request.max_rank > request.tile))
      fail(exit_code::usage, "--max-rank must be between 1 and --tile " + std::to_string(request.tile) + ", got " +
                                 std::to_string(*request.max_rank));
    if (request.tile > std::numeric_limits<std::int32_t>::max())
      fail(exit_code::usage, "--tile " + std::to_string(request.tile) + " is more than 32 bits hold");
    require_distinct(request.input, request.output, "the input");
    const io::NpyArray input = load(request.input);
    const Stack s = stack_of(input, request.input, "(batch, n, n) or (n, n) matrices");
    if (s.rows != s.cols)
      fail(exit_code::input_damaged, request.input.string() + ": matrices must be square, got shape " + describe(input) +
                                         ": " + std::to_string(s.rows) + "×" + std::to_string(s.cols));
    if (s.rows > 0 && static_cast<std::uint64_t>(request.tile) > s.rows)
      fail(exit_code::usage, "--tile " + std::to_string(request.tile) + " is larger than the matrices of " +
                                 request.input.string() + " (n = " + std::to_string(s.rows) + "): one tile of n is the most");
    return by_dtype<Compress>(input.dtype, request, input, s, out, err);
  });
}

int run_expand(const ExpandRequest& request, std::ostream& out, std::ostream& err) {
  return guarded("covflow linalg expand", err, [&]() -> int {
    if (request.output.empty()) fail(exit_code::usage, "--out is required");
    require_distinct(request.input, request.output, "the archive");
    std::vector<io::NpzMember> members = read_archive(request.input);
    if (archive_format(members, request.input) == ArchiveFormat::h2)
      return h2_expand_archive(request, members, out, err);
    const Archive a = load_archive(request.input, std::move(members));
    return by_dtype<Expand>(a.dtype, request, a, out, err);
  });
}

int run_apply(const ApplyRequest& request, std::ostream& out, std::ostream& err) {
  return guarded("covflow linalg apply", err, [&]() -> int {
    if (request.output.empty()) fail(exit_code::usage, "--out is required");
    require_distinct(request.archive, request.output, "the archive");
    require_distinct(request.x, request.output, "X");
    std::vector<io::NpzMember> members = read_archive(request.archive);
    if (archive_format(members, request.archive) == ArchiveFormat::h2)
      return h2_apply_archive(request, members, out, err);
    const Archive a = load_archive(request.archive, std::move(members));
    const io::NpyArray x = load(request.x);
    const RhsPlan p = plan_rhs(a, request.archive, x, request.x);
    return by_dtype<Apply>(a.dtype, request, a, x, p, out, err);
  });
}

int run_tlr_solve(const SolveRequest& request, std::ostream& out, std::ostream& err) {
  return guarded("covflow linalg solve", err, [&]() -> int {
    if (request.output.empty()) fail(exit_code::usage, "--out is required");
    const Archive a = load_archive(request.a, "covflow linalg solve");
    if (!a.shape.hermitian)
      fail(exit_code::input_damaged, request.a.string() + ": solve takes a Hermitian positive definite TLR archive "
                                                          "(covflow linalg compress --hermitian), this one is general");
    const io::NpyArray b = load(request.b);
    const RhsPlan p = plan_rhs(a, request.a, b, request.b);
    return by_dtype<TlrSolve>(a.dtype, request, a, b, p, out, err);
  });
}

bool is_archive(const std::filesystem::path& file) {
  return file.extension() == ".npz" || io::looks_like_zip(file);
}

}  // namespace covflow::cli

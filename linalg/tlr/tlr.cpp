// Tile low-rank matrices: the layout (tlr_bytes, tlr_view, validate, tlr_stats), argument checks,
// workspace queries and backend dispatch of the operations (tlr.hpp).
#include "covflow/linalg/tlr.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "../common/checks.hpp"
#include "../common/cpu_helpers.hpp"
#include "tlr_cpu.hpp"
#include "tlr_cpu_parts.hpp"
#if COVFLOW_HAS_CUDA
#include "tlr_cuda.hpp"
#endif

namespace covflow::linalg {
namespace {

using detail::shape;

// The four parts of a batch's storage, in bytes, each rounded up to tlr_view's 256-byte alignment.
struct Parts {
  std::size_t diag = 0, factor = 0, rank = 0;
};
Parts parts(ElementType type, const TlrShape& s) {
  const std::size_t element = size_of(type), count = static_cast<std::size_t>(s.count);
  return {detail::align_up(count * static_cast<std::size_t>(s.diag_elements()) * element),
          detail::align_up(count * static_cast<std::size_t>(s.factor_elements()) * element),
          detail::align_up(count * static_cast<std::size_t>(s.slots()) * sizeof(int))};
}

bool nothing(const TlrShape& s) { return s.count == 0 || s.n == 0; }

std::string text(std::string_view a, std::string_view b) { return std::string(a) + std::string(b); }

template <class T>
void require_tlr(Exec& exec, const Tlr<T>& t, const char* op, const char* what) {
  validate(t, op, what);
  if (nothing(t.shape)) return;
  detail::require_memory_space(exec, t.diag, op, text(what, ".diag"));
  if (t.shape.slots() == 0) return;
  detail::require_memory_space(exec, t.u, op, text(what, ".u"));
  detail::require_memory_space(exec, t.v, op, text(what, ".v"));
  detail::require_memory_space(exec, t.rank, op, text(what, ".rank"));
}

// A dense batch beside a TLR one: one matrix per TLR matrix, n rows; `cols` columns unless negative.
template <class T>
void require_dense(Exec& exec, const Batch<T>& x, const TlrShape& s, std::int64_t cols, const char* op,
                   const char* what, const char* tlr_name) {
  detail::require_dims(x, op, what, "rows", "cols");
  if (x.count != s.count)
    throw InvalidArgument(std::string(op) + ": " + tlr_name + " holds " + std::to_string(s.count) + " matrices and " +
                          what + " " + std::to_string(x.count));
  if (x.rows != s.n || (cols >= 0 && x.cols != cols))
    throw InvalidArgument(std::string(op) + ": " + what + " is " + shape(x.rows, x.cols) + " but " + tlr_name + " is " +
                          shape(s.n, s.n) + ": " + what + " needs " + std::to_string(s.n) + " rows" +
                          (cols >= 0 ? " and " + std::to_string(cols) + " columns" : std::string()));
  detail::require_accessible(exec, x, op, what);
}

// Two TLR operands of one product: the same order, tile and count.
void require_same_grid(const TlrShape& a, const TlrShape& b, const char* op, const char* a_name, const char* b_name) {
  if (a.n != b.n || a.tile != b.tile || a.count != b.count)
    throw InvalidArgument(std::string(op) + ": " + a_name + " is " + std::to_string(a.count) + " × n " +
                          std::to_string(a.n) + " in tiles of " + std::to_string(a.tile) + " but " + b_name + " is " +
                          std::to_string(b.count) + " × n " + std::to_string(b.n) + " in tiles of " +
                          std::to_string(b.tile) + ": they must agree");
}

void require_op(Op o, const char* op, const char* what) {
  if (o != Op::none && o != Op::trans && o != Op::conj_trans)
    throw InvalidArgument(std::string(op) + ": " + what + " must be none, trans or conj_trans");
}

void require_options(const TlrOptions& options, const char* op) {
  if (!(options.tolerance > 0) || !std::isfinite(options.tolerance))
    throw InvalidArgument(std::string(op) + ": tolerance " + std::to_string(options.tolerance) +
                          " must be positive and finite");
  if (options.scope != TlrScope::matrix && options.scope != TlrScope::tile)
    throw InvalidArgument(std::string(op) + ": scope must be matrix or tile");
}

template <class Info>
void require_info(Exec& exec, std::span<Info> info, const TlrShape& s, const char* op) {
  if (info.size() < static_cast<std::size_t>(s.count))
    throw InvalidArgument(std::string(op) + ": info holds " + std::to_string(info.size()) + " entries, " +
                          std::to_string(s.count) + " needed (one per matrix)");
  detail::require_memory_space(exec, info.data(), op, "info");
}

void require_workspace(Exec& exec, std::span<std::byte> workspace, std::size_t need, const char* op,
                       const char* query) {
  if (workspace.size() < need)
    throw InvalidArgument(std::string(op) + ": workspace holds " + std::to_string(workspace.size()) + " bytes, " +
                          std::to_string(need) + " needed (" + query + ")");
  if (need > 0) detail::require_memory_space(exec, workspace.data(), op, "workspace");
}

void require_hermitian(const TlrShape& s, const char* op, const char* what) {
  if (!s.hermitian)
    throw InvalidArgument(std::string(op) + ": " + what + " must be a Hermitian TLR (lower tiles stored)");
}

}  // namespace

// ---- layout ---------------------------------------------------------------------------------------------

void validate(const TlrShape& s, const char* op, const char* what) {
  auto fail = [&](const std::string& why) { throw InvalidArgument(std::string(op) + ": " + what + ": " + why); };
  if (s.n < 0 || s.count < 0)
    fail("negative dimension (n " + std::to_string(s.n) + ", count " + std::to_string(s.count) + ")");
  if (s.tile < 1) fail("tile " + std::to_string(s.tile) + " must be at least 1");
  if (s.max_rank < 1 || s.max_rank > s.tile)
    fail("max_rank " + std::to_string(s.max_rank) + " must lie in 1 … tile (" + std::to_string(s.tile) + ")");
  detail::require_int32(s.n, op, "n");
}

template <class T>
void validate(const Tlr<T>& t, const char* op, const char* what) {
  validate(t.shape, op, what);
  if (nothing(t.shape)) return;
  auto fail = [&](const char* part) {
    throw InvalidArgument(std::string(op) + ": " + what + ": null " + part + " pointer for a non-empty batch");
  };
  if (t.diag == nullptr) fail("diag");
  if (t.shape.slots() == 0) return;
  if (t.u == nullptr) fail("u");
  if (t.v == nullptr) fail("v");
  if (t.rank == nullptr) fail("rank");
}

std::size_t tlr_bytes(ElementType type, const TlrShape& shape) {
  validate(shape, "tlr_bytes", "shape");
  const Parts p = parts(type, shape);
  return p.diag + 2 * p.factor + p.rank;
}

template <class T>
Tlr<T> tlr_view(const TlrShape& shape, std::span<std::byte> storage) {
  constexpr const char* op = "tlr_view";
  validate(shape, op, "shape");
  const std::size_t need = tlr_bytes(element_type_of<T>(), shape);
  if (storage.size() < need)
    throw InvalidArgument(std::string(op) + ": storage holds " + std::to_string(storage.size()) + " bytes, " +
                          std::to_string(need) + " needed (tlr_bytes)");
  if (reinterpret_cast<std::uintptr_t>(storage.data()) % alignof(T) != 0)
    throw InvalidArgument(std::string(op) + ": storage is not aligned for its element type");
  const Parts p = parts(element_type_of<T>(), shape);
  std::byte* at = storage.data();
  Tlr<T> t;
  t.shape = shape;
  t.diag = reinterpret_cast<T*>(at);
  t.u = reinterpret_cast<T*>(at + p.diag);
  t.v = reinterpret_cast<T*>(at + p.diag + p.factor);
  t.rank = reinterpret_cast<int*>(at + p.diag + 2 * p.factor);
  return t;
}

TlrStats tlr_stats(ElementType type, const TlrShape& s, std::span<const int> host_ranks) {
  constexpr const char* op = "tlr_stats";
  validate(s, op, "shape");
  const std::int64_t slots = s.slots(), nt = s.tiles();
  if (host_ranks.size() < static_cast<std::size_t>(s.count * slots))
    throw InvalidArgument(std::string(op) + ": ranks hold " + std::to_string(host_ranks.size()) + " entries, " +
                          std::to_string(s.count * slots) + " needed (count × slots)");
  const std::size_t element = size_of(type);
  TlrStats stats;
  stats.stored_bytes = tlr_bytes(type, s);
  stats.dense_bytes = static_cast<std::size_t>(s.count * s.n * s.n) * element;
  std::size_t diagonal = 0;
  for (std::int64_t i = 0; i < nt; ++i) diagonal += static_cast<std::size_t>(s.rows(i) * s.rows(i)) * element;
  stats.compact_bytes = diagonal * static_cast<std::size_t>(s.count);
  if (s.count * slots == 0) return stats;
  stats.min_rank = std::numeric_limits<std::int64_t>::max();
  double sum = 0;
  for (std::int64_t c = 0; c < s.count; ++c)
    for (std::int64_t slot = 0; slot < slots; ++slot) {
      const int k = host_ranks[c * slots + slot];
      stats.min_rank = std::min<std::int64_t>(stats.min_rank, k);
      stats.max_rank = std::max<std::int64_t>(stats.max_rank, k);
      sum += k;
      const auto [i, j] = detail::tlr_cpu::slot_tile(s, slot);
      stats.compact_bytes += static_cast<std::size_t>((s.rows(i) + s.rows(j)) * k) * element;
    }
  stats.mean_rank = sum / static_cast<double>(s.count * slots);
  return stats;
}

// ---- workspace queries ----------------------------------------------------------------------------------

template <class T>
std::size_t tlr_compress_workspace(const Exec& exec, const TlrShape& shape) {
  validate(shape, "tlr_compress_workspace", "shape");
  if (nothing(shape)) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::tlr_cuda::compress_workspace<T>(exec, shape);
#endif
  return detail::tlr_cpu::compress_workspace<T>(exec, shape);
}

template <class T>
std::size_t tlr_gemv_workspace(const Exec& exec, const TlrShape& shape, std::int64_t nrhs) {
  validate(shape, "tlr_gemv_workspace", "shape");
  if (nothing(shape) || nrhs <= 0) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::tlr_cuda::gemv_workspace<T>(exec, shape, nrhs);
#endif
  return detail::tlr_cpu::gemv_workspace<T>(exec, shape, nrhs);
}

template <class T>
std::size_t tlr_gemm_lld_workspace(const Exec& exec, const TlrShape& a, const TlrShape& b) {
  validate(a, "tlr_gemm_lld_workspace", "A");
  validate(b, "tlr_gemm_lld_workspace", "B");
  require_same_grid(a, b, "tlr_gemm_lld_workspace", "A", "B");
  if (nothing(a)) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::tlr_cuda::gemm_lld_workspace<T>(exec, a, b);
#endif
  return detail::tlr_cpu::gemm_lld_workspace<T>(exec, a, b);
}

template <class T>
std::size_t tlr_gemm_lll_workspace(const Exec& exec, const TlrShape& a, const TlrShape& b, const TlrShape& c) {
  constexpr const char* op = "tlr_gemm_lll_workspace";
  validate(a, op, "A");
  validate(b, op, "B");
  validate(c, op, "C");
  require_same_grid(a, b, op, "A", "B");
  require_same_grid(a, c, op, "A", "C");
  if (nothing(a)) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::tlr_cuda::gemm_lll_workspace<T>(exec, a, b, c);
#endif
  return detail::tlr_cpu::gemm_lll_workspace<T>(exec, a, b, c);
}

template <class T>
std::size_t tlr_potrf_workspace(const Exec& exec, const TlrShape& shape) {
  validate(shape, "tlr_potrf_workspace", "shape");
  require_hermitian(shape, "tlr_potrf_workspace", "shape");
  if (nothing(shape)) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::tlr_cuda::potrf_workspace<T>(exec, shape);
#endif
  return detail::tlr_cpu::potrf_workspace<T>(exec, shape);
}

template <class T>
std::size_t tlr_potrs_workspace(const Exec& exec, const TlrShape& shape, std::int64_t nrhs) {
  validate(shape, "tlr_potrs_workspace", "shape");
  require_hermitian(shape, "tlr_potrs_workspace", "shape");
  if (nothing(shape) || nrhs <= 0) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::tlr_cuda::potrs_workspace<T>(exec, shape, nrhs);
#endif
  return detail::tlr_cpu::potrs_workspace<T>(exec, shape, nrhs);
}

// ---- operations -----------------------------------------------------------------------------------------

template <class T>
void tlr_compress(Exec& exec, Batch<const T> a, Tlr<T> out, std::span<TlrInfo> info, std::span<std::byte> workspace,
                  const TlrOptions& options) {
  constexpr const char* op = "tlr_compress";
  require_tlr(exec, out, op, "out");
  require_dense(exec, a, out.shape, out.shape.n, op, "A", "out");
  require_options(options, op);
  if (nothing(out.shape)) return;
  require_info(exec, info, out.shape, op);
  require_workspace(exec, workspace, tlr_compress_workspace<T>(exec, out.shape), op, "tlr_compress_workspace");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::tlr_cuda::compress<T>(exec, a, out, info, workspace, options);
#endif
  detail::tlr_cpu::compress<T>(exec, a, out, info, workspace, options);
}

template <class T>
void tlr_expand(Exec& exec, Tlr<const T> a, Batch<T> out) {
  constexpr const char* op = "tlr_expand";
  require_tlr(exec, a, op, "A");
  require_dense(exec, out, a.shape, a.shape.n, op, "out", "A");
  if (nothing(a.shape)) return;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::tlr_cuda::expand<T>(exec, a, out);
#endif
  detail::tlr_cpu::expand<T>(exec, a, out);
}

template <class T>
void tlr_gemv(Exec& exec, Op op_a, T alpha, Tlr<const T> a, Batch<const T> x, T beta, Batch<T> y,
              std::span<std::byte> workspace) {
  constexpr const char* op = "tlr_gemv";
  require_op(op_a, op, "op");
  require_tlr(exec, a, op, "A");
  require_dense(exec, x, a.shape, -1, op, "X", "A");
  require_dense(exec, y, a.shape, x.cols, op, "Y", "A");
  if (nothing(a.shape) || x.cols == 0) return;
  require_workspace(exec, workspace, tlr_gemv_workspace<T>(exec, a.shape, x.cols), op, "tlr_gemv_workspace");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::tlr_cuda::gemv<T>(exec, op_a, alpha, a, x, beta, y, workspace);
#endif
  detail::tlr_cpu::gemv<T>(exec, op_a, alpha, a, x, beta, y, workspace);
}

template <class T>
void tlr_gemm(Exec& exec, Op op_a, Op op_b, T alpha, Tlr<const T> a, Tlr<const T> b, T beta, Batch<T> c,
              std::span<std::byte> workspace) {
  constexpr const char* op = "tlr_gemm";
  require_op(op_a, op, "op_a");
  require_op(op_b, op, "op_b");
  require_tlr(exec, a, op, "A");
  require_tlr(exec, b, op, "B");
  require_same_grid(a.shape, b.shape, op, "A", "B");
  require_dense(exec, c, a.shape, a.shape.n, op, "C", "A");
  if (nothing(a.shape)) return;
  require_workspace(exec, workspace, tlr_gemm_lld_workspace<T>(exec, a.shape, b.shape), op, "tlr_gemm_lld_workspace");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::tlr_cuda::gemm_lld<T>(exec, op_a, op_b, alpha, a, b, beta, c, workspace);
#endif
  detail::tlr_cpu::gemm_lld<T>(exec, op_a, op_b, alpha, a, b, beta, c, workspace);
}

template <class T>
void tlr_gemm(Exec& exec, Op op_a, Op op_b, T alpha, Tlr<const T> a, Tlr<const T> b, T beta, Tlr<T> c,
              std::span<TlrInfo> info, std::span<std::byte> workspace, const TlrOptions& options) {
  constexpr const char* op = "tlr_gemm";
  require_op(op_a, op, "op_a");
  require_op(op_b, op, "op_b");
  require_tlr(exec, a, op, "A");
  require_tlr(exec, b, op, "B");
  require_tlr(exec, c, op, "C");
  require_same_grid(a.shape, b.shape, op, "A", "B");
  require_same_grid(a.shape, c.shape, op, "A", "C");
  require_options(options, op);
  if (nothing(a.shape)) return;
  require_info(exec, info, c.shape, op);
  require_workspace(exec, workspace, tlr_gemm_lll_workspace<T>(exec, a.shape, b.shape, c.shape), op,
                    "tlr_gemm_lll_workspace");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda())
    return detail::tlr_cuda::gemm_lll<T>(exec, op_a, op_b, alpha, a, b, beta, c, info, workspace, options);
#endif
  detail::tlr_cpu::gemm_lll<T>(exec, op_a, op_b, alpha, a, b, beta, c, info, workspace, options);
}

template <class T>
void tlr_potrf(Exec& exec, Tlr<T> a, std::span<TlrInfo> info, std::span<std::byte> workspace,
               const TlrOptions& options) {
  constexpr const char* op = "tlr_potrf";
  require_tlr(exec, a, op, "A");
  require_hermitian(a.shape, op, "A");
  require_options(options, op);
  if (nothing(a.shape)) return;
  require_info(exec, info, a.shape, op);
  require_workspace(exec, workspace, tlr_potrf_workspace<T>(exec, a.shape), op, "tlr_potrf_workspace");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::tlr_cuda::potrf<T>(exec, a, info, workspace, options);
#endif
  detail::tlr_cpu::potrf<T>(exec, a, info, workspace, options);
}

template <class T>
void tlr_potrs(Exec& exec, Tlr<const T> l, Batch<T> b, std::span<const TlrInfo> info, std::span<std::byte> workspace) {
  constexpr const char* op = "tlr_potrs";
  require_tlr(exec, l, op, "L");
  require_hermitian(l.shape, op, "L");
  require_dense(exec, b, l.shape, -1, op, "B", "L");
  if (nothing(l.shape) || b.cols == 0) return;
  require_info(exec, info, l.shape, op);
  require_workspace(exec, workspace, tlr_potrs_workspace<T>(exec, l.shape, b.cols), op, "tlr_potrs_workspace");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::tlr_cuda::potrs<T>(exec, l, b, info, workspace);
#endif
  detail::tlr_cpu::potrs<T>(exec, l, b, info, workspace);
}

#define COVFLOW_TLR(T)                                                                                            \
  template Tlr<T> tlr_view<T>(const TlrShape&, std::span<std::byte>);                                             \
  template void validate<T>(const Tlr<T>&, const char*, const char*);                                             \
  template void validate<const T>(const Tlr<const T>&, const char*, const char*);                                 \
  template std::size_t tlr_compress_workspace<T>(const Exec&, const TlrShape&);                                   \
  template std::size_t tlr_gemv_workspace<T>(const Exec&, const TlrShape&, std::int64_t);                         \
  template std::size_t tlr_gemm_lld_workspace<T>(const Exec&, const TlrShape&, const TlrShape&);                  \
  template std::size_t tlr_gemm_lll_workspace<T>(const Exec&, const TlrShape&, const TlrShape&, const TlrShape&); \
  template std::size_t tlr_potrf_workspace<T>(const Exec&, const TlrShape&);                                      \
  template std::size_t tlr_potrs_workspace<T>(const Exec&, const TlrShape&, std::int64_t);                        \
  template void tlr_compress<T>(Exec&, Batch<const T>, Tlr<T>, std::span<TlrInfo>, std::span<std::byte>,          \
                                const TlrOptions&);                                                               \
  template void tlr_expand<T>(Exec&, Tlr<const T>, Batch<T>);                                                     \
  template void tlr_gemv<T>(Exec&, Op, T, Tlr<const T>, Batch<const T>, T, Batch<T>, std::span<std::byte>);       \
  template void tlr_gemm<T>(Exec&, Op, Op, T, Tlr<const T>, Tlr<const T>, T, Batch<T>, std::span<std::byte>);     \
  template void tlr_gemm<T>(Exec&, Op, Op, T, Tlr<const T>, Tlr<const T>, T, Tlr<T>, std::span<TlrInfo>,          \
                            std::span<std::byte>, const TlrOptions&);                                             \
  template void tlr_potrf<T>(Exec&, Tlr<T>, std::span<TlrInfo>, std::span<std::byte>, const TlrOptions&);         \
  template void tlr_potrs<T>(Exec&, Tlr<const T>, Batch<T>, std::span<const TlrInfo>, std::span<std::byte>);
COVFLOW_TLR(f32)
COVFLOW_TLR(f64)
COVFLOW_TLR(cf32)
COVFLOW_TLR(cf64)
#undef COVFLOW_TLR

}  // namespace covflow::linalg

// geqrf / ungqr / unmqr on the GPU: which kernels run for which shape, after W. Boukaram,
// G. Turkiyyah, H. Ltaief, D. E. Keyes, "Batched QR and SVD Algorithms on GPUs with Applications in
// Hierarchical Matrix Compression" (Parallel Computing, 2018), §3.1, retuned for sm_90.
//
// geqrf, by shape (qr_cuda_device.cuh's register budget decides what fits a block):
//   tiny    n ≤ 32 and m ≤ 128 (the fast path of the tiny-factorization issue: snapshot matrices
//           up to 4n tall): qr_cuda_tiny.cu, the matrix in shared memory and a lane per column,
//           several matrices per block.
//   whole   n ≤ 32 (one panel's width) and the matrix fits one thread block's registers: one
//           launch of factor_block_kernel (qr_cuda_factor.cu), every reflector made and applied
//           in registers, NaN handling and info in the same kernel. E.g. 1000 × 32×32.
//   blocked everything else: panels of `width` = 32 (16, 8 where a tall panel would not fit a
//           cluster) columns, each factored by factor_block_kernel (one block per matrix) or
//           factor_cluster_kernel (a cluster of up to 16 blocks splitting the rows: tall-skinny
//           matrices of up to 16 × 1024 rows, the sketches of a randomized SVD — §3.1's last
//           paragraph, with the cluster's distributed shared memory in place of the triangular
//           factor kept in shared memory), then the panel's reflectors applied to the trailing
//           columns by apply_kernel (qr_cuda_apply.cu), one block (or cluster) per 32-column tile
//           and matrix. Panels taller than a 16-block cluster holds go to the global-memory
//           kernels (qr_cuda_global.cu). info is zeroed first; the first panel and the first
//           trailing update set it for a matrix holding a NaN or an Inf, and a last pass writes
//           NaN over those matrices. Panel by panel is also the faster way from 64×64 up: a block
//           holding all of a 64×64 complex double matrix takes a quarter of an SM's registers (few
//           matrices in flight, each step waiting on one barrier), a 32-column panel half as
//           much, and the trailing update waits on no barrier between reflectors.
// COVFLOW_QR_PATH=tiny|whole|blocked and COVFLOW_QR_RPT=4|8|16|32 override these choices where they can
// run (for measurements).
// ungqr: backward accumulation Q = H₁(H₂(…H_k·[I; 0])) in apply_kernel with the identity as its
//   starting columns: one launch when the n columns fit one tile, else panel by panel from the
//   last (the columns right of a panel, then the panel's own).
// unmqr: one apply_kernel launch over the tiles of C (Side::right: of Cᴴ, whose product with
//   op(Q)ᴴ is the conjugate transpose of C·op(Q)).
// No call allocates or synchronises the host: none takes workspace (so geqrf_cuda can run on
// matrices that themselves live in the Exec's workspace), and per-matrix status goes to info.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>

#include "../common/device_scalar.cuh"
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "qr_cuda_device.cuh"
#include "qr_cuda_launch.hpp"
#include "qr_impl.hpp"

namespace covflow::linalg::detail {
namespace qr {

Layout choose_layout(int element_bytes, int rows, int cols, std::initializer_list<int> rpt_order, int max_cluster,
                     int overhead) {
  const int words = words_of(element_bytes);
  for (int cluster = 1; cluster <= max_cluster; ++cluster) {
    const int per_block = (rows + cluster - 1) / cluster;
    for (int rpt : rpt_order) {
      int group = 1;
      while (group * rpt < per_block) group *= 2;
      if (group > kMaxGroup) continue;
      const int threads = (group * cols + 31) / 32 * 32;
      if (threads > max_threads(words, rpt, overhead)) continue;
      const int blocks = (rows + group * rpt - 1) / (group * rpt);
      return Layout{rpt, group, blocks, threads};
    }
  }
  return {};
}

}  // namespace qr

namespace {

using qr::ApplyArgs;
using qr::FactorArgs;
using qr::Layout;

// COVFLOW_QR_PATH=whole|blocked forces one geqrf organisation where it can run (for measurements).
int forced_path() {
  static const int path = [] {
    const char* value = std::getenv("COVFLOW_QR_PATH");
    const std::string_view choice = value != nullptr ? value : "";
    return choice == "whole" ? 1 : choice == "blocked" ? 2 : choice == "tiny" ? 3 : 0;
  }();
  return path;
}

// COVFLOW_QR_RPT=4|8|16|32 makes the whole-matrix organisation try that many rows per thread first
// (for measurements).
int forced_rpt() {
  static const int rpt = [] {
    const char* value = std::getenv("COVFLOW_QR_RPT");
    const int n = value != nullptr ? std::atoi(value) : 0;
    return n == 4 || n == 8 || n == 16 || n == 32 ? n : 0;
  }();
  return rpt;
}

// Rows per thread to try, in order. The factor kernels are latency-bound (one barrier and one
// reflector per column): 8 rows per thread first (short chains), then more rows before more lanes.
// The apply kernel has no barrier between reflectors: 16 first (fewer shuffles per reflector).
constexpr std::initializer_list<int> kWholeOrder = {8, 16, 4, 32};
constexpr std::initializer_list<int> kPanelOrder = {8, 16, 32, 4};
constexpr std::initializer_list<int> kApplyOrder = {16, 32, 8, 4};

// The one exception found by measuring: complex double with 16 < m ≤ 32 is faster as one lane
// per column holding all the rows (32 threads of ~255 registers per 32×32 matrix: a batch of 1000
// resident at once, and no shuffles) than with 8 rows per thread (~91 registers × 128 threads:
// five blocks per SM, two waves).
template <class D>
std::initializer_list<int> whole_order(int m) {
  static constexpr std::initializer_list<int> kOneLane = {32, 8, 16, 4};
  if constexpr (std::is_same_v<D, Cx<double>>)
    if (m > 16 && m <= 32) return kOneLane;
  return kWholeOrder;
}

// The whole matrix in one block when it is no wider than a panel (a single panel then, without the
// blocked path's zeroing of info and its final pass); wider matrices go panel by panel.
template <class D>
Layout whole_layout(int m, int n) {
  if (forced_path() == 2 || (forced_path() == 0 && n > 32)) return {};
  const int max_cluster = forced_path() == 1 ? qr::kMaxCluster : 1;
  if (forced_rpt() != 0)
    if (const Layout layout = qr::choose_layout(sizeof(D), m, n, {forced_rpt()}, max_cluster, qr::kFactorOverhead))
      return layout;
  return qr::choose_layout(sizeof(D), m, n, whole_order<D>(m), max_cluster, qr::kFactorOverhead);
}

// Columns per panel of the blocked geqrf: the widest of 32, 16, 8 whose m-row panel fits a
// cluster.
template <class D>
int panel_width(int m, int n) {
  for (int width : {32, 16, 8})
    if (qr::choose_layout(sizeof(D), m, std::min(width, n), kPanelOrder, qr::kMaxCluster, qr::kFactorOverhead))
      return width;
  return 32;
}

// The layout and tile of an apply over `rows` × `cols` (tile: the widest of 32, 16, 8 columns that
// fits), and its chunk of reflectors in shared memory.
struct ApplyPlan {
  Layout layout;
  int tile = 0;
  int chunk = 0;
};
template <class D>
ApplyPlan apply_plan(int rows, int cols, int reflectors) {
  for (int tile : {32, 16, 8}) {
    const int width = std::min(tile, cols);
    const Layout layout = qr::choose_layout(sizeof(D), rows, width, kApplyOrder, qr::kMaxCluster, qr::kApplyOverhead);
    if (!layout) continue;
    const std::size_t per_reflector = sizeof(D) * (std::size_t(layout.group) * (layout.rpt + 1) + 1);
    const int chunk = static_cast<int>(std::min<std::size_t>(
        reflectors, (qr::kSharedBudget - 2 * sizeof(D) * width) / per_reflector));
    if (chunk < 1) continue;
    return {layout, width, chunk};
  }
  return {};
}

// Applies the `reflectors` reflectors held in V (rows × reflectors, corner v) to the logical C
// (rows × cols, corner c): in registers where a cluster holds the rows, else in global memory.
template <class D>
void apply(cudaStream_t stream, long long count, ApplyArgs<D> args) {
  if (args.cols <= 0 || args.reflectors <= 0) return;
  const ApplyPlan plan = apply_plan<D>(args.rows, args.cols, args.reflectors);
  if (plan.layout) {
    args.tile = plan.tile;
    args.chunk = plan.chunk;
    qr::launch_apply(args, plan.layout, count, stream);
  } else {
    qr::launch_global_apply(args, count, stream);
  }
}

}  // namespace

template <class T>
std::size_t geqrf_cuda_workspace(std::int64_t, std::int64_t, std::int64_t) {
  return 0;
}

template <class T>
void geqrf_cuda(CudaContext& context, Batch<T> a, std::span<T> tau, std::span<int> info) {
  using D = device_t<T>;
  context.make_current();
  cudaStream_t stream = context.stream();
  const int m = static_cast<int>(a.rows), n = static_cast<int>(a.cols);
  const int k = std::min(m, n);
  const long long count = a.count;
  D* A = reinterpret_cast<D*>(a.data);
  D* tau_d = reinterpret_cast<D*>(tau.data());
  if (count <= 0) return;
  if (k <= 0) {
    COVFLOW_CUDA_TRY(cudaMemsetAsync(info.data(), 0, sizeof(int) * std::size_t(count), stream));
    return;
  }

  const int path = forced_path();
  if (qr::tiny_fits(m, n) && (path == 0 || path == 3)) {
    qr::launch_tiny_geqrf(A, a.ld, a.stride, tau_d, info.data(), m, n, count, stream);
    return;
  }

  FactorArgs<D> whole;
  whole.a = A;
  whole.lda = a.ld;
  whole.stride = a.stride;
  whole.tau = tau_d;
  whole.tau_stride = k;
  whole.info = info.data();
  if (const Layout layout = whole_layout<D>(m, n)) {
    whole.rows = m;
    whole.cols = n;
    whole.reflectors = k;
    whole.check = 2;
    qr::launch_factor(whole, layout, count, stream);
    return;
  }

  COVFLOW_CUDA_TRY(cudaMemsetAsync(info.data(), 0, sizeof(int) * std::size_t(count), stream));
  const int width = panel_width<D>(m, n);
  for (int j0 = 0; j0 < k; j0 += width) {
    const int kb = std::min(width, k - j0);
    FactorArgs<D> panel = whole;
    panel.a = A + j0 + static_cast<long long>(j0) * a.ld;
    panel.tau = tau_d + j0;
    panel.rows = m - j0;
    panel.cols = kb;
    panel.reflectors = kb;
    panel.check = j0 == 0 ? 1 : 0;
    if (const Layout layout =
            qr::choose_layout(sizeof(D), panel.rows, kb, kPanelOrder, qr::kMaxCluster, qr::kFactorOverhead))
      qr::launch_factor(panel, layout, count, stream);
    else
      qr::launch_global_factor(panel, count, stream);

    ApplyArgs<D> update;
    update.v = panel.a;
    update.ldv = a.ld;
    update.stride_v = a.stride;
    update.tau = panel.tau;
    update.tau_stride = k;
    update.c = panel.a + static_cast<long long>(kb) * a.ld;
    update.ldc = a.ld;
    update.stride_c = a.stride;
    update.rows = m - j0;
    update.cols = n - j0 - kb;
    update.reflectors = kb;
    update.backward = false;
    update.info = j0 == 0 ? info.data() : nullptr;
    apply(stream, count, update);
  }
  qr::launch_poison_flagged(A, a.ld, a.stride, m, n, tau_d, k, k, info.data(), count, stream);
}

template <class T>
std::size_t ungqr_cuda_workspace(std::int64_t, std::int64_t, std::int64_t) {
  return 0;
}

template <class T>
void ungqr_cuda(CudaContext& context, Batch<T> a, std::span<const T> tau) {
  using D = device_t<T>;
  context.make_current();
  cudaStream_t stream = context.stream();
  const int m = static_cast<int>(a.rows), n = static_cast<int>(a.cols);
  const long long count = a.count;
  D* A = reinterpret_cast<D*>(a.data);
  const D* tau_d = reinterpret_cast<const D*>(tau.data());
  if (count <= 0 || m <= 0 || n <= 0) return;

  ApplyArgs<D> args;
  args.ldv = a.ld;
  args.stride_v = a.stride;
  args.tau_stride = n;
  args.ldc = a.ld;
  args.stride_c = a.stride;
  args.backward = true;

  // One launch when a tile holds all n columns: each block reads its own rows of the reflectors
  // (all of them, chunk by chunk) before it writes its rows of Q, and no other block reads them.
  const ApplyPlan whole = apply_plan<D>(m, n, n);
  if (whole.layout && whole.tile >= n) {
    args.v = A;
    args.tau = tau_d;
    args.c = A;
    args.rows = m;
    args.cols = n;
    args.reflectors = n;
    args.identity = true;
    args.tile = whole.tile;
    args.chunk = whole.chunk;
    qr::launch_apply(args, whole.layout, count, stream);
    return;
  }
  // Panel by panel from the last: the panel's reflectors first applied to the columns right of it
  // (formed by the later panels; their rows above the later panels already zeroed), then to the
  // panel's own columns, which start as the identity.
  const int width = whole.layout ? whole.tile : 32;
  const int last = (n - 1) / width * width;
  for (int j0 = last; j0 >= 0; j0 -= width) {
    const int kb = std::min(width, n - j0);
    D* corner = A + j0 + static_cast<long long>(j0) * a.ld;
    ApplyArgs<D> right = args;
    right.v = corner;
    right.tau = tau_d + j0;
    right.c = corner + static_cast<long long>(kb) * a.ld;
    right.rows = m - j0;
    right.cols = n - j0 - kb;
    right.reflectors = kb;
    apply(stream, count, right);

    const ApplyPlan own = apply_plan<D>(m - j0, kb, kb);
    if (own.layout && own.tile >= kb) {
      ApplyArgs<D> panel = right;
      panel.c = corner;
      panel.cols = kb;
      panel.identity = true;
      panel.zero_above = j0;
      panel.tile = own.tile;
      panel.chunk = own.chunk;
      qr::launch_apply(panel, own.layout, count, stream);
    } else {
      qr::launch_global_org2r(corner, a.ld, a.stride, tau_d + j0, n, m - j0, kb, j0, count, stream);
    }
  }
}

template <class T>
std::size_t unmqr_cuda_workspace(Side, std::int64_t, std::int64_t, std::int64_t, std::int64_t) {
  return 0;
}

template <class T>
void unmqr_cuda(CudaContext& context, Side side, Op op, Batch<const T> a, std::span<const T> tau, Batch<T> c) {
  using D = device_t<T>;
  context.make_current();
  if (c.count <= 0 || c.rows <= 0 || c.cols <= 0 || a.cols <= 0) return;
  ApplyArgs<D> args;
  args.v = reinterpret_cast<const D*>(a.data);
  args.ldv = a.ld;
  args.stride_v = a.stride;
  args.tau = reinterpret_cast<const D*>(tau.data());
  args.tau_stride = a.cols;
  args.c = reinterpret_cast<D*>(c.data);
  args.ldc = c.ld;
  args.stride_c = c.stride;
  args.reflectors = static_cast<int>(a.cols);
  args.rows = static_cast<int>(a.rows);
  if (side == Side::left) {
    args.cols = static_cast<int>(c.cols);
    args.backward = op == Op::none;  // Q·C = H₁(H₂(…H_k·C)); Qᴴ·C = H_kᴴ(…H₁ᴴ·C)
  } else {
    // C·op(Q) = (op(Q)ᴴ·Cᴴ)ᴴ: Cᴴ's columns are C's rows.
    args.cols = static_cast<int>(c.rows);
    args.transposed = true;
    args.backward = op == Op::conj_trans;
  }
  apply(context.stream(), c.count, args);
}

#define COVFLOW_QR_CUDA(T)                                                                                   \
  template std::size_t geqrf_cuda_workspace<T>(std::int64_t, std::int64_t, std::int64_t);                  \
  template void geqrf_cuda<T>(CudaContext&, Batch<T>, std::span<T>, std::span<int>);                        \
  template std::size_t ungqr_cuda_workspace<T>(std::int64_t, std::int64_t, std::int64_t);                  \
  template void ungqr_cuda<T>(CudaContext&, Batch<T>, std::span<const T>);                                  \
  template std::size_t unmqr_cuda_workspace<T>(Side, std::int64_t, std::int64_t, std::int64_t, std::int64_t); \
  template void unmqr_cuda<T>(CudaContext&, Side, Op, Batch<const T>, std::span<const T>, Batch<T>);
COVFLOW_QR_CUDA(f32)
COVFLOW_QR_CUDA(f64)
COVFLOW_QR_CUDA(cf32)
COVFLOW_QR_CUDA(cf64)
#undef COVFLOW_QR_CUDA

}  // namespace covflow::linalg::detail

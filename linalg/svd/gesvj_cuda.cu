// gesvj on the GPU: the choice of variant by shape, the workspace, and the QR preprocessing. The kernels are in gesvj_cuda_warp.cu (register variant), gesvj_cuda_block.cu
// (shared-memory variant) and gesvj_cuda_blockjacobi.cu (block Jacobi in global memory).
//
// The working matrix is X = A (m ≥ n) or X = Aᴴ (m < n: Aᴴ = V·Σ·Uᴴ, so X's U is A's V and the
// other way round), m_w × n_w with m_w = max(m, n) ≥ n_w = min(m, n). By size:
//
//   m_w ≤ 32, n_w ≤ 32       the register variant on X itself: one warp per matrix.
//   larger                    QR preprocessing: X·P = Q·R (P sorts X's columns by decreasing norm;
//                             geqrf), the one-sided Jacobi method on the n_w × n_w Rᴴ (gesvj_cuda
//                             below says why P and Rᴴ) — by the register variant (n_w ≤ 32), the
//                             shared-memory variant (Rᴴ and V₁ fit one block's shared memory: 227
//                             KB on sm_90; complex double n_w ≤ 85, real float ≤ 170) or block
//                             Jacobi in global memory (above that) — then X's U = Q·[V₁; 0]
//                             (unmqr). The sweeps touch n_w rows
//                             instead of m_w, and tol is √n_w·ε. As in KBLAS's tall SVD and the
//                             preconditioned Jacobi SVD of Drmač and Veselić (SIAM J. Matrix Anal.
//                             Appl., 2008).
//
// Every variant decides convergence on the device, per matrix, on the columns above the zero
// threshold max(m, n)·ε·(largest column norm) (gesvj_cuda.cuh says why); nothing is read back to the
// host.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "gesvj_cuda.cuh"
#include "gesvj_impl.hpp"
#include "../qr/qr_impl.hpp"

namespace covflow::linalg::detail {
namespace {

using svdj::Problem;

// The shared memory a block plans for: what sm_90 lets a block opt in to, less the static part.
constexpr std::size_t kSmemLimit = 227 * 1024 - 2048;

enum class Variant { warp, block, block_jacobi };

struct Plan {
  int m_w = 0, n_w = 0;
  bool transpose = false;  // X = Aᴴ
  bool qr = false;         // Jacobi on the Rᴴ of X·P = Q·R
  Variant variant = Variant::warp;
};

// Whether the shared-memory variant fits depends on whether it accumulates V₁: on the QR path that
// is wanted for X's U (= Q·[V₁; 0]), not for X's V.
template <class D>
Plan make_plan(std::int64_t m, std::int64_t n, const SvdOptions& options) {
  Plan plan;
  plan.transpose = m < n;
  plan.m_w = static_cast<int>(std::max(m, n));
  plan.n_w = static_cast<int>(std::min(m, n));
  const bool want_u = plan.transpose ? options.v : options.u;  // X's U
  if (plan.m_w <= svdj::kWarpMaxRows && plan.n_w <= svdj::kWarpMaxCols) {
    plan.variant = Variant::warp;
    return plan;
  }
  plan.qr = true;
  if (plan.n_w <= svdj::kWarpMaxCols) plan.variant = Variant::warp;
  else if (svdj::block_fits<D>(plan.n_w, plan.n_w, want_u, kSmemLimit)) plan.variant = Variant::block;
  else plan.variant = Variant::block_jacobi;
  return plan;
}

template <class R>
R tolerance(int rows) {
  return static_cast<R>(std::sqrt(static_cast<double>(std::max(rows, 1)))) * std::numeric_limits<R>::epsilon();
}

std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// The QR path's workspace: X's columns in presorted order (X·P), τ of its QR, geqrf's info, P as a
// map each way, then block Jacobi's.
template <class T>
struct QrParts {
  T* x = nullptr;
  T* tau = nullptr;
  int* info = nullptr;
  int* order = nullptr;     // count × n_w: column of X at sorted position i
  int* position = nullptr;  // count × n_w: sorted position of X's column j
  void* block_jacobi = nullptr;
  std::size_t bytes = 0;

  QrParts(const Plan& plan, std::int64_t count, bool with_u, bool with_v, unsigned char* base) {
    std::size_t at = 0;
    auto take = [&](std::size_t size) {
      unsigned char* p = base == nullptr ? nullptr : base + at;
      at += align256(size);
      return p;
    };
    x = reinterpret_cast<T*>(take(sizeof(T) * std::size_t(count) * plan.m_w * plan.n_w));
    tau = reinterpret_cast<T*>(take(sizeof(T) * std::size_t(count) * plan.n_w));
    info = reinterpret_cast<int*>(take(sizeof(int) * std::size_t(count)));
    order = reinterpret_cast<int*>(take(sizeof(int) * std::size_t(count) * plan.n_w));
    position = reinterpret_cast<int*>(take(sizeof(int) * std::size_t(count) * plan.n_w));
    if (plan.variant == Variant::block_jacobi)
      block_jacobi = take(svdj::block_jacobi_workspace<T>(plan.n_w, count, with_v, with_u));
    bytes = at;
  }
};

// The presorting permutation P: X's columns by decreasing norm (ties by index; a NaN norm sorts
// last, so that P is a permutation whatever the input). X = A, or Aᴴ when transpose (its columns are
// A's rows). A block per matrix; the norms in double (only their order matters).
template <class D>
__global__ void __launch_bounds__(256) column_order_kernel(const D* a, long long lda, long long stride_a, int rows,
                                                          int cols, bool transpose, int* order, int* position) {
  extern __shared__ double norms[];
  const long long b = blockIdx.x;
  const D* m = a + b * stride_a;
  const int n_w = transpose ? rows : cols, length = transpose ? cols : rows;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  for (int j = warp; j < n_w; j += warps) {
    double sum = 0;
    for (int i = lane; i < length; i += 32) {
      const D x = transpose ? m[j + i * lda] : m[i + j * lda];
      sum += double(abs2(x));
    }
    sum = warp_sum(sum);
    if (lane == 0) norms[j] = isnan(sum) ? -1.0 : sum;
  }
  __syncthreads();
  for (int j = threadIdx.x; j < n_w; j += blockDim.x) {
    int r = 0;
    for (int k = 0; k < n_w; ++k) r += (norms[k] > norms[j] || (norms[k] == norms[j] && k < j)) ? 1 : 0;
    order[b * n_w + r] = j;
    position[b * n_w + j] = r;
  }
}

// X·P into the workspace: X'(i, position[j]) = X(i, j), X = A or Aᴴ; a block per 32 × 32 tile of A,
// through shared memory so that A is read and X' written along their contiguous index.
template <class D>
__global__ void gather_columns_kernel(const D* a, long long lda, long long stride_a, int rows, int cols,
                                      bool transpose, const int* position, D* x, long long ldx, long long stride_x) {
  __shared__ D tile[32][33];
  const long long b = blockIdx.z;
  const int r0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
  const D* src = a + b * stride_a;
  D* dst = x + b * stride_x;
  const int n_w = transpose ? rows : cols;
  for (int y = threadIdx.y; y < 32; y += blockDim.y) {
    const int r = r0 + threadIdx.x, c = c0 + y;
    if (r < rows && c < cols) tile[y][threadIdx.x] = src[r + c * lda];
  }
  __syncthreads();
  for (int y = threadIdx.y; y < 32; y += blockDim.y) {
    if (transpose) {  // X(c, r) = conj(A(r, c)): X's column r, rows c0 … along threadIdx.x
      const int r = r0 + y, c = c0 + threadIdx.x;
      if (r < rows && c < cols) dst[c + position[b * n_w + r] * ldx] = conj_of(tile[threadIdx.x][y]);
    } else {
      const int r = r0 + threadIdx.x, c = c0 + y;
      if (r < rows && c < cols) dst[r + position[b * n_w + c] * ldx] = tile[y][threadIdx.x];
    }
  }
}

}  // namespace

template <class T>
std::size_t gesvj_cuda_workspace(std::int64_t m, std::int64_t n, std::int64_t count, const SvdOptions& options) {
  const Plan plan = make_plan<device_t<T>>(m, n, options);
  if (!plan.qr) return 0;
  const bool want_u = plan.transpose ? options.v : options.u;
  const bool want_v = plan.transpose ? options.u : options.v;
  return QrParts<T>(plan, count, want_u, want_v, nullptr).bytes;
}

template <class T>
void gesvj_cuda(CudaContext& context, Batch<T> a, std::span<real_t<T>> s, Batch<T> u, Batch<T> v,
                std::span<SvdInfo> info, const SvdOptions& options) {
  using D = device_t<T>;
  using R = real_t<T>;
  context.make_current();
  cudaStream_t stream = context.stream();
  const Plan plan = make_plan<D>(a.rows, a.cols, options);
  const long long count = a.count;
  const int max_sweeps = options.max_sweeps > 0 ? options.max_sweeps : 30;

  // X's U is A's U (m ≥ n) or A's V (m < n), and the other way round.
  const Batch<T>& xu = plan.transpose ? v : u;
  const Batch<T>& xv = plan.transpose ? u : v;
  const bool want_u = plan.transpose ? options.v : options.u;
  const bool want_v = plan.transpose ? options.u : options.v;

  Problem<D> pb;
  pb.count = count;
  pb.s = s.data();
  pb.info = info.data();
  pb.max_sweeps = max_sweeps;
  // A column norm at or below max(m, n)·ε times the largest is numerically zero (gesvj_cuda.cuh):
  // max(m, n) of A also on the QR path, whose R carries A's rounding.
  const R zero_level = static_cast<R>(plan.m_w) * std::numeric_limits<R>::epsilon();
  pb.zero_level = zero_level;

  if (!plan.qr) {
    pb.m = plan.m_w;
    pb.n = plan.n_w;
    pb.a = reinterpret_cast<const D*>(a.data);
    pb.lda = a.ld;
    pb.stride_a = a.stride;
    pb.conj_transpose = plan.transpose;
    pb.tol = tolerance<R>(plan.m_w);
    if (want_u) {
      pb.u = reinterpret_cast<D*>(xu.data);
      pb.ldu = xu.ld;
      pb.stride_u = xu.stride;
      pb.u_rows = plan.m_w;
    }
    if (want_v) {
      pb.v = reinterpret_cast<D*>(xv.data);
      pb.ldv = xv.ld;
      pb.stride_v = xv.stride;
      pb.v_rows = plan.n_w;
    }
    svdj::launch_warp(pb, stream);
    return;
  }

  // X·P = Q·R (P below), then Jacobi on Rᴴ = U₁·Σ·V₁ᴴ, so that
  // X = (Q·V₁)·Σ·(P·U₁)ᴴ: X's U = Q·[V₁; 0] (the variant accumulates V₁ into the rows of X's U, unmqr
  // applies Q), X's V = P·U₁ (the variant's normalised columns). On Rᴴ rather than R because the
  // one-sided Jacobi method converges on Rᴴ in about ten sweeps whatever κ(A), where on A or R an
  // ill-conditioned matrix can take three times as many (Drmač and Veselić, "New fast and accurate
  // Jacobi SVD algorithm I", SIAM J. Matrix Anal. Appl., 2008) — while the relative accuracy of a
  // graded A = B·D is kept: R = R_B·D, and Rᴴ = D·R_Bᴴ is graded by rows, which plane rotations of
  // columns leave alone.
  const QrParts<T> parts(plan, count, want_u, want_v,
                         static_cast<unsigned char*>(
                             context.workspace().acquire(QrParts<T>(plan, count, want_u, want_v, nullptr).bytes)));
  // Columns presorted by decreasing norm — the cheap stand-in for the column pivoting of Drmač and
  // Veselić's QR: it grades R's rows, so that the Jacobi method on Rᴴ needs few sweeps also for a
  // graded A, and that the QRs of block Jacobi's pairs of Rᴴ's columns, whose rows are then in
  // decreasing order, keep the small singular values' relative accuracy. X·P = Q·R gives X's
  // V = P·U₁: row i of U₁ goes to row order[i].
  {
    const D* a_data = reinterpret_cast<const D*>(a.data);
    const std::size_t smem = sizeof(double) * std::size_t(plan.n_w);
    if (smem > 48 * 1024)
      COVFLOW_CUDA_TRY(cudaFuncSetAttribute(column_order_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(smem)));
    column_order_kernel<D><<<static_cast<unsigned>(count), 256, smem, stream>>>(
        a_data, a.ld, a.stride, static_cast<int>(a.rows), static_cast<int>(a.cols), plan.transpose, parts.order,
        parts.position);
    COVFLOW_CHECK_LAUNCH();
    const dim3 grid((a.rows + 31) / 32, (a.cols + 31) / 32, static_cast<unsigned>(count));
    gather_columns_kernel<D><<<grid, dim3(32, 8), 0, stream>>>(
        a_data, a.ld, a.stride, static_cast<int>(a.rows), static_cast<int>(a.cols), plan.transpose, parts.position,
        reinterpret_cast<D*>(parts.x), plan.m_w, static_cast<long long>(plan.m_w) * plan.n_w);
    COVFLOW_CHECK_LAUNCH();
  }
  const Batch<T> x = Batch<T>::packed(parts.x, plan.m_w, plan.n_w, count);
  geqrf_cuda<T>(context, x, {parts.tau, static_cast<std::size_t>(count) * plan.n_w},
                {parts.info, static_cast<std::size_t>(count)});
  D* u_out = want_v ? reinterpret_cast<D*>(xv.data) : nullptr;  // U₁
  D* v_out = want_u ? reinterpret_cast<D*>(xu.data) : nullptr;  // [V₁; 0]
  if (plan.variant == Variant::block_jacobi) {
    svdj::BlockJacobiArgs<D> args;
    args.count = count;
    args.n = plan.n_w;
    args.r = reinterpret_cast<const D*>(x.data);
    args.ldr = x.ld;
    args.stride_r = x.stride;
    args.s = s.data();
    args.u = u_out;
    args.ldu = xv.ld;
    args.stride_u = xv.stride;
    args.u_rows = plan.n_w;
    args.u_row_map = parts.order;
    args.v = v_out;
    args.ldv = xu.ld;
    args.stride_v = xu.stride;
    args.v_rows = plan.m_w;
    args.info = info.data();
    args.max_sweeps = max_sweeps;
    args.tol = tolerance<R>(plan.n_w);
    args.zero_level = zero_level;
    svdj::block_jacobi<T>(context, args, parts.block_jacobi);
  } else {
    pb.m = plan.n_w;
    pb.n = plan.n_w;
    pb.a = reinterpret_cast<const D*>(x.data);
    pb.lda = x.ld;
    pb.stride_a = x.stride;
    pb.conj_transpose = true;
    pb.upper = true;
    pb.tol = tolerance<R>(plan.n_w);
    pb.u = u_out;
    pb.ldu = xv.ld;
    pb.stride_u = xv.stride;
    pb.u_rows = plan.n_w;
    pb.u_row_map = parts.order;
    pb.v = v_out;
    pb.ldv = xu.ld;
    pb.stride_v = xu.stride;
    pb.v_rows = plan.m_w;
    if (plan.variant == Variant::warp) svdj::launch_warp(pb, stream);
    else svdj::launch_block(pb, stream);
  }
  if (want_u) {
    Batch<const T> reflectors = x;
    reflectors.cols = plan.n_w;
    unmqr_cuda<T>(context, Side::left, Op::none, reflectors,
                  {parts.tau, static_cast<std::size_t>(count) * plan.n_w}, xu);
  }
}

#define COVFLOW_GESVJ_CUDA(T)                                                                                 \
  template std::size_t gesvj_cuda_workspace<T>(std::int64_t, std::int64_t, std::int64_t, const SvdOptions&); \
  template void gesvj_cuda<T>(CudaContext&, Batch<T>, std::span<real_t<T>>, Batch<T>, Batch<T>,             \
                              std::span<SvdInfo>, const SvdOptions&);
COVFLOW_GESVJ_CUDA(f32)
COVFLOW_GESVJ_CUDA(f64)
COVFLOW_GESVJ_CUDA(cf32)
COVFLOW_GESVJ_CUDA(cf64)
#undef COVFLOW_GESVJ_CUDA

}  // namespace covflow::linalg::detail

// tlr_gemv on the CUDA backend: Y = α·op(A)·X + β·Y for a TLR A and X, Y of n × nrhs.
//
// Every stored tile's product is two small GEMMs, batched over all tiles of all matrices with the
// same m, n, k — the U/V slabs are zero padded to b × max_rank and X to nt·b rows, so each tile can
// be used whole (Charara, Keyes, Ltaief, "Tile Low-Rank GEMM Using Batched Operations on GPUs",
// Euro-Par 2018, §5: the low-rank product as a sequence of small batched GEMMs):
//   forward  (the tile U·Vᴴ at (i, j), X_j in, block row i out):   W = Vᴴ·X_j,  P = U·W;
//   adjoint  (its conjugate transpose V·Uᴴ at (j, i), X_i in, j out): W = Uᴴ·X_i,  P = V·W.
// op N of a general A takes the forward products, op C the adjoint ones, a Hermitian A (lower tiles
// stored) both; the diagonal tiles are one more batched GEMM. A complex op T runs as op C on conj(X)
// with the sum conjugated back, since Aᵀ·X = conj(Aᴴ·conj(X)). reduce_kernel then adds, for each
// element of Y, its diagonal product and the nt − 1 products of its block row in a fixed order
// (deterministic, no atomics), and applies α and β.
// The first GEMM of each pair reads X through pointer arrays that pointers_kernel builds in the
// workspace (the block of X a tile reads depends on the tile); the second is strided.
#include <cuda_runtime.h>

#include <cstring>

#include "tlr_cuda_common.cuh"

namespace covflow::linalg::detail::tlr_cuda {
namespace {

template <class T>
struct GemvParts {
  using D = dev_t<T>;
  D* x = nullptr;     // count × (nt·b × nrhs): X padded with zero rows (conjugated for a complex op T)
  D* w = nullptr;     // directions·count·slots × (r × nrhs)
  D* p = nullptr;     // directions·count·slots × (b × nrhs)
  D* pd = nullptr;    // count·nt × (b × nrhs): the diagonal tiles' products
  PointerSet<D> first, diagonal;
  int directions = 0;
  std::size_t bytes = 0;

  GemvParts(const Geometry& g, long long nrhs, std::byte* base) {
    Carve carve(base);
    directions = g.hermitian ? 2 : 1;
    const long long jobs = directions * g.count * g.slots;
    x = carve.take<D>(g.count * g.padded() * nrhs);
    w = carve.take<D>(jobs * g.r * nrhs);
    p = carve.take<D>(jobs * g.b * nrhs);
    pd = carve.take<D>(g.count * g.nt * g.b * nrhs);
    first = PointerSet<D>(carve, jobs);
    diagonal = PointerSet<D>(carve, g.count * g.nt);
    bytes = carve.bytes();
  }
};

template <class D>
__global__ void pad_kernel(Geometry g, const D* x, long long ldx, long long stride, int nrhs, bool conjugate, D* xp) {
  const long long np = g.padded();
  COVFLOW_TLR_GRID_STRIDE(e, g.count * np * nrhs) {
    const long long c = e / (np * nrhs);
    const long long row = e % (np * nrhs) % np, col = e % (np * nrhs) / np;
    D value = zero_of<D>();
    if (row < g.n) value = x[c * stride + row + col * ldx];
    xp[e] = conjugate ? conj_of(value) : value;
  }
}

// Pointers of the first GEMM of every tile product and of the diagonal products.
template <class D>
__global__ void pointers_kernel(Geometry g, int nrhs, int directions, bool adjoint, const D* diag, const D* u,
                                const D* v, const D* xp, D* w, D* pd, PointerSet<D> first, PointerSet<D> diagonal) {
  const long long np = g.padded(), jobs = directions * g.count * g.slots;
  COVFLOW_TLR_GRID_STRIDE(e, jobs + g.count * g.nt) {
    if (e < jobs) {
      const long long t = e % (g.count * g.slots), c = t / g.slots;
      const bool forward = directions == 2 ? e < g.count * g.slots : !adjoint;
      int i, j;
      g.tile(t % g.slots, i, j);
      const D* x_block = xp + c * np * nrhs + static_cast<long long>(forward ? j : i) * g.b;
      first.set(e, (forward ? v : u) + t * g.slab_elements(), x_block, w + e * g.r * nrhs);
    } else {
      const long long d = e - jobs, c = d / g.nt;
      const int i = static_cast<int>(d % g.nt);
      diagonal.set(d, diag + d * g.tile_elements(), xp + c * np * nrhs + static_cast<long long>(i) * g.b,
                   pd + d * g.b * nrhs);
    }
  }
}

template <class D>
__device__ inline bool is_zero(D value) {
  return real_part(value) == 0 && imag_part(value) == 0;
}

// One thread per element of Y.
template <class D>
__global__ void reduce_kernel(Geometry g, int nrhs, bool adjoint, bool conjugate, D alpha, const D* p, const D* pd,
                              D beta, D* y, long long ldy, long long stride) {
  const long long per_matrix = static_cast<long long>(g.n) * nrhs;
  const long long per_product = static_cast<long long>(g.b) * nrhs;
  COVFLOW_TLR_GRID_STRIDE(e, g.count * per_matrix) {
    const long long c = e / per_matrix;
    const int row = static_cast<int>(e % per_matrix % g.n), col = static_cast<int>(e % per_matrix / g.n);
    const int o = row / g.b;
    const long long within = row % g.b + static_cast<long long>(col) * g.b;
    D sum = pd[(c * g.nt + o) * per_product + within];
    for (int t = 0; t < g.nt; ++t) {
      if (t == o) continue;
      long long job;
      if (g.hermitian) job = t < o ? c * g.slots + g.slot(o, t) : (g.count + c) * g.slots + g.slot(t, o);
      else job = c * g.slots + (adjoint ? g.slot(t, o) : g.slot(o, t));
      sum += p[job * per_product + within];
    }
    if (conjugate) sum = conj_of(sum);
    D& out = y[c * stride + row + static_cast<long long>(col) * ldy];
    out = is_zero(beta) ? alpha * sum : alpha * sum + beta * out;
  }
}

}  // namespace

template <class T>
std::size_t gemv_workspace(const Exec&, const TlrShape& shape, std::int64_t nrhs) {
  return GemvParts<T>(geometry(shape), nrhs, nullptr).bytes;
}

template <class T>
void gemv(Exec& exec, Op op, T alpha, Tlr<const T> a, Batch<const T> x, T beta, Batch<T> y,
          std::span<std::byte> workspace) {
  using D = dev_t<T>;
  using R = real_t<T>;
  const Geometry g = geometry(a.shape);
  const int nrhs = static_cast<int>(y.cols);
  if (g.count == 0 || g.n == 0 || nrhs == 0) return;
  CudaContext& context = exec.cuda_context();
  context.make_current();
  const cudaStream_t stream = context.stream();
  const cublasHandle_t handle = context.cublas();
  const GemvParts<T> w(g, nrhs, workspace.data());
  const bool conjugate = is_complex_v<T> && op == Op::trans;
  const bool adjoint = op != Op::none;  // op T and C of a general A read the adjoint products
  const long long np = g.padded();
  const D one = from_real<D>(R(1)), zero = from_real<D>(R(0));

  pad_kernel<D><<<blocks_for(g.count * np * nrhs), kThreads, 0, stream>>>(g, dev(x.data), x.ld, x.stride, nrhs,
                                                                         conjugate, w.x);
  COVFLOW_CHECK_LAUNCH();
  pointers_kernel<D><<<blocks_for(w.first.count + w.diagonal.count), kThreads, 0, stream>>>(
      g, nrhs, w.directions, adjoint, dev(a.diag), dev(a.u), dev(a.v), w.x, w.w, w.pd, w.first, w.diagonal);
  COVFLOW_CHECK_LAUNCH();

  gemm<D>(handle, adjoint_op<D>(), CUBLAS_OP_N, g.r, nrhs, g.b, one, w.first, g.b, static_cast<int>(np), zero, g.r);
  const long long per_direction = g.count * g.slots;
  for (int direction = 0; direction < w.directions; ++direction) {
    if (per_direction == 0) break;
    const bool forward = w.directions == 2 ? direction == 0 : !adjoint;
    COVFLOW_CUBLAS_TRY(gemm_batched(handle, CUBLAS_OP_N, CUBLAS_OP_N, g.b, nrhs, g.r, one, forward ? dev(a.u) : dev(a.v),
                                    g.b, g.slab_elements(), w.w + direction * per_direction * g.r * nrhs, g.r,
                                    static_cast<long long>(g.r) * nrhs, zero,
                                    w.p + direction * per_direction * g.b * nrhs, g.b,
                                    static_cast<long long>(g.b) * nrhs, static_cast<int>(per_direction)));
  }
  // A Hermitian diagonal tile is stored whole: op C and op N agree on it up to rounding.
  gemm<D>(handle, op == Op::none ? CUBLAS_OP_N : adjoint_op<D>(), CUBLAS_OP_N, g.b, nrhs, g.b, one, w.diagonal, g.b,
          static_cast<int>(np), zero, g.b);

  reduce_kernel<D><<<blocks_for(g.count * g.n * nrhs), kThreads, 0, stream>>>(
      g, nrhs, adjoint, conjugate, to_device(alpha), w.p, w.pd, to_device(beta), dev(y.data), y.ld, y.stride);
  COVFLOW_CHECK_LAUNCH();
}

#define COVFLOW_TLR_CUDA_GEMV(T)                                                                          \
  template std::size_t gemv_workspace<T>(const Exec&, const TlrShape&, std::int64_t);                    \
  template void gemv<T>(Exec&, Op, T, Tlr<const T>, Batch<const T>, T, Batch<T>, std::span<std::byte>);
COVFLOW_TLR_CUDA_GEMV(f32)
COVFLOW_TLR_CUDA_GEMV(f64)
COVFLOW_TLR_CUDA_GEMV(cf32)
COVFLOW_TLR_CUDA_GEMV(cf64)
#undef COVFLOW_TLR_CUDA_GEMV

}  // namespace covflow::linalg::detail::tlr_cuda

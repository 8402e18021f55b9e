// tlr_gemm LLL on the CUDA backend: C = α·op(A)·op(B) + β·C with A, B and C in TLR.
//
// The driver of Charara, Keyes, Ltaief, "Tile Low-Rank GEMM Using Batched Operations on GPUs",
// Euro-Par 2018, §4–§5, step for step as the CPU backend runs it: nt outer products, the k-th adding
// op(A)(:, k)·op(B)(k, :) to every tile of every matrix of C, each step in two passes because the
// matrix-scope tolerance is relative to ‖C‖_F after the step:
//   1. every low-rank tile of C gets the product as more columns of its factors, [U | X] and
//      [V | Y] (stack_kernel and four batched GEMMs; the product of two low-rank tiles
//      L_a·R_aᴴ·L_b·R_bᴴ keeps the narrower side: X = α·L_a, Y = R_b·Wᴴ when max_rank(A) ≤
//      max_rank(B), else X = α·L_a·W, Y = R_b, with W = R_aᴴ·L_b); the stacks are factored
//      (tlr_cuda_recompress.cuh) and the dense diagonal tiles updated densely, as LLD does;
//   2. ‖C‖_F² from the diagonal tiles and the cores' Σσ² (norm_kernel, a block per matrix), then
//      every tile truncated to τ and rebuilt in its slabs.
// The stacks have one width for all tiles, max_rank(C) + max(max_rank(A), max_rank(B)), zero
// padded, so that each batched call serves every tile of the step. A Hermitian C has its lower
// tiles only. Nothing is read back: the pointer arrays and the per-step counts of each kind of tile
// follow from the geometry alone.
#include <cuda_runtime.h>

#include <vector>

#include "tlr_cuda_common.cuh"
#include "tlr_cuda_recompress.cuh"

namespace covflow::linalg::detail::tlr_cuda {
namespace {

// What step k does with C's tile (i, j), i ≠ j: both operand tiles low rank, op(A)_kk dense
// (i = k) or op(B)_kk dense (j = k).
enum Kind : int { low_low = 0, dense_a = 1, dense_b = 2 };
__host__ __device__ inline int kind_of(int i, int j, int k) { return i == k ? dense_a : j == k ? dense_b : low_low; }

template <class T>
struct LllParts {
  using D = dev_t<T>;
  D *a_conj = nullptr, *b_conj = nullptr;  // complex op T: conjugated copies of A's and B's arrays
  Recompress<T> rc;                        // a job per slab of C
  D* w = nullptr;                          // jobs × (r_a × r_b): W of the low × low products
  D* t1 = nullptr;                         // count·nt × (r_a × r_b): diagonal tiles' first product
  D* tr = nullptr;                         // count·nt × (r_a × b)
  PointerSet<D> pw, plow, pda, pdb, d1, d2, d3, d5;
  int* bad = nullptr;                      // per matrix: an input holds a NaN or an Inf
  double* matrix_norm2 = nullptr;          // per matrix: ‖C‖_F² after the step
  TruncationSums sums;                     // per slab
  std::size_t bytes = 0;

  static long long tlr_elements(const Geometry& g) {
    return g.count * (g.nt * g.tile_elements() + 2 * g.slots * g.slab_elements());
  }

  LllParts(const Geometry& ga, const Geometry& gb, const Geometry& gc, std::byte* base) {
    Carve carve(base);
    if constexpr (is_complex_v<T>) {
      a_conj = carve.take<D>(tlr_elements(ga));
      b_conj = carve.take<D>(tlr_elements(gb));
    }
    const long long jobs = gc.count * gc.slots, diagonal = gc.count * gc.nt;
    rc = Recompress<T>(carve, gc.b, gc.r, gc.r + std::max(ga.r, gb.r), jobs);
    w = carve.take<D>(jobs * ga.r * gb.r);
    t1 = carve.take<D>(diagonal * ga.r * gb.r);
    tr = carve.take<D>(diagonal * ga.r * gc.b);
    pw = PointerSet<D>(carve, jobs);
    plow = PointerSet<D>(carve, jobs);
    pda = PointerSet<D>(carve, jobs);
    pdb = PointerSet<D>(carve, jobs);
    d1 = PointerSet<D>(carve, diagonal);
    d2 = PointerSet<D>(carve, diagonal);
    d3 = PointerSet<D>(carve, diagonal);
    d5 = PointerSet<D>(carve, gc.count);
    bad = carve.take<int>(gc.count);
    matrix_norm2 = carve.take<double>(gc.count);
    sums.dropped2 = carve.take<double>(jobs);
    sums.capped = carve.take<int>(jobs);
    sums.failed = carve.take<int>(jobs);
    bytes = carve.bytes();
  }
};

// Tiles of each kind per matrix at step k (host and device count them alike).
struct KindCounts {
  long long n[3] = {0, 0, 0};
};
inline KindCounts kind_counts(const Geometry& g, int k) {
  KindCounts counts;
  for (long long s = 0; s < g.slots; ++s) {
    int i, j;
    g.tile(s, i, j);
    ++counts.n[kind_of(i, j, k)];
  }
  return counts;
}

// A block per matrix: the inputs checked (C only when β ≠ 0), the job list, the sums cleared.
template <class D>
__global__ void __launch_bounds__(kThreads)
    check_kernel(Operand<D> a, Operand<D> b, Geometry gc, const D* c_diag, const D* c_u, const D* c_v,
                 const int* a_rank, const int* b_rank, const int* c_rank, bool read_c, int* bad, long long* job_slab,
                 int* active, TruncationSums sums) {
  const long long c = blockIdx.x;
  const bool good = block_finite(a.g, a.diag, a.u, a.v, a_rank, c, false) &&
                    block_finite(b.g, b.diag, b.u, b.v, b_rank, c, false) &&
                    (!read_c || block_finite(gc, c_diag, c_u, c_v, c_rank, c, false));
  for (long long s = threadIdx.x; s < gc.slots; s += blockDim.x) {
    const long long slab = c * gc.slots + s;
    job_slab[slab] = slab;
    active[slab] = good ? 1 : 0;
    sums.dropped2[slab] = 0;
    sums.capped[slab] = 0;
    sums.failed[slab] = 0;
  }
  if (threadIdx.x == 0) bad[c] = good ? 0 : 1;
}

// C ← β·C on what the CPU backend scales: the diagonal tiles' own rows × cols, the U slabs; β = 0
// writes zeros (V and the ranks too) without reading C.
template <class D>
__global__ void scale_kernel(Geometry g, D beta, D* diag, D* u, D* v, int* rank) {
  const bool zero = real_part(beta) == 0 && imag_part(beta) == 0;
  const long long te = g.tile_elements(), dn = g.count * g.nt * te, fn = g.count * g.slots * g.slab_elements();
  COVFLOW_TLR_GRID_STRIDE(e, dn + fn + g.count * g.slots) {
    if (e < dn) {
      const int i = static_cast<int>(e / te % g.nt), row = static_cast<int>(e % te % g.b),
                col = static_cast<int>(e % te / g.b);
      if (row < g.rows(i) && col < g.rows(i)) diag[e] = zero ? zero_of<D>() : beta * diag[e];
    } else if (e < dn + fn) {
      const long long f = e - dn;
      u[f] = zero ? zero_of<D>() : beta * u[f];
      if (zero) v[f] = zero_of<D>();
    } else if (zero) {
      rank[e - dn - fn] = 0;
    }
  }
}

// Step k's pointer arrays: a thread per matrix walks C's slots in order, numbering the tiles of
// each kind (so the arrays are dense and their lengths known on the host), then the diagonal tiles.
template <class D>
__global__ void pointers_kernel(Operand<D> a, Operand<D> b, Geometry gc, int k, KindCounts counts, D* c_diag,
                                D* su, D* sv, int width, D* w, D* t1, D* tr, PointerSet<D> pw, PointerSet<D> plow,
                                PointerSet<D> pda, PointerSet<D> pdb, PointerSet<D> d1, PointerSet<D> d2,
                                PointerSet<D> d3, PointerSet<D> d5) {
  const int ra = a.g.r, rb = b.g.r;
  const long long r_off = static_cast<long long>(gc.r) * gc.b, stack = static_cast<long long>(gc.b) * width;
  COVFLOW_TLR_GRID_STRIDE(c, gc.count) {
    long long next[3] = {c * counts.n[0], c * counts.n[1], c * counts.n[2]};
    for (long long s = 0; s < gc.slots; ++s) {
      int i, j;
      gc.tile(s, i, j);
      const long long job = c * gc.slots + s;
      const D *la, *ra_, *lb, *rb_;
      const int kind = kind_of(i, j, k);
      const long long e = next[kind]++;
      if (kind == low_low) {
        a.pair(c, i, k, la, ra_);
        b.pair(c, k, j, lb, rb_);
        D* wt = w + e * ra * rb;
        pw.set(e, ra_, lb, wt);
        if (ra <= rb) plow.set(e, rb_, wt, sv + job * stack + r_off);  // Y = R_b·Wᴴ
        else plow.set(e, la, wt, su + job * stack + r_off);            // X = α·L_a·W
      } else if (kind == dense_a) {
        b.pair(c, k, j, lb, rb_);
        pda.set(e, a.diagonal(c, k), lb, su + job * stack + r_off);  // X = α·op(D_a)·L_b
      } else {
        a.pair(c, i, k, la, ra_);
        pdb.set(e, b.diagonal(c, k), ra_, sv + job * stack + r_off);  // Y = op(D_b)ᴴ·R_a
      }
    }
    for (int i = 0; i < gc.nt; ++i) {
      D* tile = c_diag + (c * gc.nt + i) * gc.tile_elements();
      if (i == k) {
        d5.set(c, a.diagonal(c, k), b.diagonal(c, k), tile);
        continue;
      }
      const D *la, *ra_, *lb, *rb_;
      a.pair(c, i, k, la, ra_);
      b.pair(c, k, i, lb, rb_);
      const long long e = c * (gc.nt - 1) + i - (i > k ? 1 : 0);
      d1.set(e, ra_, lb, t1 + e * ra * rb);
      d2.set(e, t1 + e * ra * rb, rb_, tr + e * ra * gc.b);
      d3.set(e, la, tr + e * ra * gc.b, tile);
    }
  }
}

// The stacks of step k, an element per thread: C's own factors in the first max_rank columns, then
// the product's factors that are copies (α·L_a, or R_b); the GEMMs fill the rest of the product's
// columns, every other column is zero.
template <class D>
__global__ void stack_kernel(Operand<D> a, Operand<D> b, Geometry gc, int k, D alpha, const D* c_u, const D* c_v,
                             int width, D* su, D* sv) {
  const long long per = static_cast<long long>(gc.b) * width;
  COVFLOW_TLR_GRID_STRIDE(e, gc.count * gc.slots * per) {
    const long long job = e / per, c = job / gc.slots;
    const int row = static_cast<int>(e % per % gc.b), col = static_cast<int>(e % per / gc.b);
    D xu = zero_of<D>(), xv = zero_of<D>();
    if (col < gc.r) {
      const long long at = job * gc.slab_elements() + row + static_cast<long long>(col) * gc.b;
      xu = c_u[at];
      xv = c_v[at];
    } else {
      int i, j;
      gc.tile(job % gc.slots, i, j);
      const int kind = kind_of(i, j, k), l = col - gc.r;
      const D *la, *ra_, *lb, *rb_;
      if (kind == low_low) {
        a.pair(c, i, k, la, ra_);
        b.pair(c, k, j, lb, rb_);
        if (a.g.r <= b.g.r && l < a.g.r) xu = alpha * la[row + static_cast<long long>(l) * gc.b];
        if (a.g.r > b.g.r && l < b.g.r) xv = rb_[row + static_cast<long long>(l) * gc.b];
      } else if (kind == dense_a) {
        b.pair(c, k, j, lb, rb_);
        if (l < b.g.r) xv = rb_[row + static_cast<long long>(l) * gc.b];
      } else {
        a.pair(c, i, k, la, ra_);
        if (l < a.g.r) xu = alpha * la[row + static_cast<long long>(l) * gc.b];
      }
    }
    su[e] = xu;
    sv[e] = xv;
  }
}

// A block per matrix: ‖C‖_F² after the step, the diagonal tiles' own parts and weight·Σσ² of the
// cores.
template <class D>
__global__ void __launch_bounds__(kThreads) norm_kernel(Geometry g, const D* diag, const double* core_norm2,
                                                        double* matrix_norm2) {
  __shared__ double scratch[kThreads / 32];
  const long long c = blockIdx.x, te = g.tile_elements();
  double dense = 0, low = 0;
  for (long long e = threadIdx.x; e < g.nt * te; e += blockDim.x) {
    const int i = static_cast<int>(e / te), row = static_cast<int>(e % te % g.b), col = static_cast<int>(e % te / g.b);
    if (row < g.rows(i) && col < g.rows(i)) dense += double(abs2(diag[c * g.nt * te + e]));
  }
  for (long long s = threadIdx.x; s < g.slots; s += blockDim.x) low += core_norm2[c * g.slots + s];
  const double weight = g.hermitian ? 2.0 : 1.0;
  const double total = block_sum(dense, scratch) + weight * block_sum(low, scratch);
  if (threadIdx.x == 0) matrix_norm2[c] = total;
}

// The ragged last diagonal tile's padding back to the identity (the dense products of the steps
// run over whole b × b tiles).
template <class D>
__global__ void padding_kernel(Geometry g, D* diag) {
  const int last = g.nt - 1, ri = g.rows(last);
  const long long te = g.tile_elements();
  COVFLOW_TLR_GRID_STRIDE(e, g.count * te) {
    const long long c = e / te;
    const int row = static_cast<int>(e % te % g.b), col = static_cast<int>(e % te / g.b);
    if (row >= ri || col >= ri) diag[(c * g.nt + last) * te + e % te] = from_real<D>(sreal_t<D>(row == col ? 1 : 0));
  }
}

// A block per matrix: TlrInfo from the sums.
__global__ void __launch_bounds__(kThreads) info_kernel(Geometry g, const int* bad, const double* matrix_norm2,
                                                        TruncationSums sums, TlrInfo* info) {
  __shared__ double scratch[kThreads / 32];
  const long long c = blockIdx.x;
  double dropped = 0, capped = 0, failed = 0;
  for (long long s = threadIdx.x; s < g.slots; s += blockDim.x) {
    dropped += sums.dropped2[c * g.slots + s];
    capped += sums.capped[c * g.slots + s];
    failed += sums.failed[c * g.slots + s];
  }
  dropped = block_sum(dropped, scratch);
  capped = block_sum(capped, scratch);
  failed = block_sum(failed, scratch);
  if (threadIdx.x != 0) return;
  TlrInfo out{};
  if (bad[c] != 0) {
    out.status = tlr_status::non_finite_input;
    out.error = out.norm = double(NAN);
  } else {
    out.capped_tiles = static_cast<std::int32_t>(capped);
    out.error = sqrt((g.hermitian ? 2.0 : 1.0) * dropped);
    out.norm = sqrt(matrix_norm2[c]);
    out.status = failed > 0   ? tlr_status::svd_failed
                 : capped > 0 ? tlr_status::max_rank_reached
                              : tlr_status::ok;
  }
  info[c] = out;
}

}  // namespace

template <class T>
std::size_t gemm_lll_workspace(const Exec&, const TlrShape& a, const TlrShape& b, const TlrShape& c) {
  return LllParts<T>(geometry(a), geometry(b), geometry(c), nullptr).bytes;
}

template <class T>
void gemm_lll(Exec& exec, Op op_a, Op op_b, T alpha, Tlr<const T> a, Tlr<const T> b, T beta, Tlr<T> c,
              std::span<TlrInfo> info, std::span<std::byte> workspace, const TlrOptions& options) {
  using D = dev_t<T>;
  using R = real_t<T>;
  const Geometry g = geometry(c.shape);
  if (g.count == 0 || g.n == 0) return;
  CudaContext& context = exec.cuda_context();
  context.make_current();
  const cudaStream_t stream = context.stream();
  const cublasHandle_t handle = context.cublas();
  const LllParts<T> w(geometry(a.shape), geometry(b.shape), g, workspace.data());
  const Operand<D> oa = operand(a, op_a, w.a_conj, stream), ob = operand(b, op_b, w.b_conj, stream);
  const int bt = g.b, ra = oa.g.r, rb = ob.g.r;
  const cublasOperation_t adj = adjoint_op<D>();
  const cublasOperation_t op_da = oa.adjoint ? adj : CUBLAS_OP_N, op_db = ob.adjoint ? adj : CUBLAS_OP_N;
  const cublasOperation_t op_db_adjoint = ob.adjoint ? CUBLAS_OP_N : adj;  // op(D_b)ᴴ
  const D one = from_real<D>(R(1)), zero = from_real<D>(R(0)), scale = to_device(alpha);
  const D d_beta = to_device(beta);
  D* c_diag = dev(c.diag);
  D* c_u = dev(c.u);
  D* c_v = dev(c.v);
  const unsigned matrices = static_cast<unsigned>(g.count);
  const long long jobs = g.count * g.slots;

  check_kernel<D><<<matrices, kThreads, 0, stream>>>(oa, ob, g, c_diag, c_u, c_v, a.rank, b.rank, c.rank,
                                                     beta != T(0), w.bad, w.rc.job_slab, w.rc.active, w.sums);
  COVFLOW_CHECK_LAUNCH();
  scale_kernel<D><<<blocks_for(g.count * (g.nt * g.tile_elements() + g.slots * (g.slab_elements() + 1))), kThreads, 0,
                    stream>>>(g, d_beta, c_diag, c_u, c_v, c.rank);
  COVFLOW_CHECK_LAUNCH();

  const TruncationRule rule{w.matrix_norm2, options.tolerance * options.tolerance, g.hermitian ? 2.0 : 1.0,
                            options.scope == TlrScope::tile};
  for (int k = 0; k < g.nt; ++k) {
    const KindCounts counts = kind_counts(g, k);
    PointerSet<D> pw = w.pw, plow = w.plow, pda = w.pda, pdb = w.pdb, d1 = w.d1, d2 = w.d2, d3 = w.d3;
    pw.count = plow.count = g.count * counts.n[low_low];
    pda.count = g.count * counts.n[dense_a];
    pdb.count = g.count * counts.n[dense_b];
    d1.count = d2.count = d3.count = g.count * (g.nt - 1);
    pointers_kernel<D><<<blocks_for(g.count), kThreads, 0, stream>>>(oa, ob, g, k, counts, c_diag, w.rc.su, w.rc.sv, w.rc.width, w.w, w.t1,
                                                                     w.tr, pw, plow, pda, pdb, d1, d2, d3, w.d5);
    COVFLOW_CHECK_LAUNCH();
    if (jobs > 0) {
      stack_kernel<D><<<blocks_for(jobs * bt * w.rc.width), kThreads, 0, stream>>>(oa, ob, g, k, scale, c_u, c_v, w.rc.width,
                                                                                    w.rc.su, w.rc.sv);
      COVFLOW_CHECK_LAUNCH();
    }
    // Pass 1: the products into the stacks, the dense diagonal tiles, the factorizations.
    gemm<D>(handle, adj, CUBLAS_OP_N, ra, rb, bt, one, pw, bt, bt, zero, ra);
    if (ra <= rb) gemm<D>(handle, CUBLAS_OP_N, adj, bt, ra, rb, one, plow, bt, ra, zero, bt);
    else gemm<D>(handle, CUBLAS_OP_N, CUBLAS_OP_N, bt, rb, ra, scale, plow, bt, ra, zero, bt);
    gemm<D>(handle, op_da, CUBLAS_OP_N, bt, rb, bt, scale, pda, bt, bt, zero, bt);
    gemm<D>(handle, op_db_adjoint, CUBLAS_OP_N, bt, ra, bt, one, pdb, bt, bt, zero, bt);
    gemm<D>(handle, adj, CUBLAS_OP_N, ra, rb, bt, one, d1, bt, bt, zero, ra);
    gemm<D>(handle, CUBLAS_OP_N, adj, ra, bt, rb, one, d2, ra, bt, zero, ra);
    gemm<D>(handle, CUBLAS_OP_N, CUBLAS_OP_N, bt, bt, ra, scale, d3, bt, ra, one, bt);
    gemm<D>(handle, op_da, op_db, bt, bt, bt, scale, w.d5, bt, bt, one, bt);
    recompress_factor<T>(exec, w.rc, jobs);
    // Pass 2: ‖C‖_F², then every tile truncated to τ and rebuilt.
    norm_kernel<D><<<matrices, kThreads, 0, stream>>>(g, c_diag, w.rc.norm2, w.matrix_norm2);
    COVFLOW_CHECK_LAUNCH();
    recompress_truncate<T>(exec, w.rc, jobs, g, rule, w.sums, c_u, c_v, c.rank);
  }

  if (g.n % g.b != 0) {
    padding_kernel<D><<<blocks_for(g.count * g.tile_elements()), kThreads, 0, stream>>>(g, c_diag);
    COVFLOW_CHECK_LAUNCH();
  }
  info_kernel<<<matrices, kThreads, 0, stream>>>(g, w.bad, w.matrix_norm2, w.sums, info.data());
  COVFLOW_CHECK_LAUNCH();
  fill_nan_kernel<D><<<blocks_for(g.count * (g.nt * g.tile_elements() + g.slots * (2 * g.slab_elements() + 1))),
                       kThreads, 0, stream>>>(g, w.bad, c_diag, c_u, c_v, c.rank);
  COVFLOW_CHECK_LAUNCH();
}

#define COVFLOW_TLR_CUDA_LLL(T)                                                                              \
  template std::size_t gemm_lll_workspace<T>(const Exec&, const TlrShape&, const TlrShape&, const TlrShape&); \
  template void gemm_lll<T>(Exec&, Op, Op, T, Tlr<const T>, Tlr<const T>, T, Tlr<T>, std::span<TlrInfo>,      \
                            std::span<std::byte>, const TlrOptions&);
COVFLOW_TLR_CUDA_LLL(f32)
COVFLOW_TLR_CUDA_LLL(f64)
COVFLOW_TLR_CUDA_LLL(cf32)
COVFLOW_TLR_CUDA_LLL(cf64)
#undef COVFLOW_TLR_CUDA_LLL

}  // namespace covflow::linalg::detail::tlr_cuda

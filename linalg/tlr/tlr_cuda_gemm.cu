// tlr_gemm on the CUDA backend. LLD: C = α·op(A)·op(B) + β·C with A and B in TLR and C dense.
//
// Charara, Keyes, Ltaief, "Tile Low-Rank GEMM Using Batched Operations on GPUs", Euro-Par 2018: the
// driver is nt successive outer products (§4), step k adding op(A)(:, k)·op(B)(k, :) to every tile
// of C with batched calls, and a low-rank times low-rank tile product is three small GEMMs (§5):
//   C_ij += α·L_a·(R_aᴴ·L_b)·R_bᴴ   with op(A)_ik = L_a·R_aᴴ, op(B)_kj = L_b·R_bᴴ.
// Beyond the paper, step k also meets the dense diagonal tiles of A and B:
//   i ≠ k, j ≠ k   T1 = R_aᴴ·L_b (r_a × r_b), Tr = T1·R_bᴴ (r_a × b), C_ij += α·L_a·Tr;
//   i ≠ k, j = k   Tr = R_aᴴ·op(D_b),                                C_ik += α·L_a·Tr;
//   i = k, j ≠ k   Tl = op(D_a)·L_b (b × r_b),                       C_kj += α·Tl·R_bᴴ;
//   i = k = j                                                         C_kk += α·op(D_a)·op(D_b).
// Each line is one cuBLAS batched GEMM over all (matrix, i, j) of its kind, with uniform sizes (the
// slabs are zero padded to b × max_rank) on pointer arrays that lld_pointers_kernel builds for the
// step in the workspace. C is accumulated in a padded copy of nt·b × nt·b (β·C, zeros beyond n), so
// a ragged tile needs no special case: its padded rows and columns of U and V are zero and the
// padding of its diagonal tile is the identity, whose off-diagonal zeros keep the padding out of
// the matrix's own part.
//
// Which stored tile gives op(X)_ik = L·Rᴴ: op N, (i, k) as U·Vᴴ; op C, (k, i) with the factors
// swapped; a Hermitian X, the lower one of the two, swapped when it is (k, i). A complex op T runs
// as op C on conjugated copies of X's arrays (op_T(X) = conj(X)ᴴ).
//
// LLL (C in TLR) is in tlr_cuda_lll.cu.
#include <cuda_runtime.h>

#include "tlr_cuda_common.cuh"

namespace covflow::linalg::detail::tlr_cuda {
namespace {

template <class T>
struct LldParts {
  using D = dev_t<T>;
  D *a_conj = nullptr, *b_conj = nullptr;  // complex op T: conj of diag, u, v (one array each operand)
  D* cp = nullptr;   // count × (nt·b × nt·b): C padded
  D* t1 = nullptr;   // count·(nt−1)² × (r_a × r_b)
  D* tr = nullptr;   // count·(nt−1)·nt × (r_a × b)
  D* tl = nullptr;   // count·(nt−1) × (b × r_b)
  PointerSet<D> g1, g2a, g2b, g3, g4a, g4b, g5;
  std::size_t bytes = 0;

  static long long tlr_elements(const Geometry& g) {
    return g.count * (g.nt * g.tile_elements() + 2 * g.slots * g.slab_elements());
  }

  LldParts(const Geometry& ga, const Geometry& gb, std::byte* base) {
    Carve carve(base);
    if constexpr (is_complex_v<T>) {
      a_conj = carve.take<D>(tlr_elements(ga));
      b_conj = carve.take<D>(tlr_elements(gb));
    }
    const long long c = ga.count, m1 = ga.nt - 1, nt = ga.nt;
    cp = carve.take<D>(c * ga.padded() * ga.padded());
    t1 = carve.take<D>(c * m1 * m1 * ga.r * gb.r);
    tr = carve.take<D>(c * m1 * nt * ga.r * ga.b);
    tl = carve.take<D>(c * m1 * ga.b * gb.r);
    g1 = PointerSet<D>(carve, c * m1 * m1);
    g2a = PointerSet<D>(carve, c * m1 * m1);
    g2b = PointerSet<D>(carve, c * m1);
    g3 = PointerSet<D>(carve, c * m1 * nt);
    g4a = PointerSet<D>(carve, c * m1);
    g4b = PointerSet<D>(carve, c * m1);
    g5 = PointerSet<D>(carve, c);
    bytes = carve.bytes();
  }
};

template <class D>
__device__ inline bool is_zero(D value) {
  return real_part(value) == 0 && imag_part(value) == 0;
}

// cp = β·C padded with zeros (β = 0: C is not read, as BLAS).
template <class D>
__global__ void load_kernel(Geometry g, const D* c_in, long long ld, long long stride, D beta, D* cp) {
  const long long np = g.padded(), per_matrix = np * np;
  COVFLOW_TLR_GRID_STRIDE(e, g.count * per_matrix) {
    const long long c = e / per_matrix, row = e % per_matrix % np, col = e % per_matrix / np;
    D value = zero_of<D>();
    if (row < g.n && col < g.n && !is_zero(beta)) value = beta * c_in[c * stride + row + col * ld];
    cp[e] = value;
  }
}

template <class D>
__global__ void store_kernel(Geometry g, const D* cp, D* c_out, long long ld, long long stride) {
  const long long np = g.padded(), per_matrix = static_cast<long long>(g.n) * g.n;
  COVFLOW_TLR_GRID_STRIDE(e, g.count * per_matrix) {
    const long long c = e / per_matrix, row = e % per_matrix % g.n, col = e % per_matrix / g.n;
    c_out[c * stride + row + col * ld] = cp[c * np * np + row + col * np];
  }
}

// Step k's pointer arrays; one thread per (matrix, i, j), indices as LldParts lays them out.
template <class D>
__global__ void lld_pointers_kernel(Operand<D> a, Operand<D> b, int k, D* cp, D* t1, D* tr, D* tl, PointerSet<D> g1,
                                    PointerSet<D> g2a, PointerSet<D> g2b, PointerSet<D> g3, PointerSet<D> g4a,
                                    PointerSet<D> g4b, PointerSet<D> g5) {
  const Geometry& g = a.g;
  const int nt = g.nt, m1 = nt - 1, ra = a.g.r, rb = b.g.r;
  const long long np = g.padded(), per_matrix = static_cast<long long>(nt) * nt;
  COVFLOW_TLR_GRID_STRIDE(e, g.count * per_matrix) {
    const long long c = e / per_matrix;
    const int i = static_cast<int>(e % per_matrix % nt), j = static_cast<int>(e % per_matrix / nt);
    const int ii = i - (i > k ? 1 : 0), jj = j - (j > k ? 1 : 0);
    D* c_tile = cp + c * np * np + static_cast<long long>(i) * g.b + static_cast<long long>(j) * g.b * np;
    const D *la, *ra_, *lb, *rb_;
    if (i != k) {
      a.pair(c, i, k, la, ra_);
      const long long e3 = (c * m1 + ii) * nt + j;
      D* tr_ij = tr + e3 * ra * g.b;
      g3.set(e3, la, tr_ij, c_tile);
      if (j != k) {
        b.pair(c, k, j, lb, rb_);
        const long long e1 = (c * m1 + ii) * m1 + jj;
        D* t1_ij = t1 + e1 * ra * rb;
        g1.set(e1, ra_, lb, t1_ij);
        g2a.set(e1, t1_ij, rb_, tr_ij);
      } else {
        g2b.set(c * m1 + ii, ra_, b.diagonal(c, k), tr_ij);
      }
    } else if (j != k) {
      b.pair(c, k, j, lb, rb_);
      const long long e4 = c * m1 + jj;
      D* tl_j = tl + e4 * g.b * rb;
      g4a.set(e4, a.diagonal(c, k), lb, tl_j);
      g4b.set(e4, tl_j, rb_, c_tile);
    } else {
      g5.set(c, a.diagonal(c, k), b.diagonal(c, k), c_tile);
    }
  }
}

}  // namespace

template <class T>
std::size_t gemm_lld_workspace(const Exec&, const TlrShape& a, const TlrShape& b) {
  return LldParts<T>(geometry(a), geometry(b), nullptr).bytes;
}

template <class T>
void gemm_lld(Exec& exec, Op op_a, Op op_b, T alpha, Tlr<const T> a, Tlr<const T> b, T beta, Batch<T> c,
              std::span<std::byte> workspace) {
  using D = dev_t<T>;
  using R = real_t<T>;
  const Geometry g = geometry(a.shape);
  if (g.count == 0 || g.n == 0) return;
  CudaContext& context = exec.cuda_context();
  context.make_current();
  const cudaStream_t stream = context.stream();
  const cublasHandle_t handle = context.cublas();
  const LldParts<T> w(g, geometry(b.shape), workspace.data());
  const Operand<D> oa = operand(a, op_a, w.a_conj, stream), ob = operand(b, op_b, w.b_conj, stream);
  const int bt = g.b, ra = oa.g.r, rb = ob.g.r, np = static_cast<int>(g.padded());
  const cublasOperation_t dense_a = oa.adjoint ? adjoint_op<D>() : CUBLAS_OP_N;
  const cublasOperation_t dense_b = ob.adjoint ? adjoint_op<D>() : CUBLAS_OP_N;
  const cublasOperation_t adj = adjoint_op<D>();
  const D one = from_real<D>(R(1)), zero = from_real<D>(R(0)), scale = to_device(alpha);

  load_kernel<D><<<blocks_for(g.count * g.padded() * g.padded()), kThreads, 0, stream>>>(g, dev(c.data), c.ld, c.stride,
                                                                                        to_device(beta), w.cp);
  COVFLOW_CHECK_LAUNCH();
  for (int k = 0; k < g.nt; ++k) {
    lld_pointers_kernel<D><<<blocks_for(g.count * g.nt * g.nt), kThreads, 0, stream>>>(
        oa, ob, k, w.cp, w.t1, w.tr, w.tl, w.g1, w.g2a, w.g2b, w.g3, w.g4a, w.g4b, w.g5);
    COVFLOW_CHECK_LAUNCH();
    gemm<D>(handle, adj, CUBLAS_OP_N, ra, rb, bt, one, w.g1, bt, bt, zero, ra);
    gemm<D>(handle, CUBLAS_OP_N, adj, ra, bt, rb, one, w.g2a, ra, bt, zero, ra);
    gemm<D>(handle, adj, dense_b, ra, bt, bt, one, w.g2b, bt, bt, zero, ra);
    gemm<D>(handle, CUBLAS_OP_N, CUBLAS_OP_N, bt, bt, ra, scale, w.g3, bt, ra, one, np);
    gemm<D>(handle, dense_a, CUBLAS_OP_N, bt, rb, bt, one, w.g4a, bt, bt, zero, bt);
    gemm<D>(handle, CUBLAS_OP_N, adj, bt, bt, rb, scale, w.g4b, bt, bt, one, np);
    gemm<D>(handle, dense_a, dense_b, bt, bt, bt, scale, w.g5, bt, bt, one, np);
  }
  store_kernel<D><<<blocks_for(g.count * g.n * g.n), kThreads, 0, stream>>>(g, w.cp, dev(c.data), c.ld, c.stride);
  COVFLOW_CHECK_LAUNCH();
}

#define COVFLOW_TLR_CUDA_GEMM(T)                                                                                  \
  template std::size_t gemm_lld_workspace<T>(const Exec&, const TlrShape&, const TlrShape&);                      \
  template void gemm_lld<T>(Exec&, Op, Op, T, Tlr<const T>, Tlr<const T>, T, Batch<T>, std::span<std::byte>);
COVFLOW_TLR_CUDA_GEMM(f32)
COVFLOW_TLR_CUDA_GEMM(f64)
COVFLOW_TLR_CUDA_GEMM(cf32)
COVFLOW_TLR_CUDA_GEMM(cf64)
#undef COVFLOW_TLR_CUDA_GEMM

}  // namespace covflow::linalg::detail::tlr_cuda

// tlr_compress and tlr_expand on the CUDA backend.
//
// Compression (Charara, Keyes, Ltaief, "Tile Low-Rank GEMM Using Batched Operations on GPUs",
// Euro-Par 2018, §4: each off-diagonal tile held as U·Vᴴ) in four stream-ordered steps, nothing
// read back to the host:
//   1. gather_kernel packs every stored off-diagonal tile of the batch into b × b matrices in the
//      workspace (a ragged tile zero padded, so its singular values are its own plus zeros) and
//      flags matrices that hold a NaN or an Inf there;
//   2. linalg's gesvj factors all of them in one batched call, with U and V;
//   3. rank_kernel, a block per matrix: ‖A‖_F² from the diagonal tiles and the tiles' Σσ², then
//      each tile's rank by tlr.hpp's rule (smallest k whose discarded Σσ² ≤ τ², cut at max_rank
//      and counted), the error, the status and TlrInfo;
//   4. factors_kernel writes U·Σ and V into the slabs with their zero padding; diagonal_kernel the
//      dense diagonal tiles with the ragged tile's identity padding. A flagged matrix gets NaN
//      everywhere; the others are computed as if it were not in the batch.
#include <cuda_runtime.h>

#include "covflow/linalg/svd.hpp"
#include "tlr_cuda_common.cuh"

namespace covflow::linalg::detail::tlr_cuda {
namespace {

template <class T>
struct CompressParts {
  using D = dev_t<T>;
  using R = real_t<T>;
  D* tiles = nullptr;   // count·slots × (b × b), gesvj's input (overwritten by it)
  D* left = nullptr;    // gesvj's U, count·slots × (b × b)
  D* right = nullptr;   // gesvj's V
  R* sigma = nullptr;   // count·slots × b
  SvdInfo* svd_info = nullptr;
  int* flags = nullptr;  // per matrix: 1 when it holds a NaN or an Inf
  std::size_t bytes = 0;

  CompressParts(const Geometry& g, std::byte* base) {
    Carve carve(base);
    const long long tiles_count = g.count * g.slots;
    tiles = carve.take<D>(tiles_count * g.tile_elements());
    left = carve.take<D>(tiles_count * g.tile_elements());
    right = carve.take<D>(tiles_count * g.tile_elements());
    sigma = carve.take<R>(tiles_count * g.b);
    svd_info = carve.take<SvdInfo>(tiles_count);
    flags = carve.take<int>(g.count);
    bytes = carve.bytes();
  }
};

// One thread per element of the packed tiles (grid-stride).
template <class D>
__global__ void gather_kernel(Geometry g, const D* a, long long lda, long long stride, D* tiles, int* flags) {
  const long long per_tile = g.tile_elements();
  COVFLOW_TLR_GRID_STRIDE(e, g.count * g.slots * per_tile) {
    const long long t = e / per_tile, c = t / g.slots;
    const int row = static_cast<int>(e % per_tile % g.b), col = static_cast<int>(e % per_tile / g.b);
    int i, j;
    g.tile(t % g.slots, i, j);
    D value = zero_of<D>();
    if (row < g.rows(i) && col < g.rows(j)) {
      value = a[c * stride + static_cast<long long>(i) * g.b + row + (static_cast<long long>(j) * g.b + col) * lda];
      if (!is_finite(value)) flags[c] = 1;
    }
    tiles[e] = value;
  }
}

// Σσ² of one tile.
template <class R>
__device__ double sigma_sum(const R* sigma, int b) {
  double sum = 0;
  for (int l = 0; l < b; ++l) sum += double(sigma[l]) * double(sigma[l]);
  return sum;
}

// One block per matrix; thread t takes the diagonal elements and the slots t, t + blockDim.x, …
// Two passes over the slots: τ of scope matrix needs ‖A‖_F² of the whole matrix first. The rank
// loop takes the smallest values off the end while the discarded sum stays within τ², which is
// the smallest k whose tail Σ_{l ≥ k} σ_l² ≤ τ².
template <class D>
__global__ void __launch_bounds__(kThreads) rank_kernel(Geometry g, const D* a, long long lda, long long stride,
                                                       const sreal_t<D>* sigma, const SvdInfo* svd_info, int* flags,
                                                       int* rank, TlrInfo* info, double tolerance, bool tile_scope) {
  __shared__ double scratch[kThreads / 32];
  const long long c = blockIdx.x;
  const D* x = a + c * stride;
  double diagonal = 0;
  bool finite = true;
  for (int i = 0; i < g.nt; ++i) {
    const int ri = g.rows(i);
    const D* tile = x + static_cast<long long>(i) * g.b * (1 + lda);
    for (long long e = threadIdx.x; e < static_cast<long long>(ri) * ri; e += blockDim.x) {
      const D v = tile[e % ri + (e / ri) * lda];
      finite = finite && is_finite(v);
      diagonal += double(abs2(v));
    }
  }
  double off = 0;
  bool failed = false;
  for (long long s = threadIdx.x; s < g.slots; s += blockDim.x) {
    off += sigma_sum(sigma + (c * g.slots + s) * g.b, g.b);
    // A Jacobi SVD that ran out of sweeps still truncates exactly: one of its factors is the
    // product of its rotations (unitary), the other carries the column norms, so the tile is the
    // sum of the rank-one terms and the dropped ones' norm is the error — only the rank may exceed
    // the optimum. Kernel tiles hit this: their noise columns, far below ε·σ₁, never settle. What
    // fails a tile is a non-finite value.
    failed = failed || svd_info[c * g.slots + s].status == status::non_finite_input;
  }
  const bool good = __syncthreads_and(finite) && flags[c] == 0;
  const bool any_failed = __syncthreads_or(failed);
  const double weight = g.hermitian ? 2.0 : 1.0;  // a stored Hermitian tile stands for two
  const double norm2 = block_sum(diagonal, scratch) + weight * block_sum(off, scratch);
  const double matrix_tau2 = g.slots > 0 ? tolerance * tolerance * norm2 / (weight * double(g.slots)) : 0.0;

  double dropped = 0, capped = 0;
  for (long long s = threadIdx.x; s < g.slots; s += blockDim.x) {
    const sreal_t<D>* sg = sigma + (c * g.slots + s) * g.b;
    const double tau2 = tile_scope ? tolerance * tolerance * sigma_sum(sg, g.b) : matrix_tau2;
    int k = g.b;
    double tail = 0;
    while (k > 0 && tail + double(sg[k - 1]) * double(sg[k - 1]) <= tau2) {
      tail += double(sg[k - 1]) * double(sg[k - 1]);
      --k;
    }
    if (k > g.r) {
      capped += 1;
      k = g.r;
      tail = sigma_sum(sg + g.r, g.b - g.r);
    }
    dropped += tail;
    rank[c * g.slots + s] = good ? k : g.r;
  }
  dropped = block_sum(dropped, scratch);
  capped = block_sum(capped, scratch);
  if (threadIdx.x == 0) {
    TlrInfo out{};
    out.capped_tiles = good ? static_cast<std::int32_t>(capped) : 0;
    out.status = !good ? tlr_status::non_finite_input
                 : any_failed ? tlr_status::svd_failed
                 : capped > 0 ? tlr_status::max_rank_reached
                              : tlr_status::ok;
    out.error = good ? sqrt(weight * dropped) : double(NAN);
    out.norm = good ? sqrt(norm2) : double(NAN);
    info[c] = out;
    flags[c] = good ? 0 : 1;  // now covers the diagonal tiles too, for factors/diagonal_kernel
  }
}

// One thread per element of the U and V slabs: U·Σ and V up to the rank and the tile's rows,
// zeros elsewhere.
template <class D>
__global__ void factors_kernel(Geometry g, const D* left, const D* right, const sreal_t<D>* sigma, const int* rank,
                               const int* flags, D* u, D* v) {
  const long long per_slab = g.slab_elements();
  COVFLOW_TLR_GRID_STRIDE(e, g.count * g.slots * per_slab) {
    const long long t = e / per_slab, c = t / g.slots;
    const int row = static_cast<int>(e % per_slab % g.b), col = static_cast<int>(e % per_slab / g.b);
    if (flags[c] != 0) {
      u[e] = nan_of<D>();
      v[e] = nan_of<D>();
      continue;
    }
    int i, j;
    g.tile(t % g.slots, i, j);
    const bool kept = col < rank[t];
    const long long at = t * g.tile_elements() + row + static_cast<long long>(col) * g.b;
    u[e] = kept && row < g.rows(i) ? left[at] * sigma[t * g.b + col] : zero_of<D>();
    v[e] = kept && row < g.rows(j) ? right[at] : zero_of<D>();
  }
}

// One thread per element of the diagonal tiles; a ragged last tile padded with the identity.
template <class D>
__global__ void diagonal_kernel(Geometry g, const D* a, long long lda, long long stride, const int* flags, D* diag) {
  const long long per_tile = g.tile_elements();
  COVFLOW_TLR_GRID_STRIDE(e, g.count * g.nt * per_tile) {
    const long long t = e / per_tile, c = t / g.nt;
    const int i = static_cast<int>(t % g.nt);
    const int row = static_cast<int>(e % per_tile % g.b), col = static_cast<int>(e % per_tile / g.b);
    const int ri = g.rows(i);
    D value = from_real<D>(sreal_t<D>(row == col ? 1 : 0));
    if (row < ri && col < ri)
      value = a[c * stride + static_cast<long long>(i) * g.b + row + (static_cast<long long>(i) * g.b + col) * lda];
    diag[e] = flags[c] != 0 ? nan_of<D>() : value;
  }
}

// One thread per element of the dense output: a diagonal tile's element, or Σ_l U(row, l)·conj(V(col, l))
// over the tile's rank (a Hermitian upper tile from its stored lower twin, V·Uᴴ).
template <class D>
__global__ void expand_kernel(Geometry g, const D* diag, const D* u, const D* v, const int* rank, D* out, long long ld,
                              long long stride) {
  const long long per_matrix = static_cast<long long>(g.n) * g.n;
  COVFLOW_TLR_GRID_STRIDE(e, g.count * per_matrix) {
    const long long c = e / per_matrix;
    const int row = static_cast<int>(e % per_matrix % g.n), col = static_cast<int>(e % per_matrix / g.n);
    const int ti = row / g.b, tj = col / g.b, ri = row % g.b, rj = col % g.b;
    D value = zero_of<D>();
    if (ti == tj) {
      value = diag[(c * g.nt + ti) * g.tile_elements() + ri + static_cast<long long>(rj) * g.b];
    } else {
      const bool lower = !g.hermitian || ti > tj;
      const long long t = c * g.slots + (lower ? g.slot(ti, tj) : g.slot(tj, ti));
      const D* us = u + t * g.slab_elements();
      const D* vs = v + t * g.slab_elements();
      for (int l = 0; l < rank[t]; ++l) {
        const long long at = static_cast<long long>(l) * g.b;
        value = lower ? fma_conj(value, vs[rj + at], us[ri + at]) : fma_conj(value, us[rj + at], vs[ri + at]);
      }
    }
    out[c * stride + row + col * ld] = value;
  }
}

}  // namespace

template <class T>
std::size_t compress_workspace(const Exec&, const TlrShape& shape) {
  return CompressParts<T>(geometry(shape), nullptr).bytes;
}

template <class T>
void compress(Exec& exec, Batch<const T> a, Tlr<T> out, std::span<TlrInfo> info, std::span<std::byte> workspace,
              const TlrOptions& options) {
  using D = dev_t<T>;
  const Geometry g = geometry(out.shape);
  if (g.count == 0) return;
  CudaContext& context = exec.cuda_context();
  context.make_current();
  const cudaStream_t stream = context.stream();
  const CompressParts<T> w(g, workspace.data());
  const D* source = dev(a.data);

  COVFLOW_CUDA_TRY(cudaMemsetAsync(w.flags, 0, sizeof(int) * static_cast<std::size_t>(g.count), stream));
  const long long tiles_count = g.count * g.slots;
  if (tiles_count > 0) {
    gather_kernel<D><<<blocks_for(tiles_count * g.tile_elements()), kThreads, 0, stream>>>(g, source, a.ld, a.stride,
                                                                                          w.tiles, w.flags);
    COVFLOW_CHECK_LAUNCH();
    const Batch<T> packed{reinterpret_cast<T*>(w.tiles), g.b, g.b, g.b, g.tile_elements(), tiles_count};
    gesvj<T>(exec, packed, {w.sigma, static_cast<std::size_t>(tiles_count * g.b)},
             Batch<T>{reinterpret_cast<T*>(w.left), g.b, g.b, g.b, g.tile_elements(), tiles_count},
             Batch<T>{reinterpret_cast<T*>(w.right), g.b, g.b, g.b, g.tile_elements(), tiles_count},
             {w.svd_info, static_cast<std::size_t>(tiles_count)}, SvdOptions{.u = true, .v = true});
  }
  rank_kernel<D><<<static_cast<unsigned>(g.count), kThreads, 0, stream>>>(
      g, source, a.ld, a.stride, w.sigma, w.svd_info, w.flags, out.rank, info.data(), options.tolerance,
      options.scope == TlrScope::tile);
  COVFLOW_CHECK_LAUNCH();
  if (tiles_count > 0) {
    factors_kernel<D><<<blocks_for(tiles_count * g.slab_elements()), kThreads, 0, stream>>>(
        g, w.left, w.right, w.sigma, out.rank, w.flags, dev(out.u), dev(out.v));
    COVFLOW_CHECK_LAUNCH();
  }
  diagonal_kernel<D><<<blocks_for(g.count * g.nt * g.tile_elements()), kThreads, 0, stream>>>(g, source, a.ld, a.stride,
                                                                                             w.flags, dev(out.diag));
  COVFLOW_CHECK_LAUNCH();
}

template <class T>
void expand(Exec& exec, Tlr<const T> a, Batch<T> out) {
  using D = dev_t<T>;
  const Geometry g = geometry(a.shape);
  if (g.count == 0 || g.n == 0) return;
  CudaContext& context = exec.cuda_context();
  context.make_current();
  expand_kernel<D><<<blocks_for(g.count * g.n * g.n), kThreads, 0, context.stream()>>>(
      g, dev(a.diag), dev(a.u), dev(a.v), a.rank, dev(out.data), out.ld, out.stride);
  COVFLOW_CHECK_LAUNCH();
}

#define COVFLOW_TLR_CUDA_COMPRESS(T)                                                                             \
  template std::size_t compress_workspace<T>(const Exec&, const TlrShape&);                                      \
  template void compress<T>(Exec&, Batch<const T>, Tlr<T>, std::span<TlrInfo>, std::span<std::byte>,            \
                            const TlrOptions&);                                                                 \
  template void expand<T>(Exec&, Tlr<const T>, Batch<T>);
COVFLOW_TLR_CUDA_COMPRESS(f32)
COVFLOW_TLR_CUDA_COMPRESS(f64)
COVFLOW_TLR_CUDA_COMPRESS(cf32)
COVFLOW_TLR_CUDA_COMPRESS(cf64)
#undef COVFLOW_TLR_CUDA_COMPRESS

}  // namespace covflow::linalg::detail::tlr_cuda

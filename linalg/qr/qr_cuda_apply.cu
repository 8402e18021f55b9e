// Applying Householder reflectors to a block of columns: geqrf's trailing update (Qᴴ·C), ungqr
// (Q·[I; 0]) and unmqr (op(Q)·C, and C·op(Q) as the conjugate transpose of op(Q)ᴴ·Cᴴ). W. Boukaram,
// G. Turkiyyah, H. Ltaief, D. E. Keyes, "Batched QR and SVD Algorithms on GPUs with Applications in
// Hierarchical Matrix Compression" (Parallel Computing, 2018), §3.1: the trailing panel is held in
// registers and the factored panel's reflectors are applied to it one at a time, each as a
// transpose matrix-vector product and a rank-1 update, across all trailing panels in one launch.
//
// apply_kernel — one block per (matrix, tile of `tile` columns), or one cluster of C ≤ 16 blocks
//   splitting the rows when the sub-matrix is taller than a block holds (sm_90).
//   Ownership: as the factor kernels' (qr_cuda_factor.cu): lane r of the G lanes of column c holds the
//   RPT consecutive rows base + r·RPT + s of that column in registers (each lane's rows padded by
//   one element in shared memory). The reflectors are in shared memory,
//   `chunk` columns of the block's rows at a time (masked on the way in: zero above the diagonal,
//   1 on it), with their τ (conjugated for Qᴴ). Per reflector p: s = v_pᴴc over the lane's rows,
//   summed by the group's shuffles (and across the cluster through DSMEM, one cluster barrier),
//   then c ← c − τ·s·v_p. A single block needs no barrier between reflectors: the reflectors are
//   read-only and each column lives in one group of lanes; barriers only between chunks.
//   Budget: RPT elements per thread plus ~40 registers (max_threads() threads per block);
//   shared memory G·RPT·chunk elements, chunk sized to the 200 KB a block plans for.
// No host synchronisation.
#include <algorithm>

#include "covflow/linalg/types.hpp"
#include "qr_cuda_device.cuh"
#include "qr_cuda_launch.hpp"

namespace covflow::linalg::detail::qr {
namespace {

template <class D, int RPT>
__global__ void __launch_bounds__(max_threads<D, RPT, kApplyOverhead>()) apply_kernel(ApplyArgs<D> args) {
  extern __shared__ __align__(16) unsigned char smem[];
  const ClusterView cluster = cluster_view(args.cluster);
  const int G = args.group;
  const int rpb = G * RPT;
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  const int r = tid & (G - 1);
  const int local = tid / G;  // column within the tile
  const int tile = static_cast<int>(blockIdx.x) / args.cluster;
  const int col = tile * args.tile + local;
  const bool in_tile = local < args.tile;
  const bool owner = in_tile && col < args.cols;
  const int rows = args.rows;
  const long long b = args.first + blockIdx.y;
  const D* V = args.v + b * args.stride_v;
  const D* tau = args.tau + b * args.tau_stride;
  D* C = args.c + b * args.stride_c;
  const long long ldc = args.ldc;
  const int base = cluster.rank * rpb;
  const int row0 = base + r * RPT;
  const int vpad = G * (RPT + 1);  // one reflector's rows, padded

  D* vs = reinterpret_cast<D*>(smem);  // [chunk][vpad]
  D* taus = vs + std::size_t(args.chunk) * vpad;
  D* part = taus + args.chunk;  // [2][tile]

  const auto at = [&](int i) -> long long {
    return args.transposed ? col + static_cast<long long>(i) * ldc : i + static_cast<long long>(col) * ldc;
  };
  D m[RPT];
  bool finite = true;
#pragma unroll
  for (int s = 0; s < RPT; ++s) {
    const int i = row0 + s;
    m[s] = zero_of<D>();
    if (owner && i < rows) {
      if (args.identity) {
        m[s] = from_real<D>(sreal_t<D>(i == col ? 1 : 0));
      } else {
        const D value = C[at(i)];
        m[s] = args.transposed ? conj_of(value) : value;
        finite = finite && is_finite(value);
      }
    }
  }
  if (args.info != nullptr && !finite) args.info[b] = status::non_finite_input;  // the same value from any thread

  const int k = args.reflectors;
  int buf = 0;
  for (int done = 0; done < k; done += args.chunk) {
    const int kc = min(args.chunk, k - done);
    const int p0 = args.backward ? k - done - kc : done;
    __syncthreads();  // the previous chunk is no longer read
    for (int e = tid; e < kc * rpb; e += threads) {
      const int il = e % rpb;
      const int pl = e / rpb;
      const int i = base + il;
      const int p = p0 + pl;
      D value = zero_of<D>();
      if (i < rows && i >= p) value = i == p ? from_real<D>(sreal_t<D>(1)) : V[i + static_cast<long long>(p) * args.ldv];
      vs[pl * vpad + il / RPT * (RPT + 1) + il % RPT] = value;
    }
    for (int e = tid; e < kc; e += threads) taus[e] = args.backward ? tau[p0 + e] : conj_of(tau[p0 + e]);
    __syncthreads();
    for (int step = 0; step < kc; ++step) {
      const int pl = args.backward ? kc - 1 - step : step;
      const D* vp = vs + pl * vpad + r * (RPT + 1);
      D dot = zero_of<D>();
#pragma unroll
      for (int s = 0; s < RPT; ++s) dot = fma_conj(dot, vp[s], m[s]);
      dot = group_sum_rt(dot, G);
      if (cluster.blocks > 1) {
        D* slot = part + buf * args.tile;
        if (r == 0 && in_tile) slot[local] = dot;
        cluster.sync();
        dot = zero_of<D>();
        if (in_tile) {
#pragma unroll 4
          for (int q = 0; q < cluster.blocks; ++q) dot += cluster.at(slot, q)[local];
        }
        buf ^= 1;
      }
      const D f = -(taus[pl] * dot);
#pragma unroll
      for (int s = 0; s < RPT; ++s) m[s] = fma_(m[s], f, vp[s]);
    }
  }

#pragma unroll
  for (int s = 0; s < RPT; ++s) {
    const int i = row0 + s;
    if (owner && i < rows) C[at(i)] = args.transposed ? conj_of(m[s]) : m[s];
  }
  if (args.identity && args.zero_above > 0 && cluster.rank == 0) {
    const int width = min(args.tile, args.cols - tile * args.tile);
    for (int e = tid; e < args.zero_above * width; e += threads) {
      const int i = e % args.zero_above;
      const int j = tile * args.tile + e / args.zero_above;
      C[static_cast<long long>(i - args.zero_above) + static_cast<long long>(j) * ldc] = zero_of<D>();
    }
  }
  cluster.sync();  // no block leaves while another may still read its shared memory
}

}  // namespace

template <class D>
std::size_t apply_shared_bytes(const Layout& layout, int tile, int chunk) {
  return sizeof(D) * (std::size_t(chunk) * layout.group * (layout.rpt + 1) + chunk + 2 * std::size_t(tile));
}

template <class D>
void launch_apply(ApplyArgs<D> args, const Layout& layout, long long count, cudaStream_t stream) {
  args.group = layout.group;
  args.cluster = layout.cluster;
  const std::size_t smem = apply_shared_bytes<D>(layout, args.tile, args.chunk);
  const unsigned tiles = static_cast<unsigned>((args.cols + args.tile - 1) / args.tile);
  with_rpt(layout.rpt, [&](auto rpt) {
    constexpr int RPT = decltype(rpt)::value;
    for (long long first = 0; first < count; first += kMaxGridY) {
      args.first = first;
      const unsigned matrices = static_cast<unsigned>(std::min(kMaxGridY, count - first));
      launch_kernel(apply_kernel<D, RPT>, dim3(tiles * static_cast<unsigned>(layout.cluster), matrices), layout.threads,
                    smem, layout.cluster, stream, args);
    }
  });
}

#define COVFLOW_QR_APPLY(D)                                               \
  template std::size_t apply_shared_bytes<D>(const Layout&, int, int);   \
  template void launch_apply<D>(ApplyArgs<D>, const Layout&, long long, cudaStream_t);
COVFLOW_QR_APPLY(float)
COVFLOW_QR_APPLY(double)
COVFLOW_QR_APPLY(Cx<float>)
COVFLOW_QR_APPLY(Cx<double>)
#undef COVFLOW_QR_APPLY

}  // namespace covflow::linalg::detail::qr

// geqrf of a sub-matrix held in registers: a whole matrix of at most 32 columns that fits one
// thread block, or one panel of the blocked path (tall panels on a cluster of blocks). W. Boukaram, G. Turkiyyah, H. Ltaief, D. E. Keyes,
// "Batched QR and SVD Algorithms on GPUs with Applications in Hierarchical Matrix Compression"
// (Parallel Computing, 2018), §3.1: the panel is factored in registers, one reflector at a time,
// its transpose matrix-vector products reduced with warp shuffles. Where the paper gives each
// thread a row of the panel and flattens every product into a block-wide reduction, here each
// column is owned by a group of lanes of one warp, so a product needs only the shuffles inside
// that group and one block barrier per column remains.
//
// Ownership (both kernels): thread t is lane r = t mod G of column c = t / G (G = 1 … 32 lanes per
//   column, a power of two, so a group never straddles a warp); it holds the RPT consecutive rows
//   base + r·RPT + s, s < RPT, of column c in registers, base = (block rank)·G·RPT — consecutive so
//   that every row test and shared-memory offset is a compile-time constant against one runtime
//   value. x, the column being reduced, is in shared memory, each lane's rows padded by one element
//   (no bank conflicts between the lanes of a group) and double-buffered (its owners write column
//   j + 1 while the others still read column j). The reflector is ?larfg's (β real, τ complex), and
//   the product with it is formed from one sum, vᴴa_c = conj(1/(α−β))·x_{>j}ᴴa_c + a_jc, a_jc being
//   the row-j element that only one lane holds (picked by the same shuffles).
//
// factor_block_kernel — one block per matrix (or panel).
//   Step j, after one __syncthreads: x_j is in shared memory. Each group of a column c ≥ j sums
//   over its lanes' rows ‖x_{>j}‖², x_{>j}ᴴa_c and a_jc (two accumulators each), reduces them by
//   its own shuffles (its lane mask: other groups may be elsewhere), and forms reflector j itself —
//   every group the same sums in the same order, so the same reflector, with no second barrier
//   and no broadcast: the critical path of a step is one reduction, one reciprocal square root and
//   one reciprocal. Column j's group turns its rows into [β; v] and stores τ; columns c > j apply
//   a_c ← a_c − conj(τ)·v·(vᴴa_c), and column j + 1's group writes the result as x_{j+1}. Groups
//   of columns left of j are idle (whole warps once all their columns are done). Sums of squares
//   outside their safe range (zero tails included) take ?larfg's scaled path instead.
//   Budget: RPT elements per thread plus ~72 registers, so ≤ max_threads() threads per block
//   (64K registers per SM): e.g. 32×32 real double as G = 4, RPT = 8 (128 threads, ~56
//   registers: nine blocks per SM, the whole batch of 1000 in one wave on 132 SMs); shared memory
//   2·G·(RPT + 1) elements.
//
// factor_cluster_kernel — one cluster of C = 2 … 16 blocks per matrix (sm_90), each block a share
//   of the rows: tall panels (up to 16 × 1024 rows) and whole matrices a block cannot hold.
//   Step j: every thread sums over its rows ‖x_{>j}‖², x_{>j}ᴴa_c and a_jc; the sums go through the
//   group's shuffles, then through each block's shared memory read back over DSMEM after one
//   cluster barrier — the same sums in the same order everywhere, so every thread forms the same
//   reflector — then every column c > j is updated and column j + 1's owners write it as the next
//   x. One cluster barrier and one __syncthreads per column.
//   Budget: as the block kernel's; shared memory 2·G·(RPT + 1) + 2·(2·cols + 2) elements.
// No host synchronisation; info on the device.
#include <algorithm>

#include "covflow/linalg/types.hpp"
#include "qr_cuda_device.cuh"
#include "qr_cuda_launch.hpp"

namespace covflow::linalg::detail::qr {
namespace {

template <class D>
struct FactorShared {
  D* x;          // [2][rows per block]
  D* part;       // [2][2·cols + 2]: per column (x_{>j}ᴴa_c, a_jc), then ‖x_{>j}‖² and α
  sreal_t<D>* rescue;  // [2]: the largest magnitude and the scaled sum of squares
  int* flag;
  int slots;
};

template <class D>
__device__ FactorShared<D> carve_factor(unsigned char* base, int rows_per_block, int cols) {
  FactorShared<D> s;
  s.slots = 2 * cols + 2;
  s.x = reinterpret_cast<D*>(base);
  s.part = s.x + 2 * rows_per_block;
  s.rescue = reinterpret_cast<sreal_t<D>*>(s.part + 2 * s.slots);
  s.flag = reinterpret_cast<int*>(s.rescue + 2);
  return s;
}

template <class D, int RPT>
__global__ void __launch_bounds__(max_threads<D, RPT, kFactorOverhead>()) factor_block_kernel(FactorArgs<D> args) {
  using R = sreal_t<D>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int G = args.group;
  const int tid = static_cast<int>(threadIdx.x);
  const int r = tid & (G - 1);
  const int c = tid / G;
  const int rows = args.rows, cols = args.cols;
  const bool owner = c < cols;
  const long long b = args.first + blockIdx.y;
  D* A = args.a + b * args.stride;
  const long long lda = args.lda;
  const int row0 = r * RPT;
  const int xpad = G * (RPT + 1);
  D* x = reinterpret_cast<D*>(smem);  // [2][xpad]
  const unsigned mask = group_mask_rt(G);
  const auto padded = [](int row) { return row / RPT * (RPT + 1) + row % RPT; };

  D a[RPT];
  bool finite = true;
#pragma unroll
  for (int s = 0; s < RPT; ++s) {
    const int i = row0 + s;
    a[s] = zero_of<D>();
    if (owner && i < rows) {
      a[s] = A[i + c * lda];
      finite = finite && is_finite(a[s]);
    }
  }
  if (args.check != 0) {
    const int bad = __syncthreads_or(!finite);
    if (args.check == 1) {
      if (bad && tid == 0) args.info[b] = status::non_finite_input;
    } else if (bad) {
#pragma unroll
      for (int s = 0; s < RPT; ++s) {
        const int i = row0 + s;
        if (owner && i < rows) A[i + c * lda] = nan_of<D>();
      }
      if (r == 0 && c < args.reflectors) args.tau[b * args.tau_stride + c] = nan_of<D>();
      if (tid == 0) args.info[b] = status::non_finite_input;
      return;
    } else if (tid == 0) {
      args.info[b] = 0;
    }
  }

  D* tau = args.tau + b * args.tau_stride;
  if (c == 0) {
#pragma unroll
    for (int s = 0; s < RPT; ++s) x[r * (RPT + 1) + s] = a[s];
  }
  __syncthreads();
  for (int j = 0; j < args.reflectors; ++j) {
    const int buf = j & 1;
    if (owner && c >= j) {
      const D* xj = x + buf * xpad;
      const D* xr = xj + r * (RPT + 1);
      const int jl = j - row0;
      R ssq_even = R(0), ssq_odd = R(0);
      D dot_even = zero_of<D>(), dot_odd = zero_of<D>(), pick = zero_of<D>();
#pragma unroll
      for (int s = 0; s < RPT; ++s) {
        const D xv = xr[s];
        if (s > jl) {
          if (s & 1) {
            ssq_odd += abs2(xv);
            dot_odd = fma_conj(dot_odd, xv, a[s]);
          } else {
            ssq_even += abs2(xv);
            dot_even = fma_conj(dot_even, xv, a[s]);
          }
        }
        if (s == jl) pick = a[s];
      }
      const R ssq = group_sum_in(ssq_even + ssq_odd, G, mask);
      const D dot = group_sum_in(dot_even + dot_odd, G, mask);
      pick = group_sum_in(pick, G, mask);
      const D alpha = xj[padded(j)];
      Reflector<D> h;
      if (!fast_reflector(alpha, ssq, h)) {
        R largest = R(0);
#pragma unroll
        for (int s = 0; s < RPT; ++s)
          if (s > jl) largest = fmax(largest, max_abs(xr[s]));
        largest = group_max_in(largest, G, mask);
        R xnorm = largest;
        if (largest != R(0) && isfinite(largest)) {
          const R unit = rescue_unit(largest), inverse = R(1) / unit;
          R scaled = R(0);
#pragma unroll
          for (int s = 0; s < RPT; ++s)
            if (s > jl) scaled += abs2(xr[s] * inverse);
          xnorm = unit * sqrt(group_sum_in(scaled, G, mask));
        }
        h = make_reflector(alpha, xnorm);
      }
      if (c == j) {
#pragma unroll
        for (int s = 0; s < RPT; ++s) {
          if (s == jl) a[s] = from_real<D>(h.beta);
          else if (s > jl) a[s] = a[s] * h.scale;
        }
        if (r == 0) tau[j] = h.tau;
      } else {
        const D w = fma_conj(pick, h.scale, dot);  // vᴴa_c
        const D f = conj_of(h.tau) * w;
        const D g = -(f * h.scale);
#pragma unroll
        for (int s = 0; s < RPT; ++s) {
          if (s == jl) a[s] -= f;
          else if (s > jl) a[s] = fma_(a[s], g, xr[s]);
        }
        if (c == j + 1) {
          D* next = x + (buf ^ 1) * xpad + r * (RPT + 1);
#pragma unroll
          for (int s = 0; s < RPT; ++s) next[s] = a[s];
        }
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int s = 0; s < RPT; ++s) {
    const int i = row0 + s;
    if (owner && i < rows) A[i + c * lda] = a[s];
  }
}

template <class D, int RPT>
__global__ void __launch_bounds__(max_threads<D, RPT, kFactorOverhead>()) factor_cluster_kernel(FactorArgs<D> args) {
  using R = sreal_t<D>;
  extern __shared__ __align__(16) unsigned char smem[];
  const ClusterView cluster = cluster_view(args.cluster);
  const int G = args.group;
  const int rpb = G * RPT;
  const int tid = static_cast<int>(threadIdx.x);
  const int r = tid & (G - 1);
  const int c = tid / G;
  const int rows = args.rows, cols = args.cols;
  const bool owner = c < cols;
  const long long b = args.first + blockIdx.y;
  D* A = args.a + b * args.stride;
  const long long lda = args.lda;
  const int base = cluster.rank * rpb;
  const int row0 = base + r * RPT;  // this thread's first row
  const int xpad = G * (RPT + 1);   // one x buffer, padded
  const FactorShared<D> sh = carve_factor<D>(smem, xpad, cols);
  const auto padded = [](int local) { return local / RPT * (RPT + 1) + local % RPT; };

  D a[RPT];
  bool finite = true;
#pragma unroll
  for (int s = 0; s < RPT; ++s) {
    const int i = row0 + s;
    a[s] = zero_of<D>();
    if (owner && i < rows) {
      a[s] = A[i + c * lda];
      finite = finite && is_finite(a[s]);
    }
  }
  if (args.check != 0) {
    int bad = __syncthreads_or(!finite);
    if (args.check == 1) {
      if (bad && tid == 0) args.info[b] = status::non_finite_input;
    } else {
      if (cluster.blocks > 1) {
        if (tid == 0) *sh.flag = bad;
        cluster.sync();
        bad = 0;
        for (int q = 0; q < cluster.blocks; ++q) bad |= *cluster.at(sh.flag, q);
        cluster.sync();  // every block has read every flag before any leaves
      }
      if (bad) {
#pragma unroll
        for (int s = 0; s < RPT; ++s) {
          const int i = row0 + s;
          if (owner && i < rows) A[i + c * lda] = nan_of<D>();
        }
        if (cluster.rank == 0 && r == 0 && c < args.reflectors) args.tau[b * args.tau_stride + c] = nan_of<D>();
        if (cluster.rank == 0 && tid == 0) args.info[b] = status::non_finite_input;
        return;
      }
      if (cluster.rank == 0 && tid == 0) args.info[b] = 0;
    }
  }

  if (c == 0) {
#pragma unroll
    for (int s = 0; s < RPT; ++s) sh.x[r * (RPT + 1) + s] = a[s];
  }
  __syncthreads();

  for (int j = 0; j < args.reflectors; ++j) {
    const int buf = j & 1;
    const D* xj = sh.x + buf * xpad;
    const D* xr = xj + r * (RPT + 1);  // this lane's rows of x
    const int jl = j - row0;           // row j is this thread's row jl (when 0 ≤ jl < RPT)
    R ssq = R(0);
    D dot = zero_of<D>(), pick = zero_of<D>();
#pragma unroll
    for (int s = 0; s < RPT; ++s) {
      const D xv = xr[s];
      if (s > jl) {
        ssq += abs2(xv);
        dot = fma_conj(dot, xv, a[s]);
      }
      if (s == jl) pick = a[s];
    }
    ssq = group_sum_rt(ssq, G);
    dot = group_sum_rt(dot, G);
    pick = group_sum_rt(pick, G);
    D alpha;
    if (cluster.blocks > 1) {
      D* part = sh.part + buf * sh.slots;
      if (r == 0 && owner) {
        part[2 * c] = dot;
        part[2 * c + 1] = pick;
      }
      if (tid == 0) {
        const int local = j - base;
        part[2 * cols] = from_real<D>(ssq);
        part[2 * cols + 1] = local >= 0 && local < rpb ? xj[padded(local)] : zero_of<D>();
      }
      cluster.sync();
      ssq = R(0);
      dot = pick = alpha = zero_of<D>();
#pragma unroll 4
      for (int q = 0; q < cluster.blocks; ++q) {
        const D* remote = cluster.at(part, q);
        if (owner) {
          dot += remote[2 * c];
          pick += remote[2 * c + 1];
        }
        ssq += real_part(remote[2 * cols]);
        alpha += remote[2 * cols + 1];
      }
    } else {
      alpha = xj[padded(j)];
    }

    R xnorm;
    if (needs_rescaling(ssq)) {
      R largest = R(0);
#pragma unroll
      for (int s = 0; s < RPT; ++s)
        if (s > jl) largest = fmax(largest, max_abs(xr[s]));
      largest = group_max_rt(largest, G);
      if (cluster.blocks > 1) {
        if (tid == 0) sh.rescue[0] = largest;
        cluster.sync();
        largest = R(0);
        for (int q = 0; q < cluster.blocks; ++q) largest = fmax(largest, *cluster.at(sh.rescue, q));
      }
      if (largest == R(0) || !isfinite(largest)) {
        xnorm = largest;
      } else {
        const R unit = rescue_unit(largest), inverse = R(1) / unit;
        R scaled = R(0);
#pragma unroll
        for (int s = 0; s < RPT; ++s)
          if (s > jl) scaled += abs2(xr[s] * inverse);
        scaled = group_sum_rt(scaled, G);
        if (cluster.blocks > 1) {
          if (tid == 0) sh.rescue[1] = scaled;
          cluster.sync();
          scaled = R(0);
          for (int q = 0; q < cluster.blocks; ++q) scaled += *cluster.at(sh.rescue + 1, q);
        }
        xnorm = unit * sqrt(scaled);
      }
    } else {
      xnorm = sqrt(ssq);
    }

    const Reflector<D> h = make_reflector(alpha, xnorm);
    if (c == j) {
#pragma unroll
      for (int s = 0; s < RPT; ++s) {
        if (s == jl) a[s] = from_real<D>(h.beta);
        else if (s > jl) a[s] = a[s] * h.scale;
      }
      if (r == 0 && cluster.rank == 0) args.tau[b * args.tau_stride + j] = h.tau;
    } else if (c > j && owner) {
      const D w = fma_conj(pick, h.scale, dot);  // vᴴa_c
      const D f = conj_of(h.tau) * w;
      const D g = -(f * h.scale);
#pragma unroll
      for (int s = 0; s < RPT; ++s) {
        if (s == jl) a[s] -= f;
        else if (s > jl) a[s] = fma_(a[s], g, xr[s]);
      }
    }
    if (c == j + 1) {
      D* next = sh.x + (buf ^ 1) * xpad + r * (RPT + 1);
#pragma unroll
      for (int s = 0; s < RPT; ++s) next[s] = a[s];
    }
    __syncthreads();
  }

#pragma unroll
  for (int s = 0; s < RPT; ++s) {
    const int i = row0 + s;
    if (owner && i < rows) A[i + c * lda] = a[s];
  }
  cluster.sync();  // no block leaves while another may still read its shared memory
}

}  // namespace

template <class D>
std::size_t factor_shared_bytes(const Layout& layout, int cols) {
  const std::size_t x = sizeof(D) * 2 * std::size_t(layout.group) * (layout.rpt + 1);
  if (layout.cluster == 1) return x;
  return x + sizeof(D) * 2 * (2 * std::size_t(cols) + 2) + 2 * sizeof(sreal_t<D>) + 16;
}

template <class D>
void launch_factor(FactorArgs<D> args, const Layout& layout, long long count, cudaStream_t stream) {
  args.group = layout.group;
  args.cluster = layout.cluster;
  const std::size_t smem = factor_shared_bytes<D>(layout, args.cols);
  with_rpt(layout.rpt, [&](auto rpt) {
    constexpr int RPT = decltype(rpt)::value;
    for (long long first = 0; first < count; first += kMaxGridY) {
      args.first = first;
      const unsigned matrices = static_cast<unsigned>(std::min(kMaxGridY, count - first));
      if (layout.cluster == 1)
        launch_kernel(factor_block_kernel<D, RPT>, dim3(1, matrices), layout.threads, smem, 1, stream, args);
      else
        launch_kernel(factor_cluster_kernel<D, RPT>, dim3(static_cast<unsigned>(layout.cluster), matrices),
                      layout.threads, smem, layout.cluster, stream, args);
    }
  });
}

#define COVFLOW_QR_FACTOR(D)                                                 \
  template std::size_t factor_shared_bytes<D>(const Layout&, int);          \
  template void launch_factor<D>(FactorArgs<D>, const Layout&, long long, cudaStream_t);
COVFLOW_QR_FACTOR(float)
COVFLOW_QR_FACTOR(double)
COVFLOW_QR_FACTOR(Cx<float>)
COVFLOW_QR_FACTOR(Cx<double>)
#undef COVFLOW_QR_FACTOR

}  // namespace covflow::linalg::detail::qr

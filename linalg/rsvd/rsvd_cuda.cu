// rsvd on the CUDA backend: the steps of rsvd.cpp's CPU backend in the same order — products as
// cuBLAS strided-batched GEMMs (or the caller's sampler), the QRs by linalg's geqrf/ungqr, the SVD
// of B by gesvj, the eigenproblems by heev — and the per-matrix bookkeeping as small kernels (a block
// per matrix): the samples, the state of each matrix, the fixed-accuracy commit of a block, the
// Nyström core, the rank and the outputs. Nothing is read back to the host: every matrix's state,
// rank and error live on the device. The fixed-accuracy loop runs all max_rank/block blocks (matrices
// done early keep zero blocks), so the work does not depend on the data.
//
// The samples use the same counter-based hash as the CPU backend (rsvd_impl.hpp), so a seed gives the
// same Ω on both up to the last bits of log and cos.
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <vector>

#include "../common/cublas_gemm.cuh"
#include "../common/device_scalar.cuh"
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/heev.hpp"
#include "covflow/linalg/qr.hpp"
#include "covflow/linalg/svd.hpp"
#include "rsvd_cuda.hpp"
#include "rsvd_impl.hpp"

namespace covflow::linalg::detail {
namespace {

using namespace rsvd_parts;

constexpr int kThreads = 256;

// Sum over the block (every thread gets it).
__device__ double block_sum(double value, double* scratch) {
  value = warp_sum(value);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += scratch[w];
  __syncthreads();
  return total;
}

template <class D>
__device__ D gaussian_device(std::uint64_t seed, long long matrix, long long column, long long row) {
  using R = sreal_t<D>;
  const std::uint64_t h = mix(mix(mix(seed) ^ static_cast<std::uint64_t>(matrix)) ^ static_cast<std::uint64_t>(column)) ^
                          static_cast<std::uint64_t>(row);
  const double u1 = open_unit(mix(h)), u2 = open_unit(mix(h ^ 0xD1B54A32D192ED03ull));
  const double r = sqrt(-2.0 * log(u1));
  double s, c;
  sincospi(2.0 * u2, &s, &c);
  if constexpr (is_cx<D>) return D{R(r * c * 0.70710678118654752440), R(r * s * 0.70710678118654752440)};
  else return R(r * c);
}

// ‖A_b‖_F² (NaN when A_b holds a NaN or an Inf) and the initial state.
template <class D>
__global__ void __launch_bounds__(kThreads) norms_kernel(const D* a, long long lda, long long stride, int m, int n,
                                                        double* norm2, int* state, int* cols, double* shift) {
  __shared__ double scratch[kThreads / 32];
  const long long b = blockIdx.x;
  const D* x = a + b * stride;
  double sum = 0;
  bool finite = true;
  for (long long e = threadIdx.x; e < static_cast<long long>(m) * n; e += blockDim.x) {
    const D v = x[e % m + (e / m) * lda];
    finite = finite && is_finite(v);
    sum += double(abs2(v));
  }
  const bool all = __syncthreads_and(finite);
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) {
    norm2[b] = all ? sum : double(NAN);
    state[b] = all ? kActive : kBad;
    cols[b] = 0;
    shift[b] = 0;
  }
}

// A sampler's norms (copied in, or absent).
__global__ void init_state_kernel(double* norm2, bool known, long long count, int* state, int* cols, double* shift) {
  const long long b = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (b >= count) return;
  if (!known) norm2[b] = double(NAN);
  state[b] = known && !isfinite(norm2[b]) ? kBad : kActive;
  cols[b] = 0;
  shift[b] = 0;
}

template <class D>
__global__ void __launch_bounds__(kThreads) sample_kernel(D* to, int n, int cols, int first, int ld_cols, std::uint64_t seed,
                                                         const int* state) {
  const long long b = blockIdx.x;
  D* m = to + b * static_cast<long long>(n) * ld_cols;
  const bool on = state[b] == kActive;
  for (long long e = threadIdx.x; e < static_cast<long long>(n) * cols; e += blockDim.x)
    m[e] = on ? gaussian_device<D>(seed, b, first + e / n, e % n) : from_real<D>(sreal_t<D>(0));
}

__global__ void fill_kernel(int* x, long long count, int value) {
  const long long b = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (b < count) x[b] = value;
}

__global__ void qr_state_kernel(const int* qr_info, int* state, long long count) {
  const long long b = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (b < count && qr_info[b] != 0 && state[b] == kActive) state[b] = kBad;
}

template <class D>
__global__ void __launch_bounds__(kThreads) finite_kernel(const D* y, int rows, int cols, long long stride, int* state) {
  const long long b = blockIdx.x;
  bool finite = true;
  for (long long e = threadIdx.x; e < static_cast<long long>(rows) * cols; e += blockDim.x)
    finite = finite && is_finite(y[b * stride + e]);
  const bool all = __syncthreads_and(finite);
  if (threadIdx.x == 0 && !all && state[b] == kActive) state[b] = kBad;
}

__device__ inline bool threshold_met(double res2, double norm2, double tol2, bool absolute) {
  return res2 <= (absolute ? tol2 : tol2 * norm2);
}

__global__ void start_accuracy_kernel(const double* norm2, double* res2, int* state, long long count, double tol2,
                                      bool absolute) {
  const long long b = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (b >= count) return;
  res2[b] = norm2[b];
  if (state[b] == kActive && threshold_met(res2[b], norm2[b], tol2, absolute)) state[b] = kDone;
}

// Fixed accuracy: the block's Q_i and B_iᴴ into Q and Bᴴ (zeros for matrices not active), the
// residual, the state.
template <class D>
__global__ void __launch_bounds__(kThreads) commit_kernel(const D* yb, const D* zb, D* q, D* z, int m, int n, int L,
                                                         int first, int bi, int ld_block, const double* norm2,
                                                         double* res2, int* state, int* cols, double tol2,
                                                         bool absolute) {
  __shared__ double scratch[kThreads / 32];
  const long long b = blockIdx.x;
  const bool on = state[b] == kActive;
  const D zero = from_real<D>(sreal_t<D>(0));
  const D* ys = yb + b * static_cast<long long>(m) * ld_block;
  const D* zs = zb + b * static_cast<long long>(n) * ld_block;
  D* qd = q + b * static_cast<long long>(m) * L + static_cast<long long>(first) * m;
  D* zd = z + b * static_cast<long long>(n) * L + static_cast<long long>(first) * n;
  double sum = 0;
  for (long long e = threadIdx.x; e < static_cast<long long>(m) * bi; e += blockDim.x) qd[e] = on ? ys[e] : zero;
  for (long long e = threadIdx.x; e < static_cast<long long>(n) * bi; e += blockDim.x) {
    zd[e] = on ? zs[e] : zero;
    if (on) sum += double(abs2(zs[e]));
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0 && on) {
    cols[b] = first + bi;
    res2[b] -= sum;
    if (threshold_met(res2[b], norm2[b], tol2, absolute)) state[b] = kDone;
    else if (cols[b] >= L) state[b] = kMaxRank;
  }
}

template <class D>
__global__ void __launch_bounds__(kThreads) zero_tail_kernel(D* q, D* z, int m, int n, int L, const int* cols) {
  const long long b = blockIdx.x;
  const D zero = from_real<D>(sreal_t<D>(0));
  D* qb = q + b * static_cast<long long>(m) * L;
  D* zb = z + b * static_cast<long long>(n) * L;
  for (long long e = static_cast<long long>(cols[b]) * m + threadIdx.x; e < static_cast<long long>(m) * L; e += blockDim.x)
    qb[e] = zero;
  for (long long e = static_cast<long long>(cols[b]) * n + threadIdx.x; e < static_cast<long long>(n) * L; e += blockDim.x)
    zb[e] = zero;
}

// Hermitian eigen form: res2 = ‖A‖² − ‖T‖².
template <class D>
__global__ void __launch_bounds__(kThreads) hermitian_residual_kernel(const D* t, int L, const double* norm2, double* res2) {
  __shared__ double scratch[kThreads / 32];
  const long long b = blockIdx.x;
  double sum = 0;
  for (long long e = threadIdx.x; e < static_cast<long long>(L) * L; e += blockDim.x) sum += double(abs2(t[b * L * L + e]));
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) res2[b] = norm2[b] - sum;
}

// Nyström: ν = √n·ε·‖Y‖_F, Y ← Y + ν·Ω.
template <class D>
__global__ void __launch_bounds__(kThreads) shift_kernel(D* y, const D* omega, int n, int L, double* shift,
                                                        const int* state, double eps) {
  __shared__ double scratch[kThreads / 32];
  const long long b = blockIdx.x;
  D* yb = y + b * static_cast<long long>(n) * L;
  const D* ob = omega + b * static_cast<long long>(n) * L;
  double sum = 0;
  for (long long e = threadIdx.x; e < static_cast<long long>(n) * L; e += blockDim.x) sum += double(abs2(yb[e]));
  sum = block_sum(sum, scratch);
  if (state[b] != kActive) return;
  const double nu = sqrt(double(n)) * eps * sqrt(sum);
  for (long long e = threadIdx.x; e < static_cast<long long>(n) * L; e += blockDim.x)
    yb[e] = yb[e] + ob[e] * sreal_t<D>(nu);
  if (threadIdx.x == 0) shift[b] = nu;
}

// M ← (M + Mᴴ)/2.
template <class D>
__global__ void __launch_bounds__(kThreads) hermitian_part_kernel(D* mm, int L) {
  D* x = mm + static_cast<long long>(blockIdx.x) * L * L;
  for (int e = threadIdx.x; e < L * L; e += blockDim.x) {
    const int i = e % L, j = e / L;
    if (i > j) continue;
    const D h = (x[i + j * L] + conj_of(x[j + i * L])) * sreal_t<D>(0.5);
    x[i + j * L] = h;
    x[j + i * L] = conj_of(h);
  }
}

// W ← W·Θ^(−½) (columns of Θ at most n·ε·max Θ, or negative, dropped); heev's failures to state.
template <class D>
__global__ void __launch_bounds__(kThreads) inverse_root_kernel(D* w, const sreal_t<D>* theta, int L, int n,
                                                               const int* heev_info, int* state, double eps) {
  const long long b = blockIdx.x;
  if (state[b] != kActive) return;
  if (heev_info[b] != 0) {
    __syncthreads();
    if (threadIdx.x == 0) state[b] = heev_info[b] == status::non_finite_input ? kBad : kFailed;
    return;
  }
  const sreal_t<D>* t = theta + b * L;
  const double largest = fmax(double(t[L - 1]), 0.0);
  D* x = w + b * static_cast<long long>(L) * L;
  for (int e = threadIdx.x; e < L * L; e += blockDim.x) {
    const double th = double(t[e / L]);
    const double scale = th > double(n) * eps * largest && th > 0 ? 1.0 / sqrt(th) : 0.0;
    x[e] = x[e] * sreal_t<D>(scale);
  }
}

struct FinishArgs {
  int m, n, L, r;
  bool fixed_rank, hermitian, with_u, with_v;
  double tol2;
  bool absolute;
};

// Rank, values, info; then U's and V's columns (from `u_source`: Q·V_B or Q·W_T, or U_F for
// Nyström; V from W), zeros beyond the rank, NaN for failures.
template <class D>
__global__ void __launch_bounds__(kThreads) finish_kernel(FinishArgs f, const sreal_t<D>* sigma, const int* state_in,
                                                         const SvdInfo* svd_info, const int* heev_info,
                                                         const double* norm2, const double* res2, const int* cols,
                                                         const double* shift, const D* u_source, const D* w,
                                                         sreal_t<D>* s, D* u, long long ldu, long long stride_u, D* v,
                                                         long long ldv, long long stride_v, RsvdInfo* info) {
  using R = sreal_t<D>;
  __shared__ int rank_shared, reversed_shared, failed_shared;
  const long long b = blockIdx.x;
  const int L = f.L, r = f.r;
  const R* sg = sigma + b * L;
  const bool herm_eigen = f.hermitian && !f.fixed_rank, nystrom = f.hermitian && f.fixed_rank;
  if (threadIdx.x == 0) {
    int state = state_in[b];
    if (state != kBad && state != kFailed) {
      const int problem = herm_eigen ? heev_info[b] : svd_info[b].status;
      if (problem != 0) state = problem == status::non_finite_input ? kBad : kFailed;
    }
    failed_shared = state == kBad || state == kFailed;
    reversed_shared = herm_eigen;
    auto value = [&](int i) {
      const double x = double(sg[herm_eigen ? L - 1 - i : i]);
      return nystrom ? fmax(0.0, x * x - shift[b]) : (herm_eigen ? fmax(x, 0.0) : x);
    };
    int rank = min(r, cols[b]);
    double tail = double(NAN);
    if (failed_shared) {
      info[b] = RsvdInfo{state == kBad ? rsvd_status::non_finite_input : rsvd_status::svd_failed, 0, double(NAN)};
      for (int i = 0; i < r; ++i) s[b * r + i] = R(NAN);
      rank = 0;
    } else {
      if (isfinite(norm2[b])) {
        double kept = 0;
        for (int i = 0; i < L; ++i) {
          const double x = double(sg[i]);
          kept += herm_eigen ? x * x : value(i) * value(i);
        }
        const double base = f.fixed_rank ? norm2[b] - kept : res2[b];
        if (!f.fixed_rank && state != kMaxRank) {
          // The smallest rank whose tail (what the basis misses, plus the values dropped) is within
          // the limit: the values from the front are taken off the total until it is.
          const double limit = f.absolute ? f.tol2 : f.tol2 * norm2[b];
          const int cap = min(r, cols[b]);
          double rest = 0;
          for (int i = 0; i < L; ++i) rest += value(i) * value(i);
          rank = 0;
          while (rank < cap && fmax(base, 0.0) + rest > limit) {
            rest -= value(rank) * value(rank);
            ++rank;
          }
        }
        double dropped = 0;
        for (int i = rank; i < L; ++i) dropped += value(i) * value(i);
        tail = fmax(base, 0.0) + dropped;
      }
      if (nystrom) tail = double(NAN);
      info[b] = RsvdInfo{state == kMaxRank ? rsvd_status::max_rank_reached : rsvd_status::ok, rank, sqrt(tail)};
      for (int i = 0; i < r; ++i) s[b * r + i] = i < rank ? R(value(i)) : R(0);
    }
    rank_shared = rank;
  }
  __syncthreads();
  const int rank = rank_shared;
  const bool failed = failed_shared, reversed = reversed_shared;
  const D zero = from_real<D>(R(0));
  D nan;
  if constexpr (is_cx<D>) nan = D{R(NAN), R(NAN)};
  else nan = R(NAN);
  if (f.with_u) {
    const D* src = u_source + b * static_cast<long long>(f.m) * L;
    for (long long e = threadIdx.x; e < static_cast<long long>(f.m) * r; e += blockDim.x) {
      const int i = static_cast<int>(e % f.m), j = static_cast<int>(e / f.m);
      const int from = reversed ? L - 1 - j : j;
      u[b * stride_u + i + j * ldu] = failed ? nan : (j < rank ? src[i + static_cast<long long>(from) * f.m] : zero);
    }
  }
  if (f.with_v) {
    const D* src = w + b * static_cast<long long>(f.n) * L;
    for (long long e = threadIdx.x; e < static_cast<long long>(f.n) * r; e += blockDim.x) {
      const int i = static_cast<int>(e % f.n), j = static_cast<int>(e / f.n);
      v[b * stride_v + i + j * ldv] = failed ? nan : (j < rank ? src[i + static_cast<long long>(j) * f.n] : zero);
    }
  }
}

template <class T>
class CudaRsvd {
 public:
  using D = device_t<T>;
  using R = real_t<T>;

  CudaRsvd(Exec& exec, const Sampler<T>& a, Batch<const T> dense, const RsvdOptions& o, std::span<std::byte> workspace)
      : exec_(exec), ctx_(exec.cuda_context()), a_(a), dense_(dense), o_(o), p_(make_plan(a.m, a.n, o)), count_(a.count),
        w_(p_, a.count, workspace.data(), true), stream_(ctx_.stream()) {}

  void run(std::span<R> s, Batch<T> u, Batch<T> v, std::span<RsvdInfo> info) {
    ctx_.make_current();
    init_norms();
    if (p_.hermitian && p_.fixed_rank) nystrom();
    else range_and_svd();
    finish(s, u, v, info);
  }

 private:
  unsigned grid() const { return static_cast<unsigned>(count_); }
  unsigned small_grid() const { return static_cast<unsigned>((count_ + 255) / 256); }
  Batch<T> view(T* data, int rows, int cols, int ld_cols) const {
    return Batch<T>{data, rows, cols, rows, static_cast<std::int64_t>(rows) * ld_cols, count_};
  }
  static D* dev(T* p) { return reinterpret_cast<D*>(p); }
  static const D* dev(const T* p) { return reinterpret_cast<const D*>(p); }

  void init_norms() {
    if (!dense_.empty()) {
      norms_kernel<D><<<grid(), kThreads, 0, stream_>>>(dev(dense_.data), dense_.ld, dense_.stride, p_.m, p_.n, w_.norm2,
                                                       w_.state, w_.cols, w_.shift);
    } else {
      const bool known = !a_.norms.empty();
      if (known) {
        std::vector<double> host(static_cast<std::size_t>(count_));
        for (std::size_t b = 0; b < host.size(); ++b) host[b] = double(a_.norms[b]) * double(a_.norms[b]);
        // From pageable memory: the call returns once `host` is staged, so it may go out of scope.
        COVFLOW_CUDA_TRY(cudaMemcpyAsync(w_.norm2, host.data(), host.size() * sizeof(double), cudaMemcpyHostToDevice, stream_));
      }
      init_state_kernel<<<small_grid(), 256, 0, stream_>>>(w_.norm2, known, count_, w_.state, w_.cols, w_.shift);
    }
    COVFLOW_CHECK_LAUNCH();
  }

  void sample(T* to, int first, int cols, int ld_cols) {
    sample_kernel<D><<<grid(), kThreads, 0, stream_>>>(dev(to), p_.n, cols, first, ld_cols, o_.seed, w_.state);
    COVFLOW_CHECK_LAUNCH();
  }

  void orthonormalise(Batch<T> y) {
    geqrf<T>(exec_, y, {w_.tau, static_cast<std::size_t>(count_) * y.cols}, {w_.qr_info, static_cast<std::size_t>(count_)});
    qr_state_kernel<<<small_grid(), 256, 0, stream_>>>(w_.qr_info, w_.state, count_);
    COVFLOW_CHECK_LAUNCH();
    ungqr<T>(exec_, y, {w_.tau, static_cast<std::size_t>(count_) * y.cols});
  }

  void check_finite(const Batch<T>& y) {
    finite_kernel<D><<<grid(), kThreads, 0, stream_>>>(dev(y.data), int(y.rows), int(y.cols), y.stride, w_.state);
    COVFLOW_CHECK_LAUNCH();
  }

  // y ← y − Q(Qᴴy), twice, with Q's first `cols` columns (every matrix: the inactive ones' blocks
  // are masked when committed).
  void project(Batch<T> y, int cols) {
    if (cols == 0) return;
    const D one = from_real<D>(R(1)), zero = from_real<D>(R(0)), minus = from_real<D>(R(-1));
    const int m = int(y.rows), k = int(y.cols), L = p_.samples;
    for (int pass = 0; pass < 2; ++pass) {
      COVFLOW_CUBLAS_TRY(gemm_batched(ctx_.cublas(), adjoint_op<D>(), CUBLAS_OP_N, cols, k, m, one, dev(w_.q), p_.m,
                                      static_cast<long long>(p_.m) * L, dev(y.data), int(y.ld), y.stride, zero,
                                      dev(w_.small), cols, static_cast<long long>(L) * L, int(count_)));
      COVFLOW_CUBLAS_TRY(gemm_batched(ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, m, k, cols, minus, dev(w_.q), p_.m,
                                      static_cast<long long>(p_.m) * L, dev(w_.small), cols, static_cast<long long>(L) * L,
                                      one, dev(y.data), int(y.ld), y.stride, int(count_)));
    }
  }

  void adjoint(Batch<T> x, Batch<T> z) {
    if (p_.hermitian) a_.apply(x, z);
    else a_.apply_adjoint(x, z);
  }

  void range_and_svd() {
    const int m = p_.m, n = p_.n, L = p_.samples;
    const Batch<T> q_all = view(w_.q, m, L, L), z_all = view(w_.z, n, L, L);
    if (p_.fixed_rank) {
      sample(w_.omega, 0, L, L);
      a_.apply(view(w_.omega, n, L, L), q_all);
      check_finite(q_all);
      set_cols(L);
      orthonormalise(q_all);
      for (int i = 0; i < o_.power_iterations; ++i) {
        adjoint(q_all, z_all);
        orthonormalise(z_all);
        a_.apply(z_all, q_all);
        orthonormalise(q_all);
      }
      adjoint(q_all, z_all);
    } else {
      const double tol2 = o_.tolerance * o_.tolerance * (p_.hermitian ? 0.5 : 1.0);
      start_accuracy_kernel<<<small_grid(), 256, 0, stream_>>>(w_.norm2, w_.res2, w_.state, count_, tol2, o_.absolute);
      COVFLOW_CHECK_LAUNCH();
      for (int first = 0; first < L; first += p_.block) {
        const int bi = std::min(p_.block, L - first);
        const Batch<T> yb = view(w_.yb, m, bi, p_.block), zb = view(w_.zb, n, bi, p_.block);
        sample(w_.zb, first, bi, p_.block);
        a_.apply(zb, yb);
        check_finite(yb);
        for (int i = 0; i < o_.power_iterations; ++i) {
          project(yb, first);
          orthonormalise(yb);
          adjoint(yb, zb);
          a_.apply(zb, yb);
        }
        for (int pass = 0; pass < 2; ++pass) {
          project(yb, first);
          orthonormalise(yb);
        }
        adjoint(yb, zb);
        commit_kernel<D><<<grid(), kThreads, 0, stream_>>>(dev(w_.yb), dev(w_.zb), dev(w_.q), dev(w_.z), m, n, L, first, bi,
                                                          p_.block, w_.norm2, w_.res2, w_.state, w_.cols, tol2,
                                                          o_.absolute);
        COVFLOW_CHECK_LAUNCH();
      }
      zero_tail_kernel<D><<<grid(), kThreads, 0, stream_>>>(dev(w_.q), dev(w_.z), m, n, L, w_.cols);
      COVFLOW_CHECK_LAUNCH();
      if (p_.hermitian) return hermitian_core();
    }
    gesvj<T>(exec_, z_all, {w_.sigma, static_cast<std::size_t>(count_) * L}, view(w_.omega, n, L, L),
             Batch<T>{w_.small, L, L, L, static_cast<std::int64_t>(L) * L, count_},
             {w_.svd_info, static_cast<std::size_t>(count_)}, SvdOptions{.u = true, .v = true});
    // Q·V_B, whose columns finish() picks.
    if (o_.u) {
      const D one = from_real<D>(R(1)), zero = from_real<D>(R(0));
      COVFLOW_CUBLAS_TRY(gemm_batched(ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, m, L, L, one, dev(w_.q), m,
                                      static_cast<long long>(m) * L, dev(w_.small), L, static_cast<long long>(L) * L, zero,
                                      dev(w_.full_u), m, static_cast<long long>(m) * L, int(count_)));
    }
  }

  void set_cols(int value) {
    fill_kernel<<<small_grid(), 256, 0, stream_>>>(w_.cols, count_, value);
    COVFLOW_CHECK_LAUNCH();
  }

  void hermitian_core() {
    const int n = p_.n, L = p_.samples;
    const D one = from_real<D>(R(1)), zero = from_real<D>(R(0));
    COVFLOW_CUBLAS_TRY(gemm_batched(ctx_.cublas(), adjoint_op<D>(), CUBLAS_OP_N, L, L, n, one, dev(w_.q), n,
                                    static_cast<long long>(n) * L, dev(w_.z), n, static_cast<long long>(n) * L, zero,
                                    dev(w_.small), L, static_cast<long long>(L) * L, int(count_)));
    hermitian_residual_kernel<D><<<grid(), kThreads, 0, stream_>>>(dev(w_.small), L, w_.norm2, w_.res2);
    COVFLOW_CHECK_LAUNCH();
    heev<T>(exec_, Batch<T>{w_.small, L, L, L, static_cast<std::int64_t>(L) * L, count_},
            {w_.sigma, static_cast<std::size_t>(count_) * L}, {w_.heev_info, static_cast<std::size_t>(count_)});
    if (o_.u)
      COVFLOW_CUBLAS_TRY(gemm_batched(ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, L, L, one, dev(w_.q), n,
                                      static_cast<long long>(n) * L, dev(w_.small), L, static_cast<long long>(L) * L, zero,
                                      dev(w_.full_u), n, static_cast<long long>(n) * L, int(count_)));
  }

  void nystrom() {
    const int n = p_.n, L = p_.samples;
    const Batch<T> omega = view(w_.omega, n, L, L), y = view(w_.q, n, L, L), f = view(w_.z, n, L, L);
    const D one = from_real<D>(R(1)), zero = from_real<D>(R(0));
    sample(w_.omega, 0, L, L);
    set_cols(L);
    for (int i = 0; i < o_.power_iterations; ++i) {
      a_.apply(omega, y);
      check_finite(y);
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(w_.omega, w_.q, sizeof(T) * static_cast<std::size_t>(count_) * n * L,
                                       cudaMemcpyDeviceToDevice, stream_));
      orthonormalise(omega);
    }
    a_.apply(omega, y);
    check_finite(y);
    const double eps = double(std::numeric_limits<R>::epsilon());
    shift_kernel<D><<<grid(), kThreads, 0, stream_>>>(dev(w_.q), dev(w_.omega), n, L, w_.shift, w_.state, eps);
    COVFLOW_CHECK_LAUNCH();
    COVFLOW_CUBLAS_TRY(gemm_batched(ctx_.cublas(), adjoint_op<D>(), CUBLAS_OP_N, L, L, n, one, dev(w_.omega), n,
                                    static_cast<long long>(n) * L, dev(w_.q), n, static_cast<long long>(n) * L, zero,
                                    dev(w_.small), L, static_cast<long long>(L) * L, int(count_)));
    hermitian_part_kernel<D><<<grid(), kThreads, 0, stream_>>>(dev(w_.small), L);
    COVFLOW_CHECK_LAUNCH();
    heev<T>(exec_, Batch<T>{w_.small, L, L, L, static_cast<std::int64_t>(L) * L, count_},
            {w_.sigma, static_cast<std::size_t>(count_) * L}, {w_.heev_info, static_cast<std::size_t>(count_)});
    inverse_root_kernel<D><<<grid(), kThreads, 0, stream_>>>(dev(w_.small), w_.sigma, L, n, w_.heev_info, w_.state, eps);
    COVFLOW_CHECK_LAUNCH();
    COVFLOW_CUBLAS_TRY(gemm_batched(ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, L, L, one, dev(w_.q), n,
                                    static_cast<long long>(n) * L, dev(w_.small), L, static_cast<long long>(L) * L, zero,
                                    dev(w_.z), n, static_cast<long long>(n) * L, int(count_)));
    gesvj<T>(exec_, f, {w_.sigma, static_cast<std::size_t>(count_) * L}, view(w_.full_u, n, L, L),
             Batch<T>{w_.small, L, L, L, static_cast<std::int64_t>(L) * L, count_},
             {w_.svd_info, static_cast<std::size_t>(count_)}, SvdOptions{.u = true, .v = false});
  }

  void finish(std::span<R> s, Batch<T> u, Batch<T> v, std::span<RsvdInfo> info) {
    FinishArgs f{};
    f.m = p_.m;
    f.n = p_.n;
    f.L = p_.samples;
    f.r = p_.out;
    f.fixed_rank = p_.fixed_rank;
    f.hermitian = p_.hermitian;
    f.with_u = !u.empty();
    f.with_v = !v.empty() && !p_.hermitian;
    f.tol2 = o_.tolerance * o_.tolerance;
    f.absolute = o_.absolute;
    finish_kernel<D><<<grid(), kThreads, 0, stream_>>>(
        f, w_.sigma, w_.state, w_.svd_info, w_.heev_info, w_.norm2, w_.res2, w_.cols, w_.shift, dev(w_.full_u),
        dev(w_.omega), s.data(), f.with_u ? dev(u.data) : nullptr, u.ld, u.stride, f.with_v ? dev(v.data) : nullptr, v.ld,
        v.stride, info.data());
    COVFLOW_CHECK_LAUNCH();
  }

  Exec& exec_;
  CudaContext& ctx_;
  const Sampler<T>& a_;
  Batch<const T> dense_;
  const RsvdOptions& o_;
  Plan p_;
  std::int64_t count_;
  Parts<T> w_;
  cudaStream_t stream_;
};

}  // namespace

template <class T>
std::size_t rsvd_cuda_workspace(std::int64_t m, std::int64_t n, std::int64_t count, const RsvdOptions& options) {
  return rsvd_parts::Parts<T>(rsvd_parts::make_plan(m, n, options), count, nullptr, true).bytes;
}

template <class T>
Sampler<T> rsvd_cuda_dense_sampler(Exec& exec, Batch<const T> a) {
  using D = device_t<T>;
  using R = real_t<T>;
  Sampler<T> s;
  s.m = a.rows;
  s.n = a.cols;
  s.count = a.count;
  CudaContext* ctx = &exec.cuda_context();
  const D one = from_real<D>(R(1)), zero = from_real<D>(R(0));
  s.apply = [ctx, a, one, zero](Batch<const T> x, Batch<T> y) {
    COVFLOW_CUBLAS_TRY(gemm_batched(ctx->cublas(), CUBLAS_OP_N, CUBLAS_OP_N, int(a.rows), int(x.cols), int(a.cols), one,
                                    reinterpret_cast<const D*>(a.data), int(a.ld), a.stride,
                                    reinterpret_cast<const D*>(x.data), int(x.ld), x.stride, zero,
                                    reinterpret_cast<D*>(y.data), int(y.ld), y.stride, int(a.count)));
  };
  s.apply_adjoint = [ctx, a, one, zero](Batch<const T> x, Batch<T> z) {
    COVFLOW_CUBLAS_TRY(gemm_batched(ctx->cublas(), adjoint_op<D>(), CUBLAS_OP_N, int(a.cols), int(x.cols), int(a.rows),
                                    one, reinterpret_cast<const D*>(a.data), int(a.ld), a.stride,
                                    reinterpret_cast<const D*>(x.data), int(x.ld), x.stride, zero,
                                    reinterpret_cast<D*>(z.data), int(z.ld), z.stride, int(a.count)));
  };
  return s;
}

template <class T>
void rsvd_cuda(Exec& exec, const Sampler<T>& a, Batch<const T> dense, std::span<real_t<T>> s, Batch<T> u, Batch<T> v,
               std::span<RsvdInfo> info, std::span<std::byte> workspace, const RsvdOptions& options) {
  CudaRsvd<T>(exec, a, dense, options, workspace).run(s, u, v, info);
}

#define COVFLOW_RSVD_CUDA(T)                                                                                       \
  template std::size_t rsvd_cuda_workspace<T>(std::int64_t, std::int64_t, std::int64_t, const RsvdOptions&);      \
  template Sampler<T> rsvd_cuda_dense_sampler<T>(Exec&, Batch<const T>);                                          \
  template void rsvd_cuda<T>(Exec&, const Sampler<T>&, Batch<const T>, std::span<real_t<T>>, Batch<T>, Batch<T>, \
                             std::span<RsvdInfo>, std::span<std::byte>, const RsvdOptions&);
COVFLOW_RSVD_CUDA(f32)
COVFLOW_RSVD_CUDA(f64)
COVFLOW_RSVD_CUDA(cf32)
COVFLOW_RSVD_CUDA(cf64)
#undef COVFLOW_RSVD_CUDA

}  // namespace covflow::linalg::detail

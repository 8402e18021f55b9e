// rsvd: argument checks, the workspace, and the algorithm (rsvd.hpp says which). The steps run in
// lockstep over the batch — a product with A for every matrix, then a batched QR, then per-matrix
// small operations — so that each backend needs its batched products and QR, its Jacobi SVD and
// eigensolver, and a few per-matrix loops. This file is the CPU backend's: BLAS products and the
// per-matrix loops across the thread pool, with linalg's own geqrf, ungqr, gesvj and heev on the
// same Exec. The CUDA backend (rsvd_cuda.cu) takes the same steps with kernels for the loops.
#include "covflow/linalg/rsvd.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "../common/blas.hpp"
#include "../common/checks.hpp"
#include "../common/cpu_helpers.hpp"
#include "covflow/linalg/heev.hpp"
#include "covflow/linalg/qr.hpp"
#include "covflow/linalg/svd.hpp"
#include "rsvd_impl.hpp"
#if COVFLOW_HAS_CUDA
#include "rsvd_cuda.hpp"
#endif

namespace covflow::linalg {
namespace {

using namespace detail::rsvd_parts;

constexpr const char* op = "rsvd";

template <class T>
T conj_of(T v) {
  if constexpr (is_complex_v<T>) return std::conj(v);
  else return v;
}

template <class T>
double frobenius2(const T* a, std::int64_t ld, int rows, int cols) {
  double sum = 0;
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) sum += static_cast<double>(std::norm(std::complex<double>(a[i + j * ld])));
  return sum;
}

// ---- the algorithm on the CPU backend -------------------------------------------------------------
template <class T>
class CpuRsvd {
 public:
  using R = real_t<T>;

  CpuRsvd(Exec& exec, const Sampler<T>& a, const RsvdOptions& o, std::span<std::byte> workspace)
      : exec_(exec), a_(a), o_(o), p_(make_plan(a.m, a.n, o)), count_(a.count),
        w_(p_, a.count, workspace.data()) {}

  void run(std::span<R> s, Batch<T> u, Batch<T> v, std::span<RsvdInfo> info) {
    init_norms();
    if (p_.hermitian && p_.fixed_rank) nystrom();
    else range_and_svd();
    finish(s, u, v, info);
  }

 private:
  ThreadPool& pool() { return exec_.pool(); }
  void each(const std::function<void(std::int64_t)>& body) {
    pool().parallel_for(static_cast<std::size_t>(count_), [&](std::size_t b, unsigned) { body(static_cast<std::int64_t>(b)); });
  }
  Batch<T> view(T* data, int rows, int cols, int ld_cols) const {
    // count × (rows × cols) inside a buffer laid out as count × (rows × ld_cols)
    return Batch<T>{data, rows, cols, rows, static_cast<std::int64_t>(rows) * ld_cols, count_};
  }

  void init_norms() {
    const bool known = !a_.norms.empty();
    each([&](std::int64_t b) {
      w_.norm2[b] = known ? double(a_.norms[b]) * double(a_.norms[b]) : std::numeric_limits<double>::quiet_NaN();
      w_.state[b] = known && !std::isfinite(w_.norm2[b]) ? kBad : kActive;
      w_.cols[b] = 0;
      w_.shift[b] = 0;
    });
  }

  // Ω's columns first … first + cols − 1 (global sample numbers), n × cols, into `to` (ld n, stride
  // n·ld_cols); zero for matrices not active.
  void sample(T* to, int first, int cols, int ld_cols) {
    const int n = p_.n;
    each([&](std::int64_t b) {
      T* m = to + b * static_cast<std::int64_t>(n) * ld_cols;
      const bool on = w_.state[b] == kActive;
      for (int j = 0; j < cols; ++j)
        for (int i = 0; i < n; ++i) m[i + static_cast<std::int64_t>(j) * n] = on ? gaussian<T>(o_.seed, b, first + j, i) : T(0);
    });
  }

  // Q ← orth(Y) in place: Householder QR and the thin Q (rows ≥ cols).
  void orthonormalise(Batch<T> y) {
    geqrf<T>(exec_, y, {w_.tau, static_cast<std::size_t>(count_) * y.cols}, {w_.qr_info, static_cast<std::size_t>(count_)});
    each([&](std::int64_t b) {
      if (w_.qr_info[b] != 0 && w_.state[b] == kActive) w_.state[b] = kBad;
    });
    ungqr<T>(exec_, y, {w_.tau, static_cast<std::size_t>(count_) * y.cols});
  }

  // A matrix whose product came back with a NaN or an Inf (a sampler's A) is flagged.
  void check_finite(const Batch<T>& y) {
    each([&](std::int64_t b) {
      if (w_.state[b] == kActive && !detail::matrix_is_finite(y.matrix(b), y.ld, int(y.rows), int(y.cols))) w_.state[b] = kBad;
    });
  }

  // y ← y − Q(Qᴴy) with Q's first `cols` columns, for active matrices; twice (classical
  // Gram–Schmidt, reorthogonalised), the coefficients in `small`.
  void project(Batch<T> y, int cols) {
    if (cols == 0) return;
    const int m = int(y.rows), k = int(y.cols);
    each([&](std::int64_t b) {
      if (w_.state[b] != kActive) return;
      const T* q = w_.q + b * static_cast<std::int64_t>(p_.m) * p_.samples;
      T* c = w_.small + b * static_cast<std::int64_t>(p_.samples) * p_.samples;
      for (int pass = 0; pass < 2; ++pass) {
        blas::gemm('C', 'N', cols, k, m, T(1), q, p_.m, y.matrix(b), int(y.ld), T(0), c, cols);
        blas::gemm('N', 'N', m, k, cols, T(-1), q, p_.m, c, cols, T(1), y.matrix(b), int(y.ld));
      }
    });
  }

  // General form (and the Hermitian fixed-accuracy form): the range Q, then B = QᴴA, its SVD.
  void range_and_svd() {
    const int m = p_.m, n = p_.n, L = p_.samples;
    const Batch<T> q_all = view(w_.q, m, L, L), z_all = view(w_.z, n, L, L);
    if (p_.fixed_rank) {
      sample(w_.omega, 0, L, L);
      a_.apply(view(w_.omega, n, L, L), q_all);
      check_finite(q_all);
      each([&](std::int64_t b) { w_.cols[b] = L; });
      orthonormalise(q_all);
      for (int i = 0; i < o_.power_iterations; ++i) {
        adjoint(q_all, z_all);
        orthonormalise(z_all);
        a_.apply(z_all, q_all);
        orthonormalise(q_all);
      }
      adjoint(q_all, z_all);  // Bᴴ = AᴴQ
    } else {
      // Hermitian: the eigen form's error is at most √2 times the range's (‖A − PAP‖² = ‖A − PA‖² +
      // ‖PA(I − P)‖², and the second term is at most the first for A = Aᴴ), so the range aims at tol/√2.
      const double tol2 = o_.tolerance * o_.tolerance * (p_.hermitian ? 0.5 : 1.0);
      each([&](std::int64_t b) {
        w_.res2[b] = w_.norm2[b];
        if (w_.state[b] == kActive && threshold_met(b, tol2)) w_.state[b] = kDone;
      });
      for (int first = 0; first < L; first += p_.block) {
        bool any = false;
        for (std::int64_t b = 0; b < count_; ++b) any = any || w_.state[b] == kActive;
        if (!any) break;
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
        for (int pass = 0; pass < 2; ++pass) {  // orth(Y − QQᴴY), twice: Q_i ⟂ Q to rounding
          project(yb, first);
          orthonormalise(yb);
        }
        adjoint(yb, zb);  // B_iᴴ = AᴴQ_i
        each([&](std::int64_t b) {
          T* qb = w_.q + b * static_cast<std::int64_t>(m) * L + static_cast<std::int64_t>(first) * m;
          T* zb_out = w_.z + b * static_cast<std::int64_t>(n) * L + static_cast<std::int64_t>(first) * n;
          const bool on = w_.state[b] == kActive;
          for (int j = 0; j < bi; ++j) {
            for (int i = 0; i < m; ++i) qb[i + j * m] = on ? yb.at(b, i, j) : T(0);
            for (int i = 0; i < n; ++i) zb_out[i + j * n] = on ? zb.at(b, i, j) : T(0);
          }
          if (!on) return;
          w_.cols[b] = first + bi;
          w_.res2[b] -= frobenius2(zb.matrix(b), zb.ld, n, bi);
          if (threshold_met(b, tol2)) w_.state[b] = kDone;
          else if (w_.cols[b] >= L) w_.state[b] = kMaxRank;
        });
      }
      // Columns never reached stay zero in Q and Bᴴ.
      each([&](std::int64_t b) {
        T* qb = w_.q + b * static_cast<std::int64_t>(m) * L;
        T* zb_out = w_.z + b * static_cast<std::int64_t>(n) * L;
        for (std::int64_t e = static_cast<std::int64_t>(w_.cols[b]) * m; e < static_cast<std::int64_t>(m) * L; ++e) qb[e] = T(0);
        for (std::int64_t e = static_cast<std::int64_t>(w_.cols[b]) * n; e < static_cast<std::int64_t>(n) * L; ++e) zb_out[e] = T(0);
      });
      if (p_.hermitian) return hermitian_core();
    }
    // Bᴴ (n × L) = W·Σ·V_Bᴴ: gesvj, W into omega, V_B into small. A ≈ (Q·V_B)·Σ·Wᴴ.
    gesvj<T>(exec_, z_all, {w_.sigma, static_cast<std::size_t>(count_) * L}, view(w_.omega, n, L, L),
             Batch<T>{w_.small, L, L, L, static_cast<std::int64_t>(L) * L, count_},
             {w_.svd_info, static_cast<std::size_t>(count_)}, SvdOptions{.u = true, .v = true});
  }

  bool threshold_met(std::int64_t b, double tol2) const {
    const double limit = o_.absolute ? tol2 : tol2 * w_.norm2[b];
    return w_.res2[b] <= limit;
  }

  void adjoint(Batch<T> x, Batch<T> z) {
    if (p_.hermitian) a_.apply(x, z);
    else a_.apply_adjoint(x, z);
  }

  // Hermitian, fixed accuracy: T = Qᴴ·(A·Q) (A·Q is in z), its eigendecomposition into small and
  // sigma (ascending; finish() reorders), the residual ‖A‖² − ‖T‖².
  void hermitian_core() {
    const int n = p_.n, L = p_.samples;
    each([&](std::int64_t b) {
      const T* q = w_.q + b * static_cast<std::int64_t>(n) * L;
      const T* aq = w_.z + b * static_cast<std::int64_t>(n) * L;
      T* t = w_.small + b * static_cast<std::int64_t>(L) * L;
      blas::gemm('C', 'N', L, L, n, T(1), q, n, aq, n, T(0), t, L);
      w_.res2[b] = w_.norm2[b] - frobenius2(t, L, L, L);
    });
    heev<T>(exec_, Batch<T>{w_.small, L, L, L, static_cast<std::int64_t>(L) * L, count_},
            {w_.sigma, static_cast<std::size_t>(count_) * L}, {w_.heev_info, static_cast<std::size_t>(count_)});
  }

  // Hermitian, fixed rank: stabilised Nyström from Y = A·Ω (Tropp et al. 2017, Algorithm 3):
  // ν = √n·ε·‖Y‖_F, Y_ν = Y + ν·Ω, M = ΩᴴY_ν = W·Θ·Wᴴ, F = Y_ν·W·Θ^(−½) (columns of Θ below
  // n·ε·max Θ dropped), F = U·Σ·(…)ᴴ by gesvj, λ = max(0, σ² − ν).
  void nystrom() {
    const int n = p_.n, L = p_.samples;
    const Batch<T> omega = view(w_.omega, n, L, L), y = view(w_.q, n, L, L), f = view(w_.z, n, L, L);
    sample(w_.omega, 0, L, L);
    for (int i = 0; i < o_.power_iterations; ++i) {  // Ω ← orth(A·Ω)
      a_.apply(omega, y);
      check_finite(y);
      each([&](std::int64_t b) { std::copy_n(y.matrix(b), static_cast<std::size_t>(n) * L, omega.matrix(b)); });
      orthonormalise(omega);
    }
    a_.apply(omega, y);
    check_finite(y);
    constexpr double eps = std::numeric_limits<R>::epsilon();
    each([&](std::int64_t b) {
      w_.cols[b] = L;
      if (w_.state[b] != kActive) return;
      T* yb = y.matrix(b);
      const T* om = omega.matrix(b);
      const double nu = std::sqrt(double(n)) * eps * std::sqrt(frobenius2(yb, n, n, L));
      w_.shift[b] = nu;
      for (std::int64_t e = 0; e < static_cast<std::int64_t>(n) * L; ++e) yb[e] += T(R(nu)) * om[e];
      T* mm = w_.small + b * static_cast<std::int64_t>(L) * L;
      blas::gemm('C', 'N', L, L, n, T(1), om, n, yb, n, T(0), mm, L);
      for (int j = 0; j < L; ++j)  // Hermitian part
        for (int i = 0; i <= j; ++i) {
          const T h = (mm[i + j * L] + conj_of(mm[j + i * L])) * R(0.5);
          mm[i + j * L] = h;
          mm[j + i * L] = conj_of(h);
        }
    });
    heev<T>(exec_, Batch<T>{w_.small, L, L, L, static_cast<std::int64_t>(L) * L, count_},
            {w_.sigma, static_cast<std::size_t>(count_) * L}, {w_.heev_info, static_cast<std::size_t>(count_)});
    each([&](std::int64_t b) {
      if (w_.state[b] != kActive) return;
      if (w_.heev_info[b] != 0) {
        w_.state[b] = w_.heev_info[b] == status::non_finite_input ? kBad : kFailed;
        return;
      }
      T* wm = w_.small + b * static_cast<std::int64_t>(L) * L;
      const R* theta = w_.sigma + b * L;
      const double largest = std::max(double(theta[L - 1]), 0.0);
      for (int j = 0; j < L; ++j) {
        const double t = double(theta[j]);
        const double scale = t > double(n) * eps * largest && t > 0 ? 1.0 / std::sqrt(t) : 0.0;
        for (int i = 0; i < L; ++i) wm[i + j * L] *= R(scale);
      }
      blas::gemm('N', 'N', n, L, L, T(1), y.matrix(b), n, wm, L, T(0), f.matrix(b), n);
    });
    // F = U·Σ·Xᴴ: U into q (Y_ν is no longer needed), X into small.
    gesvj<T>(exec_, f, {w_.sigma, static_cast<std::size_t>(count_) * L}, y,
             Batch<T>{w_.small, L, L, L, static_cast<std::int64_t>(L) * L, count_},
             {w_.svd_info, static_cast<std::size_t>(count_)}, SvdOptions{.u = true, .v = false});
  }

  // Outputs: rank, σ (or λ), U, V; NaN for failed matrices, zeros beyond each rank.
  void finish(std::span<R> s, Batch<T> u, Batch<T> v, std::span<RsvdInfo> info) {
    const int m = p_.m, n = p_.n, L = p_.samples, r = p_.out;
    const double tol2 = o_.tolerance * o_.tolerance;
    const R nan = std::numeric_limits<R>::quiet_NaN();
    each([&](std::int64_t b) {
      RsvdInfo& out = info[static_cast<std::size_t>(b)];
      R* sb = s.data() + b * r;
      const R* sigma = w_.sigma + b * L;
      int state = w_.state[b];
      const bool herm_eigen = p_.hermitian && !p_.fixed_rank;
      if (state != kBad && state != kFailed) {
        const int problem = herm_eigen ? w_.heev_info[b] : w_.svd_info[b].status;
        if (problem != 0) state = problem == status::non_finite_input ? kBad : kFailed;
      }
      if (state == kBad || state == kFailed) {
        out = RsvdInfo{state == kBad ? rsvd_status::non_finite_input : rsvd_status::svd_failed, 0, double(nan)};
        std::fill_n(sb, r, nan);
        if (!u.empty())
          for (int j = 0; j < r; ++j) std::fill_n(u.matrix(b) + static_cast<std::int64_t>(j) * u.ld, m, T(nan));
        if (!v.empty())
          for (int j = 0; j < r; ++j) std::fill_n(v.matrix(b) + static_cast<std::int64_t>(j) * v.ld, n, T(nan));
        return;
      }
      // Values in descending order, and where each column of U (and V) comes from.
      std::vector<double> value(static_cast<std::size_t>(L));
      std::vector<int> from(static_cast<std::size_t>(L));
      for (int i = 0; i < L; ++i) {
        from[i] = herm_eigen ? L - 1 - i : i;  // heev: ascending
        const double x = double(sigma[from[i]]);
        value[i] = p_.hermitian && p_.fixed_rank ? std::max(0.0, x * x - w_.shift[b]) : (herm_eigen ? std::max(x, 0.0) : x);
      }
      // Rank: fixed rank, r; fixed accuracy, the smallest with the tail within the tolerance.
      int rank = std::min(r, w_.cols[b]);
      double tail = std::numeric_limits<double>::quiet_NaN();
      if (std::isfinite(w_.norm2[b])) {
        double kept = 0;
        for (int i = 0; i < L; ++i) kept += (herm_eigen ? double(sigma[from[i]]) * double(sigma[from[i]]) : value[i] * value[i]);
        const double base = p_.fixed_rank ? w_.norm2[b] - kept : w_.res2[b];  // error of the whole basis
        if (!p_.fixed_rank && state != kMaxRank) {
          const double limit = o_.absolute ? tol2 : tol2 * w_.norm2[b];
          std::vector<double> after(static_cast<std::size_t>(L) + 1, 0.0);  // Σ_{i ≥ j} value²
          for (int i = L - 1; i >= 0; --i) after[i] = after[i + 1] + value[i] * value[i];
          rank = 0;
          while (rank < std::min(r, w_.cols[b]) && std::max(base, 0.0) + after[rank] > limit) ++rank;
        }
        double dropped = 0;
        for (int i = rank; i < L; ++i) dropped += value[i] * value[i];
        tail = std::max(base, 0.0) + dropped;
      }
      if (p_.hermitian && p_.fixed_rank) tail = std::numeric_limits<double>::quiet_NaN();
      out = RsvdInfo{state == kMaxRank ? rsvd_status::max_rank_reached : rsvd_status::ok, rank, std::sqrt(tail)};
      for (int i = 0; i < r; ++i) sb[i] = i < rank ? R(value[i]) : R(0);
      // U: Q·V_B (general), U_F (Nyström, in q), Q·W_T (Hermitian eigen form).
      if (!u.empty()) {
        T* ub = u.matrix(b);
        const T* q = w_.q + b * static_cast<std::int64_t>(m) * L;
        const T* small = w_.small + b * static_cast<std::int64_t>(L) * L;
        for (int j = 0; j < r; ++j) {
          T* col = ub + static_cast<std::int64_t>(j) * u.ld;
          if (j >= rank) {
            std::fill_n(col, m, T(0));
          } else if (p_.hermitian && p_.fixed_rank) {
            std::copy_n(q + static_cast<std::int64_t>(from[j]) * m, m, col);
          } else {
            blas::gemm('N', 'N', m, 1, L, T(1), q, m, small + static_cast<std::int64_t>(from[j]) * L, L, T(0), col, m);
          }
        }
      }
      if (!v.empty() && !p_.hermitian) {
        const T* wv = w_.omega + b * static_cast<std::int64_t>(n) * L;
        for (int j = 0; j < r; ++j) {
          T* col = v.matrix(b) + static_cast<std::int64_t>(j) * v.ld;
          if (j < rank) std::copy_n(wv + static_cast<std::int64_t>(j) * n, n, col);
          else std::fill_n(col, n, T(0));
        }
      }
    });
  }

  Exec& exec_;
  const Sampler<T>& a_;
  const RsvdOptions& o_;
  Plan p_;
  std::int64_t count_;
  Parts<T> w_;
};

// The dense matrix as a sampler: BLAS products per matrix across the pool.
template <class T>
Sampler<T> dense_sampler(Exec& exec, Batch<const T> a, std::vector<real_t<T>>& norms) {
  Sampler<T> s;
  s.m = a.rows;
  s.n = a.cols;
  s.count = a.count;
  norms.assign(static_cast<std::size_t>(a.count), real_t<T>(0));
  exec.pool().parallel_for(static_cast<std::size_t>(a.count), [&](std::size_t b, unsigned) {
    const T* m = a.matrix(static_cast<std::int64_t>(b));
    norms[b] = detail::matrix_is_finite(m, a.ld, int(a.rows), int(a.cols))
                   ? real_t<T>(std::sqrt(frobenius2(m, a.ld, int(a.rows), int(a.cols))))
                   : std::numeric_limits<real_t<T>>::quiet_NaN();
  });
  s.norms = norms;
  s.apply = [&exec, a](Batch<const T> x, Batch<T> y) {
    exec.pool().parallel_for(static_cast<std::size_t>(a.count), [&](std::size_t b, unsigned) {
      const auto i = static_cast<std::int64_t>(b);
      blas::gemm('N', 'N', int(a.rows), int(x.cols), int(a.cols), T(1), a.matrix(i), int(a.ld), x.matrix(i), int(x.ld),
                 T(0), y.matrix(i), int(y.ld));
    });
  };
  s.apply_adjoint = [&exec, a](Batch<const T> x, Batch<T> z) {
    exec.pool().parallel_for(static_cast<std::size_t>(a.count), [&](std::size_t b, unsigned) {
      const auto i = static_cast<std::int64_t>(b);
      blas::gemm('C', 'N', int(a.cols), int(x.cols), int(a.rows), T(1), a.matrix(i), int(a.ld), x.matrix(i), int(x.ld),
                 T(0), z.matrix(i), int(z.ld));
    });
  };
  return s;
}

void check_options(std::int64_t m, std::int64_t n, const RsvdOptions& o, double epsilon) {
  auto fail = [](const std::string& what) { throw InvalidArgument(std::string(op) + ": " + what); };
  if (o.rank < 0) fail("rank must be ≥ 0 (0: fixed accuracy), got " + std::to_string(o.rank));
  if (o.rank > 0 && o.tolerance != 0) fail("give a rank or a tolerance, not both");
  if (o.rank == 0 && !(o.tolerance > 0)) fail("give a rank (> 0) or a tolerance (> 0)");
  if (o.rank == 0 && o.tolerance < 10 * std::sqrt(epsilon)) {
    char text[160];
    std::snprintf(text, sizeof text, "tolerance %g is below what this precision can confirm (10·√ε = %.2g)", o.tolerance,
                  10 * std::sqrt(epsilon));
    fail(std::string(text) + ": the error is measured as ‖A‖² − ‖QᴴA‖²");
  }
  if (o.oversampling < 0) fail("oversampling must be ≥ 0, got " + std::to_string(o.oversampling));
  if (o.power_iterations < 0) fail("power_iterations must be ≥ 0, got " + std::to_string(o.power_iterations));
  if (o.block < 1) fail("block must be ≥ 1, got " + std::to_string(o.block));
  if (o.max_rank < 0) fail("max_rank must be ≥ 0 (0: min(m, n)), got " + std::to_string(o.max_rank));
  if (o.rank > 0 && o.max_rank != 0) fail("max_rank applies to the fixed-accuracy mode (rank 0) only");
  if (o.hermitian && m != n)
    fail("hermitian needs square matrices, got " + std::to_string(m) + "×" + std::to_string(n));
}

template <class T>
void run(Exec& exec, const Sampler<T>& a, Batch<const T> dense, std::span<real_t<T>> s, Batch<T> u, Batch<T> v,
         std::span<RsvdInfo> info, std::span<std::byte> workspace, const RsvdOptions& options) {
  check_options(a.m, a.n, options, std::numeric_limits<real_t<T>>::epsilon());
  if (a.count == 0) return;
  if (a.m <= 0 || a.n <= 0) throw InvalidArgument(std::string(op) + ": A must have m, n ≥ 1");
  detail::require_int32(a.m, op, "m");
  detail::require_int32(a.n, op, "n");
  if (!a.apply || (!options.hermitian && !a.apply_adjoint))
    throw InvalidArgument(std::string(op) + ": the sampler needs apply" + (options.hermitian ? "" : " and apply_adjoint"));
  if (!a.norms.empty() && a.norms.size() < static_cast<std::size_t>(a.count))
    throw InvalidArgument(std::string(op) + ": the sampler's norms hold " + std::to_string(a.norms.size()) +
                          " values, one per matrix needed");
  if (options.rank == 0 && a.norms.empty() && dense.empty())
    throw InvalidArgument(std::string(op) + ": fixed accuracy needs ‖A‖_F of each matrix (the error is measured as "
                          "‖A‖² − ‖QᴴA‖²): give the sampler's norms");
  const int r = rsvd_output_rank(a.m, a.n, options);
  auto require = [&](const Batch<T>& x, std::int64_t rows, const char* what) {
    validate(x, op, what);
    if (x.rows != rows || x.cols != r || x.count != a.count)
      throw InvalidArgument(std::string(op) + ": " + what + " must be " + std::to_string(a.count) + " × " +
                            std::to_string(rows) + "×" + std::to_string(r) + ", got " + std::to_string(x.count) + " × " +
                            std::to_string(x.rows) + "×" + std::to_string(x.cols));
  };
  if (options.u) require(u, a.m, "U");
  else u = Batch<T>{};
  if (options.v && !options.hermitian) require(v, a.n, "V");
  else v = Batch<T>{};
  if (s.size() < static_cast<std::size_t>(a.count * r))
    throw InvalidArgument(std::string(op) + ": s holds " + std::to_string(s.size()) + " values, " +
                          std::to_string(a.count * r) + " needed (count × r)");
  if (info.size() < static_cast<std::size_t>(a.count))
    throw InvalidArgument(std::string(op) + ": info holds " + std::to_string(info.size()) + " entries, " +
                          std::to_string(a.count) + " needed");
  const std::size_t need = rsvd_workspace<T>(exec, a.m, a.n, a.count, options);
  if (workspace.size() < need)
    throw InvalidArgument(std::string(op) + ": the workspace holds " + std::to_string(workspace.size()) + " bytes, " +
                          std::to_string(need) + " needed (rsvd_workspace)");
  detail::require_accessible(exec, u, op, "U");
  detail::require_accessible(exec, v, op, "V");
  detail::require_memory_space(exec, s.data(), op, "s");
  detail::require_memory_space(exec, info.data(), op, "info");
  if (need > 0) detail::require_memory_space(exec, workspace.data(), op, "workspace");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) {
    detail::rsvd_cuda<T>(exec, a, dense, s, u, v, info, workspace, options);
    return;
  }
#endif
  (void)dense;
  CpuRsvd<T>(exec, a, options, workspace).run(s, u, v, info);
}

}  // namespace

int rsvd_output_rank(std::int64_t m, std::int64_t n, const RsvdOptions& options) {
  return make_plan(m, n, options).out;
}

template <class T>
std::size_t rsvd_workspace(const Exec& exec, std::int64_t m, std::int64_t n, std::int64_t count,
                           const RsvdOptions& options) {
  if (m <= 0 || n <= 0 || count <= 0) return 0;
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) return detail::rsvd_cuda_workspace<T>(m, n, count, options);
#endif
  (void)exec;
  return Parts<T>(make_plan(m, n, options), count, nullptr).bytes;
}

template <class T>
void rsvd(Exec& exec, const Sampler<T>& a, std::span<real_t<T>> s, Batch<T> u, Batch<T> v, std::span<RsvdInfo> info,
          std::span<std::byte> workspace, const RsvdOptions& options) {
  run(exec, a, Batch<const T>{}, s, u, v, info, workspace, options);
}

template <class T>
void rsvd(Exec& exec, Batch<const T> a, std::span<real_t<T>> s, Batch<T> u, Batch<T> v, std::span<RsvdInfo> info,
          std::span<std::byte> workspace, const RsvdOptions& options) {
  validate(a, op, "A");
  if (a.count == 0) return;
  detail::require_accessible(exec, a, op, "A");
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) {
    const Sampler<T> sampler = detail::rsvd_cuda_dense_sampler<T>(exec, a);
    run(exec, sampler, a, s, u, v, info, workspace, options);
    return;
  }
#endif
  std::vector<real_t<T>> norms;
  const Sampler<T> sampler = dense_sampler(exec, a, norms);
  run(exec, sampler, a, s, u, v, info, workspace, options);
}

#define COVFLOW_RSVD(T)                                                                                            \
  template std::size_t rsvd_workspace<T>(const Exec&, std::int64_t, std::int64_t, std::int64_t, const RsvdOptions&); \
  template void rsvd<T>(Exec&, const Sampler<T>&, std::span<real_t<T>>, Batch<T>, Batch<T>, std::span<RsvdInfo>,   \
                        std::span<std::byte>, const RsvdOptions&);                                                   \
  template void rsvd<T>(Exec&, Batch<const T>, std::span<real_t<T>>, Batch<T>, Batch<T>, std::span<RsvdInfo>,      \
                        std::span<std::byte>, const RsvdOptions&);
COVFLOW_RSVD(f32)
COVFLOW_RSVD(f64)
COVFLOW_RSVD(cf32)
COVFLOW_RSVD(cf64)
#undef COVFLOW_RSVD

}  // namespace covflow::linalg

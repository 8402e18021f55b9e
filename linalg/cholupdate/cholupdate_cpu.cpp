// cholupdate on the CPU: LINPACK dchud's column order (C. Walder, "Rank k Cholesky Up/Down-dating on
// the GPU: gpucholmodV0.2", 2010, §2, CholeskyModifyB: the rotations of column j are made from
// L(j, j) and V's row j, then applied to the rows below); plane rotations for updates (dchud's
// own), the hyperbolic form of the paper's Algorithm 1 for downdates.
//
// Per column j the k rotations come from prefix sums of the diagonal,
//   α₋₁ = L(j, j),   α_p² = α_{p−1}² + σ|w_jp|².
// Downdates (σ = −1): c_p = α_p / α_{p−1}, s_p = w_jp / α_{p−1}, applied to a row i > j in the
// paper's order, L ← (L − s̄_p w_ip)/c_p then w_ip ← c_p w_ip − s_p L (the new L: the "mixed" form,
// which is what keeps hyperbolic rotations stable). Written with t = α_p·L the pair becomes one
// multiply-add each,
//   t ← t − w̄_jp w_ip,   w_ip ← c_p w_ip − (s_p/α_p)·t,   L̃(i, j) = t / α_{k−1}.
// Updates (σ = +1): the unitary rotation c_p = α_{p−1}/α_p ≤ 1, s_p = w_jp/α_p,
//   L ← c_p L + s̄_p w_ip,   w_ip ← c_p w_ip − s_p L_old.
// The paper uses the hyperbolic form for both; for an update its c_p = α_p/α_{p−1} is huge when
// L(j, j) is tiny (a nearly singular direction), and w_ip ← c_p w_ip − … then cancels two terms of
// that size: one diagonal of 1e-9 cost 8500 n·ε (the tiny-pivot test case). Unitary rotations
// have |c|, |s| ≤ 1 and cost two multiply-adds more per element. Either way there is no division
// inside the row loop, which runs down the column (contiguous in L and in each column of W) and
// vectorises.
//
// A failed downdate must leave L as it was, so downdates run twice: a probe that computes every
// rotation without storing L, and — only when every column succeeded — the same sweep again
// storing it (the arithmetic is identical, so the second cannot fail where the first did not).
// Updates cannot fail once the input has been checked (finite, positive diagonal) and run once.
// V is copied into the worker's scratch and never written.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>

#include "cholupdate_impl.hpp"

namespace covflow::linalg::detail {
namespace {

constexpr std::size_t align_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Complex products written out: std::complex's operator* carries C99 Annex G's NaN recovery
// (a library call per product) that would stop the row loops from vectorising.
template <class R> inline R mul(R a, R b) { return a * b; }
template <class R> inline std::complex<R> mul(std::complex<R> a, std::complex<R> b) {
  return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
}
template <class R> inline R conj_(R a) { return a; }
template <class R> inline std::complex<R> conj_(std::complex<R> a) { return {a.real(), -a.imag()}; }
template <class R> inline R abs2(R a) { return a * a; }
template <class R> inline R abs2(std::complex<R> a) { return a.real() * a.real() + a.imag() * a.imag(); }
template <class R> inline R scale(R a, R s) { return a * s; }
template <class R> inline std::complex<R> scale(std::complex<R> a, R s) { return {a.real() * s, a.imag() * s}; }
template <class R> inline bool finite(R a) { return std::isfinite(a); }
template <class R> inline bool finite(std::complex<R> a) { return std::isfinite(a.real()) && std::isfinite(a.imag()); }

// Scratch of one matrix in flight.
template <class T>
struct Slot {
  using R = real_t<T>;
  T* w;      // n × k, ld n: V, transformed column by column
  T* t;      // n: the column being formed
  R* c;      // k rotation parameters of the current column
  T* b;      // k: s_p / α_p (downdates), s_p (updates)
  T* g;      // k: σ·conj(w_jp) (downdates), conj(s_p) (updates)

  static std::size_t bytes(std::int64_t n, std::int64_t k) {
    return align_up(sizeof(T) * std::size_t(n * k)) + align_up(sizeof(T) * std::size_t(n)) +
           align_up(sizeof(R) * std::size_t(k)) + 2 * align_up(sizeof(T) * std::size_t(k));
  }
  static Slot carve(std::byte* base, std::int64_t n, std::int64_t k) {
    Slot s;
    s.w = reinterpret_cast<T*>(base);
    base += align_up(sizeof(T) * std::size_t(n * k));
    s.t = reinterpret_cast<T*>(base);
    base += align_up(sizeof(T) * std::size_t(n));
    s.c = reinterpret_cast<R*>(base);
    base += align_up(sizeof(R) * std::size_t(k));
    s.b = reinterpret_cast<T*>(base);
    base += align_up(sizeof(T) * std::size_t(k));
    s.g = reinterpret_cast<T*>(base);
    return s;
  }
};

// 0 when L's lower triangle and V are finite and L's diagonal positive; else the info to report.
template <class T>
int check_input(const T* l, std::int64_t ldl, const T* v, std::int64_t ldv, int n, int k) {
  for (int p = 0; p < k; ++p)
    for (int i = 0; i < n; ++i)
      if (!finite(v[i + p * ldv])) return status::non_finite_input;
  int bad_diagonal = 0;
  for (int j = 0; j < n; ++j) {
    for (int i = j; i < n; ++i)
      if (!finite(l[i + j * ldl])) return status::non_finite_input;
    if (bad_diagonal == 0 && !(std::real(l[j + j * ldl]) > 0)) bad_diagonal = j + 1;
  }
  return bad_diagonal;
}

// The rotations of column j from α = L(j, j) and W's row j. False when α_p² ≤ 0 for some p (the
// downdated matrix is not positive definite at this column). Writes c, b, g and the final α.
template <class T>
bool make_rotations(const Slot<T>& s, std::int64_t j, int n, int k, real_t<T> alpha, real_t<T> sigma,
                    real_t<T>& alpha_final) {
  using R = real_t<T>;
  R square = alpha * alpha;  // α_p², accumulated directly: no square root is squared again
  R previous = alpha;
  for (int p = 0; p < k; ++p) {
    const T w = s.w[j + std::int64_t(p) * n];
    square += sigma * abs2(w);
    if (!(square > 0) || !std::isfinite(square)) return false;
    const R current = std::sqrt(square);
    if (sigma > 0) {  // unitary: c = α_{p−1}/α_p, s = w_jp/α_p; b = s, g = s̄
      const R inverse = R(1) / current;
      s.c[p] = previous * inverse;
      s.b[p] = scale(w, inverse);
      s.g[p] = scale(conj_(w), inverse);
    } else {
      s.c[p] = current / previous;
      s.b[p] = scale(w, R(1) / (previous * current));
      s.g[p] = scale(conj_(w), sigma);
    }
    previous = current;
  }
  alpha_final = previous;
  return true;
}

// Rows [first, last) of column j: t = α·L(i, j), the k rotations, L̃(i, j) = t/α_final (stored
// only when `store`). Touches W's rows [first, last) only, so row ranges may run concurrently.
template <class T>
void apply_rows(const Slot<T>& s, T* column, int n, int k, std::int64_t first, std::int64_t last,
                real_t<T> alpha, real_t<T> inverse_final, bool store, bool unitary) {
  T* __restrict t = s.t;
  if (unitary) {  // updates: t = L(i, j) itself, rotated by (c, s) against each column of W
    for (std::int64_t i = first; i < last; ++i) t[i] = column[i];
    for (int p = 0; p < k; ++p) {
      T* __restrict w = s.w + std::int64_t(p) * n;
      const real_t<T> c = s.c[p];
      const T b = s.b[p], g = s.g[p];
      for (std::int64_t i = first; i < last; ++i) {
        const T old = t[i];
        t[i] = scale(old, c) + mul(g, w[i]);
        w[i] = scale(w[i], c) - mul(b, old);
      }
    }
    if (store)
      for (std::int64_t i = first; i < last; ++i) column[i] = t[i];
    return;
  }
  for (std::int64_t i = first; i < last; ++i) t[i] = scale(column[i], alpha);
  for (int p = 0; p < k; ++p) {
    T* __restrict w = s.w + std::int64_t(p) * n;
    const real_t<T> c = s.c[p];
    const T b = s.b[p], g = s.g[p];
    for (std::int64_t i = first; i < last; ++i) {
      const T ti = t[i] + mul(g, w[i]);
      t[i] = ti;
      w[i] = scale(w[i], c) - mul(b, ti);
    }
  }
  if (store)
    for (std::int64_t i = first; i < last; ++i) column[i] = scale(t[i], inverse_final);
}

// One sweep over the columns of one matrix. Returns 0 or the failing column (1-based). With
// `rows_in_parallel`, each column's rows are split across the pool (a single large factor).
template <class T>
int sweep(ThreadPool* rows_in_parallel, const Slot<T>& s, T* l, std::int64_t ldl, const T* v, std::int64_t ldv,
          int n, int k, real_t<T> sigma, bool store) {
  using R = real_t<T>;
  for (int p = 0; p < k; ++p) std::memcpy(s.w + std::int64_t(p) * n, v + p * ldv, sizeof(T) * std::size_t(n));
  for (int j = 0; j < n; ++j) {
    T* column = l + j * ldl;
    const R alpha = std::real(column[j]);
    R alpha_final = alpha;
    if (!make_rotations(s, j, n, k, alpha, sigma, alpha_final)) return j + 1;
    const R inverse_final = R(1) / alpha_final;
    const std::int64_t below = n - j - 1;
    constexpr std::int64_t kRowsPerTask = 2048;
    if (rows_in_parallel != nullptr && below >= 2 * kRowsPerTask) {
      const std::int64_t tasks = (below + kRowsPerTask - 1) / kRowsPerTask;
      rows_in_parallel->parallel_for(static_cast<std::size_t>(tasks), [&](std::size_t task, unsigned) {
        const std::int64_t first = j + 1 + std::int64_t(task) * kRowsPerTask;
        apply_rows(s, column, n, k, first, std::min<std::int64_t>(first + kRowsPerTask, n), alpha, inverse_final, store,
                   sigma > 0);
      });
    } else {
      apply_rows(s, column, n, k, j + 1, n, alpha, inverse_final, store, sigma > 0);
    }
    if (store) column[j] = T(alpha_final);
  }
  return 0;
}

}  // namespace

template <class T>
std::size_t cholupdate_cpu_workspace(unsigned workers, std::int64_t n, std::int64_t k, std::int64_t count) {
  // One slot per worker: parallel_for names the worker that runs a matrix, any of [0, workers),
  // whatever the count (a slot per matrix would be overrun by worker indices ≥ count).
  (void)count;
  return Slot<T>::bytes(n, k) * std::size_t(workers);
}

template <class T>
void cholupdate_cpu(ThreadPool& pool, Workspace& workspace, Batch<T> l, Batch<const T> v, Sign sign,
                    std::span<int> info) {
  using R = real_t<T>;
  const int n = static_cast<int>(l.rows);
  const int k = static_cast<int>(v.cols);
  if (n == 0 || k == 0) {
    std::fill_n(info.begin(), l.count, 0);
    return;
  }
  const R sigma = sign == Sign::update ? R(1) : R(-1);
  const std::size_t slot_bytes = Slot<T>::bytes(n, k);
  // Fewer matrices than workers: one matrix at a time, its rows split across the pool.
  const bool one_at_a_time = l.count < static_cast<std::int64_t>(pool.size()) && n >= 4096;
  // Scratch is indexed by the worker that runs a matrix, which may be any of the pool's workers
  // even when there are fewer matrices than workers.
  const unsigned slots = one_at_a_time ? 1u : pool.size();
  auto* scratch = static_cast<std::byte*>(workspace.acquire(slot_bytes * slots));

  auto run = [&](std::int64_t b, unsigned worker, ThreadPool* rows) {
    T* matrix = l.matrix(b);
    const T* update = v.matrix(b);
    int status = check_input(matrix, l.ld, update, v.ld, n, k);
    if (status == 0) {
      const Slot<T> slot = Slot<T>::carve(scratch + slot_bytes * worker, n, k);
      if (sign == Sign::downdate) status = sweep(rows, slot, matrix, l.ld, update, v.ld, n, k, sigma, false);
      if (status == 0) status = sweep(rows, slot, matrix, l.ld, update, v.ld, n, k, sigma, true);
    }
    info[static_cast<std::size_t>(b)] = status;
  };
  if (one_at_a_time) {
    for (std::int64_t b = 0; b < l.count; ++b) run(b, 0, &pool);
  } else {
    pool.parallel_for(static_cast<std::size_t>(l.count),
                      [&](std::size_t b, unsigned worker) { run(static_cast<std::int64_t>(b), worker, nullptr); });
  }
}

#define COVFLOW_CHOLUPDATE_CPU(T)                                                                            \
  template std::size_t cholupdate_cpu_workspace<T>(unsigned, std::int64_t, std::int64_t, std::int64_t);     \
  template void cholupdate_cpu<T>(ThreadPool&, Workspace&, Batch<T>, Batch<const T>, Sign, std::span<int>);
COVFLOW_CHOLUPDATE_CPU(f32)
COVFLOW_CHOLUPDATE_CPU(f64)
COVFLOW_CHOLUPDATE_CPU(cf32)
COVFLOW_CHOLUPDATE_CPU(cf64)
#undef COVFLOW_CHOLUPDATE_CPU

}  // namespace covflow::linalg::detail

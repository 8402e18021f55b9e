// gesvj on the CPU: LAPACK's one-sided Jacobi SVD ?gesvj (Z. Drmač and K. Veselić, "New fast and
// accurate Jacobi SVD algorithm I", SIAM J. Matrix Anal. Appl. 2008) per matrix across the thread
// pool, each worker with its own slice of the Exec's host workspace.
//
// ?gesvj needs m ≥ n. For m < n it runs on Aᴴ, copied into the worker's scratch: Aᴴ = Ũ·Σ·Ṽᴴ gives
// U = Ṽ (returned by ?gesvj in its V argument, written straight into the caller's u) and V = Ũ
// (left in the scratch copy, copied to the caller's v). For m ≥ n it runs on the caller's a in
// place, V straight into the caller's v, and U copied from a to u.
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <string>
#include <type_traits>

#include "../common/blas.hpp"
#include "../common/cpu_helpers.hpp"
#include "gesvj_impl.hpp"

namespace covflow::linalg::detail {
namespace {

// ?gesvj's fixed sweep limit (the Fortran parameter NSWEEP); it has no argument for another.
constexpr int lapack_sweep_limit = 30;

// Per-worker scratch: ?gesvj's work (and rwork for complex T), the column norms of its result
// and, for m < n, Aᴴ.
struct Layout {
  int lwork = 6, lrwork = 1;
  std::size_t work_bytes = 0, rwork_bytes = 0, norms_bytes = 0, transpose_bytes = 0;
  std::size_t per_worker() const { return work_bytes + rwork_bytes + norms_bytes + transpose_bytes; }
};

template <class T>
Layout layout(std::int64_t m, std::int64_t n) {
  using R = real_t<T>;
  const std::int64_t rows = std::max(m, n), cols = std::min(m, n);
  Layout l;
  // The sizes LAPACK documents: lwork ≥ max(6, m + n) (complex: ≥ m + n), lrwork ≥ max(6, n).
  l.lwork = static_cast<int>(std::max<std::int64_t>(6, rows + cols));
  l.lrwork = is_complex_v<T> ? static_cast<int>(std::max<std::int64_t>(6, cols)) : 1;
  l.work_bytes = align_up(sizeof(T) * std::size_t(l.lwork));
  l.rwork_bytes = align_up(sizeof(R) * std::size_t(l.lrwork));
  l.norms_bytes = align_up(sizeof(double) * std::size_t(cols));
  l.transpose_bytes = m < n ? align_up(sizeof(T) * std::size_t(m) * std::size_t(n)) : 0;
  return l;
}

template <class T>
T conj_of(const T& x) {
  if constexpr (is_complex_v<T>) return std::conj(x);
  else return x;
}

template <class T>
void copy_columns(const T* from, std::int64_t ld_from, T* to, std::int64_t ld_to, int rows, int cols) {
  for (int j = 0; j < cols; ++j) std::copy_n(from + j * ld_from, rows, to + j * ld_to);
}

template <class T>
void fill_nan(T* a, std::int64_t ld, int rows, int cols) {
  const T nan = T(std::numeric_limits<real_t<T>>::quiet_NaN());
  for (int j = 0; j < cols; ++j) std::fill_n(a + j * ld, rows, nan);
}

// ?gesvj normalises only the columns of U whose singular value is above the underflow threshold
// (it returns their count); the others come back as they were left — zero for an exactly zero
// singular value. Replace each by a unit vector orthogonal to the columns before it, so that U has
// orthonormal columns as gesvj promises: the column itself if most of it survives
// orthogonalisation, else the unit vector e_i with the most left outside the span of the columns
// before it (at least 1/rows of it is), by classical Gram–Schmidt applied twice.
template <class T>
void complete_orthonormal(T* u, std::int64_t ld, int rows, int first, int cols) {
  using R = real_t<T>;
  auto norm = [&](const T* x) {
    R sum = 0;
    for (int i = 0; i < rows; ++i) sum += std::norm(std::complex<R>(x[i]));
    return std::sqrt(sum);
  };
  auto orthogonalise = [&](T* column, int p) {
    for (int pass = 0; pass < 2; ++pass)
      for (int q = 0; q < p; ++q) {
        const T* other = u + q * ld;
        T dot = T(0);
        for (int i = 0; i < rows; ++i) dot += conj_of(other[i]) * column[i];
        for (int i = 0; i < rows; ++i) column[i] -= dot * other[i];
      }
    return norm(column);
  };
  for (int p = first; p < cols; ++p) {
    T* column = u + p * ld;
    const R before = norm(column);
    if (before > 0 && std::isfinite(before)) {
      const R after = orthogonalise(column, p);
      if (after >= R(0.5) * before) {
        for (int i = 0; i < rows; ++i) column[i] /= after;
        continue;
      }
    }
    int best = 0;
    R best_left = -1;
    for (int i = 0; i < rows; ++i) {
      R inside = 0;
      for (int q = 0; q < p; ++q) inside += std::norm(std::complex<R>(u[i + q * ld]));
      if (R(1) - inside > best_left) {
        best_left = R(1) - inside;
        best = i;
      }
    }
    std::fill_n(column, rows, T(0));
    column[best] = T(1);
    const R after = orthogonalise(column, p);
    for (int i = 0; i < rows; ++i) column[i] /= after;
  }
}

// max over pairs of columns of |a_iᴴa_j| / (‖a_i‖·‖a_j‖), zero columns left out, accumulated in
// double. ?gesvj's own statistic (work(5)) is the largest |cos| met during its last sweep, before
// that sweep's rotations; on converged matrices it has been seen far above the threshold that
// the final columns meet, so the final value is measured here.
template <class T>
double final_off(const T* a, std::int64_t ld, int rows, int cols, double* norms) {
  using W = std::conditional_t<is_complex_v<T>, std::complex<double>, double>;
  for (int j = 0; j < cols; ++j) {
    double sum = 0;
    for (int i = 0; i < rows; ++i) sum += std::norm(W(a[i + j * ld]));
    norms[j] = std::sqrt(sum);
  }
  double off = 0;
  for (int j = 0; j < cols; ++j)
    for (int p = 0; p < j; ++p) {
      if (norms[p] == 0 || norms[j] == 0) continue;
      W dot = W(0);
      for (int i = 0; i < rows; ++i) dot += conj_of(W(a[i + p * ld])) * W(a[i + j * ld]);
      off = std::max(off, std::abs(dot) / (norms[p] * norms[j]));
    }
  return off;
}

}  // namespace

template <class T>
std::size_t gesvj_cpu_workspace(unsigned workers, std::int64_t m, std::int64_t n, const SvdOptions&) {
  return layout<T>(m, n).per_worker() * workers;
}

template <class T>
void gesvj_cpu(ThreadPool& pool, Workspace& workspace, Batch<T> a, std::span<real_t<T>> s, Batch<T> u, Batch<T> v,
               std::span<SvdInfo> info, const SvdOptions& options) {
  using R = real_t<T>;
  const int m = static_cast<int>(a.rows), n = static_cast<int>(a.cols);
  const int k = std::min(m, n);
  const bool wide = m < n;
  const int rows = wide ? n : m;  // of the matrix ?gesvj sees: A, or Aᴴ
  const Layout sizes = layout<T>(m, n);
  const std::size_t per_worker = sizes.per_worker();
  auto* scratch = static_cast<std::byte*>(workspace.acquire(per_worker * pool.size()));

  // What ?gesvj must compute on the matrix it sees: its U is our U (or V, for m < n), its V ours.
  const bool want_left = wide ? options.v : options.u;
  const bool want_right = wide ? options.u : options.v;
  const char jobu = want_left ? 'U' : 'N';
  const char jobv = want_right ? 'V' : 'N';

  pool.parallel_for(static_cast<std::size_t>(a.count), [&](std::size_t index, unsigned worker) {
    const auto b = static_cast<std::int64_t>(index);
    const T* matrix = a.matrix(b);
    R* values = s.data() + b * k;
    SvdInfo& result = info[index];
    if (!matrix_is_finite(matrix, a.ld, m, n)) {
      std::fill_n(values, k, std::numeric_limits<R>::quiet_NaN());
      if (options.u) fill_nan(u.matrix(b), u.ld, m, k);
      if (options.v) fill_nan(v.matrix(b), v.ld, n, k);
      result = SvdInfo{status::non_finite_input, 0, std::numeric_limits<double>::quiet_NaN()};
      return;
    }

    std::byte* base = scratch + per_worker * worker;
    auto* work = reinterpret_cast<T*>(base);
    auto* rwork = reinterpret_cast<R*>(base + sizes.work_bytes);
    T* target = a.matrix(b);  // the matrix ?gesvj works on
    std::int64_t ld_target = a.ld;
    if (wide) {
      target = reinterpret_cast<T*>(base + sizes.work_bytes + sizes.rwork_bytes + sizes.norms_bytes);
      ld_target = n;
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) target[j + std::int64_t(i) * n] = conj_of(matrix[i + j * a.ld]);
    }
    T unused_v{};
    T* right = &unused_v;
    int ld_right = 1;
    if (want_right) {
      const Batch<T>& out = wide ? u : v;
      right = out.matrix(b);
      ld_right = static_cast<int>(out.ld);
    }

    int lapack_info = 0;
    blas::gesvj('G', jobu, jobv, rows, k, target, static_cast<int>(ld_target), values, 0, right, ld_right, work,
                sizes.lwork, rwork, sizes.lrwork, &lapack_info);
    // ?gesvj's statistics — [0] SCALE (σ = SCALE·SVA), [2] how many σ are above the underflow
    // threshold (the normalised columns of U), [3] sweeps — in work (real T) or rwork (complex T).
    const R* stats = is_complex_v<T> ? rwork : reinterpret_cast<const R*>(work);
    const R scale = stats[0];
    if (scale != R(1))
      for (int i = 0; i < k; ++i) values[i] *= scale;

    // Columns whose singular value is at the rounding level of A (≤ rows·ε·σ₁; ?gesvj sorts them
    // last) are numerically zero: their directions are rounding noise, which no rotation makes
    // orthogonal to the rest. ?gesvj keeps rotating them, and on an exactly singular square matrix
    // (a zero row, say) reports no convergence after its 30 sweeps although the other columns
    // converged long before. So convergence is judged here on the columns above that level, and
    // the columns of U below it are replaced by an orthonormal completion. (The CUDA path judges
    // during its sweeps, with the largest column norm for σ₁; svd.hpp sets the two side by side.)
    auto* norms = reinterpret_cast<double*>(base + sizes.work_bytes + sizes.rwork_bytes);
    const double tolerance = double(rows) * std::numeric_limits<R>::epsilon();
    int kept = k;
    auto measure = [&] {
      const double zero_level = tolerance * double(values[0]);
      kept = k;
      while (kept > 0 && double(values[kept - 1]) <= zero_level) --kept;
      result.off = final_off(target, ld_target, rows, kept, norms);
    };
    measure();
    int sweeps = static_cast<int>(std::lround(stats[3]));
    // ?gesvj can also report convergence (info 0) on columns far from orthogonal: cgesvj did on a
    // 64×64 matrix with 63 equal singular values (LAPACK's latms mode 1), stopping after 2 sweeps
    // with the measured off 0.8 and σ₁ off by 6 %. The measured off decides: above the tolerance,
    // the columns — each rescaled to its singular value, so that they are B = A·V again — go
    // through ?gesvj once more, its rotations applied to the V already made (jobv 'A'), up to
    // three times.
    for (int restart = 0; restart < 3 && lapack_info == 0 && result.off > tolerance; ++restart) {
      for (int j = 0; j < k; ++j) {
        T* column = target + std::int64_t(j) * ld_target;
        double norm = 0;
        for (int i = 0; i < rows; ++i) norm += std::norm(std::complex<double>(column[i]));
        norm = std::sqrt(norm);
        const R factor = norm > 0 ? R(double(values[j]) / norm) : R(0);
        for (int i = 0; i < rows; ++i) column[i] *= factor;
      }
      blas::gesvj('G', jobu, want_right ? 'A' : 'N', rows, k, target, static_cast<int>(ld_target), values,
                  want_right ? k : 0, right, ld_right, work, sizes.lwork, rwork, sizes.lrwork, &lapack_info);
      if (stats[0] != R(1))
        for (int i = 0; i < k; ++i) values[i] *= stats[0];
      sweeps += static_cast<int>(std::lround(stats[3]));
      measure();
    }
    const bool converged = lapack_info >= 0 && result.off <= tolerance;
    if (want_left) {
      const int normalised = std::clamp(static_cast<int>(std::lround(stats[2])), 0, k);
      complete_orthonormal(target, ld_target, rows, lapack_info > 0 && converged ? std::min(normalised, kept) : normalised,
                           k);
      const Batch<T>& out = wide ? v : u;
      copy_columns(target, ld_target, out.matrix(b), out.ld, rows, k);
    }

    result.sweeps = std::min(sweeps, lapack_sweep_limit);
    if (lapack_info < 0)  // an argument error of ours
      result.status = lapack_info;
    else if (!converged)  // not converged in LAPACK's 30 sweeps
      result.status = status::no_convergence;
    else
      result.status = options.max_sweeps > 0 && result.sweeps > options.max_sweeps ? status::no_convergence
                                                                                    : status::ok;
  });
}

#define COVFLOW_GESVJ_CPU(T)                                                                                  \
  template std::size_t gesvj_cpu_workspace<T>(unsigned, std::int64_t, std::int64_t, const SvdOptions&);      \
  template void gesvj_cpu<T>(ThreadPool&, Workspace&, Batch<T>, std::span<real_t<T>>, Batch<T>, Batch<T>,   \
                             std::span<SvdInfo>, const SvdOptions&);
COVFLOW_GESVJ_CPU(f32)
COVFLOW_GESVJ_CPU(f64)
COVFLOW_GESVJ_CPU(cf32)
COVFLOW_GESVJ_CPU(cf64)
#undef COVFLOW_GESVJ_CPU

}  // namespace covflow::linalg::detail

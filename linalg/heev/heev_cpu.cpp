// heev on the CPU: LAPACK ?heevd/?syevd (divide and conquer) per matrix across the thread pool,
// each worker with its own slice of the Exec's host workspace.
#include <cmath>
#include <limits>

#include "../common/blas.hpp"
#include "../common/cpu_helpers.hpp"
#include "heev_impl.hpp"

namespace covflow::linalg::detail {
namespace {

struct LapackSizes {
  int lwork = 1, lrwork = 1, liwork = 1;
  std::size_t bytes_per_worker() const;
};

template <class T>
LapackSizes lapack_sizes(int n, bool vectors) {
  using R = real_t<T>;
  LapackSizes sizes;
  if (n <= 1) return sizes;
  T work_query{};
  R rwork_query{};
  int iwork_query = 0, info = 0;
  blas::heevd(vectors ? 'V' : 'N', 'L', n, static_cast<T*>(nullptr), n, static_cast<R*>(nullptr), &work_query, -1,
              &rwork_query, -1, &iwork_query, -1, &info);
  sizes.lwork = static_cast<int>(std::real(work_query));
  sizes.lrwork = is_complex_v<T> ? static_cast<int>(rwork_query) : 1;
  sizes.liwork = iwork_query;
  return sizes;
}

template <class T>
std::size_t worker_bytes(const LapackSizes& s) {
  return align_up(sizeof(T) * std::size_t(s.lwork)) + align_up(sizeof(real_t<T>) * std::size_t(s.lrwork)) +
         align_up(sizeof(int) * std::size_t(s.liwork));
}

template <class T>
bool triangle_is_finite(const T* a, std::int64_t ld, int n, Uplo uplo) {
  for (int j = 0; j < n; ++j) {
    const int first = uplo == Uplo::lower ? j : 0;
    const int last = uplo == Uplo::lower ? n : j + 1;
    for (int i = first; i < last; ++i) {
      const T v = a[i + j * ld];
      if constexpr (is_complex_v<T>) {
        if (!std::isfinite(v.real()) || !std::isfinite(v.imag())) return false;
      } else if (!std::isfinite(v)) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

template <class T>
std::size_t heev_cpu_workspace(unsigned workers, std::int64_t n, const HeevOptions& options) {
  return worker_bytes<T>(lapack_sizes<T>(static_cast<int>(n), options.vectors)) * workers;
}

template <class T>
void heev_cpu(ThreadPool& pool, Workspace& workspace, Batch<T> a, std::span<real_t<T>> w, std::span<int> info,
              const HeevOptions& options) {
  using R = real_t<T>;
  const int n = static_cast<int>(a.rows);
  const LapackSizes sizes = lapack_sizes<T>(n, options.vectors);
  const std::size_t per_worker = worker_bytes<T>(sizes);
  auto* scratch = static_cast<std::byte*>(workspace.acquire(per_worker * pool.size()));
  const char jobz = options.vectors ? 'V' : 'N';
  const char uplo = static_cast<char>(options.uplo);

  pool.parallel_for(static_cast<std::size_t>(a.count), [&](std::size_t index, unsigned worker) {
    const auto b = static_cast<std::int64_t>(index);
    T* matrix = a.matrix(b);
    R* values = w.data() + b * n;
    if (!triangle_is_finite(matrix, a.ld, n, options.uplo)) {
      info[index] = status::non_finite_input;
      for (int k = 0; k < n; ++k) values[k] = std::numeric_limits<R>::quiet_NaN();
      if (options.vectors)
        for (int j = 0; j < n; ++j)
          for (int i = 0; i < n; ++i) matrix[i + j * a.ld] = T(std::numeric_limits<R>::quiet_NaN());
      return;
    }
    std::byte* base = scratch + per_worker * worker;
    auto* work = reinterpret_cast<T*>(base);
    auto* rwork = reinterpret_cast<R*>(base + align_up(sizeof(T) * std::size_t(sizes.lwork)));
    auto* iwork = reinterpret_cast<int*>(base + align_up(sizeof(T) * std::size_t(sizes.lwork)) +
                                         align_up(sizeof(R) * std::size_t(sizes.lrwork)));
    int lapack_info = 0;
    blas::heevd(jobz, uplo, n, matrix, static_cast<int>(a.ld), values, work, sizes.lwork, rwork, sizes.lrwork, iwork,
                sizes.liwork, &lapack_info);
    // lapack_info < 0 would be an argument error of ours; > 0 is LAPACK's "failed to converge".
    info[index] = lapack_info == 0 ? status::ok : lapack_info > 0 ? status::no_convergence : lapack_info;
  });
}

#define COVFLOW_HEEV_CPU(T)                                                                                   \
  template std::size_t heev_cpu_workspace<T>(unsigned, std::int64_t, const HeevOptions&);                    \
  template void heev_cpu<T>(ThreadPool&, Workspace&, Batch<T>, std::span<real_t<T>>, std::span<int>, \
                            const HeevOptions&);
COVFLOW_HEEV_CPU(f32)
COVFLOW_HEEV_CPU(f64)
COVFLOW_HEEV_CPU(cf32)
COVFLOW_HEEV_CPU(cf64)
#undef COVFLOW_HEEV_CPU

}  // namespace covflow::linalg::detail

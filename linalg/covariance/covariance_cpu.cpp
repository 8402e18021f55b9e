// sample_covariance on the CPU: BLAS herk per matrix, one matrix per pool task.
#include "../common/blas.hpp"
#include "covariance_impl.hpp"

namespace covflow::linalg::detail {

template <class T>
void sample_covariance_cpu(ThreadPool& pool, Batch<const T> x, Batch<T> r, double loading) {
  using R = real_t<T>;
  const int n = static_cast<int>(x.rows);
  const int k = static_cast<int>(x.cols);
  const R scale = R(1) / static_cast<R>(k);
  pool.parallel_for(static_cast<std::size_t>(x.count), [&](std::size_t b, unsigned) {
    const auto batch = static_cast<std::int64_t>(b);
    T* c = r.matrix(batch);
    blas::herk('L', 'N', n, k, scale, x.matrix(batch), static_cast<int>(x.ld), R(0), c,
               static_cast<int>(r.ld));
    // herk leaves the upper triangle alone and the diagonal's imaginary part zero.
    for (int j = 0; j < n; ++j) {
      c[j + j * r.ld] = T(c[j + j * r.ld].real() + static_cast<R>(loading), R(0));
      for (int i = j + 1; i < n; ++i) c[j + i * r.ld] = std::conj(c[i + j * r.ld]);
    }
  });
}

template void sample_covariance_cpu<cf32>(ThreadPool&, Batch<const cf32>, Batch<cf32>, double);
template void sample_covariance_cpu<cf64>(ThreadPool&, Batch<const cf64>, Batch<cf64>, double);

}  // namespace covflow::linalg::detail

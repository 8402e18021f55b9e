// Reference for sample_covariance tests: a naive triple loop in long double, and the check that
// compares a result against it with the textbook dot-product error bound.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <complex>
#include <vector>

#include "covflow/linalg/batch.hpp"
#include "test_support.hpp"

namespace covflow::test {

// Batch of host matrices with the layout of `shape` and random content.
struct CovarianceCase {
  int channels, snapshots, count;
  int x_pad = 0, r_pad = 0;   // extra rows in ld
  int x_gap = 0, r_gap = 0;   // extra elements between matrices
};

inline std::string describe(const CovarianceCase& c) {
  return "N=" + std::to_string(c.channels) + " K=" + std::to_string(c.snapshots) + " batch=" +
         std::to_string(c.count) + " ldx+" + std::to_string(c.x_pad) + " ldr+" + std::to_string(c.r_pad);
}

// Elements to allocate for a layout: every matrix's full stride, so padding can be inspected.
template <class T>
std::size_t allocation(const linalg::Batch<T>& layout) {
  return static_cast<std::size_t>(layout.count * std::max(layout.stride, layout.ld * layout.cols));
}

template <class T>
linalg::Batch<T> x_layout(const CovarianceCase& c, T* data) {
  const std::int64_t ld = c.channels + c.x_pad;
  return {data, c.channels, c.snapshots, ld, ld * c.snapshots + c.x_gap, c.count};
}
template <class T>
linalg::Batch<T> r_layout(const CovarianceCase& c, T* data) {
  const std::int64_t ld = c.channels + c.r_pad;
  return {data, c.channels, c.channels, ld, ld * c.channels + c.r_gap, c.count};
}

// Snapshots whose channels have graded powers (1e-3 .. 1e3 in amplitude²), like an array with a
// strong jammer on some elements: exercises scaling as well as plain N(0,1) data.
template <class T>
std::vector<T> snapshot_data(const CovarianceCase& c, std::size_t elements, std::mt19937_64& rng, bool graded) {
  std::vector<T> x = random_normal<T>(elements, rng);
  if (graded) {
    const std::int64_t ld = c.channels + c.x_pad;
    for (std::size_t e = 0; e < elements; ++e) {
      const auto row = static_cast<int>((e % static_cast<std::size_t>(ld * c.snapshots + c.x_gap)) % ld);
      const double exponent = c.channels > 1 ? -3.0 + 6.0 * row / (c.channels - 1) : 0.0;
      x[e] *= static_cast<linalg::real_t<T>>(std::pow(10.0, exponent / 2));
    }
  }
  return x;
}

// Compares r (computed) with the naive long-double covariance of x:
//   ‖R − R_ref‖_F ≤ 4 (K + 2) ε ‖ |X| |X|ᴴ ‖_F / K + 4 ε |δ| √N       (per matrix)
// — the standard bound for K-term dot products, plus the scaling and the loading. Also checks
// that R is exactly Hermitian with a real diagonal, and that nothing outside R was written.
template <class T>
void expect_covariance(const linalg::Batch<const T>& x, const linalg::Batch<const T>& r, double loading,
                       const std::string& what) {
  using LD = long double;
  const int n = static_cast<int>(x.rows), k = static_cast<int>(x.cols);
  const double tolerance_units = 4.0 * (k + 2);
  for (std::int64_t b = 0; b < x.count; ++b) {
    LD err2 = 0, bound2 = 0;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) {
        std::complex<LD> sum = 0;
        LD abs_sum = 0;
        for (int s = 0; s < k; ++s) {
          const std::complex<LD> xi(x.at(b, i, s).real(), x.at(b, i, s).imag());
          const std::complex<LD> xj(x.at(b, j, s).real(), x.at(b, j, s).imag());
          sum += xi * std::conj(xj);
          abs_sum += std::abs(xi) * std::abs(xj);
        }
        sum /= LD(k);
        if (i == j) sum += LD(loading);
        const T got = r.at(b, i, j);
        ASSERT_TRUE(std::isfinite(static_cast<double>(got.real())) && std::isfinite(static_cast<double>(got.imag())))
            << what << ": matrix " << b << " element (" << i << "," << j << ") not written or not finite";
        const std::complex<LD> diff = std::complex<LD>(got.real(), got.imag()) - sum;
        err2 += std::norm(diff);
        bound2 += (abs_sum / k) * (abs_sum / k);
        if (i == j) {
          ASSERT_EQ(got.imag(), 0) << what << ": matrix " << b << " diagonal " << i << " not real";
        } else {
          ASSERT_EQ(got, std::conj(r.at(b, j, i))) << what << ": matrix " << b << " not exactly Hermitian at ("
                                                    << i << "," << j << ")";
        }
      }
    const double error = std::sqrt(static_cast<double>(err2));
    const double limit = tolerance_units * eps<T>() * std::sqrt(static_cast<double>(bound2)) +
                         4.0 * eps<T>() * std::abs(loading) * std::sqrt(double(n));
    EXPECT_LE(error, limit) << what << ": matrix " << b << " error " << error << " exceeds "
                            << tolerance_units << "·ε·‖|X||X|ᴴ‖/K = " << limit;
  }
}

inline const std::vector<CovarianceCase>& covariance_cases() {
  static const std::vector<CovarianceCase> cases = {
      {1, 1, 1},     {1, 7, 3},      {2, 1, 1},       {3, 5, 7},       {16, 64, 1},
      {16, 64, 180}, {17, 31, 7},    {33, 200, 5},    {64, 128, 3},    {100, 37, 2},
      {5, 9, 4, 3, 2, 7, 11},        {40, 70, 3, 1, 5, 0, 3},  // padded ld and gaps between matrices
  };
  return cases;
}

}  // namespace covflow::test

// What the H² test files share: element conversions, Frobenius norms of host arrays, the dense
// expansion of an H2 (NaN-poisoned first, so an unwritten element fails), and the point sets and
// covariance inputs they draw.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "covflow/linalg/h2.hpp"
#include "test_support.hpp"

namespace covflow::linalg::h2_test {

using cd = std::complex<double>;

// The typed suites' element types, named f32 … cf64 in the test names.
struct ElementName {
  template <class T>
  static std::string GetName(int) {
    return std::string(name(element_type_of<T>()));
  }
};
using ElementTypes = ::testing::Types<f32, f64, cf32, cf64>;

template <class T>
T from_cd(const cd& v) {
  if constexpr (is_complex_v<T>) return T(static_cast<real_t<T>>(v.real()), static_cast<real_t<T>>(v.imag()));
  else return static_cast<T>(v.real());
}

// The larger of a running worst and a new value, NaN winning: std::max(worst, NaN) keeps `worst`,
// which would let a NaN result pass a bound on the worst.
inline double worse(double worst, double value) { return std::isnan(value) || value > worst ? value : worst; }

// ‖a − b‖_F and ‖a‖_F of two arrays of the same length, in double.
template <class A, class B>
double diff_norm(const std::vector<A>& a, const std::vector<B>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += std::norm(cd(a[i]) - cd(b[i]));
  return std::sqrt(sum);
}
template <class A>
double norm(const std::vector<A>& a) {
  double sum = 0;
  for (const auto& v : a) sum += std::norm(cd(v));
  return std::sqrt(sum);
}

// The n × n matrix A_H (h2_expand on a CPU Exec), column-major.
template <class T>
std::vector<T> expand(Exec& cpu, const H2<T>& a) {
  const std::int64_t n = a.tree.n;
  std::vector<T> out(static_cast<std::size_t>(n * n), test::poison<T>());
  h2_expand(cpu, a, Batch<T>::packed(out.data(), n, n, 1));
  return out;
}

// n points uniform in [0, extent]^dim, point i's coordinates at i·dim.
inline std::vector<double> uniform_points(std::int64_t n, int dim, double extent, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, extent);
  std::vector<double> p(static_cast<std::size_t>(n * dim));
  for (auto& v : p) v = u(rng);
  return p;
}

// A planar array of `side` × `side` elements at half a wavelength (λ = 1), each moved at random
// by up to 0.1 λ.
inline std::vector<double> planar_array(int side, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> jitter(-0.1, 0.1);
  std::vector<double> p;
  for (int i = 0; i < side; ++i)
    for (int j = 0; j < side; ++j) {
      p.push_back(0.5 * i + jitter(rng));
      p.push_back(0.5 * j + jitter(rng));
    }
  return p;
}

// X·Xᴴ/K from K snapshots on the 2-D points p: a target at a random azimuth in [−1.2, 1.2] rad for
// each of `target_powers`, clutter of total power 20 from `clutter_directions` directions evenly
// over a 0.6 rad sector about a random centre, unit noise; steering exp(j·2π·(x·sin θ + y·cos θ)).
inline std::vector<cd> sample_covariance(const std::vector<double>& p, int snapshots,
                                         const std::vector<double>& target_powers, int clutter_directions,
                                         std::mt19937_64& rng) {
  const std::size_t n = p.size() / 2;
  std::normal_distribution<double> normal(0.0, std::sqrt(0.5));
  std::uniform_real_distribution<double> angle(-1.2, 1.2);
  std::vector<double> theta, power;
  for (double pw : target_powers) theta.push_back(angle(rng)), power.push_back(pw);
  const double centre = angle(rng);
  for (int c = 0; c < clutter_directions; ++c)
    theta.push_back(centre - 0.3 + 0.6 * (c + 0.5) / clutter_directions), power.push_back(20.0 / clutter_directions);
  std::vector<cd> steering(n * theta.size());
  for (std::size_t k = 0; k < theta.size(); ++k)
    for (std::size_t i = 0; i < n; ++i)
      steering[i + k * n] = std::exp(cd(0, 2 * std::numbers::pi * (p[2 * i] * std::sin(theta[k]) + p[2 * i + 1] * std::cos(theta[k]))));
  std::vector<cd> a(n * n, 0.0), x(n);
  for (int s = 0; s < snapshots; ++s) {
    for (std::size_t i = 0; i < n; ++i) x[i] = cd(normal(rng), normal(rng));
    for (std::size_t k = 0; k < theta.size(); ++k) {
      const cd amp = std::sqrt(power[k]) * cd(normal(rng), normal(rng));
      for (std::size_t i = 0; i < n; ++i) x[i] += amp * steering[i + k * n];
    }
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = j; i < n; ++i) a[i + j * n] += x[i] * std::conj(x[j]) / double(snapshots);
  }
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t i = 0; i < j; ++i) a[i + j * n] = std::conj(a[j + i * n]);
  return a;
}

}  // namespace covflow::linalg::h2_test

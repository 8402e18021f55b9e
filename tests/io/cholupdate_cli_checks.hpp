// Shared by the `covflow linalg cholupdate` tests (CPU and GPU): running the command's function on
// NumPy files, factors and updates laid out as numpy.linalg.cholesky and numpy arrays have them,
// and the reconstruction error of a result.
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/linalg_cli.hpp"
#include "covflow/io/npy.hpp"
#include "covflow/linalg/types.hpp"
#include "npy_test_support.hpp"
#include "test_support.hpp"

namespace covflow::test {

struct CholRun {
  int code;
  std::string err;
  std::string out;
};

inline CholRun cholupdate(const ScratchDir& dir, const io::NpyArray& l, const io::NpyArray& v, char sign = '+',
                          cli::DeviceChoice device = cli::DeviceChoice::cpu) {
  io::write_npy(dir / "l.npy", l);
  io::write_npy(dir / "v.npy", v);
  cli::CholupdateRequest r;
  r.factor = dir / "l.npy";
  r.update = dir / "v.npy";
  r.output = dir / "l2.npy";
  r.sign = sign;
  r.device = device;
  std::ostringstream out, err;
  const int code = cli::run_cholupdate(r, out, err);
  return {code, err.str(), out.str()};
}

// count row-major n×n lower factors as numpy.linalg.cholesky returns them (zeros above the
// diagonal, real positive diagonal), well conditioned, and row-major n×k updates.
template <class T>
std::vector<T> numpy_factors(std::size_t count, std::size_t n, std::mt19937_64& rng) {
  using R = linalg::real_t<T>;
  std::normal_distribution<double> normal(0.0, 0.2 / std::sqrt(double(n)));
  std::uniform_real_distribution<double> diagonal(1.0, 2.0);
  std::vector<T> l(count * n * n, T(0));
  for (std::size_t b = 0; b < count; ++b)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j <= i; ++j) {
        T x;
        if constexpr (linalg::is_complex_v<T>) x = T(R(normal(rng)), R(normal(rng)));
        else x = T(normal(rng));
        l[b * n * n + i * n + j] = i == j ? T(R(diagonal(rng))) : x;
      }
  return l;
}
template <class T>
std::vector<T> numpy_updates(std::size_t count, std::size_t n, std::size_t k, std::mt19937_64& rng) {
  using R = linalg::real_t<T>;
  std::normal_distribution<double> normal(0.0, 1.0 / std::sqrt(double(std::max(n, k))));
  std::vector<T> v(count * n * k);
  for (auto& x : v) {
    if constexpr (linalg::is_complex_v<T>) x = T(R(normal(rng)), R(normal(rng)));
    else x = T(normal(rng));
  }
  return v;
}

// ‖L2·L2ᴴ − (L·Lᴴ ± V·Vᴴ)‖_F / ‖L·Lᴴ ± V·Vᴴ‖_F for matrix b of row-major stacks, in double.
template <class T>
double reconstruction(const std::vector<T>& l2, const std::vector<T>& l, const std::vector<T>& v, std::size_t b,
                      std::size_t n, std::size_t k, double sigma) {
  using C = std::complex<double>;
  auto at = [&](const std::vector<T>& m, std::size_t i, std::size_t j) { return C(m[b * n * n + i * n + j]); };
  double error = 0, norm = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      C computed = 0, target = 0;
      for (std::size_t q = 0; q < n; ++q) {
        computed += at(l2, i, q) * std::conj(at(l2, j, q));
        target += at(l, i, q) * std::conj(at(l, j, q));
      }
      for (std::size_t p = 0; p < k; ++p) target += sigma * C(v[b * n * k + i * k + p]) * std::conj(C(v[b * n * k + j * k + p]));
      error += std::norm(computed - target);
      norm += std::norm(target);
    }
  return std::sqrt(error / norm);
}

}  // namespace covflow::test

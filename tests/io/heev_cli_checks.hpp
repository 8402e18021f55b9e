// Shared by the `covflow linalg heev` tests (CPU and GPU): the matrix numpy.linalg.eigh sees in a
// row-major array, the residual and orthogonality checks, and running the command's function.
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
#include "covflow/linalg/types.hpp"
#include "npy_test_support.hpp"
#include "test_support.hpp"

namespace covflow::test {

template <class T> T conj_of(T v) {
  if constexpr (linalg::is_complex_v<T>) return std::conj(v);
  else return v;
}

// The Hermitian matrix numpy.linalg.eigh sees in row-major `m` (n × n at `offset`) for `uplo`:
// the named triangle, its mirror conjugated, the diagonal's imaginary part ignored. In double.
inline std::vector<std::complex<double>> effective_matrix(const auto& m, std::size_t offset, std::size_t n, char uplo) {
  std::vector<std::complex<double>> out(n * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      const bool in_triangle = uplo == 'L' ? i >= j : i <= j;
      const auto v = in_triangle ? m[offset + i * n + j] : conj_of(m[offset + j * n + i]);
      std::complex<double> z(v);
      out[i * n + j] = i == j ? std::complex<double>(z.real(), 0.0) : z;
    }
  return out;
}

inline double frobenius(const std::vector<std::complex<double>>& a) {
  double sum = 0;
  for (auto v : a) sum += std::norm(v);
  return std::sqrt(sum);
}

struct Quality {
  double residual = 0;       // ‖A V − V diag(w)‖_F / ‖A‖_F
  double orthogonality = 0;  // ‖Vᴴ V − I‖_F
  bool ascending = true;
};

// A (row-major, double) against w (n) and V (row-major, numpy's V[i, k]) of one matrix.
template <class T, class R>
Quality quality(const std::vector<std::complex<double>>& a, const std::vector<R>& w, std::size_t w_offset,
                const std::vector<T>& v, std::size_t v_offset, std::size_t n) {
  Quality q;
  double r2 = 0, o2 = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < n; ++k) {
      std::complex<double> av = 0, vhv = 0;
      for (std::size_t l = 0; l < n; ++l) {
        av += a[i * n + l] * std::complex<double>(v[v_offset + l * n + k]);
        vhv += std::conj(std::complex<double>(v[v_offset + l * n + i])) * std::complex<double>(v[v_offset + l * n + k]);
      }
      r2 += std::norm(av - std::complex<double>(v[v_offset + i * n + k]) * static_cast<double>(w[w_offset + k]));
      o2 += std::norm(vhv - (i == k ? 1.0 : 0.0));
    }
  q.residual = std::sqrt(r2) / std::max(frobenius(a), 1e-300);
  q.orthogonality = std::sqrt(o2);
  for (std::size_t k = 1; k < n; ++k) q.ascending = q.ascending && w[w_offset + k - 1] <= w[w_offset + k];
  return q;
}

struct CliRun {
  int code = -1;
  std::string out, err;
};

inline CliRun heev(const cli::HeevRequest& request) {
  std::ostringstream out, err;
  CliRun run;
  run.code = cli::run_heev(request, out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

inline cli::HeevRequest request_for(const ScratchDir& dir, char uplo = 'L', bool vectors = true) {
  cli::HeevRequest r;
  r.input = dir / "in.npy";
  r.values = dir / "w.npy";
  if (vectors) r.vectors = dir / "v.npy";
  r.device = cli::DeviceChoice::cpu;
  r.uplo = uplo;
  return r;
}

// A batch of row-major n × n matrices that are NOT Hermitian: each triangle is random on its own
// and the diagonal has an imaginary part, so reading the wrong triangle, or ignoring numpy's
// rule for the diagonal, gives a different matrix.
template <class T>
std::vector<T> unsymmetric_batch(std::size_t count, std::size_t n, std::mt19937_64& rng) {
  return random_normal<T>(count * n * n, rng);
}


}  // namespace covflow::test

// Shared by the `covflow linalg lu | cholesky | solve` tests (CPU and GPU): NumPy files in either
// element order, the int32 pivots file, the test matrices, the checks against the mathematical
// definitions (P·A = L·U with 0-based pivots applied as sequential swaps, A = L·Lᴴ, A·X = B), and
// running the commands' functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/linalg_cli.hpp"
#include "covflow/io/npy.hpp"
#include "covflow/linalg/types.hpp"
#include "npy_test_support.hpp"
#include "test_support.hpp"

namespace covflow::test::solve_cli {

using Z = std::complex<double>;

// ---- files -------------------------------------------------------------------------------------

// The numpy array whose C-order elements are `c_order`, stored in C or Fortran order.
template <class T>
io::NpyArray numpy_file(const std::vector<T>& c_order, const std::vector<std::uint64_t>& shape, bool fortran) {
  if (!fortran) return make_array(c_order, shape);
  std::vector<T> stored(c_order.size());
  std::vector<std::uint64_t> index(shape.size(), 0);
  for (std::size_t c = 0; c < c_order.size(); ++c) {
    std::uint64_t f = 0, scale = 1;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      f += index[d] * scale;
      scale *= shape[d];
    }
    stored[f] = c_order[c];
    for (std::size_t d = shape.size(); d-- > 0;) {  // the next C-order index: last dimension fastest
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return make_array(stored, shape, true);
}

// An int32 .npy file as numpy.save writes it (header compared byte for byte), its values.
inline std::vector<std::int32_t> read_int32(const std::filesystem::path& file, const std::vector<std::uint64_t>& shape) {
  std::string header = io::npy_header(io::NpyDtype::float32, shape, false);
  header.replace(header.find("'<f4'"), 5, "'<i4'");
  const std::string bytes = read_bytes(file);
  EXPECT_EQ(bytes.substr(0, header.size()), header) << file;
  std::uint64_t count = 1;
  for (std::uint64_t s : shape) count *= s;
  std::vector<std::int32_t> values(count);
  EXPECT_EQ(bytes.size(), header.size() + count * sizeof(std::int32_t)) << file;
  if (bytes.size() == header.size() + count * sizeof(std::int32_t) && count > 0)
    std::memcpy(values.data(), bytes.data() + header.size(), count * sizeof(std::int32_t));
  return values;
}

// ---- matrices ----------------------------------------------------------------------------------

// Row-major n × n matrix `index` of a C-order batch, in double.
template <class T>
std::vector<Z> matrix_of(const std::vector<T>& batch, std::size_t index, std::size_t rows, std::size_t cols) {
  std::vector<Z> out(rows * cols);
  for (std::size_t e = 0; e < rows * cols; ++e) out[e] = Z(batch[index * rows * cols + e]);
  return out;
}

inline double frobenius(const std::vector<Z>& a) {
  double sum = 0;
  for (const Z& v : a) sum += std::norm(v);
  return std::sqrt(sum);
}

inline std::vector<Z> product(const std::vector<Z>& a, const std::vector<Z>& b, std::size_t m, std::size_t l,
                              std::size_t n) {
  std::vector<Z> out(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t p = 0; p < l; ++p)
      for (std::size_t j = 0; j < n; ++j) out[i * n + j] += a[i * l + p] * b[p * n + j];
  return out;
}

template <class T>
T from_z(Z v) {
  if constexpr (linalg::is_complex_v<T>) return T(static_cast<linalg::real_t<T>>(v.real()), static_cast<linalg::real_t<T>>(v.imag()));
  else return static_cast<T>(v.real());
}

// `count` row-major n × n general matrices: random, then every third one graded (row i scaled by
// 10^(−4i/n)) and every third one near singular: its last row is the first one's with 10⁻⁶ of that
// row's largest entry added to the last element. (A relative 10⁻⁶ noise on every element could round
// away in single precision, leaving two equal rows and an exactly singular matrix.)
template <class T>
std::vector<T> general_matrices(std::size_t count, std::size_t n, std::mt19937_64& rng) {
  std::vector<T> a = random_normal<T>(count * n * n, rng);
  for (std::size_t b = 0; b < count; ++b) {
    T* m = a.data() + b * n * n;
    if (b % 3 == 1)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) m[i * n + j] *= static_cast<linalg::real_t<T>>(std::pow(10.0, -4.0 * i / n));
    if (b % 3 == 2 && n > 1) {
      double largest = 0;
      for (std::size_t j = 0; j < n; ++j) {
        m[(n - 1) * n + j] = m[j];
        largest = std::max(largest, double(std::abs(m[j])));
      }
      m[(n - 1) * n + n - 1] += static_cast<linalg::real_t<T>>(1e-6 * largest);
    }
  }
  return a;
}

// `count` row-major Hermitian positive definite matrices (X·Xᴴ/n + I, every other one graded
// D·(…)·D with D = diag(10^(−3i/n))) whose triangle opposite `uplo` ('L' or 'U') is overwritten
// with noise and whose diagonal gets an imaginary part: only the triangle `uplo` names, with the
// diagonal's real part, is the matrix. `effective` receives that matrix (row-major, double).
template <class T>
std::vector<T> positive_matrices(std::size_t count, std::size_t n, char uplo, std::mt19937_64& rng,
                                 std::vector<Z>& effective) {
  const std::vector<T> x = random_normal<T>(count * n * n, rng);
  const std::vector<T> noise = random_normal<T>(count * n * n, rng);
  std::vector<T> a(count * n * n);
  effective.assign(count * n * n, Z(0));
  for (std::size_t b = 0; b < count; ++b) {
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        Z sum = i == j ? Z(1) : Z(0);
        for (std::size_t p = 0; p < n; ++p)
          sum += Z(x[b * n * n + i * n + p]) * std::conj(Z(x[b * n * n + j * n + p])) / double(n);
        if (b % 2 == 1) sum *= std::pow(10.0, -3.0 * double(i + j) / double(n));
        if (i == j) sum = Z(sum.real(), 0.0);
        effective[b * n * n + i * n + j] = sum;
      }
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        const bool read = uplo == 'L' ? i >= j : i <= j;
        Z v = read ? effective[b * n * n + i * n + j] : Z(noise[b * n * n + i * n + j]) * 7.0;
        if (i == j) v += Z(0.0, 3.0);  // ignored: the diagonal's imaginary part is not read
        a[b * n * n + i * n + j] = from_z<T>(v);
      }
    // The stored values are what is decomposed: round the effective matrix as the file does.
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        const bool read = uplo == 'L' ? i >= j : i <= j;
        const std::size_t from = read ? i * n + j : j * n + i;
        Z v(a[b * n * n + from]);
        if (!read) v = std::conj(v);
        effective[b * n * n + i * n + j] = i == j ? Z(v.real(), 0.0) : v;
      }
  }
  return a;
}

// ---- checks ------------------------------------------------------------------------------------

// The largest |L[i, j]| partial pivoting allows: 1 for real T; for complex T, LAPACK (i?amax) picks
// the pivot of largest |Re| + |Im|, which bounds the modulus of a multiplier by √2. Plus rounding.
template <class T>
double largest_multiplier() {
  return (linalg::is_complex_v<T> ? std::sqrt(2.0) : 1.0) * (1.0 + 10.0 * eps<T>());
}

struct LuQuality {
  double backward = 0;         // ‖P·A − L·U‖_F / ‖|L|·|U|‖_F
  double largest_l = 0;        // max |L[i, j]|, i > j: at most 1 under partial pivoting
  bool pivots_in_range = true;  // i ≤ P[i] < n
};

// Matrix b of A (C order) against LU (C order, L unit below the diagonal and U on and above it) and
// P (0-based, row i interchanged with row P[i], for i = 0, 1, …).
template <class T>
LuQuality lu_quality(const std::vector<T>& a, const std::vector<T>& lu, const std::vector<std::int32_t>& piv,
                     std::size_t b, std::size_t n) {
  LuQuality q;
  std::vector<Z> pa = matrix_of(a, b, n, n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t p = piv[b * n + i];
    if (p < std::int32_t(i) || p >= std::int32_t(n)) {
      q.pivots_in_range = false;
      continue;
    }
    for (std::size_t j = 0; j < n; ++j) std::swap(pa[i * n + j], pa[std::size_t(p) * n + j]);
  }
  const std::vector<Z> f = matrix_of(lu, b, n, n);
  std::vector<Z> l(n * n), u(n * n), abs_l(n * n), abs_u(n * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      if (i > j) {
        l[i * n + j] = f[i * n + j];
        q.largest_l = std::max(q.largest_l, std::abs(f[i * n + j]));
      } else {
        u[i * n + j] = f[i * n + j];
      }
      if (i == j) l[i * n + j] = 1.0;
      abs_l[i * n + j] = std::abs(l[i * n + j]);
      abs_u[i * n + j] = std::abs(u[i * n + j]);
    }
  const std::vector<Z> lu_product = product(l, u, n, n, n);
  double diff = 0;
  for (std::size_t e = 0; e < n * n; ++e) diff += std::norm(pa[e] - lu_product[e]);
  q.backward = std::sqrt(diff) / std::max(frobenius(product(abs_l, abs_u, n, n, n)), 1e-300);
  return q;
}

struct CholeskyQuality {
  double reconstruction = 0;     // ‖A − L·Lᴴ‖_F / ‖A‖_F (upper: ‖A − Uᴴ·U‖_F / ‖A‖_F)
  bool other_triangle_zero = true;
  bool real_positive_diagonal = true;
};

template <class T>
CholeskyQuality cholesky_quality(const std::vector<Z>& effective, const std::vector<T>& factor, std::size_t b,
                                 std::size_t n, bool upper) {
  CholeskyQuality q;
  const std::vector<Z> f = matrix_of(factor, b, n, n);
  std::vector<Z> fh(n * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      fh[j * n + i] = std::conj(f[i * n + j]);
      if (upper ? i > j : i < j) q.other_triangle_zero = q.other_triangle_zero && f[i * n + j] == Z(0);
      if (i == j) q.real_positive_diagonal = q.real_positive_diagonal && f[i * n + i].imag() == 0 && f[i * n + i].real() > 0;
    }
  const std::vector<Z> rebuilt = upper ? product(fh, f, n, n, n) : product(f, fh, n, n, n);
  double diff = 0, norm = 0;
  for (std::size_t e = 0; e < n * n; ++e) {
    diff += std::norm(effective[b * n * n + e] - rebuilt[e]);
    norm += std::norm(effective[b * n * n + e]);
  }
  q.reconstruction = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-300);
  return q;
}

// ‖A·X − B‖_F / (‖A‖_F·‖X‖_F + ‖B‖_F) for one n × n A and n × k X and B (row-major, double): the
// normwise backward error of a backward-stable solve, O(n·ε).
inline double solve_residual(const std::vector<Z>& a, const std::vector<Z>& x, const std::vector<Z>& b, std::size_t n,
                             std::size_t k) {
  const std::vector<Z> ax = product(a, x, n, n, k);
  double diff = 0;
  for (std::size_t e = 0; e < n * k; ++e) diff += std::norm(ax[e] - b[e]);
  return std::sqrt(diff) / std::max(frobenius(a) * frobenius(x) + frobenius(b), 1e-300);
}

// ---- running the commands ----------------------------------------------------------------------

struct CommandRun {
  int code = -1;
  std::string out, err;
};

template <class Request, class Command>
CommandRun run_command(Command command, const Request& request) {
  std::ostringstream out, err;
  CommandRun run;
  run.code = command(request, out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

// A.npy → LU.npy and P.npy in `dir`.
inline CommandRun lu(const ScratchDir& dir, cli::DeviceChoice device = cli::DeviceChoice::cpu) {
  cli::LuRequest r;
  r.input = dir / "a.npy";
  r.lu = dir / "lu.npy";
  r.pivots = dir / "p.npy";
  r.device = device;
  return run_command(cli::run_lu, r);
}

// A.npy → L.npy in `dir`.
inline CommandRun cholesky(const ScratchDir& dir, bool upper, cli::DeviceChoice device = cli::DeviceChoice::cpu) {
  cli::CholeskyRequest r;
  r.input = dir / "a.npy";
  r.output = dir / "l.npy";
  r.upper = upper;
  r.device = device;
  return run_command(cli::run_cholesky, r);
}

// A.npy, B.npy → X.npy in `dir`.
inline CommandRun solve(const ScratchDir& dir, cli::Assume assume, cli::DeviceChoice device = cli::DeviceChoice::cpu) {
  cli::SolveRequest r;
  r.a = dir / "a.npy";
  r.b = dir / "b.npy";
  r.output = dir / "x.npy";
  r.assume = assume;
  r.device = device;
  return run_command(cli::run_solve, r);
}

}  // namespace covflow::test::solve_cli

// The checks of `covflow linalg compress`, `expand`, `apply` and `solve C.npz` through their library
// functions, written once against a --device choice (tlr_cli_test runs them on the CPU,
// heev_cli_gpu_test with --device cuda): the archive's members as docs/cli.md documents them, the
// reconstruction within the tolerance asked for, products and solves against the dense matrix.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <random>
#include <algorithm>
#include <tuple>
#include <sstream>
#include <string>
#include <vector>

#include "common/exit_codes.hpp"
#include "common/linalg_cli.hpp"
#include "covflow/io/npy.hpp"
#include "covflow/io/npz.hpp"
#include "npy_test_support.hpp"
#include "test_support.hpp"

namespace covflow::test::tlr_cli {

using Shape = std::vector<std::uint64_t>;
using Z = std::complex<double>;

struct Outcome {
  int code;
  std::string out, err;
};

template <class Command, class Request>
Outcome run_command(Command command, const Request& request) {
  std::ostringstream out, err;
  const int code = command(request, out, err);
  return {code, out.str(), err.str()};
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

template <class T> double precision_tolerance() { return std::is_same_v<linalg::real_t<T>, float> ? 1e-3 : 1e-7; }

// `count` Hermitian positive definite n × n matrices, row-major: an exponential kernel on random
// points of the plane (heterogeneous tiles of decaying rank), a phase per point for complex T,
// and a graded diagonal loading so that the conditioning differs between matrices.
template <class T>
std::vector<T> kernel_matrices(std::size_t count, std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<T> out;
  for (std::size_t c = 0; c < count; ++c) {
    std::vector<double> x(n), y(n), phase(n);
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = uniform(rng);
      y[i] = uniform(rng);
      phase[i] = 6.28 * uniform(rng);
    }
    // Sorting by x keeps near points in near tiles, as a radar array's elements are.
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return x[a] < x[b]; });
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        const std::size_t p = order[i], q = order[j];
        const double d = std::hypot(x[p] - x[q], y[p] - y[q]);
        Z v = std::exp(-d / 0.4) + (i == j ? 0.1 * double(c + 1) : 0.0);
        if constexpr (linalg::is_complex_v<T>) v *= std::polar(1.0, phase[p] - phase[q]);
        out.push_back(static_cast<T>(v.real()));
        if constexpr (linalg::is_complex_v<T>) out.back() = T(v);
      }
  }
  return out;
}

template <class T>
std::vector<Z> as_z(const io::NpyArray& a) {
  std::vector<Z> out;
  for (const T& v : values_of<T>(a)) out.push_back(Z(v));
  return out;
}

template <class T>
std::vector<Z> as_z(const std::vector<T>& a) {
  std::vector<Z> out;
  for (const T& v : a) out.push_back(Z(v));
  return out;
}

inline double norm(const std::vector<Z>& a, std::size_t from = 0, std::size_t count = SIZE_MAX) {
  double s = 0;
  for (std::size_t i = from; i < a.size() && i < from + count; ++i) s += std::norm(a[i]);
  return std::sqrt(s);
}

// Row-major (n × n) · (n × k) of matrix c of a batch.
inline std::vector<Z> product(const std::vector<Z>& a, std::size_t c, const std::vector<Z>& x, std::size_t n, std::size_t k) {
  std::vector<Z> y(n * k);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t l = 0; l < n; ++l)
      for (std::size_t j = 0; j < k; ++j) y[i * k + j] += a[c * n * n + i * n + l] * x[l * k + j];
  return y;
}

inline cli::CompressRequest compress_request(const ScratchDir& dir, std::int64_t tile, double tol, bool hermitian,
                                      cli::DeviceChoice device = cli::DeviceChoice::cpu) {
  cli::CompressRequest r;
  r.input = dir / "a.npy";
  r.output = dir / "c.npz";
  r.tile = tile;
  r.tolerance = tol;
  r.hermitian = hermitian;
  r.device = device;
  return r;
}

// The backend a command says it ran on is the one asked for.
inline void expect_ran_on(const Outcome& run, cli::DeviceChoice device) {
  EXPECT_TRUE(contains(run.out, device == cli::DeviceChoice::cuda ? " on cuda" : " on cpu")) << run.out;
}

// compress → expand within the tolerance, for one matrix and a batch, general and Hermitian, a
// ragged last tile; the archive's members exactly as documented.
template <class T>
void check_compress_expand(cli::DeviceChoice device) {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("TlrCli.CompressExpand"));
  const double tol = precision_tolerance<T>();
  const std::size_t n = 70, b = 16, nt = 5;
  for (std::size_t count : {std::size_t(1), std::size_t(3)}) {
    for (bool hermitian : {false, true}) {
      SCOPED_TRACE(std::to_string(count) + (hermitian ? " Hermitian" : " general"));
      const bool batched = count > 1;
      const std::vector<T> a = kernel_matrices<T>(count, n, rng);
      io::write_npy(dir / "a.npy", make_array(a, batched ? Shape{count, n, n} : Shape{n, n}));
      const Outcome c = run_command(cli::run_compress, compress_request(dir, b, tol, hermitian, device));
      ASSERT_EQ(c.code, 0) << c.err;
      expect_ran_on(c, device);
      EXPECT_TRUE(contains(c.out, "compress: ") && contains(c.out, "wrote " + (dir / "c.npz").string())) << c.out;

      const std::vector<io::NpzMember> members = io::read_npz(dir / "c.npz");
      const std::size_t slots = hermitian ? nt * (nt - 1) / 2 : nt * (nt - 1);
      const auto batch = [&](Shape s) {
        if (batched) s.insert(s.begin(), count);
        return s;
      };
      const std::vector<std::tuple<std::string, Shape, io::NpyDtype>> expected = {
          {"diag", batch({nt, b, b}), dtype_of<T>()},          {"u", batch({slots, b, b}), dtype_of<T>()},
          {"v", batch({slots, b, b}), dtype_of<T>()},          {"rank", batch({slots}), io::NpyDtype::int32},
          {"tile_row", {slots}, io::NpyDtype::int32},           {"tile_col", {slots}, io::NpyDtype::int32},
          {"n", {}, io::NpyDtype::int32},                       {"tile", {}, io::NpyDtype::int32},
          {"hermitian", {}, io::NpyDtype::int32},               {"tolerance", {}, io::NpyDtype::float64},
          {"format_version", {}, io::NpyDtype::int32}};
      ASSERT_EQ(members.size(), expected.size());
      for (const auto& [name, shape, dtype] : expected) {
        const io::NpzMember* m = io::find_member(members, name);
        ASSERT_NE(m, nullptr) << name;
        EXPECT_EQ(m->array.shape, shape) << name;
        EXPECT_EQ(m->array.dtype, dtype) << name;
      }
      EXPECT_EQ(values_of<std::int32_t>(io::find_member(members, "n")->array), std::vector<std::int32_t>{70});
      EXPECT_EQ(values_of<std::int32_t>(io::find_member(members, "hermitian")->array),
                std::vector<std::int32_t>{hermitian ? 1 : 0});
      const auto rows = values_of<std::int32_t>(io::find_member(members, "tile_row")->array);
      const auto cols = values_of<std::int32_t>(io::find_member(members, "tile_col")->array);
      for (std::size_t s = 0; s < slots; ++s) {
        EXPECT_NE(rows[s], cols[s]);
        if (hermitian) {
          EXPECT_GT(rows[s], cols[s]);
        }
      }

      // The documented reconstruction, in double, from the members alone: diag, then
      // u @ v.conj().T per slot (and its conjugate transpose above the diagonal when Hermitian).
      const auto diag = as_z<T>(io::find_member(members, "diag")->array);
      const auto u = as_z<T>(io::find_member(members, "u")->array);
      const auto v = as_z<T>(io::find_member(members, "v")->array);
      const std::vector<Z> dense = as_z(a);
      for (std::size_t m = 0; m < count; ++m) {
        std::vector<Z> rebuilt(n * n);
        auto put = [&](std::size_t i, std::size_t j, Z value) {
          if (i < n && j < n) rebuilt[i * n + j] = value;
        };
        for (std::size_t t = 0; t < nt; ++t)
          for (std::size_t r = 0; r < b; ++r)
            for (std::size_t q = 0; q < b; ++q) put(t * b + r, t * b + q, diag[((m * nt + t) * b + r) * b + q]);
        for (std::size_t s = 0; s < slots; ++s)
          for (std::size_t r = 0; r < b; ++r)
            for (std::size_t q = 0; q < b; ++q) {
              Z value = 0;
              for (std::size_t l = 0; l < b; ++l)
                value += u[((m * slots + s) * b + r) * b + l] * std::conj(v[((m * slots + s) * b + q) * b + l]);
              put(rows[s] * b + r, cols[s] * b + q, value);
              if (hermitian) put(cols[s] * b + q, rows[s] * b + r, std::conj(value));
            }
        std::vector<Z> diff(n * n);
        for (std::size_t i = 0; i < n * n; ++i) diff[i] = rebuilt[i] - dense[m * n * n + i];
        EXPECT_LE(norm(diff), 1.01 * tol * norm(dense, m * n * n, n * n) + 100 * n * eps<T>() * norm(dense, m * n * n, n * n))
            << "matrix " << m;
      }

      cli::ExpandRequest e{dir / "c.npz", dir / "e.npy", device};
      const Outcome expanded = run_command(cli::run_expand, e);
      ASSERT_EQ(expanded.code, 0) << expanded.err;
      expect_ran_on(expanded, device);
      const io::NpyArray got = io::read_npy(dir / "e.npy");
      EXPECT_EQ(got.shape, batched ? Shape({count, n, n}) : Shape({n, n}));
      EXPECT_EQ(got.dtype, dtype_of<T>());
      const std::vector<Z> z = as_z<T>(got);
      for (std::size_t m = 0; m < count; ++m) {
        std::vector<Z> diff(n * n);
        for (std::size_t i = 0; i < n * n; ++i) diff[i] = z[m * n * n + i] - dense[m * n * n + i];
        EXPECT_LE(norm(diff), 1.01 * tol * norm(dense, m * n * n, n * n) + 100 * n * eps<T>() * norm(dense, m * n * n, n * n))
            << "matrix " << m;
      }
    }
  }
}

// apply against the dense product of the expanded matrices (to n·ε) and the original ones (to the
// tolerance); solve's residual; X's shapes broadcast as in numpy.linalg.solve.
template <class T>
void check_apply_solve(cli::DeviceChoice device) {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("TlrCli.ApplySolve"));
  const double tol = precision_tolerance<T>();
  const std::size_t n = 45, count = 2, k = 3;
  const std::vector<T> a = kernel_matrices<T>(count, n, rng);
  io::write_npy(dir / "a.npy", make_array(a, {count, n, n}));
  ASSERT_EQ(run_command(cli::run_compress, compress_request(dir, 12, tol, true, device)).code, 0);
  ASSERT_EQ(run_command(cli::run_expand, cli::ExpandRequest{dir / "c.npz", dir / "e.npy", device}).code, 0);
  const std::vector<Z> expanded = as_z<T>(io::read_npy(dir / "e.npy"));
  const std::vector<Z> dense = as_z(a);

  struct Case {
    Shape x_shape, y_shape;
  };
  for (const Case& c : {Case{{n}, {count, n}}, Case{{n, k}, {count, n, k}}, Case{{count, n, k}, {count, n, k}},
                        Case{{1, n, k}, {count, n, k}}}) {
    SCOPED_TRACE(io::format_shape(c.x_shape));
    std::uint64_t elements = 1;
    for (auto d : c.x_shape) elements *= d;
    const std::vector<T> x = random_normal<T>(elements, rng);
    io::write_npy(dir / "x.npy", make_array(x, c.x_shape));
    const std::size_t cols = c.x_shape.size() == 1 ? 1 : k;
    const bool per_matrix = c.x_shape.size() == 3 && c.x_shape[0] == count;

    const Outcome applied =
        run_command(cli::run_apply, cli::ApplyRequest{dir / "c.npz", dir / "x.npy", dir / "y.npy", device});
    ASSERT_EQ(applied.code, 0) << applied.err;
    expect_ran_on(applied, device);
    const io::NpyArray y_file = io::read_npy(dir / "y.npy");
    EXPECT_EQ(y_file.shape, c.y_shape);
    const std::vector<Z> y = as_z<T>(y_file), xz = as_z(x);
    for (std::size_t m = 0; m < count; ++m) {
      const std::vector<Z> xm(xz.begin() + (per_matrix ? m * n * cols : 0), xz.begin() + (per_matrix ? m * n * cols : 0) + n * cols);
      const std::vector<Z> exact = product(expanded, m, xm, n, cols), original = product(dense, m, xm, n, cols);
      std::vector<Z> d1(n * cols), d2(n * cols);
      for (std::size_t i = 0; i < n * cols; ++i) {
        d1[i] = y[m * n * cols + i] - exact[i];
        d2[i] = y[m * n * cols + i] - original[i];
      }
      const double scale = norm(expanded, m * n * n, n * n) * norm(xm);
      EXPECT_LE(norm(d1), 100 * n * eps<T>() * scale) << "matrix " << m;
      EXPECT_LE(norm(d2), 2 * tol * scale + 100 * n * eps<T>() * scale) << "matrix " << m;
    }

    const Outcome solved = run_command(cli::run_solve, cli::SolveRequest{dir / "c.npz", dir / "x.npy", dir / "s.npy",
                                                                       cli::Assume::general, device});
    ASSERT_EQ(solved.code, 0) << solved.err;
    expect_ran_on(solved, device);
    EXPECT_TRUE(contains(solved.out, "TLR Cholesky")) << solved.out;
    const io::NpyArray s_file = io::read_npy(dir / "s.npy");
    EXPECT_EQ(s_file.shape, c.y_shape);
    const std::vector<Z> s = as_z<T>(s_file);
    for (std::size_t m = 0; m < count; ++m) {
      const std::vector<Z> sm(s.begin() + m * n * cols, s.begin() + (m + 1) * n * cols);
      const std::vector<Z> ax = product(dense, m, sm, n, cols);
      std::vector<Z> r(n * cols);
      for (std::size_t i = 0; i < n * cols; ++i) r[i] = ax[i] - xz[(per_matrix ? m * n * cols : 0) + i];
      EXPECT_LE(norm(r), 20 * tol * norm(dense, m * n * n, n * n) * norm(sm) + 1000 * n * eps<T>() * norm(dense, m * n * n, n * n) * norm(sm))
          << "matrix " << m;
    }
  }
}

}  // namespace covflow::test::tlr_cli

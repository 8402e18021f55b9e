// The bodies of the tile low-rank suites (tlr.hpp), one function per test, each taking the Exec to
// run on: tlr_test.cpp runs them on the CPU backend, a GPU binary on the CUDA backend. Inputs are
// made on the host; solve_suite's on_exec copies them (and the TLR storage, as bytes) to where the
// Exec runs and the outputs back, so every check below reads host arrays on either backend.
//
// Inputs are heterogeneous — every tile differs: exponential and Matérn (ν = 3/2) kernels on random
// 2-D points, a Hilbert matrix (Charara et al. 2018 §6 use its kernel), a radar sample covariance
// (noise, a signal and two strong jammers on a uniform linear array, K = 2n snapshots) and, for
// general storage, the exponential kernel between two different point sets. Complex versions get a
// random phase per row and column (D·A·Eᴴ, D and E unitary diagonal), which keeps ranks, norms and
// definiteness and makes every element complex. Orders are ragged (n not a multiple of the tile) with
// nt ≥ 4. References are computed in double from the elements as stored.
//
// What they check, in units of the tolerance or of n·ε: compression error ≤ tol·‖A‖_F (per tile
// with the tile scope), the reported error equal to ‖A − expand(Ã)‖_F, ranks no larger than the
// SVD-optimal ones, the padding convention, tlr_stats against the memory formula; gemv and LLD
// against dense products of the expanded operands (rounding) and of the original ones (tolerance);
// LLL after the whole driver within nt·tol; tlr_potrf's ‖A − L·Lᴴ‖ and tlr_potrs's residual within
// nt·tol; max_rank capping, non-finite input and an indefinite matrix reported per matrix with the
// neighbours untouched. TLR storage is poisoned (0xff bytes: NaN factors, rank −1) before a run.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numbers>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "covflow/linalg/tlr.hpp"
#include "lowrank_cases.hpp"
#include "solve_suite.hpp"
#include "test_support.hpp"

namespace covflow::linalg::tlr_suite {

using Z = std::complex<double>;
using solve_suite::on_exec;

// The tolerance of the suites: two decades above float's n·ε at the orders here, so that rounding
// stays well inside it; a tight one for double.
template <class T>
double tolerance() {
  return std::is_same_v<real_t<T>, float> ? 1e-3 : 1e-8;
}

template <class T>
double rounding(std::int64_t n) {
  return 10.0 * static_cast<double>(n) * test::eps<T>();
}

// ---- inputs ----------------------------------------------------------------------------------------------

enum class Kind { exponential, matern, hilbert, radar, cross };

inline std::string name(Kind kind) {
  switch (kind) {
    case Kind::exponential:
      return "exponential";
    case Kind::matern:
      return "matern";
    case Kind::hilbert:
      return "hilbert";
    case Kind::radar:
      return "radar";
    case Kind::cross:
      return "cross";
  }
  return "?";
}

struct Case {
  Kind kind;
  int n, tile;
};

// Hermitian inputs (all but cross), ragged, nt ≥ 4.
inline const std::vector<Case> hermitian_cases = {
    {Kind::exponential, 150, 32}, {Kind::matern, 200, 48}, {Kind::hilbert, 100, 24}, {Kind::radar, 130, 32}};

// count matrices n × n (packed), each drawn afresh; `nugget` is added to the diagonal.
template <class T>
std::vector<T> make_matrices(Kind kind, int n, int count, std::mt19937_64& rng, double nugget = 0) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, std::sqrt(0.5));
  std::vector<T> out(static_cast<std::size_t>(count) * n * n);
  for (int c = 0; c < count; ++c) {
    std::vector<Z> a(static_cast<std::size_t>(n) * n);
    auto points = [&] {  // sorted by x so that far tiles hold far points, as a kernel matrix is ordered
      std::vector<std::pair<double, double>> p(n);
      for (auto& q : p) q = {unit(rng), unit(rng)};
      std::sort(p.begin(), p.end());
      return p;
    };
    const auto x = points(), y = kind == Kind::cross ? points() : x;
    const double length = 0.3;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) {
        const double r = std::hypot(x[i].first - y[j].first, x[i].second - y[j].second) / length;
        double v = 0;
        if (kind == Kind::exponential || kind == Kind::cross) v = std::exp(-r);
        if (kind == Kind::matern) v = (1 + std::sqrt(3.0) * r) * std::exp(-std::sqrt(3.0) * r);
        if (kind == Kind::hilbert) v = 1.0 / (i + j + 1);
        a[i + j * n] = v;
      }
    if (kind == Kind::radar) {  // R = X·Xᴴ / K, X = noise + signal + jammers on a half-wavelength ULA
      const int snapshots = 2 * n;
      const double angles[] = {std::asin(2 * unit(rng) - 1), std::asin(2 * unit(rng) - 1),
                               std::asin(2 * unit(rng) - 1)};
      const double powers[] = {10.0, 1e3, 3e3};
      std::vector<Z> snapshot(n);
      for (int k = 0; k < snapshots; ++k) {
        for (int i = 0; i < n; ++i) snapshot[i] = Z(normal(rng), normal(rng));
        for (int s = 0; s < 3; ++s) {
          const Z amplitude = std::sqrt(powers[s]) * Z(normal(rng), normal(rng));
          for (int i = 0; i < n; ++i)
            snapshot[i] += amplitude * std::polar(1.0, std::numbers::pi * i * std::sin(angles[s]));
        }
        for (int j = 0; j < n; ++j)
          for (int i = 0; i < n; ++i) a[i + j * n] += snapshot[i] * std::conj(snapshot[j]) / double(snapshots);
      }
    }
    // Complex: D·A·Eᴴ with random phases (E = D for a Hermitian A). Real: the real part (still
    // symmetric positive semidefinite for the radar covariance).
    std::vector<Z> d(n), e(n);
    for (int i = 0; i < n; ++i) d[i] = std::polar(1.0, 2 * std::numbers::pi * unit(rng));
    for (int i = 0; i < n; ++i) e[i] = kind == Kind::cross ? std::polar(1.0, 2 * std::numbers::pi * unit(rng)) : d[i];
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) {
        Z v = a[i + j * n] + (i == j ? nugget : 0.0);
        if constexpr (is_complex_v<T>) v = d[i] * v * std::conj(e[j]);
        if (i == j && kind != Kind::cross) v = v.real();
        T& to = out[static_cast<std::size_t>(c) * n * n + i + j * n];
        if constexpr (is_complex_v<T>)
          to = T(static_cast<real_t<T>>(v.real()), static_cast<real_t<T>>(v.imag()));
        else
          to = static_cast<T>(v.real());
      }
  }
  return out;
}

// ---- references in double -----------------------------------------------------------------------------

template <class T>
std::vector<Z> widen(const T* a, std::size_t count) {
  std::vector<Z> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = Z(a[i]);
  return out;
}

inline double fro(const Z* a, std::int64_t ld, int rows, int cols) {
  double sum = 0;
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) sum += std::norm(a[i + j * ld]);
  return std::sqrt(sum);
}

inline double fro_diff(const Z* a, const Z* b, std::int64_t ld, int rows, int cols) {
  double sum = 0;
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) sum += std::norm(a[i + j * ld] - b[i + j * ld]);
  return std::sqrt(sum);
}

inline Z op_at(const Z* a, int n, Op op, int i, int j) {
  if (op == Op::none) return a[i + j * n];
  return op == Op::trans ? a[j + i * n] : std::conj(a[j + i * n]);
}

// op(A)·op(B) (n × n times n × cols; op_b applies to B's n × n only when cols = n).
inline std::vector<Z> product(Op op_a, const Z* a, Op op_b, const Z* b, int n, int cols) {
  std::vector<Z> c(static_cast<std::size_t>(n) * cols);
  for (int j = 0; j < cols; ++j)
    for (int k = 0; k < n; ++k) {
      const Z bkj = op_at(b, n, op_b, k, j);
      for (int i = 0; i < n; ++i) c[i + j * n] += op_at(a, n, op_a, i, k) * bkj;
    }
  return c;
}

inline const Op every_op[] = {Op::none, Op::trans, Op::conj_trans};

// ---- TLR batches on the host, run where the Exec runs ---------------------------------------------------

template <class T>
struct HostTlr {
  TlrShape shape;
  std::vector<std::byte> storage;
  std::vector<TlrInfo> info;

  Tlr<const T> view() const {
    return tlr_view<T>(shape, std::span(const_cast<std::byte*>(storage.data()), storage.size()));
  }
  const int* ranks() const { return view().rank; }
};

template <class T>
TlrShape shape_of(int n, int tile, int max_rank, int count, bool hermitian) {
  return TlrShape{n, tile, max_rank, count, hermitian};
}

template <class T>
std::vector<std::byte> poisoned_storage(const TlrShape& shape) {
  return std::vector<std::byte>(tlr_bytes(element_type_of<T>(), shape), std::byte{0xff});
}

template <class T>
HostTlr<T> run_compress(Exec& exec, const std::vector<T>& a, const TlrShape& shape, const TlrOptions& options) {
  HostTlr<T> out{shape, poisoned_storage<T>(shape), std::vector<TlrInfo>(shape.count)};
  std::vector<std::byte> workspace(tlr_compress_workspace<T>(exec, shape));
  const int n = static_cast<int>(shape.n), count = static_cast<int>(shape.count);
  on_exec(
      exec,
      [&](auto dense, auto storage, auto info, auto work) {
        tlr_compress<T>(exec, Batch<const T>::packed(dense.data(), n, n, count), tlr_view<T>(shape, storage), info,
                        work, options);
      },
      a, out.storage, out.info, workspace);
  return out;
}

template <class T>
std::vector<T> run_expand(Exec& exec, const HostTlr<T>& a) {
  const int n = static_cast<int>(a.shape.n), count = static_cast<int>(a.shape.count);
  std::vector<T> out(static_cast<std::size_t>(count) * n * n, test::poison<T>());
  on_exec(
      exec,
      [&](auto storage, auto dense) {
        tlr_expand<T>(exec, tlr_view<T>(a.shape, std::span(const_cast<std::byte*>(storage.data()), storage.size())),
                      Batch<T>::packed(dense.data(), n, n, count));
      },
      a.storage, out);
  return out;
}

// A view of storage on the exec's side as const.
template <class T, class Bytes>
Tlr<const T> const_view(const TlrShape& shape, Bytes storage) {
  return tlr_view<T>(shape, std::span(const_cast<std::byte*>(storage.data()), storage.size()));
}

// ---- compression -------------------------------------------------------------------------------------

// The rank the SVD needs for tile singular values σ (descending, double) at τ².
inline int optimal_rank(const std::vector<double>& sigma, double tau2) {
  double tail = 0;
  int k = static_cast<int>(sigma.size());
  while (k > 0 && tail + sigma[k - 1] * sigma[k - 1] <= tau2) tail += sigma[k - 1] * sigma[k - 1], --k;
  return k;
}

// The tile (i, j) of matrix c of a packed n × n batch, copied (rows(i) × rows(j), ld rows(i)).
template <class T>
std::vector<T> tile_of(const T* a, int n, const TlrShape& s, std::int64_t i, std::int64_t j) {
  const int m = static_cast<int>(s.rows(i)), w = static_cast<int>(s.rows(j));
  std::vector<T> out(static_cast<std::size_t>(m) * w);
  for (int col = 0; col < w; ++col)
    for (int row = 0; row < m; ++row) out[row + col * m] = a[(i * s.tile + row) + (j * s.tile + col) * n];
  return out;
}

template <class T>
void check_compression(Exec& exec, const std::vector<T>& a, const TlrShape& shape, const TlrOptions& options,
                       const std::string& what) {
  SCOPED_TRACE(what);
  const HostTlr<T> t = run_compress(exec, a, shape, options);
  const std::vector<T> expanded = run_expand(exec, t);
  const int n = static_cast<int>(shape.n), nt = static_cast<int>(shape.tiles());
  const std::int64_t b = shape.tile, slots = shape.slots();
  const double tol = options.tolerance, round = rounding<T>(n);
  const Tlr<const T> view = t.view();
  for (int c = 0; c < shape.count; ++c) {
    const std::vector<Z> exact = widen(a.data() + std::size_t(c) * n * n, std::size_t(n) * n);
    const std::vector<Z> approx = widen(expanded.data() + std::size_t(c) * n * n, std::size_t(n) * n);
    // A Hermitian batch reads the lower tiles only; its expansion is Hermitian whatever the input
    // held above (here the input is Hermitian to rounding).
    const double norm = fro(exact.data(), n, n, n), error = fro_diff(exact.data(), approx.data(), n, n, n);
    EXPECT_EQ(t.info[c].status, tlr_status::ok);
    EXPECT_EQ(t.info[c].capped_tiles, 0);
    EXPECT_NEAR(t.info[c].norm, norm, round * norm);
    // The discarded σ are exact singular values of the tiles up to the SVD's backward error (a few
    // b·ε·‖A_ij‖) and expand's rounding: the reported error is the actual one to n·ε·‖A‖.
    EXPECT_NEAR(t.info[c].error, error, round * norm) << "reported vs actual ‖A − Ã‖_F";
    if (options.scope == TlrScope::matrix) {
      EXPECT_LE(error, (tol + round) * norm) << "‖A − Ã‖_F / ‖A‖_F vs tol";
    }
    const double tau2_matrix = tol * tol * norm * norm / (double(slots) * (shape.hermitian ? 2 : 1));
    for (std::int64_t slot = 0; slot < slots; ++slot) {
      std::int64_t i = 0, j = 0;
      for (std::int64_t x = 0; x < nt; ++x)
        for (std::int64_t y = 0; y < nt; ++y)
          if (x != y && (!shape.hermitian || x > y) && shape.slot(x, y) == slot) i = x, j = y;
      const int m = static_cast<int>(shape.rows(i)), w = static_cast<int>(shape.rows(j));
      const std::vector<T> tile = tile_of(a.data() + std::size_t(c) * n * n, n, shape, i, j);
      const std::vector<double> sigma = test::reference_singular_values(tile.data(), m, w);
      double tile_norm2 = 0;
      for (double s : sigma) tile_norm2 += s * s;
      const double tile_norm = std::sqrt(tile_norm2);
      const int k = t.ranks()[c * slots + slot];
      // Rounding moves the computed σ by about b·ε·‖A_ij‖, so the SVD-optimal rank is taken at τ
      // less that margin: the rank chosen from computed σ can be no larger.
      const double scale = options.scope == TlrScope::tile ? tile_norm : norm;
      const double tau = options.scope == TlrScope::tile ? tol * tile_norm : std::sqrt(tau2_matrix);
      const double margin = rounding<T>(b) * scale;
      EXPECT_LE(k, optimal_rank(sigma, std::pow(std::max(tau - margin, 0.0), 2))) << "tile " << i << "," << j;
      if (options.scope == TlrScope::tile) {
        const std::vector<Z> e = widen(tile.data(), tile.size());
        std::vector<Z> ap(tile.size());
        for (int col = 0; col < w; ++col)
          for (int row = 0; row < m; ++row) ap[row + col * m] = approx[(i * b + row) + (j * b + col) * n];
        EXPECT_LE(fro_diff(e.data(), ap.data(), m, m, w), (tol + rounding<T>(b)) * tile_norm)
            << "tile " << i << "," << j;
      }
      // Padding: zero past the rank and past the rows.
      const T* u = view.u_tile(c, slot);
      const T* v = view.v_tile(c, slot);
      for (std::int64_t col = 0; col < shape.max_rank; ++col)
        for (std::int64_t row = 0; row < b; ++row) {
          if (col >= k || row >= m) {
            EXPECT_EQ(u[row + col * b], T(0));
          }
          if (col >= k || row >= w) {
            EXPECT_EQ(v[row + col * b], T(0));
          }
        }
    }
    // A ragged last diagonal tile is padded with the identity.
    const T* d = view.diag_tile(c, nt - 1);
    const std::int64_t last = shape.rows(nt - 1);
    for (std::int64_t col = 0; col < b; ++col)
      for (std::int64_t row = 0; row < b; ++row)
        if (row >= last || col >= last) {
          EXPECT_EQ(d[row + col * b], T(row == col ? 1 : 0));
        }
  }
  // Memory: the formula of tlr.hpp, counted here from the ranks.
  const std::size_t element = sizeof(T);
  auto round256 = [](std::size_t x) { return (x + 255) / 256 * 256; };
  const std::size_t count = static_cast<std::size_t>(shape.count);
  std::size_t compact = 0;
  for (std::size_t c = 0; c < count; ++c) {
    for (int i = 0; i < nt; ++i) compact += std::size_t(shape.rows(i) * shape.rows(i)) * element;
    for (int i = 0; i < nt; ++i)
      for (int j = 0; j < nt; ++j)
        if (i != j && (!shape.hermitian || i > j))
          compact += std::size_t((shape.rows(i) + shape.rows(j)) * t.ranks()[c * slots + shape.slot(i, j)]) * element;
  }
  const TlrStats stats =
      tlr_stats(element_type_of<T>(), shape, std::span<const int>(t.ranks(), std::size_t(shape.count * slots)));
  EXPECT_EQ(stats.compact_bytes, compact);
  EXPECT_EQ(stats.dense_bytes, count * std::size_t(n) * n * element);
  EXPECT_EQ(stats.stored_bytes, round256(count * nt * b * b * element) +
                                    2 * round256(count * slots * b * shape.max_rank * element) +
                                    round256(count * slots * sizeof(int)));
  EXPECT_LE(stats.max_rank, shape.max_rank);
}

template <class T>
void check_compress_accuracy_ranks_and_memory(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("tlr compress " + solve_suite::what_runs<T>(exec)));
  for (const Case& k : hermitian_cases)
    for (const bool hermitian : {true, false})
      for (const TlrScope scope : {TlrScope::matrix, TlrScope::tile}) {
        const std::vector<T> a = make_matrices<T>(k.kind, k.n, 2, rng);
        const TlrShape shape{k.n, k.tile, k.tile, 2, hermitian};
        check_compression(exec, a, shape, TlrOptions{tolerance<T>(), scope},
                          name(k.kind) + (hermitian ? " hermitian" : " general") +
                              (scope == TlrScope::tile ? " tile scope" : " matrix scope"));
      }
  const std::vector<T> cross = make_matrices<T>(Kind::cross, 170, 2, rng);
  check_compression(exec, cross, TlrShape{170, 40, 40, 2, false}, TlrOptions{tolerance<T>()}, "cross general");
}

template <class T>
void check_max_rank_capping_reported(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("tlr capping " + solve_suite::what_runs<T>(exec)));
  const int n = 150;
  const std::vector<T> a = make_matrices<T>(Kind::radar, n, 2, rng);
  const TlrShape shape{n, 32, 1, 2, true};
  const HostTlr<T> t = run_compress(exec, a, shape, TlrOptions{tolerance<T>()});
  const std::vector<T> expanded = run_expand(exec, t);
  for (int c = 0; c < 2; ++c) {
    const std::vector<Z> exact = widen(a.data() + std::size_t(c) * n * n, std::size_t(n) * n);
    const std::vector<Z> approx = widen(expanded.data() + std::size_t(c) * n * n, std::size_t(n) * n);
    const double norm = fro(exact.data(), n, n, n), error = fro_diff(exact.data(), approx.data(), n, n, n);
    // Two strong jammers make every tile of the covariance need rank 2 or more (4 in its real part).
    EXPECT_EQ(t.info[c].status, tlr_status::max_rank_reached);
    EXPECT_EQ(t.info[c].capped_tiles, shape.slots());
    EXPECT_GT(error, tolerance<T>() * norm);
    EXPECT_NEAR(t.info[c].error, error, rounding<T>(n) * norm) << "the reported error is the true one";
    for (std::int64_t s = 0; s < shape.slots(); ++s) EXPECT_EQ(t.ranks()[c * shape.slots() + s], 1);
  }
}

template <class T>
void check_non_finite_input_flagged_alone(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("tlr non-finite " + solve_suite::what_runs<T>(exec)));
  const int n = 120, count = 3;
  const TlrShape shape{n, 32, 32, count, true};
  const std::vector<T> clean = make_matrices<T>(Kind::exponential, n, count, rng);
  for (const double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    std::vector<T> a = clean;
    a[std::size_t(n) * n + 70 + 5 * n] = T(static_cast<real_t<T>>(bad));  // matrix 1, a lower tile
    const HostTlr<T> t = run_compress(exec, a, shape, TlrOptions{tolerance<T>()});
    const HostTlr<T> reference = run_compress(exec, clean, shape, TlrOptions{tolerance<T>()});
    EXPECT_EQ(t.info[1].status, tlr_status::non_finite_input);
    EXPECT_TRUE(std::isnan(t.info[1].error));
    const std::vector<T> expanded = run_expand(exec, t), expected = run_expand(exec, reference);
    for (std::size_t e = 0; e < std::size_t(n) * n; ++e) ASSERT_TRUE(std::isnan(std::real(expanded[n * n + e])));
    for (const int c : {0, 2}) {
      EXPECT_EQ(t.info[c].status, tlr_status::ok);
      EXPECT_EQ(t.info[c].error, reference.info[c].error);
      EXPECT_EQ(0, std::memcmp(expanded.data() + std::size_t(c) * n * n, expected.data() + std::size_t(c) * n * n,
                               sizeof(T) * n * n))
          << "matrix " << c << " differs from its run without the non-finite neighbour";
    }
  }
}

// ---- gemv and GEMM-LLD -------------------------------------------------------------------------------

template <class T>
T scalar(double re, double im) {
  if constexpr (is_complex_v<T>)
    return T(static_cast<real_t<T>>(re), static_cast<real_t<T>>(im));
  else
    return static_cast<T>(re);
}

// Two compressed operands with their dense originals and expansions (packed, count 1 each).
template <class T>
struct Operands {
  std::vector<T> dense_a, dense_b;
  HostTlr<T> a, b;
  std::vector<T> expanded_a, expanded_b;
};

template <class T>
Operands<T> make_operands(Exec& exec, Kind kind_a, bool hermitian_a, Kind kind_b, bool hermitian_b, int n, int tile,
                          std::mt19937_64& rng) {
  Operands<T> o;
  o.dense_a = make_matrices<T>(kind_a, n, 1, rng);
  o.dense_b = make_matrices<T>(kind_b, n, 1, rng);
  o.a = run_compress(exec, o.dense_a, TlrShape{n, tile, tile, 1, hermitian_a}, TlrOptions{tolerance<T>()});
  o.b = run_compress(exec, o.dense_b, TlrShape{n, tile, tile, 1, hermitian_b}, TlrOptions{tolerance<T>()});
  o.expanded_a = run_expand(exec, o.a);
  o.expanded_b = run_expand(exec, o.b);
  return o;
}

template <class T>
void check_gemv_every_op(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("tlr gemv " + solve_suite::what_runs<T>(exec)));
  const int n = 150, tile = 32;
  for (const bool hermitian : {false, true}) {
    const Operands<T> o =
        make_operands<T>(exec, hermitian ? Kind::matern : Kind::cross, hermitian, Kind::hilbert, true, n, tile, rng);
    const std::vector<Z> a = widen(o.expanded_a.data(), o.expanded_a.size());
    const double norm_a = fro(a.data(), n, n, n);
    for (const Op op : every_op)
      for (const int nrhs : {1, 5}) {
        SCOPED_TRACE((hermitian ? "hermitian op " : "general op ") + std::string(1, static_cast<char>(op)) + " nrhs " +
                     std::to_string(nrhs));
        const T alpha = scalar<T>(0.75, -0.5), beta = scalar<T>(-1.25, 0.25);
        const std::vector<T> x = test::random_normal<T>(std::size_t(n) * nrhs, rng);
        std::vector<T> y = test::random_normal<T>(std::size_t(n) * nrhs, rng);
        const std::vector<Z> y0 = widen(y.data(), y.size()), xz = widen(x.data(), x.size());
        std::vector<std::byte> workspace(tlr_gemv_workspace<T>(exec, o.a.shape, nrhs));
        on_exec(
            exec,
            [&](auto storage, auto xs, auto ys, auto work) {
              tlr_gemv<T>(exec, op, alpha, const_view<T>(o.a.shape, storage),
                          Batch<const T>::packed(xs.data(), n, nrhs, 1), beta, Batch<T>::packed(ys.data(), n, nrhs, 1),
                          work);
            },
            o.a.storage, x, y, workspace);
        std::vector<Z> expected = product(op, a.data(), Op::none, xz.data(), n, nrhs);
        for (std::size_t e = 0; e < expected.size(); ++e) expected[e] = Z(alpha) * expected[e] + Z(beta) * y0[e];
        const std::vector<Z> got = widen(y.data(), y.size());
        // Each element is a sum of n products: rounding n·ε relative to |α|·‖A‖·‖X‖ + |β|·‖Y‖.
        const double bound = rounding<T>(n) * (std::abs(Z(alpha)) * norm_a * fro(xz.data(), n, n, nrhs) +
                                               std::abs(Z(beta)) * fro(y0.data(), n, n, nrhs));
        EXPECT_LE(fro_diff(got.data(), expected.data(), n, n, nrhs), bound);
      }
  }
}

template <class T>
void check_gemm_lld_every_op(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("tlr gemm lld " + solve_suite::what_runs<T>(exec)));
  const int n = 140, tile = 32;
  for (const bool a_hermitian : {false, true}) {
    const Operands<T> o = make_operands<T>(exec, a_hermitian ? Kind::exponential : Kind::cross, a_hermitian,
                                           a_hermitian ? Kind::cross : Kind::matern, !a_hermitian, n, tile, rng);
    const std::vector<Z> ea = widen(o.expanded_a.data(), o.expanded_a.size()),
                         eb = widen(o.expanded_b.data(), o.expanded_b.size()),
                         da = widen(o.dense_a.data(), o.dense_a.size()), db = widen(o.dense_b.data(), o.dense_b.size());
    const double norm_a = fro(da.data(), n, n, n), norm_b = fro(db.data(), n, n, n);
    for (const Op op_a : every_op)
      for (const Op op_b : every_op) {
        SCOPED_TRACE(std::string(a_hermitian ? "A hermitian" : "B hermitian") + " ops " +
                     std::string(1, static_cast<char>(op_a)) + static_cast<char>(op_b));
        const T alpha = scalar<T>(0.5, 0.25), beta = scalar<T>(2.0, -1.0);
        std::vector<T> c = test::random_normal<T>(std::size_t(n) * n, rng);
        const std::vector<Z> c0 = widen(c.data(), c.size());
        std::vector<std::byte> workspace(tlr_gemm_lld_workspace<T>(exec, o.a.shape, o.b.shape));
        on_exec(
            exec,
            [&](auto sa, auto sb, auto cs, auto work) {
              tlr_gemm<T>(exec, op_a, op_b, alpha, const_view<T>(o.a.shape, sa), const_view<T>(o.b.shape, sb), beta,
                          Batch<T>::packed(cs.data(), n, n, 1), work);
            },
            o.a.storage, o.b.storage, c, workspace);
        const std::vector<Z> got = widen(c.data(), c.size());
        auto expected = [&](const std::vector<Z>& a, const std::vector<Z>& b) {
          std::vector<Z> r = product(op_a, a.data(), op_b, b.data(), n, n);
          for (std::size_t e = 0; e < r.size(); ++e) r[e] = Z(alpha) * r[e] + Z(beta) * c0[e];
          return r;
        };
        const double scale = std::abs(Z(alpha)) * norm_a * norm_b,
                     c_scale = std::abs(Z(beta)) * fro(c0.data(), n, n, n);
        // Against the expanded operands: only rounding, sums of n products (the low-rank route
        // adds a few products of rank ≤ b, no more).
        const double round = rounding<T>(n) * (scale + c_scale);
        EXPECT_LE(fro_diff(got.data(), expected(ea, eb).data(), n, n, n), round) << "vs expanded operands";
        // Against the originals: ‖op(A)op(B) − op(Ã)op(B̃)‖ ≤ ‖A − Ã‖‖B‖ + ‖Ã‖‖B − B̃‖ ≤ (2 + tol)·tol·‖A‖‖B‖.
        EXPECT_LE(fro_diff(got.data(), expected(da, db).data(), n, n, n), 2.01 * tolerance<T>() * scale + round)
            << "vs original operands";
      }
  }
}

// ---- GEMM-LLL ------------------------------------------------------------------------------------------

template <class T>
void check_lll(Exec& exec, const Operands<T>& o, const HostTlr<T>& c_in, Op op_a, Op op_b, T alpha, T beta,
               const TlrOptions& options) {
  const int n = static_cast<int>(c_in.shape.n), nt = static_cast<int>(c_in.shape.tiles());
  HostTlr<T> c = c_in;
  std::vector<std::byte> workspace(tlr_gemm_lll_workspace<T>(exec, o.a.shape, o.b.shape, c.shape));
  std::fill(c.info.begin(), c.info.end(), TlrInfo{-1, -1, -1, -1, -1, -1});
  on_exec(
      exec,
      [&](auto sa, auto sb, auto sc, auto info, auto work) {
        tlr_gemm<T>(exec, op_a, op_b, alpha, const_view<T>(o.a.shape, sa), const_view<T>(o.b.shape, sb), beta,
                    tlr_view<T>(c.shape, sc), info, work, options);
      },
      o.a.storage, o.b.storage, c.storage, c.info, workspace);
  const std::vector<T> c_before = run_expand(exec, c_in), c_after = run_expand(exec, c);
  const std::vector<Z> ea = widen(o.expanded_a.data(), o.expanded_a.size()),
                       eb = widen(o.expanded_b.data(), o.expanded_b.size()),
                       c0 = widen(c_before.data(), c_before.size()), got = widen(c_after.data(), c_after.size());
  std::vector<Z> expected = product(op_a, ea.data(), op_b, eb.data(), n, n);
  // β = 0: C's old contents are not read (they may be NaN).
  const bool reads_c = beta != T(0);
  for (std::size_t e = 0; e < expected.size(); ++e)
    expected[e] = Z(alpha) * expected[e] + (reads_c ? Z(beta) * c0[e] : Z(0));
  const double bound_scale = std::abs(Z(alpha)) * fro(ea.data(), n, n, n) * fro(eb.data(), n, n, n) +
                             (reads_c ? std::abs(Z(beta)) * fro(c0.data(), n, n, n) : 0.0);
  const double error = fro_diff(got.data(), expected.data(), n, n, n);
  EXPECT_TRUE(c.info[0].status == tlr_status::ok || c.info[0].status == tlr_status::max_rank_reached)
      << c.info[0].status;
  // Each of the nt outer products truncates at most tol·‖C⁽ᵏ⁾‖_F, and ‖C⁽ᵏ⁾‖_F ≤ |α|‖A‖‖B‖ + |β|‖C‖.
  const double tol = options.tolerance;
  EXPECT_LE(error, (nt * tol + rounding<T>(n)) * bound_scale) << "after the whole driver";
  // A tile's truncations over the nt steps add at most as √nt times their root sum of squares.
  EXPECT_LE(error, std::sqrt(double(nt)) * c.info[0].error + rounding<T>(n) * bound_scale)
      << "reported " << c.info[0].error;
  EXPECT_NEAR(c.info[0].norm, fro(expected.data(), n, n, n), (nt * tol + rounding<T>(n)) * bound_scale);
}

template <class T>
void check_gemm_lll_every_op(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("tlr gemm lll " + solve_suite::what_runs<T>(exec)));
  const int n = 130, tile = 32;
  const Operands<T> o = make_operands<T>(exec, Kind::cross, false, Kind::exponential, true, n, tile, rng);
  const std::vector<T> c_dense = make_matrices<T>(Kind::cross, n, 1, rng);
  const HostTlr<T> c = run_compress(exec, c_dense, TlrShape{n, tile, tile, 1, false}, TlrOptions{tolerance<T>()});
  for (const Op op_a : every_op)
    for (const Op op_b : every_op)
      for (const TlrScope scope : {TlrScope::matrix, TlrScope::tile}) {
        SCOPED_TRACE(std::string("ops ") + static_cast<char>(op_a) + static_cast<char>(op_b) +
                     (scope == TlrScope::tile ? " tile scope" : " matrix scope"));
        check_lll(exec, o, c, op_a, op_b, scalar<T>(0.5, 0.5), scalar<T>(-1.0, 0.25),
                  TlrOptions{tolerance<T>(), scope});
      }
  // β = 0 ignores what C held.
  HostTlr<T> garbage = c;
  const Tlr<const T> v = garbage.view();
  std::fill_n(const_cast<T*>(v.u), c.shape.factor_elements(), test::poison<T>());
  SCOPED_TRACE("beta 0");
  check_lll(exec, o, garbage, Op::none, Op::none, scalar<T>(1.0, 0), T(0), TlrOptions{tolerance<T>()});
}

template <class T>
void check_gemm_lll_hermitian(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("tlr gemm lll hermitian " + solve_suite::what_runs<T>(exec)));
  const int n = 150, tile = 32;
  // op(A)·op(B) Hermitian: A·A and Aᴴ·A with A Hermitian, B = A.
  Operands<T> o = make_operands<T>(exec, Kind::matern, true, Kind::matern, true, n, tile, rng);
  o.b = o.a;
  o.expanded_b = o.expanded_a;
  const std::vector<T> c_dense = make_matrices<T>(Kind::exponential, n, 1, rng);
  const HostTlr<T> c = run_compress(exec, c_dense, TlrShape{n, tile, tile, 1, true}, TlrOptions{tolerance<T>()});
  for (const Op op_a : {Op::none, Op::conj_trans}) {
    SCOPED_TRACE(std::string("op_a ") + static_cast<char>(op_a));
    check_lll(exec, o, c, op_a, Op::none, scalar<T>(0.5, 0), scalar<T>(2.0, 0), TlrOptions{tolerance<T>()});
  }
}

// ---- Cholesky ------------------------------------------------------------------------------------------

// The dense L of a TLR factor: the lower triangles of the diagonal tiles and the lower tiles.
template <class T>
std::vector<Z> dense_factor(const HostTlr<T>& l, int c) {
  const TlrShape& s = l.shape;
  const int n = static_cast<int>(s.n);
  const std::int64_t b = s.tile, nt = s.tiles();
  const Tlr<const T> v = l.view();
  std::vector<Z> out(std::size_t(n) * n);
  for (std::int64_t i = 0; i < nt; ++i)
    for (std::int64_t j = 0; j <= i; ++j)
      for (std::int64_t col = 0; col < s.rows(j); ++col)
        for (std::int64_t row = 0; row < s.rows(i); ++row) {
          Z x = 0;
          if (i == j) {
            if (row >= col) x = Z(v.diag_tile(c, i)[row + col * b]);
          } else {
            const std::int64_t slot = s.slot(i, j);
            for (int k = 0; k < v.rank[c * s.slots() + slot]; ++k)
              x += Z(v.u_tile(c, slot)[row + k * b]) * std::conj(Z(v.v_tile(c, slot)[col + k * b]));
          }
          out[(i * b + row) + (j * b + col) * n] = x;
        }
  return out;
}

template <class T>
HostTlr<T> run_potrf(Exec& exec, const HostTlr<T>& a, const TlrOptions& options) {
  HostTlr<T> l = a;
  std::fill(l.info.begin(), l.info.end(), TlrInfo{-1, -1, -1, -1, -1, -1});
  std::vector<std::byte> workspace(tlr_potrf_workspace<T>(exec, a.shape));
  on_exec(
      exec,
      [&](auto storage, auto info, auto work) {
        tlr_potrf<T>(exec, tlr_view<T>(l.shape, storage), info, work, options);
      },
      l.storage, l.info, workspace);
  return l;
}

template <class T>
std::vector<T> run_potrs(Exec& exec, const HostTlr<T>& l, std::vector<T> b, int nrhs) {
  const int n = static_cast<int>(l.shape.n), count = static_cast<int>(l.shape.count);
  std::vector<std::byte> workspace(tlr_potrs_workspace<T>(exec, l.shape, nrhs));
  on_exec(
      exec,
      [&](auto storage, auto x, auto info, auto work) {
        tlr_potrs<T>(exec, const_view<T>(l.shape, storage), Batch<T>::packed(x.data(), n, nrhs, count), info, work);
      },
      l.storage, b, l.info, workspace);
  return b;
}

template <class T>
void check_potrf_and_potrs(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("tlr potrf " + solve_suite::what_runs<T>(exec)));
  struct Input {
    Kind kind;
    int n, tile;
    double nugget;
  };
  // The truncations perturb A by up to nt·tol·‖A‖_F, so A's smallest eigenvalue must stay above
  // that or the factorization meets an indefinite Schur complement: a nugget on the kernels and, on
  // the radar covariance (jammer eigenvalues ~ 10⁵ over a noise floor of 1), diagonal loading of
  // a few percent of ‖A‖, as adaptive beamformers load their covariances anyway.
  for (const Input in :
       {Input{Kind::exponential, 150, 32, 0.1}, Input{Kind::matern, 170, 40, 0.1}, Input{Kind::radar, 130, 24, 1e4}}) {
    for (const TlrScope scope : {TlrScope::matrix, TlrScope::tile}) {
      SCOPED_TRACE(name(in.kind) + (scope == TlrScope::tile ? " tile scope" : " matrix scope"));
      const int n = in.n, count = 2, nrhs = 7;
      const TlrOptions options{tolerance<T>(), scope};
      const std::vector<T> dense = make_matrices<T>(in.kind, n, count, rng, in.nugget);
      const HostTlr<T> a = run_compress(exec, dense, TlrShape{n, in.tile, in.tile, count, true}, options);
      const std::vector<T> expanded = run_expand(exec, a);
      const HostTlr<T> l = run_potrf(exec, a, options);
      const std::vector<T> b = test::random_normal<T>(std::size_t(count) * n * nrhs, rng);
      const std::vector<T> x = run_potrs(exec, l, b, nrhs);
      const double nt = static_cast<double>(a.shape.tiles());
      for (int c = 0; c < count; ++c) {
        ASSERT_EQ(l.info[c].status, tlr_status::ok);
        const std::vector<Z> ea = widen(expanded.data() + std::size_t(c) * n * n, std::size_t(n) * n);
        const std::vector<Z> lz = dense_factor(l, c);
        const std::vector<Z> llh = product(Op::none, lz.data(), Op::conj_trans, lz.data(), n, n);
        const double norm = fro(ea.data(), n, n, n);
        // Every truncation of a trailing tile (≤ tol·‖A‖ over all tiles at one step, or tol·‖tile‖)
        // enters A − L·Lᴴ once: at most nt steps' worth, plus Cholesky's n·ε backward error.
        EXPECT_LE(fro_diff(ea.data(), llh.data(), n, n, n), (nt * tolerance<T>() + rounding<T>(n)) * norm)
            << "‖A − L·Lᴴ‖_F";
        EXPECT_NEAR(l.info[c].norm, norm, rounding<T>(n) * norm);
        // Residual: A·X − B = −E·X with E = L·Lᴴ − A, plus the substitutions' n·ε.
        const std::vector<Z> xz = widen(x.data() + std::size_t(c) * n * nrhs, std::size_t(n) * nrhs);
        const std::vector<Z> bz = widen(b.data() + std::size_t(c) * n * nrhs, std::size_t(n) * nrhs);
        const std::vector<Z> ax = product(Op::none, ea.data(), Op::none, xz.data(), n, nrhs);
        EXPECT_LE(fro_diff(ax.data(), bz.data(), n, n, nrhs) / (norm * fro(xz.data(), n, n, nrhs)),
                  nt * tolerance<T>() + rounding<T>(n))
            << "‖A·X − B‖ / (‖A‖‖X‖)";
      }
    }
  }
}

template <class T>
void check_not_positive_definite_reported(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("tlr potrf indefinite " + solve_suite::what_runs<T>(exec)));
  const int n = 140, tile = 32, count = 3, nrhs = 2, column = 2 * tile + 5;  // 0-based, in tile 2
  std::vector<T> dense = make_matrices<T>(Kind::exponential, n, count, rng, 0.1);
  dense[std::size_t(n) * n + column + std::size_t(column) * n] = T(-1);  // matrix 1
  const TlrOptions options{tolerance<T>()};
  const HostTlr<T> a = run_compress(exec, dense, TlrShape{n, tile, tile, count, true}, options);
  const HostTlr<T> l = run_potrf(exec, a, options);
  EXPECT_EQ(l.info[1].status, tlr_status::not_positive_definite);
  EXPECT_EQ(l.info[1].column, column + 1);
  EXPECT_EQ(l.info[0].status, tlr_status::ok);
  EXPECT_EQ(l.info[2].status, tlr_status::ok);
  const std::vector<T> b = test::random_normal<T>(std::size_t(count) * n * nrhs, rng);
  const std::vector<T> x = run_potrs(exec, l, b, nrhs);
  EXPECT_EQ(0, std::memcmp(x.data() + n * nrhs, b.data() + n * nrhs, sizeof(T) * n * nrhs))
      << "potrs must leave the failed matrix's B untouched";
  EXPECT_NE(0, std::memcmp(x.data(), b.data(), sizeof(T) * n * nrhs));
}

}  // namespace covflow::linalg::tlr_suite

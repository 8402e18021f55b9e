// The bodies of the LU, Cholesky and least-squares suites (solve.hpp), one function per test, each
// taking the Exec to run on: solve_test.cpp runs them on the CPU backend, solve_gpu_test.cpp on the
// CUDA backend. On CUDA the run helpers copy the host inputs to the device, run, copy the outputs
// back and synchronise the stream, so every check below reads host arrays exactly as on the CPU
// (checks and generators: solve_cases.hpp).
//
// What they check: backward errors ‖PA − LU‖, ‖A − LLᴴ‖, the solve residual and least-squares
// optimality ≤ 10·n·ε for every order 1 … 32 (the CUDA path's fused kernels) and a few larger (where
// LAPACK blocks and CUDA hands over to cuBLAS / cuSOLVER) on random, ?latms ill-conditioned and
// Hermitian positive definite input, nrhs 1, 3 and 64, every op of getrs; pivots identical to
// LAPACK's ?getrf (on the CPU also the factors, bit for bit); Wilkinson's growth matrix and a
// permuted identity factored exactly; the exact info of a singular column and of a Cholesky failing
// at a chosen minor (lower and upper); batch counts up to 2²⁰ + 7; strided batches with their
// padding untouched; non-finite input flagged alone; results independent of what the workspace
// held; workspace queries that cover the runs. ipiv and info are poisoned before each run.
//
// Where the backends differ by contract, a body says so and checks each side's promise: bit
// identity with LAPACK's factors holds on the CPU only (the CUDA kernels round differently), the
// GPU suite runs every operation at every large count. CUDA code is compiled only where
// COVFLOW_HAS_CUDA is 1, so the CPU-only build compiles this header too.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "covflow/linalg/error.hpp"
#include "covflow/linalg/exec.hpp"
#include "covflow/linalg/qr.hpp"
#include "covflow/linalg/solve.hpp"
#include "lowrank_cases.hpp"
#include "solve_cases.hpp"
#include "test_support.hpp"

#if COVFLOW_HAS_CUDA
#include <cuda_runtime.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::linalg::solve_suite {

using test::SolveCase;
using test::SolveSpec;

// What info and ipiv are filled with before a run: not ok, not any status code, not a row.
inline constexpr int info_poison = 0x7eadbeef;
inline constexpr int ipiv_poison = -7;

// The orders every backward-error test covers: all of 1 … 32 (the CUDA path's fused kernels) and a
// few past LAPACK's block size (64), where ?getrf and ?potrf take their blocked paths.
inline std::vector<int> checked_orders() {
  std::vector<int> orders;
  for (int n = 1; n <= 32; ++n) orders.push_back(n);
  for (const int n : {33, 64, 65, 100}) orders.push_back(n);
  return orders;
}

// The orders of the tests of special matrices: the edges of the CUDA path's sizes and past them.
inline const std::vector<int> special_orders = {1, 2, 3, 5, 17, 31, 32, 33, 64};

// The values once each, in order.
inline std::vector<int> distinct(std::vector<int> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

// nrhs cycles through 1, 3 and 64 with the order (and a shift per use), so that each of them meets
// about a third of the orders 1 … 32.
inline int nrhs_for(int n, int shift = 0) {
  static constexpr int choices[] = {1, 3, 64};
  return choices[(n + shift) % 3];
}

// κ₂ of the ill-conditioned general matrices (?latms): near the edge of T's precision.
template <class T>
double lu_condition() {
  return std::is_same_v<real_t<T>, float> ? 1e5 : 1e12;
}

// κ₂ of the ill-conditioned Hermitian positive definite matrices: two decades inside 1/(n·ε),
// beyond which rounding A to T (or Cholesky's own backward error) may make it indefinite.
template <class T>
double hpd_condition(int n) {
  return std::max(10.0, 1.0 / (100.0 * n * test::eps<T>()));
}

template <class T>
Batch<const T> packed_view(const std::vector<T>& x, int rows, int cols, int count) {
  return Batch<const T>::packed(x.data(), rows, cols, count);
}
// A view of a temporary would dangle.
template <class T>
Batch<const T> packed_view(const std::vector<T>&& x, int rows, int cols, int count) = delete;

inline std::string element_name(ElementType type) { return std::string(name(type)); }

// "cpu f32", "cuda cf64": what a printed line or a seed is about.
template <class T>
std::string what_runs(const Exec& exec) {
  return std::string(name(exec.backend())) + " " + element_name(element_type_of<T>());
}

inline void print_worst(const std::string& what, const std::string& measure, double worst, const char* unit = "n·ε") {
  std::printf("[ errors   ] %s — max %s %.3f %s (tolerance %.0f)\n", what.c_str(), measure.c_str(), worst, unit,
              test::solve_tolerance);
  std::fflush(stdout);
}

// ---- running where the Exec runs ------------------------------------------------------------------

#if COVFLOW_HAS_CUDA
// A device copy of one host array for the length of one call: uploaded when made, copied back by
// download() unless the host array is const (an input only).
template <class Array>
class DeviceMirror {
 public:
  using Element = typename std::remove_const_t<Array>::value_type;
  DeviceMirror(Array& host, cudaStream_t stream) : host_(&host), device_(host.size()) {
    if (!host.empty()) device_.upload(std::span<const Element>(host), stream);
  }
  auto span() const {
    if constexpr (std::is_const_v<Array>) return std::span<const Element>(device_.data(), device_.size());
    else return std::span<Element>(device_.data(), device_.size());
  }
  void download(cudaStream_t stream) {
    if constexpr (!std::is_const_v<Array>)
      if (!host_->empty()) device_.download(std::span<Element>(*host_), stream);
  }

 private:
  Array* host_;
  cuda::DeviceBuffer<Element> device_;
};
#endif

// Calls `call` with one span per array, over memory where `exec` runs: the host arrays themselves
// on the CPU; on CUDA, device copies uploaded before the call and, for the arrays that are not
// const, downloaded after it, the stream synchronised — so the caller checks host arrays on either
// backend. An empty array gives an empty span.
template <class Call, class... Arrays>
void on_exec(Exec& exec, Call&& call, Arrays&... arrays) {
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) {
    const cudaStream_t stream = exec.cuda_context().stream();
    std::tuple<DeviceMirror<Arrays>...> mirrors{DeviceMirror<Arrays>(arrays, stream)...};
    std::apply([&](auto&... mirror) { call(mirror.span()...); }, mirrors);
    std::apply([&](auto&... mirror) { (mirror.download(stream), ...); }, mirrors);
    exec.synchronize();
    return;
  }
#endif
  call(std::span(arrays)...);
}

// A new Exec of exec's kind: CPU with as many threads, or CUDA on the same device — with a
// workspace that no call has used yet.
inline Exec another_like(Exec& exec) {
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) {
    CudaOptions options;
    options.device = exec.cuda_context().device();
    return Exec::cuda(options);
  }
#endif
  return Exec::cpu(exec.pool().size());
}

// Grows exec's workspace to at least `bytes` and writes garbage over all of it: 0xff bytes (a NaN
// in every floating-point type) or random ones.
inline void dirty_workspace(Exec& exec, std::size_t bytes, bool random_bytes, std::mt19937_64& rng) {
  void* base = exec.workspace().acquire(bytes);
  const std::size_t capacity = exec.workspace().capacity();
#if COVFLOW_HAS_CUDA
  if (exec.is_cuda()) {
    const cudaStream_t stream = exec.cuda_context().stream();
    if (random_bytes) {
      std::vector<unsigned char> garbage(capacity);
      for (unsigned char& x : garbage) x = static_cast<unsigned char>(rng());
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(base, garbage.data(), capacity, cudaMemcpyHostToDevice, stream));
    } else {
      COVFLOW_CUDA_TRY(cudaMemsetAsync(base, 0xff, capacity, stream));
    }
    exec.synchronize();
    return;
  }
#endif
  auto* garbage = static_cast<unsigned char*>(base);
  for (std::size_t i = 0; i < capacity; ++i) garbage[i] = random_bytes ? static_cast<unsigned char>(rng()) : 0xff;
}

// ---- runs -----------------------------------------------------------------------------------------

// The outputs of one call, on the host: A (factors), B (solutions), ipiv, info.
template <class T>
struct Run {
  std::vector<T> a, b;
  std::vector<int> ipiv, info;
};

template <class T>
Run<T> run_getrf(Exec& exec, const SolveCase<T>& c) {
  const int n = c.n(), count = c.count();
  Run<T> run{c.a, {}, std::vector<int>(std::size_t(count) * n, ipiv_poison), std::vector<int>(count, info_poison)};
  on_exec(
      exec,
      [&](auto a, auto ipiv, auto info) { getrf<T>(exec, Batch<T>::packed(a.data(), n, n, count), ipiv, info); },
      run.a, run.ipiv, run.info);
  return run;
}

template <class T>
Run<T> run_gesv(Exec& exec, const SolveCase<T>& c, const std::vector<T>& b, int nrhs) {
  const int n = c.n(), count = c.count();
  Run<T> run{c.a, b, std::vector<int>(std::size_t(count) * n, ipiv_poison), std::vector<int>(count, info_poison)};
  on_exec(
      exec,
      [&](auto a, auto x, auto ipiv, auto info) {
        gesv<T>(exec, Batch<T>::packed(a.data(), n, n, count), ipiv, Batch<T>::packed(x.data(), n, nrhs, count), info);
      },
      run.a, run.b, run.ipiv, run.info);
  return run;
}

// getrs with op on the factors and pivots given (packed n × n), on a copy of b (packed n × nrhs).
template <class T>
std::vector<T> run_getrs(Exec& exec, Op op, const std::vector<T>& lu, const std::vector<int>& ipiv,
                         std::vector<T> b, int n, int nrhs, int count) {
  on_exec(
      exec,
      [&](auto factors, auto pivots, auto x) {
        getrs<T>(exec, op, Batch<const T>::packed(factors.data(), n, n, count), pivots,
                 Batch<T>::packed(x.data(), n, nrhs, count));
      },
      lu, ipiv, b);
  return b;
}

template <class T>
Run<T> run_potrf(Exec& exec, Uplo uplo, const SolveCase<T>& c, const std::vector<T>* input = nullptr) {
  const int n = c.n(), count = c.count();
  Run<T> run{input ? *input : c.a, {}, {}, std::vector<int>(count, info_poison)};
  on_exec(
      exec, [&](auto a, auto info) { potrf<T>(exec, uplo, Batch<T>::packed(a.data(), n, n, count), info); }, run.a,
      run.info);
  return run;
}

// potrs with the factor given (packed n × n), on a copy of b (packed n × nrhs).
template <class T>
std::vector<T> run_potrs(Exec& exec, Uplo uplo, const std::vector<T>& factor, std::vector<T> b, int n, int nrhs,
                         int count) {
  on_exec(
      exec,
      [&](auto l, auto x) {
        potrs<T>(exec, uplo, Batch<const T>::packed(l.data(), n, n, count), Batch<T>::packed(x.data(), n, nrhs, count));
      },
      factor, b);
  return b;
}

template <class T>
Run<T> run_posv(Exec& exec, Uplo uplo, const SolveCase<T>& c, const std::vector<T>& b, int nrhs) {
  const int n = c.n(), count = c.count();
  Run<T> run{c.a, b, {}, std::vector<int>(count, info_poison)};
  on_exec(
      exec,
      [&](auto a, auto x, auto info) {
        posv<T>(exec, uplo, Batch<T>::packed(a.data(), n, n, count), Batch<T>::packed(x.data(), n, nrhs, count), info);
      },
      run.a, run.b, run.info);
  return run;
}

template <class T>
Run<T> run_gels(Exec& exec, const SolveCase<T>& c, const std::vector<T>& b, int nrhs) {
  const int m = c.m(), n = c.n(), count = c.count();
  Run<T> run{c.a, b, {}, std::vector<int>(count, info_poison)};
  on_exec(
      exec,
      [&](auto a, auto x, auto info) {
        gels<T>(exec, Batch<T>::packed(a.data(), m, n, count), Batch<T>::packed(x.data(), m, nrhs, count), info);
      },
      run.a, run.b, run.info);
  return run;
}

// geqrf's output for the case: A (R and the reflectors), tau and info, tau and info poisoned.
template <class T>
struct QrRun {
  std::vector<T> a, tau;
  std::vector<int> info;
};
template <class T>
QrRun<T> run_geqrf(Exec& exec, const SolveCase<T>& c) {
  const int m = c.m(), n = c.n(), count = c.count();
  QrRun<T> run{c.a, std::vector<T>(std::size_t(count) * std::min(m, n), test::poison<T>()),
               std::vector<int>(count, info_poison)};
  on_exec(
      exec, [&](auto a, auto tau, auto info) { geqrf<T>(exec, Batch<T>::packed(a.data(), m, n, count), tau, info); },
      run.a, run.tau, run.info);
  return run;
}

template <class T>
std::vector<T> right_hand_sides(int rows, int nrhs, int count, std::mt19937_64& rng) {
  return test::random_normal<T>(std::size_t(count) * rows * nrhs, rng);
}

template <class T>
bool same_bits(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

// ---- LU -------------------------------------------------------------------------------------------

// ‖PA − LU‖ on random and ?latms matrices (modes 1–5 in turn, κ at the edge of T's precision); the
// pivots identical to a direct LAPACK ?getrf's, and on the CPU (LAPACK itself) the factors bit for
// bit its too.
template <class T>
void check_getrf_backward_error_and_lapack_pivots(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("getrf " + std::string(name(exec.backend()))));
  double worst = 0;
  for (const int n : checked_orders()) {
    std::vector<SolveSpec> specs = {SolveSpec::random(n, n, 3)};
    if (n > 1) specs.push_back(SolveSpec::latms(n, n, 2, 1 + n % 5, lu_condition<T>()));
    for (const SolveSpec& spec : specs) {
      const SolveCase<T> c = test::make_solve_case<T>(spec, rng);
      const Run<T> run = run_getrf(exec, c);
      worst = test::worst_of(worst, test::expect_getrf_results(c, packed_view(run.a, n, n, c.count()), run.ipiv.data(),
                                                               run.info.data(), "getrf"));
      if (exec.is_cuda()) continue;
      for (int b = 0; b < c.count(); ++b) {
        const test::LapackLu<T> reference = test::lapack_getrf(c.matrix(b), n, n);
        EXPECT_TRUE(test::bitwise_equal(run.a.data() + std::size_t(b) * n * n, n, reference.lu.data(), n, n, n))
            << c.label() << " b=" << b << ": the factors differ from LAPACK's ?getrf";
      }
    }
  }
  print_worst("getrf " + what_runs<T>(exec), "‖PA − LU‖_F/‖A‖_F", worst);
}

// gesv's residual for nrhs 1, 3 and 64; its factors and pivots are getrf's.
template <class T>
void check_gesv_residual(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("gesv " + std::string(name(exec.backend()))));
  double worst = 0;
  for (const int n : checked_orders()) {
    std::vector<SolveSpec> specs = {SolveSpec::random(n, n, 2)};
    if (n > 1) specs.push_back(SolveSpec::latms(n, n, 2, 1 + (n + 2) % 5, lu_condition<T>()));
    for (const SolveSpec& spec : specs)
      for (const int nrhs : {1, 3, 64}) {
        if (n > 32 && nrhs != nrhs_for(n)) continue;
        const SolveCase<T> c = test::make_solve_case<T>(spec, rng);
        const std::vector<T> b = right_hand_sides<T>(n, nrhs, c.count(), rng);
        const Run<T> run = run_gesv(exec, c, b, nrhs);
        EXPECT_EQ(run.info, std::vector<int>(c.count(), 0)) << c.label();
        worst = test::worst_of(worst, test::expect_solve_results(c, Op::none, b.data(), nrhs,
                                                                 packed_view(run.b, n, nrhs, c.count()),
                                                                 run.info.data(), "gesv"));
        const Run<T> factored = run_getrf(exec, c);
        EXPECT_TRUE(same_bits(run.a, factored.a)) << c.label() << ": gesv's factors differ from getrf's";
        EXPECT_EQ(run.ipiv, factored.ipiv) << c.label() << ": gesv's pivots differ from getrf's";
      }
  }
  print_worst("gesv " + what_runs<T>(exec), "‖AX − B‖_F/(‖A‖_F‖X‖_F + ‖B‖_F)", worst);
}

// getrs with op none, trans and conj_trans on getrf's factors.
template <class T>
void check_getrs_every_op(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("getrs " + std::string(name(exec.backend()))));
  double worst = 0;
  for (const int n : checked_orders()) {
    std::vector<SolveSpec> specs = {SolveSpec::random(n, n, 2)};
    if (n > 1) specs.push_back(SolveSpec::latms(n, n, 2, 1 + (n + 4) % 5, lu_condition<T>()));
    for (const SolveSpec& spec : specs) {
      const SolveCase<T> c = test::make_solve_case<T>(spec, rng);
      const Run<T> lu = run_getrf(exec, c);
      int shift = 0;
      for (const Op op : {Op::none, Op::trans, Op::conj_trans}) {
        const int nrhs = nrhs_for(n, shift++);
        const std::vector<T> b = right_hand_sides<T>(n, nrhs, c.count(), rng);
        const std::vector<T> x = run_getrs(exec, op, lu.a, lu.ipiv, b, n, nrhs, c.count());
        worst = test::worst_of(worst, test::expect_solve_results(c, op, b.data(), nrhs,
                                                                 packed_view(x, n, nrhs, c.count()), nullptr, "getrs"));
      }
    }
  }
  print_worst("getrs " + what_runs<T>(exec), "‖op(A)X − B‖_F/(‖A‖_F‖X‖_F + ‖B‖_F)", worst);
}

// Wilkinson's growth matrix: no interchange, L(i, j) = −1 below the diagonal, U = I but for its
// last column 2^i — exact on either backend (every step is exact in binary floating point), and on
// the CPU bit for bit LAPACK's. Up to 2^63 in U: no overflow in float.
template <class T>
void check_wilkinson_growth_matrix(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("getrf " + std::string(name(exec.backend())) + " wilkinson"));
  std::vector<int> orders = checked_orders();
  orders.erase(std::remove(orders.begin(), orders.end(), 100), orders.end());
  for (const int n : orders) {
    const SolveCase<T> c = test::make_solve_case<T>(SolveSpec::wilkinson(n, 2), rng);
    const Run<T> run = run_getrf(exec, c);
    // lu_error forms L·U in double for float T: exact while its partial sums, up to 2^(n−1), fit
    // in 53 bits.
    if (n <= 33) {
      EXPECT_EQ(test::expect_getrf_results(c, packed_view(run.a, n, n, c.count()), run.ipiv.data(), run.info.data(),
                                           "getrf wilkinson"),
                0.0)
          << c.label() << ": the factorization is exact";
    }
    const test::LapackLu<T> reference = test::lapack_getrf(c.matrix(0), n, n);
    for (int b = 0; b < c.count(); ++b) {
      const T* lu = run.a.data() + std::size_t(b) * n * n;
      if (!exec.is_cuda()) {
        EXPECT_TRUE(test::bitwise_equal(lu, n, reference.lu.data(), n, n, n)) << c.label() << ": differs from LAPACK";
      }
      int wrong = 0;
      for (int j = 0; j < n; ++j) {
        wrong += run.ipiv[std::size_t(b) * n + j] != j + 1;
        for (int i = 0; i < n; ++i) {
          const T expected = i > j ? T(-1) : j == n - 1 ? T(std::ldexp(real_t<T>(1), i)) : T(i == j ? 1 : 0);
          wrong += lu[i + std::size_t(j) * n] != expected;
        }
      }
      EXPECT_EQ(wrong, 0) << c.label() << " b=" << b << ": entries of ipiv, L or U differ from the exact factors";
    }
  }
}

// A permuted identity: L = U = I exactly, the interchanges undo the permutation, and every op of
// getrs (and gesv) solves exactly.
template <class T>
void check_permuted_identity(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("getrf " + std::string(name(exec.backend())) + " permuted identity"));
  for (const int n : special_orders) {
    const SolveCase<T> c = test::make_solve_case<T>(SolveSpec::permuted_identity(n, 3), rng);
    const Run<T> run = run_getrf(exec, c);
    test::expect_getrf_results(c, packed_view(run.a, n, n, c.count()), run.ipiv.data(), run.info.data(),
                               "getrf permuted identity");
    for (int b = 0; b < c.count(); ++b) {
      int wrong = 0;
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) wrong += run.a[std::size_t(b) * n * n + i + std::size_t(j) * n] != T(i == j ? 1 : 0);
      EXPECT_EQ(wrong, 0) << c.label() << " b=" << b << ": L and U are not I";
    }
    for (const Op op : {Op::none, Op::trans, Op::conj_trans}) {
      const int nrhs = 3;
      const std::vector<T> b = right_hand_sides<T>(n, nrhs, c.count(), rng);
      const std::vector<T> x = run_getrs(exec, op, run.a, run.ipiv, b, n, nrhs, c.count());
      for (int m = 0; m < c.count(); ++m)
        EXPECT_EQ(test::solve_residual(op, c.matrix(m), n, n, x.data() + std::size_t(m) * n * nrhs, n,
                                       b.data() + std::size_t(m) * n * nrhs, n, nrhs),
                  0.0)
            << c.label() << " b=" << m << " op " << static_cast<char>(op) << ": X is not exact";
    }
    const std::vector<T> b = right_hand_sides<T>(n, 2, c.count(), rng);
    const Run<T> solved = run_gesv(exec, c, b, 2);
    for (int m = 0; m < c.count(); ++m)
      EXPECT_EQ(test::solve_residual(Op::none, c.matrix(m), n, n, solved.b.data() + std::size_t(m) * n * 2, n,
                                     b.data() + std::size_t(m) * n * 2, n, 2),
                0.0)
          << c.label() << " b=" << m << ": gesv's X is not exact";
  }
}

// A matrix whose column k is exactly zero: getrf's info is k + 1, the factorization is complete
// (finite, LAPACK's pivots; on the CPU LAPACK's factors); gesv reports the same and leaves B
// untouched.
template <class T>
void check_singular_column(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("getrf " + std::string(name(exec.backend())) + " singular"));
  for (const int n : special_orders)
    for (const int column : distinct({0, n / 2, n - 1})) {
      const SolveCase<T> c = test::make_solve_case<T>(SolveSpec::singular_column(n, n, 3, column), rng);
      const Run<T> run = run_getrf(exec, c);
      test::expect_getrf_results(c, packed_view(run.a, n, n, c.count()), run.ipiv.data(), run.info.data(),
                                 "getrf singular column");
      if (!exec.is_cuda()) {
        for (int b = 0; b < c.count(); ++b)
          EXPECT_TRUE(test::bitwise_equal(run.a.data() + std::size_t(b) * n * n, n,
                                          test::lapack_getrf(c.matrix(b), n, n).lu.data(), n, n, n))
              << c.label() << " b=" << b << ": the factors differ from LAPACK's ?getrf";
      }
      const int nrhs = nrhs_for(n);
      const std::vector<T> b = right_hand_sides<T>(n, nrhs, c.count(), rng);
      const Run<T> solved = run_gesv(exec, c, b, nrhs);
      EXPECT_EQ(solved.info, run.info) << c.label();
      EXPECT_TRUE(same_bits(solved.a, run.a)) << c.label() << ": gesv's factors differ from getrf's";
      test::expect_solve_results(c, Op::none, b.data(), nrhs, packed_view(solved.b, n, nrhs, c.count()),
                                 solved.info.data(), "gesv singular column");
    }
}

// ---- Cholesky -------------------------------------------------------------------------------------

// Whether the `uplo` triangle, diagonal included, of the packed n×n matrices x and y is bit for bit
// the same.
template <class T>
bool same_triangle(Uplo uplo, const T* x, const T* y, int n) {
  const Uplo other = uplo == Uplo::lower ? Uplo::upper : Uplo::lower;
  return test::other_triangle_unchanged(other, x, n, y, n, n) && test::bitwise_equal(x, n + 1, y, n + 1, 1, n);
}

// The other triangle of `a` (packed n×n matrices) set to NaN, and for complex T the diagonal's
// imaginary parts too: potrf must read neither.
template <class T>
std::vector<T> poison_unread(std::vector<T> a, Uplo uplo, int n, int count) {
  for (int b = 0; b < count; ++b) {
    T* m = a.data() + std::size_t(b) * n * n;
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < n; ++i)
        if (uplo == Uplo::lower ? i < j : i > j) m[i + std::size_t(j) * n] = test::poison<T>();
      if constexpr (is_complex_v<T>) m[j + std::size_t(j) * n].imag(std::numeric_limits<real_t<T>>::quiet_NaN());
    }
  }
  return a;
}

// ‖A − LLᴴ‖ (lower) and ‖A − UᴴU‖ (upper) on Hermitian positive definite matrices, κ = 10 and
// κ = 1/(100·n·ε); the other triangle is left as it was, and neither it nor the diagonal's imaginary
// parts are read: poisoned with NaN, the factor is bit for bit the same.
template <class T>
void check_potrf_backward_error(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("potrf " + std::string(name(exec.backend()))));
  for (const Uplo uplo : {Uplo::lower, Uplo::upper}) {
    double worst = 0;
    for (const int n : checked_orders())
      for (const double cond : {10.0, hpd_condition<T>(n)}) {
        const SolveCase<T> c = test::make_solve_case<T>(SolveSpec::hpd(n, 2, cond, 1 + n % 5), rng);
        const Run<T> run = run_potrf(exec, uplo, c);
        worst = test::worst_of(worst, test::expect_potrf_results(c, uplo, packed_view(run.a, n, n, c.count()),
                                                                 run.info.data(), "potrf"));
        const std::vector<T> poisoned = poison_unread(c.a, uplo, n, c.count());
        const Run<T> blind = run_potrf(exec, uplo, c, &poisoned);
        EXPECT_EQ(blind.info, run.info) << c.label();
        for (int b = 0; b < c.count(); ++b) {
          const std::size_t at = std::size_t(b) * n * n;
          EXPECT_TRUE(test::other_triangle_unchanged(uplo, c.a.data() + at, n, run.a.data() + at, n, n))
              << c.label() << " b=" << b << ": potrf wrote the other triangle";
          EXPECT_TRUE(test::other_triangle_unchanged(uplo, poisoned.data() + at, n, blind.a.data() + at, n, n))
              << c.label() << " b=" << b << ": potrf wrote the other triangle (poisoned)";
          EXPECT_TRUE(same_triangle(uplo, run.a.data() + at, blind.a.data() + at, n))
              << c.label() << " b=" << b << ": the factor depends on the other triangle or the diagonal's imaginary parts";
        }
      }
    print_worst(std::string("potrf ") + static_cast<char>(uplo) + " " + what_runs<T>(exec),
                uplo == Uplo::lower ? "‖A − LLᴴ‖_F/‖A‖_F" : "‖A − UᴴU‖_F/‖A‖_F", worst);
  }
}

// potrs on potrf's factor and posv, lower and upper, nrhs 1, 3 and 64; posv bit for bit potrf then
// potrs.
template <class T>
void check_potrs_and_posv_residual(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("potrs posv " + std::string(name(exec.backend()))));
  double worst = 0;
  for (const Uplo uplo : {Uplo::lower, Uplo::upper})
    for (const int n : checked_orders()) {
      const SolveCase<T> c = test::make_solve_case<T>(SolveSpec::hpd(n, 2, hpd_condition<T>(n), 1 + (n + 1) % 5), rng);
      const int nrhs = nrhs_for(n, uplo == Uplo::upper);
      const std::vector<T> b = right_hand_sides<T>(n, nrhs, c.count(), rng);
      const Run<T> factor = run_potrf(exec, uplo, c);
      const std::vector<T> x = run_potrs(exec, uplo, factor.a, b, n, nrhs, c.count());
      worst = test::worst_of(worst, test::expect_solve_results(c, Op::none, b.data(), nrhs,
                                                               packed_view(x, n, nrhs, c.count()), nullptr, "potrs"));
      const Run<T> run = run_posv(exec, uplo, c, b, nrhs);
      EXPECT_EQ(run.info, std::vector<int>(c.count(), 0)) << c.label();
      EXPECT_TRUE(same_bits(run.a, factor.a)) << c.label() << ": posv's factor differs from potrf's";
      EXPECT_TRUE(same_bits(run.b, x)) << c.label() << ": posv's X differs from potrs's";
    }
  print_worst("potrs " + what_runs<T>(exec), "‖AX − B‖_F/(‖A‖_F‖X‖_F + ‖B‖_F)", worst);
}

// A Hermitian matrix whose leading minor of order k is the first not positive definite: potrf and
// posv report exactly k, lower and upper; the leading (k − 1)-order block holds its factor; posv
// leaves B untouched.
template <class T>
void check_cholesky_fails_at_the_chosen_minor(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("potrf " + std::string(name(exec.backend())) + " failing minor"));
  for (const Uplo uplo : {Uplo::lower, Uplo::upper})
    for (const int n : special_orders)
      for (const int minor : distinct({1, n / 2 + 1, n})) {
        const SolveCase<T> c = test::make_solve_case<T>(SolveSpec::cholesky_fails_at(n, 3, minor), rng);
        const Run<T> run = run_potrf(exec, uplo, c);
        test::expect_potrf_results(c, uplo, packed_view(run.a, n, n, c.count()), run.info.data(), "potrf failing");
        // Neither the other triangle nor the diagonal's imaginary parts are read, also past the
        // failing minor: poisoned with NaN, the triangle comes out bit for bit the same.
        const std::vector<T> poisoned = poison_unread(c.a, uplo, n, c.count());
        const Run<T> blind = run_potrf(exec, uplo, c, &poisoned);
        EXPECT_EQ(blind.info, run.info) << c.label();
        for (int b = 0; b < c.count(); ++b) {
          const std::size_t at = std::size_t(b) * n * n;
          EXPECT_TRUE(test::other_triangle_unchanged(uplo, c.a.data() + at, n, run.a.data() + at, n, n))
              << c.label() << " b=" << b << ": potrf wrote the other triangle";
          EXPECT_TRUE(same_triangle(uplo, run.a.data() + at, blind.a.data() + at, n))
              << c.label() << " b=" << b << ": the partial factor depends on what potrf must not read";
        }
        const int nrhs = nrhs_for(n);
        const std::vector<T> b = right_hand_sides<T>(n, nrhs, c.count(), rng);
        const Run<T> solved = run_posv(exec, uplo, c, b, nrhs);
        EXPECT_EQ(solved.info, std::vector<int>(c.count(), minor)) << c.label() << " uplo " << static_cast<char>(uplo);
        test::expect_solve_results(c, Op::none, b.data(), nrhs, packed_view(solved.b, n, nrhs, c.count()),
                                   solved.info.data(), "posv failing");
      }
}

// ---- least squares --------------------------------------------------------------------------------

// gels on m × n, n ≤ m ≤ 4n, random and ?latms (κ at the edge of T's precision): the normal
// equations, R against AᴴA and the residual's norm in the rows below X. Its A is bit for bit
// geqrf's, whose ‖A − QR‖ and ‖QᴴQ − I‖ are checked too (the QR route).
template <class T>
void check_gels_tall_least_squares(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("gels " + std::string(name(exec.backend()))));
  test::LeastSquaresErrors worst;
  test::QrErrors worst_qr;
  for (const int n : checked_orders()) {
    if (n > 33) continue;  // ?geqrf is unblocked below n = 128: larger n adds time, not a path
    for (const int m : distinct({n, std::min(2 * n + 1, 4 * n), 4 * n})) {
      const int nrhs = nrhs_for(n + m);
      std::vector<SolveSpec> specs = {SolveSpec::random(m, n, 2)};
      if (n > 1) specs.push_back(SolveSpec::latms(m, n, 1, 1 + (n + m) % 5, lu_condition<T>()));
      for (const SolveSpec& spec : specs) {
        const SolveCase<T> c = test::make_solve_case<T>(spec, rng);
        const std::vector<T> b = right_hand_sides<T>(m, nrhs, c.count(), rng);
        const Run<T> run = run_gels(exec, c, b, nrhs);
        worst = test::worst_of(worst, test::expect_gels_results(c, packed_view(run.a, m, n, c.count()), b.data(), nrhs,
                                                                packed_view(run.b, m, nrhs, c.count()),
                                                                run.info.data(), "gels"));
        const QrRun<T> qr = run_geqrf(exec, c);
        EXPECT_TRUE(same_bits(run.a, qr.a)) << c.label() << ": gels's A differs from geqrf's";
        for (int k = 0; k < c.count(); ++k) {
          const test::QrErrors e = test::qr_errors(c.matrix(k), m, n, qr.a.data() + std::size_t(k) * m * n, m,
                                                   qr.tau.data() + std::size_t(k) * n);
          EXPECT_LE(e.residual, test::lowrank_tolerance) << c.label() << ": ‖A − QR‖_F/‖A‖_F = " << e.residual;
          EXPECT_LE(e.orthogonality, test::lowrank_tolerance) << c.label() << ": ‖QᴴQ − I‖_F = " << e.orthogonality;
          worst_qr = test::max_errors(worst_qr, e);
        }
      }
    }
  }
  const std::string what = what_runs<T>(exec);
  print_worst("gels " + what, "‖Aᴴ(AX − B)‖_F/(‖A‖_F(‖A‖_F‖X‖_F + ‖B‖_F))", worst.optimality, "m·ε");
  print_worst("gels " + what, "‖AᴴA − RᴴR‖_F/‖A‖_F²", worst.r_gram, "m·ε");
  print_worst("gels " + what, "| ‖AX − B‖ − ‖(QᴴB)(n:m)‖ |/(‖A‖_F‖x‖ + ‖b‖)", worst.residual_norm, "m·ε");
  print_worst("gels (geqrf) " + what, "‖A − QR‖_F/‖A‖_F", worst_qr.residual, "m·ε");
  print_worst("gels (geqrf) " + what, "‖QᴴQ − I‖_F", worst_qr.orthogonality, "m·ε");
}

// Rank-deficient A with an exactly zero column k (n = 1: A = 0): info = k + 1, B untouched, A
// geqrf's output.
template <class T>
void check_gels_rank_deficient(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("gels " + std::string(name(exec.backend())) + " rank deficient"));
  for (const int n : special_orders)
    for (const int m : distinct({n, 2 * n, 4 * n}))
      for (const int column : distinct({0, n / 2, n - 1})) {
        const SolveCase<T> c = test::make_solve_case<T>(SolveSpec::singular_column(m, n, 2, column), rng);
        const int nrhs = nrhs_for(column);
        const std::vector<T> b = right_hand_sides<T>(m, nrhs, c.count(), rng);
        const Run<T> run = run_gels(exec, c, b, nrhs);
        test::expect_gels_results(c, packed_view(run.a, m, n, c.count()), b.data(), nrhs,
                                  packed_view(run.b, m, nrhs, c.count()), run.info.data(), "gels rank deficient");
        const QrRun<T> qr = run_geqrf(exec, c);
        EXPECT_TRUE(same_bits(run.a, qr.a)) << c.label() << ": gels's A differs from geqrf's";
      }
}

// ---- shapes, counts and layouts -------------------------------------------------------------------

// nrhs = 0: gesv, posv and gels only factor (B is never touched, even null), bit for bit as getrf,
// potrf and geqrf.
template <class T>
void check_no_right_hand_sides_only_factors(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("solve " + std::string(name(exec.backend())) + " nrhs 0"));
  for (const int n : {1, 7, 32}) {
    const SolveCase<T> general = test::make_solve_case<T>(SolveSpec::random(n, n, 3), rng);
    Run<T> lu{general.a, {}, std::vector<int>(3 * n, ipiv_poison), std::vector<int>(3, info_poison)};
    on_exec(
        exec,
        [&](auto a, auto ipiv, auto info) {
          gesv<T>(exec, Batch<T>::packed(a.data(), n, n, 3), ipiv, Batch<T>{nullptr, n, 0, n, 0, 3}, info);
        },
        lu.a, lu.ipiv, lu.info);
    const Run<T> reference = run_getrf(exec, general);
    EXPECT_TRUE(same_bits(lu.a, reference.a));
    EXPECT_EQ(lu.ipiv, reference.ipiv);
    EXPECT_EQ(lu.info, reference.info);

    const SolveCase<T> hpd = test::make_solve_case<T>(SolveSpec::hpd(n, 3, 100.0), rng);
    for (const Uplo uplo : {Uplo::lower, Uplo::upper}) {
      Run<T> chol{hpd.a, {}, {}, std::vector<int>(3, info_poison)};
      on_exec(
          exec,
          [&](auto a, auto info) {
            posv<T>(exec, uplo, Batch<T>::packed(a.data(), n, n, 3), Batch<T>{nullptr, n, 0, n, 0, 3}, info);
          },
          chol.a, chol.info);
      const Run<T> factor = run_potrf(exec, uplo, hpd);
      EXPECT_TRUE(same_bits(chol.a, factor.a));
      EXPECT_EQ(chol.info, factor.info);
    }

    const SolveCase<T> tall = test::make_solve_case<T>(SolveSpec::random(2 * n, n, 3), rng);
    Run<T> ls{tall.a, {}, {}, std::vector<int>(3, info_poison)};
    on_exec(
        exec,
        [&](auto a, auto info) {
          gels<T>(exec, Batch<T>::packed(a.data(), 2 * n, n, 3), Batch<T>{nullptr, 2 * n, 0, 2 * n, 0, 3}, info);
        },
        ls.a, ls.info);
    const QrRun<T> qr = run_geqrf(exec, tall);
    EXPECT_TRUE(same_bits(ls.a, qr.a));
    EXPECT_EQ(ls.info, std::vector<int>(3, 0));
  }
}

// The indices checked in a batch of `count`: all up to 4 096; beyond, every 61st and the first and
// last four of each block of 65 536 (the CUDA grid's limit) and of the batch — enough to see a
// mixed-up index, at a fraction of the checks' time.
inline std::vector<int> checked_indices(std::int64_t count) {
  std::vector<int> which;
  for (std::int64_t b = 0; b < count; ++b) {
    const std::int64_t in_block = b % 65536;
    if (count <= 4096 || b % 61 == 0 || in_block < 4 || in_block >= 65532 || b >= count - 4)
      which.push_back(static_cast<int>(b));
  }
  return which;
}

// Matrices `which` of c as a case of their own (expected_info and the label kept).
template <class T>
SolveCase<T> subset(const SolveCase<T>& c, const std::vector<int>& which) {
  SolveCase<T> out = c;
  out.spec.count = static_cast<int>(which.size());
  out.a = {};
  const std::size_t per_matrix = std::size_t(c.m()) * c.n();
  for (const int b : which) out.a.insert(out.a.end(), c.matrix(b), c.matrix(b) + per_matrix);
  return out;
}

// The slices `which` (per_matrix elements each) of a batch's array.
template <class X>
std::vector<X> gather(const std::vector<X>& x, std::size_t per_matrix, const std::vector<int>& which) {
  std::vector<X> out;
  out.reserve(which.size() * per_matrix);
  for (const int b : which) out.insert(out.end(), x.begin() + b * per_matrix, x.begin() + (b + 1) * per_matrix);
  return out;
}

enum class Operation { getrf, getrs, gesv, potrf, potrs, posv, gels };

inline const char* name(Operation operation) {
  switch (operation) {
    case Operation::getrf: return "getrf";
    case Operation::getrs: return "getrs";
    case Operation::gesv: return "gesv";
    case Operation::potrf: return "potrf";
    case Operation::potrs: return "potrs";
    case Operation::posv: return "posv";
    case Operation::gels: return "gels";
  }
  return "?";
}

// One batch of `count` through one operation, nrhs 1: n × n matrices (gels: (n + 1) × n), every
// info 0, and the results of checked_indices(count) passing the checks. Cholesky runs lower for
// odd counts and upper for even ones; getrs takes op none, trans and conj_trans by count mod 3;
// getrs and potrs solve with the factors getrf and potrf gave.
template <class T>
void check_batch_count(Exec& exec, Operation operation, int n, int count, std::mt19937_64& rng) {
  const bool least_squares = operation == Operation::gels;
  const bool lu = operation == Operation::getrf || operation == Operation::getrs || operation == Operation::gesv;
  const bool solves = operation != Operation::getrf && operation != Operation::potrf;
  const int m = least_squares ? n + 1 : n, nrhs = 1;
  const std::vector<int> which = checked_indices(count);
  const SolveCase<T> c = test::make_solve_case<T>(
      least_squares ? SolveSpec::random(m, n, count) : SolveSpec::dominant(n, count), rng);
  const SolveCase<T> sampled = subset(c, which);
  const std::vector<T> b = solves ? right_hand_sides<T>(m, nrhs, count, rng) : std::vector<T>{};
  const std::vector<T> b_sampled = gather(b, m * nrhs, solves ? which : std::vector<int>{});
  const Uplo uplo = count % 2 ? Uplo::lower : Uplo::upper;
  const Op op = std::array<Op, 3>{Op::none, Op::trans, Op::conj_trans}[count % 3];
  const std::string what = std::string(name(operation)) + " n=" + std::to_string(n) + " count " + std::to_string(count);

  Run<T> run;
  switch (operation) {
    case Operation::getrf: run = run_getrf(exec, c); break;
    case Operation::getrs:
      run = run_getrf(exec, c);
      run.b = run_getrs(exec, op, run.a, run.ipiv, b, n, nrhs, count);
      break;
    case Operation::gesv: run = run_gesv(exec, c, b, nrhs); break;
    case Operation::potrf: run = run_potrf(exec, uplo, c); break;
    case Operation::potrs:
      run = run_potrf(exec, uplo, c);
      run.b = run_potrs(exec, uplo, run.a, b, n, nrhs, count);
      break;
    case Operation::posv: run = run_posv(exec, uplo, c, b, nrhs); break;
    case Operation::gels: run = run_gels(exec, c, b, nrhs); break;
  }
  EXPECT_EQ(std::count(run.info.begin(), run.info.end(), 0), count) << what << ": matrices with info ≠ 0";
  const std::vector<int> info = gather(run.info, 1, which);
  const std::vector<int> ipiv = lu ? gather(run.ipiv, n, which) : std::vector<int>{};
  const std::vector<T> factored = gather(run.a, m * n, which);
  const std::vector<T> solution = gather(run.b, m * nrhs, solves ? which : std::vector<int>{});
  const Batch<const T> a = packed_view(factored, m, n, sampled.count());
  const Batch<const T> x = packed_view(solution, m, nrhs, sampled.count());
  switch (operation) {
    case Operation::getrf: test::expect_getrf_results(sampled, a, ipiv.data(), info.data(), what); break;
    case Operation::getrs:
      test::expect_getrf_results(sampled, a, ipiv.data(), info.data(), what);
      test::expect_solve_results(sampled, op, b_sampled.data(), nrhs, x, nullptr, what);
      break;
    case Operation::gesv:
      test::expect_getrf_results(sampled, a, ipiv.data(), info.data(), what);
      test::expect_solve_results(sampled, Op::none, b_sampled.data(), nrhs, x, info.data(), what);
      break;
    case Operation::potrf: test::expect_potrf_results(sampled, uplo, a, info.data(), what); break;
    case Operation::potrs:
      test::expect_potrf_results(sampled, uplo, a, info.data(), what);
      test::expect_solve_results(sampled, Op::none, b_sampled.data(), nrhs, x, nullptr, what);
      break;
    case Operation::posv:
      test::expect_potrf_results(sampled, uplo, a, info.data(), what);
      test::expect_solve_results(sampled, Op::none, b_sampled.data(), nrhs, x, info.data(), what);
      break;
    case Operation::gels: test::expect_gels_results(sampled, a, b_sampled.data(), nrhs, x, info.data(), what); break;
  }
}

// Batch counts at the edges (0, 1, 31) and around the CUDA path's grid limits (65 535, 65 536,
// 2²⁰ + 7).
//   CPU: gesv, posv and gels at n = 2. 2²⁰ + 7 matrices take LAPACK about half a second to a second
//        per operation on two cores, so each element type runs one operation at that count, in turn.
//   CUDA: every operation at every count, n = 1 (one lane per matrix) and n = 5 (8 lanes, 3 idle;
//        16 matrices per block, so 2²⁰ + 7 takes more than 65 535 blocks).
template <class T>
void check_every_batch_count(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("solve " + std::string(name(exec.backend())) + " counts"));
  constexpr int largest_count = (1 << 20) + 7;
  if (exec.is_cuda()) {
    for (const int n : {1, 5})
      for (const int count : {0, 1, 31, 65535, 65536, largest_count})
        for (const Operation operation : {Operation::getrf, Operation::getrs, Operation::gesv, Operation::potrf,
                                          Operation::potrs, Operation::posv, Operation::gels})
          check_batch_count<T>(exec, operation, n, count, rng);
    return;
  }
  for (const int count : {0, 1, 31, 65535, 65536})
    for (const Operation operation : {Operation::gesv, Operation::posv, Operation::gels})
      check_batch_count<T>(exec, operation, 2, count, rng);
  const Operation largest = std::is_same_v<T, f64>    ? Operation::posv
                            : std::is_same_v<T, cf32> ? Operation::gels
                                                      : Operation::gesv;
  check_batch_count<T>(exec, largest, 2, largest_count, rng);
}

// The elements of `count` rows×cols matrices at (ld, stride) packed again.
template <class T>
std::vector<T> unspread(const std::vector<T>& x, int rows, int cols, int count, std::int64_t ld, std::int64_t stride) {
  std::vector<T> out(std::size_t(count) * rows * cols);
  for (int b = 0; b < count; ++b)
    for (int j = 0; j < cols; ++j)
      std::copy_n(x.data() + b * stride + j * ld, rows, out.data() + (std::size_t(b) * cols + j) * rows);
  return out;
}

// Whether every element of x outside the count rows×cols matrices at (ld, stride) is still `pad`.
template <class T>
bool padding_intact(const std::vector<T>& x, int rows, int cols, int count, std::int64_t ld, std::int64_t stride,
                    T pad) {
  const std::vector<T> clean = test::spread_batch(unspread(x, rows, cols, count, ld, stride).data(), rows, cols, count,
                                                  ld, stride, pad);
  return same_bits(x, clean);
}

// A and B of one operation laid out with padding: ld = rows + 3 (B: + 2) and 5 (B: 7) elements
// between matrices. The layout is laid over `data` or over its copy where the Exec runs.
template <class T>
struct Strided {
  int rows, cols, count;
  std::int64_t ld, stride;
  std::vector<T> data;
  Strided(const std::vector<T>& packed_data, int r, int c, int n, int extra_rows, int gap, T pad)
      : rows(r), cols(c), count(n), ld(r + extra_rows), stride((r + extra_rows) * std::int64_t(c) + gap),
        data(test::spread_batch(packed_data.data(), r, c, n, ld, stride, pad)) {}
  Batch<T> batch(T* at) const { return Batch<T>{at, rows, cols, ld, stride, count}; }
  Batch<const T> view(const T* at) const { return Batch<const T>{at, rows, cols, ld, stride, count}; }
  std::vector<T> packed_copy() const { return unspread(data, rows, cols, count, ld, stride); }
  bool padding_intact(T pad) const { return solve_suite::padding_intact(data, rows, cols, count, ld, stride, pad); }
};

// Every operation on strided A and B (ld > rows, stride > ld·cols): bit for bit the packed batch's
// results, with the padding as it was.
template <class T>
void check_strided_batches(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("solve " + std::string(name(exec.backend())) + " strided"));
  const T pad = T(12345);
  const int count = 5, nrhs = 3;
  for (const int n : {1, 5, 17, 33}) {
    const std::string shape = " n=" + std::to_string(n);
    const SolveCase<T> general = test::make_solve_case<T>(SolveSpec::random(n, n, count), rng);
    const SolveCase<T> hpd = test::make_solve_case<T>(SolveSpec::hpd(n, count, 100.0), rng);
    const SolveCase<T> tall = test::make_solve_case<T>(SolveSpec::random(2 * n + 1, n, count), rng);
    const std::vector<T> b = right_hand_sides<T>(n, nrhs, count, rng);
    const std::vector<T> c = right_hand_sides<T>(2 * n + 1, nrhs, count, rng);
    auto expect_same = [&](const Strided<T>& x, const std::vector<T>& reference, const std::string& what) {
      EXPECT_TRUE(same_bits(x.packed_copy(), reference)) << what << shape << ": differs from the packed batch";
      EXPECT_TRUE(x.padding_intact(pad)) << what << shape << ": padding written";
    };

    const Run<T> lu = run_getrf(exec, general);
    {
      Strided<T> a(general.a, n, n, count, 3, 5, pad);
      std::vector<int> ipiv(count * n, ipiv_poison), info(count, info_poison);
      on_exec(
          exec, [&](auto at, auto pivots, auto infos) { getrf<T>(exec, a.batch(at.data()), pivots, infos); }, a.data,
          ipiv, info);
      expect_same(a, lu.a, "getrf");
      EXPECT_EQ(ipiv, lu.ipiv);
      EXPECT_EQ(info, lu.info);

      Strided<T> x(b, n, nrhs, count, 2, 7, pad);
      on_exec(
          exec,
          [&](auto factors, auto pivots, auto at) {
            getrs<T>(exec, Op::conj_trans, a.view(factors.data()), pivots, x.batch(at.data()));
          },
          std::as_const(a.data), std::as_const(ipiv), x.data);
      const std::vector<T> reference = run_getrs(exec, Op::conj_trans, lu.a, lu.ipiv, b, n, nrhs, count);
      expect_same(x, reference, "getrs");
    }
    {
      const Run<T> reference = run_gesv(exec, general, b, nrhs);
      Strided<T> a(general.a, n, n, count, 3, 5, pad), x(b, n, nrhs, count, 2, 7, pad);
      std::vector<int> ipiv(count * n, ipiv_poison), info(count, info_poison);
      on_exec(
          exec,
          [&](auto at_a, auto at_x, auto pivots, auto infos) {
            gesv<T>(exec, a.batch(at_a.data()), pivots, x.batch(at_x.data()), infos);
          },
          a.data, x.data, ipiv, info);
      expect_same(a, reference.a, "gesv A");
      expect_same(x, reference.b, "gesv B");
      EXPECT_EQ(ipiv, reference.ipiv);
      EXPECT_EQ(info, reference.info);
    }
    for (const Uplo uplo : {Uplo::lower, Uplo::upper}) {
      const std::string tag = std::string(" uplo ") + static_cast<char>(uplo);
      const Run<T> factor = run_potrf(exec, uplo, hpd);
      Strided<T> a(hpd.a, n, n, count, 3, 5, pad);
      std::vector<int> info(count, info_poison);
      on_exec(
          exec, [&](auto at, auto infos) { potrf<T>(exec, uplo, a.batch(at.data()), infos); }, a.data, info);
      expect_same(a, factor.a, "potrf" + tag);
      EXPECT_EQ(info, factor.info);

      Strided<T> x(b, n, nrhs, count, 2, 7, pad);
      on_exec(
          exec, [&](auto at_a, auto at_x) { potrs<T>(exec, uplo, a.view(at_a.data()), x.batch(at_x.data())); },
          std::as_const(a.data), x.data);
      const std::vector<T> reference = run_potrs(exec, uplo, factor.a, b, n, nrhs, count);
      expect_same(x, reference, "potrs" + tag);

      const Run<T> solved = run_posv(exec, uplo, hpd, b, nrhs);
      Strided<T> a2(hpd.a, n, n, count, 3, 5, pad), x2(b, n, nrhs, count, 2, 7, pad);
      on_exec(
          exec,
          [&](auto at_a, auto at_x, auto infos) { posv<T>(exec, uplo, a2.batch(at_a.data()), x2.batch(at_x.data()), infos); },
          a2.data, x2.data, info);
      expect_same(a2, solved.a, "posv A" + tag);
      expect_same(x2, solved.b, "posv B" + tag);
      EXPECT_EQ(info, solved.info);
    }
    {
      const Run<T> reference = run_gels(exec, tall, c, nrhs);
      Strided<T> a(tall.a, 2 * n + 1, n, count, 3, 5, pad), x(c, 2 * n + 1, nrhs, count, 2, 7, pad);
      std::vector<int> info(count, info_poison);
      on_exec(
          exec, [&](auto at_a, auto at_x, auto infos) { gels<T>(exec, a.batch(at_a.data()), x.batch(at_x.data()), infos); },
          a.data, x.data, info);
      expect_same(a, reference.a, "gels A");
      expect_same(x, reference.b, "gels B");
      EXPECT_EQ(info, reference.info);
    }
  }
}

// A NaN in one matrix and an Inf in another: each flagged alone — A set to NaN (potrf: on its
// triangle, the other left as it was), ipiv 1 … n, B untouched — and every other matrix bit for bit
// as in a run without them. The NaN sits in the lower triangle and the Inf in the upper one, so
// potrf flags only the matrix whose bad element is in the triangle it reads. (A complex NaN is
// (NaN, 0) on the CPU and (NaN, NaN) on CUDA: only the real part is looked at.)
template <class T>
void check_non_finite_matrix_flagged_alone(Exec& exec) {
  using R = real_t<T>;
  std::mt19937_64 rng(test::fresh_seed("solve " + std::string(name(exec.backend())) + " non-finite"));
  const int count = 7, with_nan = 2, with_inf = 5, nrhs = 2;
  for (const int n : {1, 4, 17, 33}) {
    const std::size_t nn = std::size_t(n) * n;
    const SolveCase<T> clean = test::make_solve_case<T>(SolveSpec::hpd(n, count, 100.0), rng);
    SolveCase<T> dirty = clean;
    dirty.a[with_nan * nn + (n - 1)] = T(std::numeric_limits<R>::quiet_NaN());              // (n − 1, 0)
    dirty.a[with_inf * nn + std::size_t(n - 1) * n] = T(-std::numeric_limits<R>::infinity());  // (0, n − 1)
    const std::vector<T> b = right_hand_sides<T>(n, nrhs, count, rng);
    const std::string shape = " n=" + std::to_string(n);

    auto check_square = [&](const Run<T>& run, const Run<T>& reference, const std::vector<int>& flagged, Uplo* uplo,
                            const std::string& what) {
      for (int k = 0; k < count; ++k) {
        const std::string at = what + shape + " b=" + std::to_string(k);
        const std::size_t offset = k * nn;
        const bool bad = std::find(flagged.begin(), flagged.end(), k) != flagged.end();
        if (!bad) {
          EXPECT_EQ(run.info[k], reference.info[k]) << at;
          if (uplo == nullptr) {
            EXPECT_TRUE(test::bitwise_equal(run.a.data() + offset, n, reference.a.data() + offset, n, n, n))
                << at << ": differs from the clean run";
          } else {
            // The factored triangle is the clean run's; the other one is the input's (an Inf there
            // is not read).
            EXPECT_TRUE(same_triangle(*uplo, run.a.data() + offset, reference.a.data() + offset, n))
                << at << ": the factor differs from the clean run";
            EXPECT_TRUE(test::other_triangle_unchanged(*uplo, dirty.a.data() + offset, n, run.a.data() + offset, n, n))
                << at << ": the other triangle was written";
          }
          if (!run.b.empty()) {
            EXPECT_TRUE(std::memcmp(run.b.data() + k * n * nrhs, reference.b.data() + k * n * nrhs,
                                    sizeof(T) * n * nrhs) == 0)
                << at << ": X differs from the clean run";
          }
          continue;
        }
        EXPECT_EQ(run.info[k], status::non_finite_input) << at;
        int not_nan = 0;
        for (int j = 0; j < n; ++j)
          for (int i = 0; i < n; ++i) {
            const bool in_triangle = uplo == nullptr || (*uplo == Uplo::lower ? i >= j : i <= j);
            if (in_triangle) not_nan += !std::isnan(std::real(run.a[offset + i + std::size_t(j) * n]));
          }
        EXPECT_EQ(not_nan, 0) << at << ": elements not set to NaN";
        if (uplo != nullptr) {
          EXPECT_TRUE(test::other_triangle_unchanged(*uplo, dirty.a.data() + offset, n, run.a.data() + offset, n, n))
              << at << ": the other triangle was written";
        }
        for (std::size_t i = 0; i < run.ipiv.size() / count; ++i) {
          EXPECT_EQ(run.ipiv[k * n + i], int(i) + 1) << at << ": ipiv";
        }
        if (!run.b.empty()) {
          EXPECT_TRUE(std::memcmp(run.b.data() + k * n * nrhs, b.data() + k * n * nrhs, sizeof(T) * n * nrhs) == 0)
              << at << ": B written";
        }
      }
    };

    check_square(run_getrf(exec, dirty), run_getrf(exec, clean), {with_nan, with_inf}, nullptr, "getrf");
    check_square(run_gesv(exec, dirty, b, nrhs), run_gesv(exec, clean, b, nrhs), {with_nan, with_inf}, nullptr, "gesv");
    for (Uplo uplo : {Uplo::lower, Uplo::upper}) {
      // n = 1: both bad elements are the diagonal, which either triangle reads.
      std::vector<int> flagged = {uplo == Uplo::lower ? with_nan : with_inf};
      if (n == 1) flagged = {with_nan, with_inf};
      const std::string tag = std::string(" uplo ") + static_cast<char>(uplo);
      check_square(run_potrf(exec, uplo, dirty), run_potrf(exec, uplo, clean), flagged, &uplo, "potrf" + tag);
      check_square(run_posv(exec, uplo, dirty, b, nrhs), run_posv(exec, uplo, clean, b, nrhs), flagged, &uplo,
                   "posv" + tag);
    }

    const int m = 2 * n + 1;
    const SolveCase<T> tall = test::make_solve_case<T>(SolveSpec::random(m, n, count), rng);
    SolveCase<T> bad_tall = tall;
    bad_tall.a[with_nan * m * n + m * n / 2] = T(std::numeric_limits<R>::quiet_NaN());
    bad_tall.a[with_inf * m * n + m * n - 1] = T(std::numeric_limits<R>::infinity());
    const std::vector<T> c = right_hand_sides<T>(m, nrhs, count, rng);
    const Run<T> reference = run_gels(exec, tall, c, nrhs), run = run_gels(exec, bad_tall, c, nrhs);
    for (int k = 0; k < count; ++k) {
      const std::string at = "gels" + shape + " b=" + std::to_string(k);
      const std::size_t a_at = std::size_t(k) * m * n, b_at = std::size_t(k) * m * nrhs;
      if (k == with_nan || k == with_inf) {
        EXPECT_EQ(run.info[k], status::non_finite_input) << at;
        EXPECT_TRUE(std::all_of(run.a.begin() + a_at, run.a.begin() + a_at + m * n,
                                [](const T& x) { return std::isnan(std::real(x)); }))
            << at << ": A not all NaN";
        EXPECT_TRUE(std::memcmp(run.b.data() + b_at, c.data() + b_at, sizeof(T) * m * nrhs) == 0) << at << ": B written";
      } else {
        EXPECT_EQ(run.info[k], 0) << at;
        EXPECT_TRUE(std::memcmp(run.a.data() + a_at, reference.a.data() + a_at, sizeof(T) * m * n) == 0 &&
                    std::memcmp(run.b.data() + b_at, reference.b.data() + b_at, sizeof(T) * m * nrhs) == 0)
            << at << ": differs from the clean run";
      }
    }
  }
}

// Results do not depend on what the workspace held: garbage written over all of exec's workspace
// (NaN bit patterns, then random bytes) gives bit for bit the results of a fresh Exec of the same
// kind. On CUDA the n ≤ 32 paths take no workspace and the larger ones do (pointer arrays, flags,
// the scratch system of a failed solve; tau for gels).
template <class T>
void check_dirty_workspace_gives_identical_results(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("solve " + std::string(name(exec.backend())) + " dirty workspace"));
  const int count = 9, nrhs = 3;
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{5, 5}, {40, 17}, {100, 33}}) {
    const SolveCase<T> tall = test::make_solve_case<T>(SolveSpec::random(m, n, count), rng);
    const SolveCase<T> square = test::make_solve_case<T>(SolveSpec::hpd(n, count, 100.0), rng);
    const std::vector<T> c = right_hand_sides<T>(m, nrhs, count, rng), b = right_hand_sides<T>(n, nrhs, count, rng);
    Exec fresh = another_like(exec);
    const Run<T> gels_reference = run_gels(fresh, tall, c, nrhs), gesv_reference = run_gesv(fresh, square, b, nrhs);
    const Run<T> posv_reference = run_posv(fresh, Uplo::upper, square, b, nrhs);

    const std::size_t bytes = std::max({gels_workspace<T>(exec, m, n, nrhs, count),
                                        gesv_workspace<T>(exec, n, nrhs, count),
                                        posv_workspace<T>(exec, n, nrhs, count), std::size_t(1)});
    for (const bool random_bytes : {false, true}) {
      dirty_workspace(exec, bytes, random_bytes, rng);
      const std::string what = std::string(" ") + std::to_string(m) + "×" + std::to_string(n) +
                               (random_bytes ? " (random bytes)" : " (NaN bytes)");
      const Run<T> ls = run_gels(exec, tall, c, nrhs);
      EXPECT_TRUE(same_bits(ls.a, gels_reference.a) && same_bits(ls.b, gels_reference.b) &&
                  ls.info == gels_reference.info)
          << "gels" << what;
      dirty_workspace(exec, bytes, random_bytes, rng);
      const Run<T> lu = run_gesv(exec, square, b, nrhs);
      EXPECT_TRUE(same_bits(lu.a, gesv_reference.a) && same_bits(lu.b, gesv_reference.b) &&
                  lu.ipiv == gesv_reference.ipiv && lu.info == gesv_reference.info)
          << "gesv" << what;
      dirty_workspace(exec, bytes, random_bytes, rng);
      const Run<T> chol = run_posv(exec, Uplo::upper, square, b, nrhs);
      EXPECT_TRUE(same_bits(chol.a, posv_reference.a) && same_bits(chol.b, posv_reference.b) &&
                  chol.info == posv_reference.info)
          << "posv" << what;
    }
  }
}

// The workspace queries cover the runs: reserved up front on a fresh Exec of exec's kind, no call
// grows the arena.
template <class T>
void check_workspace_queries_cover_the_runs(Exec& exec) {
  std::mt19937_64 rng(test::fresh_seed("solve " + std::string(name(exec.backend())) + " workspace"));
  const int count = 3, nrhs = 5;
  for (const auto& [m, n] : std::vector<std::pair<int, int>>{{2, 2}, {33, 33}, {128, 32}}) {
    Exec fresh = another_like(exec);
    const std::size_t bytes = std::max(
        {getrf_workspace<T>(fresh, n, count), getrs_workspace<T>(fresh, n, nrhs, count),
         gesv_workspace<T>(fresh, n, nrhs, count), potrf_workspace<T>(fresh, n, count),
         potrs_workspace<T>(fresh, n, nrhs, count), posv_workspace<T>(fresh, n, nrhs, count),
         gels_workspace<T>(fresh, m, n, nrhs, count), gels_workspace<T>(fresh, m, n, 0, count)});
    EXPECT_GT(bytes, 0u) << "gels needs scratch for tau (and on the CPU for LAPACK's work array)";
    fresh.workspace().reserve(bytes);
    ASSERT_EQ(fresh.workspace().growth_count(), 0u);
    const SolveCase<T> general = test::make_solve_case<T>(SolveSpec::random(n, n, count), rng);
    const SolveCase<T> hpd = test::make_solve_case<T>(SolveSpec::hpd(n, count, 100.0), rng);
    const SolveCase<T> tall = test::make_solve_case<T>(SolveSpec::random(m, n, count), rng);
    const std::vector<T> b = right_hand_sides<T>(n, nrhs, count, rng), c = right_hand_sides<T>(m, nrhs, count, rng);
    const Run<T> lu = run_getrf(fresh, general);
    std::vector<T> x = run_getrs(fresh, Op::none, lu.a, lu.ipiv, b, n, nrhs, count);
    run_gesv(fresh, general, b, nrhs);
    const Run<T> factor = run_potrf(fresh, Uplo::lower, hpd);
    x = run_potrs(fresh, Uplo::lower, factor.a, std::move(x), n, nrhs, count);
    run_posv(fresh, Uplo::upper, hpd, b, nrhs);
    run_gels(fresh, tall, c, nrhs);
    run_gels(fresh, tall, {}, 0);
    EXPECT_EQ(fresh.workspace().growth_count(), 0u)
        << m << "×" << n << ": a call grew the workspace beyond its query";
  }
  EXPECT_EQ(getrf_workspace<T>(exec, 0, 4), 0u);
  EXPECT_EQ(gesv_workspace<T>(exec, 4, 1, 0), 0u);
  EXPECT_EQ(gels_workspace<T>(exec, 4, 0, 1, 2), 0u);
  EXPECT_EQ(gels_workspace<T>(exec, 4, 4, 1, 0), 0u);
}

// Empty batches (count 0, or n = 0) are no-ops, whatever the pointers; so is a solve without
// right-hand sides.
inline void check_empty_batches_are_no_ops(Exec& exec) {
  EXPECT_NO_THROW(getrf<f32>(exec, Batch<f32>{nullptr, 8, 8, 8, 64, 0}, {}, {}));
  EXPECT_NO_THROW(getrf<f32>(exec, Batch<f32>{nullptr, 0, 0, 1, 0, 3}, {}, {}));
  EXPECT_NO_THROW(getrs<f64>(exec, Op::none, Batch<const f64>{nullptr, 8, 8, 8, 64, 0}, {},
                             Batch<f64>{nullptr, 8, 2, 8, 16, 0}));
  EXPECT_NO_THROW(gesv<cf32>(exec, Batch<cf32>{nullptr, 8, 8, 8, 64, 0}, {}, Batch<cf32>{nullptr, 8, 2, 8, 16, 0}, {}));
  EXPECT_NO_THROW(potrf<cf64>(exec, Uplo::lower, Batch<cf64>{nullptr, 8, 8, 8, 64, 0}, {}));
  EXPECT_NO_THROW(potrs<cf64>(exec, Uplo::upper, Batch<const cf64>{nullptr, 8, 8, 8, 64, 0},
                              Batch<cf64>{nullptr, 8, 2, 8, 16, 0}));
  EXPECT_NO_THROW(posv<f32>(exec, Uplo::upper, Batch<f32>{nullptr, 8, 8, 8, 64, 0}, Batch<f32>{nullptr, 8, 2, 8, 16, 0},
                            {}));
  EXPECT_NO_THROW(gels<f64>(exec, Batch<f64>{nullptr, 9, 8, 9, 72, 0}, Batch<f64>{nullptr, 9, 2, 9, 18, 0}, {}));
  // A matrix but no right-hand side: getrs and potrs have nothing to do.
  std::vector<f64> a = {2.0};
  std::vector<int> ipiv = {1};
  on_exec(
      exec,
      [&](auto lu, auto pivots) {
        EXPECT_NO_THROW(getrs<f64>(exec, Op::none, Batch<const f64>::packed(lu.data(), 1, 1, 1), pivots,
                                   Batch<f64>{nullptr, 1, 0, 1, 0, 1}));
        EXPECT_NO_THROW(potrs<f64>(exec, Uplo::lower, Batch<const f64>::packed(lu.data(), 1, 1, 1),
                                   Batch<f64>{nullptr, 1, 0, 1, 0, 1}));
      },
      std::as_const(a), std::as_const(ipiv));
}

}  // namespace covflow::linalg::solve_suite

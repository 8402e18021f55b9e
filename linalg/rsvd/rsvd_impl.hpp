// Internal: what rsvd's backends share — the plan of a call (shapes), the workspace's parts, the
// per-matrix states, and the counter-based Gaussian samples (host and device). Included by
// rsvd.cpp and rsvd_cuda.cu only.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>

#include "covflow/linalg/rsvd.hpp"
#include "covflow/linalg/svd.hpp"

#if defined(__CUDACC__)
#define COVFLOW_HD __host__ __device__
#else
#define COVFLOW_HD
#endif

namespace covflow::linalg::detail::rsvd_parts {

// ---- the samples: a counter-based Gaussian ------------------------------------------------------
// splitmix64 (S. Vigna) as a hash of (seed, matrix, sample column, row): the same sample whatever
// the thread, the batch around the matrix or the order of evaluation.
COVFLOW_HD inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
COVFLOW_HD inline double open_unit(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }

// Standard normal, on the host (complex: real and imaginary parts N(0, ½), so that E|ω|² = 1), Box–Muller.
template <class T>
T gaussian(std::uint64_t seed, std::int64_t matrix, std::int64_t column, std::int64_t row) {
  const std::uint64_t h = mix(mix(mix(seed) ^ static_cast<std::uint64_t>(matrix)) ^ static_cast<std::uint64_t>(column)) ^
                          static_cast<std::uint64_t>(row);
  const double u1 = open_unit(mix(h)), u2 = open_unit(mix(h ^ 0xD1B54A32D192ED03ull));
  const double r = std::sqrt(-2.0 * std::log(u1)), angle = 2.0 * std::numbers::pi * u2;
  using R = real_t<T>;
  if constexpr (is_complex_v<T>) return T(R(r * std::cos(angle) * std::numbers::sqrt2 / 2), R(r * std::sin(angle) * std::numbers::sqrt2 / 2));
  else return T(r * std::cos(angle));
}

// ---- shapes and the workspace ------------------------------------------------------------------
struct Plan {
  int m = 0, n = 0;
  int out = 0;       // r: columns of the outputs
  int samples = 0;   // L: columns of Q (fixed rank: k + p; fixed accuracy: the max rank)
  int block = 0;     // fixed accuracy: b
  bool fixed_rank = true;
  bool hermitian = false;
};

inline Plan make_plan(std::int64_t m, std::int64_t n, const RsvdOptions& o) {
  Plan p;
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.hermitian = o.hermitian;
  const int full = static_cast<int>(std::min(m, n));
  p.fixed_rank = o.rank > 0;
  if (p.fixed_rank) {
    p.out = std::min(o.rank, full);
    p.samples = std::min(full, o.rank + std::max(o.oversampling, 0));
    p.block = p.samples;
  } else {
    p.out = o.max_rank > 0 ? std::min(o.max_rank, full) : full;
    p.samples = p.out;
    p.block = std::min(std::max(o.block, 1), p.samples);
  }
  return p;
}

template <class T>
struct Parts {
  using R = real_t<T>;
  T *omega = nullptr, *q = nullptr, *z = nullptr, *yb = nullptr, *zb = nullptr, *tau = nullptr, *small = nullptr;
  T* full_u = nullptr;  // CUDA: Q·V_B before the columns are picked (m × L)
  R* sigma = nullptr;
  int* qr_info = nullptr;
  int* heev_info = nullptr;
  SvdInfo* svd_info = nullptr;
  double *norm2 = nullptr, *res2 = nullptr, *shift = nullptr;
  int *cols = nullptr, *state = nullptr;
  std::size_t bytes = 0;

  Parts(const Plan& p, std::int64_t count, std::byte* base, bool with_full_u = false) {
    std::size_t at = 0;
    auto take = [&](std::size_t size) {
      std::byte* ptr = base == nullptr ? nullptr : base + at;
      at += (size + 255) / 256 * 256;  // parts on 256-byte boundaries
      return ptr;
    };
    const auto c = static_cast<std::size_t>(count);
    const std::size_t L = static_cast<std::size_t>(p.samples), b = static_cast<std::size_t>(p.block);
    omega = reinterpret_cast<T*>(take(sizeof(T) * c * p.n * L));
    q = reinterpret_cast<T*>(take(sizeof(T) * c * p.m * L));
    z = reinterpret_cast<T*>(take(sizeof(T) * c * p.n * L));
    if (with_full_u) full_u = reinterpret_cast<T*>(take(sizeof(T) * c * p.m * L));
    if (!p.fixed_rank) {
      yb = reinterpret_cast<T*>(take(sizeof(T) * c * p.m * b));
      zb = reinterpret_cast<T*>(take(sizeof(T) * c * p.n * b));
    }
    tau = reinterpret_cast<T*>(take(sizeof(T) * c * L));
    small = reinterpret_cast<T*>(take(sizeof(T) * c * L * L));
    sigma = reinterpret_cast<R*>(take(sizeof(R) * c * L));
    qr_info = reinterpret_cast<int*>(take(sizeof(int) * c));
    heev_info = reinterpret_cast<int*>(take(sizeof(int) * c));
    svd_info = reinterpret_cast<SvdInfo*>(take(sizeof(SvdInfo) * c));
    norm2 = reinterpret_cast<double*>(take(sizeof(double) * c));
    res2 = reinterpret_cast<double*>(take(sizeof(double) * c));
    shift = reinterpret_cast<double*>(take(sizeof(double) * c));
    cols = reinterpret_cast<int*>(take(sizeof(int) * c));
    state = reinterpret_cast<int*>(take(sizeof(int) * c));
    bytes = at;
  }
};

// Per-matrix state (Parts::state).
inline constexpr int kActive = 0, kDone = 1, kBad = 2, kMaxRank = 3, kFailed = 4;


}  // namespace covflow::linalg::detail::rsvd_parts

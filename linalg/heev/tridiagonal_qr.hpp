// The implicit, Wilkinson-shifted QL/QR iteration on a real symmetric tridiagonal matrix, with
// deflation — A. Cosnuau, "Computation on GPU of Eigenvalues and Eigenvectors of a Large Number of
// Small Hermitian Matrices" (Procedia Computer Science, 2014), §3 (3.1 the sweep, 3.2 the shift),
// organised as LAPACK's ?steqr organises it (QL or QR chosen per block by which end is larger).
//
// Written once for host and device: the CUDA producer thread runs exactly this code (heev_cuda.cu),
// and the tests run it on the CPU against LAPACK. It does not touch eigenvectors; it reports every
// plane rotation, in the order it must be applied, to a sink: sink(plane, c, s) means
//   for every row r:  t = Z(r, plane+1);  Z(r, plane+1) = c·t − s·Z(r, plane);  Z(r, plane) = s·t + c·Z(r, plane)
// (LAPACK's dlasr 'R','V'). A sink may be a no-op (eigenvalues only) or a ring buffer feeding the
// threads that own rows of Z. Sweeps are announced with sink.begin_sweep(length) before their
// rotations, so a ring buffer can make room for a whole sweep at once.
#pragma once

#include <cmath>
#include <limits>

#if defined(__CUDACC__)
#define COVFLOW_HD __host__ __device__
#else
#define COVFLOW_HD
#endif

namespace covflow::linalg::detail {

template <class R>
struct Rotation {
  R c, s, r;
};

template <class R> COVFLOW_HD inline R sign_of(R magnitude, R sign_source) {
  return sign_source >= R(0) ? std::fabs(magnitude) : -std::fabs(magnitude);
}

template <class R> struct Limits {
  static constexpr R eps = std::numeric_limits<R>::epsilon() / 2;  // LAPACK's 'Epsilon' (relative machine precision)
  static constexpr R safmin = std::numeric_limits<R>::min();
};

// How a sweep step computes 1/h and 1/√h (the chase's critical path on a GPU). Each policy is
// exact to a few ulp; they differ in latency, which the benchmark `covflow-bench heev-chase`
// measures. On the host every policy is the plain IEEE operation.
//   MathIeee    1/h and rsqrt(h) from CUDA's math library
//   MathSeeded  a single-precision seed refined by two Newton steps (h inside float's range)
//   MathApprox  the hardware's double-precision approximations (rcp/rsqrt.approx.ftz.f64,
//               about 2⁻²² relative), refined by two Newton steps (h inside (1e-280, 1e280))
struct MathIeee {
  template <class R> COVFLOW_HD static R rcp(R h) { return R(1) / h; }
  template <class R> COVFLOW_HD static R rsqrt(R h) {
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(R) == 8) return ::rsqrt(h);
    else return rsqrtf(h);
#else
    return R(1) / std::sqrt(h);
#endif
  }
};
struct MathSeeded {
  template <class R> COVFLOW_HD static R rcp(R h) {
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(R) == 8) {
      if (h > R(1e-36) && h < R(1e36)) {
        double y = static_cast<double>(__fdividef(1.0f, static_cast<float>(h)));
        y = fma(y, fma(-h, y, 1.0), y);
        return fma(y, fma(-h, y, 1.0), y);
      }
    }
#endif
    return R(1) / h;
  }
  template <class R> COVFLOW_HD static R rsqrt(R h) {
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(R) == 8) {
      if (h > R(1e-36) && h < R(1e36)) {
        double y = static_cast<double>(rsqrtf(static_cast<float>(h)));
        y = fma(0.5 * y, fma(-h * y, y, 1.0), y);
        return fma(0.5 * y, fma(-h * y, y, 1.0), y);
      }
    }
#endif
    return MathIeee::rsqrt(h);
  }
};
struct MathApprox {
  template <class R> COVFLOW_HD static R rcp(R h) {
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(R) == 8) {
      double y;
      asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(y) : "d"(h));
      y = fma(y, fma(-h, y, 1.0), y);
      return fma(y, fma(-h, y, 1.0), y);
    } else {
      float y;
      asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(h));
      return fmaf(y, fmaf(-h, y, 1.0f), y);
    }
#else
    return R(1) / h;
#endif
  }
  template <class R> COVFLOW_HD static R rsqrt(R h) {
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(R) == 8) {
      double y;
      asm("rsqrt.approx.ftz.f64 %0, %1;" : "=d"(y) : "d"(h));
      y = fma(0.5 * y, fma(-h * y, y, 1.0), y);
      return fma(0.5 * y, fma(-h * y, y, 1.0), y);
    } else {
      float y;
      asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(h));
      return fmaf(0.5f * y, fmaf(-h * y, y, 1.0f), y);
    }
#else
    return R(1) / std::sqrt(h);
#endif
  }
};

// A plane rotation with c·f + s·g = r, −s·f + c·g = 0 (LAPACK's dlartg conventions). The data are
// pre-scaled (heev scales A by a power of two so that max |a_ij| is about 1), so the plain formula
// is safe; the scaled branch only guards inputs outside [√safmin, √(safmax/2)].
template <class R, class Math = MathIeee>
COVFLOW_HD inline Rotation<R> make_rotation(R f, R g) {
  if (g == R(0)) return {R(1), R(0), f};
  if (f == R(0)) return {R(0), sign_of(R(1), g), std::fabs(g)};
  const R af = std::fabs(f), ag = std::fabs(g);
  constexpr R rtmin = sizeof(R) == 8 ? R(1.4916681462400413e-154) : R(1.0842021724855044e-19);  // √safmin
  constexpr R rtmax = sizeof(R) == 8 ? R(4.740375954054589e+153) : R(6.521908912666392e+18);    // √(safmax/2)
  if (af > rtmin && af < rtmax && ag > rtmin && ag < rtmax) {
#if defined(__CUDA_ARCH__)
    // One reciprocal square root instead of a square root and two divisions: the rotation is the
    // chase's critical path. c² + s² = 1 to within a few ulp, as with LAPACK's formula.
    // d = √h = h·t, r = sign(f)·d, c = |f|/d = |f|·t, s = g/r = sign(f)·g·t.
    const R h = f * f + g * g;
    const R t = Math::rsqrt(h);
    return {af * t, (f >= R(0) ? g : -g) * t, std::copysign(h * t, f)};
#else
    const R d = std::sqrt(f * f + g * g);
    const R r = sign_of(d, f);
    return {af / d, g / r, r};
#endif
  }
  const R u = std::fmax(af, ag);
  const R fs = f / u, gs = g / u;
  const R d = std::sqrt(fs * fs + gs * gs);
  const R r = sign_of(d, f);
  return {std::fabs(fs) / d, gs / r, r * u};
}


// A sweep-step policy: the arithmetic above, and whether to use the short-chain formulation below
// (true) or ?steqr's own sequence of operations with the rotation from make_rotation (false).
template <class Math, bool kShortChain>
struct SweepPolicy {
  using math = Math;
  static constexpr bool short_chain = kShortChain;
};
using DefaultSweep = SweepPolicy<MathApprox, true>;

// One step of an implicit QL/QR sweep (the body of ?steqr's inner loop), rearranged so that the
// chain from one step to the next is short. With h = g² + f², t = 1/√h, σ = sign(g), the rotation
// is c = |g|t, s = σft, r = σ√h, and with X = (d_near − (d_far − p))·σf + 2|g|b:
//   p' = s·(tX) = σfX/h,   g' = c·(tX) − b = |g|X/h − b,
// and the next step's f = s·e_next, b = c·e_next, so h' = g'² + (f·e_next)²/h. The next h thus
// waits only on 1/h (one reciprocal) and two fused multiply-adds; t, c, s, f', b' are off that
// chain. Outside the range where the squares are safe, the textbook formulas (dlartg) are used.
template <class R>
struct SweepStep {
  R c, s, r;   // the rotation (r: the new off-diagonal element it leaves behind)
  R g, p;      // the sweep's running values after the step
  R f, b;      // f and b of the next step
  R d_far;     // new value of the diagonal element the sweep moves away from
};
template <class R, class Policy = DefaultSweep>
COVFLOW_HD inline SweepStep<R> sweep_step(R g, R f, R b, R p, R d_near, R d_far, R e_next) {
  SweepStep<R> out;
  const R h = g * g + f * f;
  constexpr R lo = sizeof(R) == 8 ? R(1e-280) : R(1e-34);
  constexpr R hi = sizeof(R) == 8 ? R(1e280) : R(1e34);
  const R g2 = d_far - p;
  if (Policy::short_chain && h > lo && h < hi) {
    // One reciprocal square root serves both: 1/h = t². On a GPU the loop is bound by how many
    // double-precision instructions it issues (measured: an instruction every 3.8 cycles), so the
    // reciprocal's own refinement is worth more than the extra multiply on the chain.
    using M = typename Policy::math;
    const R t = M::rsqrt(h);
    const R inv = t * t;
    const R sign = std::copysign(R(1), g);
    const R ag = std::fabs(g);
    const R sf = sign * f;
    const R X = (d_near - g2) * sf + R(2) * ag * b;
    const R Xinv = X * inv;
    out.p = sf * Xinv;
    out.g = ag * Xinv - b;
    out.c = ag * t;
    out.s = sf * t;
    out.r = sign * (h * t);
  } else {
    const Rotation<R> rot = make_rotation<R, typename Policy::math>(g, f);
    const R r = (d_near - g2) * rot.s + R(2) * rot.c * b;
    out.p = rot.s * r;
    out.g = rot.c * r - b;
    out.c = rot.c;
    out.s = rot.s;
    out.r = rot.r;
  }
  out.d_far = g2 + out.p;
  out.f = out.s * e_next;
  out.b = out.c * e_next;
  return out;
}

// Eigen-decomposition of the 2×2 symmetric [[a, b], [b, c]]: rt1 of larger magnitude, rt2, and the
// rotation (cs, sn) whose first column is rt1's eigenvector (LAPACK's dlaev2).
template <class R>
COVFLOW_HD inline void symmetric_2x2(R a, R b, R c, R& rt1, R& rt2, R& cs1, R& sn1) {
  const R sm = a + c, df = a - c, adf = std::fabs(df), tb = b + b, ab = std::fabs(tb);
  R acmx = a, acmn = c;
  if (std::fabs(a) <= std::fabs(c)) {
    acmx = c;
    acmn = a;
  }
  R rt;
  if (adf > ab) rt = adf * std::sqrt(R(1) + (ab / adf) * (ab / adf));
  else if (adf < ab) rt = ab * std::sqrt(R(1) + (adf / ab) * (adf / ab));
  else rt = ab * std::sqrt(R(2));
  int sgn1;
  if (sm < R(0)) {
    rt1 = R(0.5) * (sm - rt);
    sgn1 = -1;
    rt2 = (acmx / rt1) * acmn - (b / rt1) * b;
  } else if (sm > R(0)) {
    rt1 = R(0.5) * (sm + rt);
    sgn1 = 1;
    rt2 = (acmx / rt1) * acmn - (b / rt1) * b;
  } else {
    rt1 = R(0.5) * rt;
    rt2 = R(-0.5) * rt;
    sgn1 = 1;
  }
  int sgn2;
  R cs;
  if (df >= R(0)) {
    cs = df + rt;
    sgn2 = 1;
  } else {
    cs = df - rt;
    sgn2 = -1;
  }
  if (std::fabs(cs) > ab) {
    const R ct = -tb / cs;
    sn1 = R(1) / std::sqrt(R(1) + ct * ct);
    cs1 = ct * sn1;
  } else if (ab == R(0)) {
    cs1 = R(1);
    sn1 = R(0);
  } else {
    const R tn = -cs / tb;
    cs1 = R(1) / std::sqrt(R(1) + tn * tn);
    sn1 = tn * cs1;
  }
  if (sgn1 == sgn2) {
    const R tn = cs1;
    cs1 = -sn1;
    sn1 = tn;
  }
}

// √(x² + 1) without overflow.
template <class R> COVFLOW_HD inline R hypot1(R x) {
  const R ax = std::fabs(x);
  return ax > R(1) ? ax * std::sqrt(R(1) + (R(1) / ax) * (R(1) / ax)) : std::sqrt(R(1) + ax * ax);
}

// Where a tridiagonal splits. Three scans of the off-diagonal, written once for one thread (host)
// and once for a warp whose 32 lanes all run the iteration in lockstep (device, kWarp): the warp
// tests 32 candidates per step and takes the first with a ballot.
template <class R, bool kWarp>
struct Deflation {
  static constexpr R eps = Limits<R>::eps, eps2 = eps * eps, safmin = Limits<R>::safmin;

  // First m ≥ l1 where e[m] is negligible next to √|d[m]|·√|d[m+1]|, or n − 1.
  COVFLOW_HD static int split(const R* d, const R* e, int l1, int n) {
#if defined(__CUDA_ARCH__)
    if constexpr (kWarp) {
      const int lane = threadIdx.x & 31;
      for (int base = l1; base < n - 1; base += 32) {
        const int m = base + lane;
        bool small = false;
        if (m < n - 1) {
          const R tst = std::fabs(e[m]);
          small = tst == R(0) || tst <= std::sqrt(std::fabs(d[m])) * std::sqrt(std::fabs(d[m + 1])) * eps;
        }
        const unsigned hit = __ballot_sync(0xffffffffu, small);
        if (hit) return base + __ffs(hit) - 1;
      }
      return n - 1;
    } else
#endif
    {
      for (int m = l1; m < n - 1; ++m) {
        const R tst = std::fabs(e[m]);
        if (tst == R(0) || tst <= std::sqrt(std::fabs(d[m])) * std::sqrt(std::fabs(d[m + 1])) * eps) return m;
      }
      return n - 1;
    }
  }
  // QL: first m in [l, lend) with e[m]² ≤ ε²|d[m]||d[m+1]| + safmin, or lend.
  COVFLOW_HD static int below(const R* d, const R* e, int l, int lend) {
#if defined(__CUDA_ARCH__)
    if constexpr (kWarp) {
      const int lane = threadIdx.x & 31;
      for (int base = l; base < lend; base += 32) {
        const int m = base + lane;
        const bool small = m < lend && e[m] * e[m] <= (eps2 * std::fabs(d[m])) * std::fabs(d[m + 1]) + safmin;
        const unsigned hit = __ballot_sync(0xffffffffu, small);
        if (hit) return base + __ffs(hit) - 1;
      }
      return lend;
    } else
#endif
    {
      for (int m = l; m < lend; ++m)
        if (e[m] * e[m] <= (eps2 * std::fabs(d[m])) * std::fabs(d[m + 1]) + safmin) return m;
      return lend;
    }
  }
  // QR: first m in (lend, l], descending, with e[m−1]² ≤ ε²|d[m]||d[m−1]| + safmin, or lend.
  COVFLOW_HD static int above(const R* d, const R* e, int l, int lend) {
#if defined(__CUDA_ARCH__)
    if constexpr (kWarp) {
      const int lane = threadIdx.x & 31;
      for (int base = l; base > lend; base -= 32) {
        const int m = base - lane;
        const bool small = m > lend && e[m - 1] * e[m - 1] <= (eps2 * std::fabs(d[m])) * std::fabs(d[m - 1]) + safmin;
        const unsigned hit = __ballot_sync(0xffffffffu, small);
        if (hit) return base - (__ffs(hit) - 1);
      }
      return lend;
    } else
#endif
    {
      for (int m = l; m > lend; --m)
        if (e[m - 1] * e[m - 1] <= (eps2 * std::fabs(d[m])) * std::fabs(d[m - 1]) + safmin) return m;
      return lend;
    }
  }
};

// Where the iteration stands, so that it can stop at a sweep boundary (when a sink has no room for
// the next sweep's rotations) and resume later from exactly there.
struct QrState {
  int l1 = 0;       // first row not yet split off
  int l = 0;        // current unreduced block [l, lend] (QL when lend > l, QR when lend < l)
  int lend = 0;
  bool in_block = false;
  long sweeps = 0;  // sweeps so far (LAPACK allows 30·n)
};

enum class QrResult { done, paused, no_convergence };

// Shifts per group of sweeps (see tridiagonal_qr). 4 measured best on an H100 for n = 64…256
// (covflow-bench heev-chase); 1 is ?steqr's one Wilkinson shift per sweep.
inline constexpr int kDefaultShifts = 4;

// One implicit QL sweep over the unreduced block [l, mm] (lend > l: chase from the bottom up, the
// eigenvalue converging at the top), started from g = d[mm] − μ. ?steqr's inner loop, written with
// sweep_step; every rotation goes to sink(plane, c, s).
template <class R, class Policy, class Sink>
COVFLOW_HD void ql_sweep(R* d, R* e, int l, int mm, R g, Sink& sink) {
  // f and b start at e[mm−1] (s = c = 1 before the first rotation).
  R f = e[mm - 1], b = f, p = R(0);
  R di = d[mm - 1], di1 = d[mm];
  for (int i = mm - 1; i >= l; --i) {
    // The next step's operands are loaded before this step's stores: different elements, and the
    // loads then stay off the chain of dependent arithmetic.
    const R e_next = i > l ? e[i - 1] : R(0);
    const R d_next = i > l ? d[i - 1] : R(0);
    const SweepStep<R> step = sweep_step<R, Policy>(g, f, b, p, di, di1, e_next);
    if (i != mm - 1) e[i + 1] = step.r;
    d[i + 1] = step.d_far;
    sink(i, step.c, -step.s);
    g = step.g;
    p = step.p;
    f = step.f;
    b = step.b;
    di1 = di;
    di = d_next;
  }
  d[l] -= p;
  e[l] = g;
}

// The mirror image: QR sweep over [mm, l] (lend < l: chase from the top down, converging at the
// bottom, d[l]), started from g = d[mm] − μ.
template <class R, class Policy, class Sink>
COVFLOW_HD void qr_sweep(R* d, R* e, int l, int mm, R g, Sink& sink) {
  R f = e[mm], b = f, p = R(0);
  R di = d[mm], di1 = d[mm + 1];
  for (int i = mm; i <= l - 1; ++i) {
    const R e_next = i + 1 <= l - 1 ? e[i + 1] : R(0);
    const R d_next = i + 1 <= l - 1 ? d[i + 2] : R(0);
    const SweepStep<R> step = sweep_step<R, Policy>(g, f, b, p, di1, di, e_next);
    if (i != mm) e[i - 1] = step.r;
    d[i] = step.d_far;
    sink(i, step.c, step.s);
    g = step.g;
    p = step.p;
    f = step.f;
    b = step.b;
    di = di1;
    di1 = d_next;
  }
  d[l] -= p;
  e[l - 1] = g;
}

struct DiscardRotations {
  COVFLOW_HD bool reserve(int) { return true; }
  template <class R> COVFLOW_HD void operator()(int, R, R) {}
  template <class R> COVFLOW_HD void step(int, R, R, bool) {}
};

template <class R, bool kWarp = false, class Policy = DefaultSweep, int kShifts = kDefaultShifts, class Sink>
COVFLOW_HD QrResult tridiagonal_qr(int n, R* d, R* e, Sink& sink, QrState& st, long max_sweeps);

// The k eigenvalues of the symmetric tridiagonal block (d[first..first+k), e[first..first+k−1)),
// ordered by distance from `target` (the diagonal element at the converging end): the shifts of a
// group of sweeps. A k×k problem (k ≤ 8), solved by the single-shift iteration itself.
template <class R, class Policy, int kMax>
COVFLOW_HD void corner_shifts(const R* d, const R* e, int first, int k, R target, R* mus) {
  R dd[kMax], ee[kMax];
  for (int t = 0; t < k; ++t) {
    dd[t] = d[first + t];
    ee[t] = t + 1 < k ? e[first + t] : R(0);
  }
  DiscardRotations none;
  QrState local;
  tridiagonal_qr<R, false, Policy, 1>(k, dd, ee, none, local, 30L * k);
  for (int t = 0; t < k; ++t) mus[t] = dd[t];
  for (int a = 1; a < k; ++a)  // insertion sort by |μ − target|
    for (int c = a; c > 0 && std::fabs(mus[c] - target) < std::fabs(mus[c - 1] - target); --c) {
      const R tmp = mus[c];
      mus[c] = mus[c - 1];
      mus[c - 1] = tmp;
    }
}

#if defined(__CUDA_ARCH__)
// kk sweeps of one group, pipelined over the lanes of a warp: lane j chases sweep j (shift
// mus[j]) three positions behind lane j−1 — the least distance at which a step reads only what
// earlier sweeps have finished writing (d[i], d[i+1], e[i] and, for the next step, e[i∓1]). Each
// time step ends with __syncwarp; the rotations of one time step lie on planes ≥ 3 apart and
// commute, so this is the sequential order of the host version, reordered without changing any
// result. sink.step(plane, c, s, active) is warp-collective.
template <class R, class Policy, class Sink>
__device__ void pipelined_sweeps(R* d, R* e, int l, int mm, bool ql, const R* mus, int kk, Sink& sink) {
  const int lane = threadIdx.x & 31;
  const int length = ql ? mm - l : l - mm;  // rotations per sweep
  const R mu = lane < kk ? mus[lane] : R(0);
  R g = 0, f = 0, b = 0, p = 0;
  const int steps = length + 3 * (kk - 1);
  for (int tau = 0; tau < steps; ++tau) {
    const int k = tau - 3 * lane;
    const bool on = lane < kk && k >= 0 && k < length;
    int plane = 0;
    R c = R(1), s = R(0);
    if (on) {
      if (ql) {
        const int i = mm - 1 - k;
        if (k == 0) {
          g = d[mm] - mu;
          f = e[mm - 1];
          b = f;
          p = R(0);
        }
        const R e_next = i > l ? e[i - 1] : R(0);
        const SweepStep<R> st = sweep_step<R, Policy>(g, f, b, p, d[i], d[i + 1], e_next);
        if (i != mm - 1) e[i + 1] = st.r;
        d[i + 1] = st.d_far;
        g = st.g;
        p = st.p;
        f = st.f;
        b = st.b;
        plane = i;
        c = st.c;
        s = -st.s;
        if (i == l) {
          d[l] -= p;
          e[l] = g;
        }
      } else {
        const int i = mm + k;
        if (k == 0) {
          g = d[mm] - mu;
          f = e[mm];
          b = f;
          p = R(0);
        }
        const R e_next = i + 1 <= l - 1 ? e[i + 1] : R(0);
        const SweepStep<R> st = sweep_step<R, Policy>(g, f, b, p, d[i + 1], d[i], e_next);
        if (i != mm) e[i - 1] = st.r;
        d[i] = st.d_far;
        g = st.g;
        p = st.p;
        f = st.f;
        b = st.b;
        plane = i;
        c = st.c;
        s = st.s;
        if (i == l - 1) {
          d[l] -= p;
          e[l - 1] = g;
        }
      }
    }
    sink.step(plane, c, s, on);
    __syncwarp();
  }
}
#endif

// Diagonalises the symmetric tridiagonal (d[0..n), e[0..n−1)) in place: on `done`, d holds the
// eigenvalues, unsorted (sorting, and the matching column permutation, is the caller's), and e is
// destroyed. Before each group of sweeps it asks sink.reserve(rotations); a sink that answers false
// stops the iteration (`paused`), and calling again with the same state continues. A pausing sink
// must be able to take kShifts·(n−1) rotations once empty, or the iteration cannot progress; the
// sequence of rotations never depends on the sink.
//
// Shifts (§3.2): ?steqr takes one Wilkinson shift per sweep, so every sweep waits for the previous
// one to finish — a chain of ≈1.1·n² dependent rotations, which is what bounds heev's time on a
// GPU. Here a block that is long enough gets a group of kk = min(kShifts, (length−1)/3) sweeps
// whose shifts are the eigenvalues of the kk×kk corner where eigenvalues converge, nearest first
// (the first is then the Wilkinson-like choice); on a GPU the kk sweeps run concurrently, lane by
// lane (pipelined_sweeps), so the chain is ≈0.45·n² steps for kk = 4 at the cost of ≈1.4× the
// rotations. Short blocks fall back to one Wilkinson shift per sweep. With kWarp the 32 lanes of a
// warp run this together (identical arithmetic in every lane; the scans are shared).
template <class R, bool kWarp, class Policy, int kShifts, class Sink>
COVFLOW_HD QrResult tridiagonal_qr(int n, R* d, R* e, Sink& sink, QrState& st, long max_sweeps) {
  using Scan = Deflation<R, kWarp>;
  for (;;) {
    if (!st.in_block) {
      if (st.l1 >= n) return QrResult::done;
      // Split off an unreduced block [l, lend] at the first negligible off-diagonal.
      if (st.l1 > 0) e[st.l1 - 1] = R(0);
      const int m = Scan::split(d, e, st.l1, n);
      if (m < n - 1) e[m] = R(0);
      st.l = st.l1;
      st.lend = m;
      st.l1 = m + 1;
      if (st.lend == st.l) continue;
      // Deflate from the end where the diagonal is smaller in magnitude (QL from the top, QR from
      // the bottom), as ?steqr does.
      if (std::fabs(d[st.lend]) < std::fabs(d[st.l])) {
        const int t = st.l;
        st.l = st.lend;
        st.lend = t;
      }
      st.in_block = true;
    }
    int l = st.l;
    const int lend = st.lend;
    const bool ql = lend > l;
    for (;;) {
      if (ql ? l > lend : l < lend) break;
      // The end of the unreduced part of the block: the first negligible off-diagonal from l.
      const int mm = ql ? Scan::below(d, e, l, lend) : Scan::above(d, e, l, lend);
      if (ql && mm < lend) e[mm] = R(0);
      if (!ql && mm > lend) e[mm - 1] = R(0);
      const R p = d[l];
      if (mm == l) {  // d[l] has converged
        l += ql ? 1 : -1;
        continue;
      }
      if (mm == (ql ? l + 1 : l - 1)) {  // a 2×2 block: solve it directly
        if (!sink.reserve(1)) {
          st.l = l;
          return QrResult::paused;
        }
        const int lo = ql ? l : l - 1;
        R rt1, rt2, c, s;
        symmetric_2x2(d[lo], e[lo], d[lo + 1], rt1, rt2, c, s);
        sink(lo, c, s);
        d[lo] = rt1;
        d[lo + 1] = rt2;
        e[lo] = R(0);
        l += ql ? 2 : -2;
        continue;
      }
      const int length = ql ? mm - l : l - mm;
      int kk = (length - 1) / 3;
      kk = kk < 1 ? 1 : (kk > kShifts ? kShifts : kk);
      if (st.sweeps + kk > max_sweeps) {
        st.l = l;
        return QrResult::no_convergence;
      }
      if (!sink.reserve(kk * length)) {
        st.l = l;
        return QrResult::paused;
      }
      st.sweeps += kk;
      if (kk == 1) {
        // Wilkinson shift from the 2×2 at the converging end (§3.2).
        const int nb = ql ? l + 1 : l - 1;
        const int eb = ql ? l : l - 1;
        R g = (d[nb] - p) / (R(2) * e[eb]);
        const R r = hypot1(g);
        g = d[mm] - p + (e[eb] / (g + sign_of(r, g)));
        if (ql) ql_sweep<R, Policy>(d, e, l, mm, g, sink);
        else qr_sweep<R, Policy>(d, e, l, mm, g, sink);
        continue;
      }
      R mus[kShifts > 1 ? kShifts : 2];
      if constexpr (kShifts > 1) corner_shifts<R, Policy, kShifts>(d, e, ql ? l : l - kk + 1, kk, p, mus);
#if defined(__CUDA_ARCH__)
      if constexpr (kWarp && kShifts > 1) {
        pipelined_sweeps<R, Policy>(d, e, l, mm, ql, mus, kk, sink);
      } else
#endif
      {
        for (int j = 0; j < kk; ++j) {
          const R g = d[mm] - mus[j];
          if (ql) ql_sweep<R, Policy>(d, e, l, mm, g, sink);
          else qr_sweep<R, Policy>(d, e, l, mm, g, sink);
        }
      }
    }
    st.in_block = false;
  }
}

}  // namespace covflow::linalg::detail

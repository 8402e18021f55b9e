// The scalar mathematics of the subspace stage, shared by its CPU path and its CUDA kernels
// (every function is callable from host and device code): the information criteria that count
// the sources, the MUSIC null spectrum as a trigonometric series, and the refinement of a
// spectrum peak. docs/stages.md derives each formula.
//
// Conventions (docs/scenario.md): a_m(θ) = exp(j·2π·d·m·sin θ), m = 0 … N−1, θ from broadside.
// Everything below works in the spatial frequency u = d·sin θ (cycles per element), in which
// a_m = exp(j·2π·u·m) and the null spectrum is a trigonometric polynomial of degree N−1.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define COVFLOW_HD __host__ __device__
#else
#define COVFLOW_HD
#endif

namespace covflow::stages::music {

COVFLOW_HD inline bool is_finite(double x) {
#if defined(__CUDA_ARCH__)
  return isfinite(x);
#else
  return std::isfinite(x);
#endif
}

COVFLOW_HD inline void sin_cos(double x, double* s, double* c) {
#if defined(__CUDA_ARCH__)
  sincos(x, s, c);
#else
  *s = std::sin(x);
  *c = std::cos(x);
#endif
}

// Information criterion used to count the sources.
enum class Criterion : std::uint8_t { mdl, aic };

// Wax & Kailath, "Detection of signals by information theoretic criteria", IEEE Trans. ASSP 33(2),
// 1985, eqs. (16) and (17). With the N eigenvalues of the sample covariance sorted descending
// l_1 ≥ … ≥ l_N, K (effective) snapshots, and k = 0 … N−1 candidate source counts:
//
//   L(k)   = K·(N−k)·ln( a(k) / g(k) ),   a(k) = (1/(N−k)) Σ_{i>k} l_i    (arithmetic mean)
//                                          g(k) = (Π_{i>k} l_i)^{1/(N−k)}  (geometric mean)
//   MDL(k) = L(k) + ½·k·(2N−k)·ln K
//   AIC(k) = 2·L(k) + 2·k·(2N−k)
//
// and the estimate is the k that minimises the criterion. L(k) is the negative log-likelihood
// of the noise eigenvalues being equal; k·(2N−k) counts the free parameters of a rank-k signal
// covariance (eigenvalues and complex eigenvectors).
//
// `ascending` holds the eigenvalues as heev returns them (ascending), so the N−k smallest ones —
// the noise candidates for k sources — are a prefix. Eigenvalues are floored at
// N·ε(double)·max(l_1, DBL_MIN) so that a rank-deficient estimate (K < N) gives finite logs.

// The floor for eigenvalues below it: N·ε(double)·max(l_1, DBL_MIN).
COVFLOW_HD inline double eigenvalue_floor(double largest, int n) {
  return fmax(largest, 2.2250738585072014e-308) * n * 2.220446049250313e-16;
}

// The criterion for k = N − m sources, from the sum and the sum of logarithms of the m smallest
// (floored) eigenvalues.
COVFLOW_HD inline double criterion_value(double sum, double log_sum, int m, int n, double snapshots, Criterion criterion) {
  const int k = n - m;
  const double log_ratio = log(sum / m) - log_sum / m;  // ln(a/g) >= 0 up to rounding
  const double likelihood = snapshots * m * (log_ratio > 0.0 ? log_ratio : 0.0);
  const double parameters = double(k) * (2.0 * n - k);
  return criterion == Criterion::mdl ? likelihood + 0.5 * parameters * log(snapshots)
                                     : 2.0 * likelihood + 2.0 * parameters;
}

// Whether the criterion value `a` for m_a noise eigenvalues beats `b` for m_b: smaller, and on a
// tie the smaller source count (the larger m).
COVFLOW_HD inline bool criterion_better(double a, int m_a, double b, int m_b) { return a < b || (a == b && m_a > m_b); }

// The walk over m = 1 … N (the CUDA path splits it over a warp with the same helpers): returns
// the source count, or −1 when an eigenvalue is not finite.
template <class R>
COVFLOW_HD int estimate_source_count(const R* ascending, int n, double snapshots, Criterion criterion) {
  if (n <= 0) return 0;
  const double largest = static_cast<double>(ascending[n - 1]);
  if (!is_finite(largest)) return -1;
  const double floor_value = eigenvalue_floor(largest, n);
  double sum = 0.0, log_sum = 0.0;  // over the noise candidates, a growing prefix
  double best = 0.0;
  int best_m = 0;
  // m = N − k noise eigenvalues: the prefix 0 … m−1. Walk m upward (k downward).
  for (int m = 1; m <= n; ++m) {
    const double raw = static_cast<double>(ascending[m - 1]);
    if (!is_finite(raw)) return -1;
    const double value = raw > floor_value ? raw : floor_value;
    sum += value;
    log_sum += log(value);
    const double value_k = criterion_value(sum, log_sum, m, n, snapshots, criterion);
    if (m == 1 || criterion_better(value_k, m, best, best_m)) {
      best = value_k;
      best_m = m;
    }
  }
  return n - best_m;
}

// The MUSIC null spectrum Q(u) = a(u)ᴴ E_n E_nᴴ a(u) = Σ_k |e_kᴴ a(u)|² (the pseudo-spectrum is
// P = 1/Q) is a real trigonometric polynomial of degree N−1:
//
//   Q(u) = r_0 + 2·Re Σ_{s=1}^{N−1} r_s·ω^s,   ω = exp(−j·2π·u),
//
// whose coefficients r_s = Σ_k Σ_m e_k[m+s]·conj(e_k[m]) are the summed autocorrelations of the
// noise eigenvectors. The stage gets them by FFT (docs/stages.md, "MUSIC through FFTs").
// `re`/`im` hold r_0 … r_{N−1}. Evaluated by Horner's rule in ω, |ω| = 1, which keeps the
// rounding error at about N·ε·Σ|r_s|.
template <class R>
COVFLOW_HD double null_spectrum(const R* re, const R* im, int n, double omega_re, double omega_im) {
  double p_re = 0.0, p_im = 0.0;
  for (int s = n - 1; s >= 1; --s) {
    const double t_re = p_re * omega_re - p_im * omega_im + static_cast<double>(re[s]);
    const double t_im = p_re * omega_im + p_im * omega_re + static_cast<double>(im[s]);
    p_re = t_re;
    p_im = t_im;
  }
  // Σ_{s≥1} r_s ω^s = ω·(Horner sum of r_1 …)
  const double sum_re = p_re * omega_re - p_im * omega_im;
  return static_cast<double>(re[0]) + 2.0 * sum_re;
}

// Q(u) and its first two derivatives in u, for the Newton refinement of a peak.
struct NullSpectrumDerivatives {
  double q = 0.0, dq = 0.0, d2q = 0.0;
};

// The terms s = first, first + stride, … < N of the three sums below, without r_0: the CPU takes
// them all (first 1, stride 1); a warp of the CUDA path splits them over its lanes and adds the
// lanes' partial sums.
template <class R>
COVFLOW_HD NullSpectrumDerivatives null_spectrum_terms(const R* re, const R* im, int n, double u, int first, int stride) {
  constexpr double two_pi = 6.283185307179586;
  NullSpectrumDerivatives out;
  // d/du ω^s = −j·2π·s·ω^s: Re(r_s·(−j2πs)·ω^s) = 2πs·Im(r_s·ω^s); d²: −(2πs)²·Re(r_s·ω^s).
  for (int s = first; s < n; s += stride) {
    double sn, cs;
    sin_cos(-two_pi * s * u, &sn, &cs);
    const double rr = static_cast<double>(re[s]), ri = static_cast<double>(im[s]);
    const double prod_re = rr * cs - ri * sn;
    const double prod_im = rr * sn + ri * cs;
    const double w = two_pi * s;
    out.q += 2.0 * prod_re;
    out.dq += 2.0 * w * prod_im;
    out.d2q -= 2.0 * w * w * prod_re;
  }
  return out;
}

template <class R>
COVFLOW_HD NullSpectrumDerivatives null_spectrum_derivatives(const R* re, const R* im, int n, double u) {
  NullSpectrumDerivatives out = null_spectrum_terms(re, im, n, u, 1, 1);
  out.q += static_cast<double>(re[0]);
  return out;
}

// The minimiser of Q in [lo, hi] that a grid minimum at `start` (lo < start < hi, Q(start) ≤
// Q(lo), Q(hi)) brackets: safeguarded Newton on Q'(u) = 0 (bisection whenever a Newton step
// leaves the bracket or the curvature is not positive), or golden-section search on Q when Q'
// does not change sign across the bracket. Converges to |Δu| ≲ 1e−12; returns u. `at(u)` gives
// Q, Q' and Q'' at u (NullSpectrumDerivatives); the branches depend only on what it returns, so
// a warp whose lanes all get the same values from it takes them together.
template <class Evaluate>
COVFLOW_HD double refine_minimum_by(const Evaluate& at, double lo, double start, double hi) {
  const double tolerance = 1e-13;
  const double slope_lo = at(lo).dq;
  const double slope_hi = at(hi).dq;
  if (slope_lo < 0.0 && slope_hi > 0.0) {
    double x = start;
    for (int iteration = 0; iteration < 100; ++iteration) {
      const NullSpectrumDerivatives here = at(x);
      if (here.dq == 0.0) return x;
      if (here.dq < 0.0) lo = x;
      else hi = x;
      double next = (here.d2q > 0.0) ? x - here.dq / here.d2q : 0.5 * (lo + hi);
      if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
      if (fabs(next - x) <= tolerance || hi - lo <= tolerance) return next;
      x = next;
    }
    return x;
  }
  // Golden-section search on Q itself.
  constexpr double golden = 0.6180339887498949;
  double a = lo, b = hi;
  double c = b - golden * (b - a), d = a + golden * (b - a);
  double qc = at(c).q, qd = at(d).q;
  for (int iteration = 0; iteration < 200 && b - a > tolerance; ++iteration) {
    if (qc <= qd) {
      b = d;
      d = c;
      qd = qc;
      c = b - golden * (b - a);
      qc = at(c).q;
    } else {
      a = c;
      c = d;
      qc = qd;
      d = a + golden * (b - a);
      qd = at(d).q;
    }
  }
  return 0.5 * (a + b);
}

// refine_minimum_by with Q and its derivatives summed serially (the CPU path).
template <class R>
COVFLOW_HD double refine_minimum(const R* re, const R* im, int n, double lo, double start, double hi) {
  return refine_minimum_by([=](double u) { return null_spectrum_derivatives(re, im, n, u); }, lo, start, hi);
}

// θ (degrees) of spatial frequency u for element spacing d (wavelengths).
COVFLOW_HD inline double angle_of(double u, double spacing_wavelengths) {
  double s = u / spacing_wavelengths;
  s = s > 1.0 ? 1.0 : (s < -1.0 ? -1.0 : s);
  return asin(s) * 57.29577951308232;
}

// u = d·sin θ for θ in degrees.
COVFLOW_HD inline double spatial_frequency(double angle_deg, double spacing_wavelengths) {
  return spacing_wavelengths * sin(angle_deg * 0.017453292519943295);
}

// The smallest FFT length that holds the autocorrelation lags −(N−1) … N−1 without circular
// aliasing: a power of two ≥ 2N−1 (at least 2).
COVFLOW_HD inline int autocorrelation_fft_length(int n) {
  int length = 2;
  while (length < 2 * n - 1) length *= 2;
  return length;
}

}  // namespace covflow::stages::music

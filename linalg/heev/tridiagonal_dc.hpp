// Eigenvectors of a real symmetric tridiagonal matrix T by divide and conquer (Cuppen 1981, as
// LAPACK's ?stedc organises it: ?laed2 deflation, ?laed4 secular equation, ?laed3 vectors), with
// Cosnuau's Wilkinson-shifted QR ("Computation on GPU of Eigenvalues and Eigenvectors of a Large
// Number of Small Hermitian Matrices", Procedia Computer Science, 2014, §3; tridiagonal_qr.hpp) at
// the leaves. This replaces the paper's §3 for the eigenvectors of all but the smallest matrices:
// §3's sweeps are a chain of ~n² dependent rotations per matrix (latency-bound on a
// GPU: one warp per matrix), where the merges below are n independent root solves and a dense
// product — work for a whole thread block.
//
// The tree: node i of level ℓ covers rows [⌊i·n/2^ℓ⌋, ⌊(i+1)·n/2^ℓ⌋); its children are nodes 2i and
// 2i+1 of level ℓ+1; leaves sit at the first level where every node has at most `leaf_max` rows.
// Tearing at a split point p (between rows p−1 and p, β = e[p−1]):
//   T = diag(T₁, T₂) + |β|·v·vᵀ,  v = e_{p−1} + sign(β)·e_p,
// where T₁ and T₂ have |β| subtracted from their corner diagonal entries. Given T₁ = Q₁Λ₁Q₁ᵀ and
// T₂ = Q₂Λ₂Q₂ᵀ, T = Q·(D + ρ·z·zᵀ)·Qᵀ with Q = diag(Q₁, Q₂), D = diag(Λ₁, Λ₂), z = Qᵀv/√2 (the last
// row of Q₁ and sign(β)·the first row of Q₂), ρ = 2|β|. A merge:
//   1. deflation (dc_deflate, sequential): entries with ρ|z_i| ≤ tol keep (d_i, Q e_i); pairs of
//      close d's are rotated so that one z entry vanishes (the rotation goes into Q's columns);
//   2. the K remaining d's, strictly increasing, interlace the new eigenvalues: root j of the
//      secular equation 1 + ρ Σ z_i²/(d_i − λ) = 0 lies in (d_j, d_{j+1}) (dc_secular_root, one
//      per group of threads on the GPU). Each root is kept as (origin, τ) with λ = d_origin + τ and origin the nearer
//      pole, so that every d_i − λ = (d_i − d_origin) − τ is computed to full relative accuracy;
//   3. Gu and Eisenstat's ẑ (dc_lowner_z): the z for which the computed roots are exact, from
//      Löwner's formula — the eigenvectors u_j ∝ (ẑ_i / (d_i − λ_j))_i of D + ρẑẑᵀ are then
//      orthogonal to working accuracy, however close the roots;
//   4. the node's eigenvectors: Q·U for the K roots, Q's columns for the deflated entries.
//
// Written once for host and device: the CUDA merge kernel runs these functions (heev_cuda.cu), the
// CPU test (tests/linalg/heev_model_test.cpp) composes them serially and checks against LAPACK.
#pragma once

#include <cmath>

#include "tridiagonal_qr.hpp"

namespace covflow::linalg::detail {

// ---- the tree ---------------------------------------------------------------------------------

COVFLOW_HD inline int dc_begin(int n, int level, int node) {
  return static_cast<int>((static_cast<long long>(node) * n) >> level);
}
// Levels below the root: the leaves are at this level (0 when n ≤ leaf_max: no merge at all).
COVFLOW_HD inline int dc_levels(int n, int leaf_max) {
  int levels = 0;
  while (((n + (1 << levels) - 1) >> levels) > leaf_max) ++levels;
  return levels;
}
// The diagonal of leaf `node` (m rows from `first`) after tearing: |β| off each torn corner.
// e holds the whole matrix's off-diagonal (e[k] couples rows k and k+1).
template <class R>
COVFLOW_HD inline void dc_tear_leaf(int n, int first, int m, R* d_leaf, const R* e) {
  if (first > 0) d_leaf[0] -= std::fabs(e[first - 1]);
  if (first + m < n) d_leaf[m - 1] -= std::fabs(e[first + m - 1]);
}

// ---- 1. deflation --------------------------------------------------------------------------------

// Lists a merge's deflation fills in (node-local indices; arrays of m entries each).
template <class R>
struct DcLists {
  int* kept_col;    // K: column of Q behind each secular pole, poles ascending
  R* kept_d;        // K: the poles d_0 < d_1 < … < d_{K−1}
  R* kept_z;        // K: their z entries (none is negligible)
  int* gone_col;    // m − K: deflated columns of Q
  R* gone_d;        // m − K: their eigenvalues
  int* rot_p;       // rotations, in order: Q(:,p) ← c·Q(:,p) + s·Q(:,q), Q(:,q) ← c·Q(:,q) − s·Q(:,p)
  int* rot_q;
  R* rot_c;
  R* rot_s;
};
struct DcCounts {
  int kept = 0, gone = 0, rotations = 0;
};

// ?laed2's deflation, over the m entries of (d, z) in ascending order of d (`order` lists them so);
// ρ > 0 and ‖z‖ = 1. d and z are updated in place where a rotation mixes two entries.
// tol = 8ε·max(max|d|, max|z|): an entry with ρ|z_i| ≤ tol is dropped (a perturbation of T of that
// size); two entries whose rotation leaves an off-diagonal |t·c·s| ≤ tol are merged into one.
template <class R>
COVFLOW_HD inline DcCounts dc_deflate(int m, R* d, R* z, R rho, const int* order, DcLists<R> out) {
  R dmax = 0, zmax = 0;
  for (int i = 0; i < m; ++i) {
    dmax = std::fmax(dmax, std::fabs(d[i]));
    zmax = std::fmax(zmax, std::fabs(z[i]));
  }
  const R tol = R(8) * Limits<R>::eps * std::fmax(dmax, zmax);
  DcCounts n;
  auto drop = [&](int j) {
    out.gone_col[n.gone] = j;
    out.gone_d[n.gone] = d[j];
    ++n.gone;
  };
  int pj = -1;  // the last entry kept so far, not yet committed
  for (int t = 0; t < m; ++t) {
    const int j = order[t];
    if (rho * std::fabs(z[j]) <= tol) {
      drop(j);
      continue;
    }
    if (pj < 0) {
      pj = j;
      continue;
    }
    // Would rotating z_pj into z_j leave an off-diagonal |t·c·s| = |t·z_j·z_pj|/(z_j² + z_pj²)
    // below tol? (Tested without the square root and divisions: this scan is sequential.)
    const R t_gap = d[j] - d[pj];
    if (std::fabs(t_gap * z[j] * z[pj]) <= tol * (z[j] * z[j] + z[pj] * z[pj])) {
      const R tau = std::hypot(z[j], z[pj]);
      const R c = z[j] / tau, s = -z[pj] / tau;
      z[j] = tau;
      z[pj] = R(0);
      out.rot_p[n.rotations] = pj;
      out.rot_q[n.rotations] = j;
      out.rot_c[n.rotations] = c;
      out.rot_s[n.rotations] = s;
      ++n.rotations;
      const R dp = d[pj] * c * c + d[j] * s * s;  // both between the old d[pj] and d[j]
      d[j] = d[pj] * s * s + d[j] * c * c;
      d[pj] = dp;
      drop(pj);
    } else {
      out.kept_col[n.kept] = pj;
      out.kept_d[n.kept] = d[pj];
      out.kept_z[n.kept] = z[pj];
      ++n.kept;
    }
    pj = j;
  }
  if (pj >= 0) {
    out.kept_col[n.kept] = pj;
    out.kept_d[n.kept] = d[pj];
    out.kept_z[n.kept] = z[pj];
    ++n.kept;
  }
  return n;
}

// ---- 2. the secular equation ----------------------------------------------------------------------

template <class R>
struct DcRoot {
  int origin = 0;  // λ = d[origin] + tau
  R tau = 0;
  bool converged = false;
};

// Root j of f(λ) = 1 + ρ Σ_i z_i²/(d_i − λ), d strictly increasing, ρ > 0, no z_i zero: in
// (d_j, d_{j+1}), or (d_{K−1}, d_{K−1} + ρ‖z‖²] for the last. The origin is the pole on the side of
// the interval's midpoint where the root lies (sign of f there). Then, in τ = λ − d_origin, a
// bracket kept by the sign of f and steps of ?laed4's kind: f is modelled as c + s/(δ_j − x) +
// S/(δ_{j+1} − x), matching f and the derivatives of its two halves (ψ: poles up to j; φ: the rest)
// at the current τ, and the model's root in the interval taken; a step leaving the bracket
// bisects instead. Stops when |f| is within its own rounding error (?laed4's test) or the
// bracket cannot shrink further.
//
// `parts` threads may share a root: each sums the terms i ≡ part (mod parts), and `sum` adds a
// value over the group (identically in every member, so that they all take the same steps). On the
// host: part 0 of 1 and a sum that returns its argument. Divisions go through Math::rcp.
struct DcAlone {
  template <class V> COVFLOW_HD V operator()(V v) const { return v; }
};

template <class R, class Math = MathIeee, class Sum = DcAlone>
COVFLOW_HD inline DcRoot<R> dc_secular_root(int j, int K, const R* d, const R* z, R rho, int part = 0, int parts = 1,
                                            Sum sum = Sum{}) {
  DcRoot<R> root;
  if (K == 1) {
    root.tau = rho * z[0] * z[0];
    root.converged = true;
    return root;
  }
  const R eps = Limits<R>::eps;
  R lo, hi;
  if (j < K - 1) {
    const R half = (d[j + 1] - d[j]) / 2;
    R f = 0;
    for (int i = part; i < K; i += parts) f += z[i] * z[i] * Math::rcp((d[i] - d[j]) - half);
    f = 1 + rho * sum(f);
    if (f >= R(0)) {
      root.origin = j;
      lo = 0;
      hi = half;
    } else {
      root.origin = j + 1;
      lo = -half;
      hi = 0;
    }
  } else {
    R z2 = 0;
    for (int i = part; i < K; i += parts) z2 += z[i] * z[i];
    z2 = sum(z2);
    root.origin = K - 1;
    lo = 0;
    hi = rho * z2;
  }
  const R base = d[root.origin];
  const R delta_left = d[j] - base;                               // the pole below the root
  const R delta_right = j < K - 1 ? d[j + 1] - base : R(0);       // and above (none for the last)
  R tau = (lo + hi) / 2;
  for (int iteration = 0; iteration < 100; ++iteration) {
    R psi = 0, dpsi = 0, phi = 0, dphi = 0;
    for (int i = part; i < K; i += parts) {
      const R t = z[i] * Math::rcp((d[i] - base) - tau);
      const R term = z[i] * t, slope = t * t;
      if (i <= j) {
        psi += term;
        dpsi += slope;
      } else {
        phi += term;
        dphi += slope;
      }
    }
    psi = rho * sum(psi);
    dpsi = rho * sum(dpsi);
    phi = rho * sum(phi);
    dphi = rho * sum(dphi);
    const R f = 1 + psi + phi;
    const R error = eps * (R(8) * (R(1) + phi - psi) + std::fabs(tau) * (dpsi + dphi));
    if (std::fabs(f) <= error) {
      root.converged = true;
      break;
    }
    if (f < R(0)) lo = tau;
    else hi = tau;
    if (hi - lo <= R(2) * eps * std::fmax(std::fabs(lo), std::fabs(hi))) {
      root.converged = true;
      break;
    }
    // The model's root τ + η.
    const R a = delta_left - tau;  // < 0
    const R s = dpsi * a * a;
    R eta;
    bool model = false;
    if (j < K - 1) {
      const R b = delta_right - tau;  // > 0
      const R S = dphi * b * b;
      const R c = f - s / a - S / b;
      const R B = c * (a + b) + s + S;
      const R C = a * b * f;
      // c·η² − B·η + C = 0, one root in (a, b).
      if (c == R(0)) {
        eta = C / B;
        model = true;
      } else {
        const R q = B + std::copysign(std::sqrt(std::fmax(B * B - R(4) * c * C, R(0))), B);
        const R eta1 = q / (R(2) * c), eta2 = q != R(0) ? R(2) * C / q : eta1;
        eta = (eta2 > a && eta2 < b) ? eta2 : eta1;
        model = eta > a && eta < b;
      }
    } else {
      const R c = f - s / a;  // c + s/(a − η) = 0
      if (c > R(0)) {
        eta = a + s / c;
        model = true;
      }
    }
    const R next = tau + eta;
    tau = (model && next > lo && next < hi) ? next : (lo + hi) / 2;
  }
  root.tau = tau;
  return root;
}

// ---- 3. and 4. the eigenvectors ---------------------------------------------------------------------

// d_i − λ_k, to full relative accuracy.
template <class R>
COVFLOW_HD inline R dc_gap(const R* d, int i, int origin_k, R tau_k) {
  return (d[i] - d[origin_k]) - tau_k;
}

// Gu–Eisenstat: ẑ_i = sign(z_i)·√(∏_k (λ_k − d_i) / ∏_{k≠i} (d_k − d_i)) up to a factor common to
// every i (1/ρ), which the normalisation of the eigenvectors removes. Factors paired as ?laed3 does.
// Shared by `parts` threads as dc_secular_root is; `product` multiplies over the group.
template <class R, class Math = MathIeee, class Product = DcAlone>
COVFLOW_HD inline R dc_lowner_z(int i, int K, const R* d, const int* origin, const R* tau, R z_i, int part = 0,
                                int parts = 1, Product product = Product{}) {
  R p = part == 0 ? -dc_gap(d, i, origin[i], tau[i]) : R(1);  // λ_i − d_i > 0
  for (int k = part; k < K; k += parts)
    if (k != i) p *= dc_gap(d, i, origin[k], tau[k]) * Math::rcp(d[i] - d[k]);
  p = product(p);
  return std::copysign(std::sqrt(std::fabs(p)), z_i);
}

// 1/‖u_j‖ for u_j = (ẑ_i / (d_i − λ_j))_i.
template <class R, class Math = MathIeee, class Sum = DcAlone>
COVFLOW_HD inline R dc_inverse_norm(int j, int K, const R* d, const R* zhat, int origin_j, R tau_j, int part = 0,
                                    int parts = 1, Sum sum = Sum{}) {
  R total = 0;
  for (int i = part; i < K; i += parts) {
    const R u = zhat[i] * Math::rcp(dc_gap(d, i, origin_j, tau_j));
    total += u * u;
  }
  return R(1) / std::sqrt(sum(total));
}

}  // namespace covflow::linalg::detail

// Internal: the H² kernel formulas and the Lagrange polynomials of the Chebyshev construction,
// written once for the host (h2_build.cpp) and the device (h2_cuda_build.cu), so that both
// builds evaluate the same expressions in the same order (h2.hpp, Kernels and Construction).
// Everything is in double; the caller rounds to the element type once.
//
// Bitwise agreement. The Chebyshev node coordinates come from one host table (ChebGrid,
// h2_impl.hpp) that both builds read, and the device file is compiled without contraction into
// fused multiply-adds (--fmad=false), so the polynomials (additions, subtractions, multiplications
// and divisions, all correctly rounded in IEEE double on both sides) come out bit for bit the
// same. The kernels' exp, sin and cos are CUDA's on the device (≤ 2 ulp in double) and the C
// library's on the host, so kernel values may differ in the last bits of a double.
#pragma once

#include <math.h>

#include <cstdint>

#include "covflow/linalg/h2.hpp"

#if defined(__CUDACC__)
#define COVFLOW_H2_HD __host__ __device__
#else
#define COVFLOW_H2_HD
#endif

namespace covflow::linalg::detail::h2 {

// A kernel value, complex in general (imag = 0 for the real kernels).
struct KernelValue {
  double re = 0, im = 0;
};

// K(x, y) of one H2KernelSpec as plain data that a kernel launch can take by value: the
// parameters and, for clutter, the Gauss–Legendre rule as wavenumber-scaled directions
// (ux_q, uy_q) and weights σ²·w_q/2 (ClutterRule, h2_impl.hpp), in host or device memory.
struct KernelEval {
  H2Kernel kind = H2Kernel::exponential;
  int dim = 1;
  double variance = 1, length = 1, nu = 0.5;
  int count = 0;  // clutter: quadrature nodes
  const double* ux = nullptr;
  const double* uy = nullptr;
  const double* weight = nullptr;

  COVFLOW_H2_HD KernelValue operator()(const double* x, const double* y) const {
    if (kind == H2Kernel::clutter) {
      // R(x, y) = Σ_q w_q·exp(j·(x − y)·u_q), accumulated in q order.
      const double dx = x[0] - y[0], dy = dim >= 2 ? x[1] - y[1] : 0.0;
      KernelValue sum;
      for (int q = 0; q < count; ++q) {
        const double phase = dx * ux[q] + dy * uy[q];
        sum.re += weight[q] * ::cos(phase);
        sum.im += weight[q] * ::sin(phase);
      }
      return sum;
    }
    double r2 = 0;
    for (int k = 0; k < dim; ++k) r2 += (x[k] - y[k]) * (x[k] - y[k]);
    const double r = ::sqrt(r2) / length;
    KernelValue out;
    switch (kind) {
      case H2Kernel::gaussian: out.re = variance * ::exp(-r * r / 2); break;
      case H2Kernel::matern:
        if (nu == 1.5) out.re = variance * (1 + ::sqrt(3.0) * r) * ::exp(-::sqrt(3.0) * r);
        else if (nu == 2.5) out.re = variance * (1 + ::sqrt(5.0) * r + 5 * r * r / 3) * ::exp(-::sqrt(5.0) * r);
        else out.re = variance * ::exp(-r);
        break;
      default: out.re = variance * ::exp(-r); break;
    }
    return out;
  }
};

// The 1-D Lagrange polynomial j of the p nodes `nodes` at x: Π_{i ≠ j} (x − ξ_i)/(ξ_j − ξ_i).
COVFLOW_H2_HD inline double lagrange_1d(const double* nodes, int p, int j, double x) {
  double value = 1;
  for (int i = 0; i < p; ++i)
    if (i != j) value *= (x - nodes[i]) / (nodes[j] - nodes[i]);
  return value;
}

// Index `a` of a node's p^d tensor Chebyshev nodes is a0 + p·a1 + p²·a2: digit d of a.
COVFLOW_H2_HD inline int cheb_digit(int a, int p, int d) {
  for (int k = 0; k < d; ++k) a /= p;
  return a % p;
}

// The tensor Lagrange polynomial `a` of a box whose 1-D nodes are grid[d·p + j] (ChebGrid's layout
// for one tree node), at point x: the 1-D factors multiplied in dimension order.
COVFLOW_H2_HD inline double lagrange(const double* grid, int dim, int p, int a, const double* x) {
  double value = 1;
  for (int d = 0; d < dim; ++d) value *= lagrange_1d(grid + d * p, p, cheb_digit(a, p, d), x[d]);
  return value;
}

// Chebyshev node `a` of a box (grid as in lagrange) written to x[0 … dim).
COVFLOW_H2_HD inline void cheb_point(const double* grid, int dim, int p, int a, double* x) {
  for (int d = 0; d < dim; ++d) x[d] = grid[d * p + cheb_digit(a, p, d)];
}

}  // namespace covflow::linalg::detail::h2

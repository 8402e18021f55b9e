// Test inputs and checks for cholupdate, shared by the CPU suite (cholupdate_test.cpp) and the GPU
// suite (cholupdate_gpu_test.cpp): factors built directly (no O(n³) factorisation, so n = 5000
// stays cheap), update vectors, and the error measures in units of n·ε.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "covflow/linalg/cholupdate.hpp"
#include "covflow/linalg/types.hpp"

namespace covflow::test {

// How the input factor is built (all lower triangular, packed n×n, column-major, with the strict
// upper triangle filled with NaN: cholupdate must never read it):
enum class FactorKind {
  random,  // L = D + N, D ∈ [1, 2], N strictly lower Gaussian with ‖N‖₂ ≈ 0.4: κ₂(LLᴴ) ≲ 20
  graded,  // the same with D_jj = 10^(−g·j/(n−1)), g = 3 (float) or 6 (double): κ₂(LLᴴ) ≈ 10^(2g)
  tiny_pivot,  // random, but D_jj = 10^(−g) at j = ⌊n/3⌋ (g = 4 float, 9 double): one nearly
               // singular direction, the case where hyperbolic (mixed-form) updates cancel
};
std::string name(FactorKind kind);

// The required tolerance for the reconstruction error, in units of n·ε.
inline constexpr double chol_tolerance = 10.0;

template <class T>
struct CholCase {
  int n = 0, k = 0, count = 0;
  linalg::Sign sign = linalg::Sign::update;
  std::uint64_t seed = 0;
  std::vector<T> l;  // count·n·n, the input factors (strict upper triangle NaN)
  std::vector<T> v;  // count·n·k, ld n
  const T* factor(int b) const { return l.data() + std::size_t(b) * n * n; }
  const T* update(int b) const { return v.data() + std::size_t(b) * n * k; }
};

// An update case: factors of `kind`, V Gaussian scaled so that ‖VVᴴ‖ is comparable to ‖A‖.
template <class T>
CholCase<T> make_update_case(FactorKind kind, int n, int k, int count, std::mt19937_64& rng);

// A downdate case whose result is well conditioned: B = L_B L_Bᴴ with L_B random, V as above,
// and the input factor that of A = B + VVᴴ, formed in double precision by a plain rank-one
// rotation sweep (k passes, independent of the code under test) and rounded to T. Downdating it by
// V gives back ≈ B, whatever rounding the input carries (the test's A is L·Lᴴ of the stored L).
// `base` receives L_B (count·n·n).
template <class T>
CholCase<T> make_downdate_case(int n, int k, int count, std::mt19937_64& rng, std::vector<T>* base = nullptr);

// Makes matrix b of a downdate case fail at `column` (0-based): V's rows above it are zeroed, so
// the columns before it see no change, and its row is scaled so that Σ_p |v_column,p|² =
// 1.5·L(column, column)² — the hyperbolic rotations of that column then lose positive
// definiteness, and cholupdate must report column + 1.
template <class T>
void make_downdate_fail_at(CholCase<T>& c, int b, int column);

// ‖L̃L̃ᴴ − (LLᴴ ± VVᴴ)‖_F / ‖LLᴴ ± VVᴴ‖_F / (n·ε) for matrix b of the case, with `result` the
// computed factor (n×n, ld n; only its lower triangle is read). For n ≤ kExactLimit computed
// exactly (long double for double T, double for float T); above it estimated with
// kProbes Gaussian probe vectors Z (‖EZ‖_F/‖AZ‖_F, in double; relative spread ≈ 20 %), which is
// O(n²) instead of O(n³). NaN anywhere gives NaN.
inline constexpr int kExactLimit = 256;
inline constexpr int kProbes = 12;
template <class T>
double reconstruction_error(const CholCase<T>& c, int b, const T* result);

// ‖X − Y‖_F / ‖Y‖_F / (n·ε) on the lower triangles of two n×n factors (ld n).
template <class T>
double factor_difference(const T* x, const T* y, int n);

// LAPACK ?potrf (double precision) of LLᴴ ± VVᴴ for matrix b, formed in double: the factor
// (n×n, lower, upper zero) and LAPACK's info. Also κ₂ of that matrix (by ?syev/?heev) — the
// forward-error bound of a Cholesky factor scales with it. n ≤ kExactLimit only.
template <class T>
struct PotrfReference {
  std::vector<T> factor;
  int info = 0;
  double condition = 0;
};
template <class T>
PotrfReference<T> potrf_reference(const CholCase<T>& c, int b);

// True when the strict upper triangle of `result` is bit for bit that of `input` (n×n, ld n).
template <class T>
bool upper_untouched(const T* input, const T* result, int n);

}  // namespace covflow::test

// Internal: the Fortran BLAS/LAPACK symbols the CPU backend calls, with C++ overloads per element
// type. Declared here rather than through LAPACKE so that character arguments carry gfortran's
// hidden length arguments and nothing is transposed behind our back.
#pragma once

#include <cstddef>

#include "covflow/linalg/types.hpp"

extern "C" {
void cherk_(const char* uplo, const char* trans, const int* n, const int* k, const float* alpha,
            const covflow::linalg::cf32* a, const int* lda, const float* beta,
            covflow::linalg::cf32* c, const int* ldc, std::size_t, std::size_t);
void zherk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha,
            const covflow::linalg::cf64* a, const int* lda, const double* beta,
            covflow::linalg::cf64* c, const int* ldc, std::size_t, std::size_t);
}

namespace covflow::linalg::blas {

// C := alpha * A * Aᴴ + beta * C on the `uplo` triangle (trans = 'N').
inline void herk(char uplo, char trans, int n, int k, float alpha, const cf32* a, int lda,
                 float beta, cf32* c, int ldc) {
  cherk_(&uplo, &trans, &n, &k, &alpha, a, &lda, &beta, c, &ldc, 1, 1);
}
inline void herk(char uplo, char trans, int n, int k, double alpha, const cf64* a, int lda,
                 double beta, cf64* c, int ldc) {
  zherk_(&uplo, &trans, &n, &k, &alpha, a, &lda, &beta, c, &ldc, 1, 1);
}

}  // namespace covflow::linalg::blas

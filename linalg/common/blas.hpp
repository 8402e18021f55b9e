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

void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info, std::size_t, std::size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, std::size_t, std::size_t);
void cheevd_(const char* jobz, const char* uplo, const int* n, covflow::linalg::cf32* a, const int* lda, float* w,
             covflow::linalg::cf32* work, const int* lwork, float* rwork, const int* lrwork, int* iwork,
             const int* liwork, int* info, std::size_t, std::size_t);
void zheevd_(const char* jobz, const char* uplo, const int* n, covflow::linalg::cf64* a, const int* lda, double* w,
             covflow::linalg::cf64* work, const int* lwork, double* rwork, const int* lrwork, int* iwork,
             const int* liwork, int* info, std::size_t, std::size_t);
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

// Hermitian/symmetric eigensolver, divide and conquer (?heevd / ?syevd). For real T, rwork and
// lrwork are unused. lwork = -1 is a workspace query, as in LAPACK.
inline void heevd(char jobz, char uplo, int n, float* a, int lda, float* w, float* work, int lwork, float*, int,
                  int* iwork, int liwork, int* info) {
  ssyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, info, 1, 1);
}
inline void heevd(char jobz, char uplo, int n, double* a, int lda, double* w, double* work, int lwork, double*, int,
                  int* iwork, int liwork, int* info) {
  dsyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, info, 1, 1);
}
inline void heevd(char jobz, char uplo, int n, cf32* a, int lda, float* w, cf32* work, int lwork, float* rwork,
                  int lrwork, int* iwork, int liwork, int* info) {
  cheevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, rwork, &lrwork, iwork, &liwork, info, 1, 1);
}
inline void heevd(char jobz, char uplo, int n, cf64* a, int lda, double* w, cf64* work, int lwork, double* rwork,
                  int lrwork, int* iwork, int liwork, int* info) {
  zheevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, rwork, &lrwork, iwork, &liwork, info, 1, 1);
}

}  // namespace covflow::linalg::blas

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

void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work, const int* lwork,
             int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work, const int* lwork,
             int* info);
void cgeqrf_(const int* m, const int* n, covflow::linalg::cf32* a, const int* lda, covflow::linalg::cf32* tau,
             covflow::linalg::cf32* work, const int* lwork, int* info);
void zgeqrf_(const int* m, const int* n, covflow::linalg::cf64* a, const int* lda, covflow::linalg::cf64* tau,
             covflow::linalg::cf64* work, const int* lwork, int* info);

void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* work,
             const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau, double* work,
             const int* lwork, int* info);
void cungqr_(const int* m, const int* n, const int* k, covflow::linalg::cf32* a, const int* lda,
             const covflow::linalg::cf32* tau, covflow::linalg::cf32* work, const int* lwork, int* info);
void zungqr_(const int* m, const int* n, const int* k, covflow::linalg::cf64* a, const int* lda,
             const covflow::linalg::cf64* tau, covflow::linalg::cf64* work, const int* lwork, int* info);

void sormqr_(const char* side, const char* trans, const int* m, const int* n, const int* k, const float* a,
             const int* lda, const float* tau, float* c, const int* ldc, float* work, const int* lwork, int* info,
             std::size_t, std::size_t);
void dormqr_(const char* side, const char* trans, const int* m, const int* n, const int* k, const double* a,
             const int* lda, const double* tau, double* c, const int* ldc, double* work, const int* lwork, int* info,
             std::size_t, std::size_t);
void cunmqr_(const char* side, const char* trans, const int* m, const int* n, const int* k,
             const covflow::linalg::cf32* a, const int* lda, const covflow::linalg::cf32* tau,
             covflow::linalg::cf32* c, const int* ldc, covflow::linalg::cf32* work, const int* lwork, int* info,
             std::size_t, std::size_t);
void zunmqr_(const char* side, const char* trans, const int* m, const int* n, const int* k,
             const covflow::linalg::cf64* a, const int* lda, const covflow::linalg::cf64* tau,
             covflow::linalg::cf64* c, const int* ldc, covflow::linalg::cf64* work, const int* lwork, int* info,
             std::size_t, std::size_t);

void sgesvj_(const char* joba, const char* jobu, const char* jobv, const int* m, const int* n, float* a,
             const int* lda, float* sva, const int* mv, float* v, const int* ldv, float* work, const int* lwork,
             int* info, std::size_t, std::size_t, std::size_t);
void dgesvj_(const char* joba, const char* jobu, const char* jobv, const int* m, const int* n, double* a,
             const int* lda, double* sva, const int* mv, double* v, const int* ldv, double* work, const int* lwork,
             int* info, std::size_t, std::size_t, std::size_t);
void cgesvj_(const char* joba, const char* jobu, const char* jobv, const int* m, const int* n,
             covflow::linalg::cf32* a, const int* lda, float* sva, const int* mv, covflow::linalg::cf32* v,
             const int* ldv, covflow::linalg::cf32* cwork, const int* lwork, float* rwork, const int* lrwork,
             int* info, std::size_t, std::size_t, std::size_t);
void zgesvj_(const char* joba, const char* jobu, const char* jobv, const int* m, const int* n,
             covflow::linalg::cf64* a, const int* lda, double* sva, const int* mv, covflow::linalg::cf64* v,
             const int* ldv, covflow::linalg::cf64* cwork, const int* lwork, double* rwork, const int* lrwork,
             int* info, std::size_t, std::size_t, std::size_t);
void sgesvd_(const char* jobu, const char* jobvt, const int* m, const int* n, float* a, const int* lda, float* s,
             float* u, const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork, int* info,
             std::size_t, std::size_t);
void dgesvd_(const char* jobu, const char* jobvt, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork, int* info,
             std::size_t, std::size_t);
void cgesvd_(const char* jobu, const char* jobvt, const int* m, const int* n, covflow::linalg::cf32* a,
             const int* lda, float* s, covflow::linalg::cf32* u, const int* ldu, covflow::linalg::cf32* vt,
             const int* ldvt, covflow::linalg::cf32* work, const int* lwork, float* rwork, int* info, std::size_t,
             std::size_t);
void zgesvd_(const char* jobu, const char* jobvt, const int* m, const int* n, covflow::linalg::cf64* a,
             const int* lda, double* s, covflow::linalg::cf64* u, const int* ldu, covflow::linalg::cf64* vt,
             const int* ldvt, covflow::linalg::cf64* work, const int* lwork, double* rwork, int* info, std::size_t,
             std::size_t);
void sgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc, std::size_t, std::size_t);
void dgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta, double* c,
            const int* ldc, std::size_t, std::size_t);
void cgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k,
            const covflow::linalg::cf32* alpha, const covflow::linalg::cf32* a, const int* lda,
            const covflow::linalg::cf32* b, const int* ldb, const covflow::linalg::cf32* beta,
            covflow::linalg::cf32* c, const int* ldc, std::size_t, std::size_t);
void zgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k,
            const covflow::linalg::cf64* alpha, const covflow::linalg::cf64* a, const int* lda,
            const covflow::linalg::cf64* b, const int* ldb, const covflow::linalg::cf64* beta,
            covflow::linalg::cf64* c, const int* ldc, std::size_t, std::size_t);

void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void cgetrf_(const int* m, const int* n, covflow::linalg::cf32* a, const int* lda, int* ipiv, int* info);
void zgetrf_(const int* m, const int* n, covflow::linalg::cf64* a, const int* lda, int* ipiv, int* info);

void sgetrs_(const char* trans, const int* n, const int* nrhs, const float* a, const int* lda, const int* ipiv,
             float* b, const int* ldb, int* info, std::size_t);
void dgetrs_(const char* trans, const int* n, const int* nrhs, const double* a, const int* lda, const int* ipiv,
             double* b, const int* ldb, int* info, std::size_t);
void cgetrs_(const char* trans, const int* n, const int* nrhs, const covflow::linalg::cf32* a, const int* lda,
             const int* ipiv, covflow::linalg::cf32* b, const int* ldb, int* info, std::size_t);
void zgetrs_(const char* trans, const int* n, const int* nrhs, const covflow::linalg::cf64* a, const int* lda,
             const int* ipiv, covflow::linalg::cf64* b, const int* ldb, int* info, std::size_t);

void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, std::size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, std::size_t);
void cpotrf_(const char* uplo, const int* n, covflow::linalg::cf32* a, const int* lda, int* info, std::size_t);
void zpotrf_(const char* uplo, const int* n, covflow::linalg::cf64* a, const int* lda, int* info, std::size_t);

void spotrs_(const char* uplo, const int* n, const int* nrhs, const float* a, const int* lda, float* b,
             const int* ldb, int* info, std::size_t);
void dpotrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda, double* b,
             const int* ldb, int* info, std::size_t);
void cpotrs_(const char* uplo, const int* n, const int* nrhs, const covflow::linalg::cf32* a, const int* lda,
             covflow::linalg::cf32* b, const int* ldb, int* info, std::size_t);
void zpotrs_(const char* uplo, const int* n, const int* nrhs, const covflow::linalg::cf64* a, const int* lda,
             covflow::linalg::cf64* b, const int* ldb, int* info, std::size_t);

void strtrs_(const char* uplo, const char* trans, const char* diag, const int* n, const int* nrhs, const float* a,
             const int* lda, float* b, const int* ldb, int* info, std::size_t, std::size_t, std::size_t);
void dtrtrs_(const char* uplo, const char* trans, const char* diag, const int* n, const int* nrhs, const double* a,
             const int* lda, double* b, const int* ldb, int* info, std::size_t, std::size_t, std::size_t);
void ctrtrs_(const char* uplo, const char* trans, const char* diag, const int* n, const int* nrhs,
             const covflow::linalg::cf32* a, const int* lda, covflow::linalg::cf32* b, const int* ldb, int* info,
             std::size_t, std::size_t, std::size_t);
void ztrtrs_(const char* uplo, const char* trans, const char* diag, const int* n, const int* nrhs,
             const covflow::linalg::cf64* a, const int* lda, covflow::linalg::cf64* b, const int* ldb, int* info,
             std::size_t, std::size_t, std::size_t);
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

// Householder QR (?geqrf): A = Q·R, R on and above the diagonal, the reflectors below it.
// lwork = -1 is a workspace query.
inline void geqrf(int m, int n, float* a, int lda, float* tau, float* work, int lwork, int* info) {
  sgeqrf_(&m, &n, a, &lda, tau, work, &lwork, info);
}
inline void geqrf(int m, int n, double* a, int lda, double* tau, double* work, int lwork, int* info) {
  dgeqrf_(&m, &n, a, &lda, tau, work, &lwork, info);
}
inline void geqrf(int m, int n, cf32* a, int lda, cf32* tau, cf32* work, int lwork, int* info) {
  cgeqrf_(&m, &n, a, &lda, tau, work, &lwork, info);
}
inline void geqrf(int m, int n, cf64* a, int lda, cf64* tau, cf64* work, int lwork, int* info) {
  zgeqrf_(&m, &n, a, &lda, tau, work, &lwork, info);
}

// The first n columns of Q = H₁…H_k from k reflectors (?ungqr; ?orgqr for real T).
inline void ungqr(int m, int n, int k, float* a, int lda, const float* tau, float* work, int lwork, int* info) {
  sorgqr_(&m, &n, &k, a, &lda, tau, work, &lwork, info);
}
inline void ungqr(int m, int n, int k, double* a, int lda, const double* tau, double* work, int lwork, int* info) {
  dorgqr_(&m, &n, &k, a, &lda, tau, work, &lwork, info);
}
inline void ungqr(int m, int n, int k, cf32* a, int lda, const cf32* tau, cf32* work, int lwork, int* info) {
  cungqr_(&m, &n, &k, a, &lda, tau, work, &lwork, info);
}
inline void ungqr(int m, int n, int k, cf64* a, int lda, const cf64* tau, cf64* work, int lwork, int* info) {
  zungqr_(&m, &n, &k, a, &lda, tau, work, &lwork, info);
}

// C ← op(Q)·C or C·op(Q) (?unmqr; ?ormqr for real T). trans is 'N' or 'C'; real T gets 'T' for 'C'.
inline void unmqr(char side, char trans, int m, int n, int k, const float* a, int lda, const float* tau, float* c,
                  int ldc, float* work, int lwork, int* info) {
  if (trans == 'C') trans = 'T';
  sormqr_(&side, &trans, &m, &n, &k, a, &lda, tau, c, &ldc, work, &lwork, info, 1, 1);
}
inline void unmqr(char side, char trans, int m, int n, int k, const double* a, int lda, const double* tau, double* c,
                  int ldc, double* work, int lwork, int* info) {
  if (trans == 'C') trans = 'T';
  dormqr_(&side, &trans, &m, &n, &k, a, &lda, tau, c, &ldc, work, &lwork, info, 1, 1);
}
inline void unmqr(char side, char trans, int m, int n, int k, const cf32* a, int lda, const cf32* tau, cf32* c,
                  int ldc, cf32* work, int lwork, int* info) {
  cunmqr_(&side, &trans, &m, &n, &k, a, &lda, tau, c, &ldc, work, &lwork, info, 1, 1);
}
inline void unmqr(char side, char trans, int m, int n, int k, const cf64* a, int lda, const cf64* tau, cf64* c,
                  int ldc, cf64* work, int lwork, int* info) {
  zunmqr_(&side, &trans, &m, &n, &k, a, &lda, tau, c, &ldc, work, &lwork, info, 1, 1);
}

// One-sided Jacobi SVD (?gesvj) of an m × n matrix, m ≥ n. For real T the statistics (SCALE,
// ranks, sweeps, last |cos|) come back in work[0..5] and rwork/lrwork are unused; for complex T
// they come back in rwork[0..5]. No workspace query: the sizes are in the LAPACK documentation
// (lwork ≥ max(6, m + n); complex lrwork ≥ max(6, n)).
inline void gesvj(char joba, char jobu, char jobv, int m, int n, float* a, int lda, float* sva, int mv, float* v,
                  int ldv, float* work, int lwork, float*, int, int* info) {
  sgesvj_(&joba, &jobu, &jobv, &m, &n, a, &lda, sva, &mv, v, &ldv, work, &lwork, info, 1, 1, 1);
}
inline void gesvj(char joba, char jobu, char jobv, int m, int n, double* a, int lda, double* sva, int mv, double* v,
                  int ldv, double* work, int lwork, double*, int, int* info) {
  dgesvj_(&joba, &jobu, &jobv, &m, &n, a, &lda, sva, &mv, v, &ldv, work, &lwork, info, 1, 1, 1);
}
inline void gesvj(char joba, char jobu, char jobv, int m, int n, cf32* a, int lda, float* sva, int mv, cf32* v,
                  int ldv, cf32* cwork, int lwork, float* rwork, int lrwork, int* info) {
  cgesvj_(&joba, &jobu, &jobv, &m, &n, a, &lda, sva, &mv, v, &ldv, cwork, &lwork, rwork, &lrwork, info, 1, 1, 1);
}
inline void gesvj(char joba, char jobu, char jobv, int m, int n, cf64* a, int lda, double* sva, int mv, cf64* v,
                  int ldv, cf64* cwork, int lwork, double* rwork, int lrwork, int* info) {
  zgesvj_(&joba, &jobu, &jobv, &m, &n, a, &lda, sva, &mv, v, &ldv, cwork, &lwork, rwork, &lrwork, info, 1, 1, 1);
}

// SVD by bidiagonalisation (?gesvd): A = U·Σ·Vᴴ, σ descending; jobu / jobvt 'S' give the thin
// U (m × min) and Vᴴ (min × n). A is destroyed. For real T rwork is unused; for complex T it holds
// 5·min(m, n) reals. lwork = -1 is a workspace query. info > 0: the QR iteration did not converge.
inline void gesvd(char jobu, char jobvt, int m, int n, float* a, int lda, float* s, float* u, int ldu, float* vt,
                  int ldvt, float* work, int lwork, float*, int* info) {
  sgesvd_(&jobu, &jobvt, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, info, 1, 1);
}
inline void gesvd(char jobu, char jobvt, int m, int n, double* a, int lda, double* s, double* u, int ldu, double* vt,
                  int ldvt, double* work, int lwork, double*, int* info) {
  dgesvd_(&jobu, &jobvt, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, info, 1, 1);
}
inline void gesvd(char jobu, char jobvt, int m, int n, cf32* a, int lda, float* s, cf32* u, int ldu, cf32* vt,
                  int ldvt, cf32* work, int lwork, float* rwork, int* info) {
  cgesvd_(&jobu, &jobvt, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, rwork, info, 1, 1);
}
inline void gesvd(char jobu, char jobvt, int m, int n, cf64* a, int lda, double* s, cf64* u, int ldu, cf64* vt,
                  int ldvt, cf64* work, int lwork, double* rwork, int* info) {
  zgesvd_(&jobu, &jobvt, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, rwork, info, 1, 1);
}

// C := alpha · op(A) · op(B) + beta · C; op 'N', 'T' or 'C'.
inline void gemm(char ta, char tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
                 float beta, float* c, int ldc) {
  sgemm_(&ta, &tb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc, 1, 1);
}
inline void gemm(char ta, char tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
                 int ldb, double beta, double* c, int ldc) {
  dgemm_(&ta, &tb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc, 1, 1);
}
inline void gemm(char ta, char tb, int m, int n, int k, cf32 alpha, const cf32* a, int lda, const cf32* b, int ldb,
                 cf32 beta, cf32* c, int ldc) {
  cgemm_(&ta, &tb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc, 1, 1);
}
inline void gemm(char ta, char tb, int m, int n, int k, cf64 alpha, const cf64* a, int lda, const cf64* b, int ldb,
                 cf64 beta, cf64* c, int ldc) {
  zgemm_(&ta, &tb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc, 1, 1);
}

// LU with partial pivoting (?getrf): A = P·L·U, ipiv 1-based in LAPACK's sequential-swap form.
// info > 0: U(info, info) is exactly zero (the factorization is still complete).
inline void getrf(int m, int n, float* a, int lda, int* ipiv, int* info) { sgetrf_(&m, &n, a, &lda, ipiv, info); }
inline void getrf(int m, int n, double* a, int lda, int* ipiv, int* info) { dgetrf_(&m, &n, a, &lda, ipiv, info); }
inline void getrf(int m, int n, cf32* a, int lda, int* ipiv, int* info) { cgetrf_(&m, &n, a, &lda, ipiv, info); }
inline void getrf(int m, int n, cf64* a, int lda, int* ipiv, int* info) { zgetrf_(&m, &n, a, &lda, ipiv, info); }

// op(A)·X = B with getrf's factors (?getrs); trans 'N', 'T' or 'C' ('C' is 'T' for real T).
inline void getrs(char trans, int n, int nrhs, const float* a, int lda, const int* ipiv, float* b, int ldb,
                  int* info) {
  sgetrs_(&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, info, 1);
}
inline void getrs(char trans, int n, int nrhs, const double* a, int lda, const int* ipiv, double* b, int ldb,
                  int* info) {
  dgetrs_(&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, info, 1);
}
inline void getrs(char trans, int n, int nrhs, const cf32* a, int lda, const int* ipiv, cf32* b, int ldb,
                  int* info) {
  cgetrs_(&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, info, 1);
}
inline void getrs(char trans, int n, int nrhs, const cf64* a, int lda, const int* ipiv, cf64* b, int ldb,
                  int* info) {
  zgetrs_(&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, info, 1);
}

// Cholesky (?potrf): A = L·Lᴴ ('L') or Uᴴ·U ('U') on that triangle. info > 0: the leading minor of
// order info is not positive definite.
inline void potrf(char uplo, int n, float* a, int lda, int* info) { spotrf_(&uplo, &n, a, &lda, info, 1); }
inline void potrf(char uplo, int n, double* a, int lda, int* info) { dpotrf_(&uplo, &n, a, &lda, info, 1); }
inline void potrf(char uplo, int n, cf32* a, int lda, int* info) { cpotrf_(&uplo, &n, a, &lda, info, 1); }
inline void potrf(char uplo, int n, cf64* a, int lda, int* info) { zpotrf_(&uplo, &n, a, &lda, info, 1); }

// A·X = B with potrf's factor (?potrs).
inline void potrs(char uplo, int n, int nrhs, const float* a, int lda, float* b, int ldb, int* info) {
  spotrs_(&uplo, &n, &nrhs, a, &lda, b, &ldb, info, 1);
}
inline void potrs(char uplo, int n, int nrhs, const double* a, int lda, double* b, int ldb, int* info) {
  dpotrs_(&uplo, &n, &nrhs, a, &lda, b, &ldb, info, 1);
}
inline void potrs(char uplo, int n, int nrhs, const cf32* a, int lda, cf32* b, int ldb, int* info) {
  cpotrs_(&uplo, &n, &nrhs, a, &lda, b, &ldb, info, 1);
}
inline void potrs(char uplo, int n, int nrhs, const cf64* a, int lda, cf64* b, int ldb, int* info) {
  zpotrs_(&uplo, &n, &nrhs, a, &lda, b, &ldb, info, 1);
}

// op(A)·X = B for triangular A (?trtrs); diag 'N' or 'U'. info > 0: A(info, info) is exactly zero
// (non-unit diag), and B is left as it was.
inline void trtrs(char uplo, char trans, char diag, int n, int nrhs, const float* a, int lda, float* b, int ldb,
                  int* info) {
  strtrs_(&uplo, &trans, &diag, &n, &nrhs, a, &lda, b, &ldb, info, 1, 1, 1);
}
inline void trtrs(char uplo, char trans, char diag, int n, int nrhs, const double* a, int lda, double* b, int ldb,
                  int* info) {
  dtrtrs_(&uplo, &trans, &diag, &n, &nrhs, a, &lda, b, &ldb, info, 1, 1, 1);
}
inline void trtrs(char uplo, char trans, char diag, int n, int nrhs, const cf32* a, int lda, cf32* b, int ldb,
                  int* info) {
  ctrtrs_(&uplo, &trans, &diag, &n, &nrhs, a, &lda, b, &ldb, info, 1, 1, 1);
}
inline void trtrs(char uplo, char trans, char diag, int n, int nrhs, const cf64* a, int lda, cf64* b, int ldb,
                  int* info) {
  ztrtrs_(&uplo, &trans, &diag, &n, &nrhs, a, &lda, b, &ldb, info, 1, 1, 1);
}

}  // namespace covflow::linalg::blas

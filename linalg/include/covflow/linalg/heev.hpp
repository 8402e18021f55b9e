// heev: all eigenvalues (and optionally eigenvectors) of a batch of Hermitian matrices — real
// symmetric for real T — with LAPACK's conventions: eigenvalues ascending, eigenvectors as the
// columns of the matrix that overwrites A.
//
// The CUDA path follows A. Cosnuau, "Computation on GPU of Eigenvalues and Eigenvectors of a Large
// Number of Small Hermitian Matrices" (Procedia Computer Science, 2014): Householder reduction to
// Hermitian tridiagonal form (§2.2), a diagonal unitary scaling that makes it real symmetric
// tridiagonal (end of §2.2), and Wilkinson-shifted implicit QR with deflation (§3) — for n > 32 on
// the leaves of a divide and conquer; eigenvectors are those of the real tridiagonal, brought back
// with the Householder reflectors. The CPU path is
// LAPACK's divide-and-conquer driver (?heevd / ?syevd) across the thread pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "covflow/linalg/batch.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::linalg {

struct HeevOptions {
  Uplo uplo = Uplo::lower;  // which triangle of A is read; the other is never read
  bool vectors = true;      // false: eigenvalues only (A is then overwritten with scratch)
};

// a:    count × (n × n); read from its `uplo` triangle. With vectors, overwritten by the
//       eigenvectors (column k belongs to w[k]); without, its contents are unspecified on return.
// w:    count × n eigenvalues, ascending within each matrix (w[b * n + k]).
// info: count entries, one per matrix: 0 success; status::non_finite_input when the read triangle
//       held a NaN or an Inf (that matrix's w and vectors are then NaN and the other matrices are
//       unaffected); status::no_convergence when the iteration limit was hit. On the CUDA backend
//       info is written on the device, stream-ordered: read it when you choose, no host sync is
//       made. All of a, w and info must live where the Exec runs.
template <class T>
void heev(Exec& exec, Batch<T> a, std::span<real_t<T>> w, std::span<int> info, const HeevOptions& options = {});

// Bytes of scratch heev takes from exec.workspace() for this shape. Reserve them once at start-up
// (exec.workspace().reserve(...)) and heev never allocates.
template <class T>
std::size_t heev_workspace(const Exec& exec, std::int64_t n, std::int64_t count, const HeevOptions& options = {});

}  // namespace covflow::linalg

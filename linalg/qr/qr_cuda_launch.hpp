// Internal: the QR kernels' arguments and launchers, shared by the dispatch (qr_cuda.cu) and the
// files that hold the kernels (qr_cuda_factor.cu, qr_cuda_apply.cu, qr_cuda_global.cu). D is the
// device element type (float, double, Cx<float>, Cx<double>).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <initializer_list>

namespace covflow::linalg::detail::qr {

// How a sub-matrix of `rows` × `cols` is spread over threads, column by column: `group` lanes (a
// power of two ≤ 32) share each column, lane r holding rows r, r + group, r + 2·group, … of the
// block's share — `rpt` of them, in registers — and `cluster` blocks split the rows between them
// (rows_per_block() each). Zero `cluster`: no layout fits.
struct Layout {
  int rpt = 0;
  int group = 0;
  int cluster = 0;
  int threads = 0;
  int rows_per_block() const { return group * rpt; }
  explicit operator bool() const { return cluster > 0; }
};

// The first layout that fits, trying clusters of 1, 2, … max_cluster blocks and, for each, the
// rows per thread in `rpt_order` (each one of 4, 8, 16, 32): the register budget of max_threads()
// with the kernel's `overhead` bounds group·cols. `element_bytes` is sizeof(D).
Layout choose_layout(int element_bytes, int rows, int cols, std::initializer_list<int> rpt_order, int max_cluster,
                     int overhead);

// geqrf of a sub-matrix (a whole matrix, or a panel of the blocked path) held in registers.
template <class D>
struct FactorArgs {
  D* a = nullptr;  // the sub-matrix's corner in matrix 0; matrix b at a + b·stride
  long long lda = 0, stride = 0;
  D* tau = nullptr;  // τ of the sub-matrix's first reflector in matrix 0; matrix b at + b·tau_stride
  long long tau_stride = 0;
  int* info = nullptr;
  int rows = 0, cols = 0, reflectors = 0;
  int group = 1, cluster = 1;
  // 0: no check; 1: a NaN or an Inf sets info[b] = non_finite_input (info zeroed before); 2: the
  // whole matrix: a matrix holding one is written NaN here, and info written for every matrix.
  int check = 0;
  long long first = 0;  // first matrix of the launch
};

// C ← H_p·C or H_pᴴ·C for the reflectors of a sub-matrix V, applied one at a time.
template <class D>
struct ApplyArgs {
  const D* v = nullptr;  // reflector p: column p of V, its 1 at row p (the stored diagonal is not read)
  long long ldv = 0, stride_v = 0;
  const D* tau = nullptr;
  long long tau_stride = 0;
  D* c = nullptr;  // the logical C's corner in matrix 0
  long long ldc = 0, stride_c = 0;
  int rows = 0, cols = 0, reflectors = 0;  // rows of V and of the logical C, columns of C, reflectors
  int group = 1, cluster = 1;
  int tile = 0;   // columns per block
  int chunk = 0;  // reflectors per shared-memory load
  long long first = 0;
  bool backward = false;    // H_{k−1} first, τ (Q·C); else H_0 first, conj(τ) (Qᴴ·C)
  bool transposed = false;  // the logical C is the conjugate transpose of the stored matrix
  bool identity = false;    // C starts as the first columns of I (ungqr) …
  int zero_above = 0;       // … and the stored rows above the sub-matrix are zeroed
  int* info = nullptr;      // non-null: a NaN or an Inf read in C sets info[b] = non_finite_input
};

template <class D>
std::size_t factor_shared_bytes(const Layout& layout, int cols);
template <class D>
std::size_t apply_shared_bytes(const Layout& layout, int tile, int chunk);

template <class D>
void launch_factor(FactorArgs<D> args, const Layout& layout, long long count, cudaStream_t stream);
template <class D>
void launch_apply(ApplyArgs<D> args, const Layout& layout, long long count, cudaStream_t stream);

// Fallbacks in global memory, one block per matrix (factor, org2r) or a warp per column (apply):
// for sub-matrices taller than a cluster holds.
template <class D>
void launch_global_factor(FactorArgs<D> args, long long count, cudaStream_t stream);
template <class D>
void launch_global_apply(ApplyArgs<D> args, long long count, cudaStream_t stream);
// ?org2r on a rows × cols panel of reflectors (rows ≥ cols) in place, the stored rows above it
// (zero_above of them) zeroed.
template <class D>
void launch_global_org2r(D* a, long long lda, long long stride, const D* tau, long long tau_stride, int rows,
                         int cols, int zero_above, long long count, cudaStream_t stream);

// For each matrix whose info is nonzero: its rows × cols elements and its k τ written NaN.
template <class D>
void launch_poison_flagged(D* a, long long lda, long long stride, int rows, int cols, D* tau, long long tau_stride,
                           int k, const int* info, long long count, cudaStream_t stream);

// Launch helpers shared by the files above.
constexpr long long kMaxGridY = 65535;
constexpr std::size_t kSharedBudget = 200 * 1024;  // dynamic shared memory a block plans for (sm_90: 227 KB)

// geqrf of tiny matrices, n ≤ kTinyMaxCols columns and m ≤ kTinyMaxRows rows
// (qr_cuda_tiny.cu): the matrix in shared memory, a lane per column, several matrices per block.
// Writes info (0 or status::non_finite_input) for every matrix.
inline constexpr int kTinyMaxCols = 32;
inline constexpr int kTinyMaxRows = 128;
bool tiny_fits(int m, int n);
template <class D>
void launch_tiny_geqrf(D* a, long long lda, long long stride, D* tau, int* info, int m, int n, long long count,
                       cudaStream_t stream);

}  // namespace covflow::linalg::detail::qr

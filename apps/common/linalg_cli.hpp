// `covflow linalg ...`: linear algebra on NumPy files, so a Python user can check covflow's
// results against numpy in two lines.
//
//   covflow linalg heev IN.npy --values W.npy [--vectors V.npy] [--device cpu|cuda|auto] [--uplo L|U]
//   covflow linalg cholupdate L.npy V.npy --sign +|- --out L2.npy [--device cpu|cuda|auto]
//   covflow linalg qr A.npy [--q Q.npy] [--r R.npy] [--device cpu|cuda|auto]
//   covflow linalg svd A.npy --s S.npy [--u U.npy] [--vh Vh.npy] [--device cpu|cuda|auto]
//   covflow linalg rsvd A.npy (--rank K | --tol T [--max-rank R]) [--hermitian] [--seed N]
//        [--oversampling P] [--power-iterations Q] [--block B] [--absolute]
//        --s S.npy [--u U.npy] [--vh Vh.npy] [--ranks R.npy] [--device cpu|cuda|auto]
//   covflow linalg lu A.npy --lu LU.npy --piv P.npy [--device cpu|cuda|auto]
//   covflow linalg cholesky A.npy --out L.npy [--upper] [--device cpu|cuda|auto]
//   covflow linalg solve A.npy B.npy --out X.npy [--assume general|positive] [--device cpu|cuda|auto]
//   covflow linalg compress A.npy --format tlr --tile B --tol T [--max-rank K] [--scope matrix|tile]
//        [--hermitian] --out C.npz [--device cpu|cuda|auto]
//   covflow linalg h2 build --points P.npy --kernel exponential|gaussian|matern|clutter [kernel options]
//        [--leaf M --eta E --order P] [--tol T] [--dtype D] --out C.npz [--device cpu|cuda|auto]
//   covflow linalg expand C.npz --out A.npy [--device cpu|cuda|auto]
//   covflow linalg apply C.npz X.npy --out Y.npy [--device cpu|cuda|auto]
//   covflow linalg solve C.npz B.npy --out X.npy [--device cpu|cuda|auto]
//
// heev follows numpy.linalg.eigh exactly: IN is (n, n) or (batch, n, n), complex128, complex64,
// float64 or float32, in either element order; W is (n,) or (batch, n) of the real type of the
// same precision, ascending; V has IN's shape with V[..., :, k] the eigenvector of W[..., k];
// --uplo names the triangle of IN *as numpy indexes it* (row-major) that is read.
//
// qr follows numpy.linalg.qr(A, mode="reduced") and svd numpy.linalg.svd(A, full_matrices=False):
// A is (m, n) or (batch, m, n) of the same four dtypes, k = min(m, n); Q is (…, m, k) and R
// (…, k, n), upper triangular, A = Q·R; S is (…, k) of the real type, descending, U (…, m, k) and
// Vh = Vᴴ (…, k, n), A = U·diag(S)·Vh.
//
// rsvd is svd truncated to a rank r (linalg::rsvd_output_rank: K, at most min(m, n), or the
// largest rank --tol may take): S (…, r), U (…, m, r), Vh (…, r, n), A ≈ U·diag(S)·Vh; each
// matrix's columns beyond its own rank are zero, and R.npy holds the ranks as int32, (batch,) or
// () for one matrix. With --hermitian (A square, Hermitian positive semi-definite) S holds the
// eigenvalues λ descending and U the eigenvectors, A ≈ U·diag(S)·Uᴴ; there is no Vh.
//
// lu follows scipy.linalg.lu_factor: LU has A's shape, L (unit, below the diagonal) and U combined,
// P is int32 (n,) or (batch, n), 0-based: row i was interchanged with row P[i], for i = 0, 1, ….
// cholesky follows numpy.linalg.cholesky: A = L·Lᴴ from A's lower triangle, or with upper
// (numpy ≥ 2's upper=True) A = Uᴴ·U from its upper one; the other triangle of the output is zero.
// solve follows numpy 2's numpy.linalg.solve (solve_cli.cpp says which shapes; docs/cli.md too).
//
// compress, expand and apply, and solve on an .npz archive, work on tile low-rank matrices
// (linalg/tlr.hpp) kept in an .npz archive whose members docs/cli.md describes (tlr_cli.cpp).
// h2 build writes an H² matrix (linalg/h2.hpp) built from a kernel on points into an .npz archive
// of its own layout (h2_cli.cpp, docs/cli.md); expand and apply recognise it by its `format` member.
//
// Each run_* function returns an exit code from common/exit_codes.hpp and reports problems on
// `err`, one line each, starting with the command and the file they concern.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "covflow/linalg/h2.hpp"
#include "covflow/linalg/rsvd.hpp"
#include "covflow/linalg/tlr.hpp"

namespace covflow::cli {

enum class DeviceChoice { cpu, cuda, automatic };

struct HeevRequest {
  std::filesystem::path input;
  std::filesystem::path values;   // W.npy, always written
  std::filesystem::path vectors;  // V.npy; empty: eigenvalues only
  DeviceChoice device = DeviceChoice::automatic;
  char uplo = 'L';                // 'L' or 'U', numpy's meaning
};

// auto runs on CUDA when covflow was built with it and a device is present; when the operation
// has no CUDA path in this build it says so on `err` and runs on the CPU. --device cuda never
// falls back: no device, or no CUDA path, is exit_code::device_unavailable.
int run_heev(const HeevRequest& request, std::ostream& out, std::ostream& err);

struct CholupdateRequest {
  std::filesystem::path factor;  // L.npy: (batch, n, n) or (n, n) lower Cholesky factors
  std::filesystem::path update;  // V.npy: (batch, n, k) or (n, k)
  std::filesystem::path output;  // L2.npy
  char sign = '+';               // '+' update A + VVᴴ, '-' downdate A − VVᴴ
  DeviceChoice device = DeviceChoice::automatic;
};

// Checks both files (dtype, rank, shapes: exit_code::input_damaged when they do not fit), runs
// linalg::cholupdate on the chosen device and writes the new factors in L's shape and dtype.
// Factors that failed (a downdate losing positive definiteness, a NaN) are written as NaN, named on
// `err`, and the exit code is exit_code::numerical; the others are written as computed.
int run_cholupdate(const CholupdateRequest& request, std::ostream& out, std::ostream& err);

struct QrRequest {
  std::filesystem::path input;
  std::filesystem::path q;  // Q.npy; empty: not written (and not formed)
  std::filesystem::path r;  // R.npy; empty: not written. At least one of q and r.
  DeviceChoice device = DeviceChoice::automatic;
};

// linalg::geqrf, then linalg::ungqr for Q (from the leading m × m block when m < n). A matrix whose
// factorisation fails (a NaN or an Inf) is written as NaN in Q and R, named on `err`, and the exit
// code is exit_code::numerical; the others are written as computed.
int run_qr(const QrRequest& request, std::ostream& out, std::ostream& err);

struct SvdRequest {
  std::filesystem::path input;
  std::filesystem::path values;  // S.npy, always written
  std::filesystem::path u;       // U.npy; empty: U is not computed
  std::filesystem::path vh;      // Vh.npy; empty: V is not computed
  DeviceChoice device = DeviceChoice::automatic;
};

// linalg::gesvj (one-sided Jacobi). Failures (a NaN or an Inf, no convergence) as for qr.
int run_svd(const SvdRequest& request, std::ostream& out, std::ostream& err);

struct RsvdRequest {
  std::filesystem::path input;
  std::filesystem::path values;  // S.npy, always written
  std::filesystem::path u;       // U.npy; empty: U is not computed
  std::filesystem::path vh;      // Vh.npy; empty: V is not computed. Refused with hermitian.
  std::filesystem::path ranks;   // R.npy: each matrix's rank, int32; empty: not written
  // Exactly one of rank (fixed rank) and tolerance (fixed accuracy); max_rank only with tolerance.
  std::optional<int> rank;
  std::optional<double> tolerance;
  std::optional<int> max_rank;
  bool absolute = false;  // the tolerance bounds ‖A − U·S·Vh‖_F itself, not its ratio to ‖A‖_F
  bool hermitian = false;
  // linalg's defaults unless given.
  std::uint64_t seed = linalg::RsvdOptions{}.seed;
  int oversampling = linalg::RsvdOptions{}.oversampling;
  int power_iterations = linalg::RsvdOptions{}.power_iterations;
  int block = linalg::RsvdOptions{}.block;
  DeviceChoice device = DeviceChoice::automatic;
};

// linalg::rsvd. Failures (a NaN or an Inf, the small SVD or eigenproblem not converging) as for qr,
// with rank -1 in R.npy. A matrix that stopped at the largest rank before reaching the tolerance
// is not a failure: a note on `out` names it. Options linalg refuses for this input (a tolerance
// below what the precision can confirm) are exit_code::usage with linalg's message.
int run_rsvd(const RsvdRequest& request, std::ostream& out, std::ostream& err);

struct LuRequest {
  std::filesystem::path input;
  std::filesystem::path lu;      // LU.npy, A's shape and dtype
  std::filesystem::path pivots;  // P.npy, int32
  DeviceChoice device = DeviceChoice::automatic;
};

// linalg::getrf. A singular matrix (U[i, i] exactly zero) is factored completely: its LU and P are
// written as computed (as scipy.linalg.lu_factor returns them, with its warning), named on `err`,
// and the exit code is exit_code::numerical. A matrix with a NaN or an Inf is written as NaN in LU
// and 0, 1, …, n − 1 in P, named, exit_code::numerical.
int run_lu(const LuRequest& request, std::ostream& out, std::ostream& err);

struct CholeskyRequest {
  std::filesystem::path input;
  std::filesystem::path output;  // L.npy (U with upper), A's shape and dtype
  bool upper = false;
  DeviceChoice device = DeviceChoice::automatic;
};

// linalg::potrf. A matrix that is not positive definite, or holds a NaN or an Inf, is written as
// NaN, named on `err` (not positive definite: with its first failing column, from 0), and the exit
// code is exit_code::numerical; the others are written as computed.
int run_cholesky(const CholeskyRequest& request, std::ostream& out, std::ostream& err);

enum class Assume { general, positive };

struct SolveRequest {
  std::filesystem::path a;       // A.npy
  std::filesystem::path b;       // B.npy
  std::filesystem::path output;  // X.npy
  Assume assume = Assume::general;
  DeviceChoice device = DeviceChoice::automatic;
};

// linalg::gesv (general) or linalg::posv (positive: A's lower triangle, Uplo::lower). A matrix of
// A that is singular, not positive definite, or holds a NaN or an Inf has no solution: its X is
// written as NaN, it is named on `err`, and the exit code is exit_code::numerical. With k = 0
// right-hand sides A is still factored (getrf / potrf), so such a matrix is still named.
int run_solve(const SolveRequest& request, std::ostream& out, std::ostream& err);

struct CompressRequest {
  std::filesystem::path input;   // A.npy: (n, n) or (batch, n, n)
  std::filesystem::path output;  // C.npz, the layout docs/cli.md gives
  std::string format = "tlr";    // tlr, or h2 (linalg::h2_from_dense on --points)
  std::filesystem::path points;  // --format h2: P.npy
  std::optional<std::int64_t> leaf;  // --format h2
  std::optional<double> eta;         // --format h2
  std::int64_t tile = 0;         // b
  double tolerance = 0;
  std::optional<std::int64_t> max_rank;  // default: the tile size
  linalg::TlrScope scope = linalg::TlrScope::matrix;
  bool hermitian = false;        // store the lower tiles only (A Hermitian: its lower triangle is read)
  DeviceChoice device = DeviceChoice::automatic;
};

// linalg::tlr_compress into an .npz archive. A matrix with a NaN or an Inf, or whose tile SVD
// fails, is named on `err` and the exit code is exit_code::numerical (its archive entries are as
// the library left them: NaN). Tiles cut at --max-rank are a note on `out`, not a failure.
int run_compress(const CompressRequest& request, std::ostream& out, std::ostream& err);

struct ExpandRequest {
  std::filesystem::path input;   // C.npz
  std::filesystem::path output;  // A.npy: (n, n) or (batch, n, n), the archive's dtype
  DeviceChoice device = DeviceChoice::automatic;
};

// linalg::tlr_expand (or h2_expand for an H² archive): the dense matrices an archive stands for.
int run_expand(const ExpandRequest& request, std::ostream& out, std::ostream& err);

struct ApplyRequest {
  std::filesystem::path archive;  // C.npz
  std::filesystem::path x;        // X.npy: (n,), (n, k) or (batch, n, k), the archive's dtype
  std::filesystem::path output;   // Y.npy = A·X, X's shapes broadcast against A's as in solve
  DeviceChoice device = DeviceChoice::automatic;
};

// linalg::tlr_gemv, or h2_gemv for an H² archive.
int run_apply(const ApplyRequest& request, std::ostream& out, std::ostream& err);

// `covflow linalg solve C.npz B.npy`: linalg::tlr_potrf and tlr_potrs on a Hermitian archive,
// B's shapes as for a dense A. run_solve calls it for an archive (is_archive); a matrix that is
// not positive definite is written as NaN, named, and the exit code is exit_code::numerical.
int run_tlr_solve(const SolveRequest& request, std::ostream& out, std::ostream& err);

struct H2BuildRequest {
  std::filesystem::path points;  // P.npy: (n, d) or (n,), d = 1, 2, 3; float64 or float32
  std::filesystem::path output;  // C.npz, the layout docs/cli.md gives
  std::string kernel;            // exponential, gaussian, matern or clutter
  // Kernel parameters: linalg::H2KernelSpec's defaults unless given; one that the kernel does not
  // take is refused.
  std::optional<double> variance, length, nu, wavelength, sector_center, sector_width;
  double nugget = linalg::H2Options{}.nugget;
  std::int64_t leaf = linalg::H2Options{}.leaf_size;
  double eta = linalg::H2Options{}.eta;
  int order = linalg::H2Options{}.cheb_order;
  std::optional<double> tolerance;  // h2_orthogonalize + h2_compress(tol) after the build
  std::string dtype;                // empty: complex128 for clutter, float64 otherwise
  DeviceChoice device = DeviceChoice::automatic;
};

// `covflow linalg h2 build`: linalg::h2_build from a kernel on points, then (with a tolerance)
// h2_orthogonalize and h2_compress, into an .npz archive; one summary line on `out`. Bad options
// (an unknown kernel, a parameter the kernel does not take, clutter with a real dtype) are
// exit_code::usage; a points file of the wrong shape or type, or with a NaN or an Inf, is
// exit_code::input_damaged.
int run_h2_build(const H2BuildRequest& request, std::ostream& out, std::ostream& err);

// An .npz name, or a file that starts as a ZIP archive does.
bool is_archive(const std::filesystem::path& file);

// The `linalg` subcommand group on a CLI11 app. Construct it before app.parse(); it must outlive
// the parse (CLI11 writes the options into it).
class LinalgCommands {
 public:
  explicit LinalgCommands(CLI::App& app);
  LinalgCommands(const LinalgCommands&) = delete;
  LinalgCommands& operator=(const LinalgCommands&) = delete;

  bool parsed() const;
  int run(std::ostream& out, std::ostream& err) const;

 private:
  CLI::App* group_ = nullptr;
  CLI::App* heev_ = nullptr;
  CLI::App* cholupdate_ = nullptr;
  CLI::App* qr_ = nullptr;
  CLI::App* svd_ = nullptr;
  CLI::App* rsvd_ = nullptr;
  CLI::App* lu_ = nullptr;
  CLI::App* cholesky_ = nullptr;
  CLI::App* solve_ = nullptr;
  CLI::App* compress_ = nullptr;
  CLI::App* expand_ = nullptr;
  CLI::App* apply_ = nullptr;
  CLI::App* h2_ = nullptr;
  CLI::App* h2_build_ = nullptr;
  std::string heev_input_, heev_values_, heev_vectors_, heev_device_ = "auto", heev_uplo_ = "L";
  std::string chol_factor_, chol_update_, chol_output_, chol_sign_, chol_device_ = "auto";
  std::string qr_input_, qr_q_, qr_r_, qr_device_ = "auto";
  std::string svd_input_, svd_values_, svd_u_, svd_vh_, svd_device_ = "auto";
  std::string rsvd_input_, rsvd_values_, rsvd_u_, rsvd_vh_, rsvd_ranks_, rsvd_device_ = "auto";
  std::string lu_input_, lu_output_, lu_pivots_, lu_device_ = "auto";
  std::string cholesky_input_, cholesky_output_, cholesky_device_ = "auto";
  bool cholesky_upper_ = false;
  std::string solve_a_, solve_b_, solve_output_, solve_assume_ = "general", solve_device_ = "auto";
  CompressRequest compress_request_;  // the numeric options and flags, written by CLI11
  std::string compress_input_, compress_output_, compress_scope_ = "matrix", compress_device_ = "auto";
  CLI::Option* compress_max_rank_option_ = nullptr;
  std::int64_t compress_max_rank_ = 0;
  std::string expand_input_, expand_output_, expand_device_ = "auto";
  std::string apply_archive_, apply_x_, apply_output_, apply_device_ = "auto";
  CLI::Option* compress_tile_option_ = nullptr;
  CLI::Option* compress_leaf_option_ = nullptr;
  CLI::Option* compress_eta_option_ = nullptr;
  std::string compress_points_;
  std::int64_t compress_leaf_ = 0;
  double compress_eta_ = 0;
  H2BuildRequest h2_request_;  // the numeric options, written by CLI11
  std::string h2_points_, h2_output_, h2_device_ = "auto";
  double h2_variance_ = 0, h2_length_ = 0, h2_nu_ = 0, h2_wavelength_ = 0, h2_sector_center_ = 0, h2_sector_width_ = 0,
         h2_tolerance_ = 0;
  CLI::Option* h2_variance_option_ = nullptr;
  CLI::Option* h2_length_option_ = nullptr;
  CLI::Option* h2_nu_option_ = nullptr;
  CLI::Option* h2_wavelength_option_ = nullptr;
  CLI::Option* h2_sector_center_option_ = nullptr;
  CLI::Option* h2_sector_width_option_ = nullptr;
  CLI::Option* h2_tolerance_option_ = nullptr;
  RsvdRequest rsvd_request_;  // the numeric options and flags, written by CLI11
  int rsvd_rank_ = 0, rsvd_max_rank_ = 0;
  double rsvd_tolerance_ = 0;
  CLI::Option* rsvd_rank_option_ = nullptr;
  CLI::Option* rsvd_tolerance_option_ = nullptr;
  CLI::Option* rsvd_max_rank_option_ = nullptr;
};

}  // namespace covflow::cli

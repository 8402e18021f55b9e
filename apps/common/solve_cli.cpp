// `covflow linalg lu`, `cholesky` and `solve` on NumPy files, through linalg's getrf, potrf, gesv
// and posv (covflow/linalg/solve.hpp), with scipy.linalg.lu_factor's, numpy.linalg.cholesky's and
// numpy.linalg.solve's conventions.
//
// Every matrix is copied into a packed column-major batch and back (linalg_cli_support.hpp), so
// the factorisation is of A as numpy indexes it: A[i, j] of the file is element (i, j) of the
// batch, the triangle --upper or posv reads is numpy's, and LAPACK's 1-based pivots need only a −1
// to be lu_factor's.
//
// solve's shapes are numpy 2's (numpy.linalg.solve, "b: {(M,), (..., M, K)}"), for A (n, n) or
// (batch, n, n):
//   B (n,)            one vector, for every matrix of A           X: A.shape[:-1]
//   B (n, k)          one n × k right-hand side, for every matrix X: A's batch + (n, k)
//   B (batch', n, k)  batch' right-hand sides, the batches broadcast (equal, or one of them 1):
//                     X (max(batch, batch'), n, k); a 2-D A is solved against all of them.
// A 2-D B is always one matrix, as in numpy 2: numpy 1's (batch, n) for one vector per matrix of A
// is refused with a hint to give (batch, n, 1).
//
// When A is one matrix and B many, the right-hand sides are one n × (batch'·k) block — the packed
// column-major blocks of B already are that matrix — so A is factored once.
#include "common/linalg_cli.hpp"

#include <algorithm>
#include <complex>
#include <cstdint>
#include <limits>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/exit_codes.hpp"
#include "common/linalg_cli_support.hpp"
#include "covflow/io/npy.hpp"
#include "covflow/linalg/batch.hpp"
#include "covflow/linalg/exec.hpp"
#include "covflow/linalg/solve.hpp"
#include "covflow/linalg/types.hpp"
#if COVFLOW_HAS_CUDA
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::cli {

using namespace detail;

namespace {

// One line on stderr per failed matrix — "covflow linalg solve: A.npy: matrix 3: singular: ..." —
// for the first kNamedMatrices of them, then one line counting the rest; and the exit code.
class FailureLines {
 public:
  static constexpr std::uint64_t kNamedMatrices = 32;

  FailureLines(std::ostream& err, std::string command, const path& input, const Stack& a)
      : err_(err), command_(std::move(command)), input_(input.string()), a_(a) {}

  void add(std::uint64_t index, const std::string& what) {
    if (++failed_ <= kNamedMatrices)
      err_ << command_ << ": " << input_ << ": "
           << (a_.batched ? "matrix " + std::to_string(index) : std::string("the matrix")) << ": " << what << "\n";
  }

  int finish() const {
    if (failed_ == 0) return exit_code::ok;
    if (failed_ > kNamedMatrices)
      err_ << command_ << ": " << input_ << ": " << failed_ - kNamedMatrices << " more matrices failed (" << failed_
           << " of " << a_.count << ")\n";
    return exit_code::numerical;
  }

 private:
  std::ostream& err_;
  std::string command_, input_;
  Stack a_;
  std::uint64_t failed_ = 0;
};

// getrf's and gesv's info, in numpy's indices: U[i, i] counted from 0.
std::string lu_reason(int info) {
  if (info == la::status::non_finite_input) return "NaN or Inf in the matrix";
  if (info == kUnwritten) return "not computed (info never written)";
  if (info > 0)
    return "singular: U[" + std::to_string(info - 1) + ", " + std::to_string(info - 1) +
           "] is exactly zero (counted from 0)";
  return "info " + std::to_string(info);
}

// potrf's and posv's info: the leading minor of order info is not positive definite.
std::string cholesky_reason(int info, la::Uplo uplo) {
  if (info == la::status::non_finite_input)
    return std::string("NaN or Inf in the ") + (uplo == la::Uplo::upper ? "upper" : "lower") + " triangle";
  if (info == kUnwritten) return "not computed (info never written)";
  if (info > 0) return "not positive definite at column " + std::to_string(info - 1) + ", counted from 0";
  return "info " + std::to_string(info);
}

std::vector<std::uint64_t> stacked(const Stack& s, std::vector<std::uint64_t> matrix_shape) {
  if (s.batched) matrix_shape.insert(matrix_shape.begin(), s.count);
  return matrix_shape;
}

void require_square(const Stack& s, const io::NpyArray& array, const path& file) {
  if (s.rows != s.cols)
    fail(exit_code::input_damaged, file.string() + ": matrices must be square, got shape " + describe(array) + ": " +
                                       std::to_string(s.rows) + "×" + std::to_string(s.cols));
}

std::string count_phrase(std::uint64_t count, const char* one, const char* many) {
  return std::to_string(count) + " " + (count == 1 ? one : many);
}

// ---- lu ----------------------------------------------------------------------------------------

template <class T>
int lu_typed(const LuRequest& request, const io::NpyArray& input, const Stack& s, std::ostream& out,
             std::ostream& err) {
  const std::string command = "covflow linalg lu";
  const auto n = static_cast<std::int64_t>(s.rows);
  // 0×0 matrices have nothing to factor: none goes to linalg (a batch of them may be 2^31 − 1 long).
  const auto count = n == 0 ? std::int64_t(0) : static_cast<std::int64_t>(s.count);

  std::vector<T> a = to_column_major<T>(input, s);
  std::vector<int> ipiv(static_cast<std::size_t>(count * n), 0);  // 0 is no 1-based pivot: an unwritten one shows
  std::vector<int> info(static_cast<std::size_t>(count), kUnwritten);

  const la::Backend backend = on_backend(request.device, command, err, [&](la::Exec& exec) {
    if (count == 0) return;
#if COVFLOW_HAS_CUDA
    if (exec.is_cuda()) {
      la::CudaContext& context = exec.cuda_context();
      context.make_current();
      const cudaStream_t stream = context.stream();
      la::cuda::DeviceBuffer<T> device_a(a.size());
      la::cuda::DeviceBuffer<int> device_ipiv(ipiv.size()), device_info(info.size());
      device_a.upload(a, stream);
      device_ipiv.fill_bytes(0, stream);
      device_info.fill_bytes(0x7f, stream);  // kUnwritten
      la::getrf<T>(exec, la::Batch<T>::packed(device_a.data(), n, n, count), {device_ipiv.data(), device_ipiv.size()},
                   {device_info.data(), device_info.size()});
      device_a.download(a, stream);
      device_ipiv.download(ipiv, stream);
      device_info.download(info, stream);
      exec.synchronize();
      return;
    }
#endif
    la::getrf<T>(exec, la::Batch<T>::packed(a.data(), n, n, count), ipiv, info);
  });

  // LAPACK's pivots are 1-based and sequential, ipiv[i] ∈ [i + 1, n]; lu_factor's are the same
  // less one. A singular matrix's factors are complete and exact (P·A = L·U), so they are written
  // as computed; a matrix that failed otherwise is NaN with no interchange.
  FailureLines failures(err, command, request.input, s);
  std::vector<std::int32_t> pivots(ipiv.size());
  for (std::int64_t b = 0; b < count; ++b) {
    std::string reason;
    if (info[b] == 0 || info[b] > 0) {
      for (std::int64_t i = 0; i < n && reason.empty(); ++i) {
        const int p = ipiv[b * n + i];
        if (p < i + 1 || p > n)
          reason = "pivot " + std::to_string(i) + " not written (LAPACK's ipiv " + std::to_string(p) + ")";
        pivots[b * n + i] = p - 1;
      }
    } else {
      reason = lu_reason(info[b]);
    }
    if (!reason.empty()) {
      failures.add(static_cast<std::uint64_t>(b), reason + "; written as NaN in " + request.lu.string());
      std::fill_n(a.begin() + b * n * n, n * n, nan_of<T>());
      for (std::int64_t i = 0; i < n; ++i) pivots[b * n + i] = static_cast<std::int32_t>(i);
    } else if (info[b] > 0) {
      failures.add(static_cast<std::uint64_t>(b), lu_reason(info[b]) + "; its factors are complete, written as computed");
    }
  }

  const io::NpyArray lu{input.dtype, input.shape, false, column_major_to_c_order(a, s)};
  store(request.lu, lu);
  const std::vector<std::uint64_t> pivots_shape = stacked(s, {s.rows});
  store_int32(request.pivots, pivots_shape, pivots);
  out << "lu: " << matrices_phrase(s) << " " << io::numpy_name(input.dtype) << " on " << device_name(backend)
      << ": wrote " << request.lu.string() << " " << describe(lu) << " and " << request.pivots.string() << " "
      << io::format_shape(pivots_shape) << " int32\n";
  return failures.finish();
}

// ---- cholesky ----------------------------------------------------------------------------------

template <class T>
int cholesky_typed(const CholeskyRequest& request, const io::NpyArray& input, const Stack& s, std::ostream& out,
                   std::ostream& err) {
  const std::string command = "covflow linalg cholesky";
  const auto n = static_cast<std::int64_t>(s.rows);
  const auto count = n == 0 ? std::int64_t(0) : static_cast<std::int64_t>(s.count);
  const la::Uplo uplo = request.upper ? la::Uplo::upper : la::Uplo::lower;

  std::vector<T> a = to_column_major<T>(input, s);
  std::vector<int> info(static_cast<std::size_t>(count), kUnwritten);

  const la::Backend backend = on_backend(request.device, command, err, [&](la::Exec& exec) {
    if (count == 0) return;
#if COVFLOW_HAS_CUDA
    if (exec.is_cuda()) {
      la::CudaContext& context = exec.cuda_context();
      context.make_current();
      const cudaStream_t stream = context.stream();
      la::cuda::DeviceBuffer<T> device_a(a.size());
      la::cuda::DeviceBuffer<int> device_info(info.size());
      device_a.upload(a, stream);
      device_info.fill_bytes(0x7f, stream);  // kUnwritten
      la::potrf<T>(exec, uplo, la::Batch<T>::packed(device_a.data(), n, n, count),
                   {device_info.data(), device_info.size()});
      device_a.download(a, stream);
      device_info.download(info, stream);
      exec.synchronize();
      return;
    }
#endif
    la::potrf<T>(exec, uplo, la::Batch<T>::packed(a.data(), n, n, count), info);
  });

  // potrf leaves the other triangle as it was (A's elements); numpy's factor has zeros there. A
  // failed matrix holds a partial factor, which is no factor of A: NaN.
  FailureLines failures(err, command, request.input, s);
  for (std::int64_t b = 0; b < count; ++b) {
    T* matrix = a.data() + b * n * n;
    if (info[b] != 0) {
      failures.add(static_cast<std::uint64_t>(b),
                   cholesky_reason(info[b], uplo) + "; written as NaN in " + request.output.string());
      std::fill_n(matrix, n * n, nan_of<T>());
      continue;
    }
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < n; ++i)
        if (uplo == la::Uplo::lower ? i < j : i > j) matrix[i + j * n] = T(0);
  }

  const io::NpyArray factor{input.dtype, input.shape, false, column_major_to_c_order(a, s)};
  store(request.output, factor);
  out << "cholesky: " << matrices_phrase(s) << " " << io::numpy_name(input.dtype) << " on " << device_name(backend)
      << ", " << (request.upper ? "upper" : "lower") << ": wrote " << request.output.string() << " "
      << describe(factor) << "\n";
  return failures.finish();
}

// ---- solve -------------------------------------------------------------------------------------

// How A's matrices meet B's right-hand sides (the shapes in this file's header comment).
struct SolvePlan {
  Stack a;                   // A's matrices
  Stack b;                   // B's blocks, each n × k (a 1-D B: one block n × 1, not batched)
  bool b_vector = false;     // B is 1-D
  std::uint64_t x_count = 0; // X's blocks after broadcasting
  std::vector<std::uint64_t> x_shape;
};

SolvePlan plan_solve(const SolveRequest& request, const io::NpyArray& a_file, const io::NpyArray& b_file) {
  SolvePlan plan;
  plan.a = stack_of(a_file, request.a, "(batch, n, n) or (n, n) matrices");
  require_square(plan.a, a_file, request.a);
  if (b_file.dtype != a_file.dtype)
    fail(exit_code::input_damaged, request.b.string() + ": dtype " + std::string(io::numpy_name(b_file.dtype)) +
                                       " differs from A's " + std::string(io::numpy_name(a_file.dtype)) + " in " +
                                       request.a.string());
  const std::uint64_t n = plan.a.rows;
  const auto misfit = [&](const std::string& why) {
    fail(exit_code::input_damaged, request.b.string() + ": shape " + describe(b_file) + " does not fit A " +
                                       describe(a_file) + " from " + request.a.string() + ": " + why);
  };
  if (b_file.shape.size() == 1) {
    plan.b_vector = true;
    plan.b = Stack{1, b_file.shape[0], 1, false};
    if (plan.b.rows != n) misfit("a 1-D B needs n = " + std::to_string(n) + " elements");
  } else {
    plan.b = stack_of(b_file, request.b, "(n,), (n, k) or (batch, n, k) right-hand sides");
    if (plan.b.rows != n) {
      // numpy 1 read (batch, n) against a (batch, n, n) A as one vector per matrix; numpy 2 reads it
      // as one matrix, and so does covflow.
      const bool numpy1_vectors = !plan.b.batched && plan.a.batched && plan.b.rows == plan.a.count && plan.b.cols == n;
      misfit("B's matrices need n = " + std::to_string(n) + " rows" +
             (numpy1_vectors ? " (a 2-D B is one n × k matrix, as in numpy 2; for one vector per matrix of A give B "
                               "the shape (" + std::to_string(plan.a.count) + ", " + std::to_string(n) + ", 1))"
                             : std::string()));
    }
  }
  const std::uint64_t a_count = plan.a.count, b_count = plan.b.count;
  if (a_count != b_count && a_count != 1 && b_count != 1)
    misfit("batches of " + std::to_string(a_count) + " and " + std::to_string(b_count) +
           " do not broadcast (numpy's rule: equal, or one of them 1)");
  plan.x_count = a_count == 1 ? b_count : a_count;
  const bool x_batched = plan.a.batched || plan.b.batched;
  if (plan.b_vector) plan.x_shape = stacked(plan.a, {n});
  else plan.x_shape = stacked(Stack{plan.x_count, n, plan.b.cols, x_batched}, {n, plan.b.cols});
  return plan;
}

template <class T>
int solve_typed(const SolveRequest& request, const io::NpyArray& a_file, const io::NpyArray& b_file,
                const SolvePlan& plan, std::ostream& out, std::ostream& err) {
  const std::string command = "covflow linalg solve";
  const bool positive = request.assume == Assume::positive;
  const auto n = static_cast<std::int64_t>(plan.a.rows);
  const auto k = static_cast<std::int64_t>(plan.b.cols);
  const auto x_count = static_cast<std::int64_t>(plan.x_count);
  // One matrix of A takes all of B's blocks as one n × (x_count·k) right-hand side; a batch of A
  // takes one block each, B's one block copied to each where it broadcasts.
  const bool one_matrix = plan.a.count == 1;
  const std::int64_t calls = n == 0 || x_count == 0 ? 0 : (one_matrix ? 1 : x_count);
  const std::int64_t nrhs = one_matrix ? x_count * k : k;
  if (calls > 0 && nrhs > std::numeric_limits<int>::max())
    fail(exit_code::input_damaged, request.b.string() + ": " + std::to_string(nrhs) +
                                       " right-hand sides for one matrix, more than the 2147483647 LAPACK takes");

  std::vector<T> a = calls == 0 ? std::vector<T>{} : to_column_major<T>(a_file, plan.a);
  std::vector<T> x;  // the right-hand sides, then the solutions: x_count packed n × k blocks
  if (calls > 0) {
    x = to_column_major<T>(b_file, plan.b);
    if (plan.b.count == 1 && x_count > 1 && !one_matrix) {
      std::vector<T> copies(static_cast<std::size_t>(x_count * n * k));
      for (std::int64_t c = 0; c < x_count; ++c) std::copy(x.begin(), x.end(), copies.begin() + c * n * k);
      x = std::move(copies);
    }
  }
  std::vector<int> ipiv(positive ? 0 : static_cast<std::size_t>(calls * n));
  std::vector<int> info(static_cast<std::size_t>(calls), kUnwritten);

  // With no right-hand side at all (k = 0) A is still factored, so that a singular or indefinite
  // matrix is reported as numpy reports it.
  const auto run = [&](la::Exec& exec, T* a_data, T* x_data, int* ipiv_data, int* info_data) {
    const la::Batch<T> a_batch = la::Batch<T>::packed(a_data, n, n, calls);
    const la::Batch<T> x_batch = la::Batch<T>::packed(x_data, n, nrhs, calls);
    const std::span<int> info_span(info_data, info.size());
    if (positive) {
      if (nrhs == 0) la::potrf<T>(exec, la::Uplo::lower, a_batch, info_span);
      else la::posv<T>(exec, la::Uplo::lower, a_batch, x_batch, info_span);
    } else {
      const std::span<int> ipiv_span(ipiv_data, ipiv.size());
      if (nrhs == 0) la::getrf<T>(exec, a_batch, ipiv_span, info_span);
      else la::gesv<T>(exec, a_batch, ipiv_span, x_batch, info_span);
    }
  };
  const la::Backend backend = on_backend(request.device, command, err, [&](la::Exec& exec) {
    if (calls == 0) return;
#if COVFLOW_HAS_CUDA
    if (exec.is_cuda()) {
      la::CudaContext& context = exec.cuda_context();
      context.make_current();
      const cudaStream_t stream = context.stream();
      la::cuda::DeviceBuffer<T> device_a(a.size()), device_x(x.size());
      la::cuda::DeviceBuffer<int> device_ipiv(ipiv.size()), device_info(info.size());
      device_a.upload(a, stream);
      device_x.upload(x, stream);
      device_info.fill_bytes(0x7f, stream);  // kUnwritten
      run(exec, device_a.data(), device_x.data(), device_ipiv.data(), device_info.data());
      device_x.download(x, stream);
      device_info.download(info, stream);
      exec.synchronize();
      return;
    }
#endif
    run(exec, a.data(), x.data(), ipiv.data(), info.data());
  });

  const std::string consequence = "; no solution, written as NaN in " + request.output.string();
  FailureLines failures(err, command, request.a, plan.a);
  for (std::int64_t c = 0; c < calls; ++c) {
    if (info[c] == 0) continue;
    failures.add(static_cast<std::uint64_t>(c),
                 (positive ? cholesky_reason(info[c], la::Uplo::lower) : lu_reason(info[c])) + consequence);
    std::fill_n(x.begin() + c * n * nrhs, n * nrhs, nan_of<T>());
  }

  // X's blocks in C order; a 1-D B's n × 1 blocks are already X's (…, n). With nothing computed X
  // has no element (n = 0 or no block).
  const io::NpyArray solution{a_file.dtype, plan.x_shape, false,
                              calls == 0 ? std::vector<std::byte>{}
                                         : column_major_to_c_order(x, Stack{plan.x_count, plan.a.rows, plan.b.cols, true})};
  store(request.output, solution);
  const std::int64_t per_matrix = calls == 0 ? k : nrhs;
  out << "solve: " << matrices_phrase(plan.a) << " " << io::numpy_name(a_file.dtype) << ", "
      << count_phrase(static_cast<std::uint64_t>(per_matrix), "right-hand side", "right-hand sides")
      << (plan.a.batched ? " each" : "") << ", " << (positive ? "positive definite (posv)" : "general (gesv)") << " on "
      << device_name(backend) << ": wrote " << request.output.string() << " " << describe(solution) << "\n";
  return failures.finish();
}

template <class T>
struct Lu {
  static int run(const LuRequest& r, const io::NpyArray& a, const Stack& s, std::ostream& out, std::ostream& err) {
    return lu_typed<T>(r, a, s, out, err);
  }
};
template <class T>
struct Cholesky {
  static int run(const CholeskyRequest& r, const io::NpyArray& a, const Stack& s, std::ostream& out,
                 std::ostream& err) {
    return cholesky_typed<T>(r, a, s, out, err);
  }
};
template <class T>
struct Solve {
  static int run(const SolveRequest& r, const io::NpyArray& a, const io::NpyArray& b, const SolvePlan& plan,
                 std::ostream& out, std::ostream& err) {
    return solve_typed<T>(r, a, b, plan, out, err);
  }
};

}  // namespace

int run_lu(const LuRequest& request, std::ostream& out, std::ostream& err) {
  return guarded("covflow linalg lu", err, [&]() -> int {
    if (request.lu.empty()) fail(exit_code::usage, "--lu is required");
    if (request.pivots.empty()) fail(exit_code::usage, "--piv is required");
    if (request.lu == request.pivots) fail(exit_code::usage, "--lu and --piv name the same file");
    const io::NpyArray input = load(request.input);
    const Stack s = stack_of(input, request.input, "(batch, n, n) or (n, n) matrices");
    require_square(s, input, request.input);
    return by_dtype<Lu>(input.dtype, request, input, s, out, err);
  });
}

int run_cholesky(const CholeskyRequest& request, std::ostream& out, std::ostream& err) {
  return guarded("covflow linalg cholesky", err, [&]() -> int {
    if (request.output.empty()) fail(exit_code::usage, "--out is required");
    const io::NpyArray input = load(request.input);
    const Stack s = stack_of(input, request.input, "(batch, n, n) or (n, n) Hermitian positive definite matrices");
    require_square(s, input, request.input);
    return by_dtype<Cholesky>(input.dtype, request, input, s, out, err);
  });
}

int run_solve(const SolveRequest& request, std::ostream& out, std::ostream& err) {
  // A TLR archive (covflow linalg compress) is solved by its own Cholesky factorization.
  if (is_archive(request.a)) return run_tlr_solve(request, out, err);
  return guarded("covflow linalg solve", err, [&]() -> int {
    if (request.output.empty()) fail(exit_code::usage, "--out is required");
    const io::NpyArray a = load(request.a);
    const io::NpyArray b = load(request.b);
    const SolvePlan plan = plan_solve(request, a, b);
    return by_dtype<Solve>(a.dtype, request, a, b, plan, out, err);
  });
}

}  // namespace covflow::cli

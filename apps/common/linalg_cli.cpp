// `covflow linalg heev` and `covflow linalg cholupdate` on NumPy files.
//
// Layout: an NPY array is row-major (C order) unless its header says fortran_order; covflow's
// linalg is column-major. Each matrix is copied into a packed column-major batch on the way in and
// back to C order on the way out, so the matrix linalg sees is the matrix numpy indexes: A[i, j]
// of the file is element (i, j) of the batch, numpy's UPLO is linalg's uplo unchanged, and column
// k of the eigenvector matrix is V[..., :, k]. (Reading the C-order bytes in place as column-major
// would hand linalg the transpose — the conjugate, for a Hermitian matrix — with the triangles
// swapped and conjugated eigenvectors; the copy costs O(n²) against heev's O(n³) and leaves no
// such mapping to get wrong.)
#include "common/linalg_cli.hpp"

#include <algorithm>
#include <cctype>
#include <complex>
#include <cstring>
#include <limits>
#include <new>
#include <ostream>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

#include "common/exit_codes.hpp"
#include "covflow/io/npy.hpp"
#include "covflow/linalg/device.hpp"
#include "covflow/linalg/cholupdate.hpp"
#include "covflow/linalg/error.hpp"
#include "covflow/linalg/exec.hpp"
#include "covflow/linalg/heev.hpp"
#include "covflow/linalg/types.hpp"
#if COVFLOW_HAS_CUDA
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::cli {
namespace {

namespace la = covflow::linalg;
using std::filesystem::path;

// Thrown inside a command to end it with an exit code and one line on stderr.
struct Failure {
  int code;
  std::string message;
};

[[noreturn]] void fail(int code, std::string message) { throw Failure{code, std::move(message)}; }

int exit_code_for(const io::NpyError& error) {
  switch (error.kind()) {
    case io::NpyError::Kind::io: return exit_code::io;
    case io::NpyError::Kind::damaged:
    case io::NpyError::Kind::unsupported: return exit_code::input_damaged;
    case io::NpyError::Kind::argument: return exit_code::internal_error;
  }
  return exit_code::internal_error;
}

io::NpyArray load(const path& file) {
  try {
    return io::read_npy(file);
  } catch (const io::NpyError& e) {
    fail(exit_code_for(e), e.what());
  }
}

void store(const path& file, const io::NpyArray& array) {
  try {
    io::write_npy(file, array);
  } catch (const io::NpyError& e) {
    fail(exit_code_for(e), e.what());
  }
}

std::string describe(const io::NpyArray& array) {
  return io::format_shape(array.shape) + " " + std::string(io::numpy_name(array.dtype));
}

// A stack of `count` rows × cols matrices: a 3-D array (count, rows, cols), or a 2-D one (count 1).
struct Stack {
  std::uint64_t count = 1, rows = 0, cols = 0;
  bool batched = false;
  std::uint64_t matrix_elements() const { return rows * cols; }
};

// The most matrices one command takes. heev's and cholupdate's CUDA kernels launch a block per
// matrix, and a grid is at most 2^31 − 1 blocks long. The file's data bounds a batch of non-empty
// matrices (read_npy checks that it holds the whole shape), but a batch of empty ones holds no
// data whatever its count, so this is the only bound on it.
constexpr std::uint64_t kMaxBatchCount = std::numeric_limits<std::int32_t>::max();

Stack stack_of(const io::NpyArray& array, const path& file, const char* expected) {
  const auto& shape = array.shape;
  if (shape.size() != 2 && shape.size() != 3)
    fail(exit_code::input_damaged, file.string() + ": expected " + expected + ", got shape " + describe(array) +
                                       " (" + std::to_string(shape.size()) + " dimensions)");
  Stack stack;
  stack.batched = shape.size() == 3;
  stack.count = stack.batched ? shape[0] : 1;
  stack.rows = shape[shape.size() - 2];
  stack.cols = shape[shape.size() - 1];
  if (stack.count > kMaxBatchCount)
    fail(exit_code::input_damaged, file.string() + ": shape " + describe(array) + " holds " +
                                       std::to_string(stack.count) + " matrices, more than the " +
                                       std::to_string(kMaxBatchCount) + " a batch may hold");
  // BLAS/LAPACK take 32-bit dimensions; anything near that is no matrix a file of ours holds.
  if (stack.rows > std::uint64_t(std::numeric_limits<int>::max()) ||
      stack.cols > std::uint64_t(std::numeric_limits<int>::max()))
    fail(exit_code::input_damaged, file.string() + ": matrices of shape " + describe(array) +
                                       " exceed the 32-bit dimensions of BLAS/LAPACK");
  return stack;
}

// Element offsets of [b][i][j] in the file's order.
struct Strides {
  std::uint64_t matrix, row, col;
};

Strides strides_of(const Stack& s, bool fortran_order) {
  if (!fortran_order) return {s.rows * s.cols, s.cols, 1};
  return {1, s.count, s.count * s.rows};  // first index fastest; for 2-D input count is 1
}

// Both copies return at once for empty matrices, so that a batch of them costs nothing per matrix.
template <class T>
std::vector<T> to_column_major(const io::NpyArray& array, const Stack& s) {
  std::vector<T> out(static_cast<std::size_t>(s.count * s.matrix_elements()));
  if (out.empty()) return out;
  const Strides st = strides_of(s, array.fortran_order);
  const std::byte* src = array.bytes.data();
  for (std::uint64_t b = 0; b < s.count; ++b)
    for (std::uint64_t i = 0; i < s.rows; ++i)
      for (std::uint64_t j = 0; j < s.cols; ++j)
        std::memcpy(&out[b * s.matrix_elements() + i + j * s.rows], src + (b * st.matrix + i * st.row + j * st.col) * sizeof(T),
                    sizeof(T));
  return out;
}

template <class T>
std::vector<std::byte> column_major_to_c_order(const std::vector<T>& data, const Stack& s) {
  std::vector<std::byte> out(data.size() * sizeof(T));
  if (out.empty()) return out;
  for (std::uint64_t b = 0; b < s.count; ++b)
    for (std::uint64_t i = 0; i < s.rows; ++i)
      for (std::uint64_t j = 0; j < s.cols; ++j)
        std::memcpy(out.data() + (b * s.matrix_elements() + i * s.cols + j) * sizeof(T),
                    &data[b * s.matrix_elements() + i + j * s.rows], sizeof(T));
  return out;
}

template <class T>
std::vector<std::byte> raw_bytes(const std::vector<T>& data) {
  std::vector<std::byte> out(data.size() * sizeof(T));
  if (!data.empty()) std::memcpy(out.data(), data.data(), out.size());
  return out;
}

const char* device_name(la::Backend backend) { return backend == la::Backend::cuda ? "cuda" : "cpu"; }

// Runs `op(exec)` on the backend `choice` selects and returns the one it ran on. An explicit
// --device cuda that cannot run is a failure; auto falls back to the CPU and says why.
template <class Op>
la::Backend on_backend(DeviceChoice choice, const std::string& command, std::ostream& err, Op&& op) {
  if (choice != DeviceChoice::cpu) {
    // auto without a usable GPU is the ordinary CPU case and needs no note.
    bool try_cuda = choice == DeviceChoice::cuda;
    if (!try_cuda && la::cuda_compiled()) {
      try {
        try_cuda = la::probe_devices().available();
      } catch (const la::Error& e) {
        err << command << ": note: --device auto: probing for GPUs failed (" << e.what() << "); running on the CPU\n";
      }
    }
    if (try_cuda) {
      try {
        la::Exec exec = la::Exec::cuda();
        op(exec);
        return la::Backend::cuda;
      } catch (const la::Unavailable& e) {
        if (choice == DeviceChoice::cuda)
          fail(exit_code::device_unavailable, std::string("--device cuda: ") + e.what());
        err << command << ": note: --device auto: " << e.what() << "; running on the CPU\n";
      } catch (const la::CudaError& e) {
        fail(exit_code::device_unavailable, std::string("CUDA failed: ") + e.what());
      }
    }
  }
  la::Exec exec = la::Exec::cpu();
  op(exec);
  return la::Backend::cpu;
}

// info as written by heev; kUnwritten is what info holds before the run, so an entry a backend
// forgot to write is reported rather than read as success.
constexpr int kUnwritten = 0x7f7f7f7f;

std::string info_reason(int info, char uplo) {
  if (info == la::status::non_finite_input)
    return std::string("NaN or Inf in the ") + (uplo == 'U' ? "upper" : "lower") + " triangle";
  if (info == la::status::no_convergence) return "no convergence";
  if (info == kUnwritten) return "not computed (info never written)";
  return "info " + std::to_string(info);
}

// "3, 17, 42" with at most `limit` indices shown.
std::string index_list(const std::vector<std::uint64_t>& indices) {
  constexpr std::size_t limit = 32;
  std::string out;
  for (std::size_t i = 0; i < indices.size() && i < limit; ++i) out += (i ? ", " : "") + std::to_string(indices[i]);
  if (indices.size() > limit) out += ", ... (" + std::to_string(indices.size() - limit) + " more)";
  return out;
}

template <class T>
int heev_typed(const HeevRequest& request, const io::NpyArray& input, const Stack& s, std::ostream& out,
               std::ostream& err) {
  using R = la::real_t<T>;
  const std::string command = "covflow linalg heev";
  const auto n = static_cast<std::int64_t>(s.rows);
  // 0×0 matrices have nothing to compute: none goes to linalg, so none needs an info entry (a
  // batch of them may be 2^31 − 1 long), and each succeeded.
  const auto count = n == 0 ? std::int64_t(0) : static_cast<std::int64_t>(s.count);
  const bool want_vectors = !request.vectors.empty();
  const la::HeevOptions options{request.uplo == 'U' ? la::Uplo::upper : la::Uplo::lower, want_vectors};

  std::vector<T> a = to_column_major<T>(input, s);
  std::vector<R> w(static_cast<std::size_t>(count * n), std::numeric_limits<R>::quiet_NaN());
  std::vector<int> info(static_cast<std::size_t>(count), kUnwritten);

  const la::Backend backend = on_backend(request.device, command, err, [&](la::Exec& exec) {
#if COVFLOW_HAS_CUDA
    if (exec.is_cuda()) {
      la::CudaContext& context = exec.cuda_context();
      context.make_current();
      const cudaStream_t stream = context.stream();
      la::cuda::DeviceBuffer<T> device_a(a.size());
      la::cuda::DeviceBuffer<R> device_w(w.size());
      la::cuda::DeviceBuffer<int> device_info(info.size());
      device_a.upload(a, stream);
      device_w.fill_bytes(0xff, stream);     // NaN: an unwritten eigenvalue shows
      device_info.fill_bytes(0x7f, stream);  // kUnwritten
      la::heev<T>(exec, la::Batch<T>::packed(device_a.data(), n, n, count), {device_w.data(), device_w.size()},
                  {device_info.data(), device_info.size()}, options);
      device_a.download(a, stream);
      device_w.download(w, stream);
      device_info.download(info, stream);
      exec.synchronize();
      return;
    }
#endif
    la::heev<T>(exec, la::Batch<T>::packed(a.data(), n, n, count), w, info, options);
  });

  // Matrices whose info is not 0: NaN out, named on stderr, the rest written as computed.
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> failures;  // reason → indices
  std::uint64_t failed = 0;
  for (std::int64_t b = 0; b < count; ++b) {
    if (info[b] == 0) continue;
    ++failed;
    const std::string reason = info_reason(info[b], request.uplo);
    auto it = std::find_if(failures.begin(), failures.end(), [&](const auto& f) { return f.first == reason; });
    if (it == failures.end()) it = failures.insert(failures.end(), {reason, {}});
    it->second.push_back(static_cast<std::uint64_t>(b));
    std::fill_n(w.begin() + b * n, n, std::numeric_limits<R>::quiet_NaN());
    if (want_vectors) std::fill_n(a.begin() + b * n * n, n * n, T(std::numeric_limits<R>::quiet_NaN()));
  }

  io::NpyArray values;
  values.dtype = io::real_dtype(input.dtype);
  values.shape = s.batched ? std::vector<std::uint64_t>{s.count, s.rows} : std::vector<std::uint64_t>{s.rows};
  values.bytes = raw_bytes(w);
  store(request.values, values);
  io::NpyArray vectors;
  if (want_vectors) {
    vectors.dtype = input.dtype;
    vectors.shape = input.shape;
    vectors.bytes = column_major_to_c_order(a, s);
    store(request.vectors, vectors);
  }

  out << "heev: " << (s.batched ? std::to_string(s.count) + " matrices " : std::string("one matrix ")) << s.rows << "×"
      << s.rows << " " << io::numpy_name(input.dtype) << " on " << device_name(backend) << ", uplo " << request.uplo
      << ": wrote " << request.values.string() << " " << describe(values);
  if (want_vectors) out << " and " << request.vectors.string() << " " << describe(vectors);
  out << "\n";

  if (failed == 0) return exit_code::ok;
  err << command << ": " << request.input.string() << ": ";
  if (s.batched) {
    err << failed << " of " << s.count << (s.count == 1 ? " matrix" : " matrices") << " failed, written as NaN in "
        << request.values.string() << (want_vectors ? " and " + request.vectors.string() : std::string()) << ":";
    const char* separator = " ";
    for (const auto& [reason, indices] : failures) {
      err << separator << (indices.size() == 1 ? "matrix " : "matrices ") << index_list(indices) << " (" << reason << ")";
      separator = "; ";
    }
  } else {
    err << "the matrix failed (" << failures.front().first << "), written as NaN in " << request.values.string()
        << (want_vectors ? " and " + request.vectors.string() : std::string());
  }
  err << "\n";
  return exit_code::numerical;
}

std::string chol_reason(int info) {
  if (info == la::status::non_finite_input) return "NaN or Inf in the factor's lower triangle or in V";
  if (info == kUnwritten) return "not computed (info never written)";
  if (info > 0)
    return "not positive definite at column " + std::to_string(info - 1) + ", counted from 0";
  return "info " + std::to_string(info);
}

template <class T>
int cholupdate_typed(const CholupdateRequest& request, const io::NpyArray& factor, const io::NpyArray& update_file,
                     const Stack& ls, const Stack& vs, std::ostream& out, std::ostream& err) {
  using R = la::real_t<T>;
  const std::string command = "covflow linalg cholupdate";
  const auto n = static_cast<std::int64_t>(ls.rows);
  const auto k = static_cast<std::int64_t>(vs.cols);
  // 0×0 factors hold no data and are not handed to linalg (see heev_typed); with n > 0 the
  // factors' data bounds the count.
  const auto count = n == 0 ? std::int64_t(0) : static_cast<std::int64_t>(ls.count);
  const la::Sign sign = request.sign == '-' ? la::Sign::downdate : la::Sign::update;

  std::vector<T> l = to_column_major<T>(factor, ls);
  const std::vector<T> v = to_column_major<T>(update_file, vs);
  // Nothing to compute (k = 0) leaves info at 0: success.
  std::vector<int> info(static_cast<std::size_t>(count), k == 0 ? 0 : kUnwritten);

  // The CUDA path takes k ≤ kCudaMaxRank per call: auto runs a larger V on the CPU, --device cuda
  // refuses it.
  DeviceChoice device = request.device;
  if (k > la::kCudaMaxRank && device != DeviceChoice::cpu) {
    if (device == DeviceChoice::cuda)
      fail(exit_code::device_unavailable, "--device cuda: the CUDA path takes at most " +
                                              std::to_string(la::kCudaMaxRank) + " columns of V, " +
                                              request.update.string() + " has " + std::to_string(k));
    if (la::cuda_compiled())
      err << command << ": note: --device auto: k = " << k << " > " << la::kCudaMaxRank << "; running on the CPU\n";
    device = DeviceChoice::cpu;
  }
  const la::Backend backend = on_backend(device, command, err, [&](la::Exec& exec) {
#if COVFLOW_HAS_CUDA
    if (exec.is_cuda()) {
      la::CudaContext& context = exec.cuda_context();
      context.make_current();
      const cudaStream_t stream = context.stream();
      la::cuda::DeviceBuffer<T> device_l(l.size()), device_v(v.size());
      la::cuda::DeviceBuffer<int> device_info(info.size());
      device_l.upload(l, stream);
      device_v.upload(v, stream);
      device_info.fill_bytes(0x7f, stream);  // kUnwritten
      la::cholupdate<T>(exec, la::Batch<T>::packed(device_l.data(), n, n, count),
                        la::Batch<const T>::packed(device_v.data(), n, k, count), sign,
                        {device_info.data(), device_info.size()});
      device_l.download(l, stream);
      device_info.download(info, stream);
      exec.synchronize();
      return;
    }
#endif
    la::cholupdate<T>(exec, la::Batch<T>::packed(l.data(), n, n, count), la::Batch<const T>::packed(v.data(), n, k, count),
                      sign, info);
  });

  // Matrices whose info is not 0 are written as NaN (linalg left them as they were; a NaN factor
  // cannot be mistaken for an updated one) and named on stderr.
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> failures;
  std::uint64_t failed = 0;
  for (std::int64_t b = 0; b < count; ++b) {
    if (info[b] == 0) continue;
    ++failed;
    const std::string reason = chol_reason(info[b]);
    auto it = std::find_if(failures.begin(), failures.end(), [&](const auto& f) { return f.first == reason; });
    if (it == failures.end()) it = failures.insert(failures.end(), {reason, {}});
    it->second.push_back(static_cast<std::uint64_t>(b));
    std::fill_n(l.begin() + b * n * n, n * n, T(std::numeric_limits<R>::quiet_NaN()));
  }

  io::NpyArray result;
  result.dtype = factor.dtype;
  result.shape = factor.shape;
  result.bytes = column_major_to_c_order(l, ls);
  store(request.output, result);
  out << "cholupdate: " << (ls.batched ? std::to_string(ls.count) + " factors " : std::string("one factor ")) << n
      << "×" << n << " " << io::numpy_name(factor.dtype) << ", rank " << k << " "
      << (sign == la::Sign::update ? "update" : "downdate") << " on " << device_name(backend) << ": wrote "
      << request.output.string() << " " << describe(result) << "\n";

  if (failed == 0) return exit_code::ok;
  err << command << ": " << request.factor.string() << ": ";
  if (ls.batched) {
    err << failed << " of " << ls.count << (ls.count == 1 ? " factor" : " factors") << " failed, written as NaN in "
        << request.output.string() << ":";
    const char* separator = " ";
    for (const auto& [reason, indices] : failures) {
      err << separator << (indices.size() == 1 ? "matrix " : "matrices ") << index_list(indices) << " (" << reason << ")";
      separator = "; ";
    }
  } else {
    err << "the factor failed (" << failures.front().first << "), written as NaN in " << request.output.string();
  }
  err << "\n";
  return exit_code::numerical;
}

template <class Body>
int guarded(const std::string& command, std::ostream& err, Body&& body) {
  try {
    return body();
  } catch (const Failure& f) {
    err << command << ": error: " << f.message << "\n";
    return f.code;
  } catch (const la::Unavailable& e) {
    err << command << ": error: " << e.what() << "\n";
    return exit_code::device_unavailable;
  } catch (const la::CudaError& e) {
    err << command << ": error: CUDA failed: " << e.what() << "\n";
    return exit_code::device_unavailable;
  } catch (const std::bad_alloc&) {
    err << command << ": error: out of memory\n";
    return exit_code::internal_error;
  } catch (const std::exception& e) {
    err << command << ": internal error: " << e.what() << "\n";
    return exit_code::internal_error;
  }
}

DeviceChoice parse_device(const std::string& text) {
  if (text == "cpu") return DeviceChoice::cpu;
  if (text == "cuda") return DeviceChoice::cuda;
  return DeviceChoice::automatic;
}

}  // namespace

int run_heev(const HeevRequest& request, std::ostream& out, std::ostream& err) {
  return guarded("covflow linalg heev", err, [&]() -> int {
    if (request.uplo != 'L' && request.uplo != 'U')
      fail(exit_code::usage, std::string("--uplo must be L or U, got '") + request.uplo + "'");
    if (request.values.empty()) fail(exit_code::usage, "--values is required");
    if (request.values == request.vectors) fail(exit_code::usage, "--values and --vectors name the same file");
    const io::NpyArray input = load(request.input);
    const Stack s = stack_of(input, request.input, "(batch, n, n) or (n, n) Hermitian matrices");
    if (s.rows != s.cols)
      fail(exit_code::input_damaged, request.input.string() + ": matrices must be square, got shape " + describe(input) +
                                         ": " + std::to_string(s.rows) + "×" + std::to_string(s.cols));
    switch (input.dtype) {
      case io::NpyDtype::complex128: return heev_typed<la::cf64>(request, input, s, out, err);
      case io::NpyDtype::complex64: return heev_typed<la::cf32>(request, input, s, out, err);
      case io::NpyDtype::float64: return heev_typed<la::f64>(request, input, s, out, err);
      case io::NpyDtype::float32: return heev_typed<la::f32>(request, input, s, out, err);
    }
    fail(exit_code::internal_error, "unhandled dtype");
  });
}

int run_cholupdate(const CholupdateRequest& request, std::ostream& out, std::ostream& err) {
  return guarded("covflow linalg cholupdate", err, [&]() -> int {
    if (request.sign != '+' && request.sign != '-')
      fail(exit_code::usage, std::string("--sign must be + or -, got '") + request.sign + "'");
    if (request.output.empty()) fail(exit_code::usage, "--out is required");
    const io::NpyArray factor = load(request.factor);
    const io::NpyArray update = load(request.update);
    const Stack l = stack_of(factor, request.factor, "(batch, n, n) or (n, n) lower Cholesky factors");
    const Stack v = stack_of(update, request.update, "(batch, n, k) or (n, k) update vectors");
    if (l.rows != l.cols)
      fail(exit_code::input_damaged, request.factor.string() + ": Cholesky factors must be square, got shape " +
                                         describe(factor));
    if (factor.dtype != update.dtype)
      fail(exit_code::input_damaged, request.update.string() + ": dtype " + std::string(io::numpy_name(update.dtype)) +
                                         " differs from the factors' " + std::string(io::numpy_name(factor.dtype)) +
                                         " in " + request.factor.string());
    if (l.batched != v.batched || l.count != v.count || v.rows != l.rows)
      fail(exit_code::input_damaged, request.update.string() + ": shape " + describe(update) + " does not fit factors " +
                                         describe(factor) + " from " + request.factor.string() + "; expected (" +
                                         (l.batched ? std::to_string(l.count) + ", " : std::string()) +
                                         std::to_string(l.rows) + ", k)");
    switch (factor.dtype) {
      case io::NpyDtype::complex128: return cholupdate_typed<la::cf64>(request, factor, update, l, v, out, err);
      case io::NpyDtype::complex64: return cholupdate_typed<la::cf32>(request, factor, update, l, v, out, err);
      case io::NpyDtype::float64: return cholupdate_typed<la::f64>(request, factor, update, l, v, out, err);
      case io::NpyDtype::float32: return cholupdate_typed<la::f32>(request, factor, update, l, v, out, err);
    }
    fail(exit_code::internal_error, "unhandled dtype");
  });
}

// ---- CLI11 wiring ------------------------------------------------------------------------------

LinalgCommands::LinalgCommands(CLI::App& app) {
  group_ = app.add_subcommand("linalg", "Linear algebra on NumPy .npy files; results follow numpy.linalg");
  group_->require_subcommand(1);

  heev_ = group_->add_subcommand(
      "heev", "Eigenvalues (ascending) and eigenvectors of Hermitian or real symmetric matrices, as numpy.linalg.eigh");
  heev_->add_option("input", heev_input_, "IN.npy: (n, n) or (batch, n, n); complex128, complex64, float64 or float32")
      ->required();
  heev_->add_option("--values", heev_values_, "Write the eigenvalues here: (n,) or (batch, n), ascending")->required();
  heev_->add_option("--vectors", heev_vectors_, "Write the eigenvectors here, IN's shape: V[..., :, k] belongs to W[..., k]");
  heev_->add_option("--device", heev_device_, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  heev_->add_option("--uplo", heev_uplo_, "Triangle read, as numpy indexes the array: L (lower) or U (upper)")
      ->check(CLI::IsMember({"L", "U"}, CLI::ignore_case))
      ->capture_default_str();

  cholupdate_ = group_->add_subcommand(
      "cholupdate", "Rank-k update (+) or downdate (-) of lower Cholesky factors, as numpy.linalg.cholesky returns them");
  cholupdate_->add_option("factors", chol_factor_, "L.npy: (batch, n, n) or (n, n) lower factors, as numpy.linalg.cholesky")
      ->required();
  cholupdate_->add_option("update", chol_update_, "V.npy: (batch, n, k) or (n, k)")->required();
  cholupdate_->add_option("--sign", chol_sign_, "+ for L Lᴴ + V Vᴴ, - for L Lᴴ - V Vᴴ")
      ->required()
      ->check(CLI::IsMember({"+", "-"}));
  cholupdate_->add_option("--out", chol_output_, "Write the new factors here (L's shape)")->required();
  cholupdate_->add_option("--device", chol_device_, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
}

bool LinalgCommands::parsed() const { return group_->parsed(); }

int LinalgCommands::run(std::ostream& out, std::ostream& err) const {
  if (heev_->parsed()) {
    HeevRequest request;
    request.input = heev_input_;
    request.values = heev_values_;
    request.vectors = heev_vectors_;
    request.device = parse_device(heev_device_);
    request.uplo = static_cast<char>(std::toupper(static_cast<unsigned char>(heev_uplo_.empty() ? 'L' : heev_uplo_[0])));
    return run_heev(request, out, err);
  }
  if (cholupdate_->parsed()) {
    CholupdateRequest request;
    request.factor = chol_factor_;
    request.update = chol_update_;
    request.output = chol_output_;
    request.sign = chol_sign_.empty() ? '?' : chol_sign_[0];
    request.device = parse_device(chol_device_);
    return run_cholupdate(request, out, err);
  }
  return exit_code::usage;
}

}  // namespace covflow::cli

// Internal to the `covflow linalg` commands (linalg_cli.cpp, solve_cli.cpp): NumPy arrays to and
// from linalg's packed column-major batches, the backend choice, per-matrix failure reports and the
// error plumbing every command shares. Not part of covflow::cli's public surface.
//
// Layout: an NPY array is row-major (C order) unless its header says fortran_order; covflow's
// linalg is column-major. Each matrix is copied into a packed column-major batch on the way in and
// back to C order on the way out, so the matrix linalg sees is the matrix numpy indexes: A[i, j]
// of the file is element (i, j) of the batch. (Reading the C-order bytes in place as column-major
// would hand linalg the transpose; the copy costs O(n²) against the O(n³) of a factorisation and
// leaves no such mapping to get wrong.)
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <new>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "common/exit_codes.hpp"
#include "common/linalg_cli.hpp"
#include "covflow/io/npy.hpp"
#include "covflow/io/npz.hpp"
#include "covflow/linalg/device.hpp"
#include "covflow/linalg/error.hpp"
#include "covflow/linalg/exec.hpp"
#include "covflow/linalg/types.hpp"

namespace covflow::cli::detail {

namespace la = covflow::linalg;
using std::filesystem::path;

// Thrown inside a command to end it with an exit code and one line on stderr.
struct Failure {
  int code;
  std::string message;
};

[[noreturn]] void fail(int code, std::string message);

// read_npy / write_npy with their errors turned into Failures of the matching exit code. load reads
// matrices: a well-formed file of a type no linear algebra takes (int32) is a Failure too.
io::NpyArray load(const path& file);
void store(const path& file, const io::NpyArray& array);

// A Failure (input_damaged) naming `where` (a file, or an archive and its member) unless the array
// holds one of the four element types covflow computes with.
void require_matrix_dtype(const io::NpyArray& array, const std::string& where);

// "(8, 5, 5) float64".
std::string describe(const io::NpyArray& array);

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
inline constexpr std::uint64_t kMaxBatchCount = std::numeric_limits<std::int32_t>::max();

// The stack a 2-D or 3-D array holds; any other rank, a count past kMaxBatchCount or dimensions
// past 32 bits is a Failure (input_damaged) naming `file` and saying what was `expected`.
Stack stack_of(const io::NpyArray& array, const path& file, const char* expected);

// Element offsets of [b][i][j] in the file's order.
struct Strides {
  std::uint64_t matrix, row, col;
};

inline Strides strides_of(const Stack& s, bool fortran_order) {
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

const char* device_name(la::Backend backend);

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

// What info holds before a run, so that an entry a backend forgot to write is reported rather than
// read as success (0x7f in every byte: a device buffer is filled with it by one memset).
inline constexpr int kUnwritten = 0x7f7f7f7f;

// "3, 17, 42" with at most 32 indices shown.
std::string index_list(const std::vector<std::uint64_t>& indices);

template <class T>
T conj_of(T v) {
  if constexpr (la::is_complex_v<T>) return std::conj(v);
  else return v;
}

template <class T>
T nan_of() {
  return T(std::numeric_limits<la::real_t<T>>::quiet_NaN());
}

// Matrices whose info is not 0, grouped by reason in the order first met, reported on stderr in
// heev's words.
struct FailedMatrices {
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> by_reason;
  std::uint64_t count = 0;

  void add(std::uint64_t index, const std::string& reason);

  // One line naming them, and the exit code: ok when none failed, numerical otherwise.
  int report(std::ostream& err, const std::string& command, const path& input, const Stack& s,
             const std::string& written) const;
};

// "A", "A and B", "A, B and C".
std::string joined(const std::vector<std::string>& items);

// A status of qr / svd that is not a per-operation index: "NaN or Inf in the matrix", ...
std::string status_reason(int status);

// "8 matrices 5×3", "one matrix 5×3".
std::string matrices_phrase(const Stack& s);

// int32 results (ranks, pivots), written as numpy.save writes them. Errors as store's.
void store_int32(const path& file, const std::vector<std::uint64_t>& shape, const std::vector<std::int32_t>& values);

// Runs a command's body and turns what it throws into one line on `err` and an exit code.
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

// --device's text (CLI11 has checked it is cpu, cuda or auto).
DeviceChoice parse_device(const std::string& text);

// Typed<T>::run(args...) for the element type of a loaded array. load() and load_archive() refuse
// int32, so no command reaches it with one.
template <template <class> class Typed, class... Args>
int by_dtype(io::NpyDtype dtype, Args&&... args) {
  switch (dtype) {
    case io::NpyDtype::complex128: return Typed<la::cf64>::run(args...);
    case io::NpyDtype::complex64: return Typed<la::cf32>::run(args...);
    case io::NpyDtype::float64: return Typed<la::f64>::run(args...);
    case io::NpyDtype::float32: return Typed<la::f32>::run(args...);
    case io::NpyDtype::int32: break;
  }
  fail(exit_code::internal_error, "unhandled dtype");
}

// ---- compressed-matrix archives (tlr_cli.cpp, h2_cli.cpp) ----------------------------------------

// A number as an ostream writes it by default (1e-06, 0.1, 36); a percentage to 3 digits, "62.8 %".
std::string number_text(double x);
std::string percent_text(double x);

// read_npz with its errors turned into Failures (io, or input_damaged).
std::vector<io::NpzMember> read_archive(const path& file);

// Which compressed form an archive holds: its `format` member, () int32, 1 TLR or 2 H²; an archive
// without one is TLR (the TLR archives of format_version 1 carry none). Any other value or type is
// a Failure (input_damaged) naming the archive.
enum class ArchiveFormat { tlr = 1, h2 = 2 };
ArchiveFormat archive_format(const std::vector<io::NpzMember>& members, const path& file);

// expand and apply on an H² archive (h2_cli.cpp); run_expand and run_apply call them inside their
// guard once archive_format says h2.
int h2_expand_archive(const ExpandRequest& request, const std::vector<io::NpzMember>& members, std::ostream& out,
                      std::ostream& err);
// compress --format h2 (h2_cli.cpp): run_compress calls it inside its guard.
int h2_compress_dense(const CompressRequest& request, std::ostream& out, std::ostream& err);
int h2_apply_archive(const ApplyRequest& request, const std::vector<io::NpzMember>& members, std::ostream& out,
                     std::ostream& err);

}  // namespace covflow::cli::detail

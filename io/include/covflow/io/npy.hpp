// NumPy's .npy file format: one array per file, as numpy.save writes it and numpy.load reads it.
//
// A file is a preamble (the magic bytes \x93NUMPY, a major and a minor version byte, and the
// header length: 2 bytes little-endian in version 1.0, 4 bytes in 2.0 and 3.0), a header that is
// a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...), } padded with spaces
// and ended by '\n', then the raw element data.
//
// covflow reads versions 1.0, 2.0 and 3.0 and the four element types its linear algebra uses —
// float32, float64, complex64 and complex128 — and int32 (ranks, pivots, tile positions: the
// integers covflow writes beside its results), in any shape and either element order. Byte order:
// '<' (little-endian) is what numpy writes on every host covflow runs on; '>' (big-endian) is read
// and byte-swapped; '=' (native) and '|' (not applicable, which numpy also takes as native) are
// read as little-endian, the native order of every supported host. Anything else (other integers,
// float16, long double, structured or object arrays) is refused with a message that names it and
// the supported types.
//
// Reading never trusts the header for sizes: the data size the header implies is checked against
// the bytes the file really holds before anything is allocated, so a damaged header costs an
// error message, not memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace covflow::io {

// int32 is read and written like the others, but no linear algebra takes it: a command that
// takes matrices refuses it.
enum class NpyDtype : std::uint8_t { float32, float64, complex64, complex128, int32 };

// numpy's name ("complex128"), the descr numpy writes ("<c16"), and bytes per element.
std::string_view numpy_name(NpyDtype dtype) noexcept;
std::string_view descr(NpyDtype dtype) noexcept;
std::size_t item_size(NpyDtype dtype) noexcept;
// The real type of the same precision: float32 for complex64, float64 for complex128 (the others
// are their own).
NpyDtype real_dtype(NpyDtype dtype) noexcept;
bool is_complex(NpyDtype dtype) noexcept;

// Every error of this module. what() starts with the file's path as given (for a member of an .npz
// archive, the archive's path and then the member's file name: "C.npz: diag.npy: ...").
class NpyError : public std::runtime_error {
 public:
  enum class Kind {
    io,           // the operating system refused: cannot open, read, create or write the file
    damaged,      // not an NPY file, or one whose preamble, header or data size is wrong
    unsupported,  // a well-formed NPY file of an element type covflow does not read
    argument,     // the caller's mistake when writing (data size does not match the shape)
  };
  NpyError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

struct NpyArray {
  NpyDtype dtype = NpyDtype::float64;
  std::vector<std::uint64_t> shape;  // empty: a 0-d array of one element
  bool fortran_order = false;        // false: C order (last index fastest); true: first index fastest
  // The element data in the order above, little-endian (native) whatever the file's byte order;
  // complex elements are (real, imaginary) pairs. Exactly element_count() * item_size(dtype) bytes.
  std::vector<std::byte> bytes;

  std::uint64_t element_count() const noexcept;
};

// Reads one array. Throws NpyError on any problem, naming the path and what is wrong.
NpyArray read_npy(const std::filesystem::path& path);

// Writes `array` as numpy.save would write it: format version 1.0 (2.0 when the header does not fit
// 1.0's 16-bit length), descr '<..', the header padded with spaces so the data starts on a
// 64-byte boundary and ended by '\n'. Honours array.fortran_order (numpy.save writes a
// Fortran-contiguous array that way). Throws NpyError (kind argument) when array.bytes does not hold
// exactly the shape's data, (kind io) when the file cannot be written.
void write_npy(const std::filesystem::path& path, const NpyArray& array);

// The preamble and header write_npy writes before the data: byte for byte what numpy 1.24 writes.
std::string npy_header(NpyDtype dtype, std::span<const std::uint64_t> shape, bool fortran_order);

// A shape as Python prints a tuple: "()", "(5,)", "(180, 128, 128)".
std::string format_shape(std::span<const std::uint64_t> shape);

}  // namespace covflow::io

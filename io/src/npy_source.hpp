// Internal to covflow::io: the NPY parser reads through an NpySource, so that one parser serves a
// .npy file (npy.cpp) and a member of an .npz archive, stored or deflated (npz.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "covflow/io/npy.hpp"

namespace covflow::io::detail {

// An RAII FILE*.
class File {
 public:
  File(const std::filesystem::path& path, const char* mode) : file_(std::fopen(path.c_str(), mode)) {}
  ~File() {
    if (file_ != nullptr) std::fclose(file_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  std::FILE* get() const noexcept { return file_; }
  // Closes and reports whether everything written reached the file.
  bool close() {
    if (file_ == nullptr) return true;
    const int rc = std::fclose(file_);
    file_ = nullptr;
    return rc == 0;
  }

 private:
  std::FILE* file_;
};

// The bytes of one NPY file, read front to back.
class NpySource {
 public:
  virtual ~NpySource() = default;
  // How many bytes the source holds. The parser checks every size the header implies against it
  // before allocating, so the source must have checked it against something real: a file's
  // length, or for a compressed member the archive's length times deflate's largest ratio.
  virtual std::uint64_t size() const = 0;
  // Exactly `count` bytes, or an NpyError naming `what` (damaged when the bytes run out, io when
  // the operating system refuses).
  virtual void read(void* into, std::size_t count, const char* what) = 0;
};

// Every message of this module starts with `where` and ": ": a file's path, or an archive's path and
// a member's name.
[[noreturn]] void fail(NpyError::Kind kind, const std::string& where, const std::string& what);

// One NPY file from `source` (read_npy's checks and messages, `where` in front of each).
NpyArray parse_npy(NpySource& source, const std::string& where);

// "1 byte", "16 bytes".
std::string size_phrase(std::uint64_t bytes);

}  // namespace covflow::io::detail

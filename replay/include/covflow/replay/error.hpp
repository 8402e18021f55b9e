// Exceptions thrown by covflow::replay. Damage inside a file (a bad record, a cut-short tail) is
// not an exception: the reader reports it (Reader::damage) and goes on to the next whole record.
#pragma once

#include <cstdint>
#include <utility>
#include <stdexcept>
#include <string>

namespace covflow::replay {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The operating system refused: a file that cannot be opened, read or written. what() names the
// path and the system's reason.
class IoError : public Error {
 public:
  using Error::Error;
};

// Bytes that cannot be read as frames at all: not a covflow frame file (bad magic), a format
// version this reader does not know, or a record handed to decode_record that is damaged.
// what() starts with the source's name and the byte offset.
class FormatError : public Error {
 public:
  FormatError(std::string message, std::uint64_t offset) : Error(std::move(message)), offset_(offset) {}
  std::uint64_t offset() const noexcept { return offset_; }

 private:
  std::uint64_t offset_;
};

}  // namespace covflow::replay

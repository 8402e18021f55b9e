// Exceptions thrown by covflow::linalg. Per-matrix problems (a singular matrix, a NaN in one
// matrix of a batch) are never exceptions: they go to the operation's `info` array.
#pragma once

#include <stdexcept>
#include <string>

namespace covflow::linalg {

// Base of everything linalg throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller's mistake: shapes that do not match, a leading dimension too small, host memory
// passed to the CUDA backend, ... The message names the operation and the argument.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// The operation needs a backend this build or this host does not have.
class Unavailable : public Error {
 public:
  using Error::Error;
};

// A CUDA runtime, cuBLAS, cuSOLVER, cuRAND or cuFFT call failed; what() names the call, the
// source file and line, and the library's own error name and text.
class CudaError : public Error {
 public:
  CudaError(std::string message, int code) : Error(std::move(message)), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

}  // namespace covflow::linalg

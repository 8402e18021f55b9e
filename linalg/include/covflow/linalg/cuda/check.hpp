// One error-checking macro family for every CUDA library call. Each names the call, the file and
// the line, and the library's error name:
//   COVFLOW_CUDA_TRY(cudaMemcpyAsync(...));     throws CudaError
//   COVFLOW_CUBLAS_TRY(cublasZgemm(...));       throws CudaError
//   COVFLOW_CUSOLVER_TRY(...), COVFLOW_CURAND_TRY(...), COVFLOW_CUFFT_TRY(...)
//   COVFLOW_CHECK_LAUNCH();                     after every kernel launch
//   COVFLOW_CUDA_TRY_NO_THROW(cudaFree(p));     for destructors: reports on stderr, never throws
#pragma once

#include <cuda_runtime.h>

#include "covflow/linalg/error.hpp"

namespace covflow::linalg::detail {

// Runtime errors also reset the runtime's last-error slot, so that an error already thrown does
// not resurface at the next COVFLOW_CHECK_LAUNCH (sticky errors, a faulted context, stay).
[[noreturn]] void throw_cuda_runtime_error(int code, const char* code_name, const char* text, const char* call,
                                           const char* file, int line);
[[noreturn]] void throw_cuda_error(const char* library, int code, const char* code_name,
                                   const char* text, const char* call, const char* file, int line);
void report_cuda_error(const char* library, int code, const char* code_name, const char* call,
                       const char* file, int line) noexcept;

const char* cublas_status_name(int status) noexcept;
const char* cusolver_status_name(int status) noexcept;
const char* curand_status_name(int status) noexcept;
const char* cufft_result_name(int result) noexcept;

}  // namespace covflow::linalg::detail

#define COVFLOW_CUDA_TRY(call)                                                                   \
  do {                                                                                           \
    const cudaError_t covflow_status_ = (call);                                                  \
    if (covflow_status_ != cudaSuccess)                                                          \
      ::covflow::linalg::detail::throw_cuda_runtime_error(                                       \
          static_cast<int>(covflow_status_), cudaGetErrorName(covflow_status_),                 \
          cudaGetErrorString(covflow_status_), #call, __FILE__, __LINE__);                       \
  } while (0)

#define COVFLOW_CUDA_TRY_NO_THROW(call)                                                      \
  do {                                                                                       \
    const cudaError_t covflow_status_ = (call);                                              \
    if (covflow_status_ != cudaSuccess)                                                      \
      ::covflow::linalg::detail::report_cuda_error("CUDA", static_cast<int>(covflow_status_), \
                                                   cudaGetErrorName(covflow_status_), #call, \
                                                   __FILE__, __LINE__);                      \
  } while (0)

// A launch error (bad configuration, too much shared memory) shows at once; an error during the
// kernel shows at the next synchronising call.
#define COVFLOW_CHECK_LAUNCH() COVFLOW_CUDA_TRY(cudaGetLastError())

#define COVFLOW_LIBRARY_TRY_(library, name_of, success, call)                               \
  do {                                                                                      \
    const int covflow_status_ = static_cast<int>(call);                                     \
    if (covflow_status_ != static_cast<int>(success))                                       \
      ::covflow::linalg::detail::throw_cuda_error(library, covflow_status_,                 \
                                                  name_of(covflow_status_), "", #call,      \
                                                  __FILE__, __LINE__);                      \
  } while (0)

#define COVFLOW_CUBLAS_TRY(call) \
  COVFLOW_LIBRARY_TRY_("cuBLAS", ::covflow::linalg::detail::cublas_status_name, 0, call)
#define COVFLOW_CUSOLVER_TRY(call) \
  COVFLOW_LIBRARY_TRY_("cuSOLVER", ::covflow::linalg::detail::cusolver_status_name, 0, call)
#define COVFLOW_CURAND_TRY(call) \
  COVFLOW_LIBRARY_TRY_("cuRAND", ::covflow::linalg::detail::curand_status_name, 0, call)
#define COVFLOW_CUFFT_TRY(call) \
  COVFLOW_LIBRARY_TRY_("cuFFT", ::covflow::linalg::detail::cufft_result_name, 0, call)

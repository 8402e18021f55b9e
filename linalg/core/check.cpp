#include "covflow/linalg/cuda/check.hpp"

#include "cuda_libraries.hpp"

#include <cublas_v2.h>
#include <cufft.h>
#include <curand.h>
#include <cusolverDn.h>

#include <cstdio>
#include <string>

namespace covflow::linalg::detail {

void throw_cuda_error(const char* library, int code, const char* code_name, const char* text,
                      const char* call, const char* file, int line) {
  std::string message = std::string(library) + " error " + code_name + " (" + std::to_string(code) + ")";
  if (text != nullptr && *text != '\0') message += ": " + std::string(text);
  CudaLibrary loaded{};
  if (cuda_library_named(library, loaded)) {
    const std::string load_error = cuda_library_error(loaded);
    if (!load_error.empty()) message += " (" + load_error + ")";
  }
  message += " in " + std::string(call) + " at " + file + ":" + std::to_string(line);
  throw CudaError(std::move(message), code);
}

void throw_cuda_runtime_error(int code, const char* code_name, const char* text, const char* call,
                              const char* file, int line) {
  cudaGetLastError();
  throw_cuda_error("CUDA", code, code_name, text, call, file, line);
}

void report_cuda_error(const char* library, int code, const char* code_name, const char* call,
                       const char* file, int line) noexcept {
  std::fprintf(stderr, "covflow: %s error %s (%d) in %s at %s:%d (ignored during cleanup)\n",
               library, code_name, code, call, file, line);
}

const char* cublas_status_name(int status) noexcept {
  return cublasGetStatusName(static_cast<cublasStatus_t>(status));
}

const char* cusolver_status_name(int status) noexcept {
  switch (static_cast<cusolverStatus_t>(status)) {
    case CUSOLVER_STATUS_SUCCESS: return "CUSOLVER_STATUS_SUCCESS";
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED: return "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
    case CUSOLVER_STATUS_NOT_SUPPORTED: return "CUSOLVER_STATUS_NOT_SUPPORTED";
    case CUSOLVER_STATUS_INVALID_WORKSPACE: return "CUSOLVER_STATUS_INVALID_WORKSPACE";
    default: return "CUSOLVER_STATUS_(other)";
  }
}

const char* curand_status_name(int status) noexcept {
  switch (static_cast<curandStatus_t>(status)) {
    case CURAND_STATUS_SUCCESS: return "CURAND_STATUS_SUCCESS";
    case CURAND_STATUS_ALLOCATION_FAILED: return "CURAND_STATUS_ALLOCATION_FAILED";
    case CURAND_STATUS_NOT_INITIALIZED: return "CURAND_STATUS_NOT_INITIALIZED";
    case CURAND_STATUS_LAUNCH_FAILURE: return "CURAND_STATUS_LAUNCH_FAILURE";
    case CURAND_STATUS_LENGTH_NOT_MULTIPLE: return "CURAND_STATUS_LENGTH_NOT_MULTIPLE";
    case CURAND_STATUS_TYPE_ERROR: return "CURAND_STATUS_TYPE_ERROR";
    default: return "CURAND_STATUS_(other)";
  }
}

const char* cufft_result_name(int result) noexcept {
  switch (static_cast<cufftResult>(result)) {
    case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    default: return "CUFFT_(other)";
  }
}

}  // namespace covflow::linalg::detail

// cuBLAS, cuSOLVER, cuFFT and cuRAND are loaded by covflow's first call into each, not when a
// process starts (linalg/core/cuda_libraries.hpp). Runs on any host with the CUDA toolkit: loading
// the libraries needs no GPU.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cublas_v2.h>
#include <cufft.h>
#include <curand.h>
#include <cusolverDn.h>

#include <string>

#include "covflow/linalg/cuda/check.hpp"
#include "cuda_libraries.hpp"

namespace {

using covflow::linalg::detail::cuda_library_error;
using covflow::linalg::detail::cuda_library_symbol;
using covflow::linalg::detail::CudaLibrary;

bool loaded(const char* soname) {
  void* handle = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  if (handle != nullptr) dlclose(handle);
  return handle != nullptr;
}

// One test, so that no other test of this binary can have loaded a library before it looks.
TEST(CudaLibraries, EachIsLoadedByTheFirstCallIntoItAndNotBefore) {
  EXPECT_FALSE(loaded(COVFLOW_CUBLAS_SONAME)) << "cuBLAS was loaded before any call into it";
  const std::string cublas_lt = std::string("libcublasLt") + (COVFLOW_CUBLAS_SONAME + 9);
  EXPECT_FALSE(loaded(cublas_lt.c_str())) << "cuBLASLt was loaded before any call into cuBLAS";
  EXPECT_FALSE(loaded(COVFLOW_CUSOLVER_SONAME));
  EXPECT_FALSE(loaded(COVFLOW_CUFFT_SONAME));
  EXPECT_FALSE(loaded(COVFLOW_CURAND_SONAME));

  // The forwarder of a call that needs no device answers as the library does.
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_TRUE(loaded(COVFLOW_CUBLAS_SONAME));
  EXPECT_TRUE(loaded(cublas_lt.c_str()));
  EXPECT_FALSE(loaded(COVFLOW_CUFFT_SONAME)) << "a cuBLAS call loaded cuFFT";
  EXPECT_FALSE(loaded(COVFLOW_CURAND_SONAME)) << "a cuBLAS call loaded cuRAND";

  // The libraries' own answers to a null handle, so the forwarders reached each one.
  EXPECT_EQ(cufftDestroy(0), CUFFT_INVALID_PLAN);
  EXPECT_TRUE(loaded(COVFLOW_CUFFT_SONAME));
  EXPECT_EQ(curandDestroyGenerator(nullptr), CURAND_STATUS_NOT_INITIALIZED);
  EXPECT_TRUE(loaded(COVFLOW_CURAND_SONAME));
  cusolverDnHandle_t solver = nullptr;  // made where a GPU is, refused where none is
  if (cusolverDnCreate(&solver) == CUSOLVER_STATUS_SUCCESS) {
    EXPECT_EQ(cusolverDnDestroy(solver), CUSOLVER_STATUS_SUCCESS);
  }
  EXPECT_TRUE(loaded(COVFLOW_CUSOLVER_SONAME));
  for (auto library : {CudaLibrary::cublas, CudaLibrary::cusolver, CudaLibrary::cufft,
                       CudaLibrary::curand})
    EXPECT_EQ(cuda_library_error(library), "");
}

TEST(CudaLibraries, AFunctionTheLibraryLacksIsNamedInTheCallsError) {
  EXPECT_EQ(cuda_library_symbol(CudaLibrary::cusolver, "cusolverDnNoSuchFunction"), nullptr);
  const std::string error = cuda_library_error(CudaLibrary::cusolver);
  EXPECT_NE(error.find(COVFLOW_CUSOLVER_SONAME), std::string::npos) << error;
  EXPECT_NE(error.find("has no function cusolverDnNoSuchFunction"), std::string::npos) << error;
  try {
    COVFLOW_CUSOLVER_TRY(CUSOLVER_STATUS_NOT_INITIALIZED);
    FAIL() << "a failed status did not throw";
  } catch (const covflow::linalg::CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("has no function cusolverDnNoSuchFunction"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace

#include "cuda_libraries.hpp"

#include <dlfcn.h>

#include <array>
#include <cstring>
#include <mutex>

// The shared-object names and the toolkit's library folder of the CUDA toolkit covflow was built
// with (linalg/CMakeLists.txt reads them from the toolkit).
#ifndef COVFLOW_CUBLAS_SONAME
#error "COVFLOW_CUBLAS_SONAME and its siblings come from linalg/CMakeLists.txt"
#endif

namespace covflow::linalg::detail {
namespace {

constexpr std::array<const char*, 4> kSonames{COVFLOW_CUBLAS_SONAME, COVFLOW_CUSOLVER_SONAME,
                                             COVFLOW_CUFFT_SONAME, COVFLOW_CURAND_SONAME};

struct Library {
  std::once_flag loaded;
  void* handle = nullptr;
  std::mutex error_mutex;
  std::string error;
};

std::array<Library, 4>& libraries() {
  static std::array<Library, 4> table;
  return table;
}

std::string last_dl_error() {
  const char* text = dlerror();
  return text != nullptr ? text : "no reason given";
}

void note_error(Library& library, std::string text) {
  const std::lock_guard lock(library.error_mutex);
  if (library.error.empty()) library.error = std::move(text);
}

// By its shared-object name first (LD_LIBRARY_PATH, the system's library paths), then from the
// toolkit's folder at build time, which the system's paths need not list.
void load(Library& library, const char* soname) {
  library.handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (library.handle != nullptr) return;
  const std::string first = last_dl_error();
  const std::string in_toolkit = std::string(COVFLOW_CUDA_LIBRARY_DIR) + "/" + soname;
  library.handle = dlopen(in_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library.handle != nullptr) return;
  note_error(library, "cannot load " + std::string(soname) + ": " + first + "; " + last_dl_error());
}

}  // namespace

void* cuda_library_symbol(CudaLibrary which, const char* name) noexcept {
  try {
    const auto index = static_cast<std::size_t>(which);
    Library& library = libraries()[index];
    std::call_once(library.loaded, [&] { load(library, kSonames[index]); });
    if (library.handle == nullptr) return nullptr;
    void* symbol = dlsym(library.handle, name);
    if (symbol == nullptr)
      note_error(library, std::string(kSonames[index]) + " has no function " + name);
    return symbol;
  } catch (...) {  // std::string or the once flag could not allocate: the call reports failure
    return nullptr;
  }
}

std::string cuda_library_error(CudaLibrary which) {
  Library& library = libraries()[static_cast<std::size_t>(which)];
  const std::lock_guard lock(library.error_mutex);
  return library.error;
}

bool cuda_library_named(const char* name, CudaLibrary& library) noexcept {
  static constexpr std::array<const char*, 4> names{"cuBLAS", "cuSOLVER", "cuFFT", "cuRAND"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (std::strcmp(name, names[i]) == 0) {
      library = static_cast<CudaLibrary>(i);
      return true;
    }
  }
  return false;
}

}  // namespace covflow::linalg::detail

// Helpers for the NPY and `covflow linalg` tests: a scratch directory per test, files from raw
// bytes, and typed arrays to and from NpyArray.
#pragma once

#include <gtest/gtest.h>

#include <complex>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "covflow/io/npy.hpp"

namespace covflow::test {

// A fresh directory under the system's temp dir, removed when the test ends.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("covflow-") + (info ? std::string(info->test_suite_name()) + "-" + info->name() : "test");
    for (char& c : name)
      if (c == '/') c = '_';
    std::random_device device;
    path_ = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(device()));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& file, std::string_view bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << file;
}

inline std::string read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

template <class T> constexpr io::NpyDtype dtype_of();
template <> constexpr io::NpyDtype dtype_of<float>() { return io::NpyDtype::float32; }
template <> constexpr io::NpyDtype dtype_of<double>() { return io::NpyDtype::float64; }
template <> constexpr io::NpyDtype dtype_of<std::complex<float>>() { return io::NpyDtype::complex64; }
template <> constexpr io::NpyDtype dtype_of<std::complex<double>>() { return io::NpyDtype::complex128; }
template <> constexpr io::NpyDtype dtype_of<std::int32_t>() { return io::NpyDtype::int32; }

template <class T>
io::NpyArray make_array(const std::vector<T>& values, std::vector<std::uint64_t> shape, bool fortran_order = false) {
  io::NpyArray array;
  array.dtype = dtype_of<T>();
  array.shape = std::move(shape);
  array.fortran_order = fortran_order;
  array.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(array.bytes.data(), values.data(), array.bytes.size());
  return array;
}

template <class T>
std::vector<T> values_of(const io::NpyArray& array) {
  std::vector<T> out(array.bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), array.bytes.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace covflow::test

// The non-template half of linalg_cli_support.hpp.
#include "common/linalg_cli_support.hpp"

#include <algorithm>
#include <sstream>

namespace covflow::cli::detail {
namespace {

int exit_code_for(const io::NpyError& error) {
  switch (error.kind()) {
    case io::NpyError::Kind::io: return exit_code::io;
    case io::NpyError::Kind::damaged:
    case io::NpyError::Kind::unsupported: return exit_code::input_damaged;
    case io::NpyError::Kind::argument: return exit_code::internal_error;
  }
  return exit_code::internal_error;
}

}  // namespace

std::string number_text(double x) {
  std::ostringstream text;
  text << x;
  return text.str();
}

std::string percent_text(double x) {
  std::ostringstream text;
  text.precision(3);
  text << x << " %";
  return text.str();
}

void fail(int code, std::string message) { throw Failure{code, std::move(message)}; }

io::NpyArray load(const path& file) {
  io::NpyArray array;
  try {
    array = io::read_npy(file);
  } catch (const io::NpyError& e) {
    fail(exit_code_for(e), e.what());
  }
  require_matrix_dtype(array, file);
  return array;
}

void require_matrix_dtype(const io::NpyArray& array, const std::string& where) {
  switch (array.dtype) {
    case io::NpyDtype::float32:
    case io::NpyDtype::float64:
    case io::NpyDtype::complex64:
    case io::NpyDtype::complex128: return;
    case io::NpyDtype::int32: break;
  }
  fail(exit_code::input_damaged,
       where + ": unsupported dtype '" + std::string(io::descr(array.dtype)) + "' (" +
           std::string(io::numpy_name(array.dtype)) + ") for a matrix; covflow linalg takes float32 '<f4', float64 '<f8', "
           "complex64 '<c8' and complex128 '<c16' (convert with numpy's astype)");
}

void store(const path& file, const io::NpyArray& array) {
  try {
    io::write_npy(file, array);
  } catch (const io::NpyError& e) {
    fail(exit_code_for(e), e.what());
  }
}

std::string describe(const io::NpyArray& array) {
  return io::format_shape(array.shape) + " " + std::string(io::numpy_name(array.dtype));
}

Stack stack_of(const io::NpyArray& array, const path& file, const char* expected) {
  const auto& shape = array.shape;
  if (shape.size() != 2 && shape.size() != 3)
    fail(exit_code::input_damaged, file.string() + ": expected " + expected + ", got shape " + describe(array) +
                                       " (" + std::to_string(shape.size()) + " dimensions)");
  Stack stack;
  stack.batched = shape.size() == 3;
  stack.count = stack.batched ? shape[0] : 1;
  stack.rows = shape[shape.size() - 2];
  stack.cols = shape[shape.size() - 1];
  if (stack.count > kMaxBatchCount)
    fail(exit_code::input_damaged, file.string() + ": shape " + describe(array) + " holds " +
                                       std::to_string(stack.count) + " matrices, more than the " +
                                       std::to_string(kMaxBatchCount) + " a batch may hold");
  // BLAS/LAPACK take 32-bit dimensions; anything near that is no matrix a file of ours holds.
  if (stack.rows > std::uint64_t(std::numeric_limits<int>::max()) ||
      stack.cols > std::uint64_t(std::numeric_limits<int>::max()))
    fail(exit_code::input_damaged, file.string() + ": matrices of shape " + describe(array) +
                                       " exceed the 32-bit dimensions of BLAS/LAPACK");
  return stack;
}

const char* device_name(la::Backend backend) { return backend == la::Backend::cuda ? "cuda" : "cpu"; }

std::string index_list(const std::vector<std::uint64_t>& indices) {
  constexpr std::size_t limit = 32;
  std::string out;
  for (std::size_t i = 0; i < indices.size() && i < limit; ++i) out += (i ? ", " : "") + std::to_string(indices[i]);
  if (indices.size() > limit) out += ", ... (" + std::to_string(indices.size() - limit) + " more)";
  return out;
}

void FailedMatrices::add(std::uint64_t index, const std::string& reason) {
  ++count;
  auto it = std::find_if(by_reason.begin(), by_reason.end(), [&](const auto& f) { return f.first == reason; });
  if (it == by_reason.end()) it = by_reason.insert(by_reason.end(), {reason, {}});
  it->second.push_back(index);
}

int FailedMatrices::report(std::ostream& err, const std::string& command, const path& input, const Stack& s,
                           const std::string& written) const {
  if (count == 0) return exit_code::ok;
  err << command << ": " << input.string() << ": ";
  if (s.batched) {
    err << count << " of " << s.count << (s.count == 1 ? " matrix" : " matrices") << " failed, written as NaN in "
        << written << ":";
    const char* separator = " ";
    for (const auto& [reason, indices] : by_reason) {
      err << separator << (indices.size() == 1 ? "matrix " : "matrices ") << index_list(indices) << " (" << reason
          << ")";
      separator = "; ";
    }
  } else {
    err << "the matrix failed (" << by_reason.front().first << "), written as NaN in " << written;
  }
  err << "\n";
  return exit_code::numerical;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : (i + 1 == items.size() ? " and " : ", ")) + items[i];
  return out;
}

std::string status_reason(int status) {
  if (status == la::status::non_finite_input) return "NaN or Inf in the matrix";
  if (status == la::status::no_convergence) return "no convergence";
  if (status == kUnwritten) return "not computed (info never written)";
  return "info " + std::to_string(status);
}

std::string matrices_phrase(const Stack& s) {
  return (s.batched ? std::to_string(s.count) + " matrices " : std::string("one matrix ")) + std::to_string(s.rows) +
         "×" + std::to_string(s.cols);
}

void store_int32(const path& file, const std::vector<std::uint64_t>& shape, const std::vector<std::int32_t>& values) {
  io::NpyArray array;
  array.dtype = io::NpyDtype::int32;
  array.shape = shape;
  array.bytes = raw_bytes(values);
  store(file, array);
}

DeviceChoice parse_device(const std::string& text) {
  if (text == "cpu") return DeviceChoice::cpu;
  if (text == "cuda") return DeviceChoice::cuda;
  return DeviceChoice::automatic;
}

std::vector<io::NpzMember> read_archive(const path& file) {
  try {
    return io::read_npz(file);
  } catch (const io::NpyError& e) {
    fail(e.kind() == io::NpyError::Kind::io ? exit_code::io : exit_code::input_damaged, e.what());
  }
}

ArchiveFormat archive_format(const std::vector<io::NpzMember>& members, const path& file) {
  const io::NpzMember* m = io::find_member(members, "format");
  if (m == nullptr) return ArchiveFormat::tlr;
  std::int32_t value = 0;
  if (m->array.dtype == io::NpyDtype::int32 && m->array.shape.empty()) std::memcpy(&value, m->array.bytes.data(), 4);
  else fail(exit_code::input_damaged, file.string() + ": 'format' is " + describe(m->array) + ", expected () int32");
  if (value == static_cast<std::int32_t>(ArchiveFormat::tlr)) return ArchiveFormat::tlr;
  if (value == static_cast<std::int32_t>(ArchiveFormat::h2)) return ArchiveFormat::h2;
  fail(exit_code::input_damaged, file.string() + ": archive format " + std::to_string(value) +
                                     " is not one this covflow reads (1 TLR, 2 H²)");
}

}  // namespace covflow::cli::detail

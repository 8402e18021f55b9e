// Damaged and unsupported NPY files: every class of damage gets one NpyError whose message
// starts with the path and says what is wrong; no damage crashes the reader or makes it allocate
// what the file does not hold.
#include <gtest/gtest.h>

#include <complex>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "covflow/io/npy.hpp"
#include "npy_test_support.hpp"
#include "test_support.hpp"

namespace covflow::test {
namespace {

using namespace std::string_literals;
using namespace std::string_view_literals;
using io::NpyError;
using Kind = io::NpyError::Kind;

std::string npy_file(std::string_view dict, std::string_view data, int major = 1, int minor = 0) {
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  std::string header(dict);
  while ((8 + length_bytes + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY"s;
  out += static_cast<char>(major);
  out += static_cast<char>(minor);
  for (std::size_t i = 0; i < length_bytes; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(data);
}

const std::string kSixteenBytes(16, '\0');  // two float64 zeros

struct DamageCase {
  const char* name;
  std::string bytes;
  Kind kind;
  std::vector<std::string> says;  // phrases the message must hold (after the leading path)
};

std::vector<DamageCase> damage_cases() {
  const auto dict = [](std::string_view shape, std::string_view descr = "<f8", std::string_view order = "False") {
    return "{'descr': '" + std::string(descr) + "', 'fortran_order': " + std::string(order) + ", 'shape': " +
           std::string(shape) + ", }";
  };
  std::string past_end = npy_file(dict("(2,)"), kSixteenBytes);
  past_end[8] = '\x00';
  past_end[9] = '\x10';  // 4096-byte header in a 144-byte file
  return {
      {"empty", "", Kind::damaged, {"empty file"}},
      {"bad_magic", "GIF89a" + std::string(200, 'x'), Kind::damaged, {"bad magic", "47 49 46 38 39 61"}},
      {"zip", "PK\x03\x04" + std::string(200, 'x'), Kind::damaged, {"bad magic", "zip archive", "numpy.save"}},
      {"magic_only", "\x93NUMP", Kind::damaged, {"truncated", "5 bytes", "preamble"}},
      {"version_4", npy_file(dict("(2,)"), kSixteenBytes, 4), Kind::damaged, {"unknown NPY format version 4.0", "1.0, 2.0 and 3.0"}},
      {"version_1_1", npy_file(dict("(2,)"), kSixteenBytes, 1, 1), Kind::damaged, {"unknown NPY format version 1.1"}},
      {"header_past_end", past_end, Kind::damaged, {"header length field says 4096 bytes but only 134 bytes follow the preamble"}},
      {"missing_descr", npy_file("{'fortran_order': False, 'shape': (2,), }", kSixteenBytes), Kind::damaged,
       {"malformed header", "missing key 'descr'", "the header reads: {'fortran_order'"}},
      {"missing_order", npy_file("{'descr': '<f8', 'shape': (2,), }", kSixteenBytes), Kind::damaged,
       {"malformed header", "missing key 'fortran_order'"}},
      {"missing_shape", npy_file("{'descr': '<f8', 'fortran_order': False, }", kSixteenBytes), Kind::damaged,
       {"malformed header", "missing key 'shape'"}},
      {"unknown_key", npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'extra': 1}", kSixteenBytes),
       Kind::damaged, {"malformed header", "unexpected key 'extra'"}},
      {"duplicate_key", npy_file("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (2,)}", kSixteenBytes),
       Kind::damaged, {"key 'descr' appears twice"}},
      {"unclosed_tuple", npy_file(dict("(2, 3"), kSixteenBytes), Kind::damaged, {"malformed header", "'shape'"}},
      {"number_not_tuple", npy_file(dict("(2)"), kSixteenBytes), Kind::damaged, {"is a number, not a tuple", "(2,)"}},
      {"list_shape", npy_file(dict("[2]"), kSixteenBytes), Kind::damaged, {"must be a tuple, not a list"}},
      {"negative_dim", npy_file(dict("(-2,)"), kSixteenBytes), Kind::damaged, {"negative dimension"}},
      {"word_dim", npy_file(dict("(two,)"), kSixteenBytes), Kind::damaged, {"tuple of non-negative integers"}},
      {"huge_dim", npy_file(dict("(99999999999999999999999,)"), kSixteenBytes), Kind::damaged, {"does not fit 64 bits"}},
      {"bad_bool", npy_file(dict("(2,)", "<f8", "'no'"), kSixteenBytes), Kind::damaged, {"'fortran_order' must be True or False"}},
      {"no_brace", npy_file("'descr': '<f8'", kSixteenBytes), Kind::damaged, {"does not start with '{'"}},
      {"unterminated", npy_file("{'descr': '<f8", kSixteenBytes), Kind::damaged, {"unterminated string"}},
      {"text_after", npy_file(dict("(2,)") + " junk", kSixteenBytes), Kind::damaged, {"unexpected text after the closing '}'"}},
      {"int64", npy_file(dict("(2,)", "<i8"), kSixteenBytes), Kind::unsupported,
       {"unsupported dtype '<i8' (int64)", "float32 '<f4'", "float64 '<f8'", "complex64 '<c8'", "complex128 '<c16'",
        "int32 '<i4'"}},
      {"uint32", npy_file(dict("(4,)", "<u4"), kSixteenBytes), Kind::unsupported, {"unsupported dtype '<u4' (uint32)"}},
      {"float16", npy_file(dict("(8,)", "<f2"), kSixteenBytes), Kind::unsupported, {"unsupported dtype '<f2' (float16)"}},
      {"complex256", npy_file(dict("(1,)", "<c32"), kSixteenBytes), Kind::unsupported, {"'<c32' (complex256)"}},
      {"object", npy_file(dict("(2,)", "|O"), kSixteenBytes), Kind::unsupported, {"'|O'", "Python objects"}},
      {"structured", npy_file("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (2,), }", kSixteenBytes),
       Kind::unsupported, {"structured dtype"}},
      {"truncated_data", npy_file(dict("(180, 128, 128)", "<c16"), std::string(1024, '\0')), Kind::damaged,
       {"header says shape (180, 128, 128) complex128 = 47185920 bytes but only 1024 bytes follow the header"}},
      {"shape_overflows", npy_file(dict("(4294967296, 4294967296, 4)"), kSixteenBytes), Kind::damaged,
       {"more bytes than 64 bits can count"}},
      {"trailing_bytes", npy_file(dict("(2,)"), kSixteenBytes + "extra"), Kind::damaged,
       {"5 bytes follow the array data", "exactly one array"}},
  };
}

TEST(NpyDamage, EveryClassHasItsMessage) {
  ScratchDir dir;
  for (const DamageCase& c : damage_cases()) {
    SCOPED_TRACE(c.name);
    const auto file = dir / (std::string(c.name) + ".npy");
    write_bytes(file, c.bytes);
    try {
      io::read_npy(file);
      ADD_FAILURE() << c.name << ": read without error";
    } catch (const NpyError& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.starts_with(file.string() + ": ")) << what;
      EXPECT_EQ(e.kind(), c.kind) << what;
      for (const std::string& phrase : c.says) EXPECT_NE(what.find(phrase), std::string::npos) << "missing \"" << phrase << "\" in: " << what;
    }
  }
}

TEST(NpyDamage, HugeShapeInASmallFileAllocatesNothing) {
  // 2^20 × 2^20 × 2^10 complex128 is 16 EiB: a reader that sized a buffer from the header would
  // throw bad_alloc (or worse) instead of NpyError.
  ScratchDir dir;
  const auto file = dir / "huge.npy";
  write_bytes(file, npy_file("{'descr': '<c16', 'fortran_order': False, 'shape': (1048576, 1048576, 64), }", "tiny"));
  try {
    io::read_npy(file);
    FAIL() << "expected NpyError";
  } catch (const NpyError& e) {
    EXPECT_NE(std::string(e.what()).find("but only 4 bytes follow the header"), std::string::npos) << e.what();
  }
}

TEST(NpyDamage, MissingFileAndDirectoryAreIoErrors) {
  ScratchDir dir;
  for (const auto& file : {dir / "absent.npy", dir.path()}) {
    try {
      io::read_npy(file);
      ADD_FAILURE() << file << " read without error";
    } catch (const NpyError& e) {
      EXPECT_EQ(e.kind(), Kind::io) << e.what();
      EXPECT_TRUE(std::string(e.what()).starts_with(file.string() + ": ")) << e.what();
    }
  }
}

// Every prefix of a valid file is an error (NpyError), never a crash or another exception.
TEST(NpyDamage, TruncationAtEveryByte) {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("NpyDamage.TruncationAtEveryByte"));
  for (bool fortran : {false, true}) {
    const auto whole = dir / "whole.npy";
    io::write_npy(whole, make_array(random_normal<std::complex<double>>(6, rng), {2, 3}, fortran));
    const std::string bytes = read_bytes(whole);
    ASSERT_EQ(bytes.size(), 128u + 96u);
    const auto cut = dir / "cut.npy";
    for (std::size_t length = 0; length < bytes.size(); ++length) {
      write_bytes(cut, std::string_view(bytes).substr(0, length));
      try {
        io::read_npy(cut);
        ADD_FAILURE() << "a file cut to " << length << " of " << bytes.size() << " bytes was read without error";
      } catch (const NpyError& e) {
        EXPECT_EQ(e.kind(), Kind::damaged) << length << ": " << e.what();
        EXPECT_TRUE(std::string(e.what()).starts_with(cut.string() + ": ")) << e.what();
      }
    }
  }
}

// Every single byte of the preamble and header replaced by random values: the reader either reads
// a (different but well-formed) array whose size matches the file, or throws NpyError.
TEST(NpyDamage, CorruptedHeaderBytesNeverCrash) {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("NpyDamage.CorruptedHeaderBytesNeverCrash"));
  const auto whole = dir / "whole.npy";
  io::write_npy(whole, make_array(random_normal<float>(12, rng), {3, 4}));
  const std::string bytes = read_bytes(whole);
  const auto bad = dir / "bad.npy";
  std::uniform_int_distribution<int> byte(0, 255);
  std::size_t errors = 0, reads = 0;
  for (std::size_t at = 0; at < 128; ++at) {
    for (int trial = 0; trial < 4; ++trial) {
      std::string damaged = bytes;
      damaged[at] = static_cast<char>(byte(rng));
      write_bytes(bad, damaged);
      try {
        const io::NpyArray array = io::read_npy(bad);
        EXPECT_EQ(array.bytes.size(), array.element_count() * io::item_size(array.dtype));
        ++reads;
      } catch (const NpyError&) {
        ++errors;
      }
    }
  }
  EXPECT_GT(errors, 0u);
  std::cout << "[ info     ] " << reads << " corrupted headers still read, " << errors << " refused\n";
}

}  // namespace
}  // namespace covflow::test

// The NPY writer and reader: round trips, numpy's exact byte layout, and the header variants
// numpy and other writers produce.
#include <gtest/gtest.h>

#include <complex>
#include <cstdint>
#include <limits>
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
using io::NpyArray;
using io::NpyDtype;
using io::NpyError;

// ---- round trips -------------------------------------------------------------------------------

template <class T>
class NpyRoundTrip : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(NpyRoundTrip, ElementTypes);

TYPED_TEST(NpyRoundTrip, EveryRankAndOrderReadsBackAsWritten) {
  using T = TypeParam;
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("NpyRoundTrip"));
  const std::vector<std::vector<std::uint64_t>> shapes = {{}, {7}, {1}, {3, 5}, {2, 3, 4}, {0, 3}, {4, 0, 2}, {1, 1, 1}};
  for (const auto& shape : shapes) {
    for (bool fortran : {false, true}) {
      SCOPED_TRACE(io::format_shape(shape) + (fortran ? " Fortran order" : " C order"));
      std::uint64_t count = 1;
      for (auto d : shape) count *= d;
      const NpyArray written = make_array(random_normal<T>(count, rng), shape, fortran);
      const auto file = dir / "a.npy";
      io::write_npy(file, written);

      const std::string bytes = read_bytes(file);
      ASSERT_GE(bytes.size(), 10u);
      const std::size_t header_length = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
      EXPECT_EQ((10 + header_length) % 64, 0u) << "data must start on a 64-byte boundary";
      EXPECT_EQ(bytes[10 + header_length - 1], '\n');
      EXPECT_EQ(bytes.size(), 10 + header_length + count * sizeof(T));

      const NpyArray read = io::read_npy(file);
      EXPECT_EQ(read.dtype, dtype_of<T>());
      EXPECT_EQ(read.shape, shape);
      EXPECT_EQ(read.fortran_order, fortran);
      EXPECT_EQ(read.element_count(), count);
      EXPECT_EQ(read.bytes, written.bytes);
    }
  }
}

// int32 (ranks, pivots, tile positions) goes through the same reader and writer.
TEST(NpyRoundTrip, Int32ReadsBackAsWritten) {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("NpyRoundTrip.Int32"));
  std::uniform_int_distribution<std::int32_t> draw(std::numeric_limits<std::int32_t>::min(),
                                                   std::numeric_limits<std::int32_t>::max());
  for (const std::vector<std::uint64_t>& shape : std::vector<std::vector<std::uint64_t>>{{}, {5}, {3, 4}, {2, 0, 3}}) {
    for (bool fortran : {false, true}) {
      std::uint64_t count = 1;
      for (auto d : shape) count *= d;
      std::vector<std::int32_t> values(count);
      for (auto& v : values) v = draw(rng);
      io::write_npy(dir / "i.npy", make_array(values, shape, fortran));
      const NpyArray read = io::read_npy(dir / "i.npy");
      EXPECT_EQ(read.dtype, NpyDtype::int32);
      EXPECT_EQ(read.shape, shape);
      EXPECT_EQ(read.fortran_order, fortran);
      EXPECT_EQ(values_of<std::int32_t>(read), values);
    }
  }
  EXPECT_EQ(io::numpy_name(NpyDtype::int32), "int32");
  EXPECT_EQ(io::descr(NpyDtype::int32), "<i4");
  EXPECT_EQ(io::item_size(NpyDtype::int32), 4u);
  EXPECT_EQ(io::real_dtype(NpyDtype::int32), NpyDtype::int32);
  EXPECT_FALSE(io::is_complex(NpyDtype::int32));
}

// ---- numpy's byte layout -----------------------------------------------------------------------

// What numpy 1.24's numpy.save writes for these arrays, taken from it once: the preamble, the dict
// with its keys sorted and a trailing ", ", room for the first axis (last in Fortran order) to grow
// to 21 digits, space padding to a 64-byte boundary, '\n'.
TEST(NpyLayout, HeadersMatchNumpyByteForByte) {
  const std::vector<std::uint64_t> s34 = {3, 4}, s180 = {180, 128, 128}, s5 = {5}, s0 = {}, s23 = {2, 3};
  EXPECT_EQ(io::npy_header(NpyDtype::float64, s34, false),
            std::string("\x93NUMPY\x01\x00v\x00"sv) + "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }" +
                std::string(58, ' ') + "\n");
  EXPECT_EQ(io::npy_header(NpyDtype::complex128, s180, false),
            std::string("\x93NUMPY\x01\x00v\x00"sv) +
                "{'descr': '<c16', 'fortran_order': False, 'shape': (180, 128, 128), }" + std::string(48, ' ') + "\n");
  EXPECT_EQ(io::npy_header(NpyDtype::float32, s5, false),
            std::string("\x93NUMPY\x01\x00v\x00"sv) + "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }" +
                std::string(60, ' ') + "\n");
  EXPECT_EQ(io::npy_header(NpyDtype::complex64, s0, false),
            std::string("\x93NUMPY\x01\x00v\x00"sv) + "{'descr': '<c8', 'fortran_order': False, 'shape': (), }" +
                std::string(62, ' ') + "\n");
  EXPECT_EQ(io::npy_header(NpyDtype::complex64, s23, true),
            std::string("\x93NUMPY\x01\x00v\x00"sv) + "{'descr': '<c8', 'fortran_order': True, 'shape': (2, 3), }" +
                std::string(59, ' ') + "\n");
  // numpy.save(f, np.arange(6, dtype=np.int32).reshape(2, 3)) and of np.int32(7) (0-d), whole files.
  ScratchDir dir;
  io::write_npy(dir / "i.npy", make_array(std::vector<std::int32_t>{0, 1, 2, 3, 4, 5}, s23));
  EXPECT_EQ(read_bytes(dir / "i.npy"),
            std::string("\x93NUMPY\x01\x00v\x00"sv) + "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }" +
                std::string(58, ' ') + "\n" +
                std::string("\0\0\0\0\x01\0\0\0\x02\0\0\0\x03\0\0\0\x04\0\0\0\x05\0\0\0"sv));
  io::write_npy(dir / "s.npy", make_array(std::vector<std::int32_t>{7}, s0));
  EXPECT_EQ(read_bytes(dir / "s.npy"),
            std::string("\x93NUMPY\x01\x00v\x00"sv) + "{'descr': '<i4', 'fortran_order': False, 'shape': (), }" +
                std::string(62, ' ') + "\n" + std::string("\x07\0\0\0"sv));
}

TEST(NpyLayout, WholeFileIsHeaderThenLittleEndianData) {
  ScratchDir dir;
  const std::vector<double> values = {1.0, -2.5};
  io::write_npy(dir / "x.npy", make_array(values, {2}));
  const std::string expected = io::npy_header(NpyDtype::float64, std::vector<std::uint64_t>{2}, false) +
                               std::string("\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x00\x00\x00\x00\x00\x04\xc0"sv);
  EXPECT_EQ(read_bytes(dir / "x.npy"), expected);
}

TEST(NpyLayout, HugeHeaderFallsBackToVersion2) {
  // 1.0's header length is 16 bits; a shape too long for it needs 2.0 (numpy does the same).
  ScratchDir dir;
  const std::vector<std::uint64_t> shape(30000, 1);
  const std::string header = io::npy_header(NpyDtype::float64, shape, false);
  ASSERT_GT(header.size(), 65535u);
  EXPECT_EQ(header[6], '\x02');
  EXPECT_EQ(header.size() % 64, 0u);
  io::write_npy(dir / "long.npy", make_array(std::vector<double>{4.0}, shape));
  const NpyArray read = io::read_npy(dir / "long.npy");
  EXPECT_EQ(read.shape, shape);
  EXPECT_EQ(values_of<double>(read), std::vector<double>{4.0});
}

TEST(NpyLayout, FormatShapeIsPythonsTupleRepr) {
  EXPECT_EQ(io::format_shape(std::vector<std::uint64_t>{}), "()");
  EXPECT_EQ(io::format_shape(std::vector<std::uint64_t>{5}), "(5,)");
  EXPECT_EQ(io::format_shape(std::vector<std::uint64_t>{180, 128, 128}), "(180, 128, 128)");
}

// ---- header variants a reader meets ------------------------------------------------------------

// A file from a hand-written header and data: the preamble of `major`.0, the header padded as
// numpy pads it.
std::string npy_file(std::string_view dict, std::string_view data, int major = 1) {
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  std::string header(dict);
  while ((8 + length_bytes + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY"s;
  out += static_cast<char>(major);
  out += '\0';
  for (std::size_t i = 0; i < length_bytes; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(data);
}

const std::string_view kTwoDoubles = "\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x00\x00\x00\x00\x00\x04\xc0"sv;  // 1.0, -2.5

TEST(NpyRead, Versions2And3) {
  ScratchDir dir;
  for (int major : {2, 3}) {
    write_bytes(dir / "v.npy", npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", kTwoDoubles, major));
    const NpyArray read = io::read_npy(dir / "v.npy");
    EXPECT_EQ(values_of<double>(read), (std::vector<double>{1.0, -2.5})) << "version " << major << ".0";
  }
}

TEST(NpyRead, BigEndianIsByteSwapped) {
  ScratchDir dir;
  // >f8 1.0, -2.5 and >c8 (1.0 + 2.0j)
  write_bytes(dir / "be.npy", npy_file("{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }",
                                       "\x3f\xf0\x00\x00\x00\x00\x00\x00\xc0\x04\x00\x00\x00\x00\x00\x00"sv));
  EXPECT_EQ(values_of<double>(io::read_npy(dir / "be.npy")), (std::vector<double>{1.0, -2.5}));
  write_bytes(dir / "bec.npy", npy_file("{'descr': '>c8', 'fortran_order': False, 'shape': (1,), }",
                                        "\x3f\x80\x00\x00\x40\x00\x00\x00"sv));
  const NpyArray c = io::read_npy(dir / "bec.npy");
  EXPECT_EQ(c.dtype, NpyDtype::complex64);
  EXPECT_EQ(values_of<std::complex<float>>(c), (std::vector<std::complex<float>>{{1.0f, 2.0f}}));
  // >i4 1, -2
  write_bytes(dir / "bei.npy", npy_file("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }",
                                        "\x00\x00\x00\x01\xff\xff\xff\xfe"sv));
  const NpyArray i = io::read_npy(dir / "bei.npy");
  EXPECT_EQ(i.dtype, NpyDtype::int32);
  EXPECT_EQ(values_of<std::int32_t>(i), (std::vector<std::int32_t>{1, -2}));
}

TEST(NpyRead, NativeAndNotApplicableByteOrderMarks) {
  ScratchDir dir;
  for (std::string_view descr : {"=f8", "|f8", "f8"}) {
    write_bytes(dir / "n.npy", npy_file("{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (2,), }",
                                        kTwoDoubles));
    EXPECT_EQ(values_of<double>(io::read_npy(dir / "n.npy")), (std::vector<double>{1.0, -2.5})) << descr;
  }
  for (std::string_view descr : {"=i4", "|i4", "i4"}) {
    write_bytes(dir / "n.npy", npy_file("{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (2,), }",
                                        "\x01\x00\x00\x00\xfe\xff\xff\xff"sv));
    EXPECT_EQ(values_of<std::int32_t>(io::read_npy(dir / "n.npy")), (std::vector<std::int32_t>{1, -2})) << descr;
  }
}

TEST(NpyRead, PythonLiteralSpellings) {
  // Key order, quotes, whitespace, trailing commas and Python 2's long suffix all vary between
  // writers; a Python dict literal allows them all.
  ScratchDir dir;
  for (std::string_view dict : {
           "{\"shape\": (2,), \"fortran_order\": False, \"descr\": \"<f8\"}",
           "{ 'descr' : '<f8' ,\n 'fortran_order' : False ,\t'shape' : ( 2 , ) }",
           "{'descr': '<f8', 'fortran_order': False, 'shape': (2L,)}",
           "{'fortran_order': False, 'shape': (1, 2), 'descr': '<f8', }",
       }) {
    write_bytes(dir / "p.npy", npy_file(dict, kTwoDoubles));
    const NpyArray read = io::read_npy(dir / "p.npy");
    EXPECT_EQ(values_of<double>(read), (std::vector<double>{1.0, -2.5})) << dict;
  }
}

// ---- writer errors -----------------------------------------------------------------------------

TEST(NpyWrite, DataThatDoesNotFitTheShapeIsRefused) {
  ScratchDir dir;
  const auto file = dir / "bad.npy";
  try {
    io::write_npy(file, make_array(std::vector<double>{1.0, 2.0, 3.0}, {2, 2}));
    FAIL() << "expected NpyError";
  } catch (const NpyError& e) {
    EXPECT_EQ(e.kind(), NpyError::Kind::argument);
    EXPECT_TRUE(std::string(e.what()).starts_with(file.string() + ": ")) << e.what();
    EXPECT_NE(std::string(e.what()).find("32 bytes"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST(NpyWrite, UnwritablePathIsAnIoError) {
  ScratchDir dir;
  const auto file = dir / "no-such-dir" / "x.npy";
  try {
    io::write_npy(file, make_array(std::vector<double>{1.0}, {1}));
    FAIL() << "expected NpyError";
  } catch (const NpyError& e) {
    EXPECT_EQ(e.kind(), NpyError::Kind::io);
    EXPECT_TRUE(std::string(e.what()).starts_with(file.string() + ": cannot create")) << e.what();
  }
}

}  // namespace
}  // namespace covflow::test

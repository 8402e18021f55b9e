// The .npz reader and writer: round trips, archives exactly as numpy writes them, the ZIP64
// records (with a lowered threshold, so that no test writes gigabytes), and damaged archives, each
// of which costs one NpyError naming the archive (and the member), never a crash or an allocation
// the file cannot back.
#include <gtest/gtest.h>
#include <zlib.h>

#include <complex>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "covflow/io/npy.hpp"
#include "covflow/io/npz.hpp"
#include "npy_test_support.hpp"
#include "test_support.hpp"

namespace covflow::test {
namespace {

using namespace std::string_literals;
using io::NpyArray;
using io::NpyDtype;
using io::NpyError;
using io::NpzMember;
using Kind = NpyError::Kind;
using Shape = std::vector<std::uint64_t>;

// ---- byte helpers ------------------------------------------------------------------------------

std::string from_hex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  return out;
}

std::uint64_t get_le(const std::string& bytes, std::size_t at, int width) {
  std::uint64_t value = 0;
  for (int i = 0; i < width; ++i) value |= std::uint64_t(static_cast<unsigned char>(bytes.at(at + i))) << (8 * i);
  return value;
}
void set_le(std::string& bytes, std::size_t at, int width, std::uint64_t value) {
  for (int i = 0; i < width; ++i) bytes.at(at + i) = static_cast<char>((value >> (8 * i)) & 0xff);
}
void put_le(std::string& out, int width, std::uint64_t value) {
  for (int i = 0; i < width; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

// The archive's end record (no comment), its central directory offset and the central header of
// member `index`.
std::size_t end_record(const std::string& zip) { return zip.size() - 22; }
std::size_t central_header(const std::string& zip, std::size_t index) {
  std::size_t at = get_le(zip, end_record(zip) + 16, 4);
  for (std::size_t i = 0; i < index; ++i) at += 46 + get_le(zip, at + 28, 2) + get_le(zip, at + 30, 2) + get_le(zip, at + 32, 2);
  return at;
}

std::string npy_bytes(const NpyArray& array) {
  return io::npy_header(array.dtype, array.shape, array.fortran_order) +
         std::string(reinterpret_cast<const char*>(array.bytes.data()), array.bytes.size());
}

std::string raw_deflate(const std::string& data) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&stream, data.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

std::uint32_t crc_of(const std::string& data) {
  return static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
}

// A ZIP archive built field by field from APPNOTE.TXT, independently of npz.cpp's writer, in the
// variants other writers produce.
struct RawMember {
  std::string file_name;
  std::string data;            // the member's uncompressed bytes
  bool deflate = false;
  bool local_zip64 = false;    // local header: sizes 0xFFFFFFFF and both in a ZIP64 extra field
  bool descriptor = false;     // flag bit 3: zero CRC and sizes in the local header, a data descriptor after the data
  bool central_zip64 = false;  // central header: sizes and offset 0xFFFFFFFF, all three in a ZIP64 extra field
  std::uint16_t method_override = 0xFFFF;
  std::uint16_t flags = 0;
};

std::string build_zip(const std::vector<RawMember>& members, bool zip64_end = false) {
  std::string out, central;
  for (const RawMember& m : members) {
    const std::string stored = m.deflate ? raw_deflate(m.data) : m.data;
    const std::uint32_t crc = crc_of(m.data);
    const std::uint16_t method = m.method_override != 0xFFFF ? m.method_override : (m.deflate ? 8 : 0);
    const std::uint16_t flags = static_cast<std::uint16_t>(m.flags | (m.descriptor ? 8 : 0));
    const std::uint64_t offset = out.size();
    put_le(out, 4, 0x04034b50);
    put_le(out, 2, m.local_zip64 ? 45 : 20);
    put_le(out, 2, flags);
    put_le(out, 2, method);
    put_le(out, 2, 0x6000);  // 12:00
    put_le(out, 2, 0x5a21);  // 2025-01-01
    put_le(out, 4, m.descriptor ? 0 : crc);
    put_le(out, 4, m.descriptor ? 0 : (m.local_zip64 ? 0xFFFFFFFF : stored.size()));
    put_le(out, 4, m.descriptor ? 0 : (m.local_zip64 ? 0xFFFFFFFF : m.data.size()));
    put_le(out, 2, m.file_name.size());
    put_le(out, 2, m.local_zip64 ? 20 : 0);
    out += m.file_name;
    if (m.local_zip64) {
      put_le(out, 2, 1);
      put_le(out, 2, 16);
      put_le(out, 8, m.data.size());
      put_le(out, 8, stored.size());
    }
    out += stored;
    if (m.descriptor) {
      put_le(out, 4, 0x08074b50);
      put_le(out, 4, crc);
      put_le(out, 4, stored.size());
      put_le(out, 4, m.data.size());
    }
    put_le(central, 4, 0x02014b50);
    put_le(central, 2, 0x031e);
    put_le(central, 2, m.central_zip64 ? 45 : 20);
    put_le(central, 2, flags);
    put_le(central, 2, method);
    put_le(central, 2, 0x6000);
    put_le(central, 2, 0x5a21);
    put_le(central, 4, crc);
    put_le(central, 4, m.central_zip64 ? 0xFFFFFFFF : stored.size());
    put_le(central, 4, m.central_zip64 ? 0xFFFFFFFF : m.data.size());
    put_le(central, 2, m.file_name.size());
    put_le(central, 2, m.central_zip64 ? 28 : 0);
    put_le(central, 2, 0);
    put_le(central, 2, 0);
    put_le(central, 2, 0);
    put_le(central, 4, 0x81a40000);
    put_le(central, 4, m.central_zip64 ? 0xFFFFFFFF : offset);
    central += m.file_name;
    if (m.central_zip64) {
      put_le(central, 2, 1);
      put_le(central, 2, 24);
      put_le(central, 8, m.data.size());
      put_le(central, 8, stored.size());
      put_le(central, 8, offset);
    }
  }
  const std::uint64_t cd_offset = out.size();
  out += central;
  if (zip64_end) {
    const std::uint64_t record = out.size();
    put_le(out, 4, 0x06064b50);
    put_le(out, 8, 44);
    put_le(out, 2, 0x032d);
    put_le(out, 2, 45);
    put_le(out, 4, 0);
    put_le(out, 4, 0);
    put_le(out, 8, members.size());
    put_le(out, 8, members.size());
    put_le(out, 8, central.size());
    put_le(out, 8, cd_offset);
    put_le(out, 4, 0x07064b50);
    put_le(out, 4, 0);
    put_le(out, 8, record);
    put_le(out, 4, 1);
  }
  put_le(out, 4, 0x06054b50);
  put_le(out, 2, 0);
  put_le(out, 2, 0);
  put_le(out, 2, zip64_end ? 0xFFFF : members.size());
  put_le(out, 2, zip64_end ? 0xFFFF : members.size());
  put_le(out, 4, zip64_end ? 0xFFFFFFFF : central.size());
  put_le(out, 4, zip64_end ? 0xFFFFFFFF : cd_offset);
  put_le(out, 2, 0);
  return out;
}

// read_npz's error for `bytes` as an archive: its kind and message (which must start with the path).
struct Refusal {
  Kind kind = Kind::io;
  std::string message;
  bool thrown = false;
};

Refusal refusal_of(const ScratchDir& dir, const std::string& bytes, const std::string& name = "bad.npz") {
  const auto file = dir / name;
  write_bytes(file, bytes);
  Refusal r;
  try {
    io::read_npz(file);
  } catch (const NpyError& e) {
    r = {e.kind(), e.what(), true};
    EXPECT_TRUE(r.message.starts_with(file.string() + ": ")) << r.message;
  }
  return r;
}

// ---- round trips -------------------------------------------------------------------------------

template <class T>
NpyArray random_array(const Shape& shape, bool fortran, std::mt19937_64& rng) {
  std::uint64_t count = 1;
  for (auto d : shape) count *= d;
  if constexpr (std::is_same_v<T, std::int32_t>) {
    std::vector<std::int32_t> values(count);
    std::uniform_int_distribution<std::int32_t> draw(-1000000, 1000000);
    for (auto& v : values) v = draw(rng);
    return make_array(values, shape, fortran);
  } else {
    return make_array(random_normal<T>(count, rng), shape, fortran);
  }
}

std::vector<NpzMember> every_kind_of_member(std::mt19937_64& rng) {
  return {
      {"f32", random_array<float>({3, 4}, false, rng)},
      {"f64", random_array<double>({2, 3, 4}, true, rng)},
      {"c64", random_array<std::complex<float>>({5}, false, rng)},
      {"c128", random_array<std::complex<double>>({4, 4}, true, rng)},
      {"ranks", random_array<std::int32_t>({2, 6}, false, rng)},
      {"n", random_array<std::int32_t>({}, false, rng)},
      {"empty", random_array<double>({0, 3}, false, rng)},
      {"empty_int", random_array<std::int32_t>({4, 0}, true, rng)},
      {"scalar", random_array<std::complex<double>>({}, false, rng)},
  };
}

void expect_same(const std::vector<NpzMember>& read, const std::vector<NpzMember>& written) {
  ASSERT_EQ(read.size(), written.size());
  for (std::size_t i = 0; i < read.size(); ++i) {
    SCOPED_TRACE(written[i].name);
    EXPECT_EQ(read[i].name, written[i].name);
    EXPECT_EQ(read[i].array.dtype, written[i].array.dtype);
    EXPECT_EQ(read[i].array.shape, written[i].array.shape);
    EXPECT_EQ(read[i].array.fortran_order, written[i].array.fortran_order);
    EXPECT_EQ(read[i].array.bytes, written[i].array.bytes);
  }
}

TEST(NpzRoundTrip, EveryDtypeShapeAndOrderReadsBackAsWritten) {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("NpzRoundTrip"));
  const std::vector<NpzMember> members = every_kind_of_member(rng);
  io::write_npz(dir / "all.npz", members);
  expect_same(io::read_npz(dir / "all.npz"), members);
  ASSERT_NE(io::find_member(members, "ranks"), nullptr);
  EXPECT_EQ(io::find_member(members, "ranks")->name, "ranks");
  EXPECT_EQ(io::find_member(members, "ranks.npy"), nullptr);
  EXPECT_TRUE(io::looks_like_zip(dir / "all.npz"));

  // No members at all: an archive of just its end record, as numpy.savez writes for no arrays.
  io::write_npz(dir / "none.npz", std::vector<NpzMember>{});
  EXPECT_EQ(read_bytes(dir / "none.npz"), "PK\x05\x06"s + std::string(18, '\0'));
  EXPECT_TRUE(io::read_npz(dir / "none.npz").empty());
  EXPECT_TRUE(io::looks_like_zip(dir / "none.npz"));
}

// Each member is a stored NPY file exactly as write_npy writes it, with the CRC zlib computes.
TEST(NpzLayout, MembersAreStoredNpyFiles) {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("NpzLayout"));
  const std::vector<NpzMember> members = every_kind_of_member(rng);
  io::write_npz(dir / "a.npz", members);
  const std::string zip = read_bytes(dir / "a.npz");
  for (std::size_t i = 0; i < members.size(); ++i) {
    SCOPED_TRACE(members[i].name);
    const std::size_t c = central_header(zip, i);
    ASSERT_EQ(get_le(zip, c, 4), 0x02014b50u);
    const std::string expected = npy_bytes(members[i].array);
    EXPECT_EQ(get_le(zip, c + 10, 2), 0u) << "stored";
    EXPECT_EQ(get_le(zip, c + 16, 4), crc_of(expected));
    EXPECT_EQ(get_le(zip, c + 20, 4), expected.size());
    EXPECT_EQ(get_le(zip, c + 24, 4), expected.size());
    EXPECT_EQ(zip.substr(c + 46, get_le(zip, c + 28, 2)), members[i].name + ".npy");
    const std::size_t local = get_le(zip, c + 42, 4);
    ASSERT_EQ(get_le(zip, local, 4), 0x04034b50u);
    const std::size_t data = local + 30 + get_le(zip, local + 26, 2) + get_le(zip, local + 28, 2);
    EXPECT_EQ(zip.substr(data, expected.size()), expected);
  }
  EXPECT_EQ(get_le(zip, end_record(zip), 4), 0x06054b50u);
  EXPECT_EQ(get_le(zip, end_record(zip) + 10, 2), members.size());
}

// ---- archives as numpy writes them -------------------------------------------------------------

// Written by numpy 1.24 (Python 3.11's zipfile):
//   numpy.savez(f, a=numpy.array([[1., 2.], [3., 4.]]), ranks=numpy.arange(3, dtype=numpy.int32),
//               z=numpy.array([1 + 2j], dtype=numpy.complex64))
// and the same through numpy.savez_compressed. Their local headers carry a ZIP64 extra field
// (zipfile's force_zip64=True); the compressed one's members are deflated.
// 784 bytes
const char* const kNumpySavez =
    "504b03041400000000000000210021358b69a0000000a000000005001400612e6e707901001000a000000000000000a0"
    "00000000000000934e554d5059010076007b276465736372273a20273c6638272c2027666f727472616e5f6f72646572"
    "273a2046616c73652c20277368617065273a2028322c2032292c207d2020202020202020202020202020202020202020"
    "20202020202020202020202020202020202020202020202020202020202020202020202020200a000000000000f03f00"
    "0000000000004000000000000008400000000000001040504b03041400000000000000210002ecbda98c0000008c0000"
    "000900140072616e6b732e6e7079010010008c000000000000008c00000000000000934e554d5059010076007b276465"
    "736372273a20273c6934272c2027666f727472616e5f6f72646572273a2046616c73652c20277368617065273a202833"
    "2c292c207d20202020202020202020202020202020202020202020202020202020202020202020202020202020202020"
    "20202020202020202020202020202020200a000000000100000002000000504b030414000000000000002100ade17663"
    "8800000088000000050014007a2e6e70790100100088000000000000008800000000000000934e554d5059010076007b"
    "276465736372273a20273c6338272c2027666f727472616e5f6f72646572273a2046616c73652c20277368617065273a"
    "2028312c292c207d20202020202020202020202020202020202020202020202020202020202020202020202020202020"
    "20202020202020202020202020202020202020200a0000803f00000040504b010214031400000000000000210021358b"
    "69a0000000a0000000050000000000000000000000800100000000612e6e7079504b0102140314000000000000002100"
    "02ecbda98c0000008c0000000900000000000000000000008001d700000072616e6b732e6e7079504b01021403140000"
    "00000000002100ade17663880000008800000005000000000000000000000080019e0100007a2e6e7079504b05060000"
    "0000030003009d0000005d0200000000"
    ;
// 585 bytes
const char* const kNumpySavezCompressed =
    "504b03041400000008000000210021358b6955000000a000000005001400612e6e707901001000a00000000000000055"
    "000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9366a1aea3a09e965f54529498179f5f94920a"
    "12774bcc294e058a17672416a402f91a463a0a469a3a0ab50a64032e0630f8600fa1191c2014079416700000504b0304"
    "1400000008000000210002ecbda94c0000008c0000000900140072616e6b732e6e7079010010008c000000000000004c"
    "000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9369a2aea3a09e965f54529498179f5f94920a"
    "12774bcc294e058a17672416a402f91ac63a9a3a0ab50a14002e062060046226200600504b0304140000000800000021"
    "00ade176634c00000088000000050014007a2e6e70790100100088000000000000004c000000000000009bec17ea1b10"
    "c9c850c650ad9e925a9c5ca46ea5a06e936ca1aea3a09e965f54529498179f5f94920a12774bcc294e058a17672416a4"
    "02f91a863a9a3a0ab50a14002e0686067b0606060700504b010214031400000008000000210021358b6955000000a000"
    "0000050000000000000000000000800100000000612e6e7079504b010214031400000008000000210002ecbda94c0000"
    "008c00000009000000000000000000000080018c00000072616e6b732e6e7079504b0102140314000000080000002100"
    "ade176634c000000880000000500000000000000000000008001130100007a2e6e7079504b050600000000030003009d"
    "000000960100000000"
    ;

void expect_numpy_fixture(const std::vector<NpzMember>& members) {
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].name, "a");
  EXPECT_EQ(members[0].array.dtype, NpyDtype::float64);
  EXPECT_EQ(members[0].array.shape, (Shape{2, 2}));
  EXPECT_EQ(values_of<double>(members[0].array), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(members[1].name, "ranks");
  EXPECT_EQ(members[1].array.dtype, NpyDtype::int32);
  EXPECT_EQ(members[1].array.shape, (Shape{3}));
  EXPECT_EQ(values_of<std::int32_t>(members[1].array), (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(members[2].name, "z");
  EXPECT_EQ(members[2].array.dtype, NpyDtype::complex64);
  EXPECT_EQ(values_of<std::complex<float>>(members[2].array), (std::vector<std::complex<float>>{{1, 2}}));
}

TEST(NpzNumpy, SavezAndSavezCompressedRead) {
  ScratchDir dir;
  write_bytes(dir / "s.npz", from_hex(kNumpySavez));
  write_bytes(dir / "c.npz", from_hex(kNumpySavezCompressed));
  expect_numpy_fixture(io::read_npz(dir / "s.npz"));
  expect_numpy_fixture(io::read_npz(dir / "c.npz"));
}

// What other writers do: 0xFFFFFFFF sizes in the local header with a ZIP64 extra (numpy.savez on
// a stream zipfile cannot seek back in), data descriptors, ZIP64 central headers and end records.
TEST(NpzNumpy, LocalHeaderAndDirectoryVariantsRead) {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("NpzVariants"));
  const NpyArray a = random_array<std::complex<double>>({3, 5}, false, rng);
  const NpyArray b = random_array<std::int32_t>({7}, true, rng);
  for (int variant = 0; variant < 16; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    RawMember ma{"a.npy", npy_bytes(a)}, mb{"b.npy", npy_bytes(b)};
    for (RawMember* m : {&ma, &mb}) {
      m->deflate = variant & 1;
      m->local_zip64 = variant & 2;
      m->descriptor = variant & 4;
    }
    mb.central_zip64 = variant & 8;
    write_bytes(dir / "v.npz", build_zip({ma, mb}, variant & 8));
    expect_same(io::read_npz(dir / "v.npz"), {{"a", a}, {"b", b}});
  }
}

// ---- ZIP64 records -----------------------------------------------------------------------------

// With the threshold lowered, a small archive takes the path a multi-gigabyte one takes: ZIP64
// extra fields in the local and central headers for the members past it, the ZIP64 end record and
// its locator; read_npz reads it back (numpy.load and Python's zipfile read it too).
TEST(NpzZip64, LoweredThresholdWritesZip64Records) {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("NpzZip64"));
  const std::vector<NpzMember> members = every_kind_of_member(rng);
  for (std::uint64_t threshold : {std::uint64_t(0), std::uint64_t(300), std::uint64_t(1000)}) {
    SCOPED_TRACE("threshold " + std::to_string(threshold));
    io::write_npz(dir / "z.npz", members, {threshold});
    const std::string zip = read_bytes(dir / "z.npz");
    expect_same(io::read_npz(dir / "z.npz"), members);

    const std::size_t end = end_record(zip);
    ASSERT_EQ(get_le(zip, end, 4), 0x06054b50u);
    ASSERT_GE(end, 76u);
    const std::size_t locator = end - 20;
    ASSERT_EQ(get_le(zip, locator, 4), 0x07064b50u) << "the ZIP64 locator precedes the end record";
    const std::size_t record = get_le(zip, locator + 8, 8);
    ASSERT_EQ(record, locator - 56);
    ASSERT_EQ(get_le(zip, record, 4), 0x06064b50u);
    EXPECT_EQ(get_le(zip, record + 4, 8), 44u);
    EXPECT_EQ(get_le(zip, record + 32, 8), members.size());
    const std::uint64_t cd_offset = get_le(zip, record + 48, 8), cd_size = get_le(zip, record + 40, 8);
    EXPECT_EQ(cd_offset + cd_size, record);
    EXPECT_EQ(get_le(zip, end + 16, 4), cd_offset >= threshold ? 0xFFFFFFFFu : cd_offset);

    std::size_t c = cd_offset;
    for (const NpzMember& m : members) {
      SCOPED_TRACE(m.name);
      const std::uint64_t size = npy_bytes(m.array).size();
      const std::uint64_t offset = get_le(zip, c + 42, 4) == 0xFFFFFFFF ? 0 : get_le(zip, c + 42, 4);
      const bool big_size = size >= threshold;
      const std::size_t name_length = get_le(zip, c + 28, 2), extra_length = get_le(zip, c + 30, 2);
      EXPECT_EQ(get_le(zip, c + 24, 4), big_size ? 0xFFFFFFFFu : size);
      EXPECT_EQ(get_le(zip, c + 20, 4), big_size ? 0xFFFFFFFFu : size);
      std::uint64_t local = offset;
      if (extra_length > 0) {
        const std::size_t x = c + 46 + name_length;
        EXPECT_EQ(get_le(zip, x, 2), 1u);
        std::size_t at = x + 4;
        if (big_size) {
          EXPECT_EQ(get_le(zip, at, 8), size);
          EXPECT_EQ(get_le(zip, at + 8, 8), size);
          at += 16;
        }
        if (get_le(zip, c + 42, 4) == 0xFFFFFFFF) local = get_le(zip, at, 8);
        EXPECT_EQ(get_le(zip, x + 2, 2), at + (get_le(zip, c + 42, 4) == 0xFFFFFFFF ? 8 : 0) - x - 4);
      } else {
        EXPECT_FALSE(big_size);
      }
      EXPECT_EQ(get_le(zip, c + 42, 4) == 0xFFFFFFFF, local >= threshold);
      ASSERT_EQ(get_le(zip, local, 4), 0x04034b50u);
      EXPECT_EQ(get_le(zip, local + 4, 2), big_size ? 45u : 20u);
      EXPECT_EQ(get_le(zip, local + 18, 4), big_size ? 0xFFFFFFFFu : size);
      EXPECT_EQ(get_le(zip, local + 28, 2), big_size ? 20u : 0u);
      if (big_size) {
        EXPECT_EQ(get_le(zip, local + 30 + name_length + 4, 8), size);
      }
      c += 46 + name_length + extra_length;
    }
  }
}

// ---- writer errors -----------------------------------------------------------------------------

TEST(NpzWrite, BadMembersAndPathsLeaveNothingBehind) {
  ScratchDir dir;
  const auto file = dir / "keep.npz";
  const std::vector<NpzMember> good = {{"x", make_array(std::vector<double>{1, 2}, {2})}};
  io::write_npz(file, good);
  const std::string before = read_bytes(file);
  const std::vector<std::pair<std::vector<NpzMember>, std::string>> bad = {
      {{{"x", make_array(std::vector<double>{1, 2, 3}, {2, 2})}}, "does not match its 24 bytes"},
      {{{"", make_array(std::vector<double>{1}, {1})}}, "empty name"},
      {{{"x", make_array(std::vector<double>{1}, {1})}, {"x", make_array(std::vector<double>{1}, {1})}}, "two members named 'x'"},
  };
  for (const auto& [members, says] : bad) {
    try {
      io::write_npz(file, members);
      ADD_FAILURE() << "expected NpyError: " << says;
    } catch (const NpyError& e) {
      EXPECT_EQ(e.kind(), Kind::argument);
      EXPECT_TRUE(std::string(e.what()).starts_with(file.string() + ": ")) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    EXPECT_EQ(read_bytes(file), before) << "the archive that was there is untouched";
  }
  try {
    io::write_npz(dir / "no-such-dir" / "x.npz", good);
    ADD_FAILURE() << "expected NpyError";
  } catch (const NpyError& e) {
    EXPECT_EQ(e.kind(), Kind::io);
    EXPECT_NE(std::string(e.what()).find("cannot create"), std::string::npos) << e.what();
  }
  // Only the archive: no temporary left beside it.
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1u);
}

// ---- damaged archives --------------------------------------------------------------------------

TEST(NpzDamage, EveryTruncationIsRefused) {
  ScratchDir dir;
  for (const char* hex : {kNumpySavez, kNumpySavezCompressed}) {
    const std::string zip = from_hex(hex);
    for (std::size_t length = 0; length < zip.size(); ++length) {
      const Refusal r = refusal_of(dir, zip.substr(0, length));
      EXPECT_TRUE(r.thrown) << "a prefix of " << length << " bytes was read";
      EXPECT_EQ(r.kind, Kind::damaged) << r.message;
    }
  }
  EXPECT_NE(refusal_of(dir, "").message.find("empty file"), std::string::npos);
  EXPECT_NE(refusal_of(dir, from_hex(kNumpySavez).substr(0, 500)).message.find("no end-of-central-directory record"),
            std::string::npos);
}

TEST(NpzDamage, EachClassHasItsMessage) {
  ScratchDir dir;
  const std::string stored = from_hex(kNumpySavez), deflated = from_hex(kNumpySavezCompressed);
  struct Case {
    const char* name;
    std::string bytes;
    Kind kind;
    std::vector<std::string> says;
  };
  std::vector<Case> cases;
  auto edit = [](std::string zip, auto&& change) {
    change(zip);
    return zip;
  };
  const std::size_t a_data = 30 + 5 + 20 + 128;  // a.npy's local header, name, ZIP64 extra, NPY header
  cases.push_back({"bad_crc", edit(stored, [&](std::string& z) { z[a_data + 3] ^= 0x40; }), Kind::damaged,
                   {"a.npy: CRC-32 mismatch"}});
  cases.push_back({"bad_crc_deflated",
                   edit(deflated, [&](std::string& z) { set_le(z, central_header(z, 1) + 16, 4, 0x12345678); }),
                   Kind::damaged, {"ranks.npy: CRC-32 mismatch", "0x12345678"}});
  cases.push_back({"corrupt_deflate", edit(deflated, [&](std::string& z) {
                     for (std::size_t i = 0; i < 8; ++i) z[55 + i] = '\xff';
                   }), Kind::damaged, {"a.npy: "}});
  cases.push_back({"directory_offset", edit(stored, [&](std::string& z) { set_le(z, end_record(z) + 16, 4, 100); }),
                   Kind::damaged, {"is not a central directory header"}});
  cases.push_back({"directory_past_end",
                   edit(stored, [&](std::string& z) { set_le(z, end_record(z) + 16, 4, 0x7FFFFFF0); }), Kind::damaged,
                   {"central directory at offset 2147483632"}});
  cases.push_back({"too_many_entries", edit(stored, [&](std::string& z) {
                     set_le(z, end_record(z) + 8, 2, 60000);
                     set_le(z, end_record(z) + 10, 2, 60000);
                   }), Kind::damaged, {"counts 60000 members"}});
  cases.push_back({"local_offset", edit(stored, [&](std::string& z) { set_le(z, central_header(z, 1) + 42, 4, 1); }),
                   Kind::damaged, {"ranks.npy: no local file header at offset 1"}});
  cases.push_back({"local_offset_past_directory",
                   edit(stored, [&](std::string& z) { set_le(z, central_header(z, 2) + 42, 4, 0x10000000); }),
                   Kind::damaged, {"z.npy: the central directory puts its local header at offset 268435456"}});
  cases.push_back({"sizes_past_directory", edit(stored, [&](std::string& z) {
                     set_le(z, central_header(z, 0) + 20, 4, 0x7FFFFFFF);
                     set_le(z, central_header(z, 0) + 24, 4, 0x7FFFFFFF);
                   }), Kind::damaged, {"a.npy: 2147483647 bytes of data", "run past the central directory"}});
  cases.push_back({"all_ones_without_zip64",
                   edit(stored, [&](std::string& z) { set_le(z, central_header(z, 0) + 24, 4, 0xFFFFFFFF); }),
                   Kind::damaged, {"a.npy: a size or offset of 0xFFFFFFFF with no ZIP64 extra field"}});
  cases.push_back({"stored_size_mismatch",
                   edit(stored, [&](std::string& z) { set_le(z, central_header(z, 0) + 24, 4, 150); }), Kind::damaged,
                   {"a.npy: a stored member whose compressed size"}});
  cases.push_back({"inflated_size_too_large",
                   edit(deflated, [&](std::string& z) { set_le(z, central_header(z, 0) + 24, 4, 0x7FFFFFFF); }),
                   Kind::damaged, {"a.npy: the central directory says 2147483647 bytes inflated from", "1032:1"}});
  cases.push_back({"inflated_size_short",
                   edit(deflated, [&](std::string& z) { set_le(z, central_header(z, 0) + 24, 4, 150); }),
                   Kind::damaged, {"a.npy: "}});
  cases.push_back({"inflated_size_long",
                   edit(deflated, [&](std::string& z) { set_le(z, central_header(z, 0) + 24, 4, 170); }),
                   Kind::damaged, {"a.npy: "}});
  cases.push_back({"bad_npy_in_member", edit(stored, [&](std::string& z) { z[55 + 1] = 'X'; }), Kind::damaged,
                   {"a.npy: not an NPY file: bad magic"}});
  cases.push_back({"npy_not_npz", io::npy_header(NpyDtype::float64, Shape{0}, false), Kind::damaged,
                   {"not an .npz archive: this is an NPY file"}});
  cases.push_back({"gif", "GIF89a" + std::string(100, 'x'), Kind::damaged, {"not an .npz archive", "47 49 46 38"}});
  {
    // Sizes a ZIP64 field makes absurd: 2^62 bytes must cost an error, not an allocation.
    const NpyArray small = make_array(std::vector<double>{1, 2}, {2});
    RawMember m{"big.npy", npy_bytes(small)};
    m.central_zip64 = true;
    std::string zip = build_zip({m}, true);
    const std::size_t c = get_le(zip, end_record(zip) - 20 - 56 + 48, 8);
    set_le(zip, c + 46 + 7 + 4, 8, std::uint64_t(1) << 62);
    set_le(zip, c + 46 + 7 + 12, 8, std::uint64_t(1) << 62);
    cases.push_back({"zip64_absurd_size", zip, Kind::damaged, {"big.npy: 4611686018427387904 bytes of data"}});
    std::string short_extra = build_zip({m}, true);
    set_le(short_extra, c + 46 + 7 + 2, 2, 16);  // holds two of the three fields the header defers
    cases.push_back({"zip64_extra_too_short", short_extra, Kind::damaged, {"big.npy: the ZIP64 extra field is too short"}});
    std::string bad_locator = build_zip({m}, true);
    set_le(bad_locator, end_record(bad_locator) - 20 + 8, 8, 0x7FFFFFFFFFFF);
    cases.push_back({"zip64_locator", bad_locator, Kind::damaged, {"the ZIP64 locator puts the ZIP64 end record at offset"}});
  }
  {
    const std::string data = npy_bytes(make_array(std::vector<double>{1}, {1}));
    RawMember encrypted{"e.npy", data};
    encrypted.flags = 1;
    cases.push_back({"encrypted", build_zip({encrypted}), Kind::unsupported, {"e.npy: an encrypted member"}});
    RawMember bzip2{"b.npy", data};
    bzip2.method_override = 12;
    cases.push_back({"bzip2", build_zip({bzip2}), Kind::unsupported, {"b.npy: compression method 12 (bzip2)"}});
    cases.push_back({"not_npy", build_zip({RawMember{"notes.txt", "hello"}}), Kind::unsupported,
                     {"notes.txt: not an array"}});
    cases.push_back({"duplicate", build_zip({RawMember{"d.npy", data}, RawMember{"d.npy", data}}), Kind::damaged,
                     {"d.npy: the archive holds two members of this name"}});
    cases.push_back({"int64_member", build_zip({RawMember{"i.npy", [&] {
                                                   std::string d = data;
                                                   d.replace(d.find("<f8"), 3, "<i8");
                                                   return d;
                                                 }()}}),
                     Kind::unsupported, {"i.npy: unsupported dtype '<i8' (int64)"}});
    std::string split = build_zip({RawMember{"s.npy", data}});
    set_le(split, end_record(split) + 4, 2, 1);
    cases.push_back({"multi_disk", split, Kind::unsupported, {"multi-disk"}});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Refusal r = refusal_of(dir, c.bytes);
    ASSERT_TRUE(r.thrown);
    EXPECT_EQ(r.kind, c.kind) << r.message;
    for (const std::string& phrase : c.says) EXPECT_NE(r.message.find(phrase), std::string::npos) << r.message;
  }
}

// Any one byte changed: the archive reads (a timestamp, a padding space) or is refused with an
// NpyError; nothing else escapes.
TEST(NpzDamage, EveryChangedByteIsReadOrRefused) {
  ScratchDir dir;
  const auto file = dir / "x.npz";
  for (const char* hex : {kNumpySavez, kNumpySavezCompressed}) {
    const std::string zip = from_hex(hex);
    for (std::size_t i = 0; i < zip.size(); ++i) {
      for (unsigned char flip : {0x01, 0xff}) {
        std::string damaged = zip;
        damaged[i] = static_cast<char>(damaged[i] ^ flip);
        write_bytes(file, damaged);
        try {
          io::read_npz(file);
        } catch (const NpyError& e) {
          EXPECT_TRUE(std::string(e.what()).starts_with(file.string() + ": ")) << e.what();
        } catch (const std::exception& e) {
          ADD_FAILURE() << "byte " << i << " ^ " << int(flip) << ": " << e.what();
        }
      }
    }
  }
}

TEST(NpzDamage, MissingFilesAndDirectoriesAreIoErrors) {
  ScratchDir dir;
  for (const auto& path : {dir / "absent.npz", dir.path()}) {
    try {
      io::read_npz(path);
      ADD_FAILURE() << "expected NpyError";
    } catch (const NpyError& e) {
      EXPECT_EQ(e.kind(), Kind::io) << e.what();
    }
  }
  EXPECT_FALSE(io::looks_like_zip(dir / "absent.npz"));
  io::write_npy(dir / "a.npy", make_array(std::vector<double>{1}, {1}));
  EXPECT_FALSE(io::looks_like_zip(dir / "a.npy"));
}

}  // namespace
}  // namespace covflow::test

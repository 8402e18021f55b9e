// The byte layout: the CRC's check value and its agreement with zlib, fixed offsets, and the
// worked example in docs/frame-format.md, which is parsed from the document so the two cannot
// drift apart.
#include <gtest/gtest.h>

#include <fstream>
#include <iomanip>
#include <sstream>

#include <zlib.h>
#if COVFLOW_HAS_ISAL
#include <isa-l/crc.h>
#endif

#include "covflow/replay/format.hpp"
#include "covflow/replay/payload_mover.hpp"
#include "covflow/replay/reader.hpp"
#include "replay_test_support.hpp"
#include "test_support.hpp"

namespace covflow::replay {
namespace {

std::span<const std::byte> as_bytes(std::string_view text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

TEST(ReplayFormat, Crc32IsZlibsCrc) {
  EXPECT_EQ(format::crc32(as_bytes("123456789")), 0xCBF43926u);
  EXPECT_EQ(format::crc32(as_bytes("")), 0u);
  // Continuing a CRC equals computing it over the concatenation.
  EXPECT_EQ(format::crc32(as_bytes("56789"), format::crc32(as_bytes("1234"))), 0xCBF43926u);
}

// zlib's crc32 as the reference. zlib answers 0 for a null buffer whatever `crc` is (its way of
// giving the initial value), so an empty span continues `crc` unchanged here, as format::crc32 does.
std::uint32_t zlib_crc32(std::span<const std::byte> bytes, std::uint32_t crc = 0) {
  if (bytes.empty()) return crc;
  return static_cast<std::uint32_t>(::crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), uInt(bytes.size())));
}

// Whichever implementation this build uses (ISA-L's crc32_gzip_refl or zlib's), format::crc32 is
// zlib's CRC: random lengths, starts at every alignment, continued from random values, and large
// buffers whose lengths are not a multiple of any vector width.
TEST(ReplayFormat, Crc32EqualsZlibForRandomBuffersStartsAndContinuations) {
  const std::uint64_t seed = test::fresh_seed("crc32 against zlib");
  SCOPED_TRACE(testing::Message() << "seed " << seed << ", CRC by " << crc32_implementation());
  RecordProperty("crc32", crc32_implementation());
  std::mt19937_64 rng(seed);
  std::vector<std::byte> buffer((std::size_t(9) << 20) + 64);
  for (auto& b : buffer) b = std::byte(rng());
  const auto data = std::span<const std::byte>(buffer);

  std::uniform_int_distribution<std::size_t> length(0, 5000), start(0, 63);
  for (int trial = 0; trial < 2000; ++trial) {
    const auto bytes = data.subspan(start(rng), length(rng));
    const auto crc = static_cast<std::uint32_t>(trial % 4 == 0 ? 0 : rng());
    ASSERT_EQ(format::crc32(bytes, crc), zlib_crc32(bytes, crc))
        << bytes.size() << " bytes at offset " << (bytes.data() - buffer.data()) << ", continued from " << crc;
  }
  for (std::size_t size : {std::size_t(1) << 20, (std::size_t(3) << 20) + 12345, (std::size_t(9) << 20) - 1}) {
    const auto bytes = data.subspan(start(rng), size);
    const auto crc = static_cast<std::uint32_t>(rng());
    EXPECT_EQ(format::crc32(bytes), zlib_crc32(bytes)) << size << " bytes";
    EXPECT_EQ(format::crc32(bytes, crc), zlib_crc32(bytes, crc)) << size << " bytes, continued from " << crc;
    // Cut anywhere, the second half continued from the first equals the whole.
    const std::size_t cut = std::uniform_int_distribution<std::size_t>(0, size)(rng);
    EXPECT_EQ(format::crc32(bytes.subspan(cut), format::crc32(bytes.first(cut), crc)), zlib_crc32(bytes, crc))
        << size << " bytes cut at " << cut;
  }
  EXPECT_EQ(format::crc32({}, 0x12345678u), 0x12345678u);
}

#if COVFLOW_HAS_ISAL
// The build found ISA-L, so format::crc32 must be using it, and ISA-L's own entry point agrees
// with zlib (checked directly, not only through format::crc32).
TEST(ReplayFormat, Crc32UsesIsaLWhenBuiltWithIt) {
  EXPECT_STREQ(crc32_implementation(), "ISA-L crc32_gzip_refl");
  const std::uint64_t seed = test::fresh_seed("ISA-L against zlib");
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  std::vector<std::byte> buffer(70000);
  for (auto& b : buffer) b = std::byte(rng());
  std::uniform_int_distribution<std::size_t> length(1, 65536), start(0, 63);
  for (int trial = 0; trial < 200; ++trial) {
    const auto bytes = std::span<const std::byte>(buffer).subspan(start(rng), length(rng));
    const auto crc = static_cast<std::uint32_t>(rng());
    ASSERT_EQ(crc32_gzip_refl(crc, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()),
              zlib_crc32(bytes, crc))
        << bytes.size() << " bytes, continued from " << crc;
  }
}
#endif

// The example of docs/frame-format.md: one snapshot frame of 2 channels × 1 snapshot × 1 cell,
// cf32 values (1 + 2j) and (-0.5 + 0j), sequence 7 captured at 1 s, in a file created at
// 2026-01-01T00:00:00Z, closed with its index.
std::vector<std::byte> worked_example() {
  const std::vector<std::complex<float>> values{{1.0f, 2.0f}, {-0.5f, 0.0f}};
  const Frame frame = make_frame<std::complex<float>>(
      FrameHeader{.sequence = 7, .capture_time_ns = 1'000'000'000, .kind = PayloadKind::snapshots, .rows = 2, .cols = 1, .count = 1},
      std::span(values));
  std::vector<std::byte> file;
  const auto header = format::encode_file_header({.version = 1, .created_unix_ns = 1'767'225'600'000'000'000});
  file.insert(file.end(), header.begin(), header.end());
  const auto record = format::encode_record(frame);
  file.insert(file.end(), record.begin(), record.end());
  const format::IndexEntry entry{7, 1'000'000'000, format::file_header_bytes};
  const auto index = format::encode_index(std::span(&entry, 1), file.size());
  file.insert(file.end(), index.begin(), index.end());
  return file;
}

std::string hex_dump(std::span<const std::byte> bytes) {
  std::ostringstream out;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i % 16 == 0) out << (i ? "\n" : "") << std::hex << std::setw(4) << std::setfill('0') << i << ":";
    out << " " << std::hex << std::setw(2) << std::setfill('0') << std::to_integer<unsigned>(bytes[i]);
  }
  return out.str();
}

// The bytes of the hex dump between the example markers of the document: lines "OFFSET: xx xx ...".
std::vector<std::byte> example_from_document() {
  std::ifstream in(COVFLOW_SOURCE_DIR "/docs/frame-format.md");
  std::string line;
  bool inside = false;
  std::vector<std::byte> bytes;
  while (std::getline(in, line)) {
    if (line.find("<!-- worked-example-begin -->") != std::string::npos) inside = true;
    else if (line.find("<!-- worked-example-end -->") != std::string::npos) inside = false;
    else if (inside && line.size() > 5 && line[4] == ':') {
      std::istringstream fields(line.substr(5));
      std::string word;
      while (fields >> word) bytes.push_back(std::byte(std::stoul(word, nullptr, 16)));
    }
  }
  return bytes;
}

TEST(ReplayFormat, WorkedExampleInTheDocumentIsExact) {
  const auto expected = worked_example();
  const auto documented = example_from_document();
  EXPECT_TRUE(documented == expected) << "docs/frame-format.md's example differs; the encoder writes:\n" << hex_dump(expected);
  Reader reader(memory_source(documented));
  const auto frame = reader.next();
  ASSERT_TRUE(frame.has_value()) << test::damage_text(reader);
  EXPECT_EQ(frame->header.sequence, 7u);
  EXPECT_EQ(frame->header.capture_time_ns, 1'000'000'000);
  const auto values = payload_as<std::complex<float>>(*frame);
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0], std::complex<float>(1.0f, 2.0f));
  EXPECT_EQ(values[1], std::complex<float>(-0.5f, 0.0f));
  EXPECT_TRUE(reader.index().has_value());
  EXPECT_EQ(reader.file_header().created_unix_ns, 1'767'225'600'000'000'000);
  EXPECT_TRUE(reader.damage().empty()) << test::damage_text(reader);
}

TEST(ReplayFormat, FieldsSitAtTheirDocumentedOffsets) {
  const FrameHeader h{.sequence = 0x0102030405060708ull, .capture_time_ns = -2, .kind = PayloadKind::covariance,
                      .element_type = ElementType::cf64, .rows = 3, .cols = 3, .count = 0x01020304};
  const std::vector<std::byte> payload;  // the header alone is examined
  const auto bytes = format::encode_record_header(h, payload);
  const auto raw = format::decode_record_header(bytes);
  EXPECT_EQ(std::to_integer<int>(bytes[0]), 'C');
  EXPECT_EQ(std::to_integer<int>(bytes[3]), 'D');
  EXPECT_EQ(std::to_integer<int>(bytes[4]), 1);   // covariance
  EXPECT_EQ(std::to_integer<int>(bytes[5]), 4);   // cf64
  EXPECT_EQ(std::to_integer<int>(bytes[8]), 0x08);  // sequence, least significant byte first
  EXPECT_EQ(std::to_integer<int>(bytes[15]), 0x01);
  EXPECT_EQ(std::to_integer<int>(bytes[16]), 0xFE);  // -2, two's complement
  EXPECT_EQ(std::to_integer<int>(bytes[23]), 0xFF);
  EXPECT_EQ(std::to_integer<int>(bytes[24]), 3);
  EXPECT_EQ(std::to_integer<int>(bytes[32]), 0x04);
  EXPECT_EQ(raw.sequence, h.sequence);
  EXPECT_EQ(raw.capture_time_ns, -2);
  EXPECT_EQ(raw.count, 0x01020304u);
  EXPECT_EQ(raw.header_crc, format::crc32(std::span(bytes).first(48)));
  EXPECT_EQ(raw.record_crc, format::crc32(std::span(bytes).first(52)));
}

}  // namespace
}  // namespace covflow::replay

// Damaged files: every truncation point and every single-bit flip of a small file is detected
// and reported at the right offset, and every record outside the damage still reads back bit
// for bit. Files that are not frame files, unknown versions, impossible dimensions and a writer
// killed mid-record.
#include <gtest/gtest.h>

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "covflow/replay/error.hpp"
#include "covflow/replay/format.hpp"
#include "covflow/replay/inspect.hpp"
#include "replay_test_support.hpp"
#include "test_support.hpp"

namespace covflow::replay {
namespace {

struct SmallFile {
  std::vector<Frame> frames;
  std::vector<std::byte> bytes;
  std::vector<std::uint64_t> starts;  // record offsets
  std::vector<std::uint64_t> ends;    // one past each record
  std::uint64_t index_offset = 0;
};

SmallFile make_small_file(std::mt19937_64& rng, const test::ScratchDir& dir, int records = 6) {
  SmallFile file;
  const auto path = dir / "small.cvf";
  {
    Writer writer(path, {.overwrite = true});
    for (int i = 0; i < records; ++i) {
      const PayloadKind kind = test::all_payload_kinds[i % 2];
      const ElementType type = test::all_element_types[(i / 2 + i) % 4];
      file.frames.push_back(test::random_frame(rng, 100 + i, kind, type, 3));
      file.starts.push_back(writer.bytes());
      writer.write(file.frames.back());
      file.ends.push_back(writer.bytes());
    }
    file.index_offset = writer.bytes();
  }
  file.bytes = test::read_bytes(path);
  return file;
}

Reader reader_over(std::span<const std::byte> bytes) { return Reader(memory_source(bytes)); }

TEST(ReplayDamage, EveryTruncationPointIsDetectedAndTheRestReads) {
  std::mt19937_64 rng(test::fresh_seed("truncation"));
  test::ScratchDir dir;
  const SmallFile file = make_small_file(rng, dir);
  const auto& bytes = file.bytes;
  for (std::uint64_t length = 0; length <= bytes.size(); ++length) {
    SCOPED_TRACE("truncated to " + std::to_string(length) + " of " + std::to_string(bytes.size()) + " bytes");
    Reader reader = reader_over(std::span(bytes).first(length));
    const auto back = test::read_all(reader);
    // Whole records before the cut read back exactly; nothing else does.
    std::size_t whole = 0;
    while (whole < file.ends.size() && file.ends[whole] <= length) ++whole;
    ASSERT_EQ(back.size(), whole) << test::damage_text(reader);
    for (std::size_t i = 0; i < whole; ++i) ASSERT_EQ(back[i], file.frames[i]) << "record " << i;
    // A cut exactly after the header, after a record or at the end of the file leaves a file
    // without damage (the index is optional); any other cut is reported where it starts.
    const bool boundary = length == format::file_header_bytes || length == bytes.size() ||
                          std::find(file.ends.begin(), file.ends.end(), length) != file.ends.end();
    if (boundary) {
      EXPECT_TRUE(reader.damage().empty()) << test::damage_text(reader);
      continue;
    }
    ASSERT_EQ(reader.damage().size(), 1u) << test::damage_text(reader);
    const Damage& d = reader.damage().front();
    std::uint64_t expected_offset = 0;
    if (length >= file.index_offset) expected_offset = file.index_offset;
    else if (length > format::file_header_bytes) expected_offset = file.starts[whole];
    EXPECT_EQ(d.offset, expected_offset) << d.message();
    // One or two bytes of "CVIX" cannot be told from the start of a record header ("CVRD").
    const DamageKind expected_kind =
        length >= file.index_offset + 3 ? DamageKind::index : DamageKind::truncated;
    EXPECT_EQ(d.kind, expected_kind) << d.message();
    EXPECT_EQ(scan(reader, {.check_payloads = true}).whole(), false);
  }
}

TEST(ReplayDamage, EverySingleBitFlipIsDetectedAndTheRestReads) {
  std::mt19937_64 rng(test::fresh_seed("bit flips"));
  test::ScratchDir dir;
  const SmallFile file = make_small_file(rng, dir);
  std::vector<std::byte> bytes = file.bytes;
  for (std::size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    const std::size_t at = bit / 8;
    SCOPED_TRACE("bit " + std::to_string(bit % 8) + " of byte " + std::to_string(at));
    bytes[at] ^= std::byte(1u << (bit % 8));
    Reader reader = reader_over(bytes);
    const auto back = test::read_all(reader);
    const ScanReport verified = scan(reader, {.check_payloads = true});
    bytes[at] ^= std::byte(1u << (bit % 8));

    // Which record, if any, the flip landed in; that one alone is lost.
    std::optional<std::size_t> hit;
    for (std::size_t r = 0; r < file.starts.size(); ++r)
      if (at >= file.starts[r] && at < file.ends[r]) hit = r;
    std::vector<Frame> expected;
    for (std::size_t r = 0; r < file.frames.size(); ++r)
      if (r != hit) expected.push_back(file.frames[r]);
    ASSERT_EQ(back.size(), expected.size()) << test::damage_text(reader);
    for (std::size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(back[i], expected[i]) << "record " << i;

    ASSERT_EQ(reader.damage().size(), 1u) << test::damage_text(reader);
    const Damage& d = reader.damage().front();
    if (at < format::file_header_bytes) {
      EXPECT_EQ(d.offset, 0u);
      EXPECT_EQ(d.kind, DamageKind::file_header);
    } else if (hit) {
      EXPECT_EQ(d.offset, file.starts[*hit]) << d.message();
      EXPECT_EQ(d.length, file.ends[*hit] - file.starts[*hit]) << d.message();
      const bool in_header = at < file.starts[*hit] + format::record_header_bytes - 4;  // the record CRC is the last 4
      EXPECT_EQ(d.kind, in_header ? DamageKind::bad_record : DamageKind::payload_crc) << d.message();
    } else {
      EXPECT_EQ(d.offset, file.index_offset) << d.message();
      EXPECT_EQ(d.kind, DamageKind::index) << d.message();
    }
    EXPECT_FALSE(verified.whole());
  }
}

TEST(ReplayDamage, GarbageBetweenRecordsIsSkippedToTheNextRecord) {
  std::mt19937_64 rng(test::fresh_seed("garbage"));
  test::ScratchDir dir;
  const SmallFile file = make_small_file(rng, dir, 3);
  // Random bytes, including a false record magic, spliced in after the first record.
  std::vector<std::byte> junk(173);
  for (auto& b : junk) b = std::byte(rng() & 0xFF);
  std::memcpy(junk.data() + 40, format::record_magic.data(), 4);
  std::vector<std::byte> bytes(file.bytes.begin(), file.bytes.begin() + std::ptrdiff_t(file.ends[0]));
  bytes.insert(bytes.end(), junk.begin(), junk.end());
  bytes.insert(bytes.end(), file.bytes.begin() + std::ptrdiff_t(file.ends[0]), file.bytes.begin() + std::ptrdiff_t(file.index_offset));
  Reader reader = reader_over(bytes);
  const auto back = test::read_all(reader);
  ASSERT_EQ(back.size(), 3u) << test::damage_text(reader);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(back[i], file.frames[i]);
  ASSERT_EQ(reader.damage().size(), 1u) << test::damage_text(reader);
  EXPECT_EQ(reader.damage()[0].offset, file.ends[0]);
  EXPECT_EQ(reader.damage()[0].length, junk.size());
  EXPECT_NE(reader.damage()[0].detail.find("skipped 173 bytes to the next record at offset " +
                                           std::to_string(file.ends[0] + junk.size())),
            std::string::npos)
      << reader.damage()[0].detail;
}

TEST(ReplayDamage, NotAFrameFileIsRefusedWithItsOffset) {
  const std::string text = "GARBAGE! this is a text file, long enough to hold a header";
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()), text.size());
  try {
    Reader reader(memory_source(bytes, "notes.txt"));
    ADD_FAILURE() << "no error";
  } catch (const FormatError& e) {
    EXPECT_EQ(std::string(e.what()), "notes.txt: offset 0: bad magic 47 41 52 42 41 47 45 21: not a covflow frame file");
    EXPECT_EQ(e.offset(), 0u);
  }
  EXPECT_THROW(Reader{memory_source(bytes.first(5), "short.txt")}, FormatError);
}

TEST(ReplayDamage, UnknownVersionIsRefusedWithItsOffset) {
  auto header = format::encode_file_header({.version = 1});
  header[8] = std::byte{2};
  const std::uint32_t crc = format::crc32(std::span(header).first(28));
  for (int i = 0; i < 4; ++i) header[28 + i] = std::byte((crc >> (8 * i)) & 0xFF);
  try {
    Reader reader(memory_source(header, "future.cvf"));
    ADD_FAILURE() << "no error";
  } catch (const FormatError& e) {
    EXPECT_EQ(std::string(e.what()), "future.cvf: offset 8: unknown format version 2 (this reader knows version 1)");
    EXPECT_EQ(e.offset(), 8u);
  }
}

// A ByteSource that remembers the largest single read: buffers are sized to what is read, so
// this bounds what the reader allocated from the file's contents.
class CountingSource final : public ByteSource {
 public:
  explicit CountingSource(std::span<const std::byte> bytes) : inner_(memory_source(bytes)) {}
  std::uint64_t size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  void read(std::uint64_t offset, std::span<std::byte> out) override {
    largest_ = std::max<std::uint64_t>(largest_, out.size());
    inner_->read(offset, out);
  }
  std::uint64_t* largest() { return &largest_; }

 private:
  std::unique_ptr<ByteSource> inner_;
  std::uint64_t largest_ = 0;
};

// Rewrites a record header's fields and its header CRC, as a buggy or hostile writer would.
void forge(std::vector<std::byte>& bytes, std::uint64_t at, std::uint32_t rows, std::uint32_t cols, std::uint32_t count,
           std::uint64_t payload_bytes) {
  auto put = [&](std::size_t offset, std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i) bytes[at + offset + std::size_t(i)] = std::byte((value >> (8 * i)) & 0xFF);
  };
  put(24, rows, 4);
  put(28, cols, 4);
  put(32, count, 4);
  put(40, payload_bytes, 8);
  put(48, format::crc32(std::span(bytes).subspan(at, 48)), 4);
}

TEST(ReplayDamage, ImpossibleDimensionsAreReportedWithoutAllocatingThem) {
  std::mt19937_64 rng(test::fresh_seed("impossible dimensions"));
  test::ScratchDir dir;
  const SmallFile file = make_small_file(rng, dir, 3);
  struct Case {
    std::uint32_t rows, cols, count;
    std::uint64_t payload_bytes;
    std::string fragment;
    DamageKind kind;
  };
  const ElementType type = file.frames[1].header.element_type;
  const std::uint64_t element = size_of(type);
  const Case cases[] = {
      {0, 3, 2, 0, "impossible dimensions 0×3×2", DamageKind::bad_record},
      {65536, 65536, 65536, 65536ull * 65536 * 65536 * element, "would exceed the 4294967296 byte limit", DamageKind::bad_record},
      {3, 3, 2, 12345, "payload length 12345 does not match", DamageKind::bad_record},
      // Consistent and under the limit, but far more than the file holds: the file was cut.
      {4096, 4096, 1, 4096ull * 4096 * element, "payload bytes but", DamageKind::truncated},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fragment);
    std::vector<std::byte> bytes = file.bytes;
    forge(bytes, file.starts[1], c.rows, c.cols, c.count, c.payload_bytes);
    auto source = std::make_unique<CountingSource>(bytes);
    std::uint64_t* largest = source->largest();
    Reader reader(std::move(source));
    const auto back = test::read_all(reader);
    ASSERT_FALSE(reader.damage().empty());
    const Damage& d = reader.damage().front();
    EXPECT_EQ(d.offset, file.starts[1]);
    EXPECT_EQ(d.kind, c.kind) << d.message();
    EXPECT_NE(d.detail.find(c.fragment), std::string::npos) << d.message();
    EXPECT_LE(*largest, bytes.size());
    EXPECT_EQ(back.front(), file.frames[0]);
    if (c.kind == DamageKind::bad_record) {
      ASSERT_EQ(back.size(), 2u) << test::damage_text(reader);
      EXPECT_EQ(back[1], file.frames[2]);
    }
  }
}

// One whole record, header field by field as a hostile writer would put it, with a header CRC and
// a record CRC that check out. encode_record_header is not used: it may refuse such dimensions.
std::vector<std::byte> hand_made_record(PayloadKind kind, ElementType type, std::uint32_t rows, std::uint32_t cols,
                                        std::uint32_t count, std::span<const std::byte> payload) {
  std::vector<std::byte> record(format::record_header_bytes);
  auto put = [&](std::size_t offset, std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i) record[offset + std::size_t(i)] = std::byte((value >> (8 * i)) & 0xFF);
  };
  std::memcpy(record.data(), format::record_magic.data(), format::record_magic.size());
  put(4, std::uint64_t(kind), 1);
  put(5, std::uint64_t(type), 1);
  put(8, 7, 8);  // sequence
  put(24, rows, 4);
  put(28, cols, 4);
  put(32, count, 4);
  put(40, payload.size(), 8);
  put(48, format::crc32(std::span(record).first(48)), 4);
  put(52, format::crc32(payload, format::crc32(std::span(record).first(52))), 4);
  record.insert(record.end(), payload.begin(), payload.end());
  return record;
}

// rows·cols·element size computed in 64 bits wraps around to a payload length the record really
// has: to 0 bytes (2^30 × 2^30 cf64 = 2^64 bytes, 2^31 × 2^30 f64 likewise), or to 64 bytes
// (1073807362 × 4294705160 f32 = 2^64 + 64 bytes). Such a header is refused like any other that
// claims more than the payload limit, and the records around it still read.
TEST(ReplayDamage, DimensionsWhosePayloadSizeWrapsAroundAreRefused) {
  std::mt19937_64 rng(test::fresh_seed("wrapping dimensions"));
  test::ScratchDir dir;
  const SmallFile file = make_small_file(rng, dir, 2);
  struct Case {
    PayloadKind kind;
    ElementType type;
    std::uint32_t rows, cols;
    std::size_t payload_bytes;
  };
  const Case cases[] = {
      {PayloadKind::covariance, ElementType::cf64, 1u << 30, 1u << 30, 0},
      {PayloadKind::snapshots, ElementType::f64, 1u << 31, 1u << 30, 0},
      {PayloadKind::snapshots, ElementType::f32, 1073807362u, 4294705160u, 64},
  };
  for (const Case& c : cases) {
    const std::string shape = std::to_string(c.rows) + "×" + std::to_string(c.cols) + "×1 " + std::string(name(c.type));
    SCOPED_TRACE(shape);
    std::vector<std::byte> payload(c.payload_bytes);
    for (auto& b : payload) b = std::byte(rng() & 0xFF);
    const std::vector<std::byte> record = hand_made_record(c.kind, c.type, c.rows, c.cols, 1, payload);
    const std::string expected = "impossible dimensions " + shape + ": the payload would exceed the 4294967296 byte limit";

    const auto header = std::span(record).first<format::record_header_bytes>();
    const std::string problem = format::record_header_problem(header).value_or("the header passes its checks");
    EXPECT_NE(problem.find(expected), std::string::npos) << problem;
    EXPECT_NE(shape_problem(format::decode_record_header(header).frame_header()), "");
    try {
      const Frame frame = format::decode_record(record);
      ADD_FAILURE() << "decoded a " << frame.header.rows << "×" << frame.header.cols << " record of "
                    << frame.payload.size() << " payload bytes";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_EQ(e.offset(), 0u);
    }

    // Between the two good records of a file without an index.
    std::vector<std::byte> bytes(file.bytes.begin(), file.bytes.begin() + std::ptrdiff_t(file.ends[0]));
    bytes.insert(bytes.end(), record.begin(), record.end());
    bytes.insert(bytes.end(), file.bytes.begin() + std::ptrdiff_t(file.ends[0]),
                 file.bytes.begin() + std::ptrdiff_t(file.index_offset));
    Reader reader = reader_over(bytes);
    const auto back = test::read_all(reader);
    EXPECT_FALSE(scan(reader, {.check_payloads = true}).whole());
    EXPECT_EQ(back.size(), 2u) << test::damage_text(reader);
    if (back.size() == 2) {
      EXPECT_EQ(back[0], file.frames[0]);
      EXPECT_EQ(back[1], file.frames[1]);
    }
    EXPECT_EQ(reader.damage().size(), 1u) << test::damage_text(reader);
    if (reader.damage().size() == 1) {
      const Damage& d = reader.damage().front();
      EXPECT_EQ(d.kind, DamageKind::bad_record) << d.message();
      EXPECT_EQ(d.offset, file.ends[0]) << d.message();
      EXPECT_EQ(d.length, record.size()) << d.message();
      EXPECT_NE(d.detail.find(expected), std::string::npos) << d.message();
    }
  }
}

TEST(ReplayDamage, WriterKilledMidRecordLeavesTheWholeRecordsReadable) {
  const std::uint64_t seed = test::fresh_seed("killed writer");
  test::ScratchDir dir;
  const auto path = dir / "killed.cvf";
  // Small records, then ones of 128 MiB, so that the kill lands while the kernel copies it.
  constexpr int small_records = 40;
  auto frame_for = [&](std::uint64_t sequence) {
    std::mt19937_64 rng(seed + sequence);
    return test::random_frame(rng, sequence, PayloadKind::snapshots, ElementType::cf32, 8);
  };
  std::uint64_t small_bytes = format::file_header_bytes;
  for (int i = 0; i < small_records; ++i) small_bytes += format::encode_record(frame_for(std::uint64_t(i))).size();

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Writer writer(path);
    for (int i = 0; i < small_records; ++i) writer.write(frame_for(std::uint64_t(i)));
    FrameHeader big{.sequence = small_records, .kind = PayloadKind::snapshots, .element_type = ElementType::cf64,
                    .rows = 64, .cols = 1024, .count = 128};
    std::vector<std::byte> payload(big.payload_bytes(), std::byte{0x5A});
    for (;;) {
      writer.write(big, payload);
      ++big.sequence;
    }
  }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::error_code ec;
  while (std::chrono::steady_clock::now() < give_up) {
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > small_bytes + (1u << 20)) break;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  Reader reader(path);
  EXPECT_FALSE(reader.index().has_value());
  std::uint64_t expected_sequence = 0;
  while (auto frame = reader.next()) {
    if (expected_sequence < small_records) ASSERT_EQ(*frame, frame_for(expected_sequence));
    else ASSERT_EQ(frame->header.sequence, expected_sequence);
    ++expected_sequence;
  }
  EXPECT_GE(expected_sequence, std::uint64_t(small_records));
  // At most the cut record is damaged, and it is the last thing in the file.
  ASSERT_LE(reader.damage().size(), 1u) << test::damage_text(reader);
  if (!reader.damage().empty()) {
    const Damage& d = reader.damage().front();
    EXPECT_EQ(d.kind, DamageKind::truncated) << d.message();
    EXPECT_EQ(d.offset + d.length, reader.file_size()) << d.message();
    std::cout << "[ info     ] killed mid-record: " << d.message() << "\n";
  } else {
    std::cout << "[ info     ] killed between records\n";
  }
}

}  // namespace
}  // namespace covflow::replay

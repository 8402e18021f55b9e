// The fuzzer's seed corpus (tests/replay/corpus) through the fuzzer's own checks, as an ordinary
// test, plus what each file is known to be: valid-* read without damage, damaged-* read with
// damage, foreign-* refused. COVFLOW_UPDATE_CORPUS=1 writes the corpus afresh first.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "reader_fuzz_body.hpp"
#include "replay_test_support.hpp"

namespace covflow::replay {
namespace {

const std::filesystem::path corpus_dir = COVFLOW_SOURCE_DIR "/tests/replay/corpus";

std::vector<std::byte> with_index(const std::vector<Frame>& frames, bool index) {
  test::ScratchDir dir;
  {
    Writer writer(dir / "f.cvf", {.write_index = index});
    for (const Frame& f : frames) writer.write(f);
  }
  return test::read_bytes(dir / "f.cvf");
}

void put_u32(std::vector<std::byte>& bytes, std::size_t at, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes[at + std::size_t(i)] = std::byte((value >> (8 * i)) & 0xFF);
}

// Small files, each a few hundred bytes, so the fuzzer mutates them quickly.
void write_corpus() {
  std::mt19937_64 rng(20260101);
  std::vector<Frame> frames;
  std::uint64_t sequence = 1;
  for (PayloadKind kind : test::all_payload_kinds)
    for (ElementType type : {ElementType::f32, ElementType::cf64}) frames.push_back(test::random_frame(rng, sequence++, kind, type, 3));
  const auto indexed = with_index(frames, true);
  const std::size_t second = format::file_header_bytes + format::record_header_bytes + frames[0].payload.size();
  auto save = [](const std::string& name, std::span<const std::byte> bytes) { test::write_bytes(corpus_dir / name, bytes); };

  save("valid-indexed.cvf", indexed);
  save("valid-no-index.cvf", with_index({frames[0], frames[1]}, false));
  save("valid-empty-with-index.cvf", with_index({}, true));
  save("valid-header-only.cvf", with_index({}, false));
  save("damaged-cut-mid-record.cvf", std::span(indexed).first(second + 30));
  save("damaged-cut-in-header.cvf", std::span(indexed).first(20));
  auto flip = [&](std::size_t at, std::byte bit) {
    auto copy = indexed;
    copy[at] ^= bit;
    return copy;
  };
  save("damaged-payload-bit.cvf", flip(second + format::record_header_bytes + 3, std::byte{0x08}));
  save("damaged-record-header-bit.cvf", flip(second + 26, std::byte{0x01}));
  save("damaged-file-header-bit.cvf", flip(9, std::byte{0x80}));
  save("damaged-index-bit.cvf", flip(indexed.size() - 30, std::byte{0x02}));
  auto garbage = indexed;
  std::vector<std::byte> junk{std::byte{'C'}, std::byte{'V'}, std::byte{'R'}, std::byte{'D'}, std::byte{0x01}, std::byte{0x04}};
  garbage.insert(garbage.begin() + std::ptrdiff_t(second), junk.begin(), junk.end());
  save("damaged-garbage-between-records.cvf", garbage);
  auto impossible = indexed;  // dimensions 0 × 3 × 1 with a header CRC that checks out
  put_u32(impossible, second + 24, 0);
  put_u32(impossible, second + 48, format::crc32(std::span(impossible).subspan(second, 48)));
  save("damaged-impossible-dimensions.cvf", impossible);
  // 2^30 × 2^30 cf64 matrices: rows·cols·16 wraps around to 0 in 64 bits, so an empty payload
  // and two CRCs that check out make a record that a 64-bit size check lets through.
  std::vector<std::byte> wrapping(format::record_header_bytes);
  std::memcpy(wrapping.data(), format::record_magic.data(), format::record_magic.size());
  wrapping[4] = std::byte(PayloadKind::covariance);
  wrapping[5] = std::byte(ElementType::cf64);
  put_u32(wrapping, 24, 1u << 30);
  put_u32(wrapping, 28, 1u << 30);
  put_u32(wrapping, 32, 1);
  put_u32(wrapping, 48, format::crc32(std::span(wrapping).first(48)));
  put_u32(wrapping, 52, format::crc32(std::span(wrapping).first(52)));
  save("foreign-record-size-wraps-around.bin", wrapping);
  auto wrapped_in = with_index({frames[0], frames[1]}, false);
  wrapped_in.insert(wrapped_in.begin() + std::ptrdiff_t(second), wrapping.begin(), wrapping.end());
  save("damaged-record-size-wraps-around.cvf", wrapped_in);
  auto future = with_index({frames[0]}, true);
  put_u32(future, 8, 2);
  put_u32(future, 28, format::crc32(std::span(future).first(28)));
  save("foreign-future-version.cvf", future);
  const std::string text = "# a YAML file, not frames\npipeline:\n  budget_ms: 4\n";
  save("foreign-text.txt", std::span(reinterpret_cast<const std::byte*>(text.data()), text.size()));
  save("foreign-single-record.bin", format::encode_record(frames[2]));
}

TEST(ReplayCorpus, SeedCorpusRunsThroughTheFuzzChecks) {
  if (std::getenv("COVFLOW_UPDATE_CORPUS") != nullptr) write_corpus();
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus_dir)) {
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    ++files;
    const auto bytes = test::read_bytes(entry.path());
    const long records = fuzz::reader_fuzz_one(bytes);
    if (name.starts_with("foreign-")) {
      EXPECT_EQ(records, -1) << "a foreign file must be refused";
      continue;
    }
    ASSERT_GE(records, 0);
    Reader reader(memory_source(bytes));
    test::read_all(reader);
    if (name.starts_with("valid-")) {
      EXPECT_TRUE(reader.damage().empty()) << test::damage_text(reader);
    }
    if (name.starts_with("damaged-")) {
      EXPECT_FALSE(reader.damage().empty()) << "damage must be found";
    }
  }
  EXPECT_GE(files, 17);
}

}  // namespace
}  // namespace covflow::replay

// Frames written and read back bit for bit: every payload kind and element type, with and
// without the index, through files and through single-record encoding.
#include <gtest/gtest.h>

#include "covflow/replay/error.hpp"
#include "covflow/replay/format.hpp"
#include "covflow/replay/inspect.hpp"
#include "replay_test_support.hpp"
#include "test_support.hpp"

namespace covflow::replay {
namespace {

using test::all_element_types;
using test::all_payload_kinds;

std::vector<Frame> mixed_frames(std::mt19937_64& rng, int rounds) {
  std::vector<Frame> frames;
  std::uint64_t sequence = 1000;
  for (int r = 0; r < rounds; ++r)
    for (PayloadKind kind : all_payload_kinds)
      for (ElementType type : all_element_types) frames.push_back(test::random_frame(rng, sequence++, kind, type));
  return frames;
}

TEST(ReplayRoundTrip, EveryKindAndElementTypeThroughAFile) {
  std::mt19937_64 rng(test::fresh_seed("round trip"));
  test::ScratchDir dir;
  for (bool with_index : {true, false}) {
    SCOPED_TRACE(with_index ? "with index" : "without index");
    const auto frames = mixed_frames(rng, 3);
    const auto path = dir / (with_index ? "indexed.cvf" : "plain.cvf");
    {
      Writer writer(path, {.write_index = with_index});
      for (const Frame& f : frames) writer.write(f);
      EXPECT_EQ(writer.records(), frames.size());
      writer.close();
    }
    Reader reader(path);
    EXPECT_EQ(reader.file_header().version, format::version);
    EXPECT_EQ(reader.index().has_value(), with_index);
    const auto back = test::read_all(reader);
    EXPECT_TRUE(reader.damage().empty()) << test::damage_text(reader);
    ASSERT_EQ(back.size(), frames.size());
    for (std::size_t i = 0; i < frames.size(); ++i) {
      EXPECT_EQ(back[i].header, frames[i].header) << "record " << i;
      EXPECT_TRUE(back[i].payload == frames[i].payload) << "record " << i << " payload differs";
    }
    if (with_index) {
      const auto& index = *reader.index();
      ASSERT_EQ(index.size(), frames.size());
      for (std::size_t i = 0; i < frames.size(); ++i) {
        EXPECT_EQ(index[i].sequence, frames[i].header.sequence);
        EXPECT_EQ(index[i].capture_time_ns, frames[i].header.capture_time_ns);
      }
    }
    const ScanReport report = scan(reader, {.check_payloads = true});
    EXPECT_TRUE(report.whole());
    EXPECT_EQ(report.records, frames.size());
    EXPECT_EQ(report.index_present, with_index);
  }
}

TEST(ReplayRoundTrip, TypedPayloadViews) {
  std::mt19937_64 rng(test::fresh_seed("typed payload"));
  std::vector<std::complex<float>> values(3 * 3 * 2);
  for (auto& v : values) v = {float(rng() % 100) / 7.f, -float(rng() % 100) / 3.f};
  const Frame frame = make_frame<std::complex<float>>(
      FrameHeader{.sequence = 9, .kind = PayloadKind::covariance, .rows = 3, .cols = 3, .count = 2}, std::span(values));
  EXPECT_EQ(frame.header.element_type, ElementType::cf32);
  const auto view = payload_as<std::complex<float>>(frame);
  ASSERT_EQ(view.size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(view[i], values[i]);
  EXPECT_THROW(payload_as<double>(frame), std::invalid_argument);
  const std::vector<float> three(3);
  EXPECT_THROW(make_frame<float>(FrameHeader{.rows = 2, .cols = 2, .count = 1}, std::span(three)), std::invalid_argument);
}

TEST(ReplayRoundTrip, SingleRecordEncoding) {
  std::mt19937_64 rng(test::fresh_seed("single record"));
  for (const Frame& frame : mixed_frames(rng, 1)) {
    const auto bytes = format::encode_record(frame);
    EXPECT_EQ(bytes.size(), format::record_header_bytes + frame.payload.size());
    EXPECT_EQ(format::decode_record(bytes), frame);
    // One byte short, one byte long, one bit flipped: each refused with where.
    EXPECT_THROW(format::decode_record(std::span(bytes).first(bytes.size() - 1)), FormatError);
    auto longer = bytes;
    longer.push_back(std::byte{0});
    EXPECT_THROW(format::decode_record(longer), FormatError);
    auto flipped = bytes;
    flipped[std::uniform_int_distribution<std::size_t>(0, bytes.size() - 1)(rng)] ^= std::byte{0x10};
    EXPECT_THROW(format::decode_record(flipped), FormatError);
  }
}

TEST(ReplayWriter, RefusesBadFramesAndExistingFiles) {
  test::ScratchDir dir;
  const auto path = dir / "w.cvf";
  Writer writer(path);
  const std::vector<std::byte> payload(4 * 4 * 16);
  EXPECT_THROW(writer.write(FrameHeader{.kind = PayloadKind::covariance, .rows = 4, .cols = 3, .count = 1}, payload),
               std::invalid_argument);
  EXPECT_THROW(writer.write(FrameHeader{.kind = PayloadKind::snapshots, .rows = 4, .cols = 4, .count = 2}, payload),
               std::invalid_argument);
  EXPECT_THROW(writer.write(FrameHeader{.kind = PayloadKind::snapshots, .rows = 0, .cols = 4, .count = 1}, {}),
               std::invalid_argument);
  writer.write(FrameHeader{.kind = PayloadKind::snapshots, .rows = 4, .cols = 4, .count = 1}, payload);
  writer.close();
  EXPECT_THROW(Writer{path}, IoError);
  Writer again(path, {.overwrite = true});
  again.close();
  Reader reader(path);
  EXPECT_FALSE(reader.next().has_value());
  EXPECT_TRUE(reader.damage().empty()) << test::damage_text(reader);
}

TEST(ReplayReader, MissingFileIsAnIoErrorNamingThePath) {
  try {
    Reader reader(std::filesystem::path("/nonexistent/dir/frames.cvf"));
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/dir/frames.cvf: cannot open: No such file or directory");
  }
}

TEST(ReplayReader, SeekBySequenceWithAndWithoutIndex) {
  std::mt19937_64 rng(test::fresh_seed("seek"));
  test::ScratchDir dir;
  for (bool with_index : {true, false}) {
    const auto path = dir / (with_index ? "i.cvf" : "n.cvf");
    std::vector<std::uint64_t> sequences;
    {
      Writer writer(path, {.write_index = with_index});
      std::uint64_t sequence = 5;
      for (int i = 0; i < 20; ++i) {
        sequence += 1 + rng() % 3;  // gaps, as when frames were dropped before recording
        sequences.push_back(sequence);
        writer.write(test::random_frame(rng, sequence, PayloadKind::snapshots, ElementType::cf32, 3));
      }
    }
    Reader reader(path);
    for (int trial = 0; trial < 30; ++trial) {
      const std::uint64_t target = std::uniform_int_distribution<std::uint64_t>(0, sequences.back() + 2)(rng);
      const auto expected = std::lower_bound(sequences.begin(), sequences.end(), target);
      const bool found = reader.seek_sequence(target);
      ASSERT_EQ(found, expected != sequences.end()) << "target " << target;
      const auto frame = reader.next();
      ASSERT_EQ(frame.has_value(), found);
      if (found) {
        EXPECT_EQ(frame->header.sequence, *expected) << "target " << target;
      }
    }
    EXPECT_TRUE(reader.damage().empty()) << test::damage_text(reader);
  }
}

}  // namespace
}  // namespace covflow::replay

// PayloadMover: copy, check and read give zlib's CRC of the payload continued from the caller's
// value, and copy and read leave the bytes bit for bit, for sizes around the piece and part
// boundaries and any thread count (more threads than this host has cores too); parts run on the
// pool's threads, small payloads on the caller's alone; a read error reaches the caller and
// leaves the mover usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <zlib.h>

#include "covflow/replay/byte_source.hpp"
#include "covflow/replay/error.hpp"
#include "covflow/replay/payload_mover.hpp"
#include "replay_test_support.hpp"
#include "test_support.hpp"

namespace covflow::replay {
namespace {

// The reference, zlib called directly. An empty span continues `crc` unchanged (zlib itself
// answers 0 for a null buffer).
std::uint32_t zlib_crc32(std::span<const std::byte> bytes, std::uint32_t crc = 0) {
  if (bytes.empty()) return crc;
  return static_cast<std::uint32_t>(::crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), uInt(bytes.size())));
}

std::vector<std::byte> random_bytes(std::size_t size, std::mt19937_64& rng) {
  std::vector<std::byte> out(size);
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const std::uint64_t word = rng();
    std::memcpy(out.data() + i, &word, 8);
  }
  for (; i < size; ++i) out[i] = std::byte(rng());
  return out;
}

// Every destination byte made different from the byte that should land there, so an unwritten
// byte fails the comparison whatever the data.
void poison(std::span<std::byte> to, std::span<const std::byte> expected) {
  for (std::size_t i = 0; i < to.size(); ++i) to[i] = ~expected[i];
}

// The first differing byte's offset, or nothing.
std::string first_difference(std::span<const std::byte> got, std::span<const std::byte> expected) {
  const auto [g, e] = std::mismatch(got.begin(), got.end(), expected.begin(), expected.end());
  if (g == got.end() && e == expected.end()) return {};
  return "first difference at byte " + std::to_string(g - got.begin()) + " of " + std::to_string(expected.size());
}

// A memory source that notes which thread read which range, and can fail one range.
class WatchedSource final : public ByteSource {
 public:
  explicit WatchedSource(std::span<const std::byte> bytes) : inner_(memory_source(bytes, "<watched>")) {}
  std::uint64_t size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  void read(std::uint64_t offset, std::span<std::byte> out) override {
    {
      std::lock_guard lock(mutex_);
      reads_.push_back({offset, out.size(), std::this_thread::get_id()});
    }
    if (fail_at_ && *fail_at_ >= offset && *fail_at_ < offset + out.size())
      throw IoError("<watched>: injected read failure at offset " + std::to_string(*fail_at_));
    inner_->read(offset, out);
  }
  void fail_at(std::optional<std::uint64_t> offset) { fail_at_ = offset; }

  struct Read {
    std::uint64_t offset;
    std::size_t bytes;
    std::thread::id thread;
  };
  std::vector<Read> take_reads() { return std::exchange(reads_, {}); }

 private:
  std::unique_ptr<ByteSource> inner_;
  std::mutex mutex_;
  std::vector<Read> reads_;
  std::optional<std::uint64_t> fail_at_;
};

class PayloadMoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = test::fresh_seed("payload mover");
    rng_.seed(seed_);
  }
  // Prefixed to every failure message of the test.
  ::testing::Message context() const {
    return ::testing::Message() << "seed " << seed_ << " (COVFLOW_TEST_SEED), CRC by " << crc32_implementation();
  }
  std::uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

// copy, check and read of `size` bytes from `source_offset` of `data` into a destination at
// `destination_offset` of a larger buffer, continued from `crc`: each must give zlib's CRC and
// leave the bytes exactly.
void expect_moves_exactly(PayloadMover& mover, std::span<const std::byte> data, std::size_t size,
                          std::size_t source_offset, std::size_t destination_offset, std::uint32_t crc) {
  SCOPED_TRACE(::testing::Message() << size << " bytes, source offset " << source_offset << ", destination offset "
                                    << destination_offset << ", continued from " << crc << ", "
                                    << mover.threads() << " threads");
  ASSERT_LE(source_offset + size, data.size());
  const auto from = data.subspan(source_offset, size);
  const std::uint32_t expected = zlib_crc32(from, crc);
  std::vector<std::byte> storage(destination_offset + size);
  const auto to = std::span(storage).subspan(destination_offset, size);

  EXPECT_EQ(mover.check(from, crc), expected) << "check";

  poison(to, from);
  EXPECT_EQ(mover.copy(from, to, crc), expected) << "copy";
  EXPECT_EQ(first_difference(to, from), "") << "copy";

  poison(to, from);
  const auto source = memory_source(data);
  EXPECT_EQ(mover.read(*source, source_offset, to, crc), expected) << "read";
  EXPECT_EQ(first_difference(to, from), "") << "read";
}

TEST_F(PayloadMoverTest, EverySizeAndThreadCountGivesZlibsCrcAndTheBytes) {
  SCOPED_TRACE(context());
  // Not a divisor of the parts, so that pieces straddle pages and each part ends in a short piece.
  constexpr std::size_t piece = (std::size_t(64) << 10) + 3;
  std::uniform_int_distribution<std::size_t> mb_odd((std::size_t(2) << 20) + 1, std::size_t(5) << 20);
  const std::size_t large = mb_odd(rng_) | 1;
  const auto data = random_bytes(std::max(large, std::size_t(3) << 20) + 64, rng_);
  for (const bool streaming : {false, true})
  for (unsigned threads : {1u, 2u, 3u, 5u}) {
    SCOPED_TRACE(streaming ? "streaming stores" : "plain stores");
    // Parallel from the first byte, so that the small sizes are cut into parts too where they can be.
    PayloadMover mover({.threads = threads, .piece_bytes = piece, .parallel_from_bytes = 1, .streaming_stores = streaming});
    ASSERT_EQ(mover.threads(), threads);
    const std::size_t part_boundary = 4096 * threads;
    for (std::size_t size : {std::size_t(0), std::size_t(1), std::size_t(7), piece - 1, piece, piece + 1,
                             part_boundary - 1, part_boundary + 1, threads * piece + 3, large,
                             std::size_t(3) << 20}) {
      expect_moves_exactly(mover, data, size, 0, 0, 0);
      expect_moves_exactly(mover, data, size, 1 + rng_() % 63, 1 + rng_() % 63, static_cast<std::uint32_t>(rng_() | 1));
    }
  }
}

TEST_F(PayloadMoverTest, DefaultOptionsOnLargeAndSmallPayloads) {
  SCOPED_TRACE(context());
  PayloadMover mover;
  const unsigned cores = std::thread::hardware_concurrency();
  EXPECT_EQ(mover.threads(), std::max(1u, std::min(8u, cores / 2)));
  const auto data = random_bytes((std::size_t(6) << 20) + 64, rng_);
  for (std::size_t size : {std::size_t(1000), (std::size_t(1) << 20) - 1, (std::size_t(6) << 20) - 11})
    expect_moves_exactly(mover, data, size, 3, 5, static_cast<std::uint32_t>(rng_()));
}

// Below parallel_from_bytes every read is the caller's; above it, each of the pool's threads
// reads one contiguous part, the same threads call after call, and the parts tile the payload.
TEST_F(PayloadMoverTest, SmallPayloadsStayOnTheCallersThreadLargeOnesUseThePool) {
  SCOPED_TRACE(context());
  constexpr unsigned threads = 3;
  PayloadMover mover({.threads = threads, .piece_bytes = std::size_t(32) << 10, .parallel_from_bytes = std::size_t(1) << 20});
  const auto data = random_bytes(std::size_t(2) << 20, rng_);
  WatchedSource source(data);
  std::vector<std::byte> to(data.size());

  for (std::size_t size : {std::size_t(100), (std::size_t(1) << 20) - 1}) {
    const auto part = std::span(to).first(size);
    poison(part, std::span(data).first(size));
    EXPECT_EQ(mover.read(source, 0, part), zlib_crc32(std::span(data).first(size))) << size << " bytes";
    for (const auto& read : source.take_reads())
      EXPECT_EQ(read.thread, std::this_thread::get_id()) << size << " bytes: a read at " << read.offset << " ran elsewhere";
  }

  std::set<std::thread::id> first_call_threads;
  for (int call = 0; call < 3; ++call) {
    poison(to, data);
    EXPECT_EQ(mover.read(source, 0, to), zlib_crc32(data));
    EXPECT_EQ(first_difference(to, data), "");
    auto reads = source.take_reads();
    std::sort(reads.begin(), reads.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
    std::uint64_t covered = 0;
    std::set<std::thread::id> seen;
    for (const auto& read : reads) {
      EXPECT_EQ(read.offset, covered) << "the reads must tile the payload";
      covered = read.offset + read.bytes;
      seen.insert(read.thread);
    }
    EXPECT_EQ(covered, data.size());
    EXPECT_EQ(seen.size(), threads) << "one part per thread";
    EXPECT_TRUE(seen.count(std::this_thread::get_id())) << "the caller takes a part";
    if (call == 0) first_call_threads = seen;
    else EXPECT_EQ(seen, first_call_threads) << "call " << call << " ran on other threads: the pool must be persistent";
  }
}

// A failing read in any part (the caller's, a worker's) throws IoError from the call once every
// part is done; the next call on the same mover works.
TEST_F(PayloadMoverTest, ReadErrorReachesTheCallerAndTheMoverStaysUsable) {
  SCOPED_TRACE(context());
  for (unsigned threads : {1u, 2u, 5u}) {
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    PayloadMover mover({.threads = threads, .piece_bytes = std::size_t(16) << 10, .parallel_from_bytes = 4096});
    const auto data = random_bytes((std::size_t(1) << 20) + 333, rng_);
    WatchedSource source(data);
    std::vector<std::byte> to(data.size());
    for (std::uint64_t bad : {std::uint64_t(0), std::uint64_t(data.size() / 2), std::uint64_t(data.size() - 1)}) {
      source.fail_at(bad);
      EXPECT_THROW(mover.read(source, 0, to), IoError) << "failing at " << bad;
      source.fail_at(std::nullopt);
      poison(to, data);
      const auto crc = static_cast<std::uint32_t>(rng_());
      EXPECT_EQ(mover.read(source, 0, to, crc), zlib_crc32(data, crc)) << "after a failure at " << bad;
      EXPECT_EQ(first_difference(to, data), "") << "after a failure at " << bad;
      source.take_reads();
    }
  }
}

TEST_F(PayloadMoverTest, ReadsARealFileThroughOpenFileSource) {
  SCOPED_TRACE(context());
  const auto data = random_bytes((std::size_t(3) << 20) + 4321, rng_);
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / ("covflow-payload-mover-" + std::to_string(seed_) + ".bin");
  test::write_bytes(path, data);
  struct Remove {
    std::filesystem::path path;
    ~Remove() {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
    }
  } remove{path};
  const auto source = open_file_source(path);
  ASSERT_EQ(source->size(), data.size());
  for (unsigned threads : {1u, 3u}) {
    PayloadMover mover({.threads = threads, .piece_bytes = std::size_t(64) << 10, .parallel_from_bytes = 4096});
    for (auto [offset, destination_offset] : {std::pair<std::size_t, std::size_t>{0, 0}, {17, 3}, {4096, 61}}) {
      const std::size_t size = data.size() - offset - 5;
      const auto expected = std::span<const std::byte>(data).subspan(offset, size);
      std::vector<std::byte> storage(destination_offset + size);
      const auto to = std::span(storage).subspan(destination_offset);
      poison(to, expected);
      const auto crc = static_cast<std::uint32_t>(rng_());
      EXPECT_EQ(mover.read(*source, offset, to, crc), zlib_crc32(expected, crc))
          << threads << " threads, file offset " << offset;
      EXPECT_EQ(first_difference(to, expected), "") << threads << " threads, file offset " << offset;
    }
  }
  // Reading past the end is the source's IoError, passed through.
  PayloadMover mover({.threads = 2, .piece_bytes = std::size_t(64) << 10, .parallel_from_bytes = 4096});
  std::vector<std::byte> too_long(data.size() + 1);
  EXPECT_THROW(mover.read(*source, 0, too_long), IoError);
}

TEST(PayloadMover, CopyRefusesMismatchedOrOverlappingSpans) {
  PayloadMover mover({.threads = 2});
  std::vector<std::byte> buffer(100);
  EXPECT_THROW(mover.copy(std::span(buffer).first(10), std::span(buffer).subspan(50, 11)), std::invalid_argument);
  EXPECT_THROW(mover.copy(std::span(buffer).first(10), std::span(buffer).subspan(5, 10)), std::invalid_argument);
  EXPECT_EQ(mover.copy(std::span(buffer).first(10), std::span(buffer).subspan(10, 10)), zlib_crc32(std::span(buffer).first(10)));
  EXPECT_THROW(PayloadMover no_pieces({.piece_bytes = 0}), std::invalid_argument);
}

TEST(PayloadMover, GatherCopiesAndChecksAPayloadCutIntoPiecesOfAnySize) {
  std::mt19937_64 rng(test::fresh_seed("payload mover gather"));
  for (const bool streaming : {false, true})
  for (unsigned threads : {1u, 3u, 5u}) {
    PayloadMover mover({.threads = threads, .piece_bytes = 4096, .parallel_from_bytes = 1024, .streaming_stores = streaming});
    for (int round = 0; round < 6; ++round) {
      const std::size_t size = round == 0 ? 0 : std::size_t(rng() % (3 << 20));
      const auto payload = random_bytes(size, rng);
      // Cuts at random places, empty pieces included, as a message's parts fall.
      std::vector<std::span<const std::byte>> pieces;
      for (std::size_t at = 0; at < size;) {
        const std::size_t n = std::min<std::size_t>(size - at, rng() % 3 == 0 ? 0 : rng() % (1 << 18) + 1);
        pieces.push_back(std::span(payload).subspan(at, n));
        at += n;
      }
      const std::uint32_t seed = std::uint32_t(rng());
      std::vector<std::byte> to(size);
      poison(to, payload);
      SCOPED_TRACE(::testing::Message() << threads << " threads, " << size << " bytes in " << pieces.size() << " pieces"
                                        << (streaming ? ", streaming stores" : ""));
      EXPECT_EQ(mover.gather_copy(pieces, to, seed), zlib_crc32(payload, seed));
      EXPECT_EQ(first_difference(to, payload), "");
      EXPECT_EQ(mover.gather_check(pieces, seed), zlib_crc32(payload, seed));
    }
  }
  PayloadMover mover({.threads = 2});
  std::vector<std::byte> a(100), b(50);
  const std::span<const std::byte> pieces[] = {a, b};
  EXPECT_THROW(mover.gather_copy(pieces, std::span(a).first(100)), std::invalid_argument);  // overlaps a piece
  std::vector<std::byte> small(149);
  EXPECT_THROW(mover.gather_copy(pieces, small), std::invalid_argument);  // 150 bytes into 149
}

TEST(PayloadMover, WithAPlacementCallbackThePayloadLandsInOrderedStretchesEachWholeWhenReported) {
  std::mt19937_64 rng(test::fresh_seed("payload mover stretches"));
  const std::size_t size = (1 << 20) + 12345;
  const auto payload = random_bytes(size, rng);
  const std::uint32_t seed = std::uint32_t(rng());
  for (unsigned threads : {1u, 4u}) {
    PayloadMover mover({.threads = threads, .piece_bytes = 8192, .parallel_from_bytes = 4096, .stretch_bytes = 100'000});
    std::vector<std::byte> to(size);
    std::vector<std::pair<std::size_t, std::size_t>> stretches;
    std::size_t bad = 0;
    const Placed placed = [&](std::size_t begin, std::size_t end) {
      stretches.emplace_back(begin, end);
      if (!std::equal(to.begin() + std::ptrdiff_t(begin), to.begin() + std::ptrdiff_t(end), payload.begin() + std::ptrdiff_t(begin))) ++bad;
    };
    auto check_stretches = [&](const char* what) {
      SCOPED_TRACE(::testing::Message() << what << ", " << threads << " threads");
      ASSERT_EQ(stretches.size(), (size + 99'999) / 100'000);
      for (std::size_t i = 0; i < stretches.size(); ++i) {
        EXPECT_EQ(stretches[i].first, i * 100'000);
        EXPECT_EQ(stretches[i].second, std::min(size, (i + 1) * 100'000));
      }
      EXPECT_EQ(bad, 0u) << "a stretch was reported before all its bytes had landed";
      stretches.clear();
      bad = 0;
    };
    poison(to, payload);
    EXPECT_EQ(mover.copy(payload, to, seed, placed), zlib_crc32(payload, seed));
    check_stretches("copy");
    poison(to, payload);
    const std::span<const std::byte> pieces[] = {std::span(payload).first(777), std::span(payload).subspan(777)};
    EXPECT_EQ(mover.gather_copy(pieces, to, seed, placed), zlib_crc32(payload, seed));
    check_stretches("gather_copy");
    poison(to, payload);
    auto source = memory_source(payload);
    EXPECT_EQ(mover.read(*source, 0, to, seed, placed), zlib_crc32(payload, seed));
    check_stretches("read");
    EXPECT_EQ(first_difference(to, payload), "");
  }
  EXPECT_THROW(PayloadMover({.stretch_bytes = 0}), std::invalid_argument);
}

}  // namespace
}  // namespace covflow::replay

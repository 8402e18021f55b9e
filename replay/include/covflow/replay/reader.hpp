// Reader: the records of a frame file, in file order, each checked against its CRCs.
//
// Damage never stops a reader. A record whose header or payload does not check out, bytes that
// are not records, a tail cut short mid-record, a damaged index: each becomes one Damage entry
// with its byte offset, and reading resumes at the next valid record header (found by searching
// for the record magic and checking the header CRC there). No buffer is sized from a header
// before its CRC has checked out and its payload has been found to fit in the file.
//
// Only two things throw: a source that is not a frame file at all (bad magic, unknown version:
// FormatError) and a failing read (IoError).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "covflow/replay/byte_source.hpp"
#include "covflow/replay/format.hpp"
#include "covflow/replay/frame.hpp"
#include "covflow/replay/payload_mover.hpp"

namespace covflow::replay {

enum class DamageKind {
  file_header,  // the file header's CRC does not match
  truncated,    // the file ends inside the file header or inside a record
  bad_record,   // bytes that are not a valid record header (bad magic, CRC, fields); skipped
  payload_crc,  // a record whose header is valid but whose CRC over header and payload fails
  index,        // the index or its footer is damaged or disagrees with the records
};
std::string_view name(DamageKind kind);

struct Damage {
  std::uint64_t offset = 0;  // first damaged byte
  std::uint64_t length = 0;  // bytes given up on from there
  DamageKind kind = DamageKind::bad_record;
  std::string detail;

  // "offset N: detail"
  std::string message() const;
};

struct RecordInfo {
  std::uint64_t offset = 0;  // of the record header
  FrameHeader header;
};

class Reader {
 public:
  explicit Reader(const std::filesystem::path& path);
  explicit Reader(std::unique_ptr<ByteSource> source);
  Reader(Reader&&) noexcept;
  Reader& operator=(Reader&&) noexcept;
  ~Reader();

  const std::string& name() const;
  std::uint64_t file_size() const;
  const format::FileHeader& file_header() const { return file_header_; }
  // The index, when the file ends with one that checks out.
  const std::optional<std::vector<format::IndexEntry>>& index() const { return index_; }

  // The next whole record whose CRCs check out; nullopt at the end of the records.
  std::optional<Frame> next();
  // The same without a Frame: the payload is read straight into the start of `payload` and its CRC
  // checked in the same pass by `mover` (several threads), so a 47 MB record costs one pass over
  // memory and no allocation. A record that does not check out is reported as damage and skipped,
  // as next() does (what it left in `payload` is garbage). A record whose payload is larger than
  // `payload` is not read: its header comes back (header CRC checked, payload neither read nor
  // checked) so that the caller can refuse it by its shape. `placed` hears of each stretch of the
  // payload as it lands (PayloadMover::read).
  std::optional<RecordInfo> next_into(std::span<std::byte> payload, PayloadMover& mover, const Placed& placed = {});
  // The next record's header (header CRC checked; the payload is neither read nor checked).
  std::optional<RecordInfo> next_header();
  // The payload of a record next_header() returned, read into the start of `payload` by `mover`
  // and its CRC checked on the way: "" when it checks out, else what is wrong ("offset N: …"; the
  // bytes left in `payload` are garbage). Changes nothing in the reader (neither its position nor
  // its damage list), so several threads may read several records' payloads at once, each with
  // its own mover, while one of them goes on with next_header(). `payload` must hold it. `placed`
  // hears of each stretch as it lands (as for next_into).
  std::string read_payload(const RecordInfo& record, std::span<std::byte> payload, PayloadMover& mover,
                           const Placed& placed = {}) const;
  // Offset of the record the last next()/next_header() returned.
  std::uint64_t last_offset() const { return last_offset_; }

  // Back to the first record.
  void rewind();
  // Positions the reader at the first record, in file order, whose sequence number is at least
  // `sequence` (through the index when there is one, by scanning headers otherwise); false and
  // at the end when there is none.
  bool seek_sequence(std::uint64_t sequence);
  std::uint64_t position() const { return position_; }
  // Positions the reader at `offset`: a record's (last_offset()) or a position() seen before.
  void seek_offset(std::uint64_t offset) { position_ = std::min(std::max(offset, records_begin_), records_end_); }
  // Where the records end: the index's offset, or the file's size.
  std::uint64_t records_end() const { return records_end_; }

  // Everything found wrong so far, each place once, in the order found.
  const std::vector<Damage>& damage() const { return damage_; }

 private:
  void open();
  void load_index();
  // Where advance() puts a payload: a vector (resized to it), or a span through a mover.
  struct PayloadTarget {
    std::vector<std::byte>* vector = nullptr;
    std::span<std::byte> span{};
    PayloadMover* mover = nullptr;
    const Placed* placed = nullptr;
  };
  // Finds the next valid record; with a target, reads its payload there and checks its CRC
  // (skipping records that fail); without one, checks the header alone.
  bool advance(RecordInfo& info, const PayloadTarget* target);
  std::uint64_t find_next_record(std::uint64_t from);
  void report(std::uint64_t offset, std::uint64_t length, DamageKind kind, std::string detail);

  std::unique_ptr<ByteSource> source_;
  format::FileHeader file_header_;
  std::optional<std::vector<format::IndexEntry>> index_;
  std::uint64_t records_begin_ = 0;
  std::uint64_t records_end_ = 0;
  std::uint64_t position_ = 0;
  std::uint64_t last_offset_ = 0;
  std::vector<Damage> damage_;
  std::set<std::uint64_t> reported_;
};

}  // namespace covflow::replay

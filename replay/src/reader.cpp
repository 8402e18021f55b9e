#include "covflow/replay/reader.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "bytes.hpp"
#include "covflow/replay/error.hpp"

namespace covflow::replay {
namespace {

using format::file_header_bytes;
using format::footer_bytes;
using format::index_entry_bytes;
using format::index_header_bytes;
using format::record_header_bytes;

std::string hex(std::span<const std::byte> data) {
  std::string out;
  for (std::size_t i = 0; i < data.size(); ++i)
    out += fmt::format("{}{:02x}", i == 0 ? "" : " ", std::to_integer<unsigned>(data[i]));
  return out;
}

int differing_bits(std::span<const std::byte> data, std::span<const std::uint8_t> expected) {
  int bits = 0;
  for (std::size_t i = 0; i < data.size(); ++i) bits += std::popcount(static_cast<unsigned>(std::to_integer<std::uint8_t>(data[i]) ^ expected[i]));
  return bits;
}

bool has_prefix(std::span<const std::byte> data, std::span<const std::uint8_t> magic) {
  const std::size_t n = std::min(data.size(), magic.size());
  for (std::size_t i = 0; i < n; ++i)
    if (std::to_integer<std::uint8_t>(data[i]) != magic[i]) return false;
  return true;
}

}  // namespace

std::string_view name(DamageKind kind) {
  switch (kind) {
    case DamageKind::file_header: return "file header";
    case DamageKind::truncated: return "truncated";
    case DamageKind::bad_record: return "bad record";
    case DamageKind::payload_crc: return "payload CRC";
    case DamageKind::index: return "index";
  }
  return "unknown";
}

std::string Damage::message() const { return fmt::format("offset {}: {}", offset, detail); }

Reader::Reader(const std::filesystem::path& path) : Reader(open_file_source(path)) {}

Reader::Reader(std::unique_ptr<ByteSource> source) : source_(std::move(source)) { open(); }

Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;
Reader::~Reader() = default;

const std::string& Reader::name() const { return source_->name(); }
std::uint64_t Reader::file_size() const { return source_->size(); }

void Reader::report(std::uint64_t offset, std::uint64_t length, DamageKind kind, std::string detail) {
  if (!reported_.insert(offset).second) return;
  damage_.push_back(Damage{offset, length, kind, std::move(detail)});
}

void Reader::open() {
  const std::uint64_t size = source_->size();
  std::array<std::byte, file_header_bytes> head{};
  const auto have = static_cast<std::size_t>(std::min<std::uint64_t>(size, file_header_bytes));
  source_->read(0, std::span(head).first(have));
  const std::span<const std::byte> magic = std::span(head).first(std::min<std::size_t>(have, 8));

  if (have < file_header_bytes) {
    if (!has_prefix(magic, format::file_magic))
      throw FormatError(fmt::format("{}: offset 0: bad magic {}: not a covflow frame file", name(), hex(magic)), 0);
    report(0, have, DamageKind::truncated,
           fmt::format("the file ends inside its header ({} of {} bytes): no records", have, file_header_bytes));
    records_begin_ = records_end_ = position_ = size;
    return;
  }

  const bool magic_ok = bytes::equal(head.data(), format::file_magic);
  const std::uint32_t stored_crc = bytes::load<std::uint32_t>(head.data() + 28);
  const std::uint32_t computed_crc = format::crc32(std::span(head).first(28));
  const std::uint32_t version = bytes::load<std::uint32_t>(head.data() + 8);
  if (stored_crc == computed_crc) {
    // A header that checks out says what it means: another kind of file, or another version.
    if (!magic_ok)
      throw FormatError(fmt::format("{}: offset 0: bad magic {}: not a covflow frame file", name(), hex(magic)), 0);
    if (version != format::version)
      throw FormatError(fmt::format("{}: offset 8: unknown format version {} (this reader knows version {})", name(),
                                    version, format::version),
                        8);
    file_header_.version = version;
  } else {
    // A header that does not check out is either damage to one of our files (the magic is
    // within two bit flips of ours) or some other file altogether.
    if (differing_bits(magic, format::file_magic) > 2)
      throw FormatError(fmt::format("{}: offset 0: bad magic {}: not a covflow frame file", name(), hex(magic)), 0);
    report(0, file_header_bytes, DamageKind::file_header,
           fmt::format("file header CRC mismatch (stored {:08x}, computed {:08x}); reading the records as version {}",
                       stored_crc, computed_crc, format::version));
    file_header_.version = format::version;
  }
  file_header_.created_unix_ns = bytes::load<std::int64_t>(head.data() + 16);
  records_begin_ = file_header_bytes;
  records_end_ = size;
  load_index();
  position_ = records_begin_;
}

void Reader::load_index() {
  const std::uint64_t size = source_->size();
  if (size < file_header_bytes + index_header_bytes + footer_bytes) return;
  std::array<std::byte, footer_bytes> footer{};
  const std::uint64_t footer_offset = size - footer_bytes;
  source_->read(footer_offset, footer);
  if (!bytes::equal(footer.data() + 20, format::footer_magic)) return;  // no index: scan
  const auto index_offset = bytes::load<std::uint64_t>(footer.data());
  const auto entries = bytes::load<std::uint64_t>(footer.data() + 8);
  // The footer is usable only when its offset and count describe exactly the bytes before it.
  // Otherwise the scanner meets the index block and reports it as damage.
  if (index_offset < file_header_bytes || index_offset > footer_offset ||
      footer_offset - index_offset < index_header_bytes ||
      (footer_offset - index_offset - index_header_bytes) % index_entry_bytes != 0 ||
      (footer_offset - index_offset - index_header_bytes) / index_entry_bytes != entries)
    return;
  records_end_ = index_offset;
  // Bounded by the file: footer_offset - index_offset bytes that exist.
  std::vector<std::byte> block(static_cast<std::size_t>(footer_offset - index_offset));
  source_->read(index_offset, block);
  std::uint32_t computed = format::crc32(block);
  computed = format::crc32(std::span(footer).first(16), computed);
  const auto stored = bytes::load<std::uint32_t>(footer.data() + 16);
  const bool block_ok = bytes::equal(block.data(), format::index_magic) && bytes::load<std::uint32_t>(block.data() + 4) == 0 &&
                        bytes::load<std::uint64_t>(block.data() + 8) == entries;
  if (stored != computed || !block_ok) {
    report(index_offset, size - index_offset, DamageKind::index,
           stored != computed ? fmt::format("index CRC mismatch (stored {:08x}, computed {:08x}); records are found by scanning",
                                            stored, computed)
                              : std::string("index block header does not match its footer; records are found by scanning"));
    return;
  }
  std::vector<format::IndexEntry> parsed(static_cast<std::size_t>(entries));
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    const std::byte* p = block.data() + index_header_bytes + i * index_entry_bytes;
    parsed[i] = {bytes::load<std::uint64_t>(p), bytes::load<std::int64_t>(p + 8), bytes::load<std::uint64_t>(p + 16)};
    if (parsed[i].offset < records_begin_ || parsed[i].offset > index_offset - std::min<std::uint64_t>(index_offset, record_header_bytes)) {
      report(index_offset, size - index_offset, DamageKind::index,
             fmt::format("index entry {} points to offset {}, outside the records; records are found by scanning", i,
                         parsed[i].offset));
      return;
    }
  }
  index_ = std::move(parsed);
}

std::uint64_t Reader::find_next_record(std::uint64_t from) {
  constexpr std::size_t chunk = 1 << 16;
  std::vector<std::byte> buffer;
  std::array<std::byte, record_header_bytes> header{};
  std::uint64_t base = from;
  while (base < records_end_ && records_end_ - base >= record_header_bytes) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(records_end_ - base, chunk));
    buffer.resize(want);
    source_->read(base, buffer);
    for (std::size_t i = 0; i + format::record_magic.size() <= want; ++i) {
      if (!bytes::equal(buffer.data() + i, format::record_magic)) continue;
      const std::uint64_t candidate = base + i;
      if (records_end_ - candidate < record_header_bytes) return records_end_;
      if (i + record_header_bytes <= want) std::memcpy(header.data(), buffer.data() + i, record_header_bytes);
      else source_->read(candidate, header);
      if (!format::record_header_problem(header)) return candidate;
    }
    if (want < format::record_magic.size()) break;
    base += want - (format::record_magic.size() - 1);  // a magic may straddle two chunks
  }
  return records_end_;
}

bool Reader::advance(RecordInfo& info, const PayloadTarget* target) {
  while (position_ < records_end_) {
    const std::uint64_t at = position_;
    const std::uint64_t remaining = records_end_ - at;
    if (remaining < record_header_bytes) {
      std::vector<std::byte> tail(static_cast<std::size_t>(remaining));
      source_->read(at, tail);
      // "C" and "CV" could begin either; they are taken as a record header.
      if (has_prefix(tail, format::record_magic))
        report(at, remaining, DamageKind::truncated,
               fmt::format("the file ends {} bytes into a {}-byte record header: cut short mid-record", remaining,
                           record_header_bytes));
      else if (has_prefix(tail, format::index_magic))
        report(at, remaining, DamageKind::index, fmt::format("incomplete index block ({} bytes); records are found by scanning", remaining));
      else
        report(at, remaining, DamageKind::bad_record, fmt::format("{} trailing bytes are not a record", remaining));
      position_ = records_end_;
      return false;
    }
    std::array<std::byte, record_header_bytes> header{};
    source_->read(at, header);
    if (auto problem = format::record_header_problem(header)) {
      const std::uint64_t next = find_next_record(at + 1);
      const bool index_tail = bytes::equal(header.data(), format::index_magic) && next == records_end_;
      const std::string where = next < records_end_ ? fmt::format("the next record at offset {}", next)
                                                    : std::string("the end of the records");
      if (index_tail)
        report(at, next - at, DamageKind::index,
               fmt::format("damaged or incomplete index ({} bytes to the end); records are found by scanning", next - at));
      else
        report(at, next - at, DamageKind::bad_record, fmt::format("{}; skipped {} bytes to {}", *problem, next - at, where));
      position_ = next;
      continue;
    }
    const format::RawRecordHeader raw = format::decode_record_header(header);
    if (raw.payload_bytes > remaining - record_header_bytes) {
      report(at, remaining, DamageKind::truncated,
             fmt::format("record (sequence {}) needs {} payload bytes but {} remain: cut short mid-record", raw.sequence,
                         raw.payload_bytes, remaining - record_header_bytes));
      position_ = records_end_;
      return false;
    }
    const std::uint64_t end = at + record_header_bytes + raw.payload_bytes;
    info = RecordInfo{at, raw.frame_header()};
    if (target != nullptr) {
      const auto bytes = static_cast<std::size_t>(raw.payload_bytes);  // fits in the file: checked above
      std::span<std::byte> into;
      if (target->vector != nullptr) {
        target->vector->resize(bytes);
        into = *target->vector;
      } else if (bytes <= target->span.size()) {
        into = target->span.first(bytes);
      } else {  // too large for the caller's buffer: the header alone, for the caller to refuse
        position_ = end;
        last_offset_ = at;
        return true;
      }
      const std::uint32_t seed = format::crc32(std::span(header).first(52));
      std::uint32_t computed = 0;
      if (target->mover != nullptr) {
        computed = target->mover->read(*source_, at + record_header_bytes, into, seed,
                                       target->placed != nullptr ? *target->placed : Placed{});
      } else {
        source_->read(at + record_header_bytes, into);
        computed = format::crc32(into, seed);
      }
      if (computed != raw.record_crc) {
        report(at, end - at, DamageKind::payload_crc,
               fmt::format("record (sequence {}) CRC mismatch over header and payload (stored {:08x}, computed {:08x}); "
                           "skipped {} bytes",
                           raw.sequence, raw.record_crc, computed, end - at));
        position_ = end;
        continue;
      }
    }
    position_ = end;
    last_offset_ = at;
    return true;
  }
  return false;
}

std::optional<Frame> Reader::next() {
  RecordInfo info;
  Frame frame;
  const PayloadTarget target{.vector = &frame.payload};
  if (!advance(info, &target)) return std::nullopt;
  frame.header = info.header;
  return frame;
}

std::optional<RecordInfo> Reader::next_into(std::span<std::byte> payload, PayloadMover& mover, const Placed& placed) {
  RecordInfo info;
  const PayloadTarget target{.span = payload, .mover = &mover, .placed = &placed};
  if (!advance(info, &target)) return std::nullopt;
  return info;
}

std::optional<RecordInfo> Reader::next_header() {
  RecordInfo info;
  if (!advance(info, nullptr)) return std::nullopt;
  return info;
}

std::string Reader::read_payload(const RecordInfo& record, std::span<std::byte> payload, PayloadMover& mover,
                                 const Placed& placed) const {
  std::array<std::byte, record_header_bytes> header{};
  if (record.offset + record_header_bytes > records_end_)
    return fmt::format("offset {}: no record header there", record.offset);
  source_->read(record.offset, header);
  if (auto problem = format::record_header_problem(header)) return fmt::format("offset {}: {}", record.offset, *problem);
  const format::RawRecordHeader raw = format::decode_record_header(header);
  if (raw.sequence != record.header.sequence || raw.payload_bytes != record.header.payload_bytes())
    return fmt::format("offset {}: the record there is no longer the one claimed (sequence {})", record.offset,
                       record.header.sequence);
  if (raw.payload_bytes > records_end_ - record.offset - record_header_bytes)
    return fmt::format("offset {}: record (sequence {}) cut short mid-record", record.offset, raw.sequence);
  if (raw.payload_bytes > payload.size())
    return fmt::format("offset {}: record (sequence {}) of {} payload bytes does not fit {}", record.offset, raw.sequence,
                       raw.payload_bytes, payload.size());
  const std::uint32_t seed = format::crc32(std::span(header).first(52));
  const std::uint32_t computed =
      mover.read(*source_, record.offset + record_header_bytes, payload.first(static_cast<std::size_t>(raw.payload_bytes)), seed,
                 placed);
  if (computed != raw.record_crc)
    return fmt::format("offset {}: record (sequence {}) CRC mismatch over header and payload (stored {:08x}, computed {:08x})",
                       record.offset, raw.sequence, raw.record_crc, computed);
  return {};
}

void Reader::rewind() { position_ = records_begin_; }

bool Reader::seek_sequence(std::uint64_t sequence) {
  if (index_) {
    for (const format::IndexEntry& entry : *index_)
      if (entry.sequence >= sequence) {
        position_ = entry.offset;
        return true;
      }
    position_ = records_end_;
    return false;
  }
  rewind();
  while (auto info = next_header())
    if (info->header.sequence >= sequence) {
      position_ = info->offset;
      return true;
    }
  return false;
}

}  // namespace covflow::replay

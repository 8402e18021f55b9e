#include "covflow/replay/format.hpp"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>

#include <fmt/format.h>
#include <zlib.h>
#if COVFLOW_HAS_ISAL
#include <isa-l/crc.h>
#endif

#include "bytes.hpp"
#include "covflow/replay/error.hpp"

namespace covflow::replay::format {

static_assert(std::endian::native == std::endian::little,
              "frame payloads are stored little-endian and copied as they lie in memory");

std::uint32_t crc32(std::span<const std::byte> data, std::uint32_t crc) {
#if COVFLOW_HAS_ISAL
  // Same CRC as zlib's, continuation included: ISA-L inverts `crc` on entry and the result on
  // exit, as zlib does. An empty span may have no data pointer; it changes nothing.
  if (data.empty()) return crc;
  return crc32_gzip_refl(crc, reinterpret_cast<const unsigned char*>(data.data()), data.size());
#else
  // zlib takes a uInt length; feed it in pieces so payloads over 4 GiB would still work.
  auto* p = reinterpret_cast<const Bytef*>(data.data());
  std::size_t left = data.size();
  uLong value = crc;
  while (left > 0) {
    const auto piece = static_cast<uInt>(std::min<std::size_t>(left, UINT_MAX / 2));
    value = ::crc32(value, p, piece);
    p += piece;
    left -= piece;
  }
  return static_cast<std::uint32_t>(value);
#endif
}

std::array<std::byte, file_header_bytes> encode_file_header(const FileHeader& header) {
  std::array<std::byte, file_header_bytes> out{};
  std::memcpy(out.data(), file_magic.data(), file_magic.size());
  bytes::store<std::uint32_t>(out.data() + 8, header.version);
  bytes::store<std::uint32_t>(out.data() + 12, 0);  // flags, none defined
  bytes::store<std::int64_t>(out.data() + 16, header.created_unix_ns);
  bytes::store<std::uint32_t>(out.data() + 24, 0);  // reserved
  bytes::store<std::uint32_t>(out.data() + 28, crc32(std::span(out).first(28)));
  return out;
}

std::array<std::byte, record_header_bytes> encode_record_header(const FrameHeader& h,
                                                                std::span<const std::byte> payload) {
  std::array<std::byte, record_header_bytes> out{};
  std::memcpy(out.data(), record_magic.data(), record_magic.size());
  out[4] = std::byte(h.kind);
  out[5] = std::byte(h.element_type);
  bytes::store<std::uint16_t>(out.data() + 6, 0);
  bytes::store<std::uint64_t>(out.data() + 8, h.sequence);
  bytes::store<std::int64_t>(out.data() + 16, h.capture_time_ns);
  bytes::store<std::uint32_t>(out.data() + 24, h.rows);
  bytes::store<std::uint32_t>(out.data() + 28, h.cols);
  bytes::store<std::uint32_t>(out.data() + 32, h.count);
  bytes::store<std::uint32_t>(out.data() + 36, 0);
  bytes::store<std::uint64_t>(out.data() + 40, payload.size());
  bytes::store<std::uint32_t>(out.data() + 48, crc32(std::span(out).first(48)));
  bytes::store<std::uint32_t>(out.data() + 52, crc32(payload, crc32(std::span(out).first(52))));
  return out;
}

FrameHeader RawRecordHeader::frame_header() const {
  return FrameHeader{sequence, capture_time_ns, PayloadKind(kind), ElementType(element_type), rows, cols, count};
}

RawRecordHeader decode_record_header(std::span<const std::byte, record_header_bytes> in) {
  const std::byte* p = in.data();
  RawRecordHeader h;
  for (std::size_t i = 0; i < 4; ++i) h.magic[i] = std::to_integer<std::uint8_t>(p[i]);
  h.kind = std::to_integer<std::uint8_t>(p[4]);
  h.element_type = std::to_integer<std::uint8_t>(p[5]);
  h.reserved16 = bytes::load<std::uint16_t>(p + 6);
  h.sequence = bytes::load<std::uint64_t>(p + 8);
  h.capture_time_ns = bytes::load<std::int64_t>(p + 16);
  h.rows = bytes::load<std::uint32_t>(p + 24);
  h.cols = bytes::load<std::uint32_t>(p + 28);
  h.count = bytes::load<std::uint32_t>(p + 32);
  h.reserved32 = bytes::load<std::uint32_t>(p + 36);
  h.payload_bytes = bytes::load<std::uint64_t>(p + 40);
  h.header_crc = bytes::load<std::uint32_t>(p + 48);
  h.record_crc = bytes::load<std::uint32_t>(p + 52);
  return h;
}

std::optional<std::string> record_header_problem(std::span<const std::byte, record_header_bytes> in) {
  const RawRecordHeader h = decode_record_header(in);
  if (h.magic != record_magic)
    return fmt::format("bad record magic {:02x} {:02x} {:02x} {:02x} (expected 43 56 52 44, \"CVRD\")", h.magic[0],
                       h.magic[1], h.magic[2], h.magic[3]);
  const std::uint32_t computed = crc32(in.first(48));
  if (computed != h.header_crc)
    return fmt::format("record header CRC mismatch (stored {:08x}, computed {:08x})", h.header_crc, computed);
  if (h.reserved16 != 0 || h.reserved32 != 0)
    return fmt::format("reserved record header fields are not zero ({:04x}, {:08x})", h.reserved16, h.reserved32);
  const FrameHeader frame = h.frame_header();
  if (std::string problem = shape_problem(frame); !problem.empty()) return problem;
  if (h.payload_bytes != frame.payload_bytes())
    return fmt::format("payload length {} does not match {}×{}×{} {} ({} bytes)", h.payload_bytes, h.rows, h.cols,
                       h.count, name(frame.element_type), frame.payload_bytes());
  return std::nullopt;
}

std::vector<std::byte> encode_index(std::span<const IndexEntry> entries, std::uint64_t index_offset) {
  std::vector<std::byte> out(index_header_bytes + entries.size() * index_entry_bytes + footer_bytes);
  std::byte* p = out.data();
  std::memcpy(p, index_magic.data(), index_magic.size());
  bytes::store<std::uint32_t>(p + 4, 0);
  bytes::store<std::uint64_t>(p + 8, entries.size());
  p += index_header_bytes;
  for (const IndexEntry& e : entries) {
    bytes::store<std::uint64_t>(p, e.sequence);
    bytes::store<std::int64_t>(p + 8, e.capture_time_ns);
    bytes::store<std::uint64_t>(p + 16, e.offset);
    p += index_entry_bytes;
  }
  bytes::store<std::uint64_t>(p, index_offset);
  bytes::store<std::uint64_t>(p + 8, entries.size());
  const std::size_t covered = out.size() - footer_bytes + 16;
  bytes::store<std::uint32_t>(p + 16, crc32(std::span(out).first(covered)));
  std::memcpy(p + 20, footer_magic.data(), footer_magic.size());
  return out;
}

std::vector<std::byte> encode_record(const Frame& frame) {
  if (std::string problem = shape_problem(frame.header); !problem.empty())
    throw std::invalid_argument("encode_record: " + problem);
  if (frame.payload.size() != frame.header.payload_bytes())
    throw std::invalid_argument(fmt::format("encode_record: payload of {} bytes, the dimensions say {}",
                                            frame.payload.size(), frame.header.payload_bytes()));
  std::vector<std::byte> out(record_header_bytes + frame.payload.size());
  const auto header = encode_record_header(frame.header, frame.payload);
  std::memcpy(out.data(), header.data(), header.size());
  if (!frame.payload.empty()) std::memcpy(out.data() + record_header_bytes, frame.payload.data(), frame.payload.size());
  return out;
}

Frame decode_record(std::span<const std::byte> in) {
  if (in.size() < record_header_bytes)
    throw FormatError(fmt::format("offset 0: a record needs at least {} bytes, got {}", record_header_bytes, in.size()), 0);
  const auto header_bytes = in.first<record_header_bytes>();
  if (auto problem = record_header_problem(header_bytes)) throw FormatError("offset 0: " + *problem, 0);
  const RawRecordHeader h = decode_record_header(header_bytes);
  const std::uint64_t available = in.size() - record_header_bytes;
  if (h.payload_bytes != available)
    throw FormatError(fmt::format("offset {}: the header says {} payload bytes, {} follow it", record_header_bytes,
                                  h.payload_bytes, available),
                      record_header_bytes);
  const auto payload = in.subspan(record_header_bytes);
  const std::uint32_t computed = crc32(payload, crc32(in.first(52)));
  if (computed != h.record_crc)
    throw FormatError(fmt::format("offset 0: record CRC mismatch (stored {:08x}, computed {:08x})", h.record_crc, computed), 0);
  return Frame{h.frame_header(), std::vector<std::byte>(payload.begin(), payload.end())};
}

}  // namespace covflow::replay::format

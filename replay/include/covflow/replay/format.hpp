// The frame file format, version 1 (docs/frame-format.md is the byte-by-byte reference).
// Everything is little-endian; records are packed one after another with no padding.
//
//   file header   32 bytes   magic, version, creation time, CRC of the header
//   record × n    56-byte record header + payload; the header has its own CRC and a second CRC
//                 covers header and payload, so a reader trusts a length only after checking it
//   index         optional: written when the writer closes; "CVIX", count, (sequence, capture
//                 time, offset) per record, then a 24-byte footer that ends the file
//
// A file cut anywhere (a writer killed mid-record) is readable up to its last whole record by
// scanning; the index only makes seeking fast.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "covflow/replay/frame.hpp"

namespace covflow::replay::format {

inline constexpr std::uint32_t version = 1;

inline constexpr std::size_t file_header_bytes = 32;
inline constexpr std::size_t record_header_bytes = 56;
inline constexpr std::size_t index_header_bytes = 16;
inline constexpr std::size_t index_entry_bytes = 24;
inline constexpr std::size_t footer_bytes = 24;

// 0x89 'C' 'V' 'F' '\r' '\n' 0x1A '\n': the high byte and the line endings catch 7-bit and
// text-mode transfers, as PNG's signature does.
inline constexpr std::array<std::uint8_t, 8> file_magic{0x89, 'C', 'V', 'F', '\r', '\n', 0x1A, '\n'};
inline constexpr std::array<std::uint8_t, 4> record_magic{'C', 'V', 'R', 'D'};
inline constexpr std::array<std::uint8_t, 4> index_magic{'C', 'V', 'I', 'X'};
inline constexpr std::array<std::uint8_t, 4> footer_magic{'C', 'V', 'F', 'T'};

// CRC-32 as zlib, gzip and PNG compute it (reflected polynomial 0xEDB88320, initial value and
// final XOR 0xFFFFFFFF); crc32("123456789") = 0xCBF43926. `crc` continues an earlier value.
std::uint32_t crc32(std::span<const std::byte> bytes, std::uint32_t crc = 0);

struct FileHeader {
  std::uint32_t version = format::version;
  std::int64_t created_unix_ns = 0;  // informational; 0 when unknown
};

std::array<std::byte, file_header_bytes> encode_file_header(const FileHeader& header);

// The record header for `header` and a payload whose CRC-32 continued from the header is
// computed here from `payload`.
std::array<std::byte, record_header_bytes> encode_record_header(const FrameHeader& header,
                                                                std::span<const std::byte> payload);

// A record header as stored, before any check. Decoding never fails: checking is separate so
// that a reader can say exactly what is wrong.
struct RawRecordHeader {
  std::array<std::uint8_t, 4> magic{};
  std::uint8_t kind = 0;
  std::uint8_t element_type = 0;
  std::uint16_t reserved16 = 0;
  std::uint64_t sequence = 0;
  std::int64_t capture_time_ns = 0;
  std::uint32_t rows = 0;
  std::uint32_t cols = 0;
  std::uint32_t count = 0;
  std::uint32_t reserved32 = 0;
  std::uint64_t payload_bytes = 0;
  std::uint32_t header_crc = 0;
  std::uint32_t record_crc = 0;

  FrameHeader frame_header() const;
};

RawRecordHeader decode_record_header(std::span<const std::byte, record_header_bytes> bytes);

// What is wrong with a record header, or nothing: the magic, the header CRC, then the fields
// (known kind and element type, zero reserved fields, possible dimensions, a payload length that
// matches them). `bytes` are the 56 stored bytes the CRC is checked over.
std::optional<std::string> record_header_problem(std::span<const std::byte, record_header_bytes> bytes);

struct IndexEntry {
  std::uint64_t sequence = 0;
  std::int64_t capture_time_ns = 0;
  std::uint64_t offset = 0;  // of the record header, from the start of the file

  bool operator==(const IndexEntry&) const = default;
};

// The index block and footer for records written from `index_offset` on.
std::vector<std::byte> encode_index(std::span<const IndexEntry> entries, std::uint64_t index_offset);

// One record (header and payload) as bytes: the unit a ZeroMQ feed carries (one message each).
std::vector<std::byte> encode_record(const Frame& frame);

// The frame in `bytes`, which must hold exactly one whole record; throws FormatError naming the
// offset of the problem within `bytes` otherwise.
Frame decode_record(std::span<const std::byte> bytes);

}  // namespace covflow::replay::format

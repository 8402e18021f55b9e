// The .npz reader and writer. See npz.hpp for what is read and written; the container is ZIP as
// PKWARE's APPNOTE.TXT (version 6.3) describes it: §4.3.7 local file header, §4.3.12 central
// directory header, §4.3.14–4.3.16 ZIP64 end-of-central-directory record and locator and the end
// record, §4.5.3 the ZIP64 extended information extra field. Members are NPY files, parsed by
// npy.cpp's parser as they are read (inflated on the fly for deflated ones), so a member costs its
// array's memory once.
#include "covflow/io/npz.hpp"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <system_error>
#include <utility>

#include "npy_source.hpp"

namespace covflow::io {
namespace {

using Kind = NpyError::Kind;
using detail::fail;
using detail::File;
using detail::size_phrase;

constexpr std::uint32_t kLocalSignature = 0x04034b50;
constexpr std::uint32_t kCentralSignature = 0x02014b50;
constexpr std::uint32_t kEndSignature = 0x06054b50;
constexpr std::uint32_t kZip64EndSignature = 0x06064b50;
constexpr std::uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr std::size_t kLocalHeaderSize = 30;
constexpr std::size_t kCentralHeaderSize = 46;
constexpr std::size_t kEndSize = 22;
constexpr std::size_t kZip64EndSize = 56;
constexpr std::size_t kZip64LocatorSize = 20;
constexpr std::uint16_t kZip64ExtraId = 0x0001;
constexpr std::uint32_t kMax32 = 0xFFFFFFFF;
constexpr std::uint16_t kMax16 = 0xFFFF;
constexpr std::uint16_t kMethodStored = 0;
constexpr std::uint16_t kMethodDeflated = 8;
// "Version needed to extract": 2.0 for stored and deflated members, 4.5 once ZIP64 records appear
// (APPNOTE §4.4.3.2).
constexpr std::uint16_t kVersionDefault = 20;
constexpr std::uint16_t kVersionZip64 = 45;
// Deflate cannot expand by more than 1032:1 (a 258-byte match costs at least two bits), so a
// deflated member's stated size beyond that is a lie, refused before anything is allocated for it.
constexpr std::uint64_t kDeflateMaxRatio = 1032;
// zlib counts in uInt: its calls take at most this much at a time.
constexpr std::size_t kZlibChunk = std::size_t(1) << 30;

std::string hex32(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

std::uint32_t crc_update(std::uint32_t crc, const void* data, std::size_t count) {
  const auto* bytes = static_cast<const Bytef*>(data);
  while (count > 0) {
    const std::size_t step = std::min(count, kZlibChunk);
    crc = static_cast<std::uint32_t>(::crc32(crc, bytes, static_cast<uInt>(step)));
    bytes += step;
    count -= step;
  }
  return crc;
}

// ---- little-endian fields ----------------------------------------------------------------------

void put16(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 2; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}
void put32(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}
void put64(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

std::uint64_t get_le(const unsigned char* at, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= std::uint64_t(at[i]) << (8 * i);
  return value;
}
std::uint16_t get16(const unsigned char* at) { return static_cast<std::uint16_t>(get_le(at, 2)); }
std::uint32_t get32(const unsigned char* at) { return static_cast<std::uint32_t>(get_le(at, 4)); }
std::uint64_t get64(const unsigned char* at) { return get_le(at, 8); }

// ---- writing -----------------------------------------------------------------------------------

// The MS-DOS date and time of every member: 1980-01-01 00:00, the earliest ZIP can say, so that
// the same arrays always make the same archive.
constexpr std::uint16_t kDosTime = 0;
constexpr std::uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;

struct WrittenEntry {
  std::string file_name;
  std::uint32_t crc = 0;
  std::uint64_t size = 0;    // stored: compressed and uncompressed alike
  std::uint64_t offset = 0;  // of its local header
};

std::string local_header(const WrittenEntry& e, std::uint64_t threshold) {
  const bool zip64 = e.size >= threshold;
  std::string out;
  put32(out, kLocalSignature);
  put16(out, zip64 ? kVersionZip64 : kVersionDefault);
  put16(out, 0);  // flags: no encryption, sizes known up front (no data descriptor), ASCII-safe names
  put16(out, kMethodStored);
  put16(out, kDosTime);
  put16(out, kDosDate);
  put32(out, e.crc);
  put32(out, zip64 ? kMax32 : e.size);  // compressed
  put32(out, zip64 ? kMax32 : e.size);  // uncompressed
  put16(out, e.file_name.size());
  put16(out, zip64 ? 20 : 0);
  out += e.file_name;
  if (zip64) {
    // In a local header the ZIP64 field holds both sizes (APPNOTE §4.5.3).
    put16(out, kZip64ExtraId);
    put16(out, 16);
    put64(out, e.size);
    put64(out, e.size);
  }
  return out;
}

std::string central_header(const WrittenEntry& e, std::uint64_t threshold) {
  const bool big_size = e.size >= threshold, big_offset = e.offset >= threshold;
  // In the central directory only the fields that overflow are in the ZIP64 field, in the order
  // uncompressed size, compressed size, local header offset.
  std::string extra;
  if (big_size || big_offset) {
    put16(extra, kZip64ExtraId);
    put16(extra, (big_size ? 16 : 0) + (big_offset ? 8 : 0));
    if (big_size) {
      put64(extra, e.size);
      put64(extra, e.size);
    }
    if (big_offset) put64(extra, e.offset);
  }
  std::string out;
  put32(out, kCentralSignature);
  put16(out, (3 << 8) | kVersionZip64);  // made by: Unix, APPNOTE 4.5
  put16(out, extra.empty() ? kVersionDefault : kVersionZip64);
  put16(out, 0);
  put16(out, kMethodStored);
  put16(out, kDosTime);
  put16(out, kDosDate);
  put32(out, e.crc);
  put32(out, big_size ? kMax32 : e.size);
  put32(out, big_size ? kMax32 : e.size);
  put16(out, e.file_name.size());
  put16(out, extra.size());
  put16(out, 0);                  // comment
  put16(out, 0);                  // disk number start
  put16(out, 0);                  // internal attributes
  put32(out, (0100644u) << 16);   // external: a regular file, rw-r--r--
  put32(out, big_offset ? kMax32 : e.offset);
  out += e.file_name;
  out += extra;
  return out;
}

std::string end_records(std::uint64_t entries, std::uint64_t cd_offset, std::uint64_t cd_size, std::uint64_t threshold) {
  const bool many = entries >= std::min<std::uint64_t>(kMax16, threshold);
  const bool big_size = cd_size >= threshold, big_offset = cd_offset >= threshold;
  std::string out;
  if (many || big_size || big_offset) {
    const std::uint64_t record_offset = cd_offset + cd_size;
    put32(out, kZip64EndSignature);
    put64(out, kZip64EndSize - 12);  // the record's size less its first 12 bytes
    put16(out, (3 << 8) | kVersionZip64);
    put16(out, kVersionZip64);
    put32(out, 0);  // this disk
    put32(out, 0);  // the disk where the central directory starts
    put64(out, entries);
    put64(out, entries);
    put64(out, cd_size);
    put64(out, cd_offset);
    put32(out, kZip64LocatorSignature);
    put32(out, 0);  // the disk of the ZIP64 end record
    put64(out, record_offset);
    put32(out, 1);  // disks in all
  }
  put32(out, kEndSignature);
  put16(out, 0);
  put16(out, 0);
  put16(out, many ? kMax16 : entries);
  put16(out, many ? kMax16 : entries);
  put32(out, big_size ? kMax32 : cd_size);
  put32(out, big_offset ? kMax32 : cd_offset);
  put16(out, 0);  // comment
  return out;
}

std::filesystem::path temporary_beside(const std::filesystem::path& path) {
  std::random_device device;
  const std::string name = "." + path.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                           std::to_string(device());
  return path.parent_path() / name;
}

// ---- reading -----------------------------------------------------------------------------------

struct CentralEntry {
  std::string file_name;
  std::uint16_t method = 0;
  std::uint32_t crc = 0;
  std::uint64_t compressed = 0, uncompressed = 0, offset = 0;
};

// Positioned reads of the archive with its errors in the module's words.
class Archive {
 public:
  Archive(std::FILE* file, std::uint64_t size, const std::string& where) : file_(file), size_(size), where_(where) {}
  std::uint64_t size() const { return size_; }
  std::FILE* file() const { return file_; }

  void seek(std::uint64_t offset) {
    if (offset > size_ || ::fseeko(file_, static_cast<off_t>(offset), SEEK_SET) != 0)
      fail(Kind::io, where_, "cannot seek to offset " + std::to_string(offset) + ": " + std::strerror(errno));
  }
  void read(void* into, std::size_t count, const std::string& what) {
    if (count == 0) return;
    if (std::fread(into, 1, count, file_) != count) {
      if (std::ferror(file_)) fail(Kind::io, where_, "read error in " + what + ": " + std::strerror(errno));
      fail(Kind::damaged, where_, "truncated: the file ended while reading " + what);
    }
  }
  void read_at(std::uint64_t offset, void* into, std::size_t count, const std::string& what) {
    seek(offset);
    read(into, count, what);
  }

 private:
  std::FILE* file_;
  std::uint64_t size_;
  const std::string& where_;
};

// A member's bytes, read from the archive as the parser asks for them; both kinds verify the
// CRC-32 in finish().
class MemberSource : public detail::NpySource {
 public:
  // Throws unless every byte was read, the data ends where the central directory says, and the
  // CRC-32 matches.
  virtual void finish(std::uint32_t expected_crc) = 0;

 protected:
  void check_crc(std::uint32_t expected, const std::string& where) const {
    if (crc_ != expected)
      fail(Kind::damaged, where,
           "CRC-32 mismatch: the member's data has " + hex32(crc_) + ", the central directory says " + hex32(expected) +
               " (the archive is damaged)");
  }
  std::uint32_t crc_ = 0;
};

class StoredSource final : public MemberSource {
 public:
  StoredSource(Archive& archive, std::uint64_t offset, std::uint64_t size, const std::string& where)
      : archive_(archive), size_(size), where_(where) {
    archive_.seek(offset);
  }
  std::uint64_t size() const override { return size_; }
  void read(void* into, std::size_t count, const char* what) override {
    if (count > size_ - consumed_) fail(Kind::damaged, where_, std::string("truncated: the member ended while reading ") + what);
    archive_.read(into, count, what);
    crc_ = crc_update(crc_, into, count);
    consumed_ += count;
  }
  void finish(std::uint32_t expected_crc) override {
    if (consumed_ != size_)
      fail(Kind::damaged, where_, size_phrase(size_ - consumed_) + " of the member were not read");
    check_crc(expected_crc, where_);
  }

 private:
  Archive& archive_;
  std::uint64_t size_, consumed_ = 0;
  const std::string& where_;
};

// Raw deflate (no zlib or gzip wrapper, as ZIP stores it), inflated as the parser reads.
class DeflatedSource final : public MemberSource {
 public:
  DeflatedSource(Archive& archive, std::uint64_t offset, std::uint64_t compressed, std::uint64_t size,
                 const std::string& where)
      : archive_(archive), compressed_left_(compressed), size_(size), where_(where) {
    archive_.seek(offset);
    if (::inflateInit2(&stream_, -MAX_WBITS) != Z_OK) throw std::bad_alloc();
  }
  ~DeflatedSource() override { ::inflateEnd(&stream_); }
  DeflatedSource(const DeflatedSource&) = delete;
  DeflatedSource& operator=(const DeflatedSource&) = delete;

  std::uint64_t size() const override { return size_; }

  void read(void* into, std::size_t count, const char* what) override {
    auto* out = static_cast<unsigned char*>(into);
    std::size_t left = count;
    while (left > 0) {
      if (ended_)
        fail(Kind::damaged, where_,
             "the deflated data ends after " + size_phrase(produced_) + " while reading " + what +
                 "; the central directory says " + size_phrase(size_));
      const std::size_t step = std::min(left, kZlibChunk);
      const std::size_t made = inflate_into(out, step, what);
      crc_ = crc_update(crc_, out, made);
      out += made;
      left -= made;
      produced_ += made;
    }
  }

  void finish(std::uint32_t expected_crc) override {
    // The stream must end here: one more byte out of it is data the central directory does not count.
    unsigned char extra = 0;
    while (!ended_) {
      if (inflate_into(&extra, 1, "the end of the deflated data") != 0)
        fail(Kind::damaged, where_,
             "the deflated data holds more than the " + size_phrase(size_) + " the central directory says");
    }
    check_crc(expected_crc, where_);
  }

 private:
  // Up to `count` bytes (fewer only when the stream ends); refills the input as it runs dry.
  std::size_t inflate_into(unsigned char* out, std::size_t count, const char* what) {
    stream_.next_out = out;
    stream_.avail_out = static_cast<uInt>(count);
    while (stream_.avail_out > 0 && !ended_) {
      if (stream_.avail_in == 0) {
        if (compressed_left_ == 0)
          fail(Kind::damaged, where_,
               std::string("truncated: the compressed data ran out while reading ") + what + " (after " +
                   size_phrase(produced_ + (count - stream_.avail_out)) + " of " + size_phrase(size_) + ")");
        const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(compressed_left_, input_.size()));
        archive_.read(input_.data(), chunk, std::string("the compressed data of ") + what);
        compressed_left_ -= chunk;
        stream_.next_in = input_.data();
        stream_.avail_in = static_cast<uInt>(chunk);
      }
      const int rc = ::inflate(&stream_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        ended_ = true;
      } else if (rc == Z_MEM_ERROR) {
        throw std::bad_alloc();
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        fail(Kind::damaged, where_,
             std::string("corrupt deflated data while reading ") + what + " (zlib: " +
                 (stream_.msg != nullptr ? stream_.msg : "error " + std::to_string(rc)) + ")");
      }
    }
    return count - stream_.avail_out;
  }

  Archive& archive_;
  std::uint64_t compressed_left_, size_, produced_ = 0;
  const std::string& where_;
  z_stream stream_{};
  bool ended_ = false;
  std::array<unsigned char, 1 << 16> input_{};
};

std::string method_name(std::uint16_t method) {
  switch (method) {
    case 1: return " (shrunk)";
    case 6: return " (imploded)";
    case 9: return " (deflate64)";
    case 12: return " (bzip2)";
    case 14: return " (LZMA)";
    case 93: return " (Zstandard)";
    case 95: return " (XZ)";
    case 99: return " (AES-encrypted)";
    default: return "";
  }
}

// Where the central directory lies, from the end record (and the ZIP64 one when present).
struct Directory {
  std::uint64_t entries = 0, offset = 0, size = 0;
  std::uint64_t end = 0;  // where the records after the directory start: nothing of it may pass this
};

Directory find_directory(Archive& archive, const std::string& where) {
  const std::uint64_t file_size = archive.size();
  if (file_size == 0) fail(Kind::damaged, where, "empty file (0 bytes), not an .npz archive");
  std::array<unsigned char, 8> start{};
  const std::size_t start_bytes = static_cast<std::size_t>(std::min<std::uint64_t>(file_size, start.size()));
  archive.read_at(0, start.data(), start_bytes, "the first bytes");
  // The end record is the last 22 bytes, unless an archive comment (at most 65535 bytes) follows it.
  const std::size_t tail = static_cast<std::size_t>(std::min<std::uint64_t>(file_size, kEndSize + kMax16));
  std::vector<unsigned char> bytes(tail);
  archive.read_at(file_size - tail, bytes.data(), tail, "the end of the archive");
  std::optional<std::size_t> found;
  for (std::size_t i = tail >= kEndSize ? tail - kEndSize + 1 : 0; i-- > 0;) {
    if (get32(&bytes[i]) == kEndSignature && i + kEndSize + get16(&bytes[i + 20]) == tail) {
      found = i;
      break;
    }
  }
  if (!found) {
    if (start_bytes >= 6 && std::memcmp(start.data(), "\x93NUMPY", 6) == 0)
      fail(Kind::damaged, where, "not an .npz archive: this is an NPY file (one array, as numpy.save writes it)");
    if (start_bytes >= 4 && get32(start.data()) == kLocalSignature)
      fail(Kind::damaged, where,
           "damaged ZIP archive: no end-of-central-directory record in its last " + size_phrase(tail) +
               " (the archive is truncated or was never finished)");
    std::string seen;
    for (std::size_t i = 0; i < std::min<std::size_t>(start_bytes, 4); ++i) {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%s%02x", i ? " " : "", start[i]);
      seen += hex;
    }
    fail(Kind::damaged, where,
         "not an .npz archive: no ZIP end-of-central-directory record (the file starts with " + seen +
             ", a ZIP archive with 50 4b 03 04, \"PK\\x03\\x04\")");
  }
  const unsigned char* end = &bytes[*found];
  const std::uint64_t end_offset = file_size - tail + *found;
  Directory dir;
  std::uint32_t disk = get16(end + 4), cd_disk = get16(end + 6);
  std::uint64_t disk_entries = get16(end + 8);
  dir.entries = get16(end + 10);
  dir.size = get32(end + 12);
  dir.offset = get32(end + 16);
  dir.end = end_offset;

  // A ZIP64 locator sits right before the end record.
  std::array<unsigned char, kZip64LocatorSize> locator{};
  if (end_offset >= kZip64LocatorSize) {
    archive.read_at(end_offset - kZip64LocatorSize, locator.data(), locator.size(), "the ZIP64 locator");
    if (get32(locator.data()) == kZip64LocatorSignature) {
      const std::uint64_t record = get64(&locator[8]);
      if (get32(&locator[4]) != 0 || get32(&locator[16]) > 1)
        fail(Kind::unsupported, where, "a multi-disk (split) ZIP archive; covflow reads single-file archives");
      const std::uint64_t limit = end_offset - kZip64LocatorSize;
      if (record > limit || limit - record < kZip64EndSize)
        fail(Kind::damaged, where,
             "the ZIP64 locator puts the ZIP64 end record at offset " + std::to_string(record) +
                 ", which leaves no room for it before offset " + std::to_string(limit));
      std::array<unsigned char, kZip64EndSize> z{};
      archive.read_at(record, z.data(), z.size(), "the ZIP64 end-of-central-directory record");
      if (get32(z.data()) != kZip64EndSignature)
        fail(Kind::damaged, where,
             "no ZIP64 end-of-central-directory record at offset " + std::to_string(record) + ", where its locator says");
      disk = get32(&z[16]);
      cd_disk = get32(&z[20]);
      disk_entries = get64(&z[24]);
      dir.entries = get64(&z[32]);
      dir.size = get64(&z[40]);
      dir.offset = get64(&z[48]);
      dir.end = record;
    }
  }
  if (disk != 0 || cd_disk != 0 || disk_entries != dir.entries)
    fail(Kind::unsupported, where, "a multi-disk (split) ZIP archive; covflow reads single-file archives");
  if (dir.offset > dir.end || dir.size > dir.end - dir.offset)
    fail(Kind::damaged, where,
         "the end record puts the central directory at offset " + std::to_string(dir.offset) + ", " +
             size_phrase(dir.size) + " long, past the " + size_phrase(dir.end) + " before the end record");
  if (dir.entries > dir.size / kCentralHeaderSize)
    fail(Kind::damaged, where,
         "the end record counts " + std::to_string(dir.entries) + " members, more than a central directory of " +
             size_phrase(dir.size) + " can hold");
  return dir;
}

std::vector<CentralEntry> read_directory(Archive& archive, const Directory& dir, const std::string& where) {
  std::vector<unsigned char> cd(static_cast<std::size_t>(dir.size));
  archive.read_at(dir.offset, cd.data(), cd.size(), "the central directory");
  std::vector<CentralEntry> entries;
  entries.reserve(static_cast<std::size_t>(dir.entries));
  std::set<std::string> names;
  std::size_t pos = 0;
  for (std::uint64_t index = 0; index < dir.entries; ++index) {
    const std::string which = "central directory entry " + std::to_string(index);
    if (cd.size() - pos < kCentralHeaderSize || get32(&cd[pos]) != kCentralSignature)
      fail(Kind::damaged, where, which + " (offset " + std::to_string(dir.offset + pos) + ") is not a central directory header");
    const unsigned char* h = &cd[pos];
    const std::uint16_t flags = get16(h + 8);
    CentralEntry e;
    e.method = get16(h + 10);
    e.crc = get32(h + 16);
    e.compressed = get32(h + 20);
    e.uncompressed = get32(h + 24);
    const std::size_t name_length = get16(h + 28), extra_length = get16(h + 30), comment_length = get16(h + 32);
    std::uint32_t disk_start = get16(h + 34);
    e.offset = get32(h + 42);
    if (cd.size() - pos - kCentralHeaderSize < name_length + extra_length + comment_length)
      fail(Kind::damaged, where, which + "'s name, extra field and comment run past the central directory");
    e.file_name.assign(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_length);
    const std::string member_where = where + ": " + e.file_name;

    // The ZIP64 field holds, in this order, each of these that the header itself gives as all ones.
    const unsigned char* extra = h + kCentralHeaderSize + name_length;
    bool zip64_seen = false;
    for (std::size_t at = 0; at + 4 <= extra_length;) {
      const std::uint16_t id = get16(extra + at), length = get16(extra + at + 2);
      if (at + 4 + length > extra_length)
        fail(Kind::damaged, member_where, "an extra field runs past the end of the central directory header");
      if (id == kZip64ExtraId) {
        zip64_seen = true;
        const unsigned char* field = extra + at + 4;
        std::size_t used = 0;
        auto take = [&](std::uint64_t& value, std::size_t bytes, const char* name) {
          if (used + bytes > length)
            fail(Kind::damaged, member_where,
                 std::string("the ZIP64 extra field is too short to hold the ") + name + " the header defers to it");
          value = get_le(field + used, static_cast<int>(bytes));
          used += bytes;
        };
        if (e.uncompressed == kMax32) take(e.uncompressed, 8, "uncompressed size");
        if (e.compressed == kMax32) take(e.compressed, 8, "compressed size");
        if (e.offset == kMax32) take(e.offset, 8, "local header offset");
        if (disk_start == kMax16) {
          std::uint64_t disk = 0;
          take(disk, 4, "disk number");
          disk_start = static_cast<std::uint32_t>(disk);
        }
      }
      at += 4 + std::size_t(length);
    }
    if (!zip64_seen && (e.uncompressed == kMax32 || e.compressed == kMax32 || e.offset == kMax32))
      fail(Kind::damaged, member_where, "a size or offset of 0xFFFFFFFF with no ZIP64 extra field to give it");
    pos += kCentralHeaderSize + name_length + extra_length + comment_length;

    if (disk_start != 0)
      fail(Kind::unsupported, where, "a multi-disk (split) ZIP archive; covflow reads single-file archives");
    if (flags & 0x41)
      fail(Kind::unsupported, member_where, "an encrypted member; covflow reads unencrypted archives, as numpy writes them");
    if (e.method != kMethodStored && e.method != kMethodDeflated)
      fail(Kind::unsupported, member_where,
           "compression method " + std::to_string(e.method) + method_name(e.method) +
               "; covflow reads stored (0) and deflated (8) members, as numpy.savez and numpy.savez_compressed "
               "write them");
    if (e.file_name.size() <= 4 || !e.file_name.ends_with(".npy"))
      fail(Kind::unsupported, member_where,
           "not an array: an .npz member's name is KEY.npy (numpy.load hands other members out as raw bytes, "
           "covflow refuses them)");
    if (!names.insert(e.file_name).second)
      fail(Kind::damaged, member_where, "the archive holds two members of this name");
    entries.push_back(std::move(e));
  }
  return entries;
}

NpyArray read_member(Archive& archive, const CentralEntry& e, const Directory& dir, const std::string& where) {
  const std::string member_where = where + ": " + e.file_name;
  // Members precede the central directory.
  if (e.offset > dir.offset || dir.offset - e.offset < kLocalHeaderSize)
    fail(Kind::damaged, member_where,
         "the central directory puts its local header at offset " + std::to_string(e.offset) +
             ", which leaves no room for it before the central directory at offset " + std::to_string(dir.offset));
  std::array<unsigned char, kLocalHeaderSize> h{};
  archive.read_at(e.offset, h.data(), h.size(), "the local header of " + e.file_name);
  if (get32(h.data()) != kLocalSignature)
    fail(Kind::damaged, member_where,
         "no local file header at offset " + std::to_string(e.offset) + ", where the central directory says");
  const std::uint16_t method = get16(&h[8]);
  const std::uint64_t name_length = get16(&h[26]), extra_length = get16(&h[28]);
  const std::uint64_t data_offset = e.offset + kLocalHeaderSize + name_length + extra_length;
  if (data_offset > dir.offset || e.compressed > dir.offset - data_offset)
    fail(Kind::damaged, member_where,
         size_phrase(e.compressed) + " of data at offset " + std::to_string(data_offset) +
             " run past the central directory at offset " + std::to_string(dir.offset));
  std::string local_name(static_cast<std::size_t>(name_length), '\0');
  archive.read(local_name.data(), local_name.size(), "the local header of " + e.file_name);
  if (local_name != e.file_name || method != e.method)
    fail(Kind::damaged, member_where,
         "the local header (name '" + local_name + "', method " + std::to_string(method) +
             ") disagrees with the central directory");

  if (e.method == kMethodStored) {
    if (e.compressed != e.uncompressed)
      fail(Kind::damaged, member_where,
           "a stored member whose compressed size (" + size_phrase(e.compressed) + ") differs from its size (" +
               size_phrase(e.uncompressed) + ")");
    StoredSource source(archive, data_offset, e.uncompressed, member_where);
    NpyArray array = detail::parse_npy(source, member_where);
    source.finish(e.crc);
    return array;
  }
  if (e.uncompressed / kDeflateMaxRatio > e.compressed)
    fail(Kind::damaged, member_where,
         "the central directory says " + size_phrase(e.uncompressed) + " inflated from " + size_phrase(e.compressed) +
             ", more than deflate's largest ratio of 1032:1 allows");
  DeflatedSource source(archive, data_offset, e.compressed, e.uncompressed, member_where);
  NpyArray array = detail::parse_npy(source, member_where);
  source.finish(e.crc);
  return array;
}

}  // namespace

std::vector<NpzMember> read_npz(const std::filesystem::path& path) {
  const std::string where = path.string();
  File file(path, "rb");
  if (file.get() == nullptr) fail(Kind::io, where, std::string("cannot open: ") + std::strerror(errno));
  struct stat st{};
  if (::fstat(::fileno(file.get()), &st) != 0) fail(Kind::io, where, std::string("cannot stat: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail(Kind::io, where, "is a directory, not an .npz archive");
  if (!S_ISREG(st.st_mode))
    fail(Kind::io, where, "is not a regular file (covflow reads an .npz archive from its end, so needs its size)");
  Archive archive(file.get(), static_cast<std::uint64_t>(st.st_size), where);
  const Directory dir = find_directory(archive, where);
  const std::vector<CentralEntry> entries = read_directory(archive, dir, where);
  std::vector<NpzMember> members;
  members.reserve(entries.size());
  for (const CentralEntry& e : entries)
    members.push_back({e.file_name.substr(0, e.file_name.size() - 4), read_member(archive, e, dir, where)});
  return members;
}

const NpzMember* find_member(std::span<const NpzMember> members, std::string_view name) {
  for (const NpzMember& m : members)
    if (m.name == name) return &m;
  return nullptr;
}

void write_npz(const std::filesystem::path& path, std::span<const NpzMember> members, const NpzWriteOptions& options) {
  const std::string where = path.string();
  std::set<std::string_view> names;
  for (const NpzMember& m : members) {
    if (m.name.empty()) fail(Kind::argument, where, "cannot write: a member with an empty name");
    if (m.name.size() + 4 > kMax16) fail(Kind::argument, where, "cannot write: a member name longer than ZIP allows");
    if (!names.insert(m.name).second) fail(Kind::argument, where, "cannot write: two members named '" + m.name + "'");
    const std::uint64_t count = m.array.element_count();
    const std::uint64_t item = item_size(m.array.dtype);
    if (count > std::numeric_limits<std::uint64_t>::max() / item || count * item != m.array.bytes.size())
      fail(Kind::argument, where,
           "cannot write member '" + m.name + "': shape " + format_shape(m.array.shape) + " " +
               std::string(numpy_name(m.array.dtype)) + " does not match its " + size_phrase(m.array.bytes.size()) +
               " of data");
  }

  const std::filesystem::path temporary = temporary_beside(path);
  File file(temporary, "wb");
  if (file.get() == nullptr)
    fail(Kind::io, where, std::string("cannot create (as ") + temporary.filename().string() + "): " + std::strerror(errno));
  const std::uint64_t threshold = options.zip64_threshold;
  std::uint64_t offset = 0;
  // A write that fails leaves nothing behind: not the temporary, and not a partial archive at `path`.
  auto fail_and_remove = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    file.close();
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    fail(Kind::io, where, what + reason);
  };
  auto put = [&](const void* data, std::size_t count) {
    if (count > 0 && std::fwrite(data, 1, count, file.get()) != count) fail_and_remove("write error: ");
    offset += count;
  };

  std::vector<WrittenEntry> written;
  written.reserve(members.size());
  for (const NpzMember& m : members) {
    const std::string header = npy_header(m.array.dtype, m.array.shape, m.array.fortran_order);
    WrittenEntry e;
    e.file_name = m.name + ".npy";
    e.size = header.size() + m.array.bytes.size();
    e.offset = offset;
    e.crc = crc_update(crc_update(0, header.data(), header.size()), m.array.bytes.data(), m.array.bytes.size());
    const std::string local = local_header(e, threshold);
    put(local.data(), local.size());
    put(header.data(), header.size());
    put(m.array.bytes.data(), m.array.bytes.size());
    written.push_back(std::move(e));
  }
  const std::uint64_t cd_offset = offset;
  for (const WrittenEntry& e : written) {
    const std::string central = central_header(e, threshold);
    put(central.data(), central.size());
  }
  const std::string end = end_records(written.size(), cd_offset, offset - cd_offset, threshold);
  put(end.data(), end.size());
  if (!file.close()) fail_and_remove("write error on close: ");
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    fail(Kind::io, where, "cannot rename " + temporary.filename().string() + " to it: " + error.message());
  }
}

bool looks_like_zip(const std::filesystem::path& path) {
  File file(path, "rb");
  if (file.get() == nullptr) return false;
  std::array<unsigned char, 4> magic{};
  if (std::fread(magic.data(), 1, magic.size(), file.get()) != magic.size()) return false;
  const std::uint32_t signature = get32(magic.data());
  return signature == kLocalSignature || signature == kEndSignature;
}

}  // namespace covflow::io

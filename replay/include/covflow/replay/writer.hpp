// Writer: frames into a frame file. Each record (header and payload) goes to the operating
// system in one write call before write() returns, so a writer killed at any moment leaves a
// file that reads back whole up to its last complete record; the index goes at the end when the
// writer is closed. With sync_each_record the record is also on the disk (fdatasync) before
// write() returns, which survives a power cut too, at the cost of a disk round trip per frame.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "covflow/replay/format.hpp"
#include "covflow/replay/frame.hpp"

namespace covflow::replay {

struct WriterOptions {
  bool overwrite = false;         // replace an existing file (otherwise opening one fails)
  bool write_index = true;        // index and footer when closed
  bool sync_each_record = false;  // fdatasync after every record
};

class Writer {
 public:
  // Creates the file and writes its header; throws IoError naming the path and the reason.
  explicit Writer(const std::filesystem::path& path, const WriterOptions& options = {});
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  // Closes the file, writing the index; errors are swallowed here, so call close() to see them.
  ~Writer();

  // Throws std::invalid_argument when the header cannot describe a frame or the payload's size
  // differs from the one the dimensions give, IoError when the system fails.
  void write(const FrameHeader& header, std::span<const std::byte> payload);
  void write(const Frame& frame) { write(frame.header, frame.payload); }

  // Writes the index (unless disabled) and closes the file. Idempotent.
  void close();

  const std::filesystem::path& path() const { return path_; }
  std::uint64_t records() const { return index_.size(); }
  // Bytes written so far, file header included.
  std::uint64_t bytes() const { return offset_; }

 private:
  void write_all(std::span<const std::span<const std::byte>> pieces);

  std::filesystem::path path_;
  WriterOptions options_;
  int fd_ = -1;
  std::uint64_t offset_ = 0;
  std::vector<format::IndexEntry> index_;
};

}  // namespace covflow::replay

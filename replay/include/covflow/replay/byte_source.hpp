// Where a reader's bytes come from: a file, or memory (the fuzzer, tests, a received message).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

namespace covflow::replay {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Bytes available, fixed when the source was opened.
  virtual std::uint64_t size() const = 0;
  // Fills `out` from `offset`; offset + out.size() <= size(). Throws IoError when the system fails.
  // Must be safe to call from several threads at once on disjoint ranges (PayloadMover::read does);
  // both sources below are (pread, memcpy).
  virtual void read(std::uint64_t offset, std::span<std::byte> out) = 0;
  // What error messages call the source: a path, or "<memory>".
  virtual const std::string& name() const = 0;
};

// Opens `path` for reading; throws IoError naming the path and the system's reason.
std::unique_ptr<ByteSource> open_file_source(const std::filesystem::path& path);

// A view of bytes someone else owns (they must outlive the source).
std::unique_ptr<ByteSource> memory_source(std::span<const std::byte> bytes, std::string name = "<memory>");

}  // namespace covflow::replay

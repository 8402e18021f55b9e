#include "covflow/replay/byte_source.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "covflow/replay/error.hpp"

namespace covflow::replay {
namespace {

class FileSource final : public ByteSource {
 public:
  explicit FileSource(const std::filesystem::path& path) : name_(path.string()) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw IoError(fmt::format("{}: cannot open: {}", name_, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      const int saved = errno;
      ::close(fd_);
      throw IoError(fmt::format("{}: cannot stat: {}", name_, std::strerror(saved)));
    }
    if (S_ISDIR(st.st_mode)) {
      ::close(fd_);
      throw IoError(fmt::format("{}: is a directory, not a frame file", name_));
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  std::uint64_t size() const override { return size_; }
  const std::string& name() const override { return name_; }

  void read(std::uint64_t offset, std::span<std::byte> out) override {
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t got = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw IoError(fmt::format("{}: read failed at offset {}: {}", name_, offset + done, std::strerror(errno)));
      if (got == 0)
        throw IoError(fmt::format("{}: the file shrank while being read (offset {})", name_, offset + done));
      done += static_cast<std::size_t>(got);
    }
  }

 private:
  std::string name_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

class MemorySource final : public ByteSource {
 public:
  MemorySource(std::span<const std::byte> bytes, std::string name) : bytes_(bytes), name_(std::move(name)) {}
  std::uint64_t size() const override { return bytes_.size(); }
  const std::string& name() const override { return name_; }
  void read(std::uint64_t offset, std::span<std::byte> out) override {
    if (offset > bytes_.size() || out.size() > bytes_.size() - offset)
      throw IoError(fmt::format("{}: read past the end (offset {}, {} bytes)", name_, offset, out.size()));
    if (!out.empty()) std::memcpy(out.data(), bytes_.data() + offset, out.size());
  }

 private:
  std::span<const std::byte> bytes_;
  std::string name_;
};

}  // namespace

std::unique_ptr<ByteSource> open_file_source(const std::filesystem::path& path) {
  return std::make_unique<FileSource>(path);
}

std::unique_ptr<ByteSource> memory_source(std::span<const std::byte> bytes, std::string name) {
  return std::make_unique<MemorySource>(bytes, std::move(name));
}

}  // namespace covflow::replay

#include "covflow/replay/writer.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <fmt/format.h>

#include "covflow/replay/error.hpp"

namespace covflow::replay {

Writer::Writer(const std::filesystem::path& path, const WriterOptions& options) : path_(path), options_(options) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (options.overwrite ? O_TRUNC : O_EXCL);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) {
    const int saved = errno;
    throw IoError(fmt::format("{}: cannot create: {}{}", path.string(), std::strerror(saved),
                              saved == EEXIST ? " (refusing to overwrite it)" : ""));
  }
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto header =
      format::encode_file_header({format::version, std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()});
  try {
    const std::span<const std::byte> pieces[] = {header};
    write_all(pieces);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

Writer::~Writer() {
  try {
    close();
  } catch (...) {
    // A destructor cannot report; close() explicitly to see the error.
  }
}

void Writer::write_all(std::span<const std::span<const std::byte>> pieces) {
  // writev keeps a record's header and payload in one system call; the loop finishes a short
  // write (a signal, a full pipe) from where it stopped.
  std::vector<iovec> vec;
  for (const auto& piece : pieces)
    if (!piece.empty()) vec.push_back({const_cast<std::byte*>(piece.data()), piece.size()});
  std::size_t first = 0;
  while (first < vec.size()) {
    const int n = static_cast<int>(std::min<std::size_t>(vec.size() - first, IOV_MAX));
    const ssize_t wrote = ::writev(fd_, vec.data() + first, n);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) throw IoError(fmt::format("{}: write failed at offset {}: {}", path_.string(), offset_, std::strerror(errno)));
    offset_ += static_cast<std::uint64_t>(wrote);
    auto left = static_cast<std::size_t>(wrote);
    while (first < vec.size() && left >= vec[first].iov_len) left -= vec[first++].iov_len;
    if (first < vec.size()) {
      vec[first].iov_base = static_cast<std::byte*>(vec[first].iov_base) + left;
      vec[first].iov_len -= left;
    }
  }
}

void Writer::write(const FrameHeader& header, std::span<const std::byte> payload) {
  if (fd_ < 0) throw std::logic_error(fmt::format("{}: write after close", path_.string()));
  if (std::string problem = shape_problem(header); !problem.empty())
    throw std::invalid_argument(fmt::format("{}: cannot write sequence {}: {}", path_.string(), header.sequence, problem));
  if (payload.size() != header.payload_bytes())
    throw std::invalid_argument(fmt::format("{}: cannot write sequence {}: payload of {} bytes, the dimensions say {}",
                                            path_.string(), header.sequence, payload.size(), header.payload_bytes()));
  const std::uint64_t at = offset_;
  const auto record_header = format::encode_record_header(header, payload);
  const std::span<const std::byte> pieces[] = {record_header, payload};
  write_all(pieces);
  if (options_.sync_each_record && ::fdatasync(fd_) != 0)
    throw IoError(fmt::format("{}: fdatasync failed: {}", path_.string(), std::strerror(errno)));
  index_.push_back({header.sequence, header.capture_time_ns, at});
}

void Writer::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  try {
    if (options_.write_index) {
      const auto block = format::encode_index(index_, offset_);
      const std::span<const std::byte> pieces[] = {block};
      write_all(pieces);
    }
  } catch (...) {
    fd_ = -1;
    ::close(fd);
    throw;
  }
  fd_ = -1;
  if (::close(fd) != 0) throw IoError(fmt::format("{}: close failed: {}", path_.string(), std::strerror(errno)));
}

}  // namespace covflow::replay

#include "ingest_bench.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>
#include <zlib.h>
#include <zmq.hpp>
#if COVFLOW_HAS_ISAL
#include <isa-l/crc.h>
#endif

#include "covflow/linalg/device.hpp"
#include "covflow/replay/byte_source.hpp"
#include "covflow/replay/payload_mover.hpp"
#if COVFLOW_HAS_CUDA
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/cuda/stream.hpp"
#endif

namespace covflow::bench {
namespace {

constexpr std::size_t records_in_file = 8;

std::uint32_t zlib_crc32(std::span<const std::byte> bytes) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  // zlib takes a uInt length.
  for (std::size_t at = 0; at < bytes.size();) {
    const std::size_t n = std::min<std::size_t>(bytes.size() - at, std::size_t(1) << 30);
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), static_cast<uInt>(n));
    at += n;
  }
  return static_cast<std::uint32_t>(crc);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    const auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  }
  return "unknown CPU";
}

void expect_crc(const char* what, unsigned threads, std::uint32_t got, std::uint32_t expected) {
  if (got != expected)
    throw std::runtime_error(fmt::format("ingest: {} ({} threads): CRC {:08x}, zlib says {:08x}", what, threads, got,
                                         expected));
}

void expect_bytes(const char* what, unsigned threads, std::span<const std::byte> got, std::span<const std::byte> expected) {
  if (got.size() != expected.size() || std::memcmp(got.data(), expected.data(), got.size()) != 0) {
    const auto [g, e] = std::mismatch(got.begin(), got.end(), expected.begin(), expected.end());
    throw std::runtime_error(fmt::format("ingest: {} ({} threads): the bytes differ from the source at byte {}", what,
                                         threads, g - got.begin()));
  }
}

struct FreeDeleter {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};
using HostBytes = std::unique_ptr<std::byte, FreeDeleter>;

HostBytes allocate_host(std::size_t bytes, std::size_t alignment) {
  const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  auto* p = static_cast<std::byte*>(alignment > alignof(std::max_align_t) ? std::aligned_alloc(alignment, rounded)
                                                                          : std::malloc(rounded));
  if (p == nullptr) throw std::bad_alloc();
  return HostBytes(p);
}

// Where a record's payload goes: the frame slot. Pinned when a GPU takes it from there (the
// daemon's slots are), else ordinary memory aligned like a slot.
class Destination {
 public:
  Destination(std::size_t bytes, bool pinned) : bytes_(bytes) {
#if COVFLOW_HAS_CUDA
    if (pinned) {
      pinned_ = linalg::cuda::PinnedBuffer<std::byte>(bytes);
      data_ = pinned_.data();
    }
#endif
    if (data_ == nullptr) {
      host_ = allocate_host(bytes, 256);
      data_ = host_.get();
    }
    // Touched once, so that no row pays for its first page faults.
    std::memset(data_, 0, bytes_);
  }
  std::span<std::byte> span() const { return {data_, bytes_}; }
  bool pinned() const { return host_ == nullptr; }

 private:
  std::size_t bytes_;
  std::byte* data_ = nullptr;
  HostBytes host_;
#if COVFLOW_HAS_CUDA
  linalg::cuda::PinnedBuffer<std::byte> pinned_;
#endif
};

// The rows, printed as they are measured (a full run takes a while) and kept for the JSON.
class Table {
 public:
  explicit Table(std::size_t bytes) : bytes_(bytes) {}
  void section(const std::string& title) {
    section_ = title;
    fmt::print("\n  {}\n  {:<56}{:>8}{:>11}{:>9}{:>21}\n", title, "path", "threads", "median ms", "GB/s", "min–max ms");
    std::fflush(stdout);
  }
  // threads 0: the path has no thread count (a library call on the caller's thread).
  void add(const std::string& path, unsigned threads, const Timing& t, const char* clock = "host") {
    const double gbps = t.median_ms > 0 ? double(bytes_) / (t.median_ms * 1e6) : 0.0;
    fmt::print("  {:<56}{:>8}{:>11.3f}{:>9.2f}{:>12.3f}–{:<8.3f}\n", path, threads ? std::to_string(threads) : "-",
               t.median_ms, gbps, t.min_ms, t.max_ms);
    std::fflush(stdout);
    rows_.push_back({{"section", section_}, {"path", path}, {"threads", threads}, {"clock", clock},
                     {"median_ms", t.median_ms}, {"min_ms", t.min_ms}, {"max_ms", t.max_ms}, {"reps", t.reps},
                     {"gb_per_s", gbps}});
  }
  const nlohmann::json& rows() const { return rows_; }

 private:
  std::size_t bytes_;
  std::string section_;
  nlohmann::json rows_ = nlohmann::json::array();
};

class FileDescriptor {
 public:
  explicit FileDescriptor(const std::filesystem::path& path, int flags, mode_t mode = 0644)
      : fd_(::open(path.c_str(), flags | O_CLOEXEC, mode)) {
    if (fd_ < 0) throw std::runtime_error(fmt::format("ingest: cannot open {}: {}", path.string(), std::strerror(errno)));
  }
  ~FileDescriptor() { ::close(fd_); }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

class Mapping {
 public:
  Mapping(int fd, std::size_t bytes, off_t offset, int extra_flags)
      : bytes_(bytes), data_(::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | extra_flags, fd, offset)) {
    if (data_ == MAP_FAILED) throw std::runtime_error(fmt::format("ingest: mmap failed: {}", std::strerror(errno)));
  }
  ~Mapping() { ::munmap(data_, bytes_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  const std::byte* data() const { return static_cast<const std::byte*>(data_); }

 private:
  std::size_t bytes_;
  void* data_;
};

// The frame file of the file rows: `records_in_file` payloads one after another, record r being
// the message with its first byte changed by r so that reading the wrong record fails the check.
// Removed when done with, also when a row fails.
class RecordFile {
 public:
  RecordFile(const std::filesystem::path& dir, std::span<std::byte> message) : message_(message) {
    path_ = dir / fmt::format("covflow-ingest-bench-{}.bin", ::getpid());
    FileDescriptor out(path_, O_WRONLY | O_CREAT | O_TRUNC);
    const std::byte first = message[0];
    for (std::size_t r = 0; r < records_in_file; ++r) {
      message[0] = record_first_byte(first, r);
      crcs_[r] = zlib_crc32(message);
      for (std::size_t at = 0; at < message.size();) {
        const ssize_t wrote = ::write(out.get(), message.data() + at, message.size() - at);
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote <= 0) throw std::runtime_error(fmt::format("ingest: writing {}: {}", path_.string(), std::strerror(errno)));
        at += std::size_t(wrote);
      }
    }
    message[0] = first;
    // On disk before timing, so that write-back does not run under the rows; then read once, so
    // that every row reads from the page cache.
    if (::fdatasync(out.get()) != 0)
      throw std::runtime_error(fmt::format("ingest: fdatasync {}: {}", path_.string(), std::strerror(errno)));
    FileDescriptor in(path_, O_RDONLY);
    std::vector<std::byte> chunk(std::size_t(1) << 20);
    while (::read(in.get(), chunk.data(), chunk.size()) > 0) {
    }
  }
  ~RecordFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  RecordFile(const RecordFile&) = delete;
  RecordFile& operator=(const RecordFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::uint64_t offset(std::size_t record) const { return std::uint64_t(record) * message_.size(); }
  std::uint32_t crc(std::size_t record) const { return crcs_[record]; }
  // Whether `bytes` hold record `record`.
  void expect_record(const char* what, unsigned threads, std::size_t record, std::span<const std::byte> bytes) const {
    if (bytes[0] != record_first_byte(message_[0], record))
      throw std::runtime_error(fmt::format("ingest: {} ({} threads): not record {}", what, threads, record));
    expect_bytes(what, threads, bytes.subspan(1), std::span<const std::byte>(message_).subspan(1));
  }

 private:
  static std::byte record_first_byte(std::byte first, std::size_t record) { return first ^ std::byte(record + 1); }
  std::filesystem::path path_;
  std::span<std::byte> message_;
  std::array<std::uint32_t, records_in_file> crcs_{};
};

std::filesystem::path dir_for_sockets() { return std::filesystem::temp_directory_path(); }

using Clock = std::chrono::steady_clock;

std::vector<unsigned> thread_counts(const IngestBenchOptions& options) {
  if (!options.threads.empty()) return options.threads;
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  std::vector<unsigned> counts;
  for (unsigned t : {1u, 2u, 4u, 8u, 12u})
    if (t <= hardware) counts.push_back(t);
  return counts;
}

}  // namespace

nlohmann::json run_ingest_bench(const Settings& settings, const IngestBenchOptions& options, linalg::Exec* gpu) {
  const std::size_t bytes = options.bytes;
  if (bytes == 0) throw std::invalid_argument("ingest: --bytes must be positive");
  const std::vector<unsigned> counts = thread_counts(options);
  const bool pinned = gpu != nullptr && linalg::cuda_compiled();
  const std::string model = cpu_model();
  const unsigned hardware = std::thread::hardware_concurrency();

  fmt::print("\n== ingest: one record of {} bytes ({:.1f} MB) into a frame slot, CRC-32 checked ==\n", bytes,
             double(bytes) / 1e6);
  fmt::print("host CPU {}, {} hardware threads; CRC by {}; destination {}; {} warm-up, median of {}\n", model, hardware,
             replay::crc32_implementation(),
             pinned ? "pinned host memory (cudaMallocHost)" : "pageable host memory, 256-byte aligned",
             settings.warmup, settings.reps);

  // The received message: pageable memory, written before use as a receiver would have written it.
  HostBytes message_storage = allocate_host(bytes, alignof(std::max_align_t));
  const std::span<std::byte> message(message_storage.get(), bytes);
  {
    std::mt19937_64 rng(std::random_device{}());
    std::size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
      const std::uint64_t word = rng();
      std::memcpy(message.data() + i, &word, 8);
    }
    for (; i < bytes; ++i) message[i] = std::byte(rng());
  }
  const std::uint32_t reference = zlib_crc32(message);
  Destination destination(bytes, pinned);
  const std::span<std::byte> slot = destination.span();
  auto poison = [&] { std::memset(slot.data(), 0xA5, slot.size()); };

  std::vector<std::unique_ptr<replay::PayloadMover>> movers;
  for (unsigned t : counts) movers.push_back(std::make_unique<replay::PayloadMover>(replay::PayloadMoverOptions{.threads = t}));

  Table table(bytes);
  const int warmup = settings.warmup, reps = settings.reps;

  table.section("crc: the CRC alone over a warm buffer");
  {
    // The reference was computed by the same call: this row checks that it repeats.
    table.add("zlib crc32", 0, time_host([&] { expect_crc("zlib crc32", 1, zlib_crc32(message), reference); }, warmup, reps));
#if COVFLOW_HAS_ISAL
    table.add("ISA-L crc32_gzip_refl", 0, time_host([&] {
                const auto* data = reinterpret_cast<const unsigned char*>(message.data());
                expect_crc("ISA-L crc32_gzip_refl", 1, crc32_gzip_refl(0, data, message.size()), reference);
              }, warmup, reps));
#endif
    for (std::size_t i = 0; i < counts.size(); ++i)
      table.add("PayloadMover::check", counts[i], time_host([&] {
                  expect_crc("PayloadMover::check", counts[i], movers[i]->check(message), reference);
                }, warmup, reps));
  }

  table.section("copy: a received message (pageable) into the slot");
  {
    poison();
    table.add("memcpy (no CRC)", 0, time_host([&] { std::memcpy(slot.data(), message.data(), bytes); }, warmup, reps));
    expect_bytes("memcpy", 1, slot, message);
    for (std::size_t i = 0; i < counts.size(); ++i) {
      poison();
      expect_crc("PayloadMover::copy", counts[i], movers[i]->copy(message, slot), reference);
      expect_bytes("PayloadMover::copy", counts[i], slot, message);
      table.add("PayloadMover::copy", counts[i], time_host([&] {
                  expect_crc("PayloadMover::copy", counts[i], movers[i]->copy(message, slot), reference);
                }, warmup, reps));
    }
  }

  table.section("zmq: a message over a loopback socket into the slot, checked (host clock, mean of a stream)");
  {
    // ZeroMQ's receiving I/O thread allocates every message it reads; glibc serves anything above
    // 32 MiB with a fresh mmap, so a 47 MB record costs its page faults on every message, where
    // parts of a few MiB come from the heap again. Each row: a sender thread with its own context
    // pushes the record (zero-copy, as one message or as parts of one multipart message) as fast
    // as PUSH lets it; this thread receives and copies each part into the slot with its CRC.
    const unsigned zmq_threads = counts.back();
    replay::PayloadMover mover({.threads = zmq_threads});
    const int messages = std::max(reps, 10);
    struct Variant {
      std::string label;
      bool ipc;
      std::size_t part_bytes;  // 0: one part
      int socket_buffer;       // SO_SNDBUF/SO_RCVBUF bytes, 0: the system's
    };
    const Variant variants[] = {{"tcp, one part", false, 0, 0},
                                {"tcp, one part, 16 MiB socket buffers", false, 0, 16 << 20},
                                {"tcp, parts of 1 MiB", false, std::size_t(1) << 20, 0},
                                {"tcp, parts of 4 MiB", false, std::size_t(4) << 20, 0},
                                {"tcp, parts of 4 MiB, 16 MiB socket buffers", false, std::size_t(4) << 20, 16 << 20},
                                {"ipc, one part", true, 0, 0},
                                {"ipc, parts of 4 MiB", true, std::size_t(4) << 20, 0}};
    for (const Variant& v : variants) {
      zmq::context_t send_context, receive_context;
      zmq::socket_t pull(receive_context, zmq::socket_type::pull), push(send_context, zmq::socket_type::push);
      for (zmq::socket_t* socket : {&pull, &push}) {
        socket->set(zmq::sockopt::linger, 0);
        if (v.socket_buffer > 0) {
          socket->set(zmq::sockopt::sndbuf, v.socket_buffer);
          socket->set(zmq::sockopt::rcvbuf, v.socket_buffer);
        }
      }
      pull.set(zmq::sockopt::rcvhwm, 8);
      push.set(zmq::sockopt::sndhwm, 8);
      const std::string where = v.ipc ? fmt::format("ipc://{}/covflow-bench-zmq-{}", dir_for_sockets().string(), ::getpid())
                                      : std::string("tcp://127.0.0.1:*");
      pull.bind(where);
      push.connect(pull.get(zmq::sockopt::last_endpoint));
      const std::size_t part = v.part_bytes == 0 ? bytes : v.part_bytes;
      std::thread sender([&] {
        for (int m = 0; m < warmup + messages; ++m)
          for (std::size_t at = 0; at < bytes; at += part) {
            const std::size_t n = std::min(part, bytes - at);
            zmq::message_t piece(message.data() + at, n, [](void*, void*) {}, nullptr);
            push.send(piece, at + n < bytes ? zmq::send_flags::sndmore : zmq::send_flags::none);
          }
      });
      std::vector<double> intervals;
      Clock::time_point started{}, last{};
      zmq::message_t piece;
      for (int m = 0; m < warmup + messages; ++m) {
        std::size_t at = 0;
        std::uint32_t crc = 0;
        do {
          if (!pull.recv(piece)) throw std::runtime_error("ingest: zmq receive failed");
          if (at + piece.size() > bytes) throw std::runtime_error("ingest: zmq message larger than the record");
          crc = mover.copy({static_cast<const std::byte*>(piece.data()), piece.size()}, slot.subspan(at, piece.size()), crc);
          at += piece.size();
        } while (piece.more());
        expect_crc(v.label.c_str(), zmq_threads, crc, reference);
        if (at != bytes) throw std::runtime_error("ingest: zmq message of the wrong size");
        const auto now = Clock::now();
        if (m == warmup - 1 || (warmup == 0 && m == 0)) started = now;
        else if (m >= warmup) intervals.push_back(std::chrono::duration<double, std::milli>(now - last).count());
        last = now;
      }
      sender.join();
      expect_bytes(v.label.c_str(), zmq_threads, slot, message);
      Timing t;
      t.reps = int(intervals.size());
      t.median_ms = std::chrono::duration<double, std::milli>(last - started).count() / double(std::max<std::size_t>(1, intervals.size()));
      t.min_ms = intervals.empty() ? 0 : *std::min_element(intervals.begin(), intervals.end());
      t.max_ms = intervals.empty() ? 0 : *std::max_element(intervals.begin(), intervals.end());
      table.add(v.label, zmq_threads, t);
    }
  }

  const std::filesystem::path dir = options.dir.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(options.dir);
  {
    fmt::print("\n  (writing {} records, {:.0f} MB, to {} and reading them into the page cache)\n", records_in_file,
               double(records_in_file * bytes) / 1e6, dir.string());
    std::fflush(stdout);
    RecordFile file(dir, message);
    table.section(fmt::format("file: record after record from a {}-record file in the page cache", records_in_file));
    const auto source = replay::open_file_source(file.path());
    const FileDescriptor fd(file.path(), O_RDONLY);
    const Mapping whole(fd.get(), records_in_file * bytes, 0, MAP_POPULATE);
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));

    // Each row reads the records in turn; record 1 first, checked whole, into a poisoned slot.
    auto run_row = [&](const char* path, unsigned threads, const std::function<std::uint32_t(std::size_t)>& take) {
      poison();
      expect_crc(path, threads, take(1), file.crc(1));
      file.expect_record(path, threads, 1, slot);
      std::size_t next = 0;
      table.add(path, threads, time_host([&] {
                  const std::size_t record = next++ % records_in_file;
                  expect_crc(path, threads, take(record), file.crc(record));
                }, warmup, reps));
    };
    for (std::size_t i = 0; i < counts.size(); ++i)
      run_row("pread (PayloadMover::read)", counts[i],
              [&](std::size_t r) { return movers[i]->read(*source, file.offset(r), slot); });
    for (std::size_t i = 0; i < counts.size(); ++i)
      run_row("mmap, MAP_POPULATE once + PayloadMover::copy", counts[i], [&](std::size_t r) {
        return movers[i]->copy({whole.data() + file.offset(r), bytes}, slot);
      });
    for (std::size_t i = 0; i < counts.size(); ++i)
      run_row("mmap per record (page faults) + PayloadMover::copy", counts[i], [&](std::size_t r) {
        const std::uint64_t start = file.offset(r) / page * page;
        const std::size_t lead = std::size_t(file.offset(r) - start);
        const Mapping one(fd.get(), lead + bytes, off_t(start), 0);
        return movers[i]->copy({one.data() + lead, bytes}, slot);
      });
  }

#if COVFLOW_HAS_CUDA
  if (gpu != nullptr) {
    linalg::cuda::DeviceBuffer<std::byte> device(bytes);
    linalg::cuda::Stream stream;
    std::vector<std::byte> downloaded(bytes);
    // The device copy must equal the message; poisoned before the checked call.
    auto expect_on_device = [&](const char* what, unsigned threads) {
      COVFLOW_CUDA_TRY(cudaMemcpy(downloaded.data(), device.data(), bytes, cudaMemcpyDeviceToHost));
      expect_bytes(what, threads, downloaded, message);
    };
    auto upload_from = [&](const std::byte* host) {
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(device.data(), host, bytes, cudaMemcpyHostToDevice, stream));
    };

    table.section("upload: the record to device memory (CUDA events around cudaMemcpyAsync)");
    std::memcpy(slot.data(), message.data(), bytes);
    device.fill_bytes(0xFF, stream);
    upload_from(slot.data());
    stream.synchronize();
    expect_on_device("upload from the pinned slot", 0);
    table.add("from the pinned slot", 0, time_device(stream, [&](int) { upload_from(slot.data()); }, warmup, reps),
              "cuda events");
    device.fill_bytes(0xFF, stream);
    upload_from(message.data());
    stream.synchronize();
    expect_on_device("upload from the pageable message", 0);
    table.add("from the pageable message", 0,
              time_device(stream, [&](int) { upload_from(message.data()); }, warmup, reps), "cuda events");

    table.section("message to device, checked (host clock, until the upload is done)");
    for (std::size_t i = 0; i < counts.size(); ++i) {
      auto via_slot = [&] {
        expect_crc("copy into the pinned slot + upload", counts[i], movers[i]->copy(message, slot), reference);
        upload_from(slot.data());
        stream.synchronize();
      };
      poison();
      device.fill_bytes(0xFF, stream);
      via_slot();
      expect_on_device("copy into the pinned slot + upload", counts[i]);
      table.add("(a) PayloadMover::copy to pinned + upload from pinned", counts[i], time_host(via_slot, warmup, reps));
    }
    for (std::size_t i = 0; i < counts.size(); ++i) {
      auto direct = [&] {
        expect_crc("check + upload from pageable", counts[i], movers[i]->check(message), reference);
        upload_from(message.data());
        stream.synchronize();
      };
      device.fill_bytes(0xFF, stream);
      direct();
      expect_on_device("check + upload from pageable", counts[i]);
      table.add("(b) PayloadMover::check + upload from pageable", counts[i], time_host(direct, warmup, reps));
    }
  }
#endif

  return {{"benchmark", "ingest"},
          {"bytes", bytes},
          {"host_cpu", model},
          {"hardware_threads", hardware},
          {"crc32", replay::crc32_implementation()},
          {"destination", pinned ? "pinned" : "pageable, 256-byte aligned"},
          {"file_dir", dir.string()},
          {"rows", table.rows()}};
}

}  // namespace covflow::bench

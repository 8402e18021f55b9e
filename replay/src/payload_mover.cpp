#include "covflow/replay/payload_mover.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <zlib.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define COVFLOW_STREAMING_STORES 1
#else
#define COVFLOW_STREAMING_STORES 0
#endif

#include "covflow/replay/format.hpp"

namespace covflow::replay {
namespace {

// Part boundaries fall on multiples of this from the payload's start, so that two threads never
// write the same cache line and a file read starting page-aligned stays page-aligned.
constexpr std::size_t part_alignment = 4096;

unsigned resolve_threads(unsigned requested) {
  if (requested != 0) return requested;
  const unsigned cores = std::thread::hardware_concurrency();
  return std::max(1u, std::min(12u, cores * 3 / 4));
}

// Copies n bytes with non-temporal (streaming) stores where the host has them: the destination's
// cache lines are written whole, without first being read into the cache (a plain store reads
// each line before it writes it). A frame slot is not read again by the CPU but by the GPU's DMA,
// so the plain copy's read of the destination was a third pass over host memory per payload.
// The stores are fenced before returning, so whoever hears the bytes are in place sees them.
void copy_streaming(std::byte* to, const std::byte* from, std::size_t n) {
#if COVFLOW_STREAMING_STORES
  const std::size_t head = std::min(n, (16 - reinterpret_cast<std::uintptr_t>(to) % 16) % 16);
  std::memcpy(to, from, head);
  std::size_t at = head;
  for (; at + 64 <= n; at += 64) {
    const auto* in = reinterpret_cast<const __m128i*>(from + at);
    auto* out = reinterpret_cast<__m128i*>(to + at);
    const __m128i a = _mm_loadu_si128(in), b = _mm_loadu_si128(in + 1);
    const __m128i c = _mm_loadu_si128(in + 2), d = _mm_loadu_si128(in + 3);
    _mm_stream_si128(out, a);
    _mm_stream_si128(out + 1, b);
    _mm_stream_si128(out + 2, c);
    _mm_stream_si128(out + 3, d);
  }
  std::memcpy(to + at, from + at, n - at);
  _mm_sfence();
#else
  std::memcpy(to, from, n);
#endif
}

void copy_bytes(std::byte* to, const std::byte* from, std::size_t n, bool streaming) {
  if (streaming) {
    copy_streaming(to, from, n);
  } else {
    std::memcpy(to, from, n);
  }
}

}  // namespace

// What moves where: bytes [base, base + size) of the payload, cut into part_count parts.
struct PayloadMover::Job {
  enum class Kind { copy, check, read, gather_copy, gather_check };
  Kind kind = Kind::check;
  const std::byte* from = nullptr;  // copy, check
  std::byte* to = nullptr;          // copy, read
  ByteSource* source = nullptr;     // read
  std::span<const std::span<const std::byte>> pieces;  // gather_copy, gather_check: the source
  std::uint64_t offset = 0;         // read: of the payload's first byte in `source`
  std::size_t base = 0;        // first byte of this job (a stretch of the payload)
  std::size_t size = 0;
  std::size_t part_bytes = 0;  // every part but the last
  unsigned part_count = 0;
  std::size_t piece_bytes = 0;
  bool streaming = false;  // copy, gather_copy: PayloadMoverOptions::streaming_stores
};

// One job at a time: the caller publishes it under the mutex and bumps `generation`; worker w
// (1 ≤ w < threads) wakes, does part w when the job has that many parts, and reports into its
// own slot of `parts`. The caller does part 0 meanwhile, then waits until `pending` is zero. Every
// buffer is sized when the pool is made, so a call allocates nothing.
struct PayloadMover::Pool {
  using Kind = Job::Kind;

  // A cache line each: the threads write their own slots at the same time.
  struct alignas(64) Part {
    std::uint32_t crc = 0;  // of the part alone (part 0: continued from the call's `crc`)
    std::size_t bytes = 0;
    std::exception_ptr error;
  };

  explicit Pool(unsigned threads) : parts(threads) {
    workers.reserve(threads - 1);
    try {
      for (unsigned w = 1; w < threads; ++w) workers.emplace_back([this, w] { serve(w); });
    } catch (...) {
      stop();
      throw;
    }
  }
  ~Pool() { stop(); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  void stop() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    for (std::thread& worker : workers) worker.join();
    workers.clear();
  }

  // Moves bytes [begin, end) of the job piece by piece, each piece's CRC taken while the piece is
  // still in this core's cache, and returns their CRC continued from `crc`.
  static std::uint32_t run_range(const Job& job, std::size_t begin, std::size_t end, std::uint32_t crc) {
    if (job.kind == Kind::gather_copy || job.kind == Kind::gather_check) return run_gathered(job, begin, end, crc);
    for (std::size_t at = begin; at < end;) {
      const std::size_t n = std::min(job.piece_bytes, end - at);
      switch (job.kind) {
        case Kind::copy:
          // The CRC reads the source piece: the copy just brought it into cache, and the result
          // is the CRC of `from` by contract.
          copy_bytes(job.to + at, job.from + at, n, job.streaming);
          crc = format::crc32({job.from + at, n}, crc);
          break;
        case Kind::check:
          crc = format::crc32({job.from + at, n}, crc);
          break;
        case Kind::read:
          job.source->read(job.offset + at, {job.to + at, n});
          crc = format::crc32({job.to + at, n}, crc);
          break;
        case Kind::gather_copy:
        case Kind::gather_check:
          break;  // run_gathered
      }
      at += n;
    }
    return crc;
  }

  // run_range for a source in pieces: bytes [begin, end) of their concatenation.
  static std::uint32_t run_gathered(const Job& job, std::size_t begin, std::size_t end, std::uint32_t crc) {
    std::size_t piece = 0, piece_start = 0;
    while (piece < job.pieces.size() && piece_start + job.pieces[piece].size() <= begin) piece_start += job.pieces[piece++].size();
    for (std::size_t at = begin; at < end && piece < job.pieces.size();) {
      const std::span<const std::byte> from = job.pieces[piece];
      const std::size_t within = at - piece_start;
      const std::size_t n = std::min({job.piece_bytes, from.size() - within, end - at});
      if (job.kind == Kind::gather_copy) copy_bytes(job.to + at, from.data() + within, n, job.streaming);
      crc = format::crc32(from.subspan(within, n), crc);
      at += n;
      if (within + n == from.size()) {
        piece_start += from.size();
        ++piece;
      }
    }
    return crc;
  }

  void run_part(unsigned index, std::uint32_t crc) noexcept {
    Part& part = parts[index];
    const std::size_t begin = job.base + std::size_t(index) * job.part_bytes;
    const std::size_t end = std::min(job.base + job.size, begin + job.part_bytes);
    part.bytes = end - begin;
    part.error = nullptr;
    try {
      part.crc = run_range(job, begin, end, crc);
    } catch (...) {
      part.error = std::current_exception();
    }
  }

  void serve(unsigned index) {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return stopping || generation != seen; });
        if (stopping) return;
        seen = generation;
        if (index >= job.part_count) continue;
      }
      run_part(index, 0);
      bool last = false;
      {
        std::lock_guard lock(mutex);
        last = --pending == 0;
      }
      if (last) done.notify_one();
    }
  }

  // Runs `next` on every thread and returns the payload's CRC continued from `crc`; rethrows the
  // first part's error (in payload order) once every part has finished.
  std::uint32_t run(const Job& next, std::uint32_t crc) {
    if (next.part_count <= 1) return run_range(next, next.base, next.base + next.size, crc);
    {
      std::lock_guard lock(mutex);
      job = next;
      pending = next.part_count - 1;
      ++generation;
    }
    wake.notify_all();
    run_part(0, crc);
    {
      std::unique_lock lock(mutex);
      done.wait(lock, [&] { return pending == 0; });
    }
    std::uint32_t whole = parts[0].crc;
    for (unsigned i = 0; i < next.part_count; ++i) {
      if (parts[i].error) std::rethrow_exception(parts[i].error);
      if (i > 0) whole = static_cast<std::uint32_t>(crc32_combine64(whole, parts[i].crc, z_off64_t(parts[i].bytes)));
    }
    return whole;
  }

  std::mutex mutex;
  std::condition_variable wake;  // a new job, or stopping
  std::condition_variable done;  // the last worker's part finished
  std::uint64_t generation = 0;
  unsigned pending = 0;
  bool stopping = false;
  Job job;
  std::vector<Part> parts;  // one per thread; part 0 is the caller's
  std::vector<std::thread> workers;
};

PayloadMover::PayloadMover(const PayloadMoverOptions& options) : options_(options) {
  if (options_.piece_bytes == 0) throw std::invalid_argument("PayloadMover: piece_bytes must be positive");
  if (options_.stretch_bytes == 0) throw std::invalid_argument("PayloadMover: stretch_bytes must be positive");
  options_.threads = resolve_threads(options_.threads);
  pool_ = std::make_unique<Pool>(options_.threads);
}

PayloadMover::~PayloadMover() = default;

unsigned PayloadMover::threads() const { return options_.threads; }

namespace {

// One contiguous part per thread, cut on part_alignment; fewer parts when the payload is small.
void plan_parts(std::size_t size, unsigned threads, std::size_t parallel_from_bytes, std::size_t& part_bytes,
                unsigned& part_count) {
  if (threads <= 1 || size < parallel_from_bytes || size == 0) {
    part_bytes = size;
    part_count = 1;
    return;
  }
  const std::size_t share = (size + threads - 1) / threads;
  part_bytes = (share + part_alignment - 1) / part_alignment * part_alignment;
  part_count = static_cast<unsigned>((size + part_bytes - 1) / part_bytes);
}

}  // namespace

std::uint32_t PayloadMover::run(Job& job, std::uint32_t crc, const Placed& placed) {
  if (!placed) {
    plan_parts(job.size, options_.threads, options_.parallel_from_bytes, job.part_bytes, job.part_count);
    return pool_->run(job, crc);
  }
  const std::size_t total = job.size;
  for (std::size_t begin = 0; begin < total; begin += options_.stretch_bytes) {
    job.base = begin;
    job.size = std::min(options_.stretch_bytes, total - begin);
    plan_parts(job.size, options_.threads, options_.parallel_from_bytes, job.part_bytes, job.part_count);
    crc = pool_->run(job, crc);
    placed(begin, begin + job.size);
  }
  return crc;
}

std::uint32_t PayloadMover::copy(std::span<const std::byte> from, std::span<std::byte> to, std::uint32_t crc,
                                 const Placed& placed) {
  if (from.size() != to.size())
    throw std::invalid_argument("PayloadMover::copy: the destination's size differs from the source's");
  if (!from.empty() && std::less<>{}(to.data(), from.data() + from.size()) &&
      std::less<>{}(from.data(), to.data() + to.size()))
    throw std::invalid_argument("PayloadMover::copy: source and destination overlap");
  Job job;
  job.kind = Job::Kind::copy;
  job.from = from.data();
  job.to = to.data();
  job.size = from.size();
  job.piece_bytes = options_.piece_bytes;
  job.streaming = options_.streaming_stores;
  return run(job, crc, placed);
}

std::uint32_t PayloadMover::check(std::span<const std::byte> bytes, std::uint32_t crc) {
  Job job;
  job.kind = Job::Kind::check;
  job.from = bytes.data();
  job.size = bytes.size();
  job.piece_bytes = options_.piece_bytes;
  job.streaming = options_.streaming_stores;
  return run(job, crc, {});
}

std::uint32_t PayloadMover::gather_copy(std::span<const std::span<const std::byte>> pieces, std::span<std::byte> to,
                                        std::uint32_t crc, const Placed& placed) {
  std::size_t total = 0;
  for (const auto& piece : pieces) {
    total += piece.size();
    if (!piece.empty() && std::less<>{}(to.data(), piece.data() + piece.size()) &&
        std::less<>{}(piece.data(), to.data() + to.size()))
      throw std::invalid_argument("PayloadMover::gather_copy: a piece overlaps the destination");
  }
  if (total != to.size())
    throw std::invalid_argument("PayloadMover::gather_copy: the destination's size differs from the pieces' total");
  Job job;
  job.kind = Job::Kind::gather_copy;
  job.pieces = pieces;
  job.to = to.data();
  job.size = total;
  job.piece_bytes = options_.piece_bytes;
  job.streaming = options_.streaming_stores;
  return run(job, crc, placed);
}

std::uint32_t PayloadMover::gather_check(std::span<const std::span<const std::byte>> pieces, std::uint32_t crc) {
  std::size_t total = 0;
  for (const auto& piece : pieces) total += piece.size();
  Job job;
  job.kind = Job::Kind::gather_check;
  job.pieces = pieces;
  job.size = total;
  job.piece_bytes = options_.piece_bytes;
  job.streaming = options_.streaming_stores;
  return run(job, crc, {});
}

std::uint32_t PayloadMover::read(ByteSource& source, std::uint64_t offset, std::span<std::byte> to,
                                 std::uint32_t crc, const Placed& placed) {
  Job job;
  job.kind = Job::Kind::read;
  job.to = to.data();
  job.source = &source;
  job.offset = offset;
  job.size = to.size();
  job.piece_bytes = options_.piece_bytes;
  job.streaming = options_.streaming_stores;
  return run(job, crc, placed);
}

const char* crc32_implementation() {
#if COVFLOW_HAS_ISAL
  return "ISA-L crc32_gzip_refl";
#else
  return "zlib crc32";
#endif
}

}  // namespace covflow::replay

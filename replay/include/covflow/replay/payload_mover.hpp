// PayloadMover: puts a record's payload where the pipeline wants it (a pinned frame slot) and
// checks its CRC-32 in the same pass, on several threads.
//
// A 47 MB payload checked by one thread with zlib's crc32 costs about 12 ms and a copy about as
// much again: more than a 10 ms frame period. Here the payload is cut into one contiguous part per
// thread; each thread moves its part in pieces small enough to stay in its core's cache (copied
// from memory, or read from a file with pread) and runs the CRC over each piece while it is still
// in cache, so every byte crosses the memory bus once on the way in and once on the way out. The
// parts' CRCs are joined in order with zlib's crc32_combine. The CRC itself is format::crc32
// (ISA-L's crc32_gzip_refl where covflow was built with ISA-L: the same CRC as zlib's, computed
// with carry-less multiplies).
//
// The result is always the CRC of the whole payload, continued from `crc`: the caller compares it
// with the record's stored CRC and refuses the record (never processes it) when they differ. The
// destination then holds the bytes as found, which the caller must not use.
//
// Threads: made once, when the mover is made (no thread starts per call); a call blocks its
// caller until every part is done. One call at a time per mover (the ingest thread's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "covflow/replay/byte_source.hpp"

namespace covflow::replay {

struct PayloadMoverOptions {
  // Threads that share a payload, the caller's included; 0: three quarters of the host's cores,
  // at most 12 (on the 16-core H100 host 12 threads copy a 47 MB record in 0.74 ms, 8 in 1.13:
  // docs/performance.md), at least 1. With 1 the caller does everything and no thread is made.
  unsigned threads = 0;
  // Bytes a thread moves before it checks them (kept in its cache between the two); positive.
  std::size_t piece_bytes = std::size_t(256) << 10;
  // Payloads below this are done by the caller alone (handing them out costs more than it saves).
  std::size_t parallel_from_bytes = std::size_t(1) << 20;
  // With a placement callback, the payload is moved in stretches of this many bytes, in order,
  // each shared by every thread, and the callback hears of each as it lands, so that the caller
  // can pass it on (upload it) while the next is moved.
  std::size_t stretch_bytes = std::size_t(8) << 20;
  // Copies write the destination with non-temporal stores (x86-64; a plain copy elsewhere), which
  // do not read its cache lines first: one pass over host memory fewer per payload, for a
  // destination the CPU does not read again (a frame slot the GPU uploads). false: plain stores.
  bool streaming_stores = false;
};

// Told, on the caller's thread, that bytes [begin, end) of the destination are in place (their
// CRC is not yet known: the whole payload's is). Calls for one payload come in order, from 0.
using Placed = std::function<void(std::size_t begin, std::size_t end)>;

class PayloadMover {
 public:
  // Starts the threads; std::invalid_argument when piece_bytes is 0.
  explicit PayloadMover(const PayloadMoverOptions& options = {});
  ~PayloadMover();
  PayloadMover(const PayloadMover&) = delete;
  PayloadMover& operator=(const PayloadMover&) = delete;

  // Copies `from` into `to` (to.size() must equal from.size(); they must not overlap, else
  // std::invalid_argument) and returns the CRC-32 of `from` continued from `crc`.
  // With `placed`, the payload goes in stretches (PayloadMoverOptions::stretch_bytes), each
  // reported when it has landed.
  std::uint32_t copy(std::span<const std::byte> from, std::span<std::byte> to, std::uint32_t crc = 0,
                     const Placed& placed = {});
  // The CRC-32 of `bytes` continued from `crc`, moving nothing.
  std::uint32_t check(std::span<const std::byte> bytes, std::uint32_t crc = 0);
  // copy() and check() of a source that comes in pieces (a message received in parts): the
  // pieces' bytes, in order, are the payload; to.size() must equal their total. The work is
  // shared out over the whole payload at once, however it is cut.
  std::uint32_t gather_copy(std::span<const std::span<const std::byte>> pieces, std::span<std::byte> to,
                            std::uint32_t crc = 0, const Placed& placed = {});
  std::uint32_t gather_check(std::span<const std::span<const std::byte>> pieces, std::uint32_t crc = 0);
  // Reads to.size() bytes of `source` from `offset` into `to` (ByteSource::read, called from
  // several threads at once on disjoint ranges) and returns their CRC-32 continued from `crc`.
  // A read error is rethrown on the caller's thread (IoError) once every part has finished.
  std::uint32_t read(ByteSource& source, std::uint64_t offset, std::span<std::byte> to, std::uint32_t crc = 0,
                     const Placed& placed = {});

  // Threads sharing a payload, the caller's included.
  unsigned threads() const;

 private:
  struct Pool;
  struct Job;
  // Runs `job` over its whole size: at once, or (with `placed`) stretch by stretch.
  std::uint32_t run(Job& job, std::uint32_t crc, const Placed& placed);
  std::unique_ptr<Pool> pool_;
  PayloadMoverOptions options_;
};

// What format::crc32 is computed with: "ISA-L crc32_gzip_refl" or "zlib crc32".
const char* crc32_implementation();

}  // namespace covflow::replay

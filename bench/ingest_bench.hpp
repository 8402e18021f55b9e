// covflow-bench ingest: what it costs the host to take one record's payload in and check its CRC,
// per way of doing it. A frame of 180 cells × 128² complex double is 47 MB, at 100 Hz: every
// millisecond spent here is a tenth of the frame period. The rows:
//   crc      the CRC alone over a warm buffer: zlib, ISA-L, PayloadMover::check per thread count
//   copy     a received message (pageable memory) into the frame slot: memcpy, PayloadMover::copy
//   file     a record from a frame file in the page cache: pread (PayloadMover::read), mmap with
//            MAP_POPULATE mapped once + copy, mmap mapped per record + copy (page faults included)
//   upload   (CUDA, with a GPU) the record to the device from pinned and from pageable memory, and
//            the two whole ways of taking a message onto the device checked
// Every row checks its CRC against zlib's and its bytes against the source; a mismatch fails the run.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "covflow/linalg/exec.hpp"

namespace covflow::bench {

struct IngestBenchOptions {
  std::size_t bytes = 47'185'920;  // 180 cells × 128² × 16 bytes
  std::vector<unsigned> threads;   // PayloadMover thread counts; empty: 1, 2, 4, 8, 12 up to the host's
  std::string dir;                 // where the file rows write their file; empty: the system's temporary directory
};

// `gpu`: the CUDA context when a GPU is used (upload rows), else null.
nlohmann::json run_ingest_bench(const Settings& settings, const IngestBenchOptions& options, linalg::Exec* gpu);

}  // namespace covflow::bench

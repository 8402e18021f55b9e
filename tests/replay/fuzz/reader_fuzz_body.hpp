// What the fuzzer does with one input, shared with the corpus test so that CI runs the same
// checks on the seed corpus without libFuzzer. Anything but a FormatError escaping, a failed
// invariant (abort) or a sanitizer report is a bug.
#pragma once

#include <cstdlib>
#include <span>

#include "covflow/replay/error.hpp"
#include "covflow/replay/format.hpp"
#include "covflow/replay/inspect.hpp"
#include "covflow/replay/reader.hpp"

namespace covflow::fuzz {

inline void require(bool condition) {
  if (!condition) std::abort();
}

// Returns the number of records read (-1 when the input is refused as not a frame file).
inline long reader_fuzz_one(std::span<const std::byte> bytes) {
  using namespace covflow::replay;
  try {
    const Frame frame = format::decode_record(bytes);
    require(frame.payload.size() == frame.header.payload_bytes());
    require(shape_problem(frame.header).empty());
  } catch (const FormatError&) {
  }
  long records = 0;
  try {
    Reader reader(memory_source(bytes, "fuzz"));
    std::uint64_t last_end = 0;
    while (auto frame = reader.next()) {
      require(frame->payload.size() == frame->header.payload_bytes());
      require(shape_problem(frame->header).empty());
      require(reader.last_offset() >= last_end);  // records come in file order, without overlap
      last_end = reader.last_offset() + format::record_header_bytes + frame->payload.size();
      require(last_end <= bytes.size());
      ++records;
    }
    for (const Damage& d : reader.damage()) require(d.offset <= bytes.size() && d.length <= bytes.size() - d.offset);
    // Seeking, the header-only pass and the index check must agree with the full read.
    if (reader.index() && !reader.index()->empty()) reader.seek_sequence(reader.index()->back().sequence);
    reader.seek_sequence(0);
    const ScanReport headers = scan(reader);
    const ScanReport payloads = scan(reader, {.check_payloads = true});
    require(payloads.records == std::uint64_t(records));
    require(headers.records >= payloads.records);
  } catch (const FormatError& e) {
    require(e.offset() < 32);
    return -1;
  }
  return records;
}

}  // namespace covflow::fuzz

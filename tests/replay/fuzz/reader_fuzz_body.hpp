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

__extension__ typedef unsigned __int128 uint128;

// A frame the reader or the decoder returns has a payload of exactly rows·cols·count elements and
// no more than the payload limit. The product is taken in 128 bits, where three 32-bit dimensions
// and an element size cannot wrap, so a header whose 64-bit size wraps around to the length of
// the payload it carries fails here whatever the reader checked.
inline void require_whole_frame(const covflow::replay::Frame& frame) {
  using namespace covflow::replay;
  const FrameHeader& h = frame.header;
  const uint128 bytes = uint128(h.rows) * h.cols * h.count * size_of(h.element_type);
  require(bytes == frame.payload.size());
  require(bytes <= max_payload_bytes);
  require(shape_problem(h).empty());
}

// Returns the number of records read (-1 when the input is refused as not a frame file).
inline long reader_fuzz_one(std::span<const std::byte> bytes) {
  using namespace covflow::replay;
  try {
    require_whole_frame(format::decode_record(bytes));
  } catch (const FormatError&) {
  }
  long records = 0;
  try {
    Reader reader(memory_source(bytes, "fuzz"));
    std::uint64_t last_end = 0;
    while (auto frame = reader.next()) {
      require_whole_frame(*frame);
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

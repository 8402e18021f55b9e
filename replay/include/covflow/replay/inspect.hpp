// What a frame file holds, and whether it is whole: the engine behind `covflow inspect`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "covflow/replay/reader.hpp"

namespace covflow::replay {

struct ScanOptions {
  // Read every payload and check its CRC (verify); otherwise only the headers are checked.
  bool check_payloads = false;
  // Keep a RecordInfo per record in the report.
  bool keep_records = false;
};

struct ScanReport {
  std::string name;
  std::uint64_t file_size = 0;
  format::FileHeader file_header;
  bool payloads_checked = false;
  std::uint64_t records = 0;
  std::uint64_t payload_bytes = 0;
  std::optional<std::uint64_t> first_sequence, last_sequence;
  std::int64_t first_capture_ns = 0, last_capture_ns = 0;
  std::uint64_t sequence_gaps = 0;        // a record whose sequence is not the previous one + 1
  std::uint64_t out_of_order = 0;         // a record whose sequence is not above the previous one
  std::map<std::string, std::uint64_t> shapes;  // "snapshots cf64 16×200×180" → records
  bool index_present = false;             // an index that checks out
  std::vector<RecordInfo> record_list;    // with keep_records
  std::vector<Damage> damage;

  bool whole() const { return damage.empty(); }
};

// Reads the file from its first record to its end. An index that checks out is compared with
// the records found; any disagreement is index damage.
ScanReport scan(Reader& reader, const ScanOptions& options = {});

// "snapshots cf64 16×200×180"
std::string describe_shape(const FrameHeader& header);

}  // namespace covflow::replay

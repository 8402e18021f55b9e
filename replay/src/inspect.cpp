#include "covflow/replay/inspect.hpp"

#include <fmt/format.h>

namespace covflow::replay {

std::string describe_shape(const FrameHeader& h) {
  return fmt::format("{} {} {}×{}×{}", name(h.kind), name(h.element_type), h.rows, h.cols, h.count);
}

ScanReport scan(Reader& reader, const ScanOptions& options) {
  ScanReport report;
  report.name = reader.name();
  report.file_size = reader.file_size();
  report.file_header = reader.file_header();
  report.payloads_checked = options.check_payloads;
  std::vector<format::IndexEntry> found;

  auto take = [&](const RecordInfo& info) {
    const FrameHeader& h = info.header;
    if (report.last_sequence) {
      if (h.sequence <= *report.last_sequence) ++report.out_of_order;
      if (h.sequence != *report.last_sequence + 1) ++report.sequence_gaps;
    } else {
      report.first_sequence = h.sequence;
      report.first_capture_ns = h.capture_time_ns;
    }
    report.last_sequence = h.sequence;
    report.last_capture_ns = h.capture_time_ns;
    ++report.records;
    report.payload_bytes += h.payload_bytes();
    ++report.shapes[describe_shape(h)];
    found.push_back({h.sequence, h.capture_time_ns, info.offset});
    if (options.keep_records) report.record_list.push_back(info);
  };

  reader.rewind();
  if (options.check_payloads) {
    while (auto frame = reader.next()) take(RecordInfo{reader.last_offset(), frame->header});
  } else {
    while (auto info = reader.next_header()) take(*info);
  }

  report.damage = reader.damage();
  if (const auto& index = reader.index()) {
    report.index_present = true;
    // Records lost to damage are missing from `found` but not from the index; that damage is
    // already reported, so only entries naming a record that was read are compared.
    const std::uint64_t index_offset = reader.records_end();
    std::map<std::uint64_t, const format::IndexEntry*> by_offset;
    for (const auto& entry : found) by_offset[entry.offset] = &entry;
    for (std::size_t i = 0; i < index->size(); ++i) {
      const format::IndexEntry& entry = (*index)[i];
      auto it = by_offset.find(entry.offset);
      bool lost_to_damage = false;
      for (const Damage& d : report.damage)
        if (entry.offset >= d.offset && entry.offset < d.offset + d.length) lost_to_damage = true;
      if (lost_to_damage) continue;
      if (it == by_offset.end() || !(*it->second == entry)) {
        report.damage.push_back(Damage{index_offset, reader.file_size() - index_offset, DamageKind::index,
                                       fmt::format("index entry {} (sequence {} at offset {}) does not match the records "
                                                   "in the file",
                                                   i, entry.sequence, entry.offset)});
        break;
      }
    }
    if (report.damage.empty() && index->size() != found.size())
      report.damage.push_back(Damage{index_offset, reader.file_size() - index_offset, DamageKind::index,
                                     fmt::format("the index lists {} records, the file holds {}", index->size(), found.size())});
  }
  return report;
}

}  // namespace covflow::replay

// `covflow collect`: the fan-in of several covflowd workers (docs/scale.md). Subscribes to each
// worker's results, puts the results back in sequence order through a bounded reorder buffer
// (covflow/pipeline/sequence_reorder.hpp) and republishes them, unchanged, on one PUB socket.
//   covflow collect --connect ENDPOINT [--connect ENDPOINT ...] --publish ENDPOINT
//                   [--reports-publish ENDPOINT] [--window N] [--wait-ms MS] [--first-seq S] [--frames N]
#pragma once

#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "covflow/pipeline/sequence_reorder.hpp"

namespace covflow::cli {

struct CollectRequest {
  std::vector<std::string> connect;        // the workers' daemon.results_endpoint
  std::string publish;                     // bound: the results in order, topic "result"
  std::string reports_publish;             // bound: the collector's counters, topic "collect"; empty: none
  std::size_t window = 256;                // results held behind a missing sequence at most
  std::int64_t wait_ms = 1000;             // the longest a result waits for a missing sequence
  std::optional<std::uint64_t> first_seq;  // the first sequence; unset: the smallest of the first results
  std::uint64_t frames = 0;                // sequences to account for, then exit (0: until interrupted)
  std::int64_t interval_ms = 5000;         // counters on stderr (and reports-publish) this often
};

// The "seq" of a result message (docs/zmq.md, "result"): the top-level key's unsigned integer,
// found without parsing the rest (covflowd writes it first). nullopt when there is none.
std::optional<std::uint64_t> parse_result_seq(std::string_view json);

// The collector's counters as the JSON object it publishes and prints at the end.
nlohmann::json collect_counters_json(const pipeline::SequenceReorderCounters& counters, std::uint64_t malformed,
                                     std::uint64_t held, std::optional<std::uint64_t> first,
                                     std::optional<std::uint64_t> next);

// Runs until `frames` sequences are accounted for (released or given up as missing) or `stop` is
// set, then releases what it holds (with `frames`, the sequences never received count missing),
// prints the final counters as one JSON line on `out` and a summary on `err`. Exit codes: 0 then;
// 2 for an endpoint ZeroMQ cannot connect to; 5 for one it cannot bind.
int run_collect(const CollectRequest& request, const std::atomic<bool>& stop, std::ostream& out, std::ostream& err);

}  // namespace covflow::cli

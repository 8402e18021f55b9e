// `covflow report`: the HTML report of a covflowd run (docs/report.md). The page is drawn by the
// Python package covflow_report with matplotlib; this side finds the package beside the covflow
// executable, hands it the run's configuration resolved (every key, as `covflowd --print-config`
// writes it, so the package never repeats the daemon's defaults), runs it and returns its exit code.
//   covflow report RUN.jsonl [--config FILE] [--set KEY=VALUE ...] [--frames FILE.cvf] [--frame SEQ] --out report.html
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>

namespace covflow::cli {

struct ReportRequest {
  std::string results;                      // JSON Lines of result and latency messages
  std::string out;                          // the HTML page to write
  std::optional<std::string> config_yaml;   // the run's configuration, resolved (config::to_yaml); none: unknown
  std::string config_label;                 // how the page names that configuration
  std::string frames;                       // the run's input frame file (empty: none): which frames got no result
  std::optional<std::uint64_t> frame;       // the frame whose spectrum and beam pattern are drawn (default: the last)
};

// Where covflow looks for the package: the running executable's directory joined with the install
// layout's path from the binaries to the package (the build tree copies the package to the same place).
std::filesystem::path report_package_dir();

// Runs `python3 -m covflow_report`. Exit codes: the package's (docs/cli.md: 0, 2, 3, 4 with the
// page written, 5), or 9 when the interpreter, matplotlib or the package itself is missing.
int run_report(const ReportRequest& request, std::ostream& err);

}  // namespace covflow::cli

// One spdlog logger per module ("pipeline", "stages", "covflowd", ...), all writing to stderr with
// the same pattern; the level is set once for all of them.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace covflow::pipeline {

// The logger named `module`, created on first use.
std::shared_ptr<spdlog::logger> logger(const std::string& module);

// Sets the level of every covflow logger, present and future. Accepts spdlog's names
// (trace, debug, info, warn, error, critical, off); throws std::invalid_argument otherwise.
void set_log_level(const std::string& level);

}  // namespace covflow::pipeline

#include "covflow/pipeline/logging.hpp"

#include <mutex>
#include <stdexcept>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace covflow::pipeline {
namespace {

std::mutex registry_mutex;
spdlog::level::level_enum current_level = spdlog::level::info;

}  // namespace

std::shared_ptr<spdlog::logger> logger(const std::string& module) {
  std::lock_guard lock(registry_mutex);
  if (auto existing = spdlog::get(module)) return existing;
  auto created = spdlog::stderr_color_mt(module);
  created->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ [%n] %v");
  created->set_level(current_level);
  return created;
}

void set_log_level(const std::string& level) {
  const auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off")
    throw std::invalid_argument("unknown log level '" + level +
                                "' (expected trace, debug, info, warn, error, critical or off)");
  std::lock_guard lock(registry_mutex);
  current_level = parsed;
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& l) { l->set_level(parsed); });
}

}  // namespace covflow::pipeline

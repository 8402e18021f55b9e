// Loading: YAML text → Config, validated against the schema (schema.hpp), then command-line
// overrides, then the rules that tie keys together. Every problem is one ConfigError naming the
// file, line and key (error.hpp); nothing here crashes on bad input.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "covflow/config/config.hpp"
#include "covflow/config/error.hpp"

namespace covflow::config {

// `overrides` are "KEY=VALUE" strings as given to --set: KEY is a dotted path
// (pipeline.budget_ms, or a whole section: pipeline.stages.subspace) and VALUE is YAML
// (4, cpu, [0, 1], {enabled: true}). They apply in order, after the file.
Config load_file(const std::filesystem::path& path, std::span<const std::string> overrides = {});

// The same for text already in memory; `name` stands for the file in messages.
Config load_string(std::string_view yaml, std::string_view name, std::span<const std::string> overrides = {});

// The defaults (the built-in demo) with overrides applied.
Config load_defaults(std::span<const std::string> overrides = {});

// The configuration as YAML that load_string reads back to an equal Config: every key, in
// schema order.
std::string to_yaml(const Config& config);

}  // namespace covflow::config

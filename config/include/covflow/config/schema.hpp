// The schema, one entry per key: its dotted path, type, allowed values, default and a one-line
// description. The same table drives parsing, validation, to_yaml and the reference in
// docs/config.md (reference_markdown), so the documentation cannot drift from the code.
#pragma once

#include <string>
#include <vector>

namespace covflow::config {

struct KeyInfo {
  std::string path;         // "pipeline.budget_ms"; list items as "scenario.sources[].angle_deg"
  std::string type;         // "number", "integer", "boolean", "string", "list of integers", ...
  std::string allowed;      // "(0, 60000]", "auto | cuda | cpu", ...
  std::string default_text; // as YAML
  std::string description;
};

// Every key, in the order of the reference.
std::vector<KeyInfo> schema_keys();

// The generated part of docs/config.md: a table per section.
std::string reference_markdown();

}  // namespace covflow::config

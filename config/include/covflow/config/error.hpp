// The one exception configuration loading throws. what() is
//   FILE:LINE: KEY: what was expected (got ...)[; did you mean 'x'?]
// with FILE:LINE replaced by "--set" for a command-line override, by FILE alone when no line
// applies (a missing file, a rule between keys none of which the file set), and KEY "-" when
// the problem is not about one key (YAML syntax).
#pragma once

#include <stdexcept>
#include <string>

namespace covflow::config {

class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string where, std::string key, std::string problem)
      : std::runtime_error(where + ": " + key + ": " + problem), where_(std::move(where)), key_(std::move(key)) {}
  // "FILE:LINE", "FILE" or "--set"
  const std::string& where() const noexcept { return where_; }
  const std::string& key() const noexcept { return key_; }

 private:
  std::string where_;
  std::string key_;
};

}  // namespace covflow::config

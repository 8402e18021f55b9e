// The schema table shared by the loader, to_yaml and the reference generator (internal).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "covflow/config/config.hpp"

namespace covflow::config::detail {

struct IntRange {
  std::int64_t min, max;
  std::string text() const;
};

struct RealRange {
  double min, max;
  bool min_open = false, max_open = false;
  bool contains(double value) const;
  std::string text() const;
};

// An enumeration field seen as the index of its value in the key's `choices`.
struct ChoiceRef {
  int (*get)(const Config&);
  void (*set)(Config&, int);
};

template <class Access>
ChoiceRef choice(Access) {
  return {[](const Config& c) { return int(Access{}(const_cast<Config&>(c))); },
          [](Config& c, int value) {
            auto& field = Access{}(c);
            field = std::remove_reference_t<decltype(field)>(value);
          }};
}

using Accessor = std::variant<bool& (*)(Config&), std::int64_t& (*)(Config&), std::optional<std::int64_t>& (*)(Config&),
                              double& (*)(Config&), std::string& (*)(Config&), ChoiceRef,
                              std::vector<std::int64_t>& (*)(Config&), std::vector<Emitter>& (*)(Config&),
                              std::vector<double>& (*)(Config&), std::vector<ClutterSector>& (*)(Config&),
                              std::vector<ElementPosition>& (*)(Config&)>;

// A string's own check: the problem, or "" when the value is fine.
using StringCheck = std::string (*)(const std::string&);

struct Key {
  std::string_view path;
  Accessor access;
  std::string_view description;
  IntRange ints{0, 0};              // integers, optional integers, integer list items; number and position lists: their length
  RealRange reals{0, 0};            // numbers, number list items, position coordinates
  std::vector<std::string_view> choices{};
  StringCheck check = nullptr;      // strings
  std::string_view expected{};      // strings: what is expected, in words
};

// A number field of the mappings in a list of emitters or clutter sectors.
template <class Item>
struct ItemField {
  std::string_view name;
  double Item::*member;
  RealRange range;
  std::string_view description;
  bool required = true;  // else it defaults to Item{}'s value
};

const std::vector<Key>& keys();
const std::array<ItemField<Emitter>, 3>& emitter_fields();
const std::array<ItemField<ClutterSector>, 5>& clutter_fields();
const Key* find_key(std::string_view path);
// The names directly below a section ("" is the root), in schema order.
std::vector<std::string> children(std::string_view section);
bool is_section(std::string_view path);

// The value of `key` in `config`, written as YAML.
std::string value_text(const Key& key, const Config& config);
std::string quote(std::string_view text);

// Enumeration names by value, shared with name(...).
inline constexpr std::array<std::string_view, 7> log_level_names{"trace", "debug", "info", "warn", "error", "critical", "off"};
inline constexpr std::array<std::string_view, 3> backend_names{"auto", "cuda", "cpu"};
inline constexpr std::array<std::string_view, 3> ingest_source_names{"synth", "file", "zmq"};
inline constexpr std::array<std::string_view, 3> pace_names{"recorded", "fixed", "fast"};
inline constexpr std::array<std::string_view, 2> zmq_pattern_names{"sub", "pull"};
inline constexpr std::array<std::string_view, 2> scenario_payload_names{"snapshots", "covariance"};
inline constexpr std::array<std::string_view, 3> array_geometry_names{"linear", "planar", "positions"};
inline constexpr std::array<std::string_view, 3> scenario_covariance_names{"sample", "model", "wishart"};
inline constexpr std::array<std::string_view, 2> sample_type_names{"cf32", "cf64"};
inline constexpr std::array<std::string_view, 3> overflow_names{"drop_oldest", "reject_newest", "block"};
inline constexpr std::array<std::string_view, 2> source_count_names{"mdl", "aic"};
inline constexpr std::array<std::string_view, 2> subspace_method_names{"eig", "svd"};
inline constexpr std::array<std::string_view, 4> compress_format_names{"tlr", "lowrank", "auto", "h2"};

}  // namespace covflow::config::detail

// YAML → Config through the schema table. Each problem throws one ConfigError naming where.
#include "covflow/config/load.hpp"

#include "covflow/config/endpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "covflow/config/did_you_mean.hpp"
#include "schema_table.hpp"

namespace covflow::config {
namespace {

using detail::ChoiceRef;
using detail::Key;

// Largest frame payload the frame file format carries (docs/frame-format.md, "Limits").
constexpr double max_frame_bytes = 4294967296.0;

[[noreturn]] void fail(const std::string& where, const std::string& key, const std::string& problem) {
  throw ConfigError(where, key, problem);
}

struct Origin {
  std::string name;           // the file, or "--set"
  bool command_line = false;

  std::string where(const YAML::Mark& mark) const {
    if (command_line) return "--set";
    if (mark.is_null() || mark.line < 0) return name;
    return fmt::format("{}:{}", name, mark.line + 1);
  }
};

YAML::Mark mark_of(const YAML::Node& node, const YAML::Mark& fallback) {
  const YAML::Mark mark = node.Mark();
  return mark.is_null() || mark.line < 0 ? fallback : mark;
}

bool quoted(const YAML::Node& node) { return node.Tag() == "!"; }

// How a value is shown after "got".
std::string got(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar: return quoted(node) ? detail::quote(node.Scalar()) : node.Scalar();
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Null: return node.Scalar().empty() ? "nothing" : node.Scalar();
    default: return "nothing";
  }
}

std::optional<std::int64_t> as_integer(const YAML::Node& node) {
  if (!node.IsScalar() || quoted(node)) return std::nullopt;
  std::string_view text = node.Scalar();
  if (text.starts_with('+')) text.remove_prefix(1);
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

std::optional<double> as_real(const YAML::Node& node) {
  if (!node.IsScalar() || quoted(node)) return std::nullopt;
  std::string_view text = node.Scalar();
  if (text.starts_with('+')) text.remove_prefix(1);
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty() || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::optional<bool> as_boolean(const YAML::Node& node) {
  if (!node.IsScalar() || quoted(node)) return std::nullopt;
  const std::string& text = node.Scalar();
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  return std::nullopt;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates, const std::string& prefix = "") {
  if (auto suggestion = closest(word, candidates)) return fmt::format("; did you mean '{}{}'?", prefix, *suggestion);
  return {};
}

// Counts the documents of a stream and notes where each starts.
class DocumentStarts final : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// Refuses a stream of more than one document, and a token yaml-cpp 0.7 cannot start a node with
// (a stray ','): its parser then reports an empty document without consuming the token — so
// Load() would return an empty configuration and LoadAll() would never return (a yaml-cpp bug,
// github.com/jbeder/yaml-cpp/issues/1040, fixed upstream in 2024). Such a parser is recognised by a document that starts where
// the previous one did.
void check_single_document(std::string_view yaml, const Origin& origin, const std::string& key) {
  std::istringstream stream{std::string(yaml)};
  YAML::Parser parser(stream);
  DocumentStarts documents;
  while (documents.starts.size() < 2 && parser.HandleNextDocument(documents)) {}
  if (documents.starts.size() < 2) return;
  const YAML::Mark second = documents.starts[1];  // a copy: the vector grows below
  if (second.pos == documents.starts[0].pos || (parser.HandleNextDocument(documents) && documents.starts[2].pos == second.pos)) {
    const YAML::Mark stuck = documents.starts.back();
    const char token = std::size_t(stuck.pos) < yaml.size() ? yaml[std::size_t(stuck.pos)] : ' ';
    fail(origin.where(stuck), key, fmt::format("YAML syntax: a node cannot start with '{}'", token));
  }
  fail(origin.name, key, "expected one YAML document (got more)");
}

// A list of mappings of number fields at `path` (set at `where`): each field known, given once,
// in range; the required ones present; the others at their defaults unless given.
template <class Item, std::size_t N>
std::vector<Item> parse_items(const YAML::Node& node, const std::string& path, const std::string& where, const Origin& origin,
                              const std::array<detail::ItemField<Item>, N>& fields, std::string_view example) {
  std::vector<std::string> field_names, required;
  for (const auto& f : fields) {
    field_names.emplace_back(f.name);
    if (f.required) required.emplace_back(f.name);
  }
  const std::string required_text =
      required.size() == 1 ? required[0]
                           : fmt::format("{} and {}", fmt::join(required.begin(), required.end() - 1, ", "), required.back());
  if (!node.IsSequence())
    fail(where, path, fmt::format("expected a list of {{{}}} mappings, such as {} (got {})", fmt::join(required, ", "), example,
                                  got(node)));
  std::vector<Item> out;
  for (std::size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    const YAML::Mark item_mark = mark_of(item, node.Mark());
    const std::string item_key = fmt::format("{}[{}]", path, i);
    if (!item.IsMap())
      fail(origin.where(item_mark), item_key, fmt::format("expected a mapping with {} (got {})", required_text, got(item)));
    Item value_of_item{};
    std::map<std::string, int> seen;
    for (auto it = item.begin(); it != item.end(); ++it) {
      const std::string name = it->first.IsScalar() ? it->first.Scalar() : std::string();
      const std::string name_where = origin.where(mark_of(it->first, item_mark));
      const auto known = std::find(field_names.begin(), field_names.end(), name);
      if (known == field_names.end())
        fail(name_where, item_key + "." + name,
             fmt::format("unknown key; expected one of {}{}", fmt::join(field_names, ", "), did_you_mean(name, field_names)));
      if (auto [first, fresh] = seen.emplace(name, it->first.Mark().line + 1); !fresh)
        fail(name_where, item_key + "." + name, fmt::format("given twice (first on line {})", first->second));
      const auto& spec = fields[std::size_t(known - field_names.begin())];
      const auto value = as_real(it->second);
      if (!value || !spec.range.contains(*value))
        fail(origin.where(mark_of(it->second, item_mark)), item_key + "." + name,
             fmt::format("expected a number in {} (got {})", spec.range.text(), got(it->second)));
      value_of_item.*spec.member = *value;
    }
    for (const auto& spec : fields)
      if (spec.required && !seen.contains(std::string(spec.name)))
        fail(origin.where(item_mark), item_key + "." + std::string(spec.name),
             fmt::format("required: expected a number in {} (got nothing)", spec.range.text()));
    out.push_back(value_of_item);
  }
  return out;
}

class Loader {
 public:
  explicit Loader(std::string base_where) : base_where_(std::move(base_where)) {}

  Config config;

  // Applies `node` at `path`: a leaf key's value, or a section's mapping ("" is the root).
  void apply(const YAML::Node& node, const std::string& path, const YAML::Mark& key_mark, const Origin& origin) {
    if (const Key* key = detail::find_key(path)) {
      set_leaf(*key, node, path, key_mark, origin);
      return;
    }
    const std::string label = path.empty() ? std::string("(top level)") : path;
    if (node.IsNull()) return;  // an empty section keeps its defaults
    if (!node.IsMap())
      fail(origin.where(mark_of(node, key_mark)), label,
           fmt::format("expected a mapping of {} (got {})", fmt::join(detail::children(path), ", "), got(node)));
    std::map<std::string, int> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      const YAML::Node name_node = it->first;  // a copy: `*it` is a temporary
      const std::string where = origin.where(mark_of(name_node, key_mark));
      if (!name_node.IsScalar()) fail(where, label, fmt::format("expected a key name (got {})", got(name_node)));
      const std::string& name = name_node.Scalar();
      const std::string child = path.empty() ? name : path + "." + name;
      if (!detail::find_key(child) && !detail::is_section(child)) {
        const auto candidates = detail::children(path);
        fail(where, child,
             fmt::format("unknown key; expected one of {}{}", fmt::join(candidates, ", "), did_you_mean(name, candidates)));
      }
      const int line = name_node.Mark().line + 1;
      if (auto [first, fresh] = seen.emplace(name, line); !fresh)
        fail(where, child, fmt::format("given twice (first on line {})", first->second));
      apply(it->second, child, mark_of(name_node, key_mark), origin);
    }
  }

  void apply_override(const std::string& text) {
    const Origin origin{"--set", true};
    const auto equals = text.find('=');
    if (equals == std::string::npos || equals == 0)
      fail("--set", text, "expected KEY=VALUE, such as pipeline.budget_ms=4");
    const std::string path = text.substr(0, equals);
    // Walk the path so that a misspelt segment is named with a suggestion for the whole path.
    std::string parent;
    std::size_t start = 0;
    while (true) {
      const auto dot = path.find('.', start);
      const std::string segment = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      const std::string here = parent.empty() ? segment : parent + "." + segment;
      if (detail::find_key(parent)) fail("--set", path, fmt::format("unknown key; {} is a value, not a section", parent));
      if (!detail::find_key(here) && !detail::is_section(here)) {
        const auto candidates = detail::children(parent);
        fail("--set", path,
             fmt::format("unknown key; expected one of {}{}", fmt::join(candidates, ", "),
                         did_you_mean(segment, candidates, parent.empty() ? "" : parent + ".")));
      }
      parent = here;
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    YAML::Node value;
    try {
      check_single_document(text.substr(equals + 1), origin, path);
      value = YAML::Load(text.substr(equals + 1));
    } catch (const YAML::Exception& e) {
      fail("--set", path, "YAML syntax: " + e.msg);
    }
    apply(value, path, YAML::Mark::null_mark(), origin);
  }

  // Rules between keys, checked once everything is applied. The error names the key the rule
  // is about, where that key (or the key that made the rule apply) was set.
  void check_rules() {
    check_array();
    // The default update rank is a chunk size, not a request: a window shorter than it is updated
    // in chunks of the whole window. A rank that was set must fit the window (below).
    AdaptiveStageConfig& chunks = config.pipeline.stages.adaptive;
    if (!set_at_.contains("pipeline.stages.adaptive.update_rank"))
      chunks.update_rank = std::min(chunks.update_rank, chunks.window_snapshots);
    const Config& c = config;
    if (c.ingest.source == IngestSource::file && c.ingest.file.path.empty())
      fail(where_of({"ingest.file.path", "ingest.source"}), "ingest.file.path",
           "required when ingest.source is 'file' (got nothing)");
    if (c.ingest.file.start_seq && c.ingest.file.stop_seq && *c.ingest.file.stop_seq < *c.ingest.file.start_seq)
      fail(where_of({"ingest.file.stop_seq"}), "ingest.file.stop_seq",
           fmt::format("expected at least ingest.file.start_seq ({}) (got {})", *c.ingest.file.start_seq,
                       *c.ingest.file.stop_seq));
    if (c.device.backend == Backend::cuda && c.device.cpu_lanes != 1)
      fail(where_of({"device.cpu_lanes", "device.backend"}), "device.cpu_lanes",
           fmt::format("expected 1 when device.backend is 'cuda' (a lane per GPU: device.gpus) (got {})", c.device.cpu_lanes));
    if (c.device.backend == Backend::cpu && !c.device.gpus.empty())
      fail(where_of({"device.gpus", "device.backend"}), "device.gpus",
           fmt::format("expected no GPU ids when device.backend is 'cpu' (got [{}])", fmt::join(c.device.gpus, ", ")));
    check_distinct_endpoints();
    // A socket anyone on the network reaches is authenticated, or trusted by an explicit choice.
    for (const auto& [key, endpoint] : {std::pair{"daemon.results_endpoint", &c.daemon.results_endpoint},
                                        std::pair{"daemon.reports_endpoint", &c.daemon.reports_endpoint},
                                        std::pair{"daemon.control_endpoint", &c.daemon.control_endpoint}})
      if (!endpoint_is_local(*endpoint) && c.daemon.curve.secret_key_file.empty() && !c.daemon.allow_unauthenticated)
        fail(where_of({key}), key,
             fmt::format("expected an endpoint on loopback, ipc or inproc (got {}, reachable from the network): secure it "
                         "with daemon.curve.secret_key_file, or set daemon.allow_unauthenticated: true to trust the "
                         "network",
                         detail::quote(*endpoint)));
    if (!c.daemon.curve.clients_file.empty() && c.daemon.curve.secret_key_file.empty())
      fail(where_of({"daemon.curve.clients_file"}), "daemon.curve.clients_file",
           "needs daemon.curve.secret_key_file: client keys are checked in CURVE handshakes");
    const auto emitters = c.scenario.sources.size() + c.scenario.jammers.size();
    if (std::int64_t(emitters) >= c.scenario.elements)
      fail_at({"scenario.jammers", "scenario.sources", "scenario.elements"},
           fmt::format("expected fewer emitters (sources and jammers) than scenario.elements ({}) (got {})",
                       c.scenario.elements, emitters));
    if (c.scenario.covariance != ScenarioCovariance::sample && c.scenario.payload != ScenarioPayload::covariance)
      fail(where_of({"scenario.covariance", "scenario.payload"}), "scenario.covariance",
           fmt::format("expected sample when scenario.payload is '{}': model and wishart are what covariance frames "
                       "carry (got {})",
                       name(c.scenario.payload), name(c.scenario.covariance)));
    const double element_bytes = c.scenario.element_type == SampleType::cf64 ? 16 : 8;
    const double per_cell = c.scenario.payload == ScenarioPayload::snapshots
                                ? double(c.scenario.elements) * double(c.scenario.snapshots)
                                : double(c.scenario.elements) * double(c.scenario.elements);
    const double frame_bytes = per_cell * double(c.scenario.cells) * element_bytes;
    if (frame_bytes > max_frame_bytes)
      fail_at({"scenario.cells", "scenario.snapshots", "scenario.elements", "scenario.payload", "scenario.element_type"},
           fmt::format("expected a frame of at most {} bytes (got {} bytes: {} {} per cell × {} cells × {} bytes)",
                       max_frame_bytes, frame_bytes, per_cell,
                       c.scenario.payload == ScenarioPayload::snapshots ? "samples" : "matrix elements", c.scenario.cells,
                       element_bytes));
    const FeedShape& feed = c.ingest.zmq.shape;
    const double feed_bytes = (feed.payload == ScenarioPayload::snapshots ? double(feed.elements) * double(feed.snapshots)
                                                                          : double(feed.elements) * double(feed.elements)) *
                              double(feed.cells) * (feed.element_type == SampleType::cf64 ? 16 : 8);
    if (feed_bytes > max_frame_bytes)
      fail_at({"ingest.zmq.shape.cells", "ingest.zmq.shape.snapshots", "ingest.zmq.shape.elements",
               "ingest.zmq.shape.payload", "ingest.zmq.shape.element_type"},
              fmt::format("expected a record payload of at most {} bytes (got {} bytes)", max_frame_bytes, feed_bytes));
    const AngleGrid& grid = c.pipeline.stages.subspace.angle_grid;
    if (grid.max_deg <= grid.min_deg)
      fail(where_of({"pipeline.stages.subspace.angle_grid.max_deg", "pipeline.stages.subspace.angle_grid.min_deg"}),
           "pipeline.stages.subspace.angle_grid.max_deg",
           fmt::format("expected more than angle_grid.min_deg ({}) (got {})", grid.min_deg, grid.max_deg));
    if (c.pipeline.stages.subspace.enabled && c.scenario.geometry != ArrayGeometry::linear)
      fail(where_of({"pipeline.stages.subspace.enabled", "scenario.geometry"}), "pipeline.stages.subspace.enabled",
           fmt::format("expected false when scenario.geometry is '{}': the subspace stage computes its MUSIC spectrum "
                       "through FFTs along a uniform linear array (got true)",
                       name(c.scenario.geometry)));
    check_subspace_method();
    const struct {
      const char* key;
      double value;
    } stage_budgets[] = {{"pipeline.stages.subspace.budget_ms", c.pipeline.stages.subspace.budget_ms},
                         {"pipeline.stages.adaptive.budget_ms", c.pipeline.stages.adaptive.budget_ms},
                         {"pipeline.stages.compress.budget_ms", c.pipeline.stages.compress.budget_ms}};
    for (const auto& stage : stage_budgets)
      if (stage.value > c.pipeline.budget_ms)
        fail(where_of({stage.key, "pipeline.budget_ms"}), stage.key,
             fmt::format("expected at most pipeline.budget_ms ({}) (got {})", c.pipeline.budget_ms, stage.value));
    const AdaptiveStageConfig& adaptive = c.pipeline.stages.adaptive;
    if (adaptive.update_rank > adaptive.window_snapshots)
      fail(where_of({"pipeline.stages.adaptive.update_rank", "pipeline.stages.adaptive.window_snapshots"}),
           "pipeline.stages.adaptive.update_rank",
           fmt::format("expected at most window_snapshots ({}) (got {})", adaptive.window_snapshots, adaptive.update_rank));
    if (adaptive.beam_pattern_points == 1)
      fail(where_of({"pipeline.stages.adaptive.beam_pattern_points"}), "pipeline.stages.adaptive.beam_pattern_points",
           "expected 0 (no pattern) or at least 2: the grid runs from -90 to 90 degrees inclusive (got 1)");
    check_compress();
  }

 private:
  // The compress stage's own rules: a tile's rank cap fits the tile, and the MVDR looks go through
  // the TLR factor, which formats lowrank and h2 do not make.
  void check_compress() {
    const CompressStageConfig& compress = config.pipeline.stages.compress;
    if (compress.max_rank > compress.tile)
      fail(where_of({"pipeline.stages.compress.max_rank", "pipeline.stages.compress.tile"}),
           "pipeline.stages.compress.max_rank",
           fmt::format("expected at most pipeline.stages.compress.tile ({}), or 0 for tile / 2 (got {})", compress.tile,
                       compress.max_rank));
    if ((compress.format == CompressFormat::lowrank || compress.format == CompressFormat::h2) &&
        !compress.looks_deg.empty())
      fail(where_of({"pipeline.stages.compress.looks_deg", "pipeline.stages.compress.format"}),
           "pipeline.stages.compress.looks_deg",
           fmt::format("expected no looks with format {}: the MVDR weights are solved with the TLR Cholesky "
                       "factor, which format tlr or auto makes (got {} looks)",
                       name(compress.format), compress.looks_deg.size()));
  }

  // A planar array has rows × cols elements and a list as many as it has positions: that is
  // scenario.elements for them (the channel count everything downstream reads), and a value given
  // for it too must agree. Positions given for another geometry would be silently unused.
  void check_array() {
    ScenarioConfig& s = config.scenario;
    if (s.geometry != ArrayGeometry::positions && !s.positions.empty())
      fail(where_of({"scenario.positions"}), "scenario.positions",
           fmt::format("expected no positions when scenario.geometry is '{}' (got {}); set scenario.geometry to "
                       "positions to use them",
                       name(s.geometry), s.positions.size()));
    std::int64_t elements = 0;
    std::string array;
    if (s.geometry == ArrayGeometry::planar) {
      elements = s.planar.rows * s.planar.cols;
      if (elements < 2 || elements > 4096)
        fail_at({"scenario.planar.cols", "scenario.planar.rows", "scenario.geometry"},
                fmt::format("expected rows × cols in [2, 4096] (got {} × {} = {})", s.planar.rows, s.planar.cols, elements));
      array = fmt::format("a {} × {} planar array", s.planar.rows, s.planar.cols);
    } else if (s.geometry == ArrayGeometry::positions) {
      elements = std::int64_t(s.positions.size());
      if (elements < 2)
        fail(where_of({"scenario.positions", "scenario.geometry"}), "scenario.positions",
             fmt::format("expected at least 2 positions when scenario.geometry is 'positions' (got {})", elements));
      array = fmt::format("{} listed positions", elements);
    } else {
      return;
    }
    if (set_at_.contains("scenario.elements") && s.elements != elements)
      fail(where_of({"scenario.elements"}), "scenario.elements",
           fmt::format("expected {} for {}, or no value (got {})", elements, array, s.elements));
    s.elements = elements;
  }

  // The svd method decomposes each cell's N × K snapshot matrix of one frame: it needs snapshot
  // frames, K ≥ N (else U lacks part of the noise subspace), and an estimate of one frame. The
  // input's kind is known here for the generator and a feed; a file's records say it only once the
  // file is opened, and the pipeline refuses them then (stages::make_processing_stages).
  void check_subspace_method() {
    const Config& c = config;
    const SubspaceStageConfig& subspace = c.pipeline.stages.subspace;
    if (!subspace.enabled || subspace.method != SubspaceMethod::svd) return;
    constexpr const char* method = "pipeline.stages.subspace.method";
    struct Input {
      const char* payload_key;
      ScenarioPayload payload;
      const char* snapshots_key;
      std::int64_t snapshots;
      const char* elements_key;
      std::int64_t elements;
    };
    std::optional<Input> input;
    if (c.ingest.source == IngestSource::synth)
      input = Input{"scenario.payload", c.scenario.payload, "scenario.snapshots", c.scenario.snapshots,
                    "scenario.elements", c.scenario.elements};
    else if (c.ingest.source == IngestSource::zmq)
      input = Input{"ingest.zmq.shape.payload", c.ingest.zmq.shape.payload, "ingest.zmq.shape.snapshots",
                    c.ingest.zmq.shape.snapshots, "ingest.zmq.shape.elements", c.ingest.zmq.shape.elements};
    if (input && input->payload == ScenarioPayload::covariance)
      fail(where_of({method, input->payload_key}), method,
           fmt::format("expected eig for an input of covariance frames ({} is 'covariance'): svd decomposes each "
                       "cell's snapshots, which such frames do not carry (got svd)",
                       input->payload_key));
    if (input && input->snapshots < input->elements)
      fail(where_of({method, input->snapshots_key, input->elements_key}), method,
           fmt::format("expected eig when a cell has fewer snapshots than array elements ({} {} < {} {}): svd's "
                       "singular vectors then miss part of the noise subspace (got svd)",
                       input->snapshots_key, input->snapshots, input->elements_key, input->elements));
    if (c.pipeline.stages.covariance.window > 1)
      fail(where_of({method, "pipeline.stages.covariance.window"}), method,
           fmt::format("expected pipeline.stages.covariance.window 1 with svd, which decomposes the snapshots of one "
                       "frame, not a window of frames (got window {})",
                       c.pipeline.stages.covariance.window));
  }

  void check_distinct_endpoints() {
    const DaemonConfig& d = config.daemon;
    const std::pair<const char*, const std::string*> endpoints[] = {{"daemon.results_endpoint", &d.results_endpoint},
                                                                   {"daemon.reports_endpoint", &d.reports_endpoint},
                                                                   {"daemon.control_endpoint", &d.control_endpoint}};
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (*endpoints[i].second == *endpoints[j].second)
          fail(where_of({endpoints[i].first, endpoints[j].first}), endpoints[i].first,
               fmt::format("expected an endpoint other than {}'s (got {})", endpoints[j].first,
                           detail::quote(*endpoints[i].second)));
  }

  // Fails naming the first of `paths` that was set, where it was set (the first path and the
  // file's name when none was): the key most likely to be the one to change.
  [[noreturn]] void fail_at(std::initializer_list<const char*> paths, const std::string& problem) const {
    for (const char* path : paths)
      if (auto it = set_at_.find(path); it != set_at_.end()) fail(it->second, path, problem);
    fail(base_where_, *paths.begin(), problem);
  }

  // Where the first of `paths` that was set was set; the file's name when none was.
  std::string where_of(std::initializer_list<const char*> paths) const {
    for (const char* path : paths)
      if (auto it = set_at_.find(path); it != set_at_.end()) return it->second;
    return base_where_;
  }

  void set_leaf(const Key& key, const YAML::Node& node, const std::string& path, const YAML::Mark& key_mark,
                const Origin& origin) {
    const std::string where = origin.where(mark_of(node, key_mark));
    auto reject = [&](const std::string& expected, const std::string& suffix = "") {
      fail(where, path, fmt::format("expected {} (got {}){}", expected, got(node), suffix));
    };
    struct Visitor {
      Loader& self;
      const Key& key;
      const YAML::Node& node;
      const std::string& path;
      const std::string& where;
      const Origin& origin;
      decltype(reject)& bad;

      void operator()(bool& (*field)(Config&)) const {
        const auto value = as_boolean(node);
        if (!value) bad("true or false");
        field(self.config) = *value;
      }
      void operator()(std::int64_t& (*field)(Config&)) const {
        const auto value = as_integer(node);
        if (!value || *value < key.ints.min || *value > key.ints.max) bad("an integer in " + key.ints.text());
        field(self.config) = *value;
      }
      void operator()(std::optional<std::int64_t>& (*field)(Config&)) const {
        if (node.IsNull()) {
          field(self.config).reset();
          return;
        }
        const auto value = as_integer(node);
        if (!value || *value < key.ints.min || *value > key.ints.max) bad("null or an integer in " + key.ints.text());
        field(self.config) = *value;
      }
      void operator()(double& (*field)(Config&)) const {
        const auto value = as_real(node);
        if (!value || !key.reals.contains(*value)) bad("a number in " + key.reals.text());
        field(self.config) = *value;
      }
      void operator()(std::string& (*field)(Config&)) const {
        if (node.IsNull() && key.check == nullptr) {
          field(self.config).clear();
          return;
        }
        if (!node.IsScalar()) bad("a " + std::string(key.expected));
        if (key.check != nullptr)
          if (std::string problem = key.check(node.Scalar()); !problem.empty())
            fail(where, path, fmt::format("{} (got {})", problem, got(node)));
        field(self.config) = node.Scalar();
      }
      void operator()(ChoiceRef field) const {
        const std::string expected = fmt::format("one of {}", fmt::join(key.choices, ", "));
        if (!node.IsScalar()) bad(expected);
        const auto it = std::find(key.choices.begin(), key.choices.end(), node.Scalar());
        if (it == key.choices.end())
          bad(expected, did_you_mean(node.Scalar(), std::vector<std::string>(key.choices.begin(), key.choices.end())));
        field.set(self.config, int(it - key.choices.begin()));
      }
      void operator()(std::vector<std::int64_t>& (*field)(Config&)) const {
        const std::string expected = "a list of integers in " + key.ints.text() + ", such as [0, 1]";
        if (!node.IsSequence()) bad(expected);
        std::vector<std::int64_t> values;
        for (std::size_t i = 0; i < node.size(); ++i) {
          const YAML::Node item = node[i];
          const std::string item_where = origin.where(mark_of(item, node.Mark()));
          const std::string item_key = fmt::format("{}[{}]", path, i);
          const auto value = as_integer(item);
          if (!value || *value < key.ints.min || *value > key.ints.max)
            fail(item_where, item_key, fmt::format("expected an integer in {} (got {})", key.ints.text(), got(item)));
          if (std::find(values.begin(), values.end(), *value) != values.end())
            fail(item_where, item_key, fmt::format("expected each id once (got {} again)", *value));
          values.push_back(*value);
        }
        field(self.config) = std::move(values);
      }
      void operator()(std::vector<double>& (*field)(Config&)) const {
        const std::string expected = fmt::format("a list of {} to {} numbers in {}, such as [5, -10]", key.ints.min,
                                                 key.ints.max, key.reals.text());
        if (!node.IsSequence() || std::int64_t(node.size()) < key.ints.min || std::int64_t(node.size()) > key.ints.max)
          bad(expected);
        std::vector<double> values;
        for (std::size_t i = 0; i < node.size(); ++i) {
          const YAML::Node item = node[i];
          const auto value = as_real(item);
          if (!value || !key.reals.contains(*value))
            fail(origin.where(mark_of(item, node.Mark())), fmt::format("{}[{}]", path, i),
                 fmt::format("expected a number in {} (got {})", key.reals.text(), got(item)));
          values.push_back(*value);
        }
        field(self.config) = std::move(values);
      }
      void operator()(std::vector<Emitter>& (*field)(Config&)) const {
        field(self.config) = parse_items(node, path, where, origin, detail::emitter_fields(), "[{angle_deg: 10, power_db: 20}]");
      }
      void operator()(std::vector<ClutterSector>& (*field)(Config&)) const {
        field(self.config) =
            parse_items(node, path, where, origin, detail::clutter_fields(), "[{center_deg: 0, width_deg: 30, power_db: 20}]");
        for (std::size_t i = 0; i < node.size(); ++i) {
          // The sector's own rule: it lies within the azimuths an emitter may have.
          const ClutterSector& sector = field(self.config)[i];
          const double widest = 2.0 * (90.0 - std::abs(sector.center_deg));
          if (sector.width_deg > widest)
            fail(origin.where(mark_of(node[i], node.Mark())), fmt::format("{}[{}].width_deg", path, i),
                 fmt::format("expected at most {} for a sector centred at {}, so that it lies within [-90, 90] (got {})",
                             widest, sector.center_deg, sector.width_deg));
        }
      }
      void operator()(std::vector<ElementPosition>& (*field)(Config&)) const {
        const std::string expected = fmt::format("a list of at most {} positions [x, y, z] with coordinates in {}, such "
                                                 "as [[0, 0, 0], [0, 0.5, 0]]",
                                                 key.ints.max, key.reals.text());
        if (!node.IsSequence() || std::int64_t(node.size()) < key.ints.min || std::int64_t(node.size()) > key.ints.max)
          bad(expected);
        std::vector<ElementPosition> positions;
        for (std::size_t i = 0; i < node.size(); ++i) {
          const YAML::Node item = node[i];
          const std::string item_where = origin.where(mark_of(item, node.Mark()));
          const std::string item_key = fmt::format("{}[{}]", path, i);
          if (!item.IsSequence() || item.size() != 3)
            fail(item_where, item_key,
                 fmt::format("expected [x, y, z] with each coordinate a number in {} (got {})", key.reals.text(),
                             item.IsSequence() ? fmt::format("a list of {}", item.size()) : got(item)));
          double xyz[3];
          for (std::size_t d = 0; d < 3; ++d) {
            const auto value = as_real(item[d]);
            if (!value || !key.reals.contains(*value))
              fail(origin.where(mark_of(item[d], item.Mark())), fmt::format("{}[{}]", item_key, d),
                   fmt::format("expected a number in {} (got {})", key.reals.text(), got(item[d])));
            xyz[d] = *value;
          }
          const ElementPosition position{xyz[0], xyz[1], xyz[2]};
          // Two elements in one place would be one element counted twice.
          if (const auto same = std::find(positions.begin(), positions.end(), position); same != positions.end())
            fail(item_where, item_key,
                 fmt::format("expected a position of its own (got [{}, {}, {}], the position of {}[{}])", position.x,
                             position.y, position.z, path, same - positions.begin()));
          positions.push_back(position);
        }
        field(self.config) = std::move(positions);
      }
    };
    std::visit(Visitor{*this, key, node, path, where, origin, reject}, key.access);
    set_at_[path] = where;
  }

  std::string base_where_;
  std::map<std::string, std::string> set_at_;
};

Config load(std::string_view yaml, const std::string& name, std::span<const std::string> overrides, bool has_file) {
  Loader loader(has_file ? name : std::string("--set"));
  try {
    if (has_file) {
      YAML::Node root;
      try {
        check_single_document(yaml, Origin{name}, "-");
        root = YAML::Load(std::string(yaml));
      } catch (const YAML::DeepRecursion& e) {
        fail(Origin{name}.where(e.mark), "-", "YAML syntax: collections nested too deeply");
      } catch (const YAML::ParserException& e) {
        fail(Origin{name}.where(e.mark), "-", "YAML syntax: " + e.msg);
      }
      loader.apply(root, "", YAML::Mark::null_mark(), Origin{name});
    }
    for (const std::string& text : overrides) loader.apply_override(text);
  } catch (const YAML::Exception& e) {
    // Anything yaml-cpp throws past the parser is still bad input, never a crash.
    fail(Origin{name}.where(e.mark), "-", "YAML: " + e.msg);
  }
  loader.check_rules();
  return loader.config;
}

}  // namespace

Config load_string(std::string_view yaml, std::string_view name, std::span<const std::string> overrides) {
  return load(yaml, std::string(name), overrides, true);
}

Config load_file(const std::filesystem::path& path, std::span<const std::string> overrides) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  if (!in || std::filesystem::is_directory(path, ec))
    fail(path.string(), "-", fmt::format("cannot read the file ({})", std::filesystem::is_directory(path, ec) ? "it is a directory" : std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  return load(text.str(), path.string(), overrides, true);
}

Config load_defaults(std::span<const std::string> overrides) { return load("", "--set", overrides, false); }

std::string to_yaml(const Config& config) {
  std::string out;
  std::vector<std::string> open;  // the sections of the previous key
  for (const Key& key : detail::keys()) {
    std::vector<std::string> segments;
    std::string_view rest = key.path;
    for (auto dot = rest.find('.'); dot != std::string_view::npos; dot = rest.find('.')) {
      segments.emplace_back(rest.substr(0, dot));
      rest.remove_prefix(dot + 1);
    }
    std::size_t common = 0;
    while (common < open.size() && common < segments.size() && open[common] == segments[common]) ++common;
    for (std::size_t level = common; level < segments.size(); ++level)
      out += fmt::format("{:{}}{}:\n", "", 2 * level, segments[level]);
    out += fmt::format("{:{}}{}: {}\n", "", 2 * segments.size(), rest, detail::value_text(key, config));
    open = std::move(segments);
  }
  return out;
}

}  // namespace covflow::config

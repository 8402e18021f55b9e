// The "result" message writer (docs/zmq.md, "result"), read back with nlohmann's parser: every
// field's value, numbers exactly (a float's text reads back to the same float), null where a
// number is NaN or infinite, stage names escaped, the optional arrays only when asked, the cells
// clamped to what the slot holds, and a second write into the same string allocating nothing.
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "covflow/pipeline/endpoints.hpp"
#include "test_support.hpp"

// Heap allocations made by this thread, counted by the replaced global operator new below (the
// array and nothrow forms count too), so that a test can tell that a write allocated nothing.
namespace {
thread_local std::size_t this_thread_allocations = 0;
}

// Not inlined, neither `new` nor `delete`: GCC would otherwise see malloc() paired with `delete`,
// or `new` with free(), and warn of a mismatch.
[[gnu::noinline]] void* operator new(std::size_t size) {
  ++this_thread_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// Every other form of the plain operators too, so that whatever allocates (libzmq uses the nothrow
// form) frees through the same pair: under AddressSanitizer a pair left to its runtime would
// meet a free() here and be reported as mismatched.
[[gnu::noinline]] void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  ++this_thread_allocations;
  return std::malloc(size == 0 ? 1 : size);
}
[[gnu::noinline]] void* operator new[](std::size_t size) { return ::operator new(size); }
[[gnu::noinline]] void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept { return ::operator new(size, tag); }
[[gnu::noinline]] void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace covflow::pipeline {
namespace {

using nlohmann::json;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A slot sized for 3 cells (3 sources, 4 spectrum points, 2 channels, 2 looks) with results in
// the first 2: the third holds values that must not appear.
FrameSlot filled_slot() {
  FrameShape shape;
  shape.channels = 2;
  shape.cells = 3;
  shape.max_sources = 3;
  shape.spectrum_points = 4;
  shape.looks = 2;

  FrameSlot f;
  f.sequence = 0xFFFF'FFFF'FFFF'FFF0ull;  // beyond 2^53: must come back exact, not through a double
  f.header.kind = replay::PayloadKind::covariance;
  f.header.element_type = replay::ElementType::cf64;
  f.times = {.capture_ns = -42, .arrival_ns = 815527319044012, .deadline_ns = 815527329044012, .done_ns = 815527322871733};
  auto& r = f.results;
  r.reserve(shape);
  r.cells = 2;
  // One line per cell; the third is beyond `cells`.
  r.source_count = {2, -1, 9};
  r.cell_status = {0, -7, 5};
  r.doa_deg = {-20.1f, kNaN, 31.2f,
               kInf, kNaN, kNaN,
               1.0f, 2.0f, 3.0f};
  r.sinr_db = {18.2f, kNaN,
               -kInf, 1e-7f,
               99.0f, 99.0f};
  r.null_depth_db = {52.3f, 0.0f,
                     std::numeric_limits<float>::max(), -0.0f,
                     99.0f, 99.0f};
  r.spectrum_db = {0.1f, -1e30f, kNaN, 16777216.0f,
                   std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(), 123456789.0f, -3.5f,
                   9.0f, 9.0f, 9.0f, 9.0f};
  r.eigenvalues = {1e-6f, 2.5f,
                   kNaN, 7.0f,
                   9.0f, 9.0f};
  // [cell][look][channel]
  r.weights = {{1.0f, -0.5f}, {kNaN, 2.0f}, {0.25f, kInf}, {-3.0f, 4.0f},
               {5.0f, 6.0f}, {7.0f, 8.0f}, {kNaN, kNaN}, {1e-3f, -1e-3f},
               {9.0f, 9.0f}, {9.0f, 9.0f}, {9.0f, 9.0f}, {9.0f, 9.0f}};
  f.stages = {{StageRecord::Outcome::ran, 1.0 / 3.0},  // a double that no float's text reads back as
              {StageRecord::Outcome::skipped_degraded, 0.0},
              {StageRecord::Outcome::failed, std::numeric_limits<double>::quiet_NaN()},
              {StageRecord::Outcome::not_run, std::numeric_limits<double>::infinity()}};
  return f;
}

// Three names for four records: the fourth is labelled by its index.
const std::vector<std::string> kStageNames = {"cov\"ar\\iance\n\t\x01\x1f", "subspace", "adaptive"};

json written(const FrameSlot& frame, const ResultJsonOptions& options = {}) {
  std::string text;
  write_result_json(frame, kStageNames, options, text);
  return json::parse(text);
}

// `value` is the float `expected` (bit for bit: the sign of zero too), written as a floating-point
// number; or null where `expected` is not finite.
void expect_float(const json& value, float expected) {
  if (!std::isfinite(expected)) {
    EXPECT_TRUE(value.is_null()) << value.dump();
    return;
  }
  ASSERT_TRUE(value.is_number_float()) << value.dump() << " for " << expected;
  EXPECT_EQ(std::bit_cast<std::uint32_t>(value.get<float>()), std::bit_cast<std::uint32_t>(expected))
      << value.dump() << " reads back as " << value.get<float>() << ", not " << expected;
}

void expect_floats(const json& row, const std::vector<float>& expected) {
  ASSERT_TRUE(row.is_array()) << row.dump();
  ASSERT_EQ(row.size(), expected.size()) << row.dump();
  for (std::size_t k = 0; k < expected.size(); ++k) expect_float(row[k], expected[k]);
}

std::vector<std::string> keys_in_order(const std::string& text) {
  const auto object = nlohmann::ordered_json::parse(text);
  std::vector<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.push_back(key);
  return keys;
}

TEST(ResultJson, EveryFieldReadsBack) {
  const FrameSlot frame = filled_slot();
  const json body = written(frame, {.spectrum = true, .eigenvalues = true, .weights = true});

  EXPECT_EQ(body.at("seq").get<std::uint64_t>(), 0xFFFF'FFFF'FFFF'FFF0ull);
  EXPECT_FALSE(body.at("capture_ns").is_number_unsigned());  // get<std::int64_t>() would wrap it back to −42
  EXPECT_EQ(body.at("capture_ns").get<std::int64_t>(), -42);
  EXPECT_EQ(body.at("arrival_ns").get<std::int64_t>(), 815527319044012);
  EXPECT_EQ(body.at("deadline_ns").get<std::int64_t>(), 815527329044012);
  EXPECT_EQ(body.at("done_ns").get<std::int64_t>(), 815527322871733);
  ASSERT_TRUE(body.at("latency_ms").is_number_float());
  EXPECT_EQ(body.at("latency_ms").get<double>(), double(815527322871733 - 815527319044012) * 1e-6);
  EXPECT_EQ(body.at("late"), false);
  EXPECT_EQ(body.at("kind"), "covariance");
  EXPECT_EQ(body.at("element_type"), "cf64");
  EXPECT_EQ(body.at("cells"), 2);
  EXPECT_EQ(body.at("source_count"), json::array({2, -1}));
  EXPECT_EQ(body.at("cell_status"), json::array({0, -7}));

  // Not-found DOAs (NaN padding, and anything else not finite) are left out, not null.
  ASSERT_EQ(body.at("doa_deg").size(), 2u);
  expect_floats(body.at("doa_deg")[0], {-20.1f, 31.2f});
  expect_floats(body.at("doa_deg")[1], {});

  ASSERT_EQ(body.at("sinr_db").size(), 2u);
  expect_floats(body.at("sinr_db")[0], {18.2f, kNaN});
  expect_floats(body.at("sinr_db")[1], {-kInf, 1e-7f});
  ASSERT_EQ(body.at("null_depth_db").size(), 2u);
  expect_floats(body.at("null_depth_db")[0], {52.3f, 0.0f});
  expect_floats(body.at("null_depth_db")[1], {std::numeric_limits<float>::max(), -0.0f});

  const json& stages = body.at("stages");
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_EQ(stages[0].at("name"), "cov\"ar\\iance\n\t\x01\x1f");
  EXPECT_EQ(stages[0].at("outcome"), "ran");
  EXPECT_EQ(stages[0].at("ms").get<double>(), 1.0 / 3.0);
  EXPECT_EQ(stages[1].at("name"), "subspace");
  EXPECT_EQ(stages[1].at("outcome"), "skipped_degraded");
  ASSERT_TRUE(stages[1].at("ms").is_number_float());
  EXPECT_EQ(stages[1].at("ms").get<double>(), 0.0);
  EXPECT_EQ(stages[2].at("name"), "adaptive");
  EXPECT_EQ(stages[2].at("outcome"), "failed");
  EXPECT_TRUE(stages[2].at("ms").is_null()) << stages[2].dump();
  EXPECT_EQ(stages[3].at("name"), "3");  // no name given: its index
  EXPECT_EQ(stages[3].at("outcome"), "not_run");
  EXPECT_TRUE(stages[3].at("ms").is_null()) << stages[3].dump();
  for (const auto& stage : stages) EXPECT_EQ(stage.size(), 3u) << stage.dump();

  ASSERT_EQ(body.at("spectrum_db").size(), 2u);
  expect_floats(body.at("spectrum_db")[0], {0.1f, -1e30f, kNaN, 16777216.0f});
  expect_floats(body.at("spectrum_db")[1], {std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                                            123456789.0f, -3.5f});
  ASSERT_EQ(body.at("eigenvalues").size(), 2u);
  expect_floats(body.at("eigenvalues")[0], {1e-6f, 2.5f});
  expect_floats(body.at("eigenvalues")[1], {kNaN, 7.0f});

  // [cells][looks][channels][re, im]
  const json& weights = body.at("weights");
  ASSERT_EQ(weights.size(), 2u);
  const std::vector<std::vector<std::vector<std::vector<float>>>> expected_weights = {
      {{{1.0f, -0.5f}, {kNaN, 2.0f}}, {{0.25f, kInf}, {-3.0f, 4.0f}}},
      {{{5.0f, 6.0f}, {7.0f, 8.0f}}, {{kNaN, kNaN}, {1e-3f, -1e-3f}}}};
  for (std::size_t c = 0; c < 2; ++c) {
    ASSERT_EQ(weights[c].size(), 2u) << "cell " << c;
    for (std::size_t l = 0; l < 2; ++l) {
      ASSERT_EQ(weights[c][l].size(), 2u) << "cell " << c << " look " << l;
      for (std::size_t m = 0; m < 2; ++m) expect_floats(weights[c][l][m], expected_weights[c][l][m]);
    }
  }
}

// The text itself, compact: the shortest digits of each float ("0.1", not the double nearest to
// 0.1f), ".0" on integral values, null, and the short escapes.
TEST(ResultJson, TextAsWritten) {
  std::string text;
  write_result_json(filled_slot(), kStageNames, {.spectrum = true, .eigenvalues = true, .weights = true}, text);
  EXPECT_EQ(text,
            R"({"seq":18446744073709551600,"capture_ns":-42,"arrival_ns":815527319044012,"deadline_ns":815527329044012,)"
            R"("done_ns":815527322871733,"latency_ms":3.827721,"late":false,"kind":"covariance","element_type":"cf64",)"
            R"("cells":2,"source_count":[2,-1],"doa_deg":[[-20.1,31.2],[]],"cell_status":[0,-7],)"
            R"("sinr_db":[[18.2,null],[null,1e-07]],"null_depth_db":[[52.3,0.0],[3.4028235e+38,-0.0]],)"
            R"("stages":[{"name":"cov\"ar\\iance\n\t\u0001\u001f","outcome":"ran","ms":0.3333333333333333},)"
            R"({"name":"subspace","outcome":"skipped_degraded","ms":0.0},{"name":"adaptive","outcome":"failed","ms":null},)"
            R"({"name":"3","outcome":"not_run","ms":null}],)"
            R"("spectrum_db":[[0.1,-1e+30,null,16777216.0],[1.1754944e-38,1e-45,123456790.0,-3.5]],)"
            R"("eigenvalues":[[1e-06,2.5],[null,7.0]],)"
            R"("weights":[[[[1.0,-0.5],[null,2.0]],[[0.25,null],[-3.0,4.0]]],[[[5.0,6.0],[7.0,8.0]],[[null,null],[0.001,-0.001]]]]})");
}

TEST(ResultJson, FieldsComeInTheDocumentedOrderAndTheOptionalArraysOnlyWhenAsked) {
  const FrameSlot frame = filled_slot();
  const std::vector<std::string> always = {"seq", "capture_ns", "arrival_ns", "deadline_ns", "done_ns", "latency_ms",
                                           "late", "kind", "element_type", "cells", "source_count", "doa_deg",
                                           "cell_status", "sinr_db", "null_depth_db", "stages"};
  std::string text;
  write_result_json(frame, kStageNames, {}, text);
  EXPECT_EQ(keys_in_order(text), always);

  for (const auto& [options, key] : std::vector<std::pair<ResultJsonOptions, std::string>>{
           {{.spectrum = true}, "spectrum_db"}, {{.eigenvalues = true}, "eigenvalues"}, {{.weights = true}, "weights"}}) {
    write_result_json(frame, kStageNames, options, text);
    auto expected = always;
    expected.push_back(key);
    EXPECT_EQ(keys_in_order(text), expected);
  }

  write_result_json(frame, kStageNames, {.spectrum = true, .eigenvalues = true, .weights = true}, text);
  auto expected = always;
  expected.insert(expected.end(), {"spectrum_db", "eigenvalues", "weights"});
  EXPECT_EQ(keys_in_order(text), expected);
  const std::vector<std::string> stage_keys = {"name", "outcome", "ms"};
  const auto stages = nlohmann::ordered_json::parse(text).at("stages");
  for (const auto& stage : stages) {
    std::vector<std::string> keys;
    for (const auto& [key, value] : stage.items()) keys.push_back(key);
    EXPECT_EQ(keys, stage_keys);
  }
}

TEST(ResultJson, LateAndDoneTimeWhenTheFrameHasNone) {
  FrameSlot frame = filled_slot();
  frame.times.done_ns = frame.times.deadline_ns + 1;
  EXPECT_EQ(written(frame).at("late"), true);
  frame.times.done_ns = frame.times.deadline_ns;
  EXPECT_EQ(written(frame).at("late"), false);

  // done_ns 0 (still in flight): the time of writing, on the steady clock.
  frame.times.done_ns = 0;
  const auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  frame.times.arrival_ns = now_ns();
  frame.times.deadline_ns = frame.times.arrival_ns + 10'000'000'000;
  const json body = written(frame);
  const std::int64_t after = now_ns();
  const auto done = body.at("done_ns").get<std::int64_t>();
  EXPECT_GE(done, frame.times.arrival_ns);
  EXPECT_LE(done, after);
  EXPECT_EQ(body.at("latency_ms").get<double>(), double(done - frame.times.arrival_ns) * 1e-6);
  EXPECT_EQ(body.at("late"), false);
}

TEST(ResultJson, CellsAreClampedToWhatTheSlotHolds) {
  FrameSlot frame = filled_slot();
  frame.results.cells = 7;  // more than the slot's 3
  json body = written(frame, {.spectrum = true, .eigenvalues = true, .weights = true});
  EXPECT_EQ(body.at("cells"), 3);
  EXPECT_EQ(body.at("source_count"), json::array({2, -1, 9}));
  EXPECT_EQ(body.at("cell_status"), json::array({0, -7, 5}));
  for (const char* key : {"doa_deg", "sinr_db", "null_depth_db", "spectrum_db", "eigenvalues", "weights"})
    EXPECT_EQ(body.at(key).size(), 3u) << key;
  expect_floats(body.at("doa_deg")[2], {1.0f, 2.0f, 3.0f});
  expect_floats(body.at("weights")[2][1][1], {9.0f, 9.0f});

  // The capacity is source_count's: a longer cell_status is cut to it, a shorter one shown whole.
  frame.results.source_count.resize(2);
  body = written(frame);
  EXPECT_EQ(body.at("cells"), 2);
  EXPECT_EQ(body.at("cell_status"), json::array({0, -7}));
  frame.results.source_count.resize(3);
  frame.results.cell_status.resize(1);
  EXPECT_EQ(written(frame).at("cell_status"), json::array({0}));

  // No results at all (a slot without capacity): no cells, whatever `cells` says.
  FrameSlot empty;
  empty.results.cells = 4;
  empty.stages.resize(1);
  body = written(empty, {.spectrum = true, .eigenvalues = true, .weights = true});
  EXPECT_EQ(body.at("cells"), 0);
  for (const char* key : {"source_count", "doa_deg", "cell_status", "sinr_db", "null_depth_db", "spectrum_db", "eigenvalues", "weights"})
    EXPECT_EQ(body.at(key), json::array()) << key;

  // No looks configured: an empty row per cell, and no weights.
  FrameSlot no_looks = filled_slot();
  no_looks.results.sinr_db.clear();
  no_looks.results.null_depth_db.clear();
  no_looks.results.weights.clear();
  body = written(no_looks, {.weights = true});
  EXPECT_EQ(body.at("sinr_db"), json::parse("[[], []]"));
  EXPECT_EQ(body.at("null_depth_db"), json::parse("[[], []]"));
  EXPECT_EQ(body.at("weights"), json::parse("[[], []]"));
}

TEST(ResultJson, StageNamesAreEscaped) {
  FrameSlot frame = filled_slot();
  std::string every_control_character;
  for (int c = 0; c < 0x20; ++c) every_control_character += char(c);
  const std::vector<std::string> names = {every_control_character, "\"quoted\" \\ back/slash", "utf-8: é → 漢"};
  frame.stages.resize(names.size());
  std::string text;
  write_result_json(frame, names, {}, text);
  const json stages = json::parse(text).at("stages");
  ASSERT_EQ(stages.size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(stages[i].at("name"), names[i]) << text;
}

TEST(ResultJson, FloatsReadBackAsTheSameFloat) {
  const std::uint64_t seed = test::fresh_seed("ResultJson.FloatsReadBackAsTheSameFloat");
  std::mt19937_64 rng(seed);
  FrameShape shape;
  shape.cells = 4;
  shape.spectrum_points = 4096;
  FrameSlot frame;
  frame.results.reserve(shape);
  frame.results.cells = shape.cells;
  // Any bit pattern: every exponent, subnormals, NaN and infinities among them.
  std::uniform_int_distribution<std::uint32_t> bits;
  for (float& v : frame.results.spectrum_db) v = std::bit_cast<float>(bits(rng));
  // Integers of every size, whose shortest text has no point of its own.
  for (std::size_t k = 0; k < 64; ++k) frame.results.spectrum_db[k] = float(std::int32_t(bits(rng)) >> (k % 32));
  const json rows = written(frame, {.spectrum = true}).at("spectrum_db");
  ASSERT_EQ(rows.size(), shape.cells);
  for (std::size_t c = 0; c < shape.cells; ++c)
    expect_floats(rows[c], std::vector<float>(frame.results.spectrum_db.begin() + std::ptrdiff_t(c * shape.spectrum_points),
                                              frame.results.spectrum_db.begin() + std::ptrdiff_t((c + 1) * shape.spectrum_points)));
}

TEST(ResultJson, ASecondWriteIntoTheSameStringAllocatesNothing) {
  const FrameSlot frame = filled_slot();
  const ResultJsonOptions options{.spectrum = true, .eigenvalues = true, .weights = true};
  std::string text = "what was there before {";
  write_result_json(frame, kStageNames, options, text);
  const std::string first = text;
  ASSERT_NO_THROW(json::parse(text)) << text;  // what was there is gone
  const std::size_t capacity = text.capacity();
  const char* storage = text.data();

  const std::size_t allocations_before = this_thread_allocations;
  write_result_json(frame, kStageNames, options, text);
  EXPECT_EQ(this_thread_allocations - allocations_before, 0u);
  EXPECT_EQ(text.capacity(), capacity);
  EXPECT_EQ(text.data(), storage);
  EXPECT_EQ(text, first);

  // A smaller message, then the large one again: still the same storage.
  FrameSlot fewer = frame;
  fewer.results.cells = 1;
  const std::size_t allocations_between = this_thread_allocations;
  write_result_json(fewer, kStageNames, options, text);
  EXPECT_LT(text.size(), first.size());
  write_result_json(frame, kStageNames, options, text);
  EXPECT_EQ(this_thread_allocations - allocations_between, 0u);
  EXPECT_EQ(text.capacity(), capacity);
  EXPECT_EQ(text, first);
}

// The adaptive stage's beam patterns (pipeline.stages.adaptive.beam_pattern_points): present, as
// [cells][looks][points], exactly when the slot keeps them, the last key; values read back, NaN as null.
TEST(ResultJson, BeamPatternsAreNestedCellsLooksPoints) {
  FrameSlot frame = filled_slot();
  EXPECT_FALSE(written(frame).contains("beam_pattern_db"));  // the shape keeps none
  FrameShape shape;
  shape.channels = 2;
  shape.cells = 3;
  shape.looks = 2;
  shape.beam_pattern_points = 3;
  frame.results.beam_pattern_db.assign(std::size_t(shape.cells) * shape.looks * shape.beam_pattern_points, 99.0f);
  // [cell][look][point] for the 2 cells with results; the third cell's 99s must not appear.
  const std::vector<float> values = {0.0f, -3.5f, kNaN,  -41.25f, 0.0f, 1e-7f,
                                     -kInf, -60.0f, 0.5f, -12.0f, -0.0f, -90.0f};
  std::copy(values.begin(), values.end(), frame.results.beam_pattern_db.begin());
  std::string text;
  write_result_json(frame, kStageNames, {}, text);
  EXPECT_EQ(keys_in_order(text).back(), "beam_pattern_db");
  const json pattern = json::parse(text).at("beam_pattern_db");
  ASSERT_TRUE(pattern.is_array());
  ASSERT_EQ(pattern.size(), 2u) << pattern.dump();
  for (std::size_t c = 0; c < 2; ++c) {
    ASSERT_EQ(pattern[c].size(), 2u) << pattern.dump();
    for (std::size_t l = 0; l < 2; ++l)
      expect_floats(pattern[c][l], {values[(c * 2 + l) * 3], values[(c * 2 + l) * 3 + 1], values[(c * 2 + l) * 3 + 2]});
  }
}

}  // namespace
}  // namespace covflow::pipeline

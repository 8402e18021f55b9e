// The checks of the compress stage, written once against an Exec so that stages_test runs them on
// a CPU Exec and stages_gpu_test on a CUDA one. The references are the test's own: the lowrank
// form's rank and error from LAPACK's eigenvalues (linalg::heev on the CPU) with the noise mean
// recomputed for every rank, and the TLR stage's format against the tlr-only and lowrank-only
// stages run on the same frame.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "covflow/config/config.hpp"
#include "covflow/config/error.hpp"
#include "covflow/linalg/h2.hpp"
#include "covflow/linalg/heev.hpp"
#include "covflow/linalg/types.hpp"
#include "covflow/pipeline/endpoints.hpp"
#include "covflow/stages/compress_stage.hpp"
#include "covflow/stages/processing.hpp"
#include "covflow/stages/scenario.hpp"
#include "slot_support.hpp"
#include "test_support.hpp"

namespace covflow::test::compress_checks {

using Compressed = pipeline::FrameResults::Compressed;

template <class T>
constexpr config::SampleType sample_type() {
  return std::is_same_v<T, linalg::cf32> ? config::SampleType::cf32 : config::SampleType::cf64;
}

// A 6 × 8 planar array (48 elements) under two jammers, a weak source and a clutter sector, whose
// model covariance frames the generator makes; tiles of 12 (a 4 × 4 tile grid) and, with
// `ragged`, of 10 (a last tile row of 8).
template <class T>
config::Config planar_config(std::uint64_t seed, config::CompressFormat format, double tolerance, bool clutter = true) {
  config::Config c;
  auto& s = c.scenario;
  s.geometry = config::ArrayGeometry::planar;
  s.planar.rows = 6;
  s.planar.cols = 8;
  s.elements = 48;
  s.sources = {{10.0, 0.0, 3.0}};
  s.jammers = {{-40.0, 40.0, 0.0}, {25.0, 35.0, 12.0}};
  if (clutter) s.clutter = {{0.0, 60.0, 30.0, -2.0}};
  s.cells = 4;
  s.snapshots = 96;
  s.payload = config::ScenarioPayload::covariance;
  s.covariance = config::ScenarioCovariance::model;
  s.element_type = sample_type<T>();
  s.seed = static_cast<std::int64_t>(seed >> 1);
  c.pipeline.stages.covariance.enabled = false;
  c.pipeline.stages.subspace.enabled = false;
  c.pipeline.stages.adaptive.enabled = false;
  auto& k = c.pipeline.stages.compress;
  k.enabled = true;
  k.format = format;
  k.tolerance = tolerance;
  k.tile = 12;
  return c;
}

// The stage alone, prepared on `exec`, with a slot.
struct Harness {
  Harness(const config::Config& c, linalg::Exec& e) : config(c), exec(e), shape(stages::frame_shape(c)), generator(c.scenario) {
    auto chain = stages::make_processing_stages(c);
    EXPECT_EQ(chain.size(), 1u);
    owned = std::move(chain.front());
    stage = dynamic_cast<stages::CompressStage*>(owned.get());
    EXPECT_NE(stage, nullptr);
    stage->prepare(shape, exec);
    stages.push_back(stage);
    slot = std::make_unique<TestSlot>(shape, exec, stages);
  }
  void run(const replay::Frame& frame) {
    slot->load(frame);
    std::fill(slot->slot.results.cell_status.begin(), slot->slot.results.cell_status.end(), 0);
    slot->run(stages);
  }
  const Compressed& out() const { return slot->slot.results.compress; }

  config::Config config;
  linalg::Exec& exec;
  pipeline::FrameShape shape;
  stages::ScenarioGenerator generator;
  std::unique_ptr<pipeline::Stage> owned;
  stages::CompressStage* stage = nullptr;
  std::vector<pipeline::Stage*> stages;
  std::unique_ptr<TestSlot> slot;
};

// A cell's covariance from the frame, in double.
template <class T>
std::vector<std::complex<double>> cell_matrix(const replay::Frame& frame, std::size_t cell) {
  const std::size_t n = frame.header.rows;
  const auto* x = reinterpret_cast<const T*>(frame.payload.data()) + cell * n * n;
  std::vector<std::complex<double>> r(n * n);
  for (std::size_t i = 0; i < n * n; ++i) r[i] = {double(x[i].real()), double(x[i].imag())};
  return r;
}

// The least rank r whose lowrank form σ²I + (r leading eigen-pairs) is within τ·‖R‖_F, and its
// error, with σ² and the spread recomputed from scratch for every r (two passes, long double).
struct LowRankReference {
  int rank = 0;
  double error = 0.0;
};
inline LowRankReference lowrank_reference(std::vector<std::complex<double>> r, int n, double tolerance) {
  linalg::Exec cpu = linalg::Exec::cpu();
  std::vector<double> w(n);
  std::vector<int> info(1);
  linalg::heev<linalg::cf64>(cpu, linalg::Batch<linalg::cf64>::packed(r.data(), n, n, 1), w, info);
  EXPECT_EQ(info[0], 0);
  long double total = 0;
  for (double v : w) total += (long double)v * v;
  for (int rank = 0; rank < n; ++rank) {
    const int m = n - rank;
    long double mean = 0, spread = 0;
    for (int i = 0; i < m; ++i) mean += w[i];
    mean /= m;
    for (int i = 0; i < m; ++i) spread += (w[i] - mean) * (w[i] - mean);
    const double error = double(std::sqrt(spread / total));
    if (error <= tolerance) return {rank, error};
  }
  return {n, 0.0};
}

// tlr, lowrank and auto on the same frames: every cell within τ, the lowrank rank the reference's,
// auto the smaller of the two, bytes below dense, and the JSON object the results socket carries.
template <class T>
void check_forms_meet_the_tolerance(linalg::Exec& exec) {
  const std::uint64_t seed = fresh_seed("compress stage");
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const double tolerance = std::is_same_v<T, linalg::cf32> ? 1e-4 : 1e-7;
  auto with_max_rank = [&](config::CompressFormat format, std::int64_t max_rank) {
    auto c = planar_config<T>(seed, format, tolerance);
    c.pipeline.stages.compress.max_rank = max_rank;
    return c;
  };
  Harness tlr(with_max_rank(config::CompressFormat::tlr, 12), exec);
  Harness low(with_max_rank(config::CompressFormat::lowrank, 12), exec);
  Harness both(with_max_rank(config::CompressFormat::automatic, 12), exec);
  // h2 is a candidate of auto on both lanes; the h2-only reference runs on a CPU lane.
  const bool with_h2 = true;
  linalg::Exec cpu = linalg::Exec::cpu();
  Harness h2(with_max_rank(config::CompressFormat::h2, 0), cpu);
  // The default cap, tile / 2 = 6, is below what the clutter's tiles need: cut there, the error is
  // the true one, above τ, and counted; auto then keeps the lowrank form, which meets τ.
  Harness capped(with_max_rank(config::CompressFormat::tlr, 0), exec);
  Harness capped_auto(with_max_rank(config::CompressFormat::automatic, 0), exec);
  const replay::Frame frame = tlr.generator.frame(3);
  for (Harness* h : {&tlr, &low, &both, &capped, &capped_auto, &h2}) h->run(frame);
  EXPECT_EQ(capped.stage->counters().over_tolerance, 4u);
  EXPECT_EQ(capped_auto.stage->counters().over_tolerance, 0u);
  for (std::size_t cell = 0; cell < 4; ++cell) {
    EXPECT_GT(capped.out().error[cell], tolerance);
    EXPECT_EQ(capped.out().rank_max[cell], 6);
    if (with_h2 && capped_auto.out().format[cell] == Compressed::h2) continue;  // h2 met τ in fewer bytes
    EXPECT_EQ(capped_auto.out().format[cell], Compressed::lowrank);
  }
  const int n = 48;
  for (std::size_t cell = 0; cell < 4; ++cell) {
    SCOPED_TRACE(::testing::Message() << "cell " << cell);
    EXPECT_EQ(tlr.out().format[cell], Compressed::tlr);
    EXPECT_EQ(low.out().format[cell], Compressed::lowrank);
    EXPECT_LE(tlr.out().error[cell], tolerance);
    EXPECT_LE(low.out().error[cell], tolerance);
    EXPECT_LT(tlr.out().bytes[cell], tlr.out().dense_bytes);
    EXPECT_EQ(tlr.out().dense_bytes, std::uint64_t(n) * n * 16);
    EXPECT_GT(tlr.out().rank_max[cell], 6);
    EXPECT_LT(tlr.out().rank_max[cell], 12);  // clutter and jammers leave no tile of full rank
    EXPECT_LE(tlr.out().rank_min[cell], tlr.out().rank_max[cell]);
    EXPECT_EQ(tlr.out().rank_count[cell], 6);  // the 4 × 4 grid's tiles below the diagonal
    const auto reference = lowrank_reference(cell_matrix<T>(frame, cell), n, tolerance);
    EXPECT_EQ(low.out().rank_min[cell], reference.rank);
    EXPECT_NEAR(low.out().error[cell], reference.error, 1e-3 * tolerance);
    EXPECT_EQ(low.out().bytes[cell], std::uint64_t(n) * reference.rank * 16 + reference.rank * 8 + 8);
    EXPECT_EQ(h2.out().format[cell], Compressed::h2);
    EXPECT_LE(h2.out().error[cell], tolerance);
    // auto: the form of fewest bytes (ties: lowrank, then tlr, then h2), with that form's numbers.
    std::int8_t form = Compressed::lowrank;
    std::uint64_t fewest = low.out().bytes[cell];
    if (tlr.out().bytes[cell] < fewest) {
      form = Compressed::tlr;
      fewest = tlr.out().bytes[cell];
    }
    if (with_h2 && h2.out().bytes[cell] < fewest) {
      form = Compressed::h2;
      fewest = h2.out().bytes[cell];
    }
    EXPECT_EQ(both.out().format[cell], form);
    EXPECT_EQ(both.out().bytes[cell], fewest);
    EXPECT_EQ(both.slot->slot.results.cell_status[cell], 0);
  }
  EXPECT_EQ(both.slot->slot.results.cells, 4u);
  const auto counters = both.stage->counters();
  EXPECT_EQ(counters.frames, 1u);
  EXPECT_EQ(counters.cells, 4u);
  EXPECT_EQ(counters.tlr_cells + counters.lowrank_cells + counters.h2_cells, 4u);
  EXPECT_EQ(counters.over_tolerance, 0u);

  // The result message's compress object.
  std::string json;
  const std::vector<std::string> names{"compress"};
  pipeline::write_result_json(both.slot->slot, names, {}, json);
  EXPECT_NE(json.find("\"compress\":{\"format\":["), std::string::npos) << json;
  for (const char* key : {"\"rank_min\":", "\"rank_mean\":", "\"rank_max\":", "\"bytes\":", "\"dense_bytes\":147456,",
                          "\"error\":["})
    EXPECT_NE(json.find(key), std::string::npos) << key << " in " << json;
  EXPECT_EQ(json.find("sinr_loss_db"), std::string::npos) << "no looks configured";
}

// A few jammers over noise and nothing else: the model covariance is σ²I plus rank 2, which the
// lowrank form holds exactly and auto prefers to tiles.
template <class T>
void check_jammers_over_noise_are_identity_plus_low_rank(linalg::Exec& exec) {
  const std::uint64_t seed = fresh_seed("compress stage");
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  auto c = planar_config<T>(seed, config::CompressFormat::automatic, 1e-4, /*clutter=*/false);
  c.scenario.sources.clear();
  Harness both(c, exec);
  both.run(both.generator.frame(0));
  for (std::size_t cell = 0; cell < 4; ++cell) {
    EXPECT_EQ(both.out().format[cell], Compressed::lowrank) << "cell " << cell;
    EXPECT_EQ(both.out().rank_max[cell], 2) << "cell " << cell;
    EXPECT_LE(both.out().error[cell], 1e-4);
  }
}

// MVDR through the TLR factor: at a tight tolerance the beams lose at most 0.1 dB of output SINR
// against dense weights (and never gain beyond rounding: the dense beam is the optimum); at a
// loose one they lose measurably more, or the factor is refused and counted.
template <class T>
void check_mvdr_sinr_loss(linalg::Exec& exec) {
  const std::uint64_t seed = fresh_seed("compress stage");
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  // Wishart frames (the sample covariance of K = 480 draws from the model) are of full rank, so
  // the tiles are truncated for real; their least eigenvalue, about 0.47, is 1e-6 of ‖R‖_F.
  auto tight = planar_config<T>(seed, config::CompressFormat::tlr, 1e-7);
  tight.scenario.covariance = config::ScenarioCovariance::wishart;
  tight.scenario.snapshots = 480;
  tight.pipeline.stages.compress.looks_deg = {0.0, 10.0, -20.0};
  tight.pipeline.stages.compress.tile = 20;  // a ragged last tile row (48 = 2·20 + 8)
  tight.pipeline.stages.compress.max_rank = 20;
  Harness good(tight, exec);
  auto loose_config = tight;
  loose_config.pipeline.stages.compress.tolerance = 1e-3;
  Harness loose(loose_config, exec);
  const replay::Frame frame = good.generator.frame(1);
  good.run(frame);
  loose.run(frame);
  double worst_tight = 0, worst_loose = 0;
  for (std::size_t beam = 0; beam < 4 * 3; ++beam) {
    const float l = good.out().sinr_loss_db[beam];
    ASSERT_TRUE(std::isfinite(l)) << "beam " << beam;
    EXPECT_LE(l, 0.1f) << "beam " << beam;
    EXPECT_GE(l, -1e-6f) << "beam " << beam;
    worst_tight = std::max(worst_tight, double(l));
    const float m = loose.out().sinr_loss_db[beam];
    if (std::isfinite(m)) worst_loose = std::max(worst_loose, double(m));
  }
  for (std::size_t cell = 0; cell < 4; ++cell) EXPECT_LT(good.out().rank_min[cell], 20) << "the tiles were truncated";
  const auto counters = loose.stage->counters();
  EXPECT_TRUE(worst_loose > 10 * worst_tight + 1e-3 || counters.mvdr_failures > 0)
      << "tight " << worst_tight << " dB, loose " << worst_loose << " dB";
  EXPECT_EQ(good.stage->counters().mvdr_failures, 0u);

  std::string json;
  const std::vector<std::string> names{"compress"};
  pipeline::write_result_json(good.slot->slot, names, {}, json);
  EXPECT_NE(json.find("\"sinr_loss_db\":[["), std::string::npos) << json;
}

// A NaN in one cell's covariance: that cell gets status non_finite_input and no form; the others'
// results are bit-identical to a clean run.
template <class T>
void check_nan_cell_is_isolated(linalg::Exec& exec) {
  const std::uint64_t seed = fresh_seed("compress stage");
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  // Unloaded, R's least eigenvalue is the noise power, 1, about 1e-6·‖R‖_F here: the TLR factor
  // exists at tolerances well below that.
  auto c = planar_config<T>(seed, config::CompressFormat::automatic, 1e-9);
  c.pipeline.stages.compress.max_rank = 12;
  c.pipeline.stages.compress.looks_deg = {5.0};
  Harness h(c, exec);
  const replay::Frame clean = h.generator.frame(2);
  h.run(clean);
  const Compressed before = h.out();
  replay::Frame bad = clean;
  auto* x = reinterpret_cast<T*>(bad.payload.data());
  x[2 * 48 * 48 + 5 * 48 + 7] = T(std::numeric_limits<typename T::value_type>::quiet_NaN(), 0);
  h.run(bad);
  EXPECT_EQ(h.slot->slot.results.cell_status[2], linalg::status::non_finite_input);
  EXPECT_EQ(h.out().format[2], Compressed::not_computed);
  EXPECT_TRUE(std::isnan(h.out().sinr_loss_db[2]));
  for (std::size_t cell : {0u, 1u, 3u}) {
    EXPECT_EQ(h.out().format[cell], before.format[cell]);
    EXPECT_EQ(h.out().bytes[cell], before.bytes[cell]);
    EXPECT_EQ(std::memcmp(&h.out().error[cell], &before.error[cell], sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(&h.out().sinr_loss_db[cell], &before.sinr_loss_db[cell], sizeof(float)), 0);
  }
  EXPECT_EQ(h.stage->counters().non_finite_cells, 1u);
}

// The planar test array's element positions as the stage takes them: the array lies in the y–z
// plane (x = 0 for every element), so the points are its (y, z).
inline std::vector<double> planar_points(const config::Config& c) {
  const auto positions = stages::element_positions(c.scenario);
  std::vector<double> points;
  for (const auto& p : positions) {
    EXPECT_EQ(p.x, 0.0);
    points.insert(points.end(), {p.y, p.z});
  }
  return points;
}

// format h2: per cell, the form linalg::h2_from_dense makes on the CPU of the cell's covariance on
// the array's element positions (bytes and level ranks as h2_stats reports them), its error
// measured against the covariance and within τ; the result message names the form. Looks with
// format h2 are refused when the stage is made.
//   A CPU lane runs that very construction: equal bytes and ranks, the error to 10⁻³·τ (the sums
//   in another order). A CUDA lane builds the cells at once on the device (linalg::H2DensePlan):
//   its ranks may differ by one at a level where a singular value lies within rounding of the
//   node threshold (then bytes differ, and only τ bounds both errors); with equal ranks the bytes
//   are equal and the errors agree to 10⁻²·τ (the kept subspaces agree up to rounding amplified by
//   the spectral gap at the threshold, far below that for these matrices).
template <class T>
void check_h2_form(linalg::Exec& exec) {
  const std::uint64_t seed = fresh_seed("compress stage");
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const double tolerance = std::is_same_v<T, linalg::cf32> ? 1e-4 : 1e-7;
  auto c = planar_config<T>(seed, config::CompressFormat::h2, tolerance);
  c.pipeline.stages.compress.leaf_size = 8;
  c.pipeline.stages.compress.eta = 1.0;
  Harness h(c, exec);
  const replay::Frame frame = h.generator.frame(4);
  h.run(frame);
  const int n = 48;
  const std::vector<double> points = planar_points(c);
  ASSERT_EQ(points.size(), std::size_t(2 * n));
  linalg::Exec cpu = linalg::Exec::cpu();
  linalg::H2Options options;
  options.leaf_size = 8;
  options.eta = 1.0;
  for (std::size_t cell = 0; cell < 4; ++cell) {
    SCOPED_TRACE(::testing::Message() << "cell " << cell);
    const auto r = cell_matrix<T>(frame, cell);
    const auto a = linalg::h2_from_dense<linalg::cf64>(cpu, linalg::Batch<const linalg::cf64>::packed(r.data(), n, n, 1),
                                                      points, 2, tolerance, options);
    const linalg::H2Stats stats = linalg::h2_stats(a);
    std::vector<linalg::cf64> e(std::size_t(n) * n);
    linalg::h2_expand<linalg::cf64>(cpu, a, linalg::Batch<linalg::cf64>::packed(e.data(), n, n, 1));
    double err2 = 0, norm2 = 0;
    for (std::size_t i = 0; i < e.size(); ++i) {
      err2 += std::norm(r[i] - e[i]);
      norm2 += std::norm(r[i]);
    }
    int levels = 0, largest = 0, smallest = 0;
    std::int64_t sum = 0;
    for (std::size_t l = 0; l < stats.ranks.size(); ++l)
      if (stats.coupling_blocks[l] > 0) {
        smallest = levels == 0 ? stats.ranks[l] : std::min(smallest, stats.ranks[l]);
        ++levels;
        largest = std::max(largest, stats.ranks[l]);
        sum += stats.ranks[l];
      }
    EXPECT_GT(levels, 0) << "the tree has admissible blocks";
    EXPECT_EQ(h.out().format[cell], Compressed::h2);
    EXPECT_LE(h.out().error[cell], tolerance);
    EXPECT_EQ(h.out().rank_count[cell], levels);
    const bool same_ranks = h.out().rank_max[cell] == largest && h.out().rank_min[cell] == smallest &&
                            h.out().rank_sum[cell] == sum;
    if (!exec.is_cuda()) {
      EXPECT_TRUE(same_ranks);
      EXPECT_EQ(h.out().bytes[cell], stats.total_bytes);
      EXPECT_NEAR(h.out().error[cell], std::sqrt(err2 / norm2), 1e-3 * tolerance);
    } else {
      EXPECT_LE(std::abs(h.out().rank_max[cell] - largest), 1);
      EXPECT_LE(std::abs(h.out().rank_sum[cell] - sum), levels);
      if (same_ranks) {
        EXPECT_EQ(h.out().bytes[cell], stats.total_bytes);
        EXPECT_NEAR(h.out().error[cell], std::sqrt(err2 / norm2), 1e-2 * tolerance);
      } else {
        std::cout << "[ compress h2 ] cell " << cell << ": device ranks " << h.out().rank_min[cell] << ".."
                  << h.out().rank_max[cell] << " (sum " << h.out().rank_sum[cell] << "), CPU " << smallest << ".."
                  << largest << " (sum " << sum << "): a singular value at the threshold\n";
      }
    }
  }
  EXPECT_EQ(h.stage->counters().h2_cells, 4u);
  std::string json;
  const std::vector<std::string> names{"compress"};
  pipeline::write_result_json(h.slot->slot, names, {}, json);
  EXPECT_NE(json.find("\"format\":[\"h2\",\"h2\",\"h2\",\"h2\"]"), std::string::npos) << json;

  auto with_looks = c;
  with_looks.pipeline.stages.compress.looks_deg = {0.0};
  EXPECT_THROW(stages::make_processing_stages(with_looks), std::exception);
}

// auto with H² among the candidates (a tree with admissible blocks: leaf 8, η = 1) on `exec`
// against the same stage on a CPU lane, same frame: per cell the same form, and that form's
// bytes, ranks and error as the CPU lane's (the error to 10⁻²·τ, as check_h2_form says why; a
// cell whose H² ranks differ by one at a threshold may then change form, reported and skipped).
template <class T>
void check_auto_with_h2_matches_the_cpu_lane(linalg::Exec& exec) {
  const std::uint64_t seed = fresh_seed("compress stage");
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const double tolerance = std::is_same_v<T, linalg::cf32> ? 1e-4 : 1e-7;
  auto c = planar_config<T>(seed, config::CompressFormat::automatic, tolerance);
  c.pipeline.stages.compress.leaf_size = 8;
  c.pipeline.stages.compress.eta = 1.0;
  c.pipeline.stages.compress.max_rank = 12;
  linalg::Exec cpu = linalg::Exec::cpu(2);
  Harness here(c, exec), there(c, cpu);
  auto h2_only = c;
  h2_only.pipeline.stages.compress.format = config::CompressFormat::h2;
  Harness h2_here(h2_only, exec), h2_there(h2_only, cpu);
  const replay::Frame frame = here.generator.frame(5);
  for (Harness* h : {&here, &there, &h2_here, &h2_there}) h->run(frame);
  for (std::size_t cell = 0; cell < 4; ++cell) {
    SCOPED_TRACE(::testing::Message() << "cell " << cell);
    const bool h2_agrees = h2_here.out().bytes[cell] == h2_there.out().bytes[cell] &&
                           h2_here.out().rank_sum[cell] == h2_there.out().rank_sum[cell];
    if (!h2_agrees) {
      std::cout << "[ compress auto ] cell " << cell << ": H² bytes " << h2_here.out().bytes[cell] << " here, "
                << h2_there.out().bytes[cell] << " on the CPU lane (a singular value at the threshold)\n";
      continue;
    }
    EXPECT_EQ(here.out().format[cell], there.out().format[cell]);
    EXPECT_EQ(here.out().bytes[cell], there.out().bytes[cell]);
    EXPECT_EQ(here.out().rank_min[cell], there.out().rank_min[cell]);
    EXPECT_EQ(here.out().rank_max[cell], there.out().rank_max[cell]);
    EXPECT_NEAR(here.out().error[cell], there.out().error[cell], 1e-2 * tolerance);
    EXPECT_LE(here.out().error[cell], tolerance);
    EXPECT_NEAR(h2_here.out().error[cell], h2_there.out().error[cell], 1e-2 * tolerance);
  }
  const auto counters = here.stage->counters();
  EXPECT_EQ(counters.tlr_cells + counters.lowrank_cells + counters.h2_cells, 4u);
  EXPECT_EQ(counters.over_tolerance, 0u);
}

// format h2 with a NaN in one cell's covariance: that cell gets status non_finite_input and no
// form; the other cells' results are bit-identical to a clean run of the same frame.
template <class T>
void check_h2_nan_cell_is_isolated(linalg::Exec& exec) {
  const std::uint64_t seed = fresh_seed("compress stage");
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  auto c = planar_config<T>(seed, config::CompressFormat::h2, std::is_same_v<T, linalg::cf32> ? 1e-4 : 1e-7);
  c.pipeline.stages.compress.leaf_size = 8;
  c.pipeline.stages.compress.eta = 1.0;
  Harness h(c, exec);
  const replay::Frame clean = h.generator.frame(6);
  h.run(clean);
  const Compressed before = h.out();
  replay::Frame bad = clean;
  auto* x = reinterpret_cast<T*>(bad.payload.data());
  x[1 * 48 * 48 + 30 * 48 + 3] = T(std::numeric_limits<typename T::value_type>::infinity(), 0);
  x[2 * 48 * 48 + 5 * 48 + 7] = T(std::numeric_limits<typename T::value_type>::quiet_NaN(), 0);
  h.run(bad);
  for (std::size_t cell : {1u, 2u}) {
    EXPECT_EQ(h.slot->slot.results.cell_status[cell], linalg::status::non_finite_input) << "cell " << cell;
    EXPECT_EQ(h.out().format[cell], Compressed::not_computed) << "cell " << cell;
  }
  for (std::size_t cell : {0u, 3u}) {
    SCOPED_TRACE(::testing::Message() << "cell " << cell);
    EXPECT_EQ(h.out().format[cell], Compressed::h2);
    EXPECT_EQ(h.out().bytes[cell], before.bytes[cell]);
    EXPECT_EQ(h.out().rank_sum[cell], before.rank_sum[cell]);
    EXPECT_EQ(std::memcmp(&h.out().error[cell], &before.error[cell], sizeof(float)), 0);
  }
  EXPECT_EQ(h.stage->counters().non_finite_cells, 2u);
  EXPECT_EQ(h.stage->counters().h2_cells, 6u);
}

// The frame loop's steady state with H² (auto, so every form runs): after the first frame the
// Exec's workspace never grows again (a CUDA lane's H² plan and buffers were made in prepare()),
// and a frame run again after others gives bit-identical results (nothing carries over from the
// frames between: every stored value of the padded H² forms is rewritten by each frame).
template <class T>
void check_h2_steady_state(linalg::Exec& exec) {
  const std::uint64_t seed = fresh_seed("compress stage");
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  auto c = planar_config<T>(seed, config::CompressFormat::automatic, std::is_same_v<T, linalg::cf32> ? 1e-4 : 1e-7);
  c.pipeline.stages.compress.leaf_size = 8;
  c.pipeline.stages.compress.eta = 1.0;
  c.pipeline.stages.compress.max_rank = 12;
  Harness h(c, exec);
  const replay::Frame first = h.generator.frame(7);
  h.run(first);
  const Compressed once = h.out();
  const std::size_t growths = exec.workspace().growth_count();
  const std::size_t capacity = exec.workspace().capacity();
  for (std::uint64_t sequence = 8; sequence < 12; ++sequence) h.run(h.generator.frame(sequence));
  h.run(first);
  EXPECT_EQ(exec.workspace().growth_count(), growths) << "the workspace grew in the frame loop";
  EXPECT_EQ(exec.workspace().capacity(), capacity);
  for (std::size_t cell = 0; cell < 4; ++cell) {
    SCOPED_TRACE(::testing::Message() << "cell " << cell);
    EXPECT_EQ(h.out().format[cell], once.format[cell]);
    EXPECT_EQ(h.out().bytes[cell], once.bytes[cell]);
    EXPECT_EQ(h.out().rank_sum[cell], once.rank_sum[cell]);
    EXPECT_EQ(std::memcmp(&h.out().error[cell], &once.error[cell], sizeof(float)), 0);
  }
}

// A snapshot frame reaching a stage that reads covariance frames' payloads is a FrameError, and
// a chain that would feed it snapshots is refused when it is made.
template <class T>
void check_wrong_inputs_are_refused(linalg::Exec& exec) {
  auto c = planar_config<T>(fresh_seed("compress stage"), config::CompressFormat::tlr, 1e-5);
  Harness h(c, exec);
  replay::FrameHeader header = h.generator.frame(0).header;
  header.kind = replay::PayloadKind::snapshots;
  header.cols = 8;
  h.slot->load_header(header);
  EXPECT_THROW(h.stage->run(h.slot->slot, exec), pipeline::FrameError);
  auto snapshots = c;
  snapshots.scenario.payload = config::ScenarioPayload::snapshots;
  snapshots.scenario.covariance = config::ScenarioCovariance::sample;
  EXPECT_THROW(stages::make_processing_stages(snapshots), config::ConfigError);
}

}  // namespace covflow::test::compress_checks

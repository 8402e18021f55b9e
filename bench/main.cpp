// covflow-bench: one subcommand per operation, or `all`.
// Exit status: 0 when every row agreed with the vendor's result; 1 when a row failed its check, no
// usable GPU was found under COVFLOW_REQUIRE_GPU, or a benchmark threw; 2 for a usage error.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "adaptive_bench.hpp"
#include "bench_common.hpp"
#include "cholupdate_bench.hpp"
#include "covariance_bench.hpp"
#include "h2_bench.hpp"
#include "heev_bench.hpp"
#include "ingest_bench.hpp"
#include "pipeline_bench.hpp"
#include "qr_bench.hpp"
#include "rsvd_bench.hpp"
#include "svd_bench.hpp"
#include "tiny_bench.hpp"
#include "tlr_bench.hpp"
#if COVFLOW_HAS_CUDA
#include "heev_chase_bench.hpp"
#endif
#include "covflow/linalg/device.hpp"

int main(int argc, char** argv) {
  using namespace covflow;
  CLI::App app{"covflow-bench: covflow's kernels against cuBLAS/cuSOLVER and LAPACK, in one run"};
  bench::Settings settings;
  bool no_gpu = false;
  app.add_option("--json", settings.json_path, "Write the results as JSON to this file");
  app.add_option("--warmup", settings.warmup, "Untimed calls before timing")->check(CLI::Range(0, 1000));
  app.add_option("--reps", settings.reps, "Timed calls per contender (median reported)")->check(CLI::Range(1, 100000));
  app.add_option("--cpu-reps", settings.cpu_reps, "Timed calls of the CPU backend")->check(CLI::Range(1, 1000));
  app.add_flag("--no-cpu", [&](std::int64_t) { settings.cpu = false; }, "Skip the CPU backend");
  app.add_flag("--no-gpu", no_gpu, "Skip the GPU even when one is present (refused under COVFLOW_REQUIRE_GPU)");
  app.add_flag("--quick", settings.quick, "A few sizes only (smoke run)");
  app.require_subcommand(1);
  auto* covariance = app.add_subcommand("covariance", "Batched sample covariance R = X Xᴴ / K + δI");
  auto* heev = app.add_subcommand("heev", "Batched Hermitian eigendecomposition vs cuSOLVER and LAPACK");
  heev->add_option("--shape", settings.shapes, "Only these NxBATCH shapes (repeatable)");
  heev->add_option("--dtype", settings.dtype, "Only this element type")->check(CLI::IsMember({"cf64", "cf32"}));
  heev->add_option("--mode", settings.mode, "Only vectors or values")->check(CLI::IsMember({"vectors", "values"}));
  heev->add_option("--input", settings.input, "Only this input: random matrices or the radar scenario's covariances")
      ->check(CLI::IsMember({"random", "radar"}));
  auto* cholupdate = app.add_subcommand("cholupdate", "Rank-k Cholesky update/downdate vs refactoring (cuSOLVER potrf)");
  auto* qr = app.add_subcommand("qr", "Batched Householder QR (geqrf, ungqr) vs cuBLAS geqrfBatched and cuSOLVER ungqr");
  qr->fallthrough();  // --json, --reps … may follow the subcommand
  qr->add_option("--dtype", settings.dtype, "Only this element type")->check(CLI::IsMember({"cf64", "cf32", "f64"}));
  qr->add_option("--shape", settings.shapes, "Only these MxNxBATCH shapes (repeatable)");
  auto* svd = app.add_subcommand("svd", "Batched thin SVD (gesvj) vs cuSOLVER gesvdjBatched, gesvdaStridedBatched, gesvdj");
  svd->fallthrough();  // --json, --reps … may follow the subcommand
  svd->add_option("--dtype", settings.dtype, "Only this element type")->check(CLI::IsMember({"cf64", "cf32", "f64"}));
  svd->add_option("--shape", settings.shapes, "Only these MxNxBATCH shapes (repeatable)");
  svd->add_option("--mode", settings.mode, "Only vectors or values")->check(CLI::IsMember({"vectors", "values"}));
  auto* rsvd = app.add_subcommand("rsvd", "Batched randomized SVD vs cuSOLVER gesvdaStridedBatched, Xgesvdr and gesvj");
  rsvd->fallthrough();
  rsvd->add_option("--dtype", settings.dtype, "Only this element type")->check(CLI::IsMember({"cf64", "cf32", "f64"}));
  rsvd->add_option("--shape", settings.shapes, "Only these MxNxBATCHrRANK rows (rank 0: fixed accuracy)");
  auto* tlr = app.add_subcommand("tlr", "Tile low-rank GEMM (LLD, LLL) and Cholesky + solve vs dense cuBLAS GEMM and "
                                         "cuSOLVER Xpotrf + Xpotrs (not run by `all`)");
  tlr->fallthrough();
  tlr->add_option("--dtype", settings.dtype, "Element type (default cf64)")->check(CLI::IsMember({"cf64", "cf32", "f64"}));
  tlr->add_option("--shape", settings.shapes, "Only these OP/INPUT/N/TILE/TOL rows, e.g. gemm/exp/16384/1024/1e-6, "
                                              "potrf/exp/32768/1024/1e-6 (repeatable)");
  auto* h2 = app.add_subcommand("h2", "H² matrices: build and compress (CPU), memory, and the GPU matvec for 1 and 16 "
                                       "vectors vs the dense cuBLAS product (not run by `all`)");
  h2->fallthrough();
  h2->add_option("--dtype", settings.dtype, "Element type (default cf64)")->check(CLI::IsMember({"cf64", "f64"}));
  h2->add_option("--shape", settings.shapes, "Only these [exp/|clutter/]N/TOL rows, e.g. 65536/1e-6 or clutter/16384/1e-6 (repeatable)");
  auto* tiny = app.add_subcommand("tiny", "Batched tiny (n ≤ 32) getrf/getrs/potrf/potrs/geqrf vs cuBLAS/cuSOLVER's "
                                           "batched routines, with each row's memory floor (not run by `all`)");
  tiny->fallthrough();  // --json, --reps, --quick … may follow the subcommand
  bench::TinyBenchOptions tiny_options;
  tiny->add_option("--count", tiny_options.count, "Matrices per batch (default 1048576; 16384 with --quick)")
      ->check(CLI::Range(1LL, 2147483647LL));
  tiny->add_option("--n", tiny_options.sizes, "Matrix orders")->capture_default_str()->delimiter(',')->check(CLI::Range(1, 32));
  tiny->add_option("--dtype", tiny_options.dtypes, "Element types")
      ->capture_default_str()->delimiter(',')->check(CLI::IsMember({"f32", "f64", "cf32", "cf64"}));
  tiny->add_option("--routine", tiny_options.routines, "Routines (getrs and potrs also factor, untimed, when their "
                                                       "factorization is not asked for)")
      ->capture_default_str()->delimiter(',')->check(CLI::IsMember({"getrf", "getrs", "potrf", "potrs", "geqrf"}));
  tiny->add_option("--nrhs", tiny_options.nrhs, "Right-hand sides of the getrs and potrs rows")
      ->capture_default_str()->delimiter(',')->check(CLI::Range(1, 1024));
  tiny->add_option("--seed", tiny_options.seed, "Seed of the inputs")->capture_default_str();
  auto* adaptive = app.add_subcommand("adaptive", "The adaptive stage per frame as the daemon runs it, with its MVDR "
                                                   "weights checked (not run by `all`)");
  adaptive->fallthrough();  // --json, --quick, --no-cpu … may follow the subcommand
  bench::AdaptiveBenchOptions adaptive_options;
  adaptive->add_option("--cells", adaptive_options.cells, "Cells per frame")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  adaptive->add_option("--channels", adaptive_options.channels, "Channels (array elements)")
      ->capture_default_str()->check(CLI::Range(2, 1024));
  adaptive->add_option("--snapshots", adaptive_options.snapshots, "Snapshots per cell and frame")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  adaptive->add_option("--looks", adaptive_options.looks, "Look directions (1: 5°; more: spread over ±60°)")
      ->capture_default_str()->check(CLI::Range(1, 64));
  adaptive->add_option("--frames", adaptive_options.frames, "Timed frames per device (default 200; 40 with --quick)")
      ->check(CLI::Range(1, 1000000));
  adaptive->add_option("--refactor-every", adaptive_options.refactor_every, "Frames between refactors (0: never)")
      ->capture_default_str()->check(CLI::Range(0, 1000000));
  adaptive->add_option("--update-rank", adaptive_options.update_rank,
                       "Snapshot columns per rank-k update or downdate (the stage's update_rank; at most 64 on CUDA)")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  adaptive->add_option("--window", adaptive_options.window, "Snapshots in each cell's window (the stage's window_snapshots)")
      ->capture_default_str()->check(CLI::Range(2, 1 << 24));
  adaptive->add_option("--dtype", adaptive_options.dtype, "Element type of the frames")
      ->capture_default_str()->check(CLI::IsMember({"cf32", "cf64"}));
  adaptive->add_option("--device", adaptive_options.device, "Where the stage runs (cuda: only where a GPU is present)")
      ->capture_default_str()->check(CLI::IsMember({"cpu", "cuda", "both"}));
  auto* heev_chase = app.add_subcommand("heev-chase", "§3's QR iteration alone (heev's leaves), per arithmetic policy (diagnostic)");
  auto* pipeline = app.add_subcommand("pipeline", "The daemon's chain fed at a fixed rate: frames/s, drops, latency percentiles");
  bench::PipelineBenchOptions pipeline_options;
  pipeline->add_option("--seconds", pipeline_options.gpu_seconds, "How long the GPU run is fed")->capture_default_str();
  pipeline->add_option("--cpu-seconds", pipeline_options.cpu_seconds, "How long the CPU run is fed")->capture_default_str();
  pipeline->add_option("--rate", pipeline_options.rate_hz, "Frames per second")->capture_default_str()->check(CLI::PositiveNumber);
  pipeline->add_option("--cells", pipeline_options.cells, "Cells per frame")->capture_default_str()->check(CLI::PositiveNumber);
  pipeline->add_option("--channels", pipeline_options.channels, "Channels (array elements)")->capture_default_str()->check(CLI::Range(2, 1024));
  pipeline->add_option("--budget-ms", pipeline_options.budget_ms, "Per-frame budget")->capture_default_str()->check(CLI::PositiveNumber);
  pipeline->add_option("--snapshots", pipeline_options.snapshots, "Snapshots per cell of a snapshot frame")
      ->capture_default_str()->check(CLI::PositiveNumber);
  pipeline->add_option("--input", pipeline_options.inputs,
                       "Inputs to run, in turn: file (the daemon's file replay), zmq (its ZeroMQ input, fed by a sender "
                       "thread over tcp://127.0.0.1), slot (frames written into the slots: the upper bound)")
      ->capture_default_str()->delimiter(',')->check(CLI::IsMember({"file", "zmq", "slot"}));
  pipeline->add_option("--payload", pipeline_options.payloads,
                       "Frame kinds, in turn: covariance (cf64 N×N per cell), snapshots (cf32 N×K per cell)")
      ->capture_default_str()->delimiter(',')->check(CLI::IsMember({"covariance", "snapshots"}));
  pipeline->add_option("--file-frames", pipeline_options.file_frames, "Records in the replayed file (and messages the sender cycles)")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  pipeline->add_option("--ingest-threads", pipeline_options.ingest_threads,
                       "Threads that check and place each record of the file and zmq inputs (0: covflowd's default)")
      ->capture_default_str();
  pipeline->add_option("--zmq-part-bytes", pipeline_options.zmq_part_bytes,
                       "zmq input: the sender splits each record into parts of this many bytes (0: one part per record)")
      ->capture_default_str();
  pipeline->add_option("--zmq-transport", pipeline_options.zmq_transport, "zmq input: the sender binds tcp://127.0.0.1 or an ipc:// socket")
      ->capture_default_str()->check(CLI::IsMember({"tcp", "ipc"}));
  pipeline->add_option("--dir", pipeline_options.dir, "Folder for the frame files (default: the system's temporary folder)");
  pipeline->add_option("--max-rate", pipeline_options.max_rates,
                       "Headroom: after the runs, each input at these rates in turn (Hz, rising), each for --step-seconds, "
                       "until one fails (a drop, or p99 above --headroom-p99-ms)")
      ->delimiter(',')->check(CLI::PositiveNumber);
  pipeline->add_option("--step-seconds", pipeline_options.step_seconds, "How long each headroom rate is fed")->capture_default_str();
  pipeline->add_option("--headroom-p99-ms", pipeline_options.headroom_p99_ms, "The headroom's p99 bound")->capture_default_str();
  pipeline->add_flag("--copy-input", pipeline_options.copy_input,
                     "slot input: hand each frame to the ingest thread to copy, instead of writing it into the frame slot");
  pipeline->add_flag("--streaming-stores", pipeline_options.streaming_stores,
                     "slot and zmq inputs: copy each frame into its slot with non-temporal stores, which do not read "
                     "the slot's cache lines first (as a capture card's DMA writes them); the default when every lane "
                     "is a GPU, as in covflowd");
  pipeline->add_flag("--plain-stores", pipeline_options.plain_stores,
                     "slot and zmq inputs: copy each frame into its slot with plain stores, even for GPU lanes")
      ->excludes("--streaming-stores");
  pipeline->add_option("--placers", pipeline_options.placers,
                       "Frames placed at once by inputs that can (the slot input): 0 one per lane, 1 the ingest thread alone")
      ->capture_default_str()->check(CLI::Range(0, 64));
  pipeline->add_flag("!--no-take-while-computing", pipeline_options.take_while_computing,
                     "A GPU lane takes the next frame only if it is queued when the lane starts waiting for its GPU");
  pipeline->add_option("--lane-choice", pipeline_options.lane_choice,
                       "With several lanes and frames placed at once: claimed (each frame's lane chosen as it is claimed, "
                       "its payload uploaded as placed), taken (one shared queue, the lane uploads), auto (claimed on GPU lanes)")
      ->check(CLI::IsMember({"auto", "claimed", "taken"}))->capture_default_str();
  pipeline->add_flag("--adaptive", pipeline_options.adaptive,
                     "Snapshot frames: run the adaptive (MVDR) stage too, whose per-cell factors are state across frames");
  pipeline->add_option("--gpus", pipeline_options.gpu_counts,
                       "GPU lanes of each GPU run, e.g. 1,2: runs on GPUs 0 … N−1, the frame rates side by side")
      ->delimiter(',')->check(CLI::Range(1, 64))->capture_default_str();
  pipeline->add_option("--cpu-lanes", pipeline_options.cpu_lane_counts,
                       "CPU lanes of each CPU run, e.g. 1,3: each lane with its share of the host's threads")
      ->delimiter(',')->check(CLI::Range(1, 64))->capture_default_str();
  pipeline->add_flag("--probe-host", pipeline_options.probe_host,
                     "Also run a thread that spins on the clock and reports the host's scheduling gaps (uses one core)");
  auto* ingest = app.add_subcommand("ingest", "A record's payload into the frame slot with its CRC-32 checked: "
                                                "CRC, copy, file replay, upload (host side; not run by `all`)");
  // --warmup, --reps and --json may follow the subcommand.
  ingest->fallthrough();
  bench::IngestBenchOptions ingest_options;
  ingest->add_option("--bytes", ingest_options.bytes, "Payload bytes per record (default: 180 cells × 128² complex double)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  ingest->add_option("--threads", ingest_options.threads, "PayloadMover thread counts (default 1,2,4,8,12, up to the host's)")
      ->delimiter(',')->check(CLI::Range(1, 1024));
  ingest->add_option("--dir", ingest_options.dir, "Folder for the file rows' temporary file (default: the system's temporary folder)");
  auto* all = app.add_subcommand("all", "Every benchmark");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const bool gpu_required = bench::gpu_required();
  if (gpu_required && no_gpu) {
    std::fprintf(stderr, "covflow-bench: --no-gpu contradicts COVFLOW_REQUIRE_GPU=%s, which asks for a GPU run; "
                         "unset one of them\n", std::getenv("COVFLOW_REQUIRE_GPU"));
    return 2;
  }
  std::vector<std::string> failed;
  try {
    std::unique_ptr<linalg::Exec> gpu;
    const auto probe = linalg::probe_devices();
    if (gpu_required && !probe.available()) {
      std::fprintf(stderr, "covflow-bench: error: COVFLOW_REQUIRE_GPU is set but there is no usable CUDA device (%s); "
                           "not timing the CPU alone\n", probe.reason.c_str());
      return 1;
    }
    if (!no_gpu && probe.available()) gpu = std::make_unique<linalg::Exec>(linalg::Exec::cuda());
    linalg::Exec cpu = linalg::Exec::cpu();
    fmt::print("covflow-bench on {} ({}); CPU backend {} threads; {} warm-up, median of {}\n",
               bench::device_description(), bench::today(), cpu.pool().size(), settings.warmup, settings.reps);
    if (!gpu) fmt::print("no GPU timing: {}\n", no_gpu ? "--no-gpu" : probe.reason);
    std::vector<nlohmann::json> results;
    // Every row runs and is printed; a row that failed its check fails the run at the end.
    auto checked = [&](nlohmann::json result) {
      for (std::string& row : bench::failed_rows(result)) failed.push_back(std::move(row));
      results.push_back(std::move(result));
    };
    if (covariance->parsed() || all->parsed()) checked(bench::run_covariance_bench(settings, gpu.get(), cpu));
    if (heev->parsed() || all->parsed()) checked(bench::run_heev_bench(settings, gpu.get(), cpu));
    if (cholupdate->parsed() || all->parsed()) checked(bench::run_cholupdate_bench(settings, gpu.get(), cpu));
    if (qr->parsed() || all->parsed()) checked(bench::run_qr_bench(settings, gpu.get(), cpu));
    if (svd->parsed() || all->parsed()) checked(bench::run_svd_bench(settings, gpu.get(), cpu));
    if (rsvd->parsed() || all->parsed()) checked(bench::run_rsvd_bench(settings, gpu.get()));
    if (tlr->parsed()) checked(bench::run_tlr_bench(settings, gpu.get()));
    if (h2->parsed()) checked(bench::run_h2_bench(settings, gpu.get()));
    if (tiny->parsed()) checked(bench::run_tiny_bench(settings, tiny_options, gpu.get()));
    if (adaptive->parsed()) checked(bench::run_adaptive_bench(settings, adaptive_options, gpu.get(), cpu));
    if (pipeline->parsed() || all->parsed()) {
      results.push_back(bench::run_pipeline_bench(settings, pipeline_options, gpu.get(), cpu));
    }
    if (ingest->parsed()) results.push_back(bench::run_ingest_bench(settings, ingest_options, gpu.get()));
    if (heev_chase->parsed()) {
#if COVFLOW_HAS_CUDA
      if (gpu) bench::run_heev_chase_bench(settings);
      else fmt::print("heev-chase needs a GPU\n");
#else
      fmt::print("heev-chase needs a CUDA build\n");
#endif
    }
    if (!settings.json_path.empty()) {
      bench::write_json(settings.json_path, results);
      fmt::print("\nwrote {}\n", settings.json_path);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "covflow-bench: error: %s\n", e.what());
    return 1;
  }
  if (!failed.empty()) {
    std::fprintf(stderr, "covflow-bench: %zu rows FAILED their checks:\n", failed.size());
    for (const std::string& row : failed) std::fprintf(stderr, "  %s\n", row.c_str());
    return 1;
  }
  return 0;
}

// Timing and reporting shared by the benchmarks: CUDA-event timing with warm-up and medians,
// host timing for the CPU backend, and one table/JSON format for every operation.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#if COVFLOW_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace covflow::bench {

struct Settings {
  int warmup = 3;
  int reps = 20;
  bool cpu = true;          // also time the CPU backend (LAPACK/BLAS across the thread pool)
  int cpu_reps = 3;
  bool quick = false;       // fewer sizes: a smoke run
  std::string json_path;
  std::vector<std::string> shapes;  // "NxBATCH" filters, empty: the benchmark's own list
  std::string dtype;                // "cf64", "cf32", ... empty: all
  std::string mode;                 // "vectors" | "values", empty: both
  std::string input;                // heev: "random" | "radar", empty: both
};

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int reps = 0;
};

// One benchmark row: a shape, and the time of each contender ("covflow", vendor names, "cpu").
struct Row {
  std::string op;
  std::string dtype;
  std::string shape;
  std::string input;  // what the matrices are, when a benchmark times more than one kind ("" otherwise)
  double flops = 0;  // floating-point operations of one call, for GFLOP/s
  std::vector<std::string> vendors;  // which contenders are the vendor library's
  std::map<std::string, Timing> times;
  std::map<std::string, std::string> notes;
  // Why this row's times cannot be trusted — a result that disagrees with the vendor's, a nonzero
  // info — or empty. A failed row is still printed and written, and fails the whole run.
  std::string failed;

  // Records one more reason; the row keeps every reason it was given.
  void fail(const std::string& reason);
};

class Report {
 public:
  explicit Report(std::string benchmark) : benchmark_(std::move(benchmark)) {}
  void add(Row row);
  // Prints the table: each contender's median ms and GFLOP/s, and covflow's time over the best
  // vendor time (below 1 means covflow is faster).
  void print() const;
  nlohmann::json to_json() const;
  const std::vector<Row>& rows() const { return rows_; }

 private:
  std::string benchmark_;
  std::vector<Row> rows_;
};

// Writes {"device":..., "date":..., "benchmarks":[...]} to `path`.
void write_json(const std::string& path, const std::vector<nlohmann::json>& benchmarks);

// The rows of a Report's JSON that failed, each as "op dtype shape: reason".
std::vector<std::string> failed_rows(const nlohmann::json& benchmark);

// True when the environment variable COVFLOW_REQUIRE_GPU is set to anything but "" or "0": the
// run must time the GPU, and finding no usable device is an error rather than a CPU-only run.
bool gpu_required();

// Median of `reps` timed calls after `warmup` untimed ones, on the host clock.
Timing time_host(const std::function<void()>& call, int warmup, int reps);

#if COVFLOW_HAS_CUDA
// Median of `reps` calls on `stream`, each between two CUDA events, after `warmup` calls.
// `call(rep)` gets the repetition index so it can rotate among input sets. `prepare(rep)`, when
// given, is issued before each call's start event (e.g. restoring an input that the call
// overwrites) and is not timed.
Timing time_device(cudaStream_t stream, const std::function<void(int)>& call, int warmup, int reps,
                   const std::function<void(int)>& prepare = {});

// time_device with as many calls as fit `budget_ms`: one call first; if that alone took half the
// budget it is the timing (so that a slow vendor path does not take minutes), else one untimed call
// and as many as fit (at least 3, at most settings.reps).
Timing time_adaptive(cudaStream_t stream, const std::function<void(int)>& call, const std::function<void(int)>& prepare,
                     const Settings& settings, double budget_ms);

// Gaussian entries (cuRAND Philox, this seed; complex: real and imaginary parts each N(0, 1))
// straight into device memory, on `stream`. T: float, double, std::complex<float|double>.
template <class T>
void fill_gaussian(T* data, std::size_t elements, unsigned long long seed, cudaStream_t stream);
#endif

std::string device_description();
std::string today();

}  // namespace covflow::bench

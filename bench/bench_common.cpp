#include "bench_common.hpp"

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "covflow/linalg/device.hpp"
#if COVFLOW_HAS_CUDA
#include <curand.h>

#include <type_traits>

#include "covflow/linalg/types.hpp"
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/stream.hpp"
#endif

namespace covflow::bench {
namespace {

Timing summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  Timing t;
  t.reps = static_cast<int>(ms.size());
  if (ms.empty()) return t;
  const std::size_t mid = ms.size() / 2;
  t.median_ms = ms.size() % 2 ? ms[mid] : 0.5 * (ms[mid - 1] + ms[mid]);
  t.min_ms = ms.front();
  t.max_ms = ms.back();
  return t;
}

double best_vendor_ms(const Row& row, std::string* which) {
  double best = 0;
  for (const auto& vendor : row.vendors) {
    auto it = row.times.find(vendor);
    if (it == row.times.end() || it->second.reps == 0) continue;
    if (best == 0 || it->second.median_ms < best) {
      best = it->second.median_ms;
      if (which) *which = vendor;
    }
  }
  return best;
}

}  // namespace

void Row::fail(const std::string& reason) { failed += (failed.empty() ? "" : "; ") + reason; }

void Report::add(Row row) { rows_.push_back(std::move(row)); }

void Report::print() const {
  fmt::print("\n== {} ==\n", benchmark_);
  std::size_t failed = 0;
  for (const Row& row : rows_) {
    std::string best_name;
    const double best = best_vendor_ms(row, &best_name);
    fmt::print("{:<6} {:<28}", row.dtype, row.input.empty() ? row.shape : fmt::format("{:<24} {:<6}", row.shape, row.input));
    for (const auto& [who, t] : row.times) {
      // Rows whose contenders do different work (flops 0) give their rates in the notes.
      if (row.flops > 0 && t.median_ms > 0)
        fmt::print("  {} {:.4f} ms ({:.0f} GF/s)", who, t.median_ms, row.flops / (t.median_ms * 1e6));
      else fmt::print("  {} {:.4f} ms", who, t.median_ms);
    }
    auto cov = row.times.find("covflow");
    if (best > 0 && cov != row.times.end() && cov->second.reps > 0)
      fmt::print("  | covflow/{} = {:.2f}", best_name, cov->second.median_ms / best);
    fmt::print("{}\n", row.failed.empty() ? "" : "  FAILED");
    for (const auto& [key, note] : row.notes) fmt::print("         {}: {}\n", key, note);
    if (!row.failed.empty()) {
      fmt::print("         FAILED: {}\n", row.failed);
      ++failed;
    }
  }
  if (failed > 0) fmt::print("{} of {} rows FAILED (reasons above)\n", failed, rows_.size());
}

nlohmann::json Report::to_json() const {
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& row : rows_) {
    nlohmann::json times;
    for (const auto& [who, t] : row.times)
      times[who] = {{"median_ms", t.median_ms}, {"min_ms", t.min_ms}, {"max_ms", t.max_ms}, {"reps", t.reps},
                    {"gflops", t.median_ms > 0 ? row.flops / (t.median_ms * 1e6) : 0.0}};
    std::string best_name;
    const double best = best_vendor_ms(row, &best_name);
    nlohmann::json entry = {{"op", row.op}, {"dtype", row.dtype}, {"shape", row.shape}, {"flops", row.flops},
                            {"times", times}, {"notes", row.notes}};
    if (!row.input.empty()) entry["input"] = row.input;
    if (!row.failed.empty()) entry["failed"] = row.failed;
    auto cov = row.times.find("covflow");
    if (best > 0 && cov != row.times.end() && cov->second.reps > 0) {
      entry["best_vendor"] = best_name;
      entry["ratio_covflow_over_best_vendor"] = cov->second.median_ms / best;
    }
    rows.push_back(std::move(entry));
  }
  return {{"benchmark", benchmark_}, {"rows", rows}};
}

void write_json(const std::string& path, const std::vector<nlohmann::json>& benchmarks) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << nlohmann::json{{"device", device_description()}, {"date", today()}, {"benchmarks", benchmarks}}.dump(2)
      << "\n";
  if (!out) throw std::runtime_error("failed writing " + path);
}

std::vector<std::string> failed_rows(const nlohmann::json& benchmark) {
  std::vector<std::string> out;
  if (!benchmark.contains("rows")) return out;
  for (const auto& row : benchmark.at("rows")) {
    if (!row.is_object() || !row.contains("failed")) continue;
    std::string what = fmt::format("{} {} {}", row.value("op", ""), row.value("dtype", ""), row.value("shape", ""));
    if (row.contains("input")) what += " " + row.at("input").get<std::string>();
    out.push_back(what + ": " + row.at("failed").get<std::string>());
  }
  return out;
}

bool gpu_required() {
  const char* value = std::getenv("COVFLOW_REQUIRE_GPU");
  return value != nullptr && *value != '\0' && std::string_view(value) != "0";
}

Timing time_host(const std::function<void()>& call, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) call();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return summarize(std::move(ms));
}

#if COVFLOW_HAS_CUDA
Timing time_device(cudaStream_t stream, const std::function<void(int)>& call, int warmup, int reps,
                   const std::function<void(int)>& prepare) {
  for (int i = 0; i < warmup; ++i) {
    if (prepare) prepare(i);
    call(i);
  }
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));
  std::vector<linalg::cuda::Event> starts(static_cast<std::size_t>(reps)), stops(static_cast<std::size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    if (prepare) prepare(warmup + i);
    starts[static_cast<std::size_t>(i)].record(stream);
    call(warmup + i);
    stops[static_cast<std::size_t>(i)].record(stream);
  }
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i)
    ms.push_back(stops[static_cast<std::size_t>(i)].elapsed_since(starts[static_cast<std::size_t>(i)]));
  return summarize(std::move(ms));
}

Timing time_adaptive(cudaStream_t stream, const std::function<void(int)>& call, const std::function<void(int)>& prepare,
                     const Settings& settings, double budget_ms) {
  const Timing first = time_device(stream, call, 0, 1, prepare);
  if (first.median_ms >= budget_ms / 2) return first;
  const int reps = std::clamp(static_cast<int>(budget_ms / std::max(first.median_ms, 1e-3)), 3, std::max(3, settings.reps));
  return time_device(stream, call, settings.warmup > 0 ? 1 : 0, reps, prepare);
}

template <class T>
void fill_gaussian(T* data, std::size_t elements, unsigned long long seed, cudaStream_t stream) {
  using R = linalg::real_t<T>;
  curandGenerator_t generator = nullptr;
  COVFLOW_CURAND_TRY(curandCreateGenerator(&generator, CURAND_RNG_PSEUDO_PHILOX4_32_10));
  COVFLOW_CURAND_TRY(curandSetStream(generator, stream));
  COVFLOW_CURAND_TRY(curandSetPseudoRandomGeneratorSeed(generator, seed));
  const std::size_t reals = elements * (linalg::is_complex_v<T> ? 2 : 1);
  if constexpr (std::is_same_v<R, float>)
    COVFLOW_CURAND_TRY(curandGenerateNormal(generator, reinterpret_cast<float*>(data), reals, 0.f, 1.f));
  else
    COVFLOW_CURAND_TRY(curandGenerateNormalDouble(generator, reinterpret_cast<double*>(data), reals, 0.0, 1.0));
  curandDestroyGenerator(generator);
}
template void fill_gaussian<linalg::f32>(linalg::f32*, std::size_t, unsigned long long, cudaStream_t);
template void fill_gaussian<linalg::f64>(linalg::f64*, std::size_t, unsigned long long, cudaStream_t);
template void fill_gaussian<linalg::cf32>(linalg::cf32*, std::size_t, unsigned long long, cudaStream_t);
template void fill_gaussian<linalg::cf64>(linalg::cf64*, std::size_t, unsigned long long, cudaStream_t);
#endif

std::string device_description() {
  const auto probe = linalg::probe_devices();
  if (!probe.available()) return "CPU only (" + probe.reason + ")";
  const auto& d = probe.devices.front();
  return fmt::format("{} (sm_{}{}, {} SMs, {:.0f} GiB)", d.name, d.cc_major, d.cc_minor, d.multiprocessors,
                     static_cast<double>(d.global_memory) / (1 << 30));
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d", &utc);
  return buffer;
}

}  // namespace covflow::bench

// covflow-bench heev: batched Hermitian eigendecomposition.
//   covflow         linalg::heev on the CUDA backend
//   xsyev-batched   cusolverDnXsyevBatched (cuSOLVER's batched syev/heev)
//   heevj-batched   cusolverDn{C,Z}heevjBatched (Jacobi; cuSOLVER supports it for n ≤ 32 only)
//   cpu             linalg::heev on the CPU backend (LAPACK ?heevd across the pool), timed on a
//                   sub-batch of one matrix per thread and scaled to the full batch (marked so)
// Each shape runs on two inputs (the row's `input`):
//   random          Gaussian Hermitian matrices with n added to the diagonal: a spread spectrum
//   radar           sample covariances of the daemon's built-in scenario on an n-element array
//                   (stages/scenario.hpp, docs/scenario.md): three 10 dB sources and a 30 dB jammer
//                   over unit noise — one large eigenvalue per emitter over the rest, clustered at
//                   the noise floor
// Every contender overwrites A, so each timed call starts from a fresh copy made before its start
// event. After timing, outside the timed region, covflow's result is checked against
// cusolverDnXsyevBatched's — every info, the eigenvalues of every matrix, the eigenvectors of a
// sample — and a row that disagrees fails, so the table never times a wrong answer.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "heev_bench.hpp"
#include "covflow/config/config.hpp"
#include "covflow/linalg/heev.hpp"
#include "covflow/replay/frame.hpp"
#include "covflow/stages/scenario.hpp"
#if COVFLOW_HAS_CUDA
#include <cusolverDn.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::bench {
namespace {

using namespace covflow::linalg;

enum class Input { random, radar };

const char* label(Input input) { return input == Input::random ? "random" : "radar"; }

// Hermitian matrices with Gaussian entries and n added to the diagonal: positive like a
// covariance, eigenvalues spread over about n ± 2√n with no clusters.
template <class T>
std::vector<T> random_inputs(int n, long long count, std::mt19937_64& rng) {
  using R = real_t<T>;
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<T> a(static_cast<std::size_t>(count) * n * n);
  for (long long b = 0; b < count; ++b) {
    T* m = a.data() + b * n * n;
    for (int j = 0; j < n; ++j)
      for (int i = j; i < n; ++i) {
        T v;
        if constexpr (is_complex_v<T>) v = T(R(normal(rng)), i == j ? R(0) : R(normal(rng)));
        else v = R(normal(rng));
        if (i == j) v += R(n);
        m[i + j * n] = v;
        if constexpr (is_complex_v<T>) m[j + i * n] = std::conj(v);
        else m[j + i * n] = v;
      }
  }
  return a;
}

// Snapshots per cell of the radar input: the built-in scenario's own count, or twice the array
// where that is fewer, so that the noise floor is never rank-deficient.
std::int64_t radar_snapshots(int n) { return std::max<std::int64_t>(config::ScenarioConfig{}.snapshots, 2 * std::int64_t(n)); }

// What the daemon's covariance stage hands its eigensolver: sample covariances R = X Xᴴ / K of the
// built-in scenario (its sources and jammer) on an array of n elements, one per cell, computed in
// T's precision as the daemon computes them. With K ≥ 2n the noise eigenvalues (all but one per
// emitter) lie within about (1 ± √(n/K))² ⊂ [0.08, 2.9] (Marchenko–Pastur, unit noise), far below
// the sources (≈ 10·n at 10 dB) and the jammer (≈ 1000·n at 30 dB).
template <class T>
std::vector<T> radar_inputs(int n, long long count, std::mt19937_64& rng) {
  config::ScenarioConfig scenario;
  scenario.elements = n;
  scenario.snapshots = radar_snapshots(n);
  scenario.payload = config::ScenarioPayload::covariance;
  scenario.element_type = std::is_same_v<T, cf32> ? config::SampleType::cf32 : config::SampleType::cf64;
  scenario.seed = static_cast<std::int64_t>(rng() >> 1);
  // The generator holds a frame's snapshots at once: frames of a few cells keep them under 64 MiB.
  const std::size_t snapshot_bytes = std::size_t(n) * std::size_t(scenario.snapshots) * sizeof(T);
  scenario.cells = std::clamp<long long>(static_cast<long long>((std::size_t(64) << 20) / snapshot_bytes), 1, count);
  stages::ScenarioGenerator generator(scenario);
  const std::size_t elems = static_cast<std::size_t>(count) * n * n;
  std::vector<T> a;
  a.reserve(elems);
  for (std::uint64_t sequence = 0; a.size() < elems; ++sequence) {
    const replay::Frame frame = generator.frame(sequence);
    const std::span<const T> covariances = replay::payload_as<T>(frame);
    const std::size_t take = std::min(covariances.size(), elems - a.size());
    a.insert(a.end(), covariances.begin(), covariances.begin() + static_cast<std::ptrdiff_t>(take));
  }
  return a;
}

std::string radar_description() {
  const config::ScenarioConfig scenario;
  auto emitters = [](const std::vector<config::Emitter>& list) {
    std::string text;
    for (const config::Emitter& e : list) text += fmt::format("{}{:g} dB at {:g}°", text.empty() ? "" : ", ", e.power_db, e.angle_deg);
    return text;
  };
  return fmt::format("sample covariances of the built-in scenario on an n-element array (spacing {:g} λ): sources {}; "
                     "jammers {}; unit noise; max({}, 2n) snapshots per cell. A few large eigenvalues over a noise "
                     "floor clustered near 1",
                     scenario.spacing_wavelengths, emitters(scenario.sources), emitters(scenario.jammers),
                     scenario.snapshots);
}

template <class T>
std::vector<T> make_inputs(Input input, int n, long long count, std::mt19937_64& rng) {
  return input == Input::random ? random_inputs<T>(n, count, rng) : radar_inputs<T>(n, count, rng);
}

// ---- the checks against the vendor's result ----------------------------------------------------

#if COVFLOW_HAS_CUDA
// Eigenvalues: two backward-stable solvers each land within 10·n·ε·‖A‖₂ of the exact eigenvalues
// (Weyl's inequality; the bound linalg_gpu_test holds covflow to), so they differ by at most twice
// that.
constexpr double kValueTolerance = 20;  // units of n·ε·‖A‖₂

// Eigenvectors, compared group by group. For a group C of m eigenvalues at distance g from the rest
// of the spectrum, the sin Θ theorem (Davis and Kahan, "The rotation of eigenvectors by a
// perturbation. III", 1970) bounds the angles between a solver's basis of C and the exact invariant
// subspace by ‖sin Θ‖_F ≤ √m·‖E‖₂/g, E the solver's backward error: ≤ 10·n·ε·‖A‖₂ each, as for the
// eigenvalues. The two bases then differ by at most 20·n·ε·√m·‖A‖₂/g, plus their own loss of
// orthogonality (≤ 10·n·ε each). A group of one is an eigenvector compared up to its phase:
// ‖v_vendor − v_covflow (v_covflowᴴ v_vendor)‖ is sin ∠(v_covflow, v_vendor), |v_covflowᴴ v_vendor|
// = cos of it.
constexpr double kVectorTolerance = 20;  // units of n·ε·(1 + √m·‖A‖₂/g)
// Neighbours closer than kClusterGap·n·ε·‖A‖₂ share a group: below that gap the single-vector bound
// exceeds 20/kClusterGap = 20 %, too near the sin ∠ = 1 of a wrong vector to tell the two apart,
// while the subspace they span together is still well determined.
constexpr double kClusterGap = 100;  // units of n·ε·‖A‖₂
// Eigenvectors are compared on this many matrices of each batch (all of a smaller batch): the
// comparison costs O(n³) on the host for a group as large as the matrix.
constexpr int kVectorSample = 16;

// NaN-sticky maximum: a NaN error must fail the check, and std::max would drop it.
double worse(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN() : std::max(a, b);
}

// max over matrices of max_k |λ_covflow,k − λ_vendor,k| / ‖A‖₂ in units of n·ε, ‖A‖₂ = max_k |λ_vendor,k|.
template <class R>
double value_difference(const std::vector<R>& covflow, const std::vector<R>& vendor, int n, long long count) {
  double worst = 0;
  for (long long b = 0; b < count; ++b) {
    double scale = 0, diff = 0;
    for (int k = 0; k < n; ++k) {
      scale = worse(scale, std::abs(double(vendor[b * n + k])));
      diff = worse(diff, std::abs(double(covflow[b * n + k]) - double(vendor[b * n + k])));
    }
    worst = worse(worst, scale > 0 ? diff / scale : diff);
  }
  return worst / (double(n) * std::numeric_limits<R>::epsilon());
}

struct VectorAgreement {
  double error = 0;  // max over groups of ‖sin Θ‖_F / (n·ε·(1 + √m·‖A‖₂/g))
  int groups = 0;    // groups of more than one eigenvalue
  int largest = 1;   // eigenvalues in the largest group
};

VectorAgreement combine(const VectorAgreement& x, const VectorAgreement& y) {
  return {worse(x.error, y.error), x.groups + y.groups, std::max(x.largest, y.largest)};
}

// Compares the eigenvectors of one n×n matrix (columns, ld n) group by group, the groups and their
// gaps taken from the vendor's ascending eigenvalues. Sums in double for float data and in long
// double for double data, so the comparison's own rounding stays far below n·ε.
template <class T>
VectorAgreement vector_agreement(const T* covflow, const T* vendor, const real_t<T>* values, int n) {
  using Wide = std::conditional_t<std::is_same_v<real_t<T>, float>, double, long double>;
  using C = std::complex<Wide>;
  const double eps = std::numeric_limits<real_t<T>>::epsilon();
  double norm = 0;
  for (int k = 0; k < n; ++k) norm = worse(norm, std::abs(double(values[k])));
  const double join = kClusterGap * n * eps * norm;
  VectorAgreement out;
  std::vector<C> p;
  for (int first = 0; first < n;) {
    int last = first + 1;
    while (last < n && double(values[last]) - double(values[last - 1]) <= join) ++last;
    const int m = last - first;
    double gap = std::numeric_limits<double>::infinity();
    if (first > 0) gap = std::min(gap, double(values[first]) - double(values[first - 1]));
    if (last < n) gap = std::min(gap, double(values[last]) - double(values[last - 1]));
    // P = V_covflowᴴ V_vendor on the group's columns; V_vendor − V_covflow·P is the part of the
    // vendor's basis outside covflow's, its Frobenius norm ‖sin Θ‖_F.
    const T* vc = covflow + std::size_t(first) * n;
    const T* vv = vendor + std::size_t(first) * n;
    p.assign(std::size_t(m) * m, C(0));
    for (int j = 0; j < m; ++j)
      for (int i = 0; i < m; ++i) {
        C dot(0);
        for (int e = 0; e < n; ++e) dot += std::conj(C(vc[std::size_t(i) * n + e])) * C(vv[std::size_t(j) * n + e]);
        p[i + std::size_t(j) * m] = dot;
      }
    Wide outside = 0;
    for (int j = 0; j < m; ++j)
      for (int e = 0; e < n; ++e) {
        C x(vv[std::size_t(j) * n + e]);
        for (int i = 0; i < m; ++i) x -= C(vc[std::size_t(i) * n + e]) * p[i + std::size_t(j) * m];
        outside += std::norm(x);
      }
    const double sin_theta = std::sqrt(double(outside));
    const double scale = double(n) * eps * (1.0 + std::sqrt(double(m)) * norm / gap);
    out.error = worse(out.error, sin_theta / scale);
    if (m > 1) {
      ++out.groups;
      out.largest = std::max(out.largest, m);
    }
    first = last;
  }
  return out;
}

// Matrices whose eigenvectors are compared: all of a small batch, else the first, the last and
// others drawn from rng.
std::vector<long long> vector_sample(long long count, std::mt19937_64& rng) {
  std::vector<long long> out;
  if (count <= kVectorSample) {
    for (long long b = 0; b < count; ++b) out.push_back(b);
    return out;
  }
  out = {0, count - 1};
  std::uniform_int_distribution<long long> pick(1, count - 2);
  while (out.size() < std::size_t(kVectorSample)) {
    const long long b = pick(rng);
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  }
  std::sort(out.begin(), out.end());
  return out;
}

#endif

// "N matrices with info != 0 (first: matrix B, info I)", or "" when every info is 0.
std::string info_problem(const std::vector<int>& info) {
  const auto first = std::find_if(info.begin(), info.end(), [](int v) { return v != 0; });
  if (first == info.end()) return "";
  const auto bad = std::count_if(info.begin(), info.end(), [](int v) { return v != 0; });
  return fmt::format("{} matrices with info != 0 (first: matrix {}, info {})", bad, first - info.begin(), *first);
}

double nominal_flops(int n, bool complex, bool vectors) {
  // Tridiagonalization 4/3·n³, plus about 23/3·n³ for the eigenvectors (QR updates and the
  // back-transform), in real operations; ×4 for complex arithmetic. A convention, stated in
  // docs/performance.md, so GFLOP/s compare contenders, not algorithms.
  const double n3 = double(n) * n * n;
  return (complex ? 4.0 : 1.0) * (vectors ? 9.0 : 4.0 / 3.0) * n3;
}

#if COVFLOW_HAS_CUDA
template <class T> cudaDataType cuda_type();
template <> cudaDataType cuda_type<cf32>() { return CUDA_C_32F; }
template <> cudaDataType cuda_type<cf64>() { return CUDA_C_64F; }
template <class R> cudaDataType cuda_real_type();
template <> cudaDataType cuda_real_type<float>() { return CUDA_R_32F; }
template <> cudaDataType cuda_real_type<double>() { return CUDA_R_64F; }

cusolverStatus_t heevj_buffer(cusolverDnHandle_t h, cusolverEigMode_t jobz, int n, const cf32* a, const float* w,
                              int* lwork, syevjInfo_t p, int batch) {
  return cusolverDnCheevjBatched_bufferSize(h, jobz, CUBLAS_FILL_MODE_LOWER, n, reinterpret_cast<const cuComplex*>(a), n,
                                            w, lwork, p, batch);
}
cusolverStatus_t heevj_buffer(cusolverDnHandle_t h, cusolverEigMode_t jobz, int n, const cf64* a, const double* w,
                              int* lwork, syevjInfo_t p, int batch) {
  return cusolverDnZheevjBatched_bufferSize(h, jobz, CUBLAS_FILL_MODE_LOWER, n,
                                            reinterpret_cast<const cuDoubleComplex*>(a), n, w, lwork, p, batch);
}
cusolverStatus_t heevj(cusolverDnHandle_t h, cusolverEigMode_t jobz, int n, cf32* a, float* w, cf32* work, int lwork,
                       int* info, syevjInfo_t p, int batch) {
  return cusolverDnCheevjBatched(h, jobz, CUBLAS_FILL_MODE_LOWER, n, reinterpret_cast<cuComplex*>(a), n, w,
                                 reinterpret_cast<cuComplex*>(work), lwork, info, p, batch);
}
cusolverStatus_t heevj(cusolverDnHandle_t h, cusolverEigMode_t jobz, int n, cf64* a, double* w, cf64* work, int lwork,
                       int* info, syevjInfo_t p, int batch) {
  return cusolverDnZheevjBatched(h, jobz, CUBLAS_FILL_MODE_LOWER, n, reinterpret_cast<cuDoubleComplex*>(a), n, w,
                                 reinterpret_cast<cuDoubleComplex*>(work), lwork, info, p, batch);
}
#endif

template <class T>
Row bench_one(int n, long long count, bool vectors, Input input, const std::vector<T>& host_a, const Settings& settings,
              Exec* gpu, Exec& cpu, std::mt19937_64& rng) {
  using R = real_t<T>;
  Row row;
  row.op = "heev";
  row.dtype = std::string(name(element_type_of<T>()));
  row.shape = fmt::format("n={} batch={} {}", n, count, vectors ? "vectors" : "values");
  row.input = label(input);
  row.flops = nominal_flops(n, is_complex_v<T>, vectors) * double(count);
  row.vendors = {"xsyev-batched", "heevj-batched"};
  [[maybe_unused]] const std::size_t elems = static_cast<std::size_t>(count) * n * n;

#if COVFLOW_HAS_CUDA
  if (gpu != nullptr) {
    CudaContext& context = gpu->cuda_context();
    cudaStream_t stream = context.stream();
    const int sets = static_cast<int>(std::clamp<std::size_t>((512u << 20) / (elems * sizeof(T) + 1), 1, 3));
    std::vector<cuda::DeviceBuffer<T>> pristine;
    for (int i = 0; i < sets; ++i) {
      pristine.emplace_back(elems);
      pristine.back().upload(host_a, stream);
    }
    cuda::DeviceBuffer<T> work_a(elems);
    cuda::DeviceBuffer<R> w_covflow(static_cast<std::size_t>(count) * n), w_vendor(static_cast<std::size_t>(count) * n);
    cuda::DeviceBuffer<int> info(static_cast<std::size_t>(count));
    // NaN eigenvalues and an info of −1 until a contender writes them: an element no call writes
    // fails the checks below.
    w_covflow.fill_bytes(0xFF, stream);
    w_vendor.fill_bytes(0xFF, stream);
    auto restore = [&](int rep) {
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(work_a.data(), pristine[rep % sets].data(), elems * sizeof(T),
                                       cudaMemcpyDeviceToDevice, stream));
    };
    // Each contender's info and its eigenvectors of the sampled matrices, read after its timed calls.
    const std::vector<long long> sample = vectors ? vector_sample(count, rng) : std::vector<long long>{};
    auto read_info = [&] {
      std::vector<int> host(static_cast<std::size_t>(count));
      info.download(host, stream);
      gpu->synchronize();
      return host;
    };
    auto read_vectors = [&] {
      std::vector<T> host(sample.size() * n * n);
      for (std::size_t s = 0; s < sample.size(); ++s)
        work_a.download(std::span<T>(host.data() + s * n * n, std::size_t(n) * n), stream,
                        static_cast<std::size_t>(sample[s]) * n * n);
      gpu->synchronize();
      return host;
    };

    const HeevOptions options{.uplo = Uplo::lower, .vectors = vectors};
    gpu->workspace().reserve(heev_workspace<T>(*gpu, n, count, options));
    row.notes["covflow workspace"] =
        fmt::format("{:.1f} MiB ({:.2f}× the input batch)", heev_workspace<T>(*gpu, n, count, options) / 1048576.0,
                    double(heev_workspace<T>(*gpu, n, count, options)) / double(elems * sizeof(T)));
    const std::size_t growth_before = gpu->workspace().growth_count();
    info.fill_bytes(0xFF, stream);
    row.times["covflow"] = time_device(
        stream,
        [&](int) {
          heev<T>(*gpu, Batch<T>::packed(work_a.data(), n, n, count), {w_covflow.data(), w_covflow.size()},
                  {info.data(), info.size()}, options);
        },
        settings.warmup, settings.reps, restore);
    if (gpu->workspace().growth_count() != growth_before) row.notes["warning"] = "covflow workspace grew while timed";
    if (const std::string problem = info_problem(read_info()); !problem.empty()) row.fail("covflow: " + problem);
    const std::vector<T> covflow_vectors = read_vectors();

    // cusolverDnXsyevBatched
    const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
    cusolverDnParams_t params = nullptr;
    COVFLOW_CUSOLVER_TRY(cusolverDnCreateParams(&params));
    std::size_t device_bytes = 0, host_bytes = 0;
    COVFLOW_CUSOLVER_TRY(cusolverDnXsyevBatched_bufferSize(context.cusolver(), params, jobz, CUBLAS_FILL_MODE_LOWER, n,
                                                           cuda_type<T>(), work_a.data(), n, cuda_real_type<R>(),
                                                           w_vendor.data(), cuda_type<T>(), &device_bytes, &host_bytes,
                                                           count));
    {
      cuda::DeviceBuffer<std::byte> device_work(std::max<std::size_t>(device_bytes, 1));
      std::vector<std::byte> host_work(std::max<std::size_t>(host_bytes, 1));
      info.fill_bytes(0xFF, stream);
      row.times["xsyev-batched"] = time_device(
          stream,
          [&](int) {
            COVFLOW_CUSOLVER_TRY(cusolverDnXsyevBatched(context.cusolver(), params, jobz, CUBLAS_FILL_MODE_LOWER, n,
                                                        cuda_type<T>(), work_a.data(), n, cuda_real_type<R>(),
                                                        w_vendor.data(), cuda_type<T>(), device_work.data(), device_bytes,
                                                        host_work.data(), host_bytes, info.data(), count));
          },
          settings.warmup, settings.reps, restore);
      row.notes["xsyev workspace"] = fmt::format("{:.1f} MiB", device_bytes / 1048576.0);
    }
    cusolverDnDestroyParams(params);
    const std::string vendor_info = info_problem(read_info());
    if (!vendor_info.empty()) row.fail("xsyev-batched: " + vendor_info + ": nothing to compare with");
    const std::vector<T> vendor_vectors = read_vectors();

    // Same answer as xsyev's? The eigenvalues of every matrix, the eigenvectors of the sample.
    std::vector<R> wc(static_cast<std::size_t>(count) * n), wv(static_cast<std::size_t>(count) * n);
    w_covflow.download(wc, stream);
    w_vendor.download(wv, stream);
    gpu->synchronize();
    if (vendor_info.empty()) {
      const double values = value_difference(wc, wv, n, count);
      row.notes["max |λ_covflow − λ_xsyev| / ‖A‖₂"] = fmt::format("{:.2f} n·ε (tolerance {:.0f})", values, kValueTolerance);
      if (!(values <= kValueTolerance))
        row.fail(fmt::format("eigenvalues differ from xsyev's by {:.2f} n·ε·‖A‖₂ (tolerance {:.0f})", values,
                             kValueTolerance));
      if (vectors) {
        std::vector<VectorAgreement> agreement(sample.size());
        cpu.pool().parallel_for(sample.size(), [&](std::size_t s, unsigned) {
          agreement[s] = vector_agreement<T>(covflow_vectors.data() + s * n * n, vendor_vectors.data() + s * n * n,
                                             wv.data() + static_cast<std::size_t>(sample[s]) * n, n);
        });
        VectorAgreement all;
        for (const VectorAgreement& a : agreement) all = combine(all, a);
        row.notes["eigenvectors vs xsyev"] = fmt::format(
            "{} of {} matrices: max ‖sin Θ‖_F / (1 + √m·‖A‖₂/gap) {:.2f} n·ε (tolerance {:.0f}); {} groups of "
            "eigenvalues closer than {:.0f}·n·ε·‖A‖₂ compared as subspaces (largest m = {})",
            sample.size(), count, all.error, kVectorTolerance, all.groups, kClusterGap, all.largest);
        if (!(all.error <= kVectorTolerance))
          row.fail(fmt::format("eigenvectors differ from xsyev's by {:.2f} n·ε·(1 + √m·‖A‖₂/gap) (tolerance {:.0f})",
                               all.error, kVectorTolerance));
      }
    }

    // {C,Z}heevjBatched: n ≤ 32 only
    if (n <= 32) {
      syevjInfo_t jparams = nullptr;
      COVFLOW_CUSOLVER_TRY(cusolverDnCreateSyevjInfo(&jparams));
      int lwork = 0;
      COVFLOW_CUSOLVER_TRY(heevj_buffer(context.cusolver(), jobz, n, work_a.data(), w_vendor.data(), &lwork, jparams,
                                        static_cast<int>(count)));
      cuda::DeviceBuffer<T> jwork(static_cast<std::size_t>(std::max(lwork, 1)));
      info.fill_bytes(0xFF, stream);
      row.times["heevj-batched"] = time_device(
          stream,
          [&](int) {
            COVFLOW_CUSOLVER_TRY(heevj(context.cusolver(), jobz, n, work_a.data(), w_vendor.data(), jwork.data(), lwork,
                                       info.data(), jparams, static_cast<int>(count)));
          },
          settings.warmup, settings.reps, restore);
      cusolverDnDestroySyevjInfo(jparams);
      if (const std::string problem = info_problem(read_info()); !problem.empty()) row.fail("heevj-batched: " + problem);
    }
  }
#endif
  if (settings.cpu) {
    const long long sub = std::min<long long>(count, cpu.pool().size());
    std::vector<T> a(host_a.begin(), host_a.begin() + static_cast<std::ptrdiff_t>(sub) * n * n), work(a.size());
    std::vector<R> w(static_cast<std::size_t>(sub) * n);
    std::vector<int> info(static_cast<std::size_t>(sub), -1);
    const HeevOptions options{.uplo = Uplo::lower, .vectors = vectors};
    Timing t = time_host(
        [&] {
          work = a;
          heev<T>(cpu, Batch<T>::packed(work.data(), n, n, sub), w, info, options);
        },
        n >= 256 ? 0 : 1, n >= 256 ? 1 : settings.cpu_reps);
    const double scale = double(count) / double(sub);
    t.median_ms *= scale;
    t.min_ms *= scale;
    t.max_ms *= scale;
    row.times["cpu"] = t;
    if (sub < count) row.notes["cpu"] = fmt::format("timed on {} matrices ({} threads), scaled ×{:.0f}", sub,
                                                    cpu.pool().size(), scale);
    if (const std::string problem = info_problem(info); !problem.empty()) row.fail("cpu: " + problem);
  }
  return row;
}

struct Shape {
  int n;
  long long count;
};

// Both inputs of one shape and element type; each input drawn once and timed with and without
// eigenvectors as --mode selects.
template <class T>
void add_rows(Report& report, const Shape& s, const Settings& settings, Exec* gpu, Exec& cpu, std::mt19937_64& rng) {
  for (Input input : {Input::random, Input::radar}) {
    if (!settings.input.empty() && settings.input != label(input)) continue;
    const std::vector<T> host_a = make_inputs<T>(input, s.n, s.count, rng);
    for (bool vectors : {true, false}) {
      if (!settings.mode.empty() && settings.mode != (vectors ? "vectors" : "values")) continue;
      report.add(bench_one<T>(s.n, s.count, vectors, input, host_a, settings, gpu, cpu, rng));
    }
  }
}

}  // namespace

nlohmann::json run_heev_bench(const Settings& settings, Exec* gpu, Exec& cpu) {
  std::mt19937_64 rng(2026);
  std::vector<Shape> shapes = {{16, 180}, {32, 180}, {64, 180}, {128, 180}, {256, 180}, {512, 180}, {16, 10000}, {32, 10000}};
  if (settings.quick) shapes = {{32, 180}, {128, 180}};
  if (!settings.shapes.empty()) {
    shapes.clear();
    for (const std::string& text : settings.shapes) {
      Shape s{};
      if (std::sscanf(text.c_str(), "%dx%lld", &s.n, &s.count) != 2 || s.n < 1 || s.count < 1)
        throw std::invalid_argument("--shape expects NxBATCH, e.g. 128x180; got '" + text + "'");
      shapes.push_back(s);
    }
  }
  Report report("heev: batched Hermitian eigendecomposition");
  for (const Shape& s : shapes) {
    if (settings.dtype.empty() || settings.dtype == "cf64") add_rows<cf64>(report, s, settings, gpu, cpu, rng);
    if (settings.dtype.empty() || settings.dtype == "cf32") add_rows<cf32>(report, s, settings, gpu, cpu, rng);
  }
  report.print();
  const std::string random_text = "Gaussian Hermitian, n added to the diagonal: eigenvalues spread over n ± 2√n";
  const std::string radar_text = radar_description();
  fmt::print("input random: {}\ninput radar: {}\n", random_text, radar_text);
  nlohmann::json out = report.to_json();
  out["inputs"] = {{"random", random_text}, {"radar", radar_text}};
  return out;
}

}  // namespace covflow::bench

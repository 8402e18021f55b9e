// covflow-bench heev-chase: the shifted QR iteration alone (Cosnuau 2014, §3; tridiagonal_qr.hpp),
// on random symmetric tridiagonals, one warp per matrix, for each arithmetic policy of the sweep
// step. Prints time and clock cycles per rotation of the slowest matrix. heev runs this iteration
// for n ≤ 32 and on the leaves of its divide and conquer.
#include <algorithm>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/cuda/stream.hpp"
#include "heev_chase_bench.hpp"

namespace covflow::bench {

void run_heev_chase_bench(const Settings& settings) {
  using linalg::cuda::DeviceBuffer;
  int device = 0, clock_khz = 0;
  COVFLOW_CUDA_TRY(cudaGetDevice(&device));
  COVFLOW_CUDA_TRY(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
  linalg::cuda::Stream stream;
  for (int n : {64, 128, 256}) {
    const int count = 180;
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> d(std::size_t(count) * n), e(std::size_t(count) * n, 0.0);
    for (auto& v : d) v = normal(rng);
    for (int b = 0; b < count; ++b)
      for (int k = 0; k + 1 < n; ++k) e[std::size_t(b) * n + k] = normal(rng);
    DeviceBuffer<double> dd(d.size()), de(e.size());
    DeviceBuffer<long long> rotations(static_cast<std::size_t>(count));
    dd.upload(d, stream);
    de.upload(e, stream);
    fmt::print("\n== heev-chase: QR stage alone, n={} × {} random tridiagonals, one warp each (max SM clock {} MHz)\n",
               n, count, clock_khz / 1000);
    for (int policy = 0; chase_policy_name(policy) != nullptr; ++policy) {
      const Timing t = time_device(
          stream, [&](int) { launch_chase_only(policy, n, count, dd.data(), de.data(), rotations.data(), stream); },
          settings.warmup, settings.reps);
      COVFLOW_CHECK_LAUNCH();
      std::vector<long long> host(static_cast<std::size_t>(count));
      rotations.download(host, stream);
      stream.synchronize();
      const long long most = *std::max_element(host.begin(), host.end());
      const double ns = t.median_ms * 1e6 / double(std::max(most, 1LL));
      fmt::print("  {:<32} {:8.3f} ms  {:7} rotations (slowest matrix)  {:6.1f} ns ≈ {:4.0f} cycles per rotation of it\n",
                 chase_policy_name(policy), t.median_ms, most, ns, ns * clock_khz * 1e-6);
    }
  }
}

}  // namespace covflow::bench

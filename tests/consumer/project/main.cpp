// Computes one sample covariance through the installed covflow::linalg and checks it.
#include <covflow/linalg/covariance.hpp>
#include <covflow/linalg/device.hpp>

#include <complex>
#include <cstdio>
#include <vector>

int main() {
  using namespace covflow::linalg;
  Exec exec = Exec::cpu(1);
  // Two channels, two snapshots: x = [1, i; 2, 0] → R = x xᴴ / 2 + 0.5 I.
  std::vector<cf64> x{{1, 0}, {2, 0}, {0, 1}, {0, 0}}, r(4);
  sample_covariance<cf64>(exec, Batch<cf64>::packed(x.data(), 2, 2, 1), Batch<cf64>::packed(r.data(), 2, 2, 1),
                          {.diagonal_loading = 0.5});
  const std::vector<cf64> expected{{1.5, 0}, {1, 0}, {1, 0}, {2.5, 0}};
  for (int e = 0; e < 4; ++e)
    if (std::abs(r[e] - expected[e]) > 1e-15) {
      std::printf("consumer: element %d is (%g, %g), expected (%g, %g)\n", e, r[e].real(), r[e].imag(),
                  expected[e].real(), expected[e].imag());
      return 1;
    }
  std::printf("consumer: covflow::linalg found and working (CUDA compiled in: %s)\n",
              cuda_compiled() ? "yes" : "no");
  return 0;
}

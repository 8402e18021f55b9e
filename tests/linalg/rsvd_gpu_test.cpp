// rsvd on the CUDA backend: rsvd_cases.hpp's checks (fixed rank against the bound of Halko,
// Martinsson and Tropp; fixed accuracy on a batch of mixed ranks; the Hermitian form on radar sample
// covariances; reproducibility from the seed; a NaN in one matrix) on the device, and the device's
// σ against the CPU backend's on the same input and seed. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/rsvd.hpp"
#include "lowrank_cases.hpp"
#include "rsvd_cases.hpp"
#include "test_support.hpp"

namespace covflow::linalg {
namespace {

using rsvd_checks::Result;

template <class T>
class RsvdGpu : public test::GpuTest {};
using ElementTypes = ::testing::Types<f32, f64, cf32, cf64>;
TYPED_TEST_SUITE(RsvdGpu, ElementTypes);

// On the device: A uploaded, outputs and workspace poisoned (0xFF bytes: NaN) before the call — a
// read of workspace the call never wrote shows as NaN whatever earlier tests left in that memory —
// downloaded after.
template <class T>
Result<T> call_gpu(Exec& exec, const std::vector<T>& a, int m, int n, int count, const RsvdOptions& options) {
  using R = real_t<T>;
  cudaStream_t stream = exec.cuda_context().stream();
  Result<T> out;
  out.r = rsvd_output_rank(m, n, options);
  const auto c = static_cast<std::size_t>(count), r = static_cast<std::size_t>(out.r);
  cuda::DeviceBuffer<T> da(a.size()), du(c * m * r), dv(options.hermitian ? 0 : c * n * r);
  cuda::DeviceBuffer<R> ds(c * r);
  cuda::DeviceBuffer<RsvdInfo> dinfo(c);
  cuda::DeviceBuffer<std::byte> work(std::max<std::size_t>(rsvd_workspace<T>(exec, m, n, count, options), 1));
  da.upload(a, stream);
  du.fill_bytes(0xFF, stream);
  dv.fill_bytes(0xFF, stream);
  ds.fill_bytes(0xFF, stream);
  dinfo.fill_bytes(0x7F, stream);
  work.fill_bytes(0xFF, stream);
  rsvd<T>(exec, Batch<const T>::packed(da.data(), m, n, count), {ds.data(), ds.size()},
          Batch<T>::packed(du.data(), m, out.r, count),
          options.hermitian ? Batch<T>{} : Batch<T>::packed(dv.data(), n, out.r, count), {dinfo.data(), dinfo.size()},
          {work.data(), work.size()}, options);
  out.s.resize(ds.size());
  out.u.resize(du.size());
  out.v.resize(dv.size());
  out.info.resize(c);
  ds.download(out.s, stream);
  du.download(out.u, stream);
  if (!options.hermitian) dv.download(out.v, stream);
  dinfo.download(out.info, stream);
  exec.synchronize();
  return out;
}

TYPED_TEST(RsvdGpu, FixedRankMeetsTheHalkoMartinssonTroppBound) {
  rsvd_checks::fixed_rank_meets_the_bound<TypeParam>(this->gpu(), rsvd_checks::Runner<TypeParam>(call_gpu<TypeParam>));
}

TYPED_TEST(RsvdGpu, FixedAccuracyMeetsTheToleranceOnEveryMatrixOfAMixedBatch) {
  rsvd_checks::fixed_accuracy_meets_the_tolerance<TypeParam>(this->gpu(),
                                                              rsvd_checks::Runner<TypeParam>(call_gpu<TypeParam>));
}

TYPED_TEST(RsvdGpu, HermitianFormFindsTheSignalEigenvaluesOfRadarCovariances) {
  rsvd_checks::hermitian_form_on_radar_covariances<TypeParam>(this->gpu(),
                                                               rsvd_checks::Runner<TypeParam>(call_gpu<TypeParam>));
}

TYPED_TEST(RsvdGpu, SeedReproducesAndANaNMatrixLeavesTheOthersExact) {
  rsvd_checks::seed_and_nan<TypeParam>(this->gpu(), this->gpu(), rsvd_checks::Runner<TypeParam>(call_gpu<TypeParam>));
}

// The device and the CPU backend on the same matrices and seed: the same ranks in fixed accuracy,
// σ within 10·n·ε·σ₁ (the samples agree up to the last bits of log and cos, and σ of a subspace that
// captures A to the tolerance are stable), at the paper's shape scaled down (64 × 256×256, rank 32)
// and a tall one.
TYPED_TEST(RsvdGpu, AgreesWithTheCpuBackend) {
  using T = TypeParam;
  Exec cpu = Exec::cpu();
  std::mt19937_64 rng(test::fresh_seed("RsvdGpu.AgreesWithTheCpuBackend"));
  struct Shape {
    int m, n, count;
  };
  for (const Shape sh : {Shape{256, 256, 16}, Shape{1024, 64, 8}}) {
    const auto lc = test::make_lowrank_case<T>(test::latms_spec(sh.m, sh.n, sh.count, 3, 1e6), rng);
    SCOPED_TRACE(lc.label());
    RsvdOptions options;
    options.rank = 32;
    options.power_iterations = 2;
    options.seed = rng();
    const Result<T> g = call_gpu<T>(this->gpu(), lc.a, sh.m, sh.n, sh.count, options);
    const Result<T> c = rsvd_checks::call_host<T>(cpu, lc.a, sh.m, sh.n, sh.count, options);
    const double tol = 10.0 * std::max(sh.m, sh.n) * rsvd_checks::eps<T>();
    for (int b = 0; b < sh.count; ++b) {
      EXPECT_EQ(g.info[b].status, rsvd_status::ok);
      EXPECT_EQ(g.info[b].rank, c.info[b].rank);
      for (int i = 0; i < g.r; ++i)
        EXPECT_NEAR(g.s[b * g.r + i], c.s[b * c.r + i], tol * double(c.s[b * c.r])) << "matrix " << b << " σ" << i;
    }
  }
}

}  // namespace
}  // namespace covflow::linalg

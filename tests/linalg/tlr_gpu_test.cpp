// Tile low-rank compression, expansion, gemv, GEMM (LLD and LLL), Cholesky and solve on the CUDA
// backend through the public API: the bodies of the CPU suite (tlr_suite.hpp) on the shared CUDA
// Exec — inputs and TLR storage uploaded, outputs downloaded and checked on the host by the same
// checks, against the same tolerances.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"
#include "tlr_suite.hpp"

namespace covflow::linalg {
namespace {

using namespace tlr_suite;

template <class T>
class TlrGpu : public test::GpuTest {};
struct ElementName {
  template <class T>
  static std::string GetName(int) {
    return std::string(name(element_type_of<T>()));
  }
};
using ElementTypes = ::testing::Types<f32, f64, cf32, cf64>;
TYPED_TEST_SUITE(TlrGpu, ElementTypes, ElementName);

TYPED_TEST(TlrGpu, CompressAccuracyRanksAndMemory) {
  check_compress_accuracy_ranks_and_memory<TypeParam>(test::GpuTest::gpu());
}
TYPED_TEST(TlrGpu, MaxRankCappingReported) { check_max_rank_capping_reported<TypeParam>(test::GpuTest::gpu()); }
TYPED_TEST(TlrGpu, NonFiniteInputFlaggedAlone) {
  check_non_finite_input_flagged_alone<TypeParam>(test::GpuTest::gpu());
}
TYPED_TEST(TlrGpu, GemvEveryOp) { check_gemv_every_op<TypeParam>(test::GpuTest::gpu()); }
TYPED_TEST(TlrGpu, GemmLldEveryOp) { check_gemm_lld_every_op<TypeParam>(test::GpuTest::gpu()); }
TYPED_TEST(TlrGpu, GemmLllEveryOp) { check_gemm_lll_every_op<TypeParam>(test::GpuTest::gpu()); }
TYPED_TEST(TlrGpu, GemmLllHermitian) { check_gemm_lll_hermitian<TypeParam>(test::GpuTest::gpu()); }
TYPED_TEST(TlrGpu, PotrfAndPotrs) { check_potrf_and_potrs<TypeParam>(test::GpuTest::gpu()); }
TYPED_TEST(TlrGpu, NotPositiveDefiniteReported) { check_not_positive_definite_reported<TypeParam>(test::GpuTest::gpu()); }

}  // namespace
}  // namespace covflow::linalg

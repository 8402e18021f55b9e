// Tile low-rank matrices on the CPU backend (BLAS/LAPACK per tile across the pool) through the
// public API: the shared bodies of tlr_suite.hpp (compression accuracy, ranks, padding and memory;
// max_rank capping; non-finite input; gemv and GEMM-LLD for every op; GEMM-LLL after the whole
// driver, general and Hermitian; TLR Cholesky and solve; an indefinite matrix) on a two-thread CPU
// Exec, and the argument errors, which the host API checks before any backend runs.
#include "covflow/linalg/tlr.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "covflow/linalg/error.hpp"
#include "tlr_suite.hpp"

namespace covflow::linalg {
namespace {

using namespace tlr_suite;

template <class T>
class TlrCpu : public ::testing::Test {
 protected:
  Exec exec_ = Exec::cpu(2);
};
struct ElementName {
  template <class T>
  static std::string GetName(int) {
    return std::string(name(element_type_of<T>()));
  }
};
using ElementTypes = ::testing::Types<f32, f64, cf32, cf64>;
TYPED_TEST_SUITE(TlrCpu, ElementTypes, ElementName);

TYPED_TEST(TlrCpu, CompressAccuracyRanksPaddingAndMemory) {
  check_compress_accuracy_ranks_and_memory<TypeParam>(this->exec_);
}
TYPED_TEST(TlrCpu, MaxRankCappingReported) { check_max_rank_capping_reported<TypeParam>(this->exec_); }
TYPED_TEST(TlrCpu, NonFiniteInputFlaggedAlone) { check_non_finite_input_flagged_alone<TypeParam>(this->exec_); }
TYPED_TEST(TlrCpu, GemvEveryOp) { check_gemv_every_op<TypeParam>(this->exec_); }
TYPED_TEST(TlrCpu, GemmLldEveryOp) { check_gemm_lld_every_op<TypeParam>(this->exec_); }
TYPED_TEST(TlrCpu, GemmLllEveryOp) { check_gemm_lll_every_op<TypeParam>(this->exec_); }
TYPED_TEST(TlrCpu, GemmLllHermitian) { check_gemm_lll_hermitian<TypeParam>(this->exec_); }
TYPED_TEST(TlrCpu, PotrfAndPotrs) { check_potrf_and_potrs<TypeParam>(this->exec_); }
TYPED_TEST(TlrCpu, NotPositiveDefiniteReportedWithItsColumn) {
  check_not_positive_definite_reported<TypeParam>(this->exec_);
}

// ---- argument errors ------------------------------------------------------------------------------

TEST(TlrCpuErrors, BadArgumentsThrowInvalidArgument) {
  Exec exec = Exec::cpu(1);
  const TlrShape shape{10, 4, 2, 2, false}, hermitian{10, 4, 2, 2, true};
  std::vector<std::byte> storage(tlr_bytes(ElementType::f64, shape)), small(64);
  const Tlr<f64> t = tlr_view<f64>(shape, storage);
  const Tlr<f64> h = tlr_view<f64>(hermitian, storage);
  std::vector<f64> dense(10 * 10 * 2), x(10 * 3 * 2), y(10 * 3 * 2);
  std::vector<TlrInfo> info(2);
  std::vector<std::byte> workspace(1 << 20);
  const auto a = Batch<const f64>::packed(dense.data(), 10, 10, 2);

  test::expect_invalid_argument(
      [&] {
        tlr_view<f64>(TlrShape{10, 0, 1, 1, false}, storage);
      },
      "tlr_view: shape: tile 0 must be at least 1");
  test::expect_invalid_argument([&] { tlr_view<f64>(TlrShape{10, 4, 5, 1, false}, storage); }, "max_rank 5 must lie in 1 … tile (4)");
  test::expect_invalid_argument([&] { tlr_view<f64>(shape, small); }, "tlr_view: storage holds 64 bytes");
  test::expect_invalid_argument([&] { validate(Tlr<f64>{shape}, "op", "X"); }, "op: X: null diag pointer");

  test::expect_invalid_argument([&] { tlr_compress<f64>(exec, Batch<const f64>::packed(dense.data(), 9, 10, 2), t, info, workspace); },
                 "tlr_compress: A is 9×10 but out is 10×10");
  test::expect_invalid_argument(
      [&] { tlr_compress<f64>(exec, Batch<const f64>::packed(dense.data(), 10, 10, 1), t, info, workspace); },
      "tlr_compress: out holds 2 matrices and A 1");
  test::expect_invalid_argument([&] { tlr_compress<f64>(exec, a, t, std::span(info).first(1), workspace); },
                 "tlr_compress: info holds 1 entries, 2 needed");
  test::expect_invalid_argument([&] { tlr_compress<f64>(exec, a, t, info, std::span(workspace).first(8)); },
                 "tlr_compress: workspace holds 8 bytes");
  test::expect_invalid_argument([&] { tlr_compress<f64>(exec, a, t, info, workspace, TlrOptions{0.0}); },
                 "tlr_compress: tolerance 0.000000 must be positive");
  test::expect_invalid_argument(
      [&] {
        tlr_gemv<f64>(exec, Op('X'), 1.0, t, Batch<const f64>::packed(x.data(), 10, 3, 2), 0.0,
                      Batch<f64>::packed(y.data(), 10, 3, 2), workspace);
      },
      "tlr_gemv: op must be none, trans or conj_trans");
  test::expect_invalid_argument(
      [&] {
        tlr_gemv<f64>(exec, Op::none, 1.0, t, Batch<const f64>::packed(x.data(), 10, 3, 2), 0.0,
                      Batch<f64>::packed(y.data(), 10, 2, 2), workspace);
      },
      "tlr_gemv: Y is 10×2 but A is 10×10: Y needs 10 rows and 3 columns");
  const TlrShape other{10, 5, 2, 2, false};
  std::vector<std::byte> other_storage(tlr_bytes(ElementType::f64, other));
  test::expect_invalid_argument(
      [&] {
        tlr_gemm<f64>(exec, Op::none, Op::none, 1.0, t, tlr_view<f64>(other, other_storage), 0.0,
                      Batch<f64>::packed(dense.data(), 10, 10, 2), workspace);
      },
      "tlr_gemm: A is 2 × n 10 in tiles of 4 but B is 2 × n 10 in tiles of 5");
  test::expect_invalid_argument([&] { tlr_potrf<f64>(exec, t, info, workspace); }, "tlr_potrf: A must be a Hermitian TLR");
  test::expect_invalid_argument([&] { tlr_potrs<f64>(exec, h, Batch<f64>::packed(x.data(), 9, 3, 2), info, workspace); },
                 "tlr_potrs: B is 9×3 but L is 10×10");
  test::expect_invalid_argument([&] { tlr_potrf_workspace<f64>(exec, shape); }, "tlr_potrf_workspace: shape must be a Hermitian TLR");
  test::expect_invalid_argument([&] { tlr_stats(ElementType::f64, shape, std::span<const int>(t.rank, 3)); },
                 "tlr_stats: ranks hold 3 entries, 12 needed (count × slots)");
}

TEST(TlrCpuErrors, EmptyBatchesAreNoOps) {
  Exec exec = Exec::cpu(1);
  const TlrShape empty{0, 4, 2, 3, true};
  EXPECT_EQ(tlr_compress_workspace<cf64>(exec, empty), 0u);
  EXPECT_EQ(tlr_potrf_workspace<cf64>(exec, empty), 0u);
  std::vector<TlrInfo> info;
  tlr_potrf<cf64>(exec, Tlr<cf64>{empty}, info, {});
  tlr_compress<cf64>(exec, Batch<const cf64>{nullptr, 0, 0, 1, 0, 3}, Tlr<cf64>{empty}, info, {});
}

}  // namespace
}  // namespace covflow::linalg

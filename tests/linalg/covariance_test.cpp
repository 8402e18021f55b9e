// sample_covariance on the CPU backend against the naive triple loop.
#include <gtest/gtest.h>

#include "covariance_reference.hpp"
#include "covflow/linalg/covariance.hpp"
#include "covflow/linalg/error.hpp"

namespace covflow::linalg {
namespace {

using test::CovarianceCase;

template <class T>
class CovarianceCpu : public ::testing::Test {};
using ComplexTypes = ::testing::Types<cf32, cf64>;
TYPED_TEST_SUITE(CovarianceCpu, ComplexTypes);

TYPED_TEST(CovarianceCpu, MatchesNaiveLoopAcrossShapes) {
  using T = TypeParam;
  std::mt19937_64 rng(test::fresh_seed("covariance cpu"));
  Exec exec = Exec::cpu(3);
  for (const CovarianceCase& c : test::covariance_cases())
    for (bool graded : {false, true})
      for (double loading : {0.0, 0.25}) {
        const auto x_shape = test::x_layout<T>(c, nullptr);
        const auto r_shape = test::r_layout<T>(c, nullptr);
        std::vector<T> x = test::snapshot_data<T>(c, test::allocation(x_shape), rng, graded);
        std::vector<T> r(test::allocation(r_shape), test::poison<T>());
        auto xb = test::x_layout(c, x.data());
        auto rb = test::r_layout(c, r.data());
        sample_covariance<T>(exec, xb, rb, {.diagonal_loading = loading});
        test::expect_covariance<T>(xb, rb, loading,
                                   test::describe(c) + (graded ? " graded" : " white") + " δ=" + std::to_string(loading));
        // Padding between rows and matrices is not ours to write.
        for (std::int64_t b = 0; b < c.count; ++b)
          for (std::int64_t j = 0; j < c.channels; ++j)
            for (std::int64_t i = c.channels; i < rb.ld; ++i)
              ASSERT_TRUE(std::isnan(rb.at(b, i, j).real())) << "padding written at " << test::describe(c);
      }
}

TEST(CovarianceCpuErrors, BadShapesAreNamed) {
  Exec exec = Exec::cpu(1);
  std::vector<cf64> x(4 * 8 * 2), r(4 * 4 * 2);
  auto expect_message = [&](auto&& call, const std::string& fragment) {
    try {
      call();
      ADD_FAILURE() << "no error; expected " << fragment;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_message([&] { sample_covariance<cf64>(exec, Batch<cf64>::packed(x.data(), 4, 8, 2), Batch<cf64>::packed(r.data(), 4, 4, 1)); },
                 "2 snapshot matrices but 1 covariance matrices");
  expect_message([&] { sample_covariance<cf64>(exec, Batch<cf64>::packed(x.data(), 4, 8, 2), Batch<cf64>::packed(r.data(), 3, 3, 2)); },
                 "covariance must be 4×4");
  expect_message([&] { sample_covariance<cf64>(exec, Batch<cf64>::packed(x.data(), 4, 0, 2), Batch<cf64>::packed(r.data(), 4, 4, 2)); },
                 "at least one snapshot");
  expect_message([&] { sample_covariance<cf64>(exec, Batch<cf64>::packed(x.data(), 4, 8, 2), Batch<cf64>::packed(r.data(), 4, 4, 2),
                                               {.diagonal_loading = std::nan("")}); },
                 "diagonal loading must be finite");
}

TEST(CovarianceCpuErrors, EmptyBatchIsANoOp) {
  Exec exec = Exec::cpu(1);
  EXPECT_NO_THROW(sample_covariance<cf32>(exec, Batch<cf32>{nullptr, 4, 8, 4, 32, 0}, Batch<cf32>{nullptr, 4, 4, 4, 16, 0}));
}

}  // namespace
}  // namespace covflow::linalg

#include <gtest/gtest.h>

#include <vector>

#include "covflow/linalg/batch.hpp"

namespace covflow::linalg {
namespace {

TEST(Batch, PackedLayoutAndAddressing) {
  std::vector<double> data(2 * 3 * 4);
  auto b = Batch<double>::packed(data.data(), 2, 3, 4);
  EXPECT_EQ(b.ld, 2);
  EXPECT_EQ(b.stride, 6);
  EXPECT_EQ(&b.at(1, 1, 2), data.data() + 6 + 1 + 2 * 2);
  EXPECT_EQ(b.span_elements(), 24);
  Batch<const double> view = b;  // converts to a read-only view
  EXPECT_EQ(view.matrix(3), data.data() + 18);
}

TEST(Batch, PaddedLayoutSpan) {
  std::vector<float> data(100);
  Batch<float> b{data.data(), 3, 2, 5, 12, 4};  // ld 5 > rows, stride 12 > ld * cols
  EXPECT_NO_THROW(validate(b, "test", "b"));
  EXPECT_EQ(b.span_elements(), 3 * 12 + 1 * 5 + 3);
}

TEST(Batch, ValidationNamesTheProblem) {
  std::vector<cf64> data(64);
  auto expect_error = [](const auto& batch, const std::string& fragment) {
    try {
      validate(batch, "op", "arg");
      ADD_FAILURE() << "no error for " << fragment;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("op: arg: "), std::string::npos) << e.what();
    }
  };
  expect_error(Batch<cf64>{data.data(), 4, 4, 3, 16, 2}, "leading dimension 3 < rows 4");
  expect_error(Batch<cf64>{data.data(), 4, 4, 4, 8, 2}, "would overlap");
  expect_error(Batch<cf64>{nullptr, 4, 4, 4, 16, 2}, "null data pointer");
  expect_error(Batch<cf64>{data.data(), -1, 4, 4, 16, 2}, "negative dimension");
  // An empty batch needs no storage; a single matrix needs no stride.
  EXPECT_NO_THROW(validate(Batch<cf64>{nullptr, 4, 4, 4, 16, 0}, "op", "arg"));
  EXPECT_NO_THROW(validate(Batch<cf64>{data.data(), 4, 4, 4, 0, 1}, "op", "arg"));
}

}  // namespace
}  // namespace covflow::linalg

#include <gtest/gtest.h>

#include "covflow/config/did_you_mean.hpp"

namespace covflow::config {
namespace {

TEST(DidYouMean, EditDistance) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("budget_ms", "budget_ms"), 0u);
  EXPECT_EQ(edit_distance("budgt_ms", "budget_ms"), 1u);   // insertion
  EXPECT_EQ(edit_distance("budgett_ms", "budget_ms"), 1u); // deletion
  EXPECT_EQ(edit_distance("budgat_ms", "budget_ms"), 1u);  // substitution
  EXPECT_EQ(edit_distance("cdua", "cuda"), 1u);            // transposition
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("ca", "abc"), 3u);               // optimal string alignment, not full Damerau
}

TEST(DidYouMean, SuggestsOnlyLikelyMisspellings) {
  const std::vector<std::string> keys{"budget_ms", "queue_depth", "overflow", "stages"};
  EXPECT_EQ(closest("budgt_ms", keys), "budget_ms");
  EXPECT_EQ(closest("Budget_MS", keys), "budget_ms");
  EXPECT_EQ(closest("budget", keys), "budget_ms");  // a prefix
  EXPECT_EQ(closest("stage", keys), "stages");
  EXPECT_EQ(closest("overflw", keys), "overflow");
  EXPECT_EQ(closest("latency", keys), std::nullopt);
  EXPECT_EQ(closest("q", keys), std::nullopt);
  const std::vector<std::string> backends{"auto", "cuda", "cpu"};
  EXPECT_EQ(closest("cdua", backends), "cuda");
  EXPECT_EQ(closest("gpu", backends), "cpu");
  EXPECT_EQ(closest("opencl", backends), std::nullopt);
}

}  // namespace
}  // namespace covflow::config

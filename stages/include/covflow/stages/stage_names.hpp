// The default stage chain, in order (DESIGN.md, "Frames and stages").
#pragma once

#include <array>
#include <string_view>

namespace covflow::stages {

inline constexpr std::array<std::string_view, 6> default_chain{
    "ingest", "covariance", "subspace", "adaptive", "compress", "publish"};

bool is_known_stage(std::string_view name);

}  // namespace covflow::stages

#include "covflow/stages/stage_names.hpp"

#include <algorithm>

namespace covflow::stages {

bool is_known_stage(std::string_view name) {
  return std::find(default_chain.begin(), default_chain.end(), name) != default_chain.end();
}

}  // namespace covflow::stages

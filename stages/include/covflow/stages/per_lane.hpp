// Per-lane state of a stage: prepare() makes one State per Exec (a lane: one CUDA context or the
// CPU pool), run() finds it again. Shared by the covariance, subspace and adaptive stages.
// `State` may be incomplete where this is declared; get() and set() are instantiated in the
// stage's .cpp, where it is complete (as is the stage's destructor).
#pragma once

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "covflow/linalg/exec.hpp"

namespace covflow::stages {

template <class State>
class PerLane {
 public:
  // The state prepared for `exec`; std::logic_error naming `stage` when there is none.
  State& get(const linalg::Exec& exec, std::string_view stage) const {
    std::lock_guard lock(mutex_);
    for (const auto& [owner, state] : lanes_)
      if (owner == &exec) return *state;
    throw std::logic_error(std::string(stage) + ": run() on a lane that was not prepared");
  }
  // Installs `state` for `exec`, replacing what an earlier prepare() made.
  void set(const linalg::Exec& exec, std::unique_ptr<State> state) {
    std::lock_guard lock(mutex_);
    for (auto& [owner, existing] : lanes_)
      if (owner == &exec) {
        existing = std::move(state);
        return;
      }
    lanes_.emplace_back(&exec, std::move(state));
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<const linalg::Exec*, std::unique_ptr<State>>> lanes_;
};

}  // namespace covflow::stages

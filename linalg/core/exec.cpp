#include <new>

#include "covflow/linalg/error.hpp"
#include "exec_state.hpp"

namespace covflow::linalg {

const char* name(Backend backend) noexcept {
  return backend == Backend::cpu ? "cpu" : "cuda";
}

void HostWorkspace::Free::operator()(std::byte* p) const noexcept {
  ::operator delete[](p, std::align_val_t{256});
}

void HostWorkspace::reserve(std::size_t bytes) {
  if (bytes <= capacity_) return;
  data_.reset(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{256})));
  capacity_ = bytes;
}

void* HostWorkspace::acquire(std::size_t bytes) {
  if (bytes > capacity_) {
    reserve(bytes);
    ++growths_;
  }
  return data_.get();
}

Exec::Exec(std::unique_ptr<State> state) : state_(std::move(state)) {}
Exec::Exec(Exec&&) noexcept = default;
Exec& Exec::operator=(Exec&&) noexcept = default;
Exec::~Exec() = default;

Exec Exec::cpu(unsigned threads) {
  return Exec(std::make_unique<State>(Backend::cpu, threads));
}

Backend Exec::backend() const noexcept { return state_->backend; }

ThreadPool& Exec::pool() { return state_->pool; }
const ThreadPool& Exec::pool() const { return state_->pool; }

CudaContext& Exec::cuda_context() {
  if (!state_->cuda) throw InvalidArgument("Exec::cuda_context(): this is a CPU execution context");
  return *state_->cuda;
}

}  // namespace covflow::linalg

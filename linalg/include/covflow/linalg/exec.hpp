// Exec: the execution context every operation takes. Either the CPU backend (a thread pool and
// LAPACK/BLAS) or a CUDA context (device, stream, cuBLAS/cuSOLVER handles, a workspace arena).
// Data handed to an operation must live where the backend runs: host memory for the CPU
// backend, device memory for CUDA (operations check and say so).
#pragma once

#include <cstddef>
#include <memory>

#include "covflow/linalg/thread_pool.hpp"

namespace covflow::linalg {

enum class Backend { cpu, cuda };
const char* name(Backend backend) noexcept;

class CudaContext;  // covflow/linalg/cuda/context.hpp

// Scratch memory reused across calls, in the backend's memory space. Operations say how much
// they need (a *_workspace query); reserve that once at start-up and the frame loop never
// allocates. acquire() grows the arena when it is too small, and counts it, so a pipeline can
// assert that it never happened after start-up.
class Workspace {
 public:
  virtual ~Workspace() = default;
  // A pointer to at least `bytes` bytes, 256-byte aligned, valid until the next acquire/reserve.
  virtual void* acquire(std::size_t bytes) = 0;
  virtual void reserve(std::size_t bytes) = 0;
  virtual std::size_t capacity() const = 0;
  // Times acquire() had to allocate because the arena was too small.
  virtual std::size_t growth_count() const = 0;
};

struct CudaOptions {
  int device = 0;
  std::size_t workspace_bytes = 0;  // arena allocated up front
};

class Exec {
 public:
  // CPU backend with `threads` workers (0: one per hardware thread).
  static Exec cpu(unsigned threads = 0);
  // CUDA backend on one device. Throws Unavailable when covflow was built without CUDA or the
  // device does not exist.
  static Exec cuda(const CudaOptions& options = {});

  Exec(Exec&&) noexcept;
  Exec& operator=(Exec&&) noexcept;
  ~Exec();

  Backend backend() const noexcept;
  bool is_cuda() const noexcept { return backend() == Backend::cuda; }

  // The host thread pool (the CPU backend's workers; a CUDA context has one too, for host-side
  // work such as preparing inputs).
  ThreadPool& pool();
  const ThreadPool& pool() const;
  Workspace& workspace();
  // The CUDA side (stream, handles); throws InvalidArgument on a CPU Exec.
  CudaContext& cuda_context();

  // Waits for all work issued through this context (a no-op on the CPU backend, whose
  // operations return when done).
  void synchronize();

 private:
  struct State;
  explicit Exec(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace covflow::linalg

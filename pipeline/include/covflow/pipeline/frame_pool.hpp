// The frame pool: every FrameSlot the pipeline will use, allocated once when it starts, for the
// largest frame its FrameShape allows plus what the stages ask for (SlotNeeds). Frames move
// through the pipeline as FrameSlot pointers; acquire() and release() only move pointers on a
// free list, so no frame allocates (docs/architecture.md, "A frame's path").
//
// Memory per slot, by lane kind:
//   CPU lane   host payload, covariance, eigenvalues, eigenvectors, info, scratch (plain, 256-byte
//              aligned); no device arrays.
//   CUDA lane  host payload and host scratch pinned (cudaHostAlloc), so that copies to the device
//              are asynchronous; device payload, covariance, eigenvalues, eigenvectors, info and
//              scratch; the other host arrays are empty (results come back into FrameResults).
//   pinned     the host half of a CUDA slot only (several CUDA lanes share these slots; each lane
//              binds device arrays of its own GPU to the slot it takes).
//   device     the device half only: a lane's own arrays (on the GPU current when the pool is
//              made), bound to the pinned slots it processes.
// Scratch (host or device) is the largest any one stage asks for: a stage may use it during its
// run(), and must not expect it to hold anything afterwards.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "covflow/pipeline/frame.hpp"
#include "covflow/pipeline/stage.hpp"

namespace covflow::pipeline {

enum class SlotMemory { host, cuda, pinned, device };

struct PoolOptions {
  std::size_t slots = 8;
  SlotMemory memory = SlotMemory::host;
  std::size_t stage_count = 0;  // FrameSlot::stages is sized to it
};

class FramePool {
 public:
  // Allocates everything; throws (linalg::CudaError on a CUDA failure, std::invalid_argument when
  // slots is 0 or CUDA memory is asked for in a build without CUDA).
  FramePool(const FrameShape& shape, const std::vector<SlotNeeds>& needs, const PoolOptions& options);
  ~FramePool();
  FramePool(const FramePool&) = delete;
  FramePool& operator=(const FramePool&) = delete;

  // Slot `i` of the pool, free or not (a device pool's arrays are taken by index).
  FrameSlot& slot(std::size_t i) { return slots_.at(i)->slot; }
  // A free slot, waiting up to `wait` for one; nullptr when none came free. The slot is handed out
  // as the last user left it: the runner resets what it needs (results, stage records). The
  // caller holds it once.
  FrameSlot* acquire(std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  // One more holder of a slot already held: someone who reads it after the frame is done (the
  // recorder writes its payload on its own thread). Each holder releases it once.
  void retain(FrameSlot* slot);
  // Drops a hold; the last one gives the slot back to the pool. A slot whose FrameResults storage
  // moved (a stage grew a vector: an allocation in the frame loop) is counted in growths() and its
  // storage re-reserved.
  void release(FrameSlot* slot);

  std::size_t capacity() const { return slots_.size(); }
  std::size_t available() const;
  std::size_t in_use() const { return capacity() - available(); }
  // Slots given back with their result storage reallocated by a stage (should stay 0).
  std::uint64_t growths() const;
  // Bytes allocated for all slots, host and device.
  std::size_t host_bytes() const { return host_bytes_; }
  std::size_t device_bytes() const { return device_bytes_; }
  const FrameShape& shape() const { return shape_; }
  SlotMemory memory() const { return memory_; }

 private:
  struct Storage;  // owns one slot's arrays
  struct Entry {
    FrameSlot slot;
    std::unique_ptr<Storage> storage;
    const void* results_data[8] = {};  // where the results' vectors were, to notice growth
    int holds = 0;                     // under mutex_
  };
  Entry& entry_of(FrameSlot* slot) const;
  void remember_results(Entry& entry);
  bool results_moved(const Entry& entry) const;

  FrameShape shape_;
  SlotMemory memory_;
  std::vector<std::unique_ptr<Entry>> slots_;
  std::size_t host_bytes_ = 0, device_bytes_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<FrameSlot*> free_;  // capacity reserved for every slot
  std::uint64_t growths_ = 0;
};

}  // namespace covflow::pipeline

#include "covflow/pipeline/frame_pool.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#if COVFLOW_HAS_CUDA
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/cuda/stream.hpp"
#endif

namespace covflow::pipeline {
namespace {

struct AlignedDelete {
  void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{256}); }
};
using HostBlock = std::unique_ptr<std::byte[], AlignedDelete>;

HostBlock host_block(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  return HostBlock(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{256})));
}

std::size_t real_bytes(replay::ElementType type) { return replay::size_of(type) / 2; }

}  // namespace

struct FramePool::Storage {
  std::vector<HostBlock> host;
#if COVFLOW_HAS_CUDA
  std::vector<linalg::cuda::PinnedBuffer<std::byte>> pinned;
  std::vector<linalg::cuda::DeviceBuffer<std::byte>> device;
  std::vector<linalg::cuda::Event> events;  // the payload's upload event
#endif
};

FramePool::FramePool(const FrameShape& shape, const std::vector<SlotNeeds>& needs, const PoolOptions& options)
    : shape_(shape), memory_(options.memory) {
  if (options.slots == 0) throw std::invalid_argument("FramePool: at least one slot is needed");
  if (shape.element_type != replay::ElementType::cf32 && shape.element_type != replay::ElementType::cf64)
    throw std::invalid_argument("FramePool: frames hold cf32 or cf64 elements, not " +
                                std::string(replay::name(shape.element_type)));
#if !COVFLOW_HAS_CUDA
  if (memory_ != SlotMemory::host)
    throw std::invalid_argument("FramePool: CUDA slots asked for, but covflow was built without CUDA");
#endif
  std::size_t host_scratch = 0, device_scratch = 0;
  for (const auto& n : needs) {
    host_scratch = std::max(host_scratch, n.host_scratch_bytes);
    device_scratch = std::max(device_scratch, n.device_scratch_bytes);
  }
  const std::size_t payload = shape.max_payload_bytes();
  const std::size_t matrices = shape.covariance_elements() * shape.element_bytes();
  const std::size_t values = std::size_t(shape.cells) * shape.channels * real_bytes(shape.element_type);
  const std::size_t info = std::size_t(shape.cells) * sizeof(int);

  slots_.reserve(options.slots);
  free_.reserve(options.slots);
  for (std::size_t i = 0; i < options.slots; ++i) {
    auto entry = std::make_unique<Entry>();
    entry->storage = std::make_unique<Storage>();
    auto& slot = entry->slot;
    auto& st = *entry->storage;
    if (memory_ == SlotMemory::host) {
      auto take = [&](std::size_t bytes) {
        st.host.push_back(host_block(bytes));
        host_bytes_ += bytes;
        return std::span<std::byte>(st.host.back().get(), bytes);
      };
      slot.host.payload = take(payload);
      slot.host.covariance = take(matrices);
      slot.host.eigenvalues = take(values);
      slot.host.eigenvectors = take(matrices);
      auto info_bytes = take(info);
      slot.host.info = {reinterpret_cast<int*>(info_bytes.data()), shape.cells};
      slot.host.scratch = take(host_scratch);
    } else {
#if COVFLOW_HAS_CUDA
      auto pin = [&](std::size_t bytes) {
        st.pinned.emplace_back(bytes);
        host_bytes_ += bytes;
        return std::span<std::byte>(st.pinned.back().data(), bytes);
      };
      auto dev = [&](std::size_t bytes) -> void* {
        st.device.emplace_back(bytes);
        device_bytes_ += bytes;
        return st.device.back().data();
      };
      st.pinned.reserve(2);
      st.device.reserve(6);
      if (memory_ != SlotMemory::device) {
        slot.host.payload = pin(payload);
        slot.host.scratch = pin(host_scratch);
        // Stages keep descriptors there (what collect() finds): a new slot holds none.
        if (!slot.host.scratch.empty()) std::memset(slot.host.scratch.data(), 0, slot.host.scratch.size());
      }
      if (memory_ != SlotMemory::pinned) {
        slot.device.payload = dev(payload);
        slot.device.covariance = dev(matrices);
        slot.device.eigenvalues = dev(values);
        slot.device.eigenvectors = dev(matrices);
        slot.device.info = static_cast<int*>(dev(info));
        slot.device.scratch = dev(device_scratch);
        slot.device.scratch_bytes = device_scratch;
        st.events.emplace_back(cudaEventDisableTiming);
        slot.device.upload_event = st.events.back().get();
      }
#endif
    }
    slot.pool = this;
    slot.results.reserve(shape);
    slot.stages.assign(options.stage_count, StageRecord{});
    slot.problem.reserve(256);
    remember_results(*entry);
    free_.push_back(&slot);
    slots_.push_back(std::move(entry));
  }
}

FramePool::~FramePool() = default;

void FramePool::remember_results(Entry& e) {
  const auto& r = e.slot.results;
  const void* now[8] = {r.source_count.data(), r.doa_deg.data(),     r.spectrum_db.data(), r.eigenvalues.data(),
                        r.cell_status.data(),  r.weights.data(),     r.sinr_db.data(),     r.null_depth_db.data()};
  std::copy(std::begin(now), std::end(now), std::begin(e.results_data));
}

bool FramePool::results_moved(const Entry& e) const {
  const auto& r = e.slot.results;
  const void* now[8] = {r.source_count.data(), r.doa_deg.data(),     r.spectrum_db.data(), r.eigenvalues.data(),
                        r.cell_status.data(),  r.weights.data(),     r.sinr_db.data(),     r.null_depth_db.data()};
  return !std::equal(std::begin(now), std::end(now), std::begin(e.results_data));
}

FramePool::Entry& FramePool::entry_of(FrameSlot* slot) const {
  auto it = std::find_if(slots_.begin(), slots_.end(), [&](const auto& e) { return &e->slot == slot; });
  if (it == slots_.end()) throw std::invalid_argument("FramePool: the slot is not from this pool");
  return **it;
}

FrameSlot* FramePool::acquire(std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  if (!freed_.wait_for(lock, wait, [&] { return !free_.empty(); })) return nullptr;
  FrameSlot* slot = free_.back();
  free_.pop_back();
  entry_of(slot).holds = 1;
  return slot;
}

void FramePool::retain(FrameSlot* slot) {
  Entry& entry = entry_of(slot);
  std::lock_guard lock(mutex_);
  if (entry.holds == 0) throw std::logic_error("FramePool::retain: the slot is free");
  ++entry.holds;
}

void FramePool::release(FrameSlot* slot) {
  if (slot == nullptr) return;
  Entry& entry = entry_of(slot);
  {
    std::lock_guard lock(mutex_);
    if (entry.holds == 0) throw std::logic_error("FramePool::release: slot released twice");
    if (--entry.holds > 0) return;  // another holder gives it back
  }
  bool grew = results_moved(entry);
  if (grew) {
    // Restore the documented sizes so the next frame starts from the reserved layout again.
    entry.slot.results.reserve(shape_);
    remember_results(entry);
  }
  {
    std::lock_guard lock(mutex_);
    if (std::find(free_.begin(), free_.end(), slot) != free_.end())
      throw std::logic_error("FramePool::release: slot released twice");
    if (grew) ++growths_;
    free_.push_back(slot);  // never reallocates: reserved for every slot
  }
  freed_.notify_one();
}

std::size_t FramePool::available() const {
  std::lock_guard lock(mutex_);
  return free_.size();
}

std::uint64_t FramePool::growths() const {
  std::lock_guard lock(mutex_);
  return growths_;
}

}  // namespace covflow::pipeline

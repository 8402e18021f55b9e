#include "covflow/pipeline/runner.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <exception>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "covflow/linalg/error.hpp"
#include "covflow/pipeline/logging.hpp"
#include "device_lane.hpp"

namespace covflow::pipeline {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
double ms_between(std::int64_t from_ns, std::int64_t to_ns) { return double(to_ns - from_ns) * 1e-6; }

constexpr milliseconds kPoll{50};  // how long a worker or a blocked ingest waits before looking at the stop flags

// CUDA errors the runtime documents as leaving the process in an inconsistent state, every later
// CUDA call returning the same error: an illegal address, a launch timeout, a device-side assert,
// a hardware stack error, an illegal or misaligned instruction or address, an invalid program
// counter, a launch failure.
bool sticky_cuda_error(int code) {
  switch (code) {
    case 700: case 702: case 710: case 714: case 715: case 716: case 717: case 718: case 719: return true;
    default: return false;
  }
}

}  // namespace

// What one worker owns: its Exec, the CUDA side (null on a CPU lane), the stages' moving cost
// estimates and the per-frame bookkeeping, all sized when the runner is made.
struct Runner::Lane {
  std::size_t index = 0;
  linalg::Exec* exec = nullptr;
  std::unique_ptr<detail::DeviceLane> device;
  // Several CUDA lanes: this lane's device arrays, two sets (the frame computing and the one
  // uploading), bound to the shared pinned slot each frame is in (Runner::bind).
  std::unique_ptr<FramePool> device_sets;
  // Cells split over the lanes on CPU lanes: the two slots this lane's parts of frames run in (the
  // frame computing and the one taken ahead); on CUDA lanes the device sets are those slots.
  std::unique_ptr<FramePool> parts;
  // Frames routed to this lane when claimed (Runner::route): its own queue, the uploader the
  // placing threads send their payloads to this GPU with, the device sets (from 2 on, after the
  // two the lane binds itself) free to reserve for such frames, and the frames routed here and not
  // yet through.
  std::unique_ptr<BoundedQueue<FrameSlot*>> inbox;
  std::unique_ptr<detail::IngestUploader> uploader;
  std::mutex sets_mutex;
  std::vector<std::int32_t> free_sets;
  std::atomic<std::size_t> routed{0};
  std::vector<double> predicted_ms;              // per stage; negative: no run seen yet
  std::vector<std::uint32_t> skipped_in_a_row;   // per stage
  std::vector<std::size_t> issued;               // GPU stages of this frame whose times are not read yet
  std::vector<std::size_t> issued_from;          // the event each one is timed from
  std::thread thread;
};

// The queue, two per lane, those being filled (a placer each), the kept ones and, with several lanes, what the
// reorder buffer may hold (two per lane), the frame the sequencing thread is on, and what the lanes'
// own queues hold beyond queue_depth (each has ⌈queue_depth / lanes⌉).
std::size_t minimum_slots(const RunnerOptions& options, std::size_t lanes) {
  const std::size_t reorder = lanes > 1 ? 3 * lanes + 1 : 0;
  const std::size_t placing = std::max<std::size_t>(1, options.placers > 0 ? options.placers : lanes > 1 ? 2 * lanes : 1);
  return std::max<std::size_t>(options.queue_depth, 1) + 2 * lanes + placing + options.kept_slots + reorder;
}

std::size_t automatic_placers(std::size_t lanes, bool cuda) {
  if (lanes <= 1) return 1;
  return cuda ? 2 * lanes : lanes;
}

std::string frame_shape_problem(const FrameShape& shape, const replay::FrameHeader& h, std::size_t payload_bytes) {
  if (auto problem = replay::shape_problem(h); !problem.empty()) return problem;
  if (h.element_type != shape.element_type)
    return fmt::format("element type {} where the pipeline takes {}", replay::name(h.element_type), replay::name(shape.element_type));
  if (h.kind == replay::PayloadKind::covariance) {
    if (h.rows != shape.channels || h.count != shape.cells)
      return fmt::format("covariance {}×{}×{} where the pipeline takes {}×{}×{} (N×N×cells)", h.rows, h.cols, h.count,
                         shape.channels, shape.channels, shape.cells);
  } else if (h.kind == replay::PayloadKind::snapshots) {
    if (shape.snapshots == 0) return "snapshot frame where the pipeline takes covariance frames only";
    if (h.rows != shape.channels || h.cols != shape.snapshots || h.count != shape.cells)
      return fmt::format("snapshots {}×{}×{} where the pipeline takes {}×{}×{} (channels×snapshots×cells)", h.rows, h.cols,
                         h.count, shape.channels, shape.snapshots, shape.cells);
  } else {
    return fmt::format("payload kind {} not handled", int(h.kind));
  }
  if (payload_bytes != h.payload_bytes())
    return fmt::format("payload of {} bytes where the header says {}", payload_bytes, h.payload_bytes());
  return {};
}

Runner::Runner(const FrameShape& shape, std::vector<std::unique_ptr<Stage>> stages, linalg::Exec& exec,
               const RunnerOptions& options, Metrics& metrics, Completion on_complete)
    : Runner(shape, std::move(stages), std::vector<linalg::Exec*>{&exec}, options, metrics, std::move(on_complete)) {}

Runner::Runner(const FrameShape& shape, std::vector<std::unique_ptr<Stage>> stages, std::vector<linalg::Exec*> execs,
               const RunnerOptions& options, Metrics& metrics, Completion on_complete)
    : shape_(shape),
      stages_(std::move(stages)),
      execs_(std::move(execs)),
      options_(options),
      metrics_(metrics),
      on_complete_(std::move(on_complete)),
      queue_(std::max<std::size_t>(options.queue_depth, 1), options.overflow),
      log_(logger("pipeline")) {
  if (execs_.empty()) throw std::invalid_argument("Runner: no lane (no Exec) given");
  for (const auto* e : execs_) {
    if (e == nullptr) throw std::invalid_argument("Runner: a lane's Exec is null");
    if (e->is_cuda() != execs_.front()->is_cuda())
      throw std::invalid_argument("Runner: the lanes mix CPU and CUDA Execs; give all of one kind");
  }
  std::vector<std::string> names;
  std::string keeping;  // the first stage that keeps state across frames
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    if (!stages_[i]) throw std::invalid_argument(fmt::format("Runner: stage {} is null", i));
    names.emplace_back(stages_[i]->name());
    if (stages_[i]->keeps_state() && keeping.empty()) keeping = stages_[i]->name();
  }
  if (execs_.size() > 1 && !keeping.empty()) {
    if (options_.stateful_lanes == RunnerOptions::StatefulLanes::one_lane) {
      single_lane_reason_ = fmt::format("stage {} keeps state across frames, which one lane must see in full", keeping);
      log_->warn("pipeline: one lane of the {} given: {} (docs/scale.md)", execs_.size(), single_lane_reason_);
      execs_.resize(1);
    } else {
      if (shape_.cells < execs_.size()) {
        log_->warn("pipeline: {} lane(s) of the {} given: cells are split over the lanes and a frame has {}",
                   std::max<std::uint32_t>(shape_.cells, 1), execs_.size(), shape_.cells);
        execs_.resize(std::max<std::uint32_t>(shape_.cells, 1));
        if (execs_.size() == 1)
          single_lane_reason_ = fmt::format("stage {} keeps state across frames and a frame has one cell to split", keeping);
      }
      if (execs_.size() > 1)
        split_reason_ = fmt::format("stage {} keeps state across frames: each lane runs its share of every frame's cells", keeping);
    }
  }
  const bool split = !split_reason_.empty();
  lane_shape_ = shape_;
  if (split) lane_shape_.cells = static_cast<std::uint32_t>((shape_.cells + execs_.size() - 1) / execs_.size());
  const bool several = execs_.size() > 1;
  tail_begin_ = stages_.size();
  if (several)
    for (std::size_t i = 0; i < stages_.size(); ++i)
      if (stages_[i]->in_sequence()) {
        tail_begin_ = i;
        break;
      }

  std::vector<SlotNeeds> needs, lane_needs;
  for (const auto& stage : stages_) {
    needs.push_back(stage->slot_needs(shape_));
    lane_needs.push_back(stage->slot_needs(lane_shape_));
  }
  const bool cuda = execs_.front()->is_cuda();
  const bool can_route = several && !split && (options_.lane_choice == RunnerOptions::LaneChoice::when_claimed ||
                                     (options_.lane_choice == RunnerOptions::LaneChoice::automatic && cuda));
  const std::size_t lane_queue = (std::max<std::size_t>(options_.queue_depth, 1) + execs_.size() - 1) / execs_.size();
  std::vector<std::string> lane_names;
  for (std::size_t l = 0; l < execs_.size(); ++l) {
    auto lane = std::make_unique<Lane>();
    lane->index = l;
    lane->exec = execs_[l];
    lane->device = detail::DeviceLane::make(*lane->exec, stages_.size());  // makes the lane's device current
    // Stages prepare once per lane, on the lane's device; the in-sequence ones only on the first.
    for (std::size_t i = 0; i < stages_.size(); ++i)
      if (i < tail_begin_ || l == 0) stages_[i]->prepare(i < tail_begin_ ? lane_shape_ : shape_, *lane->exec);
    if (several) {
      // Split cells: every frame waits in every lane's queue.
      lane->inbox = std::make_unique<BoundedQueue<FrameSlot*>>(split ? std::max<std::size_t>(options_.queue_depth, 1) : lane_queue,
                                                               options_.overflow);
      // Sets 0 and 1 the lane binds to the frames it uploads itself; the others are reserved for
      // frames routed here as they are claimed: those in the lane's queue, the one it computes,
      // the one it took ahead, one more, and its share of those being placed (a frame routed
      // when none is free is uploaded by the lane into one of its two).
      const std::size_t placing = options_.placers > 0 ? options_.placers : automatic_placers(execs_.size(), cuda);
      const std::size_t reserved = can_route && cuda ? lane_queue + 3 + (placing + execs_.size() - 1) / execs_.size() : 0;
      if (cuda) {
        // Split cells: the two sets are the lane's part slots, with pinned host scratch of their own
        // for what the stages copy back (their payload is a view of the whole frame's).
        lane->device_sets = std::make_unique<FramePool>(
            lane_shape_, lane_needs,
            PoolOptions{.slots = 2 + reserved, .memory = split ? SlotMemory::cuda : SlotMemory::device, .stage_count = stages_.size()});
        for (std::size_t k = 0; k < 2 + reserved; ++k) lane->device_sets->slot(k).lane = static_cast<std::uint32_t>(l);
        for (std::size_t k = reserved; k > 0; --k) lane->free_sets.push_back(static_cast<std::int32_t>(1 + k));
        if (reserved > 0) lane->uploader = detail::IngestUploader::make(*lane->exec);
      } else if (split) {
        lane->parts = std::make_unique<FramePool>(
            lane_shape_, lane_needs, PoolOptions{.slots = 2, .memory = SlotMemory::host, .stage_count = stages_.size()});
      }
    }
    lane->predicted_ms.assign(stages_.size(), -1.0);
    lane->skipped_in_a_row.assign(stages_.size(), 0);
    lane->issued.reserve(stages_.size());
    lane->issued_from.reserve(stages_.size());
    lane_names.push_back(lane->device ? fmt::format("cuda:{}", lane->device->device()) : fmt::format("cpu:{}", l));
    lanes_.push_back(std::move(lane));
  }
  if (several) {
    tail_ = std::make_unique<Lane>();
    tail_->exec = execs_.front();
    tail_->predicted_ms.assign(stages_.size(), -1.0);
    tail_->skipped_in_a_row.assign(stages_.size(), 0);
    if (lanes_.front()->device) lanes_.front()->device->make_current();
  } else {
    uploader_ = detail::IngestUploader::make(*execs_.front());  // one lane: ingest may upload as frames land
  }
  options_.slots = std::max(options_.slots, minimum_slots(options_, lanes_.size()));
  const SlotMemory memory = !cuda ? SlotMemory::host : several ? SlotMemory::pinned : SlotMemory::cuda;
  pool_ = std::make_unique<FramePool>(shape_, needs,
                                      PoolOptions{.slots = options_.slots, .memory = memory, .stage_count = stages_.size()});
  metrics_.set_stages(names);
  metrics_.set_lanes(lane_names);
  metrics_.queue_depth(0, queue_.capacity());
}

Runner::~Runner() {
  if (started_) stop_now();
}

double Runner::predicted_ms(std::size_t i) const {
  return (tail_ && i >= tail_begin_ ? tail_ : lanes_.front())->predicted_ms.at(i);
}

void Runner::start(FrameInput& input) {
  if (started_) throw std::logic_error("Runner::start: already started");
  started_ = true;
  std::size_t device_bytes = pool_->device_bytes();
  for (const auto& lane : lanes_)
    if (lane->device_sets) device_bytes += lane->device_sets->device_bytes();
  log_->info("pipeline: {} stages, budget {} ms, queue {} ({}), {} slots ({} MiB host, {} MiB device), input {}",
             stages_.size(), options_.budget_ms, queue_.capacity(), config::name(options_.overflow), pool_->capacity(),
             pool_->host_bytes() >> 20, device_bytes >> 20, input.describe());
  {
    std::lock_guard lock(done_mutex_);
    threads_running_ = 1 + lanes_.size() + (tail_ ? 1 : 0);
  }
  if (lanes_.size() > 1)
    log_->info("pipeline: {} lanes; stages {} on the lanes, then in sequence order: {}", lanes_.size(), tail_begin_,
               stages_.size() - tail_begin_);
  if (!split_reason_.empty())
    log_->info("pipeline: every lane takes every frame, {} of its {} cells each ({}; docs/scale.md)", lane_shape_.cells,
               shape_.cells, split_reason_);
  {
    std::lock_guard lock(reorder_mutex_);
    lanes_running_ = lanes_.size();
  }
  const std::size_t placers = std::min(input.concurrent_places(), options_.placers > 0 ? options_.placers
                                                                                     : automatic_placers(lanes_.size(), lanes_.front()->device != nullptr));
  const auto choice = options_.lane_choice;
  routed_ = lanes_.size() > 1 && placers > 1 && split_reason_.empty() &&
            (choice == RunnerOptions::LaneChoice::when_claimed ||
             (choice == RunnerOptions::LaneChoice::automatic && lanes_.front()->device != nullptr));
  if (routed_) {
    log_->info("pipeline: each frame's lane chosen as it is claimed (a queue of {} per lane{})",
               lanes_.front()->inbox->capacity(), lanes_.front()->uploader ? ", uploaded as placed" : "");
    note_queue_depth();
  }
  for (auto& lane : lanes_) lane->thread = std::thread([this, l = lane.get()] { lane_loop(*l); });
  if (tail_) sequencer_ = std::thread([this] { sequencer_loop(); });
  ingest_ = std::thread([this, &input] { ingest_loop(input); });
}

void Runner::warm_up(const replay::Frame& frame) {
  if (started_) throw std::logic_error("Runner::warm_up: the runner has started");
  if (const std::string problem = frame_shape_problem(shape_, frame.header, frame.payload.size()); !problem.empty())
    throw std::invalid_argument("warm-up: the synthetic frame does not fit the pipeline: " + problem);
  int rounds = 1;
  for (const auto& stage : stages_) rounds = std::max(rounds, stage->warm_up_frames(shape_));
  FrameSlot* slot = pool_->acquire(milliseconds(0));  // before start() every slot is free
  if (slot == nullptr) throw std::logic_error("Runner::warm_up: no free frame slot");
  struct Release {
    FramePool& pool;
    FrameSlot* slot;
    ~Release() { pool.release(slot); }
  } release{*pool_, slot};

  const auto started = Clock::now();
  for (auto& lane : lanes_) {
    detail::DeviceLane* gpu = lane->device.get();
    if (gpu) gpu->make_current();
    const std::size_t stage_end = lane->index == 0 ? stages_.size() : tail_begin_;
    for (int round = 0; round < rounds; ++round) {
      slot->header = frame.header;
      slot->header.sequence = std::uint64_t(round);
      slot->sequence = slot->header.sequence;
      slot->times = {.capture_ns = frame.header.capture_time_ns, .arrival_ns = now_ns(), .deadline_ns = 0, .done_ns = 0};
      slot->times.deadline_ns = slot->times.arrival_ns + std::int64_t(options_.budget_ms * 1e6);
      slot->results.clear();
      std::fill(slot->stages.begin(), slot->stages.end(), StageRecord{});
      slot->problem.clear();
      slot->payload_on_device = false;
      if (!frame.payload.empty()) std::memcpy(slot->host.payload.data(), frame.payload.data(), frame.payload.size());
      // Cells split over the lanes: each lane warms up on its own share of the frame's cells.
      FrameSlot& work = split_reason_.empty() ? *slot : fill_part(*lane, *slot, 0);
      if (gpu) {
        bind(*lane, work, 0);
        gpu->upload(work, work.header.payload_bytes(), 0);
        gpu->begin(0);
      }
      // As process() runs a frame, without its budget checks, timing or metrics.
      std::vector<std::size_t> uncollected;
      auto collect_issued = [&] {
        if (gpu) gpu->synchronize();
        for (const std::size_t j : uncollected) stages_[j]->collect(work, *lane->exec);
        uncollected.clear();
      };
      for (std::size_t i = 0; i < stage_end; ++i) {
        Stage& stage = *stages_[i];
        // The in-sequence stages (lane 0, several lanes) take the whole frame, as they will, with
        // this lane's cells' results placed in it when cells are split.
        FrameSlot& on = i < tail_begin_ ? work : *slot;
        try {
          if (i == tail_begin_ && &work != slot) {
            collect_issued();
            slot->results.place_cells(work.results, work.first_cell, work.header.count);
          }
          if (gpu && stage.needs_host_results() && !uncollected.empty()) collect_issued();
          stage.warm_up(on, *lane->exec);
          if (gpu == nullptr || stage.needs_host_results()) stage.collect(on, *lane->exec);
          else uncollected.push_back(i);
        } catch (const std::exception& e) {
          throw std::runtime_error(fmt::format("warm-up: stage {}: {}", stage.name(), e.what()));
        }
      }
      collect_issued();
    }
    for (std::size_t i = 0; i < stage_end; ++i) stages_[i]->reset(*lane->exec);
  }
  log_->info("pipeline warmed up: {} synthetic frame(s) through {} stages in {:.0f} ms", rounds, stages_.size(),
             std::chrono::duration<double, std::milli>(Clock::now() - started).count());
}

// ---- ingest ---------------------------------------------------------------------------------

std::optional<replay::FrameHeader> FrameInput::next_into(std::chrono::milliseconds, std::span<std::byte>) {
  throw std::logic_error("input " + describe() + " says it fills frames in place but does not implement next_into");
}
std::optional<Claim> FrameInput::claim(std::chrono::milliseconds) {
  throw std::logic_error("input " + describe() + " says it places frames at once but does not implement claim");
}
std::string FrameInput::place(const Claim&, std::span<std::byte>, PlacementObserver*) {
  throw std::logic_error("input " + describe() + " says it places frames at once but does not implement place");
}

// The ingest thread's observer of an in-place input: each stretch the input reports placed in the
// held slot goes to the GPU at once, on the uploader's stream, while the input places the next.
class Runner::Placement final : public PlacementObserver {
 public:
  explicit Placement(detail::IngestUploader& uploader) : uploader_(uploader) {}
  // The slot next_into() is writing (the same one until a frame is taken from it).
  void hold(FrameSlot* slot) {
    if (slot == slot_) return;
    slot_ = slot;
    uploaded_ = 0;
    failed_.clear();
  }
  // Called from inside the input's placing: a copy that fails is remembered (finish() throws it)
  // and nothing more is copied for this payload.
  void placed(std::size_t begin, std::size_t end) override {
    if (slot_ == nullptr || end <= begin) return;
    if (begin == 0) {  // a new payload in the same slot
      uploaded_ = 0;
      failed_.clear();
    }
    if (!failed_.empty()) return;
    try {
      uploader_.copy(*slot_, begin, end);
    } catch (const std::exception& e) {
      failed_ = e.what();
      return;
    }
    if (begin <= uploaded_) uploaded_ = std::max(uploaded_, end);
  }
  // The input returned a payload of `bytes` in the held slot: the rest of it (if the input did
  // not report it all) is uploaded, the slot's event recorded and the slot marked. False when the
  // input reported nothing and not `whole`: the lane uploads the payload as for any other input.
  // Throws when a copy failed (the lane then uploads the payload).
  bool finish(std::size_t bytes, bool whole = false) {
    if (!failed_.empty()) throw std::runtime_error(failed_);
    if (slot_ == nullptr || (uploaded_ == 0 && !whole)) return false;
    if (uploaded_ < bytes) uploader_.copy(*slot_, uploaded_, bytes);
    uploader_.finish(*slot_);
    slot_->payload_on_device = true;
    slot_ = nullptr;
    uploaded_ = 0;
    return true;
  }

 private:
  detail::IngestUploader& uploader_;
  FrameSlot* slot_ = nullptr;
  std::size_t uploaded_ = 0;  // bytes from 0 already on their way
  std::string failed_;        // why a copy failed ("" while none did)
};

// The input threw: no more frames are taken from it.
void Runner::input_failed(FrameInput& input, const std::exception& e) {
  log_->error("input {} failed: {}; no more frames will be taken from it", input.describe(), e.what());
  input_ended_ = true;
}

// Whether the input said it ended (then no more frames are taken from it).
bool Runner::input_over(FrameInput& input) {
  if (!input.ended()) return false;
  input_ended_ = true;
  log_->info("input {} ended", input.describe());
  return true;
}

// Records the input refused as damaged are frames in and dropped, never silent.
void Runner::note_rejected(FrameInput& input, std::uint64_t& seen) {
  if (const std::uint64_t rejected = input.rejected(); rejected > seen) {
    metrics_.frames_rejected(drop_reason::rejected_input, rejected - seen);
    log_->warn("input refused {} damaged record(s): {}", rejected - seen, input.last_problem());
    seen = rejected;
  }
}

void Runner::ingest_loop(FrameInput& input) {
  const std::size_t placers = std::min(input.concurrent_places(), options_.placers > 0 ? options_.placers
                                                                                     : automatic_placers(lanes_.size(), lanes_.front()->device != nullptr));
  if (placers > 1) {
    placers_ = placers;
    ingest_claims(input, placers);
    return;
  }
  std::uint64_t rejected_seen = 0;
  const bool in_place = input.fills_in_place();
  FrameSlot* held = nullptr;  // in place: the slot the next frame is written into
  std::optional<Placement> placement;
  if (in_place && uploader_) {
    try {
      uploader_->make_current();
      placement.emplace(*uploader_);
      input.observe_placement(&*placement);
    } catch (const std::exception& e) {
      log_->error("ingest: cannot upload as payloads are placed ({}); the lane uploads them", e.what());
      placement.reset();
    }
  }
  while (!stop_ingest_.load()) {
    std::optional<replay::Frame> frame;
    std::optional<replay::FrameHeader> placed;
    try {
      if (in_place) {
        if (held == nullptr && (held = acquire_slot()) == nullptr) break;  // stopping now
        if (placement) placement->hold(held);
        placed = input.next_into(options_.input_wait, held->host.payload);
      } else {
        frame = input.next(options_.input_wait);
      }
    } catch (const std::exception& e) {
      input_failed(input, e);
      break;
    }
    note_rejected(input, rejected_seen);
    if (placed) {
      const std::int64_t arrival = take(input.last_timing(), *placed);
      if (placement && placed->payload_bytes() <= held->host.payload.size()) {
        try {
          placement->finish(static_cast<std::size_t>(placed->payload_bytes()));
        } catch (const std::exception& e) {  // the lane uploads it instead
          log_->error("frame {}: ingest upload failed: {}", placed->sequence, e.what());
          held->payload_on_device = false;
        }
      }
      admit_in_place(held, *placed, arrival);
      held = nullptr;
      continue;
    }
    if (!frame) {
      if (input_over(input)) break;
      continue;
    }
    admit(*frame, take(input.last_timing(), frame->header));
    input.recycle(std::move(*frame));
  }
  if (placement) {
    input.observe_placement(nullptr);
    try {
      uploader_->wait();  // no copy may still read a slot the pool hands out again
    } catch (const std::exception& e) {
      log_->error("ingest: waiting for uploads: {}", e.what());
    }
  }
  if (held != nullptr) pool_->release(held);
  close_queues();
  thread_exited();
}

// The ingest thread claims frames in order (FrameInput::claim), each into a slot of its own, and
// `placers` threads place the claimed payloads at once (FrameInput::place); a placed frame waits
// for its turn — the frames claimed before it admitted — so that frames enter the queue, and take
// their order and input metrics, in the order they were claimed. Placing and the turns are bounded:
// at most `placers` frames are claimed and not yet admitted.
void Runner::ingest_claims(FrameInput& input, std::size_t placers) {
  struct Job {
    FrameSlot* slot = nullptr;
    Claim claim;
    std::uint64_t turn = 0;
  };
  std::mutex mutex;
  std::condition_variable changed;
  // Claimed frames waiting for a placer: a ring of `placers` (no more are ever open), made once.
  std::vector<Job> jobs(placers);
  std::size_t first_job = 0, waiting = 0;
  std::size_t open = 0;  // claimed and not yet admitted
  std::uint64_t claimed = 0, next_turn = 1;
  bool closing = false;
  std::uint64_t refused = 0;  // placing threads, in turn

  auto placer = [&] {
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return closing || waiting > 0; });
        if (waiting == 0) return;
        job = jobs[first_job];
        first_job = (first_job + 1) % placers;
        --waiting;
      }
      const auto& h = job.claim.header;
      std::string problem;
      const std::int64_t start = now_ns();
      // A frame routed to a CUDA lane with a device set of its own goes to that GPU as it is placed.
      std::optional<Placement> upload;
      detail::IngestUploader* uploader = job.slot->device_set >= 0 ? lanes_[std::size_t(job.slot->routed_lane)]->uploader.get() : nullptr;
      if (uploader != nullptr) {
        try {
          uploader->make_current();
          upload.emplace(*uploader);
          upload->hold(job.slot);
        } catch (const std::exception& e) {
          log_->error("frame {}: cannot upload it as it is placed ({}); its lane uploads it", h.sequence, e.what());
          upload.reset();
        }
      }
      // A payload the slot cannot hold is not placed: admit_in_place refuses it by its shape.
      const bool fits = h.payload_bytes() <= job.slot->host.payload.size();
      if (fits && !stop_now_.load()) {
        try {
          problem = input.place(job.claim, job.slot->host.payload, upload ? &*upload : nullptr);
        } catch (const std::exception& e) {
          problem = fmt::format("placing it failed: {}", e.what());
        }
      }
      if (upload && fits && problem.empty()) {
        try {
          upload->finish(static_cast<std::size_t>(h.payload_bytes()), true);
        } catch (const std::exception& e) {
          log_->error("frame {}: upload as placed failed: {}; its lane uploads it", h.sequence, e.what());
          job.slot->payload_on_device = false;
        }
      }
      if (upload && !problem.empty()) {  // no copy may still read the slot or write the set handed back
        try {
          uploader->wait();
        } catch (const std::exception& e) {
          log_->error("frame {}: waiting for its upload: {}", h.sequence, e.what());
        }
      }
      if (job.claim.timing.place_ns == 0) job.claim.timing.place_ns = now_ns() - start;
      // A frame claimed ahead of its due time (a replay reads ahead) is admitted when due; a stop
      // meanwhile gives its slot back uncounted, as a record read ahead and never delivered.
      bool given_up = false;
      while (problem.empty() && job.claim.timing.due_ns > now_ns()) {
        if (stop_ingest_.load()) {
          given_up = true;
          break;
        }
        std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(
            std::chrono::nanoseconds(job.claim.timing.due_ns - now_ns()), kPoll));
      }
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return next_turn == job.turn; });
      }
      if (given_up) {
        if (upload) {
          try {
            uploader->wait();
          } catch (const std::exception& e) {
            log_->error("frame {}: waiting for its upload: {}", h.sequence, e.what());
          }
        }
        unroute(job.slot->routed_lane, job.slot->device_set);
        pool_->release(job.slot);
      } else if (problem.empty()) {
        admit_in_place(job.slot, h, take(job.claim.timing, h));
      } else {
        metrics_.frames_rejected(drop_reason::rejected_input, 1);
        if (++refused <= 20 || refused % 1000 == 0)
          log_->warn("frame {} refused by input {}: {} [{} so far]", h.sequence, input.describe(), problem, refused);
        unroute(job.slot->routed_lane, job.slot->device_set);
        pool_->release(job.slot);
      }
      {
        std::lock_guard lock(mutex);
        ++next_turn;
        --open;
      }
      changed.notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < placers; ++i) threads.emplace_back(placer);
  log_->info("ingest: {} frames placed at once from input {}", placers, input.describe());

  std::uint64_t rejected_seen = 0;
  FrameSlot* held = nullptr;
  while (!stop_ingest_.load()) {
    if (held == nullptr && (held = acquire_slot()) == nullptr) break;  // stopping now
    std::optional<Claim> claim;
    try {
      claim = input.claim(options_.input_wait);
    } catch (const std::exception& e) {
      input_failed(input, e);
      break;
    }
    note_rejected(input, rejected_seen);
    if (!claim) {
      if (input_over(input)) break;
      continue;
    }
    if (routed_) route(*held);
    {
      std::unique_lock lock(mutex);
      changed.wait(lock, [&] { return open < placers; });
      ++open;
      jobs[(first_job + waiting++) % placers] = Job{.slot = held, .claim = *claim, .turn = ++claimed};
    }
    changed.notify_all();
    held = nullptr;
  }
  {
    std::lock_guard lock(mutex);
    closing = true;
  }
  changed.notify_all();
  for (auto& t : threads) t.join();
  for (auto& lane : lanes_) {
    if (!lane->uploader) continue;
    try {
      lane->uploader->wait();  // no copy may still read a slot the pool hands out again
    } catch (const std::exception& e) {
      log_->error("ingest: waiting for lane {}'s uploads: {}", lane->index, e.what());
    }
  }
  if (held != nullptr) pool_->release(held);
  close_queues();
  thread_exited();
}

// A slot for ingest, waiting while the pool is empty (counted as ingest blocked past 1 ms);
// nullptr when the runner is stopping now.
FrameSlot* Runner::acquire_slot() {
  FrameSlot* slot = nullptr;
  const auto wait_start = Clock::now();
  while ((slot = pool_->acquire(kPoll)) == nullptr)
    if (stop_now_.load()) return nullptr;
  slot->payload_on_device = false;
  slot->order = 0;
  slot->routed_lane = slot->device_set = -1;
  if (const double waited = std::chrono::duration<double, std::milli>(Clock::now() - wait_start).count(); waited > 1.0)
    metrics_.ingest_blocked(waited);
  return slot;
}

// Whether a frame of header h with `bytes` of payload is refused (reason shape, logged; the caller
// has counted it in and drops it): a shape other than the configured one, or more payload than a
// frame slot holds (`capacity`; an in-place input then wrote nothing).
bool Runner::refuse_shape(const replay::FrameHeader& h, std::size_t bytes, std::size_t capacity) {
  const std::string problem =
      bytes > capacity ? fmt::format("its payload of {} bytes exceeds the frame slots' {}", bytes, capacity)
                       : frame_shape_problem(shape_, h, bytes);
  if (problem.empty()) return false;
  // A misconfigured feed sends nothing but such frames: the first ones are logged, then one in a
  // thousand (every one is counted).
  if (++shape_drops_ <= 20 || shape_drops_ % 1000 == 0)
    log_->warn("frame {} dropped (shape): {} [{} such frames so far]", h.sequence, problem, shape_drops_);
  return true;
}

// A frame just returned by the input: its input metrics (lag behind its due time, a backlog,
// sequence numbers skipped) are recorded, and its arrival time comes back — the input's own
// (message received, record due) when it gives one, else now.
std::int64_t Runner::take(const InputTiming& timing, const replay::FrameHeader& h) {
  const std::int64_t taken = now_ns();
  std::uint64_t missing = 0;
  if (last_sequence_ && h.sequence > *last_sequence_ + 1) missing = h.sequence - *last_sequence_ - 1;
  last_sequence_ = h.sequence;  // a step back (a replay's loop, a restarted sender) skips nothing
  metrics_.frame_taken(timing.due_ns > 0 ? std::max<std::int64_t>(0, taken - timing.due_ns) : -1, timing.more_waiting,
                       timing.place_ns, missing);
  return timing.arrival_ns > 0 ? std::min(timing.arrival_ns, taken) : taken;
}

// A frame an in-place input wrote into `slot`.
void Runner::admit_in_place(FrameSlot* slot, const replay::FrameHeader& h, std::int64_t arrival) {
  metrics_.frame_in();
  ++in_flight_;
  if (refuse_shape(h, static_cast<std::size_t>(h.payload_bytes()), slot->host.payload.size())) {
    drop(slot, drop_reason::shape);
    return;
  }
  enqueue(slot, h, arrival);
}

// A frame handed over by the input: its payload is copied into a slot here, after its arrival, so
// the copy is part of the frame's latency.
void Runner::admit(replay::Frame& frame, std::int64_t arrival) {
  metrics_.frame_in();
  ++in_flight_;
  const auto& h = frame.header;
  if (refuse_shape(h, frame.payload.size())) {
    metrics_.frame_dropped(drop_reason::shape);
    --in_flight_;
    return;
  }
  FrameSlot* slot = acquire_slot();
  if (slot == nullptr) {
    metrics_.frame_dropped(drop_reason::shutdown);
    --in_flight_;
    return;
  }
  if (!frame.payload.empty()) std::memcpy(slot->host.payload.data(), frame.payload.data(), frame.payload.size());
  enqueue(slot, h, arrival);
}

// The slot, its payload in place, goes to the queue under the overflow policy.
void Runner::enqueue(FrameSlot* slot, const replay::FrameHeader& h, std::int64_t arrival_ns) {
  slot->sequence = h.sequence;
  slot->header = h;
  slot->order = ++last_order_;  // from here on the frame leaves through the lanes or drop()
  slot->times = {.capture_ns = h.capture_time_ns, .arrival_ns = arrival_ns, .deadline_ns = 0, .done_ns = 0};
  slot->times.deadline_ns = slot->times.arrival_ns + std::int64_t(options_.budget_ms * 1e6);
  slot->results.clear();
  std::fill(slot->stages.begin(), slot->stages.end(), StageRecord{});
  slot->problem.clear();
  if (!split_reason_.empty()) {
    enqueue_split(slot);
    return;
  }

  BoundedQueue<FrameSlot*>& queue = slot->routed_lane >= 0 ? *lanes_[std::size_t(slot->routed_lane)]->inbox : queue_;
  const bool was_full = queue.size() == queue.capacity();
  const auto push_start = Clock::now();
  for (;;) {
    auto pushed = queue.push(slot, options_.overflow == Overflow::block ? kPoll : milliseconds(0));
    if (pushed.status == PushStatus::accepted) break;
    if (pushed.status == PushStatus::evicted_oldest) {
      log_->debug("frame {} dropped: queue full (drop_oldest)", (*pushed.dropped)->sequence);
      drop(*pushed.dropped, drop_reason::overflow_drop_oldest);
      break;
    }
    if (pushed.status == PushStatus::rejected) {
      log_->debug("frame {} dropped: queue full (reject_newest)", h.sequence);
      drop(slot, drop_reason::overflow_reject_newest);
      break;
    }
    if (pushed.status == PushStatus::closed || stop_now_.load()) {
      drop(slot, drop_reason::shutdown);
      break;
    }
    // timed_out under `block`: the worker is still busy; drain() keeps waiting, stop_now() does not.
  }
  if (options_.overflow == Overflow::block && was_full)
    metrics_.ingest_blocked(std::chrono::duration<double, std::milli>(Clock::now() - push_start).count());
  note_queue_depth();
}

// Cells split over the lanes: the frame goes to every lane's queue, each under the overflow policy.
// A queue that evicts a frame, or refuses this one, fails that frame for every lane (the lanes that
// have it queued skip it); it leaves, dropped once, when the last lane has let it go.
void Runner::enqueue_split(FrameSlot* slot) {
  {
    std::lock_guard lock(split_mutex_);
    slot->whole = nullptr;
    slot->parts_left = static_cast<std::uint32_t>(lanes_.size());
    slot->part_failure.clear();
  }
  const auto push_start = Clock::now();
  bool was_full = false;
  for (auto& lane : lanes_) {
    bool failed = false;
    {
      std::lock_guard lock(split_mutex_);
      failed = !slot->part_failure.empty();
    }
    if (failed) {  // refused by an earlier lane's queue: this lane never sees it
      end_part(*slot, lane->index, {});
      continue;
    }
    BoundedQueue<FrameSlot*>& queue = *lane->inbox;
    was_full = was_full || queue.size() == queue.capacity();
    for (;;) {
      auto pushed = queue.push(slot, options_.overflow == Overflow::block ? kPoll : milliseconds(0));
      if (pushed.status == PushStatus::accepted) break;
      if (pushed.status == PushStatus::evicted_oldest) {
        log_->debug("frame {} dropped: lane {}'s queue full (drop_oldest)", (*pushed.dropped)->sequence, lane->index);
        end_part(**pushed.dropped, lane->index, drop_reason::overflow_drop_oldest);
        break;
      }
      if (pushed.status == PushStatus::rejected) {
        log_->debug("frame {} dropped: lane {}'s queue full (reject_newest)", slot->sequence, lane->index);
        end_part(*slot, lane->index, drop_reason::overflow_reject_newest);
        break;
      }
      if (pushed.status == PushStatus::closed || stop_now_.load()) {
        end_part(*slot, lane->index, drop_reason::shutdown);
        break;
      }
    }
  }
  if (options_.overflow == Overflow::block && was_full)
    metrics_.ingest_blocked(std::chrono::duration<double, std::milli>(Clock::now() - push_start).count());
  note_queue_depth();
}

// The cells lane `lane` runs of a frame of `cells` (all of them unless cells are split).
Runner::CellRange Runner::lane_cells(std::size_t lane, std::uint32_t cells) const {
  if (split_reason_.empty()) return {0, cells};
  const std::uint64_t lanes = lanes_.size();
  const auto first = static_cast<std::uint32_t>(std::uint64_t(cells) * lane / lanes);
  const auto end = static_cast<std::uint32_t>(std::uint64_t(cells) * (lane + 1) / lanes);
  return {first, end - first};
}

// The lane's part of `whole` in its part slot `parity`: the header, times and order of the whole,
// its share of the cells, the payload a view of those cells in the whole's, results cleared.
FrameSlot& Runner::fill_part(Lane& lane, FrameSlot& whole, int parity) {
  FrameSlot& part = lane.device_sets ? lane.device_sets->slot(std::size_t(parity & 1)) : lane.parts->slot(std::size_t(parity & 1));
  const CellRange cells = lane_cells(lane.index, whole.header.count);
  const std::size_t per_cell = whole.header.count > 0 ? static_cast<std::size_t>(whole.header.payload_bytes()) / whole.header.count : 0;
  part.whole = &whole;
  part.first_cell = cells.first;
  part.sequence = whole.sequence;
  part.order = whole.order;
  part.lane = static_cast<std::uint32_t>(lane.index);
  part.routed_lane = part.device_set = -1;
  part.header = whole.header;
  part.header.count = cells.count;
  part.times = whole.times;
  part.host.payload = whole.host.payload.subspan(per_cell * cells.first, per_cell * cells.count);
  part.results.clear();
  std::fill(part.stages.begin(), part.stages.end(), StageRecord{});
  part.problem.clear();
  part.payload_on_device = false;
  return part;
}

// A frame a lane took from its queue, with cells split: the lane's part of it, or nullptr when the
// frame already failed on another lane (this lane's part of it is then over).
FrameSlot* Runner::part_of(Lane& lane, FrameSlot* whole, int parity) {
  bool failed = false;
  {
    std::lock_guard lock(split_mutex_);
    failed = !whole->part_failure.empty();
  }
  if (failed) {
    end_part(*whole, lane.index, {});
    return nullptr;
  }
  return &fill_part(lane, *whole, parity);
}

// One lane is through with its part of `whole` (`failure` "": finished, its results placed in the
// whole already; otherwise why it failed, `problem` what happened). The last lane to let go passes
// the frame on: to the reorder buffer when every part finished, otherwise dropped, once, for the
// first failure's reason.
void Runner::end_part(FrameSlot& whole, std::size_t lane, std::string_view failure, const std::string& problem) {
  std::string reason;
  {
    std::lock_guard lock(split_mutex_);
    if (!failure.empty() && whole.part_failure.empty()) {
      whole.part_failure = failure;
      whole.problem = problem;
    }
    if (--whole.parts_left > 0) return;
    reason = whole.part_failure;
  }
  whole.lane = static_cast<std::uint32_t>(lane);
  if (reason.empty()) {
    hold_for_order(whole, now_ns());
  } else if (whole.problem.empty()) {  // never ran to a failure: queues full, or stopping
    drop(&whole, reason);
  } else {
    whole.times.done_ns = now_ns();
    metrics_.frame_dropped(reason);
    forget_order(whole);
    complete(whole);
  }
}

// A frame that failed on `lane`: dropped for `reason` (its whole frame, when it was a part).
void Runner::leave_failed(Lane& lane, FrameSlot& slot, std::string_view reason) {
  metrics_.lane_dropped(lane.index);
  if (slot.whole != nullptr) {
    FrameSlot& whole = *slot.whole;
    slot.whole = nullptr;
    end_part(whole, lane.index, reason, slot.problem.empty() ? std::string(reason) : slot.problem);
    return;
  }
  metrics_.frame_dropped(reason);
  forget_order(slot);
  complete(slot);
}

void Runner::drop(FrameSlot* slot, std::string_view reason) {
  metrics_.frame_dropped(reason);
  forget_order(*slot);
  slot->order = 0;
  unroute(slot->routed_lane, slot->device_set);
  slot->routed_lane = slot->device_set = -1;
  --in_flight_;
  pool_->release(slot);
}

// The frames waiting for a lane: in the shared queue, or in the lanes' own when frames are routed.
void Runner::note_queue_depth() {
  if (!split_reason_.empty()) {  // every frame waits in every lane's queue: the longest one counts
    std::size_t size = 0;
    for (const auto& lane : lanes_) size = std::max(size, lane->inbox->size());
    metrics_.queue_depth(size, lanes_.front()->inbox->capacity());
    return;
  }
  if (!routed_) {
    metrics_.queue_depth(queue_.size(), queue_.capacity());
    return;
  }
  std::size_t size = 0, capacity = 0;
  for (const auto& lane : lanes_) {
    size += lane->inbox->size();
    capacity += lane->inbox->capacity();
  }
  metrics_.queue_depth(size, capacity);
}

BoundedQueue<FrameSlot*>& Runner::queue_of(Lane& lane) { return routed_ || !split_reason_.empty() ? *lane.inbox : queue_; }

// The input is over: the lanes end once what is queued has gone through.
void Runner::close_queues() {
  queue_.close();
  for (auto& lane : lanes_)
    if (lane->inbox) lane->inbox->close();
}

// Gives a claimed frame its lane (RunnerOptions::lane_choice): the one with the fewest frames
// routed to it and not yet through (placing, queued, taken), the first from after the last
// choice on a tie, so that idle lanes take turns. On a CUDA lane a device set of the lane's is
// reserved for the frame when one is free, and the frame's payload goes to it as it is placed;
// otherwise the lane binds one of its own two when it takes the frame, and uploads it then.
// The ingest thread's (it claims frames one at a time).
void Runner::route(FrameSlot& slot) {
  std::size_t best = 0, fewest = std::numeric_limits<std::size_t>::max();
  for (std::size_t k = 0; k < lanes_.size(); ++k) {
    const std::size_t l = (next_route_ + k) % lanes_.size();
    if (const std::size_t routed = lanes_[l]->routed.load(); routed < fewest) {
      fewest = routed;
      best = l;
    }
  }
  next_route_ = (best + 1) % lanes_.size();
  Lane& lane = *lanes_[best];
  ++lane.routed;
  slot.routed_lane = static_cast<std::int32_t>(best);
  slot.device_set = -1;
  if (lane.uploader) {
    std::lock_guard lock(lane.sets_mutex);
    if (!lane.free_sets.empty()) {
      slot.device_set = lane.free_sets.back();
      lane.free_sets.pop_back();
    }
  }
  if (slot.device_set >= 0) {
    slot.device = lane.device_sets->slot(std::size_t(slot.device_set)).device;
    slot.payload_on_device = false;
  }
}

// A routed frame has left its lane (done, dropped, or passed to the reorder buffer after its GPU
// work finished): its lane has one frame fewer and its device set, if any, is free again.
void Runner::unroute(std::int32_t lane, std::int32_t device_set) {
  if (lane < 0) return;
  Lane& l = *lanes_[std::size_t(lane)];
  if (device_set >= 0) {
    std::lock_guard lock(l.sets_mutex);
    l.free_sets.push_back(device_set);
  }
  --l.routed;
}

// Several lanes: the frame's order will never reach the reorder buffer (it was dropped), so the
// frames after it need not wait for it.
void Runner::forget_order(const FrameSlot& slot) {
  if (!tail_ || slot.order == 0) return;
  {
    std::lock_guard lock(reorder_mutex_);
    held_[slot.order] = Held{.slot = nullptr, .since_ns = 0};
  }
  reorder_cv_.notify_all();
}

// ---- lanes ----------------------------------------------------------------------------------

// A lane waiting here is free: a busy lane leaves arriving frames in the shared queue to it (see
// process()).
FrameSlot* Runner::pop_next(Lane& lane) {
  BoundedQueue<FrameSlot*>& queue = queue_of(lane);
  if (auto slot = queue.try_pop()) {
    note_queue_depth();
    return *slot;
  }
  ++idle_lanes_;
  struct Busy {
    std::atomic<std::size_t>& idle;
    ~Busy() { --idle; }
  } busy{idle_lanes_};
  for (;;) {
    if (auto slot = queue.pop(kPoll)) {
      note_queue_depth();
      return *slot;
    }
    if (queue.finished()) return nullptr;
  }
}

void Runner::lane_loop(Lane& lane) {
  try {
    if (lane.device) lane.device->make_current();
  } catch (const std::exception& e) {
    log_->error("lane: cannot make the device current: {}", e.what());
  }
  FrameSlot* pending = nullptr;  // popped ahead (and uploaded) while the previous frame computed
  bool pending_uploaded = false;
  int parity = 0;
  for (;;) {
    FrameSlot* slot = pending != nullptr ? pending : pop_next(lane);
    const bool uploaded = pending != nullptr && pending_uploaded;
    pending = nullptr;
    pending_uploaded = false;
    if (slot == nullptr) break;
    // Cells split: the lane runs its part of the frame (a prefetched one is a part already).
    // On a stop it is taken and dropped below, as a whole frame is.
    if (!split_reason_.empty() && !uploaded && slot->whole == nullptr)
      if ((slot = part_of(lane, slot, parity)) == nullptr) continue;  // it failed on another lane
    // The slot may be reused once the frame has left the lane: what to unroute is kept here.
    const std::int32_t routed_lane = slot->routed_lane, device_set = slot->device_set;
    if (!uploaded) {  // a prefetched frame was counted when it was taken
      slot->lane = static_cast<std::uint32_t>(lane.index);
      metrics_.lane_took(lane.index);
    }
    if (stop_now_.load()) {
      if (uploaded) lane.device->wait_uploads();  // its copy may still be reading the pinned payload
      if (slot->whole != nullptr) {
        leave_failed(lane, *slot, drop_reason::shutdown);
      } else {
        metrics_.lane_dropped(lane.index);
        drop(slot, drop_reason::shutdown);
      }
      continue;
    }
    try {
      if (lane.device && !uploaded) {
        bind(lane, *slot, parity);
        lane.device->upload(*slot, slot->header.payload_bytes(), parity);
      }
      process(lane, *slot, parity, pending, pending_uploaded);
    } catch (const std::exception& e) {
      // Only the runner's own CUDA calls get here (stage exceptions are handled in process()).
      log_->error("frame {}: lane error: {}", slot->sequence, e.what());
      slot->problem = e.what();
      leave_failed(lane, *slot, device_lost(lane, e) ? drop_reason::device_error : drop_reason::stage_error);
    }
    unroute(routed_lane, device_set);
    parity ^= 1;
  }
  {
    std::lock_guard lock(reorder_mutex_);
    --lanes_running_;
  }
  reorder_cv_.notify_all();
  thread_exited();
}

// Several CUDA lanes: the shared pinned slot gets this lane's device arrays of set `parity`.
void Runner::bind(Lane& lane, FrameSlot& slot, int parity) {
  if (!lane.device_sets || slot.device_set >= 0) return;  // a routed frame has its set already
  slot.device = lane.device_sets->slot(std::size_t(parity & 1)).device;
  slot.payload_on_device = false;
}

// The prediction a degradable stage is measured against. A stage's cost is an exponential moving
// average of its recent times (GPU event time on a CUDA lane). On a CUDA lane run() only queues
// work, so when stage i is considered the GPU may still be busy with this frame's earlier stages:
// their end events are queried (not waited for), and the predicted cost of each one not yet
// complete is added, in full (conservative: part of it may be done). The stages after i that are
// not degradable will run whatever happens, so their predicted cost is reserved too. The stage is
// skipped when the time left to the deadline is below that sum.
bool Runner::should_skip(Lane& lane, std::size_t i, const FrameSlot& slot, std::size_t issued_pending) {
  const double cost = lane.predicted_ms[i];
  if (cost < 0) return false;  // never ran: running it is the only way to learn its cost
  if (options_.reprobe_after > 0 && lane.skipped_in_a_row[i] >= options_.reprobe_after) return false;
  double backlog = 0;
  for (std::size_t k = 0; k < issued_pending; ++k) {
    const std::size_t j = lane.issued[k];
    if (!lane.device->stage_complete(j)) backlog += std::max(0.0, lane.predicted_ms[j]);
  }
  double reserve = 0;
  for (std::size_t k = i + 1; k < stages_.size(); ++k)
    if (!stages_[k]->degradable()) reserve += std::max(0.0, lane.predicted_ms[k]);
  const double remaining = ms_between(now_ns(), slot.times.deadline_ns);
  return remaining < backlog + cost + reserve;
}

void Runner::record_stage_time(Lane& lane, std::size_t i, double ms) {
  double& p = lane.predicted_ms[i];
  p = p < 0 ? ms : (1.0 - options_.cost_smoothing) * p + options_.cost_smoothing * ms;
  metrics_.stage_predicted(i, p);
  const double budget = stages_[i]->budget_ms();
  metrics_.stage_ran(i, ms, budget > 0 && ms > budget);
}

void Runner::process(Lane& lane, FrameSlot& slot, int parity, FrameSlot*& pending, bool& pending_uploaded) {
  detail::DeviceLane* gpu = lane.device.get();
  lane.issued.clear();
  lane.issued_from.clear();
  std::size_t last_event = detail::DeviceLane::kStart;
  bool prefetched = false;

  // Overlap: take the next frame and start its upload on the copy stream, so that it runs while
  // this frame's GPU work (already queued) executes. Once per frame, while the lane waits for the
  // GPU: a frame already queued is taken at once; with RunnerOptions::take_while_computing, one
  // that arrives while the GPU computes is taken when it arrives, unless another lane is free to
  // start it now (frames go to a free lane first: here it would wait for this frame's compute).
  // The lane then polls the GPU and the queue in turn, yielding its core between looks, as the
  // CUDA runtime's own wait does when it spins.
  BoundedQueue<FrameSlot*>& queue = queue_of(lane);
  // False when the frame had already failed on another lane (cells split): nothing was taken.
  auto take_next = [&](FrameSlot* next) {
    note_queue_depth();
    if (!split_reason_.empty() && (next = part_of(lane, next, parity ^ 1)) == nullptr) return false;
    pending = next;
    pending->lane = static_cast<std::uint32_t>(lane.index);
    metrics_.lane_took(lane.index);
    bind(lane, *pending, parity ^ 1);
    gpu->upload(*pending, pending->header.payload_bytes(), parity ^ 1);
    pending_uploaded = true;
    return true;
  };
  auto await_gpu = [&] {
    if (!prefetched) {
      prefetched = true;
      if (auto next = queue.try_pop()) {
        take_next(*next);
      } else {
        while (options_.take_while_computing && !stop_now_.load() && !queue.finished() && gpu->computing()) {
          // A routed frame (or a split frame's part) is this lane's whichever is free.
          if (routed_ || !split_reason_.empty() || idle_lanes_.load() == 0) {
            if (auto arrived = queue.try_pop()) {
              if (take_next(*arrived)) break;
            }
          }
          std::this_thread::yield();
        }
      }
    }
    gpu->synchronize();
  };
  // Waits for the GPU, turns the queued stages' event pairs into stage times and lets each of
  // those stages collect its results (Stage::collect).
  auto settle = [&] {
    await_gpu();
    for (std::size_t k = 0; k < lane.issued.size(); ++k) {
      const double ms = gpu->elapsed_ms(lane.issued_from[k], lane.issued[k]);
      slot.stages[lane.issued[k]].ms = ms;
      record_stage_time(lane, lane.issued[k], ms);
    }
    for (const std::size_t i : lane.issued) stages_[i]->collect(slot, *lane.exec);
    lane.issued.clear();
    lane.issued_from.clear();
  };

  // Stage i failed (already logged by the caller): the frame leaves as dropped for `reason`, after
  // the GPU work it queued has finished.
  const auto drop_failed_at = [&](std::size_t i, const char* problem, std::string_view reason) {
    slot.stages[i].outcome = StageRecord::Outcome::failed;
    slot.problem = problem;
    metrics_.stage_failed(i);
    if (gpu) {
      try { settle(); } catch (const std::exception& sync) { log_->error("frame {}: {}", slot.sequence, sync.what()); }
    }
    slot.times.done_ns = now_ns();
    leave_failed(lane, slot, reason);
  };

  if (gpu) gpu->begin(parity);
  for (std::size_t i = 0; i < tail_begin_; ++i) {
    Stage& stage = *stages_[i];
    StageRecord& record = slot.stages[i];
    const bool host_stage = gpu == nullptr || stage.needs_host_results();
    try {
      if (gpu && stage.needs_host_results() && !lane.issued.empty()) settle();
      if (stage.degradable() && should_skip(lane, i, slot, lane.issued.size())) {
        record.outcome = StageRecord::Outcome::skipped_degraded;
        ++lane.skipped_in_a_row[i];
        metrics_.stage_skipped(i);
        continue;
      }
      lane.skipped_in_a_row[i] = 0;
      const std::int64_t start = now_ns();
      stage.run(slot, *lane.exec);
      record.outcome = StageRecord::Outcome::ran;
      if (host_stage) {
        stage.collect(slot, *lane.exec);  // its work is done: a host stage finishes in run()
        record.ms = ms_between(start, now_ns());
        record_stage_time(lane, i, record.ms);
        if (gpu) {  // later GPU stages are timed from here, not across this host stage
          gpu->begin(parity);
          last_event = detail::DeviceLane::kStart;
        }
      } else {
        gpu->stage_end(i);
        lane.issued.push_back(i);
        lane.issued_from.push_back(last_event);
        last_event = i;
      }
    } catch (const FrameError& e) {
      log_->warn("frame {} dropped by stage {} ({}): {}", slot.sequence, stage.name(), e.reason(), e.what());
      drop_failed_at(i, e.what(), e.reason());
      return;
    } catch (const std::exception& e) {
      log_->error("frame {} dropped: stage {} failed: {}", slot.sequence, stage.name(), e.what());
      drop_failed_at(i, e.what(), device_lost(lane, e) ? drop_reason::device_error : drop_reason::stage_error);
      return;
    } catch (...) {
      const char* problem = "an exception that is not a std::exception";
      log_->error("frame {} dropped: stage {} threw {}", slot.sequence, stage.name(), problem);
      drop_failed_at(i, problem, drop_reason::stage_error);
      return;
    }
  }
  if (gpu) settle();
  finish_on_lane(lane, slot);
}

// The lane ran its stages on the frame: with one lane it is done; with several it goes to the
// reorder buffer, and the sequencing thread finishes it.
void Runner::finish_on_lane(Lane& lane, FrameSlot& slot) {
  const std::int64_t now = now_ns();
  metrics_.lane_finished(lane.index, ms_between(slot.times.arrival_ns, now));
  if (!tail_) {
    slot.times.done_ns = now;
    metrics_.frame_done(ms_between(slot.times.arrival_ns, slot.times.done_ns), slot.times.done_ns > slot.times.deadline_ns);
    complete(slot);
    return;
  }
  if (slot.whole != nullptr) {  // a part: its cells' results and its stages' records go to the whole frame
    FrameSlot& whole = *slot.whole;
    slot.whole = nullptr;
    {
      std::lock_guard lock(split_mutex_);
      whole.results.place_cells(slot.results, slot.first_cell, slot.header.count);
      for (std::size_t i = 0; i < tail_begin_; ++i) {
        StageRecord& to = whole.stages[i];
        const StageRecord& from = slot.stages[i];
        // The slowest lane's time; a stage skipped or not run on any lane says so.
        to.ms = std::max(to.ms, from.ms);
        if (to.outcome == StageRecord::Outcome::not_run || from.outcome != StageRecord::Outcome::ran) to.outcome = from.outcome;
      }
    }
    end_part(whole, lane.index, {});
    return;
  }
  hold_for_order(slot, now);
}

// Several lanes: a frame through its lanes waits in the reorder buffer for its turn.
void Runner::hold_for_order(FrameSlot& slot, std::int64_t now) {
  std::size_t held = 0;
  {
    std::lock_guard lock(reorder_mutex_);
    held_[slot.order] = Held{.slot = &slot, .since_ns = now};
    for (const auto& [order, h] : held_) held += h.slot != nullptr ? 1 : 0;
  }
  metrics_.reorder_held(held);
  reorder_cv_.notify_all();
}

// ---- the reorder buffer and the in-sequence stages (several lanes) --------------------------

// Passes frames on in order: the next order as soon as it is there (finished or dropped), a later
// finished frame out of order once its deadline has passed, and everything left once the lanes
// have ended (nothing more can come). The buffer is bounded by the deadlines (a frame waits at most
// until its own) and by the pool: while frames wait here, ingest has fewer free slots (the pool is
// sized with two more per lane for it).
void Runner::sequencer_loop() {
  std::unique_lock lock(reorder_mutex_);
  for (;;) {
    // Drop what was passed on or dropped below the next order; then the next order, if there.
    while (!held_.empty() && held_.begin()->first <= next_order_) {
      auto it = held_.begin();
      const Held h = it->second;
      const bool next = it->first == next_order_;
      const std::uint64_t order = it->first;
      held_.erase(it);
      if (!next) continue;  // a stale mark (never expected: orders are marked once)
      ++next_order_;
      if (h.slot == nullptr) continue;
      const bool in_order = order > max_passed_;
      max_passed_ = std::max(max_passed_, order);
      lock.unlock();
      metrics_.reorder_passed(in_order, ms_between(h.since_ns, now_ns()));
      run_sequenced(*h.slot);
      lock.lock();
    }
    // The first finished frame waiting behind a missing one.
    auto waiting = std::find_if(held_.begin(), held_.end(), [](const auto& e) { return e.second.slot != nullptr; });
    if (waiting == held_.end()) {
      if (lanes_running_ == 0) break;  // nothing held and nothing more can come
      reorder_cv_.wait_for(lock, kPoll);
      continue;
    }
    FrameSlot* slot = waiting->second.slot;
    const std::int64_t now = now_ns();
    if (lanes_running_ == 0 || now >= slot->times.deadline_ns) {
      const std::uint64_t order = waiting->first;
      const Held h = waiting->second;
      waiting->second.slot = nullptr;  // passed on: its order is skipped when it comes up
      const bool in_order = order > max_passed_;
      max_passed_ = std::max(max_passed_, order);
      lock.unlock();
      metrics_.reorder_passed(in_order, ms_between(h.since_ns, now));
      run_sequenced(*slot);
      lock.lock();
      continue;
    }
    const auto until = std::chrono::nanoseconds(std::min(slot->times.deadline_ns - now, std::int64_t(kPoll / std::chrono::nanoseconds(1))));
    reorder_cv_.wait_for(lock, until);
  }
  lock.unlock();
  thread_exited();
}

// The in-sequence stages on a frame the reorder buffer passed on, on the host (their work needs
// only the frame's host results), then the frame is done.
void Runner::run_sequenced(FrameSlot& slot) {
  Lane& lane = *tail_;
  for (std::size_t i = tail_begin_; i < stages_.size(); ++i) {
    Stage& stage = *stages_[i];
    StageRecord& record = slot.stages[i];
    try {
      const std::int64_t start = now_ns();
      stage.run(slot, *lane.exec);
      stage.collect(slot, *lane.exec);
      record.outcome = StageRecord::Outcome::ran;
      record.ms = ms_between(start, now_ns());
      record_stage_time(lane, i, record.ms);
    } catch (const std::exception& e) {
      const FrameError* frame_error = dynamic_cast<const FrameError*>(&e);
      log_->warn("frame {} dropped by stage {}: {}", slot.sequence, stage.name(), e.what());
      record.outcome = StageRecord::Outcome::failed;
      slot.problem = e.what();
      metrics_.stage_failed(i);
      slot.times.done_ns = now_ns();
      metrics_.frame_dropped(frame_error ? std::string_view(frame_error->reason()) : drop_reason::stage_error);
      complete(slot);
      return;
    }
  }
  slot.times.done_ns = now_ns();
  metrics_.frame_done(ms_between(slot.times.arrival_ns, slot.times.done_ns), slot.times.done_ns > slot.times.deadline_ns);
  complete(slot);
}

bool Runner::device_lost(Lane& lane, const std::exception& e) {
  std::string why;
  if (const auto* cuda = dynamic_cast<const linalg::CudaError*>(&e); cuda != nullptr && sticky_cuda_error(cuda->code()))
    why = e.what();
  else if (lane.device) {
    try {
      why = lane.device->lost();
    } catch (const std::exception& query) {
      why = query.what();
    }
  }
  if (why.empty()) return false;
  bool first = false;
  {
    std::lock_guard lock(failure_mutex_);
    first = device_failure_.empty();
    if (first) device_failure_ = why;
  }
  if (first)
    log_->critical("the device failed for good ({}): no more frames are taken; the process must restart to use it", why);
  stop_now_ = true;
  stop_ingest_ = true;
  return true;
}

std::string Runner::device_failure() const {
  std::lock_guard lock(failure_mutex_);
  return device_failure_;
}

// Hands the frame to the callback and its slot back to the pool (the frame has already been
// counted done or dropped).
void Runner::complete(FrameSlot& slot) {
  if (on_complete_) {
    try {
      on_complete_(slot);
    } catch (const std::exception& e) {
      log_->error("frame {}: completion callback failed: {}", slot.sequence, e.what());
    }
  }
  --in_flight_;
  pool_->release(&slot);
}

// ---- lifetime -------------------------------------------------------------------------------

void Runner::thread_exited() {
  {
    std::lock_guard lock(done_mutex_);
    --threads_running_;
  }
  done_cv_.notify_all();
}

bool Runner::finished() const {
  std::lock_guard lock(done_mutex_);
  return started_ && threads_running_ == 0;
}

void Runner::join_all() {
  std::lock_guard lock(join_mutex_);
  if (ingest_.joinable()) ingest_.join();
  for (auto& lane : lanes_)
    if (lane->thread.joinable()) lane->thread.join();
  if (sequencer_.joinable()) sequencer_.join();
}

void Runner::drain() {
  if (!started_) return;
  stop_ingest_ = true;
  join_all();
}

void Runner::stop_now() {
  if (!started_) return;
  stop_now_ = true;
  stop_ingest_ = true;
  join_all();
}

void Runner::wait() {
  if (!started_) return;
  join_all();
}

bool Runner::wait_for(milliseconds timeout) {
  if (!started_) return true;
  {
    std::unique_lock lock(done_mutex_);
    if (!done_cv_.wait_for(lock, timeout, [&] { return threads_running_ == 0; })) return false;
  }
  join_all();
  return true;
}

}  // namespace covflow::pipeline

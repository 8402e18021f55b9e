// The runner: the pipeline's scheduler (docs/architecture.md, "The scheduler").
//
//   FrameInput ─► ingest thread ─► BoundedQueue<FrameSlot*> ─► lane worker(s) ─► completion callback
//                 (validate, copy      (overflow policy)          (stages in order,
//                  into a pool slot)                               budgets, timing)
//
// An input that can place several frames at once (FrameInput::concurrent_places) is claimed from
// on the ingest thread and placed by RunnerOptions::placers threads, each frame into its own slot;
// the frames then enter the queue in the order they were claimed.
// Ingest pulls frames from the input, drops those whose kind, element type or dimensions do not
// match the FrameShape (reason "shape"), copies each payload into a slot of the frame pool (pinned
// host memory on a CUDA lane), stamps arrival and deadline (arrival + budget_ms) and queues the
// slot under the configured overflow policy. A lane's worker takes frames in order and runs the
// stage chain on each:
//   - a degradable stage is skipped (counted) when the frame's remaining budget will not cover
//     its predicted cost (see RunnerOptions and runner.cpp for what the prediction includes);
//   - FrameError from a stage drops the frame (counted by its reason); any other exception is
//     counted as "stage_error"; both are logged with the frame's sequence number, and the next
//     frame is processed as usual;
//   - a frame finished after its deadline is counted late.
// On a CUDA lane the payload of frame i+1 is uploaded on a copy stream while frame i's stages
// run on the compute stream (events order them; the lane takes frame i+1 while it waits for frame
// i's GPU work, when it is queued or arrives meanwhile and no other lane is free) — or, when an in-place input reports its payload
// stretch by stretch as it places it (PlacementObserver), by the ingest thread as it lands, so
// that the upload overlaps the copy or read and the CRC — stages are timed by event pairs, and the lane
// synchronises once per frame: after the last stage, or before the first stage that
// needs_host_results() (publish). The completion callback runs on the worker thread after each
// frame that reached a worker, done or dropped by a stage, with its host results valid; frames
// dropped before (overflow, shape, shutdown) are only counted.
//
// Lanes (docs/scale.md): one per Exec given — a GPU each, or CPU lanes sharing the host's cores.
// The queue is shared and a lane takes the next frame when it is free (on a CUDA lane, also while
// its current frame computes, to upload it), so a frame goes to the lane that can start it first —
// except where frames are placed at once on several CUDA lanes (RunnerOptions::lane_choice): there
// each frame's lane is chosen as it is claimed, the frame waits in that lane's own queue, and its
// payload is uploaded to that lane's device arrays by the placing thread as it is placed.
// Each lane has its own worker, device state, stage state (Stage::prepare per lane) and, on CUDA,
// its own device arrays, bound to the pinned host slot it takes. Frames leave the lanes in any
// order; with several lanes the in-sequence stages (Stage::in_sequence: publish) run after a
// reorder buffer on a sequencing thread, in the order the frames came in. A frame that cannot be
// waited for within its budget (its deadline passed while an earlier frame is still on a lane) is
// passed on ahead of it, and the earlier frame, when it comes, out of order and counted. A
// chain with a stage that keeps state across frames (Stage::keeps_state) has its cells split over
// the lanes instead (RunnerOptions::stateful_lanes): every lane takes every frame and runs the
// chain on its own share of the cells, so that each cell's state lives on one lane and sees every
// frame; the frame goes on once every lane has finished its part.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "covflow/config/config.hpp"
#include "covflow/linalg/exec.hpp"
#include "covflow/pipeline/bounded_queue.hpp"
#include "covflow/pipeline/frame.hpp"
#include "covflow/pipeline/frame_input.hpp"
#include "covflow/pipeline/frame_pool.hpp"
#include "covflow/pipeline/logging.hpp"
#include "covflow/pipeline/metrics.hpp"
#include "covflow/pipeline/stage.hpp"

namespace covflow::pipeline {

namespace detail {
class DeviceLane;
class IngestUploader;
}

struct RunnerOptions {
  double budget_ms = 10.0;                  // per-frame budget: deadline = arrival + budget_ms
  std::size_t queue_depth = 8;              // frames waiting between ingest and the lanes
  Overflow overflow = Overflow::drop_oldest;
  // Frame slots in the pool; 0 picks the least that never starves ingest: the queue, two per lane
  // (the frame computing and the one uploading), those being filled (one per placer), the kept
  // ones, and one more per lane when lanes have queues of their own (lane_choice). A smaller value
  // is raised to that minimum.
  std::size_t slots = 0;
  // Slots stages may keep past a frame's end (FramePool::retain: the recorder's queue), added to
  // the minimum so that ingest never waits for them.
  std::size_t kept_slots = 0;
  std::chrono::milliseconds input_wait{20};  // one FrameInput::next wait; bounds stop latency
  double cost_smoothing = 0.25;              // weight of the newest time in a stage's moving cost
  // A degradable stage skipped this many frames in a row runs once on the next frame to refresh
  // its cost estimate (a transient slow run would otherwise switch it off for good). 0: never.
  std::uint32_t reprobe_after = 64;
  // Frames placed at once by an input that can (FrameInput::concurrent_places), each on a placing
  // thread of the runner's: 0 picks automatic_placers() (two per lane on several CUDA lanes, one
  // per lane on CPU lanes), at most what the input offers; 1 places every frame on the ingest
  // thread (as for any other input). With one lane the automatic choice is 1, so that the ingest
  // thread can upload each payload as it lands. A claimed frame not yet due
  // (Claim::timing.due_ns: a replay reads ahead) is placed at once and admitted when due.
  std::size_t placers = 0;
  // A CUDA lane waiting for its frame's GPU work takes a frame that arrives meanwhile, when no
  // other lane is free, and starts its upload, so that the upload overlaps the compute (false:
  // only a frame already queued when it starts waiting).
  bool take_while_computing = true;
  // Which lane a frame goes to, with several lanes and frames placed at once (placers > 1):
  //   when_claimed  the lane is chosen as the frame is claimed — the one with the fewest frames
  //                 given to it and not yet through it — and the frame waits in that lane's own
  //                 queue (queue_depth shared out over the lanes); on a CUDA lane the placing
  //                 thread uploads each stretch of the payload to that lane's GPU as it lands, so
  //                 the upload overlaps the placing instead of following it;
  //   when_taken    frames wait in one shared queue and the first lane free takes the next one,
  //                 uploading it then;
  //   automatic     when_claimed for several CUDA lanes, when_taken otherwise.
  // Frames placed on the ingest thread (placers 1, or an input that places one at a time) are
  // always taken from the shared queue.
  enum class LaneChoice { automatic, when_claimed, when_taken };
  LaneChoice lane_choice = LaneChoice::automatic;
  // A chain with a stage that keeps state across frames (Stage::keeps_state), on several lanes:
  //   split_cells  every lane takes every frame and runs the chain's lane stages on its own share
  //                of the cells — lane l of L the cells [l·C/L, (l+1)·C/L) of a frame of C — so
  //                that each cell's state lives on one lane and sees every frame; the frame is
  //                done when every lane has finished its part (one that fails drops the frame),
  //                then goes through the reorder buffer as any other (lane_choice does not apply);
  //   one_lane     the chain runs on the first lane alone (single_lane_reason() says why).
  // Stateless chains always spread whole frames over the lanes.
  enum class StatefulLanes { split_cells, one_lane };
  StatefulLanes stateful_lanes = StatefulLanes::split_cells;
};

// The minimum pool size for these options (see RunnerOptions::slots; placers 0 counted as two
// per lane with several lanes, whatever their kind).
std::size_t minimum_slots(const RunnerOptions& options, std::size_t lanes = 1);

// The placing threads RunnerOptions::placers = 0 asks for, and what an input should offer
// (FrameInput::concurrent_places) to get them: one with one lane; with several, two per CUDA lane
// — on four H100s one placer per lane kept 1050 frames/s of 47 MB, one and a half 1300, two 1400
// (docs/performance.md) — and one per CPU lane.
std::size_t automatic_placers(std::size_t lanes, bool cuda);

// Why `header` cannot go through a pipeline built for `shape` ("" when it can): an invalid
// header, another element type, or dimensions other than the shape's (snapshot frames are taken
// only when shape.snapshots > 0; covariance frames always).
std::string frame_shape_problem(const FrameShape& shape, const replay::FrameHeader& header,
                                std::size_t payload_bytes);

class Runner {
 public:
  using Completion = std::function<void(const FrameSlot&)>;

  // Prepares every stage on `exec` (Stage::prepare), sizes and allocates the frame pool for
  // `shape` and the stages' SlotNeeds, and registers the chain with `metrics`. Nothing runs until
  // start(). `exec`, `metrics` and (after start) the input must outlive the runner.
  Runner(const FrameShape& shape, std::vector<std::unique_ptr<Stage>> stages, linalg::Exec& exec,
         const RunnerOptions& options, Metrics& metrics, Completion on_complete = {});
  // The same on several lanes, one per Exec (all CPU or all CUDA; std::invalid_argument
  // otherwise, or when there is none). Each must outlive the runner.
  Runner(const FrameShape& shape, std::vector<std::unique_ptr<Stage>> stages, std::vector<linalg::Exec*> lanes,
         const RunnerOptions& options, Metrics& metrics, Completion on_complete = {});
  // stop_now() if still running.
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Warm start: runs the chain on `frame` (a synthetic frame of the pipeline's shape) as many
  // times as the stages ask (Stage::warm_up_frames), on every lane, then resets the stages' state
  // across frames. Nothing is counted, published or recorded, and the stages' cost estimates are
  // untouched. Before start() only. Throws what a stage or the device throws.
  void warm_up(const replay::Frame& frame);
  // Starts the ingest thread and the lane workers. Once only.
  void start(FrameInput& input);
  // Stops taking input, finishes every queued and in-flight frame, then stops (the SIGTERM
  // path). Blocks until the threads are done.
  void drain();
  // The same without waiting: the threads end by themselves once the queue is empty; wait_for()
  // says when (and stop_now() can still cut it short).
  void request_drain() { stop_ingest_ = true; }
  // Stops at once: the frame a worker is on is finished, queued ones are dropped (reason
  // "shutdown", counted). Blocks until the threads are done.
  void stop_now();
  // Blocks until the threads end by themselves (the input ended and every frame is through) or
  // another thread called drain()/stop_now().
  void wait();
  // As wait(), for at most `timeout`; true when the runner is finished.
  bool wait_for(std::chrono::milliseconds timeout);

  bool running() const { return started_ && !finished(); }
  // Every thread has ended (and the queue is empty).
  bool finished() const;
  // The input said it ended (FrameInput::ended) or failed; no more frames will come from it.
  bool input_ended() const { return input_ended_.load(); }
  // Frames taken from the input and not yet done or dropped.
  std::size_t in_flight() const { return in_flight_.load(); }
  // Why the device can no longer be used, once a frame met a sticky device error ("" until
  // then): the runner stops taking input, drops what is queued (reason shutdown, the frame that
  // met it device_error) and ends. The process must restart to use the GPU again.
  std::string device_failure() const;

  // Threads placing frames at once (1: the ingest thread alone), known once start() has run.
  std::size_t placers() const { return placers_.load(); }
  // Lanes in use (fewer than the Execs given when the chain keeps state and stateful_lanes is
  // one_lane, see single_lane_reason(), or when a frame has fewer cells than there are lanes).
  std::size_t lane_count() const { return lanes_.size(); }
  // Why the runner uses one lane though several were given ("" otherwise).
  const std::string& single_lane_reason() const { return single_lane_reason_; }
  // Why each lane takes every frame and runs its share of the cells ("" when lanes take whole
  // frames: RunnerOptions::stateful_lanes).
  const std::string& cells_split_reason() const { return split_reason_; }
  // The cells of a frame of `cells` that lane `lane` runs when cells are split: [first, first + count).
  struct CellRange {
    std::uint32_t first = 0, count = 0;
  };
  CellRange lane_cells(std::size_t lane, std::uint32_t cells) const;
  // Stages run by the lanes; those from here on run after the reorder buffer (chain size: none).
  std::size_t sequenced_from() const { return tail_begin_; }

  const FramePool& pool() const { return *pool_; }
  const FrameShape& shape() const { return shape_; }
  std::size_t stage_count() const { return stages_.size(); }
  const Stage& stage(std::size_t i) const { return *stages_.at(i); }
  // The current cost estimate of stage `i` on lane 0 (an in-sequence stage: the sequencing thread), ms (negative: it has not run yet).
  double predicted_ms(std::size_t i) const;

 private:
  struct Lane;
  class Placement;
  void ingest_loop(FrameInput& input);
  void ingest_claims(FrameInput& input, std::size_t placers);
  void note_rejected(FrameInput& input, std::uint64_t& seen);
  void input_failed(FrameInput& input, const std::exception& e);
  bool input_over(FrameInput& input);
  FrameSlot* acquire_slot();
  bool refuse_shape(const replay::FrameHeader& h, std::size_t bytes,
                    std::size_t capacity = std::numeric_limits<std::size_t>::max());
  std::int64_t take(const InputTiming& timing, const replay::FrameHeader& h);
  void admit_in_place(FrameSlot* slot, const replay::FrameHeader& h, std::int64_t arrival_ns);
  void enqueue(FrameSlot* slot, const replay::FrameHeader& h, std::int64_t arrival_ns);
  void admit(replay::Frame& frame, std::int64_t arrival_ns);
  void lane_loop(Lane& lane);
  void bind(Lane& lane, FrameSlot& slot, int parity);
  void finish_on_lane(Lane& lane, FrameSlot& slot);
  void forget_order(const FrameSlot& slot);
  void sequencer_loop();
  void run_sequenced(FrameSlot& slot);
  void process(Lane& lane, FrameSlot& slot, int parity, FrameSlot*& pending, bool& pending_uploaded);
  bool should_skip(Lane& lane, std::size_t i, const FrameSlot& slot, std::size_t issued_pending);
  void record_stage_time(Lane& lane, std::size_t i, double ms);
  void drop(FrameSlot* slot, std::string_view reason);
  void leave_failed(Lane& lane, FrameSlot& slot, std::string_view reason);
  void enqueue_split(FrameSlot* slot);
  FrameSlot* part_of(Lane& lane, FrameSlot* whole, int parity);
  FrameSlot& fill_part(Lane& lane, FrameSlot& whole, int parity);
  void end_part(FrameSlot& whole, std::size_t lane, std::string_view failure, const std::string& problem = {});
  void hold_for_order(FrameSlot& slot, std::int64_t now_ns);
  void complete(FrameSlot& slot);
  FrameSlot* pop_next(Lane& lane);
  BoundedQueue<FrameSlot*>& queue_of(Lane& lane);
  void note_queue_depth();
  void close_queues();
  void route(FrameSlot& slot);
  void unroute(std::int32_t lane, std::int32_t device_set);
  void thread_exited();
  void join_all();

  FrameShape shape_;
  std::vector<std::unique_ptr<Stage>> stages_;
  std::vector<linalg::Exec*> execs_;
  RunnerOptions options_;
  Metrics& metrics_;
  Completion on_complete_;
  std::unique_ptr<FramePool> pool_;
  BoundedQueue<FrameSlot*> queue_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::string single_lane_reason_;
  // Cells split over the lanes (RunnerOptions::stateful_lanes): why ("" when not), the shape each
  // lane's stages are prepared for (its share of the cells: shape_ otherwise), and the lock over
  // the whole frames' FrameSlot::parts_left, part_failure and results as the parts end.
  std::string split_reason_;
  FrameShape lane_shape_;
  std::mutex split_mutex_;
  std::size_t tail_begin_ = 0;        // first in-sequence stage with several lanes; stage count otherwise
  std::unique_ptr<Lane> tail_;        // the sequencing thread's cost estimates (several lanes only)
  std::thread sequencer_;
  // The reorder buffer (several lanes): frames a lane finished, and orders that will never come
  // (dropped after they were queued), by order; the next order to pass on.
  struct Held {
    FrameSlot* slot = nullptr;  // null: the frame was dropped
    std::int64_t since_ns = 0;
  };
  std::mutex reorder_mutex_;
  std::condition_variable reorder_cv_;
  std::map<std::uint64_t, Held> held_;
  std::uint64_t next_order_ = 1, max_passed_ = 0, last_order_ = 0;  // last_order_: the admitting thread (below)
  std::size_t lanes_running_ = 0;
  std::unique_ptr<detail::IngestUploader> uploader_;  // CUDA: uploads what an in-place input places
  std::shared_ptr<spdlog::logger> log_;

  std::atomic<bool> stop_ingest_{false}, stop_now_{false}, input_ended_{false};
  std::atomic<std::size_t> in_flight_{0};
  std::atomic<std::size_t> placers_{1};
  std::atomic<std::size_t> idle_lanes_{0};  // lanes waiting in pop_next() for a frame
  // Frames are given their lane when claimed (RunnerOptions::lane_choice; set in start()), and the
  // lane the ingest thread looks at first when several have as few frames.
  bool routed_ = false;
  std::size_t next_route_ = 0;
  bool started_ = false;
  std::thread ingest_;
  std::mutex join_mutex_;
  mutable std::mutex done_mutex_;
  std::condition_variable done_cv_;
  std::size_t threads_running_ = 0;
  // The admitting thread's (the ingest thread, or a placing thread in its turn: one at a time).
  std::uint64_t shape_drops_ = 0;
  // Whether `e`, caught on a lane, means the device is gone for good (and records why if so).
  bool device_lost(Lane& lane, const std::exception& e);
  mutable std::mutex failure_mutex_;
  std::string device_failure_;
  std::optional<std::uint64_t> last_sequence_;  // the admitting thread's: the last frame taken
};

}  // namespace covflow::pipeline

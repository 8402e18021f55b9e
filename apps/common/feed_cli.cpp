// `covflow feed` (feed_cli.hpp): the replayer's schedule, a PUSH socket, a progress line.
#include "common/feed_cli.hpp"

#include <algorithm>
#include <chrono>
#include <ostream>
#include <thread>

#include <fmt/format.h>
#include <zmq.hpp>

#include "common/exit_codes.hpp"
#include "common/progress.hpp"
#include "covflow/replay/reader.hpp"
#include "covflow/replay/replayer.hpp"
#include "covflow/stages/ingest.hpp"

namespace covflow::cli {
namespace {

constexpr std::string_view program = "covflow feed";

// The steady clock, sleeping in short steps so that a stop request ends a long wait (a slow
// recorded pace) at once; the frame it was waiting for is then not sent.
class StoppableClock final : public replay::Clock {
 public:
  explicit StoppableClock(const std::atomic<bool>& stop) : stop_(stop) {}
  std::chrono::nanoseconds now() override { return replay::steady_clock().now(); }
  void sleep_until(std::chrono::nanoseconds deadline) override {
    while (!stop_) {
      const auto left = deadline - now();
      if (left <= std::chrono::nanoseconds(0)) return;
      std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(left, std::chrono::milliseconds(50)));
    }
  }

 private:
  const std::atomic<bool>& stop_;
};

std::string pace_text(const FeedRequest& request) {
  if (!request.rate_hz) return "at the recorded pace";
  if (*request.rate_hz == 0) return "as fast as the workers take them";
  return fmt::format("at {} frames/s", *request.rate_hz);
}

}  // namespace

int run_feed(const FeedRequest& request, const std::atomic<bool>& stop, std::ostream& err) {
  replay::Reader reader{std::filesystem::path(request.file)};
  replay::ReplayOptions options;
  options.loop = request.loop;
  if (!request.rate_hz) {
    options.pace = replay::Pace::recorded;
  } else if (*request.rate_hz == 0) {
    options.pace = replay::Pace::fast;
  } else {
    options.pace = replay::Pace::fixed;
    options.rate_hz = *request.rate_hz;
  }

  std::optional<stages::ZmqFramePublisher> publisher;
  try {
    publisher.emplace(request.push, stages::ZmqFramePublisher::Pattern::push);
  } catch (const std::runtime_error& e) {
    err << program << ": error: --push " << e.what() << '\n';
    return exit_code::io;
  }
  err << program << ": " << request.file << " → " << request.push << ", " << pace_text(request) << "; waiting for "
      << request.workers << " worker(s) to connect\n";
  try {
    while (!stop && publisher->peers(std::chrono::milliseconds(100)) < request.workers) {
    }
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;  // a signal: `stop` says what to do
  }

  StoppableClock clock(stop);
  // The schedule starts with the first frame, after the workers are in.
  replay::Replayer replayer(reader, options, clock);
  apps::ProgressLine line;
  std::uint64_t sent = 0, bytes = 0;
  std::optional<std::uint64_t> last_seq, file_first, file_last;
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  try {
    while (!stop && (request.frames == 0 || sent < request.frames)) {
      std::optional<replay::Frame> frame = replayer.next();
      if (!frame || stop) break;
      // Looping, each pass's sequence numbers follow the last pass's, so that they keep increasing:
      // a collector would take a repeated one for a duplicate.
      if (replayer.passes() == 1) {
        file_first = std::min(file_first.value_or(frame->header.sequence), frame->header.sequence);
        file_last = std::max(file_last.value_or(frame->header.sequence), frame->header.sequence);
      } else {
        frame->header.sequence += (replayer.passes() - 1) * (*file_last - *file_first + 1);
      }
      publisher->send(*frame, request.part_bytes);
      ++sent;
      bytes += frame->payload.size();
      last_seq = frame->header.sequence;
      const double seconds = elapsed_s();
      line.update(fmt::format("feed: {}{} frames sent, {:.1f} MB, {:.1f} s, {:.1f} frames/s, last seq {}, {} worker(s)", sent,
                              request.frames ? fmt::format("/{}", request.frames) : std::string(), double(bytes) / 1e6,
                              seconds, seconds > 0 ? double(sent) / seconds : 0.0, *last_seq, publisher->peers()));
    }
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) {
      err << program << ": error: " << request.push << ": send failed: " << e.what() << '\n';
      return exit_code::io;
    }
  }
  const bool interrupted = stop.load();
  line.finish(fmt::format("{}: {} frames sent to {} in {:.2f} s ({}){}", request.file, sent, request.push, elapsed_s(),
                          last_seq ? fmt::format("last seq {}", *last_seq) : std::string("none"),
                          interrupted ? " (interrupted)" : ""));
  for (const replay::Damage& d : reader.damage())
    err << program << ": " << request.file << ": " << name(d.kind) << ": " << d.message() << '\n';
  // A connection that closes while its worker is busy loses the frame that worker's ZeroMQ had
  // received but not yet handed over (libzmq drops it with the connection): the connections stay
  // open for drain_ms, then the frames still queued here get up to 60 s to go.
  if (!interrupted && sent > 0 && request.drain_ms > 0) {
    err << program << ": keeping the connections open " << double(request.drain_ms) / 1e3
        << " s for the workers to take their last frames\n";
    StoppableClock(stop).sleep_until(replay::steady_clock().now() + std::chrono::milliseconds(request.drain_ms));
  }
  publisher->set_linger(stop ? std::chrono::milliseconds(0) : std::chrono::milliseconds(60'000));
  publisher.reset();
  if (sent == 0 && !interrupted) {
    err << program << ": error: " << request.file << ": no valid record to send\n";
    return exit_code::input_damaged;
  }
  return reader.damage().empty() ? exit_code::ok : exit_code::input_damaged;
}

}  // namespace covflow::cli

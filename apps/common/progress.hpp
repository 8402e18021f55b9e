// A progress line on stderr: rewritten in place on a terminal (at most ten times a second),
// one line every ten seconds otherwise, and a final summary either way.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include <unistd.h>

namespace covflow::apps {

class ProgressLine {
 public:
  ProgressLine() : terminal_(::isatty(STDERR_FILENO) == 1) {}

  // `text` is the current state; shown when enough time has passed since the last one.
  void update(const std::string& text) {
    const auto now = std::chrono::steady_clock::now();
    const auto interval = terminal_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(10'000);
    if (shown_ && now - last_ < interval) return;
    shown_ = true;
    last_ = now;
    if (terminal_) std::fprintf(stderr, "\r\033[K%s", text.c_str());
    else std::fprintf(stderr, "%s\n", text.c_str());
    std::fflush(stderr);
  }

  // The last word: replaces the line on a terminal.
  void finish(const std::string& summary) {
    if (terminal_ && shown_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "%s\n", summary.c_str());
  }

 private:
  bool terminal_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace covflow::apps

// covflowd's side of systemd's service protocol (sd_notify(3)): readiness once the pipeline takes
// frames, RELOADING=1 and READY=1 around a reload, STOPPING=1 when it stops, a STATUS= line, and
// the watchdog (WatchdogSec=) pinged from the main loop while the pipeline makes progress. Not
// started by systemd (no NOTIFY_SOCKET), or built without libsystemd, every call does nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace covflow::daemon {

class ServiceNotifier {
 public:
  ServiceNotifier();

  void ready(const std::string& status);
  void reloading();
  void stopping(const std::string& status);
  void status(const std::string& status);
  // From the main loop, often: pings the watchdog at half its interval while `healthy`. A daemon
  // whose frames stopped moving stops pinging, and systemd restarts it.
  void tick(bool healthy);

  // The watchdog interval systemd asked for (0: none).
  std::chrono::microseconds watchdog_interval() const { return watchdog_; }
  // Whether covflowd was built with libsystemd.
  static bool supported();

 private:
  void send(const std::string& message);
  std::chrono::microseconds watchdog_{0};
  std::chrono::steady_clock::time_point last_ping_{};
};

}  // namespace covflow::daemon

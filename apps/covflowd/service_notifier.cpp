#include "covflowd/service_notifier.hpp"

#if COVFLOW_HAS_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace covflow::daemon {

ServiceNotifier::ServiceNotifier() {
#if COVFLOW_HAS_SYSTEMD
  std::uint64_t usec = 0;
  // 0 unset_environment: the variables stay for children (covflowd starts none).
  if (sd_watchdog_enabled(0, &usec) > 0) watchdog_ = std::chrono::microseconds(usec);
#endif
}

bool ServiceNotifier::supported() {
#if COVFLOW_HAS_SYSTEMD
  return true;
#else
  return false;
#endif
}

void ServiceNotifier::send(const std::string& message) {
#if COVFLOW_HAS_SYSTEMD
  sd_notify(0, message.c_str());  // < 0 or 0 (no socket): nothing to do about it
#else
  (void)message;
#endif
}

void ServiceNotifier::ready(const std::string& status) { send("READY=1\nSTATUS=" + status); }
void ServiceNotifier::reloading() { send("RELOADING=1\nSTATUS=reloading the configuration"); }
void ServiceNotifier::stopping(const std::string& status) { send("STOPPING=1\nSTATUS=" + status); }
void ServiceNotifier::status(const std::string& status) { send("STATUS=" + status); }

void ServiceNotifier::tick(bool healthy) {
  if (watchdog_.count() == 0 || !healthy) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ping_ < watchdog_ / 2) return;
  last_ping_ = now;
  send("WATCHDOG=1");
}

}  // namespace covflow::daemon

// covflowd: the daemon. Frames from the configured input (the built-in scenario by default) go
// through the stage chain under per-frame budgets; results and latency reports go out on ZeroMQ
// (docs/zmq.md); SIGTERM/SIGINT drain and exit 0, SIGHUP reloads the configuration
// (docs/daemon.md). Configuration: docs/config.md.
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/guarded_main.hpp"
#include "covflow/config/build_info.hpp"
#include "covflow/config/load.hpp"
#include "covflow/config/schema.hpp"
#include "covflow/pipeline/logging.hpp"
#include "covflowd/daemon.hpp"

namespace {

using namespace covflow;

extern "C" void on_terminate(int) { daemon::signals().terminate = true; }
extern "C" void on_hangup(int) { daemon::signals().hangup = true; }

void install_signal_handlers() {
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  action.sa_handler = on_terminate;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  action.sa_handler = on_hangup;
  sigaction(SIGHUP, &action, nullptr);
  action.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &action, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"covflowd: real-time radar signal-processing daemon"};
  app.footer("Exit codes: 0 ok, 1 internal error, 2 usage, 3 configuration (also an invalid file under --check-config), "
             "4 damaged data, 5 I/O (also an endpoint ZeroMQ cannot bind), 6 device unavailable or failed.");
  const auto& info = config::build_info();
  app.set_version_flag("--version", fmt::format("covflowd {} ({}; CUDA architectures: {})", info.version, info.build_type,
                                                info.cuda_architectures));
  std::string config_file, check_file;
  std::vector<std::string> overrides;
  bool print_config = false, print_reference = false;
  std::uint64_t frames = 0;
  std::string device;
  app.add_option("--config,-c", config_file, "YAML configuration (docs/config.md); default: the built-in demo");
  app.add_option("--set", overrides, "Override a configuration key, KEY=VALUE, e.g. pipeline.budget_ms=4 (repeatable)");
  app.add_option("--check-config", check_file, "Validate FILE (with any --set) and exit: 0 valid, 3 invalid");
  app.add_flag("--print-config", print_config, "Print the configuration in effect as YAML and exit");
  app.add_flag("--print-config-reference", print_reference, "Print the key reference of docs/config.md and exit");
  app.add_option("--frames", frames, "Take this many frames from the input, finish them and exit (default: run until stopped)")
      ->check(CLI::PositiveNumber);
  app.add_option("--device", device, "auto | cuda | cpu: overrides device.backend")->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  if (const int code = apps::parse_command_line(app, argc, argv); code >= 0) return code;

  if (!check_file.empty()) {
    try {
      config::load_file(check_file, overrides);
      fmt::print("{}: valid\n", check_file);
      return 0;
    } catch (const config::ConfigError& e) {
      std::fprintf(stderr, "covflowd: %s\n", e.what());
      return exit_code::config;
    }
  }
  if (print_reference) {
    fmt::print("{}", config::reference_markdown());
    return exit_code::ok;
  }
  return apps::run_guarded("covflowd", [&]() -> int {
    if (!device.empty()) overrides.push_back("device.backend=" + device);
    const config::Config cfg = config_file.empty() ? config::load_defaults(overrides) : config::load_file(config_file, overrides);
    if (print_config) {
      fmt::print("{}", config::to_yaml(cfg));
      return exit_code::ok;
    }
    pipeline::set_log_level(std::string(name(cfg.daemon.log_level)));
    install_signal_handlers();
    daemon::Daemon covflowd({.config_path = config_file, .overrides = overrides, .frames = frames}, cfg);
    return covflowd.run();
  });
}

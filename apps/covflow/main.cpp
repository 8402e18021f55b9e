// covflow: the command-line tool. Subcommands are added by the issues that build them
// (synth, inspect, record, replay, stats, ctl, linalg ...); this file only wires them.
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/exit_codes.hpp"
#include "common/linalg_cli.hpp"
#include "covflow/config/build_info.hpp"
#include "covflow/linalg/device.hpp"

namespace {

int run_version() {
  const auto& info = covflow::config::build_info();
  fmt::print("covflow {} ({}; CUDA architectures: {})\n", info.version, info.build_type,
             info.cuda_architectures);
  return 0;
}

int run_devices() {
  using namespace covflow::linalg;
  const DeviceProbe probe = probe_devices();
  if (!probe.available()) {
    fmt::print("no GPU: {}\nthe CPU backend is available\n", probe.reason);
    return 0;
  }
  for (const DeviceInfo& d : probe.devices)
    fmt::print("cuda:{}  {}  sm_{}{}  {} SMs  {:.1f} GiB  L2 {} MiB  smem/block {} KiB\n", d.index, d.name,
               d.cc_major, d.cc_minor, d.multiprocessors, static_cast<double>(d.global_memory) / (1 << 30),
               d.l2_cache >> 20, d.shared_memory_per_block >> 10);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"covflow: record, replay, inspect and compute on radar frames"};
  app.require_subcommand(1);
  auto* version = app.add_subcommand("version", "Print the version and build configuration");
  auto* devices = app.add_subcommand("devices", "List the CUDA devices covflow can use");
  covflow::cli::LinalgCommands linalg(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? covflow::exit_code::ok : covflow::exit_code::usage;
  }
  try {
    if (version->parsed()) return run_version();
    if (devices->parsed()) return run_devices();
    if (linalg.parsed()) return linalg.run(std::cout, std::cerr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "covflow: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

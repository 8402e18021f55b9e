// Exit codes of covflow and covflowd, one per class of error (docs/cli.md lists them), and the
// one place that turns an exception into its code and a message on stderr.
#pragma once

#include <cstdio>
#include <exception>
#include <functional>
#include <string_view>

#include <CLI/CLI.hpp>

#include "covflow/config/error.hpp"
#include "covflow/linalg/error.hpp"
#include "covflow/replay/error.hpp"

namespace covflow::apps {

enum ExitCode : int {
  exit_ok = 0,
  exit_internal = 1,            // a bug: an error no other class covers
  exit_usage = 2,               // bad command line
  exit_config = 3,              // the configuration is invalid
  exit_damage = 4,              // input data is damaged or not what it claims (frame files, feeds)
  exit_io = 5,                  // the system refused: a file cannot be opened, read or written; a socket
  exit_device_unavailable = 6,  // the requested backend (CUDA) or device does not exist here
};

// Parses the command line; on a parse error prints CLI11's message and returns the usage code
// (0 after --help). Returns -1 when parsing succeeded.
inline int parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? exit_ok : exit_usage;
  }
  return -1;
}

// Runs `body` and maps what it throws to an exit code, writing "program: error: what" to stderr.
inline int run_guarded(std::string_view program, const std::function<int()>& body) {
  auto report = [&](const char* what) { std::fprintf(stderr, "%.*s: error: %s\n", int(program.size()), program.data(), what); };
  try {
    return body();
  } catch (const config::ConfigError& e) {
    report(e.what());
    return exit_config;
  } catch (const replay::FormatError& e) {
    report(e.what());
    return exit_damage;
  } catch (const replay::IoError& e) {
    report(e.what());
    return exit_io;
  } catch (const linalg::Unavailable& e) {
    report(e.what());
    return exit_device_unavailable;
  } catch (const std::exception& e) {
    report(e.what());
    return exit_internal;
  }
}

}  // namespace covflow::apps

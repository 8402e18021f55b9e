// The one place where covflow and covflowd turn a command-line parse error or an exception into
// its exit code (common/exit_codes.hpp) and a message on stderr.
#pragma once

#include <cstdio>
#include <exception>
#include <functional>
#include <string_view>

#include <CLI/CLI.hpp>

#include "common/exit_codes.hpp"
#include "covflow/config/error.hpp"
#include "covflow/linalg/error.hpp"
#include "covflow/pipeline/endpoints.hpp"
#include "covflow/replay/error.hpp"

namespace covflow::apps {

// Parses the command line; on a parse error prints CLI11's message and returns the usage code
// (0 after --help). Returns -1 when parsing succeeded.
inline int parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? exit_code::ok : exit_code::usage;
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
    return exit_code::config;
  } catch (const replay::FormatError& e) {
    report(e.what());
    return exit_code::input_damaged;
  } catch (const replay::IoError& e) {
    report(e.what());
    return exit_code::io;
  } catch (const pipeline::EndpointError& e) {
    report(e.what());
    return exit_code::io;
  } catch (const linalg::Unavailable& e) {
    report(e.what());
    return exit_code::device_unavailable;
  } catch (const std::exception& e) {
    report(e.what());
    return exit_code::internal_error;
  }
}

}  // namespace covflow::apps

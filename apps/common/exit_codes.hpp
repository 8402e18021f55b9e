// Exit codes of the covflow command-line tools: one table for every subcommand, so a script can
// tell a typo from a damaged file from a missing GPU. docs/cli.md lists them for users.
#pragma once

namespace covflow::exit_code {

inline constexpr int ok = 0;
inline constexpr int internal_error = 1;      // a bug, an unexpected exception, or not implemented yet
inline constexpr int usage = 2;               // the command line itself is wrong (CLI11 parse error)
inline constexpr int config = 3;              // the configuration file is invalid
inline constexpr int input_damaged = 4;       // an input file is damaged or of the wrong shape or type
inline constexpr int io = 5;                  // a file cannot be opened, read or written
inline constexpr int device_unavailable = 6;  // the requested GPU or its code path is not available
inline constexpr int numerical = 7;           // some matrices failed (per-matrix info != 0); output written
inline constexpr int unreachable = 8;         // covflowd did not answer (covflow stats, covflow ctl)
inline constexpr int missing_package = 9;     // a program or package the command runs is not installed (covflow report)

}  // namespace covflow::exit_code

"""python3 -m covflow_report RUN.jsonl [--config FULL.yaml] [--frames FILE.cvf] [--frame SEQ] --out report.html

Exit codes are covflow's (docs/cli.md): 0 written; 2 bad command line; 3 configuration unusable;
4 the results file is damaged — the report of the lines before the damage is written; 5 I/O;
9 a package is missing (python3-matplotlib, python3-numpy, python3-yaml).
"""
from __future__ import annotations

import argparse
import os
import sys

PROG = "covflow report"
OK, USAGE, CONFIG, DAMAGED, IO, MISSING_PACKAGE = 0, 2, 3, 4, 5, 9
PACKAGES = {"numpy": "python3-numpy", "matplotlib": "python3-matplotlib", "yaml": "python3-yaml"}


def error(message: str, code: int) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return code


def missing_package(module: str) -> int:
    return error(f"the Python module {module} is not installed for {sys.executable}: "
                 f"install Debian's {PACKAGES[module]} (scripts/setup lists it)", MISSING_PACKAGE)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description="Write the HTML report of a covflowd run (docs/report.md).")
    parser.add_argument("results", help="results file: JSON Lines of result and latency messages")
    parser.add_argument("--out", "-o", required=True, help="HTML page to write (replaced if it exists)")
    parser.add_argument("--config", help="the run's complete configuration as YAML (covflowd --print-config): "
                                         "budget, angle grid, looks and the scenario's truth")
    parser.add_argument("--config-label", help="how the page names the configuration (default: the --config path)")
    parser.add_argument("--frames", help="the run's input frame file (.cvf): its record headers tell which input "
                                         "frames got no result")
    parser.add_argument("--frame", type=int, help="sequence number of the frame whose spectrum and beam pattern "
                                                  "are drawn (default: the last that has them)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    for module in ("numpy", "matplotlib"):
        try:
            __import__(module)
        except ImportError:
            return missing_package(module)
    from .figures import build_figures
    from .frames import FramesError, read_frame_headers
    from .page import render
    from .results import ResultsError, read_run
    from .setting import SettingError, read_setting

    setting = None
    if args.config:
        try:
            setting = read_setting(args.config, args.config_label)
        except ImportError:
            return missing_package("yaml")
        except SettingError as e:
            return error(str(e), CONFIG)
    try:
        run = read_run(args.results, args.frame)
    except ResultsError as e:
        return error(str(e), IO)
    if args.frame is not None and not run.chosen_found:
        seqs = [f.seq for f in run.frames]
        span = f"sequence numbers {min(seqs)} … {max(seqs)}" if seqs else "no results"
        return error(f"--frame {args.frame}: no result with that sequence number in {args.results} ({span})", USAGE)

    frame_file = None
    if args.frames:
        try:
            frame_file = read_frame_headers(args.frames)
        except FramesError as e:
            return error(str(e), IO if isinstance(e.__cause__, OSError) else DAMAGED)
        if frame_file.stopped:
            print(f"{PROG}: warning: {args.frames}: the record scan stopped at {frame_file.stopped}", file=sys.stderr)

    page = render(run, setting, build_figures(run, setting, frame_file), frame_file)
    partial = f"{args.out}.partial"
    try:
        with open(partial, "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(partial, args.out)
    except OSError as e:
        return error(f"{args.out}: {e.strerror or e}", IO)
    print(f"{args.out}: report of {run.results} results and {len(run.reports)} latency reports from {args.results}")
    if run.damage is not None:
        return error(run.damage.describe(args.results), DAMAGED)
    return OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

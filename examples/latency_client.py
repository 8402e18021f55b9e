#!/usr/bin/env python3
"""Print covflowd's latency reports, one line each (docs/zmq.md, "Latency reports").

Needs only Debian's python3-zmq:

    python3 examples/latency_client.py --connect tcp://127.0.0.1:5601

Each line: frames in / done / late / dropped / in flight, then the end-to-end latency percentiles
in milliseconds and the slowest stage. --count N stops after N reports; exit status 1 when no
report arrives within --timeout seconds.
"""
import argparse
import json
import sys

import zmq


def describe(report):
    frames = report.get("frames", {})
    e2e = report.get("end_to_end", {})
    stages = report.get("stages", [])
    def p99(stage):
        return stage.get("latency", {}).get("p99_ms") or 0.0

    slowest = max(stages, key=p99, default=None)
    line = (
        f"report {report.get('report', '-')}{' (final)' if report.get('final') else ''}: "
        f"in {frames.get('in', '-')} done {frames.get('done', '-')} late {frames.get('late', '-')} "
        f"dropped {frames.get('dropped', '-')} in flight {frames.get('in_flight', '-')} | "
        f"end to end p50 {e2e.get('p50_ms', float('nan')):.3f} p99 {e2e.get('p99_ms', float('nan')):.3f} "
        f"max {e2e.get('max_ms', float('nan')):.3f} ms"
    )
    if slowest is not None:
        line += f" | slowest stage {slowest.get('name', '?')} p99 {p99(slowest):.3f} ms"
    return line


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connect", default="tcp://127.0.0.1:5601", help="covflowd's daemon.reports_endpoint")
    parser.add_argument("--count", type=int, default=0, help="reports to print, then exit (0: until Ctrl-C)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each report")
    args = parser.parse_args()

    context = zmq.Context()
    socket = context.socket(zmq.SUB)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.SUBSCRIBE, b"latency")
    socket.connect(args.connect)
    shown = 0
    try:
        while args.count == 0 or shown < args.count:
            if not socket.poll(int(args.timeout * 1000)):
                print(f"no latency report from {args.connect} within {args.timeout} s", file=sys.stderr)
                return 1
            topic, body = socket.recv_multipart()
            report = json.loads(body)
            print(describe(report), flush=True)
            shown += 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

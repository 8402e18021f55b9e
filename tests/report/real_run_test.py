"""The report of a real short CPU run: covflowd runs the default scenario for a few frames with its
results recorded (pipeline.stages.publish.results_path, the MUSIC spectrum and the beam patterns
published), then `covflow report` turns the file into a page. Every panel is drawn from the run's
own data: none says "not in this run" except the compress stage's, which the default chain does
not run; the DOA panel's truth lines sit at the default scenario's angles.

    real_run_test.py COVFLOWD COVFLOW

Exit 77 (ctest's skip) with the reason when matplotlib is absent for the report's interpreter.
"""
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77


def main() -> int:
    covflowd, covflow = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        results = os.path.join(tmp, "run.jsonl")
        page = os.path.join(tmp, "report.html")
        settings = [
            "--set", "device.backend=cpu",
            "--set", f"daemon.results_endpoint=ipc://{tmp}/results",
            "--set", f"daemon.reports_endpoint=ipc://{tmp}/reports",
            "--set", f"daemon.control_endpoint=ipc://{tmp}/control",
            "--set", "daemon.report_interval_ms=100",
            "--set", "scenario.cells=6",
            "--set", f"pipeline.stages.publish.results_path={results}",
            "--set", "pipeline.stages.publish.spectrum=true",
            "--set", "pipeline.stages.adaptive.beam_pattern_points=91",
        ]
        run = subprocess.run([covflowd, "--frames", "12", *settings], capture_output=True, text=True, timeout=240)
        if run.returncode != 0:
            print(run.stdout, run.stderr, sep="\n")
            print(f"FAILED: covflowd exited {run.returncode}")
            return 1
        lines = open(results).read().splitlines()
        topics = [re.match(r'\{"topic":"(\w+)"', line).group(1) for line in lines]
        if topics.count("result") != 12 or topics[-1] != "latency":
            print(f"FAILED: expected 12 result lines and a final latency report, got {topics}")
            return 1
        report = subprocess.run([covflow, "report", results, *settings, "--out", page], capture_output=True, text=True,
                                timeout=240)
        if report.returncode == 9:
            print(f"SKIPPED: {report.stderr.strip()}")
            return SKIP
        if report.returncode != 0:
            print(report.stdout, report.stderr, sep="\n")
            print(f"FAILED: covflow report exited {report.returncode}")
            return 1
        html = open(page).read()
        images = html.count("data:image/png;base64,")
        missing = re.findall(r"not in this run[^<]*", html)
        unexpected = [m for m in missing if "compress" not in m]
        if images < 6 or unexpected:
            print(f"FAILED: {images} images; panels without data: {unexpected}")
            return 1
        print(f"report of a 12-frame CPU run: {images} images, {len(missing)} panel(s) without data: {missing}")
        return 0


if __name__ == "__main__":
    sys.exit(main())

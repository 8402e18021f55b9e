"""covflow_report on a synthetic results file with known DOAs, beam patterns and compression, made
here from a few frames: every figure present with its title, axes and units; the truth lines where
the scenario puts them; a damaged line read up to and reported; the page self-contained.

    report_test.py PACKAGE_DIR [COVFLOW_BINARY]          the unit tests (and `covflow report` when given)
    report_test.py PACKAGE_DIR --chromium                 the page in headless Chromium, not blank

Exit 77 (ctest's skip) with the reason when matplotlib, or for --chromium Chromium, is absent.
"""
import base64
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest

SKIP = 77
PACKAGE_DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "python")
sys.path.insert(0, PACKAGE_DIR)
try:
    import matplotlib
    import numpy as np
    matplotlib.use("Agg")
    import matplotlib.image
    import matplotlib.pyplot as plt
except ImportError as e:
    print(f"SKIPPED: {e.name} is not installed for {sys.executable} (install python3-matplotlib)")
    sys.exit(SKIP)

from covflow_report import figures as report_figures  # noqa: E402
from covflow_report.frames import read_frame_headers  # noqa: E402
from covflow_report.__main__ import main as report_main  # noqa: E402
from covflow_report.results import read_run  # noqa: E402
from covflow_report.setting import read_setting  # noqa: E402

COVFLOW = None
SOURCES = [(-20.0, 0.0), (5.0, 0.0), (31.0, 0.0)]      # (azimuth, elevation) in degrees
JAMMERS = [(48.0, 0.0), (-60.0, 40.0)]                   # the second off the horizon: seen at asin(sin az·cos el)
LOOKS = [5.0, -20.0]
GRID = (-90.0, 90.0, 2.0)                                # 91 points
CELLS, FRAMES, BEAM_POINTS = 4, 6, 121
BUDGET_MS = 10.0
LATE_SEQ = 3

CONFIG = f"""
ingest:
  source: synth
scenario:
  geometry: linear
  sources: [{", ".join(f"{{angle_deg: {a}, power_db: 10}}" for a, _ in SOURCES)}]
  jammers: [{", ".join(f"{{angle_deg: {a}, elevation_deg: {e}, power_db: 30}}" for a, e in JAMMERS)}]
pipeline:
  budget_ms: {BUDGET_MS}
  stages:
    subspace:
      angle_grid: {{min_deg: {GRID[0]}, max_deg: {GRID[1]}, step_deg: {GRID[2]}}}
    adaptive:
      looks_deg: [{", ".join(str(v) for v in LOOKS)}]
"""


def seen_angle(azimuth, elevation):
    return math.degrees(math.asin(math.sin(math.radians(azimuth)) * math.cos(math.radians(elevation))))


TRUTH = [seen_angle(*s) for s in SOURCES] + [seen_angle(*j) for j in JAMMERS]


def result_message(seq, rng, spectrum=True, beam=True, compress=True):
    angles = np.arange(GRID[0], GRID[1] + GRID[2] / 2, GRID[2])
    spectrum_db = np.zeros((CELLS, angles.size))
    for t in TRUTH:
        spectrum_db += 30.0 / (1.0 + ((angles - t) / 1.5) ** 2)
    azimuth = np.linspace(-90, 90, BEAM_POINTS)
    beam_db = []
    for _ in range(CELLS):
        looks = []
        for look in LOOKS:
            pattern = -0.02 * (azimuth - look) ** 2
            for j in TRUTH[len(SOURCES):]:
                pattern -= 50.0 * np.exp(-((azimuth - j) / 2.0) ** 2)
            looks.append(np.maximum(pattern, -80.0).round(2).tolist())
        beam_db.append(looks)
    arrival = 1_000_000_000 + seq * 10_000_000
    latency = 12.5 if seq == LATE_SEQ else 2.0 + 0.1 * seq
    message = {
        "seq": seq, "capture_ns": seq * 10_000_000, "arrival_ns": arrival,
        "deadline_ns": arrival + int(BUDGET_MS * 1e6), "done_ns": arrival + int(latency * 1e6),
        "latency_ms": latency, "late": seq == LATE_SEQ, "kind": "snapshots", "element_type": "cf64",
        "cells": CELLS, "source_count": [len(TRUTH)] * (CELLS - 1) + [-1],
        "doa_deg": [[round(t + rng.normal(0, 0.2), 3) for t in sorted(TRUTH)] for _ in range(CELLS - 1)] + [[]],
        "cell_status": [0] * (CELLS - 1) + [-1001],
        "sinr_db": [[18.0 + 0.1 * c, None] for c in range(CELLS)],
        "null_depth_db": [[50.0 - c, 45.0] for c in range(CELLS)],
        "stages": [{"name": "covariance", "outcome": "ran", "ms": 0.4}, {"name": "subspace", "outcome": "ran", "ms": 1.9},
                   {"name": "adaptive", "outcome": "skipped_degraded" if seq == 2 else "ran", "ms": 0.0 if seq == 2 else 1.1},
                   {"name": "publish", "outcome": "not_run", "ms": 0.0}],
    }
    if spectrum:
        message["spectrum_db"] = spectrum_db.round(3).tolist()
        message["spectrum_db"][CELLS - 1] = [None] * angles.size
    if beam:
        message["beam_pattern_db"] = beam_db
    if compress:
        message["compress"] = {"format": ["tlr", "lowrank", "tlr", "tlr"], "rank_min": 2 + seq % 2, "rank_mean": 4.5,
                               "rank_max": 9, "bytes": 200_000 + 1000 * seq, "dense_bytes": 1_048_576,
                               "error": [1e-4, 2e-4, None, 5e-5], "sinr_loss_db": [[0.1, 0.2]] * CELLS}
    return message


def latency_message(number, final):
    return {"report": number, "final": final, "interval_ms": 1000, "uptime_s": float(number),
            "frames": {"in": 8 * number, "done": 3 * number, "late": 1, "dropped": 2 * number, "in_flight": 0,
                       "dropped_by_reason": {"overflow_drop_oldest": 2 * number - 1, "shape": 1}},
            "end_to_end": {"count": 3 * number, "mean_ms": 2.1, "p50_ms": 2.0, "p90_ms": 2.4, "p99_ms": 12.0,
                           "p999_ms": 12.5, "max_ms": 12.5},
            "stages": [{"name": "subspace", "latency": {"count": 3 * number, "mean_ms": 1.9, "p50_ms": 1.9, "p90_ms": 2.0,
                                                        "p99_ms": 2.1, "p999_ms": 2.1, "max_ms": 2.1},
                        "ran": 3 * number, "skipped_degraded": 0, "failures": 0, "over_budget": 0, "predicted_ms": 1.9}]}


def write_frame_file(path, sequences, cut_last=False):
    """A frame file written with examples/write_frames.py, the format document's own writer."""
    spec = importlib.util.spec_from_file_location(
        "write_frames", os.path.join(PACKAGE_DIR, "..", "examples", "write_frames.py"))
    writer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(writer)
    entries, data = [], writer.file_header()
    for seq in sequences:
        payload = np.zeros((CELLS, 5, 3), dtype="<c8")       # cells × snapshots × channels
        entries.append((seq, seq * 10_000_000, len(data)))
        data += writer.record(writer.SNAPSHOTS, 3, seq, seq * 10_000_000, payload)
    data = data[:-7] if cut_last else data + writer.index(entries, len(data))
    with open(path, "wb") as f:
        f.write(data)


def results_lines(**fields):
    rng = np.random.default_rng(26)
    lines = []
    for seq in range(FRAMES):
        lines.append(json.dumps({"topic": "result", "message": result_message(seq, rng, **fields)}))
        if seq == 2:
            lines.append(json.dumps({"topic": "latency", "message": latency_message(1, False)}))
    lines.append(json.dumps({"topic": "latency", "message": latency_message(2, True)}))
    return lines


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="covflow_report_test.")
        self.results = self.path("run.jsonl")
        self.write(self.results, results_lines())
        self.config = self.path("config.yaml")
        with open(self.config, "w") as f:
            f.write(CONFIG)

    def tearDown(self):
        plt.close("all")
        self.dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir.name, name)

    @staticmethod
    def write(path, lines, tail=""):
        with open(path, "w") as f:
            f.write("".join(line + "\n" for line in lines) + tail)

    def figures(self, results=None, config=True, frame=None):
        run = read_run(results or self.results, frame)
        return run, {f.key: f for f in report_figures.build_figures(run, read_setting(self.config) if config else None)}

    def test_every_figure_is_drawn_with_title_axes_and_units(self):
        _, figures = self.figures()
        self.assertEqual(set(figures), {"latency", "stages", "frames", "spectrum", "doa", "source_count",
                                        "beam_pattern", "sinr", "compress"})
        unit = re.compile(r"\S \([^()]+\)$")
        for key, figure in figures.items():
            with self.subTest(figure=key):
                self.assertIsNone(figure.missing)
                self.assertIsNotNone(figure.figure)
                self.assertTrue(figure.title)
                axes = figure.describe()
                self.assertTrue(axes)
                for ax in axes:
                    if ax["colorbar"]:
                        self.assertRegex(ax["ylabel"], unit)
                        continue
                    self.assertTrue(ax["title"], ax)
                    self.assertRegex(ax["xlabel"], unit)
                    self.assertRegex(ax["ylabel"], unit)

    def truth_lines(self, figure, horizontal):
        found = {}
        for ax in figure.figure.axes:
            for line in ax.get_lines():
                gid = line.get_gid() or ""
                if gid.startswith("truth-"):
                    data = line.get_ydata() if horizontal else line.get_xdata()
                    self.assertEqual(data[0], data[1], gid)    # a horizontal (vertical) line
                    found.setdefault(gid, []).append(float(data[0]))
        return found

    def test_doa_truth_lines_sit_at_the_scenarios_angles(self):
        _, figures = self.figures()
        found = self.truth_lines(figures["doa"], horizontal=True)
        self.assertEqual(len(found), len(TRUTH))
        for i, angle in enumerate(TRUTH):
            kind = "source" if i < len(SOURCES) else "jammer"
            self.assertAlmostEqual(found[f"truth-{kind}-{i}"][0], angle, places=9)
        self.assertAlmostEqual(found["truth-jammer-4"][0], seen_angle(-60.0, 40.0), places=9)   # not −60
        # The estimates are drawn too: every finite doa_deg of every frame.
        points = figures["doa"].figure.axes[0].get_lines()[0].get_ydata()
        self.assertEqual(len(points), FRAMES * (CELLS - 1) * len(TRUTH))

    def test_beam_pattern_marks_the_jammers_and_each_look(self):
        _, figures = self.figures()
        axes = [ax for ax in figures["beam_pattern"].figure.axes]
        self.assertEqual(len(axes), len(LOOKS))
        for ax, look in zip(axes, LOOKS):
            gids = {line.get_gid(): line.get_xdata()[0] for line in ax.get_lines() if line.get_gid()}
            self.assertEqual(sorted(g for g in gids if g.startswith("truth-source")), [])
            self.assertAlmostEqual(gids["truth-jammer-3"], 48.0)
            self.assertAlmostEqual(gids["truth-jammer-4"], seen_angle(-60.0, 40.0))
            self.assertIn(f"{look:g}°", ax.get_title())

    def test_clutter_sectors_are_shaded(self):
        with open(self.config) as f:
            text = f.read()
        with open(self.config, "w") as f:
            f.write(text.replace("  geometry: linear\n",
                                 "  geometry: linear\n  clutter: [{center_deg: -70, width_deg: 10, power_db: 20}]\n"))
        _, figures = self.figures()
        for key in ("beam_pattern", "spectrum", "doa"):
            with self.subTest(figure=key):
                spans = [p for ax in figures[key].figure.axes for p in ax.patches if p.get_gid() == "clutter-0"]
                self.assertTrue(spans)
                corners = spans[0].get_xy()
                along = [c[1] for c in corners] if key == "doa" else [c[0] for c in corners]
                self.assertEqual((min(along), max(along)), (-75.0, -65.0))

    def test_latency_budget_and_late_frames(self):
        _, figures = self.figures()
        cdf = figures["latency"].figure.axes[0]
        budget = [line for line in cdf.get_lines() if line.get_gid() == "budget"]
        self.assertEqual(len(budget), 1)
        self.assertEqual(budget[0].get_xdata()[0], BUDGET_MS)
        late = [line for line in cdf.get_lines() if (line.get_label() or "").startswith("late")]
        self.assertEqual(len(late), 1)
        self.assertEqual(list(late[0].get_xdata()), [12.5])
        notes = " ".join(figures["latency"].notes)
        self.assertIn("late frames: 1 of 6", notes)
        self.assertIn("dropped frames: 4 (overflow_drop_oldest: 3, shape: 1)", notes)

    def test_without_config_the_budget_comes_from_the_results_and_no_truth_is_drawn(self):
        _, figures = self.figures(config=False)
        cdf = figures["latency"].figure.axes[0]
        self.assertEqual([line.get_xdata()[0] for line in cdf.get_lines() if line.get_gid() == "budget"], [BUDGET_MS])
        self.assertEqual(self.truth_lines(figures["doa"], horizontal=True), {})
        self.assertTrue(any("no --config" in n for n in figures["doa"].notes))

    def test_the_chosen_frame_and_the_spectrum_grid(self):
        run, figures = self.figures(frame=2)
        self.assertEqual((run.spectrum_seq, run.beam_seq), (2, 2))
        self.assertEqual(run.spectrum_db.shape, (CELLS, 91))
        self.assertEqual(run.spectrum_frames, FRAMES)
        image = figures["spectrum"].figure.axes[0].get_images()[0]
        self.assertEqual(list(image.get_extent()), [-91.0, 91.0, CELLS - 0.5, -0.5])
        self.assertIn("Frame 2", figures["spectrum"].figure.axes[0].get_title())

    def test_missing_fields_give_panels_that_say_what_to_enable(self):
        lines = [json.dumps({"topic": "result", "message": result_message(s, np.random.default_rng(1), spectrum=False,
                                                                         beam=False, compress=False)})
                 for s in range(3)]
        bare = self.path("bare.jsonl")
        self.write(bare, lines)
        _, figures = self.figures(bare)
        for key in ("spectrum", "beam_pattern", "compress", "frames"):
            with self.subTest(figure=key):
                self.assertIsNone(figures[key].figure)
                self.assertRegex(figures[key].missing, r"^not in this run: .*(enable|record)")
        out = self.path("bare.html")
        self.assertEqual(report_main([bare, "--out", out]), 0)
        with open(out) as f:
            self.assertIn("not in this run: no result carries spectrum_db", f.read())

    def test_a_damaged_line_ends_the_reading_and_is_reported(self):
        lines = results_lines()
        damaged = self.path("damaged.jsonl")
        cut = lines[5][: len(lines[5]) // 2]        # line 6, cut mid-write
        self.write(damaged, lines[:5] + [cut] + lines[6:])
        run = read_run(damaged)
        self.assertEqual(run.damage.line, 6)
        self.assertIn("cut short", run.damage.reason)
        self.assertEqual(run.lines, 5)
        self.assertEqual(run.results, 4)           # lines 1-5: four results and a report
        self.assertEqual(len(run.reports), 1)

        garbage = self.path("garbage.jsonl")
        self.write(garbage, lines[:2] + ['{"topic": "result", "message": {"seq": 1,} }'] + lines[2:])
        self.assertIn("invalid JSON", read_run(garbage).damage.reason)
        self.write(garbage, lines[:1] + ['["not", "a", "message"]'])
        self.assertEqual((read_run(garbage).damage.line, read_run(garbage).results), (2, 1))

        out = self.path("damaged.html")
        stderr = self.path("stderr")
        with open(stderr, "w") as err:
            code = subprocess.run([sys.executable, "-m", "covflow_report", damaged, "--out", out], stderr=err,
                                  env=dict(os.environ, PYTHONPATH=PACKAGE_DIR)).returncode
        self.assertEqual(code, 4)
        with open(stderr) as f:
            self.assertIn(f"{damaged}:6: cut short", f.read())
        with open(out) as f:
            page = f.read()
        self.assertIn('class="damage"', page)
        self.assertIn(f"{damaged}:6: cut short", page)
        self.assertIn("4 results, 1 latency reports", page)

    def test_input_frames_without_a_result_are_marked(self):
        frames = self.path("input.cvf")
        write_frame_file(frames, range(FRAMES + 2))          # two frames more than results
        frame_file = read_frame_headers(frames)
        self.assertIsNone(frame_file.stopped)
        self.assertEqual([r.sequence for r in frame_file.records], list(range(FRAMES + 2)))
        self.assertEqual(frame_file.records[0].shape, f"snapshots cf32 3×5×{CELLS}")
        figure = report_figures.input_frames_figure(read_run(self.results), frame_file)
        marks = [line for line in figure.figure.axes[0].get_lines() if line.get_gid() == "no-result"]
        self.assertEqual(list(marks[0].get_xdata()), [0.01 * FRAMES, 0.01 * (FRAMES + 1)])
        self.assertIn(f"without a result (dropped, or not reached): {FRAMES}, {FRAMES + 1}", " ".join(figure.notes))

        cut = self.path("cut.cvf")
        write_frame_file(cut, range(3), cut_last=True)
        frame_file = read_frame_headers(cut)
        self.assertEqual(len(frame_file.records), 2)
        self.assertIn("(sequence 2) cut short", frame_file.stopped)

        out = self.path("frames.html")
        self.assertEqual(report_main([self.results, "--frames", frames, "--out", out]), 0)
        with open(out) as f:
            self.assertIn(f"{FRAMES + 2} records, sequences 0 … {FRAMES + 1}", f.read())
        self.assertEqual(report_main([self.results, "--frames", self.results, "--out", out]), 4)   # not a frame file

    def test_the_page_is_self_contained(self):
        out = self.path("report.html")
        self.assertEqual(report_main([self.results, "--config", self.config, "--out", out]), 0)
        with open(out) as f:
            page = f.read()
        self.assertNotRegex(page, r"(?i)(src|href)\s*=\s*[\"']?\s*(https?:|//)")
        self.assertNotRegex(page, r"(?i)<(link|script|iframe)\b")
        self.assertNotRegex(page, r"(?i)url\(")
        images = re.findall(r'<img [^>]*src="([^"]+)"', page)
        self.assertEqual(len(images), 9)
        for uri in images:
            self.assertTrue(uri.startswith("data:image/png;base64,"))
            png = base64.b64decode(uri.split(",", 1)[1])
            self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        self.assertIn("jammer 48° (30 dB)", page)

    def test_a_missing_matplotlib_names_the_package(self):
        blocked = ("import sys, runpy; sys.modules['matplotlib'] = None; "
                   f"sys.argv = ['covflow_report', {self.results!r}, '--out', {self.path('x.html')!r}]; "
                   "runpy.run_module('covflow_report', run_name='__main__')")
        done = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=PACKAGE_DIR))
        self.assertEqual(done.returncode, 9, done.stderr)
        self.assertIn("python3-matplotlib", done.stderr)
        self.assertFalse(os.path.exists(self.path("x.html")))
        blocked = blocked.replace("'matplotlib'", "'yaml'").replace("'--out'", f"'--config', {self.config!r}, '--out'")
        done = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=PACKAGE_DIR))
        self.assertEqual(done.returncode, 9, done.stderr)
        self.assertIn("python3-yaml", done.stderr)

    def test_covflow_report_resolves_the_configuration(self):
        if COVFLOW is None:
            self.skipTest("no covflow binary given")
        # A partial file: covflow report completes it with the daemon's defaults before the module reads it.
        partial = self.path("partial.yaml")
        with open(partial, "w") as f:
            f.write("scenario:\n  jammers: [{angle_deg: 40, power_db: 25}]\n")
        out = self.path("cli.html")
        done = subprocess.run([COVFLOW, "report", self.results, "--config", partial, "--set", "pipeline.budget_ms=7",
                               "--out", out], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(out) as f:
            page = f.read()
        self.assertIn("jammer 40° (25 dB)", page)         # from the file
        self.assertIn("source -20° (10 dB)", page)         # the daemon's default sources
        self.assertIn("budget: 7 ms", page)
        self.assertIn(partial, page)
        frames = self.path("input.cvf")
        write_frame_file(frames, range(FRAMES + 1))
        done = subprocess.run([COVFLOW, "report", self.results, "--frames", frames, "--frame", "2", "--out", out],
                              capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(out) as f:
            page = f.read()
        self.assertIn(f"{FRAMES + 1} records", page)
        self.assertIn("<td>chosen frame</td><td>2</td>", page)
        done = subprocess.run([COVFLOW, "report", self.results, "--frame", "99", "--out", out], capture_output=True, text=True)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("--frame 99", done.stderr)
        bad = self.path("bad.yaml")
        with open(bad, "w") as f:
            f.write("pipeline:\n  budgt_ms: 4\n")
        done = subprocess.run([COVFLOW, "report", self.results, "--config", bad, "--out", out], capture_output=True, text=True)
        self.assertEqual(done.returncode, 3, done.stderr)


def chromium_check():
    chromium = "/usr/bin/chromium"
    if not os.path.exists(chromium):
        print(f"SKIPPED: {chromium} not found (Debian's chromium): the page is not opened in a browser")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="covflow_report_chromium.") as d:
        results, config, page, shot = (os.path.join(d, n) for n in ("run.jsonl", "config.yaml", "report.html", "shot.png"))
        ReportTest.write(results, results_lines())
        with open(config, "w") as f:
            f.write(CONFIG)
        assert report_main([results, "--config", config, "--out", page]) == 0
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                        "--window-size=1200,3000", f"file://{page}"], check=True, capture_output=True, timeout=120)
        pixels = matplotlib.image.imread(shot)[:, :, :3].astype(np.float64)
        # imread gives PNG channels in [0, 1]. Not blank: some variance, and a visible share of the
        # page (over 2 % of its pixels) away from the background colour of its corner.
        variance = float(pixels.var())
        inked = float((np.abs(pixels - pixels[0, 0]).max(axis=2) > 0.1).mean())
        print(f"screenshot {pixels.shape[1]}×{pixels.shape[0]}: pixel variance {variance:.4f}, {100 * inked:.1f} % inked")
        if variance <= 0.0 or inked < 0.02:
            print("FAILED: the screenshot is blank")
            return 1
    return 0


if __name__ == "__main__":
    arguments = sys.argv[2:]
    if arguments == ["--chromium"]:
        sys.exit(chromium_check())
    if arguments:
        COVFLOW = arguments[0]
    unittest.main(argv=[sys.argv[0], "-v"])

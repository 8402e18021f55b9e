"""The report's figures, built with matplotlib from a Run (results.py) and, when given, the run's
Setting (setting.py).

Each builder returns a ReportFigure: the matplotlib Figure, or — when the run lacks what it draws —
no figure and a `missing` line saying what to enable. `describe()` lists every axes' title and
labels, so a test can check them before anything is rendered. Every axis label ends with its unit
in parentheses.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.ticker import MaxNLocator  # noqa: E402
import numpy as np  # noqa: E402

from .frames import FrameFile  # noqa: E402
from .results import Run, number as _number  # noqa: E402
from .setting import Setting, angle_grid  # noqa: E402

# The daemon's default MUSIC grid (pipeline.stages.subspace.angle_grid), assumed only when no
# configuration is given and a spectrum has exactly its number of points; the page says so.
DEFAULT_GRID = (-90.0, 90.0, 0.5)
MAX_LOOK_PANELS = 8
COLORBAR_GID = "colorbar"
SOURCE_COLOR, JAMMER_COLOR, LOOK_COLOR = "tab:green", "tab:red", "tab:blue"


@dataclass
class ReportFigure:
    key: str
    title: str
    figure: matplotlib.figure.Figure | None = None
    missing: str | None = None        # "not in this run: ..." when there is nothing to draw
    notes: list[str] = field(default_factory=list)

    def describe(self) -> list[dict]:
        """One entry per axes: its title, labels and whether it is a colorbar."""
        if self.figure is None:
            return []
        return [{"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
                 "colorbar": ax.get_gid() == COLORBAR_GID} for ax in self.figure.axes]


def _colorbar(fig, image, ax, label: str) -> None:
    bar = fig.colorbar(image, ax=ax)
    bar.set_label(label)
    bar.ax.set_gid(COLORBAR_GID)


def _quiet_nan(fn, *args, **kwargs):
    """numpy's nan-reductions without the warning for an all-NaN slice (it is NaN, as it should be)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


def frame_times(run: Run) -> tuple[np.ndarray, str]:
    """The per-frame x axis: arrival time since the first result, or the sequence number when
    arrival times are missing."""
    arrival = np.array([f.arrival_ns for f in run.frames])
    if arrival.size and np.all(np.isfinite(arrival)):
        return (arrival - arrival.min()) / 1e9, "time since the first arrival (s)"
    return np.array([float(f.seq) for f in run.frames]), "frame (sequence number)"


def _budget(run: Run, setting: Setting | None) -> tuple[float | None, str]:
    if setting is not None:
        return setting.budget_ms, f"pipeline.budget_ms of {setting.label}"
    budgets = np.array([f.budget_ms for f in run.frames])
    budgets = budgets[np.isfinite(budgets)]
    if not budgets.size:
        return None, "unknown: no --config, and no result carries arrival_ns and deadline_ns"
    values, counts = np.unique(np.round(budgets, 6), return_counts=True)
    text = "deadline_ns − arrival_ns of the results"
    if values.size > 1:
        text += f" (varies from {values.min():g} to {values.max():g} ms: the most common is drawn)"
    return float(values[np.argmax(counts)]), text


def _late_mask(run: Run, latency: np.ndarray, budget: float | None) -> np.ndarray:
    late = np.array([bool(f.late) if f.late is not None else (budget is not None and f.latency_ms > budget)
                     for f in run.frames])
    return late & np.isfinite(latency)


def _last_report(run: Run) -> dict | None:
    finals = [r for r in run.reports if r.get("final") is True]
    return finals[-1] if finals else (run.reports[-1] if run.reports else None)


def dropped_summary(run: Run) -> str:
    report = _last_report(run)
    if report is None:
        return "dropped frames: unknown (no latency report in this run)"
    frames = report.get("frames") if isinstance(report.get("frames"), dict) else {}
    dropped = frames.get("dropped")
    reasons = frames.get("dropped_by_reason") if isinstance(frames.get("dropped_by_reason"), dict) else {}
    which = "the final latency report" if report.get("final") is True else f"the last latency report (report {report.get('report')})"
    detail = ", ".join(f"{k}: {v}" for k, v in reasons.items() if v)
    return (f"dropped frames: {dropped}" + (f" ({detail})" if detail else "") +
            f", of {frames.get('in')} in, {frames.get('done')} done, {frames.get('late')} late, per {which}")


# ---- latency -------------------------------------------------------------------------------------

def latency_figure(run: Run, setting: Setting | None) -> ReportFigure:
    out = ReportFigure("latency", "End-to-end latency")
    latency = np.array([f.latency_ms for f in run.frames])
    finite = np.isfinite(latency)
    if not finite.any():
        out.missing = ("not in this run: no result message with latency_ms (record the results: "
                       "pipeline.stages.publish.results_path, or covflow record-results)")
        out.notes.append(dropped_summary(run))
        return out
    budget, budget_source = _budget(run, setting)
    late = _late_mask(run, latency, budget)
    times, time_label = frame_times(run)

    fig, (cdf, series) = plt.subplots(1, 2, figsize=(12, 4.5))
    order = np.argsort(latency[finite])
    sorted_latency = latency[finite][order]
    fraction = np.arange(1, sorted_latency.size + 1) / sorted_latency.size
    cdf.step(sorted_latency, fraction, where="post", label=f"{sorted_latency.size} frames done")
    late_sorted = late[finite][order]
    if late_sorted.any():
        cdf.plot(sorted_latency[late_sorted], fraction[late_sorted], "x", color=JAMMER_COLOR,
                 label=f"late: {int(late_sorted.sum())}")
    if budget is not None:
        cdf.axvline(budget, color=JAMMER_COLOR, linestyle="--", label=f"budget {budget:g} ms", gid="budget")
    cdf.set_xlabel("end-to-end latency (ms)")
    cdf.set_ylabel("frames at or below (fraction)")
    cdf.set_title("Latency CDF")
    cdf.set_ylim(0, 1.02)
    cdf.grid(alpha=0.3)
    cdf.legend(loc="lower right")

    on_time = finite & ~late
    series.plot(times[on_time], latency[on_time], ".", markersize=3, label="on time", rasterized=True)
    if late.any():
        series.plot(times[late], latency[late], "x", color=JAMMER_COLOR, label="late", rasterized=True)
    if budget is not None:
        series.axhline(budget, color=JAMMER_COLOR, linestyle="--", label="budget")
    series.set_xlabel(time_label)
    series.set_ylabel("end-to-end latency (ms)")
    series.set_title("Latency per frame")
    series.grid(alpha=0.3)
    series.legend(loc="upper right")
    fig.suptitle(out.title)
    fig.tight_layout()
    out.figure = fig

    p50, p90, p99 = np.percentile(sorted_latency, [50, 90, 99])
    out.notes.append(f"{sorted_latency.size} frames: p50 {p50:.3f} ms, p90 {p90:.3f} ms, p99 {p99:.3f} ms, "
                     f"max {sorted_latency[-1]:.3f} ms")
    out.notes.append(f"budget: {budget:g} ms, from {budget_source}" if budget is not None else f"budget: {budget_source}")
    out.notes.append(f"late frames: {int(late.sum())} of {int(finite.sum())}")
    out.notes.append(dropped_summary(run))
    return out


def _windows(count: int) -> list[slice]:
    size = max(1, math.ceil(count / 60))
    return [slice(i, min(i + size, count)) for i in range(0, count, size)]


def stage_figure(run: Run) -> ReportFigure:
    out = ReportFigure("stages", "Per-stage latency over time")
    names: list[str] = []
    for f in run.frames:
        for name in f.stage_ms:
            if name not in names:
                names.append(name)
    report_names: list[str] = []
    for r in run.reports:
        for s in r.get("stages", []) if isinstance(r.get("stages"), list) else []:
            if isinstance(s, dict) and isinstance(s.get("name"), str) and s["name"] not in report_names:
                report_names.append(s["name"])
    if not names and not report_names:
        out.missing = "not in this run: no result lists its stages' times and there is no latency report"
        return out
    panels = (1 if names else 0) + (1 if report_names else 0)
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels + 1, 4.5), squeeze=False)
    axes = list(axes[0])
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    if names:
        ax = axes.pop(0)
        times, time_label = frame_times(run)
        windows = _windows(len(run.frames))
        for i, name in enumerate(names):
            xs, p50s, p99s = [], [], []
            for w in windows:
                ms = np.array([f.stage_ms.get(name, math.nan) for f in run.frames[w]])
                ms = ms[np.isfinite(ms)]
                if ms.size:
                    xs.append(float(np.mean(times[w])))
                    p50, p99 = np.percentile(ms, [50, 99])
                    p50s.append(p50)
                    p99s.append(p99)
            color = colors[i % len(colors)]
            ax.plot(xs, p50s, "-", color=color, label=f"{name} p50")
            ax.plot(xs, p99s, "--", color=color, label=f"{name} p99")
        ax.set_xlabel(time_label)
        ax.set_ylabel("stage time (ms)")
        ax.set_title(f"From the results, per window of {windows[0].stop - windows[0].start} frames")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", ncol=2)
        skipped = {}
        for f in run.frames:
            for name, outcome in f.stage_outcomes.items():
                if outcome in ("skipped_degraded", "failed"):
                    skipped[(name, outcome)] = skipped.get((name, outcome), 0) + 1
        for (name, outcome), n in skipped.items():
            out.notes.append(f"{name}: {outcome} on {n} frames")
    if report_names:
        ax = axes.pop(0)
        for i, name in enumerate(report_names):
            xs, p50s, p99s = [], [], []
            for r in run.reports:
                for s in r.get("stages", []) if isinstance(r.get("stages"), list) else []:
                    latency = s.get("latency") if isinstance(s, dict) else None
                    if s.get("name") == name and isinstance(latency, dict) and latency.get("count"):
                        xs.append(_number(r.get("uptime_s")))
                        p50s.append(_number(latency.get("p50_ms")))
                        p99s.append(_number(latency.get("p99_ms")))
            color = colors[i % len(colors)]
            ax.plot(xs, p50s, "o-", markersize=3, color=color, label=f"{name} p50")
            ax.plot(xs, p99s, "s--", markersize=3, color=color, label=f"{name} p99")
        ax.set_xlabel("daemon uptime at the report (s)")
        ax.set_ylabel("stage time (ms)")
        ax.set_title("From the latency reports (cumulative since start)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", ncol=2)
    fig.suptitle(out.title)
    fig.tight_layout()
    out.figure = fig
    return out


def counts_figure(run: Run) -> ReportFigure:
    out = ReportFigure("frames", "Frames done, late and dropped")
    rows = [r for r in run.reports if isinstance(r.get("frames"), dict)]
    if not rows:
        out.missing = ("not in this run: no latency report (record them with the results: pipeline.stages.publish.results_path, "
                       "or covflow record-results --reports)")
        return out
    uptime = np.array([_number(r.get("uptime_s")) for r in rows])
    fig, ax = plt.subplots(figsize=(12, 4))
    for key, style in (("in", "-"), ("done", "-"), ("late", "-"), ("dropped", "-")):
        ax.plot(uptime, [_number(r["frames"].get(key)) for r in rows], style, marker=".", label=key,
                color=JAMMER_COLOR if key == "dropped" else None)
    reasons: list[str] = []
    for r in rows:
        by = r["frames"].get("dropped_by_reason")
        for reason in by if isinstance(by, dict) else {}:
            if reason not in reasons:
                reasons.append(reason)
    for reason in reasons:
        ax.plot(uptime, [_number((r["frames"].get("dropped_by_reason") or {}).get(reason, 0)) for r in rows], ":",
                label=f"dropped: {reason}")
    ax.set_xlabel("daemon uptime at the report (s)")
    ax.set_ylabel("frames since start (count)")
    ax.set_title("Counters of the latency reports")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.suptitle(out.title)
    fig.tight_layout()
    out.figure = fig
    out.notes.append(dropped_summary(run))
    return out


# ---- subspace ------------------------------------------------------------------------------------

def _truth_note(setting: Setting | None) -> str | None:
    if setting is None:
        return "truth not drawn: no --config (the scenario is not known)"
    if not setting.truth_known:
        return f"truth not drawn: ingest.source is {setting.ingest_source}, not the scenario generator"
    return None


def _clutter_spans(ax, setting: Setting | None, horizontal: bool = False) -> None:
    """The scenario's clutter sectors as shaded azimuth spans (their elevation is not drawn)."""
    if setting is None or not setting.truth_known:
        return
    for i, sector in enumerate(setting.clutter):
        span = ax.axhspan if horizontal else ax.axvspan
        span(*sector.span_deg, color="tab:orange", alpha=0.12, gid=f"clutter-{i}",
             label=f"clutter {sector.span_deg[0]:g}° to {sector.span_deg[1]:g}°")


def _truth_vlines(ax, setting: Setting | None, kinds=("source", "jammer")) -> None:
    _clutter_spans(ax, setting)
    if setting is None or not setting.truth_known:
        return
    for i, e in enumerate(setting.emitters):
        if e.kind in kinds:
            ax.axvline(e.angle_deg, color=SOURCE_COLOR if e.kind == "source" else JAMMER_COLOR, linestyle=":",
                       linewidth=1.2, gid=f"truth-{e.kind}-{i}",
                       label=f"{e.kind} {e.angle_deg:.4g}°" + (f" (az {e.azimuth_deg:g}°, el {e.elevation_deg:g}°)"
                                                            if e.elevation_deg else ""))


def spectrum_angles(points: int, setting: Setting | None) -> tuple[np.ndarray | None, str | None]:
    """The angles of a spectrum's points, and a note when they are assumed or unknown."""
    if setting is not None:
        grid = setting.angle_grid_deg
        if grid.size == points:
            return grid, None
        return None, (f"the spectrum has {points} points but {setting.label}'s angle grid has {grid.size}: "
                      "drawn against the point index")
    grid = angle_grid(*DEFAULT_GRID)
    if grid.size == points:
        return grid, "angle grid assumed to be the default (−90° to 90°, step 0.5°): no --config"
    return None, f"angle grid unknown (no --config; {points} points): drawn against the point index"


def spectrum_figure(run: Run, setting: Setting | None) -> ReportFigure:
    out = ReportFigure("spectrum", "MUSIC pseudo-spectrum")
    if run.spectrum_sum is None and run.spectrum_null_frames:
        out.missing = (f"not in this run: spectrum_db is null in all {run.spectrum_null_frames} results that carry it "
                       "(the subspace stage did not run on them)")
        return out
    if run.spectrum_sum is None:
        out.missing = ("not in this run: no result carries spectrum_db (enable the subspace stage and "
                       "pipeline.stages.publish.spectrum: docs/zmq.md)")
        return out
    with np.errstate(invalid="ignore", divide="ignore"):
        average = np.where(run.spectrum_count > 0, run.spectrum_sum / np.maximum(run.spectrum_count, 1), np.nan)
    cells, points = average.shape
    angles, note = spectrum_angles(points, setting)
    if note:
        out.notes.append(note)
    if angles is not None:
        step = angles[1] - angles[0] if angles.size > 1 else 1.0
        extent = [angles[0] - step / 2, angles[-1] + step / 2, cells - 0.5, -0.5]
        xlabel, xs = "angle from broadside (deg)", angles
    else:
        extent = [-0.5, points - 0.5, cells - 0.5, -0.5]
        xlabel, xs = "angle grid point (index)", np.arange(points)

    chosen = run.spectrum_db
    panels = [("average", average, f"Mean over {run.spectrum_frames} frames (mean of dB)")]
    if chosen is not None:
        panels.insert(0, ("frame", chosen, f"Frame {run.spectrum_seq}"))
        if chosen.shape != average.shape:
            out.notes.append(f"frame {run.spectrum_seq}'s spectrum is {chosen.shape[0]}×{chosen.shape[1]}, "
                             f"the average's {cells}×{points}")
    elif run.chosen_seq is not None:
        out.notes.append(f"frame {run.chosen_seq} has no spectrum_db: only the run's mean is drawn")
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(6 * len(panels) + 6, 4.8))
    finite = np.concatenate([p[1][np.isfinite(p[1])].ravel() for p in panels])
    vmin, vmax = (np.percentile(finite, 1), finite.max()) if finite.size else (None, None)
    for ax, (_, data, title) in zip(axes, panels):
        image = ax.imshow(data, aspect="auto", extent=extent if data.shape == average.shape else None,
                          cmap="viridis", vmin=vmin, vmax=vmax, interpolation="nearest")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("cell (index)")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(title)
        _colorbar(fig, image, ax, "pseudo-spectrum (dB)")
    line = axes[-1]
    for _, data, title in panels:
        if data.shape == average.shape:
            line.plot(xs, _quiet_nan(np.nanmean, data, axis=0), label=title)
    if angles is not None:
        _truth_vlines(line, setting)
        if (n := _truth_note(setting)):
            out.notes.append(n)
    line.set_xlabel(xlabel)
    line.set_ylabel("pseudo-spectrum, mean over cells (dB)")
    line.set_title("Mean over cells")
    line.grid(alpha=0.3)
    line.legend(fontsize="small")
    fig.suptitle(out.title)
    fig.tight_layout()
    out.figure = fig
    if run.spectrum_other_shape:
        out.notes.append(f"{run.spectrum_other_shape} frames with a spectrum of another shape are left out of the mean")
    return out


def doa_figure(run: Run, setting: Setting | None) -> ReportFigure:
    out = ReportFigure("doa", "Directions of arrival over time")
    times, time_label = frame_times(run)
    xs, ys = [], []
    for t, f in zip(times, run.frames):
        for row in f.doa_deg:
            row = row[np.isfinite(row)]
            xs.extend([t] * row.size)
            ys.extend(row.tolist())
    if not ys:
        out.missing = "not in this run: no DOA estimate in the results (enable pipeline.stages.subspace.enabled)"
        return out
    fig, ax = plt.subplots(figsize=(12, 5))
    ax.plot(xs, ys, ".", markersize=2.5, alpha=0.5, color="tab:blue", label="estimates (all cells)", rasterized=True)
    _clutter_spans(ax, setting, horizontal=True)
    if setting is not None and setting.truth_known:
        for i, e in enumerate(setting.emitters):
            ax.axhline(e.angle_deg, color=SOURCE_COLOR if e.kind == "source" else JAMMER_COLOR, linestyle="--",
                       linewidth=1.2, gid=f"truth-{e.kind}-{i}", label=f"truth: {e.kind} {e.angle_deg:.4g}°")
    if (n := _truth_note(setting)):
        out.notes.append(n)
    ax.set_xlabel(time_label)
    ax.set_ylabel("direction of arrival from broadside (deg)")
    ax.set_title(f"{len(ys)} estimates over {len(run.frames)} frames")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="upper right", markerscale=4)
    fig.suptitle(out.title)
    fig.tight_layout()
    out.figure = fig
    return out


def source_count_figure(run: Run, setting: Setting | None) -> ReportFigure:
    out = ReportFigure("source_count", "Source count per cell")
    cells = max((f.source_count.size for f in run.frames), default=0)
    if cells == 0:
        out.missing = "not in this run: no source_count in the results (enable pipeline.stages.subspace.enabled)"
        return out
    counts = np.full((len(run.frames), cells), np.nan)
    for i, f in enumerate(run.frames):
        counts[i, : f.source_count.size] = f.source_count
    counts[counts < 0] = np.nan    # -1: not computed
    valid = counts[np.isfinite(counts)]
    if not valid.size:
        out.missing = "not in this run: the subspace stage computed no source count (every cell reads −1)"
        return out
    top = int(valid.max())
    expected = len(setting.emitters) if setting is not None and setting.truth_known else None
    fig, (image_ax, hist) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [2, 1]})
    image = image_ax.imshow(counts.T, aspect="auto", interpolation="nearest", origin="upper",
                            cmap=plt.get_cmap("viridis", top + 1), vmin=-0.5, vmax=top + 0.5,
                            extent=[-0.5, len(run.frames) - 0.5, cells - 0.5, -0.5])
    image_ax.set_xlabel("result (index in the file)")
    image_ax.set_ylabel("cell (index)")
    image_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    image_ax.set_title("Sources detected (blank: not computed)")
    _colorbar(fig, image, image_ax, "sources detected (count)")
    values, frequency = np.unique(valid.astype(int), return_counts=True)
    hist.bar(values, frequency / valid.size, color="tab:blue")
    if expected is not None:
        hist.axvline(expected, color=SOURCE_COLOR, linestyle="--", label=f"scenario: {expected} emitters")
        hist.legend(fontsize="small")
        out.notes.append(f"cells × frames with the scenario's {expected} emitters counted: "
                         f"{100.0 * np.mean(valid == expected):.1f} %")
    hist.set_xlabel("sources detected (count)")
    hist.set_ylabel("cells × frames (fraction)")
    hist.set_title("Distribution over the run")
    hist.grid(alpha=0.3)
    fig.suptitle(out.title)
    fig.tight_layout()
    out.figure = fig
    return out


# ---- adaptive ------------------------------------------------------------------------------------

def beam_figure(run: Run, setting: Setting | None) -> ReportFigure:
    out = ReportFigure("beam_pattern", "MVDR beam pattern")
    pattern = run.beam_pattern_db
    if pattern is None:
        if any(f.has_beam_pattern for f in run.frames):
            out.missing = (f"frame {run.chosen_seq} has no beam pattern (none published, or all null: the adaptive "
                           "stage did not run on it); other frames have one: choose one with --frame")
        elif run.beam_null_frames:
            out.missing = (f"not in this run: beam_pattern_db is null in all {run.beam_null_frames} results that carry "
                           "it (the adaptive stage did not run on them: see its skips under the stage latency)")
        else:
            out.missing = ("not in this run: no result carries beam_pattern_db (enable "
                           "pipeline.stages.adaptive.beam_pattern_points, e.g. 361)")
        return out
    cells, looks, points = pattern.shape
    azimuth = np.linspace(-90.0, 90.0, points)
    shown = min(looks, MAX_LOOK_PANELS)
    if looks > shown:
        out.notes.append(f"the first {shown} of {looks} looks are drawn")
    look_angles = setting.looks_deg if setting is not None and len(setting.looks_deg) == looks else None
    if setting is not None and look_angles is None:
        out.notes.append(f"{setting.label} has {len(setting.looks_deg)} looks, the results {looks}: looks not labelled")
    columns = min(shown, 2)
    rows = math.ceil(shown / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(6 * columns + 1, 4.2 * rows), squeeze=False)
    for axis in axes.ravel()[shown:]:
        axis.remove()
    for look in range(shown):
        ax = axes.ravel()[look]
        data = pattern[:, look, :]
        mean = _quiet_nan(np.nanmean, data, axis=0)
        low, high = _quiet_nan(np.nanmin, data, axis=0), _quiet_nan(np.nanmax, data, axis=0)
        ax.fill_between(azimuth, low, high, color=LOOK_COLOR, alpha=0.2, label=f"min–max over {cells} cells")
        ax.plot(azimuth, mean, color=LOOK_COLOR, label="mean over cells")
        if look_angles is not None:
            ax.axvline(look_angles[look], color=LOOK_COLOR, linestyle="-.", label=f"look {look_angles[look]:g}°")
        _truth_vlines(ax, setting, kinds=("jammer",))
        finite = data[np.isfinite(data)]
        if finite.size:
            ax.set_ylim(max(float(finite.min()), -120.0) - 5, max(float(finite.max()), 0.0) + 5)
        ax.set_xlabel("azimuth from broadside (deg)")
        ax.set_ylabel("gain relative to the look (dB)")
        ax.set_title(f"look {look}" + (f": {look_angles[look]:g}°" if look_angles is not None else ""))
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="lower left")
    if setting is not None and setting.truth_known and not setting.jammers:
        out.notes.append("the scenario has no jammers")
    if (n := _truth_note(setting)):
        out.notes.append(n.replace("truth", "jammer directions"))
    fig.suptitle(f"{out.title}, frame {run.beam_seq}")
    fig.tight_layout()
    out.figure = fig
    return out


def _band(ax, times, values: list[np.ndarray | None], look: int, label: str, color) -> bool:
    """Mean over cells with its min–max band, per frame, for one look; False when all NaN."""
    mean, low, high = (np.full(len(values), np.nan) for _ in range(3))
    for i, v in enumerate(values):
        if v is not None and v.ndim == 2 and v.shape[1] > look:
            column = v[:, look]
            column = column[np.isfinite(column)]
            if column.size:
                mean[i], low[i], high[i] = column.mean(), column.min(), column.max()
    if not np.isfinite(mean).any():
        return False
    ax.fill_between(times, low, high, color=color, alpha=0.2)
    ax.plot(times, mean, ".-", color=color, label=f"{label}: mean over cells (band: min–max)")
    return True


def sinr_figure(run: Run, setting: Setting | None) -> ReportFigure:
    out = ReportFigure("sinr", "Output SINR and null depth over time")
    looks = max((f.sinr_db.shape[1] for f in run.frames if f.sinr_db is not None and f.sinr_db.ndim == 2), default=0)
    has_any = any(f.sinr_db is not None and np.isfinite(f.sinr_db).any() for f in run.frames) or \
        any(f.null_depth_db is not None and np.isfinite(f.null_depth_db).any() for f in run.frames)
    if looks == 0 or not has_any:
        out.missing = ("not in this run: no finite sinr_db / null_depth_db (they are computed against the scenario's "
                       "model: ingest.source synth and pipeline.stages.adaptive.enabled)")
        return out
    times, time_label = frame_times(run)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    look_angles = setting.looks_deg if setting is not None and len(setting.looks_deg) == looks else None
    fig, (sinr, null) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, ax, values in (("SINR", sinr, [f.sinr_db for f in run.frames]),
                             ("null depth", null, [f.null_depth_db for f in run.frames])):
        drawn = False
        for look in range(min(looks, MAX_LOOK_PANELS)):
            label = f"look {look_angles[look]:g}°" if look_angles is not None else f"look {look}"
            drawn |= _band(ax, times, values, look, label, colors[look % len(colors)])
        if drawn:
            ax.legend(fontsize="small")
        else:
            ax.text(0.5, 0.5, f"not in this run: no finite {name}" + (" (the scenario has no jammers)" if name == "null depth" else ""),
                    ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel(time_label)
        ax.grid(alpha=0.3)
    sinr.set_ylabel("output SINR (dB)")
    sinr.set_title("SINR toward the look, against the model")
    null.set_ylabel("shallowest jammer null below the look (dB)")
    null.set_title("Null depth")
    fig.suptitle(out.title)
    fig.tight_layout()
    out.figure = fig
    return out


# ---- compress ------------------------------------------------------------------------------------

def compress_figure(run: Run) -> ReportFigure:
    out = ReportFigure("compress", "Compression: ranks and memory over time")
    rows = [(t, f.compress) for t, f in zip(frame_times(run)[0], run.frames) if f.compress is not None]
    if not rows:
        out.missing = "not in this run: no result carries `compress` (enable pipeline.stages.compress.enabled)"
        return out
    _, time_label = frame_times(run)
    t = np.array([r[0] for r in rows])
    c = [r[1] for r in rows]
    has_loss = any(np.isfinite(x.sinr_loss_mean) for x in c)
    fig, axes = plt.subplots(1, 4 if has_loss else 3, figsize=(20 if has_loss else 16, 4.5))
    ranks, memory, error = axes[0], axes[1], axes[2]
    ranks.fill_between(t, [x.rank_min for x in c], [x.rank_max for x in c], alpha=0.25, label="min–max")
    ranks.plot(t, [x.rank_mean for x in c], label="mean")
    ranks.set_ylabel("rank (count)")
    ranks.set_title("Ranks")
    memory.plot(t, [x.bytes / 1e6 for x in c], label="compressed")
    memory.plot(t, [x.dense_bytes / 1e6 for x in c], "--", label="dense")
    memory.set_ylabel("memory (MB)")
    memory.set_ylim(bottom=0)
    memory.set_title("Memory")
    error.plot(t, [x.error_mean for x in c], label="mean over cells")
    error.plot(t, [x.error_max for x in c], "--", label="max over cells")
    if all(x.error_max > 0 for x in c if np.isfinite(x.error_max)):
        error.set_yscale("log")
    error.set_ylabel("compression error (relative)")
    error.set_title("Error")
    if has_loss:
        loss = axes[3]
        loss.plot(t, [x.sinr_loss_mean for x in c], label="mean over cells and looks")
        loss.plot(t, [x.sinr_loss_max for x in c], "--", label="max")
        loss.set_ylabel("SINR loss from compression (dB)")
        loss.set_title("SINR loss")
    else:
        out.notes.append("sinr_loss_db not in this run")
    for ax in axes:
        ax.set_xlabel(time_label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    formats: dict[str, int] = {}
    for x in c:
        for name, n in x.formats.items():
            formats[name] = formats.get(name, 0) + n
    if formats:
        out.notes.append("formats chosen (cells × frames): " + ", ".join(f"{k}: {v}" for k, v in sorted(formats.items())))
    ratio = np.array([x.dense_bytes / x.bytes for x in c if x.bytes > 0])
    if ratio.size:
        out.notes.append(f"dense / compressed memory: mean {np.mean(ratio):.2f}×")
    fig.suptitle(out.title)
    fig.tight_layout()
    out.figure = fig
    return out


# ---- the input file (--frames) --------------------------------------------------------------------

def input_frames_figure(run: Run, frame_file: FrameFile) -> ReportFigure:
    out = ReportFigure("input_frames", "Input frames and their results")
    if frame_file.stopped:
        out.notes.append(f"{frame_file.path}: the scan stopped at {frame_file.stopped}; the frames after it are not drawn")
    if not frame_file.records:
        out.missing = f"not in this run: {frame_file.path} has no record"
        return out
    latency_by_seq: dict[int, float] = {}
    for f in run.frames:
        latency_by_seq.setdefault(f.seq, f.latency_ms)
    first = min(r.capture_ns for r in frame_file.records)
    capture = np.array([(r.capture_ns - first) / 1e9 for r in frame_file.records])
    has = np.array([r.sequence in latency_by_seq for r in frame_file.records])
    latency = np.array([latency_by_seq.get(r.sequence, math.nan) for r in frame_file.records])
    fig, ax = plt.subplots(figsize=(12, 4))
    ax.plot(capture[has], latency[has], ".", markersize=3, label=f"result: {int(has.sum())} frames", rasterized=True)
    if (~has).any():
        ax.plot(capture[~has], np.zeros(int((~has).sum())), "|", color=JAMMER_COLOR, markersize=14,
                label=f"no result: {int((~has).sum())} frames", gid="no-result")
    ax.set_xlabel("capture time since the file's first record (s)")
    ax.set_ylabel("end-to-end latency (ms)")
    ax.set_title(f"{len(frame_file.records)} records of {frame_file.path}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="upper right")
    fig.suptitle(out.title)
    fig.tight_layout()
    out.figure = fig
    missing = [r.sequence for r in frame_file.records if r.sequence not in latency_by_seq]
    if missing:
        listed = ", ".join(str(s) for s in missing[:20]) + (", …" if len(missing) > 20 else "")
        out.notes.append(f"frames of the file without a result (dropped, or not reached): {listed}")
    in_file = {r.sequence for r in frame_file.records}
    foreign = sum(1 for f in run.frames if f.seq not in in_file)
    if foreign:
        out.notes.append(f"{foreign} results have sequence numbers the file lacks: the run's input was not (only) "
                         "this file, or the scan stopped early")
    return out


def build_figures(run: Run, setting: Setting | None, frame_file: FrameFile | None = None) -> list[ReportFigure]:
    figures = [latency_figure(run, setting), stage_figure(run), counts_figure(run), spectrum_figure(run, setting),
               doa_figure(run, setting), source_count_figure(run, setting), beam_figure(run, setting),
               sinr_figure(run, setting), compress_figure(run)]
    if frame_file is not None:
        figures.insert(3, input_frames_figure(run, frame_file))
    return figures

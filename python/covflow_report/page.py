"""The report as one self-contained HTML page: every figure a PNG in a data: URI, the styles inline,
no reference to anything outside the file."""
from __future__ import annotations

import base64
import html
import io
from datetime import datetime, timezone

import matplotlib.pyplot as plt

from .figures import ReportFigure
from .frames import FrameFile
from .results import Run
from .setting import Setting

STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1300px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; } td { padding: 2px 12px 2px 0; vertical-align: top; }
td:first-child { color: #555; }
.damage { background: #fde8e8; border: 1px solid #c33; padding: 0.6em 1em; }
.missing { background: #f4f4f4; border: 1px dashed #999; padding: 1.2em; color: #444; }
.notes { color: #333; font-size: 0.92em; } img { max-width: 100%; }
"""


def png_data_uri(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _frame_file_row(frame_file: FrameFile) -> tuple[str, str]:
    records = frame_file.records
    if not records:
        return ("input frames (--frames)", f"{frame_file.path}: no record")
    shapes: dict[str, int] = {}
    for r in records:
        shapes[r.shape] = shapes.get(r.shape, 0) + 1
    span = (max(r.capture_ns for r in records) - min(r.capture_ns for r in records)) / 1e9
    return ("input frames (--frames)",
            f"{frame_file.path}: {len(records)} records, sequences {min(r.sequence for r in records)} … "
            f"{max(r.sequence for r in records)}, capture times over {span:.3f} s; "
            + ", ".join(f"{n} × {shape}" for shape, n in shapes.items()))


def _summary_rows(run: Run, setting: Setting | None) -> list[tuple[str, str]]:
    rows = [("results file", run.path),
            ("read", f"{run.lines} lines: {run.results} results, {len(run.reports)} latency reports")]
    if run.frames:
        seqs = [f.seq for f in run.frames]
        rows.append(("sequence numbers", f"{min(seqs)} … {max(seqs)}"))
    last = run.reports[-1] if run.reports else None
    recording = last.get("results_recording") if isinstance(last, dict) else None
    if isinstance(recording, dict):
        rows.append(("results recording", f"{recording.get('written')} lines written, {recording.get('left_out')} left out "
                     f"(its queue was full), {recording.get('failed')} failed, per the last latency report"))
    if run.unknown_topics:
        rows.append(("other topics (ignored)", ", ".join(f"{k}: {v} lines" for k, v in run.unknown_topics.items())))
    if run.malformed_fields:
        rows.append(("unreadable fields (left out)",
                     ", ".join(f"{k} in {v} results" for k, v in sorted(run.malformed_fields.items()))))
    if setting is None:
        rows.append(("configuration", "none given (--config): no scenario truth, budget from the results"))
    else:
        rows.append(("configuration", setting.label))
        rows.append(("input", f"ingest.source: {setting.ingest_source}"))
        if setting.truth_known:
            rows.append(("scenario truth", "; ".join(
                f"{e.kind} {e.angle_deg:.4g}°" + (f" (az {e.azimuth_deg:g}°, el {e.elevation_deg:g}°)" if e.elevation_deg else "")
                + f" ({e.power_db:g} dB)" for e in setting.emitters) or "no emitters"))
        rows.append(("adaptive looks", ", ".join(f"{v:g}°" for v in setting.looks_deg)))
    if run.chosen_seq is not None:
        rows.append(("chosen frame", f"{run.chosen_seq}" + ("" if run.chosen_found else " (not in the results)")))
    else:
        rows.append(("chosen frame", "the last with a spectrum or beam pattern"))
    return rows


def render(run: Run, setting: Setting | None, figures: list[ReportFigure], frame_file: FrameFile | None = None) -> str:
    e = html.escape
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>covflow report: {e(run.path)}</title>", f"<style>{STYLE}</style></head><body>",
             f"<h1>covflow report: {e(run.path)}</h1>"]
    if run.damage is not None:
        parts.append(f'<p class="damage" id="damage"><b>Damaged results file.</b> {e(run.damage.describe(run.path))}.</p>')
    parts.append("<table>")
    rows = _summary_rows(run, setting) + ([_frame_file_row(frame_file)] if frame_file is not None else [])
    parts += [f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in rows]
    parts.append("</table>")
    for f in figures:
        parts.append(f'<h2 id="{e(f.key)}">{e(f.title)}</h2>')
        if f.figure is not None:
            parts.append(f'<img alt="{e(f.title)}" src="{png_data_uri(f.figure)}">')
        else:
            parts.append(f'<p class="missing">{e(f.missing or "")}</p>')
        if f.notes:
            parts.append('<ul class="notes">' + "".join(f"<li>{e(n)}</li>" for n in f.notes) + "</ul>")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(f'<p class="notes">Written by covflow report on {stamp}; docs/report.md says what each figure '
                 "shows.</p></body></html>")
    return "\n".join(parts)

"""Reading a results file: JSON Lines of covflowd's `result` and `latency` messages.

Each line is {"topic": "result" | "latency", "message": {...}} with `message` the JSON object of
docs/zmq.md. Results are folded into compact per-frame records as they are read, so a long run
with spectra and beam patterns (hundreds of MB of JSON) is never held as Python lists: only the
chosen frame's arrays and running sums for the run averages are kept.

A damaged line (cut short, not JSON, not a message) ends the reading: what came before it is the
run, and the damage is kept to be stated.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np


class ResultsError(Exception):
    """The results file cannot be read at all (missing, unreadable)."""


@dataclass
class Damage:
    line: int     # 1-based line number of the damaged line
    reason: str   # what was wrong with it

    def describe(self, path: str) -> str:
        return f"{path}:{self.line}: {self.reason}; the report uses the {self.line - 1} lines before it"


@dataclass
class CompressSummary:
    """The compress stage's object of one result, reduced to what the figures draw."""
    rank_min: float
    rank_mean: float
    rank_max: float
    bytes: float
    dense_bytes: float
    error_mean: float         # mean over cells of `error`
    error_max: float
    sinr_loss_mean: float     # mean over cells and looks of `sinr_loss_db`; NaN when absent
    sinr_loss_max: float
    formats: dict[str, int]   # format name -> cells


@dataclass
class FrameRecord:
    seq: int
    arrival_ns: float
    deadline_ns: float
    latency_ms: float
    late: bool | None
    cells: int
    source_count: np.ndarray          # [cells], -1 where not computed
    doa_deg: list[np.ndarray]         # per cell, the estimates found
    sinr_db: np.ndarray | None        # [cells, looks]
    null_depth_db: np.ndarray | None  # [cells, looks]
    stage_ms: dict[str, float]        # stages that ran: name -> ms
    stage_outcomes: dict[str, str]
    compress: CompressSummary | None
    has_spectrum: bool
    has_beam_pattern: bool

    @property
    def budget_ms(self) -> float:
        return (self.deadline_ns - self.arrival_ns) / 1e6


@dataclass
class Run:
    path: str
    frames: list[FrameRecord] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)
    damage: Damage | None = None
    lines: int = 0                       # lines read as messages (before any damage)
    unknown_topics: dict[str, int] = field(default_factory=dict)
    malformed_fields: dict[str, int] = field(default_factory=dict)   # field -> results where it was unreadable
    chosen_seq: int | None = None        # the frame the per-frame figures show (None: the last)
    # The chosen frame's arrays (the last frame that had them, when no frame was chosen).
    spectrum_seq: int | None = None
    spectrum_db: np.ndarray | None = None          # [cells, points]
    beam_seq: int | None = None
    beam_pattern_db: np.ndarray | None = None      # [cells, looks, points]
    # Run averages of the spectrum in dB, over the frames whose spectrum has the first one's shape.
    spectrum_sum: np.ndarray | None = None
    spectrum_count: np.ndarray | None = None
    spectrum_frames: int = 0
    spectrum_other_shape: int = 0
    chosen_found: bool = False
    # Results that carried the array but with no finite value (the stage did not run on the frame).
    spectrum_null_frames: int = 0
    beam_null_frames: int = 0

    @property
    def results(self) -> int:
        return len(self.frames)

    def note_malformed(self, name: str) -> None:
        self.malformed_fields[name] = self.malformed_fields.get(name, 0) + 1


def number(value: Any) -> float:
    """A JSON number as a float; null (the daemon's NaN) and anything else as NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


def _vector(value: Any) -> np.ndarray:
    if not isinstance(value, list):
        raise ValueError("not an array")
    return np.array([number(v) for v in value], dtype=np.float64)


def _matrix(value: Any) -> np.ndarray:
    """A JSON array of arrays as a 2-D float array; ragged rows are padded with NaN."""
    if not isinstance(value, list):
        raise ValueError("not an array")
    rows = [_vector(row) for row in value]
    width = max((len(r) for r in rows), default=0)
    out = np.full((len(rows), width), np.nan)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def _cube(value: Any) -> np.ndarray:
    if not isinstance(value, list):
        raise ValueError("not an array")
    planes = [_matrix(p) for p in value]
    looks = max((p.shape[0] for p in planes), default=0)
    points = max((p.shape[1] for p in planes), default=0)
    out = np.full((len(planes), looks, points), np.nan)
    for i, p in enumerate(planes):
        out[i, : p.shape[0], : p.shape[1]] = p
    return out


def _dense_floats(value: Any, ndim: int) -> np.ndarray:
    """A rectangular array of numbers/nulls straight into numpy (the fast path for large arrays)."""
    try:
        array = np.array(value, dtype=np.float64)   # None -> nan
    except (TypeError, ValueError):
        array = None
    if array is None or array.ndim != ndim:
        return _matrix(value) if ndim == 2 else _cube(value)
    return array


def _compress_summary(value: Any) -> CompressSummary:
    if not isinstance(value, dict):
        raise ValueError("not an object")
    error = _vector(value.get("error", []))
    loss = _matrix(value["sinr_loss_db"]) if "sinr_loss_db" in value else np.full((0, 0), np.nan)
    formats: dict[str, int] = {}
    for f in value.get("format", []) or []:
        name = "uncompressed (null)" if f is None else str(f)
        formats[name] = formats.get(name, 0) + 1

    def finite_stat(a: np.ndarray, fn) -> float:
        a = a[np.isfinite(a)]
        return float(fn(a)) if a.size else math.nan

    return CompressSummary(
        rank_min=number(value.get("rank_min")), rank_mean=number(value.get("rank_mean")),
        rank_max=number(value.get("rank_max")), bytes=number(value.get("bytes")),
        dense_bytes=number(value.get("dense_bytes")),
        error_mean=finite_stat(error, np.mean), error_max=finite_stat(error, np.max),
        sinr_loss_mean=finite_stat(loss.ravel(), np.mean), sinr_loss_max=finite_stat(loss.ravel(), np.max),
        formats=formats)


class _Reader:
    def __init__(self, run: Run, frame: int | None):
        self.run = run
        self.wanted = frame

    def chosen(self, seq: int) -> bool:
        return self.wanted is None or seq == self.wanted

    def field(self, message: dict, name: str, convert):
        """message[name] converted, or None when absent; unreadable values are counted, not fatal."""
        if name not in message or message[name] is None:
            return None
        try:
            return convert(message[name])
        except (ValueError, TypeError, KeyError):
            self.run.note_malformed(name)
            return None

    def result(self, m: dict) -> None:
        run = self.run
        seq = m.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            run.note_malformed("seq")
            return
        cells = m.get("cells") if isinstance(m.get("cells"), int) else 0
        counts = self.field(m, "source_count", _vector)
        doa = self.field(m, "doa_deg", lambda v: [_vector(row) for row in v])
        stage_ms: dict[str, float] = {}
        outcomes: dict[str, str] = {}
        stages = m.get("stages")
        if isinstance(stages, list):
            for s in stages:
                if isinstance(s, dict) and isinstance(s.get("name"), str):
                    outcomes[s["name"]] = str(s.get("outcome"))
                    if s.get("outcome") == "ran":
                        stage_ms[s["name"]] = number(s.get("ms"))
        elif stages is not None:
            run.note_malformed("stages")
        late = m.get("late")
        record = FrameRecord(
            seq=seq, arrival_ns=number(m.get("arrival_ns")), deadline_ns=number(m.get("deadline_ns")),
            latency_ms=number(m.get("latency_ms")), late=late if isinstance(late, bool) else None,
            cells=cells,
            source_count=counts if counts is not None else np.zeros(0),
            doa_deg=doa if doa is not None else [],
            sinr_db=self.field(m, "sinr_db", _matrix), null_depth_db=self.field(m, "null_depth_db", _matrix),
            stage_ms=stage_ms, stage_outcomes=outcomes,
            compress=self.field(m, "compress", _compress_summary),
            has_spectrum=False, has_beam_pattern=False)

        spectrum = self.field(m, "spectrum_db", lambda v: _dense_floats(v, 2))
        if spectrum is not None and np.isfinite(spectrum).any():
            record.has_spectrum = True
            if self.chosen(seq):
                run.spectrum_seq, run.spectrum_db = seq, spectrum.astype(np.float32)
            if run.spectrum_sum is None:
                run.spectrum_sum = np.zeros(spectrum.shape)
                run.spectrum_count = np.zeros(spectrum.shape, dtype=np.int64)
            if spectrum.shape == run.spectrum_sum.shape:
                finite = np.isfinite(spectrum)
                run.spectrum_sum += np.where(finite, spectrum, 0.0)
                run.spectrum_count += finite
                run.spectrum_frames += 1
            else:
                run.spectrum_other_shape += 1
        elif spectrum is not None:
            run.spectrum_null_frames += 1
        beam = self.field(m, "beam_pattern_db", lambda v: _dense_floats(v, 3))
        if beam is not None and np.isfinite(beam).any():
            record.has_beam_pattern = True
            if self.chosen(seq):
                run.beam_seq, run.beam_pattern_db = seq, beam.astype(np.float32)
        elif beam is not None:
            run.beam_null_frames += 1
        if self.wanted is not None and seq == self.wanted:
            run.chosen_found = True
        run.frames.append(record)


def _messages(lines: Iterable[bytes], run: Run):
    """(topic, message) per line; stops at the first damaged line, recording it in run.damage."""
    for number, raw in enumerate(lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            run.damage = Damage(number, f"not UTF-8 ({e.reason} at byte {e.start})")
            return
        if not text.strip():
            run.damage = Damage(number, "empty line")
            return
        try:
            line = json.loads(text)
        except json.JSONDecodeError as e:
            cut = e.pos >= len(text.rstrip())
            what = "cut short" if cut else "invalid JSON"
            run.damage = Damage(number, f"{what}: {e.msg} (column {e.colno})")
            return
        if not isinstance(line, dict) or not isinstance(line.get("topic"), str) or not isinstance(line.get("message"), dict):
            run.damage = Damage(number, 'not a message: expected {"topic": "...", "message": {...}}')
            return
        run.lines = number
        yield line["topic"], line["message"]


def read_run(path: str, frame: int | None = None) -> Run:
    """Reads a results file. `frame`: the sequence number whose spectrum and beam pattern the
    per-frame figures show (None: the last frame that has them)."""
    run = Run(path=path, chosen_seq=frame)
    reader = _Reader(run, frame)
    try:
        with open(path, "rb") as f:
            for topic, message in _messages(f, run):
                if topic == "result":
                    reader.result(message)
                elif topic == "latency":
                    run.reports.append(message)
                else:
                    run.unknown_topics[topic] = run.unknown_topics.get(topic, 0) + 1
    except OSError as e:
        raise ResultsError(f"{path}: {e.strerror or e}") from e
    return run

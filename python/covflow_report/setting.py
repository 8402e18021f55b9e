"""What the report takes from the run's configuration: the budget, the MUSIC angle grid, the look
directions and the scenario's truth.

The file is the *complete* configuration as covflowd resolves it (`covflowd --print-config`, which
`covflow report --config FILE` writes for the module): every key present, so nothing here repeats
the daemon's defaults. A key the report needs and does not find is an error naming it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class SettingError(Exception):
    """The configuration file is unreadable, not YAML, or lacks a key the report needs."""


@dataclass
class Emitter:
    kind: str             # "source" or "jammer"
    azimuth_deg: float
    elevation_deg: float
    power_db: float
    angle_deg: float      # where a linear array sees it: asin(sin az · cos el), the angle MUSIC estimates


@dataclass
class ClutterSector:
    center_deg: float     # azimuth
    width_deg: float
    power_db: float

    @property
    def span_deg(self) -> tuple[float, float]:
        return self.center_deg - self.width_deg / 2, self.center_deg + self.width_deg / 2


@dataclass
class Setting:
    label: str                          # how the page names the configuration
    budget_ms: float
    angle_grid_deg: np.ndarray          # the subspace stage's MUSIC grid
    looks_deg: list[float]
    geometry: str
    truth_known: bool                   # the input is the scenario generator, so the emitters are the truth
    ingest_source: str
    emitters: list[Emitter] = field(default_factory=list)
    clutter: list[ClutterSector] = field(default_factory=list)

    @property
    def sources(self) -> list[Emitter]:
        return [e for e in self.emitters if e.kind == "source"]

    @property
    def jammers(self) -> list[Emitter]:
        return [e for e in self.emitters if e.kind == "jammer"]


def angle_grid(min_deg: float, max_deg: float, step_deg: float) -> np.ndarray:
    """The subspace stage's grid: θ_i = min + i·step, i = 0 … ⌊(max − min)/step⌋ (docs/stages.md)."""
    count = int(math.floor((max_deg - min_deg) / step_deg + 1e-9)) + 1
    return min_deg + step_deg * np.arange(count)


def _get(tree: Any, dotted: str, path: str) -> Any:
    node = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise SettingError(f"{path}: {dotted}: missing; the report reads the complete configuration "
                               f"(`covflow report --config FILE` resolves it, as `covflowd --print-config` does)")
        node = node[part]
    return node


def _number(tree: Any, dotted: str, path: str) -> float:
    value = _get(tree, dotted, path)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SettingError(f"{path}: {dotted}: expected a number, got {value!r}")
    return float(value)


def _emitters(tree: Any, key: str, kind: str, geometry: str, path: str) -> list[Emitter]:
    items = _get(tree, key, path)
    if not isinstance(items, list):
        raise SettingError(f"{path}: {key}: expected a list, got {items!r}")
    out = []
    for i, item in enumerate(items):
        where = f"{key}[{i}]"
        azimuth = _number(item, "angle_deg", f"{path}: {where}")
        elevation = _number(item, "elevation_deg", f"{path}: {where}") if "elevation_deg" in item else 0.0
        power = _number(item, "power_db", f"{path}: {where}")
        seen = azimuth
        if geometry == "linear":
            seen = math.degrees(math.asin(math.sin(math.radians(azimuth)) * math.cos(math.radians(elevation))))
        out.append(Emitter(kind, azimuth, elevation, power, seen))
    return out


def read_setting(path: str, label: str | None = None) -> Setting:
    try:
        import yaml
    except ImportError as e:
        raise ImportError("yaml") from e
    try:
        with open(path, encoding="utf-8") as f:
            tree = yaml.safe_load(f)
    except OSError as e:
        raise SettingError(f"{path}: {e.strerror or e}") from e
    except yaml.YAMLError as e:
        raise SettingError(f"{path}: not YAML: {e}") from e
    if not isinstance(tree, dict):
        raise SettingError(f"{path}: expected a YAML mapping at the top")
    # Configurations older than planar arrays have no geometry key: their arrays were linear.
    scenario = _get(tree, "scenario", path)
    geometry = str(scenario.get("geometry", "linear")) if isinstance(scenario, dict) else "linear"
    looks = _get(tree, "pipeline.stages.adaptive.looks_deg", path)
    if not isinstance(looks, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in looks):
        raise SettingError(f"{path}: pipeline.stages.adaptive.looks_deg: expected a list of numbers, got {looks!r}")
    source = str(_get(tree, "ingest.source", path))
    return Setting(
        label=label or path,
        budget_ms=_number(tree, "pipeline.budget_ms", path),
        angle_grid_deg=angle_grid(_number(tree, "pipeline.stages.subspace.angle_grid.min_deg", path),
                                  _number(tree, "pipeline.stages.subspace.angle_grid.max_deg", path),
                                  _number(tree, "pipeline.stages.subspace.angle_grid.step_deg", path)),
        looks_deg=[float(v) for v in looks],
        geometry=geometry,
        truth_known=source == "synth",
        ingest_source=source,
        emitters=_emitters(tree, "scenario.sources", "source", geometry, path)
        + _emitters(tree, "scenario.jammers", "jammer", geometry, path),
        clutter=_clutter(scenario, path))


def _clutter(scenario: Any, path: str) -> list[ClutterSector]:
    # Configurations older than clutter sectors have no scenario.clutter: they had none.
    items = scenario.get("clutter", []) if isinstance(scenario, dict) else []
    if not isinstance(items, list):
        raise SettingError(f"{path}: scenario.clutter: expected a list, got {items!r}")
    return [ClutterSector(_number(item, "center_deg", f"{path}: scenario.clutter[{i}]"),
                          _number(item, "width_deg", f"{path}: scenario.clutter[{i}]"),
                          _number(item, "power_db", f"{path}: scenario.clutter[{i}]")) for i, item in enumerate(items)]

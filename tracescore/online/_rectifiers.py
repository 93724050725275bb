"""Rectifiers: how far a judge's pass rate is from people's, per scorer name and version, and the
JSON file that carries them from `tracescore report --rectifiers` to the gauges.

A rectifier is the prediction-powered correction (`tracescore.calibration.corrected_pass_rate`):
the mean of (human - judge) verdicts on the calls people labelled, its sample variance and the
number of labelled calls. The corrected pass rate is the judge's pass rate plus `mean`; its
variance adds `stderr`² to the judge's. The file:

    {"format": "tracescore.rectifiers", "version": 1,
     "rectifiers": [{"name": "Answer Relevancy", "scorer_version": "3f2a...",
                     "mean": -0.12, "variance": 0.15, "n": 50, "stderr": 0.055}]}

(`stderr` is written for people; it is recomputed from `variance` and `n` on reading.)
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracescore._exceptions import ConfigurationError

FORMAT = "tracescore.rectifiers"
FORMAT_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class Rectifier:
    """The correction of one scorer version's pass rate by `n` human labels: `mean` of
    (human - judge) verdicts (1 pass, 0 fail) and its sample `variance`. `version` is the
    results' `tracescore.scorer.version` ("" when they carry none)."""

    name: str
    version: str
    mean: float
    variance: float
    n: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigurationError(f"a rectifier needs a scorer name, got {self.name!r}")
        if not isinstance(self.version, str):
            raise ConfigurationError(f"rectifier {self.name!r}: scorer_version must be a "
                                     f"string, got {self.version!r}")
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ConfigurationError(f"rectifier {self.name!r}: n must be a whole number >= 1, "
                                     f"got {self.n!r}")
        for field, low, high in (("mean", -1.0, 1.0), ("variance", 0.0, 2.0)):
            value = getattr(self, field)
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not math.isfinite(value) or not low <= value <= high):
                raise ConfigurationError(f"rectifier {self.name!r}: {field} must be a number in "
                                         f"[{low:g}, {high:g}], got {value!r}")

    @property
    def stderr(self) -> float:
        """The standard error of `mean`: sqrt(variance / n)."""
        return math.sqrt(self.variance / self.n)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "scorer_version": self.version, "mean": self.mean,
                "variance": self.variance, "n": self.n, "stderr": self.stderr}


def rectifiers_json(rectifiers: Iterable[Rectifier]) -> str:
    """The text of a rectifiers file."""
    items = sorted(rectifiers, key=lambda r: (r.name, r.version))
    _check_unique(items, "rectifiers")
    return json.dumps({"format": FORMAT, "version": FORMAT_VERSION,
                       "rectifiers": [r.to_dict() for r in items]}, indent=2) + "\n"


def read_rectifiers(path: str | os.PathLike[str]) -> tuple[Rectifier, ...]:
    """The rectifiers of the file at `path`; a `ConfigurationError` saying what is wrong with it."""
    where = f"rectifiers file {str(path)!r}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"{where}: not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{where}: invalid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        raise ConfigurationError(f"{where}: not a rectifiers file (expected an object with "
                                 f"\"format\": \"{FORMAT}\", as `tracescore report "
                                 "--rectifiers` writes)")
    if data.get("version") != FORMAT_VERSION:
        raise ConfigurationError(f"{where}: version {data.get('version')!r} is not supported "
                                 f"(this tracescore reads version {FORMAT_VERSION})")
    items = data.get("rectifiers")
    if not isinstance(items, list):
        raise ConfigurationError(f"{where}: \"rectifiers\" must be a list")
    rectifiers = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ConfigurationError(f"{where}: rectifiers[{index}] must be an object")
        missing = [k for k in ("name", "mean", "variance", "n") if k not in item]
        if missing:
            raise ConfigurationError(f"{where}: rectifiers[{index}] has no {missing[0]!r}")
        try:
            rectifiers.append(Rectifier(
                name=item["name"], version=item.get("scorer_version") or "",
                mean=item["mean"], variance=item["variance"], n=item["n"]))
        except ConfigurationError as exc:
            raise ConfigurationError(f"{where}: rectifiers[{index}]: {exc}") from None
    _check_unique(rectifiers, where)
    return tuple(rectifiers)


def _check_unique(rectifiers: Iterable[Rectifier], where: str) -> None:
    seen: set[tuple[str, str]] = set()
    for r in rectifiers:
        if (r.name, r.version) in seen:
            raise ConfigurationError(f"{where}: two rectifiers for scorer {r.name!r} version "
                                     f"{r.version!r}")
        seen.add((r.name, r.version))

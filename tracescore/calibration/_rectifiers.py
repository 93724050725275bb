"""Rectifiers from people's labels: the correction `corrected_pass_rate` adds to a judge's pass
rate, per scorer name and version, written to the file the gateway and `OnlineScorer` export as
gauges (so Prometheus corrects the live pass rate: deploy/prometheus/tracescore-rules.yaml)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from tracescore._exceptions import ConfigurationError
from tracescore.calibration._corrected import disagreement
from tracescore.online.core import Rectifier, rectifiers_json


def rectifier(judge_labelled: Sequence[bool], human_labelled: Sequence[bool], *, name: str,
              version: str = "") -> Rectifier:
    """The rectifier of scorer `name` (`version`: its `tracescore.scorer.version`) from the
    judge's verdicts on the labelled calls and the people's on the same calls, in order."""
    if len(judge_labelled) != len(human_labelled):
        raise ConfigurationError(
            f"{len(judge_labelled)} judge verdicts for {len(human_labelled)} human labels")
    if len(human_labelled) < 2:
        raise ConfigurationError("a rectifier needs at least 2 labelled calls")
    mean, variance = disagreement(judge_labelled, human_labelled)
    return Rectifier(name=name, version=version, mean=mean, variance=variance,
                     n=len(human_labelled))


def write_rectifiers(path: str | os.PathLike[str], rectifiers: Iterable[Rectifier]) -> None:
    """Write a rectifiers file (read back by `read_rectifiers`, the gateway's `rectifiers:` and
    `OnlineScorer(rectifiers=...)`)."""
    from pathlib import Path

    text = rectifiers_json(rectifiers)
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"rectifiers file {os.fspath(path)!r}: cannot write: "
                                 f"{exc.strerror or exc}") from None

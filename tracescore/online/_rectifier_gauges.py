"""The rectifiers as gauges, for Prometheus's corrected pass rate (deploy/prometheus rules):
`tracescore.calibration.rectifier` (mean of human - judge) and
`tracescore.calibration.rectifier_stderr`, by `gen_ai.evaluation.name` and
`tracescore.scorer.version` (left out when the rectifier has none, as the results' metrics do).
No unit: the Collector's Prometheus exporter would name a gauge of unit "1" `..._ratio`."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from tracescore import _semconv as sc
from tracescore.online._rectifiers import Rectifier

RECTIFIER = "tracescore.calibration.rectifier"
RECTIFIER_STDERR = "tracescore.calibration.rectifier_stderr"


class RectifierGauges:
    """The rectifiers known (the last one given per scorer name and version), observed by the
    gauges of every meter they are registered on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[tuple[str, str], Rectifier] = {}

    def add(self, rectifiers: Iterable[Rectifier]) -> None:
        with self._lock:
            for r in rectifiers:
                self._by_key[(r.name, r.version)] = r

    def register(self, meter: Meter) -> None:
        meter.create_observable_gauge(
            RECTIFIER, [self._means],
            description="Mean of (human - judge) pass verdicts on labelled calls: add it to the "
                        "judge's pass rate for the corrected one")
        meter.create_observable_gauge(
            RECTIFIER_STDERR, [self._stderrs],
            description="Standard error of tracescore.calibration.rectifier")

    def _means(self, options: CallbackOptions) -> list[Observation]:
        return [Observation(r.mean, _attributes(r)) for r in self._all()]

    def _stderrs(self, options: CallbackOptions) -> list[Observation]:
        return [Observation(r.stderr, _attributes(r)) for r in self._all()]

    def _all(self) -> list[Rectifier]:
        with self._lock:
            return list(self._by_key.values())


def _attributes(r: Rectifier) -> dict[str, str]:
    attributes = {sc.GEN_AI_EVALUATION_NAME: r.name}
    if r.version:
        attributes[sc.TS_SCORER_VERSION] = r.version
    return attributes

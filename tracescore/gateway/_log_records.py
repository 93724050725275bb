"""The "log" sink's records in the gateway, counted: emitted, exported, dropped by a failed
export, and the gauge of those still batched in memory (what a SIGKILL would lose now; spans are
journaled, these records are not: docs/guarantees.md)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from tracescore.gateway._metrics import GatewayMetrics

EMITTED = "log_records_emitted"
EXPORTED = "log_records_exported"
DROPPED = "log_records_dropped"
UNEXPORTED = "log_records_unexported"


def counted(exporter: Any, metrics: GatewayMetrics) -> tuple[EmittedCounter, CountedLogExporter]:
    """(the processor to add before the batching one, the exporter to batch into), counting in
    `metrics`, and the gauge of records emitted and neither exported nor dropped yet."""
    tally = {EMITTED: 0, EXPORTED: 0, DROPPED: 0}
    metrics.gauge(UNEXPORTED, lambda: tally[EMITTED] - tally[EXPORTED] - tally[DROPPED])
    return EmittedCounter(metrics, tally), CountedLogExporter(exporter, metrics, tally)


class CountedLogExporter:
    """An SDK log exporter that counts what it exported and what a failed export dropped."""

    def __init__(self, exporter: Any, metrics: GatewayMetrics, tally: dict[str, int]) -> None:
        self._exporter = exporter
        self._metrics = metrics
        self._tally = tally

    def export(self, batch: Sequence[Any]) -> Any:
        ok = False
        try:
            result = self._exporter.export(batch)
            ok = getattr(result, "name", "") == "SUCCESS"
            return result
        finally:
            key = EXPORTED if ok else DROPPED
            self._tally[key] += len(batch)  # (one batching thread exports)
            self._metrics.add(key, len(batch))

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        flush = getattr(self._exporter, "force_flush", None)
        return bool(flush(timeout_millis)) if flush is not None else True


class EmittedCounter:
    """A log record processor (placed before the batching one) counting the records emitted."""

    def __init__(self, metrics: GatewayMetrics, tally: dict[str, int]) -> None:
        self._metrics = metrics
        self._tally = tally
        self._lock = threading.Lock()

    def on_emit(self, log_record: Any) -> None:
        with self._lock:
            self._tally[EMITTED] += 1
        self._metrics.add(EMITTED)

    emit = on_emit  # the name before opentelemetry-sdk 1.35

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

"""What result sinks receive: `ScoreRecord` (one scorer run on one span) and the `ResultSink`
protocol. A leaf: the sinks (`_sinks`, `_phoenix_sink`) and the scoring core import it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from opentelemetry.util.types import AttributeValue


@dataclass(frozen=True, slots=True)
class ScoreRecord:
    """One scorer run on one span, as a result sink receives it.

    `attributes` are those of the run's `gen_ai.evaluation.result` event (score, label,
    explanation under content capture, judge usage, `error.type` for a failed run). `scope` is
    what the scorer judged: "call" (the span), "run" (the whole trace, scored at its root span).
    """

    trace_id: int
    span_id: int
    scorer_id: str
    scorer_name: str
    judged: bool
    scorer_version: str
    attributes: Mapping[str, AttributeValue]
    scope: str = "call"


class ResultSink(Protocol):
    """A destination of score records. `emit` never blocks nor raises; the processor that owns
    the sink flushes and shuts it down with itself, and reports its `stats()`."""

    def emit(self, record: ScoreRecord) -> None: ...

    def force_flush(self, timeout_s: float = 30.0) -> bool: ...

    def shutdown(self, timeout_s: float = 30.0) -> None: ...

    def stats(self) -> dict[str, int]: ...

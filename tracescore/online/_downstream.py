"""Results into exported SDK spans: the core's front-door callbacks for the span processor. A
span goes to the downstream processor with the events that landed on it; carrier spans and the
judge's own spans go beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from tracescore._guard import Guard
from tracescore.online._conversation_scope import conversation_carrier_span
from tracescore.online._conversations import Turn
from tracescore.online._delivery import ScoreRun
from tracescore.online._events import EventPayload
from tracescore.online._judge_spans import JudgeSpan, readable_span
from tracescore.online._sinks import carrier_span, with_events


class Downstream:
    """The export processor behind `ScoringSpanProcessor`, fed what scoring produced."""

    def __init__(self, processor: SpanProcessor, guard: Guard) -> None:
        self.processor = processor
        self.resource: Any = None  # of the agent spans seen (for conversation carriers)
        self._guard_events = guard.site("events", "tracescore: could not attach score events")

    def export(self, span: ReadableSpan, events: Sequence[EventPayload]) -> None:
        """A span goes downstream, with the events that landed on it."""
        with self._guard_events:  # never lose the span over its events
            span = with_events(span, events)
        self.processor.on_end(span)

    def carrier(self, run: ScoreRun, end_ns: int) -> None:
        """A carrier span `evaluation {scorer}` beside the evaluated one."""
        self.processor.on_end(carrier_span(
            run.item, run.online.scorer_name, run.events, scored_ns=end_ns,
            agent_name=run.agent,
        ))

    def conversation_carrier(self, run: ScoreRun, turns: Sequence[Turn], end_ns: int) -> None:
        """A conversation's carrier span, then its judge's own spans."""
        self.processor.on_end(conversation_carrier_span(run, turns, end_ns, self.resource))
        for judge in run.judge:  # the judge traced (straight downstream, as `_judge_spans`)
            self.processor.on_end(readable_span(judge, self.resource))

    def judge_spans(self, span: ReadableSpan, spans: Sequence[JudgeSpan]) -> None:
        """The judge's own spans of a run on `span`: straight downstream, never scored."""
        for judge in spans:
            self.processor.on_end(readable_span(judge, span.resource))

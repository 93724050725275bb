"""`Outbound`: what leaves the engine, as forwarded protobuf.

The back half of the gateway's translation. A request with nothing held goes on as it came
(`pass_on`: first offered to `send_inline`, which hands it to the next hop before the
acknowledgement, else journaled; split under the next hop's size limit, `_split`); one with
agent spans held goes on without them (`with_held`). Held spans go on as they came, or with the
evaluation events the scoring core wrote back onto them; carrier spans (beside an evaluated
span, or a conversation's, linked to its turns) and the judge's own calls, traced, are built as
one-span requests. Everything goes to one `Output` (the forwarder, or a file for `rescore`);
rows a restart must not lose are journaled first. The cost the judge reported is counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescore import _semconv as sc
from tracescore.gateway import _otlp
from tracescore.gateway._journal import HELD, PASS, Journal
from tracescore.gateway._metrics import GatewayMetrics
from tracescore.gateway._split import split_request
from tracescore.online.core import (
    MAX_LINKS,
    SCOPE,
    EventPayload,
    JudgeSpan,
    ScoreRun,
    Turn,
    carrier_attributes,
    carrier_fields,
    carrier_time,
)

Item = tuple[int | None, ExportTraceServiceRequest]  # a held span: journal row, one-span request


class Output(Protocol):
    """Where finished requests go (the forwarder, or a file for `rescore`)."""

    def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None: ...


class Outbound:
    """Journals and hands requests to `output`; builds the spans scoring adds."""

    def __init__(self, output: Output, metrics: GatewayMetrics, journal: Journal | None = None,
                 *, send_inline: Callable[..., bool] | None = None,
                 max_request_bytes: int | None = None) -> None:
        self._output = output
        self._metrics = metrics
        self._journal = journal
        self._send_inline = send_inline  # True: the next hop has it (nothing held in it)
        self._max_bytes = max_request_bytes  # requests out are split under it (None: never)

    def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None:
        """`body` (`count` spans) goes on; `ids`: its journal rows, removed once delivered."""
        self._output.put(ids, body, count)

    def journal(self, rows: list[tuple[int, int, bytes]]) -> tuple[int, ...]:
        """Journal `rows` (kind, span count, body): their ids (none without a journal)."""
        if self._journal is None:
            return ()
        return tuple(self._journal.add(rows))

    def pass_on(self, request: ExportTraceServiceRequest, raw: bytes | None, count: int) -> None:
        """A request with nothing held (`raw`: as received, forwarded as is when given)."""
        body = raw if raw is not None else request.SerializeToString()
        if self._max_bytes is not None and len(body) > self._max_bytes:
            parts = self.parts(request)
            ids = self.journal([(PASS, part_count, part) for part, part_count in parts])
            for index, (part, part_count) in enumerate(parts):
                self.put(ids[index:index + 1], part, part_count)
            return
        if self._send_inline is not None and self._send_inline(
                body, count, lambda: self.journal([(PASS, count, body)])):
            return
        self.put(self.journal([(PASS, count, body)]), body, count)

    def with_held(self, held: list[bytes], rest: ExportTraceServiceRequest | None
                  ) -> tuple[int | None, ...]:
        """Journal the one-span requests `held` and what is left of their request (`rest`;
        None: nothing), which goes on; the rows of `held` (None each without a journal)."""
        parts = self.parts(rest) if rest is not None else []
        rows = [(HELD, 1, body) for body in held]
        rows.extend((PASS, part_count, part) for part, part_count in parts)
        ids = self.journal(rows)
        for index, (part, part_count) in enumerate(parts):
            row = ids[len(held) + index] if ids else None
            self.put(() if row is None else (row,), part, part_count)
        return ids[:len(held)] if ids else (None,) * len(held)

    def parts(self, request: ExportTraceServiceRequest) -> list[tuple[bytes, int]]:
        """The request serialized, in parts under the byte limit (`Undeliverable` when a span
        cannot fit even capped: nothing is journaled, the sender is refused)."""
        if self._max_bytes is None or request.ByteSize() <= self._max_bytes:
            return [(request.SerializeToString(), _otlp.count_spans(request))]
        split = split_request(request, self._max_bytes)
        if split.capped:
            self._metrics.add("capped_for_next_hop", split.capped)
        return split.bodies

    def forward(self, row: int | None, single: ExportTraceServiceRequest) -> None:
        """A held span goes on as it is (removed from the journal once delivered)."""
        self.put(() if row is None else (row,), single.SerializeToString(), 1)

    def finished(self, item: Item, events: Sequence[EventPayload]) -> None:
        """A span back from the core, with the events that landed on it: it goes on."""
        row, single = item
        if events:
            span = _otlp.only_span(single)
            self._count_cost(events)
            _otlp.add_events(span, events, span.end_time_unix_nano or time.time_ns())
        self.forward(row, single)

    def carrier(self, run: ScoreRun, end_ns: int) -> None:
        """A carrier span beside the evaluated one: goes on at once (not journaled)."""
        _, single = run.item
        self._count_cost(run.events)
        at, delay_ms = carrier_time(_otlp.only_span(single).end_time_unix_nano, end_ns)
        request = _otlp.carrier_request(
            single, f"{sc.EVALUATION_SPAN_PREFIX} {run.online.scorer_name}",
            carrier_attributes(run.key[1], run.events, run.agent, delay_ms), run.events,
            start_ns=at, end_ns=at, scope=SCOPE.name)
        self.put((), request.SerializeToString(), 1)

    def conversation_carrier(self, run: ScoreRun, turns: Sequence[Turn], end_ns: int) -> None:
        """A conversation's carrier span: a child of its last turn, linked to every turn
        (journaled: its version is marked scored once it is delivered)."""
        self._count_cost(run.events)
        last = turns[-1]
        at, delay_ms = carrier_time(last.end_ns, end_ns)
        evaluated = ExportTraceServiceRequest()
        evaluated.resource_spans.add().scope_spans.add().spans.add(
            trace_id=last.trace_id.to_bytes(16, "big"), span_id=last.span_id.to_bytes(8, "big"))
        request = _otlp.carrier_request(
            evaluated, f"{sc.EVALUATION_SPAN_PREFIX} {run.online.scorer_name}",
            carrier_fields(run, turns, delay_ms), run.events, start_ns=at, end_ns=at,
            scope=SCOPE.name)
        span = _otlp.only_span(request)
        for turn in turns[-MAX_LINKS:-1]:  # the last turn is linked already
            span.links.add(trace_id=turn.trace_id.to_bytes(16, "big"),
                           span_id=turn.span_id.to_bytes(8, "big"))
        body = request.SerializeToString()
        self.put(self.journal([(PASS, 1, body)]), body, 1)
        if run.judge:  # the judge traced, linked to the last turn
            self.judge_spans((None, evaluated), run.judge)

    def judge_spans(self, item: Item, spans: Sequence[JudgeSpan]) -> None:
        """The judge's calls, traced: go on at once (not journaled)."""
        _, single = item
        request = _otlp.judge_request(single, spans)
        self.put((), request.SerializeToString(), len(spans))

    def _count_cost(self, events: Sequence[EventPayload]) -> None:
        cost = 0.0
        for name, attributes in events:
            value = attributes.get(sc.TS_JUDGE_COST_USD)
            if name == sc.GEN_AI_EVALUATION_RESULT and isinstance(value, (int, float)):
                cost += float(value)
        if cost:
            self._metrics.add("judge_cost_usd", cost)

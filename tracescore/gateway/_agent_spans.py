"""`AgentSpans`: the agent spans of an OTLP request, found by the intake.

The front half of the gateway's translation. Cheap rejects first: a request with no marker key
anywhere in its raw protobuf (one substring search per key: the common case) is not parsed any
further, unless it holds spans of a trace with LLM calls whose top span has not come (one of
them may be their agent call: `intake._structure`). Then, per span: the trace-id sampling test
(spans that pass it feed the intake's `TraceCollector` as `OtlpSpanView`s, and the content log
records kept for them), the marker keys, the intake's `AgentReader`. Once the whole request is
in the collector, the agent spans nothing read and the loop tops without marker are read from
the LLM calls below them, and agent spans without content of their own from theirs (those not
here yet wait in the intake's `LlmWait`). An agent-like span nothing reads is counted per
framework and reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Mapping
from typing import Any

from ahocorasick_rs import BytesAhoCorasick
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescore import _semconv as sc
from tracescore.gateway import _otlp
from tracescore.gateway._metrics import GatewayMetrics
from tracescore.online.intake import (
    ITEM_MARKERS,
    AgentReader,
    ContentlessAgent,
    LogContent,
    OtlpSpanView,
    RecognisedCall,
    TraceCollector,
    Unreadable,
    attributes_of,
    from_llm_calls,
    is_top,
    note_unreadable,
    with_event_content,
)

# (resource spans, scope spans, span, index in its scope spans, what it reads as)
Found = tuple[Any, Any, Any, int, RecognisedCall | ContentlessAgent]


class AgentSpans:
    """Reads requests' spans into the collector and finds the agent spans among them."""

    def __init__(self, reader: AgentReader, traces: TraceCollector, log_content: LogContent,
                 metrics: GatewayMetrics) -> None:
        self.reader = reader
        self.traces = traces
        self.log_content = log_content
        self._metrics = metrics
        # every marker text in one pass over a request (Aho-Corasick): a request with none, the
        # common case, costs about 2.4 times less than one substring search per text
        self._markers = BytesAhoCorasick([m.encode() for m in reader.request_markers(ITEM_MARKERS)])

    def find(self, request: ExportTraceServiceRequest, raw: bytes | None, *, threshold: int,
             held: Container[Any], waiting: Container[Any],
             touch: Callable[[int], None] | None = None) -> tuple[list[Found], set[int]]:
        """The agent spans of `request` to hold (none that are `held` or `waiting` already),
        and the traces with spans `waiting` that got spans here. `threshold`: spans of traces
        below it are not read; `touch`: told the trace id of every span read (run scope)."""
        found: list[Found] = []
        touched: set[int] = set()
        only: frozenset[bytes] | None = None  # the traces to read (None: all)
        if raw is not None and not self._markers.find_matches_as_indexes(raw):
            # no marker: read only its spans of traces with LLM calls whose top span has not
            # come yet (one of them may be their agent call: `_structure`)
            looping = self.traces.llm_trace_bytes
            if not looping:
                return found, touched
            only = _awaited_in(raw, looping)
            if not only:
                return found, touched
        reader, traces, log_content = self.reader, self.traces, self.log_content
        tops: list[Any] = []  # spans at the top of a loop not read by their markers
        misses: list[Any] = []  # agent-like spans not read (counted once the request is in)
        watched = reader.watched  # the markers, and the keys of agent-like spans
        readable = watched | ITEM_MARKERS  # spans whose attributes are decoded (once)
        randomness = _otlp.randomness
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for index, span in enumerate(ss.spans):
                    if randomness(span.trace_id) < threshold or (
                            only is not None and span.trace_id not in only):
                        continue
                    keys = {kv.key for kv in span.attributes}
                    if sc.TS_JUDGE in keys:
                        continue  # a judge's own call (`Outbound.judge_spans`): never scored
                    attributes = (attributes_of(span.attributes)
                                  if not readable.isdisjoint(keys) or reader.shaped(keys)
                                  else None)
                    logged = (attributes if attributes is None or not len(log_content)
                              else log_content.with_logged(  # a model call's logged
                                  _otlp.key_of(span), attributes))  # messages
                    view = OtlpSpanView(span)
                    traces.add_span(view, logged, marks=touch is not None)
                    if logged is not None and log_content.kept:  # its messages may come
                        log_content.note_call(  # later: read then (`Engine.content_logged`)
                            _otlp.key_of(span), int.from_bytes(span.parent_span_id, "big")
                            or None, span.start_time_unix_nano, logged)
                    trace_id = int.from_bytes(span.trace_id, "big")
                    if touch is not None:
                        touch(trace_id)
                    if waiting:
                        touched.add(trace_id)
                    parent = int.from_bytes(span.parent_span_id, "big") or None
                    top = is_top(parent, view.kind)
                    if top:  # nothing above its LLM calls is to come
                        traces.loop_ended(trace_id)
                    if watched.isdisjoint(keys):
                        if top or reader.agent_named(span.name, keys):  # below: its top's first
                            (tops if top else misses).append(
                                (rs, ss, span, index, None, keys, attributes))
                        continue
                    call, read = self.read(span, attributes if attributes is not None
                                           else attributes_of(span.attributes))
                    if reader.wrapper(call, parent):
                        continue  # a wrapper of one model turn: part of the agent call above
                    if not isinstance(call, (RecognisedCall, ContentlessAgent)):
                        if top:
                            tops.append((rs, ss, span, index, call, keys, read))
                        elif call is not None:
                            misses.append((rs, ss, span, index, call, None, read))
                        continue
                    key = _otlp.key_of(span)
                    traces.mark_agent(*traces.at(key))  # the LLM calls below it are its own
                    if key not in held and key not in waiting:
                        found.append((rs, ss, span, index, call))
        # the request is in: agent spans not read are read from their LLM calls (the inner
        # ones first: those calls are theirs), then loop tops by the trace's shape
        unread = []
        for rs, ss, span, index, call, keys, read in [*misses, *tops]:
            key = _otlp.key_of(span)
            at = traces.at(key)
            agent = (reader.unreadable_with_calls(traces, *at, call, span.name, read)
                     or (reader.structural(traces, *at, int.from_bytes(span.parent_span_id, "big")
                                           or None, OtlpSpanView(span).kind,
                                           span.name, keys, read) if keys is not None else None))
            if agent is not None:
                traces.mark_agent(*at)
                if key not in held and key not in waiting:
                    found.append((rs, ss, span, index, agent))
            elif call is not None:
                unread.append((span, call, read))
        for span, call, read in unread:  # not one that only wraps agent spans
            if not traces.agents_below(*traces.at(_otlp.key_of(span))):
                self._count(call, span.name, read)
        return self._read_contentless(found), touched

    def read(self, span: Any, attributes: Mapping[str, Any]) -> tuple[Any, Mapping[str, Any]]:
        """`AgentReader.read` of a span, with its content log records when it is not read
        without them (part of them may have arrived: it then waits as one without content)."""
        events = [(e.name, e.attributes) for e in span.events]
        call, read = self.reader.read(span.name, attributes, events, attributes_of)
        if not isinstance(call, RecognisedCall) and len(self.log_content):
            joined, decode = self.log_content.joined(_otlp.key_of(span), events, attributes_of)
            if joined is not events:
                logged, read_logged = self.reader.read(span.name, attributes, joined, decode)
                if isinstance(logged, RecognisedCall):
                    return logged, read_logged
        return call, read

    def read_held(self, span: Any) -> RecognisedCall | ContentlessAgent:
        """An agent span journaled before a restart, read again (one not read by its markers
        was found by the trace's shape or waits for its LLM calls, which are gone)."""
        call, read = self.reader.read(span.name, attributes_of(span.attributes),
                                      [(e.name, e.attributes) for e in span.events],
                                      attributes_of)
        if isinstance(call, RecognisedCall):
            return call
        return self.reader.held(call, span.name, read)

    def read_logged(self, span: Any) -> RecognisedCall | None:
        """A waiting agent span read with the content log records joined to it (None: not
        read with them either)."""
        events, decode = self.log_content.joined(
            _otlp.key_of(span), [(e.name, e.attributes) for e in span.events], attributes_of)
        call, _ = self.reader.read(span.name, attributes_of(span.attributes), events, decode,
                                   contentless=False)
        return call if isinstance(call, RecognisedCall) else None

    def unreadable(self, agent: ContentlessAgent, span: Any) -> None:
        """Count and log (once per framework and reason) an agent read from its LLM calls that
        could not be read."""
        attributes = _readable(span)
        unreadable = self.reader.unread(agent, span.name, attributes)
        if unreadable is not None:
            self._count(unreadable, span.name, attributes)

    def _count(self, unreadable: Unreadable, name: str, attributes: Mapping[str, Any]) -> None:
        self._metrics.add_labelled("unreadable_agent_spans",
                                   (unreadable.framework, unreadable.reason))
        note_unreadable(unreadable, name, attributes)

    def _read_contentless(self, found: list[Found]) -> list[Found]:
        """`found` with its agent spans without content read from their LLM calls where these
        are here; one that only contains agent spans below it is no agent call of its own."""
        kept = []
        for rs, ss, span, index, call in found:
            at = self.traces.at(_otlp.key_of(span))
            hollow = self.reader.hollow(call)  # its input holds no question
            if hollow is not None:
                calls = self.traces.llm_calls_of(*at)
                call = from_llm_calls(hollow, calls) or call if calls else call
            if isinstance(call, ContentlessAgent):
                read = self.reader.from_trace(self.traces, *at, call)
                if read is None:
                    continue
                call = read
            kept.append((rs, ss, span, index, call))
        return kept


# a span's trace id as serialized: field 1, 16 bytes (lookahead: overlapping matches too)
_TRACE_ID = re.compile(rb"(?=\x0a\x10(.{16}))", re.DOTALL)
_SEARCHED = 32  # awaited traces looked for one by one; past it, the request's ids are scanned


def _awaited_in(raw: bytes, awaited: set[bytes]) -> frozenset[bytes]:
    """The awaited trace ids (16 bytes each) a serialized request holds spans of: a substring
    search per id for a few, else one scan of the request's trace-id fields (a chance match of
    other bytes is harmless: it only adds ids to look up)."""
    if len(awaited) <= _SEARCHED:
        return frozenset(tid for tid in tuple(awaited) if tid in raw)
    return frozenset(awaited.intersection(_TRACE_ID.findall(raw)))


def _readable(span: Any) -> Mapping[str, Any]:
    """What the recognisers read of an OTLP span: its attributes, with the GenAI content its
    events recorded (`with_event_content`)."""
    attributes = attributes_of(span.attributes)
    if not span.events:
        return attributes
    return with_event_content(attributes, ((e.name, e.attributes) for e in span.events),
                              attributes_of)

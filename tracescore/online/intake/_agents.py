"""`AgentReader`: one reading of agent spans for both front doors.

Built once from a door's recognisers, it answers for a finished span (its name, attributes
and events as its door holds them) with one outcome:

- a `RecognisedCall`: an agent call, read;
- a `ContentlessAgent`: an agent span without content of its own, to be read from the LLM calls
  below it in its trace (`from_trace`; the gateway waits for them a bounded time);
- an `Unreadable`: it looks like an agent call but cannot be read (the door counts it and
  calls `note_unreadable`);
- None: no agent call (the common case, decided on `watched` keys before anything is read).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tracescore.online.intake._collector import TraceCollector
from tracescore.online.intake._diagnose import Diagnoser, Unreadable
from tracescore.online.intake._event_content import with_event_content
from tracescore.online.intake._generic import read_generic
from tracescore.online.intake._llm_calls import ContentlessAgent, contentless_reader, from_llm_calls
from tracescore.online.intake._readers import RecognisedCall, Recogniser
from tracescore.online.intake._recognise import recognise, recogniser_markers
from tracescore.online.intake._trace_input import TraceSpans

Outcome = RecognisedCall | ContentlessAgent | Unreadable | None


class AgentReader:
    """The recognise chain, agents without content and the diagnosis, for one door."""

    def __init__(self, recognisers: Sequence[Recogniser]) -> None:
        self.recognisers = tuple(recognisers)
        self.contentless = contentless_reader(self.recognisers)
        self.chain_markers = recogniser_markers(self.recognisers)
        self.markers = self.chain_markers | self.contentless.markers  # keys of spans read
        self.diagnose = Diagnoser(self.recognisers)
        self.watched = self.markers | self.diagnose.keys  # and of spans diagnosed

    def __bool__(self) -> bool:
        return bool(self.recognisers)

    def read(self, name: str, attributes: Mapping[str, Any],
             events: Iterable[tuple[str, Any]] = (),
             decode: Callable[[Any], Mapping[str, Any]] | None = None, *,
             contentless: bool = True) -> tuple[Outcome, Mapping[str, Any]]:
        """(outcome, the attributes read: with the content `events` recorded) for a span whose
        keys meet `watched`; `decode`: how an event's attributes become a mapping (OTLP);
        `contentless`: whether an agent span without content may be read from its LLM calls."""
        if events:
            attributes = with_event_content(attributes, events, decode or dict)
        found: Outcome = None
        if not self.markers.isdisjoint(attributes):
            found = recognise(name, attributes, self.recognisers)
            if found is None and contentless and self.contentless:
                found = self.contentless(name, attributes)
        if found is None:
            found = self.diagnose(name, attributes)
        if isinstance(found, (ContentlessAgent, Unreadable)):  # its content under other keys
            found = read_generic(name, attributes, found) or found
        return found, attributes

    @staticmethod
    def from_trace(traces: TraceCollector, trace: TraceSpans | None, span_id: int,
                   agent: ContentlessAgent) -> RecognisedCall | ContentlessAgent | None:
        """An agent span without content, read from the LLM calls below it in `trace` (kept
        by `traces`: `traces.at(key)`, or what `end_span` returned): the call; `agent` itself
        when they are not there (yet); None when it only contains agent spans (no agent call
        of its own)."""
        read = from_llm_calls(agent, traces.llm_calls_of(trace, span_id))
        if read is not None:
            return read
        return None if traces.agents_below(trace, span_id) else agent

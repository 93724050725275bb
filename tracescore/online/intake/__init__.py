"""The intake: everything between "a span ended" and "here is something to score", read the same
way for both front doors. This module is its internal API: the front doors (the span processor
and the gateway) import span reading from here, never from the modules behind it.

- views: `SpanView`, over SDK spans (`SdkSpanView`) and OTLP protobuf spans (`OtlpSpanView`);
- recognition: `recognise`, `recogniser_markers`, `build_recognisers`, `RecognisedCall`;
- LLM calls and agents without content: `read_llm_call`, `LLM_MARKERS`, `contentless_reader`,
  `from_llm_calls`, `ContentlessAgent`; content from span events: `with_event_content`;
- trace input and run steps: `read_span`, `read_mark`, `TraceSpans`, `TraceInput`, `EMPTY`,
  `TraceLimits`, `RunSource`, `agent_above`;
- the per-trace collection: `TraceCollector`, `BufferLimits`, `collector_from`;
- unreadable spans: `Diagnoser`, `Unreadable`, `REASONS`, `note_unreadable`, `suggest_mapping`.
"""

from tracescore.online._collector import BufferLimits, TraceCollector, collector_from
from tracescore.online._diagnose import REASONS, Diagnoser, Unreadable, suggest_mapping
from tracescore.online._diagnose import note as note_unreadable
from tracescore.online._event_content import with_event_content
from tracescore.online._llm_calls import (
    LLM_MARKERS,
    ContentlessAgent,
    contentless_reader,
    from_llm_calls,
    read_llm_call,
)
from tracescore.online._recognise import (
    RecognisedCall,
    build_recognisers,
    recognise,
    recogniser_markers,
)
from tracescore.online._run_steps import RunSource, agent_above, read_mark
from tracescore.online._trace_input import EMPTY, TraceInput, TraceLimits, TraceSpans, read_span
from tracescore.online.intake._view import (
    OtlpSpanView,
    SdkSpanView,
    SpanEvent,
    SpanView,
    attributes_of,
    value_of,
)

__all__ = [
    "EMPTY",
    "LLM_MARKERS",
    "REASONS",
    "BufferLimits",
    "ContentlessAgent",
    "Diagnoser",
    "OtlpSpanView",
    "RecognisedCall",
    "RunSource",
    "SdkSpanView",
    "SpanEvent",
    "SpanView",
    "TraceCollector",
    "TraceInput",
    "TraceLimits",
    "TraceSpans",
    "Unreadable",
    "agent_above",
    "attributes_of",
    "build_recognisers",
    "collector_from",
    "contentless_reader",
    "from_llm_calls",
    "note_unreadable",
    "read_llm_call",
    "read_mark",
    "read_span",
    "recognise",
    "recogniser_markers",
    "suggest_mapping",
    "value_of",
    "with_event_content",
]

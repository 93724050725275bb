"""The intake: everything between "a span ended" and "here is something to score", read the same
way for both front doors. This module is its internal API: the front doors (the span processor
and the gateway) and the scoring core import span reading from here, never from the modules
behind it (`_recognise`, `_frameworks`, `_readers`, `_messages`, `_unwrap`, `_event_content`,
`_log_content`, `_generic`, `_llm_calls`, `_shaped`, `_replies`, `_trace_input`, `_run_steps`,
`_collector`, `_diagnose`, `_view`, `_llm_wait`).

- views: `SpanView`, over SDK spans (`SdkSpanView`) and OTLP protobuf spans (`OtlpSpanView`);
- reading agent spans, one outcome per span (read, wait for LLM calls, unreadable, none):
  `AgentReader`;
- recognition: `recognise`, `recogniser_markers`, `build_recognisers`, `as_recognisers`,
  `RecognisedCall`, `Recogniser`, `AgentMapping`, `GENAI`;
- LLM calls and agents without content: `read_llm_call`, `LLM_MARKERS`, `contentless_reader`,
  `from_llm_calls`, `ContentlessAgent`, `LlmCall`; content from span events: `with_event_content`;
  content from log records joined by trace and span id: `LogContent`;
  content under generic keys of an agent span (any namespace): `generic_call`;
- recorded values: `as_input` (a configured input), `unwrap_input` / `unwrap_output` (the
  encodings frameworks record them in, undone in the worker);
- trace input and run steps: `read_span`, `read_mark`, `Item`, `TraceSpans`, `TraceInput`,
  `EMPTY`, `TraceLimits`, `as_trace_limits`, `RunSource`, `agent_above`, `run_of`;
- the per-trace collection (both doors): `TraceCollector` (`add_span`, `end_span`, `at`),
  `BufferLimits`, `collector_from`, `in_process`, `trace_input_of`; what one span recorded:
  `ITEM_MARKERS`, `error_of`; agent spans without content waiting, bounded in time and number,
  for the LLM calls below them (a door whose spans come in any order): `LlmWait`, `Waiting`;
- agent calls found by the trace's shape (`AgentReader.structural`, `.wrapper`, `.hollow`):
  `starts_llm_call`, `convention_of`;
- unreadable spans: `Diagnoser`, `Unreadable`, `REASONS`, `note_unreadable`, `suggest_mapping`;
  a mapping that pins a call found by the trace's shape: `pinned_mapping` (from `generic_keys`).
"""

from tracescore.online.intake._agents import AgentReader
from tracescore.online.intake._collector import (
    BufferLimits,
    TraceCollector,
    collector_from,
    in_process,
    trace_input_of,
)
from tracescore.online.intake._diagnose import (
    REASONS,
    Diagnoser,
    Unreadable,
    pinned_mapping,
    suggest_mapping,
)
from tracescore.online.intake._diagnose import note as note_unreadable
from tracescore.online.intake._event_content import with_event_content
from tracescore.online.intake._generic import generic_call, generic_keys
from tracescore.online.intake._llm_calls import (
    LLM_MARKERS,
    ContentlessAgent,
    LlmCall,
    contentless_reader,
    from_llm_calls,
    read_llm_call,
)
from tracescore.online.intake._llm_wait import LlmWait, Waiting
from tracescore.online.intake._log_content import LogContent
from tracescore.online.intake._messages import as_input
from tracescore.online.intake._readers import GENAI
from tracescore.online.intake._recognise import (
    AgentMapping,
    RecognisedCall,
    Recogniser,
    as_recognisers,
    build_recognisers,
    recognise,
    recogniser_markers,
)
from tracescore.online.intake._recorded import ITEM_MARKERS, error_of
from tracescore.online.intake._run_steps import RunSource, agent_above, read_mark, run_of
from tracescore.online.intake._structure import convention_of, is_top, starts_llm_call
from tracescore.online.intake._trace_input import (
    EMPTY,
    Item,
    TraceInput,
    TraceLimits,
    TraceSpans,
    as_trace_limits,
    read_span,
)
from tracescore.online.intake._unwrap import unwrap_input, unwrap_output
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
    "GENAI",
    "ITEM_MARKERS",
    "LLM_MARKERS",
    "REASONS",
    "AgentMapping",
    "AgentReader",
    "BufferLimits",
    "ContentlessAgent",
    "Diagnoser",
    "Item",
    "LlmCall",
    "LlmWait",
    "LogContent",
    "OtlpSpanView",
    "RecognisedCall",
    "Recogniser",
    "RunSource",
    "SdkSpanView",
    "SpanEvent",
    "SpanView",
    "TraceCollector",
    "TraceInput",
    "TraceLimits",
    "TraceSpans",
    "Unreadable",
    "Waiting",
    "agent_above",
    "as_input",
    "as_recognisers",
    "as_trace_limits",
    "attributes_of",
    "build_recognisers",
    "collector_from",
    "contentless_reader",
    "convention_of",
    "error_of",
    "from_llm_calls",
    "generic_call",
    "generic_keys",
    "in_process",
    "is_top",
    "note_unreadable",
    "pinned_mapping",
    "read_llm_call",
    "read_mark",
    "read_span",
    "recognise",
    "recogniser_markers",
    "run_of",
    "starts_llm_call",
    "suggest_mapping",
    "trace_input_of",
    "unwrap_input",
    "unwrap_output",
    "value_of",
    "with_event_content",
]

"""The judge traced: each judge call of a scorer run becomes a GenAI `chat` client span.

The calls of one scorer result share one new trace of their own (each call a root span in it),
linked to the evaluated span and marked `tracescore.span.judge=true`, which every front door checks
before reading a span, so nothing ever scores the judge. The result's evaluation event carries
the trace id (`tracescore.judge.trace_id`). The spans are built after the run, where the result
is delivered (the agent's thread never sees them), as neutral `JudgeSpan`s each front door turns
into its own span type (`readable_span` here; the gateway builds OTLP).

Switched off per scorer with `OnlineScorer(trace_judge=False)`, `trace_judge: false` on a
gateway scorer, or TRACESCORE_TRACE_JUDGE=false.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags
from opentelemetry.util.types import AttributeValue

from tracescore import _semconv as sc
from tracescore.scoring._judge_trace import JudgeCall

SCOPE = InstrumentationScope("tracescore.judge")
_ids = RandomIdGenerator()


@dataclass(frozen=True, slots=True)
class JudgeSpan:
    """One judge call as a span: ids, timing, attributes and the evaluated span it links to."""

    trace_id: int
    span_id: int
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, AttributeValue]
    error: bool
    evaluated: tuple[int, int]  # (trace id, span id) of the span the judge evaluated


def judge_spans(calls: Sequence[JudgeCall], evaluated: tuple[int, int], *, scorer_id: str,
                scorer_name: str, result: dict[str, AttributeValue] | None) -> list[JudgeSpan]:
    """The spans of one scorer run's judge `calls`, in one new trace; its id goes on `result`
    (the evaluation event's attributes) when given."""
    if not calls:
        return []
    trace_id = _ids.generate_trace_id()
    if result is not None:
        result[sc.TS_JUDGE_TRACE_ID] = trace.format_trace_id(trace_id)
    return [JudgeSpan(trace_id=trace_id, span_id=_ids.generate_span_id(),
                      name=f"{sc.OP_CHAT} {call.model}", start_ns=call.start_ns,
                      end_ns=max(call.end_ns, call.start_ns),
                      attributes=judge_attributes(call, evaluated, scorer_id, scorer_name),
                      error=call.error_type is not None, evaluated=evaluated)
            for call in calls]


def judge_attributes(call: JudgeCall, evaluated: tuple[int, int], scorer_id: str,
                     scorer_name: str) -> dict[str, AttributeValue]:
    """The attributes of the `chat` span of one judge call (`run_evals` makes its own spans)."""
    attributes: dict[str, AttributeValue] = {
        sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
        sc.GEN_AI_REQUEST_MODEL: call.model,
        sc.TS_JUDGE: True,
        sc.TS_JUDGE_STEP: call.step,
        sc.TS_SCORER_ID: scorer_id,
        sc.GEN_AI_EVALUATION_NAME: scorer_name,
        sc.TS_EVALUATED_SPAN_ID: trace.format_span_id(evaluated[1]),
    }
    provider, _, rest = call.model.partition("/")
    if rest:
        attributes[sc.GEN_AI_PROVIDER_NAME] = provider
    for key, value in ((sc.GEN_AI_USAGE_INPUT_TOKENS, call.input_tokens),
                       (sc.GEN_AI_USAGE_OUTPUT_TOKENS, call.output_tokens),
                       (sc.TS_COST_USD, call.cost_usd),
                       (sc.GEN_AI_RESPONSE_MODEL, call.response_model),
                       (sc.GEN_AI_RESPONSE_ID, call.response_id),
                       (sc.ERROR_TYPE, call.error_type)):
        if value is not None:
            attributes[key] = value
    if call.finish_reasons:
        attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = list(call.finish_reasons)
    return attributes


def readable_span(span: JudgeSpan, resource: Any) -> ReadableSpan:
    """`span` as a finished SDK span (with the evaluated span's `resource`)."""
    flags = TraceFlags(TraceFlags.SAMPLED)
    evaluated = SpanContext(trace_id=span.evaluated[0], span_id=span.evaluated[1],
                            is_remote=False, trace_flags=flags)
    return ReadableSpan(
        name=span.name,
        context=SpanContext(trace_id=span.trace_id, span_id=span.span_id, is_remote=False,
                            trace_flags=flags),
        parent=None, resource=resource, attributes=span.attributes,
        links=[Link(evaluated)], kind=SpanKind.CLIENT,
        status=trace.Status(trace.StatusCode.ERROR if span.error else trace.StatusCode.UNSET),
        start_time=span.start_ns, end_time=span.end_ns, instrumentation_scope=SCOPE)

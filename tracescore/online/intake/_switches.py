"""The switches that make frameworks record prompts and answers, by the convention their spans
follow: most record none unless told to (content can be sensitive), and an agent span without
content cannot be judged. A diagnosis of such a span names the switch (docs/gateway.md, "Why is
my agent not scored?", keeps the same table for people).

A span that names its producer (`gen_ai.provider.name`, or the older `gen_ai.system`, on an agent
span: the framework, e.g. `autogen`) gets that producer's own entry when `PRODUCERS` has one,
instead of the list of every switch its convention's producers have."""

from __future__ import annotations

from collections.abc import Mapping

from tracescore import _semconv as sc

# convention -> what turns content on, for the producers of that convention we know
SWITCHES: Mapping[str, str] = {
    "genai": (
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true for the OpenTelemetry GenAI "
        "instrumentations (SPAN_ONLY or SPAN_AND_EVENT for Google ADK and the newer "
        "conventions), EnableSensitiveData = true for Microsoft.Extensions.AI and Agent "
        "Framework, SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true "
        "for Semantic Kernel"),
    "openinference": (
        "OPENINFERENCE_HIDE_INPUTS and OPENINFERENCE_HIDE_OUTPUTS unset or false (or the "
        "instrumentor's TraceConfig with hide_inputs / hide_outputs false)"),
    "traceloop": "TRACELOOP_TRACE_CONTENT=true (its default; false hides prompts and answers)",
    "pydantic_ai": ("include_content=True in pydantic-ai's InstrumentationSettings or "
                    "logfire.instrument_pydantic_ai (its default)"),
    "vercel_ai": ("experimental_telemetry: {isEnabled: true, recordInputs: true, "
                  "recordOutputs: true} on the AI SDK call (recordInputs and recordOutputs "
                  "default to true)"),
}


# producer (lower case, as its spans name it) -> what makes its agent calls readable
PRODUCERS: Mapping[str, str] = {
    "autogen": (
        "AutoGen (autogen-core 0.7) records no prompt or answer on its spans, and no switch "
        "turns them on: its invoke_agent span is read from the model calls below it when they "
        "carry content (an instrumentation of its model client with content capture, e.g. "
        "opentelemetry-instrumentation-openai-v2 2.x with "
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY), or set the question "
        "and answer on the span yourself (gen_ai.input.messages / gen_ai.output.messages)"),
}
HINT = "if its framework's content capture is off, it records content with"
PRODUCER_HINT = "about its framework:"


def switch_hint(convention: str, producer: str | None = None) -> str | None:
    """What turns content on for the span's `producer` when we know it, else for its
    convention's producers (a missing attribute may be a switch that is off, or content under
    other keys: `inspect` suggests a mapping for those); None for others (a user's mapping, a
    framework we know no switch of)."""
    own = PRODUCERS.get(producer.strip().lower()) if producer else None
    if own is not None:
        return f"{PRODUCER_HINT} {own}"
    switch = SWITCHES.get(convention)
    return None if switch is None else f"{HINT} {switch}"


def producer_of(attributes: Mapping[str, object]) -> str | None:
    """The producer an agent span names (`gen_ai.provider.name`, else `gen_ai.system`)."""
    for key in (sc.GEN_AI_PROVIDER_NAME, sc.GEN_AI_SYSTEM):
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None

"""The switches that make frameworks record prompts and answers, by the convention their spans
follow: most record none unless told to (content can be sensitive), and an agent span without
content cannot be judged. A diagnosis of such a span names the switch (docs/gateway.md, "Why is
my agent not scored?", keeps the same table for people)."""

from __future__ import annotations

from collections.abc import Mapping

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


HINT = "if its framework's content capture is off, it records content with"


def switch_hint(convention: str) -> str | None:
    """What turns content on for a convention's producers (a missing attribute may be a switch
    that is off, or content under other keys: `inspect` suggests a mapping for those); None for
    others (a user's mapping, a framework we know no switch of)."""
    switch = SWITCHES.get(convention)
    return None if switch is None else f"{HINT} {switch}"

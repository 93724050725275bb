"""Test helpers for tracescore and its users: a real OTLP receiver, a stub OpenAI-compatible judge,
the scoring gateway as a process and a real OpenTelemetry Collector (built from the project's manifest).

Not imported by `import tracescore`; pytest fixtures live in `tracescore.testing.pytest_plugin`
(`pytest_plugins = ["tracescore.testing.pytest_plugin"]`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracescore.testing._decode import (
    MetricPoint,
    ReceivedEvent,
    ReceivedLink,
    ReceivedLog,
    ReceivedMetric,
    ReceivedSpan,
    spans_from_otlp_json,
)
from tracescore.testing._gateway_process import GatewayProcess
from tracescore.testing._receiver import OTLPReceiver, ReceivedRequest
from tracescore.testing._stub_llm import StubLLMServer
from tracescore.testing._stub_replies import Reply, StubRequest

__all__ = [
    "GatewayProcess",
    "MetricPoint",
    "OTLPReceiver",
    "OTelCollector",
    "ReceivedEvent",
    "ReceivedLink",
    "ReceivedLog",
    "ReceivedMetric",
    "ReceivedRequest",
    "ReceivedSpan",
    "Reply",
    "StubLLMServer",
    "StubRequest",
    "collector_binary",
    "spans_from_otlp_json",
]

if TYPE_CHECKING:
    from tracescore.testing._collector import OTelCollector, collector_binary


def __getattr__(name: str) -> Any:
    # imported on first use, so `python -m tracescore.testing._collector` runs it fresh
    if name in ("OTelCollector", "collector_binary"):
        from tracescore.testing import _collector

        return getattr(_collector, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

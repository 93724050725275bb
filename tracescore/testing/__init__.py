"""Test helpers for tracescore and its users: a real OTLP receiver and a stub OpenAI-compatible judge.

Not imported by `import tracescore`; pytest fixtures live in `tracescore.testing.pytest_plugin`
(`pytest_plugins = ["tracescore.testing.pytest_plugin"]`).
"""

from __future__ import annotations

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
from tracescore.testing._stub_llm import Reply, StubLLMServer, StubRequest

__all__ = [
    "GatewayProcess",
    "MetricPoint",
    "OTLPReceiver",
    "ReceivedEvent",
    "ReceivedLink",
    "ReceivedLog",
    "ReceivedMetric",
    "ReceivedRequest",
    "ReceivedSpan",
    "Reply",
    "StubLLMServer",
    "StubRequest",
    "spans_from_otlp_json",
]

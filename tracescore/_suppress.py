"""OpenTelemetry instrumentation suppression: the judge runs inside it, instrumentation honours it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import context as otel_context

SUPPRESS_KEY = otel_context._SUPPRESS_INSTRUMENTATION_KEY  # the key every OTel instrumentation checks


def is_suppressed() -> bool:
    """True when instrumentation is suppressed in the current context."""
    return bool(otel_context.get_value(SUPPRESS_KEY))


@contextmanager
def suppressed() -> Iterator[None]:
    """Suppress instrumentation (no spans from us or other OTel instrumentations) inside."""
    token = otel_context.attach(otel_context.set_value(SUPPRESS_KEY, True))
    try:
        yield
    finally:
        otel_context.detach(token)

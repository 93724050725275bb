"""Recording an exception on a span: its type always; its message and stack trace redacted and capped.

The OpenTelemetry `span.record_exception` exports `str(exc)` and the whole traceback as they are
(and fails on an exception whose `__str__` raises). `record_error` builds the `exception` event
itself: the message is read defensively, cut to the content length limit and redacted like
captured content; the stack trace lists frames (file, line, function, source line, never
local values) and is capped as well.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import replace
from types import TracebackType
from typing import Any

from opentelemetry.trace import Status, StatusCode

from tracescore import _semconv as sc
from tracescore._config import ContentSettings, content_settings
from tracescore._content import finish_text, redact, truncate

__all__ = ["error_message", "error_type", "exception_text", "record_error", "stack_trace"]

_log = logging.getLogger("tracescore")

_MAX_CHAIN = 8  # linked exceptions (__cause__ / __context__) shown in a stack trace
_MAX_FRAMES = 64  # innermost frames kept per exception
_SLACK = 256  # characters read past a cut, so a secret across it is redacted whole
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"
_logged: set[str] = set()


def error_type(exc: BaseException) -> str:
    """`error.type` of an exception: its class name, qualified by module unless builtin."""
    cls = type(exc)
    module = getattr(cls, "__module__", None)
    name = getattr(cls, "__qualname__", None) or cls.__name__
    return name if module in (None, "builtins") else f"{module}.{name}"


def exception_text(exc: BaseException) -> str:
    """`str(exc)`, or a placeholder naming the type when `__str__` raises."""
    try:
        text = str(exc)
        if not isinstance(text, str):
            raise TypeError("__str__ returned a non-string")
    except Exception:  # noqa: BLE001 - a broken __str__ must not cost the error record
        return f"<{type(exc).__name__}: message could not be read>"
    return text


def error_message(exc: BaseException, settings: ContentSettings | None = None) -> str:
    """The exception's message, redacted and capped like captured content. Never raises."""
    return finish_text(exception_text(exc), settings)


def _frames(tb: TracebackType | None) -> list[str]:
    try:
        frames = traceback.extract_tb(tb)
        if len(frames) > _MAX_FRAMES:
            dropped = len(frames) - _MAX_FRAMES
            return [f"  … {dropped} outer frames omitted\n",
                    *traceback.StackSummary.from_list(frames[-_MAX_FRAMES:]).format()]
        return frames.format()
    except Exception:  # noqa: BLE001 - no frames rather than no record
        return []


def _chain(exc: BaseException) -> list[tuple[BaseException, str]]:
    """`exc` and the exceptions it was raised from or during, outermost first, bounded."""
    links: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    joint = ""
    while current is not None and id(current) not in seen and len(links) < _MAX_CHAIN:
        seen.add(id(current))
        links.append((current, joint))
        if current.__cause__ is not None:
            current, joint = current.__cause__, _CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, joint = current.__context__, _CONTEXT
        else:
            current = None
    return links[::-1]


def stack_trace(exc: BaseException, settings: ContentSettings | None = None) -> str:
    """The exception's stack trace in Python's format, redacted, at most `max_length` characters.

    Messages inside it are cut to a quarter of that, so frames fit; past the limit the innermost
    part is kept. Frames carry no local values. Never raises.
    """
    s = settings if settings is not None else content_settings()
    rules_only = replace(s, redaction_hook=None)  # the hook runs once, on the whole text
    message_limit = max(s.max_length // 4, 64)
    parts: list[str] = []
    later_joint = ""
    for link, joint in _chain(exc):
        parts.append(later_joint)
        later_joint = joint
        frames = _frames(link.__traceback__)
        if frames:
            parts.append("Traceback (most recent call last):\n")
            parts.extend(frames)
        # redacted before it is cut, so a secret across the cut is still seen whole
        raw = exception_text(link)[: message_limit + _SLACK]
        message = truncate(redact(raw, rules_only), message_limit)
        parts.append(f"{error_type(link)}: {message}\n" if message else f"{error_type(link)}\n")
    text = redact("".join(parts), s)  # source lines too; then cut, never cut then redact
    if len(text) > s.max_length >= 64:  # keep the innermost frames and the message
        keep = max(s.max_length - len(f"…[truncated {len(text)} chars] "), 0)
        text = f"…[truncated {len(text) - keep} chars] " + text[len(text) - keep:]
    return finish_text(text, s, redacted=True)


def record_error(span: Any, exc: BaseException, *, type_name: str | None = None,
                 settings: ContentSettings | None = None) -> None:
    """Mark `span` failed by `exc`: `error.type`, status ERROR with the message, and an
    `exception` event (type, message, stack trace). Never raises into the caller.

    `type_name` overrides the `error.type` value (default: `error_type(exc)`).
    """
    try:
        if not span.is_recording():
            return
        s = settings if settings is not None else content_settings()
        name = type_name or error_type(exc)
        span.set_attribute(sc.ERROR_TYPE, name)
        message = error_message(exc, s)
        span.set_status(Status(StatusCode.ERROR, message or None))
        span.add_event(sc.EXCEPTION_EVENT, {
            sc.EXCEPTION_TYPE: name,
            sc.EXCEPTION_MESSAGE: message,
            sc.EXCEPTION_STACKTRACE: stack_trace(exc, s),
        })
    except Exception:  # noqa: BLE001 - telemetry never raises into the user's code
        if "record" not in _logged:
            _logged.add("record")
            _log.warning("tracescore: could not record an exception on a span", exc_info=True)

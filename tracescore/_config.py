"""Content-capture settings: global switches for recording inputs/outputs on spans, from code or env.

Environment variables (read once, lazily, on first use):

- ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``: ``false``/``NO_CONTENT`` turn capture off;
  ``true``/``SPAN_ONLY``/``SPAN_AND_EVENT``/``EVENT_ONLY`` turn it on.
- ``TRACESCORE_CAPTURE_CONTENT`` (wins over the OTel variable when both are set),
  ``TRACESCORE_MAX_CONTENT_LENGTH``, ``TRACESCORE_REDACT``, ``TRACESCORE_OPENINFERENCE``: defined,
  with their defaults, in ``tracescore._env``.

A bad value warns (``RuntimeWarning``) and falls back to the default.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from tracescore import _env
from tracescore._exceptions import ConfigurationError

ENV_OTEL_CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
ENV_CAPTURE = _env.CAPTURE_CONTENT.name
ENV_MAX_LENGTH = _env.MAX_CONTENT_LENGTH.name
ENV_REDACT = _env.REDACT.name
ENV_OPENINFERENCE = _env.OPENINFERENCE.name

DEFAULT_CAPTURE = _env.CAPTURE_CONTENT.default
DEFAULT_MAX_LENGTH = _env.MAX_CONTENT_LENGTH.default
DEFAULT_REDACT = _env.REDACT.default
DEFAULT_OPENINFERENCE = _env.OPENINFERENCE.default

_OTEL_ON = frozenset({"true", "span_only", "span_and_event", "event_only"})
_OTEL_OFF = frozenset({"false", "no_content"})


@dataclass(frozen=True, slots=True)
class ContentSettings:
    """What content instrumentation records: on/off, size limit, redaction, OpenInference copies."""

    capture: bool = DEFAULT_CAPTURE
    max_length: int = DEFAULT_MAX_LENGTH
    redact: bool = DEFAULT_REDACT
    redaction_hook: Callable[[str], str] | None = None
    openinference: bool = DEFAULT_OPENINFERENCE


_UNSET: Any = object()
_lock = threading.Lock()
_settings: ContentSettings | None = None


def _env_capture() -> bool:
    default = DEFAULT_CAPTURE
    raw = os.environ.get(ENV_OTEL_CAPTURE)
    capture = default
    if raw is not None and raw.strip():
        value = raw.strip().lower()
        if value in _OTEL_ON:
            capture = True
        elif value in _OTEL_OFF:
            capture = False
        else:
            _env.warn_ignored(
                ENV_OTEL_CAPTURE,
                raw,
                "true, false, NO_CONTENT, SPAN_ONLY, SPAN_AND_EVENT or EVENT_ONLY",
                default,
            )
    return _env.CAPTURE_CONTENT.get(capture)


def settings_from_env() -> ContentSettings:
    """Settings as the environment describes them (bad values warn and fall back)."""
    return ContentSettings(
        capture=_env_capture(),
        max_length=_env.MAX_CONTENT_LENGTH.get(),
        redact=_env.REDACT.get(),
        openinference=_env.OPENINFERENCE.get(),
    )


def content_settings() -> ContentSettings:
    """The current global content settings (the environment is read on first call)."""
    settings = _settings
    if settings is not None:
        return settings
    return _init()


def _init() -> ContentSettings:
    global _settings
    with _lock:
        if _settings is None:
            _settings = settings_from_env()
        return _settings


def set_content_capture(
    capture: bool | None = None,
    *,
    max_length: int | None = None,
    redact: bool | None = None,
    redaction_hook: Callable[[str], str] | None = _UNSET,
    openinference: bool | None = None,
) -> ContentSettings:
    """Change the global content-capture settings; arguments left out keep their value.

    `capture` turns recording of inputs/outputs/messages on or off, `max_length` bounds each
    captured value (characters), `redact` switches the built-in redaction, and
    `redaction_hook` (a `str -> str` callable, or None to remove it) runs after it.
    `openinference` also puts captured agent input/output on `input.value` / `output.value`.
    Returns the new settings.
    """
    global _settings
    if capture is not None and not isinstance(capture, bool):
        raise ConfigurationError(f"capture must be True, False or None, got {capture!r}")
    if redact is not None and not isinstance(redact, bool):
        raise ConfigurationError(f"redact must be True, False or None, got {redact!r}")
    if openinference is not None and not isinstance(openinference, bool):
        raise ConfigurationError(
            f"openinference must be True, False or None, got {openinference!r}"
        )
    if max_length is not None and (
        isinstance(max_length, bool) or not isinstance(max_length, int) or max_length <= 0
    ):
        raise ConfigurationError(f"max_length must be a positive integer, got {max_length!r}")
    if redaction_hook is not _UNSET and redaction_hook is not None and not callable(redaction_hook):
        raise ConfigurationError(f"redaction_hook must be callable or None, got {redaction_hook!r}")
    changes: dict[str, Any] = {}
    if capture is not None:
        changes["capture"] = capture
    if max_length is not None:
        changes["max_length"] = max_length
    if redact is not None:
        changes["redact"] = redact
    if redaction_hook is not _UNSET:
        changes["redaction_hook"] = redaction_hook
    if openinference is not None:
        changes["openinference"] = openinference
    current = content_settings()
    with _lock:
        _settings = replace(_settings or current, **changes)
        return _settings


def reset_content_settings() -> ContentSettings:
    """Forget code-level changes and re-read the environment (mainly for tests)."""
    global _settings
    with _lock:
        _settings = settings_from_env()
        return _settings


"""Every `TRACESCORE_*` environment variable, defined once: its name, default, parser and what it
does. Readers call `VAR.get()` (a bad value warns with a `RuntimeWarning` and gives the default)
or, where a bad value must stop the program (the gateway's settings), `VAR.raw()` and validate.
docs/reference.md lists the same variables (tests/project/test_env.py checks both ways).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True)
class EnvVar(Generic[T]):
    """One environment variable: `parse` raises ValueError on a value that is not `expected`."""

    name: str
    default: T
    parse: Callable[[str], T]
    expected: str
    doc: str
    minimum: int | None = None  # integers only

    def raw(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The value as set, stripped; None when unset or blank."""
        value = (os.environ if environ is None else environ).get(self.name)
        return value.strip() if value is not None and value.strip() else None

    def get(self, default: T | None = None) -> T:
        """The parsed value, else `default` (the variable's own when None); a bad value warns."""
        fallback = self.default if default is None else default
        raw = self.raw()
        if raw is None:
            return fallback
        try:
            return self.parse(raw)
        except ValueError:
            warn_ignored(self.name, raw, self.expected, fallback)
            return fallback


def warn_ignored(name: str, value: str, expected: str, fallback: object) -> None:
    """The one warning for a bad environment value (the default is used instead)."""
    warnings.warn(f"tracescore: ignoring {name}={value!r} (expected {expected}); using {fallback!r}",
                  RuntimeWarning, stacklevel=4)


def _flag(raw: str) -> bool:
    value = raw.lower()
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    raise ValueError(raw)


def _text(raw: str) -> str | None:
    return raw


def _flag_var(name: str, default: bool, doc: str) -> EnvVar[bool]:
    return EnvVar(name, default, _flag, "true or false", doc)


def _int_var(name: str, default: int, minimum: int, doc: str) -> EnvVar[int]:
    def parse(raw: str) -> int:
        value = int(raw)
        if value < minimum:
            raise ValueError(raw)
        return value

    expected = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    return EnvVar(name, default, parse, expected, doc, minimum)


def _text_var(name: str, doc: str) -> EnvVar[str | None]:
    return EnvVar(name, None, _text, "text", doc)


# content capture (tracescore._config)
CAPTURE_CONTENT = _flag_var(
    "TRACESCORE_CAPTURE_CONTENT", True,
    "capture inputs and outputs on spans; wins over OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
MAX_CONTENT_LENGTH = _int_var("TRACESCORE_MAX_CONTENT_LENGTH", 8192, 1,
                              "characters kept per captured value")
REDACT = _flag_var("TRACESCORE_REDACT", True,
                   "built-in redaction of secrets, emails and card numbers")
OPENINFERENCE = _flag_var(  # off: it costs a second serialization per agent call
    "TRACESCORE_OPENINFERENCE", False,
    "agent spans also carry OpenInference input.value / output.value")
# export (configure())
MAX_SPAN_BYTES = _int_var("TRACESCORE_MAX_SPAN_BYTES", 1 << 20, 4096,
                          "configure(max_span_bytes=) when not given")
MAX_REQUEST_BYTES = _int_var(  # 3 MiB: room under the Collector's 4 MiB gRPC limit
    "TRACESCORE_MAX_REQUEST_BYTES", 3 << 20, 64 << 10,
    "configure(max_request_bytes=) when not given")
FLUSH_ON_SIGTERM = _flag_var("TRACESCORE_FLUSH_ON_SIGTERM", True,
                             "configure(flush_on_sigterm=) when not given")
# scoring, the CLI and the gateway
JUDGE_MODEL = _text_var("TRACESCORE_JUDGE_MODEL",
                        "the judge model (a litellm model string), else the offline judge")
TRACE_JUDGE = _flag_var("TRACESCORE_TRACE_JUDGE", True,
                        "each judge call of online scoring (and run_evals) becomes a chat span")
GATEWAY_CONFIG = _text_var("TRACESCORE_GATEWAY_CONFIG", "the gateway's YAML config file")
GATEWAY_TOKEN = _text_var("TRACESCORE_GATEWAY_TOKEN", "the gateway's receivers.bearer_token")
# tracescore.testing
CACHE_DIR = _text_var("TRACESCORE_CACHE_DIR",
                      "where test tools are built, else $XDG_CACHE_HOME/tracescore")
OTELCOL = _text_var("TRACESCORE_OTELCOL", "an OpenTelemetry Collector binary to use instead of "
                    "building one")
TELEMETRYGEN = _text_var("TRACESCORE_TELEMETRYGEN", "a telemetrygen binary the gateway benchmark "
                         "uses instead of building one")

ALL: tuple[EnvVar[object], ...] = tuple(
    v for v in globals().values() if isinstance(v, EnvVar))

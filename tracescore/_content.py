"""Turning captured content into span attribute text: JSON-safe conversion, redaction, truncation.

Nothing here raises: any Python object becomes bounded text, whatever its type or size.

(About 460 lines: the JSON-safe walker redacts and bounds strings as it goes, with the same
rules, slack and log-once table as the text path; apart they would pass them around.)
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import enum
import json
import logging
import math
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import PurePath
from typing import Any
from uuid import UUID

from tracescore._config import ContentSettings, content_settings
from tracescore._guard import Guard
from tracescore._secret_rules import apply_rules, hide_value, secret_name_label

_log = logging.getLogger("tracescore")

# Work bounds of `to_json_safe` (the output is bounded by `max_chars` as well).
_MAX_DEPTH = 32
_MAX_NODES = 10_000
_DEFAULT_MAX_CHARS = 1_000_000
_REPR_LIMIT = 1_000
# Extra characters kept past `max_length` before redaction, so a secret that straddles the
# cut is still seen whole by the patterns.
_REDACT_SLACK = 256

TRUNCATION_MARKER = "…[truncated {n} chars]"
_TRUNCATION_MARKER_AT_LEAST = "…[truncated {n}+ chars]"
_ELLIPSIS = "…"

_guard = Guard(_log)  # logs each failing site once


def _type_name(obj: object) -> str:
    try:
        return type(obj).__qualname__
    except Exception:  # noqa: BLE001 - a broken metaclass must not break serialization
        return "object"


def _safe_repr(obj: object, limit: int = _REPR_LIMIT) -> str:
    try:
        text = repr(obj)
        if not isinstance(text, str):
            raise TypeError("__repr__ returned a non-string")
    except Exception:  # noqa: BLE001 - a broken __repr__ must not break the caller
        return f"<{_type_name(obj)} object (repr failed)>"
    return text if len(text) <= limit else text[:limit] + _ELLIPSIS


def _is_pydantic_model(obj: object) -> bool:
    cls = type(obj)
    return hasattr(cls, "model_fields") and callable(getattr(cls, "model_dump", None))


# `{"name": "DB_PASSWORD", "value": "…"}` (environment lists, header lists, settings rows)
_NAME_KEYS = ("name", "key", "Name", "Key")
_VALUE_KEYS = frozenset({"value", "values", "Value", "Values"})


def _named_value_label(mapping: Mapping[Any, Any]) -> str | None:
    """The label hiding `mapping["value"]` when its `name`/`key` entry names a secret."""
    try:
        for key in _NAME_KEYS:
            name = mapping.get(key)
            if isinstance(name, str):
                return secret_name_label(name)
    except Exception:  # noqa: BLE001 - a mapping whose get() fails is walked as it is
        return None
    return None


class JSONText:
    """Content exported as the compact JSON text of `value` (a JSON string inside the JSON).

    The walk redacts `value` by structure first, so secrets inside it are found by key name.
    """

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


class _Walker:
    """One bounded traversal: counts nodes and characters, detects cycles, limits depth."""

    __slots__ = ("active", "chars", "cut", "nodes", "redact", "secret")

    def __init__(self, max_chars: int, redact: bool = False) -> None:
        self.nodes = _MAX_NODES
        self.chars = max_chars
        self.active: set[int] = set()
        self.cut = False  # True once something was elided for the bounds
        self.redact = redact  # apply the built-in rules to every string, before it is encoded
        self.secret: str | None = None  # label, while walking the value of a secret-named key

    def exhausted(self) -> bool:
        if self.nodes <= 0 or self.chars <= 0:
            self.cut = True
            return True
        return False

    def text(self, value: str) -> str:
        if self.secret is not None:
            value = hide_value(value[:_REDACT_SLACK], self.secret)
        elif self.redact:
            if len(value) > self.chars + _REDACT_SLACK:
                self.cut = True
                value = value[: max(self.chars, 0) + _REDACT_SLACK]
            value = _builtin_redact(value)
        if len(value) > self.chars:
            self.cut = True
            value = value[: max(self.chars, 0)] + _ELLIPSIS
        self.chars -= len(value)
        return value

    def walk(self, obj: object, depth: int) -> object:
        self.nodes -= 1
        self.chars -= 1  # every node costs at least a separator in the output
        cls = type(obj)
        if obj is None or cls is bool:
            return obj
        if self.secret is not None and isinstance(obj, (int, float)) and not isinstance(obj, bool):
            return self.text("")
        if cls is str:
            return self.text(obj)  # type: ignore[arg-type]
        if cls is int:
            return self._int(obj)  # type: ignore[arg-type]
        if cls is float:
            return self._float(obj)  # type: ignore[arg-type]
        if isinstance(obj, enum.Enum):
            return self.walk(obj.value, depth)
        if isinstance(obj, str):
            return self.text(str.__str__(obj))
        if isinstance(obj, bool):
            return bool(obj)
        if isinstance(obj, int):
            return self._int(int(obj))
        if isinstance(obj, float):
            return self._float(float(obj))
        if isinstance(obj, (bytes, bytearray, memoryview)):
            return self._bytes(bytes(obj[: self.chars + 1]), len(obj))
        if isinstance(obj, (_dt.datetime, _dt.date, _dt.time)):
            return self.text(obj.isoformat())
        if isinstance(obj, (UUID, Decimal, PurePath, complex)):
            return self.text(str(obj))
        if depth >= _MAX_DEPTH:
            return self.text(f"<max depth: {_type_name(obj)}>")
        key = id(obj)
        if key in self.active:
            return self.text(f"<cycle: {_type_name(obj)}>")
        self.active.add(key)
        try:
            return self._container(obj, depth + 1)
        finally:
            self.active.discard(key)

    def _container(self, obj: object, depth: int) -> object:
        if isinstance(obj, JSONText):
            inner = self.walk(obj.value, depth)
            return inner if type(inner) is str else _ENCODER.encode(inner)
        if isinstance(obj, Mapping):
            hidden = _named_value_label(obj) if self.redact and self.secret is None else None
            return self._mapping(obj.items(), len(obj), depth, hidden)
        if isinstance(obj, tuple) and hasattr(obj, "_asdict"):  # namedtuple
            return self._mapping(zip(obj._fields, obj), len(obj), depth)  # type: ignore[attr-defined]
        if isinstance(obj, (list, tuple)):
            return self._sequence(obj, len(obj), depth)
        if isinstance(obj, (set, frozenset)):
            items: Any = obj
            if len(obj) <= _MAX_NODES:
                try:
                    items = sorted(obj)
                except Exception:  # noqa: BLE001 - unorderable members keep set order
                    items = obj
            return self._sequence(items, len(obj), depth)
        if isinstance(obj, BaseException):
            return self.text(f"{_type_name(obj)}: {_safe_repr(str(obj))[1:-1]}")
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            names = [f.name for f in dataclasses.fields(obj)]
            return self._mapping(((n, getattr(obj, n, None)) for n in names), len(names), depth)
        if _is_pydantic_model(obj) and not isinstance(obj, type):
            try:
                dumped = obj.model_dump()  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - e.g. a cycle pydantic refuses to dump
                fields = list(type(obj).model_fields)  # type: ignore[attr-defined]
                dumped = {n: getattr(obj, n, None) for n in fields}
            return self.walk(dumped, depth)
        if callable(getattr(obj, "_asdict", None)) and not isinstance(obj, type):
            try:
                return self.walk(obj._asdict(), depth)  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001, S110 - fall through to the generic forms
                pass
        if type(obj).__repr__ is object.__repr__ and isinstance(
            getattr(obj, "__dict__", None), dict
        ):
            attrs = obj.__dict__
            return self._mapping(attrs.items(), len(attrs), depth)
        return self.text(_safe_repr(obj, min(_REPR_LIMIT, max(self.chars, 16))))

    def _mapping(self, items: Any, size: int, depth: int,
                 hidden: str | None = None) -> dict[str, object]:
        """`hidden`: label for the `value` entry (its `name`/`key` entry names a secret)."""
        out: dict[str, object] = {}
        for index, (key, value) in enumerate(items):
            if self.exhausted():
                out[_ELLIPSIS] = f"[{size - index} more items]"
                break
            name = self._name(key)
            label = secret_name_label(name) if self.redact and self.secret is None else None
            if hidden is not None and name in _VALUE_KEYS:
                label = hidden
            if label is None:
                out[name] = self.walk(value, depth)
                continue
            self.secret = label
            try:
                out[name] = self.walk(value, depth)
            finally:
                self.secret = None
        return out

    def _name(self, key: object) -> str:
        """A mapping key as text (shape rules apply; a secret-named parent does not hide it)."""
        secret, self.secret = self.secret, None
        try:
            return self.text(key if type(key) is str else self._key(key))
        finally:
            self.secret = secret

    def _sequence(self, items: Any, size: int, depth: int) -> list[object]:
        out: list[object] = []
        for index, value in enumerate(items):
            if self.exhausted():
                out.append(f"{_ELLIPSIS}[{size - index} more items]")
                break
            out.append(self.walk(value, depth))
        return out

    @staticmethod
    def _key(key: object) -> str:
        if key is None or isinstance(key, (bool, int, float)):
            return json.dumps(key) if not isinstance(key, int) or abs(key) < 10**20 else "<int>"
        if isinstance(key, enum.Enum):
            return str(key.value)
        if isinstance(key, str):
            return str.__str__(key)
        return _safe_repr(key, 200)

    def _int(self, value: int) -> object:
        if value.bit_length() <= 64:
            return value
        return self.text(f"<int with {value.bit_length()} bits>")

    def _float(self, value: float) -> object:
        if not math.isfinite(value):
            return repr(value)
        return value

    def _bytes(self, head: bytes, size: int) -> str:
        limit = max(self.chars, 0)
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError:
            encoded = base64.b64encode(head[: limit * 3 // 4 + 3]).decode("ascii")
            return self.text(f"<{size} bytes, base64: {encoded}>") if size else ""
        return self.text(text)


def to_json_safe(obj: object, *, max_chars: int | None = None) -> object:
    """Plain JSON data (dict/list/str/int/float/bool/None) describing `obj`. Never raises.

    Handles dataclasses, pydantic models (via `model_dump`), namedtuples, enums, bytes,
    sets, dates, cycles (marked), exceptions and objects with failing `__repr__`. The work is
    bounded: at most ~10k nodes and `max_chars` characters are visited; the rest is elided
    with a visible marker.
    """
    return _bounded_json_safe(obj, _DEFAULT_MAX_CHARS if max_chars is None else max_chars)[0]


def _bounded_json_safe(obj: object, max_chars: int, redact: bool = False) -> tuple[object, bool]:
    """`to_json_safe` (redacted by the built-in rules if `redact`) plus whether anything was
    elided to respect the bounds."""
    try:
        walker = _Walker(max_chars, redact)
        return walker.walk(obj, 0), walker.cut
    except Exception:  # noqa: BLE001 - telemetry must never raise
        if not redact:
            return _safe_repr(obj), True
        try:
            return _builtin_redact(_safe_repr(obj)), True
        except Exception:  # noqa: BLE001 - fail closed: withhold the content
            return "[REDACTED:error]", True


# --- redaction -------------------------------------------------------------------------------


def _builtin_redact(text: str) -> str:
    return apply_rules(text)


def _apply_hook(hook: Callable[[str], str], text: str) -> str:
    try:
        result = hook(text)
    except Exception:  # noqa: BLE001 - fail closed: never export what the hook should hide
        _guard.once("hook", "tracescore: redaction hook %r raised; content withheld", hook)
        return "[REDACTED:hook_error]"
    if not isinstance(result, str):
        _guard.once("hook-type", "tracescore: redaction hook %r returned a non-string", hook)
        return "[REDACTED:hook_error]"
    return result


def redact(text: str, settings: ContentSettings | None = None) -> str:
    """Apply built-in redaction (if enabled) and then the user's hook (if any). Never raises."""
    s = settings if settings is not None else content_settings()
    return _redact(text, s, builtin=s.redact, hook=True)


def _redact(text: str, s: ContentSettings, *, builtin: bool, hook: bool) -> str:
    try:
        if builtin:
            text = _builtin_redact(text)
        if hook and s.redaction_hook is not None:
            text = _apply_hook(s.redaction_hook, text)
        return text
    except Exception:  # noqa: BLE001 - fail closed: withhold the content
        _guard.once("redact", "tracescore: redaction failed; content withheld")
        return "[REDACTED:error]"


# --- serialization ---------------------------------------------------------------------------


def _valid_utf8(text: str) -> str:
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates would break the OTLP encoder
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def truncate(text: str, max_length: int, dropped: int = 0, *, at_least: bool = False) -> str:
    """`text` cut to `max_length` characters plus a marker saying how many were dropped.

    `dropped` counts characters already removed before; `at_least` marks the count as a lower
    bound (the source was too large to measure).
    """
    if len(text) <= max_length and not dropped:
        return text
    dropped += max(len(text) - max_length, 0)
    marker = _TRUNCATION_MARKER_AT_LEAST if at_least else TRUNCATION_MARKER
    return text[:max_length] + marker.format(n=dropped)


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_safe_repr)


def lookup_key(obj: object) -> str:
    """The compact JSON `serialize` writes for `obj`, but never redacted: a key to look it up by."""
    data = to_json_safe(obj)
    return data if type(data) is str else _ENCODER.encode(data)


def serialize(obj: object, settings: ContentSettings | None = None) -> str:
    """Text for a span attribute: str as-is, anything else compact JSON; redacted; truncated.

    Objects that convert to a plain string (bytes, dates, reprs …) are not JSON-quoted.
    Never raises; at most about `max_length` characters plus a truncation marker.
    """
    s = settings if settings is not None else content_settings()
    try:
        if type(obj) is str:
            return finish_text(obj, s)
        # the built-in rules run on each string before it is encoded (keys that name secrets
        # hide their values); the user's hook then sees the JSON text
        data, cut = _bounded_json_safe(obj, s.max_length + _REDACT_SLACK, s.redact)
        text = data if type(data) is str else _ENCODER.encode(data)
        return _finish(text, s, at_least=cut, builtin_done=True)
    except Exception:  # noqa: BLE001 - telemetry must never raise
        _guard.once("serialize", "tracescore: could not serialize a %s", _type_name(obj))
        return f"<unserializable {_type_name(obj)}>"


def finish_text(
    text: str,
    settings: ContentSettings | None = None,
    *,
    at_least: bool = False,
    redacted: bool = False,
) -> str:
    """Redact and truncate text that is already serialized (e.g. JSON built by the caller).

    `at_least` says the text was already shortened to fit the bounds; `redacted` that its
    content already went through `redact`. Never raises.
    """
    s = settings if settings is not None else content_settings()
    return _finish(text, s, at_least=at_least, builtin_done=redacted, hook_done=redacted)


def _finish(text: str, s: ContentSettings, *, at_least: bool, builtin_done: bool,
            hook_done: bool = False) -> str:
    try:
        limit = s.max_length
        dropped = 0
        if len(text) > limit + _REDACT_SLACK:
            dropped = len(text) - limit - _REDACT_SLACK
            text = text[: limit + _REDACT_SLACK]
        text = _redact(text, s, builtin=s.redact and not builtin_done, hook=not hook_done)
        return _valid_utf8(truncate(text, limit, dropped, at_least=at_least))
    except Exception:  # noqa: BLE001 - telemetry must never raise
        _guard.once("finish", "tracescore: could not prepare captured text")
        return "<unserializable text>"


def json_string(text: str, settings: ContentSettings | None = None) -> tuple[str, bool]:
    """`text` redacted and encoded as a JSON string literal, cut first to what can be kept.

    Returns the literal and whether `text` was cut; pass the result on to
    `finish_text(..., at_least=cut, redacted=True)`.
    """
    s = settings if settings is not None else content_settings()
    keep = s.max_length + _REDACT_SLACK
    cut = len(text) > keep
    if cut:
        text = text[:keep] + _ELLIPSIS
    if s.redact or s.redaction_hook is not None:
        text = redact(text, s)
    return _ENCODER.encode(text), cut


MAX_NAME_LENGTH = 256


def cap_name(text: str) -> str:
    """An identifier-like string (model, conversation or response id, label …) cut to
    `MAX_NAME_LENGTH` characters with a marker, as valid UTF-8: never an unbounded attribute."""
    return _valid_utf8(truncate(text, MAX_NAME_LENGTH))


def capture_enabled(override: bool | None = None) -> bool:
    """Whether to record content: a per-decorator `override` wins over the global setting."""
    if override is not None:
        return override
    return content_settings().capture

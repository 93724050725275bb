"""GenAI content recorded as log records, joined to the span it belongs to.

Instrumentations that follow the GenAI conventions' newer direction write a call's messages as
log records (Logs API events) carrying the trace and span ids of their span: the per-message
events (`gen_ai.user.message`, `gen_ai.system.message`, `gen_ai.assistant.message`,
`gen_ai.tool.message`, `gen_ai.choice`, the message in the body or the attributes) and
`gen_ai.client.inference.operation.details` (`gen_ai.input.messages` / `gen_ai.output.messages`).
`LogContent` keeps such records by (trace id, span id), bounded in spans, bytes and age, and
gives them back as span events look ((name, attributes) pairs), so the intake reads them as it
reads span events (`with_event_content`). Other log records are not kept.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tracescore import _semconv as sc
from tracescore.online.intake._event_content import EVENT_NAMES, with_event_content
from tracescore.online.intake._llm_calls import LlmCall, read_llm_call
from tracescore.online.intake._view import value_of

Key = tuple[int, int]  # (trace id, span id)
Event = tuple[str, Any]  # (name, attributes) as a span event is read
EVENT_NAME_KEY = "event.name"  # where SDKs before the `event_name` field named the event
_CHOICE = "gen_ai.choice"
_MAX_EVENTS = 64  # per span: a runaway loop's records do not crowd out the others
_MARKER = b"gen_ai."  # in every content record's name (cheap reject of a whole request)
# what an instrumentation logs in place of content it does not capture (Google ADK): not content
ELIDED = frozenset({"<elided>"})
# recorded as structured values on log records (OpenTelemetry's GenAI util), as JSON on spans
_JSON_KEYS = (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES, sc.GEN_AI_SYSTEM_INSTRUCTIONS)


class LogContent:
    """GenAI content log records by span, at most `max_spans` spans, `max_bytes` bytes of
    content and `max_age_s` seconds each (the oldest go first; `dropped` counts them)."""

    def __init__(self, *, max_spans: int = 4096, max_bytes: int = 16 << 20,
                 max_age_s: float = 300.0) -> None:
        self.max_spans = max_spans
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._kept: OrderedDict[Key, tuple[float, int, list[Event]]] = OrderedDict()
        # model calls' spans that came without content, read once their records come
        self._calls: OrderedDict[Key, tuple[int | None, int, Mapping[str, Any]]] = OrderedDict()
        self.bytes = 0
        self.kept = 0  # records kept, ever
        self.dropped = 0  # records let go by the bounds before a span read them

    def __len__(self) -> int:
        return len(self._kept)

    def add(self, trace_id: int, span_id: int, name: str, values: Mapping[str, Any]) -> bool:
        """Keep one record's content (`values`: its attributes, with its body's fields); False
        when it is no GenAI content record or has no span to belong to."""
        if name not in EVENT_NAMES or not trace_id or not span_id:
            return False
        values = {key: json.dumps(value, default=str, ensure_ascii=False)
                  if key in _JSON_KEYS and isinstance(value, (list, tuple, Mapping)) else value
                  for key, value in values.items()}
        if name == _CHOICE and "message" not in values and "content" in values:
            values["message"] = _choice_message(values["content"])  # as Google ADK logs it
        if any(_elided(values.get(key)) for key in ("content", "message", *_JSON_KEYS)):
            return False  # content capture is off: a placeholder, not the user's text
        size = _size(values)
        now = time.monotonic()
        with self._lock:
            key = (trace_id, span_id)
            born, used, events = self._kept.pop(key, (now, 0, []))
            if len(events) >= _MAX_EVENTS or size > self.max_bytes:
                self._kept[key] = (born, used, events)
                self.dropped += 1
                return False
            events.append((name, values))
            self._kept[key] = (born, used + size, events)
            self.bytes += size
            self.kept += 1
            self._trim(now)
        return True

    def add_otlp(self, request: Any, raw: bytes | None = None) -> set[Key]:
        """Keep the content records of an ExportLogsServiceRequest; the spans that got some.
        `raw`: the request's bytes, to skip one that names no GenAI event at once."""
        if raw is not None and _MARKER not in raw:
            return set()
        added: set[Key] = set()
        for resource_logs in request.resource_logs:
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    name = record.event_name or _event_name(record.attributes)
                    if name not in EVENT_NAMES:
                        continue
                    values = {kv.key: _plain(kv.value) for kv in record.attributes}
                    _with_body(values, name, _plain(record.body) if record.HasField("body")
                               else None)
                    trace_id = int.from_bytes(record.trace_id, "big")
                    span_id = int.from_bytes(record.span_id, "big")
                    if self.add(trace_id, span_id, name, values):
                        added.add((trace_id, span_id))
        return added

    def add_sdk(self, record: Any) -> Key | None:
        """Keep an SDK log record's content (a `ReadWriteLogRecord`, or the `LogData` of SDKs
        before 1.35); its span, or None when it was not kept."""
        inner = getattr(record, "log_record", record)
        attributes = dict(getattr(inner, "attributes", None) or {})
        name = getattr(inner, "event_name", None) or attributes.get(EVENT_NAME_KEY)
        if not isinstance(name, str) or name not in EVENT_NAMES:
            return None
        _with_body(attributes, name, getattr(inner, "body", None))
        trace_id, span_id = getattr(inner, "trace_id", 0) or 0, getattr(inner, "span_id", 0) or 0
        return (trace_id, span_id) if self.add(trace_id, span_id, name, attributes) else None

    def events(self, trace_id: int, span_id: int) -> list[Event]:
        """The content records kept for this span, as (name, attributes) span events."""
        if not self._kept:  # the common case, without the lock
            return []
        with self._lock:
            found = self._kept.get((trace_id, span_id))
            return list(found[2]) if found is not None else []

    def note_call(self, key: Key, parent_id: int | None, start_ns: int,
                  attributes: Mapping[str, Any]) -> None:
        """Remember a GenAI span that arrived without the messages a model call records (once
        content records are in use at all), to read it when its records come after it
        (`logged_calls`); at most `max_spans`, the oldest go first."""
        if (not self.kept or sc.GEN_AI_OPERATION_NAME not in attributes
                or sc.GEN_AI_OUTPUT_MESSAGES in attributes):
            return
        with self._lock:
            self._calls[key] = (parent_id, start_ns, attributes)
            while len(self._calls) > self.max_spans:
                self._calls.popitem(last=False)

    def logged_calls(self, keys: set[Key]) -> list[tuple[Key, int | None, LlmCall]]:
        """(span, parent, model call) of the noted spans of `keys` that their records now read."""
        found = []
        for key in keys:
            with self._lock:
                noted = self._calls.pop(key, None)
            if noted is not None:
                parent_id, start_ns, attributes = noted
                call = read_llm_call(self.with_logged(key, attributes), start_ns)
                if call is not None:
                    found.append((key, parent_id, call))
        return found

    def with_logged(self, key: Key, attributes: Mapping[str, Any]) -> Mapping[str, Any]:
        """`attributes` of the span `key` with the content its records logged (as its events
        would add it, `with_event_content`): how a model call whose messages are logged is read."""
        logged = self.events(*key)
        return with_event_content(attributes, logged) if logged else attributes

    def joined(self, key: Key, events: Sequence[Event],
               decode: Callable[[Any], Mapping[str, Any]] | None = None
               ) -> tuple[Sequence[Event], Callable[[Any], Mapping[str, Any]] | None]:
        """(`events` followed by this span's content records, a decoder for both): what to
        hand `AgentReader.read` for a span whose events `decode` reads (None: mappings)."""
        logged = self.events(*key)
        if not logged:
            return events, decode
        if decode is None:
            return [*events, *logged], None
        inner = decode
        return [*events, *logged], lambda raw: raw if isinstance(raw, Mapping) else inner(raw)

    def _trim(self, now: float) -> None:
        """(Holding the lock.) Let go of the oldest spans past the bounds."""
        kept = self._kept
        oldest = now - self.max_age_s
        while kept:
            key, (born, used, events) = next(iter(kept.items()))
            if (born > oldest and len(kept) <= self.max_spans
                    and self.bytes <= self.max_bytes):
                return
            del kept[key]
            self.bytes -= used
            self.dropped += len(events)


def _event_name(attributes: Sequence[Any]) -> str:
    for kv in attributes:
        if kv.key == EVENT_NAME_KEY:
            return str(value_of(kv.value))
    return ""


def _plain(value: Any) -> Any:
    """An OTLP AnyValue as plain Python: maps as dicts, arrays as lists (nested), bytes as hex."""
    which = value.WhichOneof("value")
    if which == "kvlist_value":
        return {kv.key: _plain(kv.value) for kv in value.kvlist_value.values}
    if which == "array_value":
        return [_plain(item) for item in value.array_value.values]
    return value_of(value)


def _with_body(values: dict[str, Any], name: str, body: Any) -> None:
    """Add a record's body to its attributes: a map's fields (the attributes win), other text
    as the message it records."""
    if isinstance(body, Mapping):
        for key, value in body.items():
            values.setdefault(str(key), value)
    elif body is not None and body != "":
        values.setdefault("message" if name == _CHOICE else "content", body)


def _choice_message(content: Any) -> Any:
    """A `gen_ai.choice` record's answer when it logs `content` (text, or a message with parts,
    e.g. Gemini's `{"role": "model", "parts": [...]}`) instead of `message`."""
    if isinstance(content, Mapping) and "parts" in content:
        return {"role": "assistant", "content": content["parts"]}
    return {"role": "assistant", "content": content}


def _elided(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip() in ELIDED
    if isinstance(value, Mapping):
        return _elided(value.get("content"))
    return False


def _size(values: Mapping[str, Any]) -> int:
    try:
        return len(json.dumps(values, default=str, ensure_ascii=False))
    except (TypeError, ValueError):
        return 1024

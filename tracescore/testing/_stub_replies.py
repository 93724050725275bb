"""What the stub LLM server answers and records: a scripted `Reply`, a recorded `StubRequest`,
and the pieces of an answer (token usage, stream chunks, OpenAI-style error bodies)."""

from __future__ import annotations

import json as _json
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_denied", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


@dataclass(kw_only=True)
class Reply:
    """One scripted answer of the stub.

    content: the assistant message text; any other JSON value (a dict, a list...) is sent as its JSON
        text (handy for judge replies). A value JSON cannot encode is a TypeError here.
    json: a whole response body to send as JSON instead of a completion (e.g. a custom error).
    body: raw bytes/str sent verbatim (malformed replies); wins over `json` and `content`.
    status/headers: HTTP status and extra headers (e.g. 429 with {"Retry-After": "1"}). A status >= 400
        without json/body gets an OpenAI-shaped error body whose message is `content` (if given).
    delay: seconds to wait before answering (latency); chunk_delay: between streamed chunks.
    usage: {"prompt_tokens": .., "completion_tokens": ..}; default counts words of prompt and reply.
    stream: content pieces for SSE when the request has stream=true (default: content split in 3).
    drop: close the connection without answering.
    """

    content: Any = None
    json: Any = None
    status: int = 200
    headers: dict[str, str] | None = None
    delay: float = 0.0
    body: bytes | str | None = None
    usage: dict[str, int] | None = None
    stream: list[str] | None = None
    drop: bool = False
    tool_calls: list[dict[str, Any]] | None = None
    finish_reason: str = "stop"
    chunk_delay: float = 0.0

    def __post_init__(self) -> None:
        if self.content is not None and not isinstance(self.content, str):
            try:
                _json.dumps(self.content)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"Reply content must be a str or a JSON value, not "
                                f"{type(self.content).__name__} ({exc})") from None

    @property
    def text(self) -> str:
        if self.content is None:
            return ""
        return self.content if isinstance(self.content, str) else _json.dumps(self.content)


@dataclass(frozen=True)
class StubRequest:
    """A request the stub received. Indexing (`req["messages"]`) reads the JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    body: bytes = field(repr=False)

    def __getitem__(self, key: str) -> Any:
        return self.json[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.json.get(key, default) if isinstance(self.json, dict) else default

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.get("messages") or [])


Responder = Callable[[Any], "Reply | str | dict[str, Any] | list[Any] | None"]


def _as_reply(value: Any, where: str) -> Reply:
    """`value` as a Reply: a Reply as is, a str or dict/list as its content; TypeError otherwise."""
    if isinstance(value, Reply):
        return value
    if isinstance(value, (str, dict, list)):
        return Reply(content=value)
    raise TypeError(f"{where} must be a Reply, a str, a dict or a list, not {type(value).__name__}")


def _word_count(value: Any) -> int:
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(
            _word_count(part.get("text", "") if isinstance(part, dict) else part) for part in value
        )
    return 0


def _usage(reply: Reply, request_json: dict[str, Any]) -> dict[str, int]:
    usage = dict(reply.usage or {})
    usage.setdefault(
        "prompt_tokens",
        sum(_word_count(m.get("content")) for m in request_json.get("messages") or []),
    )
    usage.setdefault("completion_tokens", _word_count(reply.text))
    usage.setdefault("total_tokens", usage["prompt_tokens"] + usage["completion_tokens"])
    return usage


def _pieces(reply: Reply) -> list[str]:
    if reply.stream is not None:
        return list(reply.stream)
    text = reply.text
    if not text:
        return []
    step = max(1, -(-len(text) // 3))
    return [text[i : i + step] for i in range(0, len(text), step)]


def _error_body(status: int, message: str | None) -> dict[str, Any]:
    kind, code = _ERROR_TYPES.get(status, ("server_error", None))
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "error"
    return {
        "error": {
            "message": message or f"stub error: {phrase}",
            "type": kind,
            "param": None,
            "code": code,
        }
    }

"""An OpenAI-compatible chat-completions stub server on loopback, scripted per test (judge replies, errors)."""

from __future__ import annotations

import itertools
import json as _json
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from tracescore.testing._http import LoopbackServer, QuietHandler
from tracescore.testing._service import Service

_log = logging.getLogger(__name__)
_CHAT_PATHS = {"/v1/chat/completions", "/chat/completions"}
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


class StubLLMServer(Service):
    """OpenAI-compatible `POST /v1/chat/completions` on a free loopback port.

    Answers come from the queue (`enqueue`), then `responder(request_json)` if set, then `default_reply`
    (a `Reply`, or a str/dict/list taken as its content). A fault in the stub itself, or in a
    responder, is answered HTTP 500 with the error text. Every request is recorded in `requests`.
    Reach it from litellm with
    `model="openai/<name>", api_base=stub.base_url, api_key="sk-test"`.
    """

    def __init__(
        self, *, default_reply: Reply | str | dict[str, Any] | list[Any] | None = None,
        responder: Responder | None = None,
    ) -> None:
        self.default_reply = Reply(content="ok") if default_reply is None else default_reply
        self.responder = responder
        self._queue: deque[Reply] = deque()
        self._requests: list[StubRequest] = []
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._server: LoopbackServer | None = None

    @property
    def default_reply(self) -> Reply:
        """The answer when the queue is empty and no responder answers."""
        return self._default_reply

    @default_reply.setter
    def default_reply(self, value: Reply | str | dict[str, Any] | list[Any]) -> None:
        self._default_reply = _as_reply(value, "StubLLMServer.default_reply")

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self) -> StubLLMServer:
        if self._server is None:
            self._stopping.clear()
            self._server = LoopbackServer(_StubHandler, self)
            self._server.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        self._stopping.set()
        if server is not None:
            server.close()

    @property
    def base_url(self) -> str:
        """ "http://127.0.0.1:PORT/v1" (litellm's api_base / the OpenAI client's base_url)."""
        if self._server is None:
            raise RuntimeError("StubLLMServer is not running")
        return f"http://127.0.0.1:{self._server.port}/v1"

    # --- scripting ------------------------------------------------------------------------------
    def enqueue(
        self,
        content: Any = None,
        *,
        json: Any = None,
        status: int = 200,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        body: bytes | str | None = None,
        usage: dict[str, int] | None = None,
        stream: list[str] | None = None,
        drop: bool = False,
        tool_calls: list[dict[str, Any]] | None = None,
        finish_reason: str = "stop",
        chunk_delay: float = 0.0,
    ) -> Reply:
        """Queue one reply (see `Reply`); a `Reply` may be passed as `content`."""
        reply = (
            content
            if isinstance(content, Reply)
            else Reply(
                content=content,
                json=json,
                status=status,
                headers=headers,
                delay=delay,
                body=body,
                usage=usage,
                stream=stream,
                drop=drop,
                tool_calls=tool_calls,
                finish_reason=finish_reason,
                chunk_delay=chunk_delay,
            )
        )
        with self._cond:
            self._queue.append(reply)
        return reply

    def enqueue_error(
        self,
        status: int,
        message: str = "",
        *,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """Queue an OpenAI-shaped error reply (e.g. 429 with {"Retry-After": "0"}, 401, 500)."""
        return self.enqueue(message or None, status=status, headers=headers, delay=delay)

    @property
    def pending(self) -> int:
        """Queued replies not yet used."""
        with self._cond:
            return len(self._queue)

    @property
    def requests(self) -> list[StubRequest]:
        with self._cond:
            return list(self._requests)

    def clear(self) -> None:
        with self._cond:
            self._queue.clear()
            self._requests.clear()

    def wait_for_requests(self, n: int = 1, timeout: float = 10.0) -> list[StubRequest]:
        """Block until at least `n` requests arrived; TimeoutError otherwise."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._requests) >= n, timeout):
                raise TimeoutError(f"waited {timeout}s for {n} requests, got {len(self._requests)}")
            return list(self._requests)

    # --- serving (server threads) ---------------------------------------------------------------
    def _record(self, request: StubRequest) -> None:
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()

    def _next_reply(self, request_json: Any) -> Reply:
        with self._cond:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            try:
                answer = self.responder(request_json)
            except Exception as exc:  # noqa: BLE001 - a broken test script: answer 500, say why
                _log.exception("StubLLMServer responder raised")
                return Reply(status=500, content=f"stub responder raised {exc!r}")
            if answer is not None:
                try:
                    return answer if isinstance(answer, Reply) else Reply(content=answer)
                except TypeError as exc:
                    return Reply(status=500, content=f"stub responder returned {exc}")
        return self.default_reply

    def _completion_id(self) -> str:
        return f"chatcmpl-stub-{next(self._ids)}"


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


class _StubHandler(QuietHandler):
    _headers_sent = False  # this request's status line is out: too late for a 500

    def do_GET(self) -> None:
        self.read_body()
        if urlsplit(self.path).path.rstrip("/") in ("/v1/models", "/models"):
            body = {
                "object": "list",
                "data": [{"id": "stub", "object": "model", "owned_by": "tracescore"}],
            }
            self._send_json(200, body)
        else:
            self._send_json(404, _error_body(404, f"unknown path {self.path}"))

    def do_POST(self) -> None:
        try:
            self._post()
        except OSError:  # the client went away
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - a stub fault: answer it, never drop in silence
            _log.exception("StubLLMServer failed to answer %s", self.path)
            self.close_connection = True
            if self._headers_sent:
                return  # a stream cut short: the client sees it end early
            self._send_json(500, _error_body(500, f"StubLLMServer failed: {exc!r}"))

    def send_response(self, code: int, message: str | None = None) -> None:
        self._headers_sent = True
        super().send_response(code, message)

    def _post(self) -> None:
        self._headers_sent = False
        stub: StubLLMServer = self.server.owner
        raw = self.read_body()
        path = urlsplit(self.path).path.rstrip("/")
        try:
            request_json = _json.loads(raw or b"null")
        except ValueError:
            request_json = None
        stub._record(
            StubRequest(
                method="POST",
                path=path,
                headers={key.lower(): value for key, value in self.headers.items()},
                json=request_json,
                body=raw,
            )
        )
        if path not in _CHAT_PATHS:
            self._send_json(404, _error_body(404, f"unknown path {path}"))
            return
        if not isinstance(request_json, dict):
            self._send_json(400, _error_body(400, "request body is not a JSON object"))
            return
        reply = stub._next_reply(request_json)
        if reply.delay and stub._stopping.wait(reply.delay):
            self._drop()
            return
        if reply.drop:
            self._drop()
        elif reply.body is not None:
            raw_body = reply.body.encode() if isinstance(reply.body, str) else reply.body
            self.send_bytes(reply.status, raw_body, "application/json", reply.headers)
        elif reply.json is not None:
            self._send_json(reply.status, reply.json, reply.headers)
        elif reply.status >= 400:
            self._send_json(
                reply.status, _error_body(reply.status, reply.text or None), reply.headers
            )
        elif request_json.get("stream"):
            self._stream(stub, reply, request_json)
        else:
            self._send_json(
                reply.status, self._completion(stub, reply, request_json), reply.headers
            )

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.send_bytes(status, _json.dumps(body).encode(), "application/json", headers)

    @staticmethod
    def _completion(
        stub: StubLLMServer, reply: Reply, request_json: dict[str, Any]
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text if reply.tool_calls is None else None,
        }
        if reply.tool_calls is not None:
            message["tool_calls"] = reply.tool_calls
        return {
            "id": stub._completion_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request_json.get("model") or "stub",
            "system_fingerprint": "tracescore-stub",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": _usage(reply, request_json),
        }

    def _stream(self, stub: StubLLMServer, reply: Reply, request_json: dict[str, Any]) -> None:
        """Server-sent events: role chunk, content chunks, finish chunk, usage chunk, [DONE]."""
        completion_id, created = stub._completion_id(), int(time.time())
        model = request_json.get("model") or "stub"

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "tracescore-stub",
                "choices": choices,
                **extra,
            }

        def choice(delta: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
            return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]

        events = [chunk(choice({"role": "assistant", "content": ""}))]
        events += [chunk(choice({"content": piece})) for piece in _pieces(reply)]
        if reply.tool_calls is not None:
            calls = [{"index": i, **call} for i, call in enumerate(reply.tool_calls)]
            events.append(chunk(choice({"tool_calls": calls})))
        events.append(chunk(choice({}, reply.finish_reason)))
        events.append(chunk([], usage=_usage(reply, request_json)))

        self.close_connection = True
        self.send_response(reply.status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        for key, value in (reply.headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        for i, event in enumerate(events):
            if i and reply.chunk_delay and stub._stopping.wait(reply.chunk_delay):
                return
            self.wfile.write(f"data: {_json.dumps(event)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

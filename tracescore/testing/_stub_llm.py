"""An OpenAI-compatible chat-completions stub server on loopback, scripted per test (judge replies, errors).

`Reply` and `StubRequest` are in `_stub_replies`.
"""

from __future__ import annotations

import itertools
import json as _json
import logging
import socket
import threading
import time
from collections import deque
from typing import Any
from urllib.parse import urlsplit

from tracescore.testing._http import LoopbackServer, QuietHandler
from tracescore.testing._service import Service
from tracescore.testing._stub_replies import (
    Reply,
    Responder,
    StubRequest,
    _as_reply,
    _error_body,
    _pieces,
    _usage,
)

__all__ = ["StubLLMServer"]

_log = logging.getLogger(__name__)
_CHAT_PATHS = {"/v1/chat/completions", "/chat/completions"}


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

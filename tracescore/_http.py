"""One HTTP/1.1 reply (status, headers, body) for our `http.server` handlers: the gateway's
receivers and the test servers."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler


def send_bytes(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str,
               headers: dict[str, str] | None = None) -> None:
    """Reply with `body` as `content_type`, its length and any extra `headers`."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(body)
    handler.wfile.flush()

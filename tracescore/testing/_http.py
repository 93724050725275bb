"""A loopback HTTP/1.1 server base for the test servers: threaded, fast to stop, closes idle keep-alives."""

from __future__ import annotations

import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tracescore._http import send_bytes


class LoopbackServer(ThreadingHTTPServer):
    """ThreadingHTTPServer on 127.0.0.1 with a free port; `close()` also drops open client connections."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128
    allow_reuse_address = True

    def __init__(self, handler: type[BaseHTTPRequestHandler], owner: Any) -> None:
        self.owner = owner
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"{type(owner).__name__}-http",
            daemon=True,
        )

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def track(self, connection: socket.socket, open_: bool) -> None:
        with self._connections_lock:
            if open_:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about clients that went away (drops, timeouts); report anything else."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def close(self) -> None:
        """Stop serving, close the listening socket and every open connection."""
        self.shutdown()
        self.server_close()
        with self._connections_lock:
            connections, self._connections = list(self._connections), set()
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=5)


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 handler base: registers its connection with the server and logs nothing."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle on, each reply would stall ~40 ms
    # on delayed ACKs, which skews latency-sensitive tests and benchmarks.
    disable_nagle_algorithm = True
    server: LoopbackServer

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def read_body(self) -> bytes:
        """The request body (Content-Length or chunked transfer encoding)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send_bytes(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        send_bytes(self, status, body, content_type, headers)

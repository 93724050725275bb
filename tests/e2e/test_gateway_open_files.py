"""The receivers' connection limits fit the open files limit: a default limit is lowered to fit
(logged), a configured one that cannot fit refuses to start (exit 2 naming the numbers), and under
`ulimit -n 1024` with 2,000 idle connections a real sender is still answered and a stalled body
gets its 408 after `read_timeout_s`."""

from __future__ import annotations

import http.client
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _gateway_helpers import plain_request
from hypothesis import given
from hypothesis import strategies as st

from tracescore import ConfigurationError
from tracescore.gateway._open_files import DEFAULT_MAX_CONNECTIONS, RESERVED, fit_connections
from tracescore.testing import GatewayProcess, OTLPReceiver


@given(configured=st.none() | st.integers(1, 5000), receivers=st.integers(0, 2),
       limit=st.none() | st.integers(64, 20_000))
def test_limits_fit_the_open_files_or_the_gateway_refuses(
        configured: int | None, receivers: int, limit: int | None) -> None:
    wanted = DEFAULT_MAX_CONNECTIONS if configured is None else configured
    fits = limit is None or receivers == 0 or wanted * receivers + RESERVED <= limit
    try:
        got = fit_connections(configured, receivers, limit)
    except ConfigurationError as exc:
        assert not fits
        assert "receivers.max_connections" in str(exc) and f"limit is {limit}" in str(exc)
        return
    if fits:
        assert got == wanted
    else:  # only a default is lowered, and then to what fits
        assert configured is None and limit is not None
        assert got * receivers + RESERVED <= limit < (got + 1) * receivers + RESERVED


def _post(port: int, body: bytes, timeout: float) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", "/v1/traces", body,
                           {"Content-Type": "application/x-protobuf"})
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.mark.slow
def test_under_ulimit_1024_two_thousand_idle_connections_leave_senders_answered(
        tmp_path: Path) -> None:
    next_hop = OTLPReceiver().start()
    gateway = GatewayProcess(
        ["--endpoint", next_hop.grpc_endpoint, "--journal", str(tmp_path / "j.db"),
         "--set", "receivers.read_timeout_s=2", "--set", "receivers.idle_timeout_s=3",
         "--set", "scoring.isolation=thread"],
        command_prefix=["prlimit", "--nofile=1024:1024"]).start()
    idle: list[socket.socket] = []
    try:
        assert any("lowered from 1000 to 448" in e.get("message", "") for e in gateway.logs)
        for port in (gateway.http_port, gateway.grpc_port):
            idle += [socket.create_connection(("127.0.0.1", port), timeout=10)
                     for _ in range(1000)]
        request = plain_request(3, random.Random(7))
        names = {span.name for span in request.resource_spans[0].scope_spans[0].spans}
        # closed at once while 448 idle ones are open (retried, as exporters do) until the idle
        # timeout frees some; never left waiting for an answer (a timeout makes senders resend
        # what was delivered)
        deadline = time.monotonic() + 30
        status = None
        while status != 200 and time.monotonic() < deadline:
            try:
                status = _post(gateway.http_port, request.SerializeToString(), timeout=10)
            except TimeoutError:
                pytest.fail("a sender was left waiting for its answer")
            except (ConnectionError, http.client.HTTPException):
                time.sleep(0.2)
        assert status == 200
        next_hop.wait_for_spans(lambda span: span.name in names, timeout=30, count=3)
        time.sleep(1)
        assert sum(span.name in names for span in next_hop.spans) == 3  # each once
        with socket.create_connection(("127.0.0.1", gateway.http_port), timeout=30) as stalled:
            started = time.monotonic()
            stalled.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: g\r\nContent-Length: 50\r\n\r\nx")
            answer = http.client.HTTPResponse(stalled)
            answer.begin()
            waited = time.monotonic() - started
        assert answer.status == 408
        assert waited < 2 + 4, f"408 after {waited:.1f}s for a 2 s read timeout"
    finally:
        for sock in idle:
            sock.close()
        gateway.stop()
        next_hop.stop()


def test_a_configured_limit_beyond_the_open_files_refuses_to_start(tmp_path: Path) -> None:
    command = ["prlimit", "--nofile=1024:1024", sys.executable, "-m", "tracescore", "serve",
               "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--health", "127.0.0.1:0",
               "--journal", str(tmp_path / "j.db"), "--endpoint", "http://127.0.0.1:9",
               "--set", "receivers.max_connections=1000"]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "receivers.max_connections" in done.stderr
    assert "the open files limit is 1024" in done.stderr and "at most 448" in done.stderr

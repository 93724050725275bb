"""The gateway's receivers on the wire, against a real `tracescore serve` process: chunked bodies
within the size limit, malformed OTLP/JSON answered 400 and counted, idle and stalled
connections closed (and counted) so that real senders still get through under a low file
limit, and start-up errors (TLS files, ports in use) that exit 2 naming the setting."""

from __future__ import annotations

import copy
import http.client
import itertools
import json
import random
import re
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _gateway_helpers import plain_request
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tracescore._otlp_json import to_otlp_json
from tracescore.testing import GatewayProcess, OTLPReceiver

pytestmark = pytest.mark.slow
_LIMIT = 64 * 1024  # receivers.max_request_bytes of the shared gateway


# --- a shared gateway ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def next_hop() -> Iterator[OTLPReceiver]:
    receiver = OTLPReceiver().start()
    try:
        yield receiver
    finally:
        receiver.stop()


@pytest.fixture(scope="module")
def gateway(next_hop: OTLPReceiver, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("gateway")
    (folder / "gateway.yaml").write_text(
        "scoring: {isolation: thread, scorers: [{scorer: similarity}]}\n", encoding="utf-8")
    process = GatewayProcess([
        "--config", str(folder / "gateway.yaml"), "--endpoint", next_hop.grpc_endpoint,
        "--journal", str(folder / "j.db"),
        "--set", f"receivers.max_request_bytes={_LIMIT}",
        "--set", f"receivers.max_decompressed_bytes={_LIMIT}"]).start()
    try:
        yield process
    finally:
        process.stop()


def _metrics(port: int) -> dict[str, float]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    return {name: float(value) for name, value in
            re.findall(r"^tracescore_gateway_(\w+) ([0-9.e+-]+)$", text, re.MULTILINE)}


def _raw_exchange(port: int, head: bytes, body_parts: list[bytes]) -> tuple[int, bytes]:
    """Write `head` and then each of `body_parts` on a raw socket; the answer's status and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        try:
            sock.sendall(head)
            for part in body_parts:
                sock.sendall(part)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered early (413) and closed; the answer is still readable
        answer = http.client.HTTPResponse(sock)
        answer.begin()
        return answer.status, answer.read()


def _chunked(body: bytes, cuts: list[int]) -> list[bytes]:
    edges = sorted({0, len(body), *(c % (len(body) + 1) for c in cuts)})
    chunks = [body[a:b] for a, b in itertools.pairwise(edges) if b > a]
    return [b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks] + [b"0\r\n\r\n"]


# --- chunked bodies -----------------------------------------------------------------------------
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spans=st.integers(0, 900), cuts=st.lists(st.integers(0, 1 << 20), max_size=12),
       as_json=st.booleans())
def test_chunked_bodies_are_taken_within_the_size_limit(
        gateway: GatewayProcess, spans: int, cuts: list[int], as_json: bool) -> None:
    request = plain_request(spans, random.Random(spans))
    body = to_otlp_json(request).encode() if as_json else request.SerializeToString()
    kind = "application/json" if as_json else "application/x-protobuf"
    head = (f"POST /v1/traces HTTP/1.1\r\nHost: gateway\r\nContent-Type: {kind}\r\n"
            f"Transfer-Encoding: chunked\r\n\r\n").encode()
    before = _metrics(gateway.health_port)
    status, answer = _raw_exchange(gateway.http_port, head, _chunked(body, cuts))
    after = _metrics(gateway.health_port)
    if len(body) <= _LIMIT:
        assert status == 200, answer
        assert after["received_total"] - before["received_total"] == spans
    else:
        assert status == 413, answer
        assert str(_LIMIT).encode() in answer
        assert after["rejected_total"] - before["rejected_total"] == 1


def test_a_chunked_body_without_end_is_answered_413_once_over_the_limit(
        gateway: GatewayProcess) -> None:
    """Chunks keep coming past the limit: the answer is 413, the body is never read whole."""
    head = (b"POST /v1/traces HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/x-protobuf"
            b"\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (4096, b"\x0a" * 4096)
    status, answer = _raw_exchange(gateway.http_port, head, [chunk] * (2 * _LIMIT // 4096))
    assert status == 413, answer


@pytest.mark.parametrize("spans", [1, 300, 2000])
def test_expect_100_continue_is_answered_before_the_body(gateway: GatewayProcess,
                                                         spans: int) -> None:
    body = plain_request(spans).SerializeToString()
    with socket.create_connection(("127.0.0.1", gateway.http_port), timeout=30) as sock:
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: gateway\r\nContent-Type: "
                     b"application/x-protobuf\r\nExpect: 100-continue\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body))
        interim = sock.recv(64)
        if len(body) > _LIMIT:
            assert interim.startswith(b"HTTP/1.1 413 ")
            return
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        answer = http.client.HTTPResponse(sock)
        answer.begin()
        assert answer.status == 200, answer.read()


# --- malformed OTLP/JSON ------------------------------------------------------------------------
def _valid_tree() -> dict[str, Any]:
    request = plain_request(2, random.Random(1))
    span = request.resource_spans[0].scope_spans[0].spans[0]
    span.events.add(name="e", time_unix_nano=5).attributes.add(key="k").value.double_value = 1.5
    span.links.add(trace_id=span.trace_id, span_id=span.span_id)
    span.status.code = 2
    return dict(json.loads(to_otlp_json(request)))


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*path, index))


_TREE = _valid_tree()
_ALL_PATHS = [path for path in _paths(_TREE) if path]
_OTHER_VALUES = st.one_of(st.integers(-(1 << 70), 1 << 70), st.floats(allow_nan=False),
                          st.text(max_size=20), st.booleans(), st.none(),
                          st.lists(st.integers(), max_size=3),
                          st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))


def _mutated(mutations: list[tuple[int, Any]]) -> dict[str, Any]:
    tree = copy.deepcopy(_TREE)
    for index, value in mutations:
        *parents, last = _ALL_PATHS[index % len(_ALL_PATHS)]
        node: Any = tree
        try:
            for key in parents:
                node = node[key]
            node[last] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation replaced the parent
    return tree


def _post_json(port: int, body: bytes) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/v1/traces", body, {"Content-Type": "application/json"})
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutations=st.lists(st.tuples(st.integers(0, 10_000), _OTHER_VALUES), min_size=1,
                          max_size=3))
def test_otlp_json_with_values_of_the_wrong_type_is_answered_and_counted(
        gateway: GatewayProcess, mutations: list[tuple[int, Any]]) -> None:
    body = json.dumps(_mutated(mutations)).encode()
    before = _metrics(gateway.health_port)
    status, answer = _post_json(gateway.http_port, body)
    after = _metrics(gateway.health_port)
    assert status in (200, 400), answer
    counted = "requests_total" if status == 200 else "rejected_total"
    assert after[counted] - before[counted] == 1
    if status == 400:
        assert answer.startswith(b"bad OTLP request: ") and b"Traceback" not in answer


@pytest.mark.parametrize(("body", "says"), [
    (b'{"resourceSpans":"x"}', b"resourceSpans"),
    (b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":5}]}]}]}', b"traceId"),
    (b'{"resourceSpans":' + b"[" * 3000 + b"]" * 3000 + b"}", b"deep"),
    (b'{"resourceSpans":[{"scopeSpans":[{"scope":{"name":"\xff\xfe"}}]}]}', b"UTF-8"),
    (b'[{"resourceSpans":[]}]', b"expected a JSON object, got an array"),
    (b"5", b"expected a JSON object, got a number"),
    (b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":{"a":1}}]}]}]}', b"name"),
    (b'{"resourceSpans": [', b"not JSON"),
])
def test_malformed_otlp_json_gets_400_with_a_message(gateway: GatewayProcess, body: bytes,
                                                     says: bytes) -> None:
    before = _metrics(gateway.health_port)
    status, answer = _post_json(gateway.http_port, body)
    assert (status, says.lower() in answer.lower()) == (400, True), answer
    assert len(answer.splitlines()) == 1
    assert _metrics(gateway.health_port)["rejected_total"] - before["rejected_total"] == 1


# --- idle and stalled connections ---------------------------------------------------------------
def _threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    found = re.search(r"^Threads:\s+(\d+)", status, re.MULTILINE)
    assert found is not None
    return int(found.group(1))


def _open_flood(http_port: int, grpc_port: int) -> list[socket.socket]:
    """Idle sockets (no bytes) on both ports, plus HTTP ones stalled in the headers or body."""
    flood = []
    for port, count, first_bytes in (
            (http_port, 40, b"POST /v1/traces HTTP/1.1\r\nHost: g\r\nContent-Length: 900\r\n\r\nx"),
            (http_port, 40, b"POST /v1/traces HTTP/1.1\r\nHost: g\r\nContent-Ty"),  # slowloris
            (http_port, 200, b""),
            (grpc_port, 150, b""),
            (grpc_port, 50, b"PRI * HTTP/2.0\r\n")):  # a stalled HTTP/2 preface
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            if first_bytes:
                sock.sendall(first_bytes)
            flood.append(sock)
    return flood


def _wait_closed_by_server(flood: list[socket.socket], within_s: float) -> int:
    """How many sockets of `flood` the server closed (EOF or reset) within `within_s`."""
    selector = selectors.DefaultSelector()
    for sock in flood:
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    closed, deadline = 0, time.monotonic() + within_s
    while selector.get_map() and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.5):
            conn = key.fileobj
            if not isinstance(conn, socket.socket):
                continue
            try:
                data = conn.recv(65536)
            except ConnectionResetError:
                data = b""
            except BlockingIOError:
                continue
            if not data or data.startswith(b"HTTP/1.1 408"):  # the stalled body's answer
                selector.unregister(conn)
                closed += 1
    selector.close()
    return closed


def _send_with_sdk(exporter: Any, name: str) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("flood.test").start_as_current_span(name):
        pass
    provider.shutdown()


def test_idle_and_stalled_connections_are_closed_and_real_senders_get_through(
        tmp_path: Path, next_hop: OTLPReceiver) -> None:
    """480 idle or stalled sockets against a gateway limited to 256 open files (so 64
    connections per receiver, derived from it): every one is closed after the 1 s timeouts, the
    thread count
    stays flat, refusals and closes are counted and logged once per burst, and the
    OpenTelemetry SDK's own HTTP and gRPC exporters still deliver."""
    gateway = GatewayProcess(
        ["--endpoint", next_hop.grpc_endpoint, "--journal", str(tmp_path / "j.db"),
         "--set", "receivers.idle_timeout_s=1",
         "--set", "receivers.read_timeout_s=1", "--set", "scoring.isolation=thread"],
        command_prefix=["prlimit", "--nofile=256:256"]).start()
    assert any("lowered from 1000 to 64" in e.get("message", "") for e in gateway.logs)
    flood: list[socket.socket] = []
    try:
        threads_before = _threads(gateway.process.pid)
        flood = _open_flood(gateway.http_port, gateway.grpc_port)
        threads_during = _threads(gateway.process.pid)
        closed = _wait_closed_by_server(flood, within_s=60)
        assert closed == len(flood)
        assert threads_during <= threads_before + 4
        _send_with_sdk(HttpSpanExporter(
            endpoint=f"http://127.0.0.1:{gateway.http_port}/v1/traces", timeout=10), "via-http")
        _send_with_sdk(GrpcSpanExporter(
            endpoint=f"127.0.0.1:{gateway.grpc_port}", insecure=True, timeout=10), "via-grpc")
        next_hop.wait_for_spans(lambda span: span.name in ("via-http", "via-grpc"), timeout=30,
                                count=2)
        counts = _metrics(gateway.health_port)
        assert counts["connections_refused_total"] > 0
        assert counts["connections_idle_total"] > 0
        assert counts["connections_timed_out_total"] > 0
        refusal_lines = [e for e in gateway.logs if "connection refused" in e.get("message", "")]
        assert 1 <= len(refusal_lines) <= 3
    finally:
        for sock in flood:
            sock.close()
        gateway.stop()


# --- start-up errors ----------------------------------------------------------------------------
def _serve_fails(args: list[str], tmp_path: Path) -> tuple[int, list[str]]:
    command = [sys.executable, "-m", "tracescore", "serve", "--grpc", "127.0.0.1:0",
               "--http", "127.0.0.1:0", "--health", "127.0.0.1:0", "--journal",
               str(tmp_path / "j.db"), "--endpoint", "http://127.0.0.1:9", *args]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return done.returncode, [line for line in lines if not line.startswith("{")]


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import trustme

    folder = tmp_path_factory.mktemp("tls")
    ca, other = trustme.CA(), trustme.CA()
    cert, stranger = ca.issue_cert("127.0.0.1"), other.issue_cert("127.0.0.1")
    files = {"cert": folder / "cert.pem", "key": folder / "key.pem", "ca": folder / "ca.pem",
             "other_key": folder / "other-key.pem", "garbage": folder / "garbage.pem"}
    cert.cert_chain_pems[0].write_to_path(str(files["cert"]))
    cert.private_key_pem.write_to_path(str(files["key"]))
    ca.cert_pem.write_to_path(str(files["ca"]))
    stranger.private_key_pem.write_to_path(str(files["other_key"]))
    files["garbage"].write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n"
                                "-----END CERTIFICATE-----\n", encoding="utf-8")
    return files


@pytest.mark.parametrize(("cert", "key", "client_ca", "setting"), [
    ("garbage", "key", None, "receivers.tls.cert_file"),
    ("cert", "other_key", None, "receivers.tls.key_file"),
    ("cert", "garbage", None, "receivers.tls.key_file"),
    ("cert", "key", "garbage", "receivers.tls.client_ca_file"),
])
def test_bad_tls_files_exit_2_naming_the_setting(tmp_path: Path, certificates: dict[str, Path],
                                                 cert: str, key: str, client_ca: str | None,
                                                 setting: str) -> None:
    args = ["--set", f"receivers.tls.cert_file={certificates[cert]}",
            "--set", f"receivers.tls.key_file={certificates[key]}"]
    if client_ca:
        args += ["--set", f"receivers.tls.client_ca_file={certificates[client_ca]}"]
    code, lines = _serve_fails(args, tmp_path)
    assert (code, len(lines)) == (2, 1), lines
    assert setting in lines[0] and "Traceback" not in lines[0]


@pytest.mark.parametrize("flag,setting", [("--grpc", "receivers.grpc"),
                                          ("--http", "receivers.http"),
                                          ("--health", "receivers.health")])
def test_a_port_in_use_exits_2_naming_the_setting(tmp_path: Path, flag: str, setting: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        endpoint = f"127.0.0.1:{taken.getsockname()[1]}"
        code, lines = _serve_fails([flag, endpoint], tmp_path)
    assert (code, len(lines)) == (2, 1), lines
    assert f"{setting}: {endpoint} is already in use" in lines[0]

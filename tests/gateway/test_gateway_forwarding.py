"""The gateway's door behind: what it does with every kind of next-hop answer, over both protocols
and both receivers (a scripted real OTLP server, `_next_hop.NextHop`, counts what it took).

- a final answer on the direct send is passed back to the sender, never acknowledged;
- a final answer after the acknowledgement drops the spans, counted and logged once per answer;
- retryable answers (the Collector's OTLP exporters' set) are retried until delivered once;
- requests over `exporter.max_batch_bytes` are split, a span too big alone is capped, a request
  that can never fit is refused (413 / INVALID_ARGUMENT);
- a slow next hop gets every span once (the direct send and the journal never race);
- `/ready` names why it is not ready: forwarding stuck, the journal cannot store.
"""

from __future__ import annotations

import json
import logging
import random
import resource
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
from _next_hop import OK, Answer, NextHop
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import tracescore
from tracescore.gateway import Gateway, GatewayConfig
from tracescore.gateway._split import Undeliverable, split_request
from tracescore.testing import GatewayProcess

_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
LIMIT = 3584 << 10  # exporter.max_batch_bytes by default
RETRYABLE_HTTP = (429, 502, 503, 504)  # otlphttpexporter: every other status is permanent

# next hop's final answer -> (HTTP receiver's answer, gRPC receiver's code) to the sender
FINAL: dict[str, dict[Any, tuple[int, str]]] = {
    "http": {400: (400, "INVALID_ARGUMENT"), 401: (401, "UNAUTHENTICATED"),
             403: (403, "PERMISSION_DENIED"), 404: (404, "NOT_FOUND"),
             413: (413, "INVALID_ARGUMENT"), 500: (500, "INTERNAL"), 501: (501, "UNIMPLEMENTED")},
    "grpc": {"INVALID_ARGUMENT": (400, "INVALID_ARGUMENT"),
             "UNAUTHENTICATED": (401, "UNAUTHENTICATED"),
             "PERMISSION_DENIED": (403, "PERMISSION_DENIED"), "NOT_FOUND": (404, "NOT_FOUND"),
             "FAILED_PRECONDITION": (400, "FAILED_PRECONDITION"),
             "RESOURCE_EXHAUSTED": (413, "INVALID_ARGUMENT"),  # without RetryInfo
             "INTERNAL": (500, "INTERNAL"), "UNKNOWN": (500, "UNKNOWN"),
             "UNIMPLEMENTED": (501, "UNIMPLEMENTED")},
}
RETRYABLE: dict[str, list[Answer]] = {
    "http": [Answer(status) for status in RETRYABLE_HTTP],
    "grpc": [Answer("UNAVAILABLE"), Answer("ABORTED"), Answer("DATA_LOSS"),
             Answer("DEADLINE_EXCEEDED"), Answer("CANCELLED"), Answer("OUT_OF_RANGE"),
             Answer("RESOURCE_EXHAUSTED", retry_info_s=0.05)],
}
DOWN = {"http": Answer(503), "grpc": Answer("UNAVAILABLE")}
FINAL_CASES = [(hop, answer, door) for hop, table in FINAL.items() for answer in table
               for door in ("http", "grpc")]
RETRY_CASES = [(hop, answer, door) for hop, answers in RETRYABLE.items() for answer in answers
               for door in ("http", "grpc")]


def _config(tmp_path: Path, hop: NextHop, **changes: Any) -> GatewayConfig:
    options: dict[str, Any] = {
        "grpc_endpoint": "127.0.0.1:0", "http_endpoint": "127.0.0.1:0",
        "health_endpoint": "127.0.0.1:0", "exporter_endpoint": hop.endpoint,
        "exporter_protocol": hop.protocol_setting,
        "journal_path": str(tmp_path / "journal.db"), "journal_sync": "normal",
        "scorers": [tracescore.create_content_similarity_scorer()], "isolation": "thread",
        "shutdown_timeout_s": 5.0,
    }
    options.update(changes)
    return GatewayConfig(**options)



def _request(spans: int, rng: random.Random, *, attribute_bytes: int = 0,
             resource_bytes: int = 0) -> ExportTraceServiceRequest:
    """`spans` plain spans (random ids) of about `attribute_bytes` each, one resource."""
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "load"
    if resource_bytes:
        rs.resource.attributes.add(key="big").value.string_value = "r" * resource_bytes
    ss = rs.scope_spans.add()
    ss.scope.name = "load"
    for index in range(spans):
        span = ss.spans.add(name=f"GET /item/{index}", kind=2, trace_id=rng.randbytes(16),
                            span_id=rng.randbytes(8), start_time_unix_nano=1,
                            end_time_unix_nano=2)
        if attribute_bytes:
            span.attributes.add(key="payload").value.string_value = "x" * attribute_bytes
    return request


def _keys(request: ExportTraceServiceRequest) -> set[tuple[bytes, bytes]]:
    return {(s.trace_id, s.span_id) for rs in request.resource_spans for ss in rs.scope_spans
            for s in ss.spans}


def _send(gateway: Gateway, door: str, request: ExportTraceServiceRequest) -> tuple[int, str]:
    """(HTTP status, "") or (0, gRPC code name) of one export through `door`."""
    body = request.SerializeToString()
    if door == "http":
        post = urllib.request.Request(f"http://127.0.0.1:{gateway.http_port}/v1/traces",
                                      data=body, method="POST",
                                      headers={"Content-Type": "application/x-protobuf"})
        try:
            with urllib.request.urlopen(post, timeout=30) as reply:
                return reply.status, ""
        except urllib.error.HTTPError as error:
            return error.code, ""
    channel = grpc.insecure_channel(f"127.0.0.1:{gateway.grpc_port}",
                                    options=[("grpc.max_send_message_length", 64 << 20)])
    try:
        channel.unary_unary(_EXPORT)(body, timeout=30)
        return 0, "OK"
    except grpc.RpcError as error:
        return 0, error.code().name
    finally:
        channel.close()


def _accepted(answer: tuple[int, str]) -> bool:
    return answer in ((200, ""), (0, "OK"))


def _ready(port: int) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _wait(condition: Any, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


# --- answers ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("hop_protocol", "final", "door"), FINAL_CASES)
def test_a_final_answer_on_the_direct_send_is_passed_back_never_acknowledged(
        hop_protocol: str, final: Any, door: str, tmp_path: Path, gateway_factory: Any) -> None:
    with NextHop(hop_protocol, lambda n, size: Answer(final)) as hop:
        gateway = gateway_factory(_config(tmp_path, hop))
        status, code = _send(gateway, door, _request(5, random.Random(1)))
        http_status, grpc_code = FINAL[hop_protocol][final]
        if door == "http":
            assert status == http_status and status not in RETRYABLE_HTTP
        else:
            assert code == grpc_code
        stats = gateway.stats()
        assert stats["next_hop_rejected_direct"] == 5
        assert stats["rejected_by_next_hop"] == 0 and stats["forwarded"] == 0
        assert stats["pending"] == 0 and gateway._journal.pending() == 0  # never journaled
        assert not hop.spans


@pytest.mark.parametrize(("hop_protocol", "final", "door"), FINAL_CASES[::2])
def test_a_final_answer_after_the_acknowledgement_drops_counts_and_logs_once(
        hop_protocol: str, final: Any, door: str, tmp_path: Path, gateway_factory: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    # even requests find the next hop down (the sender is acknowledged from the journal),
    # their retry gets the final answer
    script = (lambda n, size: DOWN[hop_protocol] if n % 2 == 0 else Answer(final))
    with NextHop(hop_protocol, script) as hop, caplog.at_level(logging.WARNING, "tracescore"):
        gateway = gateway_factory(_config(tmp_path, hop))
        rng = random.Random(2)
        for dropped_so_far in (5, 10):
            assert _accepted(_send(gateway, door, _request(5, rng)))
            assert _wait(lambda want=dropped_so_far: gateway.stats()["rejected_by_next_hop"] == want)
        assert _wait(lambda: gateway._journal.pending() == 0)  # dropped, not left stuck
        assert not hop.spans
        dropped = [r for r in caplog.records if "rejected 5 acknowledged spans" in r.getMessage()]
        assert len(dropped) == 1  # once per answer
        assert gateway.stats()["next_hop_rejected_direct"] == 0


@pytest.mark.parametrize(("hop_protocol", "retryable", "door"), RETRY_CASES)
def test_retryable_answers_are_retried_until_every_span_arrives_once(
        hop_protocol: str, retryable: Answer, door: str, tmp_path: Path,
        gateway_factory: Any) -> None:
    with NextHop(hop_protocol, lambda n, size: retryable if n < 3 else OK) as hop:
        gateway = gateway_factory(_config(tmp_path, hop))
        request = _request(7, random.Random(3))
        assert _accepted(_send(gateway, door, request))
        received = hop.wait_for_spans(7)
        assert set(received) == _keys(request) and set(received.values()) == {1}
        assert _wait(lambda: gateway.stats()["pending"] == 0)
        stats = gateway.stats()
        assert stats["forward_retries"] >= 2 and stats["forwarded"] == 7
        assert stats["rejected_by_next_hop"] == 0


# --- sizes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("hop_protocol", ["grpc", "http"])
def test_a_backlog_over_the_next_hops_message_limit_arrives_in_parts_each_span_once(
        hop_protocol: str, tmp_path: Path, gateway_factory: Any) -> None:
    down = threading.Event()
    down.set()
    script = (lambda n, size: DOWN[hop_protocol] if down.is_set() else OK)
    with NextHop(hop_protocol, script, max_bytes=4 << 20) as hop:  # the Collector's default
        gateway = gateway_factory(_config(tmp_path, hop))
        rng = random.Random(4)
        sent: set[tuple[bytes, bytes]] = set()
        for _ in range(16):  # 8000 spans of ~1 KB: one 8192-span batch would be ~8 MB
            request = _request(500, rng, attribute_bytes=1000)
            assert _accepted(_send(gateway, "http", request))
            sent |= _keys(request)
        down.clear()
        received = hop.wait_for_spans(len(sent), timeout=90)
        assert set(received) == sent and set(received.values()) == {1}
        taken = [size for size, answer in zip(hop.sizes, hop.answers) if answer.ok]
        assert max(taken) <= LIMIT and len(hop.sizes) == len(hop.answers)  # no 413 / too large


@pytest.mark.parametrize("door", ["http", "grpc"])
def test_a_span_bigger_than_the_limit_is_capped_and_marked(
        door: str, tmp_path: Path, gateway_factory: Any) -> None:
    with NextHop("grpc") as hop:
        gateway = gateway_factory(_config(tmp_path, hop))
        request = _request(10, random.Random(5), attribute_bytes=100)
        big = request.resource_spans[0].scope_spans[0].spans[3]
        big.attributes.add(key="gen_ai.output.messages").value.string_value = "y" * (5 << 20)
        for index in range(20):
            big.events.add(name=f"step {index}").attributes.add(
                key="text").value.string_value = "z" * 10_000
        assert _accepted(_send(gateway, door, request))
        assert set(hop.wait_for_spans(10)) == _keys(request)
        assert max(hop.sizes) <= LIMIT
        assert gateway.stats()["capped_for_next_hop"] == 1
        assert set(hop.spans.values()) == {1}


@pytest.mark.parametrize("door", ["http", "grpc"])
def test_a_request_that_can_never_fit_is_refused_for_good_not_acknowledged(
        door: str, tmp_path: Path, gateway_factory: Any) -> None:
    with NextHop("grpc") as hop:
        gateway = gateway_factory(_config(tmp_path, hop))
        request = _request(3, random.Random(6), resource_bytes=4 << 20)  # the resource alone
        assert _send(gateway, door, request) == ((413, "") if door == "http"
                                                 else (0, "INVALID_ARGUMENT"))
        assert gateway.stats()["undeliverable"] == 3
        assert gateway._journal.pending() == 0 and not hop.spans


_SPANS = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 30_000)),
                  min_size=1, max_size=60)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spans=_SPANS, limit=st.integers(64 << 10, 256 << 10), seed=st.integers(0, 2**32))
def test_split_parts_fit_the_limit_and_keep_every_span_under_its_resource_and_scope(
        spans: list[tuple[int, int, int]], limit: int, seed: int) -> None:
    rng = random.Random(seed)
    request = ExportTraceServiceRequest()
    where: dict[bytes, tuple[str, str]] = {}
    for resource_index in range(3):
        rs = request.resource_spans.add()
        rs.resource.attributes.add(key="service.name").value.string_value = f"svc{resource_index}"
        for scope_index in range(3):
            ss = rs.scope_spans.add()
            ss.scope.name = f"scope{scope_index}"
            for r, s, size in spans:
                if (r, s) == (resource_index, scope_index):
                    span = ss.spans.add(name="s", trace_id=rng.randbytes(16),
                                        span_id=rng.randbytes(8))
                    span.attributes.add(key="a").value.string_value = "v" * size
                    where[span.span_id] = (f"svc{r}", f"scope{s}")
    parts = split_request(request, limit)
    seen: list[bytes] = []
    for body, count in parts.bodies:
        assert len(body) <= limit
        part = ExportTraceServiceRequest.FromString(body)
        got = [(rs.resource.attributes[0].value.string_value, ss.scope.name, span.span_id)
               for rs in part.resource_spans for ss in rs.scope_spans for span in ss.spans]
        assert len(got) == count
        for service, scope, span_id in got:
            assert where[span_id] == (service, scope)
            seen.append(span_id)
    assert sorted(seen) == sorted(where)
    assert parts.capped == 0


def test_split_caps_a_span_alone_over_the_limit_and_refuses_an_unfittable_resource() -> None:
    request = _request(1, random.Random(7), attribute_bytes=200_000)
    parts = split_request(request, 64 << 10)
    ((body, count),) = parts.bodies
    assert count == 1 and len(body) <= 64 << 10 and parts.capped == 1
    span = ExportTraceServiceRequest.FromString(body).resource_spans[0].scope_spans[0].spans[0]
    marks = {kv.key: kv.value for kv in span.attributes}
    assert marks["tracescore.span.truncated"].bool_value is True
    assert marks["tracescore.span.original_bytes"].int_value > 200_000
    with pytest.raises(Undeliverable, match="exporter.max_batch_bytes"):
        split_request(_request(2, random.Random(8), resource_bytes=100_000), 64 << 10)


# --- a slow next hop --------------------------------------------------------------------------
@pytest.mark.parametrize("hop_protocol", ["http", "grpc"])
def test_a_slow_next_hop_gets_every_span_once(
        hop_protocol: str, tmp_path: Path, gateway_factory: Any) -> None:
    # each answer takes 2.5 s, longer than a receiving thread waits for the direct send (1 s)
    with NextHop(hop_protocol, lambda n, size: Answer("OK" if hop_protocol == "grpc" else 200,
                                                      delay_s=2.5)) as hop:
        gateway = gateway_factory(_config(tmp_path, hop))
        sent: set[tuple[bytes, bytes]] = set()
        lock = threading.Lock()

        def client(seed: int) -> None:
            rng = random.Random(seed)
            for _ in range(3):
                request = _request(10, rng)
                assert _accepted(_send(gateway, "http", request))
                with lock:
                    sent.update(_keys(request))

        threads = [threading.Thread(target=client, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(sent) == 120
        hop.wait_for_spans(120)
        assert _wait(lambda: gateway.stats()["pending"] == 0, timeout=60)
        hop.wait_for_requests(len(hop.answers))  # every answer given
        assert set(hop.spans) == sent
        assert {key for key, times in hop.spans.items() if times > 1} == set()


# --- readiness --------------------------------------------------------------------------------
def test_ready_says_not_ready_while_forwarding_is_stuck_then_ready_again(
        tmp_path: Path, gateway_factory: Any) -> None:
    down = threading.Event()
    down.set()
    with NextHop("http", lambda n, size: Answer(503) if down.is_set() else OK) as hop:
        gateway = gateway_factory(_config(tmp_path, hop, stuck_after_s=0.5))
        assert _ready(gateway.health_port)[0] == 200
        assert _accepted(_send(gateway, "http", _request(4, random.Random(9))))
        assert _wait(lambda: _ready(gateway.health_port)[0] == 503)
        status, detail = _ready(gateway.health_port)
        assert status == 503 and detail["status"] == "not ready"
        assert any("forwarding stuck" in r and "exporter.stuck_after_s" in r
                   for r in detail["reasons"])
        down.clear()
        assert _wait(lambda: _ready(gateway.health_port)[0] == 200)
        assert len(hop.wait_for_spans(4)) == 4


def test_ready_says_not_ready_while_the_journal_cannot_store(tmp_path: Path) -> None:
    """A real `tracescore serve` whose file size limit (RLIMIT_FSIZE, set from outside with
    prlimit) stops the journal growing: requests are refused retryably, /ready names the
    journal, and both recover when the limit is lifted."""
    with NextHop("http", lambda n, size: Answer(503)) as hop:
        process = GatewayProcess(["--endpoint", hop.endpoint, "--protocol", "http/protobuf",
                                  "--journal", str(tmp_path / "journal.db")],
                                 env={"TRACESCORE_LOG_FORMAT": "json"})
        process.start()
        try:
            rng = random.Random(10)
            url = f"http://127.0.0.1:{process.http_port}/v1/traces"

            def post() -> int:
                body = _request(50, rng, attribute_bytes=4000).SerializeToString()
                request = urllib.request.Request(url, data=body, method="POST", headers={
                    "Content-Type": "application/x-protobuf"})
                try:
                    with urllib.request.urlopen(request, timeout=30) as reply:
                        return int(reply.status)
                except urllib.error.HTTPError as error:
                    return int(error.code)

            assert post() == 200  # journaled (the next hop is down)
            pid = process.process.pid
            _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (1, hard))  # no file may grow
            assert post() == 503
            status, detail = _ready(process.health_port)
            assert status == 503
            assert any("journal cannot store" in reason for reason in detail["reasons"])
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))
            assert _wait(lambda: _ready(process.health_port)[0] == 200)
            assert post() == 200
        finally:
            process.stop()

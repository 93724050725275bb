"""A backlog after an outage reaches a real collector whose OTLP receiver keeps its 4 MiB default.

`tracescore serve` (a real process) forwards to the `otlp/scored` receiver of the collector
running collector_config/gateway.yaml, which sends on to a loopback OTLP backend. The collector is
down while 8000 spans of about 1 KB are accepted (journaled); once it is up, every one of them
arrives exactly once: the gateway's requests are split under the receiver's message limit rather
than retried for ever as one ~8 MB batch.
"""

from __future__ import annotations

import random
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from _next_hop import NextHop
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescore.testing import GatewayProcess
from tracescore.testing._collector import OTelCollector
from tracescore.testing._tools import free_port

CONFIG = Path(__file__).resolve().parents[2] / "collector_config" / "gateway.yaml"
SPANS, PER_REQUEST, SPAN_BYTES = 8000, 500, 1000

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _request(rng: random.Random) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "after-outage"
    ss = rs.scope_spans.add()
    ss.scope.name = "load"
    for index in range(PER_REQUEST):
        span = ss.spans.add(name=f"GET /item/{index}", kind=2, trace_id=rng.randbytes(16),
                            span_id=rng.randbytes(8), start_time_unix_nano=1,
                            end_time_unix_nano=2)
        span.attributes.add(key="payload").value.string_value = "x" * SPAN_BYTES
    return request


def _post(port: int, body: bytes) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/traces", data=body,
                                     method="POST",
                                     headers={"Content-Type": "application/x-protobuf"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return int(reply.status)


def _counter(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return float(next(line.split()[-1] for line in text.splitlines()
                      if line.startswith(f"tracescore_gateway_{name}_total")))


@pytest.fixture
def backend() -> Iterator[NextHop]:
    with NextHop("grpc", max_bytes=256 << 20) as hop:  # the backend is not what is tested
        yield hop


def test_a_backlog_of_8000_1kb_spans_reaches_a_collector_at_its_4mib_default_once(
        tmp_path: Path, backend: NextHop) -> None:
    scored_grpc, scored_http = free_port(), free_port()
    config = tmp_path / "gateway.yaml"
    config.write_text("scoring:\n  isolation: thread\n  scorers: [{scorer: similarity}]\n",
                      encoding="utf-8")
    gateway = GatewayProcess(["--config", str(config), "--journal", str(tmp_path / "j.db"),
                              "--endpoint", f"http://127.0.0.1:{scored_grpc}"])
    collector = OTelCollector(CONFIG, env={
        "TRACESCORE_GATEWAY_ENDPOINT": "127.0.0.1:1",  # the front pipeline is not used here
        "BACKEND_OTLP_ENDPOINT": f"127.0.0.1:{backend.port}",
    }, overrides={  # the shipped config otherwise, the 4 MiB receiver limit included
        "receivers::otlp/scored::protocols::grpc::endpoint": f"127.0.0.1:{scored_grpc}",
        "receivers::otlp/scored::protocols::http::endpoint": f"127.0.0.1:{scored_http}",
    })
    rng = random.Random(21)
    sent: set[tuple[bytes, bytes]] = set()
    with gateway:
        for _ in range(SPANS // PER_REQUEST):  # the next hop is down: all journaled
            request = _request(rng)
            assert _post(gateway.http_port, request.SerializeToString()) == 200
            sent |= {(s.trace_id, s.span_id) for s in request.resource_spans[0].scope_spans[0].spans}
        assert len(sent) == SPANS
        with collector:
            received = backend.wait_for_spans(SPANS, timeout=180)
            assert set(received) == sent
            assert set(received.values()) == {1}  # exactly once
            assert _counter(gateway.health_port, "forwarded") == SPANS
            assert _counter(gateway.health_port, "rejected_by_next_hop") == 0

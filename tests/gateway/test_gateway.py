"""The scoring gateway in-process: OTLP in (gRPC, HTTP protobuf/JSON, gzip), score, OTLP out to a
real loopback receiver; backpressure, auth, TLS, limits, journal replay and the config."""

from __future__ import annotations

import gzip
import json
import random
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest
from _gateway_helpers import ANSWER, QUESTION, agent_trace, plain_request, sender
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import tracescore
from tracescore import ConfigurationError
from tracescore.gateway import Gateway, GatewayConfig, load_gateway_config
from tracescore.gateway._engine import Engine
from tracescore.gateway._metrics import GatewayMetrics
from tracescore.gateway._otlp import set_value
from tracescore.testing import OTLPReceiver, Reply, StubLLMServer

EVAL = "gen_ai.evaluation.result"


def _config(tmp_path: Path, receiver: OTLPReceiver, **changes: Any) -> GatewayConfig:
    options: dict[str, Any] = {
        "grpc_endpoint": "127.0.0.1:0", "http_endpoint": "127.0.0.1:0",
        "health_endpoint": "127.0.0.1:0", "exporter_endpoint": receiver.grpc_endpoint,
        "journal_path": str(tmp_path / "journal.db"), "journal_sync": "normal",
        "scorers": [tracescore.create_content_similarity_scorer()], "isolation": "thread",
        "shutdown_timeout_s": 10.0,
    }
    options.update(changes)
    return GatewayConfig(**options)



def _http(gateway: Gateway, **options: Any) -> HttpExporter:
    return HttpExporter(endpoint=f"http://127.0.0.1:{gateway.http_port}/v1/traces", **options)


def _grpc(gateway: Gateway, **options: Any) -> GrpcExporter:
    return GrpcExporter(endpoint=f"http://127.0.0.1:{gateway.grpc_port}", insecure=True, **options)


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, dict(reply.headers), reply.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


@pytest.mark.parametrize("door", ["grpc", "http", "http-gzip"])
def test_every_span_is_forwarded_and_agent_spans_carry_scores(
        door: str, tmp_path: Path, otlp_receiver: OTLPReceiver, gateway_factory: Any) -> None:
    gateway = gateway_factory(_config(tmp_path, otlp_receiver))
    exporter = {"grpc": lambda: _grpc(gateway), "http": lambda: _http(gateway),
                "http-gzip": lambda: _http(gateway, compression=Compression.Gzip)}[door]()
    with sender(exporter) as tracer:
        for _ in range(5):
            agent_trace(tracer, plain_children=2)
    spans = otlp_receiver.wait_for_spans(15, timeout=15)
    assert len(spans) == 15
    agents = [s for s in spans if s.name == "invoke_agent geo"]
    assert len(agents) == 5
    for span in agents:
        (result,) = span.events_named(EVAL)
        assert result.attributes["tracescore.scorer.id"] == "content-similarity"
        assert 0 <= result.attributes["gen_ai.evaluation.score.value"] <= 1
        assert span.resource["service.name"] == "app"
        assert span.attributes["gen_ai.agent.name"] == "geo"
    assert all(not s.events for s in spans if s.name != "invoke_agent geo")
    stats = gateway.stats()
    assert stats["received"] == 15 and stats["held"] == 5


def test_relevancy_judged_through_litellm_over_http(
        tmp_path: Path, otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer,
        gateway_factory: Any) -> None:
    def judge(request: dict[str, Any]) -> Reply:
        step = request.get("response_format", {}).get("json_schema", {}).get("name", "")
        if step.endswith("statements"):
            return Reply(content={"statements": [ANSWER]})
        if step.endswith("verdicts"):
            return Reply(content={"results": [{"result": "yes", "reason": "answers it"}]})
        return Reply(content={"reason": "The score is 1 because it names the capital."})

    stub_llm.responder = judge
    scorer = tracescore.create_answer_relevancy_scorer(
        model="openai/judge-stub", api_base=stub_llm.base_url, api_key="sk-test", timeout=10)
    gateway = gateway_factory(_config(tmp_path, otlp_receiver, scorers=[scorer]))
    with sender(_grpc(gateway)) as tracer:
        agent_trace(tracer, plain_children=0)
    (span,) = otlp_receiver.wait_for_spans(1, timeout=20)
    (result,) = span.events_named(EVAL)
    assert result.attributes["gen_ai.evaluation.score.value"] == 1.0
    assert "names the capital" in result.attributes["gen_ai.evaluation.explanation"]
    assert len(span.events_named("tracescore.evaluation.step")) == 3
    assert {r.messages[-1]["content"].count(QUESTION) > 0 for r in stub_llm.requests} >= {True}


def test_otlp_json_is_accepted(tmp_path: Path, otlp_receiver: OTLPReceiver,
                               gateway_factory: Any) -> None:
    from tracescore._exporters import encode_otlp_json

    gateway = gateway_factory(_config(tmp_path, otlp_receiver))
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    with sender(memory) as tracer:
        agent_trace(tracer, plain_children=1)
    body = encode_otlp_json(memory.get_finished_spans()).encode()
    status, _, reply = _post(f"http://127.0.0.1:{gateway.http_port}/v1/traces", body,
                             {"Content-Type": "application/json"})
    assert status == 200 and json.loads(reply) == {}
    spans = otlp_receiver.wait_for_spans(2, timeout=10)
    agent = next(s for s in spans if s.name == "invoke_agent geo")
    assert agent.events_named(EVAL)


def test_next_hop_down_refuses_with_retryable_answers_then_delivers_everything_acknowledged(
        tmp_path: Path, gateway_factory: Any) -> None:
    receiver = OTLPReceiver().start()
    receiver.fail_next(10_000, status=503)
    gateway = gateway_factory(_config(tmp_path, receiver, max_pending_spans=90))
    url = f"http://127.0.0.1:{gateway.http_port}/v1/traces"
    accepted, refused_http = 0, []
    rng = random.Random(1)
    for _ in range(8):
        status, headers, _ = _post(url, plain_request(30, rng).SerializeToString(),
                                   {"Content-Type": "application/x-protobuf"})
        if status == 200:
            accepted += 30
        else:
            refused_http.append((status, headers.get("Retry-After")))
    assert accepted == 90  # 3 requests fit under the limit of 90 spans
    assert refused_http and all(s == 429 and r for s, r in refused_http)
    channel = grpc.insecure_channel(f"127.0.0.1:{gateway.grpc_port}")
    export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
    with pytest.raises(grpc.RpcError) as refused:
        export(plain_request(30, rng).SerializeToString(), timeout=5)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    channel.close()
    ready = urllib.request.Request(f"http://127.0.0.1:{gateway.health_port}/ready")
    with pytest.raises(urllib.error.HTTPError) as not_ready:
        urllib.request.urlopen(ready, timeout=5)
    assert not_ready.value.code == 503
    receiver.clear()  # the next hop is back
    spans = receiver.wait_for_spans(90, timeout=20)
    assert len({(s.trace_id, s.span_id) for s in spans}) == 90
    receiver.stop()


def test_spans_left_in_the_journal_are_forwarded_by_the_next_start(
        tmp_path: Path, gateway_factory: Any) -> None:
    receiver = OTLPReceiver().start()
    receiver.fail_next(10_000, status=503)
    first = Gateway(_config(tmp_path, receiver, max_wait_s=60.0)).start()
    with sender(_grpc(first)) as tracer:
        for _ in range(3):
            agent_trace(tracer, plain_children=2)
    assert first.stop(timeout_s=1.0) is False  # the next hop is down: the journal keeps them
    receiver.clear()
    second = gateway_factory(_config(tmp_path, receiver))
    spans = receiver.wait_for_spans(9, timeout=20)
    assert len({(s.trace_id, s.span_id) for s in spans}) == 9
    assert second.stats()["replayed"] == 9
    receiver.stop()


def test_bearer_token_is_checked(tmp_path: Path, otlp_receiver: OTLPReceiver,
                                 gateway_factory: Any) -> None:
    gateway = gateway_factory(_config(tmp_path, otlp_receiver, bearer_token="s3cret"))
    url = f"http://127.0.0.1:{gateway.http_port}/v1/traces"
    body = plain_request(2).SerializeToString()
    headers = {"Content-Type": "application/x-protobuf"}
    assert _post(url, body, headers)[0] == 401
    assert _post(url, body, {**headers, "Authorization": "Bearer wrong"})[0] == 401
    assert _post(url, body, {**headers, "Authorization": "Bearer s3cret"})[0] == 200
    channel = grpc.insecure_channel(f"127.0.0.1:{gateway.grpc_port}")
    export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
    with pytest.raises(grpc.RpcError) as denied:
        export(body, timeout=5)
    assert denied.value.code() == grpc.StatusCode.UNAUTHENTICATED
    export(body, timeout=5, metadata=(("authorization", "Bearer s3cret"),))
    channel.close()
    assert len(otlp_receiver.wait_for_spans(4, timeout=10)) == 4


def test_tls_receivers(tmp_path: Path, otlp_receiver: OTLPReceiver, gateway_factory: Any) -> None:
    import ssl

    import trustme

    authority = trustme.CA()
    cert = authority.issue_cert("127.0.0.1", "localhost")
    cert_file, key_file, ca_file = (tmp_path / n for n in ("cert.pem", "key.pem", "ca.pem"))
    cert_file.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    key_file.write_bytes(cert.private_key_pem.bytes())
    authority.cert_pem.write_to_path(str(ca_file))
    gateway = gateway_factory(_config(tmp_path, otlp_receiver, tls_cert_file=str(cert_file),
                                      tls_key_file=str(key_file)))
    import requests

    reply = requests.post(f"https://127.0.0.1:{gateway.http_port}/v1/traces",
                          data=plain_request(1).SerializeToString(), verify=str(ca_file),
                          headers={"Content-Type": "application/x-protobuf"}, timeout=10)
    assert reply.status_code == 200
    with sender(GrpcExporter(endpoint=f"https://localhost:{gateway.grpc_port}",
                             credentials=grpc.ssl_channel_credentials(ca_file.read_bytes()))
                ) as tracer:
        agent_trace(tracer, plain_children=0)
    assert len(otlp_receiver.wait_for_spans(2, timeout=15)) == 2
    context = ssl.create_default_context()  # no CA: the handshake fails, nothing is accepted
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"https://127.0.0.1:{gateway.http_port}/v1/traces",
                               data=b"", timeout=5, context=context)


def test_request_size_and_gzip_bomb_limits(tmp_path: Path, otlp_receiver: OTLPReceiver,
                                           gateway_factory: Any) -> None:
    gateway = gateway_factory(_config(tmp_path, otlp_receiver, max_request_bytes=20_000,
                                      max_decompressed_bytes=100_000))
    url = f"http://127.0.0.1:{gateway.http_port}/v1/traces"
    headers = {"Content-Type": "application/x-protobuf"}
    assert _post(url, plain_request(400).SerializeToString(), headers)[0] == 413
    bomb = gzip.compress(b"\0" * 50_000_000)  # 50 MB of zeros in ~50 kB... too big itself
    small_bomb = gzip.compress(b"\n\x00" * 2_000_000)
    assert len(small_bomb) < 20_000
    assert _post(url, small_bomb, {**headers, "Content-Encoding": "gzip"})[0] == 413
    assert _post(url, bomb, {**headers, "Content-Encoding": "gzip"})[0] == 413
    assert _post(url, b"\xff\xff not protobuf", headers)[0] == 400
    ok = gzip.compress(plain_request(3).SerializeToString())
    assert _post(url, ok, {**headers, "Content-Encoding": "gzip"})[0] == 200
    assert len(otlp_receiver.wait_for_spans(3, timeout=10)) == 3
    assert gateway.stats()["rejected"] == 4


def test_health_and_metrics_endpoints(tmp_path: Path, otlp_receiver: OTLPReceiver,
                                      gateway_factory: Any) -> None:
    gateway = gateway_factory(_config(tmp_path, otlp_receiver))
    base = f"http://127.0.0.1:{gateway.health_port}"
    with urllib.request.urlopen(base + "/", timeout=5) as reply:
        assert json.loads(reply.read())["status"] == "alive"
    with urllib.request.urlopen(base + "/ready", timeout=5) as reply:
        assert json.loads(reply.read())["status"] == "ready"
    with sender(_http(gateway)) as tracer:
        agent_trace(tracer, plain_children=1)
    otlp_receiver.wait_for_spans(2, timeout=10)
    with urllib.request.urlopen(base + "/metrics", timeout=5) as reply:
        text = reply.read().decode()
    assert "tracescore_gateway_received_total 2" in text
    assert "tracescore_gateway_held_total 1" in text
    assert "tracescore_gateway_scoring_scored 1" in text


# --- the engine alone: generated requests, every span out exactly once ------------------------------
_values = st.one_of(st.text(max_size=8), st.integers(-2**40, 2**40), st.booleans(),
                    st.floats(allow_nan=False, width=32))


@st.composite
def _requests(draw: Any) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    ids = iter(range(1, 10_000))
    for _ in range(draw(st.integers(1, 3))):
        rs = request.resource_spans.add()
        rs.resource.attributes.add(key="service.name").value.string_value = draw(st.text(max_size=5))
        for _ in range(draw(st.integers(1, 2))):
            ss = rs.scope_spans.add()
            ss.scope.name = draw(st.sampled_from(["a", "b", ""]))
            for _ in range(draw(st.integers(0, 6))):
                span = ss.spans.add(name=draw(st.text(max_size=10)),
                                    start_time_unix_nano=1, end_time_unix_nano=2)
                span.trace_id = draw(st.binary(min_size=16, max_size=16))
                span.span_id = next(ids).to_bytes(8, "big")
                for key, value in draw(st.dictionaries(st.text(min_size=1, max_size=6), _values,
                                                       max_size=3)).items():
                    set_value(span.attributes.add(key=key).value, value)
                if draw(st.booleans()):
                    for key, value in agent_attrs().items():
                        span.attributes.add(key=key).value.string_value = value
                    if draw(st.booleans()):
                        kv = span.attributes.add(key="nested").value.kvlist_value.values.add(
                            key="k")
                        kv.value.int_value = 1
    return request


def agent_attrs() -> dict[str, str]:
    from _gateway_helpers import agent_attributes

    return agent_attributes()


class _ListOutput:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None:
        self.bodies.append(body)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=_requests(), rate=st.sampled_from([0.0, 0.5, 1.0]))
def test_engine_forwards_every_span_once_unchanged_but_for_score_events(
        request: ExportTraceServiceRequest, rate: float) -> None:
    from tracescore.gateway._otlp import key_of, spans_of

    scorer = tracescore.OnlineScorer(tracescore.create_content_similarity_scorer(), rate=rate)
    sent = {key_of(span): (rs.resource, ss.scope, span.__deepcopy__())
            for rs, ss, span in spans_of(request)}
    output = _ListOutput()
    engine = Engine(scorers=[scorer], recognisers=load_gateway_config(environ={}).recognisers or (),
                    output=output, metrics=GatewayMetrics(),
                    processor_options={"isolation": "thread", "max_wait_s": 10.0})
    engine.accept(request.__deepcopy__(), request.SerializeToString())
    engine.shutdown(10.0)
    received = ExportTraceServiceRequest()
    received.ParseFromString(b"".join(output.bodies))
    out = [(rs.resource, ss.scope, span) for rs, ss, span in spans_of(received)]
    assert sorted(key_of(s) for _, _, s in out) == sorted(sent)
    for resource, scope, span in out:
        resource_in, scope_in, span_in = sent[key_of(span)]
        assert resource == resource_in and scope == scope_in
        added = span.events[len(span_in.events):]
        span.ClearField("events")
        span_in = span_in.__deepcopy__()
        span_in.ClearField("events")
        assert span == span_in
        assert all(e.name == EVAL or e.name.startswith("tracescore.") for e in added)


# --- configuration -------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "key"), [
    ("receivers: {grpc: 'nope'}", "receivers.grpc"),
    ("receivers: {grcp: '0.0.0.0:1'}", "receivers.grcp"),
    ("exporter: {protocol: carrier-pigeon}", "exporter.protocol"),
    ("limits: {max_pending_spans: 0}", "limits.max_pending_spans"),
    ("scoring: {scorers: [{scorer: similarity, rate: 2}]}", "scoring.scorers[0]"),
    ("scoring: {scorers: [{scorer: nosuch}]}", "scoring.scorers[0].scorer"),
    ("scoring: {scorers: [{scorer: similarity, colour: red}]}", "scoring.scorers[0].colour"),
    ("scoring: {concurrency: 0}", "scoring"),
    ("journal: {sync: sometimes}", "journal.sync"),
    ("[1, 2]", "top level"),
])
def test_bad_config_names_the_key(text: str, key: str, tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as error:
        load_gateway_config(path, environ={})
    assert key in str(error.value)


def test_config_file_env_and_overrides_in_that_order(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    dataset = tmp_path / "reference.jsonl"
    dataset.write_text(json.dumps({"input": QUESTION, "ground_truth": ANSWER}) + "\n")
    path.write_text(
        "exporter: {endpoint: 'http://file:4317', headers: {x-team: a}}\n"
        "scoring:\n  scorers:\n    - {scorer: similarity, rate: 0.25, agents: [geo],"
        " reference: reference.jsonl}\n"
        "recognise: {builtins: true}\n")
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4317", "TRACESCORE_GATEWAY_TOKEN": "t0k"}
    config = load_gateway_config(path, {"receivers.grpc": "127.0.0.1:5317"}, environ=env)
    assert config.exporter_endpoint == "http://env:4317"
    assert config.exporter_headers == {"x-team": "a"}
    assert config.bearer_token == "t0k"
    assert config.grpc_endpoint == "127.0.0.1:5317"
    (online,) = config.scorers or ()
    assert online.rate == 0.25 and online.agents == frozenset({"geo"})
    assert online.lookup_reference(QUESTION) == ANSWER


def test_serve_exits_2_naming_the_bad_key() -> None:
    from click.testing import CliRunner

    from tracescore.cli import main

    result = CliRunner().invoke(main, ["serve", "--set", "limits.retry_after_s=-1"])
    assert result.exit_code == 2
    assert "limits.retry_after_s" in result.output


def test_carrier_and_log_sinks_and_own_metrics_reach_the_next_hop(
        tmp_path: Path, otlp_receiver: OTLPReceiver, gateway_factory: Any) -> None:
    scorer = tracescore.OnlineScorer(tracescore.create_content_similarity_scorer(),
                                     sinks=("carrier", "log"))
    gateway = gateway_factory(_config(tmp_path, otlp_receiver, scorers=[scorer],
                                      telemetry_metrics=True, telemetry_interval_s=0.2))
    with sender(_grpc(gateway)) as tracer:
        agent_trace(tracer, plain_children=1)
    spans = otlp_receiver.wait_for_spans(3, timeout=15)
    agent = next(s for s in spans if s.name == "invoke_agent geo")
    assert not agent.events  # carrier sink: the agent span goes on unchanged
    carrier = next(s for s in spans if s.name.startswith("evaluation "))
    assert carrier.parent_span_id == agent.span_id and carrier.events_named(EVAL)
    (record,) = otlp_receiver.wait_for_logs(lambda r: r.event_name == EVAL, timeout=15)
    assert record.span_id == agent.span_id
    deadline = time.monotonic() + 10  # the records are counted: emitted, exported, batched
    while gateway.stats()["log_records_exported"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    stats = gateway.stats()
    assert stats["log_records_emitted"] == stats["log_records_exported"] >= 1
    assert stats["log_records_unexported"] == stats["log_records_dropped"] == 0
    assert "tracescore_gateway_log_records_unexported 0" in gateway.prometheus()
    received = otlp_receiver.wait_for_metric("tracescore.gateway.received", timeout=15)
    assert received.points and max(p.value or 0 for p in received.points) >= 2
    otlp_receiver.wait_for_metric("tracescore.evaluation.scored", timeout=15)


def test_the_config_examples_in_the_docs_load(tmp_path: Path) -> None:
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "gateway.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)
    assert len(blocks) >= 2
    (tmp_path / "expected-answers.jsonl").write_text(
        json.dumps({"input": QUESTION, "ground_truth": ANSWER}) + "\n")
    for index, block in enumerate(blocks):
        path = tmp_path / f"example-{index}.yaml"
        path.write_text(block)
        config = load_gateway_config(path, environ={})
        assert config.scorers and config.recognisers


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.tuples(st.integers(1, 200), st.sampled_from(["grpc", "http"])),
                      min_size=1, max_size=6))
def test_with_nothing_to_hold_and_an_idle_forwarder_the_span_reaches_the_next_hop_before_the_ack_unjournaled(
        sizes: list[tuple[int, str]], tmp_path: Path, otlp_receiver: OTLPReceiver) -> None:
    otlp_receiver.clear()
    journal = tmp_path / f"journal-{uuid.uuid4().hex}.db"
    gateway = Gateway(_config(tmp_path, otlp_receiver, journal_path=str(journal),
                              journal_sync="full")).start()
    try:
        _inline_rounds(gateway, sizes, otlp_receiver)
    finally:
        gateway.stop(timeout_s=5)


def _inline_rounds(gateway: Gateway, sizes: list[tuple[int, str]],
                   otlp_receiver: OTLPReceiver) -> None:
    assert gateway._journal is not None
    channel = grpc.insecure_channel(f"127.0.0.1:{gateway.grpc_port}")
    export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
    url = f"http://127.0.0.1:{gateway.http_port}/v1/traces"
    rng = random.Random(len(sizes))
    changes, total = gateway._journal.changes, 0
    for size, door in sizes:
        body = plain_request(size, rng).SerializeToString()
        if door == "grpc":
            export(body, timeout=10)
        else:
            assert _post(url, body, {"Content-Type": "application/x-protobuf"})[0] == 200
        total += size
        assert len(otlp_receiver.spans) == total  # already there when acknowledged
        assert gateway._journal.changes == changes  # and never written to the journal
    # the inline send fails: the request is journaled (fsync) before it is acknowledged
    otlp_receiver.fail_next(1, status=503)
    export(plain_request(7, rng).SerializeToString(), timeout=10)
    assert gateway._journal.changes > changes
    assert len(otlp_receiver.wait_for_spans(total + 7, timeout=20)) == total + 7
    channel.close()
    assert gateway._forwarder is not None and gateway._forwarder.drain(10)
    assert gateway._journal.pending() == 0  # its row went once the next hop had it

"""The "phoenix" sink: scorer results become Phoenix span annotations.

Against a real Phoenix (annotations read back through its REST API), and against a scripted
loopback server for what a healthy Phoenix never does: refusals, 429/5xx with retries, a server
that hangs (the agent must not wait), and a full queue (dropped and counted).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _helpers import GEO_ANSWER, geo_agent, geo_llm_and_judge, shut_down_pipelines
from hypothesis import given, settings
from hypothesis import strategies as st
from rigs.phoenix import PhoenixServer

import tracescore
from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore.online import OnlineScorer, ScoringSpanProcessor
from tracescore.online._phoenix_sink import (
    ENV_API_KEY,
    ENV_COLLECTOR_ENDPOINT,
    ENV_ENDPOINT,
    ENV_HEADERS,
    PhoenixSink,
    annotation,
)
from tracescore.online._records import ScoreRecord
from tracescore.testing import OTLPReceiver, Reply, StubLLMServer
from tracescore.testing._http import LoopbackServer, QuietHandler
from tracescore.testing._service import Service
from tracescore.testing._tools import free_port

ON_TOPIC = "What is the capital of France?"
OFF_TOPIC = "Will it rain in Lyon tomorrow?"  # the stub judge finds the answer off topic


# --- a scripted stand-in for Phoenix's annotation endpoint -------------------------------------------
class _Handler(QuietHandler):
    def do_POST(self) -> None:
        owner: ScriptedPhoenix = self.server.owner
        body = self.read_body()
        owner.arrived.set()
        owner.release.wait(30)
        status, headers = owner.next_reply()
        with owner.lock:
            owner.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                   "body": json.loads(body), "status": status})
        self.send_bytes(status, b'{"data": []}', "application/json", headers)


class ScriptedPhoenix(Service):
    """Records annotation POSTs; answers each with the next scripted status (then 200)."""

    def __init__(self, replies: list[int | tuple[int, dict[str, str]]] | None = None) -> None:
        self.replies = list(replies or [])
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self._server = LoopbackServer(_Handler, self)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.port}"

    def next_reply(self) -> tuple[int, dict[str, str]]:
        with self.lock:
            reply = self.replies.pop(0) if self.replies else 200
        return reply if isinstance(reply, tuple) else (reply, {})

    def annotations(self) -> list[dict[str, Any]]:
        with self.lock:
            return [a for r in self.requests if r["status"] == 200 for a in r["body"]["data"]]

    def start(self) -> ScriptedPhoenix:
        self._server.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self._server.close()


@pytest.fixture
def scripted() -> Iterator[ScriptedPhoenix]:
    with ScriptedPhoenix() as server:
        yield server


@pytest.fixture
def sinks() -> Iterator[Callable[..., PhoenixSink]]:
    made: list[PhoenixSink] = []

    def factory(endpoint: str, **options: Any) -> PhoenixSink:
        options.setdefault("flush_interval_s", 0.05)
        sink = PhoenixSink(endpoint, **options)
        made.append(sink)
        return sink

    yield factory
    for sink in made:
        sink.shutdown(5)


@pytest.fixture(autouse=True)
def _phoenix_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (ENV_ENDPOINT, ENV_COLLECTOR_ENDPOINT, ENV_API_KEY, ENV_HEADERS):
        monkeypatch.delenv(var, raising=False)


def _record(span_id: int = 0xABC, **attributes: Any) -> ScoreRecord:
    attrs = {sc.GEN_AI_EVALUATION_NAME: "Answer Relevancy", sc.TS_SCORER_ID: "answer-relevancy",
             sc.GEN_AI_EVALUATION_SCORE_VALUE: 0.5, **attributes}
    return ScoreRecord(trace_id=0x1234, span_id=span_id, scorer_id="answer-relevancy",
                       scorer_name="Answer Relevancy", judged=True, scorer_version="tracescore 0.1.0",
                       attributes=attrs)


def _wait(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


# --- the annotation body --------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(score=st.none() | st.floats(0, 1), label=st.none() | st.text(max_size=20),
       explanation=st.none() | st.text(max_size=50), error=st.none() | st.sampled_from(
           ["JudgeError", "TimeoutError"]), judged=st.booleans(),
       span_id=st.integers(1, 2**64 - 1), cost=st.none() | st.floats(0, 5))
def test_every_result_maps_to_one_annotation(score: float | None, label: str | None,
                                             explanation: str | None, error: str | None,
                                             judged: bool, span_id: int, cost: float | None
                                             ) -> None:
    attrs: dict[str, Any] = {sc.TS_SCORER_ID: "answer-relevancy", sc.TS_RUN_ID: "run-1"}
    for key, value in ((sc.GEN_AI_EVALUATION_SCORE_VALUE, score),
                       (sc.GEN_AI_EVALUATION_SCORE_LABEL, label),
                       (sc.GEN_AI_EVALUATION_EXPLANATION, explanation), (sc.ERROR_TYPE, error),
                       (sc.TS_JUDGE_COST_USD, cost), (sc.TS_JUDGE_MODEL, "openai/judge")):
        if value is not None:
            attrs[key] = value
    record = ScoreRecord(trace_id=7, span_id=span_id, scorer_id="answer-relevancy",
                         scorer_name="Answer Relevancy", judged=judged, scorer_version="v3",
                         attributes=attrs)
    body = annotation(record)
    assert json.loads(json.dumps(body)) == body  # plain JSON
    assert body["span_id"] == f"{span_id:016x}" and len(body["span_id"]) == 16
    assert body["name"] == "answer-relevancy"
    assert body["annotator_kind"] == ("LLM" if judged else "CODE")
    result = body["result"]
    assert result.get("score") == score
    assert result.get("label") == (label if label is not None else "error" if error else None)
    assert result.get("explanation") == explanation
    metadata = body["metadata"]
    assert metadata["scorer_version"] == "v3" and metadata["scorer_name"] == "Answer Relevancy"
    assert metadata["judge_model"] == "openai/judge" and metadata["run_id"] == "run-1"
    assert metadata.get("judge_cost_usd") == cost and metadata.get("error_type") == error
    assert metadata["trace_id"] == f"{7:032x}"


# --- delivery, retries, bounds -------------------------------------------------------------------------
def test_batches_are_posted_with_the_api_key_and_client_headers(
        scripted: ScriptedPhoenix, sinks, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_API_KEY, "phx-secret")
    monkeypatch.setenv(ENV_HEADERS, "x-team=evals,x-env=ci%20run")
    monkeypatch.setenv(ENV_COLLECTOR_ENDPOINT, scripted.url + "/v1/traces")  # OTLP form accepted
    sink = PhoenixSink(batch_size=3, flush_interval_s=60)
    try:
        for span_id in range(1, 8):
            sink.emit(_record(span_id))
        assert sink.force_flush(20)
        sizes = [len(r["body"]["data"]) for r in scripted.requests]
        assert sum(sizes) == 7 and max(sizes) <= 3
        assert sorted(int(a["span_id"], 16) for a in scripted.annotations()) == list(range(1, 8))
        request = scripted.requests[0]
        assert request["path"] == "/v1/span_annotations?sync=false"
        assert request["headers"]["authorization"] == "Bearer phx-secret"
        assert (request["headers"]["x-team"], request["headers"]["x-env"]) == ("evals", "ci run")
        assert sink.stats()["sent"] == 7 and sink.stats()["dropped"] == 0
    finally:
        sink.shutdown(5)


@pytest.mark.parametrize("reply", [503, 500, 429, (429, {"Retry-After": "0"}), 408])
def test_retryable_answers_are_retried_until_phoenix_takes_the_batch(sinks, reply: Any) -> None:
    with ScriptedPhoenix([reply, reply]) as server:
        sink = sinks(server.url, max_retries=3)
        sink.emit(_record())
        assert sink.force_flush(30)
        assert [r["status"] for r in server.requests] == [
            reply if isinstance(reply, int) else reply[0]] * 2 + [200]
        assert len(server.annotations()) == 1
        assert (sink.stats()["sent"], sink.stats()["retries"], sink.stats()["dropped"]) == (1, 2, 0)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_refused_batches_are_dropped_and_counted_without_retry(sinks, status: int) -> None:
    with ScriptedPhoenix([status]) as server:
        sink = sinks(server.url, max_retries=5)
        sink.emit(_record())
        sink.emit(_record(2))
        assert sink.force_flush(20)
        assert len(server.requests) == 1
        stats = sink.stats()
        assert (stats["dropped"], stats["dropped.rejected"], stats["sent"]) == (2, 2, 0)


def test_unreachable_phoenix_costs_retries_then_counts_the_drop(sinks) -> None:
    sink = sinks(f"http://127.0.0.1:{free_port()}", max_retries=2, timeout_s=2)
    sink.emit(_record())
    _wait(lambda: sink.stats()["dropped"] == 1)
    stats = sink.stats()
    assert (stats["dropped.retries_exhausted"], stats["retries"], stats["queued"]) == (1, 2, 0)


def test_a_hanging_phoenix_never_blocks_emit_and_a_full_queue_drops(sinks) -> None:
    with ScriptedPhoenix() as server:
        server.release.clear()  # Phoenix takes the request and does not answer
        sink = sinks(server.url, batch_size=1, queue_size=5)
        sink.emit(_record(1))
        assert server.arrived.wait(20)  # one batch in flight, stuck
        for span_id in range(2, 22):
            sink.emit(_record(span_id))  # returns at once: the queue takes 5, the rest drop
        stats = sink.stats()
        assert (stats["queued"], stats["dropped.queue_full"], stats["dropped"]) == (6, 15, 15)
        server.release.set()
        assert sink.force_flush(20)
        assert sorted(int(a["span_id"], 16) for a in server.annotations()) == list(range(1, 7))


def test_shutdown_sends_what_is_queued_then_drops_later_records(scripted: ScriptedPhoenix) -> None:
    sink = PhoenixSink(scripted.url, flush_interval_s=60)
    for span_id in range(1, 4):
        sink.emit(_record(span_id))
    sink.shutdown(10)
    sink.shutdown(10)  # idempotent
    sink.emit(_record(9))
    assert len(scripted.annotations()) == 3
    assert (sink.stats()["dropped.shutdown"], sink.stats()["sent"]) == (1, 3)


def test_a_shutdown_bounded_by_its_timeout_counts_what_it_could_not_send(sinks) -> None:
    with ScriptedPhoenix([503] * 100) as server:
        sink = PhoenixSink(server.url, max_retries=100, flush_interval_s=0.01)
        sink.emit(_record())
        _wait(lambda: len(server.requests) >= 1)
        sink.shutdown(0.5)
        assert sink.stats()["dropped.shutdown"] == 1 and sink.stats()["queued"] == 0


@pytest.mark.parametrize(("kwargs", "env", "message"), [
    ({"endpoint": "localhost:6006"}, {}, "PhoenixSink endpoint"),
    ({"endpoint": 6006}, {}, "PhoenixSink endpoint"),
    ({}, {ENV_ENDPOINT: "ftp://phoenix"}, ENV_ENDPOINT),
    ({}, {ENV_COLLECTOR_ENDPOINT: "phoenix:6006"}, ENV_COLLECTOR_ENDPOINT),
    ({}, {ENV_API_KEY: "  "}, ENV_API_KEY),
    ({"api_key": ""}, {}, "PhoenixSink api_key"),
    ({}, {ENV_HEADERS: "novalue"}, ENV_HEADERS),
    ({"headers": {"x": 1}}, {}, "PhoenixSink headers"),
    ({"batch_size": 0}, {}, "batch_size"),
    ({"queue_size": True}, {}, "queue_size"),
    ({"max_retries": -1}, {}, "max_retries"),
    ({"flush_interval_s": 0}, {}, "flush_interval_s"),
    ({"timeout_s": "10"}, {}, "timeout_s"),
])
def test_bad_configuration_names_the_key(monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any],
                                         env: dict[str, str], message: str) -> None:
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    with pytest.raises(ConfigurationError, match=message):
        PhoenixSink(**kwargs)


def test_defaults_come_from_phoenix_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert PhoenixSink().endpoint == "http://localhost:6006"
    monkeypatch.setenv(ENV_COLLECTOR_ENDPOINT, "https://phoenix.example:443/v1/traces")
    assert PhoenixSink().endpoint == "https://phoenix.example:443"
    monkeypatch.setenv(ENV_ENDPOINT, "https://api.phoenix.example/")  # Phoenix's order: it wins
    assert PhoenixSink().endpoint == "https://api.phoenix.example"
    assert PhoenixSink("http://other:6006/").endpoint == "http://other:6006"


def test_the_processor_refuses_unknown_or_broken_result_sinks() -> None:
    from opentelemetry.sdk.trace import SpanProcessor

    scorer = tracescore.create_content_similarity_scorer()
    with pytest.raises(ConfigurationError, match="unknown result sink kafka"):
        ScoringSpanProcessor(SpanProcessor(), [scorer], sinks={"kafka": object()})  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError, match=r"sinks\['phoenix'\] must have emit"):
        ScoringSpanProcessor(SpanProcessor(), [scorer], sinks={"phoenix": object()})  # type: ignore[dict-item]


# --- through online scoring ---------------------------------------------------------------------------
@pytest.fixture
def _pipelines(span_exporter) -> Iterator[None]:
    yield
    shut_down_pipelines()


@pytest.mark.usefixtures("_pipelines")
@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_online_scores_reach_phoenix_as_annotations_of_their_spans(
        scripted: ScriptedPhoenix, span_exporter, isolation: str) -> None:
    similarity = tracescore.create_content_similarity_scorer()
    handle = tracescore.configure(
        exporter="none",
        scorers=[OnlineScorer(similarity, sinks=("span", "phoenix"))],
        online={"sinks": {"phoenix": PhoenixSink(scripted.url, flush_interval_s=0.05)},
                "isolation": isolation},
    )
    answer = tracescore.agent(name="echo")(lambda question: "Paris is the capital of France.")
    answer("What is the capital of France?")
    assert handle.flush(30)
    (agent,) = [s for s in span_exporter.get_finished_spans() if s.name == "invoke_agent echo"]
    (note,) = scripted.annotations()
    assert note["span_id"] == f"{agent.context.span_id:016x}"
    assert (note["name"], note["annotator_kind"]) == ("content-similarity", "CODE")
    expected = similarity.run(input="What is the capital of France?",
                              output="Paris is the capital of France.")
    assert note["result"]["score"] == expected.score
    assert note["metadata"]["scorer_version"] == similarity.version  # the span event's too
    stats = handle._pipeline.stats()  # type: ignore[attr-defined]
    assert (stats["phoenix.sent"], stats["phoenix.dropped"]) == (1, 0)


@pytest.mark.usefixtures("_pipelines")
def test_a_failing_scorer_is_annotated_as_an_error(scripted: ScriptedPhoenix, span_exporter,
                                                   stub_llm: StubLLMServer) -> None:
    stub_llm.responder = lambda request: Reply(status=400, content="judge refuses")
    relevancy = tracescore.create_answer_relevancy_scorer(
        model="openai/judge", api_base=stub_llm.base_url, api_key="sk-test")
    handle = tracescore.configure(
        exporter="none", scorers=[OnlineScorer(relevancy, sinks="phoenix")],
        online={"sinks": {"phoenix": PhoenixSink(scripted.url, flush_interval_s=0.05)},
                "isolation": "thread"},
    )
    tracescore.agent(name="echo")(lambda question: "Paris.")("Capital of France?")
    assert handle.flush(60)
    (note,) = scripted.annotations()
    assert note["annotator_kind"] == "LLM" and note["result"]["label"] == "error"
    assert "score" not in note["result"] and note["metadata"]["error_type"]
    assert note["metadata"]["scorer_version"] == relevancy.version
    assert note["metadata"]["judge_model"] == "openai/judge"  # named by a failed run too


# --- a real Phoenix -------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first run installs Phoenix into the cache
@pytest.mark.usefixtures("_pipelines")
def test_scores_appear_as_span_annotations_in_phoenix(
        phoenix: PhoenixServer, stub_llm: StubLLMServer, span_exporter) -> None:
    stub_llm.responder = geo_llm_and_judge
    geo = geo_agent(stub_llm)
    relevancy = tracescore.create_answer_relevancy_scorer(
        model="openai/judge", api_base=stub_llm.base_url, api_key="sk-test")
    similarity = tracescore.create_content_similarity_scorer()
    handle = tracescore.configure(
        exporter="otlp-http", endpoint=phoenix.base_url, openinference=True,
        scorers=[OnlineScorer(relevancy, sinks=("span", "phoenix")),
                 OnlineScorer(similarity, sinks=("span", "phoenix"))],
        online={"sinks": {"phoenix": PhoenixSink(phoenix.base_url)}},
    )
    for question in (ON_TOPIC, OFF_TOPIC):
        with tracescore.ground_truth(GEO_ANSWER):
            assert geo(question) == GEO_ANSWER
    assert handle.flush(60)
    agents = {s.attributes[sc.OI_INPUT_VALUE]: f"{s.context.span_id:016x}"
              for s in span_exporter.get_finished_spans() if s.name == "invoke_agent geo"}
    found = phoenix.wait_for_span_annotations(list(agents.values()), expected=4)
    by_span = {(a["span_id"], a["name"]): a for a in found}
    for question, score, label in ((ON_TOPIC, 1.0, "relevant"), (OFF_TOPIC, 0.0, "irrelevant")):
        relevant = by_span[(agents[question], "answer-relevancy")]
        assert relevant["annotator_kind"] == "LLM"
        assert relevant["result"]["score"] == score and relevant["result"]["label"] == label
        assert relevant["result"]["explanation"].startswith(f"The score is {score:g} because")
        assert relevant["metadata"]["judge_model"] == "openai/judge"
        assert relevant["metadata"]["judge_calls"] == 3
        similar = by_span[(agents[question], "content-similarity")]
        assert similar["annotator_kind"] == "CODE" and similar["result"]["score"] == 1.0


# --- through the scoring gateway -----------------------------------------------------------------------
def test_the_gateway_annotates_the_spans_it_scores(
        tmp_path, scripted: ScriptedPhoenix, otlp_receiver: OTLPReceiver,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from _gateway_helpers import agent_trace, sender
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from tracescore.gateway import Gateway, load_gateway_config

    monkeypatch.setenv(ENV_ENDPOINT, scripted.url)  # the gateway's sinks read Phoenix's variables
    (tmp_path / "gateway.yaml").write_text(f"""
receivers: {{grpc: "127.0.0.1:0", http: "127.0.0.1:0", health: "127.0.0.1:0"}}
exporter: {{endpoint: "{otlp_receiver.grpc_endpoint}", protocol: grpc}}
journal: {{path: "{tmp_path / 'journal.db'}", sync: normal}}
scoring:
  isolation: thread
  scorers:
    - {{scorer: content-similarity, sinks: [span, phoenix]}}
""")
    gateway = Gateway(load_gateway_config(tmp_path / "gateway.yaml", environ={})).start()
    try:
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{gateway.http_port}/v1/traces")
        with sender(exporter) as tracer:
            for _ in range(3):
                agent_trace(tracer, plain_children=1)
        spans = otlp_receiver.wait_for_spans(6, timeout=30)
        agents = sorted(s.span_id for s in spans if s.name == "invoke_agent geo")
        _wait(lambda: len(scripted.annotations()) == 3, timeout=30)
    finally:
        gateway.stop(timeout_s=10)
    notes = scripted.annotations()
    assert sorted(n["span_id"] for n in notes) == agents
    assert {(n["name"], n["annotator_kind"]) for n in notes} == {("content-similarity", "CODE")}
    # the gateway's scorer, built from its config, is the same version as one built in code
    version = tracescore.create_content_similarity_scorer().version
    assert {n["metadata"]["scorer_version"] for n in notes} == {version}


def test_the_demo_annotates_in_phoenix_when_phoenix_is_configured(
        tmp_path, scripted: ScriptedPhoenix) -> None:
    from test_cli import run

    result = run("demo", "--spans-file", str(tmp_path / "demo.jsonl"), cwd=tmp_path,
                 env={ENV_ENDPOINT: scripted.url})
    assert result.returncode == 0, result.stderr
    notes = scripted.annotations()
    # one per question: the answer-relevancy score, the one Phoenix's column has room for
    # (content similarity stays in the span's events)
    assert len(notes) == 6
    assert {(n["name"], n["annotator_kind"]) for n in notes} == {("answer-relevancy", "LLM")}
    assert len({n["span_id"] for n in notes}) == 6


def test_a_forked_child_sends_its_own_annotations(scripted: ScriptedPhoenix) -> None:
    sink = PhoenixSink(scripted.url, flush_interval_s=0.05)
    try:
        sink.emit(_record(1))
        assert sink.force_flush(10)  # the parent's sending thread is running
        pid = os.fork()
        if pid == 0:  # the child: the parent's thread does not exist here
            code = 1
            try:
                sink.emit(_record(2))
                code = 0 if sink.force_flush(10) and sink.stats()["sent"] == 1 else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert sorted(int(a["span_id"], 16) for a in scripted.annotations()) == [1, 2]
    finally:
        sink.shutdown(5)


def test_shutdown_with_a_hanging_phoenix_counts_what_it_could_not_send() -> None:
    from opentelemetry.sdk.trace import SpanProcessor

    with ScriptedPhoenix() as server:
        server.release.clear()  # Phoenix takes the request and never answers
        sink = PhoenixSink(server.url, batch_size=1, flush_interval_s=0.01, timeout_s=60)
        processor = ScoringSpanProcessor(
            SpanProcessor(), [OnlineScorer(tracescore.create_content_similarity_scorer(),
                                           sinks="phoenix")],
            sinks={"phoenix": sink}, shutdown_timeout_s=1.0, isolation="thread")
        for span_id in range(1, 4):
            sink.emit(_record(span_id))  # as the processor delivers it
        assert server.arrived.wait(20)
        processor.shutdown()  # bounded by shutdown_timeout_s, not by Phoenix
        stats = processor.stats()
        assert stats["phoenix.dropped.shutdown"] == 2 and stats["phoenix.sent"] == 0

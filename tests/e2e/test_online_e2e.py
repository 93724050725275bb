"""Online scoring end to end: decorated agents, real scorers, real litellm to the stub judge over
HTTP, real OTLP exporters into the loopback receiver (HTTP and gRPC).

Every test checks what a backend receives: each agent span exactly once, with its score events,
or with an event saying why it is unscored; drops and failures are counted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from _helpers import SCORING_BUDGET_S, shut_down_pipelines
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import tracescore
from tracescore import _semconv as sc
from tracescore.online import OnlineScorer, ScoringSpanProcessor
from tracescore.online._processor import core_of
from tracescore.testing import OTLPReceiver, ReceivedSpan, Reply, StubLLMServer, pytest_plugin

PROTOCOLS = ["http", "grpc"]
QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France. France is in Europe. Cats purr."
STATEMENTS_REQUEST = {"response_format": {"json_schema": {"name": "answer_relevancy_statements"}}}


@pytest.fixture(scope="module", autouse=True)
def _litellm_imported() -> None:
    """Import litellm once up front (it takes seconds) so scripted judge delays dominate timing."""
    import litellm  # noqa: F401


@pytest.fixture(autouse=True)
def _clean_pipelines(span_exporter) -> Iterator[None]:
    yield
    shut_down_pipelines()


def endpoint(receiver: OTLPReceiver, protocol: str) -> str:
    return receiver.http_endpoint if protocol == "http" else receiver.grpc_endpoint


def judge_replies(request: dict[str, Any], delay: float = 0.0) -> Reply:
    """A judge that answers each step of answer relevancy: 3 statements, yes/unsure/no, reason."""
    step = request.get("response_format", {}).get("json_schema", {}).get("name", "")
    if step.endswith("statements"):
        content: Any = {"statements": ANSWER.replace(". ", ".|").split("|")}
    elif step.endswith("verdicts"):
        content = {"results": [{"result": v, "reason": f"verdict {v}"}
                               for v in ("yes", "unsure", "no")]}
    else:
        content = {"reason": "The score is 0.43 because one statement answers the question."}
    return Reply(content=content, delay=delay)


def relevancy(stub: StubLLMServer | None = None, *, api_base: str | None = None,
              **options: Any) -> tracescore.AnswerRelevancyScorer:
    return tracescore.create_answer_relevancy_scorer(
        model="openai/judge-stub", api_base=api_base or stub.base_url,
        api_key="sk-test", timeout=10, backoff_base_s=0.001, backoff_max_s=0.01, **options,
    )


@tracescore.agent(name="support")
def support_agent(question: str) -> str:
    return ANSWER


def agent_spans(receiver: OTLPReceiver) -> list[ReceivedSpan]:
    return [s for s in receiver.spans if s.name == "invoke_agent support"]


def result_events(span: ReceivedSpan) -> dict[str, dict[str, Any]]:
    return {e.attributes[sc.TS_SCORER_ID]: e.attributes
            for e in span.events_named(sc.GEN_AI_EVALUATION_RESULT)}


def assert_each_once(receiver: OTLPReceiver, n: int) -> list[ReceivedSpan]:
    spans = agent_spans(receiver)
    counts = Counter(s.span_id for s in spans)
    assert len(counts) == n and set(counts.values()) == {1}
    return spans


def processor_of(handle: Any) -> ScoringSpanProcessor:
    pipeline = handle._pipeline
    assert isinstance(pipeline, ScoringSpanProcessor)
    return pipeline


# --- the happy path ---------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_decorated_agent_span_arrives_with_its_scores(otlp_receiver: OTLPReceiver,
                                                      stub_llm: StubLLMServer, protocol: str) -> None:
    stub_llm.responder = judge_replies
    similarity = tracescore.create_content_similarity_scorer()
    handle = tracescore.configure(
        exporter=f"otlp-{protocol}", endpoint=endpoint(otlp_receiver, protocol),
        scorers=[relevancy(stub_llm), OnlineScorer(similarity, rate=1.0)],
        online={"max_wait_s": SCORING_BUDGET_S},
    )
    with tracescore.ground_truth(ANSWER):
        assert support_agent(QUESTION) == ANSWER
    assert handle.flush(SCORING_BUDGET_S)
    (span,) = otlp_receiver.wait_for_spans(1)
    assert span.protocol == protocol and span.name == "invoke_agent support"
    events = result_events(span)
    rel, sim = events["answer-relevancy"], events["content-similarity"]
    assert rel[sc.GEN_AI_EVALUATION_NAME] == "Answer Relevancy"
    assert rel[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 0.43
    assert rel[sc.GEN_AI_EVALUATION_SCORE_LABEL] == "partially_relevant"
    assert rel[sc.GEN_AI_EVALUATION_EXPLANATION].startswith("The score is 0.43")
    assert rel[sc.TS_JUDGE_MODEL] == "openai/judge-stub" and rel[sc.TS_JUDGE_CALLS] == 3
    assert rel[sc.TS_JUDGE_INPUT_TOKENS] > 0 and rel[sc.TS_SAMPLING_RATE] == 1.0
    assert len(rel[sc.TS_RUN_ID]) >= 32
    assert sim[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0  # output vs the ground truth given
    assert sim[sc.GEN_AI_EVALUATION_SCORE_LABEL] == "similar"
    rel_steps = [e.attributes for e in span.events_named(sc.TS_EVALUATION_STEP)
                 if e.attributes[sc.TS_SCORER_ID] == "answer-relevancy"]
    assert [s[sc.TS_STEP_NAME] for s in rel_steps] == ["preprocess", "analyze", "reason"]
    assert QUESTION in rel_steps[1][sc.TS_STEP_PROMPT] and "unsure" in rel_steps[1][sc.TS_STEP_RESULT]
    assert len(stub_llm.requests) == 3
    assert [s.name for s in otlp_receiver.spans] == ["invoke_agent support"]  # judge not traced
    isolation = core_of(processor_of(handle)).isolation  # the default: the judge ran in the scoring process
    assert isolation is not None and isolation.child_pid is not None and isolation.in_thread == 0


def test_scoring_works_with_content_capture_off(otlp_receiver: OTLPReceiver,
                                                stub_llm: StubLLMServer) -> None:
    stub_llm.responder = judge_replies
    handle = tracescore.configure(exporter="otlp-http", endpoint=otlp_receiver.http_endpoint,
                                  capture_content=False, scorers=[relevancy(stub_llm)],
                                  online={"max_wait_s": SCORING_BUDGET_S})
    support_agent(QUESTION)
    assert handle.flush(SCORING_BUDGET_S)
    (span,) = otlp_receiver.wait_for_spans(1)
    assert sc.GEN_AI_OUTPUT_MESSAGES not in span.attributes
    (rel,) = result_events(span).values()
    assert rel[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 0.43
    assert rel[sc.GEN_AI_EVALUATION_SCORE_LABEL] == "partially_relevant"
    assert sc.GEN_AI_EVALUATION_EXPLANATION not in rel
    assert span.events_named(sc.TS_EVALUATION_STEP) == []
    assert QUESTION in str(stub_llm.requests[1].messages)  # the judge still saw the real call


def test_own_tracer_provider_one_line_hookup(otlp_receiver: OTLPReceiver,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # the documented hook-up: provider.add_span_processor(ScoringSpanProcessor(Batch..., scorers))
    processor = ScoringSpanProcessor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_receiver.traces_url)),
        scorers=[tracescore.create_content_similarity_scorer()],
    )
    monkeypatch.setattr(pytest_plugin._switch, "delegate", processor)  # the test provider's slot
    try:
        support_agent(ANSWER)  # input == output: similarity 1.0
        assert processor.force_flush(20_000)
    finally:
        processor.shutdown()
    (span,) = otlp_receiver.wait_for_spans(1)
    assert result_events(span)["content-similarity"][sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0


def test_ground_truth_sources_and_instrumented_agent_objects(otlp_receiver: OTLPReceiver) -> None:
    @tracescore.agent(name="constant", ground_truth="Paris")
    def constant(question: str) -> str:
        return "Paris"

    @tracescore.agent(name="computed", ground_truth=lambda question: question.split()[-1])
    def computed(question: str) -> str:
        return "Lyon"

    @tracescore.agent(name="inside")
    def inside(question: str) -> str:
        tracescore.set_ground_truth("Marseille")
        return "Marseille"

    class Bot:
        def run(self, question: str) -> str:
            return "Nice"

    bot = tracescore.instrument_agent(Bot(), name="bot")
    handle = tracescore.configure(exporter="otlp-http", endpoint=otlp_receiver.http_endpoint,
                                  scorers=[tracescore.create_content_similarity_scorer()])
    try:
        constant("What is the capital of France?")
        computed("Name a city: Lyon")
        inside("Which port city?")
        with tracescore.ground_truth("Nice"):
            bot.run("Where is the carnival?")
        assert handle.flush(20)
    finally:
        tracescore.uninstrument_agent(bot)
    spans = {s.attributes[sc.GEN_AI_AGENT_NAME]: s for s in otlp_receiver.wait_for_spans(4)}
    # every output equals its ground truth, while it differs from its input
    for name in ("constant", "computed", "inside", "bot"):
        sim = result_events(spans[name])["content-similarity"]
        assert sim[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0, name


def test_nested_agents_are_each_scored_and_keep_their_parentage(
        otlp_receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    @tracescore.agent(name="inner")
    def inner(question: str) -> str:
        return question

    @tracescore.agent(name="outer")
    def outer(question: str) -> str:
        return inner(question) + "!"

    processor = ScoringSpanProcessor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_receiver.traces_url)),
        scorers=[tracescore.create_content_similarity_scorer()],
    )
    monkeypatch.setattr(pytest_plugin._switch, "delegate", processor)
    try:
        outer("Paris is the capital of France")
        assert processor.force_flush(20_000)
    finally:
        processor.shutdown()
    spans = {s.attributes[sc.GEN_AI_AGENT_NAME]: s for s in otlp_receiver.wait_for_spans(2)}
    assert len(otlp_receiver.spans) == 2
    assert spans["inner"].parent_span_id == spans["outer"].span_id
    assert result_events(spans["inner"])["content-similarity"][
        sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    assert 0.9 < result_events(spans["outer"])["content-similarity"][
        sc.GEN_AI_EVALUATION_SCORE_VALUE] < 1.0


# --- carrier and log sinks --------------------------------------------------------------------------
def test_carrier_and_log_sinks_through_otlp(otlp_receiver: OTLPReceiver,
                                            stub_llm: StubLLMServer) -> None:
    stub_llm.responder = judge_replies
    loggers = LoggerProvider()
    loggers.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=otlp_receiver.logs_url)))
    handle = tracescore.configure(
        exporter="otlp-http", endpoint=otlp_receiver.http_endpoint,
        scorers=[OnlineScorer(relevancy(stub_llm), sinks=["carrier", "log"])],
        online={"logger_provider": loggers},
    )
    support_agent(QUESTION)
    assert handle.flush(SCORING_BUDGET_S)
    agent, carrier = (otlp_receiver.wait_for_spans(2)[i] for i in (0, 1))
    if agent.name != "invoke_agent support":
        agent, carrier = carrier, agent
    assert agent.events == []  # not held, nothing attached
    assert carrier.name == "evaluation Answer Relevancy"
    assert carrier.parent_span_id == agent.span_id and carrier.trace_id == agent.trace_id
    assert [(link.trace_id, link.span_id) for link in carrier.links] == [(agent.trace_id,
                                                                           agent.span_id)]
    assert result_events(carrier)["answer-relevancy"][sc.GEN_AI_EVALUATION_SCORE_VALUE] == 0.43
    (record,) = otlp_receiver.wait_for_logs(
        lambda r: r.event_name == sc.GEN_AI_EVALUATION_RESULT)
    assert (record.trace_id, record.span_id) == (agent.trace_id, agent.span_id)
    assert record.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 0.43
    loggers.shutdown()


# --- judge faults -----------------------------------------------------------------------------------------
def _configure_faulty(receiver: OTLPReceiver, scorer: Any, **online: Any) -> Any:
    return tracescore.configure(exporter="otlp-http", endpoint=receiver.http_endpoint,
                                scorers=[scorer], online={"max_wait_s": SCORING_BUDGET_S, **online})


def test_judge_down_is_recorded_as_a_failure(otlp_receiver: OTLPReceiver) -> None:
    dead = StubLLMServer().start()
    base = dead.base_url
    dead.stop()  # nothing listens there any more
    handle = _configure_faulty(otlp_receiver, relevancy(api_base=base, max_retries=1))
    for _ in range(3):
        assert support_agent(QUESTION) == ANSWER
    assert handle.flush(SCORING_BUDGET_S)
    for span in assert_each_once(otlp_receiver, 3):
        rel = result_events(span)["answer-relevancy"]
        assert rel[sc.ERROR_TYPE] == "ScorerError" and rel[sc.TS_FAILED_STEP] == "preprocess"
        assert sc.GEN_AI_EVALUATION_SCORE_VALUE not in rel
    stats = processor_of(handle).stats()
    assert (stats["failed"], stats["scored"]) == (3, 0)


def test_rate_limited_and_5xx_replies_are_retried(otlp_receiver: OTLPReceiver,
                                                  stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue_error(429, "slow down", headers={"Retry-After": "0"})
    stub_llm.enqueue_error(503, "overloaded")
    stub_llm.responder = judge_replies
    handle = _configure_faulty(otlp_receiver, relevancy(stub_llm, max_retries=3))
    support_agent(QUESTION)
    assert handle.flush(SCORING_BUDGET_S)
    (span,) = assert_each_once(otlp_receiver, 1)
    assert result_events(span)["answer-relevancy"][sc.GEN_AI_EVALUATION_SCORE_VALUE] == 0.43
    assert len(stub_llm.requests) == 5


def test_persistent_server_errors_end_as_a_failure_event(otlp_receiver: OTLPReceiver,
                                                         stub_llm: StubLLMServer) -> None:
    stub_llm.responder = lambda request: Reply(status=500, content="boom")
    handle = _configure_faulty(otlp_receiver, relevancy(stub_llm, max_retries=2))
    support_agent(QUESTION)
    assert handle.flush(SCORING_BUDGET_S)
    (span,) = assert_each_once(otlp_receiver, 1)
    assert result_events(span)["answer-relevancy"][sc.ERROR_TYPE] == "ScorerError"
    assert len(stub_llm.requests) == 3  # first try + 2 retries
    assert processor_of(handle).stats()["failed"] == 1


def test_malformed_judge_replies_fail_the_step_with_the_raw_reply(otlp_receiver: OTLPReceiver,
                                                                  stub_llm: StubLLMServer) -> None:
    stub_llm.responder = lambda request: Reply(content="Sure! The statements are: Paris.")
    handle = _configure_faulty(otlp_receiver, relevancy(stub_llm))
    support_agent(QUESTION)
    assert handle.flush(SCORING_BUDGET_S)
    (span,) = assert_each_once(otlp_receiver, 1)
    rel = result_events(span)["answer-relevancy"]
    assert rel[sc.ERROR_TYPE] == "ScorerError" and rel[sc.TS_FAILED_STEP] == "preprocess"
    (failed_step,) = span.events_named(sc.TS_EVALUATION_STEP)
    assert failed_step.attributes[sc.TS_STEP_NAME] == "preprocess"
    assert "The statements are" in failed_step.attributes[sc.TS_STEP_RESULT]


def test_judge_slower_than_max_wait(otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue(judge_replies(STATEMENTS_REQUEST, delay=2.0))
    stub_llm.responder = judge_replies
    handle = _configure_faulty(
        otlp_receiver, OnlineScorer(relevancy(stub_llm), sinks=["span", "carrier"]),
        max_wait_s=0.2,
    )
    support_agent(QUESTION)
    (span,) = otlp_receiver.wait_for_spans(lambda s: s.name == "invoke_agent support", timeout=20)
    (why,) = span.events_named(sc.TS_UNSCORED)  # exported when max wait passed, without score
    assert why.attributes[sc.TS_UNSCORED_REASON] == "timeout"
    assert handle.flush(SCORING_BUDGET_S)  # the late score still reaches the carrier span
    (carrier,) = otlp_receiver.wait_for_spans(
        lambda s: s.name == "evaluation Answer Relevancy", timeout=20)
    assert result_events(carrier)["answer-relevancy"][sc.GEN_AI_EVALUATION_SCORE_VALUE] == 0.43
    assert_each_once(otlp_receiver, 1)
    assert processor_of(handle).stats()["held_timeout"] == 1


# --- overload, shutdown, exporter faults ------------------------------------------------------------------
def test_burst_of_thousands_of_calls_every_span_arrives_once(
        otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    stub_llm.responder = lambda request: judge_replies(request, delay=0.05)
    processor = ScoringSpanProcessor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_receiver.traces_url),
                           max_queue_size=20_000, max_export_batch_size=1000),
        scorers=[relevancy(stub_llm)], queue_size=30, concurrency=4,
        max_wait_s=SCORING_BUDGET_S,  # a held span's reason must be the overload, not the wait
    )
    monkeypatch.setattr(pytest_plugin._switch, "delegate", processor)
    calls = 2000
    try:
        for _ in range(calls):
            support_agent(QUESTION)
        assert processor.force_flush(int(SCORING_BUDGET_S * 1000))
        stats = processor.stats()
    finally:
        processor.shutdown()
    spans = assert_each_once(otlp_receiver, calls)
    scored = [s for s in spans if sc.GEN_AI_EVALUATION_RESULT in {e.name for e in s.events}]
    full = [s for s in spans if s.events_named(sc.TS_UNSCORED)]
    assert len(scored) + len(full) == calls
    assert stats["dropped.queue_full"] == len(full) > calls // 2
    assert stats["scored"] == len(scored) >= 30
    assert all(e.attributes[sc.TS_UNSCORED_REASON] == "queue_full"
               for s in full for e in s.events_named(sc.TS_UNSCORED))


def test_shutdown_with_judge_calls_in_flight(otlp_receiver: OTLPReceiver,
                                             stub_llm: StubLLMServer) -> None:
    stub_llm.responder = lambda request: judge_replies(request, delay=5.0)
    handle = _configure_faulty(otlp_receiver, relevancy(stub_llm), shutdown_timeout_s=0.2,
                               concurrency=2)
    for _ in range(6):
        support_agent(QUESTION)
    stub_llm.wait_for_requests(2, timeout=SCORING_BUDGET_S)
    processor = processor_of(handle)
    handle.shutdown(2)  # bounded: the judge is far slower
    otlp_receiver.wait_for_spans(6)
    spans = assert_each_once(otlp_receiver, 6)
    reasons = [e.attributes[sc.TS_UNSCORED_REASON] for s in spans
               for e in s.events_named(sc.TS_UNSCORED)]
    assert reasons == ["shutdown"] * 6
    assert processor.stats()["scored"] == 0 and processor.stats()["held"] == 0


def test_failing_exporter_is_retried_and_each_span_arrives_once(otlp_receiver: OTLPReceiver) -> None:
    otlp_receiver.fail_next(2, status=503)
    handle = tracescore.configure(exporter="otlp-http", endpoint=otlp_receiver.http_endpoint,
                                  scorers=[tracescore.create_content_similarity_scorer()])
    for _ in range(5):
        support_agent(ANSWER)
    assert handle.flush(30)
    spans = assert_each_once(otlp_receiver, 5)
    assert all(result_events(s)["content-similarity"][sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
               for s in spans)


_EXIT_APP = """
import tracescore

tracescore.configure(exporter="otlp-http", endpoint={endpoint!r}, scorers=[
    tracescore.create_content_similarity_scorer(),
    tracescore.create_answer_relevancy_scorer(  # judged: runs in the scoring process
        model="openai/judge-stub", api_base={api_base!r}, api_key="sk-test", timeout=10)],
    online={{"max_wait_s": {budget}}})

@tracescore.agent(name="support")
def support(question):
    return question

# the scoring process starts (and imports litellm: 5 s of CPU) before the call the test is about
support("Paris is the capital of France.")
assert tracescore.flush({budget})
support("Paris is the capital of France.")
print("done")  # no flush: interpreter exit must score and deliver this span
"""


def test_interpreter_exit_scores_and_exports_held_spans(otlp_receiver: OTLPReceiver,
                                                       stub_llm: StubLLMServer) -> None:
    stub_llm.responder = lambda request: judge_replies(request, delay=0.3)
    code = textwrap.dedent(_EXIT_APP).format(endpoint=otlp_receiver.http_endpoint,
                                             api_base=stub_llm.base_url, budget=SCORING_BUDGET_S)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=2 * SCORING_BUDGET_S, check=False)
    assert done.returncode == 0, done.stderr
    otlp_receiver.wait_for_spans(2)
    for span in assert_each_once(otlp_receiver, 2):  # the second one is scored at exit
        scores = {k: v[sc.GEN_AI_EVALUATION_SCORE_VALUE] for k, v in result_events(span).items()}
        assert scores == {"content-similarity": 1.0, "answer-relevancy": 0.43}


_STUCK_SCORER = """
import time

from tracescore.scoring import Scorer


class StuckScorer(Scorer):
    \"\"\"Blocking code in a judged scorer: the scoring process's loop never reads its EOF.\"\"\"

    id = "stuck"
    name = "Stuck"
    uses_judge = True  # runs in the scoring process

    async def arun(self, *, input, output, ground_truth=None, run_id=None):
        time.sleep({seconds})
"""

_STUCK_EXIT_APP = """
import tracescore
from stuck_scorer import StuckScorer

tracescore.configure(exporter="otlp-http", endpoint={endpoint!r}, scorers=[StuckScorer()])

@tracescore.agent(name="support")
def support(question):
    return question

support("Paris is the capital of France.")
print("done")  # no flush: interpreter exit gives up on the score, not on the span
"""


def test_interpreter_exit_exports_a_held_span_whose_scoring_never_ends(
        tmp_path: Any, otlp_receiver: OTLPReceiver) -> None:
    # The exit budget (10 s) goes to waiting for the score; stopping a scoring process that
    # does not answer its EOF (stuck, or still importing on a loaded machine) must not eat the
    # time the held span needs to be exported.
    (tmp_path / "stuck_scorer.py").write_text(textwrap.dedent(_STUCK_SCORER).format(seconds=20))
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(_STUCK_EXIT_APP).format(endpoint=otlp_receiver.http_endpoint))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, str(app)], env=env, capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (span,) = otlp_receiver.wait_for_spans(1)
    (why,) = span.events_named(sc.TS_UNSCORED)
    assert why.attributes[sc.TS_UNSCORED_REASON] == "shutdown"


_GUARDLESS_APP = """
import json, sys
import tracescore

# module level, no `if __name__ == "__main__":` guard: the scoring process must not re-run it
tracescore.configure(exporter="otlp-http", endpoint={endpoint!r}, scorers=[
    tracescore.create_answer_relevancy_scorer(model="openai/judge-stub", api_base={api_base!r},
                                              api_key="sk-test", timeout=10)],
    online={{"max_wait_s": {budget}}})

@tracescore.agent(name="support")
def support(question):
    return {answer!r}

support({question!r})
assert tracescore.flush({budget})
print(json.dumps({{"litellm_in_agent_process": "litellm" in sys.modules}}))
"""


def test_a_script_without_main_guard_is_judged_in_the_scoring_process(
        tmp_path: Any, otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer) -> None:
    stub_llm.responder = judge_replies
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(_GUARDLESS_APP).format(
        endpoint=otlp_receiver.http_endpoint, api_base=stub_llm.base_url, answer=ANSWER,
        question=QUESTION, budget=SCORING_BUDGET_S))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, str(app)], env=env, capture_output=True, text=True,
                          timeout=2 * SCORING_BUDGET_S, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # the only output is the app's own: the script ran once, nothing leaked onto its stdout
    assert done.stdout.splitlines() == ['{"litellm_in_agent_process": false}']
    (span,) = otlp_receiver.wait_for_spans(1)
    assert result_events(span)["answer-relevancy"][sc.GEN_AI_EVALUATION_SCORE_VALUE] == 0.43
    assert len(stub_llm.requests) == 3  # three judge steps, over HTTP, from the scoring process

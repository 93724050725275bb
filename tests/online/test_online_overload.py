"""Overload: the judge is spent on scores that land, stats() counts what landed, and scorers
without a judge never wait behind judge jobs.

A slow or hanging stub judge (real litellm over HTTP), more agent calls than it can take, spans
exported over OTLP/HTTP into the loopback receiver, where every landed result is counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _helpers import shut_down_pipelines

import tracescore
from tracescore import _semconv as sc
from tracescore.online import OnlineScorer
from tracescore.testing import OTLPReceiver, Reply, StubLLMServer

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."
CONCURRENCY = 2


@pytest.fixture(scope="module", autouse=True)
def _litellm_imported() -> None:
    import litellm  # noqa: F401


@pytest.fixture(autouse=True)
def _clean_pipelines(span_exporter: Any) -> Iterator[None]:
    yield
    shut_down_pipelines()


def _judge(delay: float) -> Any:
    def reply(request: Any) -> Reply:
        step = request.get("response_format", {}).get("json_schema", {}).get("name", "")
        if step.endswith("statements"):
            content: Any = {"statements": [ANSWER]}
        elif step.endswith("verdicts"):
            content = {"results": [{"result": "yes", "reason": "answers it"}]}
        else:
            content = {"reason": "The score is 1 because it answers."}
        return Reply(content=content, delay=delay)
    return reply


@tracescore.agent(name="busy")
def busy(question: str) -> str:
    return ANSWER


def _landed(receiver: OTLPReceiver, calls: int) -> dict[str, int]:
    spans = receiver.wait_for_spans(lambda s: s.name == "invoke_agent busy", count=calls,
                                    timeout=60)
    assert len({s.span_id for s in spans}) == calls  # every span exported once, held or not
    landed: dict[str, int] = {}
    for span in spans:
        for event in span.events_named(sc.GEN_AI_EVALUATION_RESULT):
            if sc.GEN_AI_EVALUATION_SCORE_VALUE in event.attributes:
                scorer = event.attributes[sc.TS_SCORER_ID]
                landed[scorer] = landed.get(scorer, 0) + 1
    return landed


@pytest.mark.parametrize(("judge_delay", "max_wait_s", "calls"), [
    (30.0, 0.5, 40),  # a hanging judge: nothing it starts can land in time
    (0.15, 1.0, 40),  # a slow judge: some scores land, the rest time out
])
def test_overload_spends_the_judge_on_scores_that_land(
        otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer, judge_delay: float,
        max_wait_s: float, calls: int) -> None:
    stub_llm.responder = _judge(judge_delay)
    relevancy = tracescore.create_answer_relevancy_scorer(
        model="openai/judge-stub", api_base=stub_llm.base_url, api_key="sk-test", timeout=60,
        max_retries=0)
    similarity = tracescore.create_content_similarity_scorer()
    handle = tracescore.configure(
        exporter="otlp-http", endpoint=otlp_receiver.http_endpoint, scorers=[
            OnlineScorer(relevancy, timeout_s=60), similarity],
        online={"isolation": "thread", "max_wait_s": max_wait_s, "concurrency": CONCURRENCY,
                "queue_size": 100})
    for _ in range(calls):
        busy(QUESTION)
    assert handle.flush(60)
    landed = _landed(otlp_receiver, calls)
    stats = handle.stats()

    # the cheap scorer never waits behind the judge: every span carries its score
    assert landed.get("content-similarity", 0) == calls
    # stats count the scores that reached their spans, not the runs that finished late
    assert stats["scored"] == sum(landed.values())
    assert stats["dropped"] == calls - landed.get("answer-relevancy", 0)
    # the judge was only called for runs that could still land: the runs that landed (3 calls
    # each) plus those cut off in flight when their spans left (at most CONCURRENCY each time
    # the timer releases expired spans; the calls were made within a few timer ticks). Before,
    # every queued run was judged after its span had left: 3 * calls requests.
    assert len(stub_llm.requests) <= 3 * (landed.get("answer-relevancy", 0) + 3 * CONCURRENCY)
    if judge_delay > 3 * max_wait_s:
        assert "answer-relevancy" not in landed
        # the runs in flight when their spans left (a few timer ticks); the rest never started
        assert len(stub_llm.requests) <= 3 * CONCURRENCY

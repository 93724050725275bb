"""The litellm judge against a misbehaving stub server: fallback, retries, back-off, failures."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from _helpers import user_prompt

from tracescore import (
    JudgeAuthenticationError,
    JudgeError,
    LiteLLMJudge,
    ScorerError,
    create_answer_relevancy_scorer,
)
from tracescore.scoring import AnswerRelevancyScorer
from tracescore.scoring._judge_replies import parse_json_object, retry_after_seconds
from tracescore.testing import Reply, StubLLMServer

QUESTION = "What is the capital of France?"
STATEMENTS = {"statements": ["Paris is the capital of France."]}
VERDICTS = {"results": [{"result": "yes", "reason": "answers it"}]}
REASON = {"reason": "The score is 1 because it answers the question."}


def make_scorer(base_url: str, **options: Any) -> AnswerRelevancyScorer:
    options = {"timeout": 10, "backoff_base_s": 0.001, "backoff_max_s": 0.01, **options}
    return create_answer_relevancy_scorer(model="openai/judge-stub", api_base=base_url,
                                          api_key="sk-test", **options)


def record_sleeps(scorer: AnswerRelevancyScorer) -> list[float]:
    """Replace the judge's back-off sleep with a recorder (no real waiting in tests)."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    scorer.judge._sleep = sleep  # type: ignore[attr-defined]
    return waits


def by_step(request: dict[str, Any]) -> dict[str, Any]:
    """A reply chosen from the step the prompt belongs to."""
    prompt = next(m["content"] for m in request["messages"] if m["role"] == "user")
    if "<verdicts>" in prompt:
        return REASON
    if "<statements>" in prompt:
        return VERDICTS
    return STATEMENTS


def test_json_mode_refusal_falls_back_to_the_schema_in_the_prompt(stub_llm: StubLLMServer) -> None:
    def responder(request: dict[str, Any]) -> Reply | dict[str, Any]:
        if "response_format" in request:
            return Reply(status=400, content="response_format is not supported by this model")
        return by_step(request)

    stub_llm.responder = responder
    result = make_scorer(stub_llm.base_url).run(input=QUESTION, output="Paris is the capital.")

    assert result.score == 1.0
    assert result.reason == REASON["reason"]
    requests = stub_llm.requests
    assert len(requests) == 6  # each step: refused native JSON call + fallback call
    assert ["response_format" in r.json for r in requests] == [True, False] * 3
    fallback = user_prompt(requests[1])
    assert "must validate against this JSON Schema" in fallback and '"statements"' in fallback
    assert result.preprocess_prompt == fallback  # the prompt finally used is recorded
    assert result.usage.calls == 6


def test_json_object_mode(stub_llm: StubLLMServer) -> None:
    stub_llm.responder = by_step
    result = make_scorer(stub_llm.base_url, json_mode="json_object").run(input=QUESTION,
                                                                        output="Paris")
    assert result.score == 1.0
    assert [r["response_format"] for r in stub_llm.requests] == [{"type": "json_object"}] * 3


def test_prompt_only_json_mode_never_sends_response_format(stub_llm: StubLLMServer) -> None:
    stub_llm.responder = by_step
    result = make_scorer(stub_llm.base_url, json_mode="prompt").run(input=QUESTION, output="Paris")
    assert result.score == 1.0 and len(stub_llm.requests) == 3
    assert all("response_format" not in r.json for r in stub_llm.requests)


def test_malformed_json_is_retried_once_with_the_schema(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue("Sure! Here are the statements: [Paris")
    stub_llm.enqueue("```json\n" + '{"statements": ["Paris"]}' + "\n```")  # fences tolerated
    stub_llm.enqueue(VERDICTS)
    stub_llm.enqueue(REASON)
    result = make_scorer(stub_llm.base_url).run(input=QUESTION, output="Paris")
    assert result.score == 1.0
    assert result.preprocess_step_result == {"statements": ["Paris"]}
    assert "response_format" not in stub_llm.requests[1].json
    assert len(stub_llm.requests) == 4


def test_invalid_reply_twice_is_a_scorer_error_naming_the_step(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue(STATEMENTS)
    stub_llm.enqueue({"verdicts": "all good"})  # valid JSON, wrong shape
    stub_llm.enqueue("not json at all")
    with pytest.raises(ScorerError) as info:
        make_scorer(stub_llm.base_url).run(input=QUESTION, output="Paris is the capital.")
    error = info.value
    assert error.step == "analyze" and error.scorer_id == "answer-relevancy"
    assert "analyze" in str(error) and "answer_relevancy_verdicts" in str(error)
    assert error.raw_reply == "not json at all"
    # the partial result carries the completed preprocess step and the usage so far
    assert error.partial["preprocess_step_result"] == STATEMENTS
    assert error.partial["analyze_step_result"] is None
    assert error.partial["usage"]["calls"] == 3
    assert error.partial["step_usage"]["analyze"]["calls"] == 2
    assert isinstance(error.__cause__, JudgeError) and error.__cause__.retryable is False
    assert len(stub_llm.requests) == 3


def test_wrong_number_of_results_retries_analyze_once(stub_llm: StubLLMServer) -> None:
    three = {"statements": ["a", "b", "c"]}
    stub_llm.enqueue(three)
    stub_llm.enqueue({"results": [{"result": "yes", "reason": "r"}]})
    stub_llm.enqueue({"results": [{"result": "yes", "reason": "r"}, {"result": "unsure", "reason": "r"},
                                  {"result": "no", "reason": "r"}]})
    stub_llm.enqueue(REASON)
    result = make_scorer(stub_llm.base_url).run(input=QUESTION, output="a. b. c.")
    assert result.score == 0.43
    assert "mismatch" not in result.analyze_step_result
    retry_prompt = user_prompt(stub_llm.requests[2])
    assert "a previous reply gave 1 results for 3 statements" in retry_prompt
    assert result.analyze_prompt == retry_prompt


def test_wrong_number_of_results_twice_scores_what_was_received(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue({"statements": ["a", "b", "c"]})
    two = {"results": [{"result": "yes", "reason": "r"}, {"result": "unsure", "reason": "r"}]}
    stub_llm.enqueue(two)
    stub_llm.enqueue(two)
    stub_llm.enqueue(REASON)
    result = make_scorer(stub_llm.base_url).run(input=QUESTION, output="a. b. c.")
    assert result.score == 0.65  # (1 + 0.3) / 2 over the 2 results received
    mismatch = result.analyze_step_result["mismatch"]
    assert (mismatch["statements"], mismatch["results"]) == (3, 2)
    assert len(stub_llm.requests) == 4


def test_429_honours_retry_after(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue_error(429, "slow down", headers={"Retry-After": "0.25"})
    stub_llm.responder = by_step
    scorer = make_scorer(stub_llm.base_url)
    waits = record_sleeps(scorer)
    result = scorer.run(input=QUESTION, output="Paris")
    assert result.score == 1.0
    assert waits == [0.25]
    assert len(stub_llm.requests) == 4 and result.usage.calls == 4
    # the retried request is the same native-JSON request, not the fallback
    assert stub_llm.requests[1].json == stub_llm.requests[0].json


def test_retry_after_is_capped(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue_error(429, headers={"Retry-After": "3600"})
    stub_llm.responder = by_step
    scorer = make_scorer(stub_llm.base_url, max_retry_after_s=0.5)
    waits = record_sleeps(scorer)
    assert scorer.run(input=QUESTION, output="Paris").score == 1.0
    assert waits == [0.5]


def test_5xx_then_success_backs_off_exponentially_with_jitter(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue_error(500)
    stub_llm.enqueue_error(503)
    stub_llm.enqueue_error(502)
    stub_llm.responder = by_step
    scorer = make_scorer(stub_llm.base_url, backoff_base_s=0.1, backoff_max_s=0.3, max_retries=3)
    waits = record_sleeps(scorer)
    result = scorer.run(input=QUESTION, output="Paris")
    assert result.score == 1.0
    assert len(waits) == 3
    for wait, ceiling in zip(waits, (0.1, 0.2, 0.3)):  # base * 2**attempt, capped, jitter 50-100%
        assert ceiling * 0.5 <= wait <= ceiling
    assert len(stub_llm.requests) == 6


def test_5xx_until_retries_run_out(stub_llm: StubLLMServer) -> None:
    stub_llm.default_reply = Reply(status=500, content="overloaded")
    scorer = make_scorer(stub_llm.base_url, max_retries=2)
    record_sleeps(scorer)
    with pytest.raises(ScorerError) as info:
        scorer.run(input=QUESTION, output="Paris")
    assert info.value.step == "preprocess"
    assert "HTTP 500" in str(info.value) and "gave up after 3 attempts" in str(info.value)
    assert info.value.__cause__.retryable is True
    assert len(stub_llm.requests) == 3  # 1 + 2 retries; no JSON fallback for a dead server


def test_timeout_is_retried(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue(STATEMENTS, delay=3.0)
    stub_llm.responder = by_step
    scorer = make_scorer(stub_llm.base_url, timeout=0.5)
    result = scorer.run(input=QUESTION, output="Paris")
    assert result.score == 1.0
    assert len(stub_llm.requests) == 4


def test_timeout_every_time_fails_the_step(stub_llm: StubLLMServer) -> None:
    stub_llm.default_reply = Reply(content=STATEMENTS, delay=3.0)
    scorer = make_scorer(stub_llm.base_url, timeout=0.3, max_retries=1)
    with pytest.raises(ScorerError) as info:
        scorer.run(input=QUESTION, output="Paris")
    assert info.value.step == "preprocess"
    assert "Timeout" in str(info.value) and info.value.__cause__.retryable is True
    assert len(stub_llm.requests) == 2


def test_connection_refused_is_retried_once_then_fails_naming_the_address() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    scorer = make_scorer(f"http://127.0.0.1:{port}/v1", max_retries=2)
    waits = record_sleeps(scorer)
    with pytest.raises(ScorerError) as info:
        scorer.run(input=QUESTION, output="Paris")
    assert info.value.step == "preprocess"
    assert f"could not connect to the judge at 127.0.0.1:{port} (connection refused; gave up " \
        "after 2 attempts)" in str(info.value)
    assert len(waits) == 1  # nothing listens there: one retry, in case the judge restarts
    assert info.value.partial["usage"]["calls"] == 2


@pytest.mark.parametrize("status", [401, 403])
def test_auth_errors_are_not_retried(stub_llm: StubLLMServer, status: int) -> None:
    stub_llm.enqueue_error(status, "Incorrect API key provided")
    stub_llm.responder = by_step
    scorer = make_scorer(stub_llm.base_url)
    waits = record_sleeps(scorer)
    with pytest.raises(JudgeAuthenticationError) as info:  # not one step's ScorerError
        scorer.run(input=QUESTION, output="Paris")
    assert len(stub_llm.requests) == 1 and waits == []
    assert info.value.step == "preprocess"
    assert f"HTTP {status}" in str(info.value) and info.value.retryable is False


def test_bad_request_on_the_fallback_too_is_not_retried(stub_llm: StubLLMServer) -> None:
    stub_llm.default_reply = Reply(status=400, content="context length exceeded")
    scorer = make_scorer(stub_llm.base_url)
    waits = record_sleeps(scorer)
    with pytest.raises(ScorerError, match="HTTP 400"):
        scorer.run(input=QUESTION, output="Paris")
    assert len(stub_llm.requests) == 2 and waits == []  # native JSON call + fallback call


def test_reason_step_failure_carries_the_score(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue(STATEMENTS)
    stub_llm.enqueue(VERDICTS)
    stub_llm.enqueue({"reason": ""})
    stub_llm.enqueue({"why": "no"})
    with pytest.raises(ScorerError) as info:
        make_scorer(stub_llm.base_url).run(input=QUESTION, output="Paris")
    assert info.value.step == "reason"
    assert info.value.partial["score"] == 1.0
    assert info.value.partial["analyze_step_result"] == VERDICTS


def test_extra_litellm_kwargs_reach_the_request(stub_llm: StubLLMServer) -> None:
    stub_llm.responder = by_step
    make_scorer(stub_llm.base_url, temperature=0.0, max_tokens=256).run(input=QUESTION,
                                                                       output="Paris")
    first = stub_llm.requests[0]
    assert first["temperature"] == 0.0 and first["max_tokens"] == 256
    assert first["model"] == "judge-stub"
    assert first.headers["authorization"] == "Bearer sk-test"


async def test_judge_used_directly(stub_llm: StubLLMServer) -> None:
    from tracescore.scoring._prompts import statements_request

    stub_llm.enqueue({"statements": ["x"]}, usage={"prompt_tokens": 7, "completion_tokens": 2})
    judge = LiteLLMJudge("openai/judge-stub", api_base=stub_llm.base_url, api_key="sk-test")
    reply = await judge.judge(statements_request("x"))
    assert reply.data == {"statements": ["x"]}
    assert reply.raw == '{"statements": ["x"]}'
    assert (reply.usage.calls, reply.usage.input_tokens, reply.usage.output_tokens) == (1, 7, 2)


def test_parse_json_object() -> None:
    assert parse_json_object('{"a": 1}') == {"a": 1}
    assert parse_json_object('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json_object('Here you go: {"a": {"b": 2}} hope it helps') == {"a": {"b": 2}}
    for bad in ("", "   ", "[1, 2]", "no json", '{"a": }'):
        with pytest.raises(ValueError):
            parse_json_object(bad)


def test_retry_after_header_forms() -> None:
    class Error(Exception):
        def __init__(self, headers: dict[str, str]) -> None:
            self.headers = headers

    assert retry_after_seconds(Error({"Retry-After": "2"})) == 2.0
    assert retry_after_seconds(Error({"retry-after-ms": "150"})) == 0.15
    assert retry_after_seconds(Error({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0
    assert retry_after_seconds(Error({"retry-after": "soon"})) is None
    assert retry_after_seconds(Error({})) is None

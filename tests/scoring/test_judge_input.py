"""What the judge is sent: redacted by default (an option turns it off), capped in size, and
exactly the step prompts that are exported on the span.

The judge is real litellm talking HTTP to the stub server; the spans are the in-memory ones of
`run_evals` (the same events the online sinks export).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracescore import ConfigurationError, create_answer_relevancy_scorer, run_evals
from tracescore import _semconv as sc
from tracescore.scoring._judge_input import DEFAULT_MAX_JUDGE_INPUT_CHARS
from tracescore.testing import StubLLMServer

QUESTION = "What is the capital of France?"
_FIXTURE_OK = [HealthCheck.function_scoped_fixture]

_token = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
                 min_size=24, max_size=40)
# Secrets of shapes the built-in rules know, each with its generated value (what must not leak).
SECRETS = st.one_of(
    st.builds(lambda v: (f"sk-proj-{v}", v), _token),
    st.builds(lambda v: (f"api_key={v}", v), _token),
    st.builds(lambda v: (f"OPENAI_API_KEY={v}", v), _token),
    st.builds(lambda v: (f"Authorization: Bearer {v}", v), _token),
    st.builds(lambda v: (f"postgres://app:{v}@db.internal/prod", v), _token),
    st.builds(lambda u: (f"{u}@example.com", f"{u}@example.com"),
              st.text("abcdefghij", min_size=5, max_size=10)),
)


def _by_step(request: Any) -> dict[str, Any]:
    prompt = _user_prompt(request)
    if "<verdicts>" in prompt:
        return {"reason": "The score is 1 because it answers."}
    if "<statements>" in prompt:
        return {"results": [{"result": "yes", "reason": "answers it"}]}
    return {"statements": ["Paris is the capital of France."]}


def _user_prompt(request: Any) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


def _scorer(stub: StubLLMServer, **options: Any) -> Any:
    stub.responder = _by_step
    return create_answer_relevancy_scorer(model="openai/judge-stub", api_base=stub.base_url,
                                          api_key="sk-test", timeout=10, **options)


def _sent(stub: StubLLMServer) -> str:
    return "\n".join(json.dumps(r.json) for r in stub.requests)


@settings(max_examples=12, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(secret=SECRETS, where=st.sampled_from(["question", "answer"]))
def test_secrets_never_reach_the_judge_and_exported_prompts_are_what_was_sent(
        stub_llm: StubLLMServer, span_exporter: Any, secret: tuple[str, str], where: str) -> None:
    stub_llm.clear()
    span_exporter.clear()
    text, value = secret
    question = f"{QUESTION} (my login is {text})" if where == "question" else QUESTION
    answer = f"Paris. Use {text} to call the API." if where == "answer" else "Paris."

    result = run_evals([{"input": question}], _scorer(stub_llm), lambda q: answer)

    assert result.failures == ()
    assert value not in _sent(stub_llm)
    (item_span,) = span_exporter.get_finished_spans()
    exported = [dict(e.attributes) for e in item_span.events if e.name == sc.TS_EVALUATION_STEP]
    prompts = [e[sc.TS_STEP_PROMPT] for e in exported if sc.TS_STEP_PROMPT in e]
    assert prompts == [_user_prompt(r) for r in stub_llm.requests]  # exactly what was sent
    score = result.items[0].scores["answer-relevancy"]
    assert [score.preprocess_prompt, score.analyze_prompt, score.generate_reason_prompt] == prompts


def test_redaction_of_the_judge_input_can_be_turned_off(stub_llm: StubLLMServer) -> None:
    secret = "sk-proj-" + "A1b2C3d4" * 4
    scorer = _scorer(stub_llm, redact_judge_input=False)
    result = scorer.run(input=QUESTION, output=f"Paris. The key is {secret}.")
    assert secret in _sent(stub_llm)
    assert secret in (result.preprocess_prompt or "")


# --- the cap ---------------------------------------------------------------------------------


@settings(max_examples=10, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(cap=st.integers(100, 3_000), over=st.integers(-50, 20_000))
def test_judge_input_is_capped_and_the_cut_recorded(stub_llm: StubLLMServer, cap: int,
                                                    over: int) -> None:
    stub_llm.clear()
    answer = ("Paris is the capital of France. " * (cap // 8 + 2000))[:max(cap + over, 1)]
    scorer = _scorer(stub_llm, max_judge_input_chars=cap)
    result = scorer.run(input=QUESTION, output=answer)
    cut = len(answer) > cap
    assert result.judge_input_truncated is cut
    first = _user_prompt(stub_llm.requests[0])
    if cut:
        assert answer not in first and "truncated" in first
    else:
        assert answer in first
    sent = list(stub_llm.requests)
    overhead = max(map(len, _prompts_for(stub_llm, "x")))  # the prompts around a 1-char answer
    assert all(len(_user_prompt(r)) <= overhead + 2 * cap + 100 for r in sent)


def _prompts_for(stub: StubLLMServer, answer: str) -> list[str]:
    before = len(stub.requests)
    _scorer(stub).run(input=QUESTION, output=answer)
    return [_user_prompt(r) for r in stub.requests[before:]]


def test_a_huge_output_sends_a_bounded_request_once_per_step(stub_llm: StubLLMServer,
                                                             span_exporter: Any) -> None:
    huge = "The answer is Paris. " * 270_000  # ~5.5 MB, as in the issue
    result = run_evals([{"input": QUESTION}], _scorer(stub_llm), lambda q: huge)
    sizes = [len(r.body) for r in stub_llm.requests]
    assert len(sizes) == 3 and max(sizes) < 4 * DEFAULT_MAX_JUDGE_INPUT_CHARS
    score = result.items[0].scores["answer-relevancy"]
    assert score.judge_input_truncated is True
    (item_span,) = span_exporter.get_finished_spans()
    (event,) = [e for e in item_span.events if e.name == sc.GEN_AI_EVALUATION_RESULT]
    assert event.attributes[sc.TS_JUDGE_INPUT_TRUNCATED] is True


@pytest.mark.parametrize("options", [{"max_judge_input_chars": 99},
                                     {"max_judge_input_chars": 1.5e6},
                                     {"max_judge_input_chars": True},
                                     {"redact_judge_input": "no"}])
def test_bad_judge_input_options(options: dict[str, Any]) -> None:
    key = next(iter(options))
    with pytest.raises(ConfigurationError, match=key):
        create_answer_relevancy_scorer(model="tracescore/offline", **options)

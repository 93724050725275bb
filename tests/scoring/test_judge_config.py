"""Judge configuration mistakes fail early and clearly; a bad API key is named and not retried.

- a model string that cannot be right (a typo of `tracescore/offline`, whitespace) is a
  ConfigurationError when the scorer is built, without importing litellm;
- an unknown provider or keyword argument is a ConfigurationError with a did-you-mean, from
  `LiteLLMJudge.check()` (the CLI and gateway call it at start; a run calls it first) and never
  reaches the network;
- a missing, invalid or refused key is a `JudgeAuthenticationError` after one attempt, however
  the provider words it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracescore import (
    ConfigurationError,
    JudgeAuthenticationError,
    ScorerError,
    create_answer_relevancy_scorer,
)
from tracescore.scoring import LiteLLMJudge
from tracescore.testing import Reply, StubLLMServer

QUESTION = "What is the capital of France?"
_ALPHABET = "abcdefghijklmnopqrstuvwxyz_/"


def _one_edit(word: str) -> st.SearchStrategy[str]:
    """Strings one deletion, substitution, insertion or transposition away from `word`."""
    def apply(kind: int, at: int, ch: str) -> str:
        i = at % len(word)
        if kind == 0:
            return word[:i] + word[i + 1:]
        if kind == 1:
            return word[:i] + ch + word[i + 1:]
        if kind == 2:
            return word[:i] + ch + word[i:]
        j = min(i + 1, len(word) - 1)
        chars = list(word)
        chars[i], chars[j] = chars[j], chars[i]
        return "".join(chars)

    return st.builds(apply, st.integers(0, 3), st.integers(0, 100),
                     st.sampled_from(_ALPHABET)).filter(lambda w: w != word)


# --- model strings -------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(model=_one_edit("tracescore/offline"))
def test_a_typo_of_the_offline_judge_fails_when_the_scorer_is_built(model: str) -> None:
    with pytest.raises(ConfigurationError, match="did you mean 'tracescore/offline'"):
        create_answer_relevancy_scorer(model=model)


@pytest.mark.parametrize("model", ["openai/gpt 4o", "openai/gpt-4o\nx", " tracescore /offline"])
def test_whitespace_inside_a_model_string_fails_when_the_scorer_is_built(model: str) -> None:
    with pytest.raises(ConfigurationError, match="model"):
        create_answer_relevancy_scorer(model=model)


def test_building_a_scorer_does_not_import_litellm() -> None:
    code = ("import sys, tracescore\n"
            "tracescore.create_answer_relevancy_scorer(model='openai/gpt-4o-mini', temperature=0)\n"
            "try:\n"
            "    tracescore.create_answer_relevancy_scorer(model='tracescore/offlin')\n"
            "except tracescore.ConfigurationError as exc:\n"
            "    print(exc)\n"
            "print('litellm' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "unknown judge model 'tracescore/offlin' (did you mean 'tracescore/offline'?)", "False"]


@pytest.mark.parametrize(("model", "suggestion"), [
    ("opanai/gpt-4o-mini", "openai/gpt-4o-mini"),
    ("antropic/claude-3-5-haiku-latest", "anthropic/claude-3-5-haiku-latest"),
    ("gemeni/gemini-1.5-flash", "gemini/gemini-1.5-flash"),
])
def test_an_unknown_provider_is_a_configuration_error_before_any_request(
        stub_llm: StubLLMServer, model: str, suggestion: str) -> None:
    scorer = create_answer_relevancy_scorer(model=model, api_key="sk-test")
    with pytest.raises(ConfigurationError, match=f"did you mean '{suggestion}'"):
        scorer.run(input=QUESTION, output="Paris.")
    with pytest.raises(ConfigurationError, match="unknown judge model"):
        LiteLLMJudge(model).check()
    assert stub_llm.requests == []


# --- keyword arguments ---------------------------------------------------------------------------

_COMMON = ["temperature", "max_tokens", "api_base", "api_key", "top_p", "seed", "timeout",
           "max_retries", "extra_headers", "frequency_penalty"]


def _litellm_known() -> set[str]:
    from tracescore._litellm_support import import_litellm
    from tracescore.scoring._litellm_judge import _OWN_OPTIONS, _known_litellm_kwargs

    return _known_litellm_kwargs(import_litellm(), "openai/judge-stub", "openai") | set(
        _OWN_OPTIONS)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_misspelt_keyword_argument_is_rejected_with_a_did_you_mean(data: Any) -> None:
    name = data.draw(st.sampled_from(_COMMON))
    typo = data.draw(_one_edit(name).filter(
        lambda w: w.isidentifier() and w not in _litellm_known()
        and not w.startswith(("aws_", "vertex_", "azure_"))))
    options: dict[str, Any] = {typo: 1}
    with pytest.raises(ConfigurationError, match=f"unknown judge option '{typo}'") as info:
        LiteLLMJudge("openai/judge-stub", **options).check()  # at construction, or at check()
    assert "did you mean" in str(info.value)


def test_an_unknown_keyword_argument_fails_the_run_before_any_request(
        stub_llm: StubLLMServer) -> None:
    scorer = create_answer_relevancy_scorer(model="openai/judge-stub", api_base=stub_llm.base_url,
                                            api_key="sk-test", colour_mode=0)
    with pytest.raises(ConfigurationError, match="unknown judge option 'colour_mode'"):
        scorer.run(input=QUESTION, output="Paris.")
    assert stub_llm.requests == []


def test_known_and_provider_keyword_arguments_pass(stub_llm: StubLLMServer) -> None:
    stub_llm.default_reply = Reply(content={"statements": []})
    scorer = create_answer_relevancy_scorer(
        model="openai/judge-stub", api_base=stub_llm.base_url, api_key="sk-test",
        temperature=0, max_tokens=64, seed=1, top_p=1, extra_headers={"x-team": "evals"},
        extra_body={"priority": "low"}, aws_region_name="eu-west-1", timeout=10)
    assert scorer.run(input=QUESTION, output="Paris.").score == 0.0
    (request,) = stub_llm.requests
    assert request["temperature"] == 0 and request["max_tokens"] == 64
    assert request["priority"] == "low"


def test_the_cli_and_gateway_share_the_check(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACESCORE_"))}
    script = Path(sys.executable).parent / "tracescore"
    done = subprocess.run([str(script), "score", "-i", "q", "-o", "a", "-s", "relevancy",
                           "--judge-model", "tracescore/offlin"], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.returncode == 2
    assert "did you mean 'tracescore/offline'" in done.stderr


# --- authentication ------------------------------------------------------------------------------


def _scorer(base_url: str, **options: Any) -> Any:
    scorer = create_answer_relevancy_scorer(
        model="openai/judge-stub", api_base=base_url, timeout=10, backoff_base_s=0.001,
        backoff_max_s=0.002, **options)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    scorer.judge._sleep = sleep  # type: ignore[attr-defined]
    return scorer, waits


@pytest.mark.parametrize(("status", "text"), [
    (401, "Incorrect API key provided: sk-abc***"),
    (403, "Your key has no access to this model"),
    (400, "API key not valid. Please pass a valid API key."),  # Gemini's words
    (500, "Missing credentials. Please pass an `api_key`"),
    (502, "upstream said: invalid x-api-key"),
])
def test_a_refused_key_is_named_and_tried_once(stub_llm: StubLLMServer, status: int,
                                               text: str) -> None:
    stub_llm.default_reply = Reply(status=status, content=text)
    scorer, waits = _scorer(stub_llm.base_url, api_key="sk-test")
    with pytest.raises(JudgeAuthenticationError) as info:
        scorer.run(input=QUESTION, output="Paris.")
    assert len(stub_llm.requests) == 1 and waits == []  # no retry, no fallback prompt
    assert info.value.step == "preprocess" and info.value.retryable is False
    assert "API key" in str(info.value)


def test_a_missing_key_is_named_and_never_sent(stub_llm: StubLLMServer,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm's OpenAI client reports a missing key as a 500 before any request."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    scorer, waits = _scorer(stub_llm.base_url)
    with pytest.raises(JudgeAuthenticationError, match="OPENAI_API_KEY is not set"):
        scorer.run(input=QUESTION, output="Paris.")
    assert waits == [] and stub_llm.requests == []


def test_a_server_error_without_key_words_is_still_retried(stub_llm: StubLLMServer) -> None:
    stub_llm.default_reply = Reply(status=500, content="the model is overloaded")
    scorer, waits = _scorer(stub_llm.base_url, api_key="sk-test", max_retries=2)
    with pytest.raises(ScorerError):
        scorer.run(input=QUESTION, output="Paris.")
    assert len(waits) == 2


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(status=st.sampled_from([401, 403]), concurrency=st.integers(1, 3))
def test_run_evals_records_the_auth_failure_per_item(stub_llm: StubLLMServer, status: int,
                                                     concurrency: int) -> None:
    from tracescore import run_evals

    stub_llm.clear()
    stub_llm.default_reply = Reply(status=status, content="bad key")
    scorer, waits = _scorer(stub_llm.base_url, api_key="sk-test")
    data = [{"input": QUESTION} for _ in range(3)]
    result = run_evals(data, scorer, lambda q: "Paris.", concurrency=concurrency)
    assert [f.error_type for f in result.failures] == ["JudgeAuthenticationError"] * 3
    assert {f.step for f in result.failures} == {"preprocess"}
    assert len(stub_llm.requests) == 3 and waits == []


def test_in_thread_online_scoring_checks_the_judge_at_configure() -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tracescore.online import ScoringSpanProcessor

    scorer = create_answer_relevancy_scorer(model="opanai/gpt-4o-mini", api_key="sk-test")
    with pytest.raises(ConfigurationError, match="did you mean 'openai/gpt-4o-mini'"):
        ScoringSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), [scorer],
                             isolation="thread")

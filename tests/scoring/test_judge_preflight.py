"""A judge that cannot work is found before the first item, and its failures say what and where.

- a typo of a judge option fails when the scorer is built (every factory, the registry, the CLI);
- an unknown model under a provider with a fixed model list, and a missing API key, fail the
  pre-flight check (`run_evals`, `tracescore eval` exit 2) naming the model or the variable;
- an unreachable judge is "could not connect to the judge at host:port", after at most one retry;
- `tracescore eval` exits 3 when a scorer scored nothing (every call errored) unless
  `--allow-errors`, and a threshold on such a scorer says there was no score and why.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracescore import ConfigurationError, ScorerError, run_evals
from tracescore.scoring import LiteLLMJudge
from tracescore.scoring._judge_api import JudgeStepError
from tracescore.scoring._judge_checks import COMMON_OPTIONS, option_typo
from tracescore.scoring._registry import JUDGED, create_scorer

SCRIPT = Path(sys.executable).parent / "tracescore"
_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY",
         "DEEPSEEK_API_KEY", "XAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
_OPTIONS: dict[str, dict[str, Any]] = {"llm-tool-call-accuracy": {"available_tools": ["search"]},
                                       "multi-turn-judge": {"criterion": "The user got a forecast."}}


def _typo(word: str) -> st.SearchStrategy[str]:
    def apply(kind: int, at: int, ch: str) -> str:
        i = at % len(word)
        if kind == 0:
            return word[:i] + word[i + 1:]
        if kind == 1:
            return word[:i] + ch + word[i + 1:]
        return word[:i] + ch + word[i:]
    return st.builds(apply, st.integers(0, 2), st.integers(0, 50),
                     st.sampled_from("abcdefghijklmnopqrstuvwxyz_")).filter(
        lambda w: w != word and w not in COMMON_OPTIONS and len(w) > 3)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- options ---------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_typo_of_a_judge_option_fails_when_any_judged_scorer_is_built(data: Any) -> None:
    word = data.draw(st.sampled_from(["temperature", "max_tokens", "top_p", "api_base",
                                      "api_key", "seed", "extra_headers", "timeout"]))
    typo = data.draw(_typo(word))
    if option_typo(typo, ()) is None:  # too far from every option to be a typo of one
        return
    sid = data.draw(st.sampled_from(sorted(JUDGED)))
    options = {**_OPTIONS.get(sid, {}), "model": "openai/gpt-4o-mini", typo: 0}
    with pytest.raises(ConfigurationError, match=f"unknown judge option '{typo}'.*did you mean"):
        create_scorer(sid, options)


def test_no_real_litellm_argument_is_taken_for_a_typo() -> None:
    from tracescore._litellm_support import import_litellm
    from tracescore.scoring._litellm_judge import _OWN_OPTIONS, _known_litellm_kwargs

    litellm = import_litellm()
    real: set[str] = set()
    for model, provider in [("openai/gpt-4o-mini", "openai"), ("anthropic/x", "anthropic"),
                            ("gemini/x", "gemini"), ("ollama/x", "ollama"),
                            ("bedrock/x", "bedrock"), ("mistral/x", "mistral")]:
        real |= _known_litellm_kwargs(litellm, model, provider)
    assert sorted(n for n in real if option_typo(n, _OWN_OPTIONS) is not None) == []


def test_a_typo_in_a_cli_scorer_option_exits_2_before_any_item(tmp_path: Path) -> None:
    done = _cli(tmp_path, "-s", "relevancy", "--judge-model", "openai/gpt-4o-mini",
                "--scorer-option", "relevancy.temprature=0", env={"OPENAI_API_KEY": "sk-test"})
    assert done.returncode == 2, done.stderr
    assert "unknown judge option 'temprature' (did you mean 'temperature'?)" in done.stderr
    assert not (tmp_path / "called").exists()


# --- model and key ---------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_an_unknown_model_under_a_known_provider_fails_the_preflight(data: Any) -> None:
    model = data.draw(st.sampled_from(["openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5",
                                       "mistral/mistral-small-latest"]))
    provider, _, name = model.partition("/")
    typo = f"{provider}/{data.draw(_typo(name).filter(lambda w: '/' not in w))}"
    from tracescore._litellm_support import import_litellm

    if f"{typo}" in import_litellm().model_cost or typo.partition("/")[2] in \
            import_litellm().model_cost:
        return  # the typo is another real model
    with pytest.raises(ConfigurationError, match=f"unknown judge model '{typo}'"):
        LiteLLMJudge(typo, api_key="sk-test").preflight()
    LiteLLMJudge(typo, api_key="sk-test", check_model=False).preflight()  # the way out
    LiteLLMJudge(typo, api_key="sk-test", api_base="http://127.0.0.1:9/v1").preflight()
    LiteLLMJudge(model, api_key="sk-test").preflight()


@pytest.mark.parametrize(("model", "variable"), [
    ("openai/gpt-4o-mini", "OPENAI_API_KEY"), ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ("mistral/mistral-small-latest", "MISTRAL_API_KEY"), ("deepseek/deepseek-chat",
                                                          "DEEPSEEK_API_KEY"),
])
def test_a_missing_key_is_named_before_the_first_item(monkeypatch: pytest.MonkeyPatch,
                                                     model: str, variable: str) -> None:
    for key in _KEYS:
        monkeypatch.delenv(key, raising=False)
    calls: list[Any] = []
    scorer = create_scorer("relevancy", {"model": model})
    with pytest.raises(ConfigurationError, match=f"{variable} is not set"):
        run_evals([{"input": "q"}], scorer, calls.append)
    assert calls == []
    monkeypatch.setenv(variable, "sk-secret-value-123")
    LiteLLMJudge(model).preflight()  # set: passes
    LiteLLMJudge(model, api_key="sk-x").preflight()


def test_local_servers_and_the_offline_judge_need_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in _KEYS:
        monkeypatch.delenv(key, raising=False)
    LiteLLMJudge("ollama/llama3").preflight()
    LiteLLMJudge("hosted_vllm/my-model", api_base="http://127.0.0.1:9/v1").preflight()
    result = run_evals([{"input": "q"}], create_scorer("relevancy", {"model": "tracescore/offline"}),
                       lambda q: "a")
    assert result.summary.unscored == {}


# --- unreachable judge -----------------------------------------------------------------------


@settings(max_examples=4, deadline=None)
@given(host=st.sampled_from(["127.0.0.1", "no-such-judge.invalid"]), retries=st.integers(0, 3))
def test_an_unreachable_judge_is_named_and_not_retried_for_long(host: str, retries: int) -> None:
    port = _closed_port()
    scorer = create_scorer("relevancy", {"model": "openai/judge-stub", "api_key": "sk-test",
                                         "api_base": f"http://{host}:{port}/v1",
                                         "max_retries": retries})
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    scorer.judge._sleep = sleep  # type: ignore[attr-defined]
    with pytest.raises(ScorerError) as info:
        scorer.run(input="q", output="a")
    assert f"could not connect to the judge at {host}:{port}" in str(info.value)
    assert "HTTP 500" not in str(info.value)
    assert isinstance(info.value.__cause__, JudgeStepError)
    assert len(waits) == (0 if host.endswith(".invalid") else min(1, retries))


# --- the eval command ------------------------------------------------------------------------

_AGENT = '''
from pathlib import Path

def answer(question):
    Path("called").write_text("yes")
    return "Paris is the capital of France."
'''


def _cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
         items: int = 3) -> subprocess.CompletedProcess[str]:
    (tmp_path / "agent.py").write_text(_AGENT)
    (tmp_path / "qa.jsonl").write_text(
        "".join(json.dumps({"input": f"Capital of France {i}?"}) + "\n" for i in range(items)))
    full = {k: v for k, v in os.environ.items()
            if not k.startswith(("OTEL_", "TRACESCORE_")) and k not in _KEYS}
    full.update({"COLUMNS": "200", "NO_COLOR": "1", "OTEL_TRACES_EXPORTER": "none",
                 "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})})
    return subprocess.run([str(SCRIPT), "eval", "qa.jsonl", "-t", "agent:answer", *args],
                          cwd=tmp_path, env=full, text=True, capture_output=True, timeout=300,
                          check=False)


def test_eval_fails_when_every_judge_call_errored_unless_allowed(tmp_path: Path) -> None:
    port = _closed_port()
    judge = ("-s", "relevancy", "--judge-model", "openai/judge-stub",
             "--scorer-option", f"relevancy.api_base=http://127.0.0.1:{port}/v1",
             "--scorer-option", "relevancy.api_key=sk-test")
    failed = _cli(tmp_path, *judge, "--threshold", "relevancy=0.7")
    assert failed.returncode == 3, failed.stderr
    assert (f"answer-relevancy: 3 of 3 items errored: judge 'openai/judge-stub' failed at step "
            f"'preprocess': could not connect to the judge at 127.0.0.1:{port}") in failed.stderr
    assert "mean -" not in failed.stdout
    assert "answer-relevancy has no score to compare with 0.7 (3 of 3 items errored" in \
        " ".join(failed.stdout.split())
    allowed = _cli(tmp_path, *judge, "--allow-errors")
    assert allowed.returncode == 0, allowed.stderr
    assert "warning: answer-relevancy: 3 of 3 items errored" in allowed.stderr


def test_eval_with_a_missing_key_exits_2_before_the_first_item(tmp_path: Path) -> None:
    done = _cli(tmp_path, "-s", "relevancy", "--judge-model", "openai/gpt-4o-mini")
    assert done.returncode == 2, done.stderr
    assert "judge 'openai/gpt-4o-mini': OPENAI_API_KEY is not set" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "called").exists()


def test_online_scoring_never_raises_a_missing_key_into_the_agent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tracescore.online import ScoringSpanProcessor

    for key in _KEYS:
        monkeypatch.delenv(key, raising=False)
    scorer = create_scorer("relevancy", {"model": "openai/gpt-4o-mini"})
    processor = ScoringSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), [scorer],
                                     isolation="thread")  # configuring does not raise
    processor.shutdown()
    with pytest.raises(Exception, match="OPENAI_API_KEY is not set") as info:
        scorer.run(input="q", output="a")  # the first call fails: recorded as error.type
    assert type(info.value).__name__ == "JudgeAuthenticationError"

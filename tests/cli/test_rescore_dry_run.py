"""`tracescore rescore --dry-run`: the judge calls and cost of a rescore, estimated before
spending anything: the judge is never asked, nothing is written, and the calls it counts are
the calls the real run makes."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
from _gateway_helpers import ANSWER, QUESTION, agent_trace, sender
from _helpers import geo_llm_and_judge
from click.testing import CliRunner

from tracescore._exporters import OTLPJsonFileExporter
from tracescore.cli import main
from tracescore.gateway._rescore_estimate import PROMPT_TOKENS, REPLY_TOKENS, price
from tracescore.scoring import LiteLLMJudge, ScorerInput, ToolCall
from tracescore.scoring._base import run_sync
from tracescore.scoring._judged import JudgedScorer
from tracescore.scoring._names import DECLARED
from tracescore.scoring._registry import create_scorer
from tracescore.testing import StubLLMServer

MODEL = "openai/gpt-4o-mini"  # a model litellm's price map has


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    path = tmp_path / "traces.jsonl"
    with sender(OTLPJsonFileExporter(path)) as tracer:
        for _ in range(6):
            agent_trace(tracer, plain_children=2)
    return path


def _config(tmp_path: Path, stub: StubLLMServer, model: str = MODEL) -> Path:
    config = tmp_path / "rescore.yaml"
    config.write_text(f"""
scoring:
  scorers:
    - {{scorer: relevancy, options: {{model: {model}, api_base: "{stub.base_url}",
        api_key: sk-test, check_model: false}}}}
    - {{scorer: similarity}}
""")
    return config


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, ["rescore", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_dry_run_asks_no_judge_writes_nothing_and_counts_the_real_run_calls(
        traces: Path, tmp_path: Path, stub_llm: StubLLMServer) -> None:
    stub_llm.responder = geo_llm_and_judge
    config, out = _config(tmp_path, stub_llm), tmp_path / "out.jsonl"
    text = _run(str(traces), "-c", str(config), "-o", str(out), "--dry-run")
    assert len(stub_llm.requests) == 0 and not out.exists()
    assert "6 agent spans offered; 12 scorer runs would be made, 0 skipped" in text
    assert "content-similarity (no judge): 6 runs" in text
    found = re.search(r"answer-relevancy \(openai/gpt-4o-mini\): 6 runs, 18 judge calls, "
                      r"~([\d,]+) input \+ ([\d,]+) output tokens, ~\$([\d.]+)", text)
    assert found, text
    tokens_in, tokens_out = (int(found[i].replace(",", "")) for i in (1, 2))
    per_call = PROMPT_TOKENS + math.ceil((len(QUESTION) + len(ANSWER)) / 4)
    assert (tokens_in, tokens_out) == (18 * per_call, 18 * REPLY_TOKENS)
    cost = price(MODEL, tokens_in, tokens_out)
    assert cost is not None and cost > 0 and float(found[3]) == pytest.approx(cost, abs=5e-5)
    assert "total: 18 judge calls" in text and "nothing was scored, written or sent" in text

    _run(str(traces), "-c", str(config), "-o", str(out))  # the real run
    assert len(stub_llm.requests) == 18  # as counted
    again = _run(str(out), "-c", str(config), "--dry-run")
    assert "0 scorer runs would be made, 12 skipped" in again and "total: 0 judge calls" in again
    assert len(stub_llm.requests) == 18


def test_a_model_without_a_price_is_named(traces: Path, tmp_path: Path,
                                          stub_llm: StubLLMServer) -> None:
    text = _run(str(traces), "-c", str(_config(tmp_path, stub_llm, "openai/judge-stub")),
                "--dry-run")
    assert "answer-relevancy (openai/judge-stub): 6 runs, 18 judge calls" in text
    assert "cost unknown (no litellm price)" in text
    assert "the calls to openai/judge-stub: litellm has no price for it" in text
    assert len(stub_llm.requests) == 0


def test_the_dry_run_needs_no_output_but_a_real_run_does(traces: Path) -> None:
    result = CliRunner().invoke(main, ["rescore", str(traces), "-s", "similarity"])
    assert result.exit_code == 2 and "give one of --output FILE or --endpoint URL" in result.output
    assert "6 scorer runs would be made" in _run(str(traces), "-s", "similarity", "--dry-run")


# --- the step counts the estimate uses are the steps the scorers run --------------------------
_NEEDS: dict[str, dict[str, Any]] = {"llm-judge": {"name": "polite", "instructions": "The answer is polite."},
          "multi-turn-judge": {"criterion": "The user's goal was met."},
          "llm-tool-call-accuracy": {"available_tools": [{"id": "get_weather",
                                                          "description": "Current weather"}]},
          "llm-trajectory-accuracy": {"expected_trajectory": ["get_weather"]}}
_NO_OFFLINE = {"bias", "llm-judge", "multi-turn-judge"}  # judged only by a language model
JUDGED = sorted(sid for sid, declared in DECLARED.items() if declared.uses_judge)


@pytest.mark.parametrize("scorer_id", JUDGED)
def test_each_judged_scorer_asks_the_judge_in_the_steps_it_declares(
        scorer_id: str, stub_llm: StubLLMServer) -> None:
    stub_llm.responder = geo_llm_and_judge
    model: Any = (LiteLLMJudge("openai/judge-stub", api_base=stub_llm.base_url, api_key="sk-test")
                  if scorer_id in _NO_OFFLINE else "tracescore/offline")
    scorer = create_scorer(scorer_id, _NEEDS.get(scorer_id, {}), model=model)
    messages = [{"role": "user", "content": "What is the weather in Paris today?"},
                {"role": "assistant", "content": "It is sunny in Paris today."},
                {"role": "user", "content": "And tomorrow?"}]
    call = ScorerInput(input=messages, output="Sunny again tomorrow in Paris.",
                       ground_truth="Sunny in Paris.", context=("Paris weather: sunny.",),
                       tool_calls=(ToolCall(name="get_weather", arguments={"city": "Paris"},
                                            result="sunny"),))
    assert isinstance(scorer, JudgedScorer)
    result = run_sync(scorer.evaluate(call))
    assert set(result.step_usage) == set(scorer.judge_steps)
    assert result.usage.calls == len(scorer.judge_steps)

"""Every scorer by name: configure(scorers=...), run_evals, the gateway config, the command."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _helpers import live_scores, score_command

from tracescore import ConfigurationError, load_gateway_config, run_evals
from tracescore.scoring import (
    KeywordCoverageScorer,
    TextualDifferenceScorer,
    ToolCallAccuracyScorer,
)
from tracescore.scoring._registry import SCORER_ALIASES, SCORER_IDS, create_scorer

QUESTION, ANSWER = "What is the capital of France?", "Paris is the capital of France."
CODE_NAMES = ("keyword-coverage", "textual-difference", "similarity")
# the code checks' required options
CHECK_OPTIONS: dict[str, dict[str, Any]] = {
    **{f"check-{c}": {"expected": "sunny"} for c in ("includes", "excludes", "equals",
                                                    "similarity")},
    "check-matches": {"pattern": "sun+y"}, "check-called-tool": {"tool_name": "search"},
    "check-did-not-call": {"tool_name": "search"}, "check-tool-order": {"expected_order": []},
    "check-max-tool-calls": {"max": 2}}


@pytest.mark.parametrize("name", sorted({*SCORER_ALIASES, *(a.replace("-", "_") for a in SCORER_ALIASES)}))
def test_every_name_builds_its_scorer(name: str) -> None:
    sid = SCORER_ALIASES[name.replace("_", "-")]
    if sid == "llm-judge":  # the LLM judge's id is the name it is given
        scorer = create_scorer(name, {"name": "concise", "instructions": "Be brief.",
                                      "model": "openai/gpt-4o-mini"})
        assert scorer.id == "concise"
        return
    by_id: dict[str, dict[str, Any]] = {
        "tool-call-accuracy": {"expected_tool": "search"},
        "llm-tool-call-accuracy": {"available_tools": ["search"]},
        "bias": {"model": "openai/gpt-4o-mini"},  # bias has no offline judge
        "multi-turn-judge": {"criterion": "The user got a forecast.",
                             "model": "openai/gpt-4o-mini"},
        # the judged scorers without an offline version
        **{sid: {"model": "openai/gpt-4o-mini"} for sid in (
            "answer-similarity", "context-precision", "context-recall", "prompt-alignment",
            "summarization", "rubric")},
        "noise-sensitivity": {"model": "openai/gpt-4o-mini", "baseline_response": "Paris.",
                              "noisy_query": "What is the capital of France? Cats!"}}
    by_id.update(CHECK_OPTIONS)
    scorer = create_scorer(name, by_id.get(sid))
    assert scorer.id == SCORER_ALIASES[name.replace("_", "-")] and scorer.id in SCORER_IDS


def test_unknown_names_and_missing_options_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="unknown scorer 'faithful'; choose from"):
        create_scorer("faithful")
    with pytest.raises(ConfigurationError, match="expected_tool or expected_tool_order"):
        create_scorer("tool-call-accuracy")
    with pytest.raises(ConfigurationError, match="scorer 'keyword-coverage': .*colour"):
        create_scorer("keyword-coverage", {"colour": 1})


def test_configure_scores_live_calls_with_scorers_named() -> None:
    scores = live_scores(list(CODE_NAMES), QUESTION, ANSWER)
    assert scores == {sid: create_scorer(sid).run(input=QUESTION, output=ANSWER).score
                      for sid in ("keyword-coverage", "textual-difference", "content-similarity")}


def test_run_evals_takes_scorer_names() -> None:
    data = [{"input": QUESTION, "ground_truth": ANSWER}, {"input": "Who wrote Hamlet?",
                                                          "ground_truth": "Shakespeare"}]
    result = run_evals(data, ["keyword-coverage", "textual-difference"], lambda q: ANSWER)
    assert set(result.scores) == {"keyword-coverage", "textual-difference"}
    assert result.scores["keyword-coverage"] == pytest.approx((1.0 + 0.0) / 2)
    single = run_evals(data, "textual-difference", lambda q: ANSWER)
    assert set(single.scores) == {"textual-difference"}


def test_gateway_config_builds_scorers_with_options(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text("""
scoring:
  scorers:
    - scorer: keyword-coverage
    - scorer: textual_difference
      options: {scale: 10}
    - scorer: tool-call-accuracy
      options: {expected_tool_order: [search, refund], strict_mode: true}
""")
    config = load_gateway_config(path, environ={})
    scorers = [online.scorer for online in config.scorers or ()]
    assert [type(s) for s in scorers] == [KeywordCoverageScorer, TextualDifferenceScorer,
                                          ToolCallAccuracyScorer]
    assert scorers[1].scale == 10 and scorers[2].expected_tool_order == ("search", "refund")


def test_gateway_config_names_the_key_of_a_bad_scorer(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text("scoring:\n  scorers:\n    - scorer: tool-call-accuracy\n")
    with pytest.raises(ConfigurationError, match=r"scoring.scorers\[0\].options: expected_tool"):
        load_gateway_config(path, environ={})


def test_the_command_scores_with_the_code_scorers() -> None:
    by_id = score_command("--input", QUESTION, "--output", ANSWER, "-s", "keyword-coverage",
                          "-s", "textual-difference")
    assert by_id["keyword-coverage"]["analyze_step_result"] == {"total_keywords": 2,
                                                                "matched_keywords": 2}
    assert by_id["textual-difference"]["score"] == create_scorer("difference").run(
        input=QUESTION, output=ANSWER).score


def test_the_config_examples_in_the_scorers_page_load(tmp_path: Path) -> None:
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "scorers.md").read_text("utf-8")
    ids = []
    for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL):
        path = tmp_path / "gateway.yaml"
        path.write_text(block)
        config = load_gateway_config(path, environ={})
        ids.append([online.scorer.id for online in config.scorers or ()])
    assert ["keyword-coverage", "tool-call-accuracy"] in ids and ["polite"] in ids


def _command(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "tracescore"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_the_eval_command_runs_tool_call_accuracy_with_its_options(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(
        "def answer(question):\n"
        "    calls = ['search', 'refund'] if 'refund' in question else ['search']\n"
        "    return {'text': 'done', 'tool_calls': calls}\n")
    (tmp_path / "items.jsonl").write_text(
        json.dumps({"input": "refund order 7"}) + "\n" + json.dumps({"input": "find x"}) + "\n")
    results = tmp_path / "results.json"
    done = _command("eval", "items.jsonl", "--target", "agent.py:answer", "-s",
                    "tool-call-accuracy", "--scorer-option",
                    "tool-call-accuracy.expected_tool_order=[search, refund]",
                    "--scorer-option", "tool_call_accuracy.strict_mode=true",
                    "--output", str(results), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(results.read_text())
    assert data["scores"] == {"tool-call-accuracy": 0.5}


@pytest.mark.parametrize(("args", "message"), [
    (["-s", "tool-call-accuracy"], ("expected_tool or expected_tool_order is required (scorer "
                                    "tool-call-accuracy: set options with --scorer-option")),
    (["-s", "similarity", "--scorer-option", "keyword-coverage.scale=2"],
     "--scorer-option for a scorer that does not run: keyword-coverage"),
    (["--scorer-option", "scale=2"], "bad scorer option 'scale=2'; write it as SCORER.NAME=VALUE"),
    (["-s", "bias"],
     "(scorer bias: give a language model with --judge-model (or --scorer-option bias.model=MODEL))"),
    (["-s", "keyword-coverage", "--scorer-option", "keywords.colour=red"],
     "unexpected keyword argument 'colour'"),
])
def test_bad_scorer_options_are_clear_errors(args: list[str], message: str,
                                             tmp_path: Path) -> None:
    done = _command("score", "-i", "q", "-o", "a", *args, cwd=tmp_path)
    assert done.returncode == 2
    assert message in " ".join(done.stderr.split())


@pytest.mark.parametrize(("calls", "score"), [
    (["search", '{"name": "refund", "arguments": {"order": 7}}'], 1.0),
    (["refund", "search"], 0.0),
    ([], 0.0),
])
def test_the_score_command_gives_tool_calls_to_the_tool_call_scorers(
        calls: list[str], score: float, tmp_path: Path) -> None:
    tool_args = [arg for call in calls for arg in ("--tool-call", call)]
    done = _command("score", "-i", "Refund order 7", "-o", "Refunded.", "-s", "tool-call-accuracy",
                    "-s", "llm-tool-call-accuracy", "--scorer-option",
                    "tool-call-accuracy.expected_tool_order=[search, refund]",
                    "--scorer-option", "llm-tool-call-accuracy.available_tools=[search, refund]",
                    "--json", *tool_args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    code, judged = json.loads(done.stdout)
    assert code["score"] == score
    assert judged["scorer_id"] == "llm-tool-call-accuracy"
    assert [e["toolCalled"] for e in judged["analyze_step_result"]["evaluations"]] == [
        json.loads(c)["name"] if c.startswith("{") else c for c in calls]


@pytest.mark.parametrize(("value", "message"), [
    ('{"name": "refund"', "--tool-call '{\"name\": \"refund\"': not valid JSON"),
    ('{"name": "refund", "colour": 1}', "--tool-call: 'tool_calls'[0] has unknown keys ['colour']"),
    ("", "--tool-call: 'tool_calls'[0] must be a tool name"),
])
def test_a_bad_tool_call_on_the_command_line_is_a_clear_error(value: str, message: str,
                                                              tmp_path: Path) -> None:
    done = _command("score", "-i", "q", "-o", "a", "-s", "tool-call-accuracy", "--scorer-option",
                    "tool-call-accuracy.expected_tool=search", "--tool-call", value, cwd=tmp_path)
    assert done.returncode == 2
    assert message in " ".join(done.stderr.split()), done.stderr


@pytest.mark.parametrize("sid", SCORER_IDS)
def test_the_commands_help_lists_every_scorer_as_code_or_judged(sid: str) -> None:
    from tracescore.cli._app import _SCORER_HELP
    from tracescore.scoring._registry import JUDGED

    groups = dict(re.findall(r"(Code scorers|Judged)[^:]*: ([^.]+)\.", _SCORER_HELP))
    names = groups["Judged" if sid in JUDGED or sid == "llm-judge" else "Code scorers"]
    assert {a for a, s in SCORER_ALIASES.items() if s == sid} & set(names.split(", ")), sid

"""Runs and conversations offline: run_evals and `tracescore eval` take multi-turn items and
expected trajectories and score them with the trajectory scorers, the multi-turn judge and the
LLM judge's run and conversation scopes; what each scorer refuses, and why."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tracescore
from tracescore import ConfigurationError
from tracescore._datasets import DatasetError, load_dataset
from tracescore.scoring import (
    JudgeReply,
    JudgeRequest,
    JudgeUsage,
    MultiTurnJudgeScorer,
    Scorer,
    TrajectoryAccuracyLLMScorer,
    TrajectoryAccuracyScorer,
    TrajectoryScorer,
    create_llm_judge_scorer,
    create_multi_turn_judge_scorer,
    create_trajectory_accuracy_scorer,
    create_trajectory_accuracy_scorer_llm,
)


class RecordingJudge:
    """A Judge that answers every step with `reply` and keeps the prompts it was sent."""

    model = "recording-judge"

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply
        self.prompts: list[str] = []

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        self.prompts.append(request.prompt)
        return JudgeReply(data=request.validate(dict(self.reply)), raw=json.dumps(self.reply),
                          usage=JudgeUsage(model=self.model, calls=1), prompt=request.prompt)


def test_each_scorer_declares_what_it_judges() -> None:
    assert Scorer.scope == "call"
    assert TrajectoryAccuracyScorer.scope == TrajectoryScorer.scope == "run"
    assert TrajectoryAccuracyLLMScorer.scope == "run"
    assert MultiTurnJudgeScorer.scope == "conversation"
    judge = RecordingJudge({"verdict": "pass", "reason": "ok"})
    assert create_llm_judge_scorer(name="goal", instructions="Goal met.", model=judge,
                                   scope="conversation").scope == "conversation"
    with pytest.raises(ConfigurationError, match="scope must be one of"):
        create_llm_judge_scorer(name="goal", instructions="x", model=judge, scope="session")


def test_run_evals_scores_expected_trajectories_of_each_item() -> None:
    items: list[dict[str, Any]] = [
        {"input": "Refund order 7", "tool_calls": ["lookup_order", "refund"],
         "expected_trajectory": ["lookup_order", "refund"]},
        {"input": "Refund order 8", "expected_trajectory": ["lookup_order", "refund"],
         "trajectory": [{"name": "refund", "arguments": {"order": 8}}, "lookup_order"]},
        {"input": "Refund order 9", "trajectory": ["lookup_order", "refund", "refund"],
         "expected_trajectory": {"steps": ["lookup_order", "refund"], "ordering": "strict"}},
    ]
    result = tracescore.run_evals(items, ["trajectory-accuracy"], target=lambda q: "Done.")
    assert result.failures == ()
    scores = [i.scores["trajectory-accuracy"] for i in result.items]
    assert [s.score for s in scores] == [1.0, 0.5, 0.75]  # order matters; strict costs extras
    assert scores[1].preprocess_step_result["comparison"]["out_of_order_steps"] == ["refund"]
    assert scores[1].reason == ("1 of 2 expected steps matched (relaxed order); "
                                "missing: refund; out of order: refund.")


def test_expected_arguments_must_match_and_forbidden_tools_score_zero() -> None:
    scorer = create_trajectory_accuracy_scorer(
        expected_trajectory=[{"name": "refund", "arguments": {"order": 7}}])
    assert scorer.run(trajectory=[{"name": "refund", "arguments": {"order": 7}}]).score == 1.0
    assert scorer.run(trajectory=[{"name": "refund", "arguments": {"order": 8}}]).score == 0.0
    result = tracescore.run_evals(
        [{"input": "q", "trajectory": ["search", "delete_all"],
          "expected_trajectory": {"steps": ["search"], "blacklisted_tools": ["delete_all"]}}],
        ["trajectory"], target=lambda q: "a")
    (item,) = result.items
    assert item.scores["trajectory"].score == 0.0
    assert "delete_all" in (item.scores["trajectory"].reason or "")


def test_a_multi_turn_item_calls_the_target_per_turn_with_the_conversation_so_far() -> None:
    seen: list[list[dict[str, Any]]] = []

    def agent(messages: list[dict[str, Any]]) -> str:
        seen.append(messages)
        return f"answer to {messages[-1]['content']}"

    judge = RecordingJudge({"satisfied": True, "reasoning": "Both cities got a forecast."})
    criterion = create_multi_turn_judge_scorer(model=judge, criterion="Forecasts for both.")
    item = {"turns": ["Weather in Paris?", {"input": "And London?", "output": "Rainy."},
                      "Umbrella?"]}
    result = tracescore.run_evals([item], [criterion, "keyword-coverage"], target=agent)
    assert result.failures == ()
    (done,) = result.items
    assert done.output == ["answer to Weather in Paris?", "Rainy.", "answer to Umbrella?"]
    assert [len(m) for m in seen] == [1, 5]  # the answered turn is not asked again
    assert seen[1][-2:] == [{"role": "assistant", "content": "Rainy."},
                            {"role": "user", "content": "Umbrella?"}]
    assert done.scores["multi-turn-judge"].score == 1.0
    (prompt,) = judge.prompts  # one judge call saw every turn, the user's too
    assert all(text in prompt for text in ("Weather in Paris?", "Rainy.", "answer to Umbrella?"))
    # a call scorer judges the last answer
    assert done.scores["keyword-coverage"].score > 0


def test_the_llm_judge_judges_a_whole_run_or_conversation() -> None:
    judge = RecordingJudge({"verdict": "fail", "reason": "The refund came before the lookup."})
    policy = create_llm_judge_scorer(name="policy", instructions="Look the order up first.",
                                     model=judge, scope="run")
    result = policy.run(input="Refund order 7", output="Refunded.",
                        trajectory=["refund", {"name": "lookup_order", "arguments": {"id": 7}}])
    assert (result.score, result.label) == (0.0, "fail")
    assert '"lookup_order"' in judge.prompts[0] and "<run>" in judge.prompts[0]
    judge = RecordingJudge({"verdict": "pass", "reason": "The user got the answer."})
    goal = create_llm_judge_scorer(name="goal", instructions="The user's goal is met.",
                                   model=judge, scope="conversation")
    result = goal.run(turns=[{"input": "Hi", "output": "Hello!"},
                             {"input": "Refund 7?", "output": "Done."}])
    assert result.score == 1.0
    assert "<conversation>" in judge.prompts[0] and "Refund 7?" in judge.prompts[0]


def test_the_offline_judge_approximates_where_it_honestly_can_and_refuses_elsewhere() -> None:
    offline = "tracescore/offline"
    with pytest.raises(ConfigurationError, match="cannot grade a conversation"):
        create_multi_turn_judge_scorer(model=offline, criterion="Goal met.")
    with pytest.raises(ConfigurationError, match="offline judge"):
        create_llm_judge_scorer(name="goal", instructions="x", model=offline, scope="run")
    judged = create_trajectory_accuracy_scorer_llm(model=offline)
    result = tracescore.run_evals(
        [{"input": "q", "trajectory": ["search"]},
         {"input": "q", "trajectory": ["search", "log"], "expected_trajectory": ["search"]}],
        [judged, "trajectory-accuracy"], target=lambda q: "a")
    first, second = result.items
    assert {f.scorer_id: f.step for f in first.failures} == {
        "llm-trajectory-accuracy": "preprocess", "trajectory-accuracy": "preprocess"}
    assert "expected trajectory" in first.failures[0].message
    assert second.scores["llm-trajectory-accuracy"].score == 0.6  # log: not needed, in place
    assert second.scores["llm-trajectory-accuracy"].analyze_step_result["extraSteps"] == ["log"]


def test_bad_multi_turn_and_trajectory_items_are_refused_with_the_item_named() -> None:
    for item, message in (
            ({"turns": []}, "item 0: 'turns' must be a non-empty list"),
            ({"input": "q", "trajectory": "search"}, "item 0: 'trajectory' must be a list"),
            ({"input": "q", "expected_trajectory": {"steps": ["a"], "ordering": "loose"}},
             "ordering must be one of relaxed, strict, unordered"),
            ({"input": "q", "expected_trajectory": [{"name": "a", "args": {}}]},
             "unknown keys \\['args'\\]"),
            ({"input": "q", "expected_trajectory": {"blacklisted_tools": "delete_all"}},
             "blacklisted_tools must be a list of tool names")):
        with pytest.raises(ConfigurationError, match=message):
            tracescore.run_evals([item], ["trajectory"], target=lambda q: "a")


AGENT = """\
def answer(value):
    if isinstance(value, list):
        return "Rain in " + value[-1]["content"].split()[-1]
    return "Searched."
"""


def test_the_eval_command_scores_multi_turn_and_trajectory_datasets(tmp_path: Path) -> None:
    (tmp_path / "weather_agent.py").write_text(AGENT)
    rows = [{"turns": ["Weather in Paris", "and London"], "topic": "weather"},
            {"input": "Find the forecast", "tool_calls": ["search", "summarize"],
             "expected_trajectory": ["search", "summarize"]}]
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "runs.csv").write_text(
        'input,trajectory,expected_trajectory\nq,"[""search""]","[""search"", ""log""]"\n')
    assert load_dataset(tmp_path / "runs.csv")[0]["expected_trajectory"] == ["search", "log"]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "tracescore"), "eval", "runs.jsonl", "-t",
         "weather_agent:answer", "-s", "trajectory", "-s", "keyword-coverage", "--output",
         "out.json"], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "out.json").read_text())
    first, second = data["items"]
    assert first["output"] == ["Rain in Paris", "Rain in London"]
    assert first["metadata"] == {"topic": "weather"}
    assert second["scores"]["trajectory"]["score"] == 1.0
    (tmp_path / "bad.jsonl").write_text('{"turns": "hello"}\n')
    with pytest.raises(DatasetError, match="bad.jsonl, line 1: 'turns' must be a non-empty"):
        load_dataset(tmp_path / "bad.jsonl")

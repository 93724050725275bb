"""Every scorer of the registry, by name, in the four places a user names scorers: configure
(online scoring of a live call), the gateway config, run_evals and the `tracescore` command.

Judged scorers use the offline judge, except the two that need a language model (bias, the LLM
judge): real litellm over HTTP to a local stub whose one reply fits both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from _helpers import SCORING_BUDGET_S, shut_down_pipelines
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import _semconv as sc
from tracescore import load_gateway_config
from tracescore.scoring._registry import ENV_JUDGE_MODEL, SCORER_IDS
from tracescore.testing import Reply, StubLLMServer

QUESTION = "What is the refund policy?"
ANSWER = "Refunds take 5 days."
REPLY = {"opinions": ["Refunds are slow."], "results": [{"result": "no", "reason": "neutral"}],
         "reason": "The score is 0 because the answer is neutral.", "verdict": "pass",
         "satisfied": True, "reasoning": "The answer states the policy.",
         # the keys of the judged scorers without an offline version (issue 37)
         "outputUnits": ["Refunds take 5 days"], "groundTruthUnits": ["Refunds take 5 days"],
         "matches": [{"groundTruthUnit": "Refunds take 5 days", "outputUnit": "Refunds take 5 "
                      "days", "matchType": "exact", "explanation": "same"}],
         "extraInOutput": [], "contradictions": [], "claims": ["Refunds take 5 days"],
         "verdicts": [{"context_index": 0, "verdict": "yes", "reason": "stated"}],
         "dimensions": [], "majorIssues": [], "robustnessScore": 1,
         "overallAssessment": "fine", "alignment": [{"claim": "Refunds take 5 days",
                                                     "supported": True, "reason": "stated"}],
         "questions": ["How long do refunds take?"],
         "coverage": [{"question": "How long do refunds take?", "answered": True,
                       "reason": "stated"}],
         "criteria": [{"criterion": "States the policy", "satisfied": True, "required": True,
                       "reasoning": "it does"}],
         **{key: {"score": 1, "overallScore": 1, "primaryIntent": "policy", "isAddressed": True,
                  "requirements": [], "missingElements": [], "formatAlignment": True,
                  "toneAlignment": True, "reasoning": "ok"}
            for key in ("intentAlignment", "requirementsFulfillment", "completeness",
                        "responseAppropriateness")}}


@pytest.fixture
def specs(stub_llm: StubLLMServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    """The expected scorer id -> a spec naming each registry scorer, with the options it needs."""
    monkeypatch.delenv(ENV_JUDGE_MODEL, raising=False)
    stub_llm.default_reply = Reply(content=REPLY)
    judge = {"model": "openai/judge-stub", "api_base": stub_llm.base_url, "api_key": "sk-test",
             "timeout": 10}
    options: dict[str, dict[str, Any]] = {
        "tool-call-accuracy": {"expected_tool": "search"},
        "llm-tool-call-accuracy": {"available_tools": [
            {"id": "search", "description": "Search the refund policy"}]},
        "bias": judge,
        "trajectory-accuracy": {"expected_trajectory": ["search"]},
        "llm-trajectory-accuracy": {"expected_trajectory": ["search"]},  # the offline judge's
        "multi-turn-judge": {**judge, "criterion": "The agent states the refund policy."},
        "llm-judge": {**judge, "name": "polite", "instructions": "The answer is polite."},
        "answer-similarity": {**judge, "require_ground_truth": False},  # none online
        "context-precision": judge, "context-recall": judge, "prompt-alignment": judge,
        "summarization": judge, "rubric": {**judge, "criteria": "- States the policy"},
        "noise-sensitivity": {**judge, "baseline_response": ANSWER,
                              "noisy_query": f"{QUESTION} Also, cats?"},
        **{f"check-{c}": {"expected": "refunds"} for c in ("includes", "excludes", "equals",
                                                          "similarity")},
        "check-matches": {"pattern": r"\d+ days"}, "check-called-tool": {"tool_name": "search"},
        "check-did-not-call": {"tool_name": "refund", "scope": "run"},
        "check-tool-order": {"expected_order": ["search"]}, "check-max-tool-calls": {"max": 1}}
    return {"polite" if sid == "llm-judge" else sid: {"scorer": sid, "options": options.get(sid, {})}
            for sid in SCORER_IDS}


@tracescore.tool(name="search")
def search(query: str) -> str:
    return ANSWER


@tracescore.agent(name="support", conversation_id=lambda question: "chat-1")
def support(question: str) -> str:
    return search(question)


def test_configure_scores_a_live_call_with_every_scorer_named(specs: dict[str, Any]) -> None:
    exporter = InMemorySpanExporter()
    handle = tracescore.configure(exporter=exporter, batch=False, scorers=list(specs.values()),
                                  online={"max_wait_s": SCORING_BUDGET_S})
    try:
        support(QUESTION)
        assert handle.flush(SCORING_BUDGET_S)
        handle.shutdown(SCORING_BUDGET_S)  # scores the conversation still waiting
    finally:
        shut_down_pipelines()
    # a call's and a run's results on the agent span; the conversation's (scored at shutdown:
    # its quiet period has not passed) on its carrier span
    spans = exporter.get_finished_spans()
    carriers = [s for s in spans if s.attributes and s.attributes.get(sc.TS_EVALUATION_CARRIER)]
    (span,) = [s for s in spans if s.name == "invoke_agent support"]
    events = {e.attributes[sc.TS_SCORER_ID]: e.attributes for s in (span, *carriers)
              for e in s.events if e.name == sc.GEN_AI_EVALUATION_RESULT}
    assert set(events) == set(specs)
    assert [c.events[0].attributes[sc.TS_SCORER_ID] for c in carriers] == ["multi-turn-judge"]
    assert {sid: a.get(sc.ERROR_TYPE) for sid, a in events.items()} == dict.fromkeys(specs)
    assert events["tool-call-accuracy"][sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0  # saw the call
    for check in ("check-called-tool", "check-tool-order", "check-did-not-call",
                  "check-includes", "check-matches"):
        assert events[check][sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0, check
    assert events["check-used-no-tools"][sc.GEN_AI_EVALUATION_SCORE_VALUE] == 0.0


def test_run_evals_scores_with_every_scorer_named(specs: dict[str, Any]) -> None:
    item = {"input": QUESTION, "ground_truth": ANSWER, "context": [ANSWER],
            "tool_calls": ["search"]}
    result = tracescore.run_evals([item], list(specs.values()), target=lambda q: ANSWER)
    assert result.failures == ()
    assert set(result.scores) == set(specs) and None not in result.scores.values()
    assert result.scores["tool-call-accuracy"] == 1.0


def test_the_gateway_config_builds_every_scorer_named(specs: dict[str, Any],
                                                      tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump({"scoring": {"scorers": list(specs.values())}}))
    config = load_gateway_config(path, environ={})
    assert [online.scorer.id for online in config.scorers or ()] == list(specs)


def test_the_command_scores_with_every_scorer_named(specs: dict[str, Any],
                                                    tmp_path: Path) -> None:
    args = ["score", "-i", QUESTION, "-o", ANSWER, "-g", ANSWER, "-c", ANSWER,
            "--tool-call", "search", "--json"]
    for spec in specs.values():
        args += ["-s", spec["scorer"]]
        for key, value in spec["options"].items():
            args += ["--scorer-option", f"{spec['scorer']}.{key}={json.dumps(value)}"]
    env = {k: v for k, v in os.environ.items() if k != ENV_JUDGE_MODEL}
    done = subprocess.run([str(Path(sys.executable).parent / "tracescore"), *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    results = {r["scorer_id"]: r for r in json.loads(done.stdout)}
    assert list(results) == list(specs)
    assert results["tool-call-accuracy"]["score"] == 1.0
    assert results["check-called-tool"]["score"] == 1.0

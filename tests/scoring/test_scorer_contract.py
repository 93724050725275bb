"""The two ways to write a scorer, online (configure) and offline (run, run_evals):
- the way scorers were written before the step hooks: a Scorer subclass with its own `arun`
  (with or without `tool_calls`/`context`), or a built-in scorer's subclass overriding `arun`;
- the new way: `evaluate(call)` with one ScorerInput, or a JudgedScorer filling in the hooks
  `preprocess` / `analyze` / `score` / `reason`."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from _helpers import SCORING_BUDGET_S, live_scores, shut_down_pipelines
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import (
    AnswerRelevancyScorer,
    JudgedScorer,
    JudgeRequest,
    JudgeUsage,
    Scorer,
    ScoreResult,
    ScorerInput,
    ToolCall,
)
from tracescore import _semconv as sc
from tracescore.scoring import JudgedRun, JudgeReply

QUESTION, ANSWER = "What is the capital of France?", "Paris is the capital of France."
CALLS = (ToolCall(name="search", arguments={"q": "capital"}, result="Paris"),)
CONTEXT = ("Paris is the capital of France.",)


def _result(scorer: Scorer, score: float, run_id: str | None, reason: str = "") -> ScoreResult:
    return ScoreResult(run_id=run_id or "r", scorer_id=scorer.id, scorer_name=scorer.name,
                       score=score, reason=reason, usage=JudgeUsage(model=None))


class OldLength(Scorer):
    """Written against the first contract: `arun` without tool calls or context."""

    id, name, uses_judge = "old-length", "Old Length", False

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None) -> ScoreResult:
        return _result(self, len(str(output)) / 100, run_id)


class OldTrace(Scorer):
    """Written against the second contract: `arun` taking `tool_calls` and `context`."""

    id, name, uses_judge = "old-trace", "Old Trace", False

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None, tool_calls: Any = (), context: Any = ()
                   ) -> ScoreResult:
        return _result(self, 10 * len(tool_calls) + len(context), run_id,
                       json.dumps([c.name for c in tool_calls]))


class CappedRelevancy(AnswerRelevancyScorer):
    """A built-in judged scorer's subclass that overrides `arun` and calls the parent's."""

    id = "capped-relevancy"

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None, tool_calls: Any = (), context: Any = ()
                   ) -> ScoreResult:
        result = await super().arun(input=input, output=output, ground_truth=ground_truth,
                                    run_id=run_id, tool_calls=tool_calls, context=context)
        return dataclasses.replace(result, scorer_id=self.id, score=min(result.score, 0.5))


class NewTrace(Scorer):
    """The new way: one ScorerInput in."""

    id, name, uses_judge = "new-trace", "New Trace", False

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        return _result(self, 10 * len(call.tool_calls) + len(call.context), call.run_id,
                       json.dumps([call.question, call.answer, len(call.conversation)]))


class EchoJudge:
    """A judge that answers every step from the request's data (no network)."""

    model = "echo"

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        data = {"words": request.data["text"].split()} if request.task == "words" else \
            {"reason": f"The score is {request.data['score']} because it is short."}
        return JudgeReply(data=request.validate(data), raw=json.dumps(data),
                          usage=JudgeUsage(model=self.model, calls=1), prompt=request.prompt)


def _request(step: str, task: str, data: dict[str, Any]) -> JudgeRequest:
    return JudgeRequest(step=step, task=task, system="You count.", prompt=json.dumps(data),
                        schema_name=task, schema={"type": "object"}, validate=dict, data=data)


class Brevity(JudgedScorer):
    """The new way with a judge: the step hooks."""

    id, name = "brevity", "Brevity"

    async def preprocess(self, run: JudgedRun, call: ScorerInput) -> list[str]:
        reply = await run.ask(_request("preprocess", "words", {"text": call.answer}))
        run.record("preprocess", prompt=reply.prompt, result=reply.data)
        words: list[str] = reply.data["words"]
        return words

    async def analyze(self, run: JudgedRun, call: ScorerInput, prepared: list[str]) -> int:
        run.record("analyze", result={"count": len(prepared)})
        return len(prepared)

    def score(self, analysis: int) -> float:
        return 1.0 if analysis <= 3 else 3 / analysis

    def reason(self, analysis: int, score: float) -> JudgeRequest:
        return _request("reason", "reason", {"score": score})


def test_scorers_written_the_old_way_score_offline() -> None:
    assert OldLength().run(input=QUESTION, output=ANSWER).score == 0.31
    assert OldTrace().run(input=QUESTION, output=ANSWER, tool_calls=CALLS,
                          context=CONTEXT).score == 11
    item = {"input": QUESTION, "tool_calls": [{"name": "search", "result": "Paris"}],
            "context": list(CONTEXT)}
    result = tracescore.run_evals([item], [OldLength(), OldTrace()], target=lambda q: ANSWER)
    assert result.failures == ()
    assert result.scores == {"old-length": 0.31, "old-trace": 11}


def test_an_old_way_subclass_of_a_built_in_scorer_runs_its_own_arun_offline() -> None:
    plain = AnswerRelevancyScorer(model="tracescore/offline").run(input=QUESTION, output=ANSWER)
    capped = CappedRelevancy(model="tracescore/offline")
    assert plain.score == 1.0
    assert capped.run(input=QUESTION, output=ANSWER).score == 0.5
    result = tracescore.run_evals([{"input": QUESTION}], [capped], target=lambda q: ANSWER)
    assert result.scores == {"capped-relevancy": 0.5}


def test_scorers_written_the_old_way_score_live_calls() -> None:
    scores = live_scores([OldLength(), OldTrace(), CappedRelevancy(model="tracescore/offline")],
                         QUESTION, ANSWER)
    assert scores == {"old-length": 0.31, "old-trace": 0.0, "capped-relevancy": 0.5}


def test_the_new_way_gets_one_input_object_offline_and_online() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}]
    result = NewTrace().run(input=messages, output=ANSWER, tool_calls=CALLS, context=CONTEXT)
    assert (result.score, json.loads(result.reason or "")) == (11, [QUESTION, ANSWER, 2])
    item = {"input": QUESTION, "tool_calls": ["search"], "context": list(CONTEXT)}
    evals = tracescore.run_evals([item], [NewTrace()], target=lambda q: ANSWER)
    assert evals.scores == {"new-trace": 11}



class JudgedNewTrace(NewTrace):
    """The same, declared as calling a judge: online scoring runs it in the scoring process."""

    id, uses_judge = "judged-new-trace", True


@tracescore.tool(name="search")
def search(query: str) -> str:
    return ANSWER


@tracescore.agent(name="geo")
def geo(question: str) -> str:
    return search(question)


@pytest.mark.parametrize("isolation", ["auto", "thread"])
def test_the_new_way_gets_the_live_calls_tool_calls_and_context(isolation: str) -> None:
    exporter = InMemorySpanExporter()
    handle = tracescore.configure(exporter=exporter, batch=False,
                                  scorers=[NewTrace(), JudgedNewTrace(), OldTrace()],
                                  online={"isolation": isolation})
    try:
        geo(QUESTION)
        assert handle.flush(SCORING_BUDGET_S)
    finally:
        shut_down_pipelines()
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent geo"]
    scores = {e.attributes[sc.TS_SCORER_ID]: e.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE]
              for e in span.events if e.name == sc.GEN_AI_EVALUATION_RESULT}
    # one tool call, and its result as context, whichever way the scorer is written
    assert scores == {"new-trace": 11.0, "judged-new-trace": 11.0, "old-trace": 11.0}


def test_a_judged_scorer_of_step_hooks_records_each_step() -> None:
    result = Brevity(model=EchoJudge()).run(input=QUESTION, output=ANSWER)
    assert result.score == 0.5  # 6 words
    assert result.preprocess_step_result == {"words": ANSWER.split()}
    assert result.analyze_step_result == {"count": 6}
    assert result.reason == "The score is 0.5 because it is short."
    assert json.loads(result.generate_reason_prompt or "") == {"score": 0.5}
    assert result.usage.calls == 2
    evals = tracescore.run_evals([{"input": QUESTION}], [Brevity(model=EchoJudge())],
                                 target=lambda q: "Paris.")
    assert evals.scores == {"brevity": 1.0}


def test_a_scorer_with_neither_evaluate_nor_arun_says_so() -> None:
    class Empty(Scorer):
        id, name, uses_judge = "empty", "Empty", False

    with pytest.raises(NotImplementedError, match="Empty implements neither evaluate nor arun"):
        Empty().run(input=QUESTION, output=ANSWER)

"""Answer relevancy: how well the output addresses the question, judged statement by statement.

preprocess (judge: statements of the output) -> analyze (judge: a verdict per statement
against the question) -> score (code) -> reason (judge: explains the score it is given).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from tracescore.scoring import _prompts
from tracescore.scoring._base import (
    STEP_ANALYZE,
    STEP_PREPROCESS,
    ScoreResult,
    ScorerInput,
    relevancy_label,
)
from tracescore.scoring._inputs import InputError, answer_text, question_text
from tracescore.scoring._jstext import JS_WHITESPACE
from tracescore.scoring._judge_api import Judge, JudgeRequest
from tracescore.scoring._judged import JudgedRun, JudgedScorer
from tracescore.scoring._options import check_fraction, merge_options
from tracescore.scoring._prompting import format_score, reference_round

# the name other modules imported before the options helpers had their own module
_merge_options = merge_options



def relevancy_score(results: Sequence[Mapping[str, Any]], uncertainty_weight: float,
                    scale: float) -> float:
    """(yes + weight * unsure) / len(results) * scale, computed and rounded as the reference
    computes it (float arithmetic in its order, its `roundToTwoDecimals`).

    A verdict counts when it reads "yes" or "unsure" after trimming (JavaScript's whitespace)
    and lower-casing, as in the reference: " YES " counts, "un sure" does not. Other strings
    count 0 but stay in the denominator; no results score 0.
    """
    if not results:
        return 0.0
    count: float = 0
    for item in results:
        verdict = str(item.get("result", "")).strip(JS_WHITESPACE).lower()
        if verdict == "yes":
            count += 1
        elif verdict == "unsure":
            count += uncertainty_weight
    return reference_round(count / len(results) * scale)


class AnswerRelevancyScorer(JudgedScorer):
    """LLM-judged answer relevancy (same steps and formula as the reference system).

    `model` is a litellm model string, "tracescore/offline", or a Judge object; other keyword
    arguments configure the LiteLLMJudge (api_base, api_key, timeout, max_retries, ...).
    A run's `ground_truth` reaches the judge only as `JudgeRequest.reference` (the offline
    judge's reference knowledge); it is never part of the prompts.

    What the judge is sent: the question and the answer, each cut to `max_judge_input_chars`
    (the result's `judge_input_truncated` says so) and, unless `redact_judge_input=False`,
    redacted by the same rules as exported content. The step prompts on the result are exactly
    the prompts sent.
    """

    id = "answer-relevancy"
    name = "Answer Relevancy"
    aliases = ("relevancy",)
    factory = "create_answer_relevancy_scorer"

    def __init__(self, *, model: str | Judge, uncertainty_weight: float = 0.3,
                 scale: float = 1, **options: Any) -> None:
        self.uncertainty_weight = check_fraction("uncertainty_weight", uncertainty_weight)
        super().__init__(model=model, scale=scale, **options)

    def label(self, score: float) -> str:
        return relevancy_label(score, self.scale)

    def __repr__(self) -> str:
        return (f"AnswerRelevancyScorer(model={self.model!r}, "
                f"uncertainty_weight={self.uncertainty_weight!r}, scale={self.scale!r})")

    async def preprocess(self, run: JudgedRun, call: ScorerInput) -> _Steps | ScoreResult:
        """The question and the answer, and the statements of the answer (judge)."""
        try:
            question = run.judge_text(question_text(call.input))
            answer = run.judge_text(answer_text(call.output))
        except InputError as exc:
            raise run.error(STEP_PREPROCESS, str(exc)) from exc
        if not question.strip():
            raise run.error(STEP_PREPROCESS,
                            "the input has no question text to judge the output against")
        if not answer.strip():
            return run.skip_empty(
                {STEP_PREPROCESS: {"statements": []}, STEP_ANALYZE: {"results": []}},
                "The score is 0 because the output is empty, so nothing in it addresses the "
                "question (the judge was not called).")
        reply = await run.ask(_prompts.statements_request(answer))
        statements: list[str] = reply.data["statements"]
        run.record(STEP_PREPROCESS, prompt=reply.prompt, result={"statements": statements})
        return _Steps(question, answer, statements)

    async def analyze(self, run: JudgedRun, call: ScorerInput, prepared: _Steps) -> _Steps:
        """A verdict per statement against the question (judge; once more when the count is
        off)."""
        if not prepared.statements:
            run.record(STEP_ANALYZE, result={"results": []})
            return prepared
        reply, results, mismatch = await run.ask_list(
            lambda previous: _prompts.verdicts_request(prepared.question, prepared.statements,
                                                       previous_count=previous),
            key="results", count=len(prepared.statements), of="statements")
        analyze: dict[str, Any] = {"results": results, **mismatch}
        for key, value in reply.notes.items():  # how the judge judged (never overrides)
            analyze.setdefault(key, value)
        run.record(STEP_ANALYZE, prompt=reply.prompt, result=analyze)
        return dataclasses.replace(prepared, results=results)

    def score(self, analysis: _Steps) -> float:
        return relevancy_score(analysis.results, self.uncertainty_weight, self.scale)

    def reason(self, analysis: _Steps, score: float) -> str | JudgeRequest:
        if not analysis.results:
            return (f"The score is {format_score(score)} because the judge found no statements "
                    f"in the output.")
        return _prompts.reason_request(analysis.question, analysis.answer, analysis.statements,
                                       analysis.results, score=score, scale=self.scale,
                                       uncertainty_weight=self.uncertainty_weight)


@dataclasses.dataclass(frozen=True)
class _Steps:
    """What the steps of one run hand on: the judged texts, statements and verdicts."""

    question: str
    answer: str
    statements: list[str]
    results: list[dict[str, str]] = dataclasses.field(default_factory=list)


def create_answer_relevancy_scorer(*, model: str | Judge, uncertainty_weight: float = 0.3,
                                   scale: float = 1,
                                   options: Mapping[str, Any] | None = None,
                                   **judge_kwargs: Any) -> AnswerRelevancyScorer:
    """Factory named after the reference system's `createAnswerRelevancyScorer`.

    `options` may carry `uncertainty_weight`/`uncertaintyWeight` and `scale` (a partial set
    merges with the defaults).
    """
    merged = merge_options(options, {"uncertainty_weight": uncertainty_weight, "scale": scale},
                           {"uncertaintyWeight": "uncertainty_weight"})
    return AnswerRelevancyScorer(model=model, **merged, **judge_kwargs)

"""Answer relevancy: how well the output addresses the question, judged statement by statement.

preprocess (judge: statements of the output) -> analyze (judge: a verdict per statement
against the question) -> score (code) -> reason (judge: explains the score it is given).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracescore.scoring import _prompts
from tracescore.scoring._base import (
    STEP_ANALYZE,
    STEP_PREPROCESS,
    STEP_REASON,
    STEP_SCORE,
    ScoreResult,
    ToolCall,
    new_run_id,
    relevancy_label,
)
from tracescore.scoring._inputs import InputError, answer_text, question_text
from tracescore.scoring._jstext import JS_WHITESPACE
from tracescore.scoring._judge_api import Judge
from tracescore.scoring._judge_input import DEFAULT_MAX_JUDGE_INPUT_CHARS
from tracescore.scoring._judged import JudgedRun, JudgedScorer, reference_text
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
                 scale: float = 1, redact_judge_input: bool = True,
                 max_judge_input_chars: int = DEFAULT_MAX_JUDGE_INPUT_CHARS,
                 **judge_kwargs: Any) -> None:
        self.uncertainty_weight = check_fraction("uncertainty_weight", uncertainty_weight)
        super().__init__(model=model, scale=scale, redact_judge_input=redact_judge_input,
                         max_judge_input_chars=max_judge_input_chars, **judge_kwargs)

    def label(self, score: float) -> str:
        return relevancy_label(score, self.scale)

    def __repr__(self) -> str:
        return (f"AnswerRelevancyScorer(model={self.model!r}, "
                f"uncertainty_weight={self.uncertainty_weight!r}, scale={self.scale!r})")

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None, tool_calls: Sequence[ToolCall] = (),
                   context: Sequence[str] = ()) -> ScoreResult:
        run = JudgedRun(self, run_id or new_run_id(), reference_text(ground_truth))
        return await _execute(self, run, input, output)


async def _execute(scorer: AnswerRelevancyScorer, run: JudgedRun, input: Any, output: Any
                   ) -> ScoreResult:
    try:
        question = run.judge_text(question_text(input))
        answer = run.judge_text(answer_text(output))
    except InputError as exc:
        raise run.error(STEP_PREPROCESS, str(exc)) from exc
    if not question.strip():
        raise run.error(STEP_PREPROCESS,
                        "the input has no question text to judge the output against")
    if not answer.strip():
        return run.skip_empty({STEP_PREPROCESS: {"statements": []}, STEP_ANALYZE: {"results": []}},
                              "The score is 0 because the output is empty, so nothing in "
                              "it addresses the question (the judge was not called).")

    # 1. preprocess: statements of the output
    request = _prompts.statements_request(answer)
    reply = await run.ask(request)
    statements: list[str] = reply.data["statements"]
    run.record(STEP_PREPROCESS, prompt=reply.prompt, result={"statements": statements})

    # 2. analyze: a verdict per statement (one retry when the count is off)
    results: list[dict[str, str]] = []
    if statements:
        reply, results, mismatch = await run.ask_list(
            lambda previous: _prompts.verdicts_request(question, statements,
                                                       previous_count=previous),
            key="results", count=len(statements), of="statements")
        analyze: dict[str, Any] = {"results": results, **mismatch}
        for key, value in reply.notes.items():  # how the judge judged (never overrides)
            analyze.setdefault(key, value)
        run.record(STEP_ANALYZE, prompt=reply.prompt, result=analyze)
    else:
        run.record(STEP_ANALYZE, result={"results": []})

    # 3. score (code)
    try:
        score = relevancy_score(results, scorer.uncertainty_weight, scorer.scale)
    except Exception as exc:  # pragma: no cover - defensive: arithmetic on validated data
        raise run.error(STEP_SCORE, f"{type(exc).__name__}: {exc}") from exc
    if not results:
        return run.result(score, f"The score is {format_score(score)} because the judge "
                                 f"found no statements in the output.")

    # 4. reason (judge explains the given score)
    request = _prompts.reason_request(question, answer, statements, results, score=score,
                                      scale=scorer.scale,
                                      uncertainty_weight=scorer.uncertainty_weight)
    reply = await run.ask(request, score=score)
    run.record(STEP_REASON, prompt=reply.prompt)
    return run.result(score, reply.data["reason"])


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

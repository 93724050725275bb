"""Answer relevancy: how well the output addresses the question, judged statement by statement.

preprocess (judge: statements of the output) -> analyze (judge: a verdict per statement
against the question) -> score (code) -> reason (judge: explains the score it is given).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from tracescore._exceptions import ConfigurationError, ScorerError
from tracescore.scoring import _prompts
from tracescore.scoring._base import (
    STEP_PREPROCESS,
    STEP_SCORE,
    JudgeUsage,
    Scorer,
    ScoreResult,
    ToolCall,
    check_scale,
    new_run_id,
    relevancy_label,
)
from tracescore.scoring._inputs import InputError, answer_text, question_text
from tracescore.scoring._judge_api import (
    Judge,
    JudgeAuthenticationError,
    JudgeReply,
    JudgeRequest,
    JudgeStepError,
)
from tracescore.scoring._judge_input import DEFAULT_MAX_JUDGE_INPUT_CHARS, check_max_chars, prepare
from tracescore.scoring._resolve import resolve_judge

_TWO_PLACES = Decimal("0.01")
_SKIPPED_EMPTY = "empty output: the judge was not called"


def relevancy_score(results: Sequence[Mapping[str, Any]], uncertainty_weight: float,
                    scale: float) -> float:
    """(yes + weight * unsure) / len(results) * scale, rounded half-up to 2 decimals.

    Verdicts compare case- and whitespace-insensitively; other strings count 0 but stay in
    the denominator; no results score 0.
    """
    if not results:
        return 0.0
    yes = unsure = 0
    for item in results:
        verdict = "".join(str(item.get("result", "")).split()).lower()
        if verdict == "yes":
            yes += 1
        elif verdict == "unsure":
            unsure += 1
    raw = ((Decimal(yes) + Decimal(str(uncertainty_weight)) * Decimal(unsure))
           / Decimal(len(results)) * Decimal(str(scale)))
    return float(raw.quantize(_TWO_PLACES, rounding=ROUND_HALF_UP))


class AnswerRelevancyScorer(Scorer):
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
    uses_judge = True

    def __init__(self, *, model: str | Judge, uncertainty_weight: float = 0.3,
                 scale: float = 1, redact_judge_input: bool = True,
                 max_judge_input_chars: int = DEFAULT_MAX_JUDGE_INPUT_CHARS,
                 **judge_kwargs: Any) -> None:
        if (isinstance(uncertainty_weight, bool)
                or not isinstance(uncertainty_weight, (int, float))
                or not math.isfinite(uncertainty_weight)
                or not 0 <= uncertainty_weight <= 1):
            raise ConfigurationError(
                f"uncertainty_weight must be a number between 0 and 1, got {uncertainty_weight!r}")
        self.scale = check_scale(scale)
        self.uncertainty_weight = uncertainty_weight
        if not isinstance(redact_judge_input, bool):
            raise ConfigurationError(
                f"redact_judge_input must be True or False, got {redact_judge_input!r}")
        self.redact_judge_input = redact_judge_input
        self.max_judge_input_chars = check_max_chars(max_judge_input_chars)
        self.judge: Judge = resolve_judge(model, judge_kwargs)

    @property
    def model(self) -> str:
        """The judge's model name (as it appears in results and spans)."""
        return self.judge.model

    def __repr__(self) -> str:
        return (f"AnswerRelevancyScorer(model={self.model!r}, "
                f"uncertainty_weight={self.uncertainty_weight!r}, scale={self.scale!r})")

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None, tool_calls: Sequence[ToolCall] = (),
                   context: Sequence[str] = ()) -> ScoreResult:
        run = _Run(self, run_id or new_run_id(), _reference_text(ground_truth))
        return await run.execute(input, output)


def _reference_text(ground_truth: Any) -> str | None:
    """The ground truth as text for the judge's `reference`, or None when it has no text.

    The score does not depend on it for LLM judges (it is not in their prompts, as in the
    reference system); the offline judge uses it as the world knowledge it lacks.
    """
    try:
        text = answer_text(ground_truth)
    except InputError:
        return None
    return text.strip() or None


class _Run:
    """One scorer run: collects the completed steps so a failure can carry them."""

    def __init__(self, scorer: AnswerRelevancyScorer, run_id: str,
                 reference: str | None = None) -> None:
        self.scorer = scorer
        self.run_id = run_id
        self.reference = reference
        self.usage = JudgeUsage(model=scorer.judge.model)
        self.step_usage: dict[str, JudgeUsage] = {}
        self.truncated = False  # the question or answer was cut for the judge
        self.fields: dict[str, Any] = {
            "preprocess_prompt": None, "preprocess_step_result": None,
            "analyze_prompt": None, "analyze_step_result": None,
            "generate_reason_prompt": None,
        }

    def _error(self, step: str, message: str, *, raw_reply: str | None = None,
               score: float | None = None) -> ScorerError:
        partial = {"run_id": self.run_id, **self.fields, "usage": asdict(self.usage),
                   "step_usage": {k: asdict(v) for k, v in self.step_usage.items()},
                   "judge_input_truncated": self.truncated}
        if score is not None:
            partial["score"] = score
        return ScorerError(message, scorer_id=self.scorer.id, step=step, partial=partial,
                           raw_reply=raw_reply)

    async def _ask(self, request: JudgeRequest, score: float | None = None) -> JudgeReply:
        if self.reference is not None:
            request = dataclasses.replace(request, reference=self.reference)
        try:
            reply = await self.scorer.judge.judge(request)
        except (ConfigurationError, JudgeAuthenticationError):
            raise  # not this run's step failing: every run would; the caller must fix the judge
        except JudgeStepError as exc:
            self._spend(request.step, exc.usage)
            raise self._error(request.step, str(exc), raw_reply=exc.raw_reply, score=score) from exc
        except Exception as exc:  # a third-party Judge failing its own way
            raise self._error(request.step, f"judge {self.scorer.judge.model!r} failed: "
                              f"{type(exc).__name__}: {exc}", score=score) from exc
        self._spend(request.step, reply.usage)
        return reply

    def _spend(self, step: str, usage: JudgeUsage) -> None:
        self.usage += usage
        previous = self.step_usage.get(step)
        self.step_usage[step] = usage if previous is None else previous + usage

    def _judge_text(self, text: str) -> str:
        """`text` redacted and capped as the judge gets it (noting a cut)."""
        prepared = prepare(text, redact=self.scorer.redact_judge_input,
                           max_chars=self.scorer.max_judge_input_chars)
        self.truncated = self.truncated or prepared.cut
        return prepared.text

    def _result(self, score: float, reason: str) -> ScoreResult:
        scorer = self.scorer
        return ScoreResult(run_id=self.run_id, scorer_id=scorer.id, scorer_name=scorer.name,
                           score=score, label=relevancy_label(score, scorer.scale),
                           reason=reason, usage=self.usage, step_usage=dict(self.step_usage),
                           judge_input_truncated=self.truncated, **self.fields)

    async def execute(self, input: Any, output: Any) -> ScoreResult:
        scorer = self.scorer
        try:
            question = self._judge_text(question_text(input))
            answer = self._judge_text(answer_text(output))
        except InputError as exc:
            raise self._error(STEP_PREPROCESS, str(exc)) from exc
        if not question.strip():
            raise self._error(STEP_PREPROCESS, "the input has no question text to judge the "
                                               "output against")
        if not answer.strip():
            self.fields["preprocess_step_result"] = {"statements": [], "skipped": _SKIPPED_EMPTY}
            self.fields["analyze_step_result"] = {"results": []}
            return self._result(0.0, "The score is 0 because the output is empty, so nothing in "
                                     "it addresses the question (the judge was not called).")

        # 1. preprocess: statements of the output
        request = _prompts.statements_request(answer)
        reply = await self._ask(request)
        statements: list[str] = reply.data["statements"]
        self.fields["preprocess_prompt"] = reply.prompt
        self.fields["preprocess_step_result"] = {"statements": statements}

        # 2. analyze: a verdict per statement (one retry when the count is off)
        results: list[dict[str, str]] = []
        if statements:
            request = _prompts.verdicts_request(question, statements)
            reply = await self._ask(request)
            results = reply.data["results"]
            analyze: dict[str, Any] = {"results": results}
            if len(results) != len(statements):
                first_count = len(results)
                request = _prompts.verdicts_request(question, statements,
                                                    previous_count=first_count)
                reply = await self._ask(request)
                results = reply.data["results"]
                analyze = {"results": results}
                if len(results) != len(statements):
                    analyze["mismatch"] = {
                        "statements": len(statements), "results": len(results),
                        "first_attempt_results": first_count,
                        "note": "the judge gave a different number of results than statements "
                                "twice; the score uses the results received",
                    }
            for key, value in reply.notes.items():  # how the judge judged (never overrides)
                analyze.setdefault(key, value)
            self.fields["analyze_prompt"] = reply.prompt
            self.fields["analyze_step_result"] = analyze
        else:
            self.fields["analyze_step_result"] = {"results": []}

        # 3. score (code)
        try:
            score = relevancy_score(results, scorer.uncertainty_weight, scorer.scale)
        except Exception as exc:  # pragma: no cover - defensive: arithmetic on validated data
            raise self._error(STEP_SCORE, f"{type(exc).__name__}: {exc}") from exc
        if not results:
            return self._result(score, f"The score is {_prompts.format_score(score)} because the "
                                       f"judge found no statements in the output.")

        # 4. reason (judge explains the given score)
        request = _prompts.reason_request(question, answer, statements, results, score=score,
                                          scale=scorer.scale,
                                          uncertainty_weight=scorer.uncertainty_weight)
        reply = await self._ask(request, score=score)
        self.fields["generate_reason_prompt"] = reply.prompt
        return self._result(score, reply.data["reason"])


def create_answer_relevancy_scorer(*, model: str | Judge, uncertainty_weight: float = 0.3,
                                   scale: float = 1,
                                   options: Mapping[str, Any] | None = None,
                                   **judge_kwargs: Any) -> AnswerRelevancyScorer:
    """Factory named after the reference system's `createAnswerRelevancyScorer`.

    `options` may carry `uncertainty_weight`/`uncertaintyWeight` and `scale` (a partial set
    merges with the defaults).
    """
    merged = _merge_options(options, {"uncertainty_weight": uncertainty_weight, "scale": scale},
                            {"uncertaintyWeight": "uncertainty_weight"})
    return AnswerRelevancyScorer(model=model, **merged, **judge_kwargs)


def _merge_options(options: Mapping[str, Any] | None, explicit: dict[str, Any],
                   aliases: Mapping[str, str]) -> dict[str, Any]:
    """Defaults and keyword arguments, overridden by a (partial) reference-style options dict."""
    merged = dict(explicit)
    if options is None:
        return merged
    if not isinstance(options, Mapping):
        raise ConfigurationError(f"options must be a mapping, got {type(options).__name__}")
    for key, value in options.items():
        name = aliases.get(key, key)
        if name not in merged:
            known = ", ".join(sorted(set(merged) | set(aliases)))
            raise ConfigurationError(f"unknown option {key!r} (known: {known})")
        merged[name] = value
    return merged

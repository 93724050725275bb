"""The shared machinery of a multi-step LLM-judged scorer (answer relevancy, faithfulness, ...).

A judged scorer is a `JudgedScorer` subclass that fills in the step hooks; the base runs them in
order with one `JudgedRun` per call and one `ScorerInput` (the call's input, output, ground truth,
tool calls, context): `preprocess(run, call)` and `analyze(run, call, prepared)` ask the judge and
record their steps (either may return a finished ScoreResult to end the run early),
`score(analysis)` is code (a failure there fails the `score` step), and `reason(analysis, score)`
returns the reason or the JudgeRequest whose reply explains the given score. A subclass that
overrides `arun` instead (the way scorers were written before the hooks) is run through its
`arun`. The pieces:

- `JudgedScorer.__init__(model=..., scale=..., redact_judge_input=..., max_judge_input_chars=...,
  **judge_kwargs)` validates the options every judged scorer has and resolves the judge
  (`self.judge`; `self.model` is its name). Subclasses set `id`, `name`, `label` (score ->
  low-cardinality label) and validate their own options before or after calling it.
- `JudgedRun(scorer, run_id, reference)` is one run. Its methods:
  - `judge_text(text)`: the text as the judge may see it, redacted and capped (a cut sets
    `truncated`, which the result reports as `judge_input_truncated`). Pass every judged text
    through it *before* building a prompt, so the step prompts are exactly what was sent.
  - `await ask(request, score=None)`: ask the judge one step (a `JudgeRequest` with its JSON
    schema and validator; the judge asks for native JSON, falls back to the schema in the
    prompt, parses replies leniently and validates them). Usage is summed over the run and
    per step. A failed step raises `ScorerError` naming the step, carrying the partial result
    (and `score` once computed); a configuration or authentication error is raised as it is.
  - `await ask_list(build, key=..., count=..., of=...)`: a step whose reply is a list with one
    item per input item (statements, claims, context pieces), asked once more when the count
    is off; a persistent mismatch is returned as a note for the step result.
  - `judge_texts(texts)`: several texts (retrieved context) redacted and capped together.
  - `record(step, prompt=..., result=...)`: put a step's prompt and result on the run
    (`preprocess`, `analyze`, `reason`; the reason step has a prompt only).
  - `error(step, message)`: a `ScorerError` for a step that failed in the scorer's own code.
  - `result(score, reason)`: the final `ScoreResult` (label from the scorer's `label`).
- `reference_text(ground_truth)`: the ground truth as the judge's `reference` (the offline
  judge's background knowledge; never in LLM prompts).

Prompt helpers live in `_prompting` (importable by prompt modules and the offline judge without
a cycle): `Blocks(*tags)` builds `<tag>...</tag>` data blocks with look-alike tags inside the
judged text defused, and `Blocks.declaration()` is the system-prompt paragraph that declares
them data; `reference_round` (the reference's `roundToTwoDecimals`, float for float: use it
for a reference formula computed in floats), `round_score` (half-up of the decimal value),
`format_score`, `REASON_SCHEMA`/`validate_reason`, `string_list_schema`/`validate_string_list`,
`count_verdicts`. Option helpers (`merge_options` for reference-style camelCase `options`,
`check_fraction`) live in `_options`. Claims checked against context (faithfulness,
hallucination) share `_claims.ClaimsScorer`.

The offline judge answers a task only when a handler is registered for it
(`tracescore.scoring._offline.register_offline_task`); a scorer that cannot be approximated
offline registers none, and the offline judge then fails its first step with a clear error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any, ClassVar

from tracescore._exceptions import ConfigurationError, ScorerError
from tracescore.scoring._base import (
    STEP_ANALYZE,
    STEP_PREPROCESS,
    STEP_REASON,
    STEP_SCORE,
    JudgeUsage,
    Scorer,
    ScoreResult,
    ScorerInput,
    ToolCall,
    check_scale,
    new_run_id,
    overrides,
)
from tracescore.scoring._inputs import InputError, answer_text, question_text
from tracescore.scoring._judge_api import (
    Judge,
    JudgeAuthenticationError,
    JudgeReply,
    JudgeRequest,
    JudgeStepError,
)
from tracescore.scoring._judge_input import (
    DEFAULT_MAX_JUDGE_INPUT_CHARS,
    MIN_JUDGE_INPUT_CHARS,
    check_max_chars,
    prepare,
)
from tracescore.scoring._resolve import resolve_judge

SKIPPED_EMPTY = "empty output: the judge was not called"


def reference_text(ground_truth: Any) -> str | None:
    """The ground truth as text for the judge's `reference`, or None when it has no text.

    LLM judges never see it (it is not in their prompts, as in the reference system); the
    offline judge uses it as the world knowledge it lacks.
    """
    try:
        text = answer_text(ground_truth)
    except InputError:
        return None
    return text.strip() or None


# --- scorer and run --------------------------------------------------------------------------
class JudgedScorer(Scorer):
    """Base of the LLM-judged scorers: the judge and the options every one of them has.

    `model` is a litellm model string, "tracescore/offline", or a Judge object; other keyword
    arguments configure the LiteLLMJudge (api_base, api_key, timeout, max_retries, ...).
    What the judge is sent: the judged texts, each cut to `max_judge_input_chars` (the
    result's `judge_input_truncated` says so) and, unless `redact_judge_input=False`, redacted
    by the same rules as exported content. The step prompts on the result are exactly the
    prompts sent.

    A judged scorer of your own fills in the steps: `preprocess(run, call)` and
    `analyze(run, call, prepared)` (async; ask the judge with `await run.ask(request)`, put each
    step's prompt and result on the run with `run.record(step, prompt=..., result=...)`, and may
    return a finished `run.result(score, reason)` to stop early), `score(analysis)` (code) and
    `reason(analysis, score)` (the reason, or a JudgeRequest whose reply's `reason` it is).
    """

    uses_judge = True
    scale: float
    # the steps that ask the judge, once each per run (a list step asks once more when the
    # judge's count is off); `tracescore rescore --dry-run` counts the judge calls from them
    judge_steps: ClassVar[tuple[str, ...]] = (STEP_PREPROCESS, STEP_ANALYZE, STEP_REASON)

    def __init__(self, *, model: str | Judge, scale: float = 1, redact_judge_input: bool = True,
                 max_judge_input_chars: int = DEFAULT_MAX_JUDGE_INPUT_CHARS,
                 **judge_kwargs: Any) -> None:
        self.scale = check_scale(scale)
        if not isinstance(redact_judge_input, bool):
            raise ConfigurationError(
                f"redact_judge_input must be True or False, got {redact_judge_input!r}")
        self.redact_judge_input = redact_judge_input
        self.max_judge_input_chars = check_max_chars(max_judge_input_chars)
        self.judge: Judge = resolve_judge(model, judge_kwargs)
        self.check_judge(self.judge)

    def check_judge(self, judge: Judge) -> None:
        """Refuse a judge this scorer cannot work with (a ConfigurationError starting
        "model: "); by default every judge will do."""

    @property
    def model(self) -> str:
        """The judge's model name (as it appears in results and spans)."""
        return self.judge.model

    def label(self, score: float) -> str | None:
        """The low-cardinality label of a score (None: this scorer has no labels)."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, scale={self.scale!r})"

    # --- the steps: a subclass fills in these hooks ---------------------------------------
    def reference(self, call: ScorerInput) -> str | None:
        """What the judge may use as `JudgeRequest.reference` (default: the ground truth's
        text; LLM prompts never show it)."""
        return reference_text(call.ground_truth)

    async def preprocess(self, run: JudgedRun, call: ScorerInput) -> Any:
        """Step 1: read and prepare what is judged (may ask the judge). Return what `analyze`
        needs, or a finished ScoreResult to end the run early."""
        return None

    async def analyze(self, run: JudgedRun, call: ScorerInput, prepared: Any) -> Any:
        """Step 2: the judge's verdicts. Return what `score` and `reason` need, or a finished
        ScoreResult to end the run early."""
        raise NotImplementedError

    def score(self, analysis: Any) -> float:
        """Step 3 (code, no judge): the score of the analysis."""
        raise NotImplementedError

    def reason(self, analysis: Any, score: float) -> str | JudgeRequest:
        """Step 4: the reason, or the judge request that explains the given score (its reply's
        `reason`)."""
        raise NotImplementedError

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None, tool_calls: Sequence[ToolCall] = (),
                   context: Sequence[str] = ()) -> ScoreResult:
        """Score one input/output pair: the steps, in order."""
        return await self._steps(ScorerInput(
            input=input, output=output, ground_truth=ground_truth, run_id=run_id,
            tool_calls=tuple(tool_calls), context=tuple(context)))

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        if overrides(self, "arun", JudgedScorer):  # a subclass that scores in its own `arun`
            return await super().evaluate(call)
        return await self._steps(call)

    async def _steps(self, call: ScorerInput) -> ScoreResult:
        run = JudgedRun(self, call.run_id or new_run_id(), self.reference(call))
        prepared = await self.preprocess(run, call)
        if isinstance(prepared, ScoreResult):
            return prepared
        analysis = await self.analyze(run, call, prepared)
        if isinstance(analysis, ScoreResult):
            return analysis
        try:
            score = self.score(analysis)
        except ScorerError:
            raise
        except Exception as exc:  # defensive: arithmetic on validated data
            raise run.error(STEP_SCORE, f"{type(exc).__name__}: {exc}") from exc
        reason = self.reason(analysis, score)
        if isinstance(reason, JudgeRequest):
            reply = await run.ask(reason, score=score)
            run.record(STEP_REASON, prompt=reply.prompt)
            reason = reply.data["reason"]
        return run.result(score, reason)


class JudgedRun:
    """One judged scorer run: asks the judge step by step and keeps what a failure must carry."""

    def __init__(self, scorer: JudgedScorer, run_id: str, reference: str | None = None) -> None:
        self.scorer = scorer
        self.run_id = run_id
        self.reference = reference
        self.usage = JudgeUsage(model=scorer.judge.model)
        self.step_usage: dict[str, JudgeUsage] = {}
        self.truncated = False  # a judged text was cut for the judge
        self.fields: dict[str, Any] = {
            "preprocess_prompt": None, "preprocess_step_result": None,
            "analyze_prompt": None, "analyze_step_result": None,
            "generate_reason_prompt": None,
        }

    def record(self, step: str, *, prompt: str | None = None, result: Any = None) -> None:
        """Put a step's prompt and/or result on the run (`preprocess`, `analyze`, `reason`)."""
        if step == "reason":
            if prompt is not None:
                self.fields["generate_reason_prompt"] = prompt
            return
        if prompt is not None:
            self.fields[f"{step}_prompt"] = prompt
        if result is not None:
            self.fields[f"{step}_step_result"] = result

    def error(self, step: str, message: str, *, raw_reply: str | None = None,
              score: float | None = None) -> ScorerError:
        """A ScorerError for `step`, carrying the steps completed so far."""
        partial = {"run_id": self.run_id, **self.fields, "usage": asdict(self.usage),
                   "step_usage": {k: asdict(v) for k, v in self.step_usage.items()},
                   "judge_input_truncated": self.truncated}
        if score is not None:
            partial["score"] = score
        return ScorerError(message, scorer_id=self.scorer.id, step=step, partial=partial,
                           raw_reply=raw_reply)

    async def ask(self, request: JudgeRequest, score: float | None = None) -> JudgeReply:
        """The judge's validated reply to one step (its usage added to the run's)."""
        if self.reference is not None:
            request = dataclasses.replace(request, reference=self.reference)
        try:
            reply = await self.scorer.judge.judge(request)
        except (ConfigurationError, JudgeAuthenticationError):
            raise  # not this run's step failing: every run would; the caller must fix the judge
        except JudgeStepError as exc:
            self._spend(request.step, exc.usage)
            raise self.error(request.step, str(exc), raw_reply=exc.raw_reply, score=score) from exc
        except Exception as exc:  # a third-party Judge failing its own way
            raise self.error(request.step, f"judge {self.scorer.judge.model!r} failed: "
                             f"{type(exc).__name__}: {exc}", score=score) from exc
        self._spend(request.step, reply.usage)
        return reply

    async def ask_list(self, build: Callable[[int | None], JudgeRequest], *, key: str,
                       count: int, of: str) -> tuple[JudgeReply, list[Any], dict[str, Any]]:
        """Ask a step whose reply is a list `key` with one item per `of` (there are `count`).

        `build(previous_count)` makes the request; when the first reply has the wrong number of
        items the step is asked once more, telling the judge the count it gave. Returns the
        last reply, its items, and a `{"mismatch": ...}` note for the step result when the
        count was still off (else an empty dict); the score then uses the items received.
        """
        reply = await self.ask(build(None))
        items: list[Any] = reply.data[key]
        if len(items) == count:
            return reply, items, {}
        first_count = len(items)
        reply = await self.ask(build(first_count))
        items = reply.data[key]
        if len(items) == count:
            return reply, items, {}
        return reply, items, {"mismatch": {
            of: count, key: len(items), f"first_attempt_{key}": first_count,
            "note": f"the judge gave a different number of {key} than {of} twice; the score "
                    f"uses the {key} received",
        }}

    def _spend(self, step: str, usage: JudgeUsage) -> None:
        self.usage += usage
        previous = self.step_usage.get(step)
        self.step_usage[step] = usage if previous is None else previous + usage

    def judge_text(self, text: str) -> str:
        """`text` redacted and capped as the judge gets it (noting a cut)."""
        prepared = prepare(text, redact=self.scorer.redact_judge_input,
                           max_chars=self.scorer.max_judge_input_chars)
        self.truncated = self.truncated or prepared.cut
        return prepared.text

    def output_text(self, output: Any) -> str:
        """The output's text as the judge gets it; an output without text fails `preprocess`."""
        try:
            return self.judge_text(answer_text(output))
        except InputError as exc:
            raise self.error(STEP_PREPROCESS, str(exc)) from exc

    def question_text(self, input: Any) -> str:
        """The input's question as the judge gets it, "" when the input has none."""
        try:
            return self.judge_text(question_text(input))
        except InputError:
            return ""

    def skip_empty(self, steps: Mapping[str, Mapping[str, Any]], reason: str) -> ScoreResult:
        """Score 0 for an empty output without calling the judge: each of `steps` records its
        (empty) result, the first one noting the skip."""
        for index, (step, result) in enumerate(steps.items()):
            self.record(step, result={**result, "skipped": SKIPPED_EMPTY} if index == 0
                        else dict(result))
        return self.result(0.0, reason)

    def judge_texts(self, texts: Sequence[str]) -> tuple[list[str], int]:
        """Several texts (retrieved context) as the judge gets them, capped together.

        The texts share one `max_judge_input_chars` budget in order: a text that does not fit
        is cut, and texts past the budget are left out. Returns the texts sent and how many
        were left out (either sets `truncated`).
        """
        budget = self.scorer.max_judge_input_chars
        sent: list[str] = []
        for text in texts:
            if budget < MIN_JUDGE_INPUT_CHARS:
                break
            prepared = prepare(text, redact=self.scorer.redact_judge_input, max_chars=budget)
            self.truncated = self.truncated or prepared.cut
            sent.append(prepared.text)
            budget -= len(prepared.text)
        left_out = len(texts) - len(sent)
        self.truncated = self.truncated or left_out > 0
        return sent, left_out

    def result(self, score: float, reason: str) -> ScoreResult:
        scorer = self.scorer
        return ScoreResult(run_id=self.run_id, scorer_id=scorer.id, scorer_name=scorer.name,
                           score=score, label=scorer.label(score), reason=reason,
                           usage=self.usage, step_usage=dict(self.step_usage),
                           judge_input_truncated=self.truncated, **self.fields)

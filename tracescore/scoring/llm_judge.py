"""The LLM judge scorer: an LLM judges a response against a criterion of the user's own.

One judge call (the analyze step) gives a reason and either a verdict (mode "pass_fail":
score 1 or 0) or a number on the criterion's scale (mode "score": normalised to 0..1); the
score step is code; the reason is the judge's own.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from tracescore._exceptions import ConfigurationError
from tracescore.scoring import _rubric_prompts as prompts
from tracescore.scoring._base import ScorerInput, ToolCall
from tracescore.scoring._inputs import InputError, answer_text, question_text
from tracescore.scoring._judge_api import Judge
from tracescore.scoring._judged import JudgedRun, JudgedScorer
from tracescore.scoring._names import ALIASES
from tracescore.scoring._offline import OfflineJudge
from tracescore.scoring._prompting import round_score
from tracescore.scoring._scoped import (
    SCOPES,
    ScopedScorer,
    conversation_turns,
    step_json,
    turns_json,
)

Mode = Literal["pass_fail", "score"]
MODES: tuple[str, ...] = ("pass_fail", "score")
INCLUDABLE: tuple[str, ...] = ("input", "ground_truth", "context", "tool_calls")
DEFAULT_SCORE_RANGE = (0.0, 1.0)
DEFAULT_THRESHOLD = 0.5
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")


def check_name(name: object) -> str:
    """Validate a scorer name: it becomes the scorer id, the evaluation name and the Phoenix
    annotation name, so 1-64 characters of letters, digits, `_`, `-`, `.`, starting with a
    letter, and not the name of a built-in scorer."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigurationError(
            f"name must be 1-64 letters, digits, '_', '-' or '.', starting with a letter "
            f"(it becomes the scorer id), got {name!r}")
    if name.lower().replace("_", "-") in ALIASES:
        raise ConfigurationError(f"name {name!r} is the name of a built-in scorer; choose another")
    return name


def _check_include(include: object) -> tuple[str, ...]:
    items = (include,) if isinstance(include, str) else include
    if not isinstance(items, (list, tuple, set, frozenset)):
        raise ConfigurationError(f"include must be a list of {', '.join(INCLUDABLE)}, "
                                 f"got {include!r}")
    unknown = [i for i in items if i not in INCLUDABLE]
    if unknown:
        raise ConfigurationError(f"include: unknown item {unknown[0]!r}; choose from "
                                 f"{', '.join(INCLUDABLE)}")
    return tuple(i for i in INCLUDABLE if i in items)


def _check_range(score_range: object) -> tuple[float, float]:
    pair = score_range if isinstance(score_range, (list, tuple)) else ()
    if (len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, (int, float))
                              or not math.isfinite(v) for v in pair) or not pair[0] < pair[1]):
        raise ConfigurationError(f"score_range must be two numbers [low, high] with low < high, "
                                 f"got {score_range!r}")
    return float(pair[0]), float(pair[1])


def _check_threshold(threshold: object) -> float:
    if (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
            or not 0 <= threshold <= 1):
        raise ConfigurationError(f"threshold must be a number between 0 and 1 (of the normalised "
                                 f"score), got {threshold!r}")
    return float(threshold)


class LLMJudgeScorer(ScopedScorer, JudgedScorer):
    """An LLM judges each response against `instructions` (see `create_llm_judge_scorer`)."""

    id = "llm-judge"  # a scorer's own id is the `name` it is built with
    judge_steps = ("analyze",)  # the steps that ask the judge
    uses_judge = True
    named_by_user = True
    factory = "create_llm_judge_scorer"

    def __init__(self, *, name: str, instructions: str, model: str | Judge,
                 mode: Mode = "pass_fail", score_range: Sequence[float] | None = None,
                 threshold: float | None = None, include: Sequence[str] = ("input",),
                 scope: str = "call", **options: Any) -> None:
        self.id = self.name = check_name(name)
        if scope not in SCOPES:
            raise ConfigurationError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
        self.scope = scope
        if not isinstance(instructions, str) or not instructions.strip():
            raise ConfigurationError(f"instructions must be a non-empty string (the criterion "
                                     f"the judge applies), got {instructions!r}")
        self.instructions = instructions
        if mode not in MODES:
            raise ConfigurationError(f"mode must be 'pass_fail' or 'score', got {mode!r}")
        self.mode: Mode = mode
        if mode == "pass_fail" and (score_range is not None or threshold is not None):
            given = "score_range" if score_range is not None else "threshold"
            raise ConfigurationError(f"{given} applies to mode 'score' only (mode is "
                                     f"'pass_fail': the score is 1 or 0)")
        self.score_range = _check_range(DEFAULT_SCORE_RANGE if score_range is None
                                        else score_range)
        self.threshold = _check_threshold(DEFAULT_THRESHOLD if threshold is None else threshold)
        self.include = _check_include(include)
        if "scale" in options:  # JudgedScorer's option, not this scorer's
            raise ConfigurationError("scale: the LLM judge's score is always 0..1; give the "
                                     "judge's own scale as score_range (mode 'score')")
        super().__init__(model=model, **options)

    def check_judge(self, judge: Judge) -> None:
        if isinstance(judge, OfflineJudge):
            raise ConfigurationError(
                f"model: the offline judge ({judge.model}) cannot judge a criterion of "
                f"your own (it has no language model); give a litellm model string, e.g. "
                f"model='openai/gpt-4o-mini' (or $TRACESCORE_JUDGE_MODEL), or a Judge object")

    def label(self, score: float) -> str:
        return prompts.PASS if score >= self.threshold else prompts.FAIL

    def __repr__(self) -> str:
        scope = f", scope={self.scope!r}" if self.scope != "call" else ""
        return (f"LLMJudgeScorer(name={self.name!r}, model={self.model!r}, mode={self.mode!r}, "
                f"include={list(self.include)!r}{scope})")

    def reference(self, call: ScorerInput) -> str | None:
        return None  # the criterion is the user's: no reference knowledge for the judge

    async def analyze(self, run: JudgedRun, call: ScorerInput, prepared: None) -> dict[str, Any]:
        """One judge call: a reason and a verdict (or a number on the criterion's scale)."""
        blocks = self._blocks(run, call)
        if self.mode == "pass_fail":
            request = prompts.verdict_request(self.instructions, blocks)
        else:
            low, high = self.score_range
            request = prompts.score_request(self.instructions, blocks, low=low, high=high)
        reply = await run.ask(request)
        analyze = {**reply.data}
        if self.mode == "score":
            analyze["score_range"] = list(self.score_range)
        for key, value in reply.notes.items():
            analyze.setdefault(key, value)
        run.record("analyze", prompt=reply.prompt, result=analyze)
        data: dict[str, Any] = reply.data
        return data

    def score(self, analysis: dict[str, Any]) -> float:
        """1 or 0 for a verdict; a number normalised from the criterion's scale to 0..1."""
        data = analysis
        if self.mode == "pass_fail":
            return 1.0 if data["verdict"] == prompts.PASS else 0.0
        low, high = self.score_range
        return round_score((data["score"] - low) / (high - low))

    def reason(self, analysis: dict[str, Any], score: float) -> str:
        reason: str = analysis["reason"]  # the judge's own, written before its verdict
        return reason

    def _blocks(self, run: JudgedRun, call: ScorerInput) -> dict[str, str | None]:
        """Tag -> the judged text (redacted and capped), None for an included but absent part."""
        input, output, ground_truth = call.input, call.output, call.ground_truth
        tool_calls, context = call.tool_calls, call.context
        blocks: dict[str, str | None] = {}
        if "input" in self.include:
            blocks["input"] = run.judge_text(_text(input, question_text))
        if "ground_truth" in self.include:
            truth = None if ground_truth is None else _text(ground_truth, answer_text)
            blocks["ground_truth"] = run.judge_text(truth) if truth else None
        if "context" in self.include:
            texts = [str(c) for c in context]
            blocks["context"] = run.judge_text(_json(texts)) if texts else None
        if "tool_calls" in self.include:
            calls = [_call(c) for c in tool_calls]
            blocks["tool_calls"] = run.judge_text(_json(calls)) if calls else None
        if self.scope == "conversation":  # the turns hold the input and the output
            blocks.pop("input", None)
            blocks["conversation"] = run.judge_text(_json(turns_json(conversation_turns(call))))
            return blocks
        if self.scope == "run":
            taken = call.trajectory  # read from a trace: everything it did, else its steps
            steps = [step_json(s) for s in (taken.timeline or taken.steps)]
            blocks["run"] = run.judge_text(_json(steps)) if steps else None
        blocks["output"] = run.judge_text(_text(output, answer_text))
        return blocks


def _text(value: Any, read: Callable[[Any], str]) -> str:
    """The text of a message-like value (see `_inputs`), else the value as JSON."""
    try:
        return read(value)
    except InputError:
        from tracescore._content import to_json_safe

        return _json(to_json_safe(value))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1)


def _call(call: ToolCall) -> dict[str, Any]:
    """A tool call as the judge sees it (JSON-safe; no call id, no empty fields)."""
    from tracescore._content import to_json_safe

    shown: dict[str, Any] = {"name": call.name, "arguments": to_json_safe(call.arguments)}
    if call.error is not None:
        shown["error"] = call.error
    else:
        shown["result"] = to_json_safe(call.result)
    return shown


def create_llm_judge_scorer(*, name: str, instructions: str, model: str | Judge,
                            mode: Mode = "pass_fail", score_range: Sequence[float] | None = None,
                            threshold: float | None = None, include: Sequence[str] = ("input",),
                            scope: str = "call", **options: Any) -> LLMJudgeScorer:
    """A scorer called `name` that has an LLM judge each response against `instructions`.

    mode "pass_fail" (default): the judge says pass or fail; score 1 or 0, label pass/fail.
    mode "score": the judge gives a number in `score_range` (default [0, 1], e.g. [1, 5]);
    the score is that number normalised to 0..1 ((n - low) / (high - low), rounded half-up to
    2 decimals), labelled pass when it reaches `threshold` (default 0.5), else fail.
    `include` says what the judge sees besides the output: "input" (default), "ground_truth",
    "context" (the call's retrieved texts), "tool_calls" (the call's tool calls, in order).
    `scope` is what the judge evaluates: "call" (default: the response), "run" (the whole run's
    steps in order, and its response) or "conversation" (every turn: user message and answer).
    `model` is a litellm model string or a Judge; the offline judge cannot judge an arbitrary
    criterion and is refused. Other options: redact_judge_input, max_judge_input_chars, and
    the LiteLLMJudge's (api_base, api_key, timeout, max_retries, ...).
    """
    return LLMJudgeScorer(name=name, instructions=instructions, model=model, mode=mode,
                          score_range=score_range, threshold=threshold, include=include,
                          scope=scope, **options)

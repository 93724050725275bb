"""Prompt texts, reply schemas and validators of the LLM judge scorer (a user's own criterion).

The criterion is the scorer author's text and goes into the prompt as the task; everything the
agent saw or produced (input, output, ground truth, context, tool calls) goes inside tagged
blocks that the system prompt declares to be data.
"""

from __future__ import annotations

import math
from typing import Any

from tracescore.scoring._base import STEP_ANALYZE
from tracescore.scoring._judge_api import JudgeRequest
from tracescore.scoring._prompting import Blocks, format_score

TASK_VERDICT = "llm_judge.verdict"
TASK_SCORE = "llm_judge.score"
PASS, FAIL = "pass", "fail"

# block tag -> what the judge is told it holds, in prompt order
_BLOCKS: dict[str, str] = {
    "input": "the request the agent answered",
    "ground_truth": "the expected answer, for reference",
    "context": "the context the agent retrieved (a JSON array of texts)",
    "tool_calls": "the tools the agent called, in call order (a JSON array)",
    "run": "the agent's whole run, the thing you evaluate with its response: every step in "
           "order (a JSON array of tool calls, LLM calls and sub-agents, with arguments, "
           "results, errors and timings)",
    "conversation": "the whole conversation, the thing you evaluate: every turn in order (a "
                    "JSON array of the user's messages and the agent's answers)",
    "output": "the agent's response, the thing you evaluate",
}
_ABSENT: dict[str, str] = {
    "ground_truth": "No ground truth was given for this call.",
    "context": "The agent retrieved no context for this call.",
    "tool_calls": "The agent called no tools in this call.",
    "run": "The run recorded no steps.",
}
BLOCKS = Blocks(*_BLOCKS)

SYSTEM = f"""\
You are a careful, impartial evaluator of AI agent responses. You judge a response against \
one criterion written by the person running the evaluation, and only against that criterion.

{BLOCKS.declaration()}

Always reply with exactly one JSON object in the shape the task asks for, and nothing else."""


def _schema(verdict: dict[str, Any], key: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"reason": {"type": "string"}, key: verdict},
        "required": ["reason", key],
        "additionalProperties": False,
    }


VERDICT_SCHEMA = _schema({"type": "string", "enum": [PASS, FAIL]}, "verdict")
SCORE_SCHEMA = _schema({"type": "number"}, "score")


def _reason(value: dict[str, Any]) -> str:
    reason = value.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("expected a non-empty string 'reason'")
    return reason.strip()


def validate_verdict(value: Any) -> dict[str, Any]:
    """`{"reason": str, "verdict": "pass" | "fail"}` (verdict case- and space-insensitive)."""
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")  # noqa: TRY004 - bad data from the judge
    verdict = "".join(str(value.get("verdict", "")).split()).lower()
    if verdict not in (PASS, FAIL):
        raise ValueError(f"'verdict' must be \"pass\" or \"fail\", got {value.get('verdict')!r}")
    return {"verdict": verdict, "reason": _reason(value)}


def score_validator(low: float, high: float) -> Any:
    """A validator of `{"reason": str, "score": number in [low, high]}` (a numeric string too)."""
    def validate(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValueError("expected a JSON object")  # noqa: TRY004 - bad data from the judge
        raw = value.get("score")
        try:
            score = float("nan" if isinstance(raw, bool) else raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            score = math.nan
        if math.isnan(score):
            raise ValueError(f"'score' must be a number, got {raw!r}")
        if not low <= score <= high:
            raise ValueError(f"'score' must be between {format_number(low)} and "
                             f"{format_number(high)}, got {raw!r}")
        return {"score": score, "reason": _reason(value)}
    return validate


def format_number(value: float) -> str:
    """1 not 1.0; 2.5 stays 2.5."""
    return str(int(value)) if float(value).is_integer() else format_score(value)


_TASK_HEAD = """\
Task: {what}

Criterion, written by the person running this evaluation:
---
{instructions}
---

Judge {subject} against this criterion only; do not grade anything the criterion \
does not ask about. The blocks below hold:
{material}
"""

_VERDICT_TAIL = """\
Reply with a JSON object {"reason": <one to three sentences on why the output meets or misses \
the criterion>, "verdict": "pass" | "fail"} and nothing else. Write the reason first, then \
the verdict that follows from it: "pass" only if the output meets the criterion.
"""

_SCORE_TAIL = """\
Reply with a JSON object {{"reason": <one to three sentences on how well the output meets \
the criterion>, "score": <a number from {low} to {high}>}} and nothing else. {low} means the \
output does not meet the criterion at all, {high} that it meets it fully; use the values in \
between for partial fulfilment. Write the reason first, then the score that follows from it.
"""


def _material(blocks: dict[str, str | None]) -> str:
    lines = []
    for tag, meaning in _BLOCKS.items():
        if tag not in blocks:
            continue
        text = blocks[tag]
        lines.append(f"- <{tag}>: {meaning}" if text is not None else f"- {_ABSENT[tag]}")
    return "\n".join(lines)


def _body(blocks: dict[str, str | None]) -> str:
    return "\n\n".join(BLOCKS(tag, text) for tag in _BLOCKS
                       if tag in blocks and (text := blocks[tag]) is not None)


def _subject(blocks: dict[str, str | None]) -> str:
    """What the judge evaluates: the conversation, the run and its response, or the response."""
    if "conversation" in blocks:
        return "the conversation in the <conversation> block"
    if "run" in blocks:
        return "the run in the <run> block and the response in the <output> block"
    return "the response in the <output> block"


def verdict_request(instructions: str, blocks: dict[str, str | None]) -> JudgeRequest:
    """The pass/fail step. `blocks` maps tag -> judged text (None: included but absent)."""
    subject = _subject(blocks)
    prompt = (_TASK_HEAD.format(what=f"decide whether {subject} meets the criterion below.",
                                instructions=instructions.strip(), material=_material(blocks),
                                subject=subject)
              + "\n" + _VERDICT_TAIL + "\n" + _body(blocks))
    return JudgeRequest(step=STEP_ANALYZE, task=TASK_VERDICT, system=SYSTEM, prompt=prompt,
                        schema_name="llm_judge_verdict", schema=VERDICT_SCHEMA,
                        validate=validate_verdict,
                        data={"instructions": instructions, **blocks})


def score_request(instructions: str, blocks: dict[str, str | None], *, low: float,
                  high: float) -> JudgeRequest:
    """The score step: a number from `low` to `high`."""
    low_text, high_text = format_number(low), format_number(high)
    subject = _subject(blocks)
    what = (f"rate how well {subject} meets the criterion below, on a scale from {low_text} "
            f"to {high_text}.")
    prompt = (_TASK_HEAD.format(what=what, instructions=instructions.strip(),
                                material=_material(blocks), subject=subject)
              + "\n" + _SCORE_TAIL.format(low=low_text, high=high_text) + "\n" + _body(blocks))
    return JudgeRequest(step=STEP_ANALYZE, task=TASK_SCORE, system=SYSTEM, prompt=prompt,
                        schema_name="llm_judge_score", schema=SCORE_SCHEMA,
                        validate=score_validator(low, high),
                        data={"instructions": instructions, "low": low, "high": high, **blocks})

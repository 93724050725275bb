"""Prompt texts and reply schemas of the answer-relevancy judge steps (our own wording).

The judged texts go inside tagged blocks that the system prompt declares to be data, so
instructions written inside them are evaluated, not obeyed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tracescore.scoring._base import STEP_ANALYZE, STEP_PREPROCESS, STEP_REASON
from tracescore.scoring._judge_api import JudgeRequest
from tracescore.scoring._prompting import (
    REASON_SCHEMA,
    Blocks,
    format_score,
    recount_note,
    validate_reason,
    validate_verdict_list,
    verdict_list_schema,
)

TASK_STATEMENTS = "answer_relevancy.statements"
TASK_VERDICTS = "answer_relevancy.verdicts"
TASK_REASON = "answer_relevancy.reason"

_block = Blocks("question", "output", "statements", "verdicts")

SYSTEM = f"""\
You are a balanced evaluator of answer relevancy. You decide how well an answer addresses \
the question that was asked; you do not grade style, and you do not fact-check beyond what \
the rubric says.

{_block.declaration()}

Always reply with exactly one JSON object in the shape the task asks for, and nothing else."""


# --- preprocess: statements ------------------------------------------------------------------
STATEMENTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"statements": {"type": "array", "items": {"type": "string"}}},
    "required": ["statements"],
    "additionalProperties": False,
}

_STATEMENTS_TASK = """\
Task: break the answer in the <output> block into its statements.

Rules:
- A statement is one self-contained piece of information or claim, kept close to the \
original wording. Do not add, infer, correct or summarise anything.
- Do not over-split: a clause that only makes sense together with its neighbour stays with it.
- A one-word or short-phrase answer is a single statement.
- An error message or a refusal is a single statement.
- If the output is empty or only whitespace, return an empty list.

Examples:
- Output "Mount Everest. It is 8,849 metres tall." -> {"statements": ["Mount Everest.", \
"It is 8,849 metres tall."]}
- Output "Blue" -> {"statements": ["Blue"]}
- Output "Error 503: the service is unavailable, please retry later." -> {"statements": \
["Error 503: the service is unavailable, please retry later."]}

Reply with a JSON object {"statements": [<string>, ...]} and nothing else.
"""


def validate_statements(value: Any) -> dict[str, Any]:
    statements = value.get("statements") if isinstance(value, dict) else None
    if not isinstance(statements, list):
        raise ValueError("expected an object with a 'statements' list")  # noqa: TRY004
    if not all(isinstance(s, str) for s in statements):
        raise ValueError("every statement must be a string")
    return {"statements": list(statements)}  # a blank one is judged and counted, as there


def statements_request(output: str) -> JudgeRequest:
    prompt = f"{_STATEMENTS_TASK}\n{_block('output', output)}"
    return JudgeRequest(step=STEP_PREPROCESS, task=TASK_STATEMENTS, system=SYSTEM,
                        prompt=prompt, schema_name="answer_relevancy_statements",
                        schema=STATEMENTS_SCHEMA, validate=validate_statements,
                        data={"output": output})


# --- analyze: a verdict per statement --------------------------------------------------------
VERDICTS_SCHEMA = verdict_list_schema("results", "result", ("yes", "unsure", "no"))

_VERDICTS_TASK = """\
Task: for each statement in the <statements> block (a JSON array), decide how relevant it is \
to the question in the <question> block.

Verdicts:
- "yes": the statement directly answers or addresses the question.
- "unsure": the statement is partly relevant: it gives the right type of information about a \
related entity, adds context that helps with the question, or gives an on-topic answer that \
names something other than what was asked about.
- "no": the statement is unrelated to the question, or empty.
Judge relevance to the question; do not mark a statement down for style or length.

Examples, for the question "Which river flows through Vienna?":
- "The Danube flows through Vienna." -> yes (it answers the question)
- "The Rhine flows through Basel." -> unsure (right kind of answer, but about another city)
- "Vienna is famous for its coffee houses." -> no (same city, but not about rivers)

Reply with a JSON object {{"results": [{{"result": "yes" | "unsure" | "no", "reason": \
<one short sentence>}}, ...]}} and nothing else. Give exactly {count} result{plural}, one per \
statement, in the order of the statements.
"""


validate_verdicts = validate_verdict_list("results", "result")


def verdicts_request(question: str, statements: Sequence[str], *,
                     previous_count: int | None = None) -> JudgeRequest:
    count = len(statements)
    prompt = _VERDICTS_TASK.format(count=count, plural="" if count == 1 else "s")
    prompt += recount_note(previous_count, "results", count, "statements")
    array = json.dumps(list(statements), ensure_ascii=False, indent=1)
    prompt += f"\n{_block('question', question)}\n\n{_block('statements', array)}"
    return JudgeRequest(step=STEP_ANALYZE, task=TASK_VERDICTS, system=SYSTEM, prompt=prompt,
                        schema_name="answer_relevancy_verdicts", schema=VERDICTS_SCHEMA,
                        validate=validate_verdicts,
                        data={"question": question, "statements": list(statements)})


# --- reason ----------------------------------------------------------------------------------
_REASON_TASK = """\
Task: explain a relevancy score that has already been computed. Do not recompute or change it.

The score is {score} on a scale from 0 to {scale}. It was computed from the verdicts in the \
<verdicts> block: each "yes" counts 1, each "unsure" counts {weight}, each "no" counts 0; the \
sum is divided by the number of verdicts and multiplied by {scale}.

Write one or two plain sentences that start exactly with "The score is {score} because" and \
say what in the output made the score what it is: what addressed the question, and what was \
only partly relevant or off-topic.

Reply with a JSON object {{"reason": <string>}} and nothing else.
"""


def reason_request(question: str, output: str, statements: Sequence[str],
                   results: Sequence[dict[str, str]], *, score: float, scale: float,
                   uncertainty_weight: float) -> JudgeRequest:
    shown = format_score(score)
    prompt = _REASON_TASK.format(score=shown, scale=format_score(scale),
                                 weight=format_score(uncertainty_weight))
    verdicts = [
        {"statement": statements[i] if i < len(statements) else None, **result}
        for i, result in enumerate(results)
    ]
    prompt += (f"\n{_block('question', question)}\n\n{_block('output', output)}\n\n"
               f"{_block('verdicts', json.dumps(verdicts, ensure_ascii=False, indent=1))}")
    return JudgeRequest(step=STEP_REASON, task=TASK_REASON, system=SYSTEM, prompt=prompt,
                        schema_name="answer_relevancy_reason", schema=REASON_SCHEMA,
                        validate=validate_reason,
                        data={"question": question, "output": output, "score": score,
                              "scale": scale, "statements": list(statements),
                              "results": list(results)})

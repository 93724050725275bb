"""Tool calls that deliver the agent's answer rather than use a tool: the answer channel.

Some frameworks end an agent call with a tool call that hands the answer over: smolagents'
`final_answer`, pydantic-ai's output functions (`final_result`), any "submit/respond" tool an
agent is given. Such a call brought nothing in from outside; its argument (and its result) is
the answer itself, so judging the answer against it would judge the answer against itself. The
rule: a tool call is the answer channel when

- its argument is the agent's answer: the arguments (call wrappers removed, `_unwrap`), or
  their only value, equal the answer (text compared with whitespace collapsed, JSON compared
  decoded); or
- its framework marks it as the call's output step (pydantic-ai's spans of an output function,
  `logfire.msg` "running output function: ...").

Such a call gives no context, and is left out of the tool calls and of a run's steps (the
trajectory: the same agent built without such a tool takes the same steps); it stays in the
run's timeline, which records everything the run did.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tracescore.online.intake._messages import decoded
from tracescore.online.intake._unwrap import call_arguments

__all__ = ["OUTPUT_STEP_MARK", "delivers"]

_JSON_STARTS = "{[\""  # JSON text decoded: objects, arrays and string literals

# how pydantic-ai's instrumentation marks the span of an output function (`logfire.msg`)
OUTPUT_STEP_MARK = "running output function"


def delivers(arguments: object, answer: object) -> bool:
    """Whether a tool call with these recorded `arguments` hands over `answer` (the agent call's
    normalised output): the arguments, or their only value, are the answer."""
    wanted = _comparable(answer)
    if wanted is None:
        return False
    given = call_arguments(decoded(arguments, _JSON_STARTS))
    candidates: list[Any] = [given]
    if isinstance(given, Mapping):
        values = [v for v in given.values() if v is not None]
        if len(values) == 1:
            candidates.append(values[0])
    elif isinstance(given, (list, tuple)) and len(given) == 1:
        candidates.append(given[0])
    return any(_comparable(c) == wanted for c in candidates)


def _comparable(value: object) -> str | None:
    """Text with whitespace collapsed; data (decoded from JSON) as canonical JSON; None for
    nothing to compare (no answer, an empty text, a number or flag alone)."""
    value = decoded(value, _JSON_STARTS)
    if isinstance(value, str):
        text = " ".join(value.split())
        return text or None
    if isinstance(value, (Mapping, list, tuple)) and value:
        try:
            return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            return None
    return None

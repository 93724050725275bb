"""Field checks for judge replies that refuse a wrong shape but never change what is counted
(blank strings stay, verdicts stay as written), plus the small pieces the scorers ported from
the reference's library share: its verdict test, score labels and the reason request."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from tracescore._env import JUDGE_MODEL
from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import STEP_REASON
from tracescore.scoring._jstext import JS_WHITESPACE
from tracescore.scoring._judge_api import OFFLINE_MODEL, JudgeRequest
from tracescore.scoring._prompting import REASON_SCHEMA, Blocks, validate_reason


def is_yes(verdict: object) -> bool:
    """The reference's `verdict.toLowerCase().trim() === "yes"`."""
    return isinstance(verdict, str) and verdict.lower().strip(JS_WHITESPACE) == "yes"


def band(score: float, scale: float, high: str, middle: str, low: str) -> str:
    """`high` from 0.7 of the scale, `middle` from 0.3, else `low`."""
    fraction = score / scale
    return high if fraction >= 0.7 else middle if fraction >= 0.3 else low


def field(item: Mapping[str, Any], key: str, kind: str, where: str) -> Any:
    """`item[key]` when it is of `kind` ("str", "bool", "number", "fraction", "strings",
    "list", "object"); a ValueError naming `where` otherwise. Numbers must be finite;
    fractions lie in 0..1; "strings" is a list of strings, kept as given."""
    value = item.get(key) if isinstance(item, Mapping) else None
    ok = {
        "str": isinstance(value, str),
        "bool": isinstance(value, bool),
        "number": _finite(value),
        "fraction": _finite(value) and 0 <= value <= 1,
        "strings": isinstance(value, list) and all(isinstance(s, str) for s in value),
        "list": isinstance(value, list),
        "object": isinstance(value, dict),
    }[kind]
    if not ok:
        what = {"fraction": "a number from 0 to 1", "strings": "a list of strings",
                "number": "a finite number", "bool": "true or false", "str": "a string",
                "list": "a list", "object": "an object"}[kind]
        raise ValueError(f"{where}.{key} must be {what}, got {value!r}")
    return value


def text(item: Mapping[str, Any], key: str) -> str:
    """An explanatory text field: kept when it is a string, "" when absent, else its text."""
    value = item.get(key, "")
    return value if isinstance(value, str) else str(value)


def _finite(value: object) -> TypeGuard[float]:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def items(value: Any, key: str) -> list[Any]:
    """The list `value[key]` of a reply object (a ValueError when it is not one)."""
    found = value.get(key) if isinstance(value, dict) else None
    if not isinstance(found, list):
        raise ValueError(f"expected an object with a {key!r} list")  # noqa: TRY004
    return found


def reason_request(*, task: str, system: str, blocks: Blocks, explain: str,
                   shown: Sequence[tuple[str, str]], data: dict[str, Any]) -> JudgeRequest:
    """The reason step: `explain` (the task, which says the score and must not be recomputed)
    and the `shown` (tag, text) blocks; the reply is `{"reason": str}`."""
    prompt = (f"Task: explain a score that has already been computed. Do not recompute or "
              f"change it.\n\n{explain}\n\nReply with a JSON object {{\"reason\": <string>}} "
              f"and nothing else.")
    for tag, body in shown:
        prompt += f"\n\n{blocks(tag, body)}"
    return JudgeRequest(step=STEP_REASON, task=task, system=system, prompt=prompt,
                        schema_name=task.replace(".", "_"), schema=REASON_SCHEMA,
                        validate=validate_reason, data=data)


def refuse_offline(judge: Any, what: str) -> None:
    """A ConfigurationError when `judge` is the offline judge, which cannot judge `what`."""
    if getattr(judge, "model", None) == OFFLINE_MODEL:
        raise ConfigurationError(
            f"model: the offline judge cannot judge {what} (word overlap is no stand-in for "
            f"it); give a language model, e.g. model='openai/gpt-4o-mini', or set "
            f"{JUDGE_MODEL.name}")

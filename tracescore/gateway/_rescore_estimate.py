"""`tracescore rescore --dry-run`: what a rescore would cost, found without calling a judge.

The dry run reads, selects and recognises the spans as a rescore does and gives each run the
same scorers would get to `Estimate`, a stand-in for the scorer that never calls its judge:
it counts the judge calls from the scorer's `judge_steps` (a scorer of your own that uses a judge
and declares none counts one), estimates their tokens from the texts the judge would be sent (each
capped like the scorer caps it, about 4 characters a token, plus about `PROMPT_TOKENS` of
instructions and `REPLY_TOKENS` of reply per call) and prices them with litellm's price map.
Every call is counted with all of the call's judged texts: an estimate from above.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tracescore._words import counted
from tracescore.scoring._base import JudgeUsage, Scorer, ScoreResult, ScorerInput, new_run_id
from tracescore.scoring._inputs import answer_text, question_text
from tracescore.scoring._judge_api import OFFLINE_MODEL
from tracescore.scoring._provenance import judge_model, scorer_version

CHARS_PER_TOKEN = 4
PROMPT_TOKENS = 500  # a judge step's own instructions (the built-in prompts: 400 to 750)
REPLY_TOKENS = 150  # a judge step's reply (statements, verdicts, a reason)
_DEFAULT_MAX_CHARS = 20_000


@dataclass(frozen=True)
class ScorerEstimate:
    """What one scorer would do in the rescore: runs, judge calls, tokens, USD (None: no price
    for its model in litellm's map)."""

    scorer_id: str
    model: str | None
    runs: int
    judge_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


class Estimate(Scorer):
    """Stands in for `scorer` in a dry run: same id, name, version and scope; never judges."""

    def __init__(self, scorer: Any) -> None:
        self.id = str(scorer.id)
        self.name = str(getattr(scorer, "name", None) or scorer.id)
        self.uses_judge = bool(getattr(scorer, "uses_judge", True))
        self.version = scorer_version(scorer)
        self.scope = str(getattr(scorer, "scope", "call"))
        self.model = judge_model(scorer) if self.uses_judge else None
        steps = getattr(scorer, "judge_steps", None)
        self.calls_per_run = (len(steps) if isinstance(steps, tuple) else 1) if self.uses_judge \
            else 0
        chars = getattr(scorer, "max_judge_input_chars", _DEFAULT_MAX_CHARS)
        self._max_chars = int(chars) if isinstance(chars, (int, float)) else _DEFAULT_MAX_CHARS
        self._lock = threading.Lock()
        self._runs = self._input = self._output = 0
        self._cost: float | None = 0.0

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        calls = self.calls_per_run
        input_tokens = calls * (PROMPT_TOKENS + self._text_tokens(call)) if calls else 0
        output_tokens = calls * REPLY_TOKENS
        cost = price(self.model, input_tokens, output_tokens) if calls else 0.0
        with self._lock:
            self._runs += 1
            self._input += input_tokens
            self._output += output_tokens
            self._cost = None if cost is None or self._cost is None else self._cost + cost
        return ScoreResult(run_id=call.run_id or new_run_id(), scorer_id=self.id,
                           scorer_name=self.name, score=0.0,
                           usage=JudgeUsage(model=self.model, calls=calls,
                                            input_tokens=input_tokens,
                                            output_tokens=output_tokens, cost_usd=cost))

    def summary(self) -> ScorerEstimate:
        with self._lock:
            return ScorerEstimate(self.id, self.model, self._runs, self._runs * self.calls_per_run,
                                  self._input, self._output, self._cost)

    def _text_tokens(self, call: ScorerInput) -> int:
        """Tokens of the texts a judge is sent for `call`: question, answer, context, tool calls,
        each capped as the scorer caps it."""
        texts = [_text(call.input, question_text), _text(call.output, answer_text),
                 *map(str, call.context)]
        if call.tool_calls:
            texts.append(json.dumps([{"name": c.name, "arguments": c.arguments, "result": c.result}
                                     for c in call.tool_calls], default=str))
        chars = sum(min(len(text), self._max_chars) for text in texts)
        return math.ceil(chars / CHARS_PER_TOKEN)


def price(model: str | None, input_tokens: int, output_tokens: int) -> float | None:
    """USD for the tokens at litellm's prices (0 for the offline judge; None when unknown)."""
    if model == OFFLINE_MODEL:
        return 0.0
    if model is None:
        return None
    from tracescore._litellm_support import import_litellm

    litellm = import_litellm()
    try:
        prompt, completion = litellm.cost_per_token(model=model, prompt_tokens=input_tokens,
                                                    completion_tokens=output_tokens)
    except Exception:  # noqa: BLE001 - a model litellm has no price for
        return None
    return float(prompt) + float(completion)


def _text(value: Any, read: Any) -> str:
    if value is None:
        return ""
    try:
        return str(read(value))
    except (ValueError, TypeError):  # no question or answer text: the value as JSON
        return value if isinstance(value, str) else json.dumps(value, default=str)


def estimate_lines(estimates: Sequence[ScorerEstimate]) -> list[str]:
    """The dry run's report: one line per scorer, then the total."""
    lines = []
    for e in estimates:
        if e.model is None:
            lines.append(f"  {e.scorer_id} (no judge): {counted(e.runs, 'run')}")
            continue
        cost = "cost unknown (no litellm price)" if e.cost_usd is None else f"~${e.cost_usd:.4f}"
        lines.append(f"  {e.scorer_id} ({e.model}): {counted(e.runs, 'run')}, "
                     f"{counted(e.judge_calls, 'judge call')}, "
                     f"~{e.input_tokens:,} input + {e.output_tokens:,} output tokens, {cost}")
    calls = sum(e.judge_calls for e in estimates)
    unknown = sorted({str(e.model) for e in estimates if e.judge_calls and e.cost_usd is None})
    known = sum(e.cost_usd or 0.0 for e in estimates)
    total = f"total: {counted(calls, 'judge call')}, ~${known:.4f} at litellm's prices"
    if unknown:
        total += f" (and the calls to {', '.join(unknown)}: litellm has no price for it)"
    lines.append(total + "; tokens estimated from the texts")
    return lines

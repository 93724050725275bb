"""Faithfulness: how many of the output's claims the retrieved context supports.

preprocess (judge: the claims of the output) -> analyze (judge: each claim `yes` supported /
`no` contradicted / `unsure` not in the context) -> score (code: supported / claims * scale,
rounded as the reference rounds) -> reason (judge: explains the score it is given).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracescore.scoring import _claims
from tracescore.scoring._base import ScoreResult, faithfulness_label
from tracescore.scoring._judge_api import Judge, JudgeRequest
from tracescore.scoring._judged import JudgedRun
from tracescore.scoring._offline import register_offline_task
from tracescore.scoring._options import merge_options
from tracescore.scoring._prompting import format_score

TASK_VERDICTS = "faithfulness.verdicts"
TASK_REASON = "faithfulness.reason"

SYSTEM = f"""\
You are a careful evaluator of faithfulness. You check whether the claims an answer makes are \
supported by the context the answer was given (documents, tool results). You use only that \
context, never your own knowledge: a claim the context does not mention is unverified, even \
if you believe it is true.

{_claims.block.declaration()}

Always reply with exactly one JSON object in the shape the task asks for, and nothing else."""

_VERDICTS = """\
Task: for each claim in the <claims> block (a JSON array), decide whether the context in the \
<context> block supports it.

Verdicts:
- "yes": the context states the claim or directly implies it.
- "no": the context contradicts the claim (for example it gives a different number or date).
- "unsure": the context does not mention the claim, or the claim is speculative ("may", \
"might", "possibly") and so cannot be verified.
Use only the context. Do not mark a claim down for style.

Example: with the context "[0] The Eiffel Tower opened in 1889. It is 330 metres tall.", the \
claims ["The Eiffel Tower opened in 1889", "The Eiffel Tower is 300 metres tall", "The Eiffel \
Tower may be repainted next year"] get the verdicts yes, no (the context says 330 metres), \
unsure (speculative, not in the context).
"""

_REASON = """\
Task: explain a faithfulness score that has already been computed. Do not recompute or change it.

The score is {score} on a scale from 0 to {scale}: the number of claims the context supports \
(verdict "yes") divided by the number of claims, multiplied by {scale}. The verdicts are in \
the <verdicts> block. Say which claims the context supports and which it contradicts or does \
not mention.
"""


class FaithfulnessScorer(_claims.ClaimsScorer):
    """LLM-judged faithfulness of the output to the retrieved context (the reference's formula).

    The context is the `context` option when given, else the call's retrieved context (the
    `context` a run receives: tool results and marked spans online, the dataset's `context` in
    evals). No claims score 0; claims but no context score 0 without asking the judge (no
    claim can be supported).
    """

    id = "faithfulness"
    name = "Faithfulness"
    factory = "create_faithfulness_scorer"
    system = SYSTEM
    verdicts_task = TASK_VERDICTS
    verdicts_instructions = _VERDICTS
    verdict_values = ("yes", "no", "unsure")
    reason_task = TASK_REASON
    reason_instructions = _REASON
    claim_key = "claim"

    def label(self, score: float) -> str:
        return faithfulness_label(score, self.scale)

    def verdict_score(self, verdicts: Sequence[Mapping[str, Any]]) -> float:
        return faithfulness_score(verdicts, self.scale)

    def without_context(self, run: JudgedRun, claims: list[str], source: str) -> ScoreResult:
        self.record_no_context(run, claims, source, "unsure")
        n = len(claims)
        return run.result(0.0, f"The score is 0 because no context was given, so none of the "
                               f"{n} claim{'s' if n != 1 else ''} in the output can be "
                               f"supported by it (the judge was not asked to verify them).")


def faithfulness_score(verdicts: Sequence[Mapping[str, Any]], scale: float = 1) -> float:
    """count(verdict == "yes") / len(verdicts) * scale, rounded to 2 decimals as the reference
    rounds; 0 without verdicts. Only an exact "yes" counts, as in the reference."""
    return _claims.ratio_score(_claims.count_exact(verdicts, "yes"), len(verdicts), scale)


def create_faithfulness_scorer(*, model: str | Judge, scale: float = 1,
                               context: Sequence[str] | None = None,
                               options: Mapping[str, Any] | None = None,
                               **judge_kwargs: Any) -> FaithfulnessScorer:
    """Factory named after the reference system's `createFaithfulnessScorer`.

    `options` may carry `scale` and `context` (a partial set merges with the defaults).
    """
    merged = merge_options(options, {"scale": scale, "context": context}, {})
    return FaithfulnessScorer(model=model, **merged, **judge_kwargs)


# --- the offline judge's version (lexical; see tracescore.scoring._claims) --------------------
def _offline_verdict(check: _claims.Check) -> tuple[str, str]:
    if check.outcome == _claims.CONTRADICTED:
        return "no", check.reason
    if check.outcome == _claims.SUPPORTED and not check.hedged:
        return "yes", check.reason
    if check.outcome == _claims.SUPPORTED:
        return "unsure", "It is hedged (may, might, ...), so the context cannot confirm it."
    return "unsure", check.reason


def _offline_reason(request: JudgeRequest) -> tuple[dict[str, Any], dict[str, Any]]:
    verdicts = request.data.get("verdicts", [])
    counts = {v: _claims.count_exact(verdicts, v) for v in ("yes", "no", "unsure")}
    n = len(verdicts)
    score = format_score(float(request.data.get("score", 0.0)))
    reason = (f"The score is {score} because {counts['yes']} of {n} claim{'s' if n != 1 else ''} "
              f"{'is' if counts['yes'] == 1 else 'are'} supported by the context, {counts['no']} "
              f"contradicted and {counts['unsure']} not found there (offline judge: word "
              f"overlap, no language model).")
    return {"reason": reason}, {}


register_offline_task(TASK_VERDICTS, _claims.offline_verdicts(_offline_verdict))
register_offline_task(TASK_REASON, _offline_reason)

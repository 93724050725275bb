"""Hallucination: how many of the output's claims the retrieved context does not back up.

preprocess (judge: the claims of the output) -> analyze (judge: each claim `yes` hallucinated,
i.e. contradicted or unsupported by the context, or `no`) -> score (code: hallucinated /
claims * scale, rounded as the reference rounds) -> reason (judge: explains the score).
Higher is worse: 0 means every claim is grounded in the context.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring import _claims
from tracescore.scoring._base import ScoreResult, hallucination_label
from tracescore.scoring._judge_api import Judge, JudgeRequest
from tracescore.scoring._judged import JudgedRun
from tracescore.scoring._offline import register_offline_task
from tracescore.scoring._options import merge_options
from tracescore.scoring._prompting import format_score

TASK_VERDICTS = "hallucination.verdicts"
TASK_REASON = "hallucination.reason"

# get_context({"input", "output", "ground_truth", "context"}) -> the context (may be async)
ContextGetter = Callable[[dict[str, Any]], "Sequence[str] | Awaitable[Sequence[str]]"]

SYSTEM = f"""\
You are a careful evaluator of hallucination. You check whether the claims an answer makes \
are backed by the context the answer was given (documents, tool results), or go beyond it or \
against it. You use only that context, never your own knowledge.

{_claims.block.declaration()}

Always reply with exactly one JSON object in the shape the task asks for, and nothing else."""

_VERDICTS = """\
Task: for each claim in the <claims> block (a JSON array), decide whether it is a \
hallucination with respect to the context in the <context> block.

Verdicts:
- "yes" (a hallucination): the claim contradicts the context, or asserts something the \
context does not support: an added fact, a subjective judgement the context does not make \
("pioneering", "made history"), or speculation about things the context does not mention.
- "no" (grounded): the context supports the claim. Less precise dates (a year where the \
context gives a month), reasonable approximations of numbers, leaving details out, and \
speculation about facts that are in the context are all grounded.
Use only the context.

Example: with the context "[0] The bridge opened in May 1937. [1] Tolls were cut by 30% in \
1990.", the claims ["The bridge opened in 1937", "The bridge was the most beautiful of its \
time", "Tolls were cut by about a third", "Tolls may be abolished soon"] get the verdicts no \
(a less precise date), yes (a judgement the context does not make), no (a reasonable \
approximation), yes (speculation about something not in the context).
"""

_REASON = """\
Task: explain a hallucination score that has already been computed. Do not recompute or \
change it.

The score is {score} on a scale from 0 to {scale}, where 0 means no hallucination: the number \
of claims judged hallucinated (verdict "yes") divided by the number of claims, multiplied by \
{scale}. The verdicts are in the <verdicts> block. Say which claims go beyond or against the \
context, and which the context supports.
"""


class HallucinationScorer(_claims.ClaimsScorer):
    """LLM-judged hallucination of the output against the retrieved context (the reference's
    formula; higher is worse).

    The context is, in this order: what `get_context` returns, the `context` option, the call's
    retrieved context. No claims score 0; claims but no context score `scale` without asking
    the judge (nothing backs any claim).
    """

    id = "hallucination"
    name = "Hallucination"
    factory = "create_hallucination_scorer"
    system = SYSTEM
    verdicts_task = TASK_VERDICTS
    verdicts_instructions = _VERDICTS
    verdict_values = ("yes", "no")
    reason_task = TASK_REASON
    reason_instructions = _REASON
    claim_key = "statement"

    def __init__(self, *, model: str | Judge, scale: float = 1,
                 context: Sequence[str] | None = None, get_context: ContextGetter | None = None,
                 **options: Any) -> None:
        if get_context is not None and not callable(get_context):
            raise ConfigurationError(f"get_context must be callable, got {get_context!r}")
        self.get_context = get_context
        super().__init__(model=model, scale=scale, context=context,
                         **options)

    def label(self, score: float) -> str:
        return hallucination_label(score, self.scale)

    def verdict_score(self, verdicts: Sequence[Mapping[str, Any]]) -> float:
        return hallucination_score(verdicts, self.scale)

    def without_context(self, run: JudgedRun, claims: list[str], source: str) -> ScoreResult:
        score = hallucination_score(self.record_no_context(run, claims, source, "yes"), self.scale)
        n = len(claims)
        return run.result(score, f"The score is {format_score(score)} because no context was "
                                 f"given, so none of the {n} claim{'s' if n != 1 else ''} in "
                                 f"the output is backed by it (the judge was not asked to "
                                 f"verify them).")


def hallucination_score(verdicts: Sequence[Mapping[str, Any]], scale: float = 1) -> float:
    """count(verdict == "yes") / len(verdicts) * scale, rounded to 2 decimals as the reference
    rounds; 0 without verdicts. Only an exact "yes" counts, as in the reference."""
    return _claims.ratio_score(_claims.count_exact(verdicts, "yes"), len(verdicts), scale)


def create_hallucination_scorer(*, model: str | Judge, scale: float = 1,
                                context: Sequence[str] | None = None,
                                get_context: ContextGetter | None = None,
                                options: Mapping[str, Any] | None = None,
                                **judge_kwargs: Any) -> HallucinationScorer:
    """Factory named after the reference system's `createHallucinationScorer`.

    `options` may carry `scale`, `context` and `get_context`/`getContext` (a partial set merges
    with the defaults).
    """
    merged = merge_options(options, {"scale": scale, "context": context,
                                     "get_context": get_context},
                           {"getContext": "get_context"})
    return HallucinationScorer(model=model, **merged, **judge_kwargs)


# --- the offline judge's version (lexical; see tracescore.scoring._claims) --------------------
def _offline_verdict(check: _claims.Check) -> tuple[str, str]:
    if check.outcome == _claims.SUPPORTED:
        return "no", check.reason
    return "yes", check.reason


def _offline_reason(request: JudgeRequest) -> tuple[dict[str, Any], dict[str, Any]]:
    verdicts = request.data.get("verdicts", [])
    hallucinated = _claims.count_exact(verdicts, "yes")
    n = len(verdicts)
    score = format_score(float(request.data.get("score", 0.0)))
    reason = (f"The score is {score} because {hallucinated} of {n} claim"
              f"{'s' if n != 1 else ''} {'is' if hallucinated == 1 else 'are'} not backed by "
              f"the context (offline judge: word overlap, no language model).")
    return {"reason": reason}, {}


register_offline_task(TASK_VERDICTS, _claims.offline_verdicts(_offline_verdict))
register_offline_task(TASK_REASON, _offline_reason)

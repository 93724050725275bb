"""Context recall: how much of the ground-truth answer the retrieved context supports.

preprocess (judge: the claims of the ground truth) -> analyze (judge: for each claim, whether
the context supports it) -> score (code: supported / claims, at most 1, times the scale, the
reference's formula) -> reason (judge: explains the score it is given).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from tracescore.scoring._base import STEP_ANALYZE, STEP_PREPROCESS, ScoreResult, ScorerInput
from tracescore.scoring._claims import pick_context
from tracescore.scoring._judge_api import Judge, JudgeRequest
from tracescore.scoring._judged import JudgedRun, JudgedScorer, reference_text
from tracescore.scoring._options import merge_options
from tracescore.scoring._prompting import Blocks, format_score, recount_note, reference_round
from tracescore.scoring._reply_fields import (
    band,
    field,
    is_yes,
    items,
    reason_request,
    refuse_offline,
    text,
)
from tracescore.scoring.context_precision import check_context_options

TASK_CLAIMS = "context_recall.claims"
TASK_VERDICTS = "context_recall.verdicts"
TASK_REASON = "context_recall.reason"

_block = Blocks("ground_truth", "claims", "context", "verdicts")
SYSTEM = f"""\
You judge whether retrieved context holds the information an expected answer needs: you split \
the expected (ground-truth) answer into claims and check each against the context alone. A \
claim is supported when some part of the context states or directly implies it; never use \
your own knowledge.

{_block.declaration()}

Always reply with exactly one JSON object in the shape the task asks for, and nothing else."""

_CLAIMS = """\
Task: list the claims of the expected answer in the <ground_truth> block: each fact, number, \
date or relationship it asserts, one per item, each understandable on its own (name the \
subject instead of "it"). An empty text gives an empty list.

Example: "Refunds take 5 days and are paid to the original card." gives {"claims": ["Refunds \
take 5 days", "Refunds are paid to the original card"]}

Reply with a JSON object {"claims": [<string>, ...]} and nothing else.
"""

_VERDICTS = """\
Task: for each claim in the <claims> block (a JSON array), decide whether the context in the \
<context> block supports it: "yes" when some piece states or directly implies it, "no" when \
no piece does. Use only the context.

Reply with a JSON object {{"verdicts": [{{"verdict": "yes" | "no", "reason": <one short \
sentence>}}, ...]}} and nothing else. Give exactly {count} verdict{plural}, one per claim, in \
order.
"""

CLAIMS_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"claims": {"type": "array", "items": {"type": "string"}}},
    "required": ["claims"], "additionalProperties": False}
VERDICTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdicts": {"type": "array", "items": {
        "type": "object",
        "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]},
                       "reason": {"type": "string"}},
        "required": ["verdict", "reason"], "additionalProperties": False}}},
    "required": ["verdicts"], "additionalProperties": False}


def validate_claims(value: Any) -> dict[str, Any]:
    """The claims, kept as given (a blank claim counts, as in the reference)."""
    return {"claims": field(value, "claims", "strings", "reply")}


def validate_verdicts(value: Any) -> dict[str, Any]:
    verdicts = []
    for i, item in enumerate(items(value, "verdicts")):
        if not isinstance(item, dict):
            raise ValueError(f"verdicts[{i}] must be an object")  # noqa: TRY004
        verdicts.append({"verdict": field(item, "verdict", "str", f"verdicts[{i}]"),
                         "reason": text(item, "reason")})
    return {"verdicts": verdicts}


def context_recall_score(claims: int, verdicts: Sequence[Mapping[str, Any]],
                         scale: float = 1) -> float:
    """min(1, verdicts reading "yes" / claims) * scale, rounded as the reference rounds; 0
    without claims. The verdicts are counted as given, even when there are more than claims."""
    if claims == 0:
        return 0.0
    supported = sum(1 for v in verdicts if is_yes(v["verdict"]))
    return reference_round(min(1.0, supported / claims) * scale)


class ContextRecallScorer(JudgedScorer):
    """LLM-judged recall of the retrieved context against the ground truth.

    The context is what `context_extractor(input, output)` returns, else the `context` option,
    else the call's retrieved context. Without a ground truth the score is 0 and the judge is
    not asked (the reference scores 0 too); with claims but no context every claim is
    unsupported, 0 without asking the judge. Needs a language model.
    """

    id = "context-recall"
    name = "Context Recall"
    factory = "create_context_recall_scorer"

    def __init__(self, *, model: str | Judge, scale: float = 1,
                 context: Sequence[str] | None = None, context_extractor: Any = None,
                 **options: Any) -> None:
        self.context = check_context_options(context, context_extractor)
        self.context_extractor = context_extractor
        super().__init__(model=model, scale=scale, **options)

    def check_judge(self, judge: Judge) -> None:
        refuse_offline(judge, "whether context supports a claim")

    def label(self, score: float) -> str:
        return band(score, self.scale, "recalled", "partially_recalled", "not_recalled")

    async def preprocess(self, run: JudgedRun, call: ScorerInput) -> _Claims | ScoreResult:
        truth = reference_text(call.ground_truth)
        if truth is None:
            run.record(STEP_PREPROCESS, result={"claims": [], "skipped": "no ground truth: the "
                                                "judge was not called"})
            run.record(STEP_ANALYZE, result={"verdicts": []})
            return run.result(0.0, "The score is 0 because no ground truth was given, so there "
                                   "is nothing the context could recall (the judge was not "
                                   "called).")
        truth = run.judge_text(truth)
        reply = await run.ask(JudgeRequest(
            step=STEP_PREPROCESS, task=TASK_CLAIMS, system=SYSTEM,
            prompt=f"{_CLAIMS}\n{_block('ground_truth', truth)}", schema_name="context_recall_claims",
            schema=CLAIMS_SCHEMA, validate=validate_claims, data={"ground_truth": truth}))
        claims: list[str] = reply.data["claims"]
        run.record(STEP_PREPROCESS, prompt=reply.prompt, result={"claims": claims})
        return _Claims(truth, claims)

    async def analyze(self, run: JudgedRun, call: ScorerInput, prepared: _Claims
                      ) -> _Claims | ScoreResult:
        extractor = self.context_extractor
        pieces, source = await pick_context(
            run, None if extractor is None else lambda: extractor(call.input, call.output),
            "context_extractor", self.context, call.context)
        n = len(prepared.claims)
        if not prepared.claims or not pieces:
            run.record(STEP_ANALYZE, result={
                "verdicts": [], "skipped": "no claims" if not prepared.claims else "no context",
                "context": {"source": source, "pieces": len(pieces)}})
            why = ("the ground truth makes no claims" if not prepared.claims else
                   f"no context was given, so none of the {n} claim{'s' if n != 1 else ''} of "
                   f"the ground truth is supported")
            return run.result(0.0, f"The score is 0 because {why} (the judge was not asked).")
        sent, left_out = run.judge_texts(pieces)
        context = "\n".join(f"[{i}] {piece}" for i, piece in enumerate(sent))
        claims = json.dumps(prepared.claims, ensure_ascii=False, indent=1)

        def build(previous: int | None) -> JudgeRequest:
            prompt = _VERDICTS.format(count=n, plural="" if n == 1 else "s")
            prompt += recount_note(previous, "verdicts", n, "claims")
            prompt += f"\n{_block('context', context)}\n\n{_block('claims', claims)}"
            return JudgeRequest(step=STEP_ANALYZE, task=TASK_VERDICTS, system=SYSTEM,
                                prompt=prompt, schema_name="context_recall_verdicts",
                                schema=VERDICTS_SCHEMA, validate=validate_verdicts,
                                data={"claims": prepared.claims, "context": sent})

        reply, verdicts, mismatch = await run.ask_list(build, key="verdicts", count=n,
                                                       of="claims")
        run.record(STEP_ANALYZE, prompt=reply.prompt, result={
            "verdicts": verdicts, **mismatch,
            "context": {"source": source, "pieces": len(pieces), "left_out": left_out}})
        return dataclasses.replace(prepared, verdicts=verdicts)

    def score(self, analysis: _Claims) -> float:
        return context_recall_score(len(analysis.claims), analysis.verdicts, self.scale)

    def reason(self, analysis: _Claims, score: float) -> JudgeRequest:
        shown = format_score(score)
        explain = (f"The score is {shown} on a scale from 0 to {format_score(self.scale)}: the "
                   f"share of the ground truth's claims that the context supports, times the "
                   f"scale. The verdicts are in the <verdicts> block, one per claim of the "
                   f"<claims> block. Write one or two plain sentences that start exactly with "
                   f"\"The score is {shown} because\" and say which claims the context lacks.")
        return reason_request(
            task=TASK_REASON, system=SYSTEM, blocks=_block, explain=explain,
            shown=[("claims", json.dumps(analysis.claims, ensure_ascii=False, indent=1)),
                   ("verdicts", json.dumps(analysis.verdicts, ensure_ascii=False, indent=1))],
            data={"score": score, "scale": self.scale, "verdicts": analysis.verdicts})


@dataclasses.dataclass(frozen=True)
class _Claims:
    truth: str
    claims: list[str]
    verdicts: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def create_context_recall_scorer(*, model: str | Judge, scale: float = 1,
                                 context: Sequence[str] | None = None,
                                 context_extractor: Any = None,
                                 options: Mapping[str, Any] | None = None,
                                 **judge_kwargs: Any) -> ContextRecallScorer:
    """Factory named after the reference system's `createContextRecallScorer`.

    `options` may carry `scale`, `context` and `context_extractor`/`contextExtractor`.
    """
    merged = merge_options(options, {"scale": scale, "context": context,
                                     "context_extractor": context_extractor},
                           {"contextExtractor": "context_extractor"})
    return ContextRecallScorer(model=model, **merged, **judge_kwargs)

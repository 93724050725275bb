"""Context precision: whether the useful context pieces come first (mean average precision).

analyze (judge: for each context piece, in order, whether it helps produce the output) ->
score (code: the mean of precision@k over the relevant pieces, the reference's formula) ->
reason (judge: explains the score it is given).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import STEP_ANALYZE, ScorerInput
from tracescore.scoring._claims import check_context, pick_context
from tracescore.scoring._inputs import InputError, answer_text
from tracescore.scoring._judge_api import Judge, JudgeRequest
from tracescore.scoring._judged import JudgedRun, JudgedScorer
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

TASK_VERDICTS = "context_precision.verdicts"
TASK_REASON = "context_precision.reason"

_block = Blocks("query", "output", "context", "verdicts")
SYSTEM = f"""\
You judge retrieved context for an AI agent: for each piece, whether it was useful for \
producing the agent's answer to the query. A piece is useful only when it directly supports \
or informs the answer; a piece that is merely on the same topic, or background the answer \
does not need, is not.

{_block.declaration()}

Always reply with exactly one JSON object in the shape the task asks for, and nothing else."""

_VERDICTS = """\
Task: for each context piece in the <context> block (numbered from 0), decide whether it was \
useful for producing the answer in the <output> block to the query in the <query> block.
- "yes": the piece directly supports or informs the answer.
- "no": it does not (unrelated, or only loosely on topic).

Example: for the query "How long do refunds take?", the answer "Refunds take 5 days." and \
the context "[0] Our office is in Berlin. [1] Refunds are paid within 5 days.", piece 0 is \
"no" and piece 1 is "yes".

Reply with a JSON object {{"verdicts": [{{"context_index": <number>, "verdict": "yes" | "no", \
"reason": <one short sentence>}}, ...]}} and nothing else. Give exactly {count} \
verdict{plural}, one per context piece, in order.
"""

VERDICTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdicts": {"type": "array", "items": {
        "type": "object",
        "properties": {"context_index": {"type": "number"},
                       "verdict": {"type": "string", "enum": ["yes", "no"]},
                       "reason": {"type": "string"}},
        "required": ["context_index", "verdict", "reason"], "additionalProperties": False}}},
    "required": ["verdicts"], "additionalProperties": False}


def validate_verdicts(value: Any) -> dict[str, Any]:
    """The analyze reply: every verdict needs a number `context_index` and a string verdict
    (kept as written; the score counts what reads "yes" as the reference does)."""
    verdicts = []
    for i, item in enumerate(items(value, "verdicts")):
        where = f"verdicts[{i}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where} must be an object")  # noqa: TRY004
        verdicts.append({"context_index": field(item, "context_index", "number", where),
                         "verdict": field(item, "verdict", "str", where),
                         "reason": text(item, "reason")})
    return {"verdicts": verdicts}


def context_precision_score(verdicts: Sequence[Mapping[str, Any]], scale: float = 1) -> float:
    """Mean average precision, as the reference computes it: the verdicts in `context_index`
    order (stable), precision@k = relevant so far / k at each relevant piece, their mean, times
    `scale`. No verdicts or none relevant: 0."""
    ordered = sorted(verdicts, key=lambda v: v["context_index"])
    total, relevant = 0.0, 0
    for k, verdict in enumerate(ordered, start=1):
        if is_yes(verdict["verdict"]):
            relevant += 1
            total += relevant / k
    if relevant == 0:
        return 0.0
    return reference_round(total / relevant * scale)


class ContextPrecisionScorer(JudgedScorer):
    """LLM-judged precision of the retrieved context: are the useful pieces ranked first?

    The context is what `context_extractor(input, output)` returns, else the `context` option,
    else the call's retrieved context. A call without any context fails the analyze step (the
    reference fails it too: precision of nothing is undefined). Needs a language model.
    """

    id = "context-precision"
    name = "Context Precision"
    factory = "create_context_precision_scorer"
    judge_steps = ("analyze", "reason")

    def __init__(self, *, model: str | Judge, scale: float = 1,
                 context: Sequence[str] | None = None, context_extractor: Any = None,
                 **options: Any) -> None:
        self.context = check_context_options(context, context_extractor)
        self.context_extractor = context_extractor
        super().__init__(model=model, scale=scale, **options)

    def check_judge(self, judge: Judge) -> None:
        refuse_offline(judge, "which context pieces an answer needed")

    def label(self, score: float) -> str:
        return band(score, self.scale, "precise", "partially_precise", "imprecise")

    async def preprocess(self, run: JudgedRun, call: ScorerInput) -> _Context:
        extractor = self.context_extractor
        pieces, source = await pick_context(
            run, None if extractor is None else lambda: extractor(call.input, call.output),
            "context_extractor", self.context, call.context)
        if not pieces:
            raise run.error(STEP_ANALYZE, "context precision needs context: give the `context` "
                            "option or a context_extractor, or score calls with retrieved context")
        try:
            output = run.judge_text(answer_text(call.output))
        except InputError:
            output = ""
        return _Context(run.question_text(call.input), output, pieces, source)

    async def analyze(self, run: JudgedRun, call: ScorerInput, prepared: _Context) -> _Context:
        sent, left_out = run.judge_texts(prepared.pieces)
        reply, verdicts, mismatch = await run.ask_list(
            lambda previous: _verdicts_request(prepared, sent, previous),
            key="verdicts", count=len(sent), of="context_pieces")
        run.record(STEP_ANALYZE, prompt=reply.prompt, result={
            "verdicts": verdicts, **mismatch,
            "context": {"source": prepared.source, "pieces": len(prepared.pieces),
                        "left_out": left_out}})
        return dataclasses.replace(prepared, verdicts=verdicts)

    def score(self, analysis: _Context) -> float:
        return context_precision_score(analysis.verdicts, self.scale)

    def reason(self, analysis: _Context, score: float) -> JudgeRequest:
        shown = format_score(score)
        explain = (f"The score is {shown} on a scale from 0 to {format_score(self.scale)}: the "
                   f"mean, over the useful context pieces, of the share of useful pieces among "
                   f"those ranked up to it (1 when every useful piece comes before every other "
                   f"one), times the scale. The verdicts are in the <verdicts> block. Write one "
                   f"or two plain sentences that start exactly with \"The score is {shown} "
                   f"because\" and say which pieces helped and where they were ranked.")
        return reason_request(
            task=TASK_REASON, system=SYSTEM, blocks=_block, explain=explain,
            shown=[("query", analysis.query),
                   ("verdicts", json.dumps(analysis.verdicts, ensure_ascii=False, indent=1))],
            data={"score": score, "scale": self.scale, "verdicts": analysis.verdicts})


@dataclasses.dataclass(frozen=True)
class _Context:
    query: str
    output: str
    pieces: list[str]
    source: str
    verdicts: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def check_context_options(context: object, extractor: object) -> list[str] | None:
    pieces = check_context(context)
    if pieces is not None and not pieces:
        raise ConfigurationError("context cannot be an empty list if given (leave it out to use "
                                 "the call's context)")
    if extractor is not None and not callable(extractor):
        raise ConfigurationError(f"context_extractor must be callable, got {extractor!r}")
    return pieces


def _verdicts_request(prepared: _Context, sent: list[str], previous: int | None) -> JudgeRequest:
    count = len(sent)
    prompt = _VERDICTS.format(count=count, plural="" if count == 1 else "s")
    prompt += recount_note(previous, "verdicts", count, "context pieces")
    context = "\n".join(f"[{i}] {piece}" for i, piece in enumerate(sent))
    prompt += (f"\n{_block('query', prepared.query)}\n\n{_block('output', prepared.output)}\n\n"
               f"{_block('context', context)}")
    return JudgeRequest(step=STEP_ANALYZE, task=TASK_VERDICTS, system=SYSTEM, prompt=prompt,
                        schema_name="context_precision_verdicts", schema=VERDICTS_SCHEMA,
                        validate=validate_verdicts,
                        data={"query": prepared.query, "output": prepared.output,
                              "context": sent})


def create_context_precision_scorer(*, model: str | Judge, scale: float = 1,
                                    context: Sequence[str] | None = None,
                                    context_extractor: Any = None,
                                    options: Mapping[str, Any] | None = None,
                                    **judge_kwargs: Any) -> ContextPrecisionScorer:
    """Factory named after the reference system's `createContextPrecisionScorer`.

    `options` may carry `scale`, `context` and `context_extractor`/`contextExtractor`.
    """
    merged = merge_options(options, {"scale": scale, "context": context,
                                     "context_extractor": context_extractor},
                           {"contextExtractor": "context_extractor"})
    return ContextPrecisionScorer(model=model, **merged, **judge_kwargs)

"""Context relevance: how relevant and how used the retrieved context was for the answer.

analyze (judge: for each context piece a relevance level, whether the answer used it, and
the context that was missing) -> score (code: mean relevance weight minus penalties, the
reference's formula and defaults) -> reason (judge: explains the score it is given).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import (
    STEP_ANALYZE,
    STEP_REASON,
    ScoreResult,
    ScorerInput,
    relevancy_label,
)
from tracescore.scoring._claims import check_context, pick_context
from tracescore.scoring._inputs import InputError, answer_text
from tracescore.scoring._judge_api import Judge, JudgeRequest
from tracescore.scoring._judged import JudgedRun, JudgedScorer
from tracescore.scoring._offline import content_stems, register_offline_task
from tracescore.scoring._options import check_fraction, merge_options
from tracescore.scoring._prompting import (
    REASON_SCHEMA,
    Blocks,
    format_score,
    recount_note,
    reference_round,
    validate_reason,
)

TASK_EVALUATIONS = "context_relevance.evaluations"
TASK_REASON = "context_relevance.reason"

# The reference's weights of the relevance levels and its default penalties.
RELEVANCE_WEIGHTS: dict[str, float] = {"high": 1.0, "medium": 0.7, "low": 0.3, "none": 0.0}
DEFAULT_PENALTIES: dict[str, float] = {
    "unused_high_relevance_context": 0.1,  # per high-relevance piece the answer did not use
    "missing_context_per_item": 0.15,  # per piece of missing context the judge names
    "max_missing_context_penalty": 0.5,  # cap of the missing-context penalty
}
_PENALTY_ALIASES = {"unusedHighRelevanceContext": "unused_high_relevance_context",
                    "missingContextPerItem": "missing_context_per_item",
                    "maxMissingContextPenalty": "max_missing_context_penalty"}

# context_extractor(input, output) -> the context (may be async)
ContextExtractor = Callable[[Any, Any], "Sequence[str] | Awaitable[Sequence[str]]"]

_block = Blocks("query", "response", "context", "evaluations")

SYSTEM = f"""\
You are a careful evaluator of retrieved context. You judge how relevant each piece of \
context given to an AI agent was to the user's query, whether the agent's response actually \
used it, and what context was missing to answer the query well.

{_block.declaration()}

Always reply with exactly one JSON object in the shape the task asks for, and nothing else."""

_EVALUATIONS = """\
Task: evaluate each context piece in the <context> block (numbered from 0) for the query in \
the <query> block and the agent's response in the <response> block.

For each piece give:
- "relevanceLevel": "high" (directly answers the query or gives essential information), \
"medium" (useful background or supporting information), "low" (only loosely related, not \
really helpful) or "none" (unrelated).
- "wasUsed": true when the response clearly reflects this piece's information, else false.
- "reasoning": one or two sentences on why.
Then list in "missingContext" the information that was not provided but would have been \
needed to answer the query well (an empty list when nothing was missing), and sum up in \
"overallAssessment".

Example: for the query "What are the benefits of exercise?", the response "Exercise \
strengthens the heart and lifts mood." and the context "[0] Regular exercise strengthens the \
heart. [1] A balanced diet matters for health. [2] Physical activity reduces stress.", piece \
0 is high and used, piece 1 is none and not used, piece 2 is high and used.

Reply with a JSON object {{"evaluations": [{{"context_index": <number>, "relevanceLevel": \
"high" | "medium" | "low" | "none", "wasUsed": true | false, "reasoning": <string>}}, ...], \
"missingContext": [<string>, ...], "overallAssessment": <string>}} and nothing else. Give \
exactly {count} evaluation{plural}, one per context piece, in order.
"""

_REASON = """\
Task: explain a context relevance score that has already been computed. Do not recompute or \
change it.

The score is {score} on a scale from 0 to {scale}. It is the mean relevance weight of the \
context pieces (high 1, medium 0.7, low 0.3, none 0), minus {unused} for each highly \
relevant piece the response did not use, minus {missing} for each piece of missing context \
(at most {max_missing} in all), never below 0, times {scale}. The evaluations are in the \
<evaluations> block.

Write one or two plain sentences that start exactly with "The score is {score} because" and \
say which context helped, which did not, and which penalties applied.

Reply with a JSON object {{"reason": <string>}} and nothing else.
"""

EVALUATIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "evaluations": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "context_index": {"type": "integer"},
                "relevanceLevel": {"type": "string", "enum": list(RELEVANCE_WEIGHTS)},
                "wasUsed": {"type": "boolean"},
                "reasoning": {"type": "string"},
            },
            "required": ["context_index", "relevanceLevel", "wasUsed", "reasoning"],
            "additionalProperties": False,
        }},
        "missingContext": {"type": "array", "items": {"type": "string"}},
        "overallAssessment": {"type": "string"},
    },
    "required": ["evaluations", "missingContext", "overallAssessment"],
    "additionalProperties": False,
}


def validate_evaluations(value: Any) -> dict[str, Any]:
    """The analyze reply; a relevance level outside the four, or a non-boolean `wasUsed`, is
    rejected (the reference would turn it into a NaN score)."""
    items = value.get("evaluations") if isinstance(value, dict) else None
    if not isinstance(items, list):
        raise ValueError("expected an object with an 'evaluations' list")  # noqa: TRY004
    evaluations = []
    for i, item in enumerate(items):
        level = item.get("relevanceLevel") if isinstance(item, dict) else None
        if not isinstance(level, str) or level not in RELEVANCE_WEIGHTS:
            raise ValueError("every evaluation needs a relevanceLevel of high, medium, low or "
                             "none")
        if not isinstance(item.get("wasUsed"), bool):
            raise ValueError("every evaluation needs a boolean wasUsed")  # noqa: TRY004
        index = item.get("context_index", i)
        evaluations.append({
            "context_index": index if isinstance(index, int) and not isinstance(index, bool)
            else i,
            "relevanceLevel": item["relevanceLevel"], "wasUsed": item["wasUsed"],
            "reasoning": str(item.get("reasoning", "")),
        })
    missing = value.get("missingContext", [])  # the reference's schema defaults it to []
    if not isinstance(missing, list):
        raise ValueError("missingContext must be a list of strings")  # noqa: TRY004
    assessment = value.get("overallAssessment", "")
    return {"evaluations": evaluations,
            "missingContext": [str(m) for m in missing],  # blank entries count, as there
            "overallAssessment": assessment if isinstance(assessment, str) else str(assessment)}


def context_relevance_score(evaluations: Sequence[Mapping[str, Any]],
                            missing_context: Sequence[str], scale: float = 1,
                            penalties: Mapping[str, float] | None = None) -> float:
    """The reference's formula, computed in the same float order and rounded as it rounds:

    max(0, sum(weights) / n - unused_high * unused_rate
        - min(missing * missing_rate, max_missing)) * scale

    With no evaluations: 0 when context is missing, else 1 (not scaled, as in the reference).
    """
    rates = {**DEFAULT_PENALTIES, **(penalties or {})}
    if not evaluations:
        return 0.0 if missing_context else 1.0
    total = 0.0
    for evaluation in evaluations:
        total += RELEVANCE_WEIGHTS[evaluation["relevanceLevel"]]
    relevance = total / (len(evaluations) * RELEVANCE_WEIGHTS["high"])
    unused_high = sum(1 for e in evaluations if e["relevanceLevel"] == "high"
                      and not e["wasUsed"])
    usage_penalty = unused_high * rates["unused_high_relevance_context"]
    missing_penalty = min(len(missing_context) * rates["missing_context_per_item"],
                          rates["max_missing_context_penalty"])
    return reference_round(max(0.0, relevance - usage_penalty - missing_penalty) * scale)


def _check_penalties(penalties: object) -> dict[str, float]:
    if penalties is None:
        return dict(DEFAULT_PENALTIES)
    if not isinstance(penalties, Mapping):
        raise ConfigurationError(f"penalties must be a mapping, got {penalties!r}")
    merged = merge_options(penalties, dict(DEFAULT_PENALTIES), _PENALTY_ALIASES)
    return {name: check_fraction(f"penalties.{name}", value) for name, value in merged.items()}


class ContextRelevanceScorer(JudgedScorer):
    """LLM-judged relevance and use of the retrieved context (the reference's formula).

    The context is, in this order: what `context_extractor(input, output)` returns, the
    `context` option, the call's retrieved context. Without any context the score is `scale`
    and the judge is not called (the reference does not penalise a call without context).
    """

    id = "context-relevance"
    judge_steps = ("analyze", "reason")  # the steps that ask the judge
    name = "Context Relevance"
    factory = "create_context_relevance_scorer"

    def __init__(self, *, model: str | Judge, scale: float = 1,
                 context: Sequence[str] | None = None,
                 context_extractor: ContextExtractor | None = None,
                 penalties: Mapping[str, float] | None = None, **options: Any) -> None:
        self.context = check_context(context)
        if self.context is not None and not self.context:
            raise ConfigurationError("context cannot be an empty list if given (leave it out "
                                     "to use the call's context)")
        if context_extractor is not None and not callable(context_extractor):
            raise ConfigurationError(
                f"context_extractor must be callable, got {context_extractor!r}")
        self.context_extractor = context_extractor
        self.penalties = _check_penalties(penalties)
        super().__init__(model=model, scale=scale, **options)

    def label(self, score: float) -> str:
        return relevancy_label(score, self.scale)

    async def preprocess(self, run: JudgedRun, call: ScorerInput) -> _Context | ScoreResult:
        """The query, the response and the context to judge (the judge is not asked)."""
        query = run.question_text(call.input)
        try:
            response = run.judge_text(answer_text(call.output))
        except InputError:
            response = ""
        extractor = self.context_extractor
        pieces, source = await pick_context(
            run, None if extractor is None else lambda: extractor(call.input, call.output),
            "context_extractor", self.context, call.context)
        if not pieces:
            score = float(self.scale)
            run.record(STEP_ANALYZE, result={
                "evaluations": [], "missingContext": [], "skipped": "no context: the judge "
                "was not called", "context": {"source": source, "pieces": 0, "left_out": 0}})
            return run.result(score, f"The score is {format_score(score)} because no context "
                                     f"was given, and a call without context is not penalised "
                                     f"(the judge was not called).")
        return _Context(query, response, pieces, source)

    async def analyze(self, run: JudgedRun, call: ScorerInput, prepared: _Context) -> _Context:
        """The relevance and use of each piece, and what was missing (judge)."""
        pieces = prepared.pieces
        sent, left_out = run.judge_texts(pieces)
        reply, evaluations, mismatch = await run.ask_list(
            lambda previous: _evaluations_request(prepared.query, prepared.response, sent,
                                                  previous),
            key="evaluations", count=len(sent), of="context_pieces")
        for i, evaluation in enumerate(evaluations):  # the reference's step result shape
            evaluation["contextPiece"] = sent[i] if i < len(sent) else None
        missing: list[str] = reply.data["missingContext"]
        analyze: dict[str, Any] = {
            "evaluations": evaluations, "missingContext": missing,
            "overallAssessment": reply.data["overallAssessment"], **mismatch,
            "context": {"source": prepared.source, "pieces": len(pieces), "left_out": left_out}}
        for key, value in reply.notes.items():
            analyze.setdefault(key, value)
        run.record(STEP_ANALYZE, prompt=reply.prompt, result=analyze)
        return dataclasses.replace(prepared, evaluations=evaluations, missing=missing)

    def score(self, analysis: _Context) -> float:
        return context_relevance_score(analysis.evaluations, analysis.missing, self.scale,
                                       self.penalties)

    def reason(self, analysis: _Context, score: float) -> JudgeRequest:
        return _reason_request(analysis.query, analysis.evaluations, analysis.missing, score,
                               self.scale, self.penalties)


@dataclasses.dataclass(frozen=True)
class _Context:
    """What the steps of one run hand on: the judged texts, the context and its evaluations."""

    query: str
    response: str
    pieces: list[str]
    source: str
    evaluations: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    missing: list[str] = dataclasses.field(default_factory=list)


def _evaluations_request(query: str, response: str, context: Sequence[str],
                         previous_count: int | None) -> JudgeRequest:
    count = len(context)
    prompt = _EVALUATIONS.format(count=count, plural="" if count == 1 else "s")
    prompt += recount_note(previous_count, "evaluations", count, "context pieces")
    numbered = "\n".join(f"[{i}] {piece}" for i, piece in enumerate(context))
    prompt += (f"\n{_block('query', query)}\n\n{_block('response', response)}\n\n"
               f"{_block('context', numbered)}")
    return JudgeRequest(step=STEP_ANALYZE, task=TASK_EVALUATIONS, system=SYSTEM, prompt=prompt,
                        schema_name="context_relevance_evaluations", schema=EVALUATIONS_SCHEMA,
                        validate=validate_evaluations,
                        data={"query": query, "response": response, "context": list(context)})


def _reason_request(query: str, evaluations: Sequence[Mapping[str, Any]],
                    missing: Sequence[str], score: float, scale: float,
                    penalties: Mapping[str, float]) -> JudgeRequest:
    shown = format_score(score)
    prompt = _REASON.format(score=shown, scale=format_score(scale),
                            unused=format_score(penalties["unused_high_relevance_context"]),
                            missing=format_score(penalties["missing_context_per_item"]),
                            max_missing=format_score(penalties["max_missing_context_penalty"]))
    shown_evaluations = json.dumps({"evaluations": list(evaluations),
                                    "missingContext": list(missing)},
                                   ensure_ascii=False, indent=1)
    prompt += (f"\n{_block('query', query)}\n\n{_block('evaluations', shown_evaluations)}")
    return JudgeRequest(step=STEP_REASON, task=TASK_REASON, system=SYSTEM, prompt=prompt,
                        schema_name="context_relevance_reason", schema=REASON_SCHEMA,
                        validate=validate_reason,
                        data={"score": score, "scale": scale, "evaluations": list(evaluations),
                              "missingContext": list(missing)})


def create_context_relevance_scorer(*, model: str | Judge, scale: float = 1,
                                    context: Sequence[str] | None = None,
                                    context_extractor: ContextExtractor | None = None,
                                    penalties: Mapping[str, float] | None = None,
                                    options: Mapping[str, Any] | None = None,
                                    **judge_kwargs: Any) -> ContextRelevanceScorer:
    """Factory named after the reference system's `createContextRelevanceScorerLLM`.

    `options` may carry `scale`, `context`, `context_extractor`/`contextExtractor` and
    `penalties` (`unusedHighRelevanceContext`, `missingContextPerItem`,
    `maxMissingContextPenalty`, or their snake_case names; a partial set merges with the
    defaults 0.1, 0.15 and 0.5).
    """
    merged = merge_options(options, {"scale": scale, "context": context,
                                     "context_extractor": context_extractor,
                                     "penalties": penalties},
                           {"contextExtractor": "context_extractor"})
    return ContextRelevanceScorer(model=model, **merged, **judge_kwargs)


# --- the offline judge's version (lexical) ----------------------------------------------------
_HIGH_SHARE, _MEDIUM_SHARE, _USED_SHARE = 0.5, 0.25, 0.3
OFFLINE_METHOD = (
    "lexical: a piece's relevance is the share of the query's content words it contains "
    "(>= 50% high, >= 25% medium, some low, none none); it was used when >= 30% of its content "
    "words occur in the response; the offline judge cannot tell what context is missing")


def _offline_evaluations(request: JudgeRequest) -> tuple[dict[str, Any], dict[str, Any]]:
    query = content_stems(str(request.data.get("query", "")))
    response = content_stems(str(request.data.get("response", "")))
    evaluations = []
    for i, piece in enumerate(request.data.get("context", [])):
        words = content_stems(str(piece))
        share = len(query & words) / len(query) if query else 0.0
        level = ("high" if share >= _HIGH_SHARE else "medium" if share >= _MEDIUM_SHARE
                 else "low" if share > 0 else "none")
        used = bool(words) and len(words & response) / len(words) >= _USED_SHARE
        evaluations.append({
            "context_index": i, "relevanceLevel": level, "wasUsed": used,
            "reasoning": f"It contains {share:.0%} of the query's content words; "
                         f"{'much' if used else 'little'} of it appears in the response."})
    return ({"evaluations": evaluations, "missingContext": [],
             "overallAssessment": "Judged by word overlap (offline judge)."},
            {"offline_method": OFFLINE_METHOD})


def _offline_reason(request: JudgeRequest) -> tuple[dict[str, Any], dict[str, Any]]:
    evaluations = request.data.get("evaluations", [])
    levels = [e.get("relevanceLevel") for e in evaluations]
    used = sum(1 for e in evaluations if e.get("wasUsed"))
    n = len(evaluations)
    counts = ", ".join(f"{levels.count(level)} {level}" for level in RELEVANCE_WEIGHTS
                       if levels.count(level))
    score = format_score(float(request.data.get("score", 0.0)))
    return {"reason": f"The score is {score} because of {n} context piece{'s' if n != 1 else ''} "
                      f"({counts}) the response used {used} (offline judge: word overlap, no "
                      f"language model)."}, {}


register_offline_task(TASK_EVALUATIONS, _offline_evaluations)
register_offline_task(TASK_REASON, _offline_reason)

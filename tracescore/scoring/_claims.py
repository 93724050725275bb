"""Claims of an output checked against retrieved context: the steps faithfulness and
hallucination share (claim extraction, a verdict per claim, the offline approximation).

preprocess (judge: the claims of the output) -> analyze (judge: a verdict per claim against
the context) -> score (code) -> reason (judge: explains the score it is given).

The offline judge's version is lexical, not semantic: a claim counts as supported when at
least three quarters of its content words (lightly stemmed) and all of its numbers occur in
the context; as contradicted when most of its words occur there but a number of it does not
while the context has numbers of its own; as unverified otherwise (hedged claims, "may",
"might", are never plainly supported). Paraphrases, negations ("not") and contradictions
without numbers are beyond it.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import (
    STEP_ANALYZE,
    STEP_PREPROCESS,
    STEP_REASON,
    ScoreResult,
    ScorerInput,
)
from tracescore.scoring._judge_api import Judge, JudgeRequest
from tracescore.scoring._judged import SKIPPED_EMPTY, JudgedRun, JudgedScorer
from tracescore.scoring._offline import content_stems, number_keys, register_offline_task
from tracescore.scoring._offline import split_statements as _split_claims
from tracescore.scoring._prompting import (
    REASON_SCHEMA,
    Blocks,
    format_score,
    recount_note,
    reference_round,
    string_list_schema,
    validate_reason,
    validate_string_list,
    validate_verdict_list,
    verdict_list_schema,
)

TASK_CLAIMS = "claims.extract"
block = Blocks("question", "output", "claims", "context", "verdicts")

_CLAIMS_TASK = """\
Task: list the claims made in the <output> block.

A claim is anything the output asserts: a fact, a number, a date, a relationship, an opinion \
stated as fact, a prediction or a possibility. Keep hedged claims ("may", "might", "could") \
as claims, with their hedge.
- Split a compound sentence into one claim per assertion.
- Make every claim understandable on its own: name its subject instead of "it" or "they".
- Keep numbers, dates, units and quantities exactly as written.
- Leave out questions, commands, greetings and filler.
- If the output is empty or asserts nothing, return an empty list.

Example: the output "The Eiffel Tower opened in 1889 and is 330 metres tall. It may be \
repainted next year." gives {"claims": ["The Eiffel Tower opened in 1889", "The Eiffel Tower \
is 330 metres tall", "The Eiffel Tower may be repainted next year"]}

Reply with a JSON object {"claims": [<string>, ...]} and nothing else.
"""


def claims_request(system: str, output: str) -> JudgeRequest:
    return JudgeRequest(step=STEP_PREPROCESS, task=TASK_CLAIMS, system=system,
                        prompt=f"{_CLAIMS_TASK}\n{block('output', output)}",
                        schema_name="claims", schema=string_list_schema("claims"),
                        validate=validate_string_list("claims"), data={"output": output})


def context_block(context: Sequence[str]) -> str:
    """The context pieces, numbered from 0, in one <context> block."""
    return block("context", "\n".join(f"[{i}] {piece}" for i, piece in enumerate(context)))


# verdicts are kept as given (the score counts only an exact lower-case "yes", as the reference does)
validate_verdicts = validate_verdict_list("verdicts", "verdict")


def verdicts_request(*, task: str, system: str, instructions: str, claims: Sequence[str],
                     context: Sequence[str], verdicts: Sequence[str],
                     previous_count: int | None) -> JudgeRequest:
    count = len(claims)
    prompt = (f"{instructions}\nReply with a JSON object {{\"verdicts\": [{{\"verdict\": "
              f"{' | '.join(json.dumps(v) for v in verdicts)}, \"reason\": <one short "
              f"sentence>}}, ...]}} and nothing else. Give exactly {count} "
              f"verdict{'' if count == 1 else 's'}, one per claim, in the order of the claims.\n")
    prompt += recount_note(previous_count, "verdicts", count, "claims")
    claims_json = json.dumps(list(claims), ensure_ascii=False, indent=1)
    prompt += f"\n{context_block(context)}\n\n{block('claims', claims_json)}"
    return JudgeRequest(step=STEP_ANALYZE, task=task, system=system, prompt=prompt,
                        schema_name=task.replace(".", "_"),
                        schema=verdict_list_schema("verdicts", "verdict", verdicts),
                        validate=validate_verdicts,
                        data={"claims": list(claims), "context": list(context)})


def reason_request(*, task: str, system: str, instructions: str, question: str, output: str,
                   verdicts: Sequence[Mapping[str, Any]], score: float,
                   scale: float) -> JudgeRequest:
    shown = format_score(score)
    prompt = instructions.format(score=shown, scale=format_score(scale))
    prompt += (f"\nWrite one or two plain sentences that start exactly with \"The score is "
               f"{shown} because\".\n\nReply with a JSON object {{\"reason\": <string>}} and "
               f"nothing else.\n\n{block('question', question)}\n\n{block('output', output)}"
               f"\n\n{block('verdicts', json.dumps(list(verdicts), ensure_ascii=False, indent=1))}")
    return JudgeRequest(step=STEP_REASON, task=task, system=system, prompt=prompt,
                        schema_name=task.replace(".", "_"), schema=REASON_SCHEMA,
                        validate=validate_reason,
                        data={"score": score, "scale": scale, "verdicts": list(verdicts)})


def count_exact(verdicts: Sequence[Mapping[str, Any]], value: str) -> int:
    """How many verdicts are exactly `value` (the reference compares with `===`)."""
    return sum(1 for v in verdicts if v.get("verdict") == value)


def ratio_score(count: int, total: int, scale: float) -> float:
    """count / total * scale, rounded as the reference rounds; 0 when there is nothing."""
    if total == 0:
        return 0.0
    return reference_round(count / total * scale)


# --- the offline approximation ---------------------------------------------------------------
SUPPORTED, CONTRADICTED, UNVERIFIED = "supported", "contradicted", "unverified"
_HEDGES = frozenset(["may", "might", "could", "possibly", "perhaps", "probably", "maybe", "likely"])
_SUPPORT_SHARE = 0.75
_CONTRADICT_SHARE = 0.5


@dataclass(frozen=True)
class Check:
    """What the offline judge found for one claim: the outcome, whether it is hedged, why."""

    outcome: str
    hedged: bool
    reason: str


def check_claim(claim: str, context: Sequence[str]) -> Check:
    """The offline judge's lexical check of one claim against the context (module docstring)."""
    words = content_stems(claim)
    numbers = number_keys(claim)
    hedged = bool({w.lower() for w in claim.split()} & _HEDGES)
    context_words: set[str] = set()
    context_numbers: set[str] = set()
    for piece in context:
        context_words |= content_stems(piece)
        context_numbers |= number_keys(piece)
    if not words and not numbers:
        return Check(UNVERIFIED, hedged, "The claim has no content words to look up.")
    share = len(words & context_words) / len(words) if words else 1.0
    missing = sorted(numbers - context_numbers)
    if share >= _SUPPORT_SHARE and not missing:
        return Check(SUPPORTED, hedged, f"{share:.0%} of its content words and all of its "
                                        f"numbers occur in the context.")
    if missing and context_numbers and share >= _CONTRADICT_SHARE:
        return Check(CONTRADICTED, hedged,
                     f"Its number(s) {', '.join(missing)} do not occur in the context, which "
                     f"gives {', '.join(sorted(context_numbers)[:5])} instead.")
    return Check(UNVERIFIED, hedged, f"Only {share:.0%} of its content words occur in the "
                                     f"context" + (f", nor do its number(s) {', '.join(missing)}."
                                                   if missing else "."))


def offline_verdicts(to_verdict: Callable[[Check], tuple[str, str]]
                     ) -> Callable[[JudgeRequest], tuple[dict[str, Any], dict[str, Any]]]:
    """An offline handler of a verdicts task: `to_verdict` maps a Check to (verdict, reason)."""
    def handle(request: JudgeRequest) -> tuple[dict[str, Any], dict[str, Any]]:
        context = [str(c) for c in request.data.get("context", [])]
        verdicts = []
        for claim in request.data.get("claims", []):
            verdict, reason = to_verdict(check_claim(str(claim), context))
            verdicts.append({"verdict": verdict, "reason": reason})
        return {"verdicts": verdicts}, {"offline_method": (
            "lexical: a claim is supported when 75% of its content words and all its numbers "
            "occur in the context; no paraphrase, negation or meaning is understood")}
    return handle


register_offline_task(TASK_CLAIMS, lambda request: (
    {"claims": _split_claims(str(request.data.get("output", "")))}, {}))


# --- the scorer ------------------------------------------------------------------------------
class ClaimsScorer(JudgedScorer):
    """A judged scorer of the output's claims against retrieved context (faithfulness,
    hallucination). Subclasses fill in the prompts, the verdicts and the score."""

    system: str
    verdicts_task: str
    verdicts_instructions: str
    verdict_values: tuple[str, ...]
    reason_task: str
    reason_instructions: str
    claim_key: str  # how a verdict names its claim in the step result ("claim", "statement")

    def __init__(self, *, model: str | Judge, scale: float = 1,
                 context: Sequence[str] | None = None, **options: Any) -> None:
        self.context = check_context(context)
        super().__init__(model=model, scale=scale, **options)

    def verdict_score(self, verdicts: Sequence[Mapping[str, Any]]) -> float:
        """The score of the verdicts (reference formula, rounding included)."""
        raise NotImplementedError

    def without_context(self, run: JudgedRun, claims: list[str], source: str) -> ScoreResult:
        """The result when there is no context to check the claims against."""
        raise NotImplementedError

    def record_no_context(self, run: JudgedRun, claims: list[str], source: str,
                          verdict: str) -> list[dict[str, str]]:
        """Record the analyze step without context (the judge not called): `verdict` for
        every claim; returns those verdicts."""
        verdicts = [{self.claim_key: c, "verdict": verdict, "reason": "No context was given."}
                    for c in claims]
        run.record(STEP_ANALYZE, result={
            "verdicts": verdicts, "skipped": "no context: the judge was not called",
            "context": {"source": source, "pieces": 0, "left_out": 0}})
        return verdicts

    async def _context(self, run: JudgedRun, call: ScorerInput) -> tuple[list[str], str]:
        """The non-blank context pieces to check against, and where they came from."""
        get_context: Callable[..., Any] | None = getattr(self, "get_context", None)
        given = {"input": call.input, "output": call.output, "ground_truth": call.ground_truth,
                 "context": list(call.context)}
        return await pick_context(run, None if get_context is None else lambda: get_context(given),
                                  "get_context", self.context, call.context)

    async def preprocess(self, run: JudgedRun, call: ScorerInput) -> _Claims:
        """The claims of the output (judge)."""
        answer = run.output_text(call.output)
        question = run.question_text(call.input)  # only shown to the reason step: "" is fine
        if not answer.strip():
            run.record(STEP_PREPROCESS, result={"claims": [], "skipped": SKIPPED_EMPTY})
            return _Claims(question, answer, [])
        reply = await run.ask(claims_request(self.system, answer))
        claims: list[str] = reply.data["claims"]
        run.record(STEP_PREPROCESS, prompt=reply.prompt, result={"claims": claims})
        return _Claims(question, answer, claims)

    async def analyze(self, run: JudgedRun, call: ScorerInput,
                      prepared: _Claims) -> _Claims | ScoreResult:
        """A verdict per claim against the context (judge; once more when the count is off)."""
        claims = prepared.claims
        if not claims:
            run.record(STEP_ANALYZE, result={"verdicts": []})
            score = self.verdict_score([])
            return run.result(score, f"The score is {format_score(score)} because the output "
                                     f"makes no claims (the judge was not asked to verify any).")
        pieces, source = await self._context(run, call)
        if not pieces:
            return self.without_context(run, claims, source)
        sent, left_out = run.judge_texts(pieces)
        reply, verdicts, mismatch = await run.ask_list(
            lambda previous: verdicts_request(
                task=self.verdicts_task, system=self.system,
                instructions=self.verdicts_instructions, claims=claims, context=sent,
                verdicts=self.verdict_values, previous_count=previous),
            key="verdicts", count=len(claims), of="claims")
        named = [{self.claim_key: claims[i], **v} if i < len(claims) else dict(v)
                 for i, v in enumerate(verdicts)]
        analyze: dict[str, Any] = {"verdicts": named, **mismatch,
                                   "context": {"source": source, "pieces": len(pieces),
                                               "left_out": left_out}}
        for key, value in reply.notes.items():
            analyze.setdefault(key, value)
        run.record(STEP_ANALYZE, prompt=reply.prompt, result=analyze)
        return dataclasses.replace(prepared, verdicts=verdicts, named=named)

    def score(self, analysis: _Claims) -> float:
        return self.verdict_score(analysis.verdicts)

    def reason(self, analysis: _Claims, score: float) -> str | JudgeRequest:
        if not analysis.verdicts:
            return f"The score is {format_score(score)} because the judge gave no verdicts."
        return reason_request(
            task=self.reason_task, system=self.system, instructions=self.reason_instructions,
            question=analysis.question, output=analysis.answer, verdicts=analysis.named,
            score=score, scale=self.scale)


@dataclass(frozen=True)
class _Claims:
    """What the steps of one run hand on: the judged texts, the claims and their verdicts."""

    question: str
    answer: str
    claims: list[str]
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    named: list[dict[str, Any]] = field(default_factory=list)  # each verdict with its claim


async def pick_context(run: JudgedRun, extract: Callable[[], Any] | None, name: str,
                       option: list[str] | None, given: Sequence[str]) -> tuple[list[str], str]:
    """The non-blank context pieces to judge against, and where they came from: what
    `extract()` returns (awaited if need be; a failure fails the analyze step, naming `name`),
    else the `option`, else the call's `given` context."""
    if extract is not None:
        try:
            found = extract()
            if inspect.isawaitable(found):
                found = await found
            pieces, source = list(check_context(found) or []), name
        except Exception as exc:
            raise run.error(STEP_ANALYZE, f"{name} failed: {type(exc).__name__}: {exc}") from exc
    elif option is not None:
        pieces, source = option, "option"
    else:
        pieces, source = list(given), "call"
    return [p for p in pieces if isinstance(p, str) and p.strip()], source


def check_context(context: object) -> list[str] | None:
    """Validate a `context` option: None (use the call's context) or a list of strings."""
    if context is None:
        return None
    if isinstance(context, (str, bytes)) or not isinstance(context, Sequence) or not all(
            isinstance(p, str) for p in context):
        raise ConfigurationError(f"context must be a list of strings, got {context!r}")
    return list(context)

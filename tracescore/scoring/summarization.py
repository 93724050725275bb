"""Summarization: whether a summary is faithful to its source and covers what the source says.

preprocess (judge: each claim of the summary supported by the source or not, and questions the
source answers) -> analyze (judge, without the source: which questions the summary answers) ->
score (code: the lower of alignment and coverage, times the scale; the reference's formula) ->
reason (judge: explains the score it is given).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Mapping, Sequence
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import STEP_ANALYZE, STEP_PREPROCESS, ScoreResult, ScorerInput
from tracescore.scoring._inputs import InputError, answer_text, question_text
from tracescore.scoring._judge_api import Judge, JudgeRequest
from tracescore.scoring._judged import JudgedRun, JudgedScorer
from tracescore.scoring._options import merge_options
from tracescore.scoring._prompting import Blocks, format_score, recount_note, reference_round
from tracescore.scoring._reply_fields import band, field, items, reason_request, refuse_offline

TASK_SOURCE = "summarization.source"
TASK_COVERAGE = "summarization.coverage"
TASK_REASON = "summarization.reason"
DEFAULT_MAX_QUESTIONS = 10  # the reference's default

_block = Blocks("source", "summary", "questions", "axes")
SYSTEM = f"""\
You judge summaries strictly against the text they condense, never against your own \
knowledge. A claim of a summary is supported only when the source states or directly implies \
it; an approximation of a precise fact ("about 2020" for "2020") is not supported, while a \
rewording with the same meaning is. Accuracy and coverage are separate questions.

{_block.declaration()}

Always reply with exactly one JSON object in the shape the task asks for, and nothing else."""

_SOURCE = """\
Task: two things about the <summary> of the <source> text.
1. List each claim the summary makes, and for each say whether the source supports it \
("supported": true or false) with a short reason.
2. Write at most {max_questions} closed questions that the source answers (its key facts), \
each answerable in a few words from the source alone.
A summary with no claims gives an empty "alignment" list.

Reply with a JSON object {{"alignment": [{{"claim": <string>, "supported": true | false, \
"reason": <string>}}, ...], "questions": [<string>, ...]}} and nothing else.
"""

_COVERAGE = """\
Task: for each question in the <questions> block (a JSON array), say whether the <summary> \
alone answers it ("answered": true or false), with a short reason. Use only the summary: a \
question it does not answer is not answered, however easy it would be to know.

Reply with a JSON object {{"coverage": [{{"question": <string>, "answered": true | false, \
"reason": <string>}}, ...]}} and nothing else. Give exactly {count} item{plural}, one per \
question, in order.
"""

SOURCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "alignment": {"type": "array", "items": {"type": "object", "properties": {
            "claim": {"type": "string"}, "supported": {"type": "boolean"},
            "reason": {"type": "string"}},
            "required": ["claim", "supported", "reason"], "additionalProperties": False}},
        "questions": {"type": "array", "items": {"type": "string"}}},
    "required": ["alignment", "questions"], "additionalProperties": False}
COVERAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"coverage": {"type": "array", "items": {"type": "object", "properties": {
        "question": {"type": "string"}, "answered": {"type": "boolean"},
        "reason": {"type": "string"}},
        "required": ["question", "answered", "reason"], "additionalProperties": False}}},
    "required": ["coverage"], "additionalProperties": False}


def _judged(value: Any, key: str, text_key: str, flag: str) -> list[dict[str, Any]]:
    found = []
    for i, item in enumerate(items(value, key)):
        where = f"{key}[{i}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where} must be an object")  # noqa: TRY004
        found.append({text_key: field(item, text_key, "str", where),
                      flag: field(item, flag, "bool", where),
                      "reason": str(item.get("reason", ""))})
    return found


def validate_source(value: Any) -> dict[str, Any]:
    """The preprocess reply: claims with a boolean `supported`, questions as strings (kept as
    given: a blank question counts, as in the reference)."""
    return {"alignment": _judged(value, "alignment", "claim", "supported"),
            "questions": field(value, "questions", "strings", "reply")}


def validate_coverage(value: Any) -> dict[str, Any]:
    return {"coverage": _judged(value, "coverage", "question", "answered")}


@dataclasses.dataclass(frozen=True)
class Axes:
    """The two axes of the score and what lowered them."""

    alignment: float  # supported claims / claims
    coverage: float  # answered questions / questions asked (a missing answer counts as no)
    unsupported_claims: list[str]
    missing_questions: list[str]
    scorable: bool  # some claims and some questions


def _ratio(matched: int, total: int) -> float:
    return 0.0 if total == 0 else min(1.0, matched / total)


def measure_axes(alignment: Sequence[Mapping[str, Any]], questions: Sequence[str],
                 coverage: Sequence[Mapping[str, Any]], max_questions: int) -> Axes:
    """Both axes as the reference measures them: coverage over the questions asked (at most
    `max_questions`), judging only as many answers as questions."""
    asked = list(questions[:max_questions])
    judged = list(coverage[:len(asked)])
    return Axes(
        alignment=_ratio(sum(1 for c in alignment if c["supported"]), len(alignment)),
        coverage=_ratio(sum(1 for c in judged if c["answered"]), len(asked)),
        unsupported_claims=[c["claim"] for c in alignment if not c["supported"]],
        missing_questions=[q for i, q in enumerate(asked)
                           if i >= len(judged) or not judged[i]["answered"]],
        scorable=bool(alignment) and bool(asked))


def summarization_score(axes: Axes, scale: float = 1) -> float:
    """min(alignment, coverage) * scale, rounded as the reference rounds; 0 when there are no
    claims or no questions."""
    if not axes.scorable:
        return 0.0
    return reference_round(min(axes.alignment, axes.coverage) * scale)


class SummarizationScorer(JudgedScorer):
    """LLM-judged summary quality: the lower of alignment (claims the source supports) and
    coverage (questions about the source the summary answers).

    The source is what `source_extractor(input, output)` returns, else the `source` option,
    else the input's question text; the summary is the output's text. The coverage step never
    sees the source. An empty summary scores 0 without asking the judge. Needs a language model.
    """

    id = "summarization"
    name = "Summarization"
    factory = "create_summarization_scorer"

    def __init__(self, *, model: str | Judge, scale: float = 1, source: str | None = None,
                 source_extractor: Any = None, max_questions: int = DEFAULT_MAX_QUESTIONS,
                 **options: Any) -> None:
        if source is not None and not isinstance(source, str):
            raise ConfigurationError(f"source must be a string, got {source!r}")
        if source_extractor is not None and not callable(source_extractor):
            raise ConfigurationError(f"source_extractor must be callable, got "
                                     f"{source_extractor!r}")
        if isinstance(max_questions, bool) or not isinstance(max_questions, int) or (
                max_questions < 1):
            raise ConfigurationError(f"max_questions must be an integer >= 1, got "
                                     f"{max_questions!r}")
        self.source, self.source_extractor = source, source_extractor
        self.max_questions = max_questions
        super().__init__(model=model, scale=scale, **options)

    def check_judge(self, judge: Judge) -> None:
        refuse_offline(judge, "whether a summary is faithful to its source")

    def label(self, score: float) -> str:
        return band(score, self.scale, "good_summary", "partial_summary", "poor_summary")

    async def _source(self, run: JudgedRun, call: ScorerInput) -> str:
        if self.source_extractor is not None:
            try:
                found = self.source_extractor(call.input, call.output)
                if inspect.isawaitable(found):
                    found = await found
            except Exception as exc:
                raise run.error(STEP_PREPROCESS, f"source_extractor failed: "
                                f"{type(exc).__name__}: {exc}") from exc
            return found if isinstance(found, str) else ""
        if self.source is not None:
            return self.source
        try:
            return question_text(call.input)
        except InputError:
            return ""

    async def preprocess(self, run: JudgedRun, call: ScorerInput) -> _Summary | ScoreResult:
        try:
            summary = answer_text(call.output)
        except InputError:
            summary = ""
        if not summary.strip():
            return run.skip_empty({STEP_PREPROCESS: {"alignment": [], "questions": []},
                                   STEP_ANALYZE: {"coverage": []}},
                                  "The score is 0 because the summary is empty (the judge was "
                                  "not called).")
        source, summary = run.judge_text(await self._source(run, call)), run.judge_text(summary)
        prompt = (f"{_SOURCE.format(max_questions=self.max_questions)}\n"
                  f"{_block('source', source)}\n\n{_block('summary', summary)}")
        reply = await run.ask(JudgeRequest(
            step=STEP_PREPROCESS, task=TASK_SOURCE, system=SYSTEM, prompt=prompt,
            schema_name="summarization_source", schema=SOURCE_SCHEMA, validate=validate_source,
            data={"source": source, "summary": summary}))
        run.record(STEP_PREPROCESS, prompt=reply.prompt, result=reply.data)
        return _Summary(source, summary, reply.data["alignment"], reply.data["questions"])

    async def analyze(self, run: JudgedRun, call: ScorerInput, prepared: _Summary) -> _Summary:
        asked = prepared.questions[:self.max_questions]
        if not asked:
            run.record(STEP_ANALYZE, result={"coverage": [], "skipped": "no questions: the "
                                             "judge was not asked"})
            return prepared
        n = len(asked)

        def build(previous: int | None) -> JudgeRequest:
            prompt = _COVERAGE.format(count=n, plural="" if n == 1 else "s")
            prompt += recount_note(previous, "items", n, "questions")
            prompt += (f"\n{_block('summary', prepared.summary)}\n\n"
                       f"{_block('questions', json.dumps(asked, ensure_ascii=False, indent=1))}")
            return JudgeRequest(step=STEP_ANALYZE, task=TASK_COVERAGE, system=SYSTEM,
                                prompt=prompt, schema_name="summarization_coverage",
                                schema=COVERAGE_SCHEMA, validate=validate_coverage,
                                data={"summary": prepared.summary, "questions": asked})

        reply, coverage, mismatch = await run.ask_list(build, key="coverage", count=n,
                                                       of="questions")
        run.record(STEP_ANALYZE, prompt=reply.prompt, result={"coverage": coverage, **mismatch})
        return dataclasses.replace(prepared, coverage=coverage)

    def axes(self, analysis: _Summary) -> Axes:
        return measure_axes(analysis.alignment, analysis.questions, analysis.coverage,
                            self.max_questions)

    def score(self, analysis: _Summary) -> float:
        return summarization_score(self.axes(analysis), self.scale)

    def reason(self, analysis: _Summary, score: float) -> JudgeRequest:
        axes = self.axes(analysis)
        shown = format_score(score)
        facts = {"alignment": reference_round(axes.alignment),
                 "coverage": reference_round(axes.coverage),
                 "unsupported_claims": axes.unsupported_claims,
                 "unanswered_questions": axes.missing_questions}
        explain = (f"The score is {shown} on a scale from 0 to {format_score(self.scale)}: the "
                   f"lower of alignment (the share of the summary's claims the source supports) "
                   f"and coverage (the share of questions about the source the summary "
                   f"answers), times the scale; 0 when there were no claims or no questions. "
                   f"The <axes> block gives both and what lowered them. Write one or two plain "
                   f"sentences that start exactly with \"The score is {shown} because\" and name "
                   f"the axis that set the score.")
        return reason_request(
            task=TASK_REASON, system=SYSTEM, blocks=_block, explain=explain,
            shown=[("summary", analysis.summary),
                   ("axes", json.dumps(facts, ensure_ascii=False, indent=1))],
            data={"score": score, "scale": self.scale, **facts})


@dataclasses.dataclass(frozen=True)
class _Summary:
    source: str
    summary: str
    alignment: list[dict[str, Any]]
    questions: list[str]
    coverage: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def create_summarization_scorer(*, model: str | Judge, scale: float = 1,
                                source: str | None = None, source_extractor: Any = None,
                                max_questions: int = DEFAULT_MAX_QUESTIONS,
                                options: Mapping[str, Any] | None = None,
                                **judge_kwargs: Any) -> SummarizationScorer:
    """Factory named after the reference system's `createSummarizationScorer`.

    `options` may carry `scale`, `source`, `source_extractor`/`sourceExtractor` and
    `max_questions`/`maxQuestions` (default 10).
    """
    merged = merge_options(options, {"scale": scale, "source": source,
                                     "source_extractor": source_extractor,
                                     "max_questions": max_questions},
                           {"sourceExtractor": "source_extractor",
                            "maxQuestions": "max_questions"})
    return SummarizationScorer(model=model, **merged, **judge_kwargs)

"""Rubric: a binary check of the output against a checklist of criteria.

analyze (judge: each criterion satisfied or not, with its reasoning) -> score (code: `scale`
when every required criterion is satisfied, else 0; the reference's rule) -> reason (code: the
unmet criteria with the judge's reasoning, as feedback an agent can act on).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import STEP_ANALYZE, ScoreResult, ScorerInput
from tracescore.scoring._inputs import InputError, answer_text, question_text
from tracescore.scoring._judge_api import Judge, JudgeRequest
from tracescore.scoring._judged import JudgedRun, JudgedScorer
from tracescore.scoring._options import merge_options
from tracescore.scoring._prompting import Blocks, recount_note
from tracescore.scoring._reply_fields import field, items, refuse_offline

TASK_CRITERIA = "rubric.criteria"
_MARKER = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")  # a list marker a checklist line starts with

_block = Blocks("task", "output", "criteria")
SYSTEM = f"""\
You grade an AI agent's output against a rubric: a checklist of criteria. Judge each criterion \
on its own, strictly, from what the output actually contains: a criterion is satisfied only \
when the output clearly and fully meets it; when in doubt it is not. Effort, intent and partial \
progress do not count.

{_block.declaration()}

Always reply with exactly one JSON object in the shape the task asks for, and nothing else."""

_CRITERIA = """\
Task: grade the <output> block (the agent's answer to the <task> block) against each criterion \
in the <criteria> block (a JSON array; "required" says whether the criterion gates completion).

For each criterion, in order, give "criterion" (its text), "satisfied" (true or false), \
"required" (as given) and "reasoning" (what in the output meets it, or what is missing). Then \
sum up in "overallAssessment".

Reply with a JSON object {{"criteria": [{{"criterion": <string>, "satisfied": true | false, \
"required": true | false, "reasoning": <string>}}, ...], "overallAssessment": <string>}} and \
nothing else. Give exactly {count} item{plural}, one per criterion, in order.
"""

CRITERIA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "criteria": {"type": "array", "items": {"type": "object", "properties": {
            "criterion": {"type": "string"}, "satisfied": {"type": "boolean"},
            "required": {"type": "boolean"}, "reasoning": {"type": "string"}},
            "required": ["criterion", "satisfied", "required", "reasoning"],
            "additionalProperties": False}},
        "overallAssessment": {"type": "string"}},
    "required": ["criteria", "overallAssessment"], "additionalProperties": False}


@dataclasses.dataclass(frozen=True)
class Criterion:
    """One rubric criterion: what the output must satisfy, and whether it gates the score."""

    description: str
    required: bool = True
    id: str | None = None


def parse_rubric(rubric: object, where: str = "criteria") -> list[Criterion]:
    """A rubric as criteria: a checklist string (one required criterion per non-blank line,
    list markers "-", "*", "•", "1." or "1)" removed) or a list of criteria (Criterion,
    strings, or mappings with `description`, optional `required` and `id`)."""
    if rubric is None:
        return []
    if isinstance(rubric, str):
        lines = (_MARKER.sub("", line, count=1).strip() for line in rubric.split("\n"))
        return [Criterion(line) for line in lines if line]
    if not isinstance(rubric, Sequence):
        raise ConfigurationError(f"{where} must be a checklist string or a list of criteria, "
                                 f"got {rubric!r}")
    found = []
    for i, item in enumerate(rubric):
        if isinstance(item, Criterion):
            found.append(item)
        elif isinstance(item, str) and item.strip():
            found.append(Criterion(item.strip()))
        elif isinstance(item, Mapping) and isinstance(item.get("description"), str):
            required, cid = item.get("required", True), item.get("id")
            if not isinstance(required, bool) or (cid is not None and not isinstance(cid, str)):
                raise ConfigurationError(f"{where}[{i}]: required must be true or false and "
                                         f"id a string")
            found.append(Criterion(item["description"], required, cid))
        else:
            raise ConfigurationError(f"{where}[{i}] must be a string or a mapping with a "
                                     f"description, got {item!r}")
    return found


def validate_criteria(value: Any) -> dict[str, Any]:
    """The analyze reply: each criterion with boolean `satisfied` and `required`."""
    criteria = []
    for i, item in enumerate(items(value, "criteria")):
        where = f"criteria[{i}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where} must be an object")  # noqa: TRY004
        criteria.append({"criterion": str(item.get("criterion", "")),
                         "satisfied": field(item, "satisfied", "bool", where),
                         "required": field(item, "required", "bool", where),
                         "reasoning": str(item.get("reasoning", ""))})
    assessment = value.get("overallAssessment", "")
    return {"criteria": criteria,
            "overallAssessment": assessment if isinstance(assessment, str) else str(assessment)}


def rubric_score(criteria: Sequence[Mapping[str, Any]], scale: float = 1) -> float:
    """The reference's rule: `scale` when every required criterion (every criterion, when none
    is required) is satisfied, else 0; 1 (unscaled) when the judge graded no criteria. The
    `required` flags are those of the judge's reply, as in the reference."""
    if not criteria:
        return 1.0
    required = [c for c in criteria if c["required"]] or list(criteria)
    return float(scale) if all(c["satisfied"] for c in required) else 0.0


class RubricScorer(JudgedScorer):
    """LLM-judged rubric: 1 (times `scale`) only when every required criterion is met.

    The rubric is the `criteria` option, else a `rubric` entry of the input when the input is a
    mapping (a checklist string or a list), so one scorer can grade a rubric per item. Without
    any rubric the score is 1 and the judge is not called (the reference passes it too). The
    task shown to the judge is the input's `original_task`/`originalTask`, else its question.
    The reason lists every criterion, the unmet ones first. Needs a language model.
    """

    id = "rubric"
    name = "Rubric"
    factory = "create_rubric_scorer"
    judge_steps = ("analyze",)

    def __init__(self, *, model: str | Judge, criteria: object = None, scale: float = 1,
                 **options: Any) -> None:
        self.criteria = parse_rubric(criteria)
        super().__init__(model=model, scale=scale, **options)

    def check_judge(self, judge: Judge) -> None:
        refuse_offline(judge, "a rubric's criteria")

    def label(self, score: float) -> str:
        return "satisfied" if score > 0 else "not_satisfied"

    async def preprocess(self, run: JudgedRun, call: ScorerInput) -> _Graded | ScoreResult:
        rubric = self.criteria
        if not rubric and isinstance(call.input, Mapping) and "rubric" in call.input:
            try:
                rubric = parse_rubric(call.input["rubric"], "input.rubric")
            except ConfigurationError as exc:
                raise run.error(STEP_ANALYZE, str(exc)) from exc
        if not rubric:
            run.record(STEP_ANALYZE, result={"criteria": [], "overallAssessment": "",
                                             "skipped": "no rubric: the judge was not called"})
            return run.result(1.0, "The score is 1 because no rubric was given, so there is "
                                   "nothing to check (the judge was not called).")
        task = _task_text(call.input)
        try:
            output = answer_text(call.output)
        except InputError:
            output = ""
        return _Graded(run.judge_text(task), run.judge_text(output), rubric)

    async def analyze(self, run: JudgedRun, call: ScorerInput, prepared: _Graded) -> _Graded:
        n = len(prepared.rubric)
        shown = json.dumps([{"criterion": c.description, "required": c.required}
                            for c in prepared.rubric], ensure_ascii=False, indent=1)

        def build(previous: int | None) -> JudgeRequest:
            prompt = _CRITERIA.format(count=n, plural="" if n == 1 else "s")
            prompt += recount_note(previous, "items", n, "criteria")
            prompt += (f"\n{_block('task', prepared.task)}\n\n{_block('output', prepared.output)}"
                       f"\n\n{_block('criteria', shown)}")
            return JudgeRequest(step=STEP_ANALYZE, task=TASK_CRITERIA, system=SYSTEM,
                                prompt=prompt, schema_name="rubric_criteria",
                                schema=CRITERIA_SCHEMA, validate=validate_criteria,
                                data={"task": prepared.task, "output": prepared.output,
                                      "criteria": json.loads(shown)})

        reply, criteria, mismatch = await run.ask_list(build, key="criteria", count=n,
                                                       of="rubric_criteria")
        run.record(STEP_ANALYZE, prompt=reply.prompt, result={
            "criteria": criteria, "overallAssessment": reply.data["overallAssessment"],
            **mismatch})
        return dataclasses.replace(prepared, graded=criteria,
                                   assessment=reply.data["overallAssessment"])

    def score(self, analysis: _Graded) -> float:
        return rubric_score(analysis.graded, self.scale)

    def reason(self, analysis: _Graded, score: float) -> str:
        graded = analysis.graded
        if not graded:
            return "The score is 1 because the judge graded no criteria."
        unmet = [c for c in graded if c["required"] and not c["satisfied"]]
        if score > 0:
            head = f"Rubric met: every required criterion of {len(graded)} is satisfied."
        else:
            unmet = unmet or [c for c in graded if not c["satisfied"]]
            head = (f"Rubric not met: {len(unmet)} required criteri"
                    f"{'on is' if len(unmet) == 1 else 'a are'} not satisfied.")
        ordered = sorted(graded, key=lambda c: c["satisfied"])  # the unmet ones first
        lines = [f"- [{'met' if c['satisfied'] else 'NOT met'}, "
                 f"{'required' if c['required'] else 'optional'}] {c['criterion']}: "
                 f"{c['reasoning']}" for c in ordered]
        tail = f"\n{analysis.assessment}" if analysis.assessment else ""
        return "\n".join([head, *lines]) + tail


@dataclasses.dataclass(frozen=True)
class _Graded:
    task: str
    output: str
    rubric: list[Criterion]
    graded: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    assessment: str = ""


def _task_text(value: Any) -> str:
    if isinstance(value, Mapping):
        for key in ("original_task", "originalTask"):
            if isinstance(value.get(key), str):
                return str(value[key])
    try:
        return question_text(value)
    except InputError:
        return ""


def create_rubric_scorer(*, model: str | Judge, criteria: object = None, scale: float = 1,
                         options: Mapping[str, Any] | None = None,
                         **judge_kwargs: Any) -> RubricScorer:
    """Factory named after the reference system's `createRubricScorer`: `criteria` is a
    checklist string or a list of criteria; `options` may carry `scale`."""
    merged = merge_options(options, {"scale": scale}, {})
    return RubricScorer(model=model, criteria=criteria, **merged, **judge_kwargs)

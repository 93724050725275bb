"""Trajectory accuracy (judged): was each step of the run necessary and in a sensible place,
and did the run miss steps? Judged against the user's request, or an expected trajectory.

preprocess (code: the run's steps and the expected steps as the judge reads them) -> analyze
(judge: a verdict per step, missing and extra steps) -> score (code, the reference system's
`createTrajectoryAccuracyScorerLLM` formula: 0.6 x share of necessary steps + 0.3 x share of
steps in order - 0.1 x missing / (steps + missing), clamped to 0..1; without step verdicts, 0
with missing steps, 0.5 with extra ones, else 1) -> reason (judge).

The offline judge's version needs an expected trajectory (the scorer's or the item's): a step
is necessary when the expected steps name it, in order when it is matched in order (the
trajectory-accuracy scorer's relaxed comparison), and missing steps are the expected ones not
matched. Without an expected trajectory it refuses: only a language model can tell what a
request needed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tracescore.scoring._base import STEP_ANALYZE, STEP_PREPROCESS, STEP_REASON, ScorerInput
from tracescore.scoring._judge_api import Judge, JudgeRequest
from tracescore.scoring._judge_input import DEFAULT_MAX_JUDGE_INPUT_CHARS
from tracescore.scoring._judged import JudgedRun, JudgedScorer
from tracescore.scoring._offline import OfflineJudge, register_offline_task
from tracescore.scoring._prompting import (
    REASON_SCHEMA,
    Blocks,
    format_score,
    reference_round,
    validate_reason,
)
from tracescore.scoring._runs import as_expectation, as_run
from tracescore.scoring._scoped import (
    ScopedScorer,
    expected_json,
    expected_steps,
    step_json,
    text_of,
)
from tracescore.scoring._trajectory_checks import step_matches

TASK_STEPS = "trajectory.steps"
TASK_REASON = "trajectory.reason"

_block = Blocks("request", "answer", "run", "expected", "verdicts")

SYSTEM = f"""\
You review the paths AI agents take. Given a user's request and the steps an agent took to \
answer it (tool calls, LLM calls, sub-agents, in order), you decide which steps the task \
needed, whether each came at a sensible point, which needed steps are missing and which were \
wasted. Judge the path, not the wording of the answer.

{_block.declaration()}

Always reply with exactly one JSON object in the shape the task asks for, and nothing else."""

_STEPS_TASK = """\
Task: review the agent's run in the <run> block (its steps in order, as a JSON array; a step's \
own steps are nested under "steps"), which answered the request in the <request> block with \
the answer in the <answer> block.
{expected}
For every top-level step of the run, in order, say whether the task needed it \
("wasNecessary") and whether it came at a sensible point given what it depends on \
("wasInOrder"), with a short reason. Then list the steps the run should have taken but did \
not ("missingSteps") and the steps that were wasted or repeated for nothing ("extraSteps").

Reply with a JSON object {{"stepEvaluations": [{{"stepName": <string>, "wasNecessary": \
<true|false>, "wasInOrder": <true|false>, "reasoning": <string>}}, ...], "missingSteps": \
[<string>, ...], "extraSteps": [<string>, ...], "overallAssessment": <string>}} and nothing \
else.
"""
_WITH_EXPECTED = """\
The <expected> block lists the steps the run was expected to take, in the expected order (a \
guide: a different but sound order is fine, and steps it does not name may still be needed).
"""
_WITHOUT_EXPECTED = """\
No expected path is given: judge what the request needed from the request itself.
"""

STEPS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "stepEvaluations": {"type": "array", "items": {
            "type": "object",
            "properties": {"stepName": {"type": "string"}, "wasNecessary": {"type": "boolean"},
                           "wasInOrder": {"type": "boolean"}, "reasoning": {"type": "string"}},
            "required": ["stepName", "wasNecessary", "wasInOrder", "reasoning"]}},
        "missingSteps": {"type": "array", "items": {"type": "string"}},
        "extraSteps": {"type": "array", "items": {"type": "string"}},
        "overallAssessment": {"type": "string"},
    },
    "required": ["stepEvaluations", "overallAssessment"],
}


def validate_steps(value: Any) -> dict[str, Any]:
    """The step verdicts reply (booleans must be booleans; the lists may be absent)."""
    problem = _steps_problem(value)
    if problem:
        raise ValueError(problem)
    return dict(value)


def _steps_problem(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "expected a JSON object"
    evaluations = value.get("stepEvaluations")
    if not isinstance(evaluations, list):
        return "'stepEvaluations' must be a list"
    for item in evaluations:
        if not isinstance(item, dict) or not isinstance(item.get("stepName"), str) or \
                not isinstance(item.get("wasNecessary"), bool) or \
                not isinstance(item.get("wasInOrder"), bool):
            return ("each step evaluation needs stepName (a string), wasNecessary and "
                    "wasInOrder (true or false)")
    for key in ("missingSteps", "extraSteps"):
        listed = value.get(key, [])
        if not isinstance(listed, list) or not all(isinstance(s, str) for s in listed):
            return f"'{key}' must be a list of strings"
    if not isinstance(value.get("overallAssessment"), str):
        return "'overallAssessment' must be a string"
    return None


def trajectory_score(analysis: Mapping[str, Any]) -> float:
    """The reference's formula (see the module docstring), rounded as the reference rounds."""
    evaluations = analysis.get("stepEvaluations") or []
    missing = analysis.get("missingSteps") or []
    if not evaluations:
        return 0.0 if missing else 0.5 if analysis.get("extraSteps") else 1.0
    total = len(evaluations)
    necessary = sum(1 for e in evaluations if e["wasNecessary"]) / total
    ordered = sum(1 for e in evaluations if e["wasInOrder"]) / total
    penalty = len(missing) / (total + len(missing)) if missing else 0.0
    return reference_round(max(0.0, min(1.0, necessary * 0.6 + ordered * 0.3 - penalty * 0.1)))


class TrajectoryAccuracyLLMScorer(ScopedScorer, JudgedScorer):
    """An LLM judges the run's path: necessary steps, order, missing and wasted steps."""

    id = "llm-trajectory-accuracy"
    judge_steps = ("analyze", "reason")  # the steps that ask the judge
    name = "Trajectory Accuracy (judged)"
    aliases = ("trajectory-accuracy-llm", "judged-trajectory-accuracy")
    scope = "run"
    factory = "create_trajectory_accuracy_scorer_llm"

    def __init__(self, *, model: str | Judge, expected_trajectory: Any = None,
                 redact_judge_input: bool = True,
                 max_judge_input_chars: int = DEFAULT_MAX_JUDGE_INPUT_CHARS,
                 **judge_kwargs: Any) -> None:
        self.expected = None if expected_trajectory is None else \
            as_expectation(expected_trajectory, "expected_trajectory")
        super().__init__(model=model, redact_judge_input=redact_judge_input,
                         max_judge_input_chars=max_judge_input_chars, **judge_kwargs)

    def label(self, score: float) -> str:
        return "on_track" if score >= 0.8 else "partially_on_track" if score >= 0.5 \
            else "off_track"

    def reference(self, call: ScorerInput) -> str | None:
        return None

    async def preprocess(self, run: JudgedRun, call: ScorerInput) -> dict[str, Any]:
        """The run's steps and the expected steps (code)."""
        steps = expected_steps(self.expected, call.expected_trajectory)
        if steps is None and isinstance(self.judge, OfflineJudge):
            raise run.error(STEP_PREPROCESS, "the offline judge can only check a run against "
                            "an expected trajectory (give the scorer or the item "
                            "expected_trajectory), or give a language model as the judge")
        trajectory = call.trajectory
        prepared = {"actual_steps": [step_json(s) for s in trajectory.steps],
                    "expected_steps": None if steps is None else expected_json(steps),
                    "has_steps": bool(trajectory.steps)}
        run.record(STEP_PREPROCESS, result=prepared)
        return {**prepared, "request": run.judge_text(text_of(call.input, _question)),
                "answer": run.judge_text(text_of(call.output))}

    async def analyze(self, run: JudgedRun, call: ScorerInput,
                      prepared: dict[str, Any]) -> dict[str, Any]:
        """A verdict per step, missing and extra steps (judge)."""
        shown = run.judge_text(json.dumps(prepared["actual_steps"], ensure_ascii=False,
                                          indent=1))
        expected = prepared["expected_steps"]
        prompt = _STEPS_TASK.format(expected=_WITH_EXPECTED if expected else _WITHOUT_EXPECTED)
        prompt += f"\n{_block('request', prepared['request'])}\n\n"
        prompt += f"{_block('answer', prepared['answer'])}\n\n{_block('run', shown)}"
        if expected:
            prompt += "\n\n" + _block("expected", run.judge_text(json.dumps(expected, indent=1)))
        reply = await run.ask(JudgeRequest(
            step=STEP_ANALYZE, task=TASK_STEPS, system=SYSTEM, prompt=prompt,
            schema_name="trajectory_steps", schema=STEPS_SCHEMA, validate=validate_steps,
            data={"run": prepared["actual_steps"], "expected": expected}))
        run.record(STEP_ANALYZE, prompt=reply.prompt, result={**reply.data, **reply.notes})
        return {**reply.data, "request": prepared["request"]}

    def score(self, analysis: dict[str, Any]) -> float:
        return trajectory_score(analysis)

    def reason(self, analysis: dict[str, Any], score: float) -> JudgeRequest:
        verdicts = {k: analysis.get(k) or [] for k in ("stepEvaluations", "missingSteps",
                                                       "extraSteps")}
        prompt = (f"Task: explain in one sentence a trajectory score that has already been "
                  f"computed; do not change it. The score is {format_score(score)} from 0 to 1 "
                  f"(0.6 for the share of necessary steps, 0.3 for the share in order, less "
                  f"up to 0.1 for missing steps). Start with \"The score is "
                  f"{format_score(score)} because\".\n\nReply with a JSON object "
                  f"{{\"reason\": <string>}} and nothing else.\n\n"
                  f"{_block('request', analysis['request'])}\n\n"
                  f"{_block('verdicts', json.dumps(verdicts, ensure_ascii=False, indent=1))}")
        return JudgeRequest(step=STEP_REASON, task=TASK_REASON, system=SYSTEM, prompt=prompt,
                            schema_name="trajectory_reason", schema=REASON_SCHEMA,
                            validate=validate_reason, data={"score": score, **verdicts})


def _question(value: Any) -> str:
    from tracescore.scoring._inputs import question_text

    return question_text(value)


def create_trajectory_accuracy_scorer_llm(*, model: str | Judge, expected_trajectory: Any = None,
                                          **options: Any) -> TrajectoryAccuracyLLMScorer:
    """The reference system's `createTrajectoryAccuracyScorerLLM`: an LLM judges each step of
    the run (necessary? in order?) and the missing steps, against the user's request or an
    `expected_trajectory` (the scorer's, else the item's). Options: redact_judge_input,
    max_judge_input_chars, and the judge's own."""
    return TrajectoryAccuracyLLMScorer(model=model, expected_trajectory=expected_trajectory,
                                       **options)


# --- the offline judge's version (needs the expected steps) -----------------------------------
def _offline_steps(request: JudgeRequest) -> tuple[dict[str, Any], dict[str, Any]]:
    run = as_run(request.data["run"], "run")
    expected = as_expectation(request.data["expected"] or [], "expected").steps or ()
    names = {e.name for e in expected}
    in_order: set[int] = set()
    matched: set[int] = set()
    last = -1
    for i, step in enumerate(expected):  # the relaxed comparison: in order, others allowed
        j = next((j for j in range(last + 1, len(run.steps))
                  if step_matches(run.steps[j], step)), None)
        if j is not None:
            in_order.add(j)
            matched.add(i)
            last = j
    evaluations = [{"stepName": s.name, "wasNecessary": s.name in names,
                    "wasInOrder": j in in_order or s.name not in names,
                    "reasoning": ("an expected step" if s.name in names else
                                  "not among the expected steps")
                    + ("" if j in in_order or s.name not in names else ", out of order")}
                   for j, s in enumerate(run.steps)]
    missing = [e.name for i, e in enumerate(expected) if i not in matched]
    extra = [s.name for s in run.steps if s.name not in names]
    return ({"stepEvaluations": evaluations, "missingSteps": missing, "extraSteps": extra,
             "overallAssessment": f"{len(matched)} of {len(expected)} expected steps taken in "
                                  f"order"},
            {"offline": "compared with the expected steps by name, type and arguments; no "
                        "language model judged what the request needed"})


def _offline_reason(request: JudgeRequest) -> tuple[dict[str, Any], dict[str, Any]]:
    data = request.data
    score = format_score(float(data["score"]))
    steps = data["stepEvaluations"]
    needed = sum(1 for e in steps if e["wasNecessary"])
    text = (f"The score is {score} because {needed} of {len(steps)} steps are expected ones"
            + (f"; missing: {', '.join(data['missingSteps'])}" if data["missingSteps"] else "") + " (offline judge: compared with the expected steps).")
    return {"reason": text}, {}


register_offline_task(TASK_STEPS, _offline_steps)
register_offline_task(TASK_REASON, _offline_reason)


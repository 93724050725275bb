"""Noise sensitivity: how little the agent's answer changed when its query carried noise
(irrelevant, distracting or misleading content), against a clean baseline answer.

analyze (judge: the impact of the noise per dimension, major issues, a robustness score) ->
score (code: the judge's robustness capped by the impact weights when the two disagree, minus
a penalty per major issue; the reference's formula and defaults) -> reason (judge).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import STEP_ANALYZE, ScorerInput
from tracescore.scoring._inputs import InputError, answer_text, question_text
from tracescore.scoring._judge_api import Judge, JudgeRequest
from tracescore.scoring._judged import JudgedRun, JudgedScorer
from tracescore.scoring._options import check_fraction, merge_options
from tracescore.scoring._prompting import Blocks, format_score, reference_round
from tracescore.scoring._reply_fields import band, field, items, reason_request, refuse_offline

TASK_ANALYSIS = "noise_sensitivity.analysis"
TASK_REASON = "noise_sensitivity.reason"
IMPACT_LEVELS = ("none", "minimal", "moderate", "significant", "severe")
# the reference's defaults
DEFAULT_IMPACT_WEIGHTS: dict[str, float] = {"none": 1.0, "minimal": 0.85, "moderate": 0.6,
                                            "significant": 0.3, "severe": 0.1}
DEFAULT_PENALTIES: dict[str, float] = {"major_issue_per_item": 0.1,
                                       "max_major_issue_penalty": 0.3}
DEFAULT_DISCREPANCY_THRESHOLD = 0.2
_PENALTY_ALIASES = {"majorIssuePerItem": "major_issue_per_item",
                    "maxMajorIssuePenalty": "max_major_issue_penalty"}
_SCORING_ALIASES = {"impactWeights": "impact_weights",
                    "discrepancyThreshold": "discrepancy_threshold"}

_block = Blocks("query", "baseline_response", "noisy_query", "noisy_response", "analysis")
SYSTEM = f"""\
You test how robust an AI agent is to noise: irrelevant, distracting or misleading content \
added to its query. You compare the answer it gave to the clean query with the answer it gave \
to the noisy one, and judge how much the noise changed its content, accuracy, focus and \
completeness. Staying on the original question despite the noise is robust; following, \
repeating or being misled by the noise is not.

{_block.declaration()}

Always reply with exactly one JSON object in the shape the task asks for, and nothing else."""

_ANALYSIS = """\
Task: compare the <baseline_response> (the agent's answer to the clean <query>) with the \
<noisy_response> (its answer to the <noisy_query>, which is the query plus noise{noise_type}).

For each dimension ("content accuracy", "completeness", "relevance", "consistency", and any \
other that matters here) give "impactLevel": "none" (no change), "minimal" (slight wording \
changes), "moderate" (some noticeable change of content or focus), "significant" (clearly \
worse or distracted) or "severe" (misled or off track), with "specificChanges" (what changed) \
and "noiseInfluence" (how the noise caused it). List in "majorIssues" the serious problems the \
noise caused (an empty list when none), give "robustnessScore" from 0 (fully derailed) to 1 \
(unaffected) and sum up in "overallAssessment".

Reply with a JSON object {{"dimensions": [{{"dimension": <string>, "impactLevel": <level>, \
"specificChanges": <string>, "noiseInfluence": <string>}}, ...], "majorIssues": [<string>, \
...], "robustnessScore": <number>, "overallAssessment": <string>}} and nothing else.
"""

ANALYSIS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "dimensions": {"type": "array", "items": {"type": "object", "properties": {
            "dimension": {"type": "string"},
            "impactLevel": {"type": "string", "enum": list(IMPACT_LEVELS)},
            "specificChanges": {"type": "string"}, "noiseInfluence": {"type": "string"}},
            "required": ["dimension", "impactLevel", "specificChanges", "noiseInfluence"],
            "additionalProperties": False}},
        "majorIssues": {"type": "array", "items": {"type": "string"}},
        "robustnessScore": {"type": "number"},
        "overallAssessment": {"type": "string"}},
    "required": ["dimensions", "majorIssues", "robustnessScore", "overallAssessment"],
    "additionalProperties": False}


def validate_analysis(value: Any) -> dict[str, Any]:
    """The analyze reply; an impact level outside the five is refused, lists are kept as
    given, `majorIssues` defaults to [] (as in the reference's schema)."""
    dimensions = []
    for i, item in enumerate(items(value, "dimensions")):
        where = f"dimensions[{i}]"
        if not isinstance(item, dict) or item.get("impactLevel") not in IMPACT_LEVELS:
            raise ValueError(f"{where}.impactLevel must be one of {', '.join(IMPACT_LEVELS)}")
        dimensions.append({"dimension": str(item.get("dimension", "")),
                           "impactLevel": item["impactLevel"],
                           "specificChanges": str(item.get("specificChanges", "")),
                           "noiseInfluence": str(item.get("noiseInfluence", ""))})
    issues = value.get("majorIssues", [])
    if not isinstance(issues, list) or not all(isinstance(s, str) for s in issues):
        raise ValueError("majorIssues must be a list of strings")
    assessment = value.get("overallAssessment", "")
    return {"dimensions": dimensions, "majorIssues": issues,
            "robustnessScore": field(value, "robustnessScore", "number", "reply"),
            "overallAssessment": assessment if isinstance(assessment, str) else str(assessment)}


@dataclasses.dataclass(frozen=True)
class NoiseScoring:
    """The score's weights: per impact level, the discrepancy threshold, the major-issue
    penalties (the reference's `scoring` option)."""

    impact_weights: dict[str, float]
    discrepancy_threshold: float
    major_issue_per_item: float
    max_major_issue_penalty: float


def noise_sensitivity_score(analysis: Mapping[str, Any], scoring: NoiseScoring) -> float:
    """The reference's formula, in its float order: the judge's robustness clamped to 0..1;
    when the mean impact weight of the dimensions differs from it by more than the threshold,
    the lower of the two; minus min(issues * per item, max), never below 0. Not scaled."""
    score = max(0.0, min(1.0, analysis["robustnessScore"]))
    dimensions = analysis["dimensions"]
    if dimensions:
        total = 0.0
        for dimension in dimensions:
            total += scoring.impact_weights[dimension["impactLevel"]]
        calculated = total / len(dimensions)
        if abs(score - calculated) > scoring.discrepancy_threshold:
            score = min(score, calculated)
    penalty = min(len(analysis["majorIssues"]) * scoring.major_issue_per_item,
                  scoring.max_major_issue_penalty)
    return reference_round(max(0.0, score - penalty))


class NoiseSensitivityScorer(JudgedScorer):
    """LLM-judged robustness of the answer to a noisy query, against a baseline answer.

    The scored call is the noisy run: its input holds the clean query and its output the
    answer to the noisy query; `baseline_response` (the answer to the clean query) and
    `noisy_query` are options, as in the reference. Scores are 0..1 (no scale option, as in
    the reference). Needs a language model.
    """

    id = "noise-sensitivity"
    name = "Noise Sensitivity"
    factory = "create_noise_sensitivity_scorer"
    judge_steps = ("analyze", "reason")

    def __init__(self, *, model: str | Judge, baseline_response: str, noisy_query: str,
                 noise_type: str | None = None, scoring: Mapping[str, Any] | None = None,
                 **options: Any) -> None:
        for name, value in (("baseline_response", baseline_response),
                            ("noisy_query", noisy_query)):
            if not isinstance(value, str) or not value.strip():
                raise ConfigurationError(f"{name} must be a non-empty string, got {value!r}")
        if noise_type is not None and not isinstance(noise_type, str):
            raise ConfigurationError(f"noise_type must be a string, got {noise_type!r}")
        self.baseline_response, self.noisy_query, self.noise_type = (
            baseline_response, noisy_query, noise_type)
        self.scoring = _check_scoring(scoring)
        if "scale" in options:
            raise ConfigurationError("noise sensitivity has no scale option (its scores are "
                                     "0..1, as in the reference)")
        super().__init__(model=model, **options)

    def check_judge(self, judge: Judge) -> None:
        refuse_offline(judge, "how noise changed an answer")

    def label(self, score: float) -> str:
        return band(score, self.scale, "robust", "partially_robust", "sensitive")

    async def preprocess(self, run: JudgedRun, call: ScorerInput) -> _Noise:
        try:
            query = question_text(call.input)
            response = answer_text(call.output)
        except InputError:
            query = response = ""
        if not query.strip() or not response.strip():
            raise run.error(STEP_ANALYZE, "noise sensitivity needs the call's query (input) and "
                            "its answer to the noisy query (output)")
        return _Noise(run.judge_text(query), run.judge_text(response))

    async def analyze(self, run: JudgedRun, call: ScorerInput, prepared: _Noise) -> _Noise:
        kind = f" of the kind: {self.noise_type}" if self.noise_type else ""
        prompt = _ANALYSIS.format(noise_type=kind) + "\n" + "\n\n".join([
            _block("query", prepared.query),
            _block("baseline_response", run.judge_text(self.baseline_response)),
            _block("noisy_query", run.judge_text(self.noisy_query)),
            _block("noisy_response", prepared.response)])
        reply = await run.ask(JudgeRequest(
            step=STEP_ANALYZE, task=TASK_ANALYSIS, system=SYSTEM, prompt=prompt,
            schema_name="noise_sensitivity_analysis", schema=ANALYSIS_SCHEMA,
            validate=validate_analysis, data={"query": prepared.query}))
        run.record(STEP_ANALYZE, prompt=reply.prompt, result=reply.data)
        return dataclasses.replace(prepared, analysis=reply.data)

    def score(self, analysis: _Noise) -> float:
        return noise_sensitivity_score(analysis.analysis, self.scoring)

    def reason(self, analysis: _Noise, score: float) -> JudgeRequest:
        shown = format_score(score)
        explain = (f"The score is {shown} on a scale from 0 (derailed by the noise) to 1 "
                   f"(unaffected): the judge's robustness score, lowered to the mean impact of "
                   f"the dimensions when the two disagree, minus a penalty per major issue. "
                   f"The analysis is in the <analysis> block. Write one or two plain sentences "
                   f"that start exactly with \"The score is {shown} because\" and say how the "
                   f"noise did or did not change the answer.")
        return reason_request(
            task=TASK_REASON, system=SYSTEM, blocks=_block, explain=explain,
            shown=[("query", analysis.query),
                   ("analysis", json.dumps(analysis.analysis, ensure_ascii=False, indent=1))],
            data={"score": score, "scale": self.scale})


@dataclasses.dataclass(frozen=True)
class _Noise:
    query: str
    response: str
    analysis: dict[str, Any] = dataclasses.field(default_factory=dict)


def _check_scoring(scoring: object) -> NoiseScoring:
    if scoring is None:
        scoring = {}
    if not isinstance(scoring, Mapping):
        raise ConfigurationError(f"scoring must be a mapping, got {scoring!r}")
    merged = merge_options(scoring, {"impact_weights": None, "penalties": None,
                                     "discrepancy_threshold": DEFAULT_DISCREPANCY_THRESHOLD},
                           _SCORING_ALIASES)
    weights = merge_options(merged["impact_weights"] or {}, dict(DEFAULT_IMPACT_WEIGHTS), {})
    penalties = merge_options(merged["penalties"] or {}, dict(DEFAULT_PENALTIES),
                              _PENALTY_ALIASES)
    return NoiseScoring(
        impact_weights={k: check_fraction(f"scoring.impact_weights.{k}", v)
                        for k, v in weights.items()},
        discrepancy_threshold=check_fraction("scoring.discrepancy_threshold",
                                             merged["discrepancy_threshold"]),
        major_issue_per_item=check_fraction("scoring.penalties.major_issue_per_item",
                                            penalties["major_issue_per_item"]),
        max_major_issue_penalty=check_fraction("scoring.penalties.max_major_issue_penalty",
                                               penalties["max_major_issue_penalty"]))


def create_noise_sensitivity_scorer(*, model: str | Judge, baseline_response: str | None = None,
                                    noisy_query: str | None = None,
                                    noise_type: str | None = None,
                                    scoring: Mapping[str, Any] | None = None,
                                    options: Mapping[str, Any] | None = None,
                                    **judge_kwargs: Any) -> NoiseSensitivityScorer:
    """Factory named after the reference system's `createNoiseSensitivityScorerLLM`.

    `options` may carry `baselineResponse`, `noisyQuery`, `noiseType` and `scoring`
    (`impactWeights`, `penalties.majorIssuePerItem`/`maxMajorIssuePenalty`,
    `discrepancyThreshold`; a partial set merges with the defaults), or their snake_case names.
    """
    merged = merge_options(options, {"baseline_response": baseline_response,
                                     "noisy_query": noisy_query, "noise_type": noise_type,
                                     "scoring": scoring},
                           {"baselineResponse": "baseline_response",
                            "noisyQuery": "noisy_query", "noiseType": "noise_type"})
    return NoiseSensitivityScorer(model=model, **merged, **judge_kwargs)

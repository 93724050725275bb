"""Answer similarity: how closely the output matches the ground-truth answer, unit by unit.

preprocess (judge: the semantic units of the output and of the ground truth) -> analyze
(judge: how each ground-truth unit is matched, extra units, contradictions) -> score (code:
the reference's weighted formula and defaults) -> reason (judge: explains the given score).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import STEP_ANALYZE, STEP_PREPROCESS, ScoreResult, ScorerInput
from tracescore.scoring._judge_api import Judge, JudgeRequest
from tracescore.scoring._judged import JudgedRun, JudgedScorer, reference_text
from tracescore.scoring._options import merge_options
from tracescore.scoring._prompting import Blocks, format_score, reference_round
from tracescore.scoring._reply_fields import band, field, items, reason_request, refuse_offline

TASK_UNITS = "answer_similarity.units"
TASK_MATCHES = "answer_similarity.matches"
TASK_REASON = "answer_similarity.reason"
MATCH_TYPES = ("exact", "semantic", "partial", "missing")
_ALIASES = {"requireGroundTruth": "require_ground_truth",
            "semanticThreshold": "semantic_threshold", "exactMatchBonus": "exact_match_bonus",
            "missingPenalty": "missing_penalty", "contradictionPenalty": "contradiction_penalty",
            "extraInfoPenalty": "extra_info_penalty"}
MAX_EXTRA_PENALTY = 0.2  # the reference caps the extra-information penalty here

_block = Blocks("output", "ground_truth", "output_units", "ground_truth_units", "analysis")
SYSTEM = f"""\
You compare an AI agent's answer with the expected (ground-truth) answer, as a test would. \
You judge meaning, not wording: two phrasings of the same fact match. You notice what the \
answer leaves out, what it adds, and where it says the opposite of the expected answer.

{_block.declaration()}

Always reply with exactly one JSON object in the shape the task asks for, and nothing else."""

_UNITS = """\
Task: break the <output> block and the <ground_truth> block each into semantic units: the \
smallest self-contained pieces of information (a fact, a number with its unit, a date, a \
name with its role). Keep each unit understandable alone; do not split a phrase whose parts \
mean nothing apart. An empty text gives an empty list.

Example: "Paris is the capital of France and has 2.1 million people." gives the units \
["Paris is the capital of France", "Paris has 2.1 million people"].

Reply with a JSON object {"outputUnits": [<string>, ...], "groundTruthUnits": [<string>, \
...]} and nothing else.
"""

_MATCHES = """\
Task: for each unit in the <ground_truth_units> block (a JSON array), find how the units in \
the <output_units> block cover it:
- "exact": an output unit says the same thing in (nearly) the same words;
- "semantic": an output unit says the same thing in other words;
- "partial": an output unit covers part of it, or says it less precisely;
- "missing": no output unit covers it (its "outputUnit" is null).
Then list in "extraInOutput" the output units that cover no ground-truth unit, and in \
"contradictions" each output unit that states the opposite of a ground-truth unit.

Reply with a JSON object {"matches": [{"groundTruthUnit": <string>, "outputUnit": <string or \
null>, "matchType": "exact" | "semantic" | "partial" | "missing", "explanation": <string>}, \
...], "extraInOutput": [<string>, ...], "contradictions": [{"outputUnit": <string>, \
"groundTruthUnit": <string>, "explanation": <string>}, ...]} and nothing else: one match per \
ground-truth unit, in order.
"""

UNITS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"outputUnits": {"type": "array", "items": {"type": "string"}},
                   "groundTruthUnits": {"type": "array", "items": {"type": "string"}}},
    "required": ["outputUnits", "groundTruthUnits"], "additionalProperties": False}
_PAIR = {"type": "object", "properties": {
    "outputUnit": {"type": "string"}, "groundTruthUnit": {"type": "string"},
    "explanation": {"type": "string"}},
    "required": ["outputUnit", "groundTruthUnit", "explanation"], "additionalProperties": False}
MATCHES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "matches": {"type": "array", "items": {"type": "object", "properties": {
            "groundTruthUnit": {"type": "string"},
            "outputUnit": {"type": ["string", "null"]},
            "matchType": {"type": "string", "enum": list(MATCH_TYPES)},
            "explanation": {"type": "string"}},
            "required": ["groundTruthUnit", "outputUnit", "matchType", "explanation"],
            "additionalProperties": False}},
        "extraInOutput": {"type": "array", "items": {"type": "string"}},
        "contradictions": {"type": "array", "items": _PAIR}},
    "required": ["matches", "extraInOutput", "contradictions"], "additionalProperties": False}


def validate_units(value: Any) -> dict[str, Any]:
    """The preprocess reply: both unit lists, kept as given."""
    return {key: field(value, key, "strings", "reply") for key in ("outputUnits",
                                                                   "groundTruthUnits")}


def validate_matches(value: Any) -> dict[str, Any]:
    """The analyze reply; a match type outside the four is refused (the reference's schema
    refuses it too). Every list is counted as given: blank entries stay."""
    matches = []
    for i, item in enumerate(items(value, "matches")):
        where = f"matches[{i}]"
        if not isinstance(item, dict) or item.get("matchType") not in MATCH_TYPES:
            raise ValueError(f"{where}.matchType must be one of {', '.join(MATCH_TYPES)}")
        unit = item.get("outputUnit")
        if unit is not None and not isinstance(unit, str):
            raise ValueError(f"{where}.outputUnit must be a string or null")
        matches.append({"groundTruthUnit": field(item, "groundTruthUnit", "str", where),
                        "outputUnit": unit, "matchType": item["matchType"],
                        "explanation": str(item.get("explanation", ""))})
    contradictions = items(value, "contradictions")
    if not all(isinstance(c, dict) for c in contradictions):
        raise ValueError("every item of 'contradictions' must be an object")
    return {"matches": matches, "extraInOutput": field(value, "extraInOutput", "strings", "reply"),
            "contradictions": contradictions}


def answer_similarity_score(analysis: Mapping[str, Any], options: Mapping[str, Any]) -> float:
    """The reference's formula, in its float order: exact 1 + bonus, semantic threshold,
    partial threshold / 2, missing minus the penalty, over n * (1 + bonus); minus the
    contradiction penalty each and the extra-information penalty each (at most 0.2); clamped
    to 0..1, times the scale. No matches: 0."""
    matches = analysis["matches"]
    if not matches:
        return 0.0
    bonus, threshold = options["exact_match_bonus"], options["semantic_threshold"]
    score = 0.0
    for match in matches:
        kind = match["matchType"]
        if kind == "exact":
            score += 1 + bonus
        elif kind == "semantic":
            score += threshold
        elif kind == "partial":
            score += threshold * 0.5
        elif kind == "missing":
            score -= options["missing_penalty"]
    score = score / (len(matches) * (1 + bonus))
    score -= len(analysis["contradictions"]) * options["contradiction_penalty"]
    score -= min(len(analysis["extraInOutput"]) * options["extra_info_penalty"],
                 MAX_EXTRA_PENALTY)
    return reference_round(max(0.0, min(1.0, score)) * options["scale"])


class AnswerSimilarityScorer(JudgedScorer):
    """LLM-judged similarity of the output to the ground truth (the reference's formula).

    Without a ground truth the run fails (`require_ground_truth=True`, the default) or scores
    0 without asking the judge. The offline judge cannot judge meaning: give a language model.
    """

    id = "answer-similarity"
    name = "Answer Similarity"
    factory = "create_answer_similarity_scorer"

    def __init__(self, *, model: str | Judge, require_ground_truth: bool = True,
                 semantic_threshold: float = 0.8, exact_match_bonus: float = 0.2,
                 missing_penalty: float = 0.15, contradiction_penalty: float = 1.0,
                 extra_info_penalty: float = 0.05, scale: float = 1, **options: Any) -> None:
        if not isinstance(require_ground_truth, bool):
            raise ConfigurationError(f"require_ground_truth must be True or False, got "
                                     f"{require_ground_truth!r}")
        self.require_ground_truth = require_ground_truth
        weights = {"semantic_threshold": semantic_threshold,
                   "exact_match_bonus": exact_match_bonus, "missing_penalty": missing_penalty,
                   "contradiction_penalty": contradiction_penalty,
                   "extra_info_penalty": extra_info_penalty}
        for name, value in weights.items():
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not math.isfinite(value) or value < 0):
                raise ConfigurationError(f"{name} must be a finite number >= 0, got {value!r}")
        self.weights = weights
        super().__init__(model=model, scale=scale, **options)

    def check_judge(self, judge: Judge) -> None:
        refuse_offline(judge, "whether two answers mean the same")

    def label(self, score: float) -> str:
        return band(score, self.scale, "similar", "partially_similar", "dissimilar")

    async def preprocess(self, run: JudgedRun, call: ScorerInput) -> _Units | ScoreResult:
        truth = reference_text(call.ground_truth)
        if truth is None:
            if self.require_ground_truth:
                raise run.error(STEP_PREPROCESS, "answer similarity needs a ground truth (or "
                                "require_ground_truth=False, which scores 0 without one)")
            run.record(STEP_PREPROCESS, result={"outputUnits": [], "groundTruthUnits": [],
                                                "skipped": "no ground truth: the judge was not "
                                                           "called"})
            run.record(STEP_ANALYZE, result={"matches": [], "extraInOutput": [],
                                             "contradictions": []})
            return run.result(
                0.0, "The score is 0 because no ground truth was given to compare the output with "
                "(the judge was not called).")
        output, truth = run.output_text(call.output), run.judge_text(truth)
        reply = await run.ask(JudgeRequest(
            step=STEP_PREPROCESS, task=TASK_UNITS, system=SYSTEM,
            prompt=f"{_UNITS}\n{_block('output', output)}\n\n{_block('ground_truth', truth)}",
            schema_name="answer_similarity_units", schema=UNITS_SCHEMA, validate=validate_units,
            data={"output": output, "ground_truth": truth}))
        run.record(STEP_PREPROCESS, prompt=reply.prompt, result=reply.data)
        return _Units(output, truth, reply.data)

    async def analyze(self, run: JudgedRun, call: ScorerInput, prepared: _Units) -> _Units:
        units = prepared.units
        prompt = (f"{_MATCHES}\n"
                  f"{_block('output_units', json.dumps(units['outputUnits'], indent=1))}\n\n"
                  f"{_block('ground_truth_units', json.dumps(units['groundTruthUnits'], indent=1))}")
        reply = await run.ask(JudgeRequest(
            step=STEP_ANALYZE, task=TASK_MATCHES, system=SYSTEM, prompt=prompt,
            schema_name="answer_similarity_matches", schema=MATCHES_SCHEMA,
            validate=validate_matches, data=dict(units)))
        run.record(STEP_ANALYZE, prompt=reply.prompt, result=reply.data)
        return dataclasses.replace(prepared, analysis=reply.data)

    def score(self, analysis: _Units) -> float:
        return answer_similarity_score(analysis.analysis, {**self.weights, "scale": self.scale})

    def reason(self, analysis: _Units, score: float) -> JudgeRequest:
        w = self.weights
        explain = (
            f"The score is {format_score(score)} on a scale from 0 to {format_score(self.scale)}. "
            f"Each ground-truth unit counts: exact match 1 + {format_score(w['exact_match_bonus'])}"
            f", semantic match {format_score(w['semantic_threshold'])}, partial match half of "
            f"that, missing minus {format_score(w['missing_penalty'])}; the sum is divided by the "
            f"most it could be; each contradiction takes {format_score(w['contradiction_penalty'])}"
            f" off and each extra unit {format_score(w['extra_info_penalty'])} (at most 0.2). The "
            f"analysis is in the <analysis> block. Write one or two plain sentences that start "
            f"exactly with \"The score is {format_score(score)} because\" and say what matched, "
            f"what was missing, added or contradicted.")
        shown = json.dumps(analysis.analysis, ensure_ascii=False, indent=1)
        return reason_request(task=TASK_REASON, system=SYSTEM, blocks=_block, explain=explain,
                              shown=[("output", analysis.output),
                                     ("ground_truth", analysis.truth), ("analysis", shown)],
                              data={"score": score, "scale": self.scale})


@dataclasses.dataclass(frozen=True)
class _Units:
    output: str
    truth: str
    units: dict[str, Any]
    analysis: dict[str, Any] = dataclasses.field(default_factory=dict)


def create_answer_similarity_scorer(*, model: str | Judge, require_ground_truth: bool = True,
                                    semantic_threshold: float = 0.8,
                                    exact_match_bonus: float = 0.2,
                                    missing_penalty: float = 0.15,
                                    contradiction_penalty: float = 1.0,
                                    extra_info_penalty: float = 0.05, scale: float = 1,
                                    options: Mapping[str, Any] | None = None,
                                    **judge_kwargs: Any) -> AnswerSimilarityScorer:
    """Factory named after the reference system's `createAnswerSimilarityScorer`.

    `options` may carry `requireGroundTruth`, `semanticThreshold`, `exactMatchBonus`,
    `missingPenalty`, `contradictionPenalty`, `extraInfoPenalty`, `scale` (or their snake_case
    names); a partial set merges with the defaults, as in the reference.
    """
    merged = merge_options(options, {
        "require_ground_truth": require_ground_truth, "semantic_threshold": semantic_threshold,
        "exact_match_bonus": exact_match_bonus, "missing_penalty": missing_penalty,
        "contradiction_penalty": contradiction_penalty, "extra_info_penalty": extra_info_penalty,
        "scale": scale}, _ALIASES)
    return AnswerSimilarityScorer(model=model, **merged, **judge_kwargs)

"""Prompt alignment: how well the answer follows the user's prompt and/or the system prompt.

analyze (judge: intent, requirements, completeness and appropriateness, each scored 0..1) ->
score (code: the reference's weighted sum for the evaluation mode) -> reason (judge).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import STEP_ANALYZE, ScorerInput
from tracescore.scoring._inputs import (
    InputError,
    answer_text,
    earlier_turns,
    question_text,
    system_text,
)
from tracescore.scoring._judge_api import Judge, JudgeRequest
from tracescore.scoring._judged import JudgedRun, JudgedScorer
from tracescore.scoring._options import merge_options
from tracescore.scoring._prompting import Blocks, format_score, reference_round
from tracescore.scoring._reply_fields import band, field, items, reason_request, refuse_offline

TASK_ANALYSIS = "prompt_alignment.analysis"
TASK_REASON = "prompt_alignment.reason"
MODES = ("user", "system", "both")
DEFAULT_HISTORY_MESSAGES = 10  # the reference's default when history is on
# the reference's weights of intent, requirements, completeness and appropriateness
USER_WEIGHTS = (0.4, 0.3, 0.2, 0.1)
SYSTEM_WEIGHTS = (0.35, 0.35, 0.15, 0.15)
BOTH_WEIGHTS = (0.7, 0.3)  # user part, system part

_block = Blocks("conversation", "user_prompt", "system_prompt", "response", "analysis")
SYSTEM = f"""\
You judge how well an AI agent's response aligns with what it was asked: the intent of the \
prompt, its explicit and implicit requirements, completeness, and whether format and tone fit. \
You judge alignment with the prompt, not general quality.

{_block.declaration()}

Always reply with exactly one JSON object in the shape the task asks for, and nothing else."""

_FOCUS = {
    "user": "the user's prompt in the <user_prompt> block",
    "system": "the system prompt in the <system_prompt> block (the agent's instructions: "
              "role, rules, constraints, format); judge compliance with it",
    "both": "the user's prompt in the <user_prompt> block and the system prompt in the "
            "<system_prompt> block (the agent's instructions), both together",
}

_ANALYSIS = """\
Task: judge how well the <response> block aligns with {focus}.{history}

Give each dimension a score from 0 (completely misaligned) to 1 (perfectly aligned):
- "intentAlignment": the primary intent, whether the response addresses it, and its score;
- "requirementsFulfillment": every explicit or implicit requirement, each fulfilled or not, \
and an "overallScore";
- "completeness": how complete the response is and the elements it misses;
- "responseAppropriateness": whether format and tone fit the request, and its score.
Then sum up in "overallAssessment".

Reply with a JSON object {{"intentAlignment": {{"score": <number>, "primaryIntent": <string>, \
"isAddressed": true | false, "reasoning": <string>}}, "requirementsFulfillment": \
{{"requirements": [{{"requirement": <string>, "isFulfilled": true | false, "reasoning": \
<string>}}, ...], "overallScore": <number>}}, "completeness": {{"score": <number>, \
"missingElements": [<string>, ...], "reasoning": <string>}}, "responseAppropriateness": \
{{"score": <number>, "formatAlignment": true | false, "toneAlignment": true | false, \
"reasoning": <string>}}, "overallAssessment": <string>}} and nothing else.
"""

_SCORE = {"type": "number", "minimum": 0, "maximum": 1}
_TEXT = {"type": "string"}
_BOOL = {"type": "boolean"}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


ANALYSIS_SCHEMA: dict[str, Any] = _object({
    "intentAlignment": _object({"score": _SCORE, "primaryIntent": _TEXT, "isAddressed": _BOOL,
                                "reasoning": _TEXT}),
    "requirementsFulfillment": _object({
        "requirements": {"type": "array", "items": _object({
            "requirement": _TEXT, "isFulfilled": _BOOL, "reasoning": _TEXT})},
        "overallScore": _SCORE}),
    "completeness": _object({"score": _SCORE, "missingElements": {"type": "array",
                                                                  "items": _TEXT},
                             "reasoning": _TEXT}),
    "responseAppropriateness": _object({"score": _SCORE, "formatAlignment": _BOOL,
                                        "toneAlignment": _BOOL, "reasoning": _TEXT}),
    "overallAssessment": _TEXT})


def validate_analysis(value: Any) -> dict[str, Any]:
    """The analyze reply: the four dimension scores must be numbers from 0 to 1 (a number
    outside is refused; the reference would score with it); the rest is kept as given."""
    if not isinstance(value, dict):
        raise ValueError("expected an object")  # noqa: TRY004
    parts = {}
    for key, score_key in (("intentAlignment", "score"),
                           ("requirementsFulfillment", "overallScore"),
                           ("completeness", "score"), ("responseAppropriateness", "score")):
        part = field(value, key, "object", "reply")
        field(part, score_key, "fraction", key)
        parts[key] = part
    items(parts["requirementsFulfillment"], "requirements")
    assessment = value.get("overallAssessment", "")
    return {**parts, "overallAssessment": assessment if isinstance(assessment, str)
            else str(assessment)}


def prompt_alignment_score(analysis: Mapping[str, Any], mode: str, scale: float = 1) -> float:
    """The reference's weighted sum, in its float order: intent, requirements, completeness and
    appropriateness weighted 0.4/0.3/0.2/0.1 ("user") or 0.35/0.35/0.15/0.15 ("system");
    "both" is 0.7 * u + 0.3 * u of the user-weighted sum u (the reference scores the system
    part with the user weights too); times `scale`, rounded as the reference rounds."""
    scores = (analysis["intentAlignment"]["score"],
              analysis["requirementsFulfillment"]["overallScore"],
              analysis["completeness"]["score"], analysis["responseAppropriateness"]["score"])

    def weighted(weights: tuple[float, ...]) -> float:
        total = scores[0] * weights[0]
        for score, weight in zip(scores[1:], weights[1:], strict=True):
            total += score * weight
        return total

    if mode == "system":
        value = weighted(SYSTEM_WEIGHTS)
    else:
        value = weighted(USER_WEIGHTS)
        if mode == "both":
            value = value * BOTH_WEIGHTS[0] + value * BOTH_WEIGHTS[1]
    return reference_round(value * scale)


class PromptAlignmentScorer(JudgedScorer):
    """LLM-judged alignment of the answer with the user's prompt, the system prompt or both.

    The user prompt is the input's last user message; the system prompt its system messages.
    `include_conversation_history` (True, or `{"max_messages": n}`, default 10) shows the judge
    the earlier user and assistant messages of the input. Needs a language model.
    """

    id = "prompt-alignment"
    name = "Prompt Alignment"
    factory = "create_prompt_alignment_scorer"
    judge_steps = ("analyze", "reason")

    def __init__(self, *, model: str | Judge, scale: float = 1, evaluation_mode: str = "both",
                 include_conversation_history: bool | Mapping[str, Any] = False,
                 **options: Any) -> None:
        if evaluation_mode not in MODES:
            raise ConfigurationError(f"evaluation_mode must be one of {', '.join(MODES)}, got "
                                     f"{evaluation_mode!r}")
        self.evaluation_mode = evaluation_mode
        self.history_messages = _check_history(include_conversation_history)
        super().__init__(model=model, scale=scale, **options)

    def check_judge(self, judge: Judge) -> None:
        refuse_offline(judge, "how an answer follows its prompt")

    def label(self, score: float) -> str:
        return band(score, self.scale, "aligned", "partially_aligned", "misaligned")

    async def preprocess(self, run: JudgedRun, call: ScorerInput) -> _Prompt:
        try:
            user = question_text(call.input)
        except InputError:
            user = ""  # a system prompt alone may do
        try:
            system, response = system_text(call.input), answer_text(call.output)
            turns = earlier_turns(call.input, self.history_messages or 0)
        except InputError as exc:
            raise run.error(STEP_ANALYZE, str(exc)) from exc
        mode = self.evaluation_mode
        missing = ("a user prompt" if mode == "user" and not user.strip() else
                   "a system prompt" if mode == "system" and not system.strip() else
                   "a user or a system prompt" if not (user.strip() or system.strip()) else
                   "a response" if not response.strip() else None)
        if missing:
            raise run.error(STEP_ANALYZE, f"prompt alignment ({mode} mode) needs {missing}")
        conversation = "\n".join(f"{role}: {text}" for role, text in turns)
        return _Prompt(run.judge_text(user), run.judge_text(system), run.judge_text(response),
                       run.judge_text(conversation))

    async def analyze(self, run: JudgedRun, call: ScorerInput, prepared: _Prompt) -> _Prompt:
        history = (" The <conversation> block holds the conversation before the prompt; use it "
                   "to understand short or referring prompts." if prepared.conversation else "")
        prompt = _ANALYSIS.format(focus=_FOCUS[self.evaluation_mode], history=history)
        shown = [("conversation", prepared.conversation)] if prepared.conversation else []
        if self.evaluation_mode != "system" or prepared.user:
            shown.append(("user_prompt", prepared.user))
        if self.evaluation_mode != "user" and prepared.system:
            shown.append(("system_prompt", prepared.system))
        shown.append(("response", prepared.response))
        prompt += "\n" + "\n\n".join(_block(tag, body) for tag, body in shown)
        reply = await run.ask(JudgeRequest(
            step=STEP_ANALYZE, task=TASK_ANALYSIS, system=SYSTEM, prompt=prompt,
            schema_name="prompt_alignment_analysis", schema=ANALYSIS_SCHEMA,
            validate=validate_analysis, data={"user_prompt": prepared.user,
                                              "system_prompt": prepared.system}))
        run.record(STEP_ANALYZE, prompt=reply.prompt, result=reply.data)
        return dataclasses.replace(prepared, analysis=reply.data)

    def score(self, analysis: _Prompt) -> float:
        return prompt_alignment_score(analysis.analysis, self.evaluation_mode, self.scale)

    def reason(self, analysis: _Prompt, score: float) -> JudgeRequest:
        shown = format_score(score)
        weights = SYSTEM_WEIGHTS if self.evaluation_mode == "system" else USER_WEIGHTS
        explain = (f"The score is {shown} on a scale from 0 to {format_score(self.scale)}: the "
                   f"dimension scores in the <analysis> block weighted "
                   f"{'/'.join(format_score(w) for w in weights)} (intent, requirements, "
                   f"completeness, appropriateness), times the scale. Write one or two plain "
                   f"sentences that start exactly with \"The score is {shown} because\" and say "
                   f"what the response did and did not do of what was asked.")
        return reason_request(
            task=TASK_REASON, system=SYSTEM, blocks=_block, explain=explain,
            shown=[("user_prompt", analysis.user),
                   ("analysis", json.dumps(analysis.analysis, ensure_ascii=False, indent=1))],
            data={"score": score, "scale": self.scale})


@dataclasses.dataclass(frozen=True)
class _Prompt:
    user: str
    system: str
    response: str
    conversation: str
    analysis: dict[str, Any] = dataclasses.field(default_factory=dict)


def _check_history(option: object) -> int | None:
    """How many earlier messages the judge sees (None: history is off)."""
    if option is False or option is None:
        return None
    if option is True:
        return DEFAULT_HISTORY_MESSAGES
    if isinstance(option, Mapping) and set(option) <= {"max_messages", "maxMessages"}:
        limit = option.get("max_messages", option.get("maxMessages", DEFAULT_HISTORY_MESSAGES))
        if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1:
            return limit
    raise ConfigurationError(f"include_conversation_history must be True, False or "
                             f"{{'max_messages': n >= 1}}, got {option!r}")


def create_prompt_alignment_scorer(*, model: str | Judge, scale: float = 1,
                                   evaluation_mode: str = "both",
                                   include_conversation_history: bool | Mapping[str, Any] = False,
                                   options: Mapping[str, Any] | None = None,
                                   **judge_kwargs: Any) -> PromptAlignmentScorer:
    """Factory named after the reference system's `createPromptAlignmentScorerLLM`.

    `options` may carry `scale`, `evaluationMode` ("user", "system" or "both", the default)
    and `includeConversationHistory`, or their snake_case names.
    """
    merged = merge_options(options, {"scale": scale, "evaluation_mode": evaluation_mode,
                                     "include_conversation_history": include_conversation_history},
                           {"evaluationMode": "evaluation_mode",
                            "includeConversationHistory": "include_conversation_history"})
    return PromptAlignmentScorer(model=model, **merged, **judge_kwargs)

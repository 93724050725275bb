"""Multi-turn judge: does a whole conversation meet one criterion written in plain words?

analyze (judge: satisfied or not, and why) -> score (code: `scale` when satisfied, else 0, as
the reference system's `createMultiTurnJudgeScorer`) -> reason (code: the verdict, the
criterion, and the judge's explanation).

The judge reads every turn of the conversation, the user's messages as well as the agent's
answers (the reference shows its judge the agent's answers only, so a "Yes, bring one." cannot
be judged there). Turns the agent answered without text are left out. The transcript goes in a
data block the judge is told never to take instructions from. The offline judge is refused: a
criterion of your own needs a language model.
"""

from __future__ import annotations

import json
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import STEP_ANALYZE, ScorerInput
from tracescore.scoring._inputs import question_text
from tracescore.scoring._judge_api import Judge, JudgeRequest
from tracescore.scoring._judge_input import DEFAULT_MAX_JUDGE_INPUT_CHARS
from tracescore.scoring._judged import JudgedRun, JudgedScorer
from tracescore.scoring._offline import OfflineJudge
from tracescore.scoring._prompting import Blocks
from tracescore.scoring._scoped import ScopedScorer, conversation_turns, text_of

TASK_VERDICT = "multi_turn.verdict"
_block = Blocks("conversation")

SYSTEM = f"""\
You grade whole conversations between a user and an AI agent against one criterion, strictly: \
the criterion is satisfied only when the conversation, taken as a whole, clearly and fully \
meets it. Evidence may be spread over several turns. Judge only what was actually said; do not \
reward effort, intent or partial progress, and when in doubt it is not satisfied.

{_block.declaration()}

Always reply with exactly one JSON object in the shape the task asks for, and nothing else."""

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"satisfied": {"type": "boolean"}, "reasoning": {"type": "string"}},
    "required": ["satisfied", "reasoning"],
}


def validate_verdict(value: Any) -> dict[str, Any]:
    """`{"satisfied": true | false, "reasoning": str}`."""
    ok = isinstance(value, dict) and isinstance(value.get("satisfied"), bool) \
        and isinstance(value.get("reasoning"), str)
    if not ok:
        raise ValueError("expected {\"satisfied\": true | false, \"reasoning\": <string>}")
    return {"satisfied": value["satisfied"], "reasoning": value["reasoning"]}


class MultiTurnJudgeScorer(ScopedScorer, JudgedScorer):
    """An LLM grades a whole conversation against `criterion`: `scale` if met, else 0."""

    id = "multi-turn-judge"
    judge_steps = ("analyze",)  # the steps that ask the judge
    name = "Multi-turn Judge"
    aliases = ("multi-turn",)
    scope = "conversation"
    factory = "create_multi_turn_judge_scorer"

    def __init__(self, *, model: str | Judge, criterion: str, scale: float = 1,
                 redact_judge_input: bool = True,
                 max_judge_input_chars: int = DEFAULT_MAX_JUDGE_INPUT_CHARS,
                 **judge_kwargs: Any) -> None:
        if not isinstance(criterion, str) or not criterion.strip():
            raise ConfigurationError(f"criterion must be a non-empty string (what the "
                                     f"conversation must satisfy), got {criterion!r}")
        self.criterion = criterion.strip()
        super().__init__(model=model, scale=scale, redact_judge_input=redact_judge_input,
                         max_judge_input_chars=max_judge_input_chars, **judge_kwargs)
        if isinstance(self.judge, OfflineJudge):
            raise ConfigurationError(
                f"model: the offline judge ({self.judge.model}) cannot grade a conversation "
                f"against a criterion (it has no language model); give a litellm model "
                f"string, e.g. model='openai/gpt-4o-mini', or a Judge object")

    def label(self, score: float) -> str:
        return "satisfied" if score > 0 else "not_satisfied"

    def reference(self, call: ScorerInput) -> str | None:
        return None

    async def analyze(self, run: JudgedRun, call: ScorerInput, prepared: None) -> dict[str, Any]:
        """One judge call on the whole transcript."""
        transcript = []
        for turn in conversation_turns(call):
            user = text_of(turn.input, question_text).strip()
            agent = text_of(turn.output).strip()
            if user:
                transcript.append({"user": user})
            if agent:  # a turn answered with tool calls only has no text to judge
                transcript.append({"agent": agent})
        shown = run.judge_text(json.dumps(transcript, ensure_ascii=False, indent=1))
        prompt = ("Task: decide whether the conversation in the <conversation> block (a JSON "
                  "array of the user's messages and the agent's answers, in order) satisfies "
                  "the criterion below, taken as a whole. Say which turns satisfy it or what is "
                  "missing.\n\nCriterion:\n---\n" + self.criterion + "\n---\n\nReply with a "
                  "JSON object {\"satisfied\": true | false, \"reasoning\": <one or two "
                  "sentences>} and nothing else.\n\n" + _block("conversation", shown))
        reply = await run.ask(JudgeRequest(
            step=STEP_ANALYZE, task=TASK_VERDICT, system=SYSTEM, prompt=prompt,
            schema_name="multi_turn_verdict", schema=VERDICT_SCHEMA, validate=validate_verdict,
            data={"criterion": self.criterion, "transcript": transcript}))
        run.record(STEP_ANALYZE, prompt=reply.prompt, result=dict(reply.data))
        return reply.data

    def score(self, analysis: dict[str, Any]) -> float:
        return float(self.scale) if analysis["satisfied"] else 0.0

    def reason(self, analysis: dict[str, Any], score: float) -> str:
        verdict = "Criterion met" if analysis["satisfied"] else "Criterion not met"
        why = analysis["reasoning"].strip() or "(the judge gave no reasoning)"
        return f"{verdict}: {self.criterion}\n{why}"


def create_multi_turn_judge_scorer(*, model: str | Judge, criterion: str, scale: float = 1,
                                   **options: Any) -> MultiTurnJudgeScorer:
    """The reference system's `createMultiTurnJudgeScorer`: an LLM grades the whole
    conversation (every turn) against `criterion`; the score is `scale` when it is met, else 0.
    Options: redact_judge_input, max_judge_input_chars, and the judge's own."""
    return MultiTurnJudgeScorer(model=model, criterion=criterion, scale=scale, **options)

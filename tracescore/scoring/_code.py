"""The shared shape of scorers that compute without a judge: a pure `run()` that `arun()` calls,
and the two texts they compare (the output with the ground truth, or with the input)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracescore._exceptions import ScorerError
from tracescore.scoring._base import (
    STEP_PREPROCESS,
    JudgeUsage,
    Scorer,
    ScoreResult,
    ScorerInput,
    ToolCall,
    overrides,
)
from tracescore.scoring._inputs import InputError, answer_text, question_text

NO_JUDGE = JudgeUsage(model=None)  # frozen, so one instance serves every result


class CodeScorer(Scorer):
    """A scorer whose `run()` is pure computation (no judge, no event loop): `arun` and
    `evaluate` call it."""

    uses_judge = False

    def _texts(self, input: Any, output: Any, ground_truth: Any,
               run_id: str) -> tuple[str, str, str]:
        """(reference text, output text, what the reference is: "input" or "ground_truth");
        unusable values raise a ScorerError at the preprocess step."""
        compared_with = "input" if ground_truth is None else "ground_truth"
        try:
            reference = question_text(input) if ground_truth is None else answer_text(ground_truth)
            answer = answer_text(output)
        except InputError as exc:
            raise ScorerError(str(exc), scorer_id=self.id, step=STEP_PREPROCESS,
                              partial={"run_id": run_id}) from exc
        if ground_truth is None and not reference.strip() and not isinstance(input, str | None):
            # chat messages or an object without a question (only tool returns, say): comparing
            # with nothing would report 0, a score the call never earned
            raise ScorerError("the input has no question text and there is no ground truth to "
                              "compare the output with", scorer_id=self.id, step=STEP_PREPROCESS,
                              partial={"run_id": run_id})
        return reference, answer, compared_with

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None, tool_calls: Sequence[ToolCall] = (),
                   context: Sequence[str] = ()) -> ScoreResult:
        return self.run(input=input, output=output, ground_truth=ground_truth, run_id=run_id,
                        tool_calls=tool_calls, context=context)

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        if overrides(self, "arun", CodeScorer):  # a subclass that scores in its own `arun`
            return await super().evaluate(call)
        return self.run(input=call.input, output=call.output, ground_truth=call.ground_truth,
                        run_id=call.run_id, tool_calls=call.tool_calls, context=call.context)

"""A conversation scorer without a judge for the conversation-scope tests (importable by a
gateway process as `_conversation_scorers:TurnCounter`): the score is the number of turns it
saw, the reason their questions in order."""

from __future__ import annotations

from tracescore.scoring._base import Scorer, ScoreResult, ScorerInput
from tracescore.scoring._inputs import InputError, question_text


def _question(value: object) -> str:
    try:
        return question_text(value)
    except InputError:
        return str(value)


class TurnCounter(Scorer):
    id = "turn-counter"
    name = "Turn counter"
    uses_judge = False
    scope = "conversation"

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        return ScoreResult(run_id=call.run_id or "", scorer_id=self.id, scorer_name=self.name,
                           score=float(len(call.turns)),
                           reason=" | ".join(_question(t.input) for t in call.turns))

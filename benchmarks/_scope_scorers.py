"""A conversation scorer without a judge for `bench_scopes.py` (importable by name, so it can
be pickled): the score is the number of turns it saw."""

from __future__ import annotations

from tracescore.scoring import Scorer, ScoreResult, ScorerInput


class TurnCount(Scorer):
    id = "turn-count"
    name = "Turn count"
    uses_judge = False
    scope = "conversation"

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        return ScoreResult(run_id=call.run_id or "", scorer_id=self.id, scorer_name=self.name,
                           score=float(len(call.turns)))

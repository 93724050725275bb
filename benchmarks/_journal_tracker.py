"""Run by bench_conversation_journal.py under a checkout's PYTHONPATH: the gateway's conversation
tracker over its journal, in process, taking turns under and at `max_conversations`; prints JSON
(turns/s for each phase).

    python _journal_tracker.py BOUND AT SYNC   # AT: new conversations sent at the bound"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tracescore import OnlineScorer
from tracescore.gateway._journal import Journal
from tracescore.instrument._calls import AgentCall
from tracescore.online._conversations import ConversationOptions, ConversationTracker
from tracescore.scoring._base import Scorer, ScoreResult


class TurnCounter(Scorer):
    id = "turn-counter"
    name = "Turn counter"
    uses_judge = False
    scope = "conversation"

    async def evaluate(self, call: Any) -> ScoreResult:
        return ScoreResult(run_id="", scorer_id=self.id, scorer_name=self.name, score=1.0)


def main(bound: int, at_bound: int, sync: str, turns_each: int = 3, per_tick: int = 500
         ) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        journal = Journal(Path(tmp) / "journal.db", sync=sync)
        tracker = ConversationTracker(
            [OnlineScorer(TurnCounter())],
            ConversationOptions(quiet_s=600, max_conversations=bound),
            score=lambda version, sampled: None, store=journal, max_pending=10 ** 9)
        trace = [0]

        def phase(conversations: range) -> float:
            start = time.perf_counter()
            for index, c in enumerate(c for c in conversations for _ in range(turns_each)):
                trace[0] += 1
                call = AgentCall(span=None, name="geo",  # type: ignore[arg-type]
                                 input=f"question {trace[0]} of chat {c}?", output="An answer.")
                tracker.offer(call, {"session.id": f"chat-{c}"}, trace[0], 1, trace[0])
                if index % per_tick == per_tick - 1:
                    tracker.expire()  # the timer's tick
            tracker.expire()
            return len(conversations) * turns_each / (time.perf_counter() - start)

        under = phase(range(bound))
        at = phase(range(bound, bound + at_bound))
        journal.close()
    print(json.dumps({"under": under, "at": at}))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])

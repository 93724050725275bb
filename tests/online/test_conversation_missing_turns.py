"""A conversation's result says how many of its turns it did not see: turns dropped under load
(the offer queue full) and turns let go by a bound before a later version. Generated sequences
of offers, drops, quiet periods and age-outs: every version's turns plus the turns it says are
missing are exactly the turns offered for its conversation so far."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from _conversation_scorers import TurnCounter
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.trace import INVALID_SPAN
from test_conversation_scope import Rig

from tracescore import OnlineScorer
from tracescore import _semconv as sc
from tracescore.instrument._calls import AgentCall
from tracescore.online._conversations import ConversationOptions, ConversationTracker, Version

QUIET_S, MAX_AGE_S = 10.0, 100.0
CONVERSATIONS = ["c0", "c1", "c2"]
# a round: turns offered (conversation index each), then the clock moves on by `advance` seconds
ROUNDS = st.lists(st.tuples(st.lists(st.integers(0, 2), max_size=8),
                            st.sampled_from([0.0, QUIET_S + 1, MAX_AGE_S + 1])),
                  min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(rounds=ROUNDS, max_pending=st.integers(1, 6))
def test_every_version_says_how_many_turns_it_lacks(rounds: list[Any], max_pending: int) -> None:
    now = [0.0]
    versions: list[tuple[Version, int]] = []
    offered: Counter[str] = Counter()
    tracker: ConversationTracker

    def score(version: Version, scorers: tuple[OnlineScorer, ...]) -> None:
        versions.append((version, offered[version.conversation]))

    tracker = ConversationTracker(
        [OnlineScorer(TurnCounter())],
        ConversationOptions(quiet_s=QUIET_S, max_age_s=MAX_AGE_S, max_turns=1000),
        score=score, max_pending=max_pending, clock=lambda: now[0])
    trace_id = 0
    for turns, advance in rounds:
        for index in turns:
            conversation = CONVERSATIONS[index]
            trace_id += 1
            offered[conversation] += 1
            tracker.offer(AgentCall(span=INVALID_SPAN, name="agent", input=f"q{trace_id}", output="a"),
                          {sc.GEN_AI_CONVERSATION_ID: conversation}, trace_id, 1,
                          end_ns=trace_id)
        now[0] += advance
        tracker.expire()
    tracker.release_all()
    dropped = sum(max(0, len(turns) - max_pending) for turns, _ in rounds)
    assert tracker.counts["dropped.queue_full"] == dropped
    for version, offered_then in versions:
        assert len(version.turns) + version.missing == offered_then


def test_a_result_after_a_conversation_was_let_go_says_its_earlier_turns_are_missing() -> None:
    rig = Rig(max_age_s=0.5)
    try:
        rig.ask("c9: first question", "c9: second question")
        rig.wait_for(1)
        time.sleep(0.8)  # older than max_age_s: its scored turns are let go
        rig.ask("c9: third question")
        carriers = rig.wait_for(2)
        results = [e.attributes for s in carriers for e in s.events
                   if e.name == sc.GEN_AI_EVALUATION_RESULT]
        assert [(r[sc.TS_CONVERSATION_TURNS], r.get(sc.TS_CONVERSATION_TURNS_MISSING))
                for r in results] == [(2, None), (1, 2)]
    finally:
        rig.shutdown()

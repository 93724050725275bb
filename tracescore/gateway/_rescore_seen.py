"""What `tracescore rescore` has seen scored already: the results a stored span or carrier span
carries, by scorer and version, so a run is not paid for twice (`--force` scores again)."""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescore import _semconv as sc
from tracescore.online.core import OnlineScorer, Turn, release_budgets, turn_ref
from tracescore.online.intake import attributes_of
from tracescore.scoring._provenance import scorer_version


class Seen:
    """Which of a stored span's chosen scorers still score it: not one whose result at the same
    version it carries (unless `force`). Counts the runs skipped and the spans re-scored.

    The same for conversations: a conversation is not scored again by a scorer when the input
    holds that scorer's result at the same version over the same turns (a carrier span naming
    the same conversation id, number of turns, first and last turn)."""

    def __init__(self, force: bool) -> None:
        self._force = force
        self._lock = threading.Lock()
        self.skipped = 0
        self.rescored = 0
        self.run_ids: frozenset[str] = frozenset()  # the run-scope scorers' ids
        self.runs = 0  # root agent spans given to a run-scope scorer
        self.conversations: set[str] = set()  # conversation ids given to a conversation scorer
        self._versions: dict[tuple[str, int, str, str, str], set[str]] = {}  # carriers read

    def read_carriers(self, request: ExportTraceServiceRequest) -> None:
        """Remember the conversation results of the carrier spans in `request`."""
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    if span.name.startswith(sc.EVALUATION_SPAN_PREFIX + " "):
                        self._read_carrier(span)

    def _read_carrier(self, span: Any) -> None:
        attributes = attributes_of(span.attributes)
        conversation = attributes.get(sc.GEN_AI_CONVERSATION_ID)
        if conversation is None or sc.TS_CONVERSATION_TURNS not in attributes:
            return
        turns = (str(conversation), int(attributes[sc.TS_CONVERSATION_TURNS]),
                 str(attributes.get(sc.TS_CONVERSATION_FIRST_TURN)),
                 str(attributes.get(sc.TS_CONVERSATION_LAST_TURN)))
        with self._lock:
            for scorer_id, versions in scored_versions(span).items():
                self._versions.setdefault((*turns, scorer_id), set()).update(versions)

    def conversation(self, online: OnlineScorer, conversation: str,
                     turns: tuple[Turn, ...]) -> bool:
        """Whether `online` scores these turns of `conversation` (counted either way)."""
        key = (conversation, len(turns), turn_ref(turns[0]), turn_ref(turns[-1]),
               online.scorer_id)
        with self._lock:
            done = self._versions.get(key, set())
            same = scorer_version(online.scorer) in done
            if same and not self._force:
                self.skipped += 1
                return False
            self.rescored += bool(done)
            self.conversations.add(conversation)
        return True

    def __call__(self, span: Any, chosen: tuple[OnlineScorer, ...]) -> tuple[OnlineScorer, ...]:
        kept = self._kept(span, chosen)
        if any(online.scorer_id in self.run_ids for online in kept):
            with self._lock:
                self.runs += 1
        return kept

    def _kept(self, span: Any, chosen: tuple[OnlineScorer, ...]) -> tuple[OnlineScorer, ...]:
        done = scored_versions(span)
        if not done:
            return chosen
        kept: list[OnlineScorer] = []
        skipped: list[OnlineScorer] = []
        for online in chosen:
            same = scorer_version(online.scorer) in done.get(online.scorer_id, ())
            (skipped if same and not self._force else kept).append(online)
        release_budgets(skipped)
        with self._lock:
            self.skipped += len(skipped)
            self.rescored += sum(1 for online in kept if online.scorer_id in done)
        return tuple(kept)


def scored_versions(span: Any) -> dict[str, set[str]]:
    """Scorer id -> the versions of the scored results (not failures) a protobuf span carries
    ("" for a result written before results named their version)."""
    found: dict[str, set[str]] = {}
    for event in span.events:
        if event.name != sc.GEN_AI_EVALUATION_RESULT:
            continue
        attributes = attributes_of(event.attributes)
        scorer_id = attributes.get(sc.TS_SCORER_ID)
        if isinstance(scorer_id, str) and sc.GEN_AI_EVALUATION_SCORE_VALUE in attributes:
            found.setdefault(scorer_id, set()).add(str(attributes.get(sc.TS_SCORER_VERSION, "")))
    return found

"""A conversation's results in a real Phoenix: a session annotation per version on the session
its turns' `session.id` made (and a span annotation on each version's last turn)."""

from __future__ import annotations

import time
import urllib.error
from typing import Any

import pytest
from _conversation_scorers import TurnCounter
from opentelemetry import trace
from rigs.phoenix import PhoenixServer

import tracescore
from tracescore import OnlineScorer, PhoenixSink


@tracescore.agent(name="helpdesk")
def helpdesk(session: str, question: str) -> str:
    trace.get_current_span().set_attribute("session.id", session)  # as OpenInference records it
    return f"answer to {question}"


def session_annotations(phoenix: PhoenixServer, session: str, expected: int,
                        timeout: float = 120.0) -> list[dict[str, Any]]:
    """Poll Phoenix (it inserts annotations asynchronously, retrying those of sessions it has
    not ingested yet) until `expected` annotations of `session` are stored."""
    deadline = time.monotonic() + timeout
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            found = phoenix.get_json(
                f"/v1/projects/default/session_annotations?session_ids={session}")["data"]
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
        if len(found) >= expected:
            return found
        time.sleep(0.5)
    raise TimeoutError(f"Phoenix has {len(found)} of {expected} session annotations")


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first run installs Phoenix into the cache
def test_each_version_of_a_conversation_is_a_session_annotation_in_phoenix(
        phoenix: PhoenixServer, span_exporter: Any) -> None:
    handle = tracescore.configure(
        exporter="otlp-http", endpoint=phoenix.base_url, openinference=True, batch=False,
        scorers=[OnlineScorer(TurnCounter(), sinks="phoenix")],
        online={"sinks": {"phoenix": PhoenixSink(phoenix.base_url, flush_interval_s=0.1)},
                "conversations": {"quiet_s": 0.3, "id_attributes": ["session.id"]}})
    try:
        helpdesk("s-42", "Where is my order?")
        helpdesk("s-42", "It is order 42.")
        found = session_annotations(phoenix, "s-42", 1)
        helpdesk("s-42", "Thanks!")
        found = session_annotations(phoenix, "s-42", 2)
    finally:
        handle.shutdown(30)
    by_version = {a["identifier"]: a for a in found}
    assert set(by_version) == {"turns=2", "turns=3"}  # appended, the first kept
    latest = by_version["turns=3"]
    assert latest["name"] == "turn-counter" and latest["annotator_kind"] == "CODE"
    assert latest["result"]["score"] == 3.0
    assert latest["result"]["explanation"] == "Where is my order? | It is order 42. | Thanks!"
    assert latest["metadata"]["turns"] == 3
    assert by_version["turns=2"]["result"]["score"] == 2.0

"""Conversation scope in process: every agent call that carries a conversation id is a turn; a
conversation is scored once it has been quiet (or at its turn limit), again when new turns
arrive, each result a new version (never overwriting the last), within its bounds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from _conversation_scorers import TurnCounter
from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import OnlineScorer
from tracescore import _semconv as sc
from tracescore.online._conversations import conversation_randomness
from tracescore.online._sampling import rejection_threshold

QUIET_S = 0.3


@tracescore.agent(name="helpdesk", conversation_id=lambda question: question.split(":")[0])
def helpdesk(question: str) -> str:
    return f"answer to {question}"


@tracescore.agent(name="helpdesk")
def loner(question: str) -> str:
    return "no conversation here"


class Rig:
    def __init__(self, **options: Any) -> None:
        self.exporter = InMemorySpanExporter()
        scorer = options.pop("scorer", TurnCounter())
        providers = ("meter_provider", "logger_provider")
        meters: dict[str, Any] = {key: options.pop(key) for key in providers if key in options}
        self.handle = tracescore.configure(
            exporter=self.exporter, batch=False, scorers=[scorer],
            online={"max_wait_s": 1.0, "conversations": {"quiet_s": QUIET_S, **options}, **meters})

    def shutdown(self) -> None:
        self.handle.shutdown(30)

    def ask(self, *questions: str) -> None:
        tracer = trace.get_tracer("test")
        for question in questions:
            with tracer.start_as_current_span("request"):  # each turn in a trace of its own
                helpdesk(question)

    def carriers(self) -> list[Any]:
        return [s for s in self.exporter.get_finished_spans()
                if s.attributes.get(sc.TS_EVALUATION_CARRIER)]

    def turns(self, conversation: str) -> list[Any]:
        return [s for s in self.exporter.get_finished_spans()
                if s.name == "invoke_agent helpdesk"
                and s.attributes.get(sc.GEN_AI_CONVERSATION_ID) == conversation]

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        while len(self.carriers()) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.carriers()


@pytest.fixture
def rig() -> Iterator[Rig]:
    made = Rig()
    yield made
    made.shutdown()


def _result(carrier: Any) -> dict[str, Any]:
    [event] = [e for e in carrier.events if e.name == sc.GEN_AI_EVALUATION_RESULT]
    return dict(event.attributes)


def test_a_conversation_is_scored_once_it_is_quiet_and_again_after_a_new_turn(rig: Rig) -> None:
    rig.ask("c1: my order is late", "c1: it is order 42", "c1: thanks")
    [first] = rig.wait_for(1)
    time.sleep(4 * QUIET_S)
    assert len(rig.carriers()) == 1  # once per quiet period
    result = _result(first)
    assert result[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 3.0
    assert result[sc.GEN_AI_EVALUATION_EXPLANATION] == (
        "c1: my order is late | c1: it is order 42 | c1: thanks")
    assert result[sc.GEN_AI_CONVERSATION_ID] == "c1"
    assert result[sc.TS_CONVERSATION_TURNS] == 3
    assert result[sc.TS_CONVERSATION_TRIGGER] == "quiet"
    turns = rig.turns("c1")
    assert len(turns) == 3
    # linked to every turn it judged (three traces), a child of the last
    assert {(link.context.trace_id, link.context.span_id) for link in first.links} == {
        (t.context.trace_id, t.context.span_id) for t in turns}
    assert len({t.context.trace_id for t in turns}) == 3
    assert first.parent.span_id == turns[-1].context.span_id
    assert first.context.trace_id == turns[-1].context.trace_id

    rig.ask("c1: one more thing")
    first_again, second = rig.wait_for(2)
    assert first_again.context == first.context and _result(first_again) == result  # kept
    again = _result(second)
    assert again[sc.TS_CONVERSATION_TURNS] == 4 and again[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 4
    assert again[sc.TS_CONVERSATION_FIRST_TURN] == result[sc.TS_CONVERSATION_FIRST_TURN]
    assert again[sc.TS_CONVERSATION_LAST_TURN] != result[sc.TS_CONVERSATION_LAST_TURN]
    assert len(second.links) == 4
    # the turns themselves went out at once, without conversation results on them
    assert all(not [e for e in t.events if e.name == sc.GEN_AI_EVALUATION_RESULT]
               for t in rig.turns("c1"))


def test_conversations_are_apart_and_calls_without_an_id_are_no_turns(rig: Rig) -> None:
    rig.ask("a: hello", "b: hi", "a: bye")
    loner("anyone?")
    carriers = rig.wait_for(2)
    time.sleep(2 * QUIET_S)
    by_id = {_result(c)[sc.GEN_AI_CONVERSATION_ID]: _result(c) for c in rig.carriers()}
    assert len(rig.carriers()) == 2 and set(by_id) == {"a", "b"}, carriers
    assert by_id["a"][sc.GEN_AI_EVALUATION_EXPLANATION] == "a: hello | a: bye"
    assert by_id["b"][sc.TS_CONVERSATION_TURNS] == 1


def test_the_turn_limit_scores_a_conversation_before_it_is_quiet() -> None:
    rig = Rig(quiet_s=60.0, max_turns=2)
    try:
        rig.ask("t: one", "t: two", "t: three", "t: four")
        first, second = rig.wait_for(2)
        assert sorted(_result(c)[sc.TS_CONVERSATION_TURNS] for c in (first, second)) == [2, 4]
        assert {_result(c)[sc.TS_CONVERSATION_TRIGGER] for c in (first, second)} == {
            "turn_limit"}
    finally:
        rig.shutdown()


def test_shutdown_scores_a_conversation_still_waiting_for_its_quiet_period() -> None:
    rig = Rig(quiet_s=60.0)
    rig.ask("s: one", "s: two")
    rig.shutdown()
    [carrier] = rig.carriers()
    assert _result(carrier)[sc.TS_CONVERSATION_TURNS] == 2
    assert _result(carrier)[sc.TS_CONVERSATION_TRIGGER] == "shutdown"


def test_held_conversations_stay_within_their_bounds_and_are_counted() -> None:
    reader = InMemoryMetricReader()
    rig = Rig(quiet_s=60.0, max_conversations=3,
              meter_provider=MeterProvider(metric_readers=[reader]))
    try:
        rig.ask(*(f"k{n}: hello" for n in range(6)))
        carriers = rig.wait_for(3)
        stats = rig.handle.stats()
        assert stats["conversations.pending"] == 3
        # the oldest were scored early rather than lost, and their turns let go
        assert stats["conversations.versions.overflow"] == 3
        assert stats["conversations.forgotten.overflow"] == 3
        assert stats["conversations.kept"] == 0
        assert {_result(c)[sc.GEN_AI_CONVERSATION_ID] for c in carriers} == {"k0", "k1", "k2"}
        counted = {point.attributes[sc.TS_CONVERSATION_EVENT]: point.value
                   for metric in reader.get_metrics_data().resource_metrics[0]
                   .scope_metrics[0].metrics if metric.name == sc.METRIC_CONVERSATION_EVENTS
                   for point in metric.data.data_points}
        assert counted["turns"] == 6
        assert counted["versions.overflow"] == counted["forgotten.overflow"] == 3
    finally:
        rig.shutdown()


def test_sampling_is_decided_by_the_conversation_id() -> None:
    rig = Rig(scorer=OnlineScorer(TurnCounter(), rate=0.5))
    ids = [f"conv-{n}" for n in range(16)]
    expected = {i for i in ids if conversation_randomness(i) >= rejection_threshold(0.5)}
    assert 0 < len(expected) < len(ids)
    try:
        rig.ask(*(f"{i}: hello" for i in ids), *(f"{i}: again" for i in ids))
        carriers = rig.wait_for(len(expected))
        time.sleep(2 * QUIET_S)
        scored = [_result(c) for c in rig.carriers()]
        assert {r[sc.GEN_AI_CONVERSATION_ID] for r in scored} == expected
        assert all(r[sc.TS_CONVERSATION_TURNS] == 2 for r in scored), carriers
    finally:
        rig.shutdown()


@tracescore.agent(name="triage", conversation_id=lambda question: question.split(":")[0])
def triage(question: str) -> str:
    return helpdesk(question + " (forwarded)")  # a sub-agent in the same conversation


def test_an_agent_call_inside_another_of_the_same_conversation_is_not_a_turn_of_its_own(
        rig: Rig) -> None:
    triage("n: where is my parcel?")
    triage("n: thanks")
    [carrier] = rig.wait_for(1)
    result = _result(carrier)
    assert result[sc.TS_CONVERSATION_TURNS] == 2  # one per trace: the outer call
    assert result[sc.GEN_AI_EVALUATION_EXPLANATION] == "n: where is my parcel? | n: thanks"


@tracescore.agent(name="helpdesk", attributes={"app.room": "room-1"},
                  conversation_id=lambda question: question.split(":")[0])
def in_room(question: str) -> str:
    return "ok"


def test_attributes_you_name_are_read_for_the_conversation_id_first() -> None:
    rig = Rig(id_attributes=["app.room"])
    try:
        in_room("x: hello")
        in_room("y: hello again")  # another gen_ai.conversation.id, the same room
        [carrier] = rig.wait_for(1)
        time.sleep(2 * QUIET_S)
        assert len(rig.carriers()) == 1
        assert _result(carrier)[sc.GEN_AI_CONVERSATION_ID] == "room-1"
        assert _result(carrier)[sc.TS_CONVERSATION_TURNS] == 2
    finally:
        rig.shutdown()


@pytest.mark.parametrize(("options", "key"), [
    ({"quiet_s": 0}, "quiet_s"), ({"max_turns": 0}, "max_turns"),
    ({"id_attributes": "session.id"}, "id_attributes"), ({"quiet": 1}, "quiet"),
])
def test_bad_conversation_options_name_the_key(options: dict[str, Any], key: str) -> None:
    with pytest.raises(tracescore.ConfigurationError, match=key):
        tracescore.configure(exporter="none", scorers=[TurnCounter()],
                             online={"conversations": options})


def test_the_journal_rebuilds_conversations_as_they_were_scored(tmp_path: Any) -> None:
    """Turns journaled by one gateway run (two traces, each a workflow around an agent call)
    and the version scored are where a second run over the same journal finds them."""
    from tracescore.gateway._journal import Journal
    from tracescore.instrument._calls import AgentCall
    from tracescore.online._conversations import ConversationOptions, ConversationTracker

    now = [0.0]
    versions: list[tuple[str, int]] = []

    def tracker(journal: Journal) -> ConversationTracker:
        return ConversationTracker(
            [OnlineScorer(TurnCounter())], ConversationOptions(quiet_s=5),
            score=lambda version, sampled: versions.append(
                (version.conversation, len(version.turns))),
            store=journal, clock=lambda: now[0])

    def turn(first: ConversationTracker, trace_id: int, span_id: int) -> None:
        first.offer(AgentCall(span=None, name="a", input=f"q{trace_id}",  # type: ignore[arg-type]
                              output="a"), {"session.id": "s"}, trace_id, span_id)

    journal = Journal(tmp_path / "journal.db", sync="normal")
    first = tracker(journal)
    for trace_id in (1, 2):
        turn(first, trace_id, 10)  # the agent call
        turn(first, trace_id, 11)  # the workflow around it, ending after it
    first.expire()
    now[0] = 6.0
    first.expire()
    assert versions == [("s", 2)]
    journal.close()

    journal = Journal(tmp_path / "journal.db", sync="normal")
    second = tracker(journal)
    for conversation, turns, scored in journal.conversations():
        second.restore(conversation, turns, scored)
    now[0] = 20.0
    second.expire()
    assert versions == [("s", 2)]  # what was scored is not scored again
    turn(second, 3, 10)
    second.expire()
    now[0] = 30.0
    second.expire()
    assert versions == [("s", 2), ("s", 3)]  # the new turn, with the two scored before
    journal.close()


class _Refuses(TurnCounter):
    id = "refuses"
    name = "Refuses"

    async def evaluate(self, call: Any) -> Any:
        raise RuntimeError("the judge is down")


def test_a_conversation_result_is_a_log_record_with_its_id_and_a_failure_is_data() -> None:
    log_exporter = InMemoryLogRecordExporter()
    loggers = LoggerProvider()
    loggers.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    rig = Rig(scorer=OnlineScorer(TurnCounter(), sinks="log"), logger_provider=loggers)
    try:
        rig.ask("g: hello", "g: bye")
        rig.wait_for(1)
    finally:
        rig.shutdown()
    [record] = [r.log_record for r in log_exporter.get_finished_logs()
                if r.log_record.event_name == sc.GEN_AI_EVALUATION_RESULT]
    last = rig.turns("g")[-1].context
    assert (record.trace_id, record.span_id) == (last.trace_id, last.span_id)  # the last turn
    assert record.attributes[sc.GEN_AI_CONVERSATION_ID] == "g"
    assert record.attributes[sc.TS_CONVERSATION_TURNS] == 2
    assert record.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 2.0

    rig = Rig(scorer=_Refuses())
    try:
        rig.ask("f: hello")
        [carrier] = rig.wait_for(1)
        assert rig.handle.stats()["failed"] == 1
    finally:
        rig.shutdown()
    assert _result(carrier)[sc.ERROR_TYPE] == "RuntimeError"
    assert _result(carrier)[sc.GEN_AI_CONVERSATION_ID] == "f"
    assert carrier.status.status_code.name == "ERROR"


class _SlowCounter(TurnCounter):
    """Takes longer than shutdown waits: its versions are still queued when the worker stops."""

    async def evaluate(self, call: Any) -> Any:
        await asyncio.sleep(2.0)
        return await super().evaluate(call)


def test_a_shutdown_shorter_than_the_queued_conversations_counts_them_and_raises_nothing(
        ) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from tracescore.instrument._calls import AgentCall, notify_agent_call
    from tracescore.online import ScoringSpanProcessor

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = ScoringSpanProcessor(
        SimpleSpanProcessor(exporter), [OnlineScorer(_SlowCounter())],
        conversations={"quiet_s": 300}, shutdown_timeout_s=0.3, concurrency=1)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    for n in range(4):
        attrs = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "helpdesk",
                 sc.GEN_AI_CONVERSATION_ID: f"c{n}"}
        with tracer.start_as_current_span("invoke_agent helpdesk", attributes=attrs) as span:
            notify_agent_call(AgentCall(span=span, name="helpdesk", input=f"q{n}",
                                        output="a", attributes=attrs))
    time.sleep(0.3)  # the turns reach the tracker (the core's timer)
    provider.shutdown()  # raised AttributeError from the never-run conversation jobs before
    dropped = {k: v for k, v in processor.stats().items() if "shutdown" in k and v}
    assert dropped, processor.stats()
    assert len([s for s in exporter.get_finished_spans()
                if s.name == "invoke_agent helpdesk"]) == 4  # the turns themselves went out

"""An agent with several parameters is recorded and judged on its question, not on the JSON of
all its arguments: `question_arg=` names it; by default it is the one text argument that is no
identifier (generated names, values, orders and call styles); callbacks still get every argument."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
from _helpers import shut_down_pipelines
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import ConfigurationError, Scorer, ScoreResult, ScorerInput

ID_NAMES = ("id", "chat", "chat_id", "session", "session_id", "thread_id", "user", "user_id",
            "conversation_id", "tenant", "request_id")
WORDS = st.sampled_from(["where", "is", "my", "parcel", "what", "the", "capital", "of",
                         "France", "please", "today", "refund"])
QUESTIONS = st.lists(WORDS, min_size=2, max_size=8).map(lambda w: " ".join(w) + "?")
ID_VALUES = st.builds(lambda p, n: f"{p}{n}", st.sampled_from(["chat-", "u_", "s:", "t.", "c#"]),
                      st.integers(0, 10**6))


class Recording(Scorer):
    id = "recording"
    name = "recording"
    uses_judge = False

    def __init__(self) -> None:
        self.inputs: list[object] = []
        self._lock = threading.Lock()

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        with self._lock:
            self.inputs.append(call.input)
        return ScoreResult(run_id=call.run_id or "", scorer_id=self.id, scorer_name=self.name,
                           score=1.0, reason="")


@pytest.fixture
def world() -> Iterator[tuple[InMemorySpanExporter, Recording]]:
    exporter, scorer = InMemorySpanExporter(), Recording()
    handle = tracescore.configure(exporter=exporter, batch=False, scorers=[scorer])
    yield exporter, scorer
    handle.shutdown(10)
    shut_down_pipelines()


def _recorded(exporter: InMemorySpanExporter, scorer: Recording) -> tuple[object, object]:
    """(the text of the last agent span's recorded user message, the last scored input)."""
    assert tracescore.flush(10)
    span = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")][-1]
    (message,) = json.loads(str(span.attributes["gen_ai.input.messages"]))
    return message["parts"][0]["content"], scorer.inputs[-1]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_one_text_argument_that_is_no_id_is_the_question(
        world: tuple[InMemorySpanExporter, Recording], data: st.DataObject) -> None:
    """Any number of identifiers (id-like names, or id-like values under plain names), numbers
    and flags beside one question, passed by keyword in any order."""
    question = data.draw(QUESTIONS)
    ids = data.draw(st.dictionaries(st.sampled_from(ID_NAMES), st.one_of(ID_VALUES, QUESTIONS),
                                    max_size=3))
    plain = data.draw(st.dictionaries(st.sampled_from(["ref", "ticket", "locale_tag"]), ID_VALUES,
                                      max_size=2))
    others = data.draw(st.dictionaries(st.sampled_from(["limit", "verbose"]),
                                       st.one_of(st.integers(), st.booleans()), max_size=2))
    arguments = {**ids, **plain, **others, "utterance": question}
    order = data.draw(st.permutations(list(arguments)))

    @tracescore.agent(name="generated")
    def agent(**kwargs: object) -> str:
        return "Your parcel left the depot today."

    agent(**{key: arguments[key] for key in order})
    assert _recorded(*world) == (question, question)


@pytest.mark.parametrize("style", ["positional", "keyword", "mixed"])
def test_positional_and_keyword_calls(world: tuple[InMemorySpanExporter, Recording],
                                      style: str) -> None:
    @tracescore.agent(name="helpdesk", conversation_id=lambda call: call["chat"])
    def helpdesk(chat: str, question: str, limit: int = 3) -> str:
        return "Your parcel left the depot today."

    calls = {"positional": lambda: helpdesk("chat-42", "Where is my parcel?", 5),
             "keyword": lambda: helpdesk(question="Where is my parcel?", chat="chat-42"),
             "mixed": lambda: helpdesk("chat-42", question="Where is my parcel?")}
    calls[style]()
    assert _recorded(*world) == ("Where is my parcel?", "Where is my parcel?")
    exporter, _ = world
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent helpdesk"]
    assert span.attributes["gen_ai.conversation.id"] == "chat-42"  # the callback saw them all


def test_question_arg_names_it_even_when_it_looks_like_an_id_and_its_default_counts(
        world: tuple[InMemorySpanExporter, Recording]) -> None:
    @tracescore.agent(question_arg="query")
    def search(query: str, user: str = "anonymous", topic: str = "What is new?") -> str:
        return "results"

    search("SKU-1234", user="bob")
    assert _recorded(*world) == ("SKU-1234", "SKU-1234")

    @tracescore.agent(question_arg="prompt")
    def ask(user: str, prompt: str = "Say hello to everyone") -> str:
        return "hello"

    ask("bob")
    assert _recorded(*world) == ("Say hello to everyone", "Say hello to everyone")


def test_several_questions_or_none_keep_every_argument(
        world: tuple[InMemorySpanExporter, Recording]) -> None:
    @tracescore.agent
    def compare(first: str, second: str) -> str:
        return "the same"

    compare("What is up?", "What is down?")
    text, scored = _recorded(*world)
    assert scored == {"first": "What is up?", "second": "What is down?"}
    assert json.loads(str(text)) == scored


def test_a_single_dict_argument_is_the_input_as_it_is(
        world: tuple[InMemorySpanExporter, Recording]) -> None:
    @tracescore.agent
    def handle(request: dict) -> str:
        return "done"

    handle({"chat": "chat-1", "question": "Where is my parcel?"})
    assert _recorded(*world)[1] == {"chat": "chat-1", "question": "Where is my parcel?"}


@pytest.mark.parametrize("bad", ["nope", "", 3])
def test_a_question_arg_that_is_no_parameter_is_refused_at_decoration(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="question_arg"):
        @tracescore.agent(question_arg=bad)  # type: ignore[call-overload]
        def helpdesk(chat: str, question: str) -> str:
            return ""


def test_instrument_agent_takes_question_arg(world: tuple[InMemorySpanExporter, Recording]) -> None:
    class Bot:
        def run(self, session: str, message: str, temperature: float = 0.1) -> str:
            return "hi"

    tracescore.instrument_agent(Bot, question_arg="message")
    try:
        Bot().run("s-1", "hello there")
        assert _recorded(*world) == ("hello there", "hello there")
    finally:
        tracescore.uninstrument_agent(Bot)

"""The recogniser chain: user mappings from config, built-in selection, markers, robustness.

Spans of the real conventions (OpenInference, traceloop, pydantic-ai, GenAI) are read in
test_conventions.py from what the real libraries export; here the chain itself is checked.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracescore
from tracescore import _semconv as sc
from tracescore.online.intake._frameworks import FRAMEWORKS
from tracescore.online.intake._recognise import BUILTINS, as_recognisers

scalars = st.one_of(st.text(max_size=20), st.integers(), st.floats(allow_nan=False), st.booleans())
values = st.one_of(scalars, st.lists(scalars, max_size=3))
keys = st.one_of(
    st.sampled_from(sorted({m for r in BUILTINS.values() for m in r.markers}
                           | {sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES, sc.OI_INPUT_VALUE,
                              sc.OI_OUTPUT_VALUE, sc.TL_ENTITY_INPUT, sc.TL_ENTITY_OUTPUT,
                              sc.TS_GROUND_TRUTH, "q", "a"})),
    st.text(max_size=12),
)
attribute_maps = st.dictionaries(keys, values, max_size=8)
MAPPING = {"name": "mine", "input": "q", "output": "a", "attributes": {"kind": "agent"}}


@settings(max_examples=300, deadline=None)
@given(name=st.text(max_size=20), attributes=attribute_maps)
def test_the_chain_never_raises_and_needs_a_marker(name: str, attributes: dict[str, Any]) -> None:
    chain = tracescore.build_recognisers([MAPPING])
    call = tracescore.recognise(name, attributes, chain)
    if not tracescore.recogniser_markers(chain) & attributes.keys():
        assert call is None  # a span without any marker key is never a candidate
    if call is not None:
        assert call.convention in {"mine", *BUILTINS} and isinstance(call.agent, str)


plain = st.text(max_size=30).filter(lambda t: t[:1] not in ("{", "["))


@given(question=plain, answer=plain,
       truth=st.one_of(st.none(), plain.filter(bool)),
       agent=st.one_of(st.none(), st.text(min_size=1, max_size=10)))
def test_a_user_mapping_reads_its_attributes(question: str, answer: str, truth: str | None,
                                             agent: str | None) -> None:
    spec: dict[str, Any] = {**MAPPING, "ground_truth": "expected"}
    if agent is not None:
        spec["agent"] = "who"
    (mine,) = tracescore.build_recognisers([spec], builtins=False)
    attributes: dict[str, Any] = {"q": question, "a": answer, "kind": "agent"}
    if truth is not None:
        attributes["expected"] = truth
    if agent is not None:
        attributes["who"] = agent
    call = tracescore.recognise("my span", attributes, [mine])
    assert call == tracescore.RecognisedCall("mine", agent or "my span", question, answer, truth)
    assert tracescore.recognise("my span", {**attributes, "kind": "tool"}, [mine]) is None
    assert tracescore.recognise("my span", {"q": question, "kind": "agent"}, [mine]) is None


@given(value=st.one_of(st.dictionaries(st.text(max_size=5), scalars, max_size=3),
                      st.lists(scalars, max_size=3)))
def test_json_objects_and_arrays_are_decoded_other_text_is_kept(value: Any) -> None:
    mine = tracescore.AgentMapping(input="q", output="a")
    call = mine("s", {"q": json.dumps(value), "a": '"quoted"'})
    assert call is not None and call.input == value and call.output == '"quoted"'
    call = mine("s", {"q": "{not json", "a": "[1,"})
    assert call is not None and (call.input, call.output) == ("{not json", "[1,")


def test_span_name_pattern_matches_the_whole_name() -> None:
    (mine,) = tracescore.build_recognisers([{"input": "q", "output": "a", "span_name": r"agent \w+"}],
                                           builtins=False)
    assert mine("agent planner", {"q": "x", "a": "y"}) is not None
    assert mine("my agent planner", {"q": "x", "a": "y"}) is None
    assert mine("agent planner 2", {"q": "x", "a": "y"}) is None


def test_mappings_come_first_then_the_builtins_in_order() -> None:
    chain = tracescore.build_recognisers([MAPPING])
    assert [r.convention for r in chain] == ["mine", "crewai", "genai", "openinference", "traceloop",
                                             "pydantic_ai", "mastra", "vercel_ai"]
    assert [r.convention for r in tracescore.build_recognisers(builtins=["traceloop", "genai"])] == [
        "traceloop", "genai"]
    assert tracescore.build_recognisers(builtins=False) == ()
    assert tracescore.recogniser_markers(tracescore.build_recognisers([MAPPING], builtins=False)) == {"q"}


def test_ground_truth_attribute_is_read_for_every_builtin() -> None:
    assert sc.TS_GROUND_TRUTH == "tracescore.ground_truth"
    attributes = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
                  sc.GEN_AI_INPUT_MESSAGES: '[{"role": "user", "content": "Capital?"}]',
                  sc.GEN_AI_OUTPUT_MESSAGES: "[]", sc.TS_GROUND_TRUTH: "Paris"}
    call = tracescore.recognise("invoke_agent", attributes)
    assert call is not None and call.ground_truth == "Paris"


def test_a_broken_user_recogniser_is_skipped() -> None:
    class Broken:
        convention = "broken"
        markers = frozenset({"q"})

        def __call__(self, name: str, attributes: Any) -> None:
            raise RuntimeError("boom")

    chain = tracescore.build_recognisers([Broken(), MAPPING])
    call = tracescore.recognise("s", {"q": "x", "a": "y", "kind": "agent"}, chain)
    assert call is not None and call.convention == "mine"


@pytest.mark.parametrize("spec, key", [
    ({"output": "a"}, "recognise[0].input"),
    ({"input": "q"}, "recognise[0].output"),
    ({"input": "q", "output": "a", "outptu": "b"}, "recognise[0].outptu"),
    ({"input": "", "output": "a"}, "recognise[0].input"),
    ({"input": "q", "output": 3}, "recognise[0].output"),
    ({"input": "q", "output": "a", "span_name": "(unclosed"}, "recognise[0].span_name"),
    ({"input": "q", "output": "a", "attributes": ["kind"]}, "recognise[0].attributes"),
    ({"input": "q", "output": "a", "attributes": {"kind": {"nested": 1}}}, "recognise[0].attributes"),
    ({"input": "q", "output": "a", "as_text": "output"}, "recognise[0].as_text"),
    ({"input": "q", "output": "a", "as_text": ["answer"]}, "recognise[0].as_text"),
    ("q", "recognise"),
])
def test_bad_mappings_name_the_key(spec: Any, key: str) -> None:
    with pytest.raises(tracescore.ConfigurationError, match=key.replace("[", r"\[").replace("]", r"\]")):
        tracescore.build_recognisers([spec] if spec != "q" else spec)


def test_bad_builtin_names_are_configuration_errors() -> None:
    with pytest.raises(tracescore.ConfigurationError, match=r"gateway\.recognise\.builtins.*'langchain'"):
        tracescore.build_recognisers(builtins=["langchain"], where="gateway.recognise")
    with pytest.raises(tracescore.ConfigurationError, match=r"^recognise\.builtins must be true"):
        tracescore.build_recognisers([], where="recognise.mappings", builtins="genai",
                                     builtins_key="recognise.builtins")
    with pytest.raises(tracescore.ConfigurationError, match=r"recognise\[1\]: unknown convention 'x'"):
        as_recognisers(["genai", "x"], "recognise")


@given(truth=plain.filter(bool))
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_tracescore_agent_spans_carry_a_ground_truth_set_as_documented(
        span_exporter: Any, truth: str) -> None:
    """What the gateway reads from tracescore's own spans: the `tracescore.ground_truth`
    attribute set on the current (agent) span inside the call."""
    from opentelemetry import trace

    span_exporter.clear()

    @tracescore.agent(name="geo")
    def geo(question: str) -> str:
        trace.get_current_span().set_attribute(sc.TS_GROUND_TRUTH, truth)
        return "Paris"

    geo("Capital of France?")
    (span,) = span_exporter.get_finished_spans()
    call = tracescore.recognise(span.name, span.attributes or {})
    assert call is not None and call.convention == "genai" and call.agent == "geo"
    assert (call.output, call.ground_truth) == ("Paris", truth)


json_texts = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(["role", "content", "parts", "text",
                                                             "args", "kwargs", "type"]),
                                            inner, max_size=3)),
    max_leaves=8,
).map(json.dumps)
field_values = st.one_of(values, json_texts)
reader_keys = st.sampled_from(sorted({
    sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES, sc.GEN_AI_AGENT_NAME, sc.OI_INPUT_VALUE,
    sc.OI_OUTPUT_VALUE, sc.OI_INPUT_MIME_TYPE, sc.OI_OUTPUT_MIME_TYPE, sc.OI_AGENT_NAME,
    sc.TL_ENTITY_INPUT, sc.TL_ENTITY_OUTPUT, sc.TL_ENTITY_NAME, sc.PAI_ALL_MESSAGES,
    sc.PAI_FINAL_RESULT, sc.PAI_NEW_MESSAGE_INDEX, sc.PAI_METADATA, sc.TS_GROUND_TRUTH}))
markers_on = st.fixed_dictionaries({
    sc.GEN_AI_OPERATION_NAME: st.just(sc.OP_INVOKE_AGENT), sc.OI_SPAN_KIND: st.just("AGENT"),
    sc.TL_SPAN_KIND: st.sampled_from(["agent", "workflow"]),
    sc.OI_INPUT_MIME_TYPE: st.just(sc.OI_MIME_JSON), sc.OI_OUTPUT_MIME_TYPE: st.just(sc.OI_MIME_JSON),
})


@settings(max_examples=400, deadline=None)
@given(base=markers_on, extra=st.dictionaries(reader_keys, field_values, max_size=10))
def test_builtin_readers_never_raise_on_odd_values(base: dict[str, Any],
                                                   extra: dict[str, Any]) -> None:
    """Whatever another process put in the attributes a reader looks at (any type, any JSON),
    each built-in answers with a call or None and never raises."""
    attributes = {**base, **extra}
    for recogniser in BUILTINS.values():
        call = recogniser("span", attributes)
        assert call is None or isinstance(call.agent, str)


@pytest.mark.parametrize("overrides, key", [
    ({"recognise.builtins": ["langchain"]}, r"^recognise\.builtins: unknown convention"),
    ({"recognise.builtins": "genai"}, r"^recognise\.builtins must be"),
    ({"recognise.mappings": [{"input": "q"}]}, r"^recognise\.mappings\[0\]\.output is required"),
])
def test_gateway_config_errors_name_the_recognise_key(overrides: dict[str, Any], key: str) -> None:
    from tracescore.gateway._config import load_gateway_config

    with pytest.raises(tracescore.ConfigurationError, match=key):
        load_gateway_config(None, overrides, environ={})


@pytest.mark.parametrize("kwargs, key", [
    ({"input": "", "output": "a"}, r"AgentMapping\.input must be a non-empty string"),
    ({"input": "q", "output": "a", "span_name": "(x"}, r"AgentMapping\.span_name is not a valid"),
    ({"input": "q", "output": "a", "attributes": {"k": [1]}}, r"AgentMapping\.attributes must"),
])
def test_agent_mapping_checks_its_fields_when_made_directly(kwargs: dict[str, Any], key: str) -> None:
    with pytest.raises(tracescore.ConfigurationError, match=key):
        tracescore.AgentMapping(**kwargs)


@given(st.text(), st.dictionaries(st.sampled_from(["a", "b"]), st.text(), max_size=2))
def test_as_text_keeps_an_output_that_looks_like_json_as_its_text(question: str,
                                                                  answer: dict[str, str]) -> None:
    text = json.dumps(answer)
    spec = {"input": "q", "output": "a"}
    kept = tracescore.recognise("s", {"q": json.dumps([question]), "a": text},
                                tracescore.build_recognisers([{**spec, "as_text": ["output"]}],
                                                             builtins=False))
    decoded = tracescore.recognise("s", {"q": json.dumps([question]), "a": text},
                                   tracescore.build_recognisers([spec], builtins=False))
    assert kept is not None and decoded is not None
    assert kept.output == text and decoded.output == answer
    assert kept.input == decoded.input == [question]  # the input is still decoded


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_a_frameworks_entries_copied_into_user_mappings_read_what_the_builtin_reads(
        framework: str) -> None:
    """The built-in framework readers are data a user can copy: the same entries given as
    `recognise.mappings` (after a JSON round trip, as from a config file) read the same calls."""
    copied = tracescore.build_recognisers(json.loads(json.dumps(FRAMEWORKS[framework])),
                                          builtins=False)
    spans = [
        ("invoke_agent geo", {"mastra.span.type": "agent_run", "gen_ai.agent.name": "geo",
                              "mastra.agent_run.input": "Where?",
                              "mastra.agent_run.output": '{"text": "Here.", "files": []}'}),
        ("invoke_workflow trip", {"mastra.span.type": "workflow_run",
                                  "mastra.workflow_run.input": '{"question": "Where?"}',
                                  "mastra.workflow_run.output": '{"answer": "Here."}'}),
        ("ai.generateText", {"ai.telemetry.functionId": "geo", "ai.response.text": "[1]",
                             "ai.prompt": '{"system": "S", "prompt": "Where?"}'}),
        ("ai.streamObject", {"ai.response.object": '{"a":1}', "ai.prompt": '{"prompt": "Where?"}'}),
        ("ai.generateText.doGenerate", {"ai.response.text": "x", "ai.prompt.messages": "[]"}),
        ("geo._execute_core", {"openinference.span.kind": "AGENT", "input.value": '{"agent": {"role": "geo"}}',
                               "output.value": '{"description": "Where?", "raw": "[1]"}'}),
        ("research._execute_core", {"openinference.span.kind": "AGENT",
                                    "output.value": '{"description": "Where?", "raw": "Here."}'}),
        ("Crew_1.kickoff", {"openinference.span.kind": "CHAIN", "output.value": '{"raw": "Here."}'}),
    ]
    read = [tracescore.recognise(name, attributes, [BUILTINS[framework]]) for name, attributes in spans]
    assert [tracescore.recognise(n, a, copied) for n, a in spans] == read
    assert sum(call is not None for call in read) == 2
    for call in read:
        assert call is None or call.convention == framework

"""An agent span that lacks its content is explained with the switch that makes its framework
record it: generated spans of every built-in convention with content keys removed; the hint
is given for missing content only, never for a user's own mapping."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import tracescore
from tracescore import _semconv as sc
from tracescore.online.intake import AgentMapping, Diagnoser
from tracescore.online.intake._switches import HINT, PRODUCER_HINT, PRODUCERS, SWITCHES

_MESSAGES = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Hi?"}]}])
# convention -> (span name, the attributes that make it agent-like, its input key, output key)
SPANS: dict[str, tuple[str, dict[str, Any], str, str]] = {
    "genai": ("invoke_agent geo", {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT},
              sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES),
    "openinference": ("geo", {sc.OI_SPAN_KIND: "AGENT"}, sc.OI_INPUT_VALUE, sc.OI_OUTPUT_VALUE),
    "traceloop": ("geo.agent", {sc.TL_SPAN_KIND: "agent"}, sc.TL_ENTITY_INPUT,
                  sc.TL_ENTITY_OUTPUT),
}
_SWITCH_WORDS = {"genai": "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                 "openinference": "OPENINFERENCE_HIDE_INPUTS",
                 "traceloop": "TRACELOOP_TRACE_CONTENT"}


@given(convention=st.sampled_from(sorted(SPANS)), keep_input=st.booleans(),
       keep_output=st.booleans(),
       extra=st.dictionaries(st.sampled_from(["http.route", "app.user", "geo.region"]),
                             st.text(max_size=8), max_size=3))
def test_missing_content_names_the_switch_of_its_convention(
        convention: str, keep_input: bool, keep_output: bool, extra: dict[str, str]) -> None:
    name, marker, input_key, output_key = SPANS[convention]
    attributes: dict[str, Any] = {**extra, **marker}
    if keep_input:
        attributes[input_key] = _MESSAGES if convention == "genai" else "Which river?"
    if keep_output:
        attributes[output_key] = ""  # there, without text: not a switch's doing
    found = Diagnoser(tracescore.build_recognisers())(name, attributes)
    assert found is not None and found.framework == convention
    if not (keep_input and keep_output):  # an attribute missing: the switch may be off
        assert _SWITCH_WORDS[convention] in found.description, found.description
    else:  # both there, the answer without text: no switch would help
        assert HINT not in found.description, found.description


@given(producer=st.sampled_from([*sorted(PRODUCERS), "openai", "my-framework", ""]),
       spelled=st.sampled_from([str.lower, str.upper, str.title]),
       key=st.sampled_from([sc.GEN_AI_SYSTEM, sc.GEN_AI_PROVIDER_NAME]),
       keep_input=st.booleans())
def test_an_agent_span_naming_its_framework_gets_that_frameworks_own_hint(
        producer: str, spelled: Any, key: str, keep_input: bool) -> None:
    """A GenAI agent span that names its producer (AutoGen's `gen_ai.system=autogen`) and lacks
    its content is explained by that framework's own entry (AutoGen has no content switch), not
    by the list of every GenAI producer's switches; a producer we know nothing of gets the
    convention's list."""
    name, marker, input_key, _ = SPANS["genai"]
    attributes: dict[str, Any] = {**marker, key: spelled(producer),
                                  sc.GEN_AI_AGENT_NAME: "geo"}
    if keep_input:
        attributes[input_key] = _MESSAGES
    found = Diagnoser(tracescore.build_recognisers())(name, attributes)
    assert found is not None and found.framework == "genai"
    if producer in PRODUCERS:
        assert f"{PRODUCER_HINT} {PRODUCERS[producer]}" in found.description
        assert HINT not in found.description, found.description
    else:
        assert _SWITCH_WORDS["genai"] in found.description and PRODUCER_HINT not in (
            found.description)


def test_every_switch_is_documented_for_people() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "gateway.md").read_text()
    for convention, text in [*SWITCHES.items(), *PRODUCERS.items()]:
        for word in text.split():
            if word.isupper() and "_" in word:  # the environment variables it names
                assert word.strip(",;()=true") in page, (convention, word)


def test_a_users_own_mapping_gets_no_switch_hint() -> None:
    mapping = AgentMapping(name="mine", input="my.in", output="my.out",
                           attributes={"my.kind": "agent"})
    found = Diagnoser([mapping])("step", {"my.kind": "agent"})
    assert found is not None and HINT not in found.description

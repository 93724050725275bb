"""Tool calls from any convention, their results as the tool's output text (issue 34, item 2),
through both front doors:

- a span that is a tool execution in its convention gives a tool call (name, arguments) and its
  result as context: GenAI `execute_tool`, OpenInference TOOL, OpenLLMetry `traceloop.span.kind`
  tool (`traceloop.entity.input` / `.output`), Langfuse `langfuse.observation.type` tool, and a
  convention nobody told us about (`<ns>.span.kind` / `<ns>.observation.type` / `<ns>.spanType`
  ... `tool` or JSON `"TOOL"` as MLflow's, its content under `<ns>.input` / `.arguments` /
  `.args` / `.spanInputs`, `<ns>.output` / `.result` / `.spanOutputs`), or with no kind marker,
  naming its tool under `<ns>.tool.name` with its content under its span name or that
  namespace (Haystack's `haystack.agent.step.tool`); flagged failed (`<ns>.tool.error`, ...),
  a failed call with its error text and no context;
- a tool result recorded inside a framework's result object (LlamaIndex's ToolOutput as JSON or
  repr, LangChain's ToolMessage, an MCP CallToolResult, AutoGen's FunctionExecutionResult,
  Haystack's ToolCallResult, CrewAI's ToolResult) or JSON-encoded is judged as the tool's output
  text, never with its repeated input and metadata; a tool's own structured value stays whole.

Generated agent calls run through the span processor and a gateway; scorers record what they
were given (call scorers: tool calls and context; run scorers: the tool steps)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from _span_trees import Node
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_answer_channel import (
    KWARGS,
    WRAPPERS,
    Reading,
    _Gateway,
    _through_the_processor,
    _wrapped,
    numbered,
    running_gateway,
)
from test_unwrap import TEXT

from tracescore import _semconv as sc
from tracescore.online.intake import read_span
from tracescore.online.intake._tool_results import tool_result
from tracescore.online.intake._tool_spans import tool_of
from tracescore.online.intake._unwrap import call_arguments
from tracescore.scoring import ToolCall

_NAMESPACE = st.from_regex(r"[a-z]{2,8}(\.[a-z]{2,6})?", fullmatch=True).filter(
    lambda ns: not ns.startswith(("gen_ai", "traceloop", "langfuse", "openinference")))
CONVENTIONS = st.one_of(
    st.sampled_from(["genai", "openinference", "traceloop", "langfuse"]).map(lambda c: (c,)),
    st.tuples(st.just("generic"), _NAMESPACE,
              st.sampled_from(["span.kind", "span_kind", "observation.type", "entity.kind",
                               "spanType", "span_type"]),
              st.sampled_from(["input", "arguments", "args", "entity.input", "spanInputs",
                               "inputs"]),
              st.sampled_from(["output", "result", "entity.output", "spanOutputs", "outputs"]),
              st.sampled_from(["tool", "TOOL", "Tool", '"TOOL"'])),  # MLflow's: JSON
    # no kind marker: the tool named by `<ns>.tool.name`, its content under the span's name
    # (Haystack's `haystack.agent.step.tool.input`) or the name key's namespace
    st.tuples(st.just("named"), _NAMESPACE, st.sampled_from(["span", "ns", "ns.tool"]),
              st.sampled_from([("input", "output"), ("arguments", "result"),
                               ("args", "output"), ("call.arguments", "call.result")])))
RESULTS = st.sampled_from(["plain", "json_string", "llama_index", "llama_index_repr",
                           "langchain", "langchain_serialised", "mcp", "autogen", "haystack",
                           "crewai", "langchain_dict", "openllmetry_langchain"])


def recorded_result(text: str, style: str, name: str, kwargs: dict[str, Any]) -> str:
    """A tool's output text as one framework records its result."""
    if style == "plain":
        return text
    if style == "json_string":  # OpenLLMetry: the return value's JSON
        return json.dumps(text)
    if style == "llama_index":
        return json.dumps({"blocks": [{"block_type": "text", "text": text}], "tool_name": name,
                           "raw_input": {"args": [], "kwargs": kwargs}, "raw_output": text,
                           "is_error": False, "content": text})
    if style == "llama_index_repr":
        return (f"ToolOutput(blocks=[TextBlock(block_type='text', text={text!r})], "
                f"tool_name={name!r}, raw_input={{'kwargs': {kwargs!r}}}, "
                f"raw_output={text!r}, is_error=False)")
    if style == "langchain":
        return json.dumps({"content": text, "type": "tool", "name": name, "tool_call_id": "c1",
                           "artifact": None, "status": "success", "id": None,
                           "additional_kwargs": {}, "response_metadata": {}})
    if style == "langchain_serialised":
        return json.dumps({"lc": 1, "type": "constructor", "id": ["langchain", "schema",
                                                                  "messages", "ToolMessage"],
                           "kwargs": {"content": text, "type": "tool", "tool_call_id": "c1",
                                      "status": "success"}})
    if style == "mcp":
        return json.dumps({"meta": None, "content": [{"type": "text", "text": text}],
                           "structuredContent": None, "isError": False})
    if style == "autogen":
        return json.dumps({"content": text, "name": name, "call_id": "c1", "is_error": False})
    if style == "haystack":
        return json.dumps({"result": text, "origin": {"tool_name": name, "arguments": kwargs},
                           "error": False})
    if style == "langchain_dict":  # OpenInference's LangChain: `message_to_dict`
        return json.dumps({"type": "tool", "data": {
            "content": text, "additional_kwargs": {}, "response_metadata": {}, "type": "tool",
            "name": name, "id": None, "tool_call_id": "c1", "artifact": None,
            "status": "success"}})
    if style == "openllmetry_langchain":  # OpenLLMetry's LangChain callback envelope
        return json.dumps({"output": {"lc": 1, "type": "constructor", "id": [
            "langchain", "schema", "messages", "ToolMessage"], "kwargs": {
                "content": text, "type": "tool", "name": name, "tool_call_id": "c1"}},
            "kwargs": {"tags": ["seq:step:1"], "color": "green", "name": name}})
    assert style == "crewai"
    return json.dumps({"result": text, "result_as_answer": False})


@settings(max_examples=300, deadline=None)
@given(TEXT, RESULTS, KWARGS)
def test_a_tool_result_is_its_output_text_in_any_framework_object(
        text: str, style: str, kwargs: dict[str, Any]) -> None:
    assert tool_result(recorded_result(text, style, "lookup", kwargs)) == text


def test_openllmetrys_langchain_tool_input_is_the_tools_inputs() -> None:
    recorded = {"input_str": "{'city': 'Quito'}", "tags": ["seq:step:1"],
                "metadata": {"langgraph_node": "tools"}, "inputs": {"city": "Quito"},
                "kwargs": {"color": "green", "name": None, "tool_call_id": "call_0"}}
    assert call_arguments(recorded) == {"city": "Quito"}
    assert call_arguments({**recorded, "inputs": None}) == "{'city': 'Quito'}"


@pytest.mark.parametrize("own", [
    {"forecast": "Sunny", "name": "Paris"},  # a tool's own value with a `name` field
    {"content": "a", "pages": 3},  # `content` beside a field no result object has
    {"result": 1},  # no mark of a result object
    ["a", "b"],
])
def test_a_tools_own_structured_value_is_no_result_object(own: Any) -> None:
    assert tool_result(json.dumps(own)) is None


def tool_attributes(convention: tuple[Any, ...], name: str, arguments: str,
                    result: str) -> tuple[str, dict[str, Any]]:
    """(span name, attributes) of a tool span in `convention`."""
    kind = convention[0]
    if kind == "genai":
        return f"execute_tool {name}", {
            sc.GEN_AI_OPERATION_NAME: "execute_tool", sc.GEN_AI_TOOL_NAME: name,
            sc.GEN_AI_TOOL_CALL_ARGUMENTS: arguments, sc.GEN_AI_TOOL_CALL_RESULT: result}
    if kind == "openinference":
        return name, {sc.OI_SPAN_KIND: "TOOL", sc.OI_TOOL_NAME: name,
                      sc.OI_INPUT_VALUE: arguments, sc.OI_OUTPUT_VALUE: result}
    if kind == "traceloop":  # as traceloop-sdk 0.62's @tool records it (older: no gen_ai name)
        return f"{name}.tool", {sc.TL_SPAN_KIND: "tool", sc.TL_ENTITY_NAME: name,
                                sc.TL_ENTITY_INPUT: arguments, sc.TL_ENTITY_OUTPUT: result}
    if kind == "langfuse":
        return name, {"langfuse.observation.type": "tool",
                      "langfuse.observation.input": arguments,
                      "langfuse.observation.output": result}
    if kind == "named":
        _, namespace, where, (inputs, outputs) = convention
        span = f"{namespace}.step.tool" if where == "span" else f"{namespace} {name}"
        at = {"span": span, "ns": namespace, "ns.tool": f"{namespace}.tool"}[where]
        return span, {f"{namespace}.tool.name": name, f"{namespace}.tool.description": "Looks",
                      f"{at}.{inputs}": arguments, f"{at}.{outputs}": result}
    _, namespace, marker, inputs, outputs, value = convention
    return f"{name}.tool", {f"{namespace}.{marker}": value, f"{namespace}.{inputs}": arguments,
                            f"{namespace}.{outputs}": result}


@st.composite
def agent_call(draw: st.DrawFn) -> dict[str, Any]:
    tools = [{"name": f"lookup{n}", "kwargs": draw(KWARGS), "style": draw(WRAPPERS),
              "text": "tool returned " + draw(TEXT), "result": draw(RESULTS),
              "convention": draw(CONVENTIONS)} for n in range(draw(st.integers(1, 3)))]
    return {"question": draw(TEXT), "answer": "» " + draw(TEXT), "tools": tools}


def _tree(case: dict[str, Any]) -> Node:
    children = []
    for t in case["tools"]:
        name, attributes = tool_attributes(
            t["convention"], t["name"], json.dumps(_wrapped(t["kwargs"], t["style"])),
            recorded_result(t["text"], t["result"], t["name"], t["kwargs"]))
        children.append(Node(name, attributes))
    return Node("geo.run", {
        sc.GEN_AI_OPERATION_NAME: "invoke_agent", sc.GEN_AI_AGENT_NAME: "geo",
        sc.GEN_AI_INPUT_MESSAGES: json.dumps([
            {"role": "user", "parts": [{"type": "text", "content": case["question"]}]}]),
        sc.GEN_AI_OUTPUT_MESSAGES: json.dumps([
            {"role": "assistant", "parts": [{"type": "text", "content": case["answer"]}]}])},
        children)


def _expected(cases: list[dict[str, Any]]) -> tuple[list[Reading], list[Reading]]:
    calls, runs = [], []
    for case in cases:
        tools = case["tools"]
        calls.append((case["question"], case["answer"],
                      tuple((t["name"], json.dumps(t["kwargs"], sort_keys=True)) for t in tools),
                      tuple(t["text"] for t in tools)))
        names = tuple(t["name"] for t in tools)
        runs.append((case["question"], names, names))
    return sorted(calls, key=repr), sorted(runs, key=repr)


@settings(max_examples=300, deadline=None)
@given(CONVENTIONS, st.booleans())
def test_a_span_that_is_no_tool_gives_no_tool_call(convention: tuple[str, ...],
                                                   marked: bool) -> None:
    name, attributes = tool_attributes(convention, "lookup", "{}", "x")
    assert tool_of(name, attributes) is not None
    if convention[0] == "generic":  # the same keys under a kind that is no tool
        marker = f"{convention[1]}.{convention[2]}"
        assert tool_of(name, {**attributes, marker: "agent" if marked else "llm"}) is None
    if convention[0] == "named":  # a kind marker says it is something else
        kind = f"{convention[1]}.span.kind" if marked else sc.GEN_AI_OPERATION_NAME
        assert tool_of(name, {**attributes, kind: "chat"}) is None


@pytest.mark.parametrize(("name", "attributes"), [
    ("chat", {"app.tool.name": "lookup"}),  # names a tool, records no call of it
    ("chat", {"llm.tools.0.tool.name": "lookup", "chat.input": "[]"}),  # a tool offered
    ("agent.run", {"tool.name": "", "agent.run.input": "q"}),
])
def test_a_span_mentioning_a_tool_is_no_tool_span(name: str, attributes: dict[str, Any]) -> None:
    assert tool_of(name, attributes) is None


def test_a_span_named_as_a_tool_that_names_its_tool_is_one_without_content() -> None:
    """Haystack with content tracing off: the tool span keeps its name, records no content."""
    found = tool_of("haystack.agent.step.tool", {"haystack.tool.name": "lookup",
                                                "haystack.tool.description": "Look it up."})
    assert found is not None and (found.name, found.arguments, found.result) == (
        "lookup", None, None)


@settings(max_examples=200, deadline=None)
@given(CONVENTIONS.filter(lambda c: c[0] in ("generic", "named")),
       st.sampled_from(["tool.error", "error", "is_error"]), st.sampled_from([True, "true"]),
       TEXT, st.sampled_from(["error", "message", "plain"]))
def test_a_tool_span_flagged_failed_is_a_failed_call_with_its_error_text_and_no_context(
        convention: tuple[str, ...], flag: str, value: Any, text: str, style: str) -> None:
    """A framework that records a failed tool call as a flag and its error as the result
    (Haystack: `haystack.tool.error=true`, `{"error": "..."}`, the span's status unset)."""
    recorded = {"error": json.dumps({"error": text}),
                "message": json.dumps({"message": text, "code": 3}), "plain": text}[style]
    name, attributes = tool_attributes(convention, "lookup", '{"place": "Quito"}', recorded)
    flagged = {**attributes, f"{convention[1]}.{flag}": value}
    item = read_span(name, flagged, 0, None)
    assert item is not None and item.tool_call() == ToolCall(
        name="lookup", arguments={"place": "Quito"}, error=text)
    assert item.texts() == []
    unflagged = read_span(name, {**flagged, f"{convention[1]}.{flag}": False}, 0, None)
    call = None if unflagged is None else unflagged.tool_call()
    assert unflagged is not None and call is not None and call.error is None
    assert unflagged.texts() == [tool_result(recorded) or recorded]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Gateway]:
    with running_gateway(tmp_path_factory.mktemp("tool-carriers")) as built:
        yield built


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(agent_call(), min_size=8, max_size=8, unique_by=lambda c: c["question"]))
def test_both_doors_give_scorers_tool_calls_of_any_convention_and_their_output_text(
        gateway: _Gateway, cases: list[dict[str, Any]]) -> None:
    cases = numbered(cases)
    expected = _expected(cases)
    assert _through_the_processor(cases, _tree) == expected
    assert gateway.read(cases, _tree) == expected


def test_the_tool_markers_of_the_request_gate_find_every_known_tool_kind_key() -> None:
    from tracescore.online.intake._tool_spans import TOOL_CONVENTIONS, TOOL_MARKERS

    for convention in TOOL_CONVENTIONS[1:]:  # GenAI's operation key is an item marker already
        assert any(marker in convention.kind_key for marker in TOOL_MARKERS)


@settings(max_examples=200, deadline=None)
@given(CONVENTIONS.filter(lambda c: c[0] in ("generic", "named")))
def test_the_tool_markers_of_the_request_gate_find_every_generic_tool_span(
        convention: tuple[Any, ...]) -> None:
    """A request holding only such a tool span is read (its keys hold one of the gate's texts),
    and the span's attributes are decoded (`may_be_tool`)."""
    from tracescore.online.intake._tool_spans import TOOL_MARKERS, may_be_tool

    _, attributes = tool_attributes(convention, "lookup", "{}", "x")
    assert any(marker in key for key in attributes for marker in TOOL_MARKERS)
    assert may_be_tool(attributes)

"""A tool span that names its tool and call id but records no arguments or result (AutoGen's
`execute_tool`) gives its scorers the call with the arguments and the tool's text the model
calls' messages record under the same call id, through both front doors.

Generated agent calls: the agent span with its own content or without (read from its model
calls), GenAI-parts or OpenAI-chat messages on the `chat` spans, one to three such tool calls,
some tools with content of their own (kept as recorded) and some whose id no message carries
(a call without arguments, no context)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from _span_trees import Node
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_answer_channel import Reading, _Gateway, _through_the_processor, running_gateway

from tracescore import _semconv as sc

_IDS = itertools.count()
_PLACES = ["Vienna", "Kraków", "Quito", "Tartu", "Lyon"]


@st.composite
def agent_call(draw: st.DrawFn) -> dict[str, Any]:
    index = next(_IDS)
    place = draw(st.sampled_from(_PLACES))
    tools = [{"name": draw(st.sampled_from(["lookup", "weather", "search"])),
              "id": f"call_{index}_{n}", "kwargs": {"place": place, "n": n},
              "result": f"TOOL-RESULT {index}-{n} about {place}",
              "carrier": draw(st.sampled_from(["messages", "messages", "span", "nowhere"]))}
             for n in range(draw(st.integers(1, 3)))]
    return {"question": f"{index}. What is the weather in {place}?",
            "answer": f"Sunny in {place} ({index}).", "tools": tools,
            "style": draw(st.sampled_from(["genai", "openai"])),
            "agent_content": draw(st.booleans())}


def _messages(case: dict[str, Any], with_results: bool) -> tuple[list[Any], list[Any]]:
    """The conversation (input) and the model's reply (output) of one `chat` span: the first
    call answers with the tool calls, the second gets their results and answers."""
    said = [t for t in case["tools"] if t["carrier"] == "messages"]
    genai = case["style"] == "genai"
    user = ({"role": "user", "parts": [{"type": "text", "content": case["question"]}]} if genai
            else {"role": "user", "content": case["question"]})
    calls = ({"role": "assistant", "parts": [
        {"type": "tool_call", "id": t["id"], "name": t["name"], "arguments": t["kwargs"]}
        for t in said]} if genai else {"role": "assistant", "content": None, "tool_calls": [
            {"id": t["id"], "type": "function", "function": {
                "name": t["name"], "arguments": json.dumps(t["kwargs"])}} for t in said]})
    if not with_results:
        return [user], [calls]
    results = ([{"role": "tool", "parts": [{"type": "tool_call_response", "id": t["id"],
                                            "response": t["result"]}]} for t in said] if genai
               else [{"role": "tool", "tool_call_id": t["id"], "content": t["result"]}
                     for t in said])
    answer = ({"role": "assistant", "parts": [{"type": "text", "content": case["answer"]}]}
              if genai else {"role": "assistant", "content": case["answer"]})
    return [user, calls, *results], [answer]


def _chat(case: dict[str, Any], with_results: bool) -> Node:
    sent, replied = _messages(case, with_results)
    return Node("chat m", {sc.GEN_AI_OPERATION_NAME: "chat", sc.GEN_AI_REQUEST_MODEL: "m",
                           sc.GEN_AI_INPUT_MESSAGES: json.dumps(sent),
                           sc.GEN_AI_OUTPUT_MESSAGES: json.dumps(replied)})


def _tree(case: dict[str, Any]) -> Node:
    tools = []
    for tool in case["tools"]:
        attributes = {sc.GEN_AI_OPERATION_NAME: "execute_tool", sc.GEN_AI_TOOL_NAME: tool["name"],
                      sc.GEN_AI_TOOL_CALL_ID: tool["id"], "gen_ai.system": "autogen"}
        if tool["carrier"] == "span":
            attributes[sc.GEN_AI_TOOL_CALL_ARGUMENTS] = json.dumps(tool["kwargs"])
            attributes[sc.GEN_AI_TOOL_CALL_RESULT] = tool["result"]
        tools.append(Node(f"execute_tool {tool['name']}", attributes))
    agent = {sc.GEN_AI_OPERATION_NAME: "invoke_agent", sc.GEN_AI_AGENT_NAME: "geo",
             "gen_ai.system": "autogen"}
    if case["agent_content"]:
        agent[sc.GEN_AI_INPUT_MESSAGES] = json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": case["question"]}]}])
        agent[sc.GEN_AI_OUTPUT_MESSAGES] = json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": case["answer"]}]}])
    return Node("invoke_agent geo", agent, [_chat(case, False), *tools, _chat(case, True)])


def _expected(cases: list[dict[str, Any]]) -> list[Reading]:
    """Each call with its tools in call order: arguments and the tool's text wherever they were
    recorded (messages or the span), none for a call no message names."""
    readings = []
    for case in cases:
        tools = case["tools"]
        readings.append((case["question"], case["answer"], tuple(
            (t["name"], json.dumps(None if t["carrier"] == "nowhere" else t["kwargs"],
                                   sort_keys=True)) for t in tools),
            tuple(t["result"] for t in tools if t["carrier"] != "nowhere")))
    return sorted(readings, key=repr)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Gateway]:
    with running_gateway(tmp_path_factory.mktemp("tool-messages")) as built:
        yield built


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cases=st.lists(agent_call(), min_size=1, max_size=3))
def test_a_tool_span_without_content_takes_it_from_the_model_calls_by_call_id(
        cases: list[dict[str, Any]], gateway: _Gateway) -> None:
    expected = _expected(cases)
    assert _through_the_processor(cases, _tree)[0] == expected
    assert gateway.read(cases, _tree)[0] == expected

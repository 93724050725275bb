"""LangChain's message shapes are read as messages, and LangGraph runs are agent calls at their top
span only, on generated conversations (the real libraries' spans: test_reach_python_frameworks).
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

import tracescore
from tracescore.scoring._inputs import answer_text, question_text

_TYPES = {"system": "system", "user": "human", "assistant": "ai", "tool": "tool"}
_CLASSES = {"system": "SystemMessage", "user": "HumanMessage", "assistant": "AIMessage",
            "tool": "ToolMessage"}
_PIECES = ["Paris", "é", "日本", '"', "{", "}", "[", "]", ":", "messages", "\n", "null"]


def _text(rng: random.Random, prefix: str) -> str:
    return prefix + "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 6)))


def conversation(seed: int) -> tuple[list[dict[str, Any]], str, str]:
    """(turns as {"role", "content", "tool_calls"?, "tool_call_id"?}, question, answer): an
    optional system prompt, earlier turns, the question, tool rounds, the answer."""
    rng = random.Random(seed)
    turns: list[dict[str, Any]] = []
    if rng.random() < 0.5:
        turns.append({"role": "system", "content": _text(rng, "S")})
    for _ in range(rng.randint(0, 2)):
        turns += [{"role": "user", "content": _text(rng, "E")},
                  {"role": "assistant", "content": _text(rng, "A")}]
    question, answer = _text(rng, "Q"), _text(rng, "R")
    turns.append({"role": "user", "content": question})
    for round_ in range(rng.randint(0, 2)):
        call = {"name": "lookup", "args": {"q": question}, "id": f"c{round_}", "type": "tool_call"}
        turns += [{"role": "assistant", "content": "", "tool_calls": [call]},
                  {"role": "tool", "content": _text(rng, "T"), "tool_call_id": f"c{round_}"}]
    turns.append({"role": "assistant", "content": answer if rng.random() < 0.5
                  else [{"type": "text", "text": answer}], "chunk": rng.random() < 0.5})
    return turns, question, answer


def as_langchain(turn: dict[str, Any], shape: str) -> dict[str, Any]:
    kind = _TYPES[turn["role"]]
    if kind == "ai" and turn.get("chunk"):  # a streamed message: its class as its type
        kind = "AIMessageChunk"
    fields = {k: v for k, v in turn.items() if k not in ("role", "chunk")} | {"type": kind}
    if shape == "plain":
        return fields
    if shape == "dict":  # messages_to_dict
        return {"type": fields["type"], "data": fields}
    return {"lc": 1, "type": "constructor",  # serialized (dumpd)
            "id": ["langchain", "schema", "messages", _CLASSES[turn["role"]]], "kwargs": fields}


SHAPES = ("plain", "dict", "serialized")
CASES = [(seed, shape) for seed in range(24) for shape in SHAPES]


def _state(turns: list[dict[str, Any]], shape: str) -> str:
    return json.dumps({"messages": [as_langchain(t, shape) for t in turns]})


@pytest.mark.parametrize(("seed", "shape"), CASES)
def test_a_langgraph_top_span_is_read_as_the_last_user_question_and_the_final_answer(
        seed: int, shape: str) -> None:
    turns, question, answer = conversation(seed)
    asked = turns[: max(i for i, t in enumerate(turns) if t["role"] == "user") + 1]
    attributes = {"openinference.span.kind": "CHAIN", "input.mime_type": "application/json",
                  "output.mime_type": "application/json", "input.value": _state(asked, shape),
                  "output.value": _state(turns, shape),
                  "metadata": json.dumps({"ls_integration": "langgraph", "note": "langgraph_node"})}
    call = tracescore.recognise("geo", attributes)
    assert call is not None and call.convention == "openinference" and call.agent == "geo"
    assert question_text(call.input) == question
    assert call.input[-1] == {"role": "user", "content": question}
    assert all(m["role"] != "tool" for m in call.input)
    assert answer_text(call.output) == answer
    # the same span inside a graph node is a step of a run, whatever its kind
    for kind in ("CHAIN", "AGENT"):
        step = attributes | {"openinference.span.kind": kind,
                             "metadata": json.dumps({"langgraph_node": "agent"})}
        assert tracescore.recognise("agent", step) is None
    # a CHAIN span that is not a finished conversation (its answer still a tool call) is no call
    if turns[-2]["role"] == "tool":
        unfinished = attributes | {"output.value": _state(turns[:-2], shape)}
        assert tracescore.recognise("geo", unfinished) is None


@pytest.mark.parametrize(("seed", "shape"), CASES)
def test_openllmetry_langchain_workflow_values_are_read_inside_inputs_and_outputs(
        seed: int, shape: str) -> None:
    turns, question, answer = conversation(seed)
    asked = turns[: max(i for i, t in enumerate(turns) if t["role"] == "user") + 1]
    state_in, state_out = (json.loads(_state(t, shape)) for t in (asked, turns))
    attributes = {"traceloop.span.kind": "workflow", "traceloop.entity.name": "geo",
                  "traceloop.entity.input": json.dumps(
                      {"inputs": state_in, "tags": [], "metadata": {}, "kwargs": {}}),
                  "traceloop.entity.output": json.dumps(
                      {"outputs": state_out, "kwargs": {"tags": []}})}
    call = tracescore.recognise("geo.workflow", attributes)
    assert call is not None and call.convention == "traceloop" and call.agent == "geo"
    assert question_text(call.input) == question
    assert answer_text(call.output) == answer

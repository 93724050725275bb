"""Answers one level down in a framework's object (issue 34, item 2, family c): the answer is
the assistant's text inside the response, reply, result or event object a framework records, in
its repr, its JSON or as a dict (LlamaIndex's `AgentOutput(response=ChatMessage(...))` and the
`StopEvent` around it, cut short as OpenInference records it; Haystack's `{'replies':
[ChatMessage(...)]}` and its agent state; an OpenAI response's `choices`); never the repr, a
system prompt, the question or a tool return. Generated cases, through both front doors. The
shapes are the real libraries' (recorded from llama-index-core 0.14 and haystack-ai 3.4 in the
side venvs of `rigs/python_frameworks.py` and `rigs/unseen.py`)."""

from __future__ import annotations

import json
from typing import Any

from _span_trees import Node, both
from hypothesis import given, settings
from hypothesis import strategies as st
from test_unwrap import SYSTEM, TEXT, TOOL

from tracescore import _semconv as sc
from tracescore.online.intake._unwrap import unwrap_output
from tracescore.scoring._inputs import answer_text

_LLAMA_ROLE = "<MessageRole.{}: '{}'>"
_HAYSTACK_ROLE = "<ChatRole.{}: '{}'>"


def _llama_message(role: str, text: str | None, tool: str | None = None) -> str:
    blocks = ([f"TextBlock(block_type='text', text={text!r})"] if text is not None else [])
    if tool is not None:
        blocks.append("ToolCallBlock(block_type='tool_call', tool_call_id='call_1', "
                      f"tool_name='lookup', tool_kwargs={{'city': {tool!r}}})")
    return (f"ChatMessage(role={_LLAMA_ROLE.format(role.upper(), role)}, additional_kwargs={{}}, "
            f"blocks=[{', '.join(blocks)}])")


def _agent_output(answer: str | None, tool: str) -> str:
    """LlamaIndex's AgentOutput: the response message, and the tool calls it asks for."""
    calls = (f"[ToolSelection(tool_id='call_1', tool_name='lookup', "
             f"tool_kwargs={{'city': {tool!r}}})]" if answer is None else "[]")
    return (f"AgentOutput(response={_llama_message('assistant', answer, tool if answer is None else None)}, "
            f"structured_response=None, current_agent_name='geo', raw=None, "
            f"tool_calls={calls}, retry_messages=[])")


def _haystack_message(role: str, text: str) -> str:
    return (f"ChatMessage(_role={_HAYSTACK_ROLE.format(role.upper(), role)}, "
            f"_content=[TextContent(text={text!r})], _name=None, _meta={{}})")


def _haystack_json(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "meta": {}, "name": None, "content": [{"text": text}]}


KINDS = ["agent_output", "stop_event", "stop_event_cut", "haystack_replies_repr",
         "haystack_replies_json", "haystack_state", "openai_response", "response_dict",
         "run_result", "result_envelope"]


@st.composite
def nested_answer(draw: st.DrawFn) -> tuple[str, Any, str]:
    """(answer, the output a framework records, the kind), with a system prompt, the question
    and a tool return beside the answer where the framework records them."""
    answer, system, question, tool = draw(TEXT), draw(SYSTEM), draw(TEXT), draw(TOOL)
    kind = draw(st.sampled_from(KINDS))
    if kind == "agent_output":
        value: Any = _agent_output(answer, tool)
    elif kind.startswith("stop_event"):
        value = f"StopEvent(result={_agent_output(answer, tool)})"
        if kind == "stop_event_cut":  # OpenInference cuts a long repr short, after the response
            keep = value.index(", structured_response") + draw(st.integers(1, 60))
            value = value[:keep] + "..."
    elif kind == "haystack_replies_repr":
        value = ("{'replies': [" + _haystack_message("assistant", answer) + "], 'meta': "
                 "[{'model': 'm', 'finish_reason': 'stop'}]}")
    elif kind == "haystack_replies_json":
        value = json.dumps({"replies": [_haystack_json("assistant", answer)]})
    elif kind == "haystack_state":
        messages = [_haystack_json("system", system), _haystack_json("user", question),
                    {"role": "assistant", "meta": {}, "name": None, "content": [{"tool_call": {
                        "tool_name": "lookup", "arguments": {"place": "x"}, "id": None}}]},
                    {"role": "tool", "meta": {}, "name": None, "content": [{"tool_call_result": {
                        "result": tool, "origin": {"tool_name": "lookup"}, "error": False}}]},
                    _haystack_json("assistant", answer)]
        value = json.dumps({"messages": messages, "step_count": 2,
                            "last_message": messages[-1], "exit_reason": "text"})
    elif kind == "openai_response":
        value = json.dumps({"id": "r-1", "object": "chat.completion", "choices": [
            {"index": 0, "finish_reason": "stop",
             "message": {"role": "assistant", "content": answer}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 5}})
    elif kind == "response_dict":
        value = {"response": {"role": "assistant", "content": answer}, "sources": [tool],
                 "system_prompt": system}
    elif kind == "run_result":  # an object whose answer field is a text
        value = f"RunResult(output={answer!r}, state='success', messages=[], token_usage=None)"
    else:  # a chain's result envelope (LangChain's AgentExecutor): the input beside the output
        value = json.dumps({"input": question, "output": answer, "intermediate_steps": [
            [{"tool": "lookup", "tool_input": "x"}, tool]]})
    return answer, value, kind


@settings(max_examples=200, deadline=None)
@given(nested_answer())
def test_the_answer_is_the_assistants_text_inside_the_frameworks_object(
        case: tuple[str, Any, str]) -> None:
    answer, value, _ = case
    assert answer_text(unwrap_output(value)) == answer


@settings(max_examples=100, deadline=None)
@given(TEXT, TOOL)
def test_an_object_whose_response_is_a_tool_call_has_no_answer_never_its_repr(
        text: str, tool: str) -> None:
    for value in (_agent_output(None, tool), f"StopEvent(result={_agent_output(None, tool)})",
                  "{'replies': [" + _haystack_message("system", text) + "]}"):
        assert unwrap_output(value) == ""


@settings(max_examples=100, deadline=None)
@given(TEXT)
def test_data_and_prose_stay_as_they_are(text: str) -> None:
    """Structured output is the answer as a whole; prose that merely looks like a call is kept;
    an object's repr with no answer field becomes its fields (never the repr)."""
    data = json.dumps({"answer": text, "confidence": 0.9})
    assert unwrap_output(data) == data
    assert unwrap_output(f"Note({text})...") == f"Note({text})..."
    assert json.loads(str(unwrap_output(f"CityAnswer(city={text!r}, rank=1)"))) == {
        "city": text, "rank": 1}


def _trees(cases: list[tuple[str, str, Any]]) -> list[Node]:
    """One agent span per case, its answer recorded as a framework object: an OpenInference
    AGENT span (`output.value`), or a span found by generic keys (`<vendor>.observation.*`)."""
    trees = []
    for index, (question, _, value) in enumerate(cases):
        recorded = value if isinstance(value, str) else json.dumps(value)
        if index % 2:
            attributes = {sc.OI_SPAN_KIND: "AGENT", sc.OI_AGENT_NAME: "geo",
                          sc.OI_INPUT_VALUE: json.dumps({"task": question, "stream": False}),
                          sc.OI_OUTPUT_VALUE: recorded}
        else:
            attributes = {sc.GEN_AI_OPERATION_NAME: "invoke_agent", sc.GEN_AI_AGENT_NAME: "geo",
                          "acme.observation.input": json.dumps([
                              {"role": "system", "content": "SYSTEM-PROMPT"},
                              {"role": "user", "content": question}]),
                          "acme.observation.output": recorded}
        trees.append(Node(f"agent {index}", attributes))
    return trees


@settings(max_examples=4, deadline=None)
@given(st.lists(st.tuples(TEXT, nested_answer()), min_size=len(KINDS), max_size=len(KINDS),
                unique_by=lambda c: c[0]))
def test_both_doors_judge_the_answer_inside_the_object(
        drawn: list[tuple[str, tuple[str, Any, str]]]) -> None:
    cases = [(f"{n}. {q}", a, v) for n, (q, (a, v, _)) in enumerate(drawn)]
    processor, gateway = both(lambda: _trees(cases))
    expected = sorted((q, a) for q, a, _ in cases)
    assert processor.seen == expected
    assert gateway.seen == expected
    assert processor.scored == gateway.scored == sorted(str(n) for n in range(len(cases)))


_ADDRESSES = st.sampled_from([
    "<function run.<locals>.<lambda> at 0x7f4ca36022a0>", "<object object at 0x7f00>",
    "<workflows.context.context.Context object at 0x7fa91890a010>",
    "<bound method Agent.run of <Agent object at 0x10>>"])


@settings(max_examples=100, deadline=None)
@given(TEXT, TEXT, SYSTEM, _ADDRESSES)
def test_object_reprs_holding_default_reprs_are_still_read(
        question: str, answer: str, system: str, address: str) -> None:
    """Haystack's model-step input holds its tools, whose `function=<function … at 0x…>` is no
    literal; LlamaIndex's AgentOutput may hold `raw=<… object at 0x…>`: both are still read."""
    from tracescore.online.intake._unwrap import unwrap_input
    from tracescore.scoring._inputs import question_text

    recorded_input = ("{'messages': [" + _haystack_message("system", system) + ", "
                      + _haystack_message("user", question) + "], 'tools': [Tool(name='lookup', "
                      f"function={address}, outputs_to_string=None)]}}")
    assert question_text(unwrap_input(recorded_input)) == question
    recorded_output = _agent_output(answer, "x").replace("raw=None", f"raw={address}")
    assert unwrap_output(recorded_output) == answer

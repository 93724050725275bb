"""Tool-call accuracy (judged) through real litellm over HTTP to the stub judge: the tools the
agent called, the available tools, the reference's formula and edge cases."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _helpers import STUB_JUDGE, user_prompt

from tracescore import (
    ConfigurationError,
    ScorerError,
    ToolCall,
    ToolCallAccuracyLLMScorer,
    create_tool_call_accuracy_scorer_llm,
)
from tracescore.testing import StubLLMServer

REQUEST = "What's the weather in Oslo right now?"
TOOLS = [{"id": "get_weather", "description": "Current weather for a city"},
         {"id": "get_news", "description": "Headlines for a topic"}]


def scorer(stub: StubLLMServer, tools: Any = TOOLS, **options: Any) -> ToolCallAccuracyLLMScorer:
    return create_tool_call_accuracy_scorer_llm(
        api_base=stub.base_url, **STUB_JUDGE, available_tools=tools, **options)


def script(stub: StubLLMServer, appropriate: list[tuple[str, bool]],
           missing: list[str] | None = None, reason: str = "The score is X because.") -> None:
    analysis: dict[str, Any] = {"evaluations": [
        {"toolCalled": name, "wasAppropriate": ok, "reasoning": f"{name} ok={ok}"}
        for name, ok in appropriate]}
    if missing is not None:
        analysis["missingTools"] = missing
    stub.enqueue(analysis)
    stub.enqueue({"reason": reason})


CASES = [
    # (tools called, judge evaluations, missing tools, expected score)
    (["get_weather"], [("get_weather", True)], [], 1.0),
    (["get_weather", "get_news"], [("get_weather", True), ("get_news", False)], [], 0.5),
    (["get_news"], [("get_news", False)], ["get_weather"], 0.0),
    (["get_weather", "get_news", "get_news"],
     [("get_weather", True), ("get_news", False), ("get_news", False)], [], 0.33),
    ([], [], ["get_weather"], 0.0),  # no call, but one was missing
    ([], [], [], 1.0),  # no call, and none was needed (a clarifying question)
    ([], [], None, 1.0),  # the judge left missingTools out
]


@pytest.mark.parametrize(("called", "evaluations", "missing", "expected"), CASES)
def test_reference_cases_through_litellm(stub_llm: StubLLMServer, called: list[str],
                                         evaluations: list[tuple[str, bool]],
                                         missing: list[str] | None, expected: float) -> None:
    script(stub_llm, evaluations, missing, reason=f"The score is {expected} because reasons.")
    calls = [ToolCall(name=name, arguments={"city": "Oslo"}, call_id=f"c{i}")
             for i, name in enumerate(called)]
    result = scorer(stub_llm).run(input=REQUEST, output="It is 3 °C and cloudy.",
                                  tool_calls=calls)

    assert result.score == expected
    assert result.reason == f"The score is {expected} because reasons."
    assert result.preprocess_step_result["actual_tools"] == called
    assert result.preprocess_step_result["has_tool_calls"] == bool(called)
    assert [i["tool_call_id"] for i in result.preprocess_step_result["tool_call_infos"]] == \
        [f"c{i}" for i in range(len(called))]
    assert result.analyze_step_result["missingTools"] == (missing or [])
    assert result.preprocess_prompt is None  # preprocess is code, as in the reference
    assert len(stub_llm.requests) == 2
    analyze, reason = (user_prompt(r) for r in stub_llm.requests)
    assert f"<request>\n{REQUEST}\n</request>" in analyze
    assert f"<tools_called>\n{json.dumps(called)}\n</tools_called>" in analyze
    assert ("<available_tools>\nget_weather: Current weather for a city\n"
            "get_news: Headlines for a topic\n</available_tools>") in analyze
    assert f'starts exactly with "The score is {expected:g} because"' in reason
    assert result.analyze_prompt == analyze and result.generate_reason_prompt == reason


def test_tool_calls_are_read_from_the_output_without_recorded_calls(stub_llm: StubLLMServer
                                                                    ) -> None:
    script(stub_llm, [("get_weather", True)])
    output = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "assistant", "content": "3 °C."}]
    result = scorer(stub_llm).run(input=REQUEST, output=output)
    assert result.score == 1.0
    assert result.preprocess_step_result["actual_tools"] == ["get_weather"]


def test_judge_booleans_given_as_text_are_refused(stub_llm: StubLLMServer) -> None:
    """"False" as text is refused, not read: the reference's score step counts any non-empty
    text as appropriate, so reading it as false would give another number than the reference's
    for the same reply (refusing gives none)."""
    reply = {"evaluations": [
        {"toolCalled": "get_weather", "wasAppropriate": "true", "reasoning": "r"},
        {"toolCalled": "get_news", "wasAppropriate": "False", "reasoning": "r"}],
        "missingTools": []}
    for _ in range(4):  # whatever the judge client's re-asks
        stub_llm.enqueue(reply)
    with pytest.raises(ScorerError) as info:
        scorer(stub_llm).run(input=REQUEST, output="x",
                             tool_calls=[ToolCall(name="get_weather"), ToolCall(name="get_news")])
    assert info.value.step == "analyze"
    assert "'wasAppropriate' must be true or false, got 'true'" in str(info.value)


@pytest.mark.parametrize("value", [None, {}, [], [{"role": "user", "content": ""}]])
def test_no_user_request_fails_preprocess(stub_llm: StubLLMServer, value: Any) -> None:
    with pytest.raises(ScorerError) as info:
        scorer(stub_llm).run(input=value, output="x")
    assert info.value.step == "preprocess"
    assert stub_llm.requests == []


def test_no_output_fails_preprocess(stub_llm: StubLLMServer) -> None:
    with pytest.raises(ScorerError, match="no output") as info:
        scorer(stub_llm).run(input=REQUEST, output=None)
    assert info.value.step == "preprocess"


def get_weather(city: str) -> str:
    """Current weather for a city.

    Longer notes that are not part of the description.
    """
    return city


class SearchTool:
    id = "search"
    description = "Search the web"


@pytest.mark.parametrize(("tools", "lines"), [
    (TOOLS, ["get_weather: Current weather for a city", "get_news: Headlines for a topic"]),
    ([{"type": "function", "function": {"name": "get_weather",
                                        "description": "Current weather for a city",
                                        "parameters": {"type": "object"}}}],
     ["get_weather: Current weather for a city"]),
    ([get_weather, SearchTool()], ["get_weather: Current weather for a city.",
                                   "search: Search the web"]),
    (["lookup"], ["lookup: "]),
    ([], []),
])
def test_available_tools_in_every_common_shape(stub_llm: StubLLMServer, tools: list[Any],
                                               lines: list[str]) -> None:
    script(stub_llm, [])
    scorer(stub_llm, tools=tools).run(input=REQUEST, output="x")
    prompt = user_prompt(stub_llm.requests[0])
    assert "<available_tools>\n" + "\n".join(lines) + "\n</available_tools>" in prompt


def test_camel_case_options_like_the_reference(stub_llm: StubLLMServer) -> None:
    made = create_tool_call_accuracy_scorer_llm(model="openai/gpt-4o-mini",
                                                options={"availableTools": TOOLS})
    assert [t.name for t in made.available_tools] == ["get_weather", "get_news"]
    assert made.id == "llm-tool-call-accuracy" and made.uses_judge


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, "available_tools is required"),
    ({"available_tools": "get_weather"}, "available_tools must be a list"),
    ({"available_tools": [{"description": "no name"}]}, r"available_tools\[0\]"),
    ({"available_tools": [42]}, r"available_tools\[0\]"),
    ({"available_tools": [], "options": {"scale": 2}}, "unknown option 'scale'"),
])
def test_configuration_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        create_tool_call_accuracy_scorer_llm(model="openai/gpt-4o-mini", **kwargs)


def test_a_miscounting_judge_is_asked_once_more(stub_llm: StubLLMServer) -> None:
    calls = [ToolCall(name="get_weather"), ToolCall(name="get_news")]
    one = {"evaluations": [{"toolCalled": "get_weather", "wasAppropriate": True,
                            "reasoning": "r"}], "missingTools": []}
    stub_llm.enqueue(one)
    stub_llm.enqueue(one)  # still one evaluation for two calls
    stub_llm.enqueue({"reason": "The score is 1 because."})
    result = scorer(stub_llm).run(input=REQUEST, output="x", tool_calls=calls)
    assert result.score == 1.0  # the evaluations received, as the reference would score them
    assert result.analyze_step_result["mismatch"] == {
        "tool_calls": 2, "evaluations": 1, "first_attempt_evaluations": 1,
        "note": "the judge gave a different number of evaluations than tool_calls twice; the "
                "score uses the evaluations received"}
    assert "a previous reply gave 1 evaluations for 2 tool calls" in user_prompt(
        stub_llm.requests[1])

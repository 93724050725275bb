"""Tool-call accuracy (judged): did the agent pick the right tools for the user's request?

preprocess (code: the tools the agent called) -> analyze (judge: each call appropriate or not
for the explicit request, and the tools it should have called but did not; asked once more
when the number of evaluations is off) -> score (code) ->
reason (judge: explains the score it is given). The available tools (name and description)
come from the `available_tools` option; the calls from the call's recorded `tool_calls`, else
from the output (see `tracescore.scoring.tools`).

The offline judge's version (`model="tracescore/offline"`) is word overlap: a call is
appropriate when the tool is available and its name or description shares a content word
with the request; an available tool that shares one but was not called is missing. It cannot
tell a requested tool from a merely related one that shares a word, nor when asking a
clarifying question was the right call.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import (
    STEP_ANALYZE,
    STEP_PREPROCESS,
    STEP_REASON,
    ScorerInput,
)
from tracescore.scoring._inputs import InputError, answer_text, question_text
from tracescore.scoring._judge_api import Judge, JudgeRequest
from tracescore.scoring._judged import JudgedRun, JudgedScorer
from tracescore.scoring._offline import content_stems, register_offline_task
from tracescore.scoring._options import merge_options
from tracescore.scoring._prompting import (
    REASON_SCHEMA,
    Blocks,
    format_score,
    recount_note,
    reference_round,
    validate_reason,
)
from tracescore.scoring.tools import called_tool_names

TASK_EVALUATIONS = "tool_selection.evaluations"
TASK_REASON = "tool_selection.reason"

_block = Blocks("request", "response", "tools_called", "available_tools", "evaluations")

SYSTEM = f"""\
You are an expert evaluator of how AI agents choose tools. You decide whether each tool an \
agent called was appropriate for what the user explicitly asked, and which tools it should \
have called but did not. Be literal: a tool is appropriate only when it serves the request \
directly; a tool that is merely related or possibly helpful, but was not asked for, is not.

{_block.declaration()}

Always reply with exactly one JSON object in the shape the task asks for, and nothing else."""


@dataclass(frozen=True)
class AvailableTool:
    """A tool the agent could call: its name and what it does."""

    name: str
    description: str = ""


def available_tool(value: Any, where: str = "available_tools") -> AvailableTool:
    """An AvailableTool from a dict ({"id"|"name", "description"}, or an OpenAI tool schema
    {"type": "function", "function": {...}}), an object with `id`/`name` and `description`
    (or a function: its name and the first line of its docstring), or a bare name."""
    if isinstance(value, AvailableTool):
        return value
    name: Any
    description: Any
    if isinstance(value, str):
        name, description = value, ""
    elif isinstance(value, Mapping):
        function = value.get("function")
        spec: Mapping[str, Any] = function if isinstance(function, Mapping) else value
        name = spec.get("id") or spec.get("name")
        description = spec.get("description") or ""
    else:
        name = getattr(value, "id", None) or getattr(value, "name", None) \
            or getattr(value, "__name__", None)
        description = getattr(value, "description", None) or \
            (inspect.getdoc(value) or "").split("\n", 1)[0]
    if not isinstance(name, str) or not name.strip() or not isinstance(description, str):
        raise ConfigurationError(
            f"{where}: a tool needs a name ('id' or 'name') and a text 'description', got "
            f"{value!r}")
    return AvailableTool(name.strip(), description.strip())


def check_available_tools(value: Any) -> tuple[AvailableTool, ...]:
    """Validate the `available_tools` option (a list of tools, possibly empty)."""
    if value is None:
        raise ConfigurationError(
            "available_tools is required: the tools the agent could call, e.g. "
            "[{'id': 'get_weather', 'description': 'Current weather for a city'}]")
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise ConfigurationError(f"available_tools must be a list of tools, got {value!r}")
    return tuple(available_tool(tool, f"available_tools[{i}]") for i, tool in enumerate(value))


def tool_selection_score(evaluations: Sequence[Mapping[str, Any]],
                         missing_tools: Sequence[str]) -> float:
    """appropriate calls / evaluated calls, rounded to 2 decimals as the reference rounds.

    With no evaluations (no tool was called): 0 when the judge names tools the agent should
    have called, else 1 (not calling was right). There is no scale, as in the reference.
    """
    if not evaluations:
        return 0.0 if missing_tools else 1.0
    appropriate = sum(1 for e in evaluations if e.get("wasAppropriate") is True)
    return reference_round(appropriate / len(evaluations))


def tool_selection_label(score: float) -> str:
    """`appropriate` (1), `partially_appropriate` (above 0) or `inappropriate`."""
    if score >= 1:
        return "appropriate"
    return "partially_appropriate" if score > 0 else "inappropriate"


# --- analyze: each call appropriate or not ---------------------------------------------------
EVALUATIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "evaluations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "toolCalled": {"type": "string"},
                    "wasAppropriate": {"type": "boolean"},
                    "reasoning": {"type": "string"},
                },
                "required": ["toolCalled", "wasAppropriate", "reasoning"],
                "additionalProperties": False,
            },
        },
        "missingTools": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["evaluations", "missingTools"],
    "additionalProperties": False,
}

_EVALUATIONS_TASK = """\
Task: judge the agent's tool choices for the user's request in the <request> block. The \
<response> block is the agent's final answer, the <tools_called> block the tools it called \
(a JSON array, in call order), and the <available_tools> block the tools it had, one \
"name: description" per line.

If the agent called tools: give one evaluation per call, in order. A call is appropriate \
("wasAppropriate": true) only when the tool directly provides what the user explicitly asked \
for; a call the user did not ask for is not appropriate, however related or helpful.

If the agent called no tools: give no evaluations, and decide whether that was right from the \
request and the response:
- asking a clarifying question about a vague request ("find me a lawyer") was right;
- a generic answer where an available tool would have served a clear, specific request, or \
ignoring such a request, was wrong;
- stalling with questions when the request was already specific enough was wrong.

In "missingTools" list the available tools the agent should have called for this request but \
did not (an empty list when nothing was missing, or when asking for clarification was right).

Examples, with tools "get_weather: current weather for a city" and "get_news: headlines for a \
topic":
- Request "What's the weather in Oslo?", tools called ["get_weather"] -> one appropriate \
evaluation, no missing tools.
- Same request, tools called ["get_weather", "get_news"] -> get_weather appropriate, \
get_news not appropriate (news was not asked for).
- Same request, no tools called, response "It is usually cold in Oslo." -> no evaluations, \
missingTools ["get_weather"].

Reply with a JSON object {"evaluations": [{"toolCalled": <tool name>, "wasAppropriate": \
true | false, "reasoning": <one sentence>}, ...], "missingTools": [<tool name>, ...]} and \
nothing else.
"""


def _truth(value: Any) -> bool:
    """A judge's boolean. Text such as "false" is refused, not read: the reference's score
    step counts any non-empty text as appropriate, so reading it would change the number."""
    if isinstance(value, bool):
        return value
    raise ValueError(f"'wasAppropriate' must be true or false, got {value!r}")


def validate_evaluations(value: Any) -> dict[str, Any]:
    evaluations = value.get("evaluations") if isinstance(value, dict) else None
    if not isinstance(evaluations, list):
        raise ValueError("expected an object with an 'evaluations' list")  # noqa: TRY004
    clean: list[dict[str, Any]] = []
    for item in evaluations:
        if not isinstance(item, dict) or "wasAppropriate" not in item:
            raise ValueError(
                "every evaluation must be an object with 'toolCalled' and 'wasAppropriate'")
        clean.append({"toolCalled": str(item.get("toolCalled", "")),
                      "wasAppropriate": _truth(item["wasAppropriate"]),
                      "reasoning": str(item.get("reasoning", ""))})
    missing = value.get("missingTools", [])
    if missing is None:
        missing = []
    if not isinstance(missing, list) or not all(isinstance(m, str) for m in missing):
        raise ValueError("'missingTools' must be a list of tool names")
    return {"evaluations": clean, "missingTools": list(missing)}  # blank names count, as there


def _tool_lines(tools: Sequence[AvailableTool]) -> str:
    return "\n".join(f"{t.name}: {t.description}" for t in tools)


def evaluations_request(request: str, response: str, called: Sequence[str],
                        tools: Sequence[AvailableTool], *,
                        previous_count: int | None = None) -> JudgeRequest:
    count = len(called)
    task = _EVALUATIONS_TASK + recount_note(previous_count, "evaluations", count,
                                            f"tool call{'s' if count != 1 else ''}")
    prompt = (f"{task}\n{_block('request', request)}\n\n"
              f"{_block('response', response)}\n\n"
              f"{_block('tools_called', json.dumps(list(called), ensure_ascii=False))}\n\n"
              f"{_block('available_tools', _tool_lines(tools))}")
    return JudgeRequest(step=STEP_ANALYZE, task=TASK_EVALUATIONS, system=SYSTEM, prompt=prompt,
                        schema_name="tool_selection_evaluations", schema=EVALUATIONS_SCHEMA,
                        validate=validate_evaluations,
                        data={"request": request, "response": response, "called": list(called),
                              "tools": [{"name": t.name, "description": t.description}
                                        for t in tools]})


# --- reason ----------------------------------------------------------------------------------
_REASON_TASK = """\
Task: explain a tool-selection score that has already been computed. Do not recompute or \
change it.

The score is {score} on a scale from 0 to 1: the share of the agent's tool calls in the \
<evaluations> block that were appropriate for the request; with no calls it is 1 when no tool \
was missing and 0 when one was.

Write one plain sentence that starts exactly with "The score is {score} because" and names \
the tools that were appropriate, inappropriate or missing.

Reply with a JSON object {{"reason": <string>}} and nothing else.
"""


def reason_request(request: str, evaluations: Sequence[Mapping[str, Any]],
                   missing_tools: Sequence[str], *, score: float) -> JudgeRequest:
    prompt = _REASON_TASK.format(score=format_score(score))
    shown = json.dumps({"evaluations": list(evaluations), "missingTools": list(missing_tools)},
                       ensure_ascii=False, indent=1)
    prompt += f"\n{_block('request', request)}\n\n{_block('evaluations', shown)}"
    return JudgeRequest(step=STEP_REASON, task=TASK_REASON, system=SYSTEM, prompt=prompt,
                        schema_name="tool_selection_reason", schema=REASON_SCHEMA,
                        validate=validate_reason,
                        data={"request": request, "evaluations": list(evaluations),
                              "missingTools": list(missing_tools), "score": score})


# --- the scorer ------------------------------------------------------------------------------
class ToolCallAccuracyLLMScorer(JudgedScorer):
    """LLM-judged tool selection (same steps and formula as the reference system's
    `createToolCallAccuracyScorerLLM`). Scores 0..1; no scale, as in the reference.

    An input without a user request, or no output at all, fails the preprocess step (the
    reference refuses empty input or output too); an empty answer with tool calls is judged.
    """

    id = "llm-tool-call-accuracy"
    judge_steps = ("analyze", "reason")  # the steps that ask the judge
    name = "Tool Call Accuracy (LLM)"
    aliases = ("tool-call-accuracy-llm", "judged-tool-call-accuracy")
    factory = "create_tool_call_accuracy_scorer_llm"

    def __init__(self, *, model: str | Judge, available_tools: Sequence[Any] | None = None,
                 **options: Any) -> None:
        self.available_tools = check_available_tools(available_tools)
        super().__init__(model=model, scale=1, **options)

    def label(self, score: float) -> str:
        return tool_selection_label(score)

    def __repr__(self) -> str:
        names = [t.name for t in self.available_tools]
        return f"ToolCallAccuracyLLMScorer(model={self.model!r}, available_tools={names!r})"

    async def preprocess(self, run: JudgedRun, call: ScorerInput) -> tuple[str, str, list[str]]:
        """The request, the response and the tools called, in order (code)."""
        if call.output is None:
            raise run.error(STEP_PREPROCESS, "there is no output to judge the tool calls of")
        tool_calls = call.tool_calls
        try:
            request = run.judge_text(question_text(call.input))
            response = run.judge_text(answer_text(call.output))
            called = called_tool_names(tool_calls, call.input, call.output)
        except (InputError, ValueError, TypeError) as exc:
            raise run.error(STEP_PREPROCESS, str(exc)) from exc
        if not request.strip():
            raise run.error(STEP_PREPROCESS, "the input has no user request to judge the tool "
                                             "calls against")
        infos = [{"tool_name": name, "index": i,
                  "tool_call_id": tool_calls[i].call_id if i < len(tool_calls) else None}
                 for i, name in enumerate(called)]
        run.record(STEP_PREPROCESS, result={"actual_tools": called,
                                            "has_tool_calls": bool(called),
                                            "tool_call_infos": infos})
        return request, response, called

    async def analyze(self, run: JudgedRun, call: ScorerInput,
                      prepared: tuple[str, str, list[str]]) -> _Analysis:
        """Whether each call was appropriate, and which tools were missing (judge)."""
        request, response, called = prepared
        reply, evaluations, mismatch = await run.ask_list(
            lambda previous: evaluations_request(request, response, called,
                                                 self.available_tools, previous_count=previous),
            key="evaluations", count=len(called), of="tool_calls")
        missing: list[str] = reply.data["missingTools"]
        run.record(STEP_ANALYZE, prompt=reply.prompt, result={
            "evaluations": evaluations, "missingTools": missing, **mismatch, **reply.notes})
        return request, evaluations, missing

    def score(self, analysis: _Analysis) -> float:
        return tool_selection_score(analysis[1], analysis[2])

    def reason(self, analysis: _Analysis, score: float) -> JudgeRequest:
        request, evaluations, missing = analysis
        return reason_request(request, evaluations, missing, score=score)


# what the analyze step hands on: the request, the judge's evaluations, the missing tools
_Analysis = tuple[str, list[dict[str, Any]], list[str]]


def create_tool_call_accuracy_scorer_llm(*, model: str | Judge,
                                         available_tools: Sequence[Any] | None = None,
                                         options: Mapping[str, Any] | None = None,
                                         **judge_kwargs: Any) -> ToolCallAccuracyLLMScorer:
    """Factory named after the reference system's `createToolCallAccuracyScorerLLM`.

    `available_tools` (or `availableTools` in `options`) lists the tools the agent could call:
    dicts with `id`/`name` and `description`, OpenAI tool schemas, tool objects or functions.
    """
    merged = merge_options(options, {"available_tools": available_tools},
                           {"availableTools": "available_tools"})
    return ToolCallAccuracyLLMScorer(model=model, **merged, **judge_kwargs)


# --- the offline judge's version (word overlap) ---------------------------------------------
_NAME_PARTS = re.compile(r"[_\-.]+|(?<=[a-z0-9])(?=[A-Z])")


def _tool_stems(name: str, description: str) -> set[str]:
    """The content-word stems of a tool's name (snake, kebab or camel case) and description."""
    return content_stems(" ".join(_NAME_PARTS.split(name)) + " " + description)


def _offline_evaluations(request: JudgeRequest) -> tuple[dict[str, Any], dict[str, Any]]:
    data = request.data
    wanted = content_stems(str(data.get("request", "")))
    tools = {t["name"]: _tool_stems(t["name"], t["description"]) for t in data.get("tools", [])}
    relevant = {name: sorted(stems & wanted) for name, stems in tools.items() if stems & wanted}
    evaluations = []
    for name in data.get("called", []):
        if name not in tools:
            ok, why = False, f"{name} is not one of the available tools."
        elif name in relevant:
            ok, why = True, (f"{name} matches the request "
                             f"({', '.join(repr(w) for w in relevant[name])}).")
        else:
            ok, why = False, f"{name} shares no key word with the request."
        evaluations.append({"toolCalled": name, "wasAppropriate": ok, "reasoning": why})
    missing = [name for name in relevant if name not in data.get("called", [])]
    notes = {"offline_method": "word overlap of the request with each tool's name and "
                               "description (no language model)"}
    return {"evaluations": evaluations, "missingTools": missing}, notes


def _offline_reason(request: JudgeRequest) -> tuple[dict[str, Any], dict[str, Any]]:
    data = request.data
    evaluations, missing = data.get("evaluations", []), data.get("missingTools", [])
    good = [e["toolCalled"] for e in evaluations if e.get("wasAppropriate")]
    bad = [e["toolCalled"] for e in evaluations if not e.get("wasAppropriate")]
    parts = []
    if good:
        parts.append(f"{', '.join(good)} matched the request")
    if bad:
        parts.append(f"{', '.join(bad)} did not")
    if missing:
        parts.append(f"{', '.join(missing)} matched it but {'was' if len(missing) == 1 else 'were'}"
                     f" not called")
    if not parts:
        parts.append("no tool was called and none matched the request")
    score = format_score(float(data.get("score", 0.0)))
    return {"reason": f"The score is {score} because {'; '.join(parts)} (offline judge: word "
                      f"overlap, no language model)."}, {}


register_offline_task(TASK_EVALUATIONS, _offline_evaluations)
register_offline_task(TASK_REASON, _offline_reason)

"""The `Run` a run-scope scorer judges, read from the spans of its trace.

One reader for both front doors. As a span of a collected trace ends (in process) or arrives (in
the gateway), `read_mark` notes what kind of step it is (a tool call, an LLM call, a sub-agent or
a workflow step; none for other spans), its name, its start and end, its error, and an LLM
call's model and tokens; the `TraceCollector` keeps the mark beside the span's parent link and
tool item. When a run is scored, `RunSource` is what the collector had below its root agent span
(copied under its lock), and `run_of` builds the `Run` from it in the worker:

- `steps`: the run's tool calls in start order, its sub-agents' too (what trajectories are
  compared on), within `TraceLimits` (tool calls, characters); not the tool call that hands
  the run's answer over (`_answer_channel`: the run's last tool call, when it does);
- `timeline`: every LLM call, tool call and sub-agent in start order, each sub-agent's (and
  workflow step's) own steps as its children; the spans in between that are no step (a
  framework's chain or graph-node spans) are looked through;
- the run's duration and error: its root span's.

Starts are in ms after the run's start; durations in ms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, NamedTuple

from tracescore import _semconv as sc
from tracescore.online.intake._tool_results import tool_error
from tracescore.online.intake._tool_spans import tool_of
from tracescore.online.intake._trace_input import Item, TraceLimits, answer_channel
from tracescore.scoring._runs import AGENT, LLM_CALL, TOOL_CALL, WORKFLOW_STEP, Run, Step

_LLM_OPERATIONS = frozenset({sc.OP_CHAT, "text_completion", "generate_content", "embeddings"})
_OI_KINDS = {"TOOL": TOOL_CALL, "LLM": LLM_CALL, "AGENT": AGENT}
_TL_KINDS = {"agent": AGENT, "workflow": WORKFLOW_STEP, "tool": TOOL_CALL, "task": None}
_MAX_DEPTH = 256


class Mark(NamedTuple):
    """What one span is as a step of a run (`kind` None: no step of its own)."""

    kind: str | None
    name: str
    start_ns: int
    end_ns: int
    error: str | None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


def read_mark(name: str, attributes: Mapping[str, Any], start_ns: int, end_ns: int,
              error: str | None) -> Mark:
    """The mark of one finished span. Cheap: a few attribute reads, nothing decoded."""
    get = attributes.get
    operation = get(sc.GEN_AI_OPERATION_NAME)
    kind: str | None = None
    if operation is not None:
        kind = (TOOL_CALL if operation == sc.OP_EXECUTE_TOOL
                else AGENT if operation == sc.OP_INVOKE_AGENT
                else WORKFLOW_STEP if operation == sc.OP_INVOKE_WORKFLOW
                else LLM_CALL if operation in _LLM_OPERATIONS else None)
    else:
        oi_kind = get(sc.OI_SPAN_KIND)
        if oi_kind is not None:
            kind = _OI_KINDS.get(str(oi_kind).upper())
        else:
            tl_kind = get(sc.TL_SPAN_KIND)
            if tl_kind is not None:
                kind = _TL_KINDS.get(str(tl_kind))
            elif sc.GEN_AI_REQUEST_MODEL in attributes:
                kind = LLM_CALL
            elif tool_of(name, attributes) is not None:  # a tool span of another convention
                kind = TOOL_CALL
    if kind is None:
        return Mark(None, name, start_ns, end_ns, error)
    if kind == LLM_CALL:
        model = get(sc.GEN_AI_RESPONSE_MODEL) or get(sc.GEN_AI_REQUEST_MODEL) \
            or get("llm.model_name")
        return Mark(kind, name if model is None else str(model), start_ns, end_ns, error,
                    None if model is None else str(model),
                    _int(get(sc.GEN_AI_USAGE_INPUT_TOKENS, get("llm.token_count.prompt"))),
                    _int(get(sc.GEN_AI_USAGE_OUTPUT_TOKENS, get("llm.token_count.completion"))))
    if kind == TOOL_CALL:
        found = tool_of(name, attributes)
        if found is not None:
            name = found.name
            if error is None and found.failed:  # flagged, not by its status
                error = tool_error(found.result)
    else:
        named = get(sc.GEN_AI_AGENT_NAME) or get(sc.OI_AGENT_NAME) or get(sc.TL_ENTITY_NAME)
        if named:
            name = str(named)
    return Mark(kind, name, start_ns, end_ns, error)


class RunSource(NamedTuple):
    """What the collector kept below a run's root agent span (a copy; decoded by `run_of`)."""

    root: int
    parents: Mapping[int, int]
    marks: Mapping[int, Mark]
    items: Mapping[int, Item]
    agents: frozenset[int]  # spans read as agent calls (their marks may say nothing)
    content: Mapping[int, Mapping[str, str]] | None  # tool content kept off spans, by span id


def run_of(source: RunSource, limits: TraceLimits, answer: object = None) -> Run:
    """The run below `source.root`: its tool calls, its timeline, its duration and error;
    `answer`: the run's answer (the tool call that hands it over is no step)."""
    root, parents, marks = source.root, source.parents, source.marks
    origin = marks[root].start_ns if root in marks else min(
        (m.start_ns for m in marks.values()), default=0)
    kinds = {span_id: AGENT if mark.kind is None and span_id in source.agents else mark.kind
             for span_id, mark in marks.items() if span_id != root}
    steps = {span_id for span_id, kind in kinds.items() if kind is not None}
    children: dict[int, list[int]] = {}
    for span_id in steps:
        above = _step_above(span_id, root, parents, steps)
        if above is not None:
            children.setdefault(above, []).append(span_id)
    chars = [limits.max_chars]  # left for tool arguments and results, shared by the run
    tool_ids: dict[int, int] = {}  # id() of a tool call's step -> its span id

    def build(span_id: int) -> Step:
        mark = marks[span_id]
        kind = kinds[span_id] or TOOL_CALL
        below = tuple(build(c) for c in sorted(children.get(span_id, ()),
                                               key=lambda c: marks[c].start_ns))
        step = Step(name=mark.name, type=kind, error=mark.error, model=mark.model,
                    input_tokens=mark.input_tokens, output_tokens=mark.output_tokens,
                    children=below, start_ms=(mark.start_ns - origin) / 1e6,
                    duration_ms=max(0, mark.end_ns - mark.start_ns) / 1e6)
        if kind == TOOL_CALL:
            step = _tool_step(step, _item(source, span_id), chars)
            tool_ids[id(step)] = span_id
        return step

    timeline = tuple(build(s) for s in sorted(children.get(root, ()),
                                              key=lambda s: marks[s].start_ns))
    tools = [s for s in _flat(timeline) if s.type == TOOL_CALL]
    channel = answer_channel([_as_item(source, s, tool_ids) for s in tools], answer)
    if channel is not None:
        del tools[channel]
    tools = tools[:limits.max_tool_calls]
    root_mark = marks.get(root)
    return Run(steps=tuple(Step(name=s.name, type=TOOL_CALL, arguments=s.arguments,
                                result=s.result, error=s.error, duration_ms=s.duration_ms,
                                start_ms=s.start_ms) for s in tools),
               timeline=timeline,
               duration_ms=None if root_mark is None
               else max(0, root_mark.end_ns - root_mark.start_ns) / 1e6,
               error=None if root_mark is None else root_mark.error)


def agent_above(parents: Mapping[int, int], span_id: int, agents: set[int] | frozenset[int]
                ) -> bool:
    """Whether an agent span in `agents` is above `span_id` (then it is no run's root)."""
    parent = parents.get(span_id)
    for _ in range(_MAX_DEPTH):
        if parent is None:
            return False
        if parent in agents:
            return True
        parent = parents.get(parent)
    return False


def _step_above(span_id: int, root: int, parents: Mapping[int, int],
                steps: set[int]) -> int | None:
    """The nearest step (or the root) above `span_id`; None when it is not below the root."""
    parent = parents.get(span_id)
    for _ in range(_MAX_DEPTH):
        if parent is None:
            return None
        if parent == root or parent in steps:
            return parent
        parent = parents.get(parent)
    return None


def _item(source: RunSource, span_id: int) -> Item | None:
    item = source.items.get(span_id)
    kept = source.content.get(span_id) if source.content else None
    return item if item is None or kept is None else item.with_content(kept)


def _as_item(source: RunSource, step: Step, tool_ids: Mapping[int, int]) -> Item:
    """The item of a tool call's step (a bare one when its span recorded none)."""
    item = _item(source, tool_ids[id(step)]) if id(step) in tool_ids else None
    return item if item is not None else Item(0, (step.name, step.arguments, None, None, None),
                                              (), 0)


def _tool_step(step: Step, item: Item | None, chars: list[int]) -> Step:
    """`step` with its tool call's name, arguments, result and error (arguments and result
    left out once the run's characters are spent)."""
    call = item.tool_call() if item is not None else None
    if item is None or call is None:
        return step
    if item.chars > chars[0]:
        return replace(step, name=call.name, error=call.error)
    chars[0] -= item.chars
    return replace(step, name=call.name, arguments=call.arguments, result=call.result,
                   error=call.error)


def _flat(steps: tuple[Step, ...]) -> list[Step]:
    out: list[Step] = []
    for step in steps:
        out.append(step)
        out.extend(_flat(step.children))
    return sorted(out, key=lambda s: s.start_ms or 0.0)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None

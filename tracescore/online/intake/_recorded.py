"""What one finished span recorded for its trace, read from a span view the same way for both
front doors: its tool call or context (`Item`), its LLM call (`LlmCall`) and what step of a run
it is (`Mark`). The `TraceCollector` keeps them beside the span's parent link.

Cheap (runs for every span of a trace a scorer may sample): a few attribute reads, nothing
decoded. `carries_item`: whether a span's attribute keys say it may record one of these
(`ITEM_MARKERS`, tool kind markers of any namespace), so a door can leave the attributes of
other spans undecoded.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from tracescore import _semconv as sc
from tracescore.online.intake._llm_calls import LLM_MARKERS, LlmCall, read_llm_call
from tracescore.online.intake._run_steps import Mark, read_mark
from tracescore.online.intake._shaped import shaped_llm_call
from tracescore.online.intake._tool_spans import TOOL_MARKERS, may_be_tool
from tracescore.online.intake._trace_input import Item, read_span
from tracescore.online.intake._view import SpanView

# attribute keys (and the key endings of tool kind markers, `_tool_spans`) of the spans that can
# carry a tool call, context or an LLM call
ITEM_MARKERS = frozenset({sc.GEN_AI_OPERATION_NAME, sc.OI_SPAN_KIND, sc.TS_CONTEXT}) \
    | LLM_MARKERS | TOOL_MARKERS


def carries_item(keys: Collection[str]) -> bool:
    """Whether a span with these attribute keys may record an item or LLM call (decode it)."""
    return not ITEM_MARKERS.isdisjoint(keys) or may_be_tool(keys)


def error_of(view: SpanView, attributes: Mapping[str, Any]) -> str | None:
    """The error text of a failed span (status message, else `error.type`), None if it did not
    fail (`error.type` alone on a span without an error status is its error text too)."""
    error_type = attributes.get(sc.ERROR_TYPE)
    if not view.error:
        return None if error_type is None else str(error_type)
    return view.status_message or (str(error_type) if error_type is not None else "error")


def recorded(view: SpanView, attributes: Mapping[str, Any] | None, *, llm: bool = True,
             marks: bool = False) -> tuple[Item | None, LlmCall | None, Mark | None]:
    """(item, LLM call, run mark) of one finished span; `attributes`: its decoded attributes
    (None: it carries no `ITEM_MARKERS`, so only its mark is read); `llm` / `marks`: whether
    LLM calls / run marks are wanted at all."""
    item = llm_call = mark = None
    start = view.start_ns
    if attributes is not None:
        found = attributes
        item = read_span(view.name, found, start, lambda: error_of(view, found))
        if llm:
            llm_call = read_llm_call(found, start)
            if llm_call is None:  # a model call with no marker, by its shape (`_shaped`)
                llm_call = shaped_llm_call(found, start)
    if marks:
        found = attributes or {}
        mark = read_mark(view.name, found, start, view.end_ns, error_of(view, found))
    return item, llm_call, mark

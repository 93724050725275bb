"""`tracescore inspect` finds agent calls by the trace's shape as the gateway does: a loop's top
span without agent marker is shown with the question and answer of its LLM calls; one whose LLM
calls hold no text is shown with its reason and a mapping entry that, saved, reads it; wrappers
of model turns and a workflow that only wraps agent spans are not agent calls of their own."""

from __future__ import annotations

from _span_trees import Node, chat, messages, sent_requests, tool

import tracescore
from tracescore import _semconv as sc
from tracescore.gateway._inspect import Inspector, SpanReport

Q = "What is the capital of France?"
A = "Paris is the capital of France."


def _inspected(trees: list[Node], mappings: list[dict[str, object]] | None = None
               ) -> tuple[Inspector, list[SpanReport]]:
    inspector = Inspector(tracescore.build_recognisers(mappings or []), keep_others=True)
    for request in sent_requests(trees):
        inspector.add(request)
    return inspector, list(inspector.reports())


def test_inspect_shows_structural_calls_and_explains_the_misses() -> None:
    silent = Node("chat m", {sc.GEN_AI_OPERATION_NAME: "chat",
                             sc.GEN_AI_INPUT_MESSAGES: messages("system", "Be brief."),
                             sc.GEN_AI_OUTPUT_MESSAGES: messages("assistant", "ok")})
    trees = [
        Node("answer_question", {"code.function": "answer_question"},
             [chat(Q, "Let me look."), tool(), chat(Q, A)]),
        Node("handle", {"myapp.prompt": Q, "myapp.reply": A}, [silent]),
        Node("invoke_workflow trip", {sc.GEN_AI_OPERATION_NAME: "invoke_workflow"}, [
            Node("invoke_agent geo", {sc.GEN_AI_OPERATION_NAME: "invoke_agent",
                                      sc.GEN_AI_AGENT_NAME: "geo"},
                 [Node("invoke_agent", {sc.GEN_AI_OPERATION_NAME: "invoke_agent"},
                       [chat(Q, A)])])]),
    ]
    inspector, reports = _inspected(trees)
    by_name = {report.name: report for report in reports}
    assert sorted(by_name) == ["answer_question", "handle", "invoke_agent geo"]
    found = by_name["answer_question"]
    assert (found.scored, found.framework, found.question, found.answer) == (
        True, "unknown", Q, A)
    assert [call["name"] for call in found.tool_calls] == ["lookup"]
    assert by_name["invoke_agent geo"].scored and by_name["invoke_agent geo"].question == Q
    missed = by_name["handle"]
    assert (missed.scored, missed.framework, missed.reason) == (
        False, "unknown", "no_text_in_llm_calls")
    assert "LLM calls" in (missed.why or "")
    assert missed.mapping == {"name": "unknown_mapped", "span_name": "handle",
                              "input": "myapp.prompt", "output": "myapp.reply"}
    # the workflow root and the wrapper are other spans, like the model calls and the tool
    assert inspector.other_count == inspector.spans - 3
    assert {"invoke_workflow trip", "invoke_agent"} <= {name for _, name in inspector.others}

    # the entry, saved in the config, reads the span
    assert missed.mapping is not None
    _, again = _inspected([trees[1]], [missed.mapping])
    [read] = again
    assert (read.scored, read.question, read.answer) == (True, Q, A)

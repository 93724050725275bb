"""Model calls with no GenAI attribute at all, found by the shape of what they record (issue 34,
family 1: Haystack's own tracer, say), through both front doors (`_span_trees`): generated
trees in invented namespaces and encodings score the loop's top span on the user's question and
the final answer; trees that are no agent loop are never scored (one model turn under a span
that does not call itself an agent, content that is not chat-shaped, an agent-shaped output)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from _span_trees import Node, both, chat
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import SpanKind

from tracescore.online.intake import AgentReader, build_recognisers
from tracescore.online.intake._replies import shaped_answer, shaped_messages
from tracescore.online.intake._shaped import agent_like, shaped_call

_NAMESPACES = st.sampled_from(["haystack", "acme", "llmkit", "orbit.trace", "myapp"])
_STYLES = st.sampled_from(["dotted", "colon", "camel"])
_ENCODINGS = st.sampled_from(["json", "parts", "repr", "objects"])
_WRAPS = st.sampled_from(["replies", "choices", "list", "one"])


def _keys(namespace: str, step: str, style: str) -> tuple[str, str]:
    if style == "colon":
        return f"{namespace}.{step}:input", f"{namespace}.{step}:output"
    if style == "camel":
        return f"{namespace}.{step}Inputs", f"{namespace}.{step}Outputs"
    return f"{namespace}.{step}.input", f"{namespace}.{step}.output"


def _message(role: str, text: str | None, encoding: str) -> Any:
    """One chat message as a framework records it (a dict to serialise, or repr text)."""
    if encoding == "objects":
        content = f"[TextContent(text={text!r})]" if text is not None else (
            "[ToolCall(tool_name='lookup', arguments={'place': 'x'}, id=None)]")
        return f"ChatMessage(_role=<ChatRole.{role.upper()}: {role!r}>, _content={content}, " \
               f"_name=None, _meta={{}})"
    if text is None:
        return {"role": role, "content": [{"tool_call": {"tool_name": "lookup",
                                                         "arguments": {"place": "x"}}}]}
    if encoding == "parts":
        return {"role": role, "meta": {}, "content": [{"text": text}]}
    return {"role": role, "content": text}


def _encoded(value: Any, encoding: str) -> str:
    if encoding == "objects":  # reprs of message objects, with an opaque function repr
        inner = value if isinstance(value, str) else "[" + ", ".join(value) + "]"
        return "{'messages': " + inner + ", 'tools': [Tool(name='lookup', " \
               "function=<function lookup at 0x7f3a1c2b4d60>)]}"
    if encoding == "repr":
        return repr(value)
    return json.dumps(value)


def _reply(text: str | None, encoding: str, wrap: str) -> str:
    message = _message("assistant", text, encoding)
    if encoding == "objects":
        return "{'replies': [" + message + "]}"
    value: Any = {"replies": [message]} if wrap == "replies" else (
        {"choices": [message]} if wrap == "choices" else [message] if wrap == "list" else message)
    return _encoded(value, encoding)


def _call(namespace: str, style: str, conversation: list[tuple[str, str | None]],
          reply: str | None, encoding: str, wrap: str, extra: dict[str, Any]) -> Node:
    """A model call recorded under generic keys and no marker."""
    keys = _keys(namespace, "llm", style)
    messages = [_message(role, text, encoding) for role, text in conversation]
    return Node(f"{namespace}.llm", {keys[0]: _encoded(messages, encoding),
                                     keys[1]: _reply(reply, encoding, wrap), **extra})


def _tool(namespace: str, style: str, result: str) -> Node:
    keys = _keys(namespace, "tool", style)
    return Node(f"{namespace}.tool", {f"{namespace}.tool.name": "lookup",
                                      keys[0]: '{"place": "x"}', keys[1]: result})


@st.composite
def _loops(draw: st.DrawFn) -> tuple[Node, tuple[str, str] | None]:
    """(a tree, the (question, answer) its top span is scored on, or None: no agent loop)."""
    namespace, style = draw(_NAMESPACES), draw(_STYLES)
    encoding, wrap = draw(_ENCODINGS), draw(_WRAPS)
    question = f"Which river flows through {draw(st.sampled_from(['Vienna', 'Kraków']))}?"
    answer = draw(st.sampled_from(["The Danube.", "The Vistula flows through it."]))
    system = draw(st.none() | st.just("SYSTEM PROMPT: answer briefly."))
    turns = draw(st.integers(1, 3))
    agent_named = draw(st.booleans())
    nested = draw(st.booleans())  # each turn inside a step span
    extra: dict[str, Any] = draw(st.sampled_from([{}, {"model": "scripted"}, {"usage.total": 12}]))
    conversation: list[tuple[str, str | None]] = [("system", system)] if system else []
    conversation.append(("user", question))
    steps: list[Node] = []
    for turn in range(turns):
        last = turn == turns - 1
        call = _call(namespace, style, list(conversation), answer if last else None, encoding,
                     wrap, extra)
        parts = [call] if last else [call, _tool(namespace, style, f"TOOL RESULT {turn}")]
        steps.extend([Node(f"{namespace}.step", {"step.index": turn}, parts)] if nested
                     else parts)
        conversation += [("assistant", None), ("tool", f"TOOL RESULT {turn}")]
    name = f"{namespace}.agent.run" if agent_named else f"{namespace}.pipeline.run"
    kind = draw(st.sampled_from([SpanKind.INTERNAL, SpanKind.SERVER]))
    top = Node(name, {}, steps, kind=kind, remote_parent=kind == SpanKind.SERVER)
    top.attributes["test.node"] = "top"
    looped = turns >= 2 or agent_named
    return top, (question, answer) if looped else None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_loops())
def test_generated_loops_of_unmarked_model_calls_score_their_top_span(
        case: tuple[Node, tuple[str, str] | None]) -> None:
    """Two turns or more, or a top span that says it is an agent: scored once on the top span,
    on the user's question and the final answer (never the system prompt or a tool result); one
    turn under any other span: not scored and not counted (it may be no agent at all)."""
    tree, judged = case
    processor, gateway = both(lambda: [_copy(tree)])
    for found in (processor, gateway):
        if judged is None:
            assert (found.scored, found.seen, found.unreadable) == ([], [], Counter())
        else:
            assert (found.scored, found.seen, found.unreadable) == (["top"], [judged], Counter())


def _copy(node: Node) -> Node:
    return Node(node.name, dict(node.attributes), [_copy(c) for c in node.children], node.kind,
                node.remote_parent)


def test_a_top_span_with_its_own_chat_content_is_read_from_it() -> None:
    """Haystack's agent span records the conversation and the whole exchange: read from its own
    keys (the question is the last user text, the answer the last assistant text)."""
    question, answer = "Name one museum in Lyon.", "The Musée des Confluences."

    def trees() -> list[Node]:
        calls = [_call("hay", "dotted", [("user", question)], None, "parts", "replies", {}),
                 _tool("hay", "dotted", "TOOL RESULT"),
                 _call("hay", "dotted", [("user", question), ("assistant", None),
                                         ("tool", "TOOL RESULT")], answer, "parts", "replies", {})]
        exchange = [{"role": "system", "content": [{"text": "SYSTEM"}]},
                    {"role": "user", "content": [{"text": question}]},
                    {"role": "tool", "content": [{"text": "TOOL RESULT"}]},
                    {"role": "assistant", "content": [{"text": answer}]}]
        return [Node("hay.agent.run", {
            "hay.agent.input": json.dumps({"messages": exchange[1:2], "callback": None}),
            "hay.agent.output": json.dumps({"messages": exchange}), "test.node": "top"}, calls)]

    for found in both(trees):
        assert (found.scored, found.seen, found.unreadable) == (
            ["top"], [(question, answer)], Counter())


def _negatives() -> list[tuple[str, Node]]:
    q = "What is the capital of France?"
    user, reply = json.dumps([{"role": "user", "content": q}]), json.dumps(
        [{"role": "assistant", "content": "Paris."}])
    return [
        # content under generic keys that is no chat: a function's arguments and result
        ("plain function", Node("handler", {}, [
            Node("fn", {"function.args": "('a b',)", "function.result": "'c d'"}),
            Node("fn", {"function.args": "('e f',)", "function.result": "'g h'"})])),
        # an agent-shaped output (the whole conversation) is no model call
        ("conversation out", Node("job", {}, [
            Node("step", {"x.input": user, "x.output": json.dumps(
                [{"role": "user", "content": q}, {"role": "assistant", "content": "Paris."}])})
            for _ in range(2)])),
        # replies with no user message asked
        ("no user", Node("job", {}, [
            Node("step", {"x.input": json.dumps([{"role": "system", "content": "s t"}]),
                          "x.output": reply}) for _ in range(2)])),
        # one model turn under a request span that does not call itself an agent
        ("one turn", Node("GET /summary", {}, [
            Node("call", {"x.input": user, "x.output": reply})], kind=SpanKind.SERVER,
            remote_parent=True)),
        # ... also when the request carries a user agent
        ("user agent", Node("POST /chat", {"user_agent.original": "curl/8", "http.useragent": "x"},
                            [Node("call", {"x.input": user, "x.output": reply})],
                            kind=SpanKind.SERVER, remote_parent=True)),
        # the shape, under a GenAI-marked model call: read by its own convention only
        ("marked", Node("work", {}, [chat(q, "Paris.")])),
    ]


def test_trees_that_are_no_unmarked_agent_loop_are_never_scored_by_shape() -> None:
    for label, tree in _negatives():
        if label == "marked":
            continue  # a GenAI chat under a root: scored by the existing structural rule
        processor, gateway = both(lambda t=tree: [_copy(t)])
        for found in (processor, gateway):
            assert (found.scored, found.seen, found.unreadable) == ([], [], Counter()), label


def test_the_shape_rule_reads_real_haystack_encodings() -> None:
    """Haystack's step spans as recorded (the input a repr of message objects with an opaque
    function repr, the output JSON replies)."""
    attributes = {
        "haystack.agent.step.llm.input": (
            "{'messages': [ChatMessage(_role=<ChatRole.SYSTEM: 'system'>, _content=[TextContent("
            "text='SYS')], _name=None, _meta={}), ChatMessage(_role=<ChatRole.USER: 'user'>, "
            "_content=[TextContent(text='What is the capital of France?')], _name=None, "
            "_meta={})], 'tools': [Tool(name='lookup', function=<function run.<locals>.<lambda> "
            "at 0x7feb465ee200>, outputs_to_string=None)]}"),
        "haystack.agent.step.llm.output": (
            '{"replies": [{"role": "assistant", "meta": {}, "name": null, "content": '
            '[{"text": "Paris is the capital."}]}]}'),
    }
    assert shaped_call(attributes) == tuple(attributes)
    raw_in, raw_out = attributes.values()
    assert shaped_messages(raw_in) == [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "What is the capital of France?"}]
    assert shaped_answer(raw_out) == "Paris is the capital."
    assert shaped_answer(
        '{"replies": [{"role": "assistant", "content": [{"tool_call": {"tool_name": "x"}}]}]}'
    ) == ""
    marked = dict(attributes, **{"gen_ai.system": "openai"})
    assert shaped_call(marked) is None
    assert agent_like("haystack.agent.run", []) and agent_like("runAgent", [])
    assert agent_like("handle", ["myapp.agent.name"])
    assert not agent_like("POST /chat", ["user_agent.original", "http.userAgent", "agents_count"])
    reader = AgentReader(build_recognisers(builtins=False))
    assert not reader.shaped_call(attributes)  # no built-in conventions: no shape rules either


@st.composite
def _not_agents(draw: st.DrawFn) -> Node:
    """Trees that are no agent loop: generic content that is no chat (a function's arguments and
    result, JSON bodies naming roles outside messages), chat-shaped content whose output repeats
    the conversation or whose input asks nothing, or a single model turn under a span that does
    not call itself an agent (a user agent attribute included)."""
    namespace, style = draw(_NAMESPACES), draw(_STYLES)
    keys = _keys(namespace, "call", style)
    user = {"role": "user", "content": "What is the capital of France?"}
    reply = {"role": "assistant", "content": "Paris."}
    kind = draw(st.sampled_from(["plain", "roles elsewhere", "echo", "no user", "one turn"]))
    values: dict[str, str]
    if kind == "plain":
        values = {keys[0]: repr((draw(st.text(max_size=20)),)), keys[1]: repr(draw(st.text()))}
    elif kind == "roles elsewhere":  # a role word, but no chat message on either side
        values = {keys[0]: json.dumps({"role": "user", "id": 7}),
                  keys[1]: json.dumps({"assistant_id": "a1", "status": "ok"})}
    elif kind == "echo":
        values = {keys[0]: json.dumps([user]), keys[1]: json.dumps({"messages": [user, reply]})}
    elif kind == "no user":
        values = {keys[0]: json.dumps([{"role": "system", "content": "Be brief."}]),
                  keys[1]: json.dumps([reply])}
    else:
        values = {keys[0]: json.dumps([user]), keys[1]: json.dumps([reply])}
    turns = 1 if kind == "one turn" else draw(st.integers(1, 3))
    calls = [Node(f"{namespace}.call", dict(values)) for _ in range(turns)]
    top_attributes = draw(st.sampled_from([{}, {"user_agent.original": "Mozilla/5.0"},
                                           {"http.route": "/chat"}]))
    name = draw(st.sampled_from(["GET /answer", f"{namespace}.pipeline.run", "handle_request"]))
    kind_of_top = draw(st.sampled_from([SpanKind.INTERNAL, SpanKind.SERVER]))
    return Node(name, dict(top_attributes), calls, kind=kind_of_top,
                remote_parent=kind_of_top == SpanKind.SERVER)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=_not_agents())
def test_generated_trees_that_are_no_agent_loop_are_never_scored(tree: Node) -> None:
    processor, gateway = both(lambda: [_copy(tree)])
    for found in (processor, gateway):
        assert (found.scored, found.seen, found.unreadable) == ([], [], Counter())

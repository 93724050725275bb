"""Recorded question and answer unwrapped from the encodings frameworks write them in.

Rules (one normaliser for every reader; applied in the scoring worker, never in the agent's
thread):

- A string whose value is itself encoded is decoded, repeatedly: a JSON string literal
  (`"\\"Paris\\""`), JSON objects and arrays, Python reprs of tuples, lists and dicts
  (`('What is …?',)`), and reprs of objects (`ChatMessage(_role=<ChatRole.USER: 'user'>,
  _content=[TextContent(text='…')])`, read as their keyword fields, leading underscores
  dropped, enum reprs as their value). Nothing is evaluated: reprs are parsed, never run.
- Chat messages in any of these forms (`role`/`_role`/`type` + `content`/`text`/`parts`/
  `blocks`/`contents`) become `{"role", "content"}` messages; roles are folded (`human` →
  user, `ai`/`model`/`bot` → assistant, `developer` → system, `function`/`ipython` → tool).
- Call arguments (`{"args": [...], "kwargs": {...}}`, a tuple of positional arguments, or the
  JSON of keyword arguments) give the *user-text argument*: a value under a known question
  key (`question`, `query`, `prompt`, `input`, `task`, `message`, …), else the first string
  argument that reads as prose (has a space), never a flag, number or id, nor an argument
  whose name says it is something else (`system_prompt`, `instructions`, `tool_*`). A path
  (`member`) picks one: `args.0`, `kwargs.task`, in any of these encodings.
- The question is the last user message (a system prompt or tool return never is); the
  answer the last assistant message with text (never a system, user or tool message).

A value that matches none of these is returned as it is.

(About 460 lines: the rules share one decoder and repr parser; tool results are in
`_tool_results`.)
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["call_arguments", "member", "unwrap_input", "unwrap_output"]

_MAX_DEPTH = 6
_MAX_LEN = 1_000_000  # longer text is not parsed (it is judged as it is)
_ENUM_REPR = re.compile(r"<[\w.]+: ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|-?\d+)>")
# an object's default repr inside another repr (`function=<function f at 0x7f…>`): read as None
# (a bound method's, `<bound method A.run of <A object at 0x…>>`, once its object is None)
_ADDRESS_REPR = re.compile(r"<[\w.]+(?:[^<>'\"]|<\w+>)*? (?:at 0x[0-9a-fA-F]+|of None)>")
_QUESTION_KEYS = ("question", "query", "prompt", "input", "task", "user_input", "user_message",
                  "message", "request", "goal", "text", "content", "msg", "q")
# words of an argument's name that say it is no question (a system prompt, a tool's part)
_NOT_QUESTION_WORDS = frozenset({"system", "instruction", "instructions", "tool", "tools",
                                 "persona", "role", "schema"})
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# fields of a response, result or event object that hold the answer, in order of preference
_ANSWER_FIELDS = ("response", "replies", "output", "outputs", "final_output",
                  "answer", "result", "last_message", "message", "completion", "content",
                  "text", "choices", "generations")
_ANSWER_SET = frozenset(_ANSWER_FIELDS) | {"messages"}
# the fields of a result envelope (`{"input": …, "output": "…"}`): a text in one is the answer
# in plain data too; `answer`, `text`, `content`, `message` are also a structured output's fields
_ENVELOPE = frozenset({"response", "replies", "output", "outputs", "final_output", "result",
                       "last_message", "completion", "choices", "generations"})
_REPR_START = re.compile(r"[A-Za-z_][\w.]*\(")
_MAX_CUTS = 32  # cut points tried when repairing a cut-off repr
_MAX_REPAIR = 100_000  # longer cut-off reprs are not repaired
_ROLE_KEYS = ("role", "type", "author", "sender")
_CONTENT_KEYS = ("content", "text", "parts", "blocks", "contents", "items")
_ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant",
          "model": "assistant", "bot": "assistant", "system": "system", "developer": "system",
          "tool": "tool", "function": "tool", "ipython": "tool"}
_TEXT_PARTS = frozenset({"text", "input_text", "output_text", "textcontent", "textblock",
                         "textpart", "text_content"})


_TOOL_START = frozenset({"input_str", "inputs", "tags", "metadata", "kwargs"})


class _NotLiteral(ValueError):
    """A repr holding something other than literals and keyword calls."""


def unwrap_input(value: object) -> object:
    """The recorded input with its encodings removed: a message list (its question the last
    user message), the user-text argument, or `value` as it is."""
    try:
        return _input(value, 0)
    except (RecursionError, ValueError, TypeError):
        return value


def unwrap_output(value: object) -> object:
    """The recorded output with its encodings removed: the last assistant text, the decoded
    value, or `value` as it is."""
    try:
        return _output(value, 0)
    except (RecursionError, ValueError, TypeError):
        return value


def member(raw: object, path: str | None) -> object:
    """The member at the dotted `path` (`args.0`, `kwargs.task`, `input.messages`) of a
    recorded value, decoded as above (None when it has none); `raw` itself without a path.
    A call's arguments read the same in every encoding: `args.N` is the Nth positional argument
    of `{"args": [...]}` or of an argument tuple, `kwargs.NAME` (or just `NAME`) the keyword
    argument of `{"kwargs": {...}}` or of the keyword arguments' own object."""
    if path is None or raw is None:
        return raw
    value = _decoded(raw, 0)
    for step in path.split("."):
        value = _decoded(value, 0)
        if _is_call_part(value, step):
            continue  # `args.0` of an argument tuple, `kwargs.task` of keyword arguments
        if isinstance(value, Mapping):
            kwargs = _decoded(value.get("kwargs"), 0)
            if step not in value and isinstance(kwargs, Mapping):
                value = kwargs  # `task` of `{"args": [...], "kwargs": {"task": ...}}`
            value = value.get(step)
        elif isinstance(value, (list, tuple)) and step.lstrip("-").isdigit():
            index = int(step)
            value = value[index] if -len(value) <= index < len(value) else None
        else:
            return None
    return value


def call_arguments(value: object) -> object:
    """A tool call's arguments with a call wrapper removed: `{"args": [], "kwargs": {...}}`
    (flags beside them allowed, such as smolagents' `"sanitize_inputs_outputs": true`) is its
    keyword arguments, `{"args": [{...}]}` its one positional argument object, `{"args": [...]}`
    its positional arguments; with both, `{"args", "kwargs"}` without the flags; OpenLLMetry's
    LangChain envelope `{"input_str", "inputs", "tags", "metadata", "kwargs"}` is `inputs`. Anything else
    as it is (a tool's own argument named `args` beside others is no wrapper)."""
    if isinstance(value, Mapping) and "input_str" in value and set(value) <= _TOOL_START:
        inputs = value.get("inputs")  # OpenLLMetry's LangChain `on_tool_start` envelope
        return dict(inputs) if isinstance(inputs, Mapping) else value["input_str"]
    if not isinstance(value, Mapping) or not ("args" in value or "kwargs" in value):
        return value
    args, kwargs = value.get("args", ()), value.get("kwargs", {})
    if args is None:
        args = ()
    if kwargs is None:
        kwargs = {}
    if not isinstance(args, (list, tuple)) or not isinstance(kwargs, Mapping) or any(
            key not in ("args", "kwargs") and not (v is None or isinstance(v, bool))
            for key, v in value.items()):
        return value
    if not args:
        return dict(kwargs)
    if not kwargs:
        return args[0] if len(args) == 1 and isinstance(args[0], Mapping) else list(args)
    return {"args": list(args), "kwargs": dict(kwargs)}


def _is_call_part(value: object, step: str) -> bool:
    """`value` is itself the `args` (a tuple or list) or the `kwargs` (a mapping without that
    key) a path names: the encodings of a call's arguments read with one path."""
    if step == "args":
        return isinstance(value, (list, tuple))
    return step == "kwargs" and isinstance(value, Mapping) and "kwargs" not in value


# --- decoding ---------------------------------------------------------------------------------
def _decoded(value: object, depth: int) -> object:
    """A string's encoded value (JSON, a Python literal or object repr), decoded until it is
    no longer an encoded string; anything else as it is."""
    while isinstance(value, str) and depth < _MAX_DEPTH and len(value) < _MAX_LEN:
        text = value.strip()
        if not text or text[0] not in "\"'{[(" and not _looks_like_object(text):
            return value
        try:
            value = json.loads(text)
        except ValueError:
            try:
                value = _literal(text)
            except (_NotLiteral, SyntaxError, ValueError, MemoryError, RecursionError):
                return value
        depth += 1
    return value


def _looks_like_object(text: str) -> bool:
    head, paren, _ = text.partition("(")
    return bool(paren) and text.endswith(")") and head.replace(".", "").isidentifier()


def _literal(text: str) -> object:
    text = _ADDRESS_REPR.sub("None", _ADDRESS_REPR.sub("None", _ENUM_REPR.sub(r"\1", text)))
    tree = ast.parse(text, mode="eval")
    return _node(tree.body)


def _node(node: ast.AST) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return [_node(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        return {_node(k) if k is not None else None: _node(v)
                for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _node(node.operand)
        if isinstance(inner, (int, float)):
            return -inner
    if isinstance(node, ast.Call):  # an object repr: its fields, by keyword
        fields: dict[str, Any] = {kw.arg.lstrip("_"): _node(kw.value)
                                  for kw in node.keywords if kw.arg is not None}
        if node.args:
            fields.setdefault("args", [_node(a) for a in node.args])
        fields.setdefault("__type__", ast.unparse(node.func).rsplit(".", 1)[-1])
        return fields
    if isinstance(node, (ast.Name, ast.Attribute)):  # an enum member or constant by name
        return ast.unparse(node)
    raise _NotLiteral(type(node).__name__)


# --- messages ---------------------------------------------------------------------------------
def _role(value: Mapping[Any, Any]) -> str | None:
    for key in _ROLE_KEYS:
        raw = value.get(key)
        if isinstance(raw, Mapping):  # an enum object repr: {"value": "user"}
            raw = raw.get("value")
        if isinstance(raw, str):
            role = _ROLES.get(raw.rsplit(".", 1)[-1].lower())
            if role is not None:
                return role
    kind = value.get("__type__")
    if isinstance(kind, str):  # HumanMessage, SystemMessage, AIMessage, ...
        lowered = kind.lower().removesuffix("message").removesuffix("chat")
        return _ROLES.get(lowered)
    return None


def _content_text(value: object, depth: int) -> str | None:
    value = _decoded(value, depth)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        kind = str(value.get("type", value.get("__type__", "text"))).lower()
        if kind not in _TEXT_PARTS and not kind.endswith("text"):
            return None
        for key in ("text", "content", "value"):
            if key in value:
                return _content_text(value[key], depth + 1)
        return None
    if isinstance(value, (list, tuple)):
        texts = [t for t in (_content_text(v, depth + 1) for v in value) if t]
        return "".join(texts) if texts else None
    return None


def _message(value: object, depth: int) -> dict[str, str] | None:
    """`{"role", "content"}` of a chat message in any serialisation; None for anything else."""
    if not isinstance(value, Mapping):
        return None
    role = _role(value)
    if role is None:
        return None
    for key in _CONTENT_KEYS:
        if key in value:
            text = _content_text(value[key], depth + 1)
            return {"role": role, "content": text or ""}
    return {"role": role, "content": ""}


def _messages(value: object, depth: int) -> list[dict[str, str]] | None:
    if isinstance(value, Mapping):
        if "messages" in value:
            return _messages(_decoded(value["messages"], depth), depth + 1)
        one = _message(value, depth)
        return None if one is None else [one]
    if isinstance(value, (list, tuple)) and value:
        messages = [_message(_decoded(v, depth), depth) for v in value]
        if all(m is not None for m in messages):
            return [m for m in messages if m is not None]
    return None


# --- question and answer ----------------------------------------------------------------------
def _input(value: object, depth: int) -> object:
    decoded = _decoded(value, depth)
    if isinstance(decoded, str):
        return decoded
    if isinstance(decoded, (bool, int, float)) or decoded is None:
        return value  # a bare number or flag is nothing we can improve on
    messages = _messages(decoded, depth)
    if messages is not None:
        return _conversation(messages) if any(m["role"] == "user" for m in messages) else value
    text = _argument(decoded, depth)
    return value if text is None else text


def _conversation(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Up to the last user message with text (the question); tool returns and empty messages
    left out."""
    kept = [m for m in messages if m["content"] and m["role"] != "tool"]
    last = max((i for i, m in enumerate(kept) if m["role"] == "user"), default=None)
    return kept if last is None else kept[:last + 1]


def _argument(value: object, depth: int) -> str | None:
    """The user-text argument of a call's arguments (see the module's rules)."""
    if depth >= _MAX_DEPTH:
        return None
    if isinstance(value, Mapping):
        if "kwargs" in value or "args" in value:
            for part in ("kwargs", "args"):
                text = _argument(_decoded(value.get(part), depth), depth + 1)
                if text:
                    return text
            return None
        for key in _QUESTION_KEYS:
            if key in value:
                text = _question_of(value[key], depth + 1)
                if text:
                    return text
        return _first_text([v for k, v in value.items()
                            if isinstance(k, str) and not _is_identifier_key(k)
                            and _NOT_QUESTION_WORDS.isdisjoint(
                                w.lower() for w in _WORDS.findall(k))], depth)
    if isinstance(value, (list, tuple)):
        return _first_text(value, depth)
    return None


def _first_text(values: Any, depth: int) -> str | None:
    """In order, the first argument that reads as prose (holds a space) or holds a question
    itself (a conversation, nested arguments), else None."""
    for value in values:
        decoded = _decoded(value, depth)
        if isinstance(decoded, str):
            text = decoded.strip()
            if " " in text and not (text.startswith("<") and text.endswith(">")):
                return text  # prose; `<Context object at 0x…>` is an object's default repr
        elif isinstance(decoded, (Mapping, list, tuple)):
            found = _question_of(decoded, depth + 1)
            if found:
                return found
    return None


def _question_of(value: object, depth: int) -> str | None:
    found = _input(value, depth)
    if isinstance(found, str):
        return found.strip() or None
    if isinstance(found, list) and found and isinstance(found[-1], Mapping):
        last = found[-1]
        if last.get("role") == "user" and isinstance(last.get("content"), str):
            return last["content"] or None
    return None


def _is_identifier_key(key: str) -> bool:
    lowered = key.lower()
    return lowered.endswith(("id", "_ids", "key", "token", "url", "path")) or lowered in (
        "model", "stream", "role", "name", "type", "format")


def _output(value: object, depth: int) -> object:
    decoded = _decoded(value, depth)
    if isinstance(decoded, str):
        return _repaired_answer(decoded, depth)
    if not isinstance(decoded, (Mapping, list, tuple)):
        return value
    found = _answer(decoded, depth)
    if found is not None:
        return found
    if isinstance(decoded, Mapping) and "__type__" in decoded:
        return _object_answer(decoded)
    return value


def _answer(value: object, depth: int, loose: bool = False) -> str | None:
    """The assistant's text in a decoded output: the last assistant message with text of a
    message list, else what an answer-bearing field (`response`, `replies`, `output`,
    `result`, `message`, `choices`, ...) holds, one level down after another; None when there
    is none; "" for messages of which none is the assistant's with text (a system prompt, the
    question or a tool return is never the answer). A bare text in such a field is the
    answer inside an object (`loose`: `StopEvent(result='…')`) or a result envelope
    (`{"input": …, "output": "…"}`); in other plain data (`{"answer": "…", "confidence":
    0.9}`, a structured output) the data is the answer, kept whole."""
    if depth >= _MAX_DEPTH:
        return None
    value = _decoded(value, depth)
    if isinstance(value, str):
        return value if loose else None
    messages = _messages(value, depth)
    if messages is not None:
        said = [m["content"] for m in messages if m["role"] == "assistant"]
        return next((text for text in reversed(said) if text), "")  # "": none has any
    if isinstance(value, Mapping):
        loose = loose or "__type__" in value
        for key in _ANSWER_FIELDS:
            if key in value:
                found = _answer(value[key], depth + 1, loose or key in _ENVELOPE)
                if found is not None:
                    return found
        return None
    if isinstance(value, (list, tuple)):
        empty = None
        for item in reversed(value):
            found = _answer(item, depth + 1, loose)
            if found:
                return found
            empty = found if empty is None else empty
        return empty
    return None


def _object_answer(fields: Mapping[Any, Any]) -> str:
    """An object's repr in which no assistant text was found: "" when it is a message or a
    response (its answer is not there: a tool call only, say), else its fields as JSON (a
    structured output, `CityAnswer(city='Paris')`); never the repr itself."""
    if _role(fields) is not None or not _ANSWER_SET.isdisjoint(fields):
        return ""
    data = {k: v for k, v in fields.items() if k != "__type__"}
    return json.dumps(data, ensure_ascii=False, default=str)


def _repaired_answer(text: str, depth: int) -> str:
    """`text` as it is, unless it is an object's repr cut short (`StopEvent(result=
    AgentOutput(response=…), structured_r...`): then the answer read from what was cut off
    cleanly (`_uncut`)."""
    stripped = text.strip()
    if not (stripped.endswith("...") and len(stripped) < _MAX_REPAIR
            and _REPR_START.match(stripped)):
        return text
    repaired = _uncut(stripped[:-3])
    if not isinstance(repaired, Mapping) or "__type__" not in repaired:
        return text
    found = _answer(repaired, depth)
    return found if found is not None else _object_answer(repaired)


def _uncut(text: str) -> object | None:
    """The longest prefix of a cut-off repr that parses once its brackets are closed, cut at a
    `,` between items (tried from the end, a bounded number of times); None when none does."""
    closers = {"(": ")", "[": "]", "{": "}"}
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []
    quote = ""
    index = 0
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in closers:
            stack.append(closers[char])
        elif char in ")]}" and stack:
            stack.pop()
        elif char == "," and stack:
            cuts.append((index, "".join(reversed(stack))))
        index += 1
    for position, closing in reversed(cuts[-_MAX_CUTS:]):
        try:
            return _literal(text[:position] + closing)
        except (_NotLiteral, SyntaxError, ValueError, MemoryError, RecursionError):
            continue
    return None

"""Question and answer under keys no reader knows: the generic rule for agent spans.

A span already taken for an agent call (by its convention's marker, or by structure) whose
reader found no content under the convention's own keys is read from its other attributes by
the *shape of their keys*, in any namespace: `<vendor>.observation.input` / `.output`,
`<vendor>.spanInputs` / `spanOutputs`, `<vendor>:input` / `:output`, `function.args` /
`function.result`, `user_input`, ... The rule, in order:

1. A key is split into words (at `.`, `:`, `_`, `-`, `/` and lower-to-upper case changes,
   lowercased). Its *last* word says what it holds: input, inputs, prompt, question, query,
   args, arguments (input-like; in that order of preference); output, outputs, answer,
   completion, response, result (output-like, in that order).
2. A key with any word naming something else is never content: system, instruction(s) (a
   system prompt), tool(s) (a tool's arguments or return), usage, token(s), count, schema,
   template, mime, type, id, metadata, error, exception; and `function_call` (a tool call).
3. Among the keys left, the most preferred last word wins, then the fewer words (the most
   general key), then the key's name. The output is taken from the same namespace as the
   input when it has an output-like key (`x.observation.input` pairs with
   `x.observation.output`), else by the same order.
4. A value that holds nothing (empty text, `[]`, `{}`, `null`) or only a number or flag is
   skipped; both sides must be there.

Only key names are looked at here (cheap, and only for agent spans: never for a span that
passes through); the values are unwrapped from their encodings in the scoring worker
(`_unwrap`), where a message list gives the last user text as the question.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from itertools import pairwise
from typing import Any

from tracescore import _semconv as sc
from tracescore.online.intake import _messages
from tracescore.online.intake._diagnose import NOT_READ, Unreadable
from tracescore.online.intake._llm_calls import ContentlessAgent
from tracescore.online.intake._readers import RecognisedCall, agent_name

__all__ = ["INPUT_WORDS", "OUTPUT_WORDS", "generic_call", "generic_keys", "kind_of",
           "read_generic"]

INPUT_WORDS = ("input", "inputs", "prompt", "question", "query", "args", "arguments")
OUTPUT_WORDS = ("output", "outputs", "answer", "completion", "response", "result")
_NEVER = frozenset({"system", "instruction", "instructions", "tool", "tools", "usage", "token",
                    "tokens", "count", "schema", "template", "mime", "type", "id", "metadata",
                    "error", "exception"})
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_INPUT_RANK = {word: rank for rank, word in enumerate(INPUT_WORDS)}
_OUTPUT_RANK = {word: rank for rank, word in enumerate(OUTPUT_WORDS)}
_EMPTY = frozenset({"", "[]", "{}", "null", '""', "()", "None"})

Kind = tuple[str, int, int, tuple[str, ...]] | None  # (side, rank, words, namespace words)


@lru_cache(maxsize=4096)
def kind_of(key: str) -> Kind:
    """("input" | "output", preference rank, word count, the words before the last) for a key
    the rule reads content from; None for any other key. Cached: keys repeat across spans."""
    words = tuple(w.lower() for w in _WORD.findall(key))
    if not words or not _NEVER.isdisjoint(words) or _tool_call(words):
        return None
    last = words[-1]
    if last in _INPUT_RANK:
        return ("input", _INPUT_RANK[last], len(words), words[:-1])
    if last in _OUTPUT_RANK:
        return ("output", _OUTPUT_RANK[last], len(words), words[:-1])
    return None


def _tool_call(words: tuple[str, ...]) -> bool:
    return any(a == "function" and b == "call" for a, b in pairwise(words))


def _holds_something(value: object) -> bool:
    if isinstance(value, str):
        return value.strip() not in _EMPTY
    return isinstance(value, (list, tuple, dict)) and bool(value)  # a number is no content


def generic_keys(attributes: Mapping[str, Any]) -> tuple[str, str] | None:
    """(input key, output key) the rule above picks from `attributes`; None without both."""
    inputs: list[tuple[int, int, str, tuple[str, ...]]] = []
    outputs: list[tuple[int, int, str, tuple[str, ...]]] = []
    for key, value in attributes.items():
        kind = kind_of(key) if isinstance(key, str) else None
        if kind is None or not _holds_something(value):
            continue
        side, rank, count, namespace = kind
        (inputs if side == "input" else outputs).append((rank, count, key, namespace))
    if not inputs or not outputs:
        return None
    _, _, input_key, namespace = min(inputs)
    paired = [o for o in outputs if o[3] == namespace]
    _, _, output_key, _ = min(paired or outputs)
    return input_key, output_key


def generic_call(name: str, attributes: Mapping[str, Any], *, convention: str,
                 agent: str | None = None) -> RecognisedCall | None:
    """The agent call read from the generic keys of a span already taken for an agent call
    (`convention` reported as its reader, `agent` its name, else the span's agent name or
    name); None when the span has no input-like and output-like key with a value. The values
    are handed over as recorded (unwrapped in the worker)."""
    keys = generic_keys(attributes)
    if keys is None:
        return None
    if agent is None:
        agent = agent_name(attributes.get(sc.GEN_AI_AGENT_NAME), name)
    return RecognisedCall(convention, agent, attributes[keys[0]], attributes[keys[1]],
                          _messages.decoded(attributes.get(sc.TS_GROUND_TRUTH)))


def read_generic(name: str, attributes: Mapping[str, Any],
                 found: ContentlessAgent | Unreadable) -> RecognisedCall | None:
    """An agent span its convention's keys did not read (no content of its own, or content
    missing), read from generic keys; a span whose reader refused what it recorded
    (`NOT_READ`: a step of a run, say) stays unread."""
    if isinstance(found, ContentlessAgent):
        return generic_call(name, attributes, convention=found.convention, agent=found.agent)
    if found.reason == NOT_READ:
        return None
    return generic_call(name, attributes, convention=found.framework)

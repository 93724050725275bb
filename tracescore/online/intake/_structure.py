"""Agent calls found by the trace's shape, where no marker names them.

LLM calls are easy to recognise in every convention (`_llm_calls.read_llm_call`); an agent call
is the outermost span of the loop around them. Known markers are the fast path (a recognised or
contentless agent span takes the LLM calls below it); this module is the rule for the rest:

- a span with no agent marker (or an operation name outside the GenAI list, such as
  `gen_ai.operation.name=framework`, or an OpenInference CHAIN) is an agent call when LLM calls
  ran below it (not inside an agent span below it) and it is the top of its loop: the root of
  its trace, or a request's top span (kind SERVER or CONSUMER, whose parent may be in another
  service: in process, a span with a remote parent is judged by its kind, as in the gateway).
  Spans between it and the LLM calls are parts of its call, not calls, except
- a span below the top that says it is an agent (`_shaped.agent_like`) and records its own
  question and answer under generic keys: the agent call of the LLM calls below it (an agent
  inside a larger program, `AgentReader.named`), read from its own keys;
- it is read from its LLM calls (the first call's conversation up to its last user text, the
  last call's final text), as an agent span without content is;
- an agent span its reader cannot read (no content, `Unreadable`) with LLM calls below it is
  read from them too (`fallback`); only when they hold no text is it counted, with its reason;
- an anonymous agent span without content (no agent name, a span name that is only its
  operation's, such as `invoke_agent`) under another span is a wrapper of one model turn: part
  of the agent call above it, never scored or counted itself.

`convention_of` names the convention a candidate's keys belong to ("unknown" for none), the
label its misses are counted under.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from tracescore import _semconv as sc
from tracescore.online.intake import _messages
from tracescore.online.intake._diagnose import AGENT_KEYS, STRUCTURAL_NO_TEXT, Unreadable
from tracescore.online.intake._llm_calls import ContentlessAgent

# span kinds of a request's top span (the loop's top, though it has a parent in another service)
TOP_KINDS = frozenset({"server", "consumer"})
_LLM_OPERATIONS = frozenset({sc.OP_CHAT, "text_completion", "generate_content"})
_CONVENTIONS = ((sc.OI_SPAN_KIND, "openinference"), (sc.TL_SPAN_KIND, "traceloop"),
                (sc.GEN_AI_OPERATION_NAME, "genai"))


def convention_of(keys: Iterable[str]) -> str:
    """The convention whose marker key a span carries (`openinference.span.kind` ...), else
    "unknown"."""
    present = set(keys)
    return next((name for key, name in _CONVENTIONS if key in present), "unknown")


def starts_llm_call(attributes: Mapping[str, Any]) -> bool:
    """Whether a starting span is an LLM call (its operation or span kind says so at start)."""
    operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
    if operation is not None:
        return operation in _LLM_OPERATIONS
    kind = attributes.get(sc.OI_SPAN_KIND)
    return isinstance(kind, str) and kind.upper() == sc.OI_KIND_LLM


def is_top(parent_id: int | None, kind: str) -> bool:
    """Whether a span is the top of its loop by position: a root, or a request's top span."""
    return not parent_id or kind in TOP_KINDS


def candidate(name: str, keys: Iterable[str], attributes: Mapping[str, Any] | None
              ) -> ContentlessAgent:
    """The agent call a loop's top span stands for (read from its LLM calls)."""
    truth = _messages.decoded(attributes.get(sc.TS_GROUND_TRUTH)) if attributes else None
    return ContentlessAgent(convention_of(keys), name or "unnamed", truth, structural=True)


def miss(agent: ContentlessAgent, name: str) -> Unreadable:
    """Why a span found by structure could not be read: its LLM calls hold no question or no
    answer text."""
    return Unreadable(agent.convention, STRUCTURAL_NO_TEXT, "", "",
                      {"span_name": re.escape(name)})


def fallback(found: Unreadable, name: str, attributes: Mapping[str, Any]) -> ContentlessAgent:
    """An agent span its reader could not read, as an agent to read from its LLM calls."""
    agent = next((str(v) for k in AGENT_KEYS if (v := attributes.get(k))), None)
    truth = _messages.decoded(attributes.get(sc.TS_GROUND_TRUTH))
    return ContentlessAgent(found.framework, agent or name, truth)

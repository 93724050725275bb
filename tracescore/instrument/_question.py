"""The question of an agent call whose function takes several arguments.

An agent is judged on its question; a function such as `helpdesk(chat, question)` passes its
chat id beside it. `question_arg=` on `@agent` names the argument; without it the question is
the one text argument that is not an identifier (by its name: `id`, `chat_id`, `session`, ...;
or by its value: one token with a digit or a separator, such as `chat-42` or `u_17`). With no
such argument, or several, the call's input stays the dict of its arguments.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any

from tracescore._exceptions import ConfigurationError

_ID_NAME = re.compile(
    r"(^|_)(ids?|uuid|key|session|thread|chat|conversation|user|tenant|account|customer|"
    r"request|trace|run)(_?id)?s?$", re.IGNORECASE)
_ID_VALUE = re.compile(r"^[A-Za-z0-9][\w.:/#@+-]*$")
_MAX_ID_CHARS = 128
NO_DEFAULT: Any = object()


def looks_like_id(name: str, value: str) -> bool:
    """Whether a text argument is an identifier rather than a question."""
    if _ID_NAME.search(name):
        return True
    text = value.strip()
    return (len(text) <= _MAX_ID_CHARS and _ID_VALUE.match(text) is not None
            and any(c.isdigit() or c in "-_:./#@" for c in text))


def question_default(fn: Callable[..., Any], name: str) -> Any:
    """The default of parameter `name` of `fn` (`NO_DEFAULT`); ConfigurationError when `fn` has
    no such parameter (checked at decoration time)."""
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"question_arg must be a parameter name, got {name!r}")
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return NO_DEFAULT  # nothing known of its parameters: read per call
    param = params.get(name)
    if param is None:
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return NO_DEFAULT
        raise ConfigurationError(
            f"question_arg={name!r}: {getattr(fn, '__qualname__', fn)!r} has no parameter "
            f"{name!r} (it has {', '.join(params) or 'none'})")
    return NO_DEFAULT if param.default is param.empty else param.default


def pick_question(arguments: Mapping[str, Any], name: str | None, default: Any) -> Any:
    """The question among a call's `arguments` (by name): the argument `name`, else the one text
    argument that is no identifier; else the arguments themselves."""
    if name is not None:
        if name in arguments:
            return arguments[name]
        return arguments if default is NO_DEFAULT else default
    texts = [value for key, value in arguments.items()
             if isinstance(value, str) and value.strip() and not looks_like_id(key, value)]
    return texts[0] if len(texts) == 1 else arguments

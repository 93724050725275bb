"""Checks of a litellm judge before its first call, and plain words for its connection failures.

- `option_typo`: a keyword argument one typo away from a common completion option
  (`temprature`), found without importing litellm, so building a scorer stays cheap; the full
  list of litellm's arguments is checked later, by `LiteLLMJudge.check()`.
- `unknown_model`: a model name litellm's model list does not have, for providers whose model
  names are fixed (openai, anthropic, gemini, ...), unless the judge is served at an address of
  the user's own (`api_base`).
- `missing_key_variables`: the environment variables litellm says the provider's API key is read
  from, when none is set and no key was given.
- `connection_failure`: where a call could not connect to, and why, from litellm's exception.
"""

from __future__ import annotations

import difflib
import os
import socket
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

# Completion options users commonly pass to a judge: a near miss of one of them is a typo.
# Every other litellm argument is accepted here and checked against litellm itself later (a
# test keeps litellm's real arguments clear of this near-miss rule).
COMMON_OPTIONS = frozenset({
    "temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens", "n", "stop",
    "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "seed",
    "user", "tools", "tool_choice", "parallel_tool_calls", "reasoning_effort", "service_tier",
    "stream_options", "thinking", "verbosity", "api_base", "base_url", "api_key", "api_version",
    "timeout", "extra_headers", "extra_body", "headers", "custom_llm_provider", "mock_response",
    "metadata", "organization", "deployment_id", "drop_params", "max_retries", "num_retries",
})
# Real litellm arguments near one above: accepted, never taken for its typo.
_REAL_NEAR_MISSES = frozenset({"dd_api_key", "speed", "stream_response", "verbose"})
# Providers whose model names are fixed by the provider: a name outside litellm's list is a typo
# (or a model newer than the installed litellm: `check_model=False` accepts it).
MODEL_LIST_PROVIDERS = frozenset({"openai", "anthropic", "gemini", "mistral", "deepseek", "xai",
                                  "groq"})
# Providers that read one API key from the environment (cloud providers with ambient
# credentials, Azure AD tokens and keyless local servers are left to the provider).
KEY_PROVIDERS = MODEL_LIST_PROVIDERS | {"cohere_chat", "perplexity", "together_ai", "openrouter",
                                        "fireworks_ai"}


def did_you_mean(name: str, candidates: Iterable[str], cutoff: float = 0.75) -> str | None:
    """The candidate closest to `name`, if one is close enough to be what was meant."""
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=cutoff)
    return close[0] if close else None


def option_typo(name: str, own: Iterable[str]) -> str | None:
    """The option `name` was probably meant to be, when it is a near miss of a known one."""
    known = COMMON_OPTIONS | set(own)
    if name in known or name in _REAL_NEAR_MISSES:
        return None
    return did_you_mean(name, known)


def custom_address(provider: str, kwargs: Mapping[str, Any], dynamic_base: str | None) -> bool:
    """True when the judge is served at an address of the user's own, not the provider's."""
    del dynamic_base  # litellm fills in the provider's own address for some providers
    if kwargs.get("api_base") or kwargs.get("base_url"):
        return True
    names = [f"{provider.upper()}_API_BASE", f"{provider.upper()}_BASE_URL"]
    return any(os.environ.get(name) for name in names)


def unknown_model(litellm: Any, model: str, provider: str) -> tuple[bool, str | None]:
    """(unknown, suggestion): whether litellm's model list lacks `model`, and the closest name."""
    if provider not in MODEL_LIST_PROVIDERS:
        return False, None
    names = {str(m) for m in (getattr(litellm, "models_by_provider", {}) or {}).get(provider, ())}
    if not names:  # another litellm layout: nothing to compare with
        return False, None
    prefix, sep, bare = model.partition("/")
    bare = bare if sep and prefix == provider else model
    cost = getattr(litellm, "model_cost", {}) or {}
    candidates = {bare, f"{provider}/{bare}"}
    if candidates & names or any(c in cost for c in candidates):
        return False, None
    close = did_you_mean(bare, {n.partition("/")[2] if n.startswith(f"{provider}/") else n
                                for n in names}, cutoff=0.8)
    if close is None:
        return True, None
    return True, f"{provider}/{close}" if sep and prefix == provider else close


def missing_key_variables(litellm: Any, model: str, provider: str,
                          kwargs: Mapping[str, Any]) -> list[str]:
    """The API-key variables the provider reads, when none is set and no key is given."""
    if provider not in KEY_PROVIDERS or kwargs.get("api_key"):
        return []
    if getattr(litellm, "api_key", None) or getattr(litellm, f"{provider}_key", None):
        return []  # set on litellm itself
    try:
        found = litellm.validate_environment(model=model, api_base=kwargs.get("api_base"))
    except Exception:  # noqa: BLE001 - a litellm that cannot tell: the provider will say
        return []
    if not isinstance(found, Mapping) or found.get("keys_in_environment", True):
        return []
    return [str(n) for n in found.get("missing_keys", ()) if str(n).endswith("_API_KEY")]


# the key each common provider reads from the environment, for a check that must not import
# litellm (an agent whose judge runs in the scoring process never loads it); others are left to
# litellm's own check where litellm is loaded
KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY",
                 "mistral": "MISTRAL_API_KEY", "groq": "GROQ_API_KEY",
                 "gemini": "GEMINI_API_KEY", "deepseek": "DEEPSEEK_API_KEY",
                 "xai": "XAI_API_KEY", "openrouter": "OPENROUTER_API_KEY"}


def missing_key_without_litellm(model: str, kwargs: Mapping[str, Any],
                                environ: Mapping[str, str]) -> str | None:
    """The key variable a common provider's judge lacks, told from the model's prefix alone;
    None when it is set, given (`api_key`), served at an `api_base` of one's own, or unknown."""
    if kwargs.get("api_key") or kwargs.get("api_base"):
        return None
    variable = KEY_VARIABLES.get(str(kwargs.get("custom_llm_provider") or
                                     model.partition("/")[0]).lower())
    return variable if variable is not None and not environ.get(variable) else None


def key_message(variables: list[str]) -> str:
    """One line saying which variable to set for the judge's API key (never its value)."""
    which = variables[0] if len(variables) == 1 else "none of " + ", ".join(variables)
    verb = "is" if len(variables) == 1 else "are"
    return (f"{which} {verb} not set: the judge needs an API key (set it in the environment, "
            f"or pass api_key=...)")


# --- connection failures -------------------------------------------------------------------------
def _chain(exc: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _address(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return f"{parts.hostname}:{port}" if parts.hostname else None


def connection_failure(exc: BaseException, api_base: str | None,
                       provider: str | None) -> tuple[str, str] | None:
    """(address, reason) when `exc` is a failure to connect (refused, name not resolved, ...).

    The address is the host:port the client tried (the innermost failed request), else the
    configured `api_base`, else the provider's name.
    """
    import httpx  # litellm's transport; the openai client it uses depends on it

    reason: str | None = None
    url: str | None = None
    for link in _chain(exc):
        if isinstance(link, ConnectionRefusedError):
            reason = "connection refused"
        elif isinstance(link, socket.gaierror):
            reason = "host name not resolved"
        elif isinstance(link, (httpx.ConnectError, ConnectionError)) and reason is None:
            reason = "connection failed"
        request = _request_of(link)
        if request is not None and getattr(request, "url", None):
            url = str(request.url)  # the innermost request is the one really sent
    if reason is None:
        return None
    address = (_address(url) if url else None) or (_address(api_base) if api_base else None)
    return address or (provider or "the provider"), reason


def _request_of(link: BaseException) -> Any:
    try:
        return getattr(link, "request", None)
    except Exception:  # noqa: BLE001 - httpx raises when an error has no request
        return None


def is_refused(exc: BaseException) -> bool:
    """Nothing listens at the address (worth one retry at most: a judge restarting)."""
    return any(isinstance(link, ConnectionRefusedError) for link in _chain(exc))


def is_unresolved(exc: BaseException) -> bool:
    """The host name does not resolve (not worth retrying)."""
    return any(isinstance(link, socket.gaierror) for link in _chain(exc))

"""The LiteLLM judge: one structured-output call per scorer step, through litellm.

`LiteLLMJudge` asks for JSON natively (response_format), validates the reply against the
step's schema, falls back once to a prompt that spells the schema out, and retries transient
transport failures (timeouts, connection errors, 429 with Retry-After, 5xx) with exponential
back-off and jitter. Request errors are not retried, nor is a missing, invalid or refused API
key: that is a `JudgeAuthenticationError` at once (providers report a missing key in several
ways, some as a 500). The model string and keyword arguments are checked against litellm
(`check()`) before the first call; only litellm-free checks run at construction, so building a
scorer never imports litellm into the agent's process. Every call runs with
instrumentation suppressed, so the judge never shows up as the user's own LLM spans, and with
litellm's stdout help banners silenced (`quiet_litellm`). How replies and errors read is in
`_judge_replies`.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import os
import random
import time
from collections.abc import Callable
from typing import Any, Literal

from tracescore._exceptions import ConfigurationError
from tracescore._litellm_support import import_litellm as _import_litellm
from tracescore._litellm_support import quiet_litellm
from tracescore._suppress import suppressed
from tracescore.scoring import _judge_checks as checks
from tracescore.scoring._base import JudgeUsage
from tracescore.scoring._judge_api import (
    OFFLINE_MODEL,
    JudgeAuthenticationError,
    JudgeReply,
    JudgeRequest,
    JudgeStepError,
)
from tracescore.scoring._judge_pricing import reply_cost
from tracescore.scoring._judge_replies import (
    _describe,
    _is_auth_failure,
    _is_rejection,
    _is_transient,
    _retries_for,
    _status,
    parse_json_object,
    retry_after_seconds,
    schema_instructions,
)
from tracescore.scoring._judge_trace import traced
from tracescore.scoring._litellm_direct import DirectRoute

logger = logging.getLogger("tracescore.scoring")

JsonMode = Literal["json_schema", "json_object", "prompt"]
_JSON_MODES = ("json_schema", "json_object", "prompt")
# litellm arguments the judge owns itself
_RESERVED_KWARGS = {"model", "messages", "response_format", "stream", "num_retries", "max_retries"}


# --- configuration checks --------------------------------------------------------------------
# The judge's own keyword options (the rest go to litellm).
_OWN_OPTIONS = ("timeout", "max_retries", "num_retries", "backoff_base_s", "backoff_max_s",
                "max_retry_after_s", "json_mode", "check_model", "through_acompletion")
# Provider credential/location families litellm reads from keyword arguments by prefix.
_PROVIDER_PREFIXES = ("aws_", "vertex_", "azure_", "watsonx_", "databricks_", "sagemaker_",
                      "bedrock_", "oci_", "snowflake_")


def _did_you_mean(name: str, candidates: Any) -> str:
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_model_string(model: str) -> None:
    """The checks of a judge model string that need no litellm (construction time)."""
    if any(ch.isspace() for ch in model.strip()):
        raise ConfigurationError(f"judge model {model!r} contains whitespace")
    text = model.strip()
    if text != OFFLINE_MODEL and (text.lower().startswith("tracescore/")
                                  or difflib.get_close_matches(text, [OFFLINE_MODEL], cutoff=0.85)):
        raise ConfigurationError(f"unknown judge model {model!r} (did you mean {OFFLINE_MODEL!r}?)")


def _known_litellm_kwargs(litellm: Any, model: str, provider: str | None) -> set[str]:
    """Keyword arguments litellm's completion call knows (for this provider)."""
    import inspect

    known = {name for name, p in inspect.signature(litellm.acompletion).parameters.items()
             if p.kind is not inspect.Parameter.VAR_KEYWORD}
    for attr in ("OPENAI_CHAT_COMPLETION_PARAMS",):
        known.update(getattr(litellm, attr, ()) or ())
    try:
        from litellm.types.utils import all_litellm_params
        known.update(all_litellm_params)
    except ImportError:  # pragma: no cover - another litellm layout
        pass
    try:
        known.update(litellm.get_supported_openai_params(model=model, custom_llm_provider=provider)
                     or ())
    except Exception:  # litellm's lookup failing: the common parameters still apply
        logger.debug("litellm cannot list the parameters of %s", model, exc_info=True)
    known.update(("extra_body", "api_base", "custom_llm_provider", "mock_response"))
    return known


# --- the litellm judge -----------------------------------------------------------------------
class _Spend:
    """Usage collected while one step runs."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost: float | None = None
        self.started = time.perf_counter()

    def add_response(self, litellm: Any, response: Any) -> None:
        usage = getattr(response, "usage", None)
        self.input_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
        self.output_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        cost = reply_cost(litellm, self.model, response)
        if cost is not None:  # else an unknown model or provider: the cost stays unknown
            self.cost = (self.cost or 0.0) + cost

    def usage(self) -> JudgeUsage:
        return JudgeUsage(model=self.model, calls=self.calls, input_tokens=self.input_tokens,
                          output_tokens=self.output_tokens, cost_usd=self.cost,
                          latency_ms=(time.perf_counter() - self.started) * 1000.0)


class LiteLLMJudge:
    """A judge reached through `litellm.acompletion` (any provider litellm supports).

    `model` is a litellm model string (e.g. "openai/gpt-4o-mini"); extra keyword arguments
    (api_base, api_key, temperature, ...) are passed to every litellm call. Retries are the
    judge's own: litellm's are turned off. For OpenAI and vLLM endpoints the calls go through
    litellm's HTTP handler without `acompletion`'s per-call wrapper (`_litellm_direct`: a
    quarter of the CPU, no litellm callbacks); `through_acompletion=True` sends every call through
    `litellm.acompletion`.
    """

    def __init__(self, model: str, *, timeout: float = 60.0, max_retries: int = 3,
                 backoff_base_s: float = 0.5, backoff_max_s: float = 20.0,
                 max_retry_after_s: float = 60.0, json_mode: JsonMode = "json_schema",
                 check_model: bool = True, through_acompletion: bool = False,
                 **litellm_kwargs: Any) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"judge model must be a non-empty litellm model string, got {model!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigurationError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigurationError(f"max_retries must be an int >= 0, got {max_retries!r}")
        for name, value in (("backoff_base_s", backoff_base_s), ("backoff_max_s", backoff_max_s),
                            ("max_retry_after_s", max_retry_after_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigurationError(f"{name} must be a number >= 0, got {value!r}")
        if json_mode not in _JSON_MODES:
            raise ConfigurationError(f"json_mode must be one of {', '.join(_JSON_MODES)}, got {json_mode!r}")
        if "num_retries" in litellm_kwargs:  # litellm's retry option becomes ours
            max_retries = litellm_kwargs.pop("num_retries")
            if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
                raise ConfigurationError(f"num_retries must be an int >= 0, got {max_retries!r}")
        reserved = sorted(_RESERVED_KWARGS & litellm_kwargs.keys())
        if reserved:
            raise ConfigurationError(f"the judge sets these litellm arguments itself: {', '.join(reserved)}")
        for name, flag in (("check_model", check_model), ("through_acompletion", through_acompletion)):
            if not isinstance(flag, bool):
                raise ConfigurationError(f"{name} must be True or False, got {flag!r}")
        for name in sorted(litellm_kwargs):  # typos of common options fail now, without litellm
            meant = None if name.startswith(_PROVIDER_PREFIXES) else checks.option_typo(
                name, _OWN_OPTIONS)
            if meant is not None:
                raise ConfigurationError(f"unknown judge option {name!r} (did you mean {meant!r}?)")
        self.model = model
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff_base_s = float(backoff_base_s)
        self.backoff_max_s = float(backoff_max_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self.json_mode: JsonMode = json_mode
        self.check_model = check_model
        self.through_acompletion = through_acompletion
        check_model_string(model)
        self.litellm_kwargs = dict(litellm_kwargs)
        self._checked = False
        self._ready = False  # preflight passed
        self._provider: str | None = None
        self._custom_address = False
        self._route: DirectRoute | None = None  # set with _ready: how calls are sent
        self._sleep: Callable[[float], Any] = asyncio.sleep  # tests may record the waits

    def check(self) -> None:
        """Check the model and keyword arguments against litellm; ConfigurationError if wrong.

        Imports litellm (hence not done at construction: an agent whose judge runs in the
        scoring process never loads it). Runs once, before the judge's first call; the CLI and
        the gateway call it when they start.
        """
        if self._checked:
            return
        litellm = _import_litellm()
        provider: str | None = self.litellm_kwargs.get("custom_llm_provider")
        try:
            with quiet_litellm():  # no provider banner on stdout
                _, provider, _, dynamic_base = litellm.get_llm_provider(
                    self.model, custom_llm_provider=provider,
                    api_base=self.litellm_kwargs.get("api_base"))
        except Exception:  # noqa: BLE001 - litellm raises several types for an unknown provider
            prefix, _, rest = self.model.partition("/")
            providers = [str(getattr(p, "value", p)) for p in getattr(litellm, "provider_list", ())]
            close = difflib.get_close_matches(prefix, providers, n=1, cutoff=0.75) if rest else []
            hint = f" (did you mean {close[0] + '/' + rest!r}?)" if close else ""
            raise ConfigurationError(
                f"unknown judge model {self.model!r}{hint}: litellm cannot tell its provider; use "
                f"provider/model (e.g. openai/gpt-4o-mini) or {OFFLINE_MODEL}") from None
        known = _known_litellm_kwargs(litellm, self.model, provider)
        unknown = sorted(k for k in self.litellm_kwargs
                         if k not in known and not k.startswith(_PROVIDER_PREFIXES))
        if unknown:
            name = unknown[0]
            raise ConfigurationError(
                f"unknown judge option {name!r}{_did_you_mean(name, [*known, *_OWN_OPTIONS])}"
                + (f" (and {', '.join(map(repr, unknown[1:]))})" if unknown[1:] else "")
                + f"; the judge takes {', '.join(_OWN_OPTIONS)} and litellm's completion "
                "arguments; pass a provider parameter litellm does not list in extra_body={...}")
        self._provider = str(provider) if provider else None
        self._custom_address = checks.custom_address(self._provider or "", self.litellm_kwargs,
                                                     dynamic_base)
        self._checked = True

    def preflight(self) -> None:
        """`check()`, then what must hold before a first call: the model is one litellm knows
        (for providers with a fixed model list, unless served at an `api_base` of your own or
        `check_model=False`) and the provider's API key is set. ConfigurationError if not.

        The CLI, the gateway and `run_evals` call it before the first item; a judge's first
        call runs it too (a missing key then fails the call as a JudgeAuthenticationError).
        """
        problem = self._key_problem()
        if problem is not None:
            raise ConfigurationError(f"judge {self.model!r}: {problem}")

    def key_problem_without_litellm(self) -> str | None:
        """What `preflight` would say of a common provider's missing key, without importing
        litellm (for an agent whose judge runs in the scoring process); None when nothing is
        known to be wrong."""
        if self._ready or self.model == OFFLINE_MODEL:
            return None
        missing = checks.missing_key_without_litellm(self.model, self.litellm_kwargs, os.environ)
        return None if missing is None else f"judge {self.model!r}: {checks.key_message([missing])}"

    def _key_problem(self) -> str | None:
        """Check the model (ConfigurationError) and return what is wrong with the key, if any."""
        if self._ready:
            return None
        self.check()
        litellm = _import_litellm()
        provider = self._provider or ""
        if self.check_model and not self._custom_address:
            unknown, close = checks.unknown_model(litellm, self.model, provider)
            if unknown:
                hint = f" (did you mean {close!r}?)" if close else ""
                raise ConfigurationError(
                    f"unknown judge model {self.model!r}{hint}: litellm's model list for "
                    f"{provider} does not have it; if the provider serves it (a model newer "
                    f"than the installed litellm), pass check_model=False")
        missing = checks.missing_key_variables(litellm, self.model, provider, self.litellm_kwargs)
        if missing:
            return checks.key_message(missing)
        if not self.through_acompletion:
            with quiet_litellm():
                self._route = DirectRoute.prepare(litellm, self.model, self.litellm_kwargs)
        self._ready = True
        return None

    def __repr__(self) -> str:
        return f"LiteLLMJudge(model={self.model!r})"

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (to a scoring process) without its route, which holds litellm's objects:
        checked and prepared again where it is loaded, before its first call there."""
        return {**self.__dict__, "_route": None, "_ready": False}

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        problem = self._key_problem()
        spend = _Spend(self.model)
        if problem is not None:  # never sent: nothing to retry
            raise JudgeAuthenticationError(problem, step=request.step, model=self.model,
                                           usage=spend.usage(), prompt=request.prompt)
        litellm = _import_litellm()
        if self.json_mode != "prompt":
            raw: str | None = None
            try:
                response = await self._complete(litellm, request, request.prompt,
                                                 self._response_format(request), spend)
                raw = _reply_text(response)
                data = request.validate(parse_json_object(raw))
                return JudgeReply(data=data, raw=raw or "", usage=spend.usage(),
                                  prompt=request.prompt)
            except ValueError as exc:  # not JSON or wrong shape: fall back below
                logger.debug("judge %s step %s: native JSON reply invalid (%s); retrying with "
                             "the schema in the prompt", self.model, request.step, exc)
            except Exception as exc:  # a refusal is retried with the schema; others raise
                if _is_auth_failure(exc) or not _is_rejection(exc):
                    raise self._failure(request, exc, spend, request.prompt) from exc
                logger.debug("judge %s step %s: native JSON request refused (%s); retrying "
                             "with the schema in the prompt", self.model, request.step, exc)
        prompt = schema_instructions(request)
        try:
            response = await self._complete(litellm, request, prompt, None, spend)
        except Exception as exc:
            raise self._failure(request, exc, spend, prompt) from exc
        raw = _reply_text(response)
        try:
            data = request.validate(parse_json_object(raw))
        except ValueError as exc:
            raise JudgeStepError(
                f"the reply does not match the {request.schema_name} schema: {exc}",
                step=request.step, model=self.model, usage=spend.usage(), raw_reply=raw,
                prompt=prompt) from exc
        return JudgeReply(data=data, raw=raw or "", usage=spend.usage(), prompt=prompt)

    def _response_format(self, request: JudgeRequest) -> dict[str, Any]:
        if self.json_mode == "json_object":
            return {"type": "json_object"}
        return {"type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.schema,
                                "strict": True}}

    def _failure(self, request: JudgeRequest, exc: BaseException, spend: _Spend,
                 prompt: str) -> JudgeStepError:
        attempts = f"{spend.calls} attempt{'s' if spend.calls != 1 else ''}"
        connect = checks.connection_failure(exc, self.litellm_kwargs.get("api_base"),
                                            self._provider)
        if connect is not None and not (connect[1] == "connection failed"
                                        and _is_auth_failure(exc)):
            address, reason = connect
            return JudgeStepError(f"could not connect to the judge at {address} ({reason}; "
                                  f"gave up after {attempts})", step=request.step,
                                  model=self.model, usage=spend.usage(), retryable=True,
                                  prompt=prompt)
        if _is_auth_failure(exc):
            return JudgeAuthenticationError(
                "the API key is missing, invalid or refused (not retried): "  # a client-side
                + _describe(exc, status_shown=_status(exc) in (401, 403)),  # "500" is no answer
                step=request.step, model=self.model, usage=spend.usage(), prompt=prompt)
        transient = _is_transient(exc)
        detail = _describe(exc)
        if transient:
            detail += f" (gave up after {attempts})"
        return JudgeStepError(detail, step=request.step, model=self.model, usage=spend.usage(),
                              retryable=transient, prompt=prompt)

    async def _complete(self, litellm: Any, request: JudgeRequest, prompt: str,
                        response_format: dict[str, Any] | None, spend: _Spend) -> Any:
        """One chat completion, retried on transient failures with back-off."""
        formatted = {} if response_format is None else {"response_format": response_format}
        messages = [{"role": "system", "content": request.system},
                    {"role": "user", "content": prompt}]
        attempt = 0
        while True:
            spend.calls += 1
            try:
                with suppressed(), quiet_litellm():
                    call = (self._route.complete(messages, response_format, self.timeout)
                            if self._route is not None else
                            litellm.acompletion(model=self.model, messages=messages,
                                                timeout=self.timeout, num_retries=0,
                                                max_retries=0, **self.litellm_kwargs,
                                                **formatted))
                    response = await traced(self.model, request.step, asyncio.wait_for(
                        call, timeout=self.timeout + 5.0))  # in case the provider ignores it
            except Exception as exc:  # a transient failure is retried; others raise
                if (_is_auth_failure(exc) or not _is_transient(exc)
                        or attempt >= _retries_for(exc, self.max_retries)):
                    raise
                delay = self._delay(attempt, exc)
                logger.debug("judge %s step %s: %s; retry %d/%d in %.2fs", self.model,
                             request.step, _describe(exc), attempt + 1, self.max_retries, delay)
                attempt += 1
                await self._sleep(delay)
                continue
            spend.add_response(litellm, response)
            return response

    def _delay(self, attempt: int, exc: BaseException) -> float:
        """Retry-After when the server sent one (capped), else exponential back-off with jitter."""
        asked = retry_after_seconds(exc)
        if asked is not None:
            return min(asked, self.max_retry_after_s)
        ceiling = min(self.backoff_max_s, self.backoff_base_s * (2 ** attempt))
        return ceiling * random.uniform(0.5, 1.0)


def _reply_text(response: Any) -> str | None:
    try:
        return response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        return None

"""Judge calls through litellm's own HTTP handler, set up once per judge instead of per call.

`litellm.acompletion` spends most of a judge call's CPU on work done again on every call or
not needed by a judge: looking up the provider and mapping the parameters, building a logging
payload and queueing it for its success callbacks, pricing the reply while building it (and,
for a model it cannot price, a search of its price map and a diagnostic), and a hop through a
thread pool. For providers that litellm itself sends through its HTTP handler with an
OpenAI-compatible provider config (`openai`, `hosted_vllm`), `DirectRoute` does what that path
does, with litellm's parts: the provider config writes the request and reads the reply,
litellm's cached async HTTP client sends it, litellm's exception mapping names the failure
(the same exception types as `acompletion`), and the reply is priced once from its usage.

What it leaves out is litellm's callbacks: a judge call never reaches `litellm.callbacks` or
the success and failure callbacks (the judge has its own trace). Any other provider, a
litellm argument this route does not pass, or a litellm whose handler does not take these
arguments goes through `litellm.acompletion` as before; so does every call of a judge built
with `through_acompletion=True`.
"""

from __future__ import annotations

import copy
import datetime
import inspect
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("tracescore.scoring")

# Providers litellm sends through its HTTP handler with an OpenAI-compatible provider config.
PROVIDERS = frozenset({"openai", "hosted_vllm"})
# What `complete` passes litellm's HTTP handler (a litellm that takes other ones is not used).
_HANDLER_ARGUMENTS = frozenset({
    "model", "messages", "api_base", "custom_llm_provider", "model_response", "encoding",
    "logging_obj", "optional_params", "timeout", "litellm_params", "acompletion", "stream",
    "api_key", "headers", "client", "provider_config"})
# litellm arguments this route passes itself; every other one must be a provider parameter.
_ROUTE_ARGUMENTS = frozenset({"api_base", "api_key", "custom_llm_provider", "extra_headers",
                              "extra_body"})


@dataclass(frozen=True)
class DirectRoute:
    """One judge's calls through litellm's HTTP handler (`prepare` says whether it applies)."""

    model: str  # the provider's name of the model
    provider: str
    config: Any  # litellm's provider config
    api_base: str
    api_key: str | None = field(repr=False)  # secrets: never in a repr or a log line
    headers: Mapping[str, str] = field(repr=False)
    params: Mapping[str, Any] = field(repr=False)  # the provider's request parameters, mapped once
    _handler: Any = field(repr=False)
    _logging: Any = field(repr=False)
    _response: Any = field(repr=False)
    _mapped: Any = field(repr=False)

    @classmethod
    def prepare(cls, litellm: Any, model: str, kwargs: Mapping[str, Any]) -> DirectRoute | None:
        """The route for `model` with these litellm arguments, or None where it does not apply
        (the reason logged at debug level); never raises."""
        try:
            return cls._prepare(litellm, model, kwargs)
        except Exception as exc:  # noqa: BLE001 - another litellm layout: acompletion serves
            logger.debug("judge %s: calls go through litellm.acompletion (%s: %s)", model,
                         type(exc).__name__, exc)
            return None

    @classmethod
    def _prepare(cls, litellm: Any, model: str, kwargs: Mapping[str, Any]) -> DirectRoute | None:
        from litellm.litellm_core_utils.exception_mapping_utils import exception_type
        from litellm.litellm_core_utils.litellm_logging import Logging
        from litellm.main import base_llm_http_handler
        from litellm.types.utils import ModelResponse
        from litellm.utils import ProviderConfigManager, get_optional_params

        taken = inspect.signature(base_llm_http_handler.completion).parameters
        missing = sorted(_HANDLER_ARGUMENTS - taken.keys())
        if missing:
            _skip(model, f"litellm's HTTP handler takes no {missing[0]}")
            return None
        name, provider, dynamic_key, dynamic_base = litellm.get_llm_provider(
            model, custom_llm_provider=kwargs.get("custom_llm_provider"),
            api_base=kwargs.get("api_base"), api_key=kwargs.get("api_key"))
        provider = str(getattr(provider, "value", provider))
        if provider not in PROVIDERS:
            _skip(model, f"provider {provider} is not sent by litellm's HTTP handler")
            return None
        config: Any = ProviderConfigManager.get_provider_chat_config(
            model=name, provider=litellm.LlmProviders(provider))
        supported = set(litellm.get_supported_openai_params(model=name,
                                                            custom_llm_provider=provider) or ())
        other = sorted(k for k in kwargs if k not in _ROUTE_ARGUMENTS and k not in supported)
        if config is None or other:
            _skip(model, f"argument {other[0]} is litellm's own" if other
                  else "litellm has no provider config")
            return None
        api_key = kwargs.get("api_key") or dynamic_key
        api_base = kwargs.get("api_base") or dynamic_base
        if provider == "openai":  # where litellm reads them for OpenAI itself
            api_key = config.get_api_key(api_key)
            api_base = config.get_api_base(api_base)
        if not api_base:
            _skip(model, "no api_base")
            return None
        params = get_optional_params(
            model=name, custom_llm_provider=provider,
            **{k: v for k, v in kwargs.items() if k in supported and k not in _ROUTE_ARGUMENTS})
        if not params.get("stream"):  # acompletion leaves a false `stream` out of the request
            params.pop("stream", None)
        if kwargs.get("extra_body"):
            params["extra_body"] = {**(params.get("extra_body") or {}), **kwargs["extra_body"]}
        route = cls(model=name, provider=provider, config=config,
                    api_base=str(api_base), api_key=api_key,
                    headers=dict(kwargs.get("extra_headers") or {}), params=params,
                    _handler=base_llm_http_handler, _logging=Logging, _response=ModelResponse,
                    _mapped=exception_type)
        route._log_object([])  # a litellm whose logging object takes other arguments: not used
        return route

    def _log_object(self, messages: list[dict[str, Any]]) -> Any:
        return self._logging(model=self.model, messages=messages, stream=False,
                             call_type="acompletion", start_time=datetime.datetime.now(),
                             litellm_call_id=str(uuid.uuid4()), function_id="tracescore-judge")

    def request_params(self, response_format: Mapping[str, Any] | None) -> dict[str, Any]:
        """This call's parameters: the judge's, with the provider's mapping of the format."""
        params = copy.deepcopy(dict(self.params))  # litellm pops and edits them while sending
        if response_format is None:
            return params
        mapped: dict[str, Any] = self.config.map_openai_params(
            non_default_params={"response_format": dict(response_format)},
            optional_params=params, model=self.model, drop_params=False)
        return mapped

    async def complete(self, messages: list[dict[str, Any]],
                       response_format: Mapping[str, Any] | None, timeout: float) -> Any:
        """One chat completion; litellm's exception for a failure, as `acompletion` raises."""
        try:
            return await self._handler.completion(
                model=self.model, messages=messages, api_base=self.api_base,
                custom_llm_provider=self.provider, model_response=self._response(),
                encoding=None, logging_obj=self._log_object(messages),
                optional_params=self.request_params(response_format), timeout=timeout,
                litellm_params={"custom_llm_provider": self.provider}, acompletion=True,
                stream=False, api_key=self.api_key, headers=dict(self.headers), client=None,
                provider_config=self.config)
        except Exception as exc:
            try:
                mapped = self._mapped(model=self.model, original_exception=exc,
                                      custom_llm_provider=self.provider)
            except Exception as raised:  # noqa: BLE001 - litellm raises the mapped exception
                mapped = raised
            if mapped is exc or not isinstance(mapped, Exception):
                raise
            raise mapped from exc


def _skip(model: str, why: str) -> None:
    logger.debug("judge %s: calls go through litellm.acompletion (%s)", model, why)

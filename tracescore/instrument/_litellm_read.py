"""What a litellm call reads as on its span: the model and `gen_ai.provider.name`, the server,
the response cost, the messages in the GenAI shape ({role, parts})."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.trace import Span

from tracescore import _semconv as sc
from tracescore._content import cap_name

# litellm provider name -> gen_ai.provider.name (semconv well-known values); others pass through.
_PROVIDERS = {
    "azure": "azure.ai.openai", "azure_ai": "azure.ai.inference", "bedrock": "aws.bedrock",
    "vertex_ai": "gcp.vertex_ai", "gemini": "gcp.gemini", "mistral": "mistral_ai", "xai": "x_ai",
    "watsonx": "ibm.watsonx.ai",
}


def _get(obj: Any, key: str, default: Any = None) -> Any:
    """Field of a dict or an object (litellm returns pydantic-like objects)."""
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)

def _is_stream(result: Any) -> bool:
    return type(result).__name__ == "CustomStreamWrapper" or (
        hasattr(result, "__next__") or hasattr(result, "__anext__"))


def _model_and_provider(model: str, kwargs: dict) -> tuple[str, str | None]:
    """(model name without the provider prefix, gen_ai.provider.name)."""
    provider: str | None = kwargs.get("custom_llm_provider")
    name = model
    try:
        import litellm

        from tracescore._litellm_support import quiet_litellm

        with quiet_litellm():  # an unknown model: litellm's own call prints its banner, not us
            name, provider, _, _ = litellm.get_llm_provider(
                model, custom_llm_provider=provider, api_base=kwargs.get("api_base"))
    except Exception:  # noqa: BLE001 - unknown to litellm: fall back to the "provider/model" prefix
        if "/" in model and not provider:
            provider, name = model.split("/", 1)
    return name or model, _PROVIDERS.get(provider or "", provider)


def _server(api_base: Any) -> dict[str, Any]:
    if not isinstance(api_base, str) or not api_base:
        return {}
    try:
        parts = urlsplit(api_base)
        out: dict[str, Any] = {}
        if parts.hostname:
            out[sc.SERVER_ADDRESS] = parts.hostname
        if parts.port:
            out[sc.SERVER_PORT] = parts.port
        return out
    except ValueError:
        return {}


def _response_cost(response: Any, provider: str | None = None) -> float | None:
    hidden = getattr(response, "_hidden_params", None)
    cost = hidden.get("response_cost") if isinstance(hidden, Mapping) else None
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        return float(cost)
    if isinstance(response, Mapping) or response is None:
        return None
    try:
        import litellm

        from tracescore._litellm_support import quiet_litellm

        # with the call's provider, and quiet: litellm prints a "Provider List" banner on stdout
        # when it has to guess the provider of a model it has no price for (a local server's)
        with quiet_litellm():
            return float(litellm.completion_cost(completion_response=response,
                                                 custom_llm_provider=provider))
    except Exception:  # noqa: BLE001 - litellm does not know this model's price
        return None


def _set_if(span: Span, key: str, value: Any) -> None:
    if value is not None and value != "":
        span.set_attribute(key, cap_name(value) if isinstance(value, str) else value)


def _input_messages(messages: Any) -> list[dict[str, Any]]:
    """OpenAI-style chat messages in the GenAI semconv shape ({role, parts})."""
    if isinstance(messages, str):
        return [{"role": "user", "parts": [{"type": "text", "content": messages}]}]
    out = []
    for message in list(messages or []):
        role = _get(message, "role") or "user"
        parts = _content_parts(_get(message, "content"))
        if role == "tool":
            parts = [{"type": "tool_call_response", "id": _get(message, "tool_call_id"),
                      "response": _get(message, "content")}]
        parts += _tool_call_parts(_get(message, "tool_calls"))
        out.append({"role": role, "parts": parts})
    return out


def _output_message(message: Any, finish_reason: Any) -> dict[str, Any]:
    parts = _content_parts(_get(message, "content")) + _tool_call_parts(_get(message, "tool_calls"))
    return {"role": _get(message, "role") or "assistant", "parts": parts,
            "finish_reason": str(finish_reason) if finish_reason else None}


def _content_parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts = []
    for part in content if isinstance(content, list) else [content]:
        kind = _get(part, "type")
        if kind == "text":
            parts.append({"type": "text", "content": _get(part, "text")})
        else:
            parts.append({"type": str(kind or "unknown"), "content": part})
    return parts


def _tool_call_parts(tool_calls: Any) -> list[dict[str, Any]]:
    parts = []
    for tool_call in tool_calls or []:
        function = _get(tool_call, "function")
        parts.append({"type": "tool_call", "id": _get(tool_call, "id"), "name": _get(function, "name"),
                      "arguments": _get(function, "arguments")})
    return parts

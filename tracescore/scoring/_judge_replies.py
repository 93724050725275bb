"""How a judge call's reply and errors read: the JSON object in a reply, the fallback prompt
that spells the schema out, which transport errors are worth retrying (and how often), an
authentication failure, a rejected request, Retry-After."""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import time
from typing import Any

from tracescore.scoring import _judge_checks as checks
from tracescore.scoring._judge_api import (
    JudgeRequest,
)

# --- reply parsing ---------------------------------------------------------------------------
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


def parse_json_object(raw: str | None) -> dict[str, Any]:
    """The JSON object in a reply (code fences and text around the object tolerated)."""
    if raw is None or not raw.strip():
        raise ValueError("the reply is empty")
    text = _FENCE.sub("", raw.strip())
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise ValueError("the reply contains no JSON object") from None
        try:
            value = json.loads(text[start:end + 1])
        except json.JSONDecodeError as exc:
            raise ValueError(f"the reply is not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        # a reply of the wrong shape is bad data: callers catch ValueError to retry or fall back
        raise ValueError(  # noqa: TRY004
            f"the reply is JSON {type(value).__name__}, not an object"
        )
    return value


def schema_instructions(request: JudgeRequest) -> str:
    """The fallback prompt: the step prompt plus the reply schema spelled out."""
    schema = json.dumps(request.schema, indent=2)
    return (
        f"{request.prompt}\n\n"
        "Your reply must be one JSON object and nothing else: no code fences, no text before "
        f"or after it. The object must validate against this JSON Schema ({request.schema_name}):"
        f"\n{schema}"
    )


# --- transport errors ------------------------------------------------------------------------
def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _is_transient(exc: BaseException) -> bool:
    """Timeouts, connection failures, 408/409/429 and 5xx are worth retrying."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    import openai  # litellm's exceptions derive from openai's; litellm imports it anyway

    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    status = _status(exc)
    return status is not None and (status in (408, 409, 429) or status >= 500)


# How providers (through litellm) word a missing or refused key when the status says otherwise
# (OpenAI's client: a 500 "Missing credentials"; Gemini: a connection error "Missing ... API key").
_AUTH_TEXT = re.compile(r"missing credentials|api[ _-]?key|no key is set|unauthori[sz]ed|"
                        r"authenticat|invalid[ _-]?(?:x-)?key", re.IGNORECASE)


def _is_auth_failure(exc: BaseException) -> bool:
    """A missing, invalid or refused API key (401/403, or a provider's words for it)."""
    status = _status(exc)
    if status in (401, 403):
        return True
    if status in (408, 409, 429) or isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return False
    try:
        return bool(_AUTH_TEXT.search(str(exc)[:2000]))
    except Exception:  # noqa: BLE001 - a broken __str__ is not an auth failure
        return False


def _is_rejection(exc: BaseException) -> bool:
    """A 400/422: the request was refused, possibly because of `response_format`."""
    return _status(exc) in (400, 422)


def retry_after_seconds(exc: BaseException) -> float | None:
    """Seconds asked for by a Retry-After (or retry-after-ms) header on the error, if any.

    The headers are those of the error or of the first error it was raised from that has
    some (litellm's mapped exceptions keep the provider's headers on their cause)."""
    headers: Any = None
    link: BaseException | None = exc
    for _ in range(4):
        if link is None or headers:
            break
        response = getattr(link, "response", None)
        headers = getattr(response, "headers", None) if response is not None else None
        headers = headers or getattr(link, "headers", None)
        link = link.__cause__
    if not headers:
        return None
    if isinstance(headers, dict):  # a plain dict is case-sensitive; httpx.Headers is not
        headers = {str(k).lower(): v for k, v in headers.items()}
    try:
        value_ms = headers.get("retry-after-ms")
        if value_ms is not None:
            return max(0.0, float(value_ms) / 1000.0)
        value = headers.get("retry-after")
    except (AttributeError, TypeError, ValueError):
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _describe(exc: BaseException, *, status_shown: bool = True) -> str:
    status = _status(exc) if status_shown else None
    text = _error_body_message(str(exc).strip())
    text = text.splitlines()[0] if text else ""
    name = type(exc).__name__
    prefix = f"{name} (HTTP {status})" if status else name
    return f"{prefix}: {text[:300]}" if text else prefix


def _error_body_message(text: str) -> str:
    """`text` with a provider's JSON error body (`{"error": {"message": ...}}`, as litellm's
    HTTP handler passes it on) replaced by its message."""
    start = text.find("{")
    if start < 0:
        return text
    try:
        body = json.loads(text[start:])
    except ValueError:
        return text
    error = body.get("error", body) if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return text[:start] + message if isinstance(message, str) and message.strip() else text


def _retries_for(exc: BaseException, max_retries: int) -> int:
    """Retries worth making after `exc`: none when the host name does not resolve, one when
    nothing listens at the address (a judge restarting), else `max_retries`."""
    if checks.is_unresolved(exc):
        return 0
    if checks.is_refused(exc):
        return min(1, max_retries)
    return max_retries

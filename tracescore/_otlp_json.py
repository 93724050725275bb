"""OTLP/JSON (hex ids, as OTLP specifies and file exporters write) to and from protobuf messages."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from tracescore._exceptions import OtlpJsonError

# OTLP/JSON writes ids as hex, while protobuf's JSON mapping expects base64 for bytes fields.
_ID_KEYS = {
    "traceId": 32,
    "spanId": 16,
    "parentSpanId": 16,
    "trace_id": 32,
    "span_id": 16,
    "parent_span_id": 16,
}


def _ids_to_base64(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            width = _ID_KEYS.get(key)
            if width and isinstance(value, str) and re.fullmatch(f"[0-9a-fA-F]{{{width}}}", value):
                value = base64.b64encode(bytes.fromhex(value)).decode()
            out[key] = _ids_to_base64(value)
        return out
    if isinstance(node, list):
        return [_ids_to_base64(item) for item in node]
    return node


def parse_otlp_json(data: str | bytes | dict[str, Any], message: Message) -> Message:
    """Fill `message` from OTLP/JSON (hex or base64 ids) and return it; `OtlpJsonError` when
    the text is not JSON, not an object, nested too deeply or has a value of the wrong type."""
    try:
        tree = json.loads(data) if isinstance(data, (str, bytes)) else data
        if not isinstance(tree, dict):
            raise OtlpJsonError(f"expected a JSON object, got {_json_type(tree)}")
        json_format.ParseDict(_ids_to_base64(tree), message, ignore_unknown_fields=True)
    except UnicodeDecodeError as exc:
        raise OtlpJsonError(f"not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise OtlpJsonError(f"not JSON: {exc}") from None
    except RecursionError:
        raise OtlpJsonError("nested too deeply") from None
    except json_format.ParseError as exc:
        raise OtlpJsonError(" ".join(str(exc).split())) from None
    except (TypeError, AttributeError) as exc:  # a value of a type ParseDict does not expect
        raise OtlpJsonError(f"wrong type of value: {exc}") from None
    return message


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def to_otlp_json(request: Message) -> str:
    """An ExportTraceServiceRequest in OTLP JSON form (camelCase keys, hex ids, integer enums)."""
    data = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resource_spans in data.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                _hex_ids(span)
                for link in span.get("links", ()):
                    _hex_ids(link)
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def _hex_ids(obj: dict[str, Any]) -> None:
    for key in ("traceId", "spanId", "parentSpanId"):
        if obj.get(key):
            obj[key] = base64.b64decode(obj[key]).hex()

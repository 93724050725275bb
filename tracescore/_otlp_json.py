"""OTLP/JSON (hex ids, as OTLP specifies and file exporters write) into protobuf messages."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

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
    """Fill `message` from OTLP/JSON (hex or base64 ids) and return it."""
    tree = json.loads(data) if isinstance(data, (str, bytes)) else data
    json_format.ParseDict(_ids_to_base64(tree), message, ignore_unknown_fields=True)
    return message

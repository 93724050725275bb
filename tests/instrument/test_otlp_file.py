"""Reading spans back from an OTLP JSON-lines file: attribute values in both spellings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracescore.cli._otlp import read_spans


def _line(attributes: list[dict]) -> str:
    span = {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "2", "name": "invoke_agent a",
            "startTimeUnixNano": "1", "endTimeUnixNano": "2", "attributes": attributes}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


@pytest.mark.parametrize("key", ["stringValue", "string_value", "intValue", "int_value",
                                 "doubleValue", "double_value", "boolValue", "bool_value"])
def test_null_value_reads_as_none_not_the_text_none(tmp_path: Path, key: str) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_text(_line([{"key": "x", "value": {key: None}}]) + "\n")
    (span,) = read_spans(path)
    assert span.attributes["x"] is None


@pytest.mark.parametrize(("value", "expected"), [
    ({"stringValue": "hi"}, "hi"), ({"string_value": ""}, ""), ({"intValue": "7"}, 7),
    ({"double_value": 0.5}, 0.5), ({"boolValue": False}, False),
    ({"arrayValue": {"values": [{"intValue": 1}, {"stringValue": None}]}}, [1, None]),
])
def test_values_convert_in_either_spelling(tmp_path: Path, value: dict, expected: object) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_text(_line([{"key": "x", "value": value}]) + "\n")
    (span,) = read_spans(path)
    assert span.attributes["x"] == expected

"""The one JSON Lines reader behind dataset files and span files: values with their line numbers,
blank lines skipped, a bad line named by its number."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracescore._datasets import DatasetError
from tracescore._jsonl import json_lines

_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)
_blank = st.sampled_from(["", " ", "\t"])


@given(st.lists(st.one_of(_values.map(lambda v: ("value", v)), _blank.map(lambda b: ("blank", b))),
                max_size=12))
def test_values_come_back_with_their_line_numbers(lines: list[tuple[str, object]]) -> None:
    text = "\n".join(json.dumps(v) if kind == "value" else str(v) for kind, v in lines)
    expected = [(n, v) for n, (kind, v) in enumerate(lines, start=1) if kind == "value"]
    assert list(json_lines(text, "f.jsonl")) == expected


@given(st.lists(_values, max_size=6), st.integers(min_value=0, max_value=6),
       st.sampled_from(["{", "nope", "[1,", "{'a': 1}"]))
def test_a_bad_line_is_named_by_its_number(values: list[object], at: int, bad: str) -> None:
    lines = [json.dumps(v) for v in values]
    at = min(at, len(lines))
    lines.insert(at, bad)
    for error in (ValueError, DatasetError):
        with pytest.raises(error, match=rf"^f\.jsonl, line {at + 1}: invalid JSON: "):
            list(json_lines("\n".join(lines), "f.jsonl", error=error))

"""What the commands print counts in words: one run, two runs (never "1 runs")."""

from __future__ import annotations

import re
from pathlib import Path

from _gateway_helpers import agent_trace, sender
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from tracescore._exporters import OTLPJsonFileExporter
from tracescore._words import counted
from tracescore.cli import main

ONE = re.compile(r"(?<![\d.,])1 (\w+s)\b")  # "1 spans", "1 runs", ...; not "11 runs", "0.1 s"


@given(st.integers(-10**6, 10**6), st.sampled_from(["run", "span", "judge call", "score"]))
def test_counted(count: int, noun: str) -> None:
    text = counted(count, noun)
    assert text == (f"{count} {noun}" if abs(count) == 1 else f"{count} {noun}s")


def test_a_rescore_of_one_span_says_one(tmp_path: Path) -> None:
    stored = tmp_path / "one.jsonl"
    with sender(OTLPJsonFileExporter(stored)) as tracer:
        agent_trace(tracer, plain_children=0, name="geo")
    for args in (["-o", str(tmp_path / "out.jsonl")], ["--dry-run"]):
        result = CliRunner().invoke(main, ["rescore", str(stored), "-s", "similarity", *args])
        assert result.exit_code == 0, result.output
        assert "read 1 span," in result.output and "1 agent span offered" in result.output
        assert ONE.findall(result.output) == [], result.output

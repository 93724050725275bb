"""`tracescore rescore` with run- and conversation-scope scorers over files the library wrote:
each run scored once at its root agent span, each conversation once with its turns in time
order, at the end of the input (no wall-clock quiet period)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import tracescore
from tracescore.cli import main
from tracescore.testing import ReceivedSpan, StubLLMServer, spans_from_otlp_json

EVAL = "gen_ai.evaluation.result"


def _spans(path: Path) -> list[ReceivedSpan]:
    return [span for line in path.read_text().splitlines() if line.strip()
            for span in spans_from_otlp_json(line)]


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, ["rescore", *args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """4 runs of a "planner" agent: two tools and a sub-agent each."""
    path = tmp_path / "runs.jsonl"

    @tracescore.tool
    def search_flights(city: str) -> str:
        return f"flights to {city}"

    @tracescore.tool
    def book_flight(flight: str) -> str:
        return f"booked {flight}"

    @tracescore.agent(name="helper")
    def helper(question: str) -> str:
        return f"notes on {question}"

    @tracescore.agent(name="planner")
    def planner(city: str) -> str:
        helper(city)
        return book_flight(search_flights(city))

    handle = tracescore.configure(exporter="file", file_path=str(path))
    for city in ("Paris", "Rome", "Oslo", "Lima"):
        planner(city)
    handle.shutdown()
    return path


def _trajectory_config(tmp_path: Path) -> Path:
    config = tmp_path / "runs.yaml"
    config.write_text(
        "scoring:\n  scorers:\n    - scorer: trajectory-accuracy\n"
        "      options: {expected_trajectory: [search_flights, book_flight]}\n")
    return config


def test_each_run_is_scored_once_at_its_root_with_all_its_steps(runs: Path,
                                                                tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    started = time.monotonic()
    line = _run(str(runs), "--config", str(_trajectory_config(tmp_path)), "-o", str(out))
    assert time.monotonic() - started < 4  # no 5 s quiet period per run
    scored = [s for s in _spans(out) if s.events_named(EVAL)]
    assert sorted(s.name for s in scored) == ["invoke_agent planner"] * 4
    assert len({s.trace_id for s in scored}) == 4
    for span in scored:
        (result,) = span.events_named(EVAL)
        assert result.attributes["gen_ai.evaluation.score.value"] == 1.0  # both tools seen
        assert "tracescore.run.partial" not in result.attributes  # a file holds whole runs
    assert "4 runs scored" in line

    dry = _run(str(runs), "--config", str(_trajectory_config(tmp_path)), "--dry-run")
    assert "4 scorer runs would be made" in dry and "; 4 runs would be scored" in dry
    again = _run(str(out), "--config", str(_trajectory_config(tmp_path)), "-o",
                 str(tmp_path / "again.jsonl"))
    assert "0 runs scored" in again and "4 skipped" in again


@pytest.fixture
def talks(tmp_path: Path) -> Path:
    """2 conversations of 3 turns each (one trace per turn), interleaved, lines reversed."""
    path = tmp_path / "talks.jsonl"

    @tracescore.agent(name="support", conversation_id=lambda question: question.split(":")[0])
    def support(question: str) -> str:
        return f"answer to {question}"

    handle = tracescore.configure(exporter="file", file_path=str(path))
    for turn in range(3):
        for talk in ("alpha", "beta"):
            support(f"{talk}: question {turn}")
            time.sleep(0.002)
    handle.shutdown()
    _one_span_a_line(path, path, reverse=True)
    return path


def _one_span_a_line(source: Path, target: Path, *, reverse: bool = False,
                     leave_out: str | None = None) -> None:
    """Rewrite an OTLP JSON-lines file one span a line (last span first with `reverse`),
    without the spans whose JSON holds `leave_out`."""
    lines: list[str] = []
    for line in source.read_text().splitlines():
        request = json.loads(line)
        for rs in request["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    if leave_out is None or leave_out not in json.dumps(span):
                        lines.append(json.dumps({"resourceSpans": [
                            {**rs, "scopeSpans": [{**ss, "spans": [span]}]}]}))
    target.write_text("\n".join(reversed(lines) if reverse else lines) + "\n")


def _talks_config(tmp_path: Path, base_url: str) -> Path:
    config = tmp_path / "talks.yaml"
    config.write_text(
        "scoring:\n  scorers:\n    - scorer: multi-turn-judge\n"
        "      options: {criterion: The user got an answer., model: openai/judge-stub, "
        f"api_base: '{base_url}', api_key: sk-test}}\n")
    return config


@pytest.fixture
def stub() -> Iterator[StubLLMServer]:
    with StubLLMServer() as running:
        running.default_reply = {"satisfied": True, "reasoning": "answered"}
        yield running


def test_each_conversation_is_scored_once_with_its_turns_in_time_order(
        talks: Path, tmp_path: Path, stub: StubLLMServer) -> None:
    config = _talks_config(tmp_path, stub.base_url)
    out = tmp_path / "out.jsonl"
    line = _run(str(talks), "--config", str(config), "-o", str(out))
    prompts = [str(request) for request in stub.requests]
    assert len(prompts) == 2
    for prompt in prompts:  # the file has the last turn first: the order is the spans' times
        talk = "alpha" if "alpha: question" in prompt else "beta"
        places = [prompt.index(f"{talk}: question {turn}") for turn in range(3)]
        assert places == sorted(places)
    turns = {s.span_id: s for s in _spans(talks)}
    carriers = [s for s in _spans(out) if s.name.startswith("evaluation ")]
    assert len(carriers) == 2, line
    for carrier in carriers:
        linked = [turns[link.span_id] for link in carrier.links]
        assert len({s.span_id for s in linked}) == 3
        assert len({str(s.attributes.get("gen_ai.conversation.id")) for s in linked}) == 1
        last = max(linked, key=lambda s: s.start_time_unix_nano)
        assert carrier.parent_span_id == last.span_id  # in the last turn's trace
        assert carrier.attributes["tracescore.conversation.turns"] == 3
    assert "2 conversations scored" in line
    dry = _run(str(talks), "--config", str(config), "--dry-run")
    assert "2 scorer runs would be made" in dry and "; 2 conversations would be scored" in dry


def test_a_conversation_scored_over_the_same_turns_is_skipped(
        talks: Path, tmp_path: Path, stub: StubLLMServer) -> None:
    config = _talks_config(tmp_path, stub.base_url)
    partial, out = tmp_path / "partial.jsonl", tmp_path / "out.jsonl"
    _one_span_a_line(talks, partial, leave_out="beta: question 2")  # beta's last turn not yet
    _run(str(partial), "--config", str(config), "-o", str(out))
    assert len(stub.requests) == 2

    both = _run(str(out), "--config", str(config), "-o", str(tmp_path / "again.jsonl"))
    assert "0 conversations scored" in both and "2 skipped" in both
    assert len(stub.requests) == 2
    # with beta's last turn: alpha's turns are the same (skipped), beta has a new version
    grown = _run(str(out), str(talks), "--config", str(config), "-o", str(tmp_path / "b.jsonl"))
    assert "1 conversation scored" in grown and "1 skipped" in grown
    assert "beta: question 2" in str(stub.requests[-1])
    forced = _run(str(out), "--config", str(config), "-o", str(tmp_path / "c.jsonl"), "--force")
    assert "2 conversations scored" in forced and "2 re-scored" in forced
